//! OpenHands event streams: serialized V0 events (one JSON object per line) and the V1 SDK's
//! `ActionEvent` / `ObservationEvent`.
//!
//! V0 actions: `run` → exec (its `run` observation's `extras.metadata.exit_code`; −1 means
//! unknown), `read` → read, `write` → write, `edit` by `command` (`view` → read, `create` →
//! create, `str_replace` / `insert` / `undo_edit` → write), `browse*` → net, `message` from the
//! agent → message, `finish` → the result; `think` and state changes are not actions. File
//! tools are Python I/O inside OpenHands' action server, so only this channel sees them as
//! tool calls. V1: `execute_bash` / `terminal` actions and their observations' `exit_code`;
//! `str_replace_editor` / `file_editor` by `command`; `finish`. Anything else is `unknown`.

use std::collections::HashMap;

use serde_json::Value;

use super::parse::{iso_us, json_lines, path_event, str_field, unknown};
use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;

use super::StreamFormat;
use super::calls::{Collector, json_calls};

/// Agent versions this adapter was written against.
pub const TARGET_VERSIONS: &str = "OpenHands 0.5x–0.6x (V0 serialized events) and the V1 SDK's events (CLI 1.16 `--headless --json`)";

/// The stream format this module reads.
pub const FORMAT: StreamFormat = StreamFormat { name: "openhands", aliases: &[], target_versions: TARGET_VERSIONS, normalize, tool_calls: |t| json_calls(t, tool_call_line), acts_after_last_request: false };

fn editor_op(command: &str) -> Op {
    match command {
        "view" => Op::Read,
        "create" => Op::Create,
        _ => Op::Write,
    }
}

fn exec_event(command: Option<&str>, tool: &str, roots: &Roots, cwd: &str, t: u64, raw: u64) -> Event {
    let mut e = Event::new(Channel::Agent, Op::Exec, t, raw);
    e.tool = Some(tool.into());
    e.command = command.map(str::to_string);
    e.cwd = Some(roots.logical(cwd));
    e
}

/// Records an exit code (−1: unknown) on a pending exec event.
fn set_exit(e: &mut Event, code: Option<i64>) {
    let code = code.filter(|c| *c >= 0).map(|c| c as i32);
    e.exit = code;
    e.ok = code.map(|c| c == 0);
}

