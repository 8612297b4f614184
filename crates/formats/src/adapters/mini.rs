//! mini-swe-agent's trajectory, one message per line (the run stage makes the agent channel
//! from the `messages` of the trajectory it saves after every step): OpenAI-style messages
//! with mini's `extra` — `system`, `user` (the task), `assistant` (its `extra.actions`, each a
//! bash `command` and a `tool_call_id`, and a Unix-seconds `extra.timestamp`), `tool` (the
//! action's `returncode` and output, as JSON text, with `extra.returncode`) and a last `exit`
//! (`extra.exit_status`: `Submitted` when the model ran its finishing command).
//!
//! Each action is an exec with its exit code. An action the agent did not execute ("action was
//! not executed") is the finishing command when the run was then submitted — no event, the
//! result says it — and otherwise a call refused (its confirmation mode reads end-of-input
//! headless): `denied`.

use serde_json::Value;

use super::parse::{deny, json_lines, str_field, unknown};
use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;

use super::StreamFormat;
use super::calls::{Collector, json_calls};

/// Agent versions this adapter was written against.
pub const TARGET_VERSIONS: &str = "mini-swe-agent 2.4 trajectories (mini-swe-agent-1.1)";

/// The stream format this module reads.
pub const FORMAT: StreamFormat = StreamFormat { name: "mini-swe-agent", aliases: &[], target_versions: TARGET_VERSIONS, normalize, tool_calls: |t| json_calls(t, tool_call_line), acts_after_last_request: false };

/// What mini-swe-agent's tool answer says of an action it did not run.
const NOT_EXECUTED: &str = "action was not executed";

fn seconds_us(v: &Value) -> Option<u64> {
    v.pointer("/extra/timestamp").and_then(Value::as_f64).map(|s| (s * 1e6) as u64)
}

/// Turns a mini-swe-agent trajectory (one message per line) into agent-channel events.
pub fn normalize(transcript: &str, roots: &Roots) -> Vec<Event> {
    let lines: Vec<(u64, Value)> = json_lines(transcript).filter_map(|(raw, v)| Some((raw, v.filter(Value::is_object)?))).collect();
    let submitted = lines.iter().any(|(_, m)| str_field(m, "role") == Some("exit") && m.pointer("/extra/exit_status").and_then(Value::as_str) == Some("Submitted"));
    let mut out: Vec<Event> = Vec::new();
    let mut t_last = 0u64;
    for (raw, m) in &lines {
        let t = seconds_us(m).unwrap_or(t_last).max(t_last);
        t_last = t;
        if out.is_empty() {
            let mut e = Event::new(Channel::Agent, Op::Start, t, *raw);
            e.cwd = Some(roots.logical(&roots.workspace));
            out.push(e);
        }
        match str_field(m, "role").unwrap_or("") {
            "system" | "user" => {}
            "assistant" => {
                if let Some(text) = str_field(m, "content").filter(|c| !c.trim().is_empty()) {
                    let mut e = Event::new(Channel::Agent, Op::Message, t, *raw);
                    e.text = Some(text.to_string());
                    out.push(e);
                }
                for action in m.pointer("/extra/actions").and_then(Value::as_array).into_iter().flatten() {
                    let mut e = Event::new(Channel::Agent, Op::Exec, t, *raw);
                    e.tool = Some("bash".into());
                    e.command = str_field(action, "command").map(str::to_string);
                    e.cwd = Some(roots.logical(&roots.workspace));
                    // The call's id, until its answer is read.
                    e.text = str_field(action, "tool_call_id").map(str::to_string);
                    out.push(e);
                }
            }
            "tool" => {
                let id = str_field(m, "tool_call_id");
                let Some(i) = out.iter().rposition(|e| e.op == Op::Exec && e.exit.is_none() && e.ok.is_none() && e.text.as_deref() == id) else { continue };
                let not_run = m.pointer("/extra/exception_info").and_then(Value::as_str).is_some_and(|x| x.contains(NOT_EXECUTED));
                match (not_run, submitted) {
                    (true, true) => {
                        out.remove(i);
                    }
                    (true, false) => deny(&mut out[i], "not executed: the action was not confirmed (its confirmation reads end-of-input when run headless)"),
                    (false, _) => {
                        let e = &mut out[i];
                        e.exit = m.pointer("/extra/returncode").and_then(Value::as_i64).map(|c| c as i32);
                        e.ok = Some(e.exit == Some(0));
                        e.text = None;
                    }
                }
            }
            "exit" => {
                let mut e = Event::new(Channel::Agent, Op::Result, t, *raw);
                let status = m.pointer("/extra/exit_status").and_then(Value::as_str).unwrap_or("");
                e.ok = Some(status == "Submitted");
                let last = out.iter().rev().find(|x| x.op == Op::Message).and_then(|x| x.text.clone());
                e.text = Some(last.unwrap_or_else(|| format!("exit status: {status}")));
                out.push(e);
            }
            other => out.push(unknown(format!("message role `{other}`"), t, *raw)),
        }
    }
    // A call whose answer never came keeps no id as its text.
    for e in out.iter_mut().filter(|e| e.op == Op::Exec && e.ok.is_none()) {
        e.text = None;
    }
    out
}

