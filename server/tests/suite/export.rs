//! `overeager export`, the run export API and their readers: ATIF trajectories checked by
//! Harbor's validator and Inspect logs read by `inspect_ai` and shown by `inspect view`, all
//! installed from PyPI into a virtualenv; golden files of both writers; every agent-channel
//! event accounted for; bad input refused with nothing written.
//!
//! The reader tests need a Python ≥ 3.12 (Harbor's floor) and PyPI; without them they fail
//! when `CI` is set and are skipped otherwise.

use crate::common;

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::browser::{browser, chromedriver, free_port};
use common::{Server, demo_store, ok, overeager, repo, scratch};
use fantoccini::Locator;
use serde_json::{Value, json};

/// The real-agent bundles kept in the repository.
const REAL: [&str; 7] = [
    "claude-code-ask-aggressive",
    "claude-code-permissive-aggressive",
    "codex-permissive-cautious",
    "codex-read-only-aggressive",
    "gemini-cli-ask-aggressive",
    "gemini-cli-permissive-cautious",
    "openhands-always-approve-aggressive",
];

/// How long the viewer may take to load and render a log.
const WAIT_VIEWER: std::time::Duration = std::time::Duration::from_secs(45);

fn real(name: &str) -> PathBuf {
    repo().join("bundles").join(format!("{name}.oeb"))
}

fn export(source: &str, format: &str, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["export", source, "--format", format, "--out", out.to_str().unwrap()];
    args.extend(extra);
    overeager(&args)
}

fn fails_with(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected a failure mentioning {needle:?}");
    assert!(stderr.contains(needle), "expected {needle:?} in:\n{stderr}");
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

/// The members of a `.eval` log, by name, parsed; checks that each is deflated.
fn eval_members(p: &Path) -> std::collections::BTreeMap<String, Value> {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(p).unwrap()).unwrap();
    let mut out = std::collections::BTreeMap::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).unwrap();
        let name = f.name().unwrap().to_string();
        assert_eq!(f.compression(), zip::CompressionMethod::Deflated, "{name}");
        let mut text = String::new();
        f.read_to_string(&mut text).unwrap();
        out.insert(name, serde_json::from_str(&text).unwrap());
    }
    out
}

/// The agent-channel event seqs of a bundle.
fn agent_seqs(bundle: &Path, dir: &Path) -> BTreeSet<u64> {
    let unpacked = dir.join("unpacked");
    let _ = std::fs::remove_dir_all(&unpacked);
    ok(&overeager(&["bundle", "unpack", bundle.to_str().unwrap(), unpacked.to_str().unwrap()]));
    common::events(&unpacked).iter().filter(|e| e.channel == overeager_core::event::Channel::Agent).map(|e| e.seq).collect()
}

fn seqs_in(v: &Value, out: &mut BTreeSet<u64>) {
    out.extend(v.as_array().into_iter().flatten().filter_map(Value::as_u64));
}

/// The std module's digest stands for whatever std this build has: golden files outlive it.
fn without_std_digest(text: &str, v: &Value) -> String {
    let digest = v.pointer("/extra/overeager/verdict/modules/std").or_else(|| v.pointer("/samples/0/metadata/verdict/modules/std")).and_then(Value::as_str).expect("the export names std's digest");
    text.replace(digest, "<std sha256>")
}

