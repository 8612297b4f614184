//! Reports: from judged runs to the tables and figures a paper or leaderboard publishes.
//!
//! [`build`] computes every number from the store's run records (pure, deterministic);
//! [`write`] renders them as Markdown, CSV and JSON, and [`plots`] draws the figures.

pub mod atif;
pub mod calculator;
pub mod export;
pub mod formats;
pub mod inspect;
pub mod labels;
pub mod plots;
pub mod spreadsheet;
pub mod transfer;
pub mod variance;
pub mod write;

use std::collections::{BTreeMap, BTreeSet};

use overeager_core::Variant;
use overeager_core::model::PlayedBy;
use overeager_formats::model::usage::Usage;
use overeager_core::stats::{self, Interval};

use overeager_store::RunRecord;

pub use overeager_wire::report::{ArchetypeRate, AxisTest, Cell, Comparison, Consent, LabelAgreement, OwnTransfer, Report, SubmittedCell, short_variant};

/// Confidence level of every interval in a report.
pub const CONFIDENCE: f64 = 0.95;

/// The cells (one per variant) of each submission, from its records.
pub fn submitted_cells(submissions: Vec<(overeager_store::board::Provenance, Vec<RunRecord>)>) -> Vec<SubmittedCell> {
    let mut out = Vec::new();
    for (provenance, records) in submissions {
        let mut groups: BTreeMap<CellKey, Vec<&RunRecord>> = BTreeMap::new();
        for r in &records {
            groups.entry(key(r)).or_default().push(r);
        }
        out.extend(groups.iter().map(|((f, m, v), rs)| SubmittedCell { cell: cell(f, m, *v, rs), provenance: provenance.clone() }));
    }
    out
}

type CellKey = (String, String, Variant);

fn key(r: &RunRecord) -> CellKey {
    (r.framework.clone(), r.model.clone(), r.variant)
}

pub(crate) fn ratio(k: u64, n: u64) -> f64 {
    if n == 0 { 0.0 } else { k as f64 / n as f64 }
}

/// Writes every file of the report into `dir` — one CSV per table, `report.json`,
/// `report.md`, and with `figures` the plots — and returns their paths.
pub fn write_files(dir: &std::path::Path, r: &Report, figures: bool) -> anyhow::Result<Vec<std::path::PathBuf>> {
    use anyhow::Context;
    let figs = if figures { plots::draw_all(dir, r)? } else { Vec::new() };
    let mut files = write::data_files(dir, r)?;
    let md = dir.join("report.md");
    std::fs::write(&md, write::markdown(r, &figs)).with_context(|| format!("writing {}", md.display()))?;
    files.push(md);
    files.extend(figs);
    Ok(files)
}

/// The report of experiment `id` in `store`: its judged runs and its human labels. Refused
/// while the experiment has no finished run.
pub fn of_experiment(store: &overeager_store::Store, id: &str) -> anyhow::Result<Report> {
    let e = store.require_experiment(id)?;
    let records = store.records(&e.id)?;
    if records.is_empty() {
        anyhow::bail!("experiment `{id}` has no finished run yet: run `overeager experiment run {}` first", e.plan_file);
    }
    let labels = store.labelled(Some(&e.id))?;
    Ok(build(&e.id, &e.title, &records, &labels))
}

/// Computes a report from an experiment's judged runs and its human labels
/// (`(run, rater, label, judge)` rows).
pub fn build(
    experiment: &str,
    title: &str,
    records: &[RunRecord],
    labels: &[(String, String, bool, bool)],
) -> Report {
    let mut report = build_without_variance(experiment, title, records, labels);
    report.variance = VarianceInput::of(records).and_then(|v| v.decompose());
    report
}

