//! `overeager-shim model`: the scripted model endpoint, a loopback HTTP server that answers an
//! agent CLI in its own wire dialect with a scenario's play (or a recorded run), and writes
//! every request and reply to the model channel. The run supervisor serves it on a thread,
//! inside the sandbox, so a contained agent reaches it without any network: in a container
//! it listens on the container's own loopback.
//!
//! What to answer is decided in [`overeager_formats::model`]; this is only the I/O.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::net::TcpListener;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use overeager_formats::model::catalog::Catalog;
use overeager_formats::model::{self, ModelRecord, Script};
use serde_json::Value;

use crate::{flag, http, now_us};

/// What the endpoint answers from.
pub enum Plays {
    /// One script: a scenario's play for one agent, or a recording.
    Script(Script),
    /// A stand-in provider's catalog: each request's own scenario, agent and play.
    Catalog(Catalog),
}

struct Shared {
    plays: Plays,
    log: Option<Mutex<File>>,
    seq: AtomicU64,
    sides: AtomicUsize,
    /// A text agent's turns answered by a replay.
    text_turns: AtomicUsize,
    opts: Serving,
}

/// How the endpoint is served besides its script: over TLS (standing in for a provider's API
/// behind the model gateway), and whether it plays an outage.
#[derive(Clone, Default)]
pub struct Serving {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// From the request of this number on (0 is the first), every request is answered with
    /// this status and an error body: a provider's API that went down mid-run.
    pub fail_from: Option<(u64, u16)>,
}

/// Loads a script file (JSON of [`Script`]).
pub fn load(path: &str) -> Result<Script, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("reading the model script {path}: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{path}: not a model script: {e}"))
}

/// Loads a catalog file (JSON of [`Catalog`]).
fn load_catalog(path: &str) -> Result<Catalog, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("reading the stand-in's catalog {path}: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{path}: not a stand-in catalog: {e}"))
}

/// A listener from `--fd N` (a socket the executor bound and handed down) or `--listen ADDR`.
pub fn listener(fd: Option<&str>, listen: Option<&str>) -> Result<TcpListener, String> {
    match (fd, listen) {
        (Some(fd), _) => {
            let n: i32 = fd.parse().map_err(|_| format!("--model-fd `{fd}` is not a descriptor number"))?;
            // SAFETY: the executor passed this descriptor, a listening TCP socket, for us to own.
            Ok(unsafe { TcpListener::from_raw_fd(n) })
        }
        (None, Some(addr)) => TcpListener::bind(addr).map_err(|e| format!("the scripted model endpoint cannot listen on {addr}: {e}")),
        (None, None) => Err("name where the model endpoint listens".into()),
    }
}

/// Serves `script` on `listener` from a background thread until the process ends. Records go
/// to `log` one line per exchange, each written whole.
pub fn spawn(listener: TcpListener, script: Script, log: Option<File>) {
    spawn_with(listener, Plays::Script(script), log, Serving::default());
}

/// [`spawn`], from `plays` and served as `opts` says.
pub fn spawn_with(listener: TcpListener, plays: Plays, log: Option<File>, opts: Serving) {
    let shared = Arc::new(Shared { plays, log: log.map(Mutex::new), seq: AtomicU64::new(0), sides: AtomicUsize::new(0), text_turns: AtomicUsize::new(0), opts });
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
                let _ = conn.set_nodelay(true);
                match &shared.opts.tls {
                    Some(config) => {
                        let Ok(tls) = rustls::ServerConnection::new(config.clone()) else { return };
                        serve(rustls::StreamOwned::new(tls, conn), &shared);
                    }
                    None => serve(conn, &shared),
                }
            });
        }
    });
}

fn serve(conn: impl Read + Write, s: &Shared) {
    let mut r = BufReader::new(conn);
    // One request per connection: replies close it, as every CLI was seen to handle.
    let (status, ctype, body) = match http::read_head(&mut r).and_then(|head| Ok((http::read_body(&mut r, &head)?, head))) {
        Ok((raw, head)) => exchange(s, &head, &raw),
        Err(e) => (400, "text/plain", e),
    };
    let w = r.get_mut();
    // Says what answered, so that a gateway in front of it never records its replies as a
    // real model's.
    let what = overeager_core::model::STAND_IN_HEADER;
    let head = format!("HTTP/1.1 {status} {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{what}: scripted\r\nConnection: close\r\n\r\n", http::reason(status), body.len());
    let _ = w.write_all(head.as_bytes()).and_then(|()| w.write_all(body.as_bytes())).and_then(|()| w.flush());
}