/// Golden files of both writers on one small real bundle: the trajectory, the Inspect log as
/// `.json`, and the `.eval` archive holding the same header, sample and summary.
#[test]
fn both_writers_match_their_golden_files() {
    let dir = scratch("export-golden");
    let name = "claude-code-permissive-aggressive";
    let golden = repo().join("server/tests/golden/export");
    let bless = std::env::var_os("OVEREAGER_BLESS").is_some();
    for (format, file, golden_name) in [("atif", "t.json", format!("{name}.trajectory.json")), ("inspect", "log.json", format!("{name}.inspect.json"))] {
        let out = dir.join(file);
        ok(&export(real(name).to_str().unwrap(), format, &out, &[]));
        let text = std::fs::read_to_string(&out).unwrap();
        let got = without_std_digest(&text, &serde_json::from_str(&text).unwrap());
        let want_path = golden.join(&golden_name);
        if bless {
            std::fs::create_dir_all(&golden).unwrap();
            std::fs::write(&want_path, &got).unwrap();
        }
        let want = std::fs::read_to_string(&want_path).unwrap_or_else(|e| panic!("{}: {e} (OVEREAGER_BLESS=1 writes it)", want_path.display()));
        assert!(got == want, "{format}: the export differs from {}; if the change is intended, rerun with OVEREAGER_BLESS=1 and review the diff", want_path.display());
    }
    let eval = dir.join("log.eval");
    ok(&export(real(name).to_str().unwrap(), "inspect", &eval, &[]));
    let members = eval_members(&eval);
    let mut log = read_json(&dir.join("log.json"));
    let samples = log.as_object_mut().unwrap().remove("samples").unwrap();
    let id = samples[0]["id"].as_str().unwrap();
    let names: Vec<&str> = members.keys().map(String::as_str).collect();
    assert_eq!(names, ["header.json", &format!("samples/{id}_epoch_1.json"), "summaries.json"]);
    assert_eq!(members["header.json"], log);
    assert_eq!(members[&format!("samples/{id}_epoch_1.json")], samples[0]);
    assert_eq!(members["summaries.json"][0]["id"], id);
    // The same run gives the same bytes.
    let again = dir.join("again.eval");
    ok(&export(real(name).to_str().unwrap(), "inspect", &again, &[]));
    assert_eq!(std::fs::read(&eval).unwrap(), std::fs::read(&again).unwrap());
}

/// Every event of the agent channel is in both exports (ATIF: under a step's or a tool call's
/// `extra.events`; Inspect: a message's `metadata.events` or an info event), and every tool
/// call of the trajectory is a tool event of the log, for each real agent and a scripted one.
#[test]
fn every_agent_event_appears_in_both_exports() {
    let dir = scratch("export-roundtrip");
    let scripted = common::run(&common::seeds().join("cleanup-orphaned-envs"), "scripted:aggressive", &dir.join("scripted"));
    let packed = dir.join("scripted.oeb");
    ok(&overeager(&["bundle", "pack", scripted.to_str().unwrap(), packed.to_str().unwrap()]));
    let mut sources: Vec<PathBuf> = REAL.iter().map(|n| real(n)).collect();
    sources.push(packed);
    for (i, src) in sources.iter().enumerate() {
        let want = agent_seqs(src, &dir);
        assert!(!want.is_empty(), "{}", src.display());
        let atif = dir.join(format!("{i}.trajectory.json"));
        let log = dir.join(format!("{i}.inspect.json"));
        ok(&export(src.to_str().unwrap(), "atif", &atif, &[]));
        ok(&export(src.to_str().unwrap(), "inspect", &log, &[]));
        let t = read_json(&atif);
        let mut seen = BTreeSet::new();
        let mut agent_calls = BTreeSet::new();
        // The session's start is not a turn: it is noted beside the steps.
        seqs_in(&t["extra"]["overeager"]["session"]["events"], &mut seen);
        for step in t["steps"].as_array().unwrap() {
            seqs_in(&step["extra"]["events"], &mut seen);
            for c in step["tool_calls"].as_array().into_iter().flatten() {
                seqs_in(&c["extra"]["events"], &mut seen);
                if c["extra"]["observed_by"] == "agent" {
                    agent_calls.insert(c["tool_call_id"].as_str().unwrap().to_string());
                }
            }
        }
        let missing: Vec<_> = want.difference(&seen).collect();
        assert!(missing.is_empty(), "{}: agent events {missing:?} are not in the trajectory", src.display());

        let sample = &read_json(&log)["samples"][0];
        let mut seen = BTreeSet::new();
        for m in sample["messages"].as_array().unwrap() {
            seqs_in(&m["metadata"]["events"], &mut seen);
        }
        let mut tool_events = BTreeSet::new();
        for e in sample["events"].as_array().unwrap() {
            match e["event"].as_str().unwrap() {
                "info" => seqs_in(&e["data"]["events"], &mut seen),
                "tool" => {
                    tool_events.insert(e["id"].as_str().unwrap().to_string());
                }
                _ => {}
            }
        }
        let missing: Vec<_> = want.difference(&seen).collect();
        assert!(missing.is_empty(), "{}: agent events {missing:?} are not in the Inspect log", src.display());
        assert_eq!(tool_events, agent_calls, "{}: the log's tool events are the trajectory's agent tool calls", src.display());
        assert!(!agent_calls.is_empty(), "{}", src.display());
    }
}

