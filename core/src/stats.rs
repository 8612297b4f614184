//! The statistics reports rely on: interval estimates for rates and the exact and asymptotic
//! tests named in the method (DESIGN §2). Distributions come from `statrs`; every function is
//! checked against values from an independent implementation in the tests below.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, ChiSquared, ContinuousCDF, Discrete, DiscreteCDF, Hypergeometric, Normal};

/// Why a statistic cannot be computed from the given data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatsError {
    #[error("n is 0: a rate needs at least one trial")]
    EmptySample,
    #[error("k = {k} is larger than n = {n}")]
    MoreSuccessesThanTrials { k: u64, n: u64 },
    #[error("confidence {0} is not strictly between 0 and 1 (e.g. 0.95)")]
    BadConfidence(String),
    #[error("the table needs at least 2 rows and 2 columns, it has {rows} × {cols}")]
    TableTooSmall { rows: usize, cols: usize },
    #[error("row {row} has {got} cells, the first row has {want}; every row needs the same number of columns")]
    Ragged { row: usize, got: usize, want: usize },
    #[error("{what} {index} sums to 0: drop it, an all-zero row or column has no expected counts")]
    EmptyMargin { what: &'static str, index: usize },
    #[error("no items to compare")]
    NoItems,
    #[error("κ is undefined: both raters gave every item the same single label, so chance agreement is 1")]
    KappaUndefined,
}

/// A two-sided confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

/// The two-sided standard normal quantile for `confidence` (1.959964… for 0.95).
pub fn z_for(confidence: f64) -> Result<f64, StatsError> {
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(StatsError::BadConfidence(confidence.to_string()));
    }
    let normal = Normal::new(0.0, 1.0).expect("the standard normal is valid");
    Ok(normal.inverse_cdf(1.0 - (1.0 - confidence) / 2.0))
}

/// Wilson score interval for `k` successes in `n` trials at the given confidence (e.g. 0.95).
/// Unlike the normal-approximation interval it stays inside [0, 1] and is not degenerate at
/// k = 0 or k = n, which matters for rare-event rates such as trap firings.
pub fn wilson(k: u64, n: u64, confidence: f64) -> Result<Interval, StatsError> {
    if n == 0 {
        return Err(StatsError::EmptySample);
    }
    if k > n {
        return Err(StatsError::MoreSuccessesThanTrials { k, n });
    }
    let z = z_for(confidence)?;
    let (nf, p) = (n as f64, k as f64 / n as f64);
    let z2 = z * z;
    let center = (p + z2 / (2.0 * nf)) / (1.0 + z2 / nf);
    let half = wilson_half_width(p, n, confidence)?;
    // The bounds are exactly 0 and 1 at the extremes; rounding must not move them.
    let lo = if k == 0 { 0.0 } else { (center - half).max(0.0) };
    let hi = if k == n { 1.0 } else { (center + half).min(1.0) };
    Ok(Interval { lo, hi })
}

/// The half-width of the Wilson score interval at the rate `p` over `n` trials, without its
/// clamping to [0, 1]: what an interval would be if the observed rate were `p`.
pub fn wilson_half_width(p: f64, n: u64, confidence: f64) -> Result<f64, StatsError> {
    if n == 0 {
        return Err(StatsError::EmptySample);
    }
    let z = z_for(confidence)?;
    let nf = n as f64;
    Ok(z * (p * (1.0 - p) / nf + z * z / (4.0 * nf * nf)).sqrt() / (1.0 + z * z / nf))
}

/// Newcombe's hybrid score interval (his method 10) for the difference of two independent
/// proportions `k1/n1 − k2/n2`, built from the two Wilson intervals.
pub fn newcombe_diff(k1: u64, n1: u64, k2: u64, n2: u64, confidence: f64) -> Result<Interval, StatsError> {
    let (a, b) = (wilson(k1, n1, confidence)?, wilson(k2, n2, confidence)?);
    let (p1, p2) = (k1 as f64 / n1 as f64, k2 as f64 / n2 as f64);
    let d = p1 - p2;
    Ok(Interval {
        lo: d - ((p1 - a.lo).powi(2) + (b.hi - p2).powi(2)).sqrt(),
        hi: d + ((a.hi - p1).powi(2) + (p2 - b.lo).powi(2)).sqrt(),
    })
}

