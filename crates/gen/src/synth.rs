//! Algorithm 1: seeds → mutations sampled as a Latin hypercube → diversity gate → validator →
//! admitted, until the target size.
//!
//! The output depends only on the seeds, the registries, `n`, the generator seed and θ: not on
//! the number of threads, and not on whether the run was interrupted and resumed. Candidates are
//! considered in a fixed order; candidate *i* is admitted iff it is at distance ≥ θ from every
//! scenario admitted before it and the validator admits it. Validations run in parallel (they
//! are pure functions of the candidate), decisions are taken in order.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use overeager_core::registry::Atoms;
use overeager_core::scenario::Provenance;
use overeager_core::{Scenario, Variant, render_prompt};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::fixture::Fixture;
use super::mutate::{self, AXES, Candidate};
use super::sample::{Features, latin_hypercube, round_rng};
use super::validate::{Validation, Validator};
use overeager_scenario::{self as scenario, LoadedScenario};

/// What `gen` is asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenParams {
    /// The seed directory, as given.
    pub seeds: String,
    pub n: usize,
    pub seed: u64,
    /// Minimum Jaccard distance to every admitted scenario.
    pub theta: f64,
    /// The real-CLI cell whose runs of the plays must keep their gradient (`None`: the
    /// scripted reference agent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validate_with: Option<String>,
}

/// The default θ: two candidates closer than this share most of their prompt, files, traps
/// and steps.
pub const DEFAULT_THETA: f64 = 0.12;

/// Candidates decided per window: validated in parallel, then admitted in order.
const WINDOW: usize = 32;
/// Rounds of sampling before giving up on reaching `n`.
const MAX_ROUNDS: u64 = 12;

/// Finds the registries in `start` or the nearest ancestor holding both `archetypes.toml` and
/// `atoms.toml`, and loads the atoms. (The archetypes are checked with the seeds, by
/// `scenario::check_all`.)
pub fn find_atoms(start: &Path) -> Result<Atoms> {
    let abs = start.canonicalize().with_context(|| format!("{} does not exist", start.display()))?;
    let dir = abs
        .ancestors()
        .find(|d| d.join("archetypes.toml").is_file() && d.join("atoms.toml").is_file())
        .with_context(|| format!("no archetypes.toml and atoms.toml in {} or above it; the generator needs both registries", start.display()))?;
    let path = dir.join("atoms.toml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    Atoms::from_toml(&path.display().to_string(), &text)
        .map_err(|errs| anyhow::anyhow!("{}", errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")))
}

/// The gates a candidate passes, in order.
pub const STAGES: [&str; 5] = ["mutate", "diversity", "validate", "designed", "consent_pair"];

/// Counts of one stage: how many passed, and rejections by reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageCount {
    pub stage: String,
    pub passed: usize,
    pub rejected: BTreeMap<String, usize>,
}

impl StageCount {
    fn reject(&mut self, reason: impl Into<String>) {
        *self.rejected.entry(reason.into()).or_default() += 1;
    }
}

/// `gen-report.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenReport {
    pub schema: String,
    pub params: GenParams,
    /// Seeds found, and those the validator rejected (not used).
    pub seeds: usize,
    pub seeds_rejected: BTreeMap<String, String>,
    pub candidates: usize,
    /// In order: mutate, diversity, validate, designed (each play fires exactly its declared
    /// traps), consent_pair.
    pub stages: Vec<StageCount>,
    pub admitted: usize,
    /// Admitted scenarios per axis level.
    pub axis_balance: BTreeMap<String, BTreeMap<String, usize>>,
    /// Candidates sampled per axis level (the hypercube's balance before the gates).
    pub axis_sampled: BTreeMap<String, BTreeMap<String, usize>>,
    pub archetypes: BTreeMap<String, usize>,
    pub per_seed: BTreeMap<String, usize>,
    /// The smallest distance between two admitted scenarios.
    pub min_distance: Option<f64>,
    /// Per axis, Pearson's χ² test that the admitted scenarios spread evenly over the levels
    /// sampled (a small p means the gates favoured some levels).
    #[serde(default)]
    pub axis_chi2: BTreeMap<String, overeager_core::stats::GoodnessOfFit>,
    /// The two seeds closest to each other by the diversity gate's distance (on content: the
    /// seed feature left out), and that distance.
    #[serde(default)]
    pub seed_closest: Option<(String, String, f64)>,
    /// Candidates that reached the validator and were turned away, with their mutations: the
    /// cases a seed or mutator author wants to look at.
    pub rejections: Vec<RejectedCandidate>,
}

/// A candidate rejected by the validator or the designed-traps check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RejectedCandidate {
    pub id: String,
    pub stage: String,
    pub reason: String,
    pub mutations: Vec<String>,
}

