//! OpenAI Responses (`POST /v1/responses`).

use serde_json::{Map, Value, json};

use crate::chat::unknown_fields;
use crate::ir::{Event, Outcome, Part, Request, Role, Stop, Tool, ToolChoice, Usage, joined, push_part, u64_of};
use crate::{CannotCarry, Context, sse};

const HINTS: &[&str] = &["store", "include", "prompt_cache_key", "reasoning", "parallel_tool_calls", "metadata", "user", "service_tier", "safety_identifier", "truncation", "client_metadata"];
const READ: &[&str] = &["model", "instructions", "input", "tools", "tool_choice", "max_output_tokens", "temperature", "top_p", "stream", "text"];

/// The text of an input message's content: a string, or text parts.
fn content_text(c: &Value, at: &str) -> Result<String, CannotCarry> {
    match c {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut text = Vec::new();
            for (i, p) in parts.iter().enumerate() {
                match p.get("type").and_then(Value::as_str) {
                    Some("input_text" | "output_text" | "text") => text.push(p.get("text").and_then(Value::as_str).unwrap_or_default()),
                    other => return Err(CannotCarry(format!("{at}.content[{i}] is a `{}` part; the bridge carries text parts only", other.unwrap_or("untyped")))),
                }
            }
            Ok(text.join(""))
        }
        _ => Ok(String::new()),
    }
}

/// A tool's output: a string, or text parts.
fn output_text(v: Option<&Value>, at: &str) -> Result<String, CannotCarry> {
    match v {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(a @ Value::Array(_)) => content_text(a, at),
        Some(other) => Ok(other.to_string()),
        None => Ok(String::new()),
    }
}

pub fn read_request(v: &Value, dropped: &mut Vec<String>, ctx: &mut Context) -> Result<Request, CannotCarry> {
    let obj = v.as_object().ok_or_else(|| CannotCarry("the request is not a JSON object".into()))?;
    unknown_fields(obj, READ, HINTS, "", dropped)?;
    let mut r = Request { model: obj.get("model").and_then(Value::as_str).unwrap_or_default().to_string(), ..Request::default() };
    if let Some(i) = obj.get("instructions").and_then(Value::as_str) {
        r.system.push(i.to_string());
    }
    match obj.get("input") {
        Some(Value::String(s)) => push_part(&mut r.messages, Role::User, Part::Text(s.clone())),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let at = format!("input[{i}]");
                let kind = item.get("type").and_then(Value::as_str).unwrap_or("message");
                let id = || item.get("call_id").and_then(Value::as_str).unwrap_or_default().to_string();
                match kind {
                    "message" => {
                        let text = content_text(item.get("content").unwrap_or(&Value::Null), &at)?;
                        match item.get("role").and_then(Value::as_str).unwrap_or("user") {
                            "system" | "developer" => r.system.push(text),
                            "assistant" => push_part(&mut r.messages, Role::Assistant, Part::Text(text)),
                            _ => push_part(&mut r.messages, Role::User, Part::Text(text)),
                        }
                    }
                    "function_call" => {
                        let name = item.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                        let args = item.get("arguments").and_then(Value::as_str).unwrap_or_default().to_string();
                        push_part(&mut r.messages, Role::Assistant, Part::ToolCall { id: id(), name, args });
                    }
                    "custom_tool_call" => {
                        let name = item.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                        let args = json!({"input": item.get("input").and_then(Value::as_str).unwrap_or_default()}).to_string();
                        push_part(&mut r.messages, Role::Assistant, Part::ToolCall { id: id(), name, args });
                    }
                    "function_call_output" | "custom_tool_call_output" => {
                        let output = output_text(item.get("output"), &at)?;
                        push_part(&mut r.messages, Role::User, Part::ToolResult { id: id(), name: None, output, error: false });
                    }
                    // The model's own earlier reasoning (encrypted or summarised): no other
                    // dialect takes it back.
                    "reasoning" => {
                        if !dropped.iter().any(|d| d.ends_with("(reasoning)")) {
                            dropped.push(format!("{at} (reasoning)"));
                        }
                    }
                    other => return Err(CannotCarry(format!("{at} is a `{other}` item; the bridge carries messages, function and custom tool calls and their outputs"))),
                }
            }
        }
        _ => {}
    }
    for (i, t) in obj.get("tools").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let name = t.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        let description = t.get("description").and_then(Value::as_str).unwrap_or_default().to_string();
        match t.get("type").and_then(Value::as_str).unwrap_or("function") {
            "function" => r.tools.push(Tool { name, description, parameters: t.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object", "properties": {}})) }),
            // A freeform tool takes one string: a function of one string argument carries it.
            "custom" => {
                ctx.custom_tools.push(name.clone());
                let parameters = json!({"type": "object", "properties": {"input": {"type": "string", "description": "The tool's whole input, as free text."}}, "required": ["input"]});
                r.tools.push(Tool { name, description, parameters });
            }
            other => return Err(CannotCarry(format!("tools[{i}] is the hosted tool `{other}`, which only OpenAI's API runs"))),
        }
    }
    r.tool_choice = crate::chat::tool_choice(obj.get("tool_choice"), "/name");
    r.max_tokens = obj.get("max_output_tokens").and_then(Value::as_u64);
    r.temperature = obj.get("temperature").and_then(Value::as_f64);
    r.top_p = obj.get("top_p").and_then(Value::as_f64);
    r.stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if let Some(text) = obj.get("text") {
        match text.pointer("/format/type").and_then(Value::as_str) {
            None | Some("text") => {
                if text.get("verbosity").is_some() {
                    dropped.push("text.verbosity".into());
                }
            }
            Some("json_schema") => r.schema = Some(("text.format".into(), text.pointer("/format/schema").cloned().unwrap_or(json!({})))),
            Some("json_object") => r.schema = Some(("text.format".into(), json!({"type": "object"}))),
            Some(other) => return Err(CannotCarry(format!("text.format of type `{other}` has no equivalent the bridge knows"))),
        }
    }
    Ok(r)
}

