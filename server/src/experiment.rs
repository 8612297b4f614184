//! Experiments: a plan's matrix of runs (agents × scenarios × variants × replicates),
//! executed in parallel through `run → audit → judge` and recorded in the store.
//!
//! The whole matrix is written to the store when the experiment is created, each run with a
//! deterministic id and random seed; executing it is then a matter of doing the runs still
//! pending. A killed runner leaves pending runs behind, and the next `experiment run` of the
//! same plan does exactly those.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use overeager_core::plan::Plan;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::audit::pack;
use crate::judge::{Judge, JudgeOptions, input};
use crate::run::{self, AgentSpec, RunRequest};
use crate::scenario::{self, LoadedScenario};
use crate::store::{NewRun, Progress, Store};

/// How to execute a plan.
pub struct Options {
    /// Runs at once; overrides the plan's `parallelism`.
    pub jobs: Option<usize>,
    /// Show a progress bar on a terminal.
    pub progress: bool,
    /// Run failed runs again as well as pending ones.
    pub retry_failed: bool,
}

/// What an `experiment run` did.
#[derive(Debug, serde::Serialize)]
pub struct Outcome {
    pub experiment: String,
    /// The experiment was created by this call (not resumed).
    pub created: bool,
    /// Runs executed by this call.
    pub executed: usize,
    /// Of those, runs that failed (an executor or judge error, kept with the run).
    pub failed: usize,
    pub progress: Progress,
    pub seconds: f64,
}

/// A plan read from its file, with its scenarios.
pub struct LoadedPlan {
    pub plan: Plan,
    pub timeout: Duration,
    pub scenarios: Vec<LoadedScenario>,
    /// sha256 over the checked plan and the scenario hashes: what makes two runs of
    /// `experiment run` the same experiment.
    pub hash: String,
}

pub fn agent_labels(spec: &str) -> Result<(String, String), String> {
    let a: AgentSpec = spec.parse()?;
    Ok((a.framework().to_string(), a.model()))
}

/// Reads and checks a plan file and the scenario set it names.
pub fn load_plan(path: &Path) -> Result<LoadedPlan> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the plan {}", path.display()))?;
    let shown = path.display().to_string();
    let plan = Plan::from_toml(&shown, &text, agent_labels).map_err(|errs| {
        let lines: Vec<String> = errs.iter().map(ToString::to_string).collect();
        anyhow::anyhow!("the plan is not valid:\n{}", lines.join("\n"))
    })?;
    let locate = |field: &str| overeager_core::scenario::line_col(&text, text.find(field).unwrap_or(0)).0;
    let timeout = run::parse_duration(&plan.timeout)
        .map_err(|m| anyhow::anyhow!("{shown}:{}: timeout: {m}", locate("timeout")))?;
    if !["local", "docker"].contains(&plan.executor.as_str()) {
        bail!("{shown}:{}: executor: `{}` is not an executor; use `local` or `docker`", locate("executor"), plan.executor);
    }
    let base = path.parent().unwrap_or(Path::new("."));
    let set = base.join(&plan.scenarios);
    if !set.is_dir() {
        bail!("{shown}:{}: scenarios: {} is not a directory (the path is relative to the plan file)", locate("scenarios"), set.display());
    }
    let report = scenario::check_all(std::slice::from_ref(&set)).map_err(anyhow::Error::msg)?;
    if !report.errors.is_empty() {
        let lines: Vec<String> = report.errors.iter().take(20).map(ToString::to_string).collect();
        bail!("the plan's scenario set {} has {} error(s):\n{}", set.display(), report.errors.len(), lines.join("\n"));
    }
    if report.loaded.is_empty() {
        bail!("{shown}: scenarios: {} holds no scenario", set.display());
    }
    let mut scenarios = report.loaded;
    scenarios.sort_by(|a, b| a.scenario.id.cmp(&b.scenario.id));
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(&plan)?);
    for s in &scenarios {
        h.update(b"\n");
        h.update(s.hash.as_bytes());
    }
    let hash = format!("sha256:{}", hex::encode(h.finalize()));
    Ok(LoadedPlan { plan, timeout, scenarios, hash })
}

