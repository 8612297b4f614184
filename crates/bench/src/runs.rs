//! Runs, timed: the scripted plays on this machine, the Docker executor against a bare
//! `docker run`, and real agent CLIs against the same CLI run bare.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::{Machine, Spread};
use overeager_audit::run_one;
use overeager_core::{PlayKind, Variant};
use overeager_agents::gateway::GatewayLatency;
use overeager_run::{self as run, AgentSpec};

/// One scenario's aggressive play, run again and again.
#[derive(Debug, Serialize)]
pub struct SingleRun {
    pub scenario: String,
    pub agent: String,
    pub wall: Spread,
}

/// Every seed × play, in sequence.
#[derive(Debug, Serialize)]
pub struct Sweep {
    pub scenarios: usize,
    pub runs: usize,
    pub wall: Spread,
    pub per_run: Spread,
}

/// The figures of [`scripted`].
#[derive(Debug, Serialize)]
pub struct RunFigures {
    pub single_run: SingleRun,
    pub sweep: Sweep,
    pub machine: Machine,
}

/// Times `iterations` runs of `scenario`'s aggressive play, then `rounds` sweeps of every seed
/// under `seeds` × every play, on the local executor.
pub fn scripted(seeds: &Path, scenario: &str, iterations: usize, rounds: usize) -> Result<RunFigures> {
    let loaded = overeager_scenario::load_all(seeds)?;
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let one = loaded.iter().find(|s| s.scenario.id == scenario).with_context(|| format!("no scenario `{scenario}` in {}", seeds.display()))?;
    let tmp = tempfile::tempdir()?;
    let mut n = 0usize;
    let mut next_out = || {
        n += 1;
        tmp.path().join(format!("b{n}"))
    };
    let timeout = Duration::from_secs(120);
    let mut single = Vec::new();
    for _ in 0..iterations.max(1) {
        let out = next_out();
        let t = Instant::now();
        run_one(one, AgentSpec::Scripted(PlayKind::Aggressive), Variant::ConsentKept, 0, timeout, &run::Executor::Local, &shim, &out)?;
        single.push(t.elapsed().as_secs_f64() * 1000.0);
        std::fs::remove_dir_all(&out)?;
    }
    let mut per_run = Vec::new();
    let mut sweeps = Vec::new();
    for _ in 0..rounds.max(1) {
        let t_sweep = Instant::now();
        for s in &loaded {
            for k in PlayKind::ALL {
                let out = next_out();
                let t = Instant::now();
                run_one(s, AgentSpec::Scripted(k), Variant::ConsentKept, 0, timeout, &run::Executor::Local, &shim, &out)?;
                per_run.push(t.elapsed().as_secs_f64() * 1000.0);
                std::fs::remove_dir_all(&out)?;
            }
        }
        sweeps.push(t_sweep.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(RunFigures {
        single_run: SingleRun { scenario: one.scenario.id.clone(), agent: "scripted:aggressive".into(), wall: Spread::of(single) },
        sweep: Sweep { scenarios: loaded.len(), runs: loaded.len() * PlayKind::ALL.len(), wall: Spread::of(sweeps), per_run: Spread::of(per_run) },
        machine: Machine::this(),
    })
}

/// Runs per second with two at a time on each side.
#[derive(Debug, Serialize)]
pub struct Parallel2 {
    /// Runs of each side.
    pub runs: usize,
    pub overeager_runs_per_s: f64,
    pub bare_runs_per_s: f64,
}

/// The figures of [`docker`].
#[derive(Debug, Serialize)]
pub struct DockerFigures {
    pub scenario: String,
    pub agent: String,
    pub overeager_run: Spread,
    pub bare_docker_run: Spread,
    /// The median observed run over the median bare one.
    pub median_ratio: f64,
    pub parallel2: Parallel2,
    pub machine: Machine,
}

/// A run on the Docker executor against a bare `docker run --rm` of the same command on the
/// same prepared sandbox: `iterations` pairs side by side, then `parallel_runs` of each two at
/// a time.
pub fn docker(seeds: &Path, scenario: &str, agent: AgentSpec, iterations: usize, parallel_runs: usize) -> Result<DockerFigures> {
    let one = overeager_scenario::load_checked(&seeds.join(scenario))?;
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let exec = run::docker::DockerExecutor::connect()?;
    let tmp = tempfile::tempdir()?;
    let bundle = |req: &run::RunRequest<'_>, out: &Path| overeager_audit::execute_to(req, out).map(drop);
    let id = agent.id();
    let f = run::docker::bench::bench(&exec, &one, agent, &shim, iterations, parallel_runs, tmp.path(), &bundle)?;
    let (ours, bare) = (Spread::of(f.overeager_ms), Spread::of(f.bare_ms));
    let (overeager_runs_per_s, bare_runs_per_s, runs) = f.parallel2;
    Ok(DockerFigures {
        scenario: one.scenario.id.clone(),
        agent: id,
        median_ratio: ours.median_ms / bare.median_ms,
        overeager_run: ours,
        bare_docker_run: bare,
        parallel2: Parallel2 { runs, overeager_runs_per_s, bare_runs_per_s },
        machine: Machine::this(),
    })
}

/// One agent on one executor.
#[derive(Debug, Serialize)]
pub struct AgentRow {
    /// The cell run (`agent@version:policy:scripted-<play>`).
    pub agent: String,
    pub version: String,
    pub executor: String,
    pub observed: Spread,
    /// The same CLI on the same prepared workspace with no observer (on this machine only).
    pub bare: Option<Spread>,
    pub median_ratio: Option<f64>,
    /// What the model gateway adds to each of the agent's calls (on this machine only).
    pub gateway: Option<GatewayLatency>,
}

/// The figures of [`agents`].
#[derive(Debug, Serialize)]
pub struct AgentsFigures {
    pub scenario: String,
    pub play: String,
    pub iterations: usize,
    pub runs: Vec<AgentRow>,
    pub machine: Machine,
}

/// Wall time of real-agent runs of `scenario` per agent (`id` or `id@version`; installed first
/// if need be) and executor, and on this machine the observers' overhead against the same CLI
/// run bare and the gateway's latency on the calls the agent made. `on_row` sees each row as it
/// is done.
pub fn agents(scenario: &Path, agents: &[String], executors: &[String], play: PlayKind, iterations: usize, on_row: &mut dyn FnMut(&AgentRow)) -> Result<AgentsFigures> {
    let one = overeager_scenario::load_checked(scenario)?;
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let tmp = tempfile::tempdir()?;
    let mut rows = Vec::new();
    let agents: Vec<String> = if agents.is_empty() { overeager_agents::definition::all()?.iter().map(|r| r.id.clone()).collect() } else { agents.to_vec() };
    for executor_name in executors {
        let executor = run::Executor::open(executor_name)?;
        for agent in &agents {
            let (recipe, version) = overeager_agents::definition::versioned(agent)?;
            let policy = &recipe.permissive_policy().id;
            let spec: AgentSpec = format!("{}:{policy}:{}{}", recipe.versioned_id(version), overeager_agents::SCRIPTED_MODEL, play).parse().map_err(anyhow::Error::msg)?;
            overeager_agents::install::ensure(recipe, version)?;
            let req = run::RunRequest { timeout: Duration::from_secs(180), ..run::RunRequest::new(&executor, &one, spec.clone(), shim.clone()) };
            let bare_here = executor_name == "local";
            let (mut ours, mut bare) = (Vec::new(), Vec::new());
            // One untimed run of each warms the page cache and the image.
            let time_ours = |i: usize| -> Result<f64> {
                let out = tmp.path().join(format!("{executor_name}-{}-{i}", recipe.id));
                let t = Instant::now();
                overeager_audit::execute_to(&req, &out)?;
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                if i != usize::MAX {
                    std::fs::remove_dir_all(&out)?;
                }
                Ok(ms)
            };
            time_ours(usize::MAX)?;
            // The model gateway (on this machine whatever the executor), on the requests this
            // agent made in the warm-up run.
            let warm = tmp.path().join(format!("{executor_name}-{}-{}", recipe.id, usize::MAX));
            let gateway = if bare_here { Some(overeager_agents::gateway::bench_bundle(&shim, &warm, &spec, &one.scenario, play, iterations.max(1) * 5)?) } else { None };
            if bare_here {
                run::local::bench_bare(&req)?;
            }
            for i in 0..iterations.max(1) {
                // Alternate which goes first, so drift in the machine's load hits both alike.
                if bare_here && i % 2 == 1 {
                    bare.push(run::local::bench_bare(&req)?);
                }
                ours.push(time_ours(i)?);
                if bare_here && i % 2 == 0 {
                    bare.push(run::local::bench_bare(&req)?);
                }
            }
            let observed = Spread::of(ours);
            let bare = (!bare.is_empty()).then(|| Spread::of(bare));
            let row = AgentRow {
                agent: spec.id(),
                version: version.to_string(),
                executor: executor_name.clone(),
                median_ratio: bare.map(|b| observed.median_ms / b.median_ms),
                observed,
                bare,
                gateway,
            };
            on_row(&row);
            rows.push(row);
        }
    }
    Ok(AgentsFigures { scenario: one.scenario.id.clone(), play: play.as_str().to_string(), iterations, runs: rows, machine: Machine::this() })
}
