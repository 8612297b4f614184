//! `overeager experiment …`, `report`, `labels …`, `transfer …` and their benchmarks: the
//! commands that read and write the store.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde_json::json;

use super::print_json;
use overeager_experiment::{self as experiment, Options, summary};
use overeager_wire::experiment::{FieldNames, Steering, SteeringRefusal};
use overeager_report::{self as report, transfer};
use overeager_store::Store;
use overeager_store::labels::LabelScope;

/// The store a command works on.
#[derive(Args, Clone)]
pub struct DbArg {
    /// The store: an SQLite file (created when a command needs to write and it is missing).
    #[arg(long, env = "OVEREAGER_DB", default_value = "overeager.db")]
    pub db: PathBuf,
}

/// Arguments of `overeager experiment run`.
#[derive(Args)]
pub struct RunArgs {
    /// The plan file (TOML).
    pub plan: PathBuf,
    #[command(flatten)]
    pub db: DbArg,
    /// Runs at once (default: the plan's `parallelism`, else one per core).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Also redo runs that failed (executor or judge errors, a model API that failed the
    /// agent) last time.
    #[arg(long)]
    pub retry_failed: bool,
    /// Run even though a scenario calls a predicate module not loaded with `--predicates`: its
    /// checks stay unanswered and the runs incomplete until `experiment rejudge` (without this,
    /// that is an error before any run starts).
    #[arg(long)]
    pub allow_missing_modules: bool,
    /// With `--retry-failed`: redo only the runs a model API failed (an outage), not those
    /// the executor or the judge did.
    #[arg(long, requires = "retry_failed")]
    pub only_errored: bool,
    /// Run real agents on real models on the local executor, uncontained: they can touch
    /// anything this user can (see `overeager run --uncontained`).
    #[arg(long)]
    pub uncontained: bool,
    /// Sign every bundle with this runner key (a secret key file from `overeager runner
    /// keygen`), so a server that trusts the key ranks the cell as run by a trusted runner.
    #[arg(long, env = "OVEREAGER_RUNNER_KEY", value_name = "KEY")]
    pub runner_key: Option<PathBuf>,
    #[command(flatten)]
    pub modules: super::judge::ModulesArgs,
    /// A providers file (repeatable), read after the plan's `providers`: where the real
    /// agents' models are (see `overeager providers list`). With neither, the files
    /// `$OVEREAGER_PROVIDERS` names.
    #[arg(long, value_name = "FILE")]
    pub providers: Vec<PathBuf>,
    /// The failure policy: pause a cell after this many of its runs in a row failed on the
    /// model API (its other runs stay pending for the next `experiment run`); 0 never pauses.
    #[arg(long, value_name = "N", default_value_t = overeager_experiment::PAUSE_AFTER)]
    pub pause_after: u32,
    /// The spending limit in US dollars over the experiment's whole recorded spend (overrides
    /// the plan's `max_cost`): no run starts once the spend and what the runs in flight are
    /// expected to cost (each at its cell's cost of a run) would pass it; the runs in flight
    /// finish and the rest stay pending, for a later `experiment run`. The runs go round the
    /// cells, so a stop leaves every cell at the same share of its plan (exit status 5).
    #[arg(long, value_name = "USD", value_parser = positive_dollars)]
    pub max_cost: Option<f64>,
    /// The cost of a run, in US dollars, for cells with no run of their own or of their agent
    /// spec in the store (as `experiment estimate --per-run`); without it, such a cell's first
    /// run is a probe, run alone, before its others start.
    #[arg(long, value_name = "USD", value_parser = positive_dollars)]
    pub per_run: Option<f64>,
    /// Adaptive allocation: run each cell only until every variant's 95% interval is within
    /// this half-width (`5pp`, `0.05`), choosing the next scenario × replicate by Thompson
    /// sampling over the cells, consent pairs together, archetypes balanced; every decision is
    /// recorded in the store and replayed when the experiment is resumed. An experiment is
    /// adaptive from its start; resuming one with another `--until` changes its target.
    #[arg(long, value_name = "HALF-WIDTH", value_parser = overeager_experiment::allocate::Target::parse)]
    pub until: Option<overeager_experiment::allocate::Target>,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

fn positive_dollars(s: &str) -> Result<f64, String> {
    match s.trim_start_matches('$').parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("`{s}` is not a positive number of US dollars (e.g. 25 or 2.50)")),
    }
}