pub fn write_request(r: &Request) -> Result<Value, CannotCarry> {
    if !r.stop.is_empty() {
        return Err(CannotCarry("the request's stop sequences have no field in OpenAI Responses".into()));
    }
    let mut input = Vec::new();
    for m in &r.messages {
        for p in &m.parts {
            input.push(match (m.role, p) {
                (Role::User, Part::Text(t)) => json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}),
                (Role::Assistant, Part::Text(t)) if t.is_empty() => continue,
                (Role::Assistant, Part::Text(t)) => json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t}]}),
                (_, Part::ToolCall { id, name, args }) => json!({"type": "function_call", "call_id": id, "name": name, "arguments": if args.is_empty() { "{}" } else { args }}),
                (_, Part::ToolResult { id, output, error, .. }) => json!({"type": "function_call_output", "call_id": id, "output": if *error { format!("Error: {output}") } else { output.clone() }}),
            });
        }
    }
    let mut o = Map::new();
    o.insert("model".into(), json!(r.model));
    if !r.system.is_empty() {
        o.insert("instructions".into(), json!(joined(&r.system)));
    }
    o.insert("input".into(), Value::Array(input));
    if !r.tools.is_empty() {
        o.insert("tools".into(), r.tools.iter().map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters})).collect());
    }
    if let Some(c) = &r.tool_choice {
        o.insert("tool_choice".into(), match c {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Named(n) => json!({"type": "function", "name": n}),
        });
    }
    if let Some(n) = r.max_tokens {
        o.insert("max_output_tokens".into(), json!(n));
    }
    if let Some(t) = r.temperature {
        o.insert("temperature".into(), json!(t));
    }
    if let Some(p) = r.top_p {
        o.insert("top_p".into(), json!(p));
    }
    if let Some((_, schema)) = &r.schema {
        o.insert("text".into(), json!({"format": {"type": "json_schema", "name": "reply", "schema": schema}}));
    }
    o.insert("store".into(), json!(false));
    o.insert("stream".into(), json!(r.stream));
    Ok(Value::Object(o))
}

