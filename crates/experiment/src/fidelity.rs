//! The fidelity check: does a real CLI driven by the scripted model do what the play says?
//! A scenario's play runs through the scripted reference agent and through each real-CLI cell;
//! a run agrees when it fires the same traps and reaches the same success as the play. Every
//! difference is attributed: to the framework when a named rule of that CLI explains it, else
//! to the harness, which is overeager's fault to fix, never a finding.

use std::path::{Path, PathBuf};
use std::time::Duration;

use overeager_core::PlayKind;
use overeager_formats::attribution::Divergence;
use overeager_scenario::LoadedScenario;
use overeager_judge::Judge;
use overeager_formats::framework::compare;
use overeager_run::{AgentSpec, Executor};
use serde::Serialize;

use crate::plays::{player, run_and_judge};

/// One real-CLI run that does not agree with its play.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    pub scenario: String,
    pub play: PlayKind,
    pub cell: String,
    #[serde(flatten)]
    pub divergence: Divergence,
    /// The kept bundle, when `--keep` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<PathBuf>,
}

/// Agreement of one cell under one play.
#[derive(Debug, Clone, Serialize)]
pub struct CellPlay {
    pub cell: String,
    pub play: PlayKind,
    pub runs: usize,
    pub agree: usize,
    pub framework: usize,
    pub harness: usize,
    /// Differences in which a trap fired that the play does not fire, by the framework's
    /// doing: the framework's activity charged to the model (none expected, since the judge
    /// counts the model's tool calls only).
    pub framework_traps: usize,
    /// Runs whose verdict lists framework effects: traps the framework's own activity would
    /// fire, reported apart.
    pub framework_effects: usize,
}

/// The whole check.
#[derive(Debug, Clone, Serialize)]
pub struct FidelityReport {
    pub scenarios: usize,
    pub cells: Vec<CellPlay>,
    pub differences: Vec<Difference>,
    pub runs: usize,
    pub agree: usize,
    pub harness: usize,
    pub seconds: f64,
}

/// One scenario × play: the play's own run, then each cell's.
/// Each cell's difference, if any, and how many framework effects its verdict lists; `ran` is
/// called after each run; with `keep`, a difference names its bundle.
#[allow(clippy::too_many_arguments)]
pub fn check_one(s: &LoadedScenario, play: PlayKind, cells: &[String], timeout: Duration, keep: bool, shim: &Path, judge: &Judge, root: &Path, ran: &dyn Fn()) -> Vec<(String, Option<Difference>, usize)> {
    let dir = root.join(&s.scenario.id).join(play.as_str());
    let local = Executor::Local;
    let reference = run_and_judge(s, AgentSpec::Scripted(play), timeout, judge, &local, shim, &dir.join("scripted"));
    ran();
    let mut out = Vec::new();
    for cell in cells {
        let bundle = dir.join(cell.replace(':', "-"));
        let spec = player(Some(cell), play).expect("cells were checked");
        let rules = spec.attribution_rules();
        let real = run_and_judge(s, spec, timeout, judge, &local, shim, &bundle);
        ran();
        let effects = real.as_ref().map_or(0, |(v, _)| v.framework_effects.len());
        let divergence = match (&reference, real) {
            (Err(e), _) => Some(Divergence::failed(format!("the scripted play could not be run: {e:#}"))),
            (_, Err(e)) => Some(Divergence::failed(format!("the run failed: {e:#}"))),
            (Ok((pv, play_events)), Ok((rv, events))) => compare(cell, &rules, (pv, play_events), (&rv, &events)),
        };
        let d = divergence.map(|divergence| Difference {
            scenario: s.scenario.id.clone(),
            play,
            cell: cell.clone(),
            divergence,
            bundle: keep.then(|| bundle.clone()),
        });
        out.push((cell.clone(), d, effects));
    }
    out
}
