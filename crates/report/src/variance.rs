//! What explains the spread of overeager rates: a decomposition of a logistic model's deviance
//! over framework, model, their interaction and scenario.
//!
//! The runs are fitted with logistic regressions (maximum likelihood, iteratively reweighted
//! least squares) of being overeager on every hierarchical subset of the four terms, each with
//! the prompt variant as a covariate (it is the ablation, not a source of spread to explain).
//! A term's share is the deviance it removes beyond what its parameters would remove by chance
//! (the drop less its degrees of freedom, the mean drop of a term with no effect, as adjusted
//! R² and ω² correct for overfitting), averaged over every order in which the terms can enter
//! the model with the interaction after both main effects (a Shapley, or LMG, average: the
//! shares do not depend on an order chosen by hand). Shares are parts of the variant-only
//! model's deviance, the residual what is left of it; a term with no effect has a share near
//! zero, either side of it. The
//! intervals are percentiles of the same decomposition over a bootstrap of scenarios (the
//! scenarios are the sample the conclusions generalise over), seeded, so a report is
//! reproducible.
//!
//! Scenario effects are fixed effects absorbed block-wise (each scenario's intercept is solved
//! apart from the few framework and model parameters), so a set of hundreds of scenarios costs
//! little more than a dozen.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
pub use overeager_wire::report::{Decomposition, Share, Term};

/// One group of runs: framework, model, scenario and variant indices, with `k` overeager runs
/// of `n`. `k` may be fractional (expected counts, for checking against known rates).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Group {
    pub framework: usize,
    pub model: usize,
    pub scenario: usize,
    pub variant: usize,
    pub k: f64,
    pub n: f64,
}

/// Deviance (−2 × log-likelihood) of the logistic model with `terms` (a set of [`Term`] bits)
/// plus an intercept and the variant, at its maximum, and its number of free parameters.
pub fn deviance(groups: &[Group], terms: u8) -> (f64, usize) {
    Fit::new(groups, terms).run()
}

/// The decomposition of `groups`, with intervals from `resamples` bootstrap draws of the
/// scenarios (seeded by `seed`) at `confidence`. `None` without at least two scenarios and
/// some runs both overeager and not.
pub fn decompose(groups: &[Group], resamples: usize, confidence: f64, seed: u64) -> Option<Decomposition> {
    let runs: f64 = groups.iter().map(|g| g.n).sum();
    let over: f64 = groups.iter().map(|g| g.k).sum();
    let scenarios = groups.iter().map(|g| g.scenario).max()? + 1;
    if scenarios < 2 || over <= 0.0 || over >= runs {
        return None;
    }
    let terms = present(groups);
    let (point, null, full) = shapley(groups, &terms);
    let residual = 1.0 - point.iter().sum::<f64>();
    // Bootstrap: scenarios drawn with replacement, each draw a scenario of its own.
    let mut by_scenario: Vec<Vec<Group>> = vec![Vec::new(); scenarios];
    for g in groups {
        by_scenario[g.scenario].push(*g);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut draws: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples); terms.len()];
    for _ in 0..resamples {
        let mut sample = Vec::with_capacity(groups.len());
        for s in 0..scenarios {
            let pick = rng.random_range(0..scenarios);
            sample.extend(by_scenario[pick].iter().map(|g| Group { scenario: s, ..*g }));
        }
        let (shares, _, _) = shapley(&sample, &terms);
        for (d, s) in draws.iter_mut().zip(shares) {
            d.push(s);
        }
    }
    let alpha = (1.0 - confidence) / 2.0;
    let shares = terms
        .iter()
        .zip(point)
        .zip(draws)
        .map(|((&term, share), mut d)| {
            d.sort_by(f64::total_cmp);
            let q = |p: f64| if d.is_empty() { share } else { overeager_core::stats::percentile(&d, p) };
            Share { term, share, lo: q(alpha), hi: q(1.0 - alpha) }
        })
        .collect();
    Some(Decomposition { shares, residual, null_deviance: null, full_deviance: full, runs, scenarios, resamples, confidence })
}

