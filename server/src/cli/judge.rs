//! `overeager judge` and `overeager bench judge`: verdicts for bundles, one or thousands.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use super::{default_jobs, print_json};
use overeager_judge::engine::{Limits, default_cache_dir};
use overeager_judge::trust::TrustStore;
use overeager_judge::{Judge, JudgeOptions, LoadReport, ModuleSet, Origin, input, verdicts};

/// Exit status of `judge` when a verdict's outcome is incomplete (a check it needed has no
/// answer) or a bundle could not be read.
pub const EXIT_INCOMPLETE: u8 = 4;

/// How the predicate sandbox is set up; shared by the commands that judge.
#[derive(Args, Clone)]
pub struct SandboxArgs {
    /// Third-party predicate modules: a directory of signed `*.wasm` components (each with
    /// `<file>.sig` beside it), or one such file. Repeatable. The built-in `std` is always loaded.
    #[arg(long = "predicates", value_name = "DIR|FILE")]
    pub predicates: Vec<PathBuf>,
    /// The trust store deciding which signing keys are accepted
    /// [default: $XDG_CONFIG_HOME/overeager/trust.toml].
    #[arg(long, env = "OVEREAGER_TRUST")]
    pub trust: Option<PathBuf>,
    /// Fuel for one predicate call, plus 200 units per byte of bundle; the deterministic CPU budget.
    #[arg(long, default_value_t = Limits::default().fuel_base)]
    pub fuel: u64,
    /// Linear memory cap of one predicate instance for a small bundle, in MiB.
    #[arg(long, default_value_t = 128)]
    pub memory_mib: usize,
    /// Extra linear memory per byte of bundle view, so large bundles are judged completely.
    #[arg(long, default_value_t = 12)]
    pub memory_per_byte: usize,
    /// The most linear memory any call gets, in MiB; a bundle that needs more is incomplete.
    #[arg(long, default_value_t = 3072)]
    pub memory_ceiling_mib: usize,
    /// Wall-clock backstop of one predicate call, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub wall_secs: f64,
    /// Compile modules every time instead of using the cache of compiled code.
    #[arg(long)]
    pub no_cache: bool,
    /// Bundles judged in parallel.
    #[arg(long, default_value_t = default_jobs())]
    pub jobs: usize,
}

impl SandboxArgs {
    fn limits(&self) -> Result<Limits> {
        if self.memory_mib == 0 || self.memory_mib > 4096 {
            bail!("--memory-mib must be between 1 and 4096");
        }
        if self.memory_ceiling_mib < self.memory_mib || self.memory_ceiling_mib > 4096 {
            bail!("--memory-ceiling-mib must be between --memory-mib ({}) and 4096 (the most a 32-bit predicate can address)", self.memory_mib);
        }
        if !(self.wall_secs > 0.0 && self.wall_secs.is_finite()) {
            bail!("--wall-secs must be a positive number of seconds");
        }
        Ok(Limits { fuel_base: self.fuel, memory_bytes: self.memory_mib << 20,
            memory_per_byte: self.memory_per_byte,
            memory_ceiling: self.memory_ceiling_mib << 20,
            wall: Duration::from_secs_f64(self.wall_secs), ..Limits::default() })
    }

    /// The trust store file in use.
    pub fn trust_path(&self) -> PathBuf {
        self.trust.clone().unwrap_or_else(TrustStore::default_path)
    }

    /// Builds the judge and loads the third-party modules, reporting refusals on stderr.
    pub fn build(&self) -> Result<(Judge, Vec<LoadReport>)> {
        let trust = TrustStore::load(&self.trust_path())?;
        let cache = if self.no_cache { None } else { default_cache_dir() };
        let mut judge = Judge::new(JudgeOptions { limits: self.limits()?, jobs: self.jobs.max(1), cache, trust })?;
        let mut reports = Vec::new();
        for p in &self.predicates {
            reports.extend(judge.add_path(p)?);
        }
        // Two builds of one module: which one would judge depends on file order, so neither does.
        if let Some(r) = reports.iter().find(|r| r.duplicate_of.is_some()) {
            anyhow::bail!("--predicates {}: {}", r.file.display(), r.error.as_deref().unwrap_or_default());
        }
        for r in reports.iter().filter(|r| r.error.is_some()) {
            let id = r.id.as_deref().map(|i| format!(" ({i})")).unwrap_or_default();
            eprintln!("warning: refused {}{id}: {}", r.file.display(), r.error.as_deref().unwrap_or_default());
        }
        Ok((judge, reports))
    }
}

