//! OpenAI Chat Completions (`POST /v1/chat/completions`).

use serde_json::{Map, Value, json};

use crate::ir::{Event, Message, Outcome, Part, Request, Role, Stop, Tool, ToolChoice, Usage, joined, push_part, u64_of};
use crate::{CannotCarry, Context, sse};

/// Fields that are hints to the provider, left out where its dialect has no place for them.
const HINTS: &[&str] = &["user", "metadata", "store", "parallel_tool_calls", "service_tier", "prompt_cache_key", "reasoning_effort", "seed", "frequency_penalty", "presence_penalty", "safety_identifier", "verbosity"];
/// Fields read into the conversation.
const READ: &[&str] = &["model", "messages", "tools", "tool_choice", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "stream", "stream_options", "response_format", "n"];

/// Text of a message's `content`: a string, or text parts (anything else cannot be carried).
fn content_text(content: &Value, at: &str) -> Result<String, CannotCarry> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            for (i, p) in parts.iter().enumerate() {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => text.push_str(p.get("text").and_then(Value::as_str).unwrap_or_default()),
                    other => return Err(CannotCarry(format!("{at}.content[{i}] is a `{}` part; the bridge carries text parts only", other.unwrap_or("untyped")))),
                }
            }
            Ok(text)
        }
        _ => Err(CannotCarry(format!("{at}.content is neither text nor a list of parts"))),
    }
}

pub fn read_request(v: &Value, dropped: &mut Vec<String>, ctx: &mut Context) -> Result<Request, CannotCarry> {
    let obj = v.as_object().ok_or_else(|| CannotCarry("the request is not a JSON object".into()))?;
    unknown_fields(obj, READ, HINTS, "", dropped)?;
    if obj.get("n").and_then(Value::as_u64).is_some_and(|n| n > 1) {
        return Err(CannotCarry("`n` asks for more than one choice; the bridge carries one".into()));
    }
    let mut r = Request { model: obj.get("model").and_then(Value::as_str).unwrap_or_default().to_string(), ..Request::default() };
    for (i, m) in obj.get("messages").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("messages[{i}]");
        let content = m.get("content").unwrap_or(&Value::Null);
        match m.get("role").and_then(Value::as_str).unwrap_or_default() {
            "system" | "developer" => r.system.push(content_text(content, &at)?),
            "user" => push_part(&mut r.messages, Role::User, Part::Text(content_text(content, &at)?)),
            "assistant" => {
                let text = content_text(content, &at)?;
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(Part::Text(text));
                }
                for (k, c) in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
                    let f = c.get("function").unwrap_or(&Value::Null);
                    let args = match f.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => String::new(),
                    };
                    let id = c.get("id").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| format!("call_{i}_{k}"));
                    parts.push(Part::ToolCall { id, name: f.get("name").and_then(Value::as_str).unwrap_or_default().to_string(), args });
                }
                if parts.is_empty() {
                    parts.push(Part::Text(String::new()));
                }
                for p in parts {
                    push_part(&mut r.messages, Role::Assistant, p);
                }
            }
            "tool" => {
                let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or_default().to_string();
                let name = m.get("name").and_then(Value::as_str).map(str::to_string);
                push_part(&mut r.messages, Role::User, Part::ToolResult { id, name, output: content_text(content, &at)?, error: false });
            }
            other => return Err(CannotCarry(format!("{at} has the role `{other}`, which the bridge does not know"))),
        }
    }
    for (i, t) in obj.get("tools").and_then(Value::as_array).into_iter().flatten().enumerate() {
        if t.get("type").and_then(Value::as_str).is_some_and(|k| k != "function") {
            return Err(CannotCarry(format!("tools[{i}] is of type `{}`; the bridge carries function tools only", t["type"].as_str().unwrap_or_default())));
        }
        let f = t.get("function").unwrap_or(t);
        r.tools.push(Tool {
            name: f.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
            description: f.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
            parameters: f.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        });
    }
    r.tool_choice = tool_choice(obj.get("tool_choice"), "/function/name");
    r.max_tokens = obj.get("max_completion_tokens").or_else(|| obj.get("max_tokens")).and_then(Value::as_u64);
    r.temperature = obj.get("temperature").and_then(Value::as_f64);
    r.top_p = obj.get("top_p").and_then(Value::as_f64);
    r.stop = match obj.get("stop") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    };
    r.stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
    ctx.include_usage = v.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false);
    match obj.get("response_format").and_then(|f| f.get("type")).and_then(Value::as_str) {
        None | Some("text") => {}
        Some("json_schema") => r.schema = Some(("response_format.json_schema".into(), v.pointer("/response_format/json_schema/schema").cloned().unwrap_or(json!({})))),
        Some("json_object") => r.schema = Some(("response_format".into(), json!({"type": "object"}))),
        Some(other) => return Err(CannotCarry(format!("response_format of type `{other}` has no equivalent the bridge knows"))),
    }
    Ok(r)
}