fn exchange(s: &Shared, head: &[String], raw: &[u8]) -> (u16, &'static str, String) {
    let t_us = now_us();
    let mut parts = head[0].split_whitespace();
    let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
    let parsed = serde_json::from_slice::<Value>(raw);
    let malformed = parsed.as_ref().err().map(ToString::to_string);
    let request: Value = parsed.unwrap_or_else(|_| Value::String(String::from_utf8_lossy(raw).into_owned()));
    let n = s.seq.fetch_add(1, Ordering::SeqCst);
    // A model call must be JSON: what is not is refused as a provider would, where it breaks.
    if let Some(why) = malformed.filter(|_| method == "POST" && overeager_core::model::Dialect::of_path(&path).is_some()) {
        let body = serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": format!("the request body is not JSON: {why}")}}).to_string();
        write_record(s, &ModelRecord { seq: n, t_us, method, path, request, status: 400, content_type: "application/json".into(), reply: body.clone(), ..Default::default() });
        return (400, "application/json", body);
    }
    if let Some((from, status)) = s.opts.fail_from.filter(|(from, _)| n >= *from) {
        let body = serde_json::json!({"type": "error", "error": {"type": "api_error", "message": format!("the scripted provider is down from request {from} on (request {n})")}}).to_string();
        let record = ModelRecord { seq: n, t_us, method, path, request, status, content_type: "application/json".into(), reply: body.clone(), ..Default::default() };
        write_record(s, &record);
        return (status, "application/json", body);
    }
    let script = match &s.plays {
        Plays::Script(script) => Cow::Borrowed(script),
        Plays::Catalog(catalog) => match catalog.script_for(&path, &request) {
            Ok(script) => Cow::Owned(script),
            Err(why) => {
                let body = serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": format!("the stand-in provider cannot answer: {why}")}}).to_string();
                write_record(s, &ModelRecord { seq: n, t_us, method, path, request, status: 400, content_type: "application/json".into(), reply: body.clone(), ..Default::default() });
                return (400, "application/json", body);
            }
        },
    };
    // Side requests, and a text agent's turns, are numbered in arrival order for a replay;
    // count before answering.
    let probe = model::respond(&script, &method, &path, &request, n, 0);
    let position = match &script.replay {
        Some(_) if probe.side => s.sides.fetch_add(1, Ordering::SeqCst),
        Some(_) if model::is_text_turn(&script, &method, &path, &request) => s.text_turns.fetch_add(1, Ordering::SeqCst),
        _ => 0,
    };
    let x = if position == 0 { probe } else { model::respond(&script, &method, &path, &request, n, position) };
    if x.step == Some(0) && script.first_delay_ms > 0 {
        std::thread::sleep(Duration::from_millis(script.first_delay_ms));
    }
    if let Some(d) = &x.divergence {
        eprintln!("overeager scripted model: {d}");
    }
    let record = ModelRecord {
        seq: n,
        t_us,
        method,
        path,
        dialect: x.dialect,
        side: x.side,
        step: x.step,
        request,
        status: x.status,
        content_type: x.reply.content_type.to_string(),
        reply: x.reply.body.clone(),
        divergence: x.divergence.clone(),
        duration_us: Some(now_us().saturating_sub(t_us)),
        ..Default::default()
    };
    write_record(s, &record);
    (x.status, x.reply.content_type, x.reply.body)
}

fn write_record(s: &Shared, record: &ModelRecord) {
    if let Some(log) = &s.log {
        crate::append_record(log, record);
    }
}

