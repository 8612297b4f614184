//! `overeager demo`, the main job: a small bench synthesized and validated from the seeds, the
//! scripted plays and simulated policies on it, the real agent CLIs against the scripted model
//! (and, when asked, on a real local model), the validator's decisions and the report, all in
//! one directory with a SQLite store.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use overeager_report::Report;
use overeager_store::Store;

/// What `build` makes, and from what.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// The directory to write (replaced if it is empty or an earlier demo's).
    pub out: PathBuf,
    /// The seed scenarios the bench is synthesized from.
    pub seeds: PathBuf,
    /// Scenarios in the bench.
    pub n: usize,
    pub replicates: u32,
    /// Generator and simulation seed.
    pub seed: u64,
    pub jobs: usize,
    /// Leave out the real agent CLIs.
    pub no_real: bool,
    /// Scenarios of the bench the real CLIs run on.
    pub real_n: usize,
    /// Only these real agents (none: every agent the definitions put in the demo).
    pub real_agents: Vec<String>,
    /// Also run real CLIs on the local model.
    pub local_model: bool,
    /// The `<agent>:<policy>` cells run on the local model (none: [`LOCAL_MODEL_AGENTS`]).
    pub local_agents: Vec<String>,
}

/// The demo's experiments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemoKind {
    /// Scripted plays and simulated policies (`demo`).
    Main,
    /// Real CLIs against the scripted model (`demo-real`).
    RealCli,
    /// Real CLIs on the local model (`demo-local-model`).
    LocalModel,
}

/// One experiment of the demo, reported.
#[derive(Debug)]
pub struct DemoPart {
    pub kind: DemoKind,
    pub done: u64,
    pub failed: u64,
    pub seconds: f64,
    pub report: Report,
}

/// What the demo built.
#[derive(Debug)]
pub struct Demo {
    /// The SQLite store, to serve.
    pub db: PathBuf,
    /// The main experiment's report directory.
    pub report_dir: PathBuf,
    /// Scenarios the validator admitted to the bench.
    pub admitted: usize,
    /// Scenarios whose validation was recorded.
    pub validated: usize,
    pub replicates: u32,
    /// The main experiment, then the real CLIs' and the local model's when they ran.
    pub parts: Vec<DemoPart>,
    pub seconds: f64,
}

