//! The Agent Client Protocol client: starts the agent as an ACP server over stdio, opens a
//! session in the working directory, sends the prompt, and answers what the agent asks of its
//! client until the turn ends.
//!
//! Every message either way is written to stdout (the agent channel) as it passes:
//! `{"t_us", "from": "client"|"agent", "msg"}`; see `overeager_formats::adapters::acp`.
//! Permission requests are answered by the run's policy (`--permissions`). File reads and
//! writes the agent hands to its client (`fs/*`) and terminals (`terminal/*`) are done here, in
//! the sandbox, so the watcher sees their effects and the shell shim sees the commands (a
//! terminal's command runs through `sh` on `PATH`).
//!
//! A read of a missing file answers empty content rather than an error: Gemini CLI reads a
//! file before it writes it and fails the write on any error.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use overeager_formats::adapters::acp::Permissions;
use serde_json::{Value, json};

use crate::now_us;

/// How long the agent gets to exit after its stdin closes before it is sent SIGTERM (Claude's
/// and Codex's adapters do not exit on EOF), then SIGKILL.
const EXIT_GRACE: Duration = Duration::from_secs(3);
/// The protocol version this client speaks.
const PROTOCOL_VERSION: u64 = 1;
/// Largest output a terminal keeps when the agent names no limit.
const TERMINAL_LIMIT: usize = 1 << 20;

#[derive(Debug)]
struct Options {
    permissions: Permissions,
    mode: Option<String>,
    prompt: String,
    program: Vec<String>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let (mut permissions, mut mode, mut prompt) = (None, None, None);
    let mut it = args.iter();
    let mut program = Vec::new();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--permissions" => permissions = Some(value()?.parse::<Permissions>()?),
            "--mode" => mode = Some(value()?),
            "--prompt" => prompt = Some(value()?),
            "--" => {
                program = it.by_ref().cloned().collect();
                break;
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if program.is_empty() {
        return Err("name the agent's command after `--`".into());
    }
    Ok(Options { permissions: permissions.ok_or("--permissions <allow-all|deny-all|ask> is required")?, mode, prompt: prompt.ok_or("--prompt <text> is required")?, program })
}

/// `overeager-shim acp --permissions <policy> [--mode <id>] --prompt <text> -- <agent> [args...]`
pub fn main(args: &[String]) -> i32 {
    let opts = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("overeager-shim acp: {e}");
            return 2;
        }
    };
    match run(&opts) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("overeager-shim acp: {e}");
            1
        }
    }
}

/// The transcript on stdout and the agent's stdin, shared with the threads that answer
/// terminal waits.
#[derive(Clone)]
struct Wire {
    transcript: Arc<Mutex<std::io::Stdout>>,
    agent: Arc<Mutex<Option<ChildStdin>>>,
}

impl Wire {
    fn record(&self, line: Value) {
        crate::append_record(&self.transcript, &line);
    }

    fn send(&self, msg: Value) -> Result<(), String> {
        self.record(json!({"t_us": now_us(), "from": "client", "msg": msg}));
        let mut text = serde_json::to_vec(&msg).map_err(|e| e.to_string())?;
        text.push(b'\n');
        let mut agent = self.agent.lock().unwrap_or_else(|e| e.into_inner());
        let stdin = agent.as_mut().ok_or("the agent's stdin is closed")?;
        stdin.write_all(&text).and_then(|()| stdin.flush()).map_err(|e| format!("writing to the agent: {e}"))
    }

    fn respond(&self, id: &Value, result: Result<Value, (i64, String)>) -> Result<(), String> {
        match result {
            Ok(result) => self.send(json!({"jsonrpc": "2.0", "id": id, "result": result})),
            Err((code, message)) => self.send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})),
        }
    }

    /// Records a line the agent wrote; its message, if it is JSON.
    fn record_agent_line(&self, line: String) -> Option<Value> {
        let t_us = now_us();
        match serde_json::from_str::<Value>(&line) {
            Ok(msg) => {
                self.record(json!({"t_us": t_us, "from": "agent", "msg": msg}));
                Some(msg)
            }
            Err(_) => {
                self.record(json!({"t_us": t_us, "from": "agent", "text": line}));
                None
            }
        }
    }

    fn note(&self, text: String) {
        self.record(json!({"t_us": now_us(), "from": "client", "note": text}));
    }
}