fn usage_of(u: &Value) -> Usage {
    Usage { input: u64_of(u.get("input_tokens")), output: u64_of(u.get("output_tokens")), cache_read: u64_of(u.pointer("/input_tokens_details/cached_tokens")), cache_write: 0 }
}

/// The stop of a finished response (`completed`, or `incomplete` for a length limit).
fn stop_of(response: &Value) -> Stop {
    match response.get("status").and_then(Value::as_str) {
        Some("incomplete") => match response.pointer("/incomplete_details/reason").and_then(Value::as_str) {
            Some("max_output_tokens") | None => Stop::MaxTokens,
            Some(other) => Stop::Other(other.to_string()),
        },
        _ => Stop::End,
    }
}

fn error_of(d: &Value) -> String {
    d.pointer("/response/error/message").or_else(|| d.pointer("/error/message")).or_else(|| d.get("message")).and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| d.to_string())
}

/// Reads output items by their index, text and argument deltas, and the finished response.
#[derive(Default)]
pub struct Decode {
    /// The output index of each function call, in order, and whether its arguments came as
    /// deltas (else they come whole when the item is done).
    tools: Vec<(u64, bool)>,
}

impl Decode {
    fn tool(&mut self, output_index: u64) -> Option<usize> {
        self.tools.iter().position(|(k, _)| *k == output_index)
    }
}

impl crate::Decoder for Decode {
    fn event(&mut self, name: Option<&str>, d: &Value, out: &mut Vec<Event>) {
        let kind = d.get("type").and_then(Value::as_str).or(name).unwrap_or_default();
        let at = u64_of(d.get("output_index"));
        match kind {
            "response.output_item.added" => {
                let item = d.get("item").unwrap_or(&Value::Null);
                if let Some(k @ ("function_call" | "custom_tool_call")) = item.get("type").and_then(Value::as_str) {
                    self.tools.push((at, false));
                    let index = self.tools.len() - 1;
                    let id = item.get("call_id").or_else(|| item.get("id")).and_then(Value::as_str).unwrap_or_default().to_string();
                    out.push(Event::ToolStart { index, id, name: item["name"].as_str().unwrap_or_default().to_string() });
                    let args = if k == "custom_tool_call" { item.get("input") } else { item.get("arguments") };
                    if let Some(a) = args.and_then(Value::as_str).filter(|a| !a.is_empty()) {
                        self.tools[index].1 = true;
                        out.push(Event::ToolArgs { index, delta: if k == "custom_tool_call" { json!({"input": a}).to_string() } else { a.to_string() } });
                    }
                }
            }
            "response.output_text.delta" => out.push(Event::Text(d["delta"].as_str().unwrap_or_default().to_string())),
            "response.function_call_arguments.delta" => {
                if let Some(index) = self.tool(at) {
                    self.tools[index].1 = true;
                    out.push(Event::ToolArgs { index, delta: d["delta"].as_str().unwrap_or_default().to_string() });
                }
            }
            "response.output_item.done" => {
                // Arguments some servers send only whole, with the finished item.
                if let Some(index) = self.tool(at).filter(|i| !self.tools[*i].1) {
                    self.tools[index].1 = true;
                    let item = d.get("item").unwrap_or(&Value::Null);
                    let args = match item.get("type").and_then(Value::as_str) {
                        Some("custom_tool_call") => json!({"input": item["input"].as_str().unwrap_or_default()}).to_string(),
                        _ => item["arguments"].as_str().unwrap_or_default().to_string(),
                    };
                    if !args.is_empty() {
                        out.push(Event::ToolArgs { index, delta: args });
                    }
                }
            }
            "response.completed" | "response.incomplete" => {
                let r = d.get("response").unwrap_or(&Value::Null);
                if let Some(u) = r.get("usage").filter(|u| u.is_object()) {
                    out.push(Event::Usage(usage_of(u)));
                }
                out.push(Event::Stop(stop_of(r)));
            }
            "response.failed" | "error" => out.push(Event::Error(error_of(d))),
            _ => {}
        }
    }

