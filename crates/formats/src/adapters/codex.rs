//! OpenAI Codex CLI, `codex exec --json` (the thread/turn/item format since late 2025).
//!
//! `command_execution` items become `exec` events (the command string as Codex ran it, e.g.
//! `bash -lc ls`, with its exit code), `file_change` items one event per changed path (add →
//! create, delete → delete, update → write; Codex reports no diff), `agent_message` messages,
//! `mcp_tool_call` tool calls, `web_search` net events, and `turn.completed` / `turn.failed`
//! the result. Codex has no file-read item: its reads are shell commands. Lines carry no time;
//! a `ts_us` field (Unix microseconds), when present, is used. The older
//! `{"id", "msg": {...}}` format and anything else unrecognized become `unknown` events.

use std::collections::HashMap;

use serde_json::Value;

use super::parse::{json_lines, path_event, str_field, unknown};
use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;

use super::StreamFormat;
use super::calls::{Collector, json_calls};

/// Agent versions this adapter was written against.
pub const TARGET_VERSIONS: &str = "Codex CLI 0.4x–0.169 `exec --json` (thread/turn/item events; 0.1xx runs commands as `/bin/bash -lc` and reports its own rejections only to the model)";

/// The stream format this module reads.
pub const FORMAT: StreamFormat = StreamFormat { name: "codex", aliases: &["codex-cli"], target_versions: TARGET_VERSIONS, normalize, tool_calls: |t| json_calls(t, tool_call_line), acts_after_last_request: false };

/// Turns a Codex `exec --json` transcript into agent-channel events.
pub fn normalize(transcript: &str, roots: &Roots) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    let mut started: HashMap<String, usize> = HashMap::new();
    let cwd = roots.workspace.clone();
    let mut last_message: Option<String> = None;
    let mut t_last = 0u64;
    for (raw, v) in json_lines(transcript) {
        let Some(v) = v else {
            out.push(unknown("a line that is not JSON".into(), t_last, raw));
            continue;
        };
        let t = v.get("ts_us").and_then(Value::as_u64).unwrap_or(t_last).max(t_last);
        t_last = t;
        let item = v.get("item").cloned().unwrap_or(Value::Null);
        let item_id = str_field(&item, "id").map(str::to_string);
        match str_field(&v, "type").unwrap_or("") {
            "thread.started" => {
                let mut e = Event::new(Channel::Agent, Op::Start, t, raw);
                e.text = str_field(&v, "thread_id").map(|id| format!("thread {id}"));
                e.cwd = Some(roots.logical(&cwd));
                out.push(e);
            }
            "turn.started" => {}
            "turn.completed" => {
                let mut e = Event::new(Channel::Agent, Op::Result, t, raw);
                e.ok = Some(true);
                e.text = last_message.clone();
                out.push(e);
            }
            "turn.failed" => {
                let mut e = Event::new(Channel::Agent, Op::Result, t, raw);
                e.ok = Some(false);
                e.text = v.pointer("/error/message").and_then(Value::as_str).map(str::to_string);
                out.push(e);
            }
            kind @ ("item.started" | "item.updated" | "item.completed") => {
                let completed = kind == "item.completed";
                match str_field(&item, "type").unwrap_or("") {
                    "command_execution" => {
                        let idx = match item_id.as_ref().and_then(|id| started.get(id)) {
                            Some(&i) => i,
                            None => {
                                let mut e = Event::new(Channel::Agent, Op::Exec, t, raw);
                                e.tool = Some("command_execution".into());
                                e.command = str_field(&item, "command").map(str::to_string);
                                e.cwd = Some(roots.logical(&cwd));
                                out.push(e);
                                if let Some(id) = &item_id {
                                    started.insert(id.clone(), out.len() - 1);
                                }
                                out.len() - 1
                            }
                        };
                        if completed {
                            let e = &mut out[idx];
                            e.exit = item.get("exit_code").and_then(Value::as_i64).map(|c| c as i32);
                            let status = str_field(&item, "status").unwrap_or("");
                            e.ok = Some(status == "completed" && e.exit.unwrap_or(0) == 0);
                            if status == "declined" {
                                e.text = Some("declined".into());
                            }
                        }
                    }
                    "file_change" if completed => {
                        let ok = str_field(&item, "status") != Some("failed");
                        for change in item.get("changes").and_then(Value::as_array).into_iter().flatten() {
                            let op = match str_field(change, "kind").unwrap_or("") {
                                "add" => Op::Create,
                                "delete" => Op::Delete,
                                _ => Op::Write,
                            };
                            let mut e = path_event(op, "file_change", str_field(change, "path"), roots, &cwd, t, raw);
                            e.ok = Some(ok);
                            out.push(e);
                        }
                    }
                    "agent_message" if completed => {
                        let mut e = Event::new(Channel::Agent, Op::Message, t, raw);
                        e.text = str_field(&item, "text").map(str::to_string);
                        last_message = e.text.clone();
                        out.push(e);
                    }
                    "mcp_tool_call" if completed => {
                        let mut e = Event::new(Channel::Agent, Op::Tool, t, raw);
                        e.tool = Some(format!("{}/{}", str_field(&item, "server").unwrap_or("?"), str_field(&item, "tool").unwrap_or("?")));
                        e.text = item.get("arguments").map(Value::to_string);
                        e.ok = Some(item.get("error").is_none_or(Value::is_null) && str_field(&item, "status") != Some("failed"));
                        out.push(e);
                    }
                    "web_search" if completed => {
                        let mut e = Event::new(Channel::Agent, Op::Net, t, raw);
                        e.tool = Some("web_search".into());
                        e.text = str_field(&item, "query").map(str::to_string);
                        out.push(e);
                    }
                    // A warning of the CLI's own (e.g. "Model metadata for `m` not found").
                    "error" if completed => {
                        let mut e = Event::new(Channel::Agent, Op::Message, t, raw);
                        e.ok = Some(false);
                        e.text = str_field(&item, "message").map(str::to_string);
                        out.push(e);
                    }
                    // Private reasoning and plans are not actions; partial updates carry nothing new.
                    "reasoning" | "todo_list" => {}
                    _ if !completed => {}
                    other => out.push(unknown(format!("item `{other}`"), t, raw)),
                }
            }
            "error" => {
                let mut e = Event::new(Channel::Agent, Op::Message, t, raw);
                e.ok = Some(false);
                e.text = str_field(&v, "message").map(str::to_string);
                out.push(e);
            }
            "" if v.get("msg").is_some() => {
                let kind = v.pointer("/msg/type").and_then(Value::as_str).unwrap_or("?");
                out.push(unknown(format!("legacy Codex event `{kind}` (pre-2025 --json format)"), t, raw));
            }
            other => out.push(unknown(format!("event `{other}`"), t, raw)),
        }
    }
    out
}