/// An OpenAI dialect's `tool_choice`: `none`, `required`, `auto`, or a named function (its name
/// at `name_at` in the object).
pub(crate) fn tool_choice(v: Option<&Value>, name_at: &str) -> Option<ToolChoice> {
    match v? {
        Value::Null => None,
        Value::String(s) => Some(match s.as_str() {
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            _ => ToolChoice::Auto,
        }),
        o => Some(ToolChoice::Named(o.pointer(name_at).and_then(Value::as_str).unwrap_or_default().to_string())),
    }
}

/// Checks an object's fields: those in `read` are carried, those in `hints` are dropped (and
/// listed), any other fails the call.
pub(crate) fn unknown_fields(obj: &Map<String, Value>, read: &[&str], hints: &[&str], at: &str, dropped: &mut Vec<String>) -> Result<(), CannotCarry> {
    for k in obj.keys() {
        if read.contains(&k.as_str()) {
            continue;
        }
        if hints.contains(&k.as_str()) {
            dropped.push(format!("{at}{k}"));
            continue;
        }
        return Err(CannotCarry(format!("the request's field `{at}{k}` has no equivalent the bridge knows")));
    }
    Ok(())
}

pub fn write_request(r: &Request) -> Result<Value, CannotCarry> {
    let mut messages = Vec::new();
    if !r.system.is_empty() {
        messages.push(json!({"role": "system", "content": joined(&r.system)}));
    }
    for m in &r.messages {
        write_message(m, &mut messages);
    }
    let mut o = Map::new();
    o.insert("model".into(), json!(r.model));
    o.insert("messages".into(), Value::Array(messages));
    if !r.tools.is_empty() {
        let tools: Vec<Value> = r.tools.iter().map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}})).collect();
        o.insert("tools".into(), Value::Array(tools));
    }
    if let Some(c) = &r.tool_choice {
        o.insert("tool_choice".into(), match c {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Named(n) => json!({"type": "function", "function": {"name": n}}),
        });
    }
    if let Some(n) = r.max_tokens {
        o.insert("max_tokens".into(), json!(n));
    }
    if let Some(t) = r.temperature {
        o.insert("temperature".into(), json!(t));
    }
    if let Some(p) = r.top_p {
        o.insert("top_p".into(), json!(p));
    }
    if !r.stop.is_empty() {
        o.insert("stop".into(), json!(r.stop));
    }
    if let Some((_, schema)) = &r.schema {
        o.insert("response_format".into(), json!({"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}));
    }
    o.insert("stream".into(), json!(r.stream));
    if r.stream {
        // The provider's own token counts, whatever the agent asked for.
        o.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(o))
}

fn write_message(m: &Message, out: &mut Vec<Value>) {
    match m.role {
        Role::Assistant => {
            let text: String = m.parts.iter().filter_map(|p| if let Part::Text(t) = p { Some(t.as_str()) } else { None }).collect::<Vec<_>>().join("");
            let calls: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall { id, name, args } => Some(json!({"id": id, "type": "function", "function": {"name": name, "arguments": if args.is_empty() { "{}" } else { args }}})),
                    _ => None,
                })
                .collect();
            let mut msg = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) }});
            if !calls.is_empty() {
                msg["tool_calls"] = Value::Array(calls);
            }
            out.push(msg);
        }
        Role::User => {
            // Tool results first: they answer the assistant message just before.
            for p in &m.parts {
                if let Part::ToolResult { id, output, error, .. } = p {
                    let content = if *error { format!("Error: {output}") } else { output.clone() };
                    out.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
                }
            }
            let texts: Vec<&str> = m.parts.iter().filter_map(|p| if let Part::Text(t) = p { Some(t.as_str()) } else { None }).collect();
            if !texts.is_empty() {
                out.push(json!({"role": "user", "content": texts.join("\n\n")}));
            }
        }
    }
}

fn stop_of(reason: &str) -> Stop {
    match reason {
        "stop" => Stop::End,
        "tool_calls" | "function_call" => Stop::ToolUse,
        "length" => Stop::MaxTokens,
        other => Stop::Other(other.to_string()),
    }
}

fn usage_of(u: &Value) -> Usage {
    Usage { input: u64_of(u.get("prompt_tokens")), output: u64_of(u.get("completion_tokens")), cache_read: u64_of(u.pointer("/prompt_tokens_details/cached_tokens")), cache_write: 0 }
}

/// Reads chunks: content deltas, tool-call deltas by their index, the finish reason, usage.
#[derive(Default)]
pub struct Decode {
    /// The provider's tool-call indices in the order they began.
    tools: Vec<u64>,
}

