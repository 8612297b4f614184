//! `overeager stats …`: the report's statistics as a calculator.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use clap::{Args, Subcommand};
use overeager_core::stats;
use serde_json::json;

use super::print_json;

/// The calculator's tests.
#[derive(Subcommand)]
pub enum StatsCmd {
    /// Wilson score interval for k successes in n trials.
    Wilson {
        k: u64,
        n: u64,
        /// Confidence level.
        #[arg(long, default_value_t = 0.95)]
        confidence: f64,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// McNemar's exact test on the discordant pair counts b and c.
    Mcnemar {
        b: u64,
        c: u64,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Fisher's exact test (two-sided) on the 2×2 table [[a, b], [c, d]].
    Fisher {
        a: u64,
        b: u64,
        c: u64,
        d: u64,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Cohen's κ from a CSV: a header row, then one row per item with the two raters' labels.
    Kappa {
        csv: PathBuf,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// χ² test of independence (no continuity correction) from a CSV of counts, no header.
    Chi2 {
        csv: PathBuf,
        #[command(flatten)]
        out: JsonFlag,
    },
}

/// `--json`.
#[derive(Args)]
pub struct JsonFlag {
    /// Print one JSON object with the inputs and the result.
    #[arg(long)]
    json: bool,
}

fn kappa(path: &Path, as_json: bool) -> Result<ExitCode> {
    let pairs = overeager_report::calculator::rating_pairs(path)?;
    let k = stats::cohen_kappa(&pairs).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    if as_json {
        let (lo, hi) = k.interval(0.95);
        print_json(&json!({"file": path, "n": k.n, "kappa": k.kappa, "se": k.se, "ci95": [lo, hi], "observed": k.observed, "expected": k.expected, "labels": k.labels, "table": k.table}));
    } else {
        let (lo, hi) = k.interval(0.95);
        println!("κ = {:.6}  95% CI [{lo:.4}, {hi:.4}], se {:.4}  (n = {}, observed agreement {:.4}, chance agreement {:.4})", k.kappa, k.se, k.n, k.observed, k.expected);
        if k.n < stats::KAPPA_FEW {
            println!("few items (n < {}): the interval, a normal approximation, is rough", stats::KAPPA_FEW);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn chi2(path: &Path, as_json: bool) -> Result<ExitCode> {
    let table = overeager_report::calculator::counts_table(path)?;
    let c = stats::chi2_independence(&table).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    if as_json {
        print_json(&json!({"file": path, "table": table, "chi2": c.chi2, "dof": c.dof, "p": c.p, "cramers_v": c.cramers_v, "n": c.n}));
    } else {
        println!("χ² = {:.6}, dof = {}, p = {:.6e}  (n = {}, Cramér's V = {:.4})", c.chi2, c.dof, c.p, c.n, c.cramers_v);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn stats_cmd(cmd: &StatsCmd) -> Result<ExitCode> {
    match cmd {
        StatsCmd::Wilson { k, n, confidence, out } => {
            let i = stats::wilson(*k, *n, *confidence)?;
            let rate = *k as f64 / *n as f64;
            if out.json {
                print_json(&json!({"k": k, "n": n, "confidence": confidence, "rate": rate, "lo": i.lo, "hi": i.hi}));
            } else {
                println!("{k}/{n} = {rate:.6}, {:.0}% Wilson interval [{:.6}, {:.6}]", confidence * 100.0, i.lo, i.hi);
            }
        }
        StatsCmd::Mcnemar { b, c, out } => {
            let p = stats::mcnemar_exact(*b, *c);
            if out.json {
                print_json(&json!({"b": b, "c": c, "p": p}));
            } else {
                println!("McNemar exact, b = {b}, c = {c}: p = {p:.10e}");
            }
        }
        StatsCmd::Fisher { a, b, c, d, out } => {
            let p = stats::fisher_exact(*a, *b, *c, *d);
            if out.json {
                print_json(&json!({"table": [[a, b], [c, d]], "p": p}));
            } else {
                println!("Fisher exact, two-sided, [[{a}, {b}], [{c}, {d}]]: p = {p:.10e}");
            }
        }
        StatsCmd::Kappa { csv, out } => return kappa(csv, out.json),
        StatsCmd::Chi2 { csv, out } => return chi2(csv, out.json),
    }
    Ok(ExitCode::SUCCESS)
}
