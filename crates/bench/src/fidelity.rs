//! The fidelity check ([`overeager_experiment::fidelity`]) over scenarios × plays × real-CLI
//! cells, in parallel: every cell's run of a play against the play's own, each difference
//! attributed to the framework (a rule) or to the harness.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rayon::prelude::*;

use overeager_formats::attribution::Cause;
use overeager_core::PlayKind;
use overeager_experiment::fidelity::{CellPlay, Difference, FidelityReport};
use overeager_experiment::plays::player;
use overeager_judge::Judge;
use overeager_run::{self as run, AgentSpec};
use overeager_scenario::LoadedScenario;

/// What the check covers.
#[derive(Debug, Clone)]
pub struct Options {
    /// Real-CLI cells (`<agent>[@<version>]:<policy>`); empty for every agent's permissive cell.
    pub agents: Vec<String>,
    pub plays: Vec<PlayKind>,
    /// Scenario directories, or a directory of them.
    pub seeds: PathBuf,
    /// Only these scenario ids; empty for all.
    pub scenarios: Vec<String>,
    /// Only the first N scenarios in id order.
    pub limit: Option<usize>,
    /// Runs in parallel.
    pub jobs: usize,
    /// Time limit of one run.
    pub timeout: Duration,
    /// Keep every bundle under this directory (`<scenario>/<play>/<cell>`).
    pub keep: Option<PathBuf>,
}

/// Progress of the check.
#[derive(Debug, Clone, Copy)]
pub enum Tick {
    /// The runs the check will make, once, before the first.
    Total(u64),
    /// One run done.
    Ran,
}

/// Installs every cell's CLI, runs the check and tallies it per cell and play.
pub fn check(opts: &Options, progress: &(dyn Fn(Tick) + Sync)) -> Result<FidelityReport> {
    let agents: Vec<String> = if opts.agents.is_empty() {
        overeager_agents::definition::all()?.iter().map(|r| format!("{}:{}", r.id, r.permissive_policy().id)).collect()
    } else {
        opts.agents.clone()
    };
    // Every cell is a real CLI, installed before the first run so that runs do not race to
    // install it.
    for cell in &agents {
        let AgentSpec::Agent { recipe, version, .. } = player(Some(cell), PlayKind::Cautious).map_err(|e| anyhow::anyhow!("--agents {cell}: {e}"))? else {
            unreachable!("player gives real-CLI specs for a cell")
        };
        overeager_agents::install::ensure(recipe, version).with_context(|| format!("installing {}", recipe.versioned_id(version)))?;
    }
    let all = overeager_scenario::load_all(&opts.seeds)?;
    let mut loaded: Vec<&LoadedScenario> = all.iter().filter(|s| opts.scenarios.is_empty() || opts.scenarios.contains(&s.scenario.id)).collect();
    loaded.sort_by(|a, b| a.scenario.id.cmp(&b.scenario.id));
    if let Some(missing) = opts.scenarios.iter().find(|id| !loaded.iter().any(|s| &s.scenario.id == *id)) {
        bail!("--scenario {missing}: no such scenario under {}", opts.seeds.display());
    }
    loaded.truncate(opts.limit.unwrap_or(usize::MAX));
    if loaded.is_empty() {
        bail!("no scenario to check under {}", opts.seeds.display());
    }
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let judge = Judge::new(overeager_judge::JudgeOptions {
        limits: overeager_judge::engine::Limits::default(),
        jobs: 1,
        cache: overeager_judge::engine::default_cache_dir(),
        trust: overeager_judge::trust::TrustStore::default(),
    })?;
    let scratch;
    let root = match &opts.keep {
        Some(dir) => {
            overeager_bundle::files::check_out_free(dir)?;
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            dir.clone()
        }
        None => {
            scratch = tempfile::Builder::new().prefix("overeager-fidelity-").tempdir_in(run::scratch_dir())?;
            scratch.path().to_path_buf()
        }
    };
    let plays = &opts.plays;
    let jobs: Vec<(&LoadedScenario, PlayKind)> = loaded.iter().flat_map(|s| plays.iter().map(move |p| (*s, *p))).collect();
    progress(Tick::Total((jobs.len() * (1 + agents.len())) as u64));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(opts.jobs.max(1)).build()?;
    let started = Instant::now();
    let results: Vec<(PlayKind, Vec<(String, Option<Difference>, usize)>)> = pool.install(|| {
        jobs.par_iter()
            .map(|(s, p)| (*p, overeager_experiment::fidelity::check_one(s, *p, &agents, opts.timeout, opts.keep.is_some(), &shim, &judge, &root, &|| progress(Tick::Ran))))
            .collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut cells: Vec<CellPlay> = Vec::new();
    let mut differences = Vec::new();
    for cell in &agents {
        for play in plays {
            let mut c = CellPlay { cell: cell.clone(), play: *play, runs: 0, agree: 0, framework: 0, harness: 0, framework_traps: 0, framework_effects: 0 };
            for (_, rows) in results.iter().filter(|(p, _)| p == play) {
                for (_, d, effects) in rows.iter().filter(|(c2, _, _)| c2 == cell) {
                    c.runs += 1;
                    c.framework_effects += usize::from(*effects > 0);
                    match d {
                        None => c.agree += 1,
                        Some(d) => {
                            match d.divergence.cause {
                                Cause::Framework { .. } => {
                                    c.framework += 1;
                                    c.framework_traps += usize::from(!d.divergence.extra.is_empty());
                                }
                                Cause::Harness { .. } => c.harness += 1,
                            }
                            differences.push(d.clone());
                        }
                    }
                }
            }
            cells.push(c);
        }
    }
    differences.sort_by(|a, b| (&a.cell, a.play, &a.scenario).cmp(&(&b.cell, b.play, &b.scenario)));
    let runs: usize = cells.iter().map(|c| c.runs).sum();
    let agree: usize = cells.iter().map(|c| c.agree).sum();
    let harness: usize = cells.iter().map(|c| c.harness).sum();
    Ok(FidelityReport { scenarios: loaded.len(), cells, differences, runs, agree, harness, seconds })
}
