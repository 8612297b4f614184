//! The scripted model endpoint: one HTTP server on loopback that speaks the four wire
//! dialects of the real agent CLIs (see [`overeager_core::model`]) and answers with a
//! scenario's play, so a real CLI, its permission gate and its event stream run through the
//! real audit stack without a model API or a key. Every request and reply is appended to the
//! run's model channel (`model.jsonl`).

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use overeager_core::Step;
use overeager_core::model::{self, Dialect, ModelRecord, Turn, Vocab};
use overeager_core::paths::Roots;
use serde_json::{Value, json};

/// What the endpoint plays.
#[derive(Debug, Clone)]
pub struct Script {
    /// Named in final messages, e.g. `aggressive`.
    pub label: String,
    pub steps: Vec<Step>,
    /// The sandbox's roots as the agent sees them (tools take absolute paths).
    pub roots: Roots,
    /// The tool a step goes to when the agent offers no shell (it refuses the call).
    pub default_shell: &'static str,
}

/// How an agent CLI names its shell tool, for steps it has no in-process tool for.
pub fn default_shell(agent: &str) -> &'static str {
    match agent {
        "claude-code" => "Bash",
        "codex" => "shell",
        "gemini-cli" => "run_shell_command",
        "openhands" => "terminal",
        _ => "Bash",
    }
}

struct Shared {
    script: Script,
    log: Mutex<Option<std::fs::File>>,
    seq: AtomicU64,
}

/// A running endpoint; dropping it stops the server.
pub struct ModelServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ModelServer {
    /// Binds `addr` (port 0 for any free port) and serves `script` on its own thread, logging
    /// to `log` (the run's `model.jsonl`) when given.
    pub fn start(script: Script, addr: &str, log: Option<&Path>) -> Result<ModelServer> {
        let listener = TcpListener::bind(addr).with_context(|| {
            format!("the scripted model endpoint cannot listen on {addr}; free the port or choose another address")
        })?;
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        let file = match log {
            Some(p) => Some(std::fs::OpenOptions::new().create(true).append(true).open(p).with_context(|| format!("opening {}", p.display()))?),
            None => None,
        };
        let shared = Arc::new(Shared { script, log: Mutex::new(file), seq: AtomicU64::new(0) });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = axum::Router::new().fallback(handle).layer(DefaultBodyLimit::max(64 << 20)).with_state(shared);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let thread = std::thread::Builder::new().name("scripted-model".into()).spawn(move || {
            rt.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                let _ = axum::serve(listener, app).with_graceful_shutdown(async move {
                    let _ = rx.await;
                }).await;
            });
        })?;
        Ok(ModelServer { addr: bound, stop: Some(tx), thread: Some(thread) })
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers one request; see the module docs.
fn answer(script: &Script, method: &Method, uri: &Uri, body: &Value, n: u64) -> (StatusCode, Option<Dialect>, bool, Option<usize>, model::Reply) {
    let path = uri.path();
    if method == Method::POST && path.ends_with("/messages/count_tokens") {
        return (StatusCode::OK, Some(Dialect::Anthropic), true, None, model::Reply { content_type: "application/json", body: json!({"input_tokens": 1}).to_string() });
    }
    let Some((dialect, stream_path)) = Dialect::of_path(path).filter(|_| method == Method::POST) else {
        let msg = json!({"error": {"message": format!("the scripted model does not serve {method} {path}"), "type": "not_found"}});
        return (StatusCode::NOT_FOUND, None, false, None, model::Reply { content_type: "application/json", body: msg.to_string() });
    };
    let stream = stream_path || body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let model_name = body.get("model").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| {
        path.rsplit('/').next().and_then(|last| last.split(':').next()).unwrap_or("scripted").to_string()
    });
    let vocab = Vocab::of_request(dialect, body);
    if !vocab.is_main_loop() {
        let text = model::side_answer(dialect, body);
        return (StatusCode::OK, Some(dialect), true, None, model::render_text(dialect, &text, stream, &model_name, n));
    }
    let step = model::turns_so_far(dialect, body);
    let turn: Turn = model::turn(&script.steps, step, &vocab, &script.roots, &script.label, script.default_shell);
    (StatusCode::OK, Some(dialect), false, Some(step), model::render(dialect, &turn, stream, &model_name, n))
}

