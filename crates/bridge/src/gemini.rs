//! Gemini `generateContent` and `streamGenerateContent` (`/v1beta/models/<model>:<method>`).
//!
//! Gemini's function calls need not carry ids, and its function responses name the function
//! instead: calls without an id get one made from their place in the conversation
//! (`call_<content>_<part>`, the same every time the history is resent), and a response
//! without an id answers the earliest unanswered call of its function.

use serde_json::{Map, Value, json};

use crate::chat::unknown_fields;
use crate::ir::{Event, Message, Outcome, Part, Request, Role, Stop, Tool, ToolChoice, Usage, joined, merged, u64_of};
use crate::{CannotCarry, Context, args_object, sse};

const HINTS: &[&str] = &["safetySettings", "cachedContent", "labels"];
const READ: &[&str] = &["contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "model"];
const CONFIG_HINTS: &[&str] = &["thinkingConfig", "topK", "candidateCount", "seed", "presencePenalty", "frequencyPenalty", "responseMimeType"];
const CONFIG_READ: &[&str] = &["maxOutputTokens", "temperature", "topP", "stopSequences", "responseJsonSchema", "responseSchema"];

fn texts(parts: Option<&Value>, at: &str) -> Result<Vec<String>, CannotCarry> {
    let mut out = Vec::new();
    for (i, p) in parts.and_then(Value::as_array).into_iter().flatten().enumerate() {
        match p.get("text").and_then(Value::as_str) {
            Some(t) => out.push(t.to_string()),
            None => return Err(CannotCarry(format!("{at}.parts[{i}] is not text; the bridge carries text there"))),
        }
    }
    Ok(out)
}

/// The text a function response carries: its `output` (Gemini CLI's), its `error`, or the
/// whole response as JSON.
fn response_text(r: &Value) -> (String, bool) {
    if let Some(o) = r.get("output").and_then(Value::as_str) {
        return (o.to_string(), false);
    }
    if let Some(e) = r.get("error") {
        return (e.as_str().map(str::to_string).unwrap_or_else(|| e.to_string()), true);
    }
    (r.to_string(), false)
}

pub fn read_request(path: &str, v: &Value, dropped: &mut Vec<String>, ctx: &mut Context) -> Result<Request, CannotCarry> {
    let obj = v.as_object().ok_or_else(|| CannotCarry("the request is not a JSON object".into()))?;
    unknown_fields(obj, READ, HINTS, "", dropped)?;
    let route = path.split('?').next().unwrap_or(path);
    let (model, method) = route.rsplit_once('/').map(|(_, m)| m).and_then(|m| m.split_once(':')).unwrap_or(("", ""));
    let stream = method == "streamGenerateContent";
    ctx.json_array = stream && !path.contains("alt=sse");
    let mut r = Request { model: model.to_string(), stream, ..Request::default() };
    if let Some(s) = obj.get("systemInstruction") {
        r.system = texts(s.get("parts"), "systemInstruction")?;
    }
    // Calls made so far, for function responses without an id: (id, name, answered).
    let mut calls: Vec<(String, String, bool)> = Vec::new();
    for (i, c) in obj.get("contents").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let role = if c.get("role").and_then(Value::as_str) == Some("model") { Role::Assistant } else { Role::User };
        let mut parts = Vec::new();
        for (k, p) in c.get("parts").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let at = format!("contents[{i}].parts[{k}]");
            if p.get("thought").and_then(Value::as_bool) == Some(true) {
                if !dropped.iter().any(|d| d.ends_with("(thought)")) {
                    dropped.push(format!("{at} (thought)"));
                }
                continue;
            }
            if let Some(t) = p.get("text").and_then(Value::as_str) {
                parts.push(Part::Text(t.to_string()));
            } else if let Some(f) = p.get("functionCall") {
                let name = f.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                let id = f.get("id").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| format!("call_{i}_{k}"));
                calls.push((id.clone(), name.clone(), false));
                parts.push(Part::ToolCall { id, name, args: f.get("args").cloned().unwrap_or_else(|| json!({})).to_string() });
            } else if let Some(f) = p.get("functionResponse") {
                let name = f.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                let id = match f.get("id").and_then(Value::as_str) {
                    Some(id) => id.to_string(),
                    None => match calls.iter_mut().find(|(_, n, answered)| *n == name && !answered) {
                        Some(call) => {
                            call.2 = true;
                            call.0.clone()
                        }
                        None => return Err(CannotCarry(format!("{at} answers `{name}`, which no earlier call in the conversation made"))),
                    },
                };
                if let Some(call) = calls.iter_mut().find(|(c, ..)| *c == id) {
                    call.2 = true;
                }
                let (output, error) = response_text(f.get("response").unwrap_or(&Value::Null));
                parts.push(Part::ToolResult { id, name: Some(name), output, error });
            } else if p.get("thoughtSignature").is_some() && p.as_object().is_some_and(|o| o.len() == 1) {
                continue;
            } else {
                let kind = p.as_object().and_then(|o| o.keys().next().cloned()).unwrap_or_default();
                return Err(CannotCarry(format!("{at} is a `{kind}` part; the bridge carries text, function calls and function responses")));
            }
        }
        r.messages.push(Message { role, parts });
    }
    for (i, t) in obj.get("tools").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let Some(decls) = t.get("functionDeclarations").and_then(Value::as_array) else {
            let kind = t.as_object().and_then(|o| o.keys().next().cloned()).unwrap_or_default();
            return Err(CannotCarry(format!("tools[{i}] is the built-in tool `{kind}`, which only Google's API runs")));
        };
        for d in decls {
            r.tools.push(Tool {
                name: d.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                description: d.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
                parameters: d.get("parametersJsonSchema").or_else(|| d.get("parameters")).cloned().unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            });
        }
    }
    r.tool_choice = v.pointer("/toolConfig/functionCallingConfig").map(|c| {
        let names = c.get("allowedFunctionNames").and_then(Value::as_array);
        match c.get("mode").and_then(Value::as_str) {
            Some("ANY") => match names.filter(|n| n.len() == 1) {
                Some(n) => ToolChoice::Named(n[0].as_str().unwrap_or_default().to_string()),
                None => ToolChoice::Required,
            },
            Some("NONE") => ToolChoice::None,
            _ => ToolChoice::Auto,
        }
    });
    if let Some(g) = obj.get("generationConfig").and_then(Value::as_object) {
        unknown_fields(g, CONFIG_READ, CONFIG_HINTS, "generationConfig.", dropped)?;
        r.max_tokens = g.get("maxOutputTokens").and_then(Value::as_u64);
        r.temperature = g.get("temperature").and_then(Value::as_f64);
        r.top_p = g.get("topP").and_then(Value::as_f64);
        r.stop = g.get("stopSequences").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default();
        if let Some((field, s)) = g.get("responseJsonSchema").map(|s| ("responseJsonSchema", s)).or_else(|| g.get("responseSchema").map(|s| ("responseSchema", s))) {
            r.schema = Some((format!("generationConfig.{field}"), s.clone()));
        }
    }
    Ok(r)
}