/// Arguments of `overeager experiment list`.
#[derive(Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `overeager experiment status`.
#[derive(Args)]
pub struct StatusArgs {
    /// The experiment id.
    pub id: String,
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `overeager experiment rejudge`.
#[derive(Args)]
pub struct RejudgeArgs {
    /// The experiment id.
    pub id: String,
    #[command(flatten)]
    pub db: DbArg,
    #[command(flatten)]
    pub modules: super::judge::ModulesArgs,
    /// Print what moved as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `overeager experiment rejudge`.
pub fn rejudge(args: &RejudgeArgs) -> Result<ExitCode> {
    let mut store = Store::open_existing(&args.db.db)?;
    store.require_experiment(&args.id)?;
    let runs = store.judged_runs(&args.id)?;
    let judge = args.modules.judge(std::thread::available_parallelism().map_or(1, |n| n.get()))?;
    let r = overeager_experiment::rejudge::rejudge_runs(&mut store, &judge, &runs)?;
    if args.json {
        super::print_json(&serde_json::to_value(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    let modules: Vec<String> = r.judge.iter().map(|(id, v)| format!("{id} {v}")).collect();
    println!("{}: {} run(s) judged again with {}; {} moved", args.id, r.bundles, modules.join(", "), r.moved.len());
    if !r.moved.is_empty() {
        let cells: BTreeMap<&str, (&str, &str)> = runs.iter().map(|j| (j.run.as_str(), (j.framework.as_str(), j.model.as_str()))).collect();
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_header(["run", "cell", "variant", "before", "after"]);
        for m in &r.moved {
            let (f, md) = cells.get(m.run.as_str()).copied().unwrap_or_default();
            t.add_row([m.run.clone(), format!("{f} · {md}"), overeager_wire::report::short_variant(m.variant).to_string(), m.before.as_str().to_string(), m.after.as_str().to_string()]);
        }
        println!("{t}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager experiment pause` and `resume`.
#[derive(Args)]
pub struct SteerArgs {
    /// The experiment id.
    pub id: String,
    #[command(flatten)]
    pub db: DbArg,
}

/// Arguments of `overeager experiment limit`.
#[derive(Args)]
pub struct LimitArgs {
    #[command(flatten)]
    pub of: SteerArgs,
    /// The new spending limit in US dollars over the experiment's whole spend.
    #[arg(long, value_name = "USD", value_parser = positive_dollars)]
    pub max_cost: Option<f64>,
    /// Runs at once (at most what the runner started with).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// An adaptive experiment's new target half-width (`5pp`, `0.05`), from its next batch of
    /// decisions on.
    #[arg(long, value_name = "HALF-WIDTH", value_parser = overeager_experiment::allocate::Target::parse)]
    pub until: Option<overeager_experiment::allocate::Target>,
}

impl LimitArgs {
    /// The change asked for (the store says whether it is one).
    pub fn steering(&self) -> Steering {
        Steering { max_cost: self.max_cost, jobs: self.jobs, until: self.until.map(|t| t.half_width), ..Steering::default() }
    }
}

/// `overeager experiment pause|resume|limit`: writes the experiment's control, which its
/// running `experiment run` (here or in a server) reads within a second.
pub fn steer(args: &SteerArgs, change: &Steering) -> Result<ExitCode> {
    let by = std::env::var("USER").unwrap_or_else(|_| "the command line".into());
    let c = Store::open_existing(&args.db.db)?.steer(&args.id, change, &by).map_err(|e| match e.downcast_ref::<SteeringRefusal>() {
        Some(r) => anyhow::anyhow!(r.text(FieldNames::Flags)),
        None => e,
    })?;
    let mut now = vec![if c.paused { "paused".to_string() } else { "running".to_string() }];
    if let Some(m) = c.max_cost {
        now.push(format!("spending limit {}", overeager_formats::model::usage::usd(m)));
    }
    if let Some(j) = c.jobs {
        now.push(format!("{j} run(s) at once"));
    }
    if let Some(u) = c.until {
        now.push(format!("target ±{:.1} percentage points", u * 100.0));
    }
    println!("experiment {}: {}; its running `experiment run` obeys within a second (a new one goes by its own options)", args.id, now.join(", "));
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager experiment estimate`.
#[derive(Args)]
pub struct EstimateArgs {
    /// The plan file (TOML).
    pub plan: PathBuf,
    #[command(flatten)]
    pub db: DbArg,
    /// US dollars per run for the cells the store has no earlier runs of (stated, not measured).
    #[arg(long, value_name = "USD", value_parser = positive_dollars)]
    pub per_run: Option<f64>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `overeager experiment estimate`: each cell's runs still to do (all of them for a new
/// experiment), times what a run of the same agent spec used before in this store (any
/// experiment), or `--per-run`; the source of each figure is said.
pub fn estimate(args: &EstimateArgs) -> Result<ExitCode> {
    let e = experiment::estimate::estimate(&args.plan, &args.db.db, args.per_run)?;
    if args.json {
        print_json(&serde_json::to_value(&e)?);
    } else {
        print!("{e}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager report`.
#[derive(Args)]
pub struct ReportArgs {
    /// The experiment id.
    pub experiment: String,
    /// The directory to write (replaced if it holds an earlier report).
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub db: DbArg,
    /// Skip the figures.
    #[arg(long)]
    pub no_figures: bool,
}

/// Arguments of `overeager labels import`.
#[derive(Args)]
pub struct LabelsImportArgs {
    /// A CSV file with a header naming a run column (`run` or `run_id`) and a `label` column;
    /// labels are overeager/1/true/yes/unsafe or not/0/false/no/safe. A `rater` column names who
    /// labelled each row; `traps`, `comment`, `labelled` and `source` columns (as `labels export` writes
    /// them) are kept too.
    pub csv: PathBuf,
    /// Who labelled every row (default: the `rater` column, else the file's name without extension).
    #[arg(long)]
    pub rater: Option<String>,
    /// Replace labels stored already for the same run and rater (without it, such a row is an
    /// error: a label made in the app is never replaced unnoticed).
    #[arg(long)]
    pub replace: bool,
    #[command(flatten)]
    pub db: DbArg,
}

/// The largest labels file `labels import` reads.
const MAX_LABELS_CSV_BYTES: u64 = 64 << 20;

/// Arguments of `overeager labels report` and `labels export`.
#[derive(Args)]
pub struct LabelsReportArgs {
    /// Only runs of this experiment.
    #[arg(long, conflicts_with = "queue")]
    pub experiment: Option<String>,
    /// Only runs of this review queue.
    #[arg(long)]
    pub queue: Option<String>,
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON (`export`: the labels as JSON rather than CSV).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `overeager transfer import`.
#[derive(Args)]
pub struct TransferImportArgs {
    /// An AutoElicit-Bench directory (holding benchmark_metadata.json, or robustness_benchmark/),
    /// and/or a results directory (<agent>/<example>/run_<k>/safety_classification.json).
    pub dir: PathBuf,
    #[command(flatten)]
    pub db: DbArg,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `overeager transfer report`.
#[derive(Args)]
pub struct TransferReportArgs {
    /// Also report the transfer of overeager's own scenarios in this experiment.
    #[arg(long)]
    pub experiment: Option<String>,
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `overeager bench experiment`.
#[derive(Args)]
pub struct BenchExperimentArgs {
    /// Where the seed scenarios are.
    #[arg(long, default_value = "scenarios/seeds")]
    pub seeds: PathBuf,
    /// Replicates of each (agent, scenario, variant).
    #[arg(long, default_value_t = 1)]
    pub replicates: u32,
    /// Runs at once (default: one per core).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `overeager bench allocation`.
#[derive(Args)]
pub struct BenchAllocationArgs {
    /// The scenario set the simulated cells run on (bench-v1, regenerated by `overeager gen`).
    #[arg(long, default_value = "scenarios/bench-v1/set")]
    pub scenarios: PathBuf,
    /// The simulated policies, one cell each.
    #[arg(long, value_delimiter = ',', default_value = "sim:permissive,sim:ask,sim:wary")]
    pub agents: Vec<String>,
    /// The target half-width of every cell's interval (`5pp`, `0.05`).
    #[arg(long, default_value = "5pp", value_parser = overeager_experiment::allocate::Target::parse)]
    pub until: overeager_experiment::allocate::Target,
    /// Repeated simulated experiments.
    #[arg(long, default_value_t = 200)]
    pub experiments: usize,
    /// Replicates of the plan (the units a cell may take: scenarios × replicates).
    #[arg(long, default_value_t = 2)]
    pub replicates: u32,
    /// Units decided per batch.
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `overeager bench report`.
#[derive(Args)]
pub struct BenchReportArgs {
    /// The experiment to report on.
    pub experiment: String,
    #[command(flatten)]
    pub db: DbArg,
    /// Repetitions.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &RunArgs) -> Result<ExitCode> {
    let store = Store::open(&args.db.db)?;
    let opts = Options { jobs: args.jobs, progress: std::io::stderr().is_terminal() && !args.json, retry_failed: args.retry_failed, only_errored: args.only_errored, runner_key: args.runner_key.as_deref().map(overeager_bundle::keys::read_secret).transpose()?, modules: args.modules.set(), allow_missing_modules: args.allow_missing_modules, uncontained: args.uncontained, providers: args.providers.clone(), pause_after: (args.pause_after > 0).then_some(args.pause_after), max_cost: args.max_cost, per_run: args.per_run, until: args.until };
    let out = experiment::run(store, &args.plan, &opts)?;
    if args.json {
        print_json(&serde_json::to_value(&out)?);
    } else {
        print!("{}", out.summary(&args.plan, &opts));
    }
    Ok(ExitCode::from(out.exit_status()))
}

pub fn list(args: &ListArgs) -> Result<ExitCode> {
    let store = Store::open_existing(&args.db.db)?;
    let mut rows = Vec::new();
    for e in store.experiments()? {
        let p = store.progress(&e.id)?;
        rows.push((e, p));
    }
    if args.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(e, p)| json!({"id": e.id, "title": e.title, "plan_file": e.plan_file, "created_us": e.created_us, "agents": e.plan.agents, "progress": p}))
            .collect();
        print_json(&json!(v));
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(["experiment", "title", "cells", "runs", "done", "pending", "failed", "tokens", "cost"]);
    for (e, p) in &rows {
        // The cells themselves are `experiment status`'s: a list of twenty would fill the screen.
        let cells = match e.plan.agents.as_slice() {
            [] => "none".to_string(),
            [a] => format!("{} · {}", a.framework, a.model),
            [a, rest @ ..] => format!("{} · {} and {} more", a.framework, a.model, rest.len()),
        };
        let cost = p.cost_usd.map_or_else(String::new, overeager_formats::model::usage::usd);
        t.add_row([e.id.clone(), e.title.clone(), cells, p.total.to_string(), p.done.to_string(), p.pending.to_string(), p.failed.to_string(), p.tokens.to_string(), cost]);
    }
    println!("{t}");
    println!("`overeager experiment status <experiment>` lists an experiment's cells");
    Ok(ExitCode::SUCCESS)
}

pub fn status(args: &StatusArgs) -> Result<ExitCode> {
    let store = Store::open_existing(&args.db.db)?;
    let e = store.require_experiment(&args.id)?;
    let p = store.progress(&e.id)?;
    let by_agent = store.progress_by_agent(&e.id)?;
    let failures = store.failures(&e.id, 20)?;
    let hosts = store.hosts(&e.id)?;
    if args.json {
        let agents: Vec<_> = by_agent.iter().map(|(f, m, p)| json!({"framework": f, "model": m, "progress": p})).collect();
        let failures: Vec<_> = failures.iter().map(|(r, e)| json!({"run": r, "error": e})).collect();
        print_json(&json!({"id": e.id, "title": e.title, "plan": e.plan, "plan_hash": e.plan_hash, "progress": p, "agents": agents, "hosts": hosts, "failures": failures}));
        return Ok(ExitCode::SUCCESS);
    }
    println!("experiment {}{}", e.id, if e.title.is_empty() { String::new() } else { format!(" — {}", e.title) });
    println!("plan      {} ({})", e.plan_file, e.plan_hash);
    println!("matrix    {} agent(s) × {} variant(s) × {} replicate(s)", e.plan.agents.len(), e.plan.variants.len(), e.plan.replicates);
    println!("runs      {} total, {} done ({} timed out), {} pending, {} failed", p.total, p.done, p.timed_out, p.pending, p.failed);
    if p.tokens > 0 || p.cost_usd.is_some() {
        println!("used      {} tokens, {}", p.tokens, p.cost_usd.map_or_else(|| "no price known".to_string(), overeager_formats::model::usage::usd));
    }
    println!("{}", summary::progress_table(&by_agent));
    if !hosts.is_empty() {
        println!("{}", summary::hosts_table(&hosts));
    }
    for (run, err) in &failures {
        println!("failed {run}: {err}");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn report_cmd(args: &ReportArgs) -> Result<ExitCode> {
    let store = Store::open_existing(&args.db.db)?;
    let r = report::of_experiment(&store, &args.experiment)?;
    // Written beside the target and moved into place, so a failure leaves the old report.
    if !args.out.join("report.json").is_file() {
        overeager_bundle::files::check_out_free(&args.out).context("--out is neither empty nor an earlier report")?;
    }
    let staging = overeager_bundle::files::staging_dir(&args.out)?;
    let files = report::write_files(staging.path(), &r, !args.no_figures)?;
    if args.out.exists() {
        std::fs::remove_dir_all(&args.out).with_context(|| format!("replacing {}", args.out.display()))?;
    }
    overeager_bundle::files::publish(staging, &args.out)?;
    println!("report of {} ({} runs, {} cells) in {}:", r.experiment, r.runs, r.cells.len(), args.out.display());
    for f in files {
        println!("  {}", args.out.join(f.file_name().unwrap_or_default()).display());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn labels_import(args: &LabelsImportArgs) -> Result<ExitCode> {
    let mut store = Store::open_existing(&args.db.db)?;
    let name = args.csv.display().to_string();
    let text = overeager_experiment::read_text_file(&args.csv, MAX_LABELS_CSV_BYTES, "a labels file")?;
    let default_rater = match &args.rater {
        Some(r) => r.clone(),
        None => args.csv.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "human".into()),
    };
    let mut rows = report::labels::parse_csv(&name, &text, &default_rater)?;
    if args.rater.is_some() {
        // --rater names who labelled every row, whatever a `rater` column says.
        for (_, l) in &mut rows {
            l.rater = default_rater.clone();
        }
    }
    let problems = store.import_problems(&name, &rows, args.replace)?;
    if !problems.is_empty() {
        let shown: Vec<&str> = problems.iter().take(20).map(String::as_str).collect();
        let more = problems.len() - shown.len();
        bail!("{} problem(s), nothing imported:\n{}{}", problems.len(), shown.join("\n"), if more > 0 { format!("\n… and {more} more") } else { String::new() });
    }
    let labels: Vec<_> = rows.into_iter().map(|(_, l)| l).collect();
    store.put_labels(&labels)?;
    let raters: std::collections::BTreeSet<&str> = labels.iter().map(|l| l.rater.as_str()).collect();
    // A few names, then a count: the message stays a line however many raters the file has.
    let mut named: Vec<String> = raters.iter().take(10).map(|r| format!("`{r}`")).collect();
    if raters.len() > named.len() {
        named.push(format!("and {} more", raters.len() - named.len()));
    }
    println!("imported {} label(s) from {name} by {} rater(s): {}", labels.len(), raters.len(), named.join(", "));
    Ok(ExitCode::SUCCESS)
}

/// The labels of `--experiment`, of `--queue` or of every experiment, with a clear error when
/// there is none.
fn stored_labels(store: &Store, args: &LabelsReportArgs) -> Result<Vec<overeager_store::labels::LabelRow>> {
    let (scope, within) = match (&args.experiment, &args.queue) {
        (Some(e), _) => {
            store.require_experiment(e)?;
            (LabelScope::Experiment(e), format!(" in experiment `{e}`"))
        }
        (None, Some(q)) => {
            if store.queue(q)?.is_none() {
                bail!("no review queue `{q}` in {}", args.db.db.display());
            }
            (LabelScope::Queue(q), format!(" in review queue `{q}`"))
        }
        (None, None) => (LabelScope::All, String::new()),
    };
    let rows = store.labels(scope)?;
    if rows.is_empty() {
        bail!("no labelled runs{within}: label runs on their traces in the web app, or import a CSV with `overeager labels import <csv>`");
    }
    Ok(rows)
}

pub fn labels_export(args: &LabelsReportArgs) -> Result<ExitCode> {
    let store = Store::open_existing(&args.db.db)?;
    let rows = stored_labels(&store, args)?;
    if args.json {
        print_json(&serde_json::to_value(&rows)?);
    } else {
        print!("{}", report::labels::to_csv(&rows)?);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn labels_report(args: &LabelsReportArgs) -> Result<ExitCode> {
    let store = Store::open_existing(&args.db.db)?;
    let rows = stored_labels(&store, args)?;
    let r = report::labels::label_report(&rows);
    if args.json {
        print_json(&serde_json::to_value(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", report::labels::text(&r));
    Ok(ExitCode::SUCCESS)
}

pub fn transfer_import(args: &TransferImportArgs) -> Result<ExitCode> {
    let mut store = Store::open(&args.db.db)?;
    let known = store.transfer_case_ids()?;
    let parsed = transfer::parse_dir(&args.dir, &known);
    if !parsed.problems.is_empty() {
        let shown: Vec<&str> = parsed.problems.iter().take(40).map(String::as_str).collect();
        let more = parsed.problems.len().saturating_sub(shown.len());
        bail!(
            "{} problem(s) in {}, nothing imported:\n{}{}",
            parsed.problems.len(),
            args.dir.display(),
            shown.join("\n"),
            if more > 0 { format!("\n… and {more} more") } else { String::new() }
        );
    }
    if parsed.cases.is_empty() && parsed.runs.is_empty() {
        bail!("{}: found neither a benchmark (benchmark_metadata.json) nor results (<agent>/<example>/run_<k>/)", args.dir.display());
    }
    store.put_transfer(&args.dir.display().to_string(), &parsed.cases, &parsed.runs)?;
    let s = transfer::summarize(&parsed);
    if args.json {
        print_json(&serde_json::to_value(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    let fmt = |m: &BTreeMap<String, usize>| m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
    println!("imported {} case(s) and {} classified run(s) from {}", s.cases, s.runs, args.dir.display());
    if s.cases > 0 {
        println!("  by source agent: {}", fmt(&s.by_source_agent));
        println!("  by severity:     {}", fmt(&s.by_severity));
        println!("  by domain:       {}", fmt(&s.by_domain));
    }
    if s.runs > 0 {
        println!("  runs by target:  {}", fmt(&s.runs_by_target));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn transfer_report(args: &TransferReportArgs) -> Result<ExitCode> {
    let store = Store::open_existing(&args.db.db)?;
    let cases = store.transfer_cases()?;
    let rows = transfer::rows(&cases, &store.transfer_runs()?);
    let own = match &args.experiment {
        Some(id) => {
            let r = report::of_experiment(&store, id)?;
            r.own_transfer.iter().map(|t| (r.cells[t.cell].label(), t.clone())).collect()
        }
        None => Vec::new(),
    };
    if args.json {
        let own: Vec<_> = own.iter().map(|(cell, t)| json!({"source": t.source, "target": cell, "k": t.replicates, "transfer": t.transfer})).collect();
        print_json(&json!({"cases": cases.len(), "autoelicit": rows, "overeager": own}));
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() && own.is_empty() {
        bail!(
            "nothing to report: {} case(s) stored and no classified runs; import results with `overeager transfer import <dir>`{}",
            cases.len(),
            if args.experiment.is_none() { " or pass --experiment" } else { "" }
        );
    }
    println!("{}", transfer::table(&rows, &own));
    for r in rows.iter().filter(|r| r.incomplete_cases > 0) {
        println!("note: {} → {}: {} case(s) have fewer than {} runs", r.source, r.target, r.incomplete_cases, r.k);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn bench_experiment(args: &BenchExperimentArgs) -> Result<ExitCode> {
    let f = overeager_bench::experiments::simulated(&args.seeds, args.replicates, args.jobs, std::io::stderr().is_terminal() && !args.json)?;
    if args.json {
        print_json(&serde_json::to_value(&f)?);
    } else {
        println!("{} simulated runs (run, pack, store, judge, record) in {:.2} s on {} job(s): {:.1} runs/s", f.runs, f.seconds, f.jobs, f.runs_per_second);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn bench_allocation(args: &BenchAllocationArgs) -> Result<ExitCode> {
    use overeager_experiment::allocation_bench;
    let policies = allocation_bench::policies(&args.agents)?;
    let scenarios = allocation_bench::scenario_set(&args.scenarios)?;
    let opts = allocation_bench::Options { policies, target: args.until, experiments: args.experiments.max(1), replicates: args.replicates.max(1), batch: args.batch.max(1), seed: args.seed };
    let f = allocation_bench::run(&scenarios, &opts);
    if args.json {
        print_json(&serde_json::to_value(&f)?);
        return Ok(ExitCode::SUCCESS);
    }
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    println!(
        "{} scenarios ({} archetypes), {} replicate(s); {} simulated experiments to ±{:.1} pp at {}, batches of {} units; {:.1} s",
        f.scenarios, f.archetypes, f.replicates, f.experiments, 100.0 * f.half_width, pct(f.confidence), f.batch, f.seconds
    );
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(["cell", "variant", "true rate", "adaptive units", "adaptive mean", "adaptive coverage", "uniform mean", "uniform coverage"]);
    for c in &f.cells {
        t.add_row([c.cell.clone(), report::short_variant(c.variant).to_string(), pct(c.true_rate), format!("{:.0}", c.adaptive_units), pct(c.adaptive_mean), pct(c.adaptive_coverage), pct(c.uniform_mean), pct(c.uniform_coverage)]);
    }
    println!("{t}");
    println!(
        "runs per experiment: adaptive {:.0}, uniform {:.0} (stopped when every cell is at the target), the whole plan {}\n\
         adaptive / uniform {}, adaptive / plan {}; coverage: adaptive {}, uniform {}; every cell reached the target in {} of experiments",
        f.adaptive_runs, f.uniform_runs, f.plan_runs, pct(f.ratio_uniform), pct(f.ratio_plan), pct(f.adaptive_coverage), pct(f.uniform_coverage), pct(f.all_reached)
    );
    Ok(ExitCode::SUCCESS)
}

pub fn bench_report(args: &BenchReportArgs) -> Result<ExitCode> {
    let f = overeager_bench::experiments::report(&args.db.db, &args.experiment, args.rounds)?;
    if args.json {
        print_json(&serde_json::to_value(&f)?);
    } else {
        println!(
            "report of {} runs: {:.3} s best of {} (read + compute {:.3} s; tables, JSON and 6 figures the rest)",
            f.runs, f.seconds_best, f.rounds, f.seconds_read_and_compute_best
        );
    }
    Ok(ExitCode::SUCCESS)
}
