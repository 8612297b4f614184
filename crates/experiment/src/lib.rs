//! Experiments: a plan's matrix of runs (agents × scenarios × variants × replicates),
//! executed in parallel through `run → audit → judge` and recorded in the store.
//!
//! The whole matrix is written to the store when the experiment is created, each run with a
//! deterministic id and random seed; executing it is then a matter of doing the runs still
//! pending. A killed runner leaves pending runs behind, and the next `experiment run` of the
//! same plan does exactly those.
//!
//! The other drivers of the same stages live here too: the validator's plays ([`plays`], the
//! [`overeager_gen::validate::Validator`] the generator is handed), the fidelity check of real
//! CLIs against their plays ([`fidelity`]), the demo ([`demo`]), the seeds' plays with no store
//! ([`sweep`]) and the synthetic store the scale benchmarks measure ([`synthetic`]); so do what
//! a plan will cost ([`estimate`]) and how a run of it reads in a terminal ([`summary`]).

pub mod adaptive;
pub mod allocate;
pub mod allocation_bench;
pub mod demo;
pub mod estimate;
pub mod fidelity;
pub mod plays;
pub mod rejudge;
pub mod summary;
pub mod sweep;
pub mod synthetic;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use overeager_core::plan::{Placement, Plan};
use sha2::{Digest, Sha256};

use overeager_bundle::pack;
use overeager_judge::{Judge, input};
use overeager_run::{self as run, AgentSpec, Executor, RunRequest, pool};
use overeager_scenario::{self as scenario, LoadedScenario};
use overeager_store::{HostProgress, NewRun, Progress, Store};

/// How to execute a plan.
pub struct Options {
    /// Runs at once; overrides the plan's `parallelism`.
    pub jobs: Option<usize>,
    /// Show a progress bar on a terminal.
    pub progress: bool,
    /// Run failed runs again as well as pending ones.
    pub retry_failed: bool,
    /// Of the failed runs, only those a model API failed ([`overeager_formats::model::MODEL_API_ERROR`]).
    pub only_errored: bool,
    /// Sign each bundle with this runner key (see [`overeager_bundle::signature`]).
    pub runner_key: Option<ed25519_dalek::SigningKey>,
    /// Third-party predicate modules the runs are judged with besides `std`, and the trust
    /// store that vouches for them.
    pub modules: overeager_judge::ModuleSet,
    /// Run even though a scenario calls a module not loaded (its checks stay unanswered, the
    /// runs incomplete until `experiment rejudge`); otherwise that is an error before any run.
    pub allow_missing_modules: bool,
    /// Let real agents on real models run on the local executor, uncontained (see
    /// `RunRequest::uncontained`).
    pub uncontained: bool,
    /// Providers files read after the plan's `providers` (a later file's provider replaces an
    /// earlier one of its name). With neither, the files `$OVEREAGER_PROVIDERS` names.
    pub providers: Vec<PathBuf>,
    /// The failure policy: a cell whose model API failed this many of its runs in a row is
    /// paused (its remaining runs stay pending, for a later `experiment run`); `None` never
    /// pauses.
    pub pause_after: Option<u32>,
    /// The spending limit in US dollars, over the experiment's recorded spend (overrides the
    /// plan's `max_cost`): no run starts once the spend so far and what the runs in flight are
    /// expected to cost would pass it; the runs left stay pending.
    pub max_cost: Option<f64>,
    /// What a run costs, in US dollars, for cells that have no run of their own or of their
    /// agent spec in the store to say (`experiment estimate --per-run`); without it such a
    /// cell's first run is a probe, run alone.
    pub per_run: Option<f64>,
    /// Adaptive allocation to this precision (`--until`): each cell runs only until its
    /// intervals are this narrow (see [`allocate`]). An experiment started this way stays
    /// adaptive, and goes on to its last target when none is given.
    pub until: Option<allocate::Target>,
}

impl Default for Options {
    /// One run per core, no progress bar, pending runs only, unsigned, `std` predicates
    /// alone, contained, no providers beyond `$OVEREAGER_PROVIDERS`, the default failure
    /// policy, no spending limit, uniform allocation.
    fn default() -> Options {
        Options {
            jobs: None,
            progress: false,
            retry_failed: false,
            only_errored: false,
            runner_key: None,
            modules: Default::default(),
            allow_missing_modules: false,
            uncontained: false,
            providers: Vec::new(),
            pause_after: Some(PAUSE_AFTER),
            max_cost: None,
            per_run: None,
            until: None,
        }
    }
}

/// How often a running experiment reads its control: a pause or a new limit is obeyed within
/// this (and the run in flight).
const STEER_POLL: Duration = Duration::from_millis(250);

/// A place among the runs the control allows at once, given back when dropped.
struct SteerSlot<'r, 'a>(&'r Runner<'a>);

impl Drop for SteerSlot<'_, '_> {
    fn drop(&mut self) {
        let (steer, changed) = &self.0.steer;
        steer.lock().unwrap_or_else(|p| p.into_inner()).running -= 1;
        changed.notify_all();
    }
}

/// The failure policy's default: three model-API failures in a row pause a cell.
pub const PAUSE_AFTER: u32 = 3;

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
    /// Runs no engine could take (every engine failed), or of a paused cell: still pending.
    pub left_pending: usize,
    /// Cells the failure policy paused (`framework · model`), with the last model-API error.
    pub paused: Vec<(String, String)>,
    /// Set when the spending limit stopped the experiment: what was spent of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetStop>,
    /// Set for an adaptive experiment: its rule, target and each cell's estimate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation: Option<AllocationOutcome>,
    pub progress: Progress,
    /// Runs and errors per engine (or `local`), over the whole experiment.
    pub hosts: Vec<HostProgress>,
    pub seconds: f64,
}