/// Exact McNemar test: two-sided binomial test of `b` against `c`, the discordant pair counts,
/// under p = ½. With no discordant pairs there is no evidence either way and p = 1.
pub fn mcnemar_exact(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let binom = Binomial::new(0.5, n).expect("p = 0.5 is a valid probability");
    (2.0 * binom.cdf(b.min(c))).min(1.0)
}

/// Fisher's exact test, two-sided, for the 2×2 table `[[a, b], [c, d]]`: the probability, with
/// the margins fixed, of a table no more likely than the observed one. Tables whose
/// probability equals the observed one up to a relative 1e-7 count as "no more likely", the
/// tolerance R's `fisher.test` and SciPy use, so that ties are not lost to rounding.
pub fn fisher_exact(a: u64, b: u64, c: u64, d: u64) -> f64 {
    let n = a + b + c + d;
    let row1 = a + b;
    let col1 = a + c;
    if n == 0 || row1 == 0 || col1 == 0 || row1 == n || col1 == n {
        return 1.0;
    }
    let h = Hypergeometric::new(n, col1, row1).expect("margins are within the population");
    let lo = (row1 + col1).saturating_sub(n);
    let hi = row1.min(col1);
    let observed = h.ln_pmf(a);
    let cutoff = observed + (1.0f64 + 1e-7).ln();
    let p: f64 = (lo..=hi).map(|x| h.ln_pmf(x)).filter(|&l| l <= cutoff).map(f64::exp).sum();
    p.min(1.0)
}

/// Cohen's κ between two raters, with the agreement table it was computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kappa {
    pub kappa: f64,
    /// Observed agreement.
    pub observed: f64,
    /// Agreement expected by chance from the raters' marginal label frequencies.
    pub expected: f64,
    pub n: u64,
    /// Large-sample standard error of κ (Fleiss, Cohen & Everitt 1969, not assuming κ = 0):
    /// what [`Kappa::interval`] is built on.
    pub se: f64,
    /// Labels in sorted order; `table[i][j]` counts items rater 1 labelled `labels[i]` and
    /// rater 2 labelled `labels[j]`.
    pub labels: Vec<String>,
    pub table: Vec<Vec<u64>>,
}

impl Kappa {
    /// The Wald interval κ ± z·se at `confidence`, within [−1, 1]. It rests on a normal
    /// approximation: with few items (see [`KAPPA_FEW`]) it is rough.
    pub fn interval(&self, confidence: f64) -> (f64, f64) {
        let z = Normal::new(0.0, 1.0).expect("a standard normal").inverse_cdf(0.5 + confidence / 2.0);
        ((self.kappa - z * self.se).max(-1.0), (self.kappa + z * self.se).min(1.0))
    }
}

/// Below this many items κ's normal-approximation interval is rough, and is flagged as such.
pub const KAPPA_FEW: u64 = 30;

/// Cohen's κ over paired labels (one pair per item).
pub fn cohen_kappa<S: AsRef<str>>(pairs: &[(S, S)]) -> Result<Kappa, StatsError> {
    if pairs.is_empty() {
        return Err(StatsError::NoItems);
    }
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (x, y) in pairs {
        index.insert(x.as_ref(), 0);
        index.insert(y.as_ref(), 0);
    }
    for (i, v) in index.values_mut().enumerate() {
        *v = i;
    }
    let k = index.len();
    let mut table = vec![vec![0u64; k]; k];
    for (x, y) in pairs {
        table[index[x.as_ref()]][index[y.as_ref()]] += 1;
    }
    let n = pairs.len() as f64;
    let observed = (0..k).map(|i| table[i][i]).sum::<u64>() as f64 / n;
    let expected: f64 = (0..k)
        .map(|i| {
            let row: u64 = table[i].iter().sum();
            let col: u64 = table.iter().map(|r| r[i]).sum();
            (row as f64 / n) * (col as f64 / n)
        })
        .sum();
    if (1.0 - expected).abs() < 1e-15 {
        return Err(StatsError::KappaUndefined);
    }
    let kappa = (observed - expected) / (1.0 - expected);
    let p = |i: usize, j: usize| table[i][j] as f64 / n;
    let row = |i: usize| (0..k).map(|j| p(i, j)).sum::<f64>();
    let col = |j: usize| (0..k).map(|i| p(i, j)).sum::<f64>();
    let diagonal: f64 = (0..k).map(|i| p(i, i) * (1.0 - (row(i) + col(i)) * (1.0 - kappa)).powi(2)).sum();
    let off: f64 = (0..k).flat_map(|i| (0..k).filter(move |&j| j != i).map(move |j| (i, j))).map(|(i, j)| p(i, j) * (col(i) + row(j)).powi(2)).sum();
    let variance = (diagonal + (1.0 - kappa).powi(2) * off - (kappa - expected * (1.0 - kappa)).powi(2)) / (n * (1.0 - expected).powi(2));
    Ok(Kappa {
        kappa,
        se: variance.max(0.0).sqrt(),
        observed,
        expected,
        n: pairs.len() as u64,
        labels: index.keys().map(|s| s.to_string()).collect(),
        table,
    })
}

