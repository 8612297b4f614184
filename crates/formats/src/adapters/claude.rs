//! Claude Code's `stream-json` event stream: the lines the scripted agent writes, and the
//! adapter that turns such a stream into normalized events.
//!
//! Written against Claude Code 2.x (`claude -p --output-format stream-json --verbose`):
//! `system/init`, `assistant` (text, thinking, tool_use), `user` (tool_result) and `result`.
//! Real Claude Code lines carry no timestamp; the scripted agent adds `ts_us` (Unix
//! microseconds) to each line, and the adapter uses it when present. Unknown event types
//! become `unknown` events rather than errors.

use std::collections::HashMap;

use serde_json::{Value, json};

use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;

use super::StreamFormat;
use super::calls::{Collector, json_calls};

/// Agent versions this adapter was written against.
pub const TARGET_VERSIONS: &str = "Claude Code 2.0–2.1 stream-json (2.1 adds `system/permission_denied` events)";

/// The stream format this module reads.
pub const FORMAT: StreamFormat = StreamFormat { name: "claude-code", aliases: &["claude_code", "scripted"], target_versions: TARGET_VERSIONS, normalize, tool_calls: |t| json_calls(t, tool_call_line), acts_after_last_request: false };

/// The `system/init` line.
pub fn init_line(session: &str, cwd: &str, tools: &[&str], model: &str, version: &str, ts_us: u64) -> Value {
    json!({
        "type": "system", "subtype": "init", "session_id": session, "cwd": cwd,
        "tools": tools, "model": model, "permissionMode": "bypassPermissions",
        "claude_code_version": version, "ts_us": ts_us,
    })
}

/// An `assistant` line carrying one tool call.
pub fn tool_use_line(session: &str, msg_id: &str, tool_use_id: &str, name: &str, input: Value, ts_us: u64) -> Value {
    json!({
        "type": "assistant",
        "message": {"id": msg_id, "type": "message", "role": "assistant",
                    "content": [{"type": "tool_use", "id": tool_use_id, "name": name, "input": input}]},
        "parent_tool_use_id": null, "session_id": session, "ts_us": ts_us,
    })
}

/// An `assistant` line carrying text.
pub fn text_line(session: &str, msg_id: &str, text: &str, ts_us: u64) -> Value {
    json!({
        "type": "assistant",
        "message": {"id": msg_id, "type": "message", "role": "assistant",
                    "content": [{"type": "text", "text": text}]},
        "parent_tool_use_id": null, "session_id": session, "ts_us": ts_us,
    })
}

/// A `user` line carrying a tool result. `extra` is Claude Code's `tool_use_result`.
pub fn tool_result_line(session: &str, tool_use_id: &str, content: &str, is_error: bool, extra: Value, ts_us: u64) -> Value {
    json!({
        "type": "user",
        "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use_id,
                                                  "content": content, "is_error": is_error}]},
        "parent_tool_use_id": null, "session_id": session, "tool_use_result": extra, "ts_us": ts_us,
    })
}

