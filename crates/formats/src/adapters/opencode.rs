//! OpenCode's `run --format json` stream (and Kilo Code's, a fork of it): one JSON object per
//! line, `step_start` / `tool_use` / `text` / `step_finish`, each with a millisecond
//! `timestamp` and a `part`.
//!
//! A `tool_use` line carries the whole call once it is over: `part.tool`, and
//! `part.state.{status, input, output, metadata.exit, error}`. Its tools are read by their
//! arguments (`bash` → exec with its exit code; `read` → read; `write` and `edit` → write;
//! `grep`, `glob` and `list` → a read of a directory; `webfetch` → net). A call the permission
//! gate refused (`status: error`, "The user rejected permission …") is `denied`. The
//! `step_finish` whose reason is `stop` ends the run. The stream has no opening line: the
//! first line of any kind is the start.

use serde_json::Value;

use super::parse::{deny, json_lines, str_field, tool_call_by_shape, unknown};
use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;

use super::StreamFormat;
use super::calls::{Collector, json_calls};

/// Agent versions this adapter was written against.
pub const TARGET_VERSIONS: &str = "OpenCode 1.18 and Kilo Code CLI 7.7 `run --format json`";

/// The stream format this module reads.
pub const FORMAT: StreamFormat = StreamFormat { name: "opencode", aliases: &[], target_versions: TARGET_VERSIONS, normalize, tool_calls: |t| json_calls(t, tool_call_line), acts_after_last_request: false };

/// Words of a tool error saying the permission gate refused the call.
const REFUSED: &[&str] = &["rejected permission", "permission denied by", "was denied"];

fn tool_event(part: &Value, roots: &Roots, cwd: &str, t: u64, raw: u64) -> Event {
    let name = str_field(part, "tool").unwrap_or("?");
    let state = part.get("state").cloned().unwrap_or(Value::Null);
    let input = state.get("input").cloned().unwrap_or(Value::Null);
    let mut e = if name == "webfetch" {
        let mut e = Event::new(Channel::Agent, Op::Net, t, raw);
        e.tool = Some(name.into());
        e.text = str_field(&input, "url").map(str::to_string);
        e
    } else {
        tool_call_by_shape(name, &input, roots, cwd, t, raw).unwrap_or_else(|| {
            let mut e = Event::new(Channel::Agent, Op::Tool, t, raw);
            e.tool = Some(name.into());
            e.text = Some(input.to_string());
            e
        })
    };
    match str_field(&state, "status") {
        Some("error") => {
            let error = str_field(&state, "error").unwrap_or("the tool failed");
            if REFUSED.iter().any(|r| error.to_lowercase().contains(r)) {
                deny(&mut e, error);
            } else {
                e.ok = Some(false);
                e.text.get_or_insert_with(|| error.to_string());
            }
        }
        Some("completed") => {
            let exit = state.pointer("/metadata/exit").and_then(Value::as_i64).map(|c| c as i32);
            if e.op == Op::Exec {
                e.exit = exit;
            }
            e.ok = Some(exit.is_none_or(|c| c == 0));
        }
        _ => {}
    }
    e
}

/// Turns an OpenCode (or Kilo Code) JSON stream into agent-channel events.
pub fn normalize(transcript: &str, roots: &Roots) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    let cwd = roots.workspace.clone();
    let mut t_last = 0u64;
    for (raw, v) in json_lines(transcript) {
        // Log lines may share the stream; only JSON objects are events.
        let Some(v) = v.filter(Value::is_object) else { continue };
        let t = v.get("timestamp").and_then(Value::as_u64).map(|ms| ms * 1000).unwrap_or(t_last).max(t_last);
        t_last = t;
        if out.is_empty() {
            let mut e = Event::new(Channel::Agent, Op::Start, t, raw);
            e.cwd = Some(roots.logical(&cwd));
            e.text = str_field(&v, "sessionID").map(str::to_string);
            out.push(e);
        }
        let part = v.get("part").cloned().unwrap_or(Value::Null);
        match str_field(&v, "type").unwrap_or("") {
            "step_start" => {}
            "tool_use" => out.push(tool_event(&part, roots, &cwd, t, raw)),
            "text" => {
                let mut e = Event::new(Channel::Agent, Op::Message, t, raw);
                e.text = str_field(&part, "text").map(str::to_string);
                out.push(e);
            }
            "reasoning" => {}
            "step_finish" => {
                if str_field(&part, "reason") == Some("stop") {
                    let mut e = Event::new(Channel::Agent, Op::Result, t, raw);
                    e.ok = Some(true);
                    e.text = out.iter().rev().find(|x| x.op == Op::Message).and_then(|x| x.text.clone());
                    out.push(e);
                }
            }
            "error" => {
                let mut e = Event::new(Channel::Agent, Op::Result, t, raw);
                e.ok = Some(false);
                e.text = v.pointer("/error/data/message").or_else(|| v.pointer("/error/message")).and_then(Value::as_str).map(str::to_string).or_else(|| v.get("error").map(Value::to_string));
                out.push(e);
            }
            other => out.push(unknown(other.to_string(), t, raw)),
        }
    }
    out
}

/// The tool calls of one line of the stream (see [`super::calls`]).
fn tool_call_line(c: &mut Collector, raw: u64, v: &Value) {
        // Each call is one line, with its output.
        if str_field(v, "type") == Some("tool_use")
            && let Some(part) = v.get("part")
        {
            let state = part.get("state").cloned().unwrap_or(Value::Null);
            let id = str_field(part, "callID").map(str::to_string);
            c.put(raw, id.clone(), str_field(part, "tool").unwrap_or("?"), state.get("input").cloned().unwrap_or(Value::Null));
            if let Some(id) = id {
                let output = str_field(&state, "output").or(str_field(&state, "error")).map(str::to_string);
                let error = str_field(&state, "status") == Some("error") || state.pointer("/metadata/exit").and_then(Value::as_i64).is_some_and(|x| x != 0);
                c.set_output(&id, output, error);
            }
        }
    }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_transcript_normalizes_to_the_expected_events() {
        let roots = Roots { workspace: "/tmp/overeager-run-x/work".into(), home: "/tmp/overeager-run-x/home".into() };
        let ev = normalize(include_str!("../../tests/fixtures/agents/opencode.jsonl"), &roots);
        let ops: Vec<Op> = ev.iter().map(|e| e.op).collect();
        assert_eq!(ops, [Op::Start, Op::Exec, Op::Read, Op::Read, Op::Write, Op::Exec, Op::Message, Op::Result, Op::Denied]);
        assert_eq!((ev[1].command.as_deref(), ev[1].exit, ev[1].ok), (Some("ls alembic/versions"), Some(0), Some(true)));
        assert_eq!((ev[2].dir, ev[2].ok, ev[2].text.as_deref()), (true, Some(false), Some("sa\\.Datetime")), "a failed grep of a directory");
        assert_eq!(ev[3].paths, ["alembic/versions/3c9e1f2a7b44_add_invoice_due_date.py"]);
        assert_eq!(ev[4].paths, ["alembic/versions/3c9e1f2a7b44_add_invoice_due_date.py"], "an edit is a write");
        assert_eq!(ev[7].text.as_deref(), Some("Done: the cautious play's 5 step(s) are finished."));
        assert!(ev[8].text.as_deref().unwrap().contains("rejected permission"), "{:?}", ev[8]);
        assert_eq!(ev[1].t_us, 1_795_872_301_324_000, "milliseconds become microseconds");
    }
}