/// The terms with more than one level in the data (the interaction only with both factors).
fn present(groups: &[Group]) -> Vec<Term> {
    let levels = |f: fn(&Group) -> usize| groups.iter().map(f).collect::<std::collections::BTreeSet<_>>().len();
    let (fw_levels, md_levels) = (levels(|g| g.framework), levels(|g| g.model));
    let (fw, md) = (fw_levels > 1, md_levels > 1);
    let cells = groups.iter().map(|g| (g.framework, g.model)).collect::<std::collections::BTreeSet<_>>().len();
    // The interaction has parameters only beyond what the two main effects give the cells.
    let interaction = fw && md && cells > fw_levels + md_levels - 1;
    Term::ALL
        .into_iter()
        .filter(|t| match t {
            Term::Framework => fw,
            Term::Model => md,
            Term::Interaction => interaction,
            Term::Scenario => levels(|g| g.scenario) > 1,
        })
        .collect()
}

/// Every order of `terms` with the interaction after both main effects.
fn orders(terms: &[Term]) -> Vec<Vec<Term>> {
    fn permute(rest: &[Term], prefix: &mut Vec<Term>, out: &mut Vec<Vec<Term>>) {
        if rest.is_empty() {
            out.push(prefix.clone());
            return;
        }
        for (i, &t) in rest.iter().enumerate() {
            if t == Term::Interaction && !(prefix.contains(&Term::Framework) && prefix.contains(&Term::Model)) {
                continue;
            }
            let mut left = rest.to_vec();
            left.remove(i);
            prefix.push(t);
            permute(&left, prefix, out);
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    permute(terms, &mut Vec::new(), &mut out);
    out
}

/// Each term's Shapley share of the variant-only deviance (each drop less its added degrees of
/// freedom), that deviance, and the full model's.
fn shapley(groups: &[Group], terms: &[Term]) -> (Vec<f64>, f64, f64) {
    let mut memo: BTreeMap<u8, (f64, usize)> = BTreeMap::new();
    let mut dev = |set: u8| *memo.entry(set).or_insert_with(|| deviance(groups, set));
    let (null, null_df) = dev(0);
    let all: u8 = terms.iter().map(|t| t.bit()).fold(0, |a, b| a | b);
    let (full, _) = dev(all);
    let orders = orders(terms);
    let mut sums = vec![0.0; terms.len()];
    for order in &orders {
        let mut set = 0u8;
        let (mut before, mut df_before) = (null, null_df);
        for t in order {
            set |= t.bit();
            let (after, df_after) = dev(set);
            let i = terms.iter().position(|x| x == t).expect("a term of the order");
            sums[i] += before - after - (df_after as f64 - df_before as f64);
            (before, df_before) = (after, df_after);
        }
    }
    let shares = sums.into_iter().map(|s| if null > 0.0 { s / orders.len() as f64 / null } else { 0.0 }).collect();
    (shares, null, full)
}

/// A logistic fit by iteratively reweighted least squares. Dense parameters: intercept (when
/// no scenario effects), variants beyond the first, and framework / model / cell indicators;
/// scenario intercepts are absorbed (solved per scenario from the dense ones).
struct Fit<'a> {
    groups: &'a [Group],
    /// Dense design row of each group (indices of the columns that are 1).
    rows: Vec<Vec<usize>>,
    p: usize,
    scenarios: Option<usize>,
}

impl<'a> Fit<'a> {
    fn new(groups: &'a [Group], terms: u8) -> Fit<'a> {
        let has = |t: Term| terms & t.bit() != 0;
        let index = |f: fn(&Group) -> usize| {
            let levels: std::collections::BTreeSet<usize> = groups.iter().map(f).collect();
            levels.into_iter().enumerate().map(|(i, l)| (l, i)).collect::<BTreeMap<usize, usize>>()
        };
        let (fi, mi, vi) = (index(|g| g.framework), index(|g| g.model), index(|g| g.variant));
        let cells = index(|g| g.framework * 1_000_000 + g.model);
        let scenarios = has(Term::Scenario).then(|| groups.iter().map(|g| g.scenario).max().map_or(0, |m| m + 1));
        let mut p = 0;
        let mut col = |n: usize| {
            let start = p;
            p += n;
            start
        };
        // Treatment coding: the first level of each factor is the reference.
        let intercept = scenarios.is_none().then(|| col(1));
        let variant = col(vi.len().saturating_sub(1));
        let framework = has(Term::Framework).then(|| col(fi.len() - 1));
        let model = has(Term::Model).then(|| col(mi.len() - 1));
        let cell = has(Term::Interaction).then(|| col(cells.len()));
        let rows = groups
            .iter()
            .map(|g| {
                let mut r = Vec::new();
                r.extend(intercept);
                let level = |m: &BTreeMap<usize, usize>, v: usize| m[&v];
                if level(&vi, g.variant) > 0 {
                    r.push(variant + level(&vi, g.variant) - 1);
                }
                if let Some(c) = framework
                    && level(&fi, g.framework) > 0
                {
                    r.push(c + level(&fi, g.framework) - 1);
                }
                if let Some(c) = model
                    && level(&mi, g.model) > 0
                {
                    r.push(c + level(&mi, g.model) - 1);
                }
                // Cell indicators beyond the main effects: aliased columns are dropped by the
                // solver (their pivots vanish), leaving the interaction's own parameters.
                if let Some(c) = cell {
                    r.push(c + level(&cells, g.framework * 1_000_000 + g.model));
                }
                r
            })
            .collect();
        Fit { groups, rows, p, scenarios }
    }

    /// Fits and returns the deviance at the maximum and the free parameters.
    fn run(&self) -> (f64, usize) {
        let n_s = self.scenarios.unwrap_or(0);
        let mut beta = vec![0.0; self.p];
        let mut gamma = vec![0.0; n_s];
        let eta_of = |beta: &[f64], gamma: &[f64], i: usize| -> f64 {
            let mut e: f64 = self.rows[i].iter().map(|&c| beta[c]).sum();
            if n_s > 0 {
                e += gamma[self.groups[i].scenario];
            }
            e
        };
        // Each pass computes the linear predictor once: the deviance of the current fit (R's
        // glm criterion compares it with the previous pass's) and the next pass's weights come
        // from it, sharing exp(−η).
        let mut dev_old = f64::INFINITY;
        let mut dev = f64::INFINITY;
        let mut rank = 0;
        for pass in 0..=100 {
            let mut a = vec![vec![0.0; self.p]; self.p];
            let mut av = vec![0.0; self.p];
            let mut b = vec![vec![0.0; self.p]; n_s];
            let mut d = vec![0.0; n_s];
            let mut dv = vec![0.0; n_s];
            let mut deviance = 0.0;
            for (i, g) in self.groups.iter().enumerate() {
                let eta = eta_of(&beta, &gamma, i);
                let exp_neg = (-eta).exp();
                deviance += bernoulli_deviance(g, eta, exp_neg);
                if g.n <= 0.0 {
                    continue;
                }
                // Working weights and responses.
                let mu = (1.0 / (1.0 + exp_neg)).clamp(1e-10, 1.0 - 1e-10);
                let w = g.n * mu * (1.0 - mu);
                let z = eta + (g.k / g.n - mu) / (mu * (1.0 - mu));
                for &c in &self.rows[i] {
                    av[c] += w * z;
                    for &c2 in &self.rows[i] {
                        a[c][c2] += w;
                    }
                }
                if n_s > 0 {
                    let s = g.scenario;
                    d[s] += w;
                    dv[s] += w * z;
                    for &c in &self.rows[i] {
                        b[s][c] += w;
                    }
                }
            }
            // The starting point's deviance is no fit's: the first comparison is with the first
            // solution's.
            if pass > 0 {
                dev = deviance;
                if (dev - dev_old).abs() / (dev.abs() + 0.1) < 1e-10 || pass == 100 {
                    break;
                }
                dev_old = dev;
            }
            // Absorb the scenario block: (A − B'D⁻¹B) β = a − B'D⁻¹d.
            for s in 0..n_s {
                if d[s] <= 0.0 {
                    continue;
                }
                for c in 0..self.p {
                    if b[s][c] == 0.0 {
                        continue;
                    }
                    av[c] -= b[s][c] * dv[s] / d[s];
                    for c2 in 0..self.p {
                        a[c][c2] -= b[s][c] * b[s][c2] / d[s];
                    }
                }
            }
            (beta, rank) = solve(a, av);
            for s in 0..n_s {
                if d[s] > 0.0 {
                    gamma[s] = (dv[s] - (0..self.p).map(|c| b[s][c] * beta[c]).sum::<f64>()) / d[s];
                }
            }
        }
        let scenarios = (0..n_s).filter(|&s| self.groups.iter().any(|g| g.scenario == s && g.n > 0.0)).count();
        (dev, rank + scenarios)
    }
}

/// −2 × the log-likelihood of a group's runs at linear predictor `eta` (`exp_neg` is e^−η).
fn bernoulli_deviance(g: &Group, eta: f64, exp_neg: f64) -> f64 {
    // log μ = −softplus(−η) and log(1 − μ) = −softplus(η), computed stably for large |η|.
    let log_mu = -if -eta > 30.0 { -eta } else { exp_neg.ln_1p() };
    let log_not = -if eta > 30.0 { eta } else { eta.exp().ln_1p() };
    -2.0 * (g.k * log_mu + (g.n - g.k) * log_not)
}

/// Solves the symmetric system `a x = v` by Gaussian elimination with partial pivoting; a
/// column whose pivot vanishes (aliased with others) gets 0. Also returns the rank.
fn solve(mut a: Vec<Vec<f64>>, mut v: Vec<f64>) -> (Vec<f64>, usize) {
    let p = v.len();
    let scale = (0..p).map(|i| a[i][i].abs()).fold(0.0, f64::max).max(1e-300);
    let mut pivots = vec![usize::MAX; p];
    let mut row = 0;
    for col in 0..p {
        let Some(best) = (row..p).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs())) else { break };
        if a[best][col].abs() <= 1e-10 * scale {
            continue;
        }
        a.swap(row, best);
        v.swap(row, best);
        for r in 0..p {
            if r != row && a[r][col] != 0.0 {
                let f = a[r][col] / a[row][col];
                for c in col..p {
                    a[r][c] -= f * a[row][c];
                }
                v[r] -= f * v[row];
            }
        }
        pivots[row] = col;
        row += 1;
    }
    let mut x = vec![0.0; p];
    for r in 0..row {
        x[pivots[r]] = v[r] / a[r][pivots[r]];
    }
    (x, row)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known effects on the logit scale: framework −1.5, 0, +1.5; model −0.4, +0.4; no
    /// interaction; scenario effects spread ±1; the first variant 0, the second +0.5.
    fn truth(f: usize, m: usize, s: usize, v: usize) -> f64 {
        let eta = -0.5 + [-1.5, 0.0, 1.5][f] + [-0.4, 0.4][m] + ((s as f64 * 0.37).sin()) + 0.5 * v as f64;
        1.0 / (1.0 + (-eta).exp())
    }

    fn design(runs: usize, draw: &mut dyn FnMut(f64) -> f64) -> Vec<Group> {
        let mut out = Vec::new();
        for f in 0..3 {
            for m in 0..2 {
                for s in 0..40 {
                    for v in 0..2 {
                        let p = truth(f, m, s, v);
                        out.push(Group { framework: f, model: m, scenario: s, variant: v, k: draw(p * runs as f64), n: runs as f64 });
                    }
                }
            }
        }
        out
    }

    /// The decomposition of runs drawn from known effects holds the decomposition of the
    /// expected counts (the effects themselves) within its intervals, and ranks the framework
    /// above the model above the (absent) interaction.
    #[test]
    fn a_hand_built_case_is_recovered_within_its_intervals() {
        // The expected counts of so many runs that chance has no share left.
        let expected = design(4_000_000, &mut |x| x);
        let exact = decompose(&expected, 0, 0.95, 1).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut binomial = |mean: f64| -> f64 {
            let p = mean / 4.0;
            (0..4).filter(|_| rng.random::<f64>() < p).count() as f64
        };
        let drawn = design(4, &mut binomial);
        let d = decompose(&drawn, 200, 0.95, 9).unwrap();
        assert_eq!(d.shares.iter().map(|s| s.term).collect::<Vec<_>>(), Term::ALL.to_vec());
        for (s, e) in d.shares.iter().zip(&exact.shares) {
            assert!(s.lo <= e.share && e.share <= s.hi, "{:?}: {} not in [{}, {}]", s.term, e.share, s.lo, s.hi);
        }
        let share = |t: Term| d.shares.iter().find(|s| s.term == t).unwrap().share;
        assert!(share(Term::Framework) > share(Term::Model) && share(Term::Model) > share(Term::Interaction));
        assert!(share(Term::Interaction).abs() < 0.01, "{d:?}");
        let total: f64 = d.shares.iter().map(|s| s.share).sum::<f64>() + d.residual;
        assert!((total - 1.0).abs() < 1e-9, "shares and residual sum to one: {total}");
        // Deterministic: the same input and seed give the same figures.
        assert_eq!(decompose(&drawn, 200, 0.95, 9).unwrap(), d);
    }

    include!("variance_reference.rs");

    /// Every model the decomposition fits has statsmodels' deviance (up to the constant of the
    /// grouped likelihood, the same for every model) and degrees of freedom.
    #[test]
    fn fits_match_statsmodels() {
        let groups: Vec<Group> = VARIANCE_GROUPS
            .iter()
            .map(|&(framework, model, scenario, variant, k, n)| Group { framework, model, scenario, variant, k: f64::from(k), n: f64::from(n) })
            .collect();
        let set = |name: &str| {
            name.chars().fold(0u8, |acc, c| {
                acc | match c {
                    'F' => Term::Framework.bit(),
                    'M' => Term::Model.bit(),
                    'I' => Term::Interaction.bit(),
                    _ => Term::Scenario.bit(),
                }
            })
        };
        let (null, null_df) = deviance(&groups, 0);
        let (_, ref_null, ref_null_df) = VARIANCE_FITS[0];
        for &(name, dev, df) in VARIANCE_FITS {
            let (got, got_df) = deviance(&groups, set(name));
            assert!(((got - null) - (dev - ref_null)).abs() < 1e-7, "{name}: {} vs {}", got - null, dev - ref_null);
            assert_eq!(got_df - null_df, (df - ref_null_df) as usize, "{name}");
        }
        // The shares are arithmetic on these fits: the framework's, by hand from statsmodels'
        // figures over the 8 orders of {F, M, I, S} with I after F and M (F enters first in
        // 3, after M in 2, after S in 1, after M and S in 2), over this likelihood's deviance
        // of the variant-only model.
        let dev = |name: &str| VARIANCE_FITS.iter().find(|f| f.0 == name).map(|f| (f.1, f.2)).unwrap();
        let drop = |from: &str, to: &str| {
            let ((a, da), (b, db)) = (dev(from), dev(to));
            a - b - (db - da)
        };
        let by_hand = (3.0 * drop("", "F") + 2.0 * drop("M", "FM") + drop("S", "FS") + 2.0 * drop("MS", "FMS")) / 8.0 / null;
        let d = decompose(&groups, 0, 0.95, 1).unwrap();
        let framework = d.shares.iter().find(|s| s.term == Term::Framework).unwrap().share;
        assert!((framework - by_hand).abs() < 1e-9, "{framework} vs {by_hand}");
        assert!((d.shares.iter().map(|s| s.share).sum::<f64>() + d.residual - 1.0).abs() < 1e-12);
    }

    #[test]
    fn orders_put_the_interaction_after_both_main_effects() {
        let all = orders(&Term::ALL);
        assert_eq!(all.len(), 8);
        for o in &all {
            let at = |t| o.iter().position(|x| *x == t).unwrap();
            assert!(at(Term::Interaction) > at(Term::Framework) && at(Term::Interaction) > at(Term::Model));
        }
        assert_eq!(orders(&[Term::Framework, Term::Scenario]).len(), 2);
    }
}