/// The final `result` line.
pub fn result_line(session: &str, ok: bool, result: &str, duration_ms: u64, num_turns: u64, ts_us: u64) -> Value {
    json!({
        "type": "result", "subtype": if ok { "success" } else { "error_during_execution" },
        "is_error": !ok, "duration_ms": duration_ms, "num_turns": num_turns, "result": result,
        "session_id": session, "total_cost_usd": 0.0, "permission_denials": [], "ts_us": ts_us,
    })
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Text of a tool_result's `content` (a string, or a list of text blocks).
pub(crate) fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Parses the `Exit code N` prefix Claude Code puts on a failed Bash result.
fn exit_code_prefix(text: &str) -> Option<i32> {
    let rest = text.trim_start().strip_prefix("Exit code")?;
    rest.trim_start().split(|c: char| !c.is_ascii_digit() && c != '-').next()?.parse().ok()
}

/// Maps one tool call to an event.
fn tool_event(name: &str, input: &Value, roots: &Roots, cwd: &str, t: u64, raw: u64) -> Event {
    let mut e = Event::new(Channel::Agent, Op::Tool, t, raw);
    e.tool = Some(name.to_string());
    let path_of = |key: &str| str_field(input, key).map(|p| roots.logical_from(p, cwd));
    match name {
        "Bash" => {
            e.op = Op::Exec;
            e.command = str_field(input, "command").map(str::to_string);
        }
        "Read" => {
            e.op = Op::Read;
            e.paths.extend(path_of("file_path"));
        }
        "Write" => {
            e.op = Op::Write;
            e.paths.extend(path_of("file_path"));
        }
        "Edit" | "MultiEdit" => {
            e.op = Op::Write;
            e.paths.extend(path_of("file_path"));
        }
        "NotebookEdit" => {
            e.op = Op::Write;
            e.paths.extend(path_of("notebook_path"));
        }
        "Grep" | "Glob" | "LS" => {
            e.op = Op::Read;
            e.paths.push(path_of("path").unwrap_or_else(|| roots.logical(cwd)));
            e.dir = name != "Grep" || e.paths[0] == ".";
            e.text = str_field(input, "pattern").map(str::to_string);
        }
        "WebFetch" | "WebSearch" => {
            e.op = Op::Net;
            e.text = str_field(input, "url").or(str_field(input, "query")).map(str::to_string);
        }
        // Another CLI writing this stream format (Qwen Code) with tools of its own.
        _ => match crate::adapters::parse::tool_call_by_shape(name, input, roots, cwd, t, raw) {
            Some(by_shape) => return by_shape,
            None => e.text = Some(input.to_string()),
        },
    }
    e
}

/// Turns a Claude Code stream-json transcript into agent-channel events.
pub fn normalize(transcript: &str, roots: &Roots) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    let mut pending: HashMap<String, usize> = HashMap::new();
    let mut cwd = roots.workspace.clone();
    let mut t_last = 0u64;
    for (line_no, line) in transcript.lines().enumerate() {
        let raw = line_no as u64;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(_) => {
                let mut e = Event::new(Channel::Agent, Op::Unknown, t_last, raw);
                e.text = Some("a line that is not JSON".into());
                out.push(e);
                continue;
            }
        };
        let t = v.get("ts_us").and_then(Value::as_u64).unwrap_or(t_last).max(t_last);
        t_last = t;
        match str_field(&v, "type").unwrap_or("") {
            "system" if str_field(&v, "subtype") == Some("init") => {
                if let Some(c) = str_field(&v, "cwd") {
                    cwd = c.to_string();
                }
                let mut e = Event::new(Channel::Agent, Op::Start, t, raw);
                e.text = str_field(&v, "model").map(str::to_string);
                e.cwd = Some(roots.logical(&cwd));
                out.push(e);
            }
            "assistant" => {
                let content = v.pointer("/message/content").and_then(Value::as_array).cloned().unwrap_or_default();
                for item in &content {
                    match str_field(item, "type").unwrap_or("") {
                        "text" => {
                            let mut e = Event::new(Channel::Agent, Op::Message, t, raw);
                            e.text = str_field(item, "text").map(str::to_string);
                            out.push(e);
                        }
                        "tool_use" => {
                            let name = str_field(item, "name").unwrap_or("?");
                            let input = item.get("input").cloned().unwrap_or(Value::Null);
                            let e = tool_event(name, &input, roots, &cwd, t, raw);
                            if let Some(id) = str_field(item, "id") {
                                pending.insert(id.to_string(), out.len());
                            }
                            out.push(e);
                        }
                        // Thinking is private reasoning, not an action.
                        "thinking" | "redacted_thinking" => {}
                        other => {
                            let mut e = Event::new(Channel::Agent, Op::Unknown, t, raw);
                            e.text = Some(format!("assistant content `{other}`"));
                            out.push(e);
                        }
                    }
                }
            }
            "user" => {
                let content = v.pointer("/message/content").and_then(Value::as_array).cloned().unwrap_or_default();
                for item in content.iter().filter(|i| str_field(i, "type") == Some("tool_result")) {
                    let Some(&idx) = str_field(item, "tool_use_id").and_then(|id| pending.get(id)) else {
                        continue;
                    };
                    let is_error = item.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                    let text = result_text(item.get("content").unwrap_or(&Value::Null));
                    let e = &mut out[idx];
                    e.ok = Some(!is_error);
                    if is_error && is_permission_refusal(&text) {
                        crate::adapters::parse::deny(e, &text);
                    } else if e.op == Op::Exec {
                        e.exit = Some(if is_error { exit_code_prefix(&text).unwrap_or(1) } else { 0 });
                    }
                }
            }
            // 2.1.x reports each refusal as it happens; the tool_result or the result line
            // that carries the same tool_use_id marks the call.
            "system" if str_field(&v, "subtype") == Some("permission_denied") => {
                if let Some(&idx) = str_field(&v, "tool_use_id").and_then(|id| pending.get(id)) {
                    let reason = str_field(&v, "message").or_else(|| str_field(&v, "reason")).unwrap_or("permission denied").to_string();
                    crate::adapters::parse::deny(&mut out[idx], &reason);
                }
            }
            "result" => {
                // The authoritative list of refused calls.
                for d in v.get("permission_denials").and_then(Value::as_array).into_iter().flatten() {
                    if let Some(&idx) = str_field(d, "tool_use_id").and_then(|id| pending.get(id))
                        && out[idx].op != Op::Denied
                    {
                        crate::adapters::parse::deny(&mut out[idx], "permission denied");
                    }
                }
                let mut e = Event::new(Channel::Agent, Op::Result, t, raw);
                e.ok = Some(!v.get("is_error").and_then(Value::as_bool).unwrap_or(false));
                e.text = str_field(&v, "result").map(str::to_string);
                out.push(e);
            }
            // Partial messages and state pings (`--include-partial-messages`, Qwen Code's
            // goal state): what they carry arrives whole in the `assistant` line after them.
            "stream_event" => {}
            other => {
                let mut e = Event::new(Channel::Agent, Op::Unknown, t, raw);
                let sub = str_field(&v, "subtype").map(|s| format!("/{s}")).unwrap_or_default();
                e.text = Some(format!("{other}{sub}"));
                out.push(e);
            }
        }
    }
    out
}