const REPORT_SCHEMA: &str = "overeager-gen-report/1";
const JOURNAL: &str = ".gen-journal.jsonl";
/// The report file in the output directory.
pub const REPORT: &str = "gen-report.json";
/// The content-hash manifest in the output directory.
pub const MANIFEST: &str = "MANIFEST";

/// Lines of the manifest `expected` missing from `actual` and the reverse, as messages.
pub fn manifest_differences(expected: &Path, actual: &Path) -> Result<Vec<String>> {
    let read = |p: &Path| -> Result<std::collections::BTreeSet<String>> {
        Ok(std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?.lines().map(String::from).collect())
    };
    let (want, got) = (read(expected)?, read(actual)?);
    let mut out: Vec<String> = want.difference(&got).map(|l| format!("{}: expected but not generated: {l}", expected.display())).collect();
    out.extend(got.difference(&want).map(|l| format!("{}: generated but not expected: {l}", actual.display())));
    Ok(out)
}

/// One validated candidate, as remembered across an interruption.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Outcome {
    hash: String,
    admitted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    designed_ok: bool,
}

impl Outcome {
    fn of(hash: String, v: &Validation) -> Outcome {
        let reason = v.rejection.as_ref().map(|r| serde_json::to_value(r).ok().and_then(|j| j["reason"].as_str().map(String::from)).unwrap_or_else(|| "rejected".into()));
        Outcome { hash, admitted: v.admitted, reason, designed_ok: v.designed_mismatch.is_empty() }
    }
}

#[derive(Serialize, Deserialize)]
struct JournalHeader {
    schema: String,
    params: GenParams,
}

/// Progress callbacks for the CLI.
pub trait Progress: Sync {
    fn seeds_validated(&self, _total: usize, _rejected: usize) {}
    fn candidate(&self, _admitted: usize, _considered: usize) {}
}

impl Progress for () {}

/// The consent pair differs exactly by the consent block.
pub fn consent_pair_ok(s: &Scenario) -> bool {
    let kept = render_prompt(&s.prompt, Variant::ConsentKept);
    let stripped = render_prompt(&s.prompt, Variant::ConsentStripped);
    kept.consent_block.is_some() && kept.without_block() == stripped.text && kept.text != stripped.text
}

struct Seed {
    loaded: LoadedScenario,
    fixture: Fixture,
}

/// The two seeds closest to each other by the diversity gate's distance, computed on their
/// content (every seed gets the same seed feature, so only task, fixture, traps and plays count).
fn closest_seeds(seeds: &[Seed]) -> Option<(String, String, f64)> {
    let features: Vec<(&str, Features)> = seeds.iter().map(|s| (s.loaded.scenario.id.as_str(), Features::of("", &s.loaded.scenario, &s.fixture))).collect();
    let mut best: Option<(String, String, f64)> = None;
    for (i, (a, fa)) in features.iter().enumerate() {
        for (b, fb) in &features[i + 1..] {
            let d = fa.distance(fb);
            if best.as_ref().is_none_or(|(_, _, m)| d < *m) {
                best = Some((a.to_string(), b.to_string(), (d * 1e6).round() / 1e6));
            }
        }
    }
    best
}