pub fn write_request(r: &Request) -> Result<Value, CannotCarry> {
    let names: Vec<(String, String)> = r.messages.iter().flat_map(|m| &m.parts).filter_map(|p| if let Part::ToolCall { id, name, .. } = p { Some((id.clone(), name.clone())) } else { None }).collect();
    let mut contents = Vec::new();
    for (i, m) in merged(&r.messages).iter().enumerate() {
        let mut parts = Vec::new();
        for p in &m.parts {
            parts.push(match p {
                Part::Text(t) if t.is_empty() => continue,
                Part::Text(t) => json!({"text": t}),
                Part::ToolCall { id, name, args } => json!({"functionCall": {"id": id, "name": name, "args": args_object(args, || format!("the tool call `{name}` in message {i}"))?}}),
                Part::ToolResult { id, name, output, error } => {
                    let name = name.clone().or_else(|| names.iter().find(|(c, _)| c == id).map(|(_, n)| n.clone()));
                    let Some(name) = name else {
                        return Err(CannotCarry(format!("the tool result for `{id}` in message {i} answers no call in the conversation, and Gemini names the function a result answers")));
                    };
                    let response = if *error { json!({"error": output}) } else { json!({"output": output}) };
                    json!({"functionResponse": {"id": id, "name": name, "response": response}})
                }
            });
        }
        if parts.is_empty() {
            parts.push(json!({"text": "."}));
        }
        contents.push(json!({"role": if m.role == Role::Assistant { "model" } else { "user" }, "parts": parts}));
    }
    let mut o = Map::new();
    o.insert("contents".into(), Value::Array(contents));
    if !r.system.is_empty() {
        o.insert("systemInstruction".into(), json!({"parts": [{"text": joined(&r.system)}]}));
    }
    if !r.tools.is_empty() {
        let decls: Vec<Value> = r.tools.iter().map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters})).collect();
        o.insert("tools".into(), json!([{"functionDeclarations": decls}]));
    }
    if let Some(c) = &r.tool_choice {
        o.insert("toolConfig".into(), json!({"functionCallingConfig": match c {
            ToolChoice::Auto => json!({"mode": "AUTO"}),
            ToolChoice::Required => json!({"mode": "ANY"}),
            ToolChoice::None => json!({"mode": "NONE"}),
            ToolChoice::Named(n) => json!({"mode": "ANY", "allowedFunctionNames": [n]}),
        }}));
    }
    let mut g = Map::new();
    if let Some(n) = r.max_tokens {
        g.insert("maxOutputTokens".into(), json!(n));
    }
    if let Some(t) = r.temperature {
        g.insert("temperature".into(), json!(t));
    }
    if let Some(p) = r.top_p {
        g.insert("topP".into(), json!(p));
    }
    if !r.stop.is_empty() {
        g.insert("stopSequences".into(), json!(r.stop));
    }
    if let Some((_, schema)) = &r.schema {
        g.insert("responseMimeType".into(), json!("application/json"));
        g.insert("responseJsonSchema".into(), schema.clone());
    }
    if !g.is_empty() {
        o.insert("generationConfig".into(), Value::Object(g));
    }
    Ok(Value::Object(o))
}

