//! From a run id to what it recorded: `runs list` (the store's runs, filtered as the API's run
//! list is) and `bundle get` (a run's bundle, unpacked where replay and `bundle show` read it).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;

use super::experiment::DbArg;
use overeager_bundle::pack;
use overeager_core::Variant;
use overeager_formats::model::usage::usd;
use overeager_store::Store;
use overeager_store::runs::{RunFilter, RunRow};

/// Arguments of `overeager runs list`.
#[derive(Args)]
pub struct ListArgs {
    /// Only this experiment's runs.
    #[arg(long)]
    pub experiment: Option<String>,
    /// Only runs with this outcome: overeager, clean, incomplete, timed_out, failed, pending.
    #[arg(long)]
    pub outcome: Option<String>,
    /// Only this framework's runs (a cell's framework label).
    #[arg(long)]
    pub framework: Option<String>,
    /// Only this model's runs.
    #[arg(long)]
    pub model: Option<String>,
    /// Only this scenario's runs (id or hash).
    #[arg(long)]
    pub scenario: Option<String>,
    /// Only this prompt variant's runs (consent_kept or consent_stripped).
    #[arg(long)]
    pub variant: Option<Variant>,
    /// At most this many runs, in the order they were planned.
    #[arg(long, default_value_t = 200)]
    pub limit: u32,
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON (the API's run page).
    #[arg(long)]
    pub json: bool,
}

pub fn list(args: &ListArgs) -> Result<ExitCode> {
    let store = Store::open_existing(&args.db.db)?;
    let filter = RunFilter {
        experiment: args.experiment.clone(),
        framework: args.framework.clone(),
        model: args.model.clone(),
        scenario: args.scenario.clone(),
        variant: args.variant,
        outcome: args.outcome.clone(),
        limit: Some(args.limit),
        ..RunFilter::default()
    };
    let page = store.run_rows(&filter)?;
    if args.json {
        super::print_json(&serde_json::to_value(&page)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(["run", "experiment", "framework", "model", "model played by", "scenario", "variant", "outcome", "traps", "tokens", "cost"]);
    for r in &page.runs {
        t.add_row([
            r.id.clone(),
            r.experiment.clone(),
            r.framework.clone(),
            r.model.clone(),
            r.played_by.label(),
            r.scenario.clone(),
            r.variant.as_str().trim_start_matches("consent_").to_string(),
            outcome(r),
            r.traps.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>().join(" "),
            r.tokens.map_or_else(String::new, |u| u.total().to_string()),
            r.cost_usd.map_or_else(String::new, usd),
        ]);
    }
    println!("{t}");
    println!("{} of {} runs; `overeager bundle get <run>` fetches one's bundle", page.runs.len(), page.total);
    Ok(ExitCode::SUCCESS)
}

/// A run's state as one word: its outcome once judged, else its status.
fn outcome(r: &RunRow) -> String {
    if r.timed_out {
        return "timed out".into();
    }
    match (&r.outcome, r.status.as_str()) {
        (Some(o), _) => o.as_str().to_string(),
        (None, "failed") => "failed".into(),
        (None, status) => status.to_string(),
    }
}

/// Arguments of `overeager bundle get`.
#[derive(Args)]
pub struct GetArgs {
    /// The run's id (`overeager runs list` names them).
    pub run: String,
    /// The directory to unpack it into (new or empty); `./<run>` by default.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Copy the packed `.oeb` file to `--out` (`./<run>.oeb` by default) instead of unpacking it.
    #[arg(long)]
    pub packed: bool,
    #[command(flatten)]
    pub db: DbArg,
}

pub fn get(args: &GetArgs) -> Result<ExitCode> {
    let store = Store::open_existing(&args.db.db)?;
    let file = store.packed_bundle(&args.run)?;
    if args.packed {
        let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("{}.oeb", args.run)));
        std::fs::copy(&file, &out).with_context(|| format!("copying {} to {}", file.display(), out.display()))?;
        println!("{}", out.display());
    } else {
        let out = args.out.clone().unwrap_or_else(|| PathBuf::from(&args.run));
        pack::unpack(&file, &out, &pack::Limits::default()).with_context(|| format!("unpacking the bundle of run `{}` into {}", args.run, out.display()))?;
        println!("{}", out.display());
        eprintln!("replay it with `overeager run --agent <agent>:<policy>:replay:{} …` (the bundle names its scenario), or look with `overeager bundle show {}`", out.display(), out.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// What `bundle show` opens for `path`: the path itself, or, when no such file or directory
/// exists, the bundle of the run of that id in the store `db`.
pub fn bundle_or_run(path: &Path, db: &Path) -> Result<PathBuf> {
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    let id = path.to_string_lossy();
    if !db.is_file() {
        bail!("{} is no bundle directory or .oeb file (and there is no store at {} to find a run of that id in)", path.display(), db.display());
    }
    Store::open_existing(db)?.packed_bundle(&id).with_context(|| format!("{} is no bundle directory or .oeb file", path.display()))
}