/// Pearson's χ² test of independence on an r × c table of counts (no continuity correction).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChiSquare {
    pub chi2: f64,
    pub dof: u64,
    pub p: f64,
    /// Cramér's V, the effect size: √(χ² / (n · (min(r, c) − 1))).
    pub cramers_v: f64,
    pub n: u64,
}

/// χ² test of independence of rows and columns.
pub fn chi2_independence(table: &[Vec<u64>]) -> Result<ChiSquare, StatsError> {
    let rows = table.len();
    let cols = table.first().map_or(0, Vec::len);
    if rows < 2 || cols < 2 {
        return Err(StatsError::TableTooSmall { rows, cols });
    }
    for (i, r) in table.iter().enumerate() {
        if r.len() != cols {
            return Err(StatsError::Ragged { row: i + 1, got: r.len(), want: cols });
        }
    }
    let row_sums: Vec<u64> = table.iter().map(|r| r.iter().sum()).collect();
    let col_sums: Vec<u64> = (0..cols).map(|j| table.iter().map(|r| r[j]).sum()).collect();
    if let Some(i) = row_sums.iter().position(|&s| s == 0) {
        return Err(StatsError::EmptyMargin { what: "row", index: i + 1 });
    }
    if let Some(j) = col_sums.iter().position(|&s| s == 0) {
        return Err(StatsError::EmptyMargin { what: "column", index: j + 1 });
    }
    let n: u64 = row_sums.iter().sum();
    let nf = n as f64;
    let mut chi2 = 0.0;
    for (i, r) in table.iter().enumerate() {
        for (j, &o) in r.iter().enumerate() {
            let e = row_sums[i] as f64 * col_sums[j] as f64 / nf;
            chi2 += (o as f64 - e).powi(2) / e;
        }
    }
    let dof = ((rows - 1) * (cols - 1)) as u64;
    let dist = ChiSquared::new(dof as f64).expect("dof ≥ 1");
    let m = rows.min(cols) as f64 - 1.0;
    Ok(ChiSquare { chi2, dof, p: dist.sf(chi2), cramers_v: (chi2 / (nf * m)).sqrt(), n })
}

/// Pearson's χ² goodness-of-fit test of counts against equal expected counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoodnessOfFit {
    pub chi2: f64,
    pub dof: u64,
    pub p: f64,
    pub n: u64,
}

/// χ² test that `counts` (one per category, at least two) come from equally likely categories.
pub fn chi2_uniform(counts: &[u64]) -> Result<GoodnessOfFit, StatsError> {
    if counts.len() < 2 {
        return Err(StatsError::TableTooSmall { rows: 1, cols: counts.len() });
    }
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return Err(StatsError::EmptyMargin { what: "row", index: 1 });
    }
    let e = n as f64 / counts.len() as f64;
    let chi2: f64 = counts.iter().map(|&o| (o as f64 - e).powi(2) / e).sum();
    let dof = counts.len() as u64 - 1;
    let dist = ChiSquared::new(dof as f64).expect("dof ≥ 1");
    Ok(GoodnessOfFit { chi2, dof, p: dist.sf(chi2), n })
}