fn stop_of(reason: &str) -> Stop {
    match reason {
        "STOP" => Stop::End,
        "MAX_TOKENS" => Stop::MaxTokens,
        other => Stop::Other(other.to_string()),
    }
}

fn usage_of(u: &Value) -> Usage {
    Usage {
        input: u64_of(u.get("promptTokenCount")),
        output: u64_of(u.get("candidatesTokenCount")) + u64_of(u.get("thoughtsTokenCount")),
        cache_read: u64_of(u.get("cachedContentTokenCount")),
        cache_write: 0,
    }
}

/// Reads chunks: each carries whole parts (a function call arrives whole).
#[derive(Default)]
pub struct Decode {
    calls: usize,
}

impl Decode {
    fn chunk(&mut self, d: &Value, out: &mut Vec<Event>) {
        if let Some(e) = d.get("error") {
            out.push(Event::Error(e.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| e.to_string())));
            return;
        }
        let c = d.pointer("/candidates/0").unwrap_or(&Value::Null);
        for p in c.pointer("/content/parts").and_then(Value::as_array).into_iter().flatten() {
            if p.get("thought").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            if let Some(t) = p.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                out.push(Event::Text(t.to_string()));
            } else if let Some(f) = p.get("functionCall") {
                let index = self.calls;
                self.calls += 1;
                let id = f.get("id").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| format!("call_{index}"));
                out.push(Event::ToolStart { index, id, name: f["name"].as_str().unwrap_or_default().to_string() });
                out.push(Event::ToolArgs { index, delta: f.get("args").cloned().unwrap_or_else(|| json!({})).to_string() });
            }
        }
        if let Some(u) = d.get("usageMetadata").filter(|u| u.get("promptTokenCount").is_some()) {
            out.push(Event::Usage(usage_of(u)));
        }
        if let Some(r) = c.get("finishReason").and_then(Value::as_str) {
            out.push(Event::Stop(stop_of(r)));
        }
    }
}

impl crate::Decoder for Decode {
    fn event(&mut self, _name: Option<&str>, data: &Value, out: &mut Vec<Event>) {
        self.chunk(data, out);
    }

    fn whole(&mut self, body: &Value) -> Outcome {
        let mut events = Vec::new();
        // A stream asked for without `alt=sse` comes as an array of chunks.
        match body {
            Value::Array(chunks) => chunks.iter().for_each(|c| self.chunk(c, &mut events)),
            one => self.chunk(one, &mut events),
        }
        let mut o = Outcome::default();
        for e in &events {
            o.apply(e);
        }
        o
    }
}

