//! The public leaderboard from both ends: `overeager submit` sends a whole cell of an
//! experiment to a server; `benchmark`, `runner` and `submissions` are the maintainer's
//! commands on the server's store.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use super::experiment::DbArg;
use super::print_json;
use overeager_store::board::{DeclaredRun, VerifyReport};
use overeager_wire::board::{OpenSubmission, Opened, Verified};
use overeager_store::web::RunFilter;
use overeager_store::{Store, object_path_in};

/// Arguments of `overeager submit`.
#[derive(Args)]
pub struct SubmitArgs {
    /// The experiment whose cell is submitted.
    pub experiment: String,
    /// The cell, `framework·model` (as the experiment lists it; `framework/model` works too).
    #[arg(long)]
    pub cell: String,
    /// The benchmark on the server the cell was run on (`GET /api/benchmarks` lists them).
    #[arg(long, default_value = "bench-v1")]
    pub benchmark: String,
    /// The server, e.g. https://leaderboard.example.org.
    #[arg(long, env = "OVEREAGER_SERVER")]
    pub server: String,
    /// A writer token from the server's maintainers.
    #[arg(long, env = "OVEREAGER_TOKEN", hide_env_values = true)]
    pub token: String,
    #[command(flatten)]
    pub db: DbArg,
    /// Print the server's report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Splits `framework·model` (or `framework/model`).
fn parse_cell(cell: &str) -> Option<(String, String)> {
    let (f, m) = cell.split_once('·').or_else(|| cell.split_once('/'))?;
    let (f, m) = (f.trim(), m.trim());
    (!f.is_empty() && !m.is_empty()).then(|| (f.to_string(), m.to_string()))
}

/// The answer to a request: status and JSON body (a non-JSON body becomes a string).
fn answer(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>, what: &str) -> Result<(u16, Value)> {
    let mut r = r.with_context(|| format!("{what}: the server did not answer"))?;
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap_or_default();
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::String(text))))
}

fn server_error(what: &str, status: u16, body: &Value) -> anyhow::Error {
    let msg = body["error"].as_str().map(str::to_string).unwrap_or_else(|| body.to_string());
    anyhow::anyhow!("{what}: the server answered {status}: {msg}")
}