/// Builds the demo: the bench, the experiments, the validations and the main report.
pub fn build(opts: &DemoOptions) -> Result<Demo> {
    let started = Instant::now();
    let out = &opts.out;
    // 1. A small bench, synthesized and validated from the seeds.
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let jobs = opts.jobs.max(1);
    let judge = overeager_judge::Judge::new(overeager_judge::JudgeOptions { limits: Default::default(), jobs, cache: overeager_judge::engine::default_cache_dir(), trust: Default::default() })?;
    if out.exists() {
        // Replaced only if it is empty or an earlier demo's directory: --out . must not wipe a project.
        let empty = out.is_dir() && std::fs::read_dir(out)?.next().is_none();
        if !empty && !out.join("demo.toml").is_file() {
            bail!("{} exists and is not a demo directory (no demo.toml in it); choose another --out", out.display());
        }
        std::fs::remove_dir_all(out).with_context(|| format!("replacing {}", out.display()))?;
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    // Written first: it also marks the directory as the demo's, for the next run to replace.
    let main_plan = out.join("demo.toml");
    std::fs::write(&main_plan, plan(opts.replicates, opts.seed))?;
    let bench = out.join("bench");
    let params = overeager_gen::synth::GenParams { seeds: opts.seeds.display().to_string(), n: opts.n, seed: opts.seed, theta: 0.12, validate_with: None };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs).build()?;
    struct Quiet;
    impl overeager_gen::synth::Progress for Quiet {
        fn seeds_validated(&self, _: usize, _: usize) {}
        fn candidate(&self, _: usize, _: usize) {}
    }
    eprintln!("demo: synthesizing a bench of {} scenarios from {} …", opts.n, opts.seeds.display());
    let validator = crate::plays::PlayValidator { cell: None, judge: &judge, executor: &overeager_run::Executor::Local, shim: &shim };
    let generated = pool.install(|| overeager_gen::synth::generate(&params, &bench, &validator, &Quiet))?;
    let db = out.join("overeager.db");
    let run = |plan: &Path, options: crate::Options| -> Result<(crate::Outcome, f64)> {
        let t = Instant::now();
        let outcome = crate::run(Store::open(&db)?, plan, &options)?;
        Ok((outcome, t.elapsed().as_secs_f64()))
    };
    // 2. Real agent CLIs against the scripted model, as an experiment of their own, first: the
    // web app opens on the newest experiment, the scripted and simulated one.
    let real_agents = if opts.no_real { Vec::new() } else { real_agents(&opts.real_agents)? };
    let real = if real_agents.is_empty() {
        None
    } else {
        let plan = out.join("demo-real.toml");
        std::fs::write(&plan, real_plan(&real_agents, opts.real_n.max(1), opts.seed))?;
        eprintln!("demo: running the real CLIs on the bench (real CLI · scripted model) …");
        Some(run(&plan, crate::Options { jobs: Some(jobs), progress: true, ..Default::default() })?)
    };
    // 2b. Real agent CLIs on a real model served on this machine, when asked for.
    let local = if opts.local_model {
        let served = overeager_agents::local_model::start(overeager_agents::local_model::Server::default(), overeager_agents::local_model::PORT).context("starting the local model (`overeager model local start`)")?;
        let agents: Vec<String> = if opts.local_agents.is_empty() { LOCAL_MODEL_AGENTS.iter().map(|a| a.to_string()).collect() } else { opts.local_agents.clone() };
        let plan = out.join("demo-local-model.toml");
        std::fs::write(&plan, local_model_plan(&agents, 2, opts.seed))?;
        eprintln!("demo: running {} on the real local model at {} (real CLI · real local model; uncontained, each call tens of seconds) …", agents.join(", "), served.base_url());
        Some(run(&plan, crate::Options { jobs: Some(1), progress: true, uncontained: true, ..Default::default() })?)
    } else {
        None
    };
    // 3. The experiment: scripted and simulated agents on the local executor, into SQLite.
    eprintln!("demo: {} scenarios admitted; running the experiment into {} …", generated.admitted, db.display());
    let main = run(&main_plan, crate::Options { jobs: Some(jobs), progress: true, ..Default::default() })?;
    // 4. The validator's decision per scenario, from the scripted plays' kept-variant runs.
    let mut store = Store::open(&db)?;
    let validated = crate::plays::record_validations(&mut store, "demo")?;
    // 5. The report with its figures.
    let report_of = |id: &str, title: &str| -> Result<Report> { Ok(overeager_report::build(id, title, &store.records(id)?, &store.labelled(Some(id))?)) };
    let report = report_of("demo", "Demo")?;
    let report_dir = out.join("report");
    let staging = overeager_bundle::files::staging_dir(&report_dir)?;
    overeager_report::write_files(staging.path(), &report, true)?;
    overeager_bundle::files::publish(staging, &report_dir)?;
    let part = |kind, (o, seconds): (crate::Outcome, f64), report| DemoPart { kind, done: o.progress.done, failed: o.progress.failed, seconds, report };
    let mut parts = vec![part(DemoKind::Main, main, report)];
    if let Some(r) = real {
        parts.push(part(DemoKind::RealCli, r, report_of("demo-real", "Demo: real agent CLIs")?));
    }
    if let Some(l) = local {
        parts.push(part(DemoKind::LocalModel, l, report_of("demo-local-model", "Demo: real agent CLIs on a real local model")?));
    }
    Ok(Demo { db, report_dir, admitted: generated.admitted, validated, replicates: opts.replicates, parts, seconds: started.elapsed().as_secs_f64() })
}

impl Demo {
    /// What was built, with each experiment's cells one line each.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for part in &self.parts {
            let _ = match part.kind {
                DemoKind::Main => writeln!(
                    s,
                    "demo: {} runs ({} failed) of {} scenarios × 5 agents × 2 variants × {} replicates in {:.0} s; {} scenarios validated; report in {}",
                    part.done,
                    part.failed,
                    self.admitted,
                    self.replicates,
                    self.seconds,
                    self.validated,
                    self.report_dir.display()
                ),
                DemoKind::LocalModel => writeln!(
                    s,
                    "demo: {} runs on the real local model ({} failed) in {:.0} s — SmolLM2-135M shows the path works against a real server, not how overeager any frontier model is",
                    part.done, part.failed, part.seconds
                ),
                DemoKind::RealCli => writeln!(s, "demo: {} real-CLI runs ({} failed) in {:.0} s", part.done, part.failed, part.seconds),
            };
            let mut cells: Vec<&overeager_report::Cell> = part.report.cells.iter().collect();
            cells.sort_by_key(|c| c.label());
            for c in cells {
                let _ = writeln!(s, "  {:<56} {:>5.1}% overeager  [{:.1}, {:.1}]  n = {}", c.label(), c.rate * 100.0, c.ci.lo * 100.0, c.ci.hi * 100.0, c.n);
            }
        }
        s
    }
}

/// The demo's second experiment: real agent CLIs against the scripted model playing the
/// aggressive play, on the kept variant of the bench's first `scenarios` scenarios, one
/// replicate (a real CLI takes seconds a run). Each agent runs the cells its definition's
/// `[demo]` names: usually its own default and its permissive mode, so the effect of the
/// permission gate is visible.
pub fn real_plan(agents: &[&overeager_agents::definition::Recipe], scenarios: usize, seed: u64) -> String {
    let mut plan = format!(
        "# Written by `overeager demo`.\nid = \"demo-real\"\ntitle = \"Demo: real agent CLIs (real CLI · scripted model)\"\nscenarios = \"bench\"\n\
         limit = {scenarios}\nvariants = [\"consent_kept\"]\nreplicates = 1\nexecutor = \"local\"\ntimeout = \"120s\"\nseed = {seed}\n"
    );
    for r in agents {
        for policy in &r.demo.policies {
            plan.push_str(&format!(
                "\n[[agent]]\nagent = \"{id}:{policy}:{model}aggressive\"\nframework = \"{id}:{policy} (real CLI)\"\nmodel = \"scripted model · aggressive\"\n",
                id = r.id,
                model = overeager_agents::SCRIPTED_MODEL,
            ));
        }
    }
    plan
}

