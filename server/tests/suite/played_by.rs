//! What played a run's model is said wherever a run or a cell is shown. One experiment holds a
//! run of each kind that is no real model — the project's scripted play, a simulated policy, a
//! real CLI on the scripted model, a real CLI on the stand-in provider (bridged: Claude Code on
//! a Chat Completions stand-in) and a replay of a recorded run — and every surface is walked for
//! each: `runs list`, the API's runs and report, the leaderboard, the report's Markdown and CSV,
//! and the ATIF and Inspect exports. None may present a run or a cell as a real model's.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

const SCENARIO: &str = "alembic-broken-revision-keep-db";

/// The agents of the experiment and the kind of what played their model.
fn expected(recorded: &Path) -> Vec<(String, &'static str, bool)> {
    vec![
        ("scripted:cautious".into(), "scripted", false),
        ("sim:permissive".into(), "simulated", false),
        ("claude-code:permissive:scripted-cautious".into(), "scripted", false),
        ("claude-code:permissive:standin/stand-in-cautious".into(), "stand_in", true),
        (format!("claude-code:permissive:replay:{}", recorded.display()), "replay", false),
    ]
}

/// `overeager model serve` on a free port, killed when dropped.
struct StandIn(std::process::Child, String);

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn stand_in(scenarios: &Path) -> StandIn {
    let mut child = Command::new(env!("CARGO_BIN_EXE_overeager"))
        .args(["model", "serve", "--scenarios", scenarios.to_str().unwrap(), "--agent", "claude-code", "--play", "cautious", "--roots-from-request", "--addr", "127.0.0.1:0"])
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut url = String::new();
    while !url.contains("http://") {
        url.clear();
        assert!(out.read_line(&mut url).unwrap() > 0, "the stand-in says where it listens");
    }
    let url = url.split_whitespace().find(|w| w.starts_with("http://")).unwrap().trim_end_matches(['/', '.', ',']).to_string();
    // Its output is drained so that it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    StandIn(child, url)
}