/// Sends every run of one cell to a server's benchmark, resumably, and prints its report.
pub fn submit(args: &SubmitArgs) -> Result<ExitCode> {
    let (framework, model) = parse_cell(&args.cell).ok_or_else(|| anyhow::anyhow!("--cell `{}` is not `framework·model`", args.cell))?;
    let store = Store::open_existing(&args.db.db)?;
    store.require_experiment(&args.experiment)?;
    let cells = store.progress_by_agent(&args.experiment)?;
    if !cells.iter().any(|(f, m, _)| *f == framework && *m == model) {
        let known: Vec<String> = cells.iter().map(|(f, m, _)| format!("{f}·{m}")).collect();
        bail!("experiment `{}` has no cell {framework}·{model}; its cells are: {}", args.experiment, known.join(", "));
    }
    let runs = store.all_run_rows(&RunFilter { experiment: Some(args.experiment.clone()), framework: Some(framework.clone()), model: Some(model.clone()), ..RunFilter::default() })?;
    let undone: Vec<&str> = runs.iter().filter(|r| r.bundle.is_none()).map(|r| r.id.as_str()).collect();
    if !undone.is_empty() {
        eprintln!(
            "warning: {} run(s) of {framework}·{model} have no bundle (pending or failed), e.g. {}; the server will count them missing. Finish them first: overeager experiment run <plan> --retry-failed",
            undone.len(),
            undone.iter().take(3).copied().collect::<Vec<_>>().join(", ")
        );
    }
    let objects = store.objects_dir();
    let mut declared = Vec::new();
    let mut files = std::collections::BTreeMap::new();
    for r in runs.iter().filter(|r| r.bundle.is_some()) {
        let digest = r.bundle.clone().expect("filtered");
        let path = object_path_in(&objects, &digest);
        if !path.is_file() {
            bail!("run {}: its bundle {} is missing from {}; the store is damaged", r.id, digest, objects.display());
        }
        files.insert(digest.clone(), path);
        declared.push(DeclaredRun { bundle: digest, run: r.id.clone(), claimed: r.overeager.map(|o| json!({ "overeager": o, "outcome": r.outcome })) });
    }
    if declared.is_empty() {
        bail!("{framework}·{model} of experiment `{}` has no finished runs to submit", args.experiment);
    }
    let base = args.server.trim_end_matches('/').to_string();
    let agent = ureq::Agent::new_with_config(ureq::config::Config::builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(600))).build());
    let auth = format!("Bearer {}", args.token);

    let (status, body) = answer(agent.get(&format!("{base}/api/benchmarks/{}", args.benchmark)).call(), "reading the benchmark")?;
    if status != 200 {
        return Err(server_error(&format!("benchmark `{}`", args.benchmark), status, &body));
    }
    let n_declared = declared.len();
    let open = OpenSubmission { benchmark: args.benchmark.clone(), framework: framework.clone(), model: model.clone(), runs: declared };
    let (status, body) = answer(agent.post(&format!("{base}/api/submissions")).header("Authorization", &auth).header("Content-Type", "application/json").send(&serde_json::to_vec(&open)?[..]), "opening the submission")?;
    if status != 200 && status != 201 {
        return Err(server_error("opening the submission", status, &body));
    }
    let opened: Opened = serde_json::from_value(body).context("reading the server's answer to opening the submission")?;
    let (id, missing) = (opened.id, opened.missing);
    let held = n_declared - missing.len();
    let bytes: u64 = missing.iter().filter_map(|d| files.get(d)).map(|p| p.metadata().map(|m| m.len()).unwrap_or(0)).sum();
    eprintln!(
        "submission {id} ({}): {n_declared} run(s) of {framework}·{model}; {held} on the server already, sending {} ({bytes} bytes)",
        if opened.resumed { "resumed" } else { "new" },
        missing.len()
    );
    let bar = if args.json || !std::io::IsTerminal::is_terminal(&std::io::stderr()) { ProgressBar::hidden() } else { ProgressBar::new(bytes) };
    bar.set_style(ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg}").expect("a valid template"));
    let mut refused = Vec::new();
    for (i, digest) in missing.iter().enumerate() {
        let Some(path) = files.get(digest) else {
            bail!("the server asked for bundle {digest}, which this cell did not declare");
        };
        let mut data = Vec::new();
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut data)).with_context(|| format!("reading {}", path.display()))?;
        bar.set_message(format!("bundle {} of {}", i + 1, missing.len()));
        let url = format!("{base}/api/submissions/{id}/bundles/{digest}");
        let mut tries = 0;
        let (status, body) = loop {
            let sent = agent.put(&url).header("Authorization", &auth).header("Content-Type", "application/octet-stream").send(&data[..]);
            let (status, body) = answer(sent, &format!("sending bundle {} of {}", i + 1, missing.len())).with_context(|| {
                format!("the upload broke off after {} of {n_declared} bundle(s); run the same command again to send the rest (submission {id})", held + i)
            })?;
            // Busy: the server judges a few uploads at once, and takes a few bodies per account.
            if (status == 503 || status == 429) && tries < 60 {
                tries += 1;
                std::thread::sleep(Duration::from_secs(2));
                continue;
            }
            break (status, body);
        };
        match status {
            200 | 201 => {}
            422 => refused.push(body["error"].as_str().unwrap_or_default().to_string()),
            _ => return Err(server_error(&format!("sending bundle {digest}"), status, &body)),
        }
        bar.inc(data.len() as u64);
    }
    bar.finish_and_clear();
    for r in &refused {
        eprintln!("refused: {r}");
    }
    let (status, body) = answer(agent.post(&format!("{base}/api/submissions/{id}/verify")).header("Authorization", &auth).send_empty(), "verifying the submission")?;
    if status != 200 && status != 422 {
        return Err(server_error("verifying the submission", status, &body));
    }
    let verified: Verified = serde_json::from_value(body).context("reading the server's verification report")?;
    if args.json {
        print_json(&serde_json::to_value(&verified)?);
    } else {
        print_report(&base, &id, &verified.report);
    }
    Ok(if status == 200 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn print_report(base: &str, id: &str, r: &VerifyReport) {
    println!(
        "submission {id}: {} of {} run(s) the benchmark asks for received; {} overeager, {} timed out, {} incomplete (the server's own verdicts)",
        r.received, r.expected, r.overeager, r.timeouts, r.incomplete
    );
    let overruled = r.claims_overruled.len();
    if overruled > 0 {
        println!("{overruled} run(s) had a different verdict in your store; the server's counts");
    }
    let problems = &r.problems;
    if problems.is_empty() {
        println!("verified: waiting for an admin's review at {base}/submissions/{id}");
        return;
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(["problem", "what", "runs"]);
    for p in problems {
        t.add_row([p.kind.clone(), p.message.clone(), p.runs.join("\n")]);
    }
    println!("{t}");
    println!("refused as it stands ({} problem(s)); submission {id} stays a draft: fix the runs and run the same command again", problems.len());
}

/// `overeager benchmark …`
#[derive(Subcommand)]
pub enum BenchmarkCmd {
    /// Publish an experiment as a benchmark others can submit cells to: its scenarios (with
    /// their hashes), variants, replicates and timeout. A benchmark never changes.
    Publish(BenchmarkPublishArgs),
    /// List the benchmarks of the store.
    List {
        #[command(flatten)]
        db: DbArg,
        #[arg(long)]
        json: bool,
    },
}

/// Arguments of `overeager benchmark publish`.
#[derive(Args)]
pub struct BenchmarkPublishArgs {
    /// The experiment (already run) that defines it; approved cells join its leaderboard.
    pub experiment: String,
    /// The benchmark's name, e.g. `bench-v1`.
    #[arg(long)]
    pub name: String,
    /// Every submitted bundle must be signed by a runner key this server trusts and has
    /// registered to the submitting account (`runner trust --account`); the timeout is then
    /// read from signed data only.
    #[arg(long)]
    pub require_trusted_runner: bool,
    /// Replicates every scenario × variant must have at least (default: the experiment's);
    /// cells may bring more, the same number everywhere.
    #[arg(long)]
    pub min_replicates: Option<u32>,
    /// An agent allowed, `id@version` with `*` at the end of either part (`claude-code@2.0.*`);
    /// repeat for more. Any agent when not given.
    #[arg(long = "allow-agent", value_name = "ID@VERSION")]
    pub allow_agents: Vec<String>,
    #[command(flatten)]
    pub db: DbArg,
}

pub fn benchmark(cmd: &BenchmarkCmd) -> Result<ExitCode> {
    match cmd {
        BenchmarkCmd::Publish(a) => {
            let mut store = Store::open_existing(&a.db.db)?;
            let policy = overeager_store::board::Policy { require_trusted_runner: a.require_trusted_runner, min_replicates: a.min_replicates, agents: a.allow_agents.clone() };
            let b = store.create_benchmark(&a.name, &a.experiment, policy)?;
            println!(
                "benchmark {}: {} scenarios × {} variant(s) × {} replicate(s) = {} runs per cell, timeout {} ms; approved cells join the leaderboard of `{}`",
                b.name,
                b.scenarios.len(),
                b.variants.len(),
                b.min_replicates(),
                b.runs_per_cell(),
                b.timeout_ms,
                b.experiment
            );
            let p = &b.policy;
            if p.require_trusted_runner || p.min_replicates.is_some() || !p.agents.is_empty() {
                println!(
                    "policy: {}{}{}",
                    if p.require_trusted_runner { "runner signatures by trusted runners required; " } else { "" },
                    p.min_replicates.map(|n| format!("at least {n} replicate(s); ")).unwrap_or_default(),
                    if p.agents.is_empty() { "any agent".to_string() } else { format!("agents {}", p.agents.join(", ")) }
                );
            }
        }
        BenchmarkCmd::List { db, json } => {
            let list = Store::open_existing(&db.db)?.benchmarks()?;
            if *json {
                print_json(&serde_json::to_value(&list)?);
            } else {
                let mut t = Table::new();
                t.load_preset(UTF8_FULL_CONDENSED).set_header(["benchmark", "experiment", "scenarios", "variants", "replicates", "runs per cell"]);
                for b in &list {
                    t.add_row([b.name.clone(), b.experiment.clone(), b.scenarios.len().to_string(), b.variants.len().to_string(), b.replicates.to_string(), b.runs_per_cell().to_string()]);
                }
                println!("{t}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `overeager runner …`
#[derive(Subcommand)]
pub enum RunnerCmd {
    /// Make a runner key pair: `<out>.key` (secret, for `experiment run --runner-key`) and
    /// `<out>.pub` (for the servers that should trust the runner).
    Keygen(super::predicate::KeygenArgs),
    /// Trust a runner's public key: cells whose every bundle it signed are marked as run by a
    /// trusted runner.
    Trust {
        /// The `.pub` file.
        public: PathBuf,
        /// The account (token name) whose submissions may carry bundles this key signs; no
        /// other account's are accepted.
        #[arg(long)]
        account: String,
        /// Register the key to `--account` although it is registered to another account.
        #[arg(long = "move")]
        move_account: bool,
        #[command(flatten)]
        db: DbArg,
    },
    /// Stop trusting a runner key (its cells become self-reported, on a running server too).
    Revoke {
        /// Key id or public key.
        key_id: String,
        #[command(flatten)]
        db: DbArg,
    },
    /// The runner keys the store knows.
    List {
        #[command(flatten)]
        db: DbArg,
        #[arg(long)]
        json: bool,
    },
}

pub fn runner(cmd: &RunnerCmd) -> Result<ExitCode> {
    match cmd {
        RunnerCmd::Keygen(args) => return super::predicate::keygen(args),
        RunnerCmd::Trust { public, account, move_account, db } => {
            let (file, key) = overeager_bundle::keys::read_public(public)?;
            Store::open(&db.db)?.trust_runner(&overeager_bundle::keys::key_id(&key), &hex::encode(key.as_bytes()), file.owner.as_deref(), account, *move_account)?;
            println!("trusting runner key {}{} for account `{account}`", file.key_id, file.owner.map(|o| format!(" ({o})")).unwrap_or_default());
        }
        RunnerCmd::Revoke { key_id, db } => {
            Store::open_existing(&db.db)?.revoke_runner(key_id)?;
            println!("runner key {key_id} revoked; the cells it signed are self-reported from now on");
        }
        RunnerCmd::List { db, json } => {
            let keys = Store::open_existing(&db.db)?.runner_keys()?;
            if *json {
                print_json(&serde_json::to_value(&keys)?);
            } else {
                let mut t = Table::new();
                t.load_preset(UTF8_FULL_CONDENSED).set_header(["key", "owner", "account", "status"]);
                for k in &keys {
                    t.add_row([k.key_id.clone(), k.owner.clone().unwrap_or_default(), k.account.clone().unwrap_or_default(), if k.revoked_us.is_some() { "revoked" } else { "trusted" }.to_string()]);
                }
                println!("{t}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `overeager submissions …`
#[derive(Subcommand)]
pub enum SubmissionsCmd {
    /// The leaderboard submissions in the store.
    List {
        #[command(flatten)]
        db: DbArg,
        #[arg(long)]
        json: bool,
    },
    /// Re-judge every approved submission with the current predicates (the built-in library
    /// and the approved uploads) and show which runs moved.
    Rejudge {
        #[command(flatten)]
        db: DbArg,
        /// The trust store the server uses for uploaded predicates.
        #[arg(long, env = "OVEREAGER_TRUST", default_value_os_t = overeager_judge::trust::TrustStore::default_path())]
        trust: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

pub fn submissions(cmd: &SubmissionsCmd) -> Result<ExitCode> {
    match cmd {
        SubmissionsCmd::List { db, json } => {
            let store = Store::open_existing(&db.db)?;
            let rows = overeager_api::board::submission_list(&store, false)?;
            if *json {
                print_json(&serde_json::to_value(&rows)?);
            } else {
                let mut t = Table::new();
                t.load_preset(UTF8_FULL_CONDENSED).set_header(["submission", "benchmark", "cell", "status", "by", "received", "runner"]);
                for r in &rows {
                    t.add_row([r.id.clone(), r.benchmark.clone(), format!("{}·{}", r.framework, r.model), r.status.as_str().to_string(), r.submitted_by.clone(), format!("{}/{}", r.received, r.declared), r.runner.clone()]);
                }
                println!("{t}");
            }
        }
        SubmissionsCmd::Rejudge { db, trust, json } => {
            let mut store = Store::open_existing(&db.db)?;
            let judge = overeager_api::build_judge(&store, trust)?;
            let done = overeager_api::board::rejudge_approved(&mut store, &judge)?;
            if *json {
                print_json(&serde_json::to_value(&done)?);
            } else {
                for (id, r) in &done {
                    println!("{id}: {} bundle(s) re-judged, {} moved", r.bundles, r.moved.len());
                    for m in &r.moved {
                        println!("  run {} ({}): {:?} → {:?}", m.run, m.variant, m.before, m.after);
                    }
                }
                if done.is_empty() {
                    println!("no approved submissions");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_cell;

    #[test]
    fn cells_are_framework_dot_model() {
        assert_eq!(parse_cell("claude-code·sonnet"), Some(("claude-code".into(), "sonnet".into())));
        assert_eq!(parse_cell("scripted / moderate"), Some(("scripted".into(), "moderate".into())));
        assert_eq!(parse_cell("nodot"), None);
        assert_eq!(parse_cell("·m"), None);
    }
}