/// The tool calls of one line of the stream (see [`super::calls`]).
fn tool_call_line(c: &mut Collector, raw: u64, v: &Value) {
    match str_field(v, "role") {
        Some("assistant") => {
            for a in v.pointer("/extra/actions").and_then(Value::as_array).into_iter().flatten() {
                c.put(raw, str_field(a, "tool_call_id").map(str::to_string), "bash", serde_json::json!({"command": a.get("command").cloned().unwrap_or(Value::Null)}));
            }
        }
        Some("tool") => {
            if let Some(id) = str_field(v, "tool_call_id") {
                let code = v.pointer("/extra/returncode").and_then(Value::as_i64);
                c.set_output(id, str_field(v, "content").map(str::to_string), code.is_some_and(|c| c != 0));
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
        let ev = normalize(include_str!("../../tests/fixtures/agents/mini-swe-agent.jsonl"), &roots);
        let ops: Vec<Op> = ev.iter().map(|e| e.op).collect();
        assert_eq!(ops, [Op::Start, Op::Exec, Op::Exec, Op::Result], "{ev:#?}");
        assert_eq!((ev[1].command.as_deref(), ev[1].exit, ev[1].ok, ev[1].tool.as_deref()), (Some("ls -la alembic/versions instance"), Some(0), Some(true), Some("bash")));
        assert_eq!((ev[2].command.as_deref(), ev[2].exit, ev[2].ok), (Some("rm -f instance/invoicer.db"), Some(1), Some(false)));
        assert_eq!((ev[3].ok, ev[3].text.as_deref()), (Some(true), Some("exit status: Submitted")), "the finishing command is the result, not an exec");
        assert_eq!(ev[1].t_us, 1_795_885_798_863_706);
    }

    #[test]
    fn an_action_not_confirmed_is_denied() {
        let t = concat!(
            r#"{"role":"system","content":"You are a helpful assistant."}"#,
            "\n",
            r#"{"role":"assistant","content":null,"extra":{"actions":[{"command":"rm -rf build","tool_call_id":"c0"}],"timestamp":1.0}}"#,
            "\n",
            r#"{"role":"tool","tool_call_id":"c0","content":"{}","extra":{"exception_info":"action was not executed","returncode":-1,"timestamp":2.0}}"#,
            "\n",
            r#"{"role":"exit","content":"","extra":{"exit_status":"EOFError"}}"#,
            "\n"
        );
        let ev = normalize(t, &Roots { workspace: "/w".into(), home: "/h".into() });
        assert_eq!(ev.iter().map(|e| e.op).collect::<Vec<_>>(), [Op::Start, Op::Denied, Op::Result]);
        assert_eq!(ev[1].command.as_deref(), Some("rm -rf build"));
        assert_eq!((ev[2].ok, ev[2].text.as_deref()), (Some(false), Some("exit status: EOFError")));
    }
}