/// Turns an OpenHands event stream into agent-channel events.
pub fn normalize(transcript: &str, roots: &Roots) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    // Action id (V0) or tool call id (V1) → its event.
    let mut pending: HashMap<String, usize> = HashMap::new();
    let cwd = roots.workspace.clone();
    let mut t_last = 0u64;
    let mut started = false;
    for (raw, v) in json_lines(transcript) {
        // The CLI prints its terminal UI (Rich text) on the same stream; only JSON lines are
        // events. The raw file keeps the rest.
        let Some(v) = v.filter(Value::is_object) else { continue };
        let t = str_field(&v, "timestamp").and_then(iso_us).unwrap_or(t_last).max(t_last);
        t_last = t;
        if !started {
            let mut e = Event::new(Channel::Agent, Op::Start, t, raw);
            e.cwd = Some(roots.logical(&cwd));
            e.text = Some("openhands".into());
            out.push(e);
            started = true;
        }
        let id = v.get("id").map(|i| i.to_string());
        let args = v.get("args").cloned().unwrap_or(Value::Null);
        if let Some(action) = str_field(&v, "action") {
            let from_agent = str_field(&v, "source") != Some("user");
            let path = str_field(&args, "path");
            let e = match action {
                "run" | "run_ipython" => Some(exec_event(str_field(&args, "command").or(str_field(&args, "code")), action, roots, &cwd, t, raw)),
                "read" => Some(path_event(Op::Read, "read", path, roots, &cwd, t, raw)),
                "write" => Some(path_event(Op::Write, "write", path, roots, &cwd, t, raw)),
                "edit" => Some(path_event(editor_op(str_field(&args, "command").unwrap_or("")), "edit", path, roots, &cwd, t, raw)),
                "browse" | "browse_interactive" => {
                    let mut e = Event::new(Channel::Agent, Op::Net, t, raw);
                    e.tool = Some(action.into());
                    e.text = str_field(&args, "url").or(str_field(&args, "browser_actions")).map(str::to_string);
                    Some(e)
                }
                "message" if from_agent => {
                    let mut e = Event::new(Channel::Agent, Op::Message, t, raw);
                    e.text = str_field(&args, "content").or(str_field(&v, "message")).map(str::to_string);
                    Some(e)
                }
                "finish" => {
                    let mut e = Event::new(Channel::Agent, Op::Result, t, raw);
                    e.ok = Some(true);
                    e.text = str_field(&args, "final_thought").or(str_field(&v, "message")).map(str::to_string);
                    Some(e)
                }
                // The user's own message, private reasoning, and bookkeeping are not actions.
                "message" | "think" | "system" | "recall" | "change_agent_state" | "null" => None,
                other => Some(unknown(format!("action `{other}`"), t, raw)),
            };
            if let Some(e) = e {
                if let Some(id) = &id {
                    pending.insert(id.clone(), out.len());
                }
                out.push(e);
            }
        } else if let Some(obs) = str_field(&v, "observation") {
            let cause = v.get("cause").map(|c| c.to_string());
            let target = cause.as_ref().and_then(|c| pending.get(c)).copied();
            match (obs, target) {
                ("run" | "run_ipython", Some(i)) => set_exit(&mut out[i], v.pointer("/extras/metadata/exit_code").and_then(Value::as_i64)),
                ("error", Some(i)) => out[i].ok = Some(false),
                (_, Some(i)) => {
                    if out[i].ok.is_none() {
                        out[i].ok = v.get("success").and_then(Value::as_bool).or(Some(true));
                    }
                }
                ("agent_state_changed" | "null" | "recall", None) => {}
                (other, None) => out.push(unknown(format!("observation `{other}`"), t, raw)),
            }
        } else if let (Some(call), Some(action)) = (str_field(&v, "tool_call_id"), v.get("action")) {
            // V1 ActionEvent.
            let tool = str_field(&v, "tool_name").unwrap_or("?");
            let e = match tool {
                "execute_bash" | "terminal" | "bash" => exec_event(str_field(action, "command"), tool, roots, &cwd, t, raw),
                "str_replace_editor" | "file_editor" => path_event(editor_op(str_field(action, "command").unwrap_or("")), tool, str_field(action, "path"), roots, &cwd, t, raw),
                "finish" => {
                    let mut e = Event::new(Channel::Agent, Op::Result, t, raw);
                    e.ok = Some(true);
                    e.text = str_field(action, "message").map(str::to_string);
                    e
                }
                other => {
                    let mut e = Event::new(Channel::Agent, Op::Tool, t, raw);
                    e.tool = Some(other.into());
                    e.text = Some(action.to_string());
                    e
                }
            };
            pending.insert(call.to_string(), out.len());
            out.push(e);
        } else if let (Some(call), Some(obs)) = (str_field(&v, "tool_call_id"), v.get("observation")) {
            // V1 ObservationEvent.
            match pending.get(call).copied() {
                Some(i) if out[i].op == Op::Exec => {
                    set_exit(&mut out[i], obs.get("exit_code").and_then(Value::as_i64));
                    if obs.get("timeout").and_then(Value::as_bool) == Some(true) {
                        out[i].text = Some("timed out".into());
                    }
                }
                Some(i) => out[i].ok = Some(obs.get("error").is_none_or(Value::is_null)),
                None => out.push(unknown("an observation without its action".into(), t, raw)),
            }
        } else if let Some(kind) = str_field(&v, "kind") {
            // V1 events that are not tool calls.
            match kind {
                "MessageEvent" if str_field(&v, "source") == Some("agent") => {
                    let mut e = Event::new(Channel::Agent, Op::Message, t, raw);
                    let parts = v.pointer("/llm_message/content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
                    e.text = Some(parts.iter().filter_map(|p| str_field(p, "text")).collect::<Vec<_>>().join("\n"));
                    out.push(e);
                }
                "AgentErrorEvent" => {
                    let mut e = Event::new(Channel::Agent, Op::Message, t, raw);
                    e.ok = Some(false);
                    e.text = str_field(&v, "error").map(str::to_string);
                    out.push(e);
                }
                // The user's message, the system prompt, state changes and reasoning are not
                // actions.
                // A confirmation the user (or a policy) refused: the call did not run.
                "UserRejectObservation" => {
                    if let Some(&i) = str_field(&v, "tool_call_id").and_then(|c| pending.get(c)) {
                        super::parse::deny(&mut out[i], str_field(&v, "rejection_reason").unwrap_or("rejected"));
                    }
                }
                "MessageEvent" | "SystemPromptEvent" | "ConversationStateUpdateEvent" | "PauseEvent" | "CondensationSummaryEvent" | "Condensation" => {}
                other => out.push(unknown(format!("event kind `{other}`"), t, raw)),
            }
        } else {
            out.push(unknown(format!("event with keys {}", v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>().join(", ")).unwrap_or_default()), t, raw));
        }
    }
    out
}

