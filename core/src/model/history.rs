//! The tool calls an agent already made, with what its tools answered, read back from the
//! conversation a request resends. The scripted model keeps no state of its own: what its
//! earlier calls achieved is in the history every CLI sends with its next request.

use serde_json::Value;

use super::Dialect;

/// One tool call from the history and its tool's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub name: String,
    pub args: Value,
    /// The tool's answer as text (`None`: the history holds no answer to this call).
    pub output: Option<String>,
    /// Whether the agent marked the answer as an error (Anthropic's `is_error`, Gemini's
    /// `error` response). Dialects without such a mark leave it false.
    pub error: bool,
}

/// Text of a tool result's content: a string, a list of text blocks, or any other JSON.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|i| match i.get("text").and_then(Value::as_str) {
                Some(t) => t.to_string(),
                None => i.as_str().map_or_else(|| i.to_string(), str::to_string),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Arguments that travel as a JSON string (Chat Completions, Responses) as a value.
fn args_of(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

/// Every tool call in the history of a request in `dialect`, in order, each with its answer.
/// Answers are matched by call id where the dialect has one, else by order per tool name.
pub fn answered_calls(dialect: Dialect, body: &Value) -> Vec<Answered> {
    let list = |k: &str| body.get(k).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    // (id, call) in order, and answers by id.
    let mut calls: Vec<(String, Answered)> = Vec::new();
    let mut answers: Vec<(String, String, bool)> = Vec::new();
    let call = |name: &str, args: Value| Answered { name: name.to_string(), args, output: None, error: false };
    match dialect {
        Dialect::Anthropic => {
            for m in list("messages") {
                for b in m.get("content").and_then(Value::as_array).into_iter().flatten() {
                    let id = b.get("id").or_else(|| b.get("tool_use_id")).and_then(Value::as_str).unwrap_or_default().to_string();
                    match b.get("type").and_then(Value::as_str) {
                        Some("tool_use") => calls.push((id, call(b.get("name").and_then(Value::as_str).unwrap_or("?"), b.get("input").cloned().unwrap_or(Value::Null)))),
                        Some("tool_result") => {
                            answers.push((id, text_of(b.get("content").unwrap_or(&Value::Null)), b.get("is_error").and_then(Value::as_bool).unwrap_or(false)))
                        }
                        _ => {}
                    }
                }
            }
        }
        Dialect::Chat => {
            for m in list("messages") {
                for c in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                    let id = c.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
                    calls.push((id, call(c.pointer("/function/name").and_then(Value::as_str).unwrap_or("?"), args_of(c.pointer("/function/arguments")))));
                }
                if m.get("role").and_then(Value::as_str) == Some("tool") {
                    let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or_default().to_string();
                    answers.push((id, text_of(m.get("content").unwrap_or(&Value::Null)), false));
                }
            }
        }
        Dialect::Responses => {
            for i in list("input") {
                let id = i.get("call_id").and_then(Value::as_str).unwrap_or_default().to_string();
                match i.get("type").and_then(Value::as_str) {
                    Some("function_call") => calls.push((id, call(i.get("name").and_then(Value::as_str).unwrap_or("?"), args_of(i.get("arguments"))))),
                    Some("custom_tool_call") => calls.push((id, call(i.get("name").and_then(Value::as_str).unwrap_or("?"), i.get("input").cloned().unwrap_or(Value::Null)))),
                    Some("function_call_output" | "custom_tool_call_output") => answers.push((id, text_of(i.get("output").unwrap_or(&Value::Null)), false)),
                    _ => {}
                }
            }
        }
        Dialect::Gemini => {
            // Gemini's parts carry ids only in some versions: a response answers the earliest
            // unanswered call of its name.
            for c in list("contents") {
                for p in c.get("parts").and_then(Value::as_array).into_iter().flatten() {
                    if let Some(f) = p.get("functionCall") {
                        let name = f.get("name").and_then(Value::as_str).unwrap_or("?");
                        calls.push((String::new(), call(name, f.get("args").cloned().unwrap_or(Value::Null))));
                    }
                    if let Some(r) = p.get("functionResponse") {
                        let name = r.get("name").and_then(Value::as_str).unwrap_or("?").to_string();
                        let resp = r.get("response").unwrap_or(&Value::Null);
                        let (text, error) = match (resp.get("error"), resp.get("output")) {
                            (Some(e), _) => (text_of(e), true),
                            (None, Some(o)) => (text_of(o), false),
                            (None, None) => (text_of(resp), false),
                        };
                        if let Some((_, a)) = calls.iter_mut().find(|(_, a)| a.name == name && a.output.is_none()) {
                            a.output = Some(text);
                            a.error = error;
                        }
                    }
                }
            }
        }
    }
    for (id, text, error) in answers {
        if let Some((_, a)) = calls.iter_mut().find(|(cid, a)| !cid.is_empty() && *cid == id && a.output.is_none()) {
            a.output = Some(text);
            a.error = error;
        }
    }
    calls.into_iter().map(|(_, a)| a).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_matched_to_their_calls_in_every_dialect() {
        let anthropic = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Edit", "input": {"file_path": "/w/a"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": true, "content": [{"type": "text", "text": "File has not been read yet."}]}]},
        ]});
        let a = answered_calls(Dialect::Anthropic, &anthropic);
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].name.as_str(), a[0].output.as_deref(), a[0].error), ("Edit", Some("File has not been read yet."), true));
        assert_eq!(a[0].args["file_path"], "/w/a");

        let chat = json!({"messages": [
            {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "shell", "arguments": "{\"command\":[\"ls\"]}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a\nb"},
            {"role": "assistant", "tool_calls": [{"id": "c2", "function": {"name": "shell", "arguments": "{}"}}]},
        ]});
        let c = answered_calls(Dialect::Chat, &chat);
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].output.as_deref(), c[0].args["command"][0].as_str()), (Some("a\nb"), Some("ls")));
        assert_eq!(c[1].output, None, "an unanswered call has no output");

        let responses = json!({"input": [
            {"type": "function_call", "call_id": "x", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"},
            {"type": "function_call_output", "call_id": "x", "output": "ok"},
        ]});
        let r = answered_calls(Dialect::Responses, &responses);
        assert_eq!((r[0].args["cmd"].as_str(), r[0].output.as_deref()), (Some("ls"), Some("ok")));

        let gemini = json!({"contents": [
            {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"file_path": "/h/.npmrc"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"error": "Path not in workspace"}}}]},
            {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "cat /h/.npmrc"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"output": "registry=x"}}}]},
        ]});
        let g = answered_calls(Dialect::Gemini, &gemini);
        assert_eq!((g[0].error, g[0].output.as_deref()), (true, Some("Path not in workspace")));
        assert_eq!((g[1].error, g[1].output.as_deref()), (false, Some("registry=x")));
    }
}