fn finish_reason(s: &Stop) -> &str {
    match s {
        Stop::MaxTokens => "MAX_TOKENS",
        Stop::Other(o) if o.chars().all(|c| c.is_ascii_uppercase() || c == '_') => o,
        _ => "STOP",
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({"promptTokenCount": u.input, "candidatesTokenCount": u.output, "totalTokenCount": u.input + u.output, "cachedContentTokenCount": u.cache_read})
}

/// A chunk with `parts`, and optionally the finish reason and usage.
fn chunk(model: &str, parts: Vec<Value>, finish: Option<&str>, usage: Option<&Usage>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = json!(f);
    }
    let mut c = json!({"candidates": [candidate], "modelVersion": model});
    if let Some(u) = usage {
        c["usageMetadata"] = usage_json(u);
    }
    c
}

/// Writes chunks: text as it comes, each function call whole once its arguments are. The last
/// part is held back so that the stream's last chunk carries it with the finish reason and
/// usage, as Gemini's own streams do (a chunk with no parts is no valid response).
pub struct Encode {
    model: String,
    /// The call whose arguments are still arriving: its index, id, name and arguments so far.
    pending: Option<(usize, String, String, String)>,
    /// The part not yet written.
    held: Option<Value>,
    outcome: Outcome,
}

impl Encode {
    pub fn new(ctx: &Context) -> Encode {
        Encode { model: ctx.model.clone(), pending: None, held: None, outcome: Outcome::default() }
    }

    fn hold(&mut self, part: Value, out: &mut String) {
        if let Some(p) = self.held.replace(part) {
            sse::write(out, None, &chunk(&self.model, vec![p], None, None));
        }
    }

    /// Ends the call whose arguments were arriving; false when they are no JSON object.
    fn flush(&mut self, out: &mut String) -> bool {
        let Some((_, id, name, args)) = self.pending.take() else { return true };
        match args_object(&args, || format!("the provider's call of `{name}`")) {
            Ok(args) => {
                self.hold(json!({"functionCall": {"id": id, "name": name, "args": args}}), out);
                true
            }
            Err(e) => {
                self.fail(&e.0, out);
                false
            }
        }
    }

    fn fail(&mut self, message: &str, out: &mut String) {
        self.outcome.error = Some(message.to_string());
        if let Some(p) = self.held.take() {
            sse::write(out, None, &chunk(&self.model, vec![p], None, None));
        }
        sse::write(out, None, &json!({"error": {"code": 500, "message": message, "status": "INTERNAL"}}));
    }
}

impl crate::Encoder for Encode {
    fn event(&mut self, e: &Event, out: &mut String) {
        self.outcome.apply(e);
        match e {
            Event::Text(t) => {
                if self.flush(out) {
                    self.hold(json!({"text": t}), out);
                }
            }
            Event::ToolStart { index, id, name } => {
                if self.flush(out) {
                    self.pending = Some((*index, id.clone(), name.clone(), String::new()));
                }
            }
            Event::ToolArgs { index, delta } => match &mut self.pending {
                Some((open, _, _, args)) if open == index => args.push_str(delta),
                _ => self.fail("the provider interleaved the arguments of two tool calls, which this stream cannot carry", out),
            },
            Event::Error(m) => {
                if self.flush(out) {
                    self.fail(m, out);
                }
            }
            Event::Stop(_) | Event::Usage(_) => {}
        }
    }

    fn finish(&mut self, out: &mut String) {
        if self.outcome.error.is_some() || !self.flush(out) {
            return;
        }
        let usage = self.outcome.usage.unwrap_or_default();
        let parts = vec![self.held.take().unwrap_or_else(|| json!({"text": ""}))];
        sse::write(out, None, &chunk(&self.model, parts, Some(finish_reason(&self.outcome.stop_reason())), Some(&usage)));
    }
}

pub fn whole(o: &Outcome, ctx: &Context) -> Value {
    if let Some(e) = &o.error {
        return json!({"error": {"code": 500, "message": e, "status": "INTERNAL"}});
    }
    let mut parts = Vec::new();
    for p in &o.parts {
        parts.push(match p {
            Part::Text(t) => json!({"text": t}),
            Part::ToolCall { id, name, args } => match args_object(args, || format!("the provider's call of `{name}`")) {
                Ok(args) => json!({"functionCall": {"id": id, "name": name, "args": args}}),
                Err(e) => return json!({"error": {"code": 500, "message": e.0, "status": "INTERNAL"}}),
            },
            Part::ToolResult { .. } => continue,
        });
    }
    chunk(&ctx.model, parts, Some(finish_reason(&o.stop_reason())), Some(&o.usage.unwrap_or_default()))
}