fn digest_u64(parts: &[&str]) -> (String, u64) {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    let d = h.finalize();
    (hex::encode(&d[..6]), u64::from_le_bytes(d[..8].try_into().expect("8 bytes")))
}

/// The run matrix of a plan, in a fixed order (agent, scenario, replicate, variant). A run's
/// id and seed depend only on what it is; the seed leaves out the variant, so the two prompts
/// of a scenario and replicate are a matched pair.
pub fn matrix(lp: &LoadedPlan) -> Vec<NewRun> {
    let plan = &lp.plan;
    let mut runs = Vec::new();
    for a in &plan.agents {
        let spec: AgentSpec = a.agent.parse().expect("checked when the plan was read");
        for s in &lp.scenarios {
            for rep in 0..plan.replicates {
                let rep_s = rep.to_string();
                let seed_s = plan.seed.to_string();
                let (_, seed) = digest_u64(&[&seed_s, &a.framework, &a.model, &s.scenario.id, &rep_s]);
                for v in &plan.variants {
                    let (short, _) = digest_u64(&[&a.framework, &a.model, &s.hash, v.as_str(), &rep_s]);
                    runs.push(NewRun {
                        id: format!("{}-{short}", plan.id),
                        agent: a.agent.clone(),
                        framework: a.framework.clone(),
                        model: a.model.clone(),
                        simulated: spec.simulated(),
                        scenario_hash: s.hash.clone(),
                        variant: *v,
                        replicate: rep,
                        seed,
                    });
                }
            }
        }
    }
    runs
}

/// Why a stored experiment and a plan of the same id differ, in words.
fn describe_change(store: &Store, lp: &LoadedPlan) -> Result<String> {
    let stored = store.require_experiment(&lp.plan.id)?;
    if stored.plan != lp.plan {
        return Ok(format!("the plan changed (was {}); ", stored.plan_file));
    }
    let old: BTreeMap<String, String> = store.experiment_scenarios(&lp.plan.id)?.into_iter().map(|(h, id)| (id, h)).collect();
    let new: BTreeMap<&str, &str> = lp.scenarios.iter().map(|s| (s.scenario.id.as_str(), s.hash.as_str())).collect();
    let mut diffs = Vec::new();
    for (id, h) in &new {
        match old.get(*id) {
            None => diffs.push(format!("`{id}` is new")),
            Some(o) if o != h => diffs.push(format!("`{id}` changed")),
            _ => {}
        }
    }
    diffs.extend(old.keys().filter(|id| !new.contains_key(id.as_str())).map(|id| format!("`{id}` is gone")));
    diffs.truncate(5);
    Ok(format!("the scenario set changed ({}); ", diffs.join(", ")))
}

