//! The command-line edge: argument types and the commands' output. Errors become `anyhow`
//! here, with the file, field or request they concern.

pub mod agent;
pub mod experiment;
pub mod export;
pub mod fidelity;
pub mod judge;
pub mod k8s;
pub mod pool;
pub mod predicate;
pub mod fuzz;
pub mod r#gen;
pub mod runs;
pub mod scale;
pub mod stats;
pub mod submit;
pub mod validate;
pub mod web;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressStyle};
use overeager_core::{Variant, render_prompt};
use serde_json::json;

use overeager_bundle::{Bundle, pack};
use overeager_run::{self as run, AgentSpec, RunRequest};
use overeager_scenario::{self as scenario, LoadedScenario};

/// Arguments of `overeager run`.
#[derive(Args)]
pub struct RunArgs {
    /// The scenario directory. A replay may leave it out: the bundle names its scenario, which
    /// is then looked for in scenarios/seeds and scenarios/bench-v1 by id and hash.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// The agent: scripted:cautious|moderate|aggressive, a simulated sim:permissive|ask, or a
    /// real agent <agent>:<policy>:<model> (see `overeager agent list`), whose model is
    /// <provider>/<model> (a real model, through the model gateway), scripted-<play> (the
    /// scripted model playing a play) or replay:<bundle> (a recorded run's model channel,
    /// offline, from a bundle directory or .oeb).
    #[arg(long)]
    agent: AgentSpec,
    /// Which prompt the agent gets.
    #[arg(long, default_value = "consent_kept")]
    variant: Variant,
    /// Where the run happens: `local` (a temporary workspace here) or `docker` (a hardened
    /// container on the engine at DOCKER_HOST or the local socket).
    #[arg(long, default_value = "local", value_parser = ["local", "docker"])]
    executor: String,
    /// The bundle directory to create.
    #[arg(long)]
    out: PathBuf,
    /// Wall-clock limit for the agent (e.g. 90s, 2m); a run that hits it is recorded as timed out.
    #[arg(long, default_value = "120s", value_parser = overeager_core::parse_duration)]
    timeout: Duration,
    /// Replicate number recorded in the bundle.
    #[arg(long, default_value_t = 0)]
    replicate: u32,
    /// Seed of a simulated agent's draw (sim:<policy>).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Let the agent reach HOST:PORT through the egress proxy (repeatable; Docker executor).
    /// Every connection it asks for is recorded in the bundle's net channel.
    #[arg(long = "allow-egress", value_name = "HOST:PORT", value_parser = parse_host_port)]
    allow_egress: Vec<String>,
    /// Run a real agent on its real model API on the local executor, where nothing contains
    /// it: it can read, change and delete anything this user can. The Docker executor is the
    /// contained way; this is for a machine or VM kept for the purpose.
    #[arg(long)]
    uncontained: bool,
    /// The predicate modules the scenario's checks call besides `std`: given, the run is
    /// refused before it starts when one is missing (judge the bundle with them afterwards).
    #[command(flatten)]
    modules: judge::ModulesArgs,
    /// Run even though the scenario calls a predicate module not given with --predicates.
    #[arg(long)]
    allow_missing_modules: bool,
    /// Providers files adding to the built-in model providers (repeatable) [default: the
    /// files $OVEREAGER_PROVIDERS names]. A real agent's model is `<provider>/<model>`.
    #[arg(long = "providers", value_name = "FILE")]
    providers: Vec<PathBuf>,
    /// Print the bundle manifest as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_host_port(s: &str) -> Result<String, String> {
    match s.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => Ok(s.to_ascii_lowercase()),
        _ => Err(format!("`{s}` is not HOST:PORT (e.g. api.example.com:443)")),
    }
}