async fn handle(State(s): State<Arc<Shared>>, method: Method, uri: Uri, body: Bytes) -> Response {
    let t_us = super::now_us();
    let n = s.seq.fetch_add(1, Ordering::Relaxed);
    let request: Value = serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let (status, dialect, side, step, reply) = answer(&s.script, &method, &uri, &request, n);
    let record = ModelRecord {
        seq: n,
        t_us,
        method: method.to_string(),
        path: uri.path_and_query().map(|p| p.to_string()).unwrap_or_default(),
        dialect,
        side,
        step,
        request,
        status: status.as_u16(),
        content_type: reply.content_type.to_string(),
        reply: reply.body.clone(),
    };
    if let Some(f) = s.log.lock().unwrap_or_else(|e| e.into_inner()).as_mut()
        && let Ok(mut line) = serde_json::to_vec(&record)
    {
        line.push(b'\n');
        let _ = f.write_all(&line);
    }
    // Closing after each reply is what every CLI was seen to handle for SSE.
    (status, [(header::CONTENT_TYPE, reply.content_type), (header::CONNECTION, "close")], reply.body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny blocking HTTP/1.1 POST, enough for these tests.
    fn post(url: &str, body: &Value) -> (u16, String) {
        use std::io::Read;
        let rest = url.strip_prefix("http://").unwrap();
        let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap();
        let mut s = std::net::TcpStream::connect(host).unwrap();
        let b = body.to_string();
        write!(s, "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let status = out[9..12].parse().unwrap();
        let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
        (status, body)
    }

    #[test]
    fn serves_the_play_step_by_step_and_logs_every_exchange() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("model.jsonl");
        let script = Script {
            label: "cautious".into(),
            steps: vec![Step::Sh { command: "ls -la".into() }, Step::Read { path: "notes.md".into() }],
            roots: Roots { workspace: "/w".into(), home: "/h".into() },
            default_shell: "Bash",
        };
        let server = ModelServer::start(script, "127.0.0.1:0", Some(&log)).unwrap();
        let tools = json!([{"name": "Bash", "input_schema": {"properties": {"command": {}}}}, {"name": "Read", "input_schema": {"properties": {"file_path": {}}}}]);
        let url = format!("{}/v1/messages?beta=true", server.url());
        let (st, body) = post(&url, &json!({"model": "m", "stream": false, "tools": tools, "messages": [{"role": "user", "content": "go"}]}));
        assert_eq!(st, 200);
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["content"][0]["input"]["command"], "ls -la");
        let (_, body) = post(&url, &json!({"model": "m", "tools": tools, "messages": [{"role": "user"}, {"role": "assistant"}, {"role": "user"}]}));
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["content"][0]["input"]["file_path"], "/w/notes.md");
        let (_, body) = post(&url, &json!({"model": "m", "tools": [], "messages": [{"role": "user", "content": "title?"}]}));
        assert!(body.contains("\"OK\""), "{body}");
        let (st, _) = post(&format!("{}/v1/nothing", server.url()), &json!({}));
        assert_eq!(st, 404);
        drop(server);
        let lines: Vec<ModelRecord> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 4);
        assert_eq!((lines[0].step, lines[1].step, lines[2].side, lines[3].status), (Some(0), Some(1), true, 404));
    }

    #[test]
    fn a_taken_port_is_a_clear_error() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap().to_string();
        let script = Script { label: "x".into(), steps: vec![], roots: Roots { workspace: "/w".into(), home: "/h".into() }, default_shell: "Bash" };
        let err = ModelServer::start(script, &addr, None).err().unwrap().to_string();
        assert!(err.contains("cannot listen on") && err.contains(&addr), "{err}");
    }
}
