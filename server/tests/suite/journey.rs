//! The researcher's path, on loopback and offline: a provider (one `overeager model serve
//! --scenarios`, standing in for an Anthropic and a Gemini endpoint), a providers file with
//! prices named by the plan, an experiment of two real agents over 3 scenarios × 2 variants × 2
//! replicates, an outage in the middle that the failure policy stops, a recovery with
//! `--retry-failed`, and then the spend in every place a researcher looks: `experiment status`,
//! the report, the leaderboard and a trace's conversation.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::browser::free_port;
use common::*;
use serde_json::Value;

const KEY_ENV: &str = "OE_JOURNEY_KEY";
const KEY: &str = "sk-test-journey-5e1b77c2d9";
const SCENARIOS: [&str; 3] = ["alembic-broken-revision-keep-db", "cleanup-orphaned-envs", "config-port-change"];
const AGENTS: [&str; 2] = ["claude-code", "gemini-cli"];
/// US dollars per million tokens, as the providers file prices the stand-in's model.
const PRICE: (f64, f64) = (3.0, 15.0);

/// `overeager model serve --scenarios`, stopped when dropped; its standard output is kept
/// open (it prints after the address).
struct StandIn(Child, #[allow(dead_code)] BufReader<std::process::ChildStdout>);

impl StandIn {
    /// Serves `scenarios` on `addr` to [`AGENTS`], failing every request from `fail_from` on
    /// if given.
    fn start(scenarios: &Path, addr: &str, log: &Path, fail_from: Option<u32>) -> StandIn {
        StandIn::serve(scenarios, addr, log, &AGENTS, SCENARIOS.len(), fail_from)
    }

    /// Serves the `n` scenarios under `scenarios` on `addr` to `agents`.
    fn start_for(scenarios: &Path, addr: &str, log: &Path, agents: &[&str], n: usize) -> StandIn {
        StandIn::serve(scenarios, addr, log, agents, n, None)
    }

    fn serve(scenarios: &Path, addr: &str, log: &Path, agents: &[&str], n: usize, fail_from: Option<u32>) -> StandIn {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_overeager"));
        cmd.args(["model", "serve", "--scenarios", scenarios.to_str().unwrap(), "--play", "aggressive", "--addr", addr]).arg("--log").arg(log);
        for a in agents {
            cmd.args(["--agent", a]);
        }
        if let Some(n) = fail_from {
            cmd.args(["--fail-from", &n.to_string()]);
        }
        let mut child = cmd.current_dir(repo()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        assert!(first.contains(&format!("stand-in provider: {n} scenarios")) && first.contains(&format!("http://{addr}")), "{first}");
        StandIn(child, out)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `experiment run` of `plan` with the key in the environment; its JSON outcome and whether it
/// succeeded.
fn experiment(plan: &Path, db: &Path, extra: &[&str]) -> (bool, Value, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_overeager"));
    cmd.args(["experiment", "run", plan.to_str().unwrap(), "--db", db.to_str().unwrap(), "--uncontained", "--json"]).args(extra);
    cmd.current_dir(repo()).env(KEY_ENV, KEY).env_remove("OVEREAGER_PROVIDERS").env_remove("ANTHROPIC_API_KEY").env_remove("GEMINI_API_KEY");
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice::<Value>(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    (out.status.success(), v, stderr)
}

/// The traps each scenario's aggressive play fires, by scenario id.
fn designed_fires(dir: &Path) -> std::collections::BTreeMap<String, Vec<String>> {
    SCENARIOS
        .iter()
        .map(|id| {
            let t: toml::Value = toml::from_str(&std::fs::read_to_string(dir.join(id).join("scenario.toml")).unwrap()).unwrap();
            let mut fires: Vec<String> = t["plays"]["aggressive"]["fires"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect();
            fires.sort();
            (id.to_string(), fires)
        })
        .collect()
}

#[test]
fn all_a_researcher_s_experiment_on_a_stand_in_provider_survives_an_outage_and_shows_its_spend() {
    if !AGENTS.iter().all(|a| installed(a)) {
        return;
    }
    let work = scratch("journey");
    let scenarios = work.join("scenarios");
    for id in SCENARIOS {
        copy_tree(&seeds().join(id), &scenarios.join(id));
    }
    let addr = format!("127.0.0.1:{}", free_port());
    let mut providers = String::new();
    for (name, dialect) in [("acme", "anthropic"), ("acme-gemini", "gemini")] {
        providers.push_str(&format!("[providers.{name}]\ndialect = \"{dialect}\"\nbase_url = \"http://{addr}\"\nkey_env = \"{KEY_ENV}\"\n"));
        providers.push_str(&format!("[providers.{name}.prices.\"stand-in-aggressive\"]\ninput = {}\noutput = {}\n\n", PRICE.0, PRICE.1));
    }
    std::fs::write(work.join("providers.toml"), providers).unwrap();
    let plan = work.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "id = \"journey\"\nscenarios = {:?}\nvariants = [\"consent_kept\", \"consent_stripped\"]\nreplicates = 2\nexecutor = \"local\"\ntimeout = \"60s\"\nseed = 7\nparallelism = 2\nproviders = [\"providers.toml\"]\n\n\
             [[agent]]\nagent = \"claude-code:permissive:acme/stand-in-aggressive\"\n\n\
             [[agent]]\nagent = \"gemini-cli:permissive:acme-gemini/stand-in-aggressive\"\n",
            scenarios.display().to_string()
        ),
    )
    .unwrap();
    let db = work.join("store.db");
    let dbs = db.to_str().unwrap();

    // The outage: the provider fails every request from its 40th on. The failure policy
    // (`--pause-after 1`) pauses each cell at its first run the model API failed, instead of
    // spending every remaining run's retries.
    let outage_log = work.join("outage.jsonl");
    let down = StandIn::start(&scenarios, &addr, &outage_log, Some(40));
    let (ok_first, first, stderr) = experiment(&plan, &db, &["--pause-after", "1"]);
    drop(down);
    assert!(!ok_first, "an experiment with failed runs exits non-zero: {first}");
    let paused = first["paused"].as_array().unwrap();
    assert_eq!(paused.len(), 2, "both cells paused: {first}\n{stderr}");
    for p in paused {
        assert!(p[1].as_str().unwrap().contains("500"), "the pause names the model API's failure: {p}");
    }
    let failed = first["failed"].as_u64().unwrap();
    assert!((1..=4).contains(&failed), "at most the runs in flight when each cell paused failed: {first}");
    assert!(first["left_pending"].as_u64().unwrap() > 0, "the rest stays pending: {first}");
    let failing: usize = std::fs::read_to_string(&outage_log).unwrap().lines().filter(|l| l.contains("\"status\":500")).count();
    assert!(failing > 0, "the outage was met");
    eprintln!("the outage: {} runs executed, {failed} failed, {} left pending, {failing} requests failed by the provider", first["executed"], first["left_pending"]);

    // The provider is back: the same command, with --retry-failed, completes the matrix.
    let log = work.join("stand-in.jsonl");
    let _up = StandIn::start(&scenarios, &addr, &log, None);
    let (ok_again, again, stderr) = experiment(&plan, &db, &["--retry-failed"]);
    assert!(ok_again, "{again}\n{stderr}");
    let status: Value = serde_json::from_str(&ok(&overeager(&["experiment", "status", "journey", "--db", dbs, "--json"]))).unwrap();
    assert_eq!(status["progress"]["done"], 24, "every run done: {status}");
    assert!(status["progress"]["tokens"].as_u64().unwrap() > 1000 && status["progress"]["cost_usd"].as_f64().unwrap() > 0.0, "tokens and spend in the status: {status}");
    eprintln!("after the retry: {} runs done, {} tokens, ${:.6}", status["progress"]["done"], status["progress"]["tokens"], status["progress"]["cost_usd"].as_f64().unwrap());
    let table = ok(&overeager(&["experiment", "status", "journey", "--db", dbs]));
    assert!(table.contains('$'), "the status table shows the spend: {table}");

    // Each run played its own scenario (the stand-in found it by the task), to its designed traps.
    let designed = designed_fires(&scenarios);
    let runs: Value = serde_json::from_str(&ok(&overeager(&["runs", "list", "--experiment", "journey", "--db", dbs, "--json"]))).unwrap();
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 24);
    for r in runs {
        let mut fired: Vec<String> = r["traps"].as_array().unwrap().iter().map(|t| t[0].as_str().unwrap().to_string()).collect();
        fired.sort();
        assert_eq!(&fired, &designed[r["scenario"].as_str().unwrap()], "{}: the scenario's own play: {r}", r["id"]);
        assert!(r["cost_usd"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(runs.iter().any(|r| !r["earlier_errors"].as_array().map_or(true, Vec::is_empty)), "a retried run keeps its failed attempt's error");

    // The report and the leaderboard: tokens per cell, priced at the providers file's prices.
    let report = work.join("report");
    ok(&overeager(&["report", "journey", "--db", dbs, "--out", report.to_str().unwrap(), "--no-figures"]));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap()).unwrap();
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "two agents × two prompts");
    for cell in cells {
        assert_eq!(cell["usage_runs"], 6, "{cell}");
        let t = &cell["tokens"];
        let expected = (t["input"].as_f64().unwrap() * PRICE.0 + t["output"].as_f64().unwrap() * PRICE.1 + t["cache_read"].as_f64().unwrap_or(0.0) * PRICE.0) / 1e6;
        assert!(expected > 0.0 && (cell["cost_usd"].as_f64().unwrap() - expected).abs() < 1e-9, "{cell}");
    }
    let server = Server::start(&db, &work.join("trust.toml"));
    let (code, board) = get(&format!("{}/api/leaderboard?experiment=journey&variant=kept", server.url));
    assert_eq!(code, 200, "{board}");
    for c in board["cells"].as_array().unwrap() {
        assert!(c["cost_usd"].as_f64().unwrap() > 0.0, "{c}");
    }

    // A trace's conversation: each call's tokens, latency and cost.
    let run = &runs[0];
    let digest = run["bundle"].as_str().unwrap();
    let (code, _) = get(&format!("{}/api/bundles/{digest}", server.url));
    assert_eq!(code, 200);
    let text = get_text(&format!("{}/api/bundles/{digest}/raw/conversation", server.url));
    let conversation: Value = serde_json::from_str(&text).unwrap();
    let calls = conversation["calls"].as_array().unwrap();
    assert!(calls.iter().any(|c| c["answer"]["kind"] == "tool_call" && c["answer"]["result"].is_string()), "{conversation}");
    assert!(calls.iter().filter(|c| c["side"] == false).all(|c| c["tokens"]["input"].as_u64() > Some(0) && c["cost_usd"].as_f64() > Some(0.0) && c["duration_ms"].is_number()), "{conversation}");
    let total: f64 = calls.iter().filter_map(|c| c["cost_usd"].as_f64()).sum();
    assert!((total - run["cost_usd"].as_f64().unwrap()).abs() < 1e-9, "the calls' costs add up to the run's: {total} vs {run}");
    // No key anywhere the run left.
    let stored: Vec<PathBuf> = walkdir::WalkDir::new(&work).into_iter().flatten().filter(|e| e.file_type().is_file()).map(|e| e.path().to_path_buf()).collect();
    assert!(stored.iter().all(|p| !std::fs::read(p).unwrap().windows(KEY.len()).any(|w| w == KEY.as_bytes())), "the key is in the store or a log");
}

/// `--max-cost` on two cells: the runs go round the cells a consent pair at a time, a cell's
/// first run is a probe until its cost is known, and no run starts whose expected cost would
/// pass the limit; so at each of three stops both cells have done the same share of their plan
/// within one pair, the spend passes the limit by at most the run in flight, the exit status
/// says it was the budget (5), and a later `experiment run` with a higher limit goes on.
#[test]
fn a_spending_limit_stops_both_cells_at_the_same_share_and_the_experiment_resumes() {
    if !installed("claude-code") {
        return;
    }
    let work = scratch("journey-budget");
    let scenarios = work.join("scenarios");
    copy_tree(&seeds().join(SCENARIOS[0]), &scenarios.join(SCENARIOS[0]));
    let addr = format!("127.0.0.1:{}", free_port());
    let price = |model: &str, scale: f64| format!("[providers.acme.prices.\"{model}\"]\ninput = {}\noutput = {}\n", PRICE.0 * scale, PRICE.1 * scale);
    std::fs::write(
        work.join("providers.toml"),
        format!("[providers.acme]\ndialect = \"anthropic\"\nbase_url = \"http://{addr}\"\nkey_env = \"{KEY_ENV}\"\n{}{}", price("stand-in-aggressive", 1.0), price("stand-in-moderate", 2.0)),
    )
    .unwrap();
    let plan = work.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "id = \"budget\"\nscenarios = {:?}\nvariants = [\"consent_kept\", \"consent_stripped\"]\nreplicates = 2\nexecutor = \"local\"\ntimeout = \"60s\"\nseed = 7\nparallelism = 1\nproviders = [\"providers.toml\"]\nmax_cost = 100.0\n\n\
             [[agent]]\nagent = \"claude-code:permissive:acme/stand-in-aggressive\"\n\n[[agent]]\nagent = \"claude-code:permissive:acme/stand-in-moderate\"\n",
            scenarios.display().to_string()
        ),
    )
    .unwrap();
    let db = work.join("store.db");
    let _up = StandIn::start_for(&scenarios, &addr, &work.join("stand-in.jsonl"), &["claude-code"], 1);
    let dbs = db.to_str().unwrap();
    let estimate = |extra: &[&str]| -> Value {
        let mut args = vec!["experiment", "estimate", plan.to_str().unwrap(), "--db", dbs, "--json"];
        args.extend_from_slice(extra);
        serde_json::from_str(&ok(&overeager(&args))).unwrap()
    };
    // Before anything ran: nothing measured, the tokens unknown rather than 0; a stated cost
    // per run is used and said to be.
    let before = estimate(&[]);
    assert!(before["cells"][0]["source"].as_str().unwrap().starts_with("unknown") && before["cells_unknown"] == 2 && before["tokens"].is_null(), "{before}");
    let stated = estimate(&["--per-run", "0.5"]);
    assert_eq!((stated["cells"][0]["runs"].as_u64(), stated["usd"].as_f64()), (Some(4), Some(4.0)), "{stated}");
    assert!(stated["cells"][0]["source"].as_str().unwrap().starts_with("stated"), "{stated}");
    // Each cell's runs done and the dearest run so far.
    let done = || -> (Vec<u64>, f64, f64) {
        let runs: Value = serde_json::from_str(&ok(&overeager(&["runs", "list", "--experiment", "budget", "--db", dbs, "--json"]))).unwrap();
        let runs = runs["runs"].as_array().unwrap().clone();
        let costs: Vec<f64> = runs.iter().filter_map(|r| r["cost_usd"].as_f64()).collect();
        let per_cell = ["stand-in-aggressive", "stand-in-moderate"].map(|m| runs.iter().filter(|r| r["status"] == "done" && r["model"].as_str().is_some_and(|x| x.ends_with(m))).count() as u64);
        (per_cell.to_vec(), costs.iter().sum(), costs.iter().copied().fold(0.0, f64::max))
    };
    // Three limits, each above the last: the first below any run's cost (the first cell's
    // probe runs, then nothing), the others a few runs further.
    let mut limit = 0.001;
    for stop in 0..3 {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_overeager"));
        cmd.args(["experiment", "run", plan.to_str().unwrap(), "--db", dbs, "--uncontained", "--json", "--max-cost", &limit.to_string()]);
        let out = cmd.current_dir(repo()).env(KEY_ENV, KEY).env_remove("OVEREAGER_PROVIDERS").env_remove("ANTHROPIC_API_KEY").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}\n{stderr}"));
        assert_eq!(out.status.code(), Some(5), "stop {stop}: the budget's own exit status: {v}\n{stderr}");
        assert!(v["budget"].is_object() && stderr.contains("stopping at the spending limit"), "{v}\n{stderr}");
        let (cells, spent, dearest) = done();
        assert!(cells[0].abs_diff(cells[1]) <= 2, "stop {stop} at ${limit}: the cells' runs {cells:?} differ by more than a pair");
        assert!(spent <= limit + dearest + 1e-9, "stop {stop}: ${spent} spent, over the limit ${limit} by more than the run in flight");
        assert!((v["budget"]["spent"].as_f64().unwrap() - spent).abs() < 1e-9, "the experiment's spend, one figure: {v}");
        eprintln!("stop {stop}: a limit of ${limit:.4}: runs {cells:?} for ${spent:.4}");
        let n: u64 = cells.iter().sum();
        limit = spent + 1.5 * spent / n as f64;
    }
    // Now measured: each cell's runs still to do at its own mean.
    let measured = estimate(&[]);
    assert!(measured["cells"].as_array().unwrap().iter().all(|c| c["source"].as_str().unwrap().starts_with("measured")), "{measured}");
    // The plan's own limit is far above: the same experiment goes on and completes.
    let (ok_again, again, stderr) = experiment(&plan, &db, &[]);
    assert!(ok_again && again["budget"].is_null(), "{again}\n{stderr}");
    assert_eq!(again["progress"]["done"], 8, "{again}");
}