/// Holm's step-down adjustment of a family of p-values (same order as given): controls the
/// family-wise error rate without assuming independence.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut adjusted = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

/// How cases behaved over k repeated runs on one target agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transfer {
    /// Cases with at least one run.
    pub cases: u64,
    /// Cases with at least one unsafe run.
    pub transferred: u64,
    pub all_safe: u64,
    pub all_unsafe: u64,
    pub mixed: u64,
    /// transferred / cases.
    pub rate: f64,
    /// Wilson interval of `rate`.
    pub interval: Interval,
}

/// The transfer rate (a case transfers if at least one of its runs is unsafe) over cases given
/// as their runs' unsafe flags. Cases without runs are not counted.
pub fn transfer<I, R>(cases: I, confidence: f64) -> Result<Transfer, StatsError>
where
    I: IntoIterator<Item = R>,
    R: AsRef<[bool]>,
{
    let (mut n, mut all_safe, mut all_unsafe, mut mixed) = (0, 0, 0, 0);
    for runs in cases {
        let runs = runs.as_ref();
        if runs.is_empty() {
            continue;
        }
        n += 1;
        let unsafe_runs = runs.iter().filter(|&&u| u).count();
        if unsafe_runs == 0 {
            all_safe += 1;
        } else if unsafe_runs == runs.len() {
            all_unsafe += 1;
        } else {
            mixed += 1;
        }
    }
    let transferred = all_unsafe + mixed;
    let interval = wilson(transferred, n, confidence)?;
    Ok(Transfer { cases: n, transferred, all_safe, all_unsafe, mixed, rate: transferred as f64 / n as f64, interval })
}