impl crate::Decoder for Decode {
    fn event(&mut self, _name: Option<&str>, data: &Value, out: &mut Vec<Event>) {
        if let Some(e) = data.get("error") {
            out.push(Event::Error(e.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| e.to_string())));
            return;
        }
        for c in data.get("choices").and_then(Value::as_array).into_iter().flatten() {
            let d = c.get("delta").unwrap_or(&Value::Null);
            if let Some(t) = d.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                out.push(Event::Text(t.to_string()));
            }
            for tc in d.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let key = tc.get("index").and_then(Value::as_u64).unwrap_or(self.tools.len() as u64);
                let index = match self.tools.iter().position(|k| *k == key) {
                    Some(i) => i,
                    None => {
                        self.tools.push(key);
                        let i = self.tools.len() - 1;
                        let id = tc.get("id").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| format!("call_{i}"));
                        let name = tc.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_string();
                        out.push(Event::ToolStart { index: i, id, name });
                        i
                    }
                };
                if let Some(a) = tc.pointer("/function/arguments").and_then(Value::as_str).filter(|a| !a.is_empty()) {
                    out.push(Event::ToolArgs { index, delta: a.to_string() });
                }
            }
            if let Some(r) = c.get("finish_reason").and_then(Value::as_str) {
                out.push(Event::Stop(stop_of(r)));
            }
        }
        if let Some(u) = data.get("usage").filter(|u| u.is_object()) {
            out.push(Event::Usage(usage_of(u)));
        }
    }

    fn whole(&mut self, body: &Value) -> Outcome {
        let mut o = Outcome::default();
        if let Some(e) = body.get("error") {
            o.error = Some(e.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| e.to_string()));
        }
        if let Some(c) = body.get("choices").and_then(|c| c.get(0)) {
            let m = c.get("message").unwrap_or(&Value::Null);
            if let Some(t) = m.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                o.parts.push(Part::Text(t.to_string()));
            }
            for (i, tc) in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
                let args = match tc.pointer("/function/arguments") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => String::new(),
                };
                let id = tc.get("id").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| format!("call_{i}"));
                o.parts.push(Part::ToolCall { id, name: tc.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_string(), args });
            }
            o.stop = c.get("finish_reason").and_then(Value::as_str).map(stop_of);
        }
        o.usage = body.get("usage").filter(|u| u.is_object()).map(usage_of);
        o
    }
}

fn finish_reason(s: &Stop) -> &str {
    match s {
        Stop::End | Stop::StopSequence => "stop",
        Stop::ToolUse => "tool_calls",
        Stop::MaxTokens => "length",
        Stop::Other(o) if o == "content_filter" => "content_filter",
        Stop::Other(_) => "stop",
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({"prompt_tokens": u.input, "completion_tokens": u.output, "total_tokens": u.input + u.output, "prompt_tokens_details": {"cached_tokens": u.cache_read}})
}

/// Writes chunks.
pub struct Encode {
    id: String,
    model: String,
    include_usage: bool,
    began: bool,
    outcome: Outcome,
}

impl Encode {
    pub fn new(ctx: &Context) -> Encode {
        Encode { id: format!("chatcmpl-bridge-{}", ctx.n), model: ctx.model.clone(), include_usage: ctx.include_usage, began: false, outcome: Outcome::default() }
    }

    fn chunk(&mut self, delta: Value, finish: Option<&str>, out: &mut String) {
        let mut delta = delta;
        if !self.began {
            self.began = true;
            delta["role"] = json!("assistant");
        }
        let data = json!({"id": self.id, "object": "chat.completion.chunk", "created": 0, "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        sse::write(out, None, &data);
    }
}

impl crate::Encoder for Encode {
    fn event(&mut self, e: &Event, out: &mut String) {
        self.outcome.apply(e);
        match e {
            Event::Text(t) => self.chunk(json!({"content": t}), None, out),
            Event::ToolStart { index, id, name } => self.chunk(json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}), None, out),
            Event::ToolArgs { index, delta } => self.chunk(json!({"tool_calls": [{"index": index, "function": {"arguments": delta}}]}), None, out),
            Event::Error(m) => sse::write(out, None, &json!({"error": {"message": m, "type": "api_error", "param": null, "code": null}})),
            Event::Stop(_) | Event::Usage(_) => {}
        }
    }

    fn finish(&mut self, out: &mut String) {
        if self.outcome.error.is_none() {
            let stop = self.outcome.stop_reason();
            self.chunk(json!({}), Some(finish_reason(&stop)), out);
            if self.include_usage {
                let usage = self.outcome.usage.unwrap_or_default();
                sse::write(out, None, &json!({"id": self.id, "object": "chat.completion.chunk", "created": 0, "model": self.model, "choices": [], "usage": usage_json(&usage)}));
            }
        }
        out.push_str("data: [DONE]\n\n");
    }
}

pub fn whole(o: &Outcome, ctx: &Context) -> Value {
    if let Some(e) = &o.error {
        return json!({"error": {"message": e, "type": "api_error", "param": null, "code": null}});
    }
    let text: String = o.parts.iter().filter_map(|p| if let Part::Text(t) = p { Some(t.as_str()) } else { None }).collect();
    let calls: Vec<Value> = o.calls().map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})).collect();
    let mut message = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) }});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let mut v = json!({"id": format!("chatcmpl-bridge-{}", ctx.n), "object": "chat.completion", "created": 0, "model": ctx.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(&o.stop_reason())}]});
    if let Some(u) = &o.usage {
        v["usage"] = usage_json(u);
    }
    v
}