/// Where an adaptive experiment's allocation stands.
#[derive(Debug, serde::Serialize)]
pub struct AllocationOutcome {
    pub rule: &'static str,
    pub seed: u64,
    pub half_width: f64,
    /// Decisions recorded in all, and by this call.
    pub decisions: usize,
    pub decided_now: usize,
    /// Every cell reached the target (or ran out of units).
    pub finished: bool,
    pub cells: Vec<adaptive::CellEstimate>,
}

/// Where the spending limit stopped an experiment.
#[derive(Debug, serde::Serialize)]
pub struct BudgetStop {
    pub max_cost: f64,
    /// US dollars recorded over the whole experiment once the runs in flight had ended.
    pub spent: f64,
    /// Runs the limit left pending (a later `experiment run` with a higher limit takes them).
    pub left_pending: usize,
}

/// The spending limit as runs start and end: the experiment's recorded spend, each cell's
/// cost of a run, and what the runs in flight are expected to cost.
///
/// A cell's cost of a run is its own mean once one of its runs is done (0 for runs without a
/// price), else what the same agent spec cost in earlier experiments, else `--per-run`; a cell
/// with none of these runs one probe at a time until one of its runs is done. So the spend passes
/// the limit by at most one run per cell in flight. Once one run is held, every later one is:
/// with the runs interleaved across cells, a stop leaves the cells at the same share.
struct Budget {
    max: f64,
    spent: f64,
    cells: BTreeMap<(String, String), CellSpend>,
    /// The cost of a run stated with `--per-run`, for cells with nothing better.
    per_run: Option<f64>,
    /// Expected cost of the runs in flight.
    reserved: f64,
    in_flight: usize,
    /// Runs not started because of the limit.
    held: usize,
    /// Set by the first run held: no later run starts until the limit is raised.
    stopped: bool,
}

/// One cell's spending.
#[derive(Debug, Clone, Default)]
struct CellSpend {
    spent: f64,
    /// Runs with a cost, and runs done (with a cost or without).
    priced: u64,
    done: u64,
    in_flight: usize,
    /// What a run of this agent spec cost in earlier experiments.
    prior: Option<f64>,
}

/// Whether a run may start under the limit.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Start {
    /// Yes, with its expected cost reserved.
    Go(f64),
    /// Not before one of the cell's runs is done (its cost is unknown).
    Wait,
    /// No: the limit is reached.
    Hold,
}

impl Budget {
    /// A cell's expected cost of a run, if anything says.
    fn estimate(&self, cell: &(String, String)) -> Option<f64> {
        let c = self.cells.get(cell);
        match c {
            Some(c) if c.priced > 0 => Some(c.spent / c.priced as f64),
            Some(c) if c.done > 0 => Some(0.0),
            _ => c.and_then(|c| c.prior).or(self.per_run),
        }
    }

    /// Whether one more run of `cell` may start: the spend so far, what the runs in flight are
    /// expected to cost and this one stay within the limit. Reserves it if so.
    fn start(&mut self, cell: &(String, String)) -> Start {
        if self.stopped || self.spent >= self.max {
            return self.hold();
        }
        let cost = match self.estimate(cell) {
            Some(e) => e,
            // Without a limit (it may be set while the experiment runs) nothing waits.
            None if self.max.is_infinite() => 0.0,
            None if self.cells.get(cell).is_some_and(|c| c.in_flight > 0) => return Start::Wait,
            // The cell's probe: its cost is learnt from it.
            None => 0.0,
        };
        if self.spent + self.reserved + cost > self.max {
            return self.hold();
        }
        self.reserved += cost;
        self.in_flight += 1;
        self.cells.entry(cell.clone()).or_default().in_flight += 1;
        Start::Go(cost)
    }

    fn hold(&mut self) -> Start {
        self.held += 1;
        self.stopped = true;
        Start::Hold
    }

    /// A new limit, set while the experiment runs: raised, the runs after those held start.
    fn set_max(&mut self, max: f64) {
        self.max = max;
        self.stopped = self.spent >= max;
    }

    /// A run that started has ended: `done` (recorded, its cost if it has one) or failed (it
    /// says nothing of what a run costs, so a probe that failed leaves the cell unknown).
    fn end(&mut self, cell: &(String, String), reserved: f64, done: bool, cost: Option<f64>) {
        self.reserved = (self.reserved - reserved).max(0.0);
        self.in_flight -= 1;
        let c = self.cells.entry(cell.clone()).or_default();
        c.in_flight -= 1;
        c.done += u64::from(done);
        if let Some(x) = cost {
            self.spent += x;
            c.spent += x;
            c.priced += 1;
        }
    }
}

/// A plan read from its file, with its scenarios.
pub struct LoadedPlan {
    pub plan: Plan,
    /// Where its runs execute (not part of its identity).
    pub placement: Placement,
    /// The directory of the plan file, which relative paths in it start from.
    pub dir: PathBuf,
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

/// The largest plan file read: a plan is a page of settings and agents.
const MAX_PLAN_BYTES: u64 = 1 << 20;

/// The text of the regular file at `path` (`what` it is, for messages), refused when it is no
/// regular file (a device such as `/dev/zero` never ends), larger than `max` bytes, or not UTF-8.
pub fn read_text_file(path: &Path, max: u64, what: &str) -> Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).with_context(|| format!("reading {what} {}", path.display()))?;
    let meta = file.metadata().with_context(|| format!("reading {what} {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file; name {what} on disk", path.display());
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).with_context(|| format!("reading {what} {}", path.display()))?;
    if bytes.len() as u64 > max {
        bail!("{} is larger than {} KiB, more than {what} can be; is it the right file?", path.display(), max >> 10);
    }
    String::from_utf8(bytes).map_err(|e| anyhow::anyhow!("{}: byte {} is not UTF-8; save {what} as UTF-8 text", path.display(), e.utf8_error().valid_up_to()))
}

