//! Anthropic Messages (`POST /v1/messages`).

use serde_json::{Map, Value, json};

use crate::chat::unknown_fields;
use crate::ir::{Event, Message, Outcome, Part, Request, Role, Stop, Tool, ToolChoice, Usage, joined, merged, u64_of};
use crate::{CannotCarry, Context, args_object, sse};

const HINTS: &[&str] = &["metadata", "thinking", "top_k", "service_tier", "context_management", "container", "mcp_servers"];
const READ: &[&str] = &["model", "system", "messages", "tools", "tool_choice", "max_tokens", "temperature", "top_p", "stop_sequences", "stream"];
/// Anthropic requires `max_tokens`; a request from a dialect without one gets this.
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

/// The text of blocks (or a string); `cache_control` markers are hints.
fn texts(v: &Value, at: &str, dropped: &mut Vec<String>) -> Result<Vec<String>, CannotCarry> {
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(blocks) => blocks
            .iter()
            .enumerate()
            .map(|(i, b)| {
                note_cache(b, &format!("{at}[{i}]"), dropped);
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => Ok(b.get("text").and_then(Value::as_str).unwrap_or_default().to_string()),
                    other => Err(CannotCarry(format!("{at}[{i}] is a `{}` block; the bridge carries text there", other.unwrap_or("untyped")))),
                }
            })
            .collect(),
        _ => Ok(Vec::new()),
    }
}

fn note_cache(block: &Value, at: &str, dropped: &mut Vec<String>) {
    if block.get("cache_control").is_some() && !dropped.iter().any(|d| d.ends_with("cache_control")) {
        dropped.push(format!("{at}.cache_control"));
    }
}

pub fn read_request(v: &Value, dropped: &mut Vec<String>) -> Result<Request, CannotCarry> {
    let obj = v.as_object().ok_or_else(|| CannotCarry("the request is not a JSON object".into()))?;
    unknown_fields(obj, READ, HINTS, "", dropped)?;
    let mut r = Request { model: obj.get("model").and_then(Value::as_str).unwrap_or_default().to_string(), ..Request::default() };
    if let Some(s) = obj.get("system") {
        r.system = texts(s, "system", dropped)?;
    }
    for (i, m) in obj.get("messages").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let role = match m.get("role").and_then(Value::as_str) {
            Some("assistant") => Role::Assistant,
            _ => Role::User,
        };
        let mut parts = Vec::new();
        match m.get("content") {
            Some(Value::String(s)) => parts.push(Part::Text(s.clone())),
            Some(Value::Array(blocks)) => {
                for (k, b) in blocks.iter().enumerate() {
                    let at = format!("messages[{i}].content[{k}]");
                    note_cache(b, &at, dropped);
                    match b.get("type").and_then(Value::as_str).unwrap_or_default() {
                        "text" => parts.push(Part::Text(b.get("text").and_then(Value::as_str).unwrap_or_default().to_string())),
                        "tool_use" => parts.push(Part::ToolCall {
                            id: b.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
                            name: b.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                            args: b.get("input").cloned().unwrap_or_else(|| json!({})).to_string(),
                        }),
                        "tool_result" => {
                            let output = match b.get("content") {
                                Some(c @ Value::Array(_)) => texts(c, &format!("{at}.content"), dropped)?.join("\n"),
                                Some(Value::String(s)) => s.clone(),
                                _ => String::new(),
                            };
                            parts.push(Part::ToolResult {
                                id: b.get("tool_use_id").and_then(Value::as_str).unwrap_or_default().to_string(),
                                name: None,
                                output,
                                error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                            });
                        }
                        // The model's own earlier reasoning: no other dialect takes it back.
                        "thinking" | "redacted_thinking" => {
                            if !dropped.iter().any(|d| d.ends_with("(thinking)")) {
                                dropped.push(format!("{at} (thinking)"));
                            }
                        }
                        other => return Err(CannotCarry(format!("{at} is a `{other}` block; the bridge carries text, tool_use and tool_result blocks"))),
                    }
                }
            }
            _ => {}
        }
        r.messages.push(Message { role, parts });
    }
    for (i, t) in obj.get("tools").and_then(Value::as_array).into_iter().flatten().enumerate() {
        // Server tools (`web_search_20250305`, …) run at the provider: nothing else runs them.
        if let Some(kind) = t.get("type").and_then(Value::as_str).filter(|k| *k != "custom") {
            return Err(CannotCarry(format!("tools[{i}] is the server tool `{kind}`, which only Anthropic's API runs")));
        }
        note_cache(t, &format!("tools[{i}]"), dropped);
        r.tools.push(Tool {
            name: t.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
            description: t.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
            parameters: t.get("input_schema").cloned().unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        });
    }
    r.tool_choice = obj.get("tool_choice").and_then(|c| c.get("type")).and_then(Value::as_str).map(|k| match k {
        "any" => ToolChoice::Required,
        "none" => ToolChoice::None,
        "tool" => ToolChoice::Named(obj["tool_choice"].get("name").and_then(Value::as_str).unwrap_or_default().to_string()),
        _ => ToolChoice::Auto,
    });
    r.max_tokens = obj.get("max_tokens").and_then(Value::as_u64);
    r.temperature = obj.get("temperature").and_then(Value::as_f64);
    r.top_p = obj.get("top_p").and_then(Value::as_f64);
    r.stop = obj.get("stop_sequences").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default();
    r.stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
    Ok(r)
}