/// [`build`] without the variance decomposition (`variance` is `None`): every other table, in
/// time linear in the runs. The decomposition alone costs seconds at ten thousand runs, so a
/// server computes it apart ([`VarianceInput`]) and keeps it.
pub fn build_without_variance(
    experiment: &str,
    title: &str,
    records: &[RunRecord],
    labels: &[(String, String, bool, bool)],
) -> Report {
    let counted: Vec<&RunRecord> = records.iter().filter(|r| counts(r)).collect();
    let mut groups: BTreeMap<CellKey, Vec<&RunRecord>> = BTreeMap::new();
    for r in records {
        groups.entry(key(r)).or_default().push(r);
    }
    let cells: Vec<Cell> = groups.iter().map(|((f, m, v), rs)| cell(f, m, *v, rs)).collect();
    let index: BTreeMap<CellKey, usize> = groups.keys().cloned().enumerate().map(|(i, k)| (k, i)).collect();
    let overall_k = counted.iter().filter(|r| r.overeager).count() as u64;
    Report {
        experiment: experiment.to_string(),
        title: title.to_string(),
        simulated: records.iter().any(|r| r.simulated),
        played_by: {
            let mut seen: Vec<PlayedBy> = cells.iter().map(|c| c.played_by.clone()).collect();
            seen.sort();
            seen.dedup();
            seen
        },
        confidence: CONFIDENCE,
        overeager_version: env!("CARGO_PKG_VERSION").to_string(),
        runs: records.len() as u64,
        timeouts: records.iter().filter(|r| r.timed_out).count() as u64,
        incomplete: records.iter().filter(|r| is_incomplete(r)).count() as u64,
        overall_rate: ratio(overall_k, counted.len() as u64),
        consent: consent(&counted),
        cross_framework: comparisons(&cells, true),
        model_gaps: comparisons(&cells, false),
        archetypes: counted.iter().map(|r| r.archetype.clone()).collect::<BTreeSet<_>>().into_iter().collect(),
        archetype_rates: archetype_rates(&counted, &index),
        axes: axis_tests(&counted),
        own_transfer: own_transfer(&counted, &index),
        labels: label_agreement(labels),
        variance: None,
        submitted: Vec::new(),
        cells,
    }
}

/// Bootstrap resamples of the variance decomposition's intervals, and their seed (fixed: a
/// report is a function of its runs).
pub const VARIANCE_RESAMPLES: usize = 200;
const VARIANCE_SEED: u64 = 20261129;

/// What the variance decomposition is computed from: the counted runs grouped by framework,
/// model, scenario and variant. Two reports with the same input have the same decomposition,
/// so its [`digest`](VarianceInput::digest) can name a kept one.
#[derive(Debug, Clone, PartialEq)]
pub struct VarianceInput {
    groups: Vec<crate::variance::Group>,
}

/// Names the decomposition's method in [`VarianceInput::digest`]: change it whenever the
/// figures a given input yields change, so decompositions kept by an earlier build are not
/// served for this one's.
const VARIANCE_METHOD: &str = "lmg-deviance-irls/1";

impl VarianceInput {
    /// The input of `records`' decomposition, or `None` when the counted runs span fewer than
    /// two cells (nothing to decompose).
    pub fn of(records: &[RunRecord]) -> Option<VarianceInput> {
        use crate::variance::Group;
        fn index<'a>(m: &mut BTreeMap<&'a str, usize>, k: &'a str) -> usize {
            let n = m.len();
            *m.entry(k).or_insert(n)
        }
        let (mut fw, mut md, mut sc) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        let mut groups: BTreeMap<(usize, usize, usize, usize), (f64, f64)> = BTreeMap::new();
        for r in records.iter().filter(|r| counts(r)) {
            let key = (
                index(&mut fw, &r.framework),
                index(&mut md, &r.model),
                index(&mut sc, &r.scenario_hash),
                usize::from(r.variant == Variant::ConsentStripped),
            );
            let g = groups.entry(key).or_default();
            g.0 += f64::from(u8::from(r.overeager));
            g.1 += 1.0;
        }
        let cells: BTreeSet<(usize, usize)> = groups.keys().map(|k| (k.0, k.1)).collect();
        if cells.len() < 2 {
            return None;
        }
        let groups = groups
            .into_iter()
            .map(|((framework, model, scenario, variant), (k, n))| Group {
                framework,
                model,
                scenario,
                variant,
                k,
                n,
            })
            .collect();
        Some(VarianceInput { groups })
    }

    /// A SHA-256 of the groups with the method, resamples, seed and confidence: equal digests,
    /// equal decompositions.
    pub fn digest(&self) -> String {
        let mut text =
            format!("{VARIANCE_METHOD} {VARIANCE_RESAMPLES} {VARIANCE_SEED} {CONFIDENCE}\n");
        for g in &self.groups {
            text.push_str(&format!(
                "{} {} {} {} {} {}\n",
                g.framework, g.model, g.scenario, g.variant, g.k, g.n
            ));
        }
        overeager_core::sha256_hex(text.as_bytes())
    }

    /// The decomposition with its bootstrap intervals (seconds at ten thousand runs).
    pub fn decompose(&self) -> Option<crate::variance::Decomposition> {
        crate::variance::decompose(&self.groups, VARIANCE_RESAMPLES, CONFIDENCE, VARIANCE_SEED)
    }
}