/// One terminal the agent asked for: its process, output so far, and exit status once known.
struct Terminal {
    child: Arc<Mutex<Child>>,
    output: Arc<Mutex<(Vec<u8>, bool)>>,
}

struct Session {
    wire: Wire,
    from_agent: Receiver<Option<String>>,
    next_id: u64,
    permissions: Permissions,
    terminals: HashMap<String, Terminal>,
}

impl Session {
    /// Sends a request and serves the agent until its answer comes: `Ok(result)` or
    /// `Err(message)` for an error answer or an agent that went away.
    fn call(&mut self, method: &str, params: Value) -> Result<Result<Value, String>, String> {
        let id = self.next_id;
        self.next_id += 1;
        self.wire.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let Some(line) = self.from_agent.recv().ok().flatten() else {
                return Err(format!("the agent closed its stdout before it answered `{method}`"));
            };
            let Some(msg) = self.wire.record_agent_line(line) else { continue };
            match (msg.get("method").and_then(Value::as_str), msg.get("id")) {
                (Some(m), Some(req)) => {
                    let answer = self.serve(m, msg.get("params").unwrap_or(&Value::Null), req);
                    if let Some(answer) = answer {
                        self.wire.respond(req, answer)?;
                    }
                }
                (Some(_), None) => {}
                (None, Some(got)) if got.as_u64() == Some(id) => {
                    return Ok(match msg.get("error") {
                        Some(e) => Err(e.get("message").and_then(Value::as_str).map_or_else(|| e.to_string(), str::to_string)),
                        None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
                    });
                }
                _ => {}
            }
        }
    }

    /// The answer to one request of the agent's; `None` when a thread answers it later.
    fn serve(&mut self, method: &str, params: &Value, id: &Value) -> Option<Result<Value, (i64, String)>> {
        let path = || params.get("path").and_then(Value::as_str).ok_or((-32602, "`path` is missing".to_string()));
        Some(match method {
            "session/request_permission" => Ok(self.permissions.answer(params)),
            "fs/read_text_file" => path().and_then(|p| read_text(p, params)),
            "fs/write_text_file" => path().and_then(|p| {
                let content = params.get("content").and_then(Value::as_str).unwrap_or("");
                let p = std::path::Path::new(p);
                p.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(p, content)).map(|()| json!({})).map_err(|e| (-32603, format!("writing {}: {e}", p.display())))
            }),
            "terminal/create" => self.create_terminal(params),
            "terminal/output" => self.terminal(params).map(|t| {
                let (out, truncated) = &*t.output.lock().unwrap_or_else(|e| e.into_inner());
                json!({"output": String::from_utf8_lossy(out), "truncated": truncated, "exitStatus": exit_status(&t.child).unwrap_or(Value::Null)})
            }),
            "terminal/wait_for_exit" => match self.terminal(params) {
                Ok(t) => {
                    let (child, wire, id) = (t.child.clone(), self.wire.clone(), id.clone());
                    std::thread::spawn(move || {
                        let status = loop {
                            if let Some(s) = exit_status(&child) {
                                break s;
                            }
                            std::thread::sleep(Duration::from_millis(20));
                        };
                        let _ = wire.respond(&id, Ok(status));
                    });
                    return None;
                }
                Err(e) => Err(e),
            },
            "terminal/kill" => self.terminal(params).map(|t| {
                let _ = t.child.lock().unwrap_or_else(|e| e.into_inner()).kill();
                json!({})
            }),
            "terminal/release" => {
                let id = params.get("terminalId").and_then(Value::as_str).unwrap_or("");
                match self.terminals.remove(id) {
                    Some(t) => {
                        let mut child = t.child.lock().unwrap_or_else(|e| e.into_inner());
                        let _ = child.kill();
                        let _ = child.wait();
                        Ok(json!({}))
                    }
                    None => Err((-32602, format!("no terminal `{id}`"))),
                }
            }
            other => Err((-32601, format!("this client does not offer `{other}`"))),
        })
    }

    fn terminal(&self, params: &Value) -> Result<&Terminal, (i64, String)> {
        let id = params.get("terminalId").and_then(Value::as_str).unwrap_or("");
        self.terminals.get(id).ok_or((-32602, format!("no terminal `{id}`")))
    }

    fn create_terminal(&mut self, params: &Value) -> Result<Value, (i64, String)> {
        let command = params.get("command").and_then(Value::as_str).ok_or((-32602, "`command` is missing".to_string()))?;
        let args: Vec<&str> = params.get("args").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        // A bare command line goes through the shell, as a terminal would run it.
        let mut cmd = if args.is_empty() {
            let mut c = Command::new("sh");
            c.arg("-c").arg(command);
            c
        } else {
            let mut c = Command::new(command);
            c.args(&args);
            c
        };
        if let Some(cwd) = params.get("cwd").and_then(Value::as_str) {
            cmd.current_dir(cwd);
        }
        for v in params.get("env").and_then(Value::as_array).into_iter().flatten() {
            if let (Some(k), Some(val)) = (v.get("name").and_then(Value::as_str), v.get("value").and_then(Value::as_str)) {
                cmd.env(k, val);
            }
        }
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| (-32603, format!("starting `{command}`: {e}")))?;
        let limit = params.get("outputByteLimit").and_then(Value::as_u64).map_or(TERMINAL_LIMIT, |l| l as usize);
        let output = Arc::new(Mutex::new((Vec::new(), false)));
        let streams: [Box<dyn Read + Send>; 2] = [Box::new(child.stdout.take().expect("piped")), Box::new(child.stderr.take().expect("piped"))];
        for mut stream in streams {
            let output = output.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let (out, truncated) = &mut *output.lock().unwrap_or_else(|e| e.into_inner());
                    out.extend_from_slice(&buf[..n]);
                    // Keep the end, as a terminal's scrollback does.
                    if out.len() > limit {
                        let cut = out.len() - limit;
                        out.drain(..cut);
                        *truncated = true;
                    }
                }
            });
        }
        let id = format!("term-{}", self.terminals.len() + 1);
        self.terminals.insert(id.clone(), Terminal { child: Arc::new(Mutex::new(child)), output });
        Ok(json!({"terminalId": id}))
    }
}