/// `overeager-shim model (--script <file> | --catalog <file>) (--listen <addr> | --fd <n>) [--log <file>]
/// [--tls-cert <pem> --tls-key <pem>] [--fail-from <n> [--fail-status <code>]]`: serve until
/// killed.
pub fn main(args: &[String]) -> i32 {
    let run = || -> Result<(), String> {
        let plays = match (flag(args, "--script"), flag(args, "--catalog")) {
            (Some(path), None) => Plays::Script(load(path)?),
            (None, Some(path)) => Plays::Catalog(load_catalog(path)?),
            _ => return Err("one of --script <file> and --catalog <file> is required".into()),
        };
        let tls = match (flag(args, "--tls-cert"), flag(args, "--tls-key")) {
            (Some(cert), Some(key)) => Some(crate::tls::server(cert, key)?),
            (None, None) => None,
            _ => return Err("--tls-cert and --tls-key go together".into()),
        };
        let fail_from = match flag(args, "--fail-from") {
            Some(n) => {
                let n = n.parse().map_err(|_| format!("--fail-from `{n}` is not a request number"))?;
                let status = flag(args, "--fail-status").unwrap_or("500");
                Some((n, status.parse().ok().filter(|s| (400..600).contains(s)).ok_or_else(|| format!("--fail-status `{status}` is not an HTTP error status"))?))
            }
            None => None,
        };
        let l = listener(flag(args, "--fd"), flag(args, "--listen"))?;
        let log = match flag(args, "--log") {
            Some(p) => Some(std::fs::OpenOptions::new().create(true).append(true).open(p).map_err(|e| format!("opening {p}: {e}"))?),
            None => None,
        };
        if let Ok(a) = l.local_addr() {
            println!("{}://{a}", if tls.is_some() { "https" } else { "http" });
            let _ = std::io::stdout().flush();
        }
        spawn_with(l, plays, log, Serving { tls, fail_from });
        loop {
            std::thread::park();
        }
    };
    match run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("overeager-shim model: {e}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use overeager_core::Step;
    use overeager_core::paths::Roots;
    use serde_json::json;
    use std::io::Read;
    use std::net::TcpStream;

    fn post(addr: &str, path: &str, body: &Value) -> (u16, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        let b = body.to_string();
        write!(s, "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}", b.len()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        (out[9..12].parse().unwrap(), out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
    }

    #[test]
    fn serves_the_play_step_by_step_and_logs_every_exchange() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("model.jsonl");
        let script = Script {
            label: "cautious".into(),
            steps: vec![Step::Sh { command: "ls -la".into() }, Step::Read { path: "notes.md".into() }],
            roots: Roots { workspace: "/w".into(), home: "/h".into() },
            default_shell: "Bash".into(),
            tools: Default::default(),
            replay: None,
            first_delay_ms: 0,
            learn_roots: false,
            finish_command: None, reply_format: None,
        };
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        spawn(l, script, Some(File::create(&log).unwrap()));
        let tools = json!([{"name": "Bash", "input_schema": {"properties": {"command": {}}}}, {"name": "Read", "input_schema": {"properties": {"file_path": {}}}}]);
        let (st, body) = post(&addr, "/v1/messages?beta=true", &json!({"model": "m", "tools": tools, "messages": [{"role": "user", "content": "go"}]}));
        assert_eq!(st, 200);
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["content"][0]["input"]["command"], "ls -la");
        // The next step follows from the history: the model's call and the tool's answer.
        let history = json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t0", "name": "Bash", "input": {"command": "ls -la"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": "notes.md"}]},
        ]);
        let (_, body) = post(&addr, "/v1/messages", &json!({"model": "m", "tools": tools, "messages": history}));
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["content"][0]["input"]["file_path"], "/w/notes.md");
        let (_, body) = post(&addr, "/v1/messages", &json!({"model": "m", "tools": [], "messages": [{"role": "user", "content": "title?"}]}));
        assert!(body.contains("\"OK\""), "{body}");
        assert_eq!(post(&addr, "/v1/nothing", &json!({})).0, 404);
        // A model call that is not JSON is refused, as a provider would, and recorded.
        let mut conn = TcpStream::connect(&addr).unwrap();
        write!(conn, "POST /v1/messages HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 9\r\n\r\n{{\"model\":").unwrap();
        let mut out = String::new();
        conn.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 400") && out.contains("not JSON"), "{out}");
        let lines: Vec<ModelRecord> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 5);
        assert_eq!((lines[0].step, lines[1].step, lines[2].side, lines[3].status, lines[4].status), (Some(0), Some(1), true, 404, 400));
    }

    #[test]
    fn a_taken_address_is_a_clear_error() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap().to_string();
        let err = listener(None, Some(&addr)).unwrap_err();
        assert!(err.contains("cannot listen on") && err.contains(&addr), "{err}");
    }
}
