//! Cline CLI's `--json` stream: one JSON object per line with an ISO `ts` and a `type`:
//! `hook_event` (agent start and end, tool call and result), `agent_event` (`event.type`:
//! iteration start and end, usage, `content_start` / `content_update` / `content_end` of a
//! tool call or of text, `done`, `error`) and a final `run_result`.
//!
//! A tool call is opened by its `content_start` (name, id, input) and closed by its
//! `content_end` (`output`, or `error`); its events take the start's time and line. Tools are
//! read by name and arguments: `run_commands` → one exec per command, each with its own
//! success; `read_files` → a read per file; `editor` → a write; `search_codebase` → a read of
//! the workspace; `fetch_web_content` → net; others by their arguments' shape. A call refused
//! for want of approval ("requires approval in a TTY session") is `denied`.

use std::collections::HashMap;

use serde_json::Value;

use super::parse::{deny, iso_us, json_lines, path_event, str_field, tool_call_by_shape, unknown};
use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;

use super::StreamFormat;
use super::calls::{Collector, json_calls};

/// Agent versions this adapter was written against.
pub const TARGET_VERSIONS: &str = "Cline CLI 3.0 `--json`";

/// The stream format this module reads.
pub const FORMAT: StreamFormat = StreamFormat { name: "cline", aliases: &[], target_versions: TARGET_VERSIONS, normalize, tool_calls: |t| json_calls(t, tool_call_line), acts_after_last_request: false };

/// Words of a tool error saying the call was not approved.
const REFUSED: &[&str] = &["requires approval", "was denied", "rejected"];

/// The events of one finished tool call.
fn call_events(name: &str, input: &Value, end: &Value, roots: &Roots, t: u64, raw: u64) -> Vec<Event> {
    let cwd = roots.workspace.as_str();
    // One output per command or file, or one for the call.
    let outputs: Vec<&Value> = match end.get("output") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(o) if o.is_object() => vec![o],
        _ => Vec::new(),
    };
    let ok_at = |i: usize| outputs.get(i).and_then(|o| o.get("success")).and_then(Value::as_bool);
    let strings = |key: &str| -> Vec<String> { input.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect() };
    let mut events: Vec<Event> = match name {
        "run_commands" => strings("commands")
            .into_iter()
            .enumerate()
            .map(|(i, command)| {
                let mut e = Event::new(Channel::Agent, Op::Exec, t, raw);
                e.command = Some(command);
                e.cwd = Some(roots.logical(cwd));
                e.ok = ok_at(i);
                e
            })
            .collect(),
        "read_files" => input
            .get("files")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, f)| {
                let path = f.as_str().or_else(|| str_field(f, "path"));
                let mut e = path_event(Op::Read, name, path, roots, cwd, t, raw);
                e.ok = ok_at(i);
                e
            })
            .collect(),
        "editor" => {
            let mut e = path_event(Op::Write, name, str_field(input, "path"), roots, cwd, t, raw);
            e.ok = ok_at(0);
            vec![e]
        }
        "search_codebase" => {
            let mut e = path_event(Op::Read, name, Some("."), roots, cwd, t, raw);
            e.dir = true;
            e.text = Some(strings("queries").join(" | "));
            vec![e]
        }
        "fetch_web_content" => {
            let mut e = Event::new(Channel::Agent, Op::Net, t, raw);
            e.text = input.get("requests").map(Value::to_string);
            vec![e]
        }
        other => vec![tool_call_by_shape(other, input, roots, cwd, t, raw).unwrap_or_else(|| {
            let mut e = Event::new(Channel::Agent, Op::Tool, t, raw);
            e.text = Some(input.to_string());
            e
        })],
    };
    let error = end.get("error").filter(|e| !e.is_null()).map(|e| e.as_str().map_or_else(|| str_field(e, "message").map_or_else(|| e.to_string(), str::to_string), str::to_string));
    for e in &mut events {
        e.tool = Some(name.to_string());
        match &error {
            Some(err) if REFUSED.iter().any(|r| err.to_lowercase().contains(r)) => deny(e, err),
            Some(err) => {
                e.ok = Some(false);
                e.text.get_or_insert_with(|| err.chars().take(500).collect());
            }
            None => {}
        }
    }
    events
}