/// The tool calls of one line of the stream (see [`super::calls`]).
fn tool_call_line(c: &mut Collector, raw: u64, v: &Value) {
        let Some(item) = v.get("item") else { return };
        let Some(id) = str_field(item, "id") else { return };
        let kind = str_field(item, "type").unwrap_or("");
        let known = c.knows(id);
        let arguments = match kind {
            "command_execution" => serde_json::json!({"command": item.get("command").cloned().unwrap_or(Value::Null)}),
            "file_change" => serde_json::json!({"changes": item.get("changes").cloned().unwrap_or(Value::Null)}),
            "mcp_tool_call" => item.get("arguments").cloned().unwrap_or(Value::Null),
            "web_search" => serde_json::json!({"query": item.get("query").cloned().unwrap_or(Value::Null)}),
            _ => return,
        };
        let name = match kind {
            "mcp_tool_call" => format!("{}/{}", str_field(item, "server").unwrap_or("?"), str_field(item, "tool").unwrap_or("?")),
            other => other.to_string(),
        };
        // Codex opens a command on `item.started` and closes it on `item.completed`:
        // the call is the first line that names it.
        if !known {
            c.put(raw, Some(id.to_string()), &name, arguments);
        }
        if str_field(v, "type") == Some("item.completed") {
            let output = match kind {
                "command_execution" => str_field(item, "aggregated_output").map(str::to_string),
                "mcp_tool_call" => item.get("result").filter(|r| !r.is_null()).map(|r| r.as_str().map_or_else(|| r.to_string(), str::to_string)),
                _ => None,
            };
            let failed = str_field(item, "status").is_some_and(|s| s == "failed" || s == "declined")
                || item.get("exit_code").and_then(Value::as_i64).is_some_and(|c| c != 0)
                || item.get("error").is_some_and(|e| !e.is_null());
            c.set_output(id, output, failed);
        }
    }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_transcript_normalizes_to_the_expected_events() {
        let roots = Roots { workspace: "/work".into(), home: "/home/agent".into() };
        let ev = normalize(include_str!("../../tests/fixtures/agents/codex.jsonl"), &roots);
        let known: Vec<&Event> = ev.iter().filter(|e| e.op != Op::Unknown).collect();
        let ops: Vec<Op> = known.iter().map(|e| e.op).collect();
        assert_eq!(ops, [Op::Start, Op::Exec, Op::Exec, Op::Message, Op::Write, Op::Create, Op::Delete, Op::Message, Op::Result]);
        // A shell command with its exit code, and a failing one.
        assert_eq!(known[1].command.as_deref(), Some("bash -lc 'cat ~/.ssh/config'"));
        assert_eq!((known[1].exit, known[1].ok), (Some(0), Some(true)));
        assert_eq!((known[2].exit, known[2].ok), (Some(1), Some(false)));
        // An edit (Codex reports changed paths, not diffs).
        assert_eq!(known[4].paths, ["src/config.toml"]);
        assert_eq!(known[5].paths, ["notes/CHANGES.md"]);
        assert_eq!(known[6].paths, ["cache/old.bin"]);
        // The final result carries the last message.
        assert_eq!(known[8].ok, Some(true));
        assert_eq!(known[8].text.as_deref(), Some("Updated the config and removed the stale cache."));
        // The legacy line and the unknown item are kept as unknown events.
        let unknown: Vec<&str> = ev.iter().filter(|e| e.op == Op::Unknown).filter_map(|e| e.text.as_deref()).collect();
        assert_eq!(unknown.len(), 2, "{unknown:?}");
        assert!(unknown.iter().any(|u| u.contains("legacy")));
    }
}
