//! `overeager validate`: run each scenario's three plays, judge them, and admit or reject.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;

use super::judge::SandboxArgs;
use overeager_experiment::plays::PlayValidator;
use overeager_scenario as scenario;
use overeager_gen::validate::{Validation, Validator};
use overeager_run as run;

/// Arguments of `overeager validate`.
#[derive(Args)]
pub struct ValidateArgs {
    /// Scenario directories, or directories searched for them.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Where the plays run: `local`, or `docker` (a hardened container per play).
    #[arg(long, default_value = "local", value_parser = ["local", "docker"])]
    pub executor: String,
    /// Play through this real-CLI cell on the scripted model (`<agent>[@<version>]:<policy>`,
    /// e.g. claude-code:permissive) instead of the scripted agent: a scenario is admitted only
    /// if its plays keep their gradient through that CLI. Each play whose run differs from the
    /// scripted play is listed with the framework rule that explains it, or as the harness's.
    #[arg(long, value_name = "CELL")]
    pub agent: Option<String>,
    /// Print one JSON object per scenario instead of the table.
    #[arg(long)]
    pub json: bool,
}

fn traps(v: &Validation, i: usize) -> String {
    match v.plays.get(i) {
        Some(p) if p.fired.is_empty() => "-".into(),
        Some(p) => p.fired.iter().cloned().collect::<Vec<_>>().join(", "),
        None => "not run".into(),
    }
}

pub fn validate_cmd(args: &ValidateArgs) -> Result<ExitCode> {
    let report = scenario::check_all(&args.paths).map_err(anyhow::Error::msg)?;
    if !report.errors.is_empty() {
        for e in &report.errors {
            eprintln!("{e}");
        }
        bail!("{} scenario error(s); fix them before validating", report.errors.len());
    }
    if let Some(cell) = &args.agent {
        let spec = overeager_experiment::plays::player(Some(cell), overeager_core::PlayKind::Cautious).map_err(|e| anyhow::anyhow!("--agent {cell}: {e}"))?;
        if args.executor != "local" {
            bail!("--agent runs the CLI on the local executor against the scripted model; leave --executor at local");
        }
        if let run::AgentSpec::Agent { recipe, version, .. } = spec {
            overeager_agents::install::ensure(recipe, version)?;
        }
    }
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let (judge, _) = args.sandbox.build()?;
    let executor = run::Executor::open(&args.executor)?;
    let bar = if report.loaded.len() > 1 { ProgressBar::with_draw_target(Some(report.loaded.len() as u64), ProgressDrawTarget::stderr()) } else { ProgressBar::hidden() };
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} scenarios {elapsed}").expect("valid template"));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.sandbox.jobs.max(1)).build()?;
    let validator = PlayValidator { cell: args.agent.clone(), judge: &judge, executor: &executor, shim: &shim };
    let started = Instant::now();
    let results: Vec<Result<Validation>> = pool.install(|| {
        report
            .loaded
            .par_iter()
            .map(|s| {
                let v = validator.validate_in_scratch(s);
                bar.inc(1);
                v
            })
            .collect()
    });
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let results: Vec<Validation> = results.into_iter().collect::<Result<_>>()?;
    let rejected = results.iter().filter(|v| !v.admitted).count();
    if args.json {
        for v in &results {
            println!("{}", serde_json::to_string(v)?);
        }
    } else {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_header(["scenario", "cautious", "moderate", "aggressive", "decision"]);
        for v in &results {
            t.add_row([v.scenario.clone(), traps(v, 0), traps(v, 1), traps(v, 2), if v.admitted { "admitted".into() } else { "REJECTED".into() }]);
        }
        println!("{t}");
        for v in results.iter().filter(|v| !v.admitted) {
            println!("{}: {}", v.scenario, v.reason.as_deref().unwrap_or_default());
        }
        for v in &results {
            for d in &v.differences {
                let by = match &d.divergence.cause {
                    overeager_formats::attribution::Cause::Framework { rule, summary, detail, .. } => format!("framework rule {rule}: {detail} ({summary})"),
                    overeager_formats::attribution::Cause::Harness { detail } => format!("HARNESS: {detail}"),
                };
                println!("{} · {}: differs from the scripted play: {by}", v.scenario, d.play);
            }
        }
        println!(
            "{} scenario(s) validated in {elapsed:.2} s ({:.1}/s, 3 plays each): {} admitted, {rejected} rejected",
            results.len(),
            results.len() as f64 / elapsed,
            results.len() - rejected
        );
    }
    Ok(if rejected > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