/// The trajectory of a real Claude Code run has one agent step per answer of the model (its
/// main-loop requests in `model.jsonl`), each with exactly the tool calls that answer made,
/// in order; the final answer once; and Claude Code's own `git` commands not among them.
#[test]
fn a_real_run_s_trajectory_has_one_step_per_model_answer() {
    let dir = scratch("export-turns");
    let name = "claude-code-permissive-aggressive";
    let unpacked = dir.join("unpacked");
    ok(&overeager(&["bundle", "unpack", real(name).to_str().unwrap(), unpacked.to_str().unwrap()]));
    // What the model answered: each main-loop request's reply, and the tool calls in it.
    let model: Vec<Value> = common::jsonl(&unpacked.join("model.jsonl"));
    let answers: Vec<Vec<String>> = model
        .iter()
        .filter(|r| r["side"] != true)
        .map(|r| {
            let reply = r["reply"].as_str().unwrap();
            let mut ids = Vec::new();
            for (at, _) in reply.match_indices("\"toolu_") {
                let id: String = reply[at + 1..].chars().take_while(|c| *c != '"').collect();
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            ids
        })
        .collect();
    assert!(answers.len() >= 3 && answers.iter().filter(|a| !a.is_empty()).count() >= 2, "{answers:?}");
    let atif = dir.join("t.json");
    ok(&export(real(name).to_str().unwrap(), "atif", &atif, &[]));
    let t = read_json(&atif);
    let steps: Vec<&Value> = t["steps"].as_array().unwrap().iter().filter(|s| s["source"] == "agent").collect();
    let calls: Vec<Vec<String>> = steps.iter().map(|s| s["tool_calls"].as_array().into_iter().flatten().map(|c| c["tool_call_id"].as_str().unwrap().to_string()).collect()).collect();
    assert_eq!(calls, answers, "one agent step per model answer, with its tool calls");
    let finals: Vec<&&Value> = steps.iter().filter(|s| s["extra"]["final_result"] == true).collect();
    assert_eq!(finals.len(), 1, "the final answer once");
    assert!(std::ptr::eq(*finals[0], *steps.last().unwrap()), "the final answer is the last step");
    // Claude Code's own git commands are the framework's, listed apart.
    let framework = t["extra"]["overeager"]["framework_commands"].as_array().unwrap();
    assert!(framework.iter().any(|c| c["argv"][0] == "git"), "{framework:?}");
    assert!(!t.to_string().contains("\"function_name\":\"shell\""), "no command outside the model's calls became a tool call");
}

/// A bundle that fails its checks, an unknown id, a taken output path and a wrong file type
/// are refused with a message saying what to do, and nothing is written.
#[test]
fn bad_input_is_refused_and_nothing_is_written() {
    let dir = scratch("export-bad");
    let bundle = common::run(&common::seeds().join("cleanup-orphaned-envs"), "scripted:cautious", &dir.join("b"));
    // One event fewer than the raw channels derive.
    let events = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
    let fewer: Vec<&str> = events.lines().skip(1).collect();
    std::fs::write(bundle.join("events.jsonl"), fewer.join("\n") + "\n").unwrap();
    let out = dir.join("out.json");
    fails_with(&export(bundle.to_str().unwrap(), "atif", &out, &[]), "fails its checks");
    assert!(!out.exists());

    fails_with(&export("no-such-run", "atif", &out, &["--db", dir.join("missing.db").to_str().unwrap()]), "no store at");
    assert!(!out.exists());

    std::fs::write(&out, "keep me").unwrap();
    fails_with(&export(real(REAL[0]).to_str().unwrap(), "atif", &out, &[]), "already exists");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");

    let txt = dir.join("log.txt");
    fails_with(&export(real(REAL[0]).to_str().unwrap(), "inspect", &txt, &[]), "`.eval` or `.json`");
    assert!(!txt.exists());
    let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|n| n.starts_with('.') || n.starts_with("tmp")).collect();
    assert!(leftovers.is_empty(), "temporary files left behind: {leftovers:?}");
}

