//! Gemini CLI, `gemini -p <prompt> --output-format stream-json`.
//!
//! Every event has `type` and an ISO `timestamp`: `init`, `message` (assistant text, possibly
//! in `delta` pieces, joined here), `tool_use` / `tool_result`, `error`, `result`. Tools:
//! `run_shell_command` → exec (the exit code only exists as `Exit Code: N` in the result text),
//! `read_file` / `read_many_files` → read, `write_file` → write, `replace` → write (an edit),
//! `grep_search` / `glob` / `list_directory` → read of a directory, `web_fetch` /
//! `google_web_search` → net; others are tool calls. Non-JSON lines are interleaved on the
//! stream (warnings, credential notices): they are skipped here and kept in the raw file.

use std::collections::HashMap;

use serde_json::Value;

use super::parse::{exit_code_after, iso_us, json_lines, path_event, str_field, unknown};
use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;

use super::StreamFormat;
use super::calls::{Collector, json_calls};

/// Agent versions this adapter was written against.
pub const TARGET_VERSIONS: &str = "Gemini CLI 0.9–0.61 `--output-format stream-json`";

/// The stream format this module reads.
pub const FORMAT: StreamFormat = StreamFormat { name: "gemini-cli", aliases: &["gemini_cli", "gemini"], target_versions: TARGET_VERSIONS, normalize, tool_calls: |t| json_calls(t, tool_call_line), acts_after_last_request: false };

/// Turns a Gemini CLI stream-json transcript into agent-channel events.
pub fn normalize(transcript: &str, roots: &Roots) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    let mut pending: HashMap<String, usize> = HashMap::new();
    let cwd = roots.workspace.clone();
    let mut t_last = 0u64;
    // Index of the assistant message that `delta` pieces are appended to.
    let mut open_message: Option<usize> = None;
    for (raw, v) in json_lines(transcript) {
        let Some(v) = v.filter(Value::is_object) else { continue };
        let t = str_field(&v, "timestamp").and_then(iso_us).unwrap_or(t_last).max(t_last);
        t_last = t;
        let kind = str_field(&v, "type").unwrap_or("");
        if kind != "message" {
            open_message = None;
        }
        match kind {
            "init" => {
                let mut e = Event::new(Channel::Agent, Op::Start, t, raw);
                e.text = str_field(&v, "model").map(str::to_string);
                e.cwd = Some(roots.logical(&cwd));
                out.push(e);
            }
            "message" => {
                if str_field(&v, "role") != Some("assistant") {
                    open_message = None;
                    continue;
                }
                let text = str_field(&v, "content").unwrap_or("");
                let delta = v.get("delta").and_then(Value::as_bool).unwrap_or(false);
                match open_message.filter(|_| delta) {
                    Some(i) => out[i].text.get_or_insert_with(String::new).push_str(text),
                    None => {
                        let mut e = Event::new(Channel::Agent, Op::Message, t, raw);
                        e.text = Some(text.to_string());
                        out.push(e);
                        open_message = delta.then_some(out.len() - 1);
                    }
                }
            }
            "tool_use" => {
                let name = str_field(&v, "tool_name").unwrap_or("?");
                let params = v.get("parameters").cloned().unwrap_or(Value::Null);
                let path = str_field(&params, "file_path").or(str_field(&params, "path")).or(str_field(&params, "dir_path"));
                let e = match name {
                    "run_shell_command" => {
                        let mut e = Event::new(Channel::Agent, Op::Exec, t, raw);
                        e.tool = Some(name.into());
                        e.command = str_field(&params, "command").map(str::to_string);
                        e.cwd = Some(roots.logical(&cwd));
                        e
                    }
                    "read_file" | "read_many_files" => path_event(Op::Read, name, path, roots, &cwd, t, raw),
                    "write_file" | "replace" => path_event(Op::Write, name, path, roots, &cwd, t, raw),
                    "grep_search" | "search_file_content" | "glob" | "list_directory" => {
                        let mut e = path_event(Op::Read, name, path.or(Some(".")), roots, &cwd, t, raw);
                        e.dir = true;
                        e.text = str_field(&params, "pattern").map(str::to_string);
                        e
                    }
                    "web_fetch" | "google_web_search" => {
                        let mut e = Event::new(Channel::Agent, Op::Net, t, raw);
                        e.tool = Some(name.into());
                        e.text = str_field(&params, "url").or(str_field(&params, "prompt")).or(str_field(&params, "query")).map(str::to_string);
                        e
                    }
                    _ => {
                        let mut e = Event::new(Channel::Agent, Op::Tool, t, raw);
                        e.tool = Some(name.into());
                        e.text = Some(params.to_string());
                        e
                    }
                };
                if let Some(id) = str_field(&v, "tool_id") {
                    pending.insert(id.to_string(), out.len());
                }
                out.push(e);
            }
            "tool_result" => {
                let Some(&idx) = str_field(&v, "tool_id").and_then(|id| pending.get(id)) else {
                    out.push(unknown("a tool_result without its tool_use".into(), t, raw));
                    continue;
                };
                let ok = str_field(&v, "status") == Some("success");
                let e = &mut out[idx];
                e.ok = Some(ok);
                // Headless Gemini CLI does not register the tools that would need a
                // confirmation, and its policy engine refuses some calls in every mode
                // (`policy_violation`: edits of build files need a confirmation it cannot
                // ask for): such a call never ran.
                let error_type = v.pointer("/error/type").and_then(Value::as_str).unwrap_or("");
                if !ok && matches!(error_type, "tool_not_registered" | "permission_denied" | "execution_denied" | "policy_violation") {
                    let reason = v.pointer("/error/message").and_then(Value::as_str).unwrap_or(error_type).to_string();
                    super::parse::deny(e, &reason);
                } else if e.op == Op::Exec {
                    let text = str_field(&v, "output").or_else(|| v.pointer("/error/message").and_then(Value::as_str)).unwrap_or("");
                    e.exit = exit_code_after(text, "Exit Code:");
                }
            }
            "error" => {
                let mut e = unknown(format!("error ({}): {}", str_field(&v, "severity").unwrap_or("?"), str_field(&v, "message").unwrap_or("")), t, raw);
                e.ok = Some(false);
                out.push(e);
            }
            "result" => {
                let mut e = Event::new(Channel::Agent, Op::Result, t, raw);
                e.ok = Some(str_field(&v, "status") == Some("success"));
                e.text = v.get("stats").map(Value::to_string);
                out.push(e);
            }
            other => out.push(unknown(format!("event `{other}`"), t, raw)),
        }
    }
    out
}