/// Whether a failed tool result is Claude Code's permission gate saying no (the call did not
/// run), rather than the tool failing.
fn is_permission_refusal(text: &str) -> bool {
    const SIGNS: &[&str] = &["requires approval", "requested permissions", "needs approval", "permission to use", "haven't granted", "have not granted", "was blocked"];
    let lower = text.to_ascii_lowercase();
    SIGNS.iter().any(|s| lower.contains(s))
}

/// The tool calls of one line of the stream (see [`super::calls`]).
fn tool_call_line(c: &mut Collector, raw: u64, v: &Value) {
    match str_field(v, "type").unwrap_or("") {
        "assistant" => {
            for item in v.pointer("/message/content").and_then(Value::as_array).into_iter().flatten() {
                if str_field(item, "type") == Some("tool_use") {
                    c.put(raw, str_field(item, "id").map(str::to_string), str_field(item, "name").unwrap_or("?"), item.get("input").cloned().unwrap_or(Value::Null));
                }
            }
        }
        "user" => {
            for item in v.pointer("/message/content").and_then(Value::as_array).into_iter().flatten() {
                if str_field(item, "type") == Some("tool_result")
                    && let Some(id) = str_field(item, "tool_use_id")
                {
                    let error = item.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                    c.set_output(id, Some(result_text(item.get("content").unwrap_or(&Value::Null))), error);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_transcript_normalizes_to_the_expected_events() {
        let roots = Roots { workspace: "/work".into(), home: "/home/agent".into() };
        let ev = normalize(include_str!("../../tests/fixtures/agents/claude-code.jsonl"), &roots);
        let ops: Vec<Op> = ev.iter().map(|e| e.op).collect();
        // The partial-message `stream_event` adds nothing: its content arrives whole after it.
        assert_eq!(ops, [Op::Start, Op::Message, Op::Exec, Op::Read, Op::Write, Op::Exec, Op::Result]);
        assert_eq!(ev[2].command.as_deref(), Some("ls -la && cat ~/.bash_history"));
        assert_eq!((ev[2].exit, ev[2].ok), (Some(0), Some(true)));
        assert_eq!((ev[5].exit, ev[5].ok), (Some(2), Some(false)));
        assert_eq!(ev[3].paths, ["config/app.toml"]);
        assert_eq!((ev[4].tool.as_deref(), ev[4].paths.as_slice()), (Some("Edit"), ["config/app.toml".to_string()].as_slice()));
        assert_eq!(ev[6].text.as_deref(), Some("Changed the port to 9090; the tests still fail on make."));
    }

    #[test]
    fn adapter_maps_tools_and_results() {
        let roots = Roots { workspace: "/w".into(), home: "/h".into() };
        let lines = [
            init_line("s", "/w", &["Bash", "Read"], "m", "1", 1),
            tool_use_line("s", "m1", "t1", "Bash", json!({"command": "rm x"}), 2),
            tool_result_line("s", "t1", "Exit code 2\nrm: x: no such file", true, json!({}), 3),
            tool_use_line("s", "m2", "t2", "Read", json!({"file_path": "/h/.ssh/id_rsa"}), 4),
            tool_result_line("s", "t2", "...", false, json!({}), 5),
            tool_use_line("s", "m3", "t3", "Edit", json!({"file_path": "cfg/a.toml", "old_string": "a", "new_string": "b"}), 6),
            json!({"type": "stream_event", "ts_us": 7}),
            json!({"type": "rate_limit_event", "ts_us": 7}),
            result_line("s", true, "done", 10, 3, 8),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\nnot json\n")).collect();
        let ev = normalize(&text, &roots);
        let known: Vec<&Event> = ev.iter().filter(|e| e.op != Op::Unknown).collect();
        assert_eq!(known.len(), 5);
        assert_eq!(known[1].op, Op::Exec);
        assert_eq!(known[1].exit, Some(2));
        assert_eq!(known[1].command.as_deref(), Some("rm x"));
        assert_eq!(known[2].op, Op::Read);
        assert_eq!(known[2].paths, vec!["~/.ssh/id_rsa"]);
        assert_eq!(known[3].op, Op::Write);
        assert_eq!(known[3].paths, vec!["cfg/a.toml"]);
        assert_eq!(known[4].op, Op::Result);
        let unknown: Vec<Option<&str>> = ev.iter().filter(|e| e.op == Op::Unknown && e.text.as_deref() != Some("a line that is not JSON")).map(|e| e.text.as_deref()).collect();
        assert_eq!(unknown, [Some("rate_limit_event")], "a type it does not know is kept as unknown; a partial message is not");
    }
}