/// A run the rates are over: not timed out, and its verdict decided.
fn counts(r: &RunRecord) -> bool {
    !r.timed_out && r.outcome().decided().is_some()
}

/// Not timed out, but the verdict is incomplete: reported apart, in no rate.
fn is_incomplete(r: &RunRecord) -> bool {
    !r.timed_out && r.outcome().decided().is_none()
}

fn cell(framework: &str, model: &str, variant: Variant, rs: &[&RunRecord]) -> Cell {
    let counted: Vec<&&RunRecord> = rs.iter().filter(|r| counts(r)).collect();
    let n = counted.len() as u64;
    let k = counted.iter().filter(|r| r.overeager).count() as u64;
    let critical_traps: u64 = counted.iter().map(|r| r.critical as u64).sum();
    let severity_total: u64 = counted.iter().map(|r| r.severity_total as u64).sum();
    let completion_known = counted.iter().filter(|r| r.success.is_some()).count() as u64;
    let completed = counted.iter().filter(|r| r.success == Some(true)).count() as u64;
    let conditional_success = counted.iter().filter(|r| r.conditional_success == Some(true)).count() as u64;
    Cell {
        framework: framework.to_string(),
        model: model.to_string(),
        variant,
        simulated: rs.iter().any(|r| r.simulated),
        scripted: rs.iter().any(|r| matches!(overeager_core::AgentCell::parse(&r.agent), Ok(overeager_core::AgentCell::Scripted { .. }))),
        played_by: rs.iter().find(|r| !r.played_by.real_model()).or(rs.first()).map(|r| r.played_by.clone()).unwrap_or_else(|| PlayedBy::direct(overeager_core::model::ModelSource::Scripted)),
        runs: rs.len() as u64,
        timeouts: rs.iter().filter(|r| r.timed_out).count() as u64,
        n,
        overeager: k,
        rate: ratio(k, n),
        ci: stats::wilson(k, n, CONFIDENCE).unwrap_or(Interval { lo: 0.0, hi: 1.0 }),
        critical_traps,
        critical_runs: counted.iter().filter(|r| r.critical > 0).count() as u64,
        severity_total,
        severity_mean: ratio(severity_total, n),
        completed,
        completion_known,
        completion_rate: ratio(completed, completion_known),
        conditional_success,
        conditional_success_rate: ratio(conditional_success, completion_known),
        incomplete: rs.iter().filter(|r| is_incomplete(r)).count() as u64,
        usage_runs: rs.iter().filter(|r| r.tokens.is_some()).count() as u64,
        tokens: rs.iter().filter_map(|r| r.tokens).fold(Usage::default(), |mut a, u| {
            a += u;
            a
        }),
        priced_runs: rs.iter().filter(|r| r.cost_usd.is_some()).count() as u64,
        cost_usd: rs.iter().filter_map(|r| r.cost_usd).reduce(|a, b| a + b).map(overeager_core::model::usage::exact_usd),
    }
}

fn consent(counted: &[&RunRecord]) -> Vec<Consent> {
    // (framework, model) → (scenario, replicate) → [kept, stripped]
    type Pairs = BTreeMap<(String, u32), [Option<bool>; 2]>;
    let mut by_agent: BTreeMap<(String, String), (bool, Pairs)> = BTreeMap::new();
    for r in counted {
        let e = by_agent.entry((r.framework.clone(), r.model.clone())).or_default();
        e.0 |= r.simulated;
        let slot = e.1.entry((r.scenario_hash.clone(), r.replicate)).or_default();
        slot[usize::from(r.variant == Variant::ConsentStripped)] = Some(r.overeager);
    }
    let mut out: Vec<Consent> = by_agent
        .into_iter()
        .filter_map(|((framework, model), (simulated, pairs))| {
            let (mut both, mut neither, mut b, mut c) = (0, 0, 0, 0);
            for v in pairs.values() {
                match v {
                    [Some(true), Some(true)] => both += 1,
                    [Some(false), Some(false)] => neither += 1,
                    [Some(true), Some(false)] => b += 1,
                    [Some(false), Some(true)] => c += 1,
                    _ => {}
                }
            }
            let n = both + neither + b + c;
            (n > 0).then(|| Consent {
                framework,
                model,
                simulated,
                pairs: n,
                both,
                neither,
                only_kept: b,
                only_stripped: c,
                rate_kept: ratio(both + b, n),
                rate_stripped: ratio(both + c, n),
                p: stats::mcnemar_exact(b, c),
                p_holm: 0.0,
            })
        })
        .collect();
    let adjusted = stats::holm(&out.iter().map(|c| c.p).collect::<Vec<_>>());
    for (c, p) in out.iter_mut().zip(adjusted) {
        c.p_holm = p;
    }
    out
}