/// The agents the demo runs on the real local model by default: one of each way a chat
/// agent talks (a tool-calling loop, Aider's text dialect, Codex CLI's streamed calls).
pub const LOCAL_MODEL_AGENTS: [&str; 3] = ["mini-swe-agent:permissive", "aider:default", "codex:permissive"];

/// The demo's "real CLI · real local model" plan: `agents` (`<agent>:<policy>`) on the
/// model `overeager model local` serves, on the first `scenarios` of the bench, uncontained on
/// the local executor. Each call takes tens of seconds on two cores, so it is small.
pub fn local_model_plan(agents: &[String], scenarios: usize, seed: u64) -> String {
    let model = format!("{}/{}", overeager_agents::local_model::PROVIDER, overeager_agents::local_model::MODEL);
    let mut plan = format!(
        "# Written by `overeager demo --local-model`.\nid = \"demo-local-model\"\ntitle = \"Demo: real agent CLIs on a real local model (SmolLM2-135M)\"\nscenarios = \"bench\"\n\
         limit = {scenarios}\nvariants = [\"consent_kept\"]\nreplicates = 1\nexecutor = \"local\"\ntimeout = \"480s\"\nseed = {seed}\n"
    );
    for agent in agents {
        plan.push_str(&format!("\n[[agent]]\nagent = \"{agent}:{model}\"\nframework = \"{agent} (real CLI)\"\nmodel = \"{model} (real local model)\"\n"));
    }
    plan
}

/// Installs the demo's real CLIs (every agent whose definition does not skip it, or exactly
/// the agents in `only` when it names any; once per machine) and says in one line which it
/// runs and which it skips, and why. An id in `only` that names no agent is an error that
/// lists the agents there are.
pub fn real_agents(only: &[String]) -> anyhow::Result<Vec<&'static overeager_agents::definition::Recipe>> {
    let mut run = Vec::new();
    let mut skipped = Vec::new();
    let all = match overeager_agents::definition::all() {
        Ok(all) => all,
        Err(e) => {
            eprintln!("demo: real CLIs: none; {e:#}");
            return Ok(run);
        }
    };
    if let Some(unknown) = only.iter().find(|id| !all.iter().any(|r| &r.id == *id)) {
        let known: Vec<&str> = all.iter().map(|r| r.id.as_str()).collect();
        anyhow::bail!("--real-agents names `{unknown}`, which is no agent here; the agents are: {}", known.join(", "));
    }
    for r in all {
        if !only.is_empty() {
            if !only.contains(&r.id) {
                continue;
            }
        } else if let Some(why) = &r.demo.skip {
            skipped.push(format!("{} ({why}; try `overeager run --agent {}:{}:{}aggressive`)", r.id, r.id, r.policies[0].id, overeager_agents::SCRIPTED_MODEL));
            continue;
        }
        match overeager_agents::install::ensure(r, r.package.version()) {
            Ok(_) => run.push(r),
            Err(e) => skipped.push(format!("{} ({e:#})", r.id)),
        }
    }
    let names: Vec<&str> = run.iter().map(|r| r.id.as_str()).collect();
    eprintln!("demo: real CLIs: {}; skipped: {}", if names.is_empty() { "none".into() } else { names.join(", ") }, if skipped.is_empty() { "none".into() } else { skipped.join("; ") });
    Ok(run)
}

/// The demo plan: the three scripted plays (which also validate each scenario) and two
/// simulated policies, on both prompt variants.
pub fn plan(replicates: u32, seed: u64) -> String {
    let mut plan = format!(
        "# Written by `overeager demo`.\nid = \"demo\"\ntitle = \"Demo: scripted plays and simulated policies on a small bench\"\nscenarios = \"bench\"\n\
         variants = [\"consent_kept\", \"consent_stripped\"]\nreplicates = {replicates}\nexecutor = \"local\"\ntimeout = \"60s\"\nseed = {seed}\n"
    );
    for (agent, framework, model) in [
        ("scripted:cautious", "scripted", "cautious"),
        ("scripted:moderate", "scripted", "moderate"),
        ("scripted:aggressive", "scripted", "aggressive"),
        ("sim:permissive", "sim-permissive", "sim-base"),
        ("sim:ask", "sim-ask", "sim-base"),
    ] {
        plan.push_str(&format!("\n[[agent]]\nagent = \"{agent}\"\nframework = \"{framework}\"\nmodel = \"{model}\"\n"));
    }
    plan
}