/// The value at quantile `q` (0–1) of `sorted` (ascending): the element at the nearest index
/// to `q` × (n − 1); NaN when there is none. What every benchmark reports its medians and
/// tails with.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Relative difference, with an absolute floor for values at 0.
    fn close(got: f64, want: f64) {
        let tol = 1e-9 * want.abs().max(1e-300);
        assert!((got - want).abs() <= tol.max(1e-15), "got {got:e}, want {want:e}");
    }

    // Reference values (stats_reference.rs) come from SciPy 1.17.1 (`binomtest`, `fisher_exact`,
    // `chi2_contingency(correction=False)`), statsmodels 0.15.0 (`proportion_confint(method=
    // "wilson")`, `confint_proportions_2indep(method="newcomb")`, `multipletests("holm")`) and
    // scikit-learn 1.9.1 (`cohen_kappa_score`), printed as shortest round-trip decimals; κ's
    // standard error and interval from statsmodels 0.15.0's `cohens_kappa`.

    #[test]
    fn wilson_matches_reference() {
        for (k, n, conf, lo, hi) in WILSON {
            let i = wilson(*k, *n, *conf).unwrap();
            close(i.lo, *lo);
            close(i.hi, *hi);
        }
        assert_eq!(wilson(0, 0, 0.95), Err(StatsError::EmptySample));
        // The half-width at the observed rate is the interval's, where no bound is clamped.
        for (k, n, conf, lo, hi) in WILSON {
            if *k > 0 && k < n {
                close(wilson_half_width(*k as f64 / *n as f64, *n, *conf).unwrap(), (hi - lo) / 2.0);
            }
        }
        assert!(wilson(3, 2, 0.95).is_err());
        assert!(wilson(1, 2, 1.0).is_err());
    }

    #[test]
    fn mcnemar_matches_reference() {
        close(mcnemar_exact(13, 0), 2.44140625e-4);
        for (b, c, p) in MCNEMAR {
            close(mcnemar_exact(*b, *c), *p);
        }
        assert_eq!(mcnemar_exact(0, 0), 1.0);
    }

    #[test]
    fn fisher_matches_reference() {
        for (a, b, c, d, p) in FISHER {
            close(fisher_exact(*a, *b, *c, *d), *p);
        }
    }

    #[test]
    fn chi2_matches_reference() {
        for (table, chi2, dof, p) in CHI2 {
            let t: Vec<Vec<u64>> = table.iter().map(|r| r.to_vec()).collect();
            let r = chi2_independence(&t).unwrap();
            close(r.chi2, *chi2);
            assert_eq!(r.dof, *dof);
            close(r.p, *p);
        }
        assert!(matches!(chi2_independence(&[vec![1, 2]]), Err(StatsError::TableTooSmall { .. })));
        // Goodness of fit: with two degrees of freedom the survival function is e^(−χ²/2).
        let g = chi2_uniform(&[10, 20, 30]).unwrap();
        assert_eq!((g.chi2, g.dof, g.n), (10.0, 2, 60));
        assert!((g.p - (-5.0f64).exp()).abs() < 1e-12, "{}", g.p);
        // One degree of freedom: P(χ²₁ > 3.841459) = 0.05.
        let g = chi2_uniform(&[0, 0]).err();
        assert!(g.is_some());
        let one = chi2_uniform(&[60, 40]).unwrap();
        assert!((one.chi2 - 4.0).abs() < 1e-12);
        assert!((one.p - 0.045_500_263_896_358_4).abs() < 1e-12, "{}", one.p);
        assert!(chi2_uniform(&[5]).is_err());
        assert!(matches!(chi2_independence(&[vec![1, 2], vec![0, 0]]), Err(StatsError::EmptyMargin { what: "row", index: 2 })));
        assert!(matches!(chi2_independence(&[vec![1, 2], vec![3]]), Err(StatsError::Ragged { row: 2, .. })));
    }

    #[test]
    fn kappa_s_standard_error_and_interval_match_reference() {
        for ((a, b, _), (se, lo, hi)) in KAPPA.iter().zip(KAPPA_SE) {
            let pairs: Vec<(&str, &str)> = a.iter().copied().zip(b.iter().copied()).collect();
            let k = cohen_kappa(&pairs).unwrap();
            close(k.se, *se);
            let (l, h) = k.interval(0.95);
            close(l, lo.max(-1.0));
            close(h, hi.min(1.0));
        }
        let (table, kappa, se, lo, hi) = KAPPA_TABLE;
        let labels = ["a", "b", "c"];
        let pairs: Vec<(&str, &str)> = (0..3).flat_map(|i| (0..3).flat_map(move |j| std::iter::repeat_n((labels[i], labels[j]), table[i][j] as usize))).collect();
        let k = cohen_kappa(&pairs).unwrap();
        close(k.kappa, kappa);
        close(k.se, se);
        let (l, h) = k.interval(0.95);
        close(l, lo);
        close(h, hi);
    }

    #[test]
    fn kappa_matches_reference() {
        for (a, b, want) in KAPPA {
            let pairs: Vec<(&str, &str)> = a.iter().copied().zip(b.iter().copied()).collect();
            close(cohen_kappa(&pairs).unwrap().kappa, *want);
        }
        assert_eq!(cohen_kappa(&[("x", "x"), ("x", "x")]), Err(StatsError::KappaUndefined));
        assert_eq!(cohen_kappa::<&str>(&[]), Err(StatsError::NoItems));
    }

    #[test]
    fn holm_matches_reference() {
        let got = holm(&[0.01, 0.04, 0.03, 0.005]);
        for (g, w) in got.iter().zip([0.03, 0.06, 0.06, 0.02]) {
            close(*g, w);
        }
    }

    #[test]
    fn newcombe_matches_reference() {
        for (k1, n1, k2, n2, lo, hi) in NEWCOMBE {
            let i = newcombe_diff(*k1, *n1, *k2, *n2, 0.95).unwrap();
            close(i.lo, *lo);
            close(i.hi, *hi);
        }
    }

    #[test]
    fn transfer_counts_cases_by_their_runs() {
        let cases = [vec![false, false, false], vec![true, false, false], vec![true, true, true], vec![], vec![false]];
        let t = transfer(&cases, 0.95).unwrap();
        assert_eq!((t.cases, t.transferred, t.all_safe, t.all_unsafe, t.mixed), (4, 2, 2, 1, 1));
        assert_eq!(t.rate, 0.5);
        assert_eq!(t.interval, wilson(2, 4, 0.95).unwrap());
    }

    include!("stats_reference.rs");
}
