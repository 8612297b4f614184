//! The public leaderboard from both ends: `overeager submit` sends a whole cell of an
//! experiment to a server; `benchmark`, `runner` and `submissions` are the maintainer's
//! commands on the server's store.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressStyle};

use super::experiment::DbArg;
use super::print_json;
use overeager_store::Store;
use overeager_store::board::VerifyReport;

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

/// Sends every run of one cell to a server's benchmark, resumably, and prints its report.
pub fn submit(args: &SubmitArgs) -> Result<ExitCode> {
    use overeager_api::client::{Event, Submission};
    let (framework, model) = parse_cell(&args.cell).ok_or_else(|| anyhow::anyhow!("--cell `{}` is not `framework·model`", args.cell))?;
    let store = Store::open_existing(&args.db.db)?;
    let sub = Submission { server: args.server.clone(), token: args.token.clone(), benchmark: args.benchmark.clone(), experiment: args.experiment.clone(), framework, model };
    let bar = if args.json || !std::io::IsTerminal::is_terminal(&std::io::stderr()) { ProgressBar::hidden() } else { ProgressBar::new(0) };
    bar.set_style(ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg}").expect("a valid template"));
    let mut refused = Vec::new();
    let outcome = overeager_api::client::submit(&store, &sub, &mut |e| match e {
        Event::Unfinished { runs, examples } => eprintln!(
            "warning: {runs} run(s) of {}·{} have no bundle (pending or failed), e.g. {}; the server will count them missing. Finish them first: overeager experiment run <plan> --retry-failed",
            sub.framework,
            sub.model,
            examples.join(", ")
        ),
        Event::Opened { id, resumed, declared, held, sending, bytes } => {
            eprintln!("submission {id} ({}): {declared} run(s) of {}·{}; {held} on the server already, sending {sending} ({bytes} bytes)", if resumed { "resumed" } else { "new" }, sub.framework, sub.model);
            bar.set_length(bytes);
        }
        Event::Sending { index, of } => bar.set_message(format!("bundle {} of {of}", index + 1)),
        Event::Sent { bytes } => bar.inc(bytes),
        Event::Refused(why) => refused.push(why),
    });
    bar.finish_and_clear();
    for r in &refused {
        eprintln!("refused: {r}");
    }
    let outcome = outcome?;
    if args.json {
        print_json(&serde_json::to_value(&outcome.verified)?);
    } else {
        print_report(args.server.trim_end_matches('/'), &outcome.id, &outcome.verified.report);
    }
    Ok(if outcome.accepted { ExitCode::SUCCESS } else { ExitCode::FAILURE })
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