/// Pairwise Fisher tests between cells of the same variant that share the model (`across
/// frameworks`) or the framework (model gaps within a framework).
fn comparisons(cells: &[Cell], across_frameworks: bool) -> Vec<Comparison> {
    let mut out = Vec::new();
    for (i, x) in cells.iter().enumerate() {
        for y in &cells[i + 1..] {
            if x.variant != y.variant || x.n == 0 || y.n == 0 {
                continue;
            }
            let (same, a, b) = if across_frameworks {
                (x.model == y.model && x.framework != y.framework, &x.framework, &y.framework)
            } else {
                (x.framework == y.framework && x.model != y.model, &x.model, &y.model)
            };
            if !same {
                continue;
            }
            let shared = if across_frameworks { x.model.clone() } else { x.framework.clone() };
            out.push(Comparison {
                shared,
                variant: x.variant,
                a: a.clone(),
                b: b.clone(),
                k_a: x.overeager,
                n_a: x.n,
                k_b: y.overeager,
                n_b: y.n,
                diff: x.rate - y.rate,
                diff_ci: stats::newcombe_diff(x.overeager, x.n, y.overeager, y.n, CONFIDENCE).ok(),
                p: stats::fisher_exact(x.overeager, x.n - x.overeager, y.overeager, y.n - y.overeager),
                p_holm: 0.0,
            });
        }
    }
    let adjusted = stats::holm(&out.iter().map(|c| c.p).collect::<Vec<_>>());
    for (c, p) in out.iter_mut().zip(adjusted) {
        c.p_holm = p;
    }
    out
}

fn archetype_rates(counted: &[&RunRecord], index: &BTreeMap<CellKey, usize>) -> Vec<ArchetypeRate> {
    let mut acc: BTreeMap<(String, usize), (u64, u64)> = BTreeMap::new();
    for r in counted {
        let e = acc.entry((r.archetype.clone(), index[&key(r)])).or_default();
        e.0 += u64::from(r.overeager);
        e.1 += 1;
    }
    acc.into_iter().map(|((archetype, cell), (k, n))| ArchetypeRate { archetype, cell, k, n }).collect()
}

/// The level of `axis` a run's scenario has; seeds (no `[axes]`) are at each axis's first
/// level, the seed's own.
fn level<'a>(r: &'a RunRecord, axis: &str, default: &'a str) -> &'a str {
    r.axes.get(axis).map(String::as_str).unwrap_or(default)
}

fn axis_tests(counted: &[&RunRecord]) -> Vec<AxisTest> {
    let mut agents: BTreeMap<String, Vec<&RunRecord>> = BTreeMap::new();
    for r in counted {
        agents.entry(format!("{} · {}", r.framework, r.model)).or_default().push(r);
    }
    let mut groups: Vec<(String, Vec<&RunRecord>)> = agents.into_iter().collect();
    if groups.len() > 1 {
        groups.push(("all agents".into(), counted.to_vec()));
    }
    let mut out = Vec::new();
    for (axis, levels) in overeager_scenario::AXES {
        for (agents, rs) in &groups {
            let mut counts: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
            for r in rs {
                let e = counts.entry(level(r, axis, levels[0])).or_default();
                e.0 += u64::from(r.overeager);
                e.1 += 1;
            }
            // Report levels in the axis's own order.
            let mut rows: Vec<(String, u64, u64)> = levels.iter().filter_map(|l| counts.get(l).map(|&(k, n)| (l.to_string(), k, n))).collect();
            rows.extend(counts.iter().filter(|(l, _)| !levels.contains(l)).map(|(l, &(k, n))| (l.to_string(), k, n)));
            let table: Vec<Vec<u64>> = rows.iter().map(|&(_, k, n)| vec![k, n - k]).collect();
            let (chi2, note) = if rows.len() < 2 {
                (None, Some("one level only: nothing to compare".to_string()))
            } else {
                match stats::chi2_independence(&table) {
                    Ok(c) => (Some(c), None),
                    Err(stats::StatsError::EmptyMargin { what: "column", index }) => {
                        (None, Some(if index == 1 { "no overeager run".into() } else { "every run overeager".into() }))
                    }
                    Err(e) => (None, Some(e.to_string())),
                }
            };
            out.push(AxisTest { axis: axis.to_string(), agents: agents.clone(), levels: rows, chi2, note });
        }
    }
    out
}

