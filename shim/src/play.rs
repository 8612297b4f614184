//! The scripted agent: runs one play of a scenario and reports it as Claude Code's
//! `stream-json`, so the agent channel and its adapter are exercised like a real agent's.
//!
//! Shell steps go through `sh -c` (found on `PATH`, so the shell shim sees them); read, write,
//! edit and grep steps are in-process file I/O, as real agents' built-in tools are — the shim
//! sees none of those, the watcher sees all of them.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use overeager_formats::adapters::claude;
use overeager_core::scenario::{Play, Step};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{flag, now_us};

/// What the executor hands the scripted agent.
#[derive(Deserialize)]
struct PlayFile {
    /// Label used as the model name, e.g. `cautious`.
    label: String,
    play: Play,
}

/// Largest tool output echoed back in a tool_result.
const MAX_OUTPUT: usize = 16 * 1024;

fn clip(mut s: String) -> String {
    if s.len() > MAX_OUTPUT {
        let mut cut = MAX_OUTPUT;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("\n[output truncated]");
    }
    s
}

fn resolve(path: &str, cwd: &Path, home: &Path) -> PathBuf {
    if path == "~" {
        home.to_path_buf()
    } else if let Some(rest) = path.strip_prefix("~/") {
        home.join(rest)
    } else {
        cwd.join(path)
    }
}

/// Blocks until the watcher has written out every event queued so far.
fn sync_watcher() {
    let Some(sock) = std::env::var_os("OVEREAGER_WATCH_SYNC").filter(|s| !s.is_empty()) else { return };
    match UnixStream::connect(&sock) {
        Ok(mut s) => {
            let _ = s.write_all(b"s");
            let mut b = [0u8; 1];
            let _ = s.read(&mut b);
        }
        Err(e) => eprintln!("scripted agent: cannot reach the watcher at {}: {e}", Path::new(&sock).display()),
    }
}

struct Outcome {
    content: String,
    is_error: bool,
    extra: Value,
}

fn ok(content: String) -> Outcome {
    Outcome { content, is_error: false, extra: json!({}) }
}

fn fail(content: String) -> Outcome {
    Outcome { content, is_error: true, extra: json!({}) }
}

fn run_sh(command: &str, cwd: &Path) -> Outcome {
    match Command::new("sh").arg("-c").arg(command).current_dir(cwd).output() {
        Ok(out) => {
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            let code = out.status.code().unwrap_or(128);
            let both = if stderr.is_empty() { stdout.clone() } else { format!("{stdout}{stderr}") };
            let extra = json!({"stdout": clip(stdout), "stderr": clip(stderr), "interrupted": false});
            if out.status.success() {
                Outcome { content: clip(both), is_error: false, extra }
            } else {
                Outcome { content: clip(format!("Exit code {code}\n{both}")), is_error: true, extra }
            }
        }
        Err(e) => fail(format!("cannot run sh: {e}")),
    }
}

fn grep(pattern: &str, root: &Path, shown_root: &str) -> Outcome {
    let mut hits = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&p) else { continue };
        if meta.is_dir() {
            if p.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            let Ok(rd) = std::fs::read_dir(&p) else { continue };
            let mut children: Vec<PathBuf> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
            children.sort();
            // Reverse, so popping visits them in sorted order.
            stack.extend(children.into_iter().rev());
        } else if meta.is_file() {
            let Ok(bytes) = std::fs::read(&p) else { continue };
            let text = String::from_utf8_lossy(&bytes);
            for (i, line) in text.lines().enumerate() {
                if line.contains(pattern) {
                    let rel = p.strip_prefix(root).map(|r| r.to_string_lossy().into_owned()).unwrap_or_default();
                    let shown = if rel.is_empty() { shown_root.to_string() } else { format!("{shown_root}/{rel}") };
                    hits.push(format!("{shown}:{}:{line}", i + 1));
                }
            }
        }
    }
    if hits.is_empty() { ok("No matches found".into()) } else { ok(clip(hits.join("\n"))) }
}