/// Third-party predicate modules for the commands that judge with default limits
/// (`experiment run`, `export`).
#[derive(Args, Clone, Default)]
pub struct ModulesArgs {
    /// Third-party predicate modules: a directory of signed `*.wasm` components (each with
    /// `<file>.sig` beside it), or one such file. Repeatable. The built-in `std` is always loaded.
    #[arg(long = "predicates", value_name = "DIR|FILE")]
    pub predicates: Vec<PathBuf>,
    /// The trust store deciding which signing keys are accepted
    /// [default: $XDG_CONFIG_HOME/overeager/trust.toml].
    #[arg(long, env = "OVEREAGER_TRUST")]
    pub trust: Option<PathBuf>,
}

impl ModulesArgs {
    /// The modules as the judge takes them.
    pub fn set(&self) -> ModuleSet {
        ModuleSet { predicates: self.predicates.clone(), trust: self.trust.clone() }
    }

    /// A judge with default limits, `std`, and these modules (see [`ModuleSet::judge`]).
    pub fn judge(&self, jobs: usize) -> Result<Judge> {
        self.set().judge(jobs)
    }
}

/// Arguments of `overeager judge`.
#[derive(Args)]
pub struct JudgeArgs {
    /// Bundle directories, `.oeb` files, or directories searched for them.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Print one JSON verdict per bundle per line (a stable contract) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Judge every bundle twice, with two builds of the std module, and list the verdicts that
    /// change: each side is `builtin` (this build's std) or a std component file (an older
    /// release). Third-party modules (`--predicates`) are the same on both sides.
    #[arg(long, num_args = 2, value_names = ["OLD", "NEW"])]
    pub compare: Vec<String>,
    /// Judge bundles whose scenarios call a module not given (its checks are then unanswered
    /// and the verdicts incomplete) instead of refusing them all, naming the module.
    #[arg(long)]
    pub allow_missing_modules: bool,
}

/// One side of `judge --compare`: the judge, and how its std is named.
fn compare_side(args: &JudgeArgs, which: &str) -> Result<(Judge, String)> {
    let (mut judge, _) = args.sandbox.build()?;
    if which == "builtin" {
        return Ok((judge, format!("std {} (built in)", overeager_judge::STD_VERSION)));
    }
    let path = Path::new(which);
    let bytes = std::fs::read(path).with_context(|| format!("reading the std component {}; give a .wasm file or `builtin`", path.display()))?;
    let label = format!("std from {}", path.display());
    judge.with_std(&bytes, &label).with_context(|| format!("{} is not a std component this judge can load", path.display()))?;
    Ok((judge, label))
}