pub fn write_request(r: &Request) -> Result<Value, CannotCarry> {
    if let Some((at, _)) = &r.schema {
        return Err(CannotCarry(format!("`{at}` asks for structured output, which Anthropic Messages has no field for")));
    }
    let mut messages = Vec::new();
    for (i, m) in merged(&r.messages).iter().enumerate() {
        let mut blocks = Vec::new();
        for p in &m.parts {
            blocks.push(match p {
                Part::Text(t) if t.is_empty() => continue,
                Part::Text(t) => json!({"type": "text", "text": t}),
                Part::ToolCall { id, name, args } => json!({"type": "tool_use", "id": id, "name": name, "input": args_object(args, || format!("the tool call `{name}` in message {i}"))?}),
                Part::ToolResult { id, output, error, .. } => json!({"type": "tool_result", "tool_use_id": id, "content": output, "is_error": error}),
            });
        }
        if blocks.is_empty() {
            blocks.push(json!({"type": "text", "text": "."}));
        }
        messages.push(json!({"role": if m.role == Role::Assistant { "assistant" } else { "user" }, "content": blocks}));
    }
    let mut o = Map::new();
    o.insert("model".into(), json!(r.model));
    o.insert("max_tokens".into(), json!(r.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)));
    if !r.system.is_empty() {
        o.insert("system".into(), json!(joined(&r.system)));
    }
    o.insert("messages".into(), Value::Array(messages));
    if !r.tools.is_empty() {
        o.insert("tools".into(), r.tools.iter().map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters})).collect());
    }
    if let Some(c) = &r.tool_choice {
        o.insert("tool_choice".into(), match c {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Named(n) => json!({"type": "tool", "name": n}),
        });
    }
    if let Some(t) = r.temperature {
        o.insert("temperature".into(), json!(t));
    }
    if let Some(p) = r.top_p {
        o.insert("top_p".into(), json!(p));
    }
    if !r.stop.is_empty() {
        o.insert("stop_sequences".into(), json!(r.stop));
    }
    o.insert("stream".into(), json!(r.stream));
    Ok(Value::Object(o))
}

fn stop_of(reason: &str) -> Stop {
    match reason {
        "end_turn" => Stop::End,
        "tool_use" => Stop::ToolUse,
        "max_tokens" => Stop::MaxTokens,
        "stop_sequence" => Stop::StopSequence,
        other => Stop::Other(other.to_string()),
    }
}

fn stop_reason(s: &Stop) -> &str {
    match s {
        Stop::End => "end_turn",
        Stop::ToolUse => "tool_use",
        Stop::MaxTokens => "max_tokens",
        Stop::StopSequence => "stop_sequence",
        Stop::Other(o) if o == "refusal" || o == "pause_turn" => o,
        Stop::Other(_) => "end_turn",
    }
}