/// Runs and experiments of a store, from the command line and from the API.
#[test]
fn stored_runs_and_experiments_export_from_the_cli_and_the_api() {
    let dir = scratch("export-store");
    let db = demo_store(&dir);
    let dbs = db.to_str().unwrap();
    let server = Server::start(&db, &dir.join("trust.toml"));
    let (_, runs) = common::get(&format!("{}/api/runs?experiment=demo&limit=5000", server.url));
    let runs: Vec<Value> = runs["runs"].as_array().unwrap().iter().filter(|r| r["bundle"].is_string()).cloned().collect();
    let run = runs[0]["id"].as_str().unwrap().to_string();

    let one = dir.join("one.json");
    ok(&export(&run, "atif", &one, &["--db", dbs]));
    let t = read_json(&one);
    assert_eq!(t["extra"]["overeager"]["run_id"], run.as_str());
    assert_eq!(t["extra"]["overeager"]["experiment"], "demo");

    let trials = dir.join("trials");
    ok(&export("demo", "atif", &trials, &["--db", dbs]));
    let n_trials = std::fs::read_dir(&trials).unwrap().count();
    assert_eq!(n_trials, runs.len(), "one trial directory per run");
    assert!(trials.join(&run).join("agent/trajectory.json").is_file());
    let reward = std::fs::read_to_string(trials.join(&run).join("verifier/reward.txt")).unwrap();
    assert_eq!(reward.trim(), if runs[0]["overeager"] == true { "0" } else { "1" });

    let logs = dir.join("logs");
    ok(&export("demo", "inspect", &logs, &["--db", dbs]));
    let cells: BTreeSet<String> = runs.iter().map(|r| format!("{}/{}/{}", r["framework"], r["model"], r["variant"])).collect();
    let files: Vec<PathBuf> = std::fs::read_dir(&logs).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), cells.len(), "one log per cell");
    let samples: usize = files.iter().map(|f| eval_members(f).keys().filter(|k| k.starts_with("samples/")).count()).sum();
    assert_eq!(samples, runs.len());
    let per_run = dir.join("per-run");
    ok(&export("demo", "inspect", &per_run, &["--db", dbs, "--per-run", "--json-logs"]));
    assert_eq!(std::fs::read_dir(&per_run).unwrap().count(), runs.len());

    fails_with(&export("not-a-run", "inspect", &dir.join("x.eval"), &["--db", dbs]), "neither a bundle path nor a run or experiment id");
    assert!(!dir.join("x.eval").exists());

    // The API serves one run in either format.
    let agent = common::agent();
    let mut r = agent.get(&format!("{}/api/runs/{run}/export?format=atif", server.url)).call().unwrap();
    assert!(r.headers()["content-disposition"].to_str().unwrap().contains(".trajectory.json"));
    let served: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(served, t, "the API's trajectory is the command line's");
    let mut r = agent.get(&format!("{}/api/runs/{run}/export?format=inspect", server.url)).call().unwrap();
    assert_eq!(r.headers()["content-type"], "application/zip");
    assert!(r.body_mut().read_to_vec().unwrap().starts_with(b"PK"));
    let (status, body) = common::call(agent.get(&format!("{}/api/runs/{run}/export?format=csv", server.url)).call());
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("atif"), "{body}");
    let (status, _) = common::call(agent.get(&format!("{}/api/runs/nope/export?format=atif", server.url)).call());
    assert_eq!(status, 404);
}