fn run_step(step: &Step, cwd: &Path, home: &Path) -> Outcome {
    match step {
        Step::Sh { command } => run_sh(command, cwd),
        Step::Read { path } => {
            let p = resolve(path, cwd, home);
            match std::fs::read(&p) {
                Ok(b) => ok(clip(String::from_utf8_lossy(&b).into_owned())),
                Err(e) => fail(format!("cannot read {}: {e}", p.display())),
            }
        }
        Step::Write { path, content } => {
            let p = resolve(path, cwd, home);
            let res = p.parent().map(std::fs::create_dir_all).transpose().and_then(|_| std::fs::write(&p, content));
            match res {
                Ok(()) => ok(format!("File created successfully at: {}", p.display())),
                Err(e) => fail(format!("cannot write {}: {e}", p.display())),
            }
        }
        Step::Edit { path, old, new } => {
            let p = resolve(path, cwd, home);
            match std::fs::read_to_string(&p) {
                Ok(text) if text.contains(old.as_str()) => match std::fs::write(&p, text.replacen(old.as_str(), new, 1)) {
                    Ok(()) => ok(format!("The file {} has been updated.", p.display())),
                    Err(e) => fail(format!("cannot write {}: {e}", p.display())),
                },
                Ok(_) => fail(format!("String to replace not found in file.\nString: {old}")),
                Err(e) => fail(format!("cannot read {}: {e}", p.display())),
            }
        }
        Step::Grep { pattern, path } => grep(pattern, &resolve(path, cwd, home), path),
    }
}

/// `overeager-shim play --play <play.json>`
pub fn main(args: &[String]) -> i32 {
    let Some(play_path) = flag(args, "--play") else {
        eprintln!("scripted agent: --play <play.json> is required");
        return 2;
    };
    let pf: PlayFile = match std::fs::read(play_path).map_err(|e| e.to_string()).and_then(|b| {
        serde_json::from_slice(&b).map_err(|e| e.to_string())
    }) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("scripted agent: cannot load {play_path}: {e}");
            return 2;
        }
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| cwd.clone());
    let session = format!("scripted-{}", pf.label);
    let model = format!("scripted:{}", pf.label);
    let started = now_us();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut say = |v: Value| {
        let _ = writeln!(out, "{v}");
        let _ = out.flush();
    };
    let tools = ["Bash", "Read", "Write", "Edit", "Grep"];
    say(claude::init_line(&session, &cwd.to_string_lossy(), &tools, &model, env!("CARGO_PKG_VERSION"), now_us()));
    let mut failed = 0;
    for (i, step) in pf.play.steps.iter().enumerate() {
        let (name, input) = describe(step, &cwd, &home);
        let tool_use_id = format!("toolu_{:02}", i + 1);
        say(claude::tool_use_line(&session, &format!("msg_{:02}", i + 1), &tool_use_id, name, input, now_us()));
        let outcome = run_step(step, &cwd, &home);
        sync_watcher();
        if outcome.is_error {
            failed += 1;
        }
        say(claude::tool_result_line(&session, &tool_use_id, &outcome.content, outcome.is_error, outcome.extra, now_us()));
    }
    let n = pf.play.steps.len();
    let summary = format!("Ran {n} step(s) of the {} play; {failed} failed.", pf.label);
    say(claude::text_line(&session, "msg_final", &summary, now_us()));
    let elapsed_ms = (now_us() - started) / 1000;
    say(claude::result_line(&session, true, &summary, elapsed_ms, n as u64 + 1, now_us()));
    0
}

/// The tool name and input a step is announced with, as Claude Code's tools take them.
fn describe(step: &Step, cwd: &Path, home: &Path) -> (&'static str, Value) {
    match step {
        Step::Sh { command } => ("Bash", json!({"command": command, "description": "scripted step"})),
        Step::Read { path } => ("Read", json!({"file_path": resolve(path, cwd, home)})),
        Step::Write { path, content } => ("Write", json!({"file_path": resolve(path, cwd, home), "content": content})),
        Step::Edit { path, old, new } => {
            ("Edit", json!({"file_path": resolve(path, cwd, home), "old_string": old, "new_string": new}))
        }
        Step::Grep { pattern, path } => ("Grep", json!({"pattern": pattern, "path": resolve(path, cwd, home)})),
    }
}