/// Anthropic's `input_tokens` leaves out the cached ones.
fn usage_of(u: &Value) -> Usage {
    let (read, write) = (u64_of(u.get("cache_read_input_tokens")), u64_of(u.get("cache_creation_input_tokens")));
    Usage { input: u64_of(u.get("input_tokens")) + read + write, output: u64_of(u.get("output_tokens")), cache_read: read, cache_write: write }
}

fn usage_json(u: &Usage) -> Value {
    json!({"input_tokens": u.input.saturating_sub(u.cache_read + u.cache_write), "output_tokens": u.output, "cache_creation_input_tokens": u.cache_write, "cache_read_input_tokens": u.cache_read})
}

/// Reads `message_start`, content blocks by index, `message_delta`.
#[derive(Default)]
pub struct Decode {
    /// The provider's block index of each tool call, in order.
    tools: Vec<u64>,
    usage: Usage,
}

impl crate::Decoder for Decode {
    fn event(&mut self, _name: Option<&str>, d: &Value, out: &mut Vec<Event>) {
        match d.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message_start" => {
                if let Some(u) = d.pointer("/message/usage") {
                    self.usage = usage_of(u);
                }
            }
            "content_block_start" => {
                let b = d.get("content_block").unwrap_or(&Value::Null);
                match b.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        self.tools.push(u64_of(d.get("index")));
                        let index = self.tools.len() - 1;
                        out.push(Event::ToolStart { index, id: b["id"].as_str().unwrap_or_default().to_string(), name: b["name"].as_str().unwrap_or_default().to_string() });
                        if let Some(input) = b.get("input").filter(|i| i.as_object().is_some_and(|o| !o.is_empty())) {
                            out.push(Event::ToolArgs { index, delta: input.to_string() });
                        }
                    }
                    Some("text") => {
                        if let Some(t) = b.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                            out.push(Event::Text(t.to_string()));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta = d.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => out.push(Event::Text(delta["text"].as_str().unwrap_or_default().to_string())),
                    Some("input_json_delta") => {
                        let key = u64_of(d.get("index"));
                        if let Some(index) = self.tools.iter().position(|k| *k == key) {
                            out.push(Event::ToolArgs { index, delta: delta["partial_json"].as_str().unwrap_or_default().to_string() });
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(u) = d.get("usage") {
                    let more = usage_of(u);
                    self.usage.output = more.output;
                    if more.input > 0 {
                        self.usage = Usage { output: more.output, ..more };
                    }
                }
                out.push(Event::Usage(self.usage));
                if let Some(r) = d.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    out.push(Event::Stop(stop_of(r)));
                }
            }
            "error" => out.push(Event::Error(d.pointer("/error/message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| d.to_string()))),
            _ => {}
        }
    }

    fn whole(&mut self, body: &Value) -> Outcome {
        let mut o = Outcome::default();
        if body.get("type").and_then(Value::as_str) == Some("error") {
            o.error = Some(body.pointer("/error/message").and_then(Value::as_str).unwrap_or_default().to_string());
            return o;
        }
        for b in body.get("content").and_then(Value::as_array).into_iter().flatten() {
            match b.get("type").and_then(Value::as_str) {
                Some("text") => o.parts.push(Part::Text(b["text"].as_str().unwrap_or_default().to_string())),
                Some("tool_use") => o.parts.push(Part::ToolCall {
                    id: b["id"].as_str().unwrap_or_default().to_string(),
                    name: b["name"].as_str().unwrap_or_default().to_string(),
                    args: b.get("input").cloned().unwrap_or_else(|| json!({})).to_string(),
                }),
                _ => {}
            }
        }
        o.stop = body.get("stop_reason").and_then(Value::as_str).map(stop_of);
        o.usage = body.get("usage").map(usage_of);
        o
    }
}

/// Writes `message_start`, one content block at a time, `message_delta` and `message_stop`.
pub struct Encode {
    id: String,
    model: String,
    began: bool,
    /// The open block: its index, and the reply's tool index when it is a tool call.
    open: Option<(usize, Option<usize>)>,
    blocks: usize,
    outcome: Outcome,
}

impl Encode {
    pub fn new(ctx: &Context) -> Encode {
        Encode { id: format!("msg_bridge_{}", ctx.n), model: ctx.model.clone(), began: false, open: None, blocks: 0, outcome: Outcome::default() }
    }

    fn begin(&mut self, out: &mut String) {
        if !self.began {
            self.began = true;
            let message = json!({"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage_json(&Usage::default())});
            sse::write(out, Some("message_start"), &json!({"type": "message_start", "message": message}));
        }
    }

    fn close(&mut self, out: &mut String) {
        if let Some((index, _)) = self.open.take() {
            sse::write(out, Some("content_block_stop"), &json!({"type": "content_block_stop", "index": index}));
        }
    }

    fn open(&mut self, block: Value, tool: Option<usize>, out: &mut String) -> usize {
        self.close(out);
        let index = self.blocks;
        self.blocks += 1;
        self.open = Some((index, tool));
        sse::write(out, Some("content_block_start"), &json!({"type": "content_block_start", "index": index, "content_block": block}));
        index
    }

    fn delta(out: &mut String, index: usize, delta: Value) {
        sse::write(out, Some("content_block_delta"), &json!({"type": "content_block_delta", "index": index, "delta": delta}));
    }
}

impl crate::Encoder for Encode {
    fn event(&mut self, e: &Event, out: &mut String) {
        self.outcome.apply(e);
        match e {
            Event::Text(t) => {
                self.begin(out);
                let index = match self.open {
                    Some((i, None)) => i,
                    _ => self.open(json!({"type": "text", "text": ""}), None, out),
                };
                Encode::delta(out, index, json!({"type": "text_delta", "text": t}));
            }
            Event::ToolStart { index, id, name } => {
                self.begin(out);
                self.open(json!({"type": "tool_use", "id": id, "name": name, "input": {}}), Some(*index), out);
            }
            Event::ToolArgs { index, delta } => match self.open {
                Some((block, Some(tool))) if tool == *index => Encode::delta(out, block, json!({"type": "input_json_delta", "partial_json": delta})),
                _ => {
                    let message = "the provider interleaved the arguments of two tool calls, which Anthropic Messages streams cannot carry";
                    self.outcome.error = Some(message.into());
                    sse::write(out, Some("error"), &json!({"type": "error", "error": {"type": "api_error", "message": message}}));
                }
            },
            Event::Error(m) => {
                self.begin(out);
                sse::write(out, Some("error"), &json!({"type": "error", "error": {"type": "api_error", "message": m}}));
            }
            Event::Stop(_) | Event::Usage(_) => {}
        }
    }

    fn finish(&mut self, out: &mut String) {
        if self.outcome.error.is_some() {
            return;
        }
        self.begin(out);
        self.close(out);
        let usage = self.outcome.usage.unwrap_or_default();
        sse::write(out, Some("message_delta"), &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(&self.outcome.stop_reason()), "stop_sequence": null}, "usage": usage_json(&usage)}));
        sse::write(out, Some("message_stop"), &json!({"type": "message_stop"}));
    }
}

pub fn whole(o: &Outcome, ctx: &Context) -> Value {
    if let Some(e) = &o.error {
        return json!({"type": "error", "error": {"type": "api_error", "message": e}});
    }
    let mut content = Vec::new();
    for p in &o.parts {
        content.push(match p {
            Part::Text(t) => json!({"type": "text", "text": t}),
            Part::ToolCall { id, name, args } => match args_object(args, || format!("the provider's call of `{name}`")) {
                Ok(input) => json!({"type": "tool_use", "id": id, "name": name, "input": input}),
                Err(e) => return json!({"type": "error", "error": {"type": "api_error", "message": e.0}}),
            },
            Part::ToolResult { .. } => continue,
        });
    }
    json!({"id": format!("msg_bridge_{}", ctx.n), "type": "message", "role": "assistant", "model": ctx.model, "content": content,
        "stop_reason": stop_reason(&o.stop_reason()), "stop_sequence": null, "usage": usage_json(&o.usage.unwrap_or_default())})
}