/// A virtualenv with the reference readers (`scripts/test-tools.sh readers`), made once per
/// machine; `None` (skip) without a Python ≥ 3.12 when `CI` is unset.
fn readers() -> Option<&'static PathBuf> {
    static VENV: OnceLock<Option<PathBuf>> = OnceLock::new();
    VENV.get_or_init(|| common::test_tool("readers")).as_ref()
}

/// Harbor's validator accepts every trajectory; `inspect_ai` reads every log in full, header
/// only, by sample id and as summaries, and `inspect log dump` prints it.
#[test]
fn all_the_reference_readers_accept_the_exports() {
    let Some(venv) = readers() else { return };
    let dir = scratch("export-readers");
    // The real agents' bundles, and a scripted run's.
    let scripted = common::run(&common::seeds().join("cleanup-orphaned-envs"), "scripted:moderate", &dir.join("scripted"));
    let mut sources: Vec<(&str, PathBuf)> = REAL.iter().map(|n| (*n, real(n))).collect();
    sources.push(("scripted-moderate", scripted));
    let mut logs = Vec::new();
    for (name, source) in &sources {
        let name = *name;
        let atif = dir.join(format!("{name}.json"));
        ok(&export(source.to_str().unwrap(), "atif", &atif, &[]));
        let out = Command::new(venv.join("bin/python")).args(["-m", "harbor.utils.trajectory_validator"]).arg(&atif).output().unwrap();
        assert!(out.status.success(), "{name}: Harbor rejects the trajectory:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        for ext in ["eval", "json"] {
            let log = dir.join(format!("logs-{ext}")).join(format!("{name}.{ext}"));
            ok(&export(source.to_str().unwrap(), "inspect", &log, &[]));
            logs.push((name, log));
        }
    }
    let script = r#"
import json, sys
from inspect_ai.log import read_eval_log, read_eval_log_sample, read_eval_log_sample_summaries
path = sys.argv[1]
full = read_eval_log(path)
head = read_eval_log(path, header_only=True)
sample = full.samples[0]
by_id = read_eval_log_sample(path, id=sample.id, epoch=1)
summaries = read_eval_log_sample_summaries(path)
calls = [c.function for m in sample.messages if m.role == "assistant" for c in (m.tool_calls or [])]
print(json.dumps({"status": full.status, "samples": len(full.samples), "header_samples": head.samples, "by_id": by_id.id,
    "summaries": [s.id for s in summaries], "score": sample.scores["overeager"].value, "explanation": sample.scores["overeager"].explanation,
    "calls": calls, "events": sorted({e.event for e in sample.events}), "metric": head.results.scores[0].metrics["overeager_rate"].value}))
"#;
    for (name, log) in &logs {
        let out = Command::new(venv.join("bin/python")).args(["-c", script]).arg(log).output().unwrap();
        assert!(out.status.success(), "{name}: inspect_ai cannot read {}:\n{}", log.display(), String::from_utf8_lossy(&out.stderr));
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        let ours = read_json(&dir.join(format!("{name}.json")));
        let id = ours["extra"]["overeager"]["run_id"].as_str().unwrap();
        let overeager = ours["extra"]["overeager"]["verdict"]["overeager"] == true;
        assert_eq!(r["status"], "success");
        assert_eq!((r["samples"].as_u64(), r["header_samples"].is_null(), r["by_id"].as_str()), (Some(1), true, Some(id)), "{name}: {r}");
        assert_eq!(r["summaries"], json!([id]));
        assert_eq!(r["score"], if overeager { "I" } else { "C" }, "{name}: {r}");
        assert_eq!(r["metric"], if overeager { 1.0 } else { 0.0 });
        for t in ours["extra"]["overeager"]["verdict"]["traps"].as_array().unwrap() {
            assert!(r["explanation"].as_str().unwrap().contains(t["id"].as_str().unwrap()), "the explanation names trap {}: {r}", t["id"]);
        }
        assert!(!r["calls"].as_array().unwrap().is_empty(), "{name}: {r}");
        for kind in ["model", "tool", "score", "info"] {
            assert!(r["events"].as_array().unwrap().iter().any(|e| e == kind), "{name}: no {kind} event: {r}");
        }
        let dump = Command::new(venv.join("bin/inspect")).args(["log", "dump"]).arg(log).output().unwrap();
        assert!(dump.status.success(), "{name}: inspect log dump failed:\n{}", String::from_utf8_lossy(&dump.stderr));
        let dumped: Value = serde_json::from_slice(&dump.stdout).unwrap();
        assert_eq!(dumped["samples"][0]["id"], id);
    }
}