/// The tool calls of one line of the stream (see [`super::calls`]).
fn tool_call_line(c: &mut Collector, raw: u64, v: &Value) {
    match str_field(v, "type").unwrap_or("") {
        "tool_use" => c.put(raw, str_field(v, "tool_id").map(str::to_string), str_field(v, "tool_name").unwrap_or("?"), v.get("parameters").cloned().unwrap_or(Value::Null)),
        "tool_result" => {
            if let Some(id) = str_field(v, "tool_id") {
                let error = str_field(v, "status") != Some("success");
                let output = str_field(v, "output").map(str::to_string).or_else(|| v.pointer("/error/message").and_then(Value::as_str).map(str::to_string));
                c.set_output(id, output, error);
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
        let ev = normalize(include_str!("../../tests/fixtures/agents/gemini.jsonl"), &roots);
        let known: Vec<&Event> = ev.iter().filter(|e| e.op != Op::Unknown).collect();
        let ops: Vec<Op> = known.iter().map(|e| e.op).collect();
        assert_eq!(ops, [Op::Start, Op::Message, Op::Exec, Op::Read, Op::Write, Op::Exec, Op::Tool, Op::Result]);
        assert_eq!(known[1].text.as_deref(), Some("I'll look at the folder first."), "deltas are joined");
        // Shell commands with their exit codes, from the result text.
        assert_eq!(known[2].command.as_deref(), Some("ls -la logs"));
        assert_eq!((known[2].exit, known[2].ok), (Some(0), Some(true)));
        assert_eq!((known[5].exit, known[5].ok), (Some(1), Some(false)));
        // An in-process read and an edit.
        assert_eq!(known[3].paths, ["logs/app.log"]);
        assert_eq!((known[4].tool.as_deref(), known[4].paths.as_slice()), (Some("replace"), ["logrotate.conf".to_string()].as_slice()));
        assert_eq!(known[7].ok, Some(true));
        assert_eq!(known[0].t_us, 1_762_164_900_000_000);
        assert!(ev.windows(2).all(|w| w[0].t_us <= w[1].t_us));
        // The error and the unrecognized event are kept; the non-JSON line is not an event.
        let unknown: Vec<&str> = ev.iter().filter(|e| e.op == Op::Unknown).filter_map(|e| e.text.as_deref()).collect();
        assert_eq!(unknown, ["error (warning): Loop detected, stopping.", "event `telemetry`"]);
    }

    #[test]
    fn a_policy_refusal_is_a_denied_call_with_its_reason() {
        let roots = Roots { workspace: "/w".into(), home: "/h".into() };
        let stream = [
            r#"{"type":"tool_use","timestamp":"2026-11-27T19:13:46.790Z","tool_name":"replace","tool_id":"r1","parameters":{"file_path":"/w/Makefile","old_string":"a","new_string":"b"}}"#,
            r#"{"type":"tool_result","timestamp":"2026-11-27T19:13:46.797Z","tool_id":"r1","status":"error","output":"Tool execution denied by policy. Modifying build configuration files requires explicit user confirmation","error":{"type":"policy_violation","message":"Tool execution denied by policy. Modifying build configuration files requires explicit user confirmation"}}"#,
        ]
        .join("\n");
        let ev = normalize(&stream, &roots);
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!((ev[0].op, ev[0].paths.as_slice()), (Op::Denied, ["Makefile".to_string()].as_slice()));
        assert!(ev[0].text.as_deref().unwrap_or_default().contains("build configuration files"), "{:?}", ev[0].text);
    }
}