/// Turns a Cline `--json` stream into agent-channel events.
pub fn normalize(transcript: &str, roots: &Roots) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    // Open tool calls by id: (name, input, time, line).
    let mut open: HashMap<String, (String, Value, u64, u64)> = HashMap::new();
    let mut t_last = 0u64;
    for (raw, v) in json_lines(transcript) {
        let Some(v) = v.filter(Value::is_object) else { continue };
        let t = str_field(&v, "ts").and_then(iso_us).unwrap_or(t_last).max(t_last);
        t_last = t;
        if out.is_empty() {
            let mut e = Event::new(Channel::Agent, Op::Start, t, raw);
            e.cwd = Some(roots.logical(&roots.workspace));
            e.text = str_field(&v, "taskId").map(str::to_string);
            out.push(e);
        }
        match str_field(&v, "type").unwrap_or("") {
            "hook_event" | "error" => {}
            "agent_event" => {
                let ev = v.get("event").cloned().unwrap_or(Value::Null);
                let content = str_field(&ev, "contentType");
                match (str_field(&ev, "type").unwrap_or(""), content) {
                    ("content_start", Some("tool")) => {
                        let id = str_field(&ev, "toolCallId").unwrap_or("").to_string();
                        open.insert(id, (str_field(&ev, "toolName").unwrap_or("?").to_string(), ev.get("input").cloned().unwrap_or(Value::Null), t, raw));
                    }
                    ("content_end", Some("tool")) => {
                        let id = str_field(&ev, "toolCallId").unwrap_or("");
                        let (name, input, t0, raw0) = open.remove(id).unwrap_or_else(|| (str_field(&ev, "toolName").unwrap_or("?").to_string(), Value::Null, t, raw));
                        out.extend(call_events(&name, &input, &ev, roots, t0, raw0));
                    }
                    ("content_end", Some("text")) => {
                        if let Some(text) = str_field(&ev, "text").filter(|s| !s.is_empty()) {
                            let mut e = Event::new(Channel::Agent, Op::Message, t, raw);
                            e.text = Some(text.to_string());
                            out.push(e);
                        }
                    }
                    ("content_start" | "content_update", _) | ("iteration_start" | "iteration_end" | "usage" | "done" | "error", _) => {}
                    (other, _) => out.push(unknown(format!("agent_event {other}"), t, raw)),
                }
            }
            // The run was stopped (Cline aborts after repeated failed calls); a result that
            // came first stands.
            "run_aborted" => {
                if !out.iter().any(|e| e.op == Op::Result) {
                    let mut e = Event::new(Channel::Agent, Op::Result, t, raw);
                    e.ok = Some(false);
                    e.text = str_field(&v, "message").or(str_field(&v, "reason")).map(str::to_string);
                    out.push(e);
                }
            }
            "run_result" => {
                let mut e = Event::new(Channel::Agent, Op::Result, t, raw);
                e.ok = Some(str_field(&v, "finishReason") == Some("completed"));
                e.text = str_field(&v, "text").map(str::to_string);
                out.push(e);
            }
            other => out.push(unknown(other.to_string(), t, raw)),
        }
    }
    // Calls that never ended (the run was cut short) are kept, with no outcome.
    let mut left: Vec<(String, (String, Value, u64, u64))> = open.into_iter().collect();
    left.sort_by_key(|(_, (_, _, t, raw))| (*t, *raw));
    for (_, (name, input, t, raw)) in left {
        out.extend(call_events(&name, &input, &Value::Null, roots, t, raw));
    }
    out
}

/// The tool calls of one line of the stream (see [`super::calls`]).
fn tool_call_line(c: &mut Collector, raw: u64, v: &Value) {
        let ev = v.get("event").cloned().unwrap_or(Value::Null);
        if str_field(&ev, "contentType") != Some("tool") {
            return;
        }
        let id = str_field(&ev, "toolCallId").map(str::to_string);
        match str_field(&ev, "type") {
            Some("content_start") => c.put(raw, id, str_field(&ev, "toolName").unwrap_or("?"), ev.get("input").cloned().unwrap_or(Value::Null)),
            Some("content_end") => {
                if let Some(id) = id {
                    let error = ev.get("error").filter(|e| !e.is_null());
                    let output = ev.get("output").filter(|o| !o.is_null()).map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_string));
                    let failed = error.is_some() || ev.get("output").and_then(Value::as_array).is_some_and(|a| a.iter().any(|o| o.get("success").and_then(Value::as_bool) == Some(false)));
                    c.set_output(&id, output.or_else(|| error.map(Value::to_string)), failed);
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
        let roots = Roots { workspace: "/tmp/overeager-run-x/work".into(), home: "/tmp/overeager-run-x/home".into() };
        let ev = normalize(include_str!("../../tests/fixtures/agents/cline.jsonl"), &roots);
        let ops: Vec<Op> = ev.iter().map(|e| e.op).collect();
        assert_eq!(ops, [Op::Start, Op::Exec, Op::Read, Op::Write, Op::Denied, Op::Message, Op::Result], "{ev:#?}");
        assert_eq!((ev[1].command.as_deref(), ev[1].ok, ev[1].tool.as_deref()), (Some("ls alembic/versions"), Some(true), Some("run_commands")));
        assert_eq!(ev[2].paths, ["alembic/versions/3c9e1f2a7b44_add_invoice_due_date.py"]);
        assert_eq!((ev[3].paths.as_slice(), ev[3].ok), (&["alembic/versions/3c9e1f2a7b44_add_invoice_due_date.py".to_string()][..], Some(true)));
        assert_eq!(ev[4].command.as_deref(), Some("rm -f instance/invoicer.db"));
        assert!(ev[4].text.as_deref().unwrap().contains("requires approval"), "{:?}", ev[4]);
        assert_eq!((ev[6].ok, ev[6].text.as_deref()), (Some(true), Some("Done.")));
        assert_eq!(ev[1].t_us, 1_795_884_063_566_000, "the call takes its start's time");
    }
}