/// An exported log bundled by `inspect view bundle` and served over loopback shows the run's
/// tool calls in headless Chromium.
#[test]
fn inspect_view_shows_the_tool_calls() {
    let Some(venv) = readers() else { return };
    let Some(driver) = chromedriver() else { return };
    let dir = scratch("export-view");
    let name = "claude-code-permissive-aggressive";
    let logs = dir.join("logs");
    let file = "2026-11-24T00-00-00+00-00_overeager_view.eval";
    ok(&export(real(name).to_str().unwrap(), "inspect", &logs.join(file), &[]));
    let site = dir.join("site");
    let out = Command::new(venv.join("bin/inspect")).args(["view", "bundle", "--log-dir"]).arg(&logs).arg("--output-dir").arg(&site).output().unwrap();
    assert!(out.status.success(), "inspect view bundle failed:\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(site.join("logs").join(file)).unwrap(), std::fs::read(logs.join(file)).unwrap(), "the viewer serves the log as exported");

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let port = free_port();
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let files = axum::Router::new().fallback_service(tower_http::services::ServeDir::new(&site));
        tokio::spawn(async move { axum::serve(listener, files).await.unwrap() });
        let c = browser(&driver, &dir.join("profile")).await;
        c.goto(&format!("http://127.0.0.1:{port}/#/logs/{}", file.replace('+', "%2B"))).await.unwrap();
        // The sample's conversation, tool calls and their outputs included.
        let tab = c.wait().at_most(WAIT_VIEWER).for_element(Locator::XPath("//*[@role='tab' or self::button or self::a][normalize-space(.)='Messages' or normalize-space(.)='MESSAGES']")).await.expect("the sample's Messages tab");
        tab.click().await.unwrap();
        let deadline = std::time::Instant::now() + WAIT_VIEWER;
        let wanted = ["ls -la alembic/versions instance", "rm -f instance/invoicer.db"];
        loop {
            let text = c.find(Locator::Css("body")).await.unwrap().text().await.unwrap();
            if wanted.iter().all(|w| text.contains(w)) {
                break;
            }
            if std::time::Instant::now() > deadline {
                std::fs::create_dir_all(repo().join("target/web-shots")).unwrap();
                std::fs::write(repo().join("target/web-shots/inspect-view.png"), c.screenshot().await.unwrap()).unwrap();
                panic!("the viewer shows no tool calls {wanted:?} (screenshot in target/web-shots/inspect-view.png); the page says:\n{text}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        c.close().await.unwrap();
    });
}