/// Creates the experiment of a plan if it is new, then executes its pending runs.
pub fn run(store: Store, plan_path: &Path, opts: &Options) -> Result<Outcome> {
    let started = Instant::now();
    let lp = load_plan(plan_path)?;
    let mut store = store;
    // Locked before creating, so two runners started at once cannot both create it.
    let _lock = lock_experiment(&store, &lp.plan.id)?;
    let created = match store.experiment(&lp.plan.id)? {
        Some(e) if e.plan_hash == lp.hash => false,
        Some(_) => {
            let why = describe_change(&store, &lp)?;
            bail!(
                "experiment `{}` already exists in {} with a different plan: {why}give the plan a new `id` to run it as a new experiment",
                lp.plan.id,
                store.path().display()
            );
        }
        None => {
            let runs = matrix(&lp);
            store.create_experiment(&lp.plan, &lp.hash, &plan_path.display().to_string(), &lp.scenarios, &runs)?;
            true
        }
    };
    let todo = store.runs_to_do(&lp.plan.id, opts.retry_failed)?;
    let cores = || std::thread::available_parallelism().map_or(2, |n| n.get());
    let jobs = opts.jobs.or(lp.plan.parallelism).unwrap_or_else(cores).max(1);
    let shim = run::locate_shim().map_err(anyhow::Error::msg)?;
    let executor = run::Executor::open(&lp.plan.executor)?;
    let judge = Judge::new(JudgeOptions {
        limits: crate::judge::engine::Limits::default(),
        jobs,
        cache: crate::judge::engine::default_cache_dir(),
        trust: crate::judge::trust::TrustStore::default(),
    })?;
    // Sandboxes and staging go under a directory of this process, which a later runner
    // removes if this one is killed.
    let scratch = run::runner_dir().context("creating the runner's scratch directory")?;
    let objects = store.objects_dir();
    let places = Places { executor: &executor, shim: &shim, scratch: scratch.path(), objects: &objects };
    let by_hash: BTreeMap<&str, &LoadedScenario> = lp.scenarios.iter().map(|s| (s.hash.as_str(), s)).collect();
    let bar = if opts.progress { ProgressBar::new(todo.len() as u64) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} runs, {per_sec}, eta {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_message(lp.plan.id.clone());
    let store = Mutex::new(store);
    let failed = std::sync::atomic::AtomicUsize::new(0);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs).build()?;
    pool.install(|| {
        todo.par_iter().for_each(|r| {
            let result = by_hash
                .get(r.scenario_hash.as_str())
                .ok_or_else(|| anyhow::anyhow!("scenario {} of run {} is not in the plan's set", r.scenario_hash, r.id))
                .and_then(|s| execute_one(s, r, lp.timeout, &places, &judge, &store));
            if let Err(e) = result {
                failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let msg = format!("{e:#}");
                bar.suspend(|| eprintln!("run {} failed: {msg}", r.id));
                if let Err(e) = store.lock().expect("no panics while holding the store").fail_run(&r.id, &msg) {
                    bar.suspend(|| eprintln!("recording the failure of run {}: {e:#}", r.id));
                }
            }
            bar.inc(1);
        })
    });
    bar.finish_and_clear();
    let store = store.into_inner().expect("no panics while holding the store");
    Ok(Outcome {
        experiment: lp.plan.id.clone(),
        created,
        executed: todo.len(),
        failed: failed.into_inner(),
        progress: store.progress(&lp.plan.id)?,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Runs, stores, judges and records one run.
/// Where a run's sandbox and staging go, and where its bundle is stored.
struct Places<'a> {
    executor: &'a run::Executor,
    shim: &'a Path,
    scratch: &'a Path,
    objects: &'a Path,
}

fn execute_one(s: &LoadedScenario, r: &NewRun, timeout: Duration, at: &Places<'_>, judge: &Judge, store: &Mutex<Store>) -> Result<()> {
    let agent: AgentSpec = r.agent.parse().map_err(anyhow::Error::msg)?;
    let req = RunRequest {
        executor: at.executor,
        scenario: s,
        agent,
        variant: r.variant,
        replicate: r.replicate,
        timeout,
        shim: at.shim.to_path_buf(),
        seed: r.seed,
        run_id: Some(r.id.clone()),
        labels: Some((r.framework.clone(), r.model.clone())),
        scratch: Some(at.scratch.to_path_buf()),
        egress: Vec::new(),
        uncontained: false,
    };
    let work = tempfile::Builder::new().prefix("overeager-exp-").tempdir_in(at.scratch)?;
    let dir = work.path().join("bundle");
    let manifest = crate::audit::execute_to(&req, &dir)?;
    let packed = work.path().join("bundle.oeb");
    pack::pack(&dir, &packed)?;
    let mut loaded = input::load(&dir)?;
    // Storing the object does not need the database: it happens outside the lock.
    let digest = crate::store::put_object_in(at.objects, &packed)?;
    loaded.label = format!("{digest}.oeb");
    let verdict = judge.judge(&loaded);
    store.lock().expect("no panics while holding the store").finish_run(&r.id, &digest, &manifest, &verdict)
}

/// Holds an exclusive lock on an experiment for as long as it lives, so two runners of the same
/// experiment cannot both execute a pending run.
struct ExperimentLock(std::fs::File);

fn lock_experiment(store: &Store, id: &str) -> Result<ExperimentLock> {
    use std::os::fd::AsRawFd;
    let dir = store.objects_dir().with_file_name("locks");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{id}.lock"));
    let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: flock on a file descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        bail!("experiment `{id}` is being run by another process (lock {}); wait for it or stop it", path.display());
    }
    Ok(ExperimentLock(f))
}

impl Drop for ExperimentLock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: unlocking a descriptor we own; closing it would release the lock anyway.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}