    fn whole(&mut self, body: &Value) -> Outcome {
        let mut o = Outcome::default();
        if body.get("error").is_some_and(|e| !e.is_null()) {
            o.error = Some(error_of(body));
            return o;
        }
        for item in body.get("output").and_then(Value::as_array).into_iter().flatten() {
            match item.get("type").and_then(Value::as_str) {
                Some("message") => {
                    for c in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                        if let Some(t) = c.get("text").and_then(Value::as_str) {
                            o.parts.push(Part::Text(t.to_string()));
                        }
                    }
                }
                Some(k @ ("function_call" | "custom_tool_call")) => o.parts.push(Part::ToolCall {
                    id: item.get("call_id").and_then(Value::as_str).unwrap_or_default().to_string(),
                    name: item["name"].as_str().unwrap_or_default().to_string(),
                    args: if k == "custom_tool_call" { json!({"input": item["input"].as_str().unwrap_or_default()}).to_string() } else { item["arguments"].as_str().unwrap_or_default().to_string() },
                }),
                _ => {}
            }
        }
        o.stop = Some(stop_of(body));
        o.usage = body.get("usage").filter(|u| u.is_object()).map(usage_of);
        o
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({"input_tokens": u.input, "input_tokens_details": {"cached_tokens": u.cache_read}, "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": u.input + u.output})
}

/// An output item the encoder has open: its index, and its kind.
enum Open {
    Message { index: usize, id: String, text: String },
    Call { index: usize, tool: usize, id: String, call_id: String, name: String, args: String, custom: bool },
}

/// Writes the response's events: created, output items with their deltas, completed.
pub struct Encode {
    id: String,
    model: String,
    custom_tools: Vec<String>,
    began: bool,
    open: Option<Open>,
    /// The finished output items.
    done: Vec<Value>,
    outcome: Outcome,
    seq: u64,
}

impl Encode {
    pub fn new(ctx: &Context) -> Encode {
        Encode { id: format!("resp_bridge_{}", ctx.n), model: ctx.model.clone(), custom_tools: ctx.custom_tools.clone(), began: false, open: None, done: Vec::new(), outcome: Outcome::default(), seq: 0 }
    }

    fn write(&mut self, out: &mut String, mut data: Value) {
        let kind = data["type"].as_str().unwrap_or_default().to_string();
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        sse::write(out, Some(&kind), &data);
    }

    fn response(&self, status: &str, output: Vec<Value>, usage: Option<&Usage>) -> Value {
        let mut r = json!({"id": self.id, "object": "response", "created_at": 0, "status": status, "model": self.model, "output": output});
        if let Some(u) = usage {
            r["usage"] = usage_json(u);
        }
        r
    }

    fn begin(&mut self, out: &mut String) {
        if !self.began {
            self.began = true;
            let r = self.response("in_progress", Vec::new(), None);
            self.write(out, json!({"type": "response.created", "response": r}));
            let r = self.response("in_progress", Vec::new(), None);
            self.write(out, json!({"type": "response.in_progress", "response": r}));
        }
    }

    fn close(&mut self, out: &mut String) {
        let item = match self.open.take() {
            None => return,
            Some(Open::Message { index, id, text }) => {
                let part = json!({"type": "output_text", "text": text, "annotations": []});
                self.write(out, json!({"type": "response.output_text.done", "item_id": id, "output_index": index, "content_index": 0, "text": text}));
                self.write(out, json!({"type": "response.content_part.done", "item_id": id, "output_index": index, "content_index": 0, "part": part}));
                (index, json!({"type": "message", "id": id, "status": "completed", "role": "assistant", "content": [part]}))
            }
            Some(Open::Call { index, tool: _, id, call_id, name, args, custom }) => {
                let item = if custom {
                    // The function's one argument, `input`, is the freeform tool's input.
                    let input = serde_json::from_str::<Value>(&args).ok().and_then(|v| v.get("input").and_then(Value::as_str).map(str::to_string)).unwrap_or(args);
                    json!({"type": "custom_tool_call", "id": id, "status": "completed", "call_id": call_id, "name": name, "input": input})
                } else {
                    self.write(out, json!({"type": "response.function_call_arguments.done", "item_id": id, "output_index": index, "arguments": args}));
                    json!({"type": "function_call", "id": id, "status": "completed", "call_id": call_id, "name": name, "arguments": args})
                };
                (index, item)
            }
        };
        self.write(out, json!({"type": "response.output_item.done", "output_index": item.0, "item": item.1}));
        self.done.push(item.1);
    }
}

