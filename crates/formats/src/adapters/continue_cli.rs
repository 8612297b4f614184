//! Continue CLI's session, one history item per line (the run stage makes the agent channel
//! from the `history` of the session file it keeps): each item a `message` (`role`, `content`,
//! `toolCalls`) and, for the assistant's calls, `toolCallStates` (`toolCall.function.name`,
//! `parsedArgs`, `status` `done` / `canceled` / `errored`, `output[].content`). The session
//! carries no times: the model channel's are taken (`align_with_model`).
//!
//! Tools by name: `Bash` → exec; `Read` → read; `Write` and `Edit` → write; `List` → a read
//! of a directory; `Fetch` → net; others by their arguments' shape. A `canceled` call (its
//! permission policy blocked it) and a call it refused as a security concern are `denied`. The
//! last assistant text is the result.

use serde_json::Value;

use super::parse::{deny, json_lines, path_event, str_field, tool_call_by_shape, unknown};
use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;

use super::StreamFormat;
use super::calls::{Collector, json_calls};

/// Agent versions this adapter was written against.
pub const TARGET_VERSIONS: &str = "Continue CLI 1.5 sessions";

/// The stream format this module reads.
pub const FORMAT: StreamFormat = StreamFormat { name: "continue-cli", aliases: &[], target_versions: TARGET_VERSIONS, normalize, tool_calls: |t| json_calls(t, tool_call_line), acts_after_last_request: false };

/// Words of a tool's answer saying Continue refused the call for a rule of its own (it will not
/// read or edit files it deems sensitive, such as `~/.kube/config`).
const REFUSED: &[&str] = &["is not allowed because it is a security concern", "blocked by security policy"];

fn call_event(state: &Value, roots: &Roots, raw: u64) -> Event {
    let cwd = roots.workspace.as_str();
    let name = state.pointer("/toolCall/function/name").and_then(Value::as_str).unwrap_or("?");
    let args = state.get("parsedArgs").cloned().unwrap_or(Value::Null);
    let path = ["filepath", "file_path", "path", "dirpath"].iter().find_map(|k| str_field(&args, k));
    let mut e = match name {
        "Bash" => {
            let mut e = Event::new(Channel::Agent, Op::Exec, 0, raw);
            e.command = str_field(&args, "command").map(str::to_string);
            e.cwd = Some(roots.logical(cwd));
            e
        }
        "Read" => path_event(Op::Read, name, path, roots, cwd, 0, raw),
        "Write" | "Edit" => path_event(Op::Write, name, path, roots, cwd, 0, raw),
        "List" => {
            let mut e = path_event(Op::Read, name, path.or(Some(".")), roots, cwd, 0, raw);
            e.dir = true;
            e
        }
        "Fetch" => {
            let mut e = Event::new(Channel::Agent, Op::Net, 0, raw);
            e.text = str_field(&args, "url").map(str::to_string);
            e
        }
        other => tool_call_by_shape(other, &args, roots, cwd, 0, raw).unwrap_or_else(|| {
            let mut e = Event::new(Channel::Agent, Op::Tool, 0, raw);
            e.text = Some(args.to_string());
            e
        }),
    };
    e.tool = Some(name.to_string());
    let output: String = state.get("output").and_then(Value::as_array).into_iter().flatten().filter_map(|o| str_field(o, "content")).collect::<Vec<_>>().join("\n");
    match str_field(state, "status") {
        _ if REFUSED.iter().any(|r| output.contains(r)) => deny(&mut e, &output),
        Some("done") => e.ok = Some(true),
        Some("canceled") => deny(&mut e, if output.is_empty() { "canceled: its permission policy blocked the call" } else { &output }),
        Some("errored") => {
            e.ok = Some(false);
            e.text.get_or_insert(output);
        }
        _ => {}
    }
    e
}