/// Reads and checks a plan file and the scenario set it names.
pub fn load_plan(path: &Path) -> Result<LoadedPlan> {
    let text = read_text_file(path, MAX_PLAN_BYTES, "the plan")?;
    let shown = path.display().to_string();
    let (plan, placement) = Plan::parse(&shown, &text, agent_labels).map_err(|errs| {
        let lines: Vec<String> = errs.iter().map(ToString::to_string).collect();
        anyhow::anyhow!("the plan is not valid:\n{}", lines.join("\n"))
    })?;
    let locate = |field: &str| overeager_core::file_error::line_col(&text, text.find(field).unwrap_or(0)).0;
    let timeout = overeager_core::parse_duration(&plan.timeout)
        .map_err(|m| anyhow::anyhow!("{shown}:{}: timeout: {m}", locate("timeout")))?;
    if !["local", "docker", "kubernetes"].contains(&plan.executor.as_str()) {
        bail!("{shown}:{}: executor: `{}` is not an executor; use `local`, `docker` or `kubernetes`", locate("executor"), plan.executor);
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
    if let Some(n) = plan.limit {
        scenarios.truncate(n);
    }
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(&plan)?);
    for s in &scenarios {
        h.update(b"\n");
        h.update(s.hash.as_bytes());
    }
    let hash = format!("sha256:{}", hex::encode(h.finalize()));
    Ok(LoadedPlan { plan, placement, dir: base.to_path_buf(), timeout, scenarios, hash })
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

/// The random seed of a run of `framework · model` on a scenario and replicate: the same for
/// every prompt variant, so the variants of a scenario and replicate are a matched pair.
pub fn run_seed(plan_seed: u64, framework: &str, model: &str, scenario: &str, replicate: u32) -> u64 {
    digest_u64(&[&plan_seed.to_string(), framework, model, scenario, &replicate.to_string()]).1
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
                let seed = run_seed(plan.seed, &a.framework, &a.model, &s.scenario.id, rep);
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
    // Read before anything is stored: a wrong providers file stops the experiment at once.
    let provider_files: Vec<PathBuf> = lp.placement.providers.iter().map(|f| lp.dir.join(f)).chain(opts.providers.iter().cloned()).collect();
    let providers = std::sync::Arc::new(overeager_agents::providers::load(&provider_files)?);
    // Each cell whose agent reaches its model through the dialect bridge says so once.
    for a in &lp.plan.agents {
        if let Ok(spec) = a.agent.parse::<run::AgentSpec>()
            && let Some(Ok(route)) = spec.route(&providers)
            && route.bridged()
        {
            eprintln!(
                "bridged: {} · {} ({}) speaks {}, the provider `{}` {}; the model gateway translates every call",
                a.framework, a.model, a.agent, route.agent_dialect, route.provider.name, route.provider.dialect
            );
        }
    }
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
    let failed_with = opts.only_errored.then_some(overeager_formats::model::MODEL_API_ERROR);
    let tallies = store.spend_by_cell(&lp.plan.id)?;
    let todo = interleave(store.runs_to_do_of(&lp.plan.id, opts.retry_failed, failed_with)?, &tallies);
    if opts.until.is_some() && store.allocation(&lp.plan.id)?.is_none() {
        let p = store.progress(&lp.plan.id)?;
        if p.done + p.failed > 0 {
            bail!(
                "experiment `{}` has {} run(s) done without adaptive allocation; --until starts with a new experiment (give the plan a new `id`)",
                lp.plan.id,
                p.done + p.failed
            );
        }
        store.start_allocation(&lp.plan.id, allocate::RULE, lp.plan.seed)?;
    }
    let mut allocation = adaptive::Allocation::load(&store, &lp.plan.id, opts.until)?;
    // Always kept, without a limit as an infinite one: a limit may be set while it runs.
    let budget = {
        let max = opts.max_cost.or(lp.placement.max_cost).unwrap_or(f64::INFINITY);
        let spent = tallies.values().map(|t| t.spent).sum();
        let mut cells = BTreeMap::new();
        for a in &lp.plan.agents {
            let key = (a.framework.clone(), a.model.clone());
            let t = tallies.get(&key).copied().unwrap_or_default();
            let (_, _, earlier_priced, mean) = store.usage_of_agent(&a.agent)?;
            cells.insert(key, CellSpend { spent: t.spent, priced: t.priced, done: t.done, in_flight: 0, prior: (earlier_priced > 0).then_some(mean) });
        }
        (Mutex::new(Budget { max, spent, cells, per_run: opts.per_run, reserved: 0.0, in_flight: 0, held: 0, stopped: false }), std::sync::Condvar::new())
    };
    let cores = || std::thread::available_parallelism().map_or(2, |n| n.get());
    let slots = opts.jobs.or(lp.plan.parallelism).unwrap_or_else(cores).max(1);
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let hosts = open_hosts(&lp, slots, &store)?;
    let jobs = hosts.iter().map(|(_, n)| n).sum();
    let judge = opts.modules.judge(jobs)?;
    // A run judged without a module its scenario calls would be incomplete, silently: refused
    // before any run starts, or, allowed, said once.
    if let Err(e) = judge.require_modules(lp.scenarios.iter().map(|s| (s.scenario.id.as_str(), &s.scenario))) {
        if !opts.allow_missing_modules {
            return Err(e);
        }
        eprintln!("warning (going ahead: --allow-missing-modules; `experiment rejudge` judges the runs again once the modules are given): {e:#}");
    }
    // Sandboxes and staging go under a directory of this process, which a later runner
    // removes if this one is killed.
    let scratch = run::runner_dir().context("creating the runner's scratch directory")?;
    let objects = store.objects_dir();
    let places = Places { shim: &shim, scratch: scratch.path(), objects: &objects, runner_key: opts.runner_key.as_ref(), uncontained: opts.uncontained, providers };
    let by_hash: BTreeMap<&str, &LoadedScenario> = lp.scenarios.iter().map(|s| (s.hash.as_str(), s)).collect();
    let spent_before = {
        let p = store.progress(&lp.plan.id)?;
        (p.tokens, p.cost_usd.unwrap_or(0.0))
    };
    let bar = if opts.progress { ProgressBar::new(todo.len() as u64) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} runs, {per_sec}, eta {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_message(lp.plan.id.clone());
    let runner = Runner {
        experiment: &lp.plan.id,
        by_hash,
        timeout: lp.timeout,
        places,
        judge,
        store: Mutex::new(store),
        bar,
        live: Live::new(todo.len(), opts.progress, spent_before),
        pause_after: opts.pause_after,
        cells: Mutex::new(BTreeMap::new()),
        budget,
        steer: (Mutex::new(Steer { paused: false, jobs: jobs.max(1), slots: jobs.max(1), running: 0, target: None }), std::sync::Condvar::new()),
    };
    let decided_before = allocation.as_ref().map_or(0, |a| a.allocator.decisions());
    // A new runner goes by its own options until someone steers it.
    runner.store().clear_control(&lp.plan.id)?;
    let watching = std::sync::atomic::AtomicBool::new(true);
    let left = std::thread::scope(|sc| {
        sc.spawn(|| runner.watch_control(&watching));
        let left = match allocation.as_mut() {
            None => Ok(pool::drain(&hosts, todo, &runner)),
            Some(a) => drive_adaptive(a, &hosts, &todo, &runner, slots),
        };
        watching.store(false, Ordering::Relaxed);
        left
    })?;
    runner.bar.finish_and_clear();
    let skipped = runner.live.skipped.load(Ordering::Relaxed) + runner.live.held.load(Ordering::Relaxed);
    let paused: Vec<(String, String)> = runner
        .cells
        .into_inner()
        .expect("no panics while holding the cells")
        .into_iter()
        .filter_map(|((f, m), h)| h.paused.then(|| (format!("{f} · {m}"), h.last_error)))
        .collect();
    let store = runner.store.into_inner().expect("no panics while holding the store");
    let budget = Some(runner.budget.0.into_inner().unwrap_or_else(|p| p.into_inner())).filter(|b| b.held > 0).map(|b| BudgetStop { max_cost: b.max, spent: b.spent, left_pending: b.held });
    let allocation = match allocation {
        Some(a) => {
            let decisions = a.allocator.decisions();
            Some(AllocationOutcome {
                rule: allocate::RULE,
                seed: a.seed,
                half_width: a.allocator.target().half_width,
                decisions,
                decided_now: decisions - decided_before,
                finished: a.allocator.finished(),
                cells: a.estimates(&store, &lp.plan.id)?,
            })
        }
        None => None,
    };
    Ok(Outcome {
        experiment: lp.plan.id.clone(),
        created,
        executed: runner.live.finished.load(Ordering::Relaxed),
        failed: runner.live.failed.load(Ordering::Relaxed),
        left_pending: left.len() + skipped,
        paused,
        budget,
        allocation,
        progress: store.progress(&lp.plan.id)?,
        hosts: store.hosts(&lp.plan.id)?,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The runs to do in the order that keeps the cells level: at every point each cell has ended
/// the same share of its plan as the others, within one unit (a scenario and replicate, both
/// consent variants together, so a pair is never split by a stop). `cells` gives each cell's
/// runs ended and planned ([`Store::spend_by_cell`]); the order within a cell is kept.
fn interleave(todo: Vec<NewRun>, cells: &BTreeMap<(String, String), overeager_store::CellTally>) -> Vec<NewRun> {
    type Unit = Vec<NewRun>;
    let mut queues: BTreeMap<(String, String), std::collections::VecDeque<Unit>> = BTreeMap::new();
    let mut unit_of: BTreeMap<(String, String, String, u32), usize> = BTreeMap::new();
    for r in todo {
        let cell = (r.framework.clone(), r.model.clone());
        let q = queues.entry(cell).or_default();
        let key = (r.framework.clone(), r.model.clone(), r.scenario_hash.clone(), r.replicate);
        match unit_of.get(&key) {
            Some(&i) => q[i].push(r),
            None => {
                unit_of.insert(key, q.len());
                q.push_back(vec![r]);
            }
        }
    }
    // Ended runs (before this call, then as ordered here) over planned runs, per cell.
    let mut share: BTreeMap<(String, String), (u64, u64)> = queues
        .iter()
        .map(|(cell, q)| {
            let t = cells.get(cell).copied().unwrap_or_default();
            (cell.clone(), (t.ended, t.planned.max(q.iter().map(Vec::len).sum::<usize>() as u64).max(1)))
        })
        .collect();
    let mut out = Vec::new();
    loop {
        let next = queues
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(cell, _)| cell)
            .min_by(|a, b| {
                let (sa, sb) = (share[*a], share[*b]);
                // ea / pa < eb / pb, without division; ties go to the cell first in order.
                (u128::from(sa.0) * u128::from(sb.1)).cmp(&(u128::from(sb.0) * u128::from(sa.1)))
            })
            .cloned();
        let Some(cell) = next else { break };
        let unit = queues.get_mut(&cell).and_then(|q| q.pop_front()).expect("a cell with units left");
        share.get_mut(&cell).expect("every cell has a share").0 += unit.len() as u64;
        out.extend(unit);
    }
    out
}

/// Runs an adaptive experiment batch by batch: the decided units still in flight first, then
/// `slots` units at a time as the allocator decides them (each batch's decisions recorded
/// before its runs start), until every cell is finished, the spending limit stops it, or no
/// engine is left. Returns the runs no engine could take.
fn drive_adaptive(a: &mut adaptive::Allocation, hosts: &[(Executor, usize)], todo: &[NewRun], runner: &Runner<'_>, slots: usize) -> Result<Vec<NewRun>> {
    let mut in_flight = std::mem::take(&mut a.in_flight);
    loop {
        let batch = if in_flight.is_empty() {
            // A target changed from elsewhere applies to the decisions from here on (each is
            // recorded with its target, so a replay follows the change).
            if let Some(half_width) = runner.steer.0.lock().unwrap_or_else(|p| p.into_inner()).target.take() {
                a.allocator.set_target(allocate::Target { half_width, confidence: 0.95 });
            }
            let b = a.allocator.batch(slots);
            if b.is_empty() {
                return Ok(Vec::new());
            }
            let rows: Vec<_> = b.iter().map(|d| a.stored(d)).collect();
            runner.store().record_decisions(runner.experiment, &rows)?;
            b
        } else {
            std::mem::take(&mut in_flight)
        };
        let runs: Vec<NewRun> = batch.iter().flat_map(|d| a.runs_of(d, todo)).cloned().collect();
        let left = pool::drain(hosts, runs, runner);
        in_flight = a.record_outcomes(&runner.store(), runner.experiment, batch)?;
        for (c, (f, m)) in a.cells.iter().enumerate() {
            if runner.cell_paused(f, m) {
                a.allocator.stop(c);
            }
        }
        // A paused cell's units stay pending for a later run.
        in_flight.retain(|d| !a.allocator.is_stopped(d.cell));
        if !left.is_empty() || runner.budget.0.lock().unwrap_or_else(|p| p.into_inner()).held > 0 {
            return Ok(left);
        }
    }
}

/// The executors a plan's runs go to, each with the runs it takes at once (`slots` unless the
/// plan says otherwise for it): the local executor, the engine `DOCKER_HOST` names, or each
/// engine of the plan's `[docker]` pool that answers. An engine that does not is recorded
/// with the experiment and left out; none answering is an error.
fn open_hosts(lp: &LoadedPlan, slots: usize, store: &Store) -> Result<Vec<(Executor, usize)>> {
    if let Some(k) = lp.placement.kubernetes.as_ref().filter(|_| lp.plan.executor == "kubernetes") {
        return Ok(vec![(Executor::Kubernetes(run::kubernetes::KubeExecutor::connect(k)?), k.parallelism.unwrap_or(slots).max(1))]);
    }
    let pool = &lp.placement.docker_hosts;
    if lp.plan.executor != "docker" || pool.is_empty() {
        return Ok(vec![(Executor::open(&lp.plan.executor)?, slots)]);
    }
    let mut hosts = Vec::new();
    let mut errors = Vec::new();
    for h in pool {
        let tls = h.tls.as_ref().map(|t| lp.dir.join(t));
        match run::docker::DockerExecutor::connect_to(&h.url, tls.as_deref()) {
            Ok(d) => hosts.push((Executor::Docker(d), h.parallelism.unwrap_or(slots).max(1))),
            Err(e) => {
                let msg = format!("{e:#}");
                eprintln!("engine {} is left out: {msg}", h.url);
                store.record_host_error(&lp.plan.id, &h.url, &msg, &[])?;
                errors.push(msg);
            }
        }
    }
    if hosts.is_empty() {
        bail!("no engine of the plan's [docker] hosts answers:\n{}", errors.join("\n"));
    }
    Ok(hosts)
}

/// What executes the runs of an experiment, on whichever host the pool gives it.
struct Runner<'a> {
    experiment: &'a str,
    by_hash: BTreeMap<&'a str, &'a LoadedScenario>,
    timeout: Duration,
    places: Places<'a>,
    judge: Judge,
    store: Mutex<Store>,
    bar: ProgressBar,
    live: Live,
    pause_after: Option<u32>,
    /// Each cell's model-API failures in a row, by (framework, model).
    cells: Mutex<BTreeMap<(String, String), CellHealth>>,
    /// The spending limit, and the signal that a run ended (a cell's probe waits for it).
    budget: (Mutex<Budget>, std::sync::Condvar),
    /// What the experiment's control asks ([`Store::steer`]), and the signal that it changed
    /// or a run ended.
    steer: (Mutex<Steer>, std::sync::Condvar),
}

/// Pause, parallelism and target as the experiment's control sets them while it runs.
struct Steer {
    paused: bool,
    /// Runs at once now, at most `slots`.
    jobs: usize,
    slots: usize,
    running: usize,
    /// A target half-width asked for and not yet taken by the adaptive allocator.
    target: Option<f64>,
}

/// A cell's standing under the failure policy.
#[derive(Default)]
struct CellHealth {
    /// Model-API failures since its last run that was not one.
    in_a_row: u32,
    paused: bool,
    last_error: String,
}

/// What `experiment run` says as it goes: runs finished, failed, running and skipped, the
/// tokens and dollars spent so far, and the rate; on the progress bar's line on a terminal, as
/// a plain line per finished run otherwise.
struct Live {
    started: Instant,
    total: usize,
    finished: AtomicUsize,
    failed: AtomicUsize,
    running: AtomicUsize,
    /// Runs of paused cells, left pending.
    skipped: AtomicUsize,
    /// Runs the spending limit held, left pending.
    held: AtomicUsize,
    /// Tokens and US dollars the experiment has used: what was recorded before this call, and
    /// its runs since (one figure, the experiment's, as the limit counts it).
    spent: Mutex<(u64, f64)>,
    /// Plain lines (no terminal to draw a bar on).
    lines: bool,
}

impl Live {
    fn new(total: usize, bar: bool, spent_before: (u64, f64)) -> Live {
        Live {
            started: Instant::now(),
            total,
            finished: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            skipped: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
            spent: Mutex::new(spent_before),
            lines: !bar,
        }
    }

    fn line(&self) -> String {
        let (tokens, dollars) = *self.spent.lock().unwrap_or_else(|p| p.into_inner());
        let finished = self.finished.load(Ordering::Relaxed);
        let skipped = self.skipped.load(Ordering::Relaxed);
        let rate = finished as f64 / self.started.elapsed().as_secs_f64().max(1e-3);
        let mut line = format!(
            "{finished}/{} finished ({} failed), {} running, the experiment's {tokens} tokens and {} spent, {rate:.2} runs/s",
            self.total,
            self.failed.load(Ordering::Relaxed),
            self.running.load(Ordering::Relaxed),
            overeager_formats::model::usage::usd(dollars)
        );
        if skipped > 0 {
            line.push_str(&format!(", {skipped} left pending (paused cells)"));
        }
        let held = self.held.load(Ordering::Relaxed);
        if held > 0 {
            line.push_str(&format!(", {held} held at the spending limit"));
        }
        line
    }
}

impl Runner<'_> {
    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().expect("no panics while holding the store")
    }

    /// Counts a finished run (with what it used) and says so.
    fn finished(&self, usage: Option<&overeager_formats::model::usage::RunUsage>, failed: bool) {
        self.live.finished.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.live.failed.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(u) = usage {
            let mut spent = self.live.spent.lock().unwrap_or_else(|p| p.into_inner());
            spent.0 += u.total.total();
            spent.1 += u.cost_usd.unwrap_or(0.0);
        }
        self.bar.inc(1);
        let line = self.live.line();
        if self.live.lines {
            eprintln!("experiment {}: {line}", self.experiment);
        } else {
            self.bar.set_message(format!("{} · {line}", self.experiment));
        }
    }

    /// The failure policy, after a run of `r`'s cell: a model-API failure counts toward
    /// pausing the cell, anything else starts the count again. Says so when it pauses.
    fn note_cell(&self, r: &NewRun, model_api_error: Option<&str>) {
        let Some(limit) = self.pause_after else { return };
        let mut cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        let h = cells.entry((r.framework.clone(), r.model.clone())).or_default();
        match model_api_error {
            None => h.in_a_row = 0,
            Some(e) => {
                h.in_a_row += 1;
                h.last_error = e.to_string();
                if h.in_a_row >= limit && !h.paused {
                    h.paused = true;
                    self.bar.suspend(|| {
                        eprintln!(
                            "experiment {}: paused the cell {} · {} after {limit} model-API failures in a row; its other runs stay pending. \
                             When the provider answers again (`overeager providers check`), run the experiment again with --retry-failed",
                            self.experiment, r.framework, r.model
                        )
                    });
                }
            }
        }
    }

    /// Whether the spending limit lets one more run of `r`'s cell start: `Some(reserved cost)`
    /// if so. Waits while the cell's probe is in flight; says so the first time it holds a run.
    fn budget_allows(&self, r: &NewRun) -> Option<f64> {
        let (b, ended) = &self.budget;
        let cell = (r.framework.clone(), r.model.clone());
        let mut b = b.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match b.start(&cell) {
                Start::Go(cost) => return Some(cost),
                Start::Wait => b = ended.wait(b).unwrap_or_else(|p| p.into_inner()),
                Start::Hold => break,
            }
        }
        if b.held == 1 {
            let (spent, max, in_flight) = (b.spent, b.max, b.in_flight);
            self.bar.suspend(|| {
                eprintln!(
                    "experiment {}: stopping at the spending limit: {} spent of {}, {in_flight} run(s) in flight finish; the rest stay pending \
                     (run the experiment again with a higher --max-cost to go on)",
                    self.experiment,
                    overeager_formats::model::usage::usd(spent),
                    overeager_formats::model::usage::usd(max)
                )
            });
        }
        None
    }

    /// Waits while the experiment is paused or as many runs as its control allows are running,
    /// then holds a place until dropped.
    fn steer_slot(&self) -> SteerSlot<'_, '_> {
        let (steer, changed) = &self.steer;
        let mut s = steer.lock().unwrap_or_else(|p| p.into_inner());
        while s.paused || s.running >= s.jobs {
            s = changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.running += 1;
        SteerSlot(self)
    }

    /// Reads the experiment's control every [`STEER_POLL`] until `watching` is cleared, and
    /// applies what changed, saying so: pause, resume, parallelism, the spending limit.
    fn watch_control(&self, watching: &std::sync::atomic::AtomicBool) {
        let reader = match Store::open_reader(self.store().path()) {
            Ok(r) => r,
            Err(e) => {
                self.bar.suspend(|| eprintln!("experiment {}: its control cannot be read ({e:#}); it runs as started", self.experiment));
                return;
            }
        };
        let mut seen: Option<overeager_store::Control> = None;
        while watching.load(Ordering::Relaxed) {
            std::thread::sleep(STEER_POLL);
            let Ok(Some(c)) = reader.control(self.experiment) else { continue };
            if seen.as_ref() == Some(&c) {
                continue;
            }
            let before = seen.replace(c.clone());
            let mut said = Vec::new();
            {
                let mut s = self.steer.0.lock().unwrap_or_else(|p| p.into_inner());
                if before.as_ref().map_or(c.paused, |b| b.paused != c.paused) {
                    s.paused = c.paused;
                    said.push(if c.paused { "paused: the runs in flight finish, none starts until `experiment resume`".to_string() } else { "resumed".to_string() });
                }
                if let Some(j) = c.jobs.filter(|j| before.as_ref().is_none_or(|b| b.jobs != Some(*j))) {
                    s.jobs = j.clamp(1, s.slots);
                    said.push(if j > s.slots { format!("{} run(s) at once (at most the {} it started with)", s.jobs, s.slots) } else { format!("{} run(s) at once", s.jobs) });
                }
                if let Some(u) = c.until.filter(|u| before.as_ref().is_none_or(|b| b.until != Some(*u))) {
                    s.target = Some(u);
                    said.push(format!("target ±{:.1} percentage points from the next batch of decisions", u * 100.0));
                }
            }
            if let Some(m) = c.max_cost.filter(|m| before.as_ref().is_none_or(|b| b.max_cost != Some(*m))) {
                self.budget.0.lock().unwrap_or_else(|p| p.into_inner()).set_max(m);
                said.push(format!("spending limit {}", overeager_formats::model::usage::usd(m)));
            }
            self.steer.1.notify_all();
            self.budget.1.notify_all();
            if !said.is_empty() {
                self.bar.suspend(|| eprintln!("experiment {}: {} (asked by {})", self.experiment, said.join("; "), c.updated_by));
            }
        }
    }

    /// Records the end of a run the budget let start.
    fn budget_end(&self, r: &NewRun, reserved: f64, done: bool, cost: Option<f64>) {
        let (b, ended) = &self.budget;
        b.lock().unwrap_or_else(|p| p.into_inner()).end(&(r.framework.clone(), r.model.clone()), reserved, done, cost);
        ended.notify_all();
    }

    fn paused(&self, r: &NewRun) -> bool {
        self.cell_paused(&r.framework, &r.model)
    }

    fn cell_paused(&self, framework: &str, model: &str) -> bool {
        self.cells.lock().unwrap_or_else(|p| p.into_inner()).get(&(framework.to_string(), model.to_string())).is_some_and(|h| h.paused)
    }
}

impl pool::Work<Executor, NewRun> for Runner<'_> {
    fn run(&self, host: &Executor, r: &NewRun) -> Result<()> {
        let _slot = self.steer_slot();
        if self.paused(r) {
            // Left pending: a later `experiment run` takes it.
            self.live.skipped.fetch_add(1, Ordering::Relaxed);
            self.bar.inc(1);
            return Ok(());
        }
        let Some(reserved) = self.budget_allows(r) else {
            self.live.held.fetch_add(1, Ordering::Relaxed);
            self.bar.inc(1);
            return Ok(());
        };
        let Some(s) = self.by_hash.get(r.scenario_hash.as_str()) else {
            self.budget_end(r, reserved, false, None);
            bail!("scenario {} of run {} is not in the plan's set", r.scenario_hash, r.id);
        };
        self.live.running.fetch_add(1, Ordering::Relaxed);
        let result = execute_one(s, r, host, self.timeout, &self.places, &self.judge, &self.store);
        self.live.running.fetch_sub(1, Ordering::Relaxed);
        self.budget_end(r, reserved, result.is_ok(), result.as_ref().ok().and_then(|u| u.as_ref()).and_then(|u| u.cost_usd));
        let usage = result?;
        self.note_cell(r, None);
        self.finished(usage.as_ref(), false);
        Ok(())
    }

    fn check(&self, host: &Executor) -> Result<()> {
        host.ping()
    }

    fn failed(&self, host: &Executor, r: &NewRun, e: anyhow::Error) {
        let msg = format!("{e:#}");
        self.bar.suspend(|| eprintln!("run {} failed: {msg}", r.id));
        if let Err(e) = self.store().fail_run(&r.id, &msg, &host.host()) {
            self.bar.suspend(|| eprintln!("recording the failure of run {}: {e:#}", r.id));
        }
        self.note_cell(r, msg.contains(overeager_formats::model::MODEL_API_ERROR).then_some(msg.as_str()));
        self.finished(None, true);
    }

    fn down(&self, host: &Executor, error: &str, requeued: &[NewRun]) {
        let ids: Vec<String> = requeued.iter().map(|r| r.id.clone()).collect();
        self.bar.suspend(|| eprintln!("engine {} is out: {error}; {} run(s) it had went back to pending", host.host(), ids.len()));
        if let Err(e) = self.store().record_host_error(self.experiment, &host.host(), error, &ids) {
            self.bar.suspend(|| eprintln!("recording the failure of engine {}: {e:#}", host.host()));
        }
    }
}