impl crate::Encoder for Encode {
    fn event(&mut self, e: &Event, out: &mut String) {
        self.outcome.apply(e);
        match e {
            Event::Text(t) => {
                self.begin(out);
                if !matches!(self.open, Some(Open::Message { .. })) {
                    self.close(out);
                    let (index, id) = (self.done.len(), format!("msg_bridge_{}_{}", self.id, self.done.len()));
                    self.write(out, json!({"type": "response.output_item.added", "output_index": index, "item": {"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []}}));
                    self.write(out, json!({"type": "response.content_part.added", "item_id": id, "output_index": index, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}));
                    self.open = Some(Open::Message { index, id, text: String::new() });
                }
                if let Some(Open::Message { index, id, text }) = &mut self.open {
                    text.push_str(t);
                    let data = json!({"type": "response.output_text.delta", "item_id": id, "output_index": index, "content_index": 0, "delta": t});
                    self.write(out, data);
                }
            }
            Event::ToolStart { index: tool, id: call_id, name } => {
                self.begin(out);
                self.close(out);
                let index = self.done.len();
                let id = format!("fc_bridge_{index}_{}", self.id);
                let custom = self.custom_tools.contains(name);
                let item = if custom {
                    json!({"type": "custom_tool_call", "id": id, "status": "in_progress", "call_id": call_id, "name": name, "input": ""})
                } else {
                    json!({"type": "function_call", "id": id, "status": "in_progress", "call_id": call_id, "name": name, "arguments": ""})
                };
                self.write(out, json!({"type": "response.output_item.added", "output_index": index, "item": item}));
                self.open = Some(Open::Call { index, tool: *tool, id, call_id: call_id.clone(), name: name.clone(), args: String::new(), custom });
            }
            Event::ToolArgs { index: tool, delta } => match &mut self.open {
                Some(Open::Call { index, tool: open, id, args, custom, .. }) if *open == *tool => {
                    args.push_str(delta);
                    // A freeform tool's input is written whole when the call is done.
                    if !*custom {
                        let data = json!({"type": "response.function_call_arguments.delta", "item_id": id, "output_index": index, "delta": delta});
                        self.write(out, data);
                    }
                }
                _ => {
                    let message = "the provider interleaved the arguments of two tool calls, which this stream cannot carry";
                    self.outcome.error = Some(message.into());
                    self.write(out, json!({"type": "error", "code": "bridge", "message": message, "param": null}));
                }
            },
            Event::Error(m) => {
                self.begin(out);
                let mut r = self.response("failed", Vec::new(), None);
                r["error"] = json!({"code": "server_error", "message": m});
                self.write(out, json!({"type": "response.failed", "response": r}));
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
        let (status, kind) = match self.outcome.stop_reason() {
            Stop::MaxTokens => ("incomplete", "response.incomplete"),
            _ => ("completed", "response.completed"),
        };
        let mut r = self.response(status, self.done.clone(), self.outcome.usage.as_ref());
        if status == "incomplete" {
            r["incomplete_details"] = json!({"reason": "max_output_tokens"});
        }
        self.write(out, json!({"type": kind, "response": r}));
    }
}

pub fn whole(o: &Outcome, ctx: &Context) -> Value {
    let mut e = Encode::new(ctx);
    let mut sink = String::new();
    if let Some(m) = &o.error {
        let mut r = e.response("failed", Vec::new(), None);
        r["error"] = json!({"code": "server_error", "message": m});
        return r;
    }
    for ev in o.events() {
        crate::Encoder::event(&mut e, &ev, &mut sink);
    }
    e.close(&mut sink);
    let status = if o.stop_reason() == Stop::MaxTokens { "incomplete" } else { "completed" };
    e.response(status, e.done.clone(), o.usage.as_ref())
}