/// Arguments of `overeager sweep`.
#[derive(Args)]
pub struct SweepArgs {
    /// Where the seed scenarios are.
    #[arg(long, default_value = "scenarios/seeds")]
    seeds: PathBuf,
    /// Where to write the bundles (replaced when the demo finishes).
    #[arg(long, default_value = "runs/demo")]
    out: PathBuf,
    /// Runs in parallel.
    #[arg(long, default_value_t = default_jobs())]
    jobs: usize,
    /// Print one JSON object per run instead of the table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `overeager bench run`.
#[derive(Args)]
pub struct BenchRunArgs {
    /// Where the seed scenarios are.
    #[arg(long, default_value = "scenarios/seeds")]
    seeds: PathBuf,
    /// The scenario timed for single runs.
    #[arg(long, default_value = "cleanup-orphaned-envs")]
    scenario: String,
    /// Repetitions of the single run.
    #[arg(long, default_value_t = 30)]
    iterations: usize,
    /// Repetitions of the full sweep (all seeds × 3 plays).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `overeager bench docker`.
#[derive(Args)]
pub struct BenchDockerArgs {
    /// Where the seed scenarios are.
    #[arg(long, default_value = "scenarios/seeds")]
    seeds: PathBuf,
    /// The scenario timed (one without `model.setup`, so the bare run needs no setup container).
    #[arg(long, default_value = "cleanup-orphaned-envs")]
    scenario: String,
    /// The agent.
    #[arg(long, default_value = "scripted:aggressive")]
    agent: AgentSpec,
    /// Pairs of runs timed side by side.
    #[arg(long, default_value_t = 20)]
    iterations: usize,
    /// Runs of each side at parallelism 2.
    #[arg(long, default_value_t = 40)]
    parallel_runs: usize,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `overeager bench agents`.
#[derive(Args)]
pub struct BenchAgentsArgs {
    /// The agents timed (installed into the agent cache first if need be) [default: every
    /// agent].
    #[arg(long, value_delimiter = ',')]
    agents: Vec<String>,
    /// The executors timed; the bare comparison is made on this machine.
    #[arg(long, value_delimiter = ',', default_value = "local")]
    executors: Vec<String>,
    /// The scenario timed.
    #[arg(long, default_value = "scenarios/seeds/alembic-broken-revision-keep-db")]
    scenario: PathBuf,
    /// The play the scripted model plays.
    #[arg(long, default_value = "aggressive")]
    play: overeager_core::PlayKind,
    /// Runs of each kind per agent (observed and bare alternate).
    #[arg(long, default_value_t = 5)]
    iterations: usize,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn default_jobs() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)
}

pub(crate) fn print_json(v: &serde_json::Value) {
    println!("{}", serde_json::to_string_pretty(v).expect("JSON values serialize"));
}

pub fn scenario_check(paths: &[PathBuf], as_json: bool) -> Result<ExitCode> {
    let report = scenario::check_all(paths).map_err(anyhow::Error::msg)?;
    if as_json {
        let scenarios: Vec<_> = report
            .loaded
            .iter()
            .map(|s| json!({"id": s.scenario.id, "dir": s.dir, "hash": s.hash, "archetype": s.scenario.archetype}))
            .collect();
        let errors: Vec<_> = report
            .errors
            .iter()
            .map(|e| json!({"file": e.file, "line": e.line, "column": e.column, "field": e.field, "message": e.message}))
            .collect();
        print_json(&json!({"ok": report.errors.is_empty(), "scenarios": scenarios, "errors": errors}));
    } else {
        for e in &report.errors {
            eprintln!("{e}");
        }
        let n = report.loaded.len();
        if report.errors.is_empty() {
            let archetypes: std::collections::BTreeSet<&str> =
                report.loaded.iter().map(|s| s.scenario.archetype.as_str()).collect();
            println!("{n} scenario(s) ok, {} archetype(s)", archetypes.len());
        } else {
            eprintln!("{} error(s); {n} scenario(s) ok", report.errors.len());
        }
    }
    Ok(if report.errors.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

pub fn scenario_render(dir: &Path, variant: Variant, as_json: bool) -> Result<ExitCode> {
    let loaded = overeager_scenario::load_checked(dir)?;
    let p = render_prompt(&loaded.scenario.prompt, variant);
    if as_json {
        print_json(&json!({"scenario": loaded.scenario.id, "variant": variant, "text": p.text,
                           "consent_block": p.consent_block.map(|r| [r.start, r.end])}));
    } else {
        print!("{}", p.text);
    }
    Ok(ExitCode::SUCCESS)
}

/// Where a replay looks for the scenario its bundle names when no `--scenario` is given.
const REPLAY_SCENARIO_DIRS: [&str; 2] = ["scenarios/seeds", "scenarios/bench-v1"];

/// The scenario of a run: `--scenario`, or for a replay the one its bundle names (same id and
/// hash) under [`REPLAY_SCENARIO_DIRS`].
fn run_scenario(args: &RunArgs) -> Result<LoadedScenario> {
    if let Some(dir) = &args.scenario {
        return overeager_scenario::load_checked(dir);
    }
    let Some(overeager_core::ModelPlayer::Replay(bundle)) = args.agent.model_player() else {
        bail!("--scenario <dir> is required (only a replay, `--agent <agent>:<policy>:replay:<bundle>`, may leave it out: its bundle names the scenario)");
    };
    let recorded = Bundle::read(Path::new(&bundle))?;
    let wanted = &recorded.manifest.scenario;
    // The bundle's author wrote both the id and the hash, so the id may only name a directory
    // directly inside the scenario sets, never a path out of them.
    let mut parts = Path::new(&wanted.id).components();
    let plain = matches!((parts.next(), parts.next()), (Some(std::path::Component::Normal(_)), None)) && !wanted.id.contains(['/', '\\']);
    if !plain {
        bail!("{bundle} names its scenario `{}`, which is not a scenario id (a directory name in {}); pass --scenario <its directory>", wanted.id.escape_debug(), REPLAY_SCENARIO_DIRS.join(" or "));
    }
    for root in REPLAY_SCENARIO_DIRS {
        let dir = Path::new(root).join(&wanted.id);
        if let Ok(found) = overeager_scenario::load(&dir)
            && found.hash == wanted.hash
        {
            return Ok(found);
        }
    }
    bail!(
        "{bundle} ran scenario `{}` ({}), which is not in {} with that content; pass --scenario <its directory>",
        wanted.id,
        wanted.hash,
        REPLAY_SCENARIO_DIRS.join(" or ")
    )
}

pub fn run(args: &RunArgs) -> Result<ExitCode> {
    let loaded = run_scenario(args)?;
    // Only a scenario that calls a module besides std needs the judge built to check.
    if overeager_judge::Judge::modules_called(&loaded.scenario).iter().any(|m| m != overeager_judge::STD_ID) {
        if let Err(e) = args.modules.judge(1)?.require_modules([(loaded.scenario.id.as_str(), &loaded.scenario)]) {
            if !args.allow_missing_modules {
                return Err(e);
            }
            eprintln!("warning (going ahead: --allow-missing-modules; judge the bundle with the modules given): {e:#}");
        }
    }
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let executor = run::Executor::open(&args.executor)?;
    if !args.allow_egress.is_empty() && matches!(executor, run::Executor::Local) {
        bail!("--allow-egress needs --executor docker: the local executor cannot confine the agent's network");
    }
    if args.uncontained && !matches!(executor, run::Executor::Local) {
        bail!("--uncontained is for the local executor; the Docker executor contains the agent");
    }
    if args.uncontained {
        eprintln!("warning: {} runs uncontained on this machine; it can touch anything this user can", args.agent.id());
    }
    let req = RunRequest {
        executor: &executor,
        scenario: &loaded,
        agent: args.agent.clone(),
        variant: args.variant,
        replicate: args.replicate,
        timeout: args.timeout,
        shim,
        seed: args.seed,
        run_id: None,
        labels: None,
        scratch: None,
        egress: args.allow_egress.clone(),
        uncontained: args.uncontained,
        providers: if args.providers.is_empty() { None } else { Some(std::sync::Arc::new(overeager_agents::providers::load(&args.providers)?)) },
    };
    let b = overeager_audit::execute_to(&req, &args.out)?;
    if args.json {
        print_json(&serde_json::to_value(&b.manifest)?);
    } else {
        print!("{}", b.summary());
    }
    Ok(if b.manifest.timed_out { ExitCode::from(3) } else { ExitCode::SUCCESS })
}

pub fn bundle_derive(dir: &Path, as_json: bool) -> Result<ExitCode> {
    let r = overeager_bundle::derive::rederive(dir)?;
    if as_json {
        print_json(&json!(r));
        return Ok(ExitCode::SUCCESS);
    }
    let c = r.counts;
    println!("{}: events.jsonl {}", dir.display(), if r.changed { "re-derived (changed)" } else { "re-derived (unchanged)" });
    println!("channels  shell {}  agent {}  fswatch {}  net {}  → {} events; model requests {}", c.shell, c.agent, c.fswatch, c.net, c.events, c.model);
    if r.unknown.is_empty() {
        println!("unknown   none");
    }
    for (what, n) in &r.unknown {
        println!("unknown   {n:>4}  {what}");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn bundle_verify(paths: &[PathBuf]) -> Result<ExitCode> {
    let found = overeager_judge::input::discover(paths)?;
    let mut bad = 0;
    for p in &found {
        match Bundle::open(p).and_then(|b| overeager_bundle::verify::verify(&b.dir)) {
            Ok(()) => println!("ok        {}", p.display()),
            Err(e) => {
                bad += 1;
                println!("REFUSED   {}: {e:#}", p.display());
            }
        }
    }
    println!("{} bundle(s) checked, {bad} refused", found.len());
    Ok(if bad > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Where a bundle's command lines and its file watcher disagree about what was read and
/// written (empty for a bundle without a scenario or a watcher).
fn disagreements(path: &Path) -> Vec<overeager_predicate_sdk::bundle::Disagreement> {
    overeager_judge::input::load(path).ok().and_then(|l| l.view_compact().ok().and_then(|v| overeager_predicate_sdk::Bundle::parse_compact(v).ok())).map(|b| b.disagreements()).unwrap_or_default()
}

pub fn bundle_show(path: &Path, as_json: bool, max_events: usize) -> Result<ExitCode> {
    let b = Bundle::open(path)?;
    let disagree = disagreements(path);
    let attribution = overeager_judge::input::attribute_bundle(&b)?;
    if as_json {
        print_json(&json!({"manifest": b.manifest, "diff": b.diff(), "events": b.events, "disagreements": disagree, "attribution": attribution}));
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}{}", b.summary(), overeager_bundle::show::attribution_text(&attribution));
    if !disagree.is_empty() {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_header(["seq", "access", "path", "who saw it"]);
        for d in &disagree {
            let who = if d.observed { "the file watcher, not any command line" } else { "a command line, not the file watcher" };
            t.add_row([d.seq.to_string(), d.access.to_string(), d.path.clone(), who.to_string()]);
        }
        println!("Command lines and the file watcher disagree on {} access(es):\n{t}", disagree.len());
    }
    println!("{}", b.events_table(&attribution, max_events));
    if b.events.len() > max_events {
        println!("… {} more events (--events N, or --json)", b.events.len() - max_events);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn bundle_pack(dir: &Path, file: &Path) -> Result<ExitCode> {
    let size = pack::pack(dir, file)?;
    println!("packed {} → {} ({size} bytes)", dir.display(), file.display());
    Ok(ExitCode::SUCCESS)
}

pub fn bundle_unpack(file: &Path, dir: &Path, max_bytes: u64) -> Result<ExitCode> {
    let limits = pack::Limits { max_total: max_bytes, ..pack::Limits::default() };
    let n = pack::unpack(file, dir, &limits)?;
    println!("unpacked {} → {} ({n} bytes)", file.display(), dir.display());
    Ok(ExitCode::SUCCESS)
}

pub fn sweep(args: &SweepArgs) -> Result<ExitCode> {
    let bar = ProgressBar::new(0);
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} runs {elapsed} {msg}").expect("valid template"));
    let s = overeager_experiment::sweep::sweep(&args.seeds, &args.out, args.jobs, &|total| {
        bar.set_length(total);
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let failures = s.rows.iter().filter(|r| r.result.is_err()).count();
    let mismatches = s.rows.iter().filter(|r| r.result.is_ok() && !r.as_designed()).count();
    if args.json {
        for line in s.json_lines() {
            println!("{line}");
        }
    } else {
        print!("{}", s.text(&args.out));
    }
    if mismatches > 0 {
        bail!("{mismatches} run(s) did not fire exactly the traps their play is designed to fire");
    }
    if failures > 0 {
        for r in s.rows.iter().filter(|r| r.result.is_err()) {
            eprintln!("{} / {}: {:#}", r.scenario, r.play, r.result.as_ref().expect_err("failed"));
        }
        bail!("{failures} run(s) failed");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn bench_docker(args: &BenchDockerArgs) -> Result<ExitCode> {
    let f = overeager_bench::runs::docker(&args.seeds, &args.scenario, args.agent.clone(), args.iterations, args.parallel_runs)?;
    if args.json {
        print_json(&serde_json::to_value(&f)?);
        return Ok(ExitCode::SUCCESS);
    }
    let (o, b, p) = (&f.overeager_run, &f.bare_docker_run, &f.parallel2);
    println!("one run ({} / {}, n={} pairs, side by side):", f.scenario, f.agent, args.iterations);
    println!("  overeager --executor docker  median {:7.1} ms  p90 {:7.1} ms", o.median_ms, o.p90_ms);
    println!("  bare docker run --rm         median {:7.1} ms  p90 {:7.1} ms", b.median_ms, b.p90_ms);
    println!("  overhead: {:.2}x the bare run", f.median_ratio);
    println!("parallelism 2 ({} runs each): overeager {:.2} runs/s, bare docker run {:.2} runs/s", p.runs, p.overeager_runs_per_s, p.bare_runs_per_s);
    Ok(ExitCode::SUCCESS)
}

/// Wall time of real-agent runs per agent and executor, and the observers' overhead against
/// the same CLI run bare on the same prepared workspace.
pub fn bench_agents(args: &BenchAgentsArgs) -> Result<ExitCode> {
    let mut print_row = |r: &overeager_bench::runs::AgentRow| {
        if args.json {
            return;
        }
        if let Some(g) = &r.gateway {
            let (t, f, x) = (g.added_total_ms, g.added_first_byte_ms, g.relay_ms);
            println!("{:<28} gateway  {} calls: added {:.2} ms median, {:.2} ms p99; first byte {:.2} / {:.2} ms; own relay {:.2} / {:.2} ms", r.agent, g.calls, t.median, t.p99, f.median, f.p99, x.median, x.p99);
        }
        match (r.median_ratio, &r.bare) {
            (Some(ratio), Some(b)) => println!("{:<28} {:<6} observed median {:8.1} ms   bare median {:8.1} ms   overhead {ratio:.2}x", r.agent, r.executor, r.observed.median_ms, b.median_ms),
            _ => println!("{:<28} {:<6} observed median {:8.1} ms", r.agent, r.executor, r.observed.median_ms),
        }
    };
    let f = overeager_bench::runs::agents(&args.scenario, &args.agents, &args.executors, args.play, args.iterations, &mut print_row)?;
    if args.json {
        print_json(&serde_json::to_value(&f)?);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn bench_run(args: &BenchRunArgs) -> Result<ExitCode> {
    let f = overeager_bench::runs::scripted(&args.seeds, &args.scenario, args.iterations, args.rounds)?;
    if args.json {
        print_json(&serde_json::to_value(&f)?);
        return Ok(ExitCode::SUCCESS);
    }
    let s = &f.single_run.wall;
    println!("single run ({} / scripted:aggressive, n={}): median {:.1} ms  p90 {:.1} ms  min {:.1} ms  max {:.1} ms", f.single_run.scenario, s.n, s.median_ms, s.p90_ms, s.min_ms, s.max_ms);
    let (w, p) = (&f.sweep.wall, &f.sweep.per_run);
    println!(
        "sweep ({} scenarios × 3 plays = {} runs, sequential, n={}): median {:.0} ms total, per run median {:.1} ms  p90 {:.1} ms",
        f.sweep.scenarios, f.sweep.runs, w.n, w.median_ms, p.median_ms, p.p90_ms
    );
    Ok(ExitCode::SUCCESS)
}