#[test]
fn no_run_that_no_real_model_played_is_shown_as_a_real_model_s() {
    if !installed("claude-code") {
        return;
    }
    let dir = scratch("played-by");
    let scenarios = dir.join("scenarios");
    copy_tree(&seeds().join(SCENARIO), &scenarios.join(SCENARIO));
    let up = stand_in(&scenarios);
    let providers = dir.join("providers.toml");
    std::fs::write(&providers, format!("[providers.standin]\ndialect = \"openai-chat\"\nbase_url = \"{}/v1\"\n", up.1)).unwrap();
    // A recorded run on the stand-in, to replay.
    let recorded = dir.join("recorded");
    ok(&overeager(&[
        "run", "--uncontained", "--scenario", scenarios.join(SCENARIO).to_str().unwrap(), "--agent", "claude-code:permissive:standin/stand-in-cautious",
        "--providers", providers.to_str().unwrap(), "--out", recorded.to_str().unwrap(), "--timeout", "120s",
    ]));
    let agents = expected(&recorded);
    let mut plan = format!(
        "id = \"played-by\"\ntitle = \"What played the model\"\nscenarios = \"scenarios\"\nvariants = [\"consent_kept\"]\nreplicates = 1\nexecutor = \"local\"\ntimeout = \"120s\"\nseed = 7\nproviders = [\"providers.toml\"]\n"
    );
    for (i, (agent, _, _)) in agents.iter().enumerate() {
        plan.push_str(&format!("\n[[agent]]\nagent = \"{agent}\"\nframework = \"fw{i}\"\nmodel = \"m{i}\"\n"));
    }
    std::fs::write(dir.join("plan.toml"), plan).unwrap();
    let db = dir.join("store.db");
    ok(&overeager(&["experiment", "run", dir.join("plan.toml").to_str().unwrap(), "--db", db.to_str().unwrap(), "--uncontained"]));
    let kind_of = |agent: &str| agents.iter().find(|(a, _, _)| a == agent).map(|(_, k, b)| (*k, *b)).unwrap_or_else(|| panic!("an agent of the plan: {agent}"));

    // The runs, as the CLI and the API list them.
    let listed: Value = serde_json::from_str(&ok(&overeager(&["runs", "list", "--db", db.to_str().unwrap(), "--experiment", "played-by", "--json"]))).unwrap();
    let runs = listed["runs"].as_array().unwrap();
    assert_eq!(runs.len(), agents.len(), "{listed}");
    for r in runs {
        let (kind, bridged) = kind_of(r["agent"].as_str().unwrap());
        assert_eq!((r["status"].as_str(), r["played_by"]["kind"].as_str(), r["played_by"]["bridged"].as_bool()), (Some("done"), Some(kind), Some(bridged)), "{r}");
    }
    let table = ok(&overeager(&["runs", "list", "--db", db.to_str().unwrap(), "--experiment", "played-by"]));
    for label in ["scripted model", "simulated policy", "stand-in provider, bridged", "replay"] {
        assert!(table.contains(label), "`runs list` names {label}:\n{table}");
    }
    let server = Server::start(&db, &dir.join("trust.toml"));
    let (status, api_runs) = get(&format!("{}/api/runs?experiment=played-by", server.url));
    assert_eq!(status, 200);
    for r in api_runs["runs"].as_array().unwrap() {
        let (kind, _) = kind_of(r["agent"].as_str().unwrap());
        assert_eq!(r["played_by"]["kind"], kind, "{r}");
    }
    // The report's cells, over the API and on the leaderboard: none a real model's.
    for path in ["/api/experiments/played-by/report", "/api/leaderboard?experiment=played-by"] {
        let (status, report) = get(&format!("{}{path}", server.url));
        assert_eq!(status, 200, "{path}: {report}");
        let report = if report["cells"].is_array() { report } else { report["report"].clone() };
        let cells = report["cells"].as_array().unwrap_or_else(|| panic!("{path}: {report}"));
        assert_eq!(cells.len(), agents.len(), "{path}");
        for c in cells {
            assert!(["scripted", "simulated", "replay", "stand_in"].contains(&c["played_by"]["kind"].as_str().unwrap()), "{path}: a cell shown as a real model's: {c}");
        }
        let kinds: Vec<&str> = report["played_by"].as_array().unwrap().iter().map(|p| p["kind"].as_str().unwrap()).collect();
        for k in ["scripted", "simulated", "replay", "stand_in"] {
            assert!(kinds.contains(&k), "{path}: the report lists {k}: {kinds:?}");
        }
    }
    // The report's files: the warning, each cell's mark, the CSV column.
    let out = dir.join("report");
    ok(&overeager(&["report", "played-by", "--db", db.to_str().unwrap(), "--out", out.to_str().unwrap()]));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("Not every cell is a real model's") && md.contains("Bridged cells"), "{md}");
    for label in ["scripted model", "simulated policy", "stand-in provider, bridged", "replay"] {
        assert!(md.contains(&format!("| {label} |")), "the cells table names {label}");
    }
    let csv = std::fs::read_to_string(out.join("cells.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "played_by").expect("a played_by column");
    let kinds: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').nth(col).unwrap()).collect();
    assert!(kinds.iter().all(|k| ["scripted", "simulated", "replay", "stand_in"].contains(k)), "{kinds:?}");
    let figure = std::fs::read_to_string(out.join("forest.svg")).unwrap();
    assert!(figure.contains("[stand-in provider, bridged]") && figure.contains("[replay]"), "the forest plot marks its cells");
    // The exports: each trajectory and each Inspect sample says what played its model, and
    // the Inspect log's model names mark it.
    let atif = dir.join("atif");
    ok(&overeager(&["export", "played-by", "--db", db.to_str().unwrap(), "--format", "atif", "--out", atif.to_str().unwrap()]));
    let mut trajectories = 0;
    for trial in std::fs::read_dir(&atif).unwrap().flatten().filter(|e| e.path().is_dir()) {
        let t: Value = serde_json::from_slice(&std::fs::read(trial.path().join("agent/trajectory.json")).unwrap()).unwrap();
        let (kind, _) = kind_of(t["agent"]["extra"]["id"].as_str().unwrap());
        assert_eq!(t["agent"]["extra"]["played_by"]["kind"], kind, "{}", trial.path().display());
        assert_eq!(t["extra"]["overeager"]["played_by"]["kind"], kind);
        trajectories += 1;
    }
    assert_eq!(trajectories, agents.len());
    let inspect = dir.join("inspect");
    ok(&overeager(&["export", "played-by", "--db", db.to_str().unwrap(), "--format", "inspect", "--json-logs", "--out", inspect.to_str().unwrap()]));
    let logs: Vec<Value> = std::fs::read_dir(&inspect).unwrap().flatten().filter(|e| e.path().extension().is_some_and(|x| x == "json")).map(|e| serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap()).collect();
    assert!(!logs.is_empty());
    for log in &logs {
        let model = log["eval"]["model"].as_str().unwrap();
        assert!(["(scripted model)", "(simulated policy)", "(replay)", "(stand-in provider, bridged)"].iter().any(|m| model.contains(m)), "an Inspect log's model is marked: {model}");
        for s in log["samples"].as_array().into_iter().flatten() {
            let (kind, _) = kind_of(s["metadata"]["agent"].as_str().unwrap());
            assert_eq!(s["metadata"]["played_by"]["kind"], kind, "{s}");
        }
    }
}
