//! Experiments, timed: simulated runs through every stage into a store, a scripted experiment
//! on one Docker engine and then a pool of them, and a report of a stored experiment.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use overeager_experiment::{self as experiment, Options};
use overeager_store::{HostProgress, Store};

/// The figures of [`simulated`].
#[derive(Debug, Serialize)]
pub struct ExperimentFigures {
    pub runs: usize,
    pub seconds: f64,
    pub runs_per_second: f64,
    pub jobs: usize,
    pub failed: usize,
}

/// Runs two simulated agents on every seed under `seeds` × both variants × `replicates` into a
/// fresh store: every run is run, packed, stored, judged and recorded.
pub fn simulated(seeds: &Path, replicates: u32, jobs: Option<usize>, progress: bool) -> Result<ExperimentFigures> {
    let seeds = seeds.canonicalize().with_context(|| format!("{} does not exist", seeds.display()))?;
    let dir = tempfile::tempdir()?;
    let plan = dir.path().join("bench.toml");
    std::fs::write(
        &plan,
        format!(
            "id = \"bench\"\nscenarios = {:?}\nreplicates = {replicates}\nseed = 1\n\n[[agent]]\nagent = \"sim:permissive\"\nmodel = \"sim\"\nframework = \"sim-permissive\"\n\n[[agent]]\nagent = \"sim:ask\"\nmodel = \"sim\"\nframework = \"sim-ask\"\n",
            seeds.display().to_string()
        ),
    )?;
    let store = Store::open(&dir.path().join("bench.db"))?;
    let out = experiment::run(store, &plan, &Options { jobs, progress, ..Default::default() })?;
    Ok(ExperimentFigures {
        runs: out.executed,
        seconds: out.seconds,
        runs_per_second: out.executed as f64 / out.seconds,
        jobs: jobs.unwrap_or_else(|| crate::Machine::this().cores),
        failed: out.failed,
    })
}

/// A report of a stored experiment, built and written `rounds` times.
#[derive(Debug, Serialize)]
pub struct ReportFigures {
    pub runs: u64,
    pub rounds: usize,
    /// The fastest round: reading, computing, and writing every table, the JSON and the figures.
    pub seconds_best: f64,
    /// The fastest reading and computing alone.
    pub seconds_read_and_compute_best: f64,
    pub rounds_seconds: Vec<f64>,
}

/// Builds and writes the report of `experiment` in the store at `db`, `rounds` times.
pub fn report(db: &Path, experiment: &str, rounds: usize) -> Result<ReportFigures> {
    let store = Store::open_existing(db)?;
    let mut times = Vec::new();
    let mut runs = 0;
    for _ in 0..rounds.max(1) {
        let dir = tempfile::tempdir()?;
        let t0 = Instant::now();
        let r = overeager_report::of_experiment(&store, experiment)?;
        let t_build = t0.elapsed().as_secs_f64();
        overeager_report::write_files(dir.path(), &r, true)?;
        times.push((t_build, t0.elapsed().as_secs_f64()));
        runs = r.runs;
    }
    Ok(ReportFigures {
        runs,
        rounds: times.len(),
        seconds_best: times.iter().map(|t| t.1).fold(f64::INFINITY, f64::min),
        seconds_read_and_compute_best: times.iter().map(|t| t.0).fold(f64::INFINITY, f64::min),
        rounds_seconds: times.iter().map(|t| t.1).collect(),
    })
}

/// A Docker engine of the pool: its address, and its TLS client files if it needs them.
#[derive(Debug, Clone)]
pub struct Engine {
    pub url: String,
    pub tls: Option<PathBuf>,
}

/// One pass of [`pool`].
#[derive(Debug, Serialize)]
pub struct PoolPass {
    pub pass: String,
    pub engines: usize,
    pub runs: usize,
    pub seconds: f64,
    pub runs_per_second: f64,
    /// Each engine's share.
    pub hosts: Vec<HostProgress>,
}

/// The figures of [`pool`].
#[derive(Debug, Serialize)]
pub struct PoolFigures {
    pub passes: Vec<PoolPass>,
    pub parallelism_per_engine: usize,
    /// All the engines' runs per second over the first one's alone.
    pub ratio: f64,
}

/// The same scripted experiment (the first `scenarios` seeds × the cautious and the aggressive
/// play × both variants × `replicates`) on the first engine alone, then on every engine, each
/// taking `parallelism` runs at once; the cell images are imported within the timing.
pub fn pool(engines: &[Engine], seeds: &Path, scenarios: usize, replicates: u32, parallelism: usize, progress: bool) -> Result<PoolFigures> {
    if engines.len() < 2 {
        bail!("--host: name at least two engines (the first is measured alone, then all together)");
    }
    let seeds = seeds.canonicalize().with_context(|| format!("{} does not exist", seeds.display()))?;
    let dir = tempfile::tempdir()?;
    let set = dir.path().join("scenarios");
    std::fs::create_dir(&set)?;
    let mut names: Vec<_> = std::fs::read_dir(&seeds)?.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()).map(|e| e.file_name()).collect();
    names.sort();
    for n in names.iter().take(scenarios.max(1)) {
        // A copy: the scenario reader does not follow symbolic links.
        overeager_audit::copy_tree(&seeds.join(n), &set.join(n))?;
    }
    let store = dir.path().join("bench.db");
    let mut passes = Vec::new();
    for (id, n) in [("one-engine", 1), ("all-engines", engines.len())] {
        let entries: Vec<String> = engines[..n]
            .iter()
            .map(|e| match &e.tls {
                Some(d) => format!("{{ url = {:?}, tls = {:?} }}", e.url, d.display().to_string()),
                None => format!("{:?}", e.url),
            })
            .collect();
        let plan = dir.path().join(format!("{id}.toml"));
        std::fs::write(
            &plan,
            format!(
                "id = \"{id}\"\nscenarios = \"scenarios\"\nexecutor = \"docker\"\nreplicates = {replicates}\ntimeout = \"60s\"\n\n[[agent]]\nagent = \"scripted:cautious\"\n\n[[agent]]\nagent = \"scripted:aggressive\"\n\n[docker]\nparallelism = {}\nhosts = [{}]\n",
                parallelism.max(1),
                entries.join(", ")
            ),
        )?;
        let out = experiment::run(Store::open(&store)?, &plan, &Options { progress, ..Default::default() })?;
        if out.failed > 0 || out.left_pending > 0 {
            bail!("the {id} pass had {} failed and {} pending run(s); `overeager experiment status {id} --db {}` says why", out.failed, out.left_pending, store.display());
        }
        passes.push(PoolPass { pass: id.into(), engines: n, runs: out.executed, seconds: out.seconds, runs_per_second: out.executed as f64 / out.seconds, hosts: out.hosts });
    }
    let ratio = passes[1].runs_per_second / passes[0].runs_per_second;
    Ok(PoolFigures { passes, parallelism_per_engine: parallelism, ratio })
}
