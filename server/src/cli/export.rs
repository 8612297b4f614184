//! `overeager export`: runs as ATIF trajectories or Inspect logs.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::experiment::DbArg;
use overeager_report::export;
use overeager_report::formats::Format;
use overeager_report::{atif, inspect};
use overeager_store::Store;

/// Arguments of `overeager export`.
#[derive(Args)]
pub struct ExportArgs {
    /// A bundle directory or `.oeb` file, or a run or experiment id of the store.
    pub source: String,
    #[arg(long, value_enum)]
    pub format: Format,
    /// Where to write; must not exist. One run: a file (`.json` for ATIF, `.eval` or `.json`
    /// for Inspect). An experiment: a directory (ATIF: one Harbor trial directory per run;
    /// Inspect: one log per cell, or per run with --per-run).
    #[arg(long)]
    pub out: PathBuf,
    /// Inspect: one log per run instead of one per experiment cell.
    #[arg(long)]
    pub per_run: bool,
    /// Inspect, for an experiment: write `.json` logs instead of `.eval` archives.
    #[arg(long)]
    pub json_logs: bool,
    #[command(flatten)]
    pub modules: super::judge::ModulesArgs,
    #[command(flatten)]
    pub db: DbArg,
}

pub fn export_cmd(args: &ExportArgs) -> Result<ExitCode> {
    export::require_free(&args.out)?;
    let path = PathBuf::from(&args.source);
    let (runs, experiment) = if path.exists() {
        let judge = args.modules.judge(1)?;
        (vec![export::from_bundle(&path, &judge)?], None)
    } else {
        if !args.db.db.is_file() {
            bail!("`{}` is not a bundle path, and there is no store at {} to look it up in (pass --db); nothing was exported", args.source, args.db.db.display());
        }
        let store = Store::open_reader(&args.db.db)?;
        let runs = export::from_store(&store, &args.source)?;
        let experiment = store.experiment(&args.source)?.map(|e| e.id);
        (runs, experiment)
    };
    let n = runs.len();
    match (args.format, experiment) {
        (Format::Atif, Some(_)) => atif::write_trials(&runs, &args.out)?,
        (Format::Atif, None) => atif::write_file(&runs[0], &args.out)?,
        (Format::Inspect, Some(exp)) => {
            let encoding = if args.json_logs { inspect::Encoding::Json } else { inspect::Encoding::Eval };
            inspect::write_dir(&exp, runs, args.per_run, encoding, &args.out)?;
        }
        (Format::Inspect, None) => inspect::write_file(&runs[0].task(), &runs, &args.out).context("writing the Inspect log")?,
    }
    eprintln!("exported {n} run(s) to {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}