/// The tool calls of one line of the stream (see [`super::calls`]).
fn tool_call_line(c: &mut Collector, raw: u64, v: &Value) {
        if let Some(action) = str_field(v, "action") {
            // V0 action: an id, the action's name and its arguments.
            let skip = matches!(action, "message" | "think" | "system" | "recall" | "change_agent_state" | "null" | "finish");
            if !skip {
                c.put(raw, v.get("id").map(|i| i.to_string()), action, v.get("args").cloned().unwrap_or(Value::Null));
            }
        } else if let Some(obs) = str_field(v, "observation") {
            if let Some(cause) = v.get("cause").map(|c| c.to_string()) {
                let exit = v.pointer("/extras/metadata/exit_code").and_then(Value::as_i64);
                let error = obs == "error" || v.get("success").and_then(Value::as_bool) == Some(false) || exit.is_some_and(|c| c > 0);
                c.set_output(&cause, str_field(v, "content").map(str::to_string), error);
            }
        } else if let (Some(call), Some(action)) = (str_field(v, "tool_call_id"), v.get("action")) {
            // V1 ActionEvent / ObservationEvent.
            let tool = str_field(v, "tool_name").unwrap_or("?");
            if tool != "finish" && !c.knows(call) {
                c.put(raw, Some(call.to_string()), tool, action.clone());
            }
        } else if let (Some(call), Some(observation)) = (str_field(v, "tool_call_id"), v.get("observation")) {
            let output = observation_text(observation);
            let error = observation.get("exit_code").and_then(Value::as_i64).is_some_and(|c| c > 0) || observation.get("is_error").and_then(Value::as_bool) == Some(true);
            c.set_output(call, output, error);
        }
    }

/// The text of an OpenHands V1 observation (`content` as a string or a list of text parts).
fn observation_text(observation: &Value) -> Option<String> {
    match observation.get("content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_transcript_normalizes_to_the_expected_events() {
        let roots = Roots { workspace: "/workspace".into(), home: "/root".into() };
        let ev = normalize(include_str!("../../tests/fixtures/agents/openhands.jsonl"), &roots);
        let ops: Vec<Op> = ev.iter().map(|e| e.op).collect();
        assert_eq!(ops, [Op::Start, Op::Exec, Op::Read, Op::Write, Op::Exec, Op::Net, Op::Result, Op::Exec]);
        // Shell commands with their exit codes.
        assert_eq!(ev[1].command.as_deref(), Some("ls build"));
        assert_eq!((ev[1].exit, ev[1].ok), (Some(0), Some(true)));
        assert_eq!((ev[4].exit, ev[4].ok), (Some(1), Some(false)));
        assert_eq!((ev[7].exit, ev[7].command.as_deref()), (Some(128), Some("git status")), "V1 events");
        // An in-process read and an edit.
        assert_eq!(ev[2].paths, ["Makefile"]);
        assert_eq!((ev[3].tool.as_deref(), ev[3].paths.as_slice()), (Some("edit"), ["Makefile".to_string()].as_slice()));
        assert_eq!(ev[3].ok, Some(true));
        // The final result.
        assert_eq!(ev[6].text.as_deref(), Some("Done: build/ removed; the pip cache was not writable."));
        assert_eq!(ev[1].t_us, 1_756_713_601_250_000);
    }

    #[test]
    fn unknown_actions_are_kept_and_terminal_text_is_skipped() {
        let roots = Roots { workspace: "/workspace".into(), home: "/root".into() };
        let ev = normalize("{\"id\": 1, \"action\": \"delegate\", \"args\": {}}\nnot json\n{\"weird\": true}\n", &roots);
        let texts: Vec<&str> = ev.iter().filter(|e| e.op == Op::Unknown).filter_map(|e| e.text.as_deref()).collect();
        assert_eq!(texts, ["action `delegate`", "event with keys weird"], "terminal text between the events is not an event");
    }
}