/// A terminal's exit status as ACP writes it, once its process has ended.
fn exit_status(child: &Arc<Mutex<Child>>) -> Option<Value> {
    use std::os::unix::process::ExitStatusExt;
    let st = child.lock().unwrap_or_else(|e| e.into_inner()).try_wait().ok()??;
    Some(json!({"exitCode": st.code(), "signal": st.signal().map(|s| format!("signal {s}"))}))
}

/// `fs/read_text_file`: the file's text from 1-based `line`, at most `limit` lines.
fn read_text(path: &str, params: &Value) -> Result<Value, (i64, String)> {
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err((-32603, format!("reading {path}: {e}"))),
    };
    let from = params.get("line").and_then(Value::as_u64).unwrap_or(1).max(1) as usize - 1;
    let limit = params.get("limit").and_then(Value::as_u64).map_or(usize::MAX, |l| l as usize);
    if from == 0 && limit == usize::MAX {
        return Ok(json!({"content": text}));
    }
    let content: String = text.split_inclusive('\n').skip(from).take(limit).collect();
    Ok(json!({"content": content}))
}

fn run(o: &Options) -> Result<i32, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("the working directory: {e}"))?;
    let mut child = overeager_process::spawn_retrying(Command::new(&o.program[0]).args(&o.program[1..]).stdin(Stdio::piped()).stdout(Stdio::piped()))
        .map_err(|e| format!("starting the agent `{}`: {e}", o.program[0]))?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, from_agent) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(l) if l.trim().is_empty() => {}
                Ok(l) => {
                    if tx.send(Some(l)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(None);
    });
    let wire = Wire { transcript: Arc::new(Mutex::new(std::io::stdout())), agent: Arc::new(Mutex::new(child.stdin.take())) };
    let mut s = Session { wire: wire.clone(), from_agent, next_id: 1, permissions: o.permissions, terminals: HashMap::new() };
    let outcome = converse(&mut s, o, &cwd.to_string_lossy());
    // Closing stdin asks the agent to exit; what it still writes is recorded until it closes
    // its stdout or the grace period ends, and one that has not exited by then is ended.
    wire.agent.lock().unwrap_or_else(|e| e.into_inner()).take();
    let deadline = std::time::Instant::now() + EXIT_GRACE;
    while let Ok(Some(line)) = s.from_agent.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
        wire.record_agent_line(line);
    }
    let status = wait_or_end(&mut child, &wire, deadline);
    for t in s.terminals.values() {
        let _ = t.child.lock().unwrap_or_else(|e| e.into_inner()).kill();
    }
    match outcome {
        Ok(true) => Ok(0),
        Ok(false) => Ok(1),
        Err(e) => {
            wire.note(e.clone());
            eprintln!("overeager-shim acp: {e}");
            Ok(status.and_then(|s| s.code()).filter(|&c| c != 0).unwrap_or(1))
        }
    }
}

