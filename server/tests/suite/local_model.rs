//! Real agent CLIs on a real model overeager did not write: llama-cpp-python's
//! OpenAI-compatible server with SmolLM2-135M (`overeager model local`), on loopback, through
//! the model gateway. Each call takes 15–100 s on two cores, so these are in the `--all` tier.
//! Every agent that speaks Chat Completions either finishes — and then the server's request log
//! and the model channel agree call for call, the tokens are the server's, and a replay gives
//! the same verdict — or ends `errored (model API)` with the server's reason; none ends as a
//! bare timeout with its calls missing.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use serde_json::Value;

/// The agents whose definitions speak `openai-chat`, each with a policy that lets it act.
const CHAT_AGENTS: [&str; 12] = [
    "mini-swe-agent:permissive",
    "aider:default",
    "codex:permissive",
    "cline:permissive",
    "continue-cli:permissive",
    "kilo-code:permissive",
    "opencode:permissive",
    "openhands:always-approve",
    "kilo-code-acp:allow-all",
    "opencode-acp:allow-all",
    "qwen-code-acp:allow-all",
    "copilot-acp:allow-all",
];

/// Stops the server when the test ends, however it ends.
struct Server;

impl Drop for Server {
    fn drop(&mut self) {
        let _ = overeager(&["model", "local", "stop"]);
    }
}

/// The server's own count of Chat Completions requests it answered (its access log).
fn served(log: &Path) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|l| l.contains("\"POST /v1/chat/completions")).count()
}

/// (input, output) tokens as the server reported them in its replies: a JSON body's `usage`, or
/// the streamed chunks' (the last one that carries it).
fn server_usage(bundle: &Path) -> (u64, u64) {
    let mut total = (0, 0);
    for r in jsonl::<Value>(&bundle.join("model.jsonl")) {
        let reply = r["reply"].as_str().unwrap_or_default();
        let bodies: Vec<Value> = match serde_json::from_str::<Value>(reply) {
            Ok(v) => vec![v],
            Err(_) => reply.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect(),
        };
        if let Some(u) = bodies.iter().rev().find_map(|b| b.get("usage").filter(|u| u.is_object())) {
            total.0 += u["prompt_tokens"].as_u64().unwrap_or(0);
            total.1 += u["completion_tokens"].as_u64().unwrap_or(0);
        }
    }
    total
}

/// (input, output) tokens as the bundle's usage counts them.
fn bundle_usage(bundle: &Path) -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string(bundle.join("usage.json")) else { return (0, 0) };
    let v: Value = serde_json::from_str(&text).unwrap();
    v["calls"].as_array().into_iter().flatten().fold((0, 0), |(i, o), c| (i + c[1]["input"].as_u64().unwrap_or(0), o + c[1]["output"].as_u64().unwrap_or(0)))
}

#[test]
fn every_chat_agent_finishes_on_the_real_local_model_or_errors_with_the_server_s_reason() {
    let started = ok(&overeager(&["model", "local", "start"]));
    let _server = Server;
    assert!(started.contains("http://127.0.0.1:8931/v1"), "{started}");
    let status: Value = serde_json::from_str(&ok(&overeager(&["model", "local", "status", "--json"]))).unwrap();
    let log = Path::new(status["server"]["log"].as_str().unwrap()).to_path_buf();
    let scenario = seeds().join("cleanup-orphaned-envs");
    let dir = scratch("local-model");
    let mut outcomes = BTreeMap::new();
    for agent in CHAT_AGENTS {
        let name = agent.split(':').next().unwrap();
        let bundle = dir.join(name);
        let before = served(&log);
        let out = overeager(&[
            "run", "--uncontained", "--scenario", scenario.to_str().unwrap(), "--agent", &format!("{agent}:local/smollm2"),
            "--out", bundle.to_str().unwrap(), "--timeout", "480s", "--json",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            // No observation of the agent: the model's failure, named, and nothing left behind.
            assert!(stderr.contains("errored (model API)") && stderr.contains("the provider `local`"), "{agent}: a failed run names the model API's failure:\n{stderr}");
            assert!(!bundle.exists(), "{agent}: a failed run leaves no bundle");
            outcomes.insert(agent, format!("errored: {}", stderr.lines().find(|l| l.contains("errored (model API)")).unwrap_or_default()));
            continue;
        }
        let records: Vec<Value> = jsonl(&bundle.join("model.jsonl"));
        assert!(!records.is_empty(), "{agent}: the run asked the model");
        assert_eq!(records.len(), served(&log) - before, "{agent}: the server's log and the model channel agree call for call");
        assert!(records.iter().all(|r| r["upstream"] == "127.0.0.1"), "{agent}: every call went to the server");
        let (server_in, server_out) = server_usage(&bundle);
        if server_in + server_out > 0 {
            assert_eq!(bundle_usage(&bundle), (server_in, server_out), "{agent}: the tokens are the server's");
        }
        // The run replays offline to the same verdict.
        let verdict = |b: &Path| -> Vec<String> {
            let v: Value = serde_json::from_str(ok(&overeager(&["judge", b.to_str().unwrap(), "--json"])).lines().next().unwrap()).unwrap();
            let mut ids: Vec<String> = v["traps"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_string()).collect();
            ids.sort();
            ids
        };
        let replayed = dir.join(format!("{name}-replayed"));
        let policy = agent.split_once(':').unwrap().1;
        ok(&overeager(&[
            "run", "--scenario", scenario.to_str().unwrap(), "--agent", &format!("{name}:{policy}:replay:{}", bundle.display()),
            "--out", replayed.to_str().unwrap(), "--timeout", "300s",
        ]));
        assert_eq!(verdict(&replayed), verdict(&bundle), "{agent}: the replay gives the recorded run's verdict");
        outcomes.insert(agent, format!("done: {} calls", records.len()));
    }
    eprintln!("real local model, by agent: {outcomes:#?}");
}