/// The output directory: refuses to mix with anything that is not an earlier run of the same
/// request, so nothing of the user's is overwritten.
fn open_out(out: &Path, params: &GenParams) -> Result<BTreeMap<String, Outcome>> {
    let journal = out.join(JOURNAL);
    if out.exists() {
        let mut entries = std::fs::read_dir(out).with_context(|| format!("cannot read {}", out.display()))?;
        if entries.next().is_some() {
            if !journal.is_file() {
                bail!("{} is not empty and was not written by `overeager gen`; choose a new or empty directory", out.display());
            }
            let text = std::fs::read_to_string(&journal)?;
            let mut lines = text.lines();
            let header: JournalHeader = lines.next().and_then(|l| serde_json::from_str(l).ok()).with_context(|| format!("{} has no valid header line; delete the directory to start over", journal.display()))?;
            if header.params != params.clone() {
                bail!(
                    "{} holds a run with different parameters ({}); use another --out, or delete it to start over",
                    out.display(),
                    serde_json::to_string(&header.params)?
                );
            }
            // A line cut short by an interruption is simply validated again.
            return Ok(lines.filter_map(|l| serde_json::from_str::<Outcome>(l).ok()).map(|o| (o.hash.clone(), o)).collect());
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let header = JournalHeader { schema: "overeager-gen-journal/1".into(), params: params.clone() };
    std::fs::write(&journal, format!("{}\n", serde_json::to_string(&header)?))?;
    Ok(BTreeMap::new())
}

/// Builds candidate `index` of `round` from its hypercube point.
fn build(seed: &Seed, point: &[usize], atoms: &Atoms, params: &GenParams, round: u64, index: u64) -> Result<Candidate, String> {
    let mut c = Candidate { scenario: seed.loaded.scenario.clone(), fixture: seed.fixture.clone(), mutations: Vec::new() };
    let mut rng = mutate::rng_for(params.seed, round, index);
    let mut axes = BTreeMap::new();
    for ((axis, levels), &li) in AXES.iter().zip(point) {
        let level = levels[li];
        mutate::apply(axis, level, &mut c, atoms, &mut rng).map_err(|e| format!("not_applicable:{axis}={level}: {}", e.0))?;
        axes.insert(axis.to_string(), level.to_string());
    }
    let seed_id = seed.loaded.scenario.id.clone();
    let digest = overeager_core::sha256_hex(format!("{seed_id}\0{}", c.mutations.join("\0")).as_bytes());
    c.scenario.id = format!("{seed_id}-{}", &digest[..8]);
    c.scenario.axes = axes;
    c.scenario.provenance = Some(Provenance { seed: seed_id, mutations: c.mutations.clone(), generator_seed: params.seed });
    Ok(c)
}

/// Writes a candidate as `<parent>/<id>/` and loads it back through the scenario checker.
fn materialize(c: &Candidate, parent: &Path) -> Result<LoadedScenario> {
    let dir = parent.join(&c.scenario.id);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("scenario.toml"), c.scenario.to_toml())?;
    c.fixture.write(&dir.join("fixture"))?;
    let loaded = scenario::load(&dir).map_err(|errs| anyhow::anyhow!("generated scenario does not check: {}", errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))?;
    if loaded.scenario != c.scenario {
        bail!("generated scenario {} does not read back as it was written", c.scenario.id);
    }
    Ok(loaded)
}

/// Moves a checked candidate into the output directory, replacing an earlier copy of itself.
fn publish(c: &Candidate, out: &Path) -> Result<String> {
    let staging = out.join(format!(".partial-{}", c.scenario.id));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    std::fs::create_dir_all(&staging)?;
    let loaded = materialize(c, &staging)?;
    let dest = out.join(&c.scenario.id);
    if dest.exists() {
        std::fs::remove_dir_all(&dest)?;
    }
    std::fs::rename(staging.join(&c.scenario.id), &dest)?;
    std::fs::remove_dir(&staging)?;
    Ok(loaded.hash)
}

/// Runs the generator; `validator` runs and judges each candidate's plays (through the cell
/// `params.validate_with` names, if any).
pub fn generate(params: &GenParams, out: &Path, validator: &dyn Validator, progress: &dyn Progress) -> Result<GenReport> {
    if validator.cell() != params.validate_with.as_deref() {
        bail!("the validator plays through {:?}, the parameters name {:?}", validator.cell(), params.validate_with);
    }
    if params.n == 0 {
        bail!("--n must be at least 1");
    }
    if !(0.0..1.0).contains(&params.theta) {
        bail!("--theta must be in [0, 1)");
    }
    let seeds_dir = PathBuf::from(&params.seeds);
    let atoms = find_atoms(&seeds_dir)?;
    // `check_all` also checks archetypes and anchors against the registry above the seeds.
    let report = scenario::check_all(std::slice::from_ref(&seeds_dir)).map_err(anyhow::Error::msg)?;
    if !report.errors.is_empty() {
        let problems: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
        bail!("the seeds have problems; fix them first:\n{}", problems.join("\n"));
    }

    // Seeds are validated like any candidate; a seed that does not separate the plays is not used.
    let validated: Vec<(LoadedScenario, Validation)> = report
        .loaded
        .into_par_iter()
        .map(|s| -> Result<_> {
            let v = validator.validate_in_scratch(&s)?;
            Ok((s, v))
        })
        .collect::<Result<_>>()?;
    let seeds_total = validated.len();
    let mut seeds_rejected = BTreeMap::new();
    let mut seeds = Vec::new();
    for (s, v) in validated {
        if v.admitted && v.designed_mismatch.is_empty() {
            let fixture = Fixture::load(&s.fixture())?;
            seeds.push(Seed { loaded: s, fixture });
        } else {
            let why = v.reason.clone().unwrap_or_else(|| format!("plays {:?} do not fire exactly their declared traps", v.designed_mismatch));
            seeds_rejected.insert(s.scenario.id.clone(), why);
        }
    }
    progress.seeds_validated(seeds_total, seeds_rejected.len());
    if seeds.is_empty() {
        bail!("no seed passes the validator: {seeds_rejected:?}");
    }

    let mut journal_known = open_out(out, params)?;
    let mut journal = std::fs::OpenOptions::new().append(true).open(out.join(JOURNAL))?;
    let scratch = tempfile::Builder::new().prefix("overeager-gen-").tempdir_in(validator.scratch_dir())?;

    let mut stages: BTreeMap<String, StageCount> = STAGES.iter().map(|s| (s.to_string(), StageCount { stage: s.to_string(), ..Default::default() })).collect();
    let mut axis_sampled: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let mut admitted: Vec<(Candidate, Features, String)> = Vec::new();
    let mut considered = 0usize;
    let mut rejections = Vec::new();
    let dims: Vec<usize> = std::iter::once(seeds.len()).chain(AXES.iter().map(|(_, l)| l.len())).collect();

    'rounds: for round in 0..MAX_ROUNDS {
        let batch = if round == 0 { params.n } else { (2 * (params.n - admitted.len())).max(WINDOW) };
        let points = latin_hypercube(&dims, batch, &mut round_rng(params.seed, round));
        for (w, window) in points.chunks(WINDOW).enumerate() {
            // Build and pre-gate sequentially; the gate only tightens as admissions accrue.
            let mut built: Vec<Result<(Candidate, Features), String>> = Vec::with_capacity(window.len());
            for (k, point) in window.iter().enumerate() {
                let index = (w * WINDOW + k) as u64;
                let seed = &seeds[point[0]];
                for ((axis, levels), &li) in AXES.iter().zip(&point[1..]) {
                    *axis_sampled.entry(axis.to_string()).or_default().entry(levels[li].to_string()).or_default() += 1;
                }
                built.push(build(seed, &point[1..], &atoms, params, round, index).map(|c| {
                    let f = Features::of(&seed.loaded.scenario.id, &c.scenario, &c.fixture);
                    (c, f)
                }));
            }
            let too_close = |f: &Features, admitted: &[(Candidate, Features, String)]| admitted.iter().any(|(_, g, _)| f.distance(g) < params.theta);
            let to_validate: Vec<usize> = built
                .iter()
                .enumerate()
                .filter(|(_, b)| matches!(b, Ok((_, f)) if !too_close(f, &admitted)))
                .map(|(i, _)| i)
                .collect();
            let outcomes: BTreeMap<usize, Result<Outcome, String>> = to_validate
                .par_iter()
                .map(|&i| {
                    let (c, _) = built[i].as_ref().expect("filtered to built candidates");
                    let result = (|| -> Result<Outcome> {
                        let dir = scratch.path().join(format!("r{round}-{w}-{i}"));
                        std::fs::create_dir_all(&dir)?;
                        let loaded = materialize(c, &dir)?;
                        if let Some(o) = journal_known.get(&loaded.hash) {
                            std::fs::remove_dir_all(&dir).ok();
                            return Ok(o.clone());
                        }
                        let work = dir.join("work");
                        let v = validator.validate(&loaded, &work);
                        std::fs::remove_dir_all(&dir).ok();
                        Ok(Outcome::of(loaded.hash, &v))
                    })();
                    (i, result.map_err(|e| format!("{e:#}")))
                })
                .collect();
            let mut new_lines = String::new();
            for (i, b) in built.into_iter().enumerate() {
                considered += 1;
                let (c, f) = match b {
                    Err(reason) => {
                        let code = reason.split(':').take(2).collect::<Vec<_>>().join(":");
                        stages.get_mut("mutate").expect("stage").reject(code);
                        continue;
                    }
                    Ok(x) => x,
                };
                stages.get_mut("mutate").expect("stage").passed += 1;
                if admitted.iter().any(|(a, _, _)| a.scenario.id == c.scenario.id) {
                    stages.get_mut("diversity").expect("stage").reject("duplicate");
                    continue;
                }
                if too_close(&f, &admitted) {
                    stages.get_mut("diversity").expect("stage").reject("too_close");
                    continue;
                }
                stages.get_mut("diversity").expect("stage").passed += 1;
                let o = match outcomes.get(&i).expect("every gated candidate was validated") {
                    Ok(o) => o.clone(),
                    Err(e) => {
                        stages.get_mut("validate").expect("stage").reject("invalid_candidate");
                        tracing::warn!(candidate = %c.scenario.id, "generated candidate is invalid: {e}");
                        continue;
                    }
                };
                if !journal_known.contains_key(&o.hash) {
                    new_lines.push_str(&serde_json::to_string(&o)?);
                    new_lines.push('\n');
                    journal_known.insert(o.hash.clone(), o.clone());
                }
                let rejected = |stage: &str, reason: &str| RejectedCandidate { id: c.scenario.id.clone(), stage: stage.into(), reason: reason.into(), mutations: c.mutations.clone() };
                if !o.admitted {
                    let reason = o.reason.clone().unwrap_or_default();
                    rejections.push(rejected("validate", &reason));
                    stages.get_mut("validate").expect("stage").reject(reason);
                    continue;
                }
                stages.get_mut("validate").expect("stage").passed += 1;
                if !o.designed_ok {
                    rejections.push(rejected("designed", "fired_traps_differ_from_declared"));
                    stages.get_mut("designed").expect("stage").reject("fired_traps_differ_from_declared");
                    continue;
                }
                stages.get_mut("designed").expect("stage").passed += 1;
                if !consent_pair_ok(&c.scenario) {
                    stages.get_mut("consent_pair").expect("stage").reject("pair_differs_beyond_block");
                    continue;
                }
                stages.get_mut("consent_pair").expect("stage").passed += 1;
                let hash = publish(&c, out)?;
                if hash != o.hash {
                    bail!("scenario {} changed between validation and publication", c.scenario.id);
                }
                admitted.push((c, f, hash));
                progress.candidate(admitted.len(), considered);
                if admitted.len() == params.n {
                    journal.write_all(new_lines.as_bytes())?;
                    break 'rounds;
                }
            }
            journal.write_all(new_lines.as_bytes())?;
            journal.flush()?;
            progress.candidate(admitted.len(), considered);
        }
    }

    let mut axis_balance: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let mut archetypes: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_seed: BTreeMap<String, usize> = BTreeMap::new();
    for (c, _, _) in &admitted {
        for (axis, level) in &c.scenario.axes {
            *axis_balance.entry(axis.clone()).or_default().entry(level.clone()).or_default() += 1;
        }
        *archetypes.entry(c.scenario.archetype.clone()).or_default() += 1;
        if let Some(p) = &c.scenario.provenance {
            *per_seed.entry(p.seed.clone()).or_default() += 1;
        }
    }
    let mut axis_chi2 = BTreeMap::new();
    for (axis, sampled) in &axis_sampled {
        let counts: Vec<u64> = sampled.keys().map(|level| axis_balance.get(axis).and_then(|b| b.get(level)).copied().unwrap_or(0) as u64).collect();
        if let Ok(g) = overeager_core::stats::chi2_uniform(&counts) {
            axis_chi2.insert(axis.clone(), g);
        }
    }
    let seed_closest = closest_seeds(&seeds);
    let mut min_distance: Option<f64> = None;
    for (i, (_, a, _)) in admitted.iter().enumerate() {
        for (_, b, _) in &admitted[i + 1..] {
            let d = a.distance(b);
            min_distance = Some(min_distance.map_or(d, |m| m.min(d)));
        }
    }
    let report = GenReport {
        schema: REPORT_SCHEMA.into(),
        params: params.clone(),
        seeds: seeds_total,
        seeds_rejected,
        candidates: considered,
        stages: STAGES.iter().map(|s| stages[*s].clone()).collect(),
        admitted: admitted.len(),
        axis_balance,
        axis_sampled,
        archetypes,
        per_seed,
        min_distance: min_distance.map(|d| (d * 1e6).round() / 1e6),
        axis_chi2,
        seed_closest,
        rejections,
    };
    let ids: BTreeSet<(&str, &str)> = admitted.iter().map(|(c, _, h)| (c.scenario.id.as_str(), h.as_str())).collect();
    let manifest: String = ids.iter().map(|(id, h)| format!("{h}  {id}\n")).collect();
    overeager_bundle::files::write_atomic(&out.join(MANIFEST), manifest.as_bytes())?;
    overeager_bundle::files::write_atomic(&out.join(REPORT), format!("{}\n", serde_json::to_string_pretty(&report)?).as_bytes())?;
    if admitted.len() < params.n {
        bail!(
            "admitted only {} of {} scenarios after {MAX_ROUNDS} rounds ({considered} candidates); see {} for where candidates were rejected",
            admitted.len(),
            params.n,
            out.join(REPORT).display()
        );
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No two seeds are near-duplicates by the diversity gate's distance: each stands for a
    /// situation of its own.
    #[test]
    fn no_two_seeds_are_near_duplicates() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/seeds");
        let report = overeager_scenario::check_all(&[dir]).expect("the seeds load");
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        let seeds: Vec<Seed> = report.loaded.into_iter().map(|s| Seed { fixture: Fixture::load(&s.fixture()).expect("fixture"), loaded: s }).collect();
        let (a, b, d) = closest_seeds(&seeds).expect("more than one seed");
        assert!(d >= DEFAULT_THETA, "seeds {a} and {b} are at distance {d}, closer than the diversity gate's θ = {DEFAULT_THETA}");
    }
}
