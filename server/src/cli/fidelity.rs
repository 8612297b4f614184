//! `overeager bench fidelity`: the fidelity check ([`overeager_experiment::fidelity`]) over
//! scenarios × plays × real-CLI cells, in parallel, with its report; exit 1 when any
//! difference is the harness's.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use overeager_core::PlayKind;
use rayon::prelude::*;

use overeager_experiment::fidelity::{CellPlay, Difference, FidelityReport};
use overeager_experiment::plays::player;
use overeager_judge::Judge;
use overeager_agents::attribution::Cause;
use overeager_run::{self as run, AgentSpec};
use overeager_scenario::{self as scenario, LoadedScenario};

/// Arguments of `overeager bench fidelity`.
#[derive(Args)]
pub struct BenchFidelityArgs {
    /// Real-CLI cells (`<agent>[@<version>]:<policy>`), comma-separated or repeated
    /// [default: the permissive cell of every agent].
    #[arg(long, value_delimiter = ',')]
    pub agents: Vec<String>,
    /// Plays to check, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = PlayKind::ALL.map(|k| k.to_string()))]
    pub plays: Vec<String>,
    /// Scenario directories, or a directory of them.
    #[arg(long, default_value = "scenarios/seeds")]
    pub seeds: PathBuf,
    /// Only these scenario ids (comma-separated or repeated).
    #[arg(long = "scenario", value_delimiter = ',')]
    pub scenarios: Vec<String>,
    /// Only the first N scenarios in id order.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Runs in parallel.
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Time limit of one run.
    #[arg(long, default_value = "150s", value_parser = overeager_core::parse_duration)]
    pub timeout: Duration,
    /// Keep every bundle under this directory (`<scenario>/<play>/<cell>`); otherwise they are
    /// removed when the check ends.
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the check and prints its report; exit 1 when any difference is the harness's.
pub fn bench_fidelity(args: &BenchFidelityArgs) -> Result<ExitCode> {
    let plays: Vec<PlayKind> = args.plays.iter().map(|p| p.parse()).collect::<Result<_, String>>().map_err(anyhow::Error::msg)?;
    let agents: Vec<String> = if args.agents.is_empty() {
        run::agents::all()?.iter().map(|r| format!("{}:{}", r.id, r.permissive_policy().id)).collect()
    } else {
        args.agents.clone()
    };
    // Every cell is a real CLI, installed before the first run so that runs do not race to
    // install it.
    for cell in &agents {
        let AgentSpec::Agent { recipe, version, .. } = player(Some(cell), PlayKind::Cautious).map_err(|e| anyhow::anyhow!("--agents {cell}: {e}"))? else {
            unreachable!("player gives real-CLI specs for a cell")
        };
        run::install::ensure(recipe, version).with_context(|| format!("installing {}", recipe.versioned_id(version)))?;
    }
    let report = scenario::check_all(std::slice::from_ref(&args.seeds)).map_err(anyhow::Error::msg)?;
    if !report.errors.is_empty() {
        for e in &report.errors {
            eprintln!("{e}");
        }
        bail!("{} scenario error(s) in {}", report.errors.len(), args.seeds.display());
    }
    let mut loaded: Vec<&LoadedScenario> = report.loaded.iter().filter(|s| args.scenarios.is_empty() || args.scenarios.contains(&s.scenario.id)).collect();
    loaded.sort_by(|a, b| a.scenario.id.cmp(&b.scenario.id));
    if let Some(missing) = args.scenarios.iter().find(|id| !loaded.iter().any(|s| &s.scenario.id == *id)) {
        bail!("--scenario {missing}: no such scenario under {}", args.seeds.display());
    }
    loaded.truncate(args.limit.unwrap_or(usize::MAX));
    if loaded.is_empty() {
        bail!("no scenario to check under {}", args.seeds.display());
    }
    let shim = run::locate_shim().map_err(anyhow::Error::msg)?;
    let judge = Judge::new(overeager_judge::JudgeOptions {
        limits: overeager_judge::engine::Limits::default(),
        jobs: 1,
        cache: overeager_judge::engine::default_cache_dir(),
        trust: overeager_judge::trust::TrustStore::default(),
    })?;
    let scratch;
    let root = match &args.keep {
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
    let jobs: Vec<(&LoadedScenario, PlayKind)> = loaded.iter().flat_map(|s| plays.iter().map(move |p| (*s, *p))).collect();
    let bar = ProgressBar::with_draw_target(Some((jobs.len() * (1 + agents.len())) as u64), ProgressDrawTarget::stderr());
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} runs {elapsed}").expect("valid template"));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.jobs.max(1)).build()?;
    let started = Instant::now();
    let results: Vec<(PlayKind, Vec<(String, Option<Difference>, usize)>)> =
        pool.install(|| jobs.par_iter().map(|(s, p)| (*p, overeager_experiment::fidelity::check_one(s, *p, &agents, args.timeout, args.keep.is_some(), &shim, &judge, &root, &|| bar.inc(1)))).collect());
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();

    let mut cells: Vec<CellPlay> = Vec::new();
    let mut differences = Vec::new();
    for cell in &agents {
        for play in &plays {
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
    let report = FidelityReport { scenarios: loaded.len(), cells, differences, runs, agree, harness, seconds };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, &plays);
    }
    Ok(if harness > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn print_report(r: &FidelityReport, plays: &[PlayKind]) {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(std::iter::once("cell".to_string()).chain(plays.iter().map(|p| p.to_string())));
    let mut seen: Vec<&str> = Vec::new();
    for c in &r.cells {
        if !seen.contains(&c.cell.as_str()) {
            seen.push(&c.cell);
        }
    }
    for cell in seen {
        let row = std::iter::once(cell.to_string()).chain(plays.iter().map(|p| {
            r.cells.iter().find(|c| c.cell == cell && c.play == *p).map_or_else(String::new, |c| {
                let mut s = format!("{}/{}", c.agree, c.runs);
                if c.framework > 0 {
                    s.push_str(&format!(" ({} framework)", c.framework));
                }
                if c.harness > 0 {
                    s.push_str(&format!(" ({} HARNESS)", c.harness));
                }
                if c.framework_traps > 0 {
                    s.push_str(&format!(" ({} with a trap of the framework's)", c.framework_traps));
                }
                if c.framework_effects > 0 {
                    s.push_str(&format!(" [{} with framework effects]", c.framework_effects));
                }
                s
            })
        }));
        t.add_row(row);
    }
    println!("{t}");
    for d in &r.differences {
        let (by, text) = match &d.divergence.cause {
            Cause::Framework { rule, summary, evidence, detail } => (format!("framework: {rule}"), format!("{detail} — {summary} (events {evidence:?})")),
            Cause::Harness { detail } => ("HARNESS".to_string(), detail.clone()),
        };
        println!("{} · {} · {}: {by}: {text}", d.cell, d.play, d.scenario);
    }
    println!(
        "{} of {} runs agree with their play ({:.1}%) over {} scenario(s); {} harness difference(s); {:.0} s",
        r.agree,
        r.runs,
        100.0 * r.agree as f64 / r.runs.max(1) as f64,
        r.scenarios,
        r.harness,
        r.seconds
    );
}
