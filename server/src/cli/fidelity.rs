//! `overeager bench fidelity`: the fidelity check ([`overeager_experiment::fidelity`]) over
//! scenarios × plays × real-CLI cells, in parallel, with its report; exit 1 when any
//! difference is the harness's.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use overeager_core::PlayKind;

use overeager_formats::attribution::Cause;
use overeager_bench::fidelity::{Options, Tick, check};
use overeager_experiment::fidelity::FidelityReport;

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
    let opts = Options {
        agents: args.agents.clone(),
        plays: plays.clone(),
        seeds: args.seeds.clone(),
        scenarios: args.scenarios.clone(),
        limit: args.limit,
        jobs: args.jobs,
        timeout: args.timeout,
        keep: args.keep.clone(),
    };
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} runs {elapsed}").expect("valid template"));
    let report = check(&opts, &|t| match t {
        Tick::Total(n) => bar.set_length(n),
        Tick::Ran => bar.inc(1),
    })?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, &plays);
    }
    Ok(if report.harness > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
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
