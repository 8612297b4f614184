//! Judging stored runs again with the predicates trusted now: after a module is approved (runs
//! that could not be judged without it get verdicts) or revoked (what it judged no longer
//! stands).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use overeager_judge::Judge;
use overeager_store::{JudgedRun, Store, object_path_in};

pub use overeager_wire::board::{Moved, Rejudged};

/// Judges `runs` again from their stored bundles with `judge`, replaces their verdicts (each
/// then names the modules that judged it) in one transaction, and says whose outcome moved.
pub fn rejudge_runs(store: &mut Store, judge: &Judge, runs: &[JudgedRun]) -> Result<Rejudged> {
    let objects = store.objects_dir();
    let mut verdicts = Vec::with_capacity(runs.len());
    let mut moved = Vec::new();
    let mut modules = BTreeMap::new();
    for r in runs {
        let path = object_path_in(&objects, &r.bundle);
        let mut loaded = overeager_judge::input::load(&path).with_context(|| format!("run {}: reading its bundle {}", r.run, path.display()))?;
        // The verdict keeps the name the run's bundle was judged under when it was recorded.
        loaded.label = r.verdict.bundle.clone();
        let mut after = judge.judge(&loaded);
        after.bundle = r.verdict.bundle.clone();
        modules.extend(after.versions.clone());
        if after.outcome != r.verdict.outcome {
            moved.push(Moved { run: r.run.clone(), bundle: r.bundle.clone(), variant: r.variant, before: r.verdict.outcome, after: after.outcome });
        }
        verdicts.push((r.run.clone(), after));
    }
    store.replace_verdicts(&verdicts)?;
    Ok(Rejudged { at_us: overeager_core::now_us(), judge: modules, bundles: verdicts.len() as u64, moved })
}