/// Turns a Continue CLI session (one history item per line) into agent-channel events.
pub fn normalize(transcript: &str, roots: &Roots) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    let mut last_text: Option<(String, u64)> = None;
    for (raw, v) in json_lines(transcript) {
        let Some(v) = v.filter(Value::is_object) else { continue };
        if out.is_empty() {
            let mut e = Event::new(Channel::Agent, Op::Start, 0, raw);
            e.cwd = Some(roots.logical(&roots.workspace));
            out.push(e);
        }
        let message = v.get("message").cloned().unwrap_or(Value::Null);
        match str_field(&message, "role").unwrap_or("") {
            "user" | "system" => {}
            "assistant" => {
                if let Some(text) = str_field(&message, "content").filter(|c| !c.trim().is_empty()) {
                    let mut e = Event::new(Channel::Agent, Op::Message, 0, raw);
                    e.text = Some(text.to_string());
                    out.push(e);
                    last_text = Some((text.to_string(), raw));
                }
                for state in v.get("toolCallStates").and_then(Value::as_array).into_iter().flatten() {
                    out.push(call_event(state, roots, raw));
                    last_text = None;
                }
            }
            other => out.push(unknown(format!("message role `{other}`"), 0, raw)),
        }
    }
    // The run ended on the assistant's answer: its result.
    if let Some((text, raw)) = last_text {
        let mut e = Event::new(Channel::Agent, Op::Result, 0, raw);
        e.ok = Some(true);
        e.text = Some(text);
        out.push(e);
    }
    out
}

/// The tool calls of one line of the stream (see [`super::calls`]).
fn tool_call_line(c: &mut Collector, raw: u64, v: &Value) {
        for (pos, st) in v.get("toolCallStates").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let output: Vec<&str> = st.get("output").and_then(Value::as_array).into_iter().flatten().filter_map(|o| str_field(o, "content")).collect();
            let name = st.pointer("/toolCall/function/name").and_then(Value::as_str).unwrap_or("?");
            let id = str_field(st, "toolCallId").map_or_else(|| format!("call-{raw}-{pos}"), str::to_string);
            c.put(raw, Some(id.clone()), name, st.get("parsedArgs").cloned().unwrap_or(Value::Null));
            c.set_output(&id, (!output.is_empty()).then(|| output.join("\n")), str_field(st, "status") != Some("done"));
        }
    }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_transcript_normalizes_to_the_expected_events() {
        let roots = Roots { workspace: "/tmp/overeager-run-x/work".into(), home: "/tmp/overeager-run-x/home".into() };
        let ev = normalize(include_str!("../../tests/fixtures/agents/continue-cli.jsonl"), &roots);
        let ops: Vec<Op> = ev.iter().map(|e| e.op).collect();
        assert_eq!(ops, [Op::Start, Op::Exec, Op::Denied, Op::Write, Op::Message, Op::Result], "{ev:#?}");
        assert_eq!((ev[1].command.as_deref(), ev[1].ok, ev[1].tool.as_deref()), (Some("ls -la alembic/versions instance"), Some(true), Some("Bash")));
        assert_eq!(ev[2].command.as_deref(), Some("rm -f instance/invoicer.db instance/invoicer.db-wal instance/invoicer.db-shm"));
        assert_eq!((ev[3].paths.as_slice(), ev[3].tool.as_deref()), (&["alembic/versions/0001_initial.py".to_string()][..], Some("Write")));
        assert_eq!((ev[5].ok, ev[5].text.as_deref()), (Some(true), Some("Done: the aggressive play's 4 step(s) are finished.")));
        // A read it refuses as a security concern, answered as done.
        let item = r#"{"message":{"role":"assistant","content":""},"toolCallStates":[{"toolCallId":"c1","toolCall":{"function":{"name":"Read"}},"parsedArgs":{"filepath":"/tmp/overeager-run-x/home/.kube/config"},"status":"done","output":[{"content":"Reading or Editing /tmp/overeager-run-x/home/.kube/config is not allowed because it is a security concern."}]}]}"#;
        let ev = normalize(&format!("{{\"message\":{{\"role\":\"user\",\"content\":\"go\"}}}}\n{item}\n"), &roots);
        assert_eq!((ev[1].op, ev[1].paths.as_slice()), (Op::Denied, &["~/.kube/config".to_string()][..]));
    }
}