/// The session: initialize, a new session (and its mode), then the prompt. `Ok(true)` when
/// the turn ended normally (`end_turn`).
fn converse(s: &mut Session, o: &Options, cwd: &str) -> Result<bool, String> {
    let client = json!({
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true},
        "clientInfo": {"name": "overeager", "version": env!("CARGO_PKG_VERSION")},
    });
    s.call("initialize", client)?.map_err(|e| format!("initialize failed: {e}"))?;
    let session = s.call("session/new", json!({"cwd": cwd, "mcpServers": []}))?.map_err(|e| format!("session/new failed: {e}"))?;
    let id = session.get("sessionId").and_then(Value::as_str).ok_or("session/new answered no sessionId")?.to_string();
    if let Some(mode) = &o.mode {
        s.call("session/set_mode", json!({"sessionId": id, "modeId": mode}))?.map_err(|e| format!("session/set_mode `{mode}` failed: {e}"))?;
    }
    let done = s.call("session/prompt", json!({"sessionId": id, "prompt": [{"type": "text", "text": o.prompt}]}))?.map_err(|e| format!("session/prompt failed: {e}"))?;
    Ok(done.get("stopReason").and_then(Value::as_str) == Some("end_turn"))
}

fn wait_or_end(child: &mut Child, wire: &Wire, deadline: std::time::Instant) -> Option<std::process::ExitStatus> {
    let wait = |child: &mut Child, d: Duration| {
        let end = std::time::Instant::now() + d;
        loop {
            match child.try_wait() {
                Ok(Some(st)) => return Some(st),
                Ok(None) if std::time::Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
                _ => return None,
            }
        }
    };
    if let Some(st) = wait(child, deadline.saturating_duration_since(std::time::Instant::now())) {
        return Some(st);
    }
    wire.note(format!("the agent did not exit within {} s of its stdin closing: SIGTERM", EXIT_GRACE.as_secs()));
    // SAFETY: plain signal delivery to our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    wait(child, Duration::from_secs(1)).or_else(|| {
        let _ = child.kill();
        child.wait().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_the_policy_and_the_agent_after_the_separator() {
        let o = parse(&args("--permissions ask --mode auto --prompt hi -- gemini --acp")).unwrap();
        assert_eq!((o.permissions, o.mode.as_deref(), o.prompt.as_str()), (Permissions::Ask, Some("auto"), "hi"));
        assert_eq!(o.program, ["gemini", "--acp"]);
        assert!(parse(&args("--permissions yolo --prompt x -- a")).unwrap_err().contains("allow-all"));
        assert!(parse(&args("--permissions ask -- a")).unwrap_err().contains("--prompt"));
        assert!(parse(&args("--permissions ask --prompt x")).unwrap_err().contains("after `--`"));
    }

    #[test]
    fn reads_answer_lines_and_missing_files_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        std::fs::write(&f, "1\n2\n3\n4\n").unwrap();
        let p = f.to_str().unwrap();
        assert_eq!(read_text(p, &json!({})).unwrap(), json!({"content": "1\n2\n3\n4\n"}));
        assert_eq!(read_text(p, &json!({"line": 2, "limit": 2})).unwrap(), json!({"content": "2\n3\n"}));
        assert_eq!(read_text(dir.path().join("none").to_str().unwrap(), &json!({})).unwrap(), json!({"content": ""}));
        assert_eq!(read_text(dir.path().to_str().unwrap(), &json!({})).unwrap_err().0, -32603, "a directory is an error");
    }
}