fn own_transfer(counted: &[&RunRecord], index: &BTreeMap<CellKey, usize>) -> Vec<OwnTransfer> {
    let mut by_cell: BTreeMap<usize, BTreeMap<&str, Vec<bool>>> = BTreeMap::new();
    for r in counted {
        by_cell.entry(index[&key(r)]).or_default().entry(r.scenario_hash.as_str()).or_default().push(r.overeager);
    }
    by_cell
        .into_iter()
        .filter_map(|(cell, cases)| {
            let replicates = cases.values().map(Vec::len).max().unwrap_or(0) as u32;
            stats::transfer(cases.values(), CONFIDENCE)
                .ok()
                .map(|transfer| OwnTransfer { source: "overeager scenarios".into(), cell, replicates, transfer })
        })
        .collect()
}

/// Cohen's κ of two overeager calls on the same runs with its interval, or why it is
/// undefined; with few runs the note says the interval is rough.
pub(crate) fn kappa_of(calls: &[(bool, bool)]) -> (Option<f64>, Option<[f64; 2]>, Option<String>) {
    let show = |b: bool| if b { "overeager" } else { "not" };
    let kp: Vec<(&str, &str)> = calls.iter().map(|&(x, y)| (show(x), show(y))).collect();
    match stats::cohen_kappa(&kp) {
        Ok(k) => {
            let (lo, hi) = k.interval(CONFIDENCE);
            let few = (k.n < stats::KAPPA_FEW).then(|| format!("few runs (n = {}): the interval is rough; label at least {}", k.n, stats::KAPPA_FEW));
            (Some(k.kappa), Some([lo, hi]), few)
        }
        Err(e) => (None, None, Some(e.to_string())),
    }
}

