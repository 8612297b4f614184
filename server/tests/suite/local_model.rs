//! Real agent CLIs on a real model overeager did not write: llama.cpp's own server with
//! SmolLM2-135M (`overeager model local`), on loopback, through the model gateway: each agent
//! directly on the server's route for its dialect (Chat Completions, Anthropic Messages,
//! Responses), or bridged where the server has none (Gemini). Each call takes tens of seconds
//! on two cores, so this is in the `--all` tier. Every agent either finishes — and then the
//! server's own log and the model channel agree call for call, both sides where bridged, the
//! tokens are the server's, and a replay gives the same verdict — or ends `errored (model API)`
//! with the server's words; none ends as a bare timeout with its calls missing.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use serde_json::Value;

/// Every agent (the current version of Codex CLI), each in a cell that lets it act, and the
/// built-in provider of the server's route for its first dialect; Gemini's has none there, so
/// Gemini CLI is bridged to Chat Completions.
const CELLS: [(&str, &str); 17] = [
    ("claude-code:permissive", "local-anthropic"),
    ("claude-code-acp:allow-all", "local-anthropic"),
    ("codex@0.169.0:permissive", "local-responses"),
    ("codex-acp:allow-all", "local-responses"),
    ("gemini-cli:permissive", "local"),
    ("gemini-cli-acp:allow-all", "local"),
    ("mini-swe-agent:permissive", "local"),
    ("aider:default", "local"),
    ("cline:permissive", "local"),
    ("continue-cli:permissive", "local"),
    ("kilo-code:permissive", "local"),
    ("opencode:permissive", "local"),
    ("openhands:always-approve", "local"),
    ("kilo-code-acp:allow-all", "local"),
    ("opencode-acp:allow-all", "local"),
    ("qwen-code-acp:allow-all", "local"),
    ("copilot-acp:allow-all", "local"),
];

/// The agents that must finish (the acceptance floor: 14 of the 17, these three among them).
const MUST_FINISH: [&str; 3] = ["claude-code", "gemini-cli", "codex"];

/// Stops the server when the test ends, however it ends.
struct Server;

impl Drop for Server {
    fn drop(&mut self) {
        let _ = overeager(&["model", "local", "stop"]);
    }
}

/// The server's own count of the answers it began (llama.cpp's server logs each task it gives a
/// slot; it keeps no access log).
fn served(log: &Path) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|l| l.contains("launch_slot_") && l.contains("processing task")).count()
}

/// (input with cached, output) tokens as the server reported them in its replies, read from
/// the provider's side of each call in its own dialect's fields: Chat Completions' `usage`,
/// Anthropic's `message_start` and `message_delta`, the Responses `response.usage`.
fn server_usage(bundle: &Path) -> (u64, u64) {
    let mut total = (0, 0);
    for r in jsonl::<Value>(&bundle.join("model.jsonl")) {
        let side = if r["bridged"].is_object() { &r["bridged"] } else { &r };
        let reply = side["reply"].as_str().unwrap_or_default();
        let docs: Vec<Value> = match serde_json::from_str::<Value>(reply) {
            Ok(v) => vec![v],
            Err(_) => reply.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect(),
        };
        let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
        let (mut input, mut output) = (0, 0);
        for d in &docs {
            if let Some(u) = d.get("usage").filter(|u| u.get("prompt_tokens").is_some()) {
                (input, output) = (n(u, "prompt_tokens"), n(u, "completion_tokens"));
            }
            if let Some(u) = d.pointer("/message/usage").or_else(|| d.get("usage").filter(|_| d["type"] == "message_delta" || d["type"] == "message")) {
                input = input.max(n(u, "input_tokens") + n(u, "cache_read_input_tokens") + n(u, "cache_creation_input_tokens"));
                output = output.max(n(u, "output_tokens"));
            }
            if let Some(u) = d.pointer("/response/usage").or_else(|| d.get("usage").filter(|u| u.get("input_tokens").is_some() && d.get("output").is_some())) {
                (input, output) = (n(u, "input_tokens"), n(u, "output_tokens"));
            }
        }
        total = (total.0 + input, total.1 + output);
    }
    total
}

/// (input with cached, output) tokens as the bundle's usage counts them.
fn bundle_usage(bundle: &Path) -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string(bundle.join("usage.json")) else { return (0, 0) };
    let v: Value = serde_json::from_str(&text).unwrap();
    let n = |c: &Value, k: &str| c[1][k].as_u64().unwrap_or(0);
    v["calls"].as_array().into_iter().flatten().fold((0, 0), |(i, o), c| (i + n(c, "input") + n(c, "cache_read") + n(c, "cache_write"), o + n(c, "output")))
}