/// `overeager judge --compare OLD NEW`: the verdicts two std builds disagree on.
fn compare_cmd(args: &JudgeArgs, paths: &[PathBuf]) -> Result<ExitCode> {
    let (old, old_label) = compare_side(args, &args.compare[0])?;
    let (new, new_label) = compare_side(args, &args.compare[1])?;
    let bar = progress(paths.len() * 2);
    let changed = verdicts::compare(&old, &new, paths, args.sandbox.jobs, !args.allow_missing_modules, &|| bar.inc(1))?;
    bar.finish_and_clear();
    if args.json {
        print_json(&json!({"old": old_label, "new": new_label, "bundles": paths.len(), "changed": changed}));
    } else {
        println!("{} of {} verdicts change from {old_label} to {new_label}", changed.len(), paths.len());
        if !changed.is_empty() {
            println!("{}", verdicts::changes_table(&changed));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn progress(n: usize) -> ProgressBar {
    if n < 2 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(n as u64), ProgressDrawTarget::stderr());
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} bundles {elapsed} ({per_sec})").expect("valid template"));
    bar
}

/// The JSON line of a bundle that could not be read: the contract's fields, with the reason.
fn unreadable(bundle: &Path, error: &str) -> serde_json::Value {
    json!({"schema": overeager_core::verdict::VERDICT_SCHEMA, "bundle": bundle.display().to_string(), "overeager": null, "traps": [],
           "success": null, "severity_total": 0, "critical": 0,
           "errors": [{"site": "bundle", "id": "", "predicate": "", "message": error}]})
}

pub fn judge_cmd(args: &JudgeArgs) -> Result<ExitCode> {
    let paths = input::discover(&args.paths)?;
    if !args.compare.is_empty() {
        return compare_cmd(args, &paths);
    }
    let (judge, _) = args.sandbox.build()?;
    let bar = progress(paths.len());
    let started = Instant::now();
    let results = judge.judge_all(&paths, args.sandbox.jobs, !args.allow_missing_modules, &|| bar.inc(1))?;
    bar.finish_and_clear();
    // The summary and the exit status follow each verdict's outcome: a verdict decided though
    // a check had no answer (a trap fired) is that outcome, not incomplete.
    let outcomes = |o: overeager_core::Outcome| results.iter().flatten().filter(|v| v.outcome == o).count();
    let (overeager, clean, incomplete) = (outcomes(overeager_core::Outcome::Overeager), outcomes(overeager_core::Outcome::Clean), outcomes(overeager_core::Outcome::Incomplete));
    let unreadable_count = results.iter().filter(|r| r.is_err()).count();
    if args.json {
        let mut out = String::new();
        for (p, r) in paths.iter().zip(&results) {
            let line = match r {
                Ok(v) => serde_json::to_string(v)?,
                Err(e) => unreadable(p, e).to_string(),
            };
            out.push_str(&line);
            out.push('\n');
        }
        print!("{out}");
    } else {
        println!("{}", verdicts::table(&paths, &results));
        for v in results.iter().flatten() {
            for e in &v.errors {
                println!("{}: {} {} ({}): {}", v.bundle, e.site, e.id, e.predicate, e.message);
            }
        }
        let decided_with_errors = results.iter().flatten().filter(|v| !v.errors.is_empty() && v.outcome != overeager_core::Outcome::Incomplete).count();
        println!(
            "{} bundle(s) judged in {:.2} s: {overeager} overeager, {clean} clean, {incomplete} incomplete{}{}; modules: {}",
            results.len(),
            started.elapsed().as_secs_f64(),
            if unreadable_count > 0 { format!(", {unreadable_count} unreadable") } else { String::new() },
            if decided_with_errors > 0 { format!(" ({decided_with_errors} decided though a check had no answer, listed above)") } else { String::new() },
            judge.modules().map(|m| format!("{} {}", m.id, &m.digest[..12])).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(if incomplete + unreadable_count > 0 { ExitCode::from(EXIT_INCOMPLETE) } else { ExitCode::SUCCESS })
}

/// Arguments of `overeager bench judge`.
#[derive(Args)]
pub struct BenchJudgeArgs {
    /// Where the seed scenarios are (their plays make the bundles).
    #[arg(long, default_value = "scenarios/seeds")]
    pub seeds: PathBuf,
    /// How many bundles to judge (copies of the seed runs).
    #[arg(long, default_value_t = 7500)]
    pub bundles: usize,
    /// Instantiations timed for the per-instance figure.
    #[arg(long, default_value_t = 2000)]
    pub instantiations: usize,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn bench_judge(args: &BenchJudgeArgs) -> Result<ExitCode> {
    let limits = args.sandbox.limits()?;
    let f = overeager_bench::judging::judging(&args.seeds, args.bundles, args.instantiations, &limits, args.sandbox.jobs, &|| Ok(args.sandbox.build()?.0))?;
    if args.json {
        print_json(&serde_json::to_value(&f)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{} bundles ({} distinct seed runs, mean compact view {} bytes); judge set-up {:.0} ms", f.bundles, f.distinct_bundles, f.mean_view_bytes, f.judge_setup_ms);
    let from = match f.std_compiled_code {
        Origin::Embedded => "built into the binary",
        Origin::Cache => "from the cache",
        Origin::Compiled => "compiled now: the artifact built into the binary does not fit this machine",
    };
    println!("first verdict: {:.0} ms with an empty cache of compiled code (std's code {from}), {:.1} ms the second time", f.first_verdict_ms.empty_cache, f.first_verdict_ms.again);
    let l = &f.load_only;
    println!("read and parse only, {} threads: {:.2} s ({:.0} bundles/s)", l.threads, l.seconds, l.bundles_per_second);
    for p in &f.judge {
        println!("judge, {} thread(s): {:.2} s ({:.0} bundles/s, load included)", p.threads, p.seconds, p.bundles_per_second);
    }
    println!("fresh instance from InstancePre: {:.1} µs", f.instantiation_us);
    println!(
        "per bundle, one thread: {:.0} µs to read it and build std's view, {:.0} µs for std's evaluate call ({:.0} units of fuel, the deterministic count of its work)",
        f.view_encoding_us, f.evaluate_us, f.evaluate_fuel
    );
    if let Some(rss) = f.peak_rss_mib {
        println!("peak RSS: {rss:.0} MiB");
    }
    Ok(ExitCode::SUCCESS)
}