/// Agreement of each rater with the rule judge, from `(run, rater, label, judge)` rows.
pub fn label_agreement(labels: &[(String, String, bool, bool)]) -> Vec<LabelAgreement> {
    let mut by_rater: BTreeMap<&str, Vec<(bool, bool)>> = BTreeMap::new();
    for (_, rater, human, judge) in labels {
        by_rater.entry(rater.as_str()).or_default().push((*human, *judge));
    }
    by_rater
        .into_iter()
        .map(|(rater, pairs)| {
            let count = |h: bool, j: bool| pairs.iter().filter(|&&p| p == (h, j)).count() as u64;
            let (both, human_only, judge_only, neither) = (count(true, true), count(true, false), count(false, true), count(false, false));
            let (kappa, kappa_ci, kappa_note) = kappa_of(&pairs);
            let rate = |k: u64, n: u64| (n > 0).then(|| (ratio(k, n), stats::wilson(k, n, CONFIDENCE).ok()));
            let recall = rate(both, both + human_only);
            let precision = rate(both, both + judge_only);
            LabelAgreement {
                rater: rater.to_string(),
                n: pairs.len() as u64,
                kappa,
                kappa_ci,
                kappa_note,
                both,
                human_only,
                judge_only,
                neither,
                recall: recall.map(|r| r.0),
                recall_ci: recall.and_then(|r| r.1),
                precision: precision.map(|r| r.0),
                precision_ci: precision.and_then(|r| r.1),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(fw: &str, v: Variant, scenario: &str, rep: u32, over: bool) -> RunRecord {
        RunRecord {
            run: format!("{fw}-{scenario}-{rep}-{v}"),
            agent: "sim:x".into(),
            framework: fw.into(),
            model: "m".into(),
            simulated: true,
            played_by: overeager_core::model::PlayedBy::direct(overeager_core::model::ModelSource::Simulated),
            scenario: scenario.into(),
            scenario_hash: scenario.into(),
            archetype: "a".into(),
            axes: BTreeMap::new(),
            variant: v,
            replicate: rep,
            timed_out: false,
            overeager: over,
            success: Some(true),
            conditional_success: Some(!over),
            severity_total: if over { 3 } else { 0 },
            critical: 0,
            traps: Vec::new(),
            complete: true,
            bundle: String::new(),
            tokens: None,
            cost_usd: None,
        }
    }

    #[test]
    fn pairs_cells_and_tests_are_counted_as_defined() {
        let mut rs = Vec::new();
        // 13 pairs overeager only without the block, 2 in both, 5 in neither.
        for i in 0..20 {
            let (k, s) = if i < 13 { (false, true) } else if i < 15 { (true, true) } else { (false, false) };
            rs.push(rec("f1", Variant::ConsentKept, &format!("s{i}"), 0, k));
            rs.push(rec("f1", Variant::ConsentStripped, &format!("s{i}"), 0, s));
        }
        let mut timed_out = rec("f1", Variant::ConsentKept, "s0", 1, true);
        timed_out.timed_out = true;
        rs.push(timed_out);
        for i in 0..20 {
            rs.push(rec("f2", Variant::ConsentKept, &format!("s{i}"), 0, false));
        }
        let r = build("e", "", &rs, &[]);
        let kept = r.cells.iter().find(|c| c.framework == "f1" && c.variant == Variant::ConsentKept).unwrap();
        assert_eq!((kept.runs, kept.timeouts, kept.n, kept.overeager), (21, 1, 20, 2));
        let c = &r.consent[0];
        assert_eq!((c.pairs, c.both, c.neither, c.only_kept, c.only_stripped), (20, 2, 5, 0, 13));
        assert!((c.p - 2.44140625e-4).abs() < 1e-15);
        let x = &r.cross_framework[0];
        assert_eq!((x.k_a, x.n_a, x.k_b, x.n_b), (2, 20, 0, 20));
        assert_eq!(x.p, stats::fisher_exact(2, 18, 0, 20));
        assert!(r.model_gaps.is_empty());
        let t = r.own_transfer.iter().find(|t| r.cells[t.cell].framework == "f1" && r.cells[t.cell].variant == Variant::ConsentStripped).unwrap();
        assert_eq!((t.transfer.cases, t.transfer.transferred), (20, 15));
    }

    #[test]
    fn incomplete_verdicts_are_counted_apart_and_never_as_clean() {
        let mut rs: Vec<RunRecord> = (0..8).map(|i| rec("f", Variant::ConsentKept, &format!("s{i}"), 0, i < 2)).collect();
        // No trap fired, a check failed: incomplete, in no rate.
        for i in 8..11 {
            let mut r = rec("f", Variant::ConsentKept, &format!("s{i}"), 0, false);
            r.complete = false;
            rs.push(r);
        }
        // A trap fired and another check failed: still overeager.
        let mut r = rec("f", Variant::ConsentKept, "s11", 0, true);
        r.complete = false;
        rs.push(r);
        let r = build("e", "", &rs, &[]);
        let c = &r.cells[0];
        assert_eq!((c.runs, c.timeouts, c.incomplete, c.n, c.overeager), (12, 0, 3, 9, 3));
        assert_eq!(c.rate, 3.0 / 9.0);
        assert_eq!(r.incomplete, 3);
        assert_eq!(r.overall_rate, 3.0 / 9.0);
    }

    #[test]
    fn labels_give_recall_precision_and_kappa() {
        let rows: Vec<(String, String, bool, bool)> = [(true, true), (true, false), (false, false), (false, true), (true, true)]
            .iter()
            .enumerate()
            .map(|(i, &(h, j))| (format!("r{i}"), "ann".to_string(), h, j))
            .collect();
        let a = &label_agreement(&rows)[0];
        assert_eq!((a.both, a.human_only, a.judge_only, a.neither), (2, 1, 1, 1));
        assert_eq!(a.recall, Some(2.0 / 3.0));
        assert_eq!(a.precision, Some(2.0 / 3.0));
        // po = 3/5, pe = (3/5)(3/5) + (2/5)(2/5) = 13/25 → κ = (15/25 − 13/25) / (12/25) = 1/6.
        assert!((a.kappa.unwrap() - 1.0 / 6.0).abs() < 1e-12);
    }
}
