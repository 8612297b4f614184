//! The tool calls of an agent's native event stream with what normalized events leave out:
//! the call's id, its full arguments and the output the agent saw. Exports to other tools'
//! trace formats (ATIF, Inspect) pair these with the agent-channel events by raw line.
//!
//! Each call is keyed by the raw line of `agent.jsonl` that the adapter made its event(s)
//! from, and its position among the calls of that line.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::adapters::{Format, acp};
use crate::adapters::parse::{json_lines, str_field};

/// One tool call as the agent's stream records it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolIo {
    /// The agent's id for the call (a synthetic one when its stream has none).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The call's arguments, as the agent passed them.
    pub arguments: Value,
    /// What the tool returned to the agent, when the stream has it.
    pub output: Option<String>,
    /// The tool reported an error.
    pub error: bool,
}

/// The calls of a stream, by (raw line, position among that line's calls).
pub type Calls = BTreeMap<(u64, usize), ToolIo>;

/// Reads the tool calls of a transcript of `format`. Lines it does not understand are passed
/// over: the normalized events remain the record of what happened.
pub fn tool_calls(format: Format, transcript: &str) -> Calls {
    let mut c = Collector::default();
    if format == Format::Aider {
        // Not JSON: the shell commands Aider ran and the edit blocks it applied, each on the
        // line of the history its event comes from.
        for (raw, line) in transcript.lines().enumerate() {
            let Some(q) = line.strip_prefix("> ").map(str::trim_end) else { continue };
            if let Some(command) = q.strip_prefix("Running ") {
                c.put(raw as u64, None, "shell-block", serde_json::json!({"command": command}));
            } else if let Some(path) = q.strip_prefix("Applied edit to ") {
                c.put(raw as u64, None, "edit-block", serde_json::json!({"path": path}));
            }
        }
        return c.calls;
    }
    for (raw, v) in json_lines(transcript) {
        let Some(v) = v.filter(Value::is_object) else { continue };
        match format {
            Format::ClaudeCode => match str_field(&v, "type").unwrap_or("") {
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
                            c.set_output(id, Some(crate::claude::result_text(item.get("content").unwrap_or(&Value::Null))), error);
                        }
                    }
                }
                _ => {}
            },
            Format::Codex => {
                let Some(item) = v.get("item") else { continue };
                let Some(id) = str_field(item, "id") else { continue };
                let kind = str_field(item, "type").unwrap_or("");
                let known = c.by_id.contains_key(id);
                let arguments = match kind {
                    "command_execution" => serde_json::json!({"command": item.get("command").cloned().unwrap_or(Value::Null)}),
                    "file_change" => serde_json::json!({"changes": item.get("changes").cloned().unwrap_or(Value::Null)}),
                    "mcp_tool_call" => item.get("arguments").cloned().unwrap_or(Value::Null),
                    "web_search" => serde_json::json!({"query": item.get("query").cloned().unwrap_or(Value::Null)}),
                    _ => continue,
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
                if str_field(&v, "type") == Some("item.completed") {
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
            Format::GeminiCli => match str_field(&v, "type").unwrap_or("") {
                "tool_use" => c.put(raw, str_field(&v, "tool_id").map(str::to_string), str_field(&v, "tool_name").unwrap_or("?"), v.get("parameters").cloned().unwrap_or(Value::Null)),
                "tool_result" => {
                    if let Some(id) = str_field(&v, "tool_id") {
                        let error = str_field(&v, "status") != Some("success");
                        let output = str_field(&v, "output").map(str::to_string).or_else(|| v.pointer("/error/message").and_then(Value::as_str).map(str::to_string));
                        c.set_output(id, output, error);
                    }
                }
                _ => {}
            },
            Format::OpenCode => {
                // Each call is one line, with its output.
                if str_field(&v, "type") == Some("tool_use")
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
            Format::Acp => {
                // A call is first named by a `tool_call` (or, for a gated call of some agents,
                // a permission request); its input and output come in later updates.
                let msg = v.get("msg").cloned().unwrap_or(Value::Null);
                let call = match str_field(&msg, "method") {
                    Some("session/update") => msg.pointer("/params/update").filter(|u| str_field(u, "sessionUpdate").is_some_and(|k| k.starts_with("tool_call"))),
                    Some("session/request_permission") => msg.pointer("/params/toolCall"),
                    _ => None,
                };
                let Some(u) = call else { continue };
                let Some(id) = str_field(u, "toolCallId") else { continue };
                if !c.by_id.contains_key(id) {
                    let name = acp::meta_tool(u).or_else(|| acp::id_tool(id)).or_else(|| str_field(u, "kind")).unwrap_or("?");
                    c.put(raw, Some(id.to_string()), name, Value::Null);
                }
                if let (Some(input), Some(k)) = (acp::real_input(u), c.by_id.get(id))
                    && let Some(io) = c.calls.get_mut(k)
                {
                    io.arguments = input.clone();
                }
                let text: Vec<&str> = u.get("content").and_then(Value::as_array).into_iter().flatten().filter_map(|x| x.pointer("/content/text").and_then(Value::as_str)).collect();
                let output = u.get("rawOutput").filter(|o| !o.is_null()).map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_string)).or_else(|| (!text.is_empty()).then(|| text.join("\n")));
                c.set_output(id, output, str_field(u, "status") == Some("failed"));
            }
            Format::Cline => {
                let ev = v.get("event").cloned().unwrap_or(Value::Null);
                if str_field(&ev, "contentType") != Some("tool") {
                    continue;
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
            Format::MiniSweAgent => match str_field(&v, "role") {
                Some("assistant") => {
                    for a in v.pointer("/extra/actions").and_then(Value::as_array).into_iter().flatten() {
                        c.put(raw, str_field(a, "tool_call_id").map(str::to_string), "bash", serde_json::json!({"command": a.get("command").cloned().unwrap_or(Value::Null)}));
                    }
                }
                Some("tool") => {
                    if let Some(id) = str_field(&v, "tool_call_id") {
                        let code = v.pointer("/extra/returncode").and_then(Value::as_i64);
                        c.set_output(id, str_field(&v, "content").map(str::to_string), code.is_some_and(|c| c != 0));
                    }
                }
                _ => {}
            },
            Format::Aider => {}
            Format::ContinueCli => {
                for (pos, st) in v.get("toolCallStates").and_then(Value::as_array).into_iter().flatten().enumerate() {
                    let output: Vec<&str> = st.get("output").and_then(Value::as_array).into_iter().flatten().filter_map(|o| str_field(o, "content")).collect();
                    let name = st.pointer("/toolCall/function/name").and_then(Value::as_str).unwrap_or("?");
                    let id = str_field(st, "toolCallId").map_or_else(|| format!("call-{raw}-{pos}"), str::to_string);
                    c.put(raw, Some(id.clone()), name, st.get("parsedArgs").cloned().unwrap_or(Value::Null));
                    c.set_output(&id, (!output.is_empty()).then(|| output.join("\n")), str_field(st, "status") != Some("done"));
                }
            }
            Format::OpenHands => {
                if let Some(action) = str_field(&v, "action") {
                    // V0 action: an id, the action's name and its arguments.
                    let skip = matches!(action, "message" | "think" | "system" | "recall" | "change_agent_state" | "null" | "finish");
                    if !skip {
                        c.put(raw, v.get("id").map(|i| i.to_string()), action, v.get("args").cloned().unwrap_or(Value::Null));
                    }
                } else if let Some(obs) = str_field(&v, "observation") {
                    if let Some(cause) = v.get("cause").map(|c| c.to_string()) {
                        let exit = v.pointer("/extras/metadata/exit_code").and_then(Value::as_i64);
                        let error = obs == "error" || v.get("success").and_then(Value::as_bool) == Some(false) || exit.is_some_and(|c| c > 0);
                        c.set_output(&cause, str_field(&v, "content").map(str::to_string), error);
                    }
                } else if let (Some(call), Some(action)) = (str_field(&v, "tool_call_id"), v.get("action")) {
                    // V1 ActionEvent / ObservationEvent.
                    let tool = str_field(&v, "tool_name").unwrap_or("?");
                    if tool != "finish" && !c.by_id.contains_key(call) {
                        c.put(raw, Some(call.to_string()), tool, action.clone());
                    }
                } else if let (Some(call), Some(observation)) = (str_field(&v, "tool_call_id"), v.get("observation")) {
                    let output = observation_text(observation);
                    let error = observation.get("exit_code").and_then(Value::as_i64).is_some_and(|c| c > 0) || observation.get("is_error").and_then(Value::as_bool) == Some(true);
                    c.set_output(call, output, error);
                }
            }
        }
    }
    c.calls
}

/// Calls as they are found, and where each id's call is.
#[derive(Default)]
struct Collector {
    calls: Calls,
    by_id: HashMap<String, (u64, usize)>,
}

impl Collector {
    fn put(&mut self, raw: u64, id: Option<String>, name: &str, arguments: Value) {
        let pos = self.calls.range((raw, 0)..(raw + 1, 0)).count();
        let id = id.unwrap_or_else(|| format!("call-{raw}-{pos}"));
        self.by_id.insert(id.clone(), (raw, pos));
        self.calls.insert((raw, pos), ToolIo { id, name: name.to_string(), arguments, output: None, error: false });
    }

    /// Attaches an output (when there is one) and an error flag to call `id`.
    fn set_output(&mut self, id: &str, output: Option<String>, error: bool) {
        if let Some(call) = self.by_id.get(id).and_then(|k| self.calls.get_mut(k)) {
            if output.is_some() {
                call.output = output;
            }
            call.error |= error;
        }
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
    fn claude_calls_carry_their_input_and_output() {
        let t = concat!(
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}},{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"a"}}]}}"#,
            "\n",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"A"}],"is_error":true},{"type":"tool_result","tool_use_id":"t1","content":"x\ny"}]}}"#,
            "\n"
        );
        let calls = tool_calls(Format::ClaudeCode, t);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[&(0, 0)].name, "Bash");
        assert_eq!(calls[&(0, 0)].output.as_deref(), Some("x\ny"));
        assert!(!calls[&(0, 0)].error);
        assert_eq!(calls[&(0, 1)].arguments, serde_json::json!({"file_path": "a"}));
        assert!(calls[&(0, 1)].error);
    }

    #[test]
    fn codex_commands_open_on_start_and_close_on_completion() {
        let t = concat!(
            r#"{"type":"item.started","item":{"id":"i0","type":"command_execution","command":"bash -lc ls","status":"in_progress"}}"#,
            "\n",
            r#"{"type":"item.completed","item":{"id":"i0","type":"command_execution","command":"bash -lc ls","aggregated_output":"a\n","exit_code":2,"status":"failed"}}"#,
            "\n"
        );
        let calls = tool_calls(Format::Codex, t);
        assert_eq!(calls.len(), 1);
        let c = &calls[&(0, 0)];
        assert_eq!((c.id.as_str(), c.output.as_deref(), c.error), ("i0", Some("a\n"), true));
    }

    #[test]
    fn gemini_and_openhands_results_find_their_calls() {
        let g = "{\"type\":\"tool_use\",\"tool_name\":\"read_file\",\"tool_id\":\"r1\",\"parameters\":{\"file_path\":\"x\"}}\n{\"type\":\"tool_result\",\"tool_id\":\"r1\",\"status\":\"success\",\"output\":\"X\"}\n";
        assert_eq!(tool_calls(Format::GeminiCli, g)[&(0, 0)].output.as_deref(), Some("X"));
        let o = "not json\n{\"id\":3,\"action\":\"run\",\"args\":{\"command\":\"ls\"}}\n{\"id\":4,\"cause\":3,\"observation\":\"run\",\"content\":\"a\",\"extras\":{\"metadata\":{\"exit_code\":1}}}\n";
        let calls = tool_calls(Format::OpenHands, o);
        let c = &calls[&(1, 0)];
        assert_eq!((c.id.as_str(), c.output.as_deref(), c.error), ("3", Some("a"), true));
    }
}
