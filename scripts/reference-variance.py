#!/usr/bin/env python3
# Prints the golden values of the variance decomposition's tests
# (crates/report/src/variance_reference.rs): a grouped data set with known framework, model,
# interaction and scenario effects, and statsmodels' deviance and model degrees of freedom for
# each model the decomposition fits. Needs numpy, pandas and statsmodels (0.15.0 made the
# checked-in values):  python3 scripts/reference-variance.py > crates/report/src/variance_reference.rs
import numpy as np, pandas as pd, statsmodels, statsmodels.formula.api as smf, statsmodels.api as sm
rng = np.random.default_rng(20261129)
rows = []
feff = [-0.8, 0.1, 0.9]; meff = [-0.3, 0.3]; inter = [[0.0, 0.25], [0.0, -0.2], [0.0, 0.1]]
seff = rng.normal(0, 0.6, 8)
for f in range(3):
    for m in range(2):
        for s in range(8):
            for v in range(2):
                eta = -0.4 + feff[f] + meff[m] + inter[f][m] + seff[s] + 0.5 * v
                p = 1 / (1 + np.exp(-eta))
                n = 6
                k = int(rng.binomial(n, p))
                rows.append((f, m, s, v, k, n))
d = pd.DataFrame(rows, columns=["f", "m", "s", "v", "k", "n"])
d["nk"] = d.n - d.k
assert d.groupby("s").k.sum().between(1, d.groupby("s").n.sum().max() - 1).all()
terms = {"F": "C(f)", "M": "C(m)", "I": "C(f):C(m)", "S": "C(s)"}
sets = [(), ("F",), ("M",), ("S",), ("F", "M"), ("F", "S"), ("M", "S"), ("F", "M", "S"), ("F", "M", "I"), ("F", "M", "I", "S")]
print("// Golden values for the variance decomposition's fits, printed by scripts/reference-variance.py.")
print("// statsmodels %s: GLM(Binomial, logit), [k, n-k] ~ C(v) + terms" % statsmodels.__version__)
print("const VARIANCE_GROUPS: &[(usize, usize, usize, usize, u32, u32)] = &[")
for r in rows: print("    (%d, %d, %d, %d, %d, %d)," % r)
print("];")
print("// (terms: F framework, M model, I interaction, S scenario; deviance; model df)")
print("const VARIANCE_FITS: &[(&str, f64, f64)] = &[")
for st in sets:
    rhs = " + ".join(["C(v)"] + [terms[t] for t in st])
    fit = smf.glm("k + nk ~ " + rhs, data=d, family=sm.families.Binomial()).fit(tol=1e-12)
    print("    (\"%s\", %r, %r)," % ("".join(st), float(fit.deviance), float(fit.df_model)))
print("];")