#[test]
fn all_every_agent_finishes_on_the_real_local_model_directly_or_bridged_or_errors_with_the_server_s_words() {
    let started = ok(&overeager(&["model", "local", "start"]));
    let _server = Server;
    assert!(started.contains("http://127.0.0.1:8931/v1") && started.contains("llama-cpp"), "{started}");
    let status: Value = serde_json::from_str(&ok(&overeager(&["model", "local", "status", "--json"]))).unwrap();
    let log = Path::new(status["server"]["log"].as_str().unwrap()).to_path_buf();
    let scenario = seeds().join("cleanup-orphaned-envs");
    let dir = scratch("local-model");
    let mut outcomes = BTreeMap::new();
    let mut finished = Vec::new();
    for (cell, provider) in CELLS {
        let name = cell.split([':', '@']).next().unwrap();
        if !installed(cell.split(':').next().unwrap()) {
            continue;
        }
        let bundle = dir.join(name);
        let before = served(&log);
        let started = std::time::Instant::now();
        let out = overeager(&[
            "run", "--uncontained", "--scenario", scenario.to_str().unwrap(), "--agent", &format!("{cell}:{provider}/smollm2"),
            "--out", bundle.to_str().unwrap(), "--timeout", "480s", "--json",
        ]);
        let seconds = started.elapsed().as_secs();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            // No observation of the agent: the model's failure, named, and nothing left behind.
            assert!(stderr.contains("errored (model API)") && stderr.contains(&format!("the provider `{provider}`")), "{cell}: a failed run names the model API's failure:\n{stderr}");
            // A call the server had not answered when the run's time ran out is said as such
            // (and recorded), not left as a bare timeout.
            assert!(stderr.contains(" on call ") && (stderr.contains("http ") || stderr.contains("in flight at the run's end") || stderr.contains("stream")), "{cell}: the failing call named: {stderr}");
            assert!(!bundle.exists(), "{cell}: a failed run leaves no bundle");
            outcomes.insert(cell, format!("errored in {seconds} s: {}", stderr.lines().find(|l| l.contains("errored (model API)")).unwrap_or_default()));
            continue;
        }
        let records: Vec<Value> = jsonl(&bundle.join("model.jsonl"));
        assert!(!records.is_empty(), "{cell}: the run asked the model");
        // The server logs the answers it began: every model call the gateway sent it (an
        // agent's other requests, such as Claude Code's `HEAD /`, are recorded too, and
        // answered without one).
        let model_calls = records.iter().filter(|r| r["method"] == "POST" && overeager_core::model::Dialect::of_path(r["path"].as_str().unwrap()).is_some()).count();
        assert_eq!(model_calls, served(&log) - before, "{cell}: the server's log and the model channel agree call for call");
        assert!(records.iter().all(|r| r["upstream"] == "127.0.0.1"), "{cell}: every call went to the server");
        let manifest: Value = serde_json::from_slice(&std::fs::read(bundle.join("bundle.json")).unwrap()).unwrap();
        let played = &manifest["agent"]["played_by"];
        assert_eq!((played["kind"].as_str(), played["provider"].as_str()), (Some("local_server"), Some(provider)), "{cell}: {played}");
        let bridged = played["bridged"] == true;
        assert_eq!(bridged, name.starts_with("gemini-cli"), "{cell}: bridged exactly where the server has no route for its dialect");
        if bridged {
            assert!(records.iter().all(|r| r["bridged"]["dialect"] == "openai-chat" && r["bridged"]["request"].is_object()), "{cell}: both sides of every bridged call");
        }
        // Tokens: the server's own counts, or counted where it reported none (and marked so).
        let usage: Value = serde_json::from_slice(&std::fs::read(bundle.join("usage.json")).unwrap()).unwrap();
        assert!(usage["total"]["input"].as_u64().unwrap_or(0) + usage["total"]["cache_read"].as_u64().unwrap_or(0) > 0, "{cell}: input tokens, reported or counted: {usage}");
        let (server_in, server_out) = server_usage(&bundle);
        if server_in + server_out > 0 && usage.get("estimated").is_none() {
            assert_eq!(bundle_usage(&bundle), (server_in, server_out), "{cell}: the tokens are the server's");
        }
        // The run replays offline to the same verdict.
        let verdict = |b: &Path| -> Vec<String> {
            let v: Value = serde_json::from_str(ok(&overeager(&["judge", b.to_str().unwrap(), "--json"])).lines().next().unwrap()).unwrap();
            let mut ids: Vec<String> = v["traps"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_string()).collect();
            ids.sort();
            ids
        };
        let replayed = dir.join(format!("{name}-replayed"));
        ok(&overeager(&[
            "run", "--scenario", scenario.to_str().unwrap(), "--agent", &format!("{cell}:replay:{}", bundle.display()),
            "--out", replayed.to_str().unwrap(), "--timeout", "300s",
        ]));
        assert_eq!(verdict(&replayed), verdict(&bundle), "{cell}: the replay gives the recorded run's verdict");
        outcomes.insert(cell, format!("done in {seconds} s: {} calls{}", records.len(), if bridged { ", bridged" } else { "" }));
        finished.push(name);
    }
    eprintln!("real local model (llama.cpp's server), by agent: {outcomes:#?}");
    assert!(finished.len() >= 14, "{} of {} agents finished: {outcomes:#?}", finished.len(), CELLS.len());
    for a in MUST_FINISH {
        assert!(finished.contains(&a), "{a} finished on the real server: {outcomes:#?}");
    }
}