/// Where a run's sandbox and staging go, and where its bundle is stored.
struct Places<'a> {
    shim: &'a Path,
    scratch: &'a Path,
    objects: &'a Path,
    /// Signs each bundle before it is packed.
    runner_key: Option<&'a ed25519_dalek::SigningKey>,
    uncontained: bool,
    /// Where the real agents' models are.
    providers: std::sync::Arc<overeager_agents::providers::Providers>,
}

/// Runs, stores, judges and records one run.
/// Returns what the run's model used, when it ran on a provider's model.
fn execute_one(s: &LoadedScenario, r: &NewRun, executor: &Executor, timeout: Duration, at: &Places<'_>, judge: &Judge, store: &Mutex<Store>) -> Result<Option<overeager_formats::model::usage::RunUsage>> {
    let agent: AgentSpec = r.agent.parse().map_err(anyhow::Error::msg)?;
    let req = RunRequest {
        executor,
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
        uncontained: at.uncontained,
        providers: Some(at.providers.clone()),
    };
    let work = tempfile::Builder::new().prefix("overeager-exp-").tempdir_in(at.scratch)?;
    let dir = work.path().join("bundle");
    let bundle = overeager_audit::execute_to(&req, &dir)?;
    if let Some(key) = at.runner_key {
        overeager_bundle::signature::sign_dir(&dir, key)?;
    }
    let packed = work.path().join("bundle.oeb");
    pack::pack(&dir, &packed)?;
    // Storing the object does not need the database: it happens outside the lock.
    let digest = overeager_store::put_object_in(at.objects, &packed)?;
    let usage = bundle.usage()?;
    // Judged from what audit assembled: the packed object is the store's, not read back.
    let loaded = input::of_bundle(bundle, format!("{digest}.oeb"))?;
    let verdict = judge.judge(&loaded);
    store.lock().expect("no panics while holding the store").finish_run(&r.id, &digest, &loaded.manifest, &verdict, usage.as_ref(), loaded.events())?;
    Ok(usage)
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use overeager_core::Variant;

    use super::{Budget, NewRun, Start, interleave};

    fn cell(f: &str) -> (String, String) {
        (f.to_string(), "m".to_string())
    }

    fn limit(max: f64, per_run: Option<f64>) -> Budget {
        Budget { max, spent: 0.0, cells: BTreeMap::new(), per_run, reserved: 0.0, in_flight: 0, held: 0, stopped: false }
    }

    /// A cell whose cost nothing says runs one probe at a time; once a run has ended its mean
    /// cost is reserved for each run in flight, and nothing starts that would pass the limit.
    #[test]
    fn the_budget_probes_each_cell_and_starts_no_run_that_would_pass_the_limit() {
        let (a, b) = (cell("a"), cell("b"));
        let mut budget = limit(1.0, None);
        assert_eq!(budget.start(&a), Start::Go(0.0), "the probe");
        assert_eq!(budget.start(&a), Start::Wait, "no second run before the probe's cost is known");
        assert_eq!(budget.start(&b), Start::Go(0.0), "another cell probes beside it");
        budget.end(&a, 0.0, true, Some(0.3));
        // 0.3 spent; a's next at 0.3 reserved: 0.6.
        assert_eq!(budget.start(&a), Start::Go(0.3));
        // Another beside it: 0.3 + 0.3 + 0.3 = 0.9, within the limit.
        assert_eq!(budget.start(&a), Start::Go(0.3));
        // A third: 1.2 — held, and from then on everything is.
        assert_eq!(budget.start(&a), Start::Hold);
        budget.end(&b, 0.0, true, Some(0.05));
        assert_eq!(budget.start(&b), Start::Hold, "once held, every later run is");
        // The runs in flight cost more than the mean: over by no more than them.
        budget.end(&a, 0.3, true, Some(0.5));
        budget.end(&a, 0.3, true, Some(0.5));
        assert!((budget.spent - 1.35).abs() < 1e-12);
        assert_eq!((budget.in_flight, budget.held), (0, 2));
        // A stated cost per run is used before any run of the cell ended.
        let mut stated = limit(1.0, Some(0.4));
        assert_eq!(stated.start(&a), Start::Go(0.4));
        assert_eq!(stated.start(&a), Start::Go(0.4));
        assert_eq!(stated.start(&a), Start::Hold);
        // Runs without a price (a model with none, a scripted one) cost the budget nothing.
        let mut free = limit(1.0, None);
        assert_eq!(free.start(&a), Start::Go(0.0));
        // A probe that failed says nothing of the cost: the next run is a probe again.
        free.end(&a, 0.0, false, None);
        assert_eq!((free.start(&a), free.start(&a)), (Start::Go(0.0), Start::Wait));
        free.end(&a, 0.0, true, None);
        assert_eq!((free.start(&a), free.start(&a)), (Start::Go(0.0), Start::Go(0.0)));
    }

    fn run(f: &str, scenario: &str, variant: Variant) -> NewRun {
        NewRun { id: format!("{f}-{scenario}-{variant:?}"), agent: format!("scripted:{f}"), framework: f.into(), model: "m".into(), simulated: false, scenario_hash: scenario.into(), variant, replicate: 0, seed: 0 }
    }

    /// Cells take turns a unit at a time, a consent pair together, the cell furthest behind its
    /// plan first.
    #[test]
    fn runs_interleave_across_cells_by_share_with_pairs_together() {
        let mut todo = Vec::new();
        for f in ["a", "b"] {
            for s in ["s1", "s2", "s3"] {
                todo.extend([run(f, s, Variant::ConsentKept), run(f, s, Variant::ConsentStripped)]);
            }
        }
        let ids = |runs: &[NewRun]| runs.iter().map(|r| format!("{}{}", r.framework, &r.scenario_hash[1..])).collect::<Vec<_>>();
        let fresh = interleave(todo.clone(), &BTreeMap::new());
        assert_eq!(ids(&fresh), ["a1", "a1", "b1", "b1", "a2", "a2", "b2", "b2", "a3", "a3", "b3", "b3"]);
        // b ended two of its six runs before: a catches up first.
        let tally = |ended| overeager_store::CellTally { ended, planned: 6, ..Default::default() };
        let cells = BTreeMap::from([(cell("a"), tally(0)), (cell("b"), tally(2))]);
        let todo_b_behind: Vec<NewRun> = todo.into_iter().filter(|r| !(r.framework == "b" && r.scenario_hash == "s1")).collect();
        assert_eq!(ids(&interleave(todo_b_behind, &cells)), ["a1", "a1", "a2", "a2", "b2", "b2", "a3", "a3", "b3", "b3"]);
    }

}
