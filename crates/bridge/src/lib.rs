//! The dialect bridge: lets an agent that speaks one model API dialect run on a provider that
//! speaks another. A request is read into a dialect-free conversation ([`ir::Request`]) and
//! written out in the provider's dialect; the provider's reply, streamed or whole, is read
//! into events ([`ir::Event`]) as it arrives and written out in the agent's dialect, event by
//! event, so the agent sees incremental text and tool-call arguments as the provider sent
//! them. Errors keep their HTTP status and the provider's own words.
//!
//! Nothing is guessed: a part of a request that the provider's dialect has no field for (an
//! image, a hosted tool, a response schema where there is none) fails the call with
//! [`CannotCarry`], naming the field; what is only a hint to the provider (a cache marker,
//! metadata, a thinking budget) is left out and listed in [`Call::dropped`], which the model
//! channel records beside both sides of the call.
//!
//! Pure: no I/O. The model gateway (`overeager-shim gateway`) does the HTTP.

use overeager_core::model::Dialect;
use serde_json::Value;

mod anthropic;
mod chat;
mod gemini;
pub mod ir;
mod responses;
mod sse;

use ir::{Event, Outcome, Request};

/// A part of a request the provider's dialect cannot carry: the call is not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CannotCarry(pub String);

impl std::fmt::Display for CannotCarry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CannotCarry {}

/// What the reply's writer must know of the agent's request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    /// The model the agent asked for, echoed in replies that name one.
    pub model: String,
    /// The agent asked for a streamed reply.
    pub stream: bool,
    /// A Chat Completions agent asked for usage in its stream (`stream_options.include_usage`).
    pub include_usage: bool,
    /// The agent's freeform tools (Responses `custom`), carried as functions of one string
    /// argument `input`: their calls go back to the agent as custom tool calls.
    pub custom_tools: Vec<String>,
    /// A Gemini agent's stream without `alt=sse`: a JSON array of chunks.
    pub json_array: bool,
    /// Numbers the ids the bridge makes up (the call's sequence number).
    pub n: u64,
}

/// One call translated for the provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub agent: Dialect,
    pub provider: Dialect,
    /// The provider's path as an agent of its dialect would ask for it (`/v1/chat/completions`,
    /// `/v1/messages`, `/v1beta/models/<m>:streamGenerateContent?alt=sse`).
    pub path: String,
    /// The request body the provider gets.
    pub body: Value,
    /// Fields of the agent's request left out as hints the provider's dialect has no place for.
    pub dropped: Vec<String>,
    /// What the gateway changed besides the dialect, each said in words (an answer's length
    /// kept within the provider's limit, usage asked for).
    pub changed: Vec<String>,
    pub context: Context,
}

/// Whether `path` is a model call the bridge translates (a `POST` to a dialect's route).
pub fn is_model_call(method: &str, path: &str) -> bool {
    method == "POST" && Dialect::of_path(path).is_some()
}

/// Translates the agent's request (`path` and `body`, in `agent`'s dialect) for a provider of
/// `provider`'s dialect, keeping the answer within `max_output` tokens when the provider has
/// that limit.
pub fn translate_request(agent: Dialect, provider: Dialect, path: &str, body: &[u8], n: u64, max_output: Option<u64>) -> Result<Call, CannotCarry> {
    let value: Value = serde_json::from_slice(body).map_err(|e| CannotCarry(format!("the request body is not JSON ({e})")))?;
    let mut dropped = Vec::new();
    let mut context = Context { n, ..Context::default() };
    let request = match agent {
        Dialect::Anthropic => anthropic::read_request(&value, &mut dropped)?,
        Dialect::Chat => chat::read_request(&value, &mut dropped, &mut context)?,
        Dialect::Responses => responses::read_request(&value, &mut dropped, &mut context)?,
        Dialect::Gemini => gemini::read_request(path, &value, &mut dropped, &mut context)?,
    };
    let mut request = request;
    let mut changed = Vec::new();
    if let Some(limit) = max_output.filter(|m| request.max_tokens.is_none_or(|t| t > *m)) {
        changed.push(limited(request.max_tokens, limit));
        request.max_tokens = Some(limit);
    }
    context.model = request.model.clone();
    context.stream = request.stream;
    let (path, body) = write_request(provider, &request)?;
    Ok(Call { agent, provider, path, body, dropped, changed, context })
}

/// What keeping an answer within `limit` tokens changed.
fn limited(asked: Option<u64>, limit: u64) -> String {
    match asked {
        Some(t) => format!("an answer's length: {t} tokens asked, the provider's limit of {limit} sent"),
        None => format!("an answer's length: none asked, the provider's limit of {limit} sent"),
    }
}

/// The field of a request of `dialect` that limits the answer's length.
fn max_output_field(dialect: Dialect, body: &mut Value) -> Option<(&mut serde_json::Map<String, Value>, &'static str)> {
    let o = body.as_object_mut()?;
    Some(match dialect {
        Dialect::Anthropic => (o, "max_tokens"),
        Dialect::Chat if o.contains_key("max_completion_tokens") => (o, "max_completion_tokens"),
        Dialect::Chat => (o, "max_tokens"),
        Dialect::Responses => (o, "max_output_tokens"),
        Dialect::Gemini => (o.entry("generationConfig").or_insert_with(|| serde_json::json!({})).as_object_mut()?, "maxOutputTokens"),
    })
}

fn write_request(provider: Dialect, request: &Request) -> Result<(String, Value), CannotCarry> {
    Ok(match provider {
        Dialect::Anthropic => ("/v1/messages".into(), anthropic::write_request(request)?),
        Dialect::Chat => ("/v1/chat/completions".into(), chat::write_request(request)?),
        Dialect::Responses => ("/v1/responses".into(), responses::write_request(request)?),
        Dialect::Gemini => {
            let method = if request.stream { "streamGenerateContent?alt=sse" } else { "generateContent" };
            (format!("/v1beta/models/{}:{method}", request.model), gemini::write_request(request)?)
        }
    })
}

/// Reads a provider's reply as events, piece by piece.
trait Decoder: Send {
    /// One server-sent event (its `event:` name and `data:` text).
    fn event(&mut self, name: Option<&str>, data: &Value, out: &mut Vec<Event>);
    /// A whole reply.
    fn whole(&mut self, body: &Value) -> Outcome;
}

/// Writes events as a streamed reply of the agent's dialect.
trait Encoder: Send {
    fn event(&mut self, event: &Event, out: &mut String);
    /// The stream's end (after the provider's last event).
    fn finish(&mut self, out: &mut String);
}

fn decoder(d: Dialect) -> Box<dyn Decoder> {
    match d {
        Dialect::Anthropic => Box::new(anthropic::Decode::default()),
        Dialect::Chat => Box::new(chat::Decode::default()),
        Dialect::Responses => Box::new(responses::Decode::default()),
        Dialect::Gemini => Box::new(gemini::Decode::default()),
    }
}

fn encoder(d: Dialect, ctx: &Context) -> Box<dyn Encoder> {
    match d {
        Dialect::Anthropic => Box::new(anthropic::Encode::new(ctx)),
        Dialect::Chat => Box::new(chat::Encode::new(ctx)),
        Dialect::Responses => Box::new(responses::Encode::new(ctx)),
        Dialect::Gemini => Box::new(gemini::Encode::new(ctx)),
    }
}

/// A whole reply of `d` for the agent.
fn whole_reply(d: Dialect, outcome: &Outcome, ctx: &Context) -> Value {
    match d {
        Dialect::Anthropic => anthropic::whole(outcome, ctx),
        Dialect::Chat => chat::whole(outcome, ctx),
        Dialect::Responses => responses::whole(outcome, ctx),
        Dialect::Gemini => gemini::whole(outcome, ctx),
    }
}

/// A model call in the provider's own dialect, as the gateway sends it: a streamed Chat
/// Completions request that does not ask for usage (`stream_options.include_usage`) made to
/// ask, since servers that report usage only when asked (OpenAI's API, llama-cpp-python) then
/// report the provider's own counts, and the reply reaches the agent without the usage it did
/// not ask for; and an answer's length kept within the provider's limit (`max_output`), where it
/// has one. The model channel records both sides. `None` when nothing changes.
pub fn adjust(dialect: Dialect, path: &str, body: &[u8], n: u64, max_output: Option<u64>) -> Option<Call> {
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let mut changed = Vec::new();
    let streams = v.get("stream") == Some(&Value::Bool(true));
    let asked = v.pointer("/stream_options/include_usage") == Some(&Value::Bool(true));
    if dialect == Dialect::Chat && streams && !asked {
        let options = v.as_object_mut()?.entry("stream_options").or_insert_with(|| serde_json::json!({}));
        options.as_object_mut()?.insert("include_usage".into(), Value::Bool(true));
        changed.push("a stream's usage: asked for, and kept from the agent, who did not ask".to_string());
    }
    if let Some(limit) = max_output {
        let (fields, name) = max_output_field(dialect, &mut v)?;
        let asked = fields.get(name).and_then(Value::as_u64);
        if asked.is_none_or(|t| t > limit) {
            fields.insert(name.into(), limit.into());
            changed.push(limited(asked, limit));
        }
    }
    if changed.is_empty() {
        return None;
    }
    let model = v.get("model").and_then(Value::as_str).unwrap_or_default().to_string();
    // Only a Chat Completions agent that did not ask has usage kept from it.
    let include_usage = dialect != Dialect::Chat || asked || !streams;
    let context = Context { model, stream: streams, include_usage, n, ..Context::default() };
    Some(Call { agent: dialect, provider: dialect, path: path.to_string(), body: v, dropped: Vec::new(), changed, context })
}

/// How the provider's reply is read.
enum Mode {
    /// The agent's own dialect, with only what it did not ask for taken out (see [`adjust`]):
    /// every other event is passed on as it came.
    Filter(sse::Parser),
    /// Server-sent events, translated as they arrive.
    Stream { sse: sse::Parser, decoder: Box<dyn Decoder>, events: Vec<Event> },
    /// A body read whole: a JSON reply, or an error.
    Whole(Vec<u8>),
}

/// Translates one reply of the provider into the agent's dialect as its bytes arrive.
pub struct ReplyTranslator {
    call: Call,
    status: u16,
    mode: Mode,
    /// Set when the agent streams: events are written as they come.
    encoder: Option<Box<dyn Encoder>>,
    /// The events of a reply the agent takes whole.
    outcome: Outcome,
}

impl ReplyTranslator {
    /// For the reply to `call` whose head said `status` and `content_type`.
    pub fn new(call: &Call, status: u16, content_type: &str) -> ReplyTranslator {
        let ok = (200..300).contains(&status);
        let same = call.agent == call.provider;
        let mode = if same && ok && content_type.contains("event-stream") {
            Mode::Filter(sse::Parser::default())
        } else if ok && content_type.contains("event-stream") {
            Mode::Stream { sse: sse::Parser::default(), decoder: decoder(call.provider), events: Vec::new() }
        } else {
            Mode::Whole(Vec::new())
        };
        let encoder = (ok && !same && call.context.stream && !call.context.json_array).then(|| encoder(call.agent, &call.context));
        ReplyTranslator { call: call.clone(), status, mode, encoder, outcome: Outcome::default() }
    }

    /// The reply's content type for the agent.
    pub fn content_type(&self) -> &'static str {
        if self.encoder.is_some() || matches!(self.mode, Mode::Filter(_)) { "text/event-stream" } else { "application/json" }
    }

    /// Translates what arrived; what to pass to the agent now.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = String::new();
        match &mut self.mode {
            Mode::Whole(buf) => buf.extend_from_slice(bytes),
            Mode::Filter(sse) => {
                let keep_usage = self.call.context.include_usage;
                for (name, data) in sse.push(bytes) {
                    match serde_json::from_str::<Value>(&data) {
                        _ if keep_usage => sse::write_text(&mut out, name.as_deref(), &data),
                        // The usage chunk the agent did not ask for.
                        Ok(v) if v.get("choices").and_then(Value::as_array).is_some_and(Vec::is_empty) && v.get("usage").is_some_and(Value::is_object) => {}
                        Ok(mut v) if v.get("usage").is_some() => {
                            v.as_object_mut().map(|o| o.remove("usage"));
                            sse::write(&mut out, name.as_deref(), &v);
                        }
                        _ => sse::write_text(&mut out, name.as_deref(), &data),
                    }
                }
            }
            Mode::Stream { sse, decoder, events } => {
                for (name, data) in sse.push(bytes) {
                    // Chat Completions ends with `[DONE]`, which is no JSON; the encoder writes
                    // the agent's own end.
                    let Ok(value) = serde_json::from_str::<Value>(&data) else { continue };
                    decoder.event(name.as_deref(), &value, events);
                }
                for e in events.drain(..) {
                    match &mut self.encoder {
                        Some(enc) => enc.event(&e, &mut out),
                        None => self.outcome.apply(&e),
                    }
                }
            }
        }
        out.into_bytes()
    }

    /// The provider's reply has ended: the rest to pass to the agent.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = String::new();
        let ctx = &self.call.context;
        match std::mem::replace(&mut self.mode, Mode::Whole(Vec::new())) {
            Mode::Filter(_) => return Vec::new(),
            // The agent's own dialect: passed on as it came.
            Mode::Whole(buf) if self.call.agent == self.call.provider => return buf,
            Mode::Whole(buf) if !(200..300).contains(&self.status) => {
                return error_body(self.call.agent, self.status, &provider_words(&buf)).into_bytes();
            }
            Mode::Whole(buf) => {
                let outcome = match serde_json::from_slice::<Value>(&buf) {
                    Ok(v) => decoder(self.call.provider).whole(&v),
                    Err(e) => Outcome { error: Some(format!("the provider's reply is not JSON ({e}): {}", provider_words(&buf))), ..Outcome::default() },
                };
                match &mut self.encoder {
                    Some(enc) => {
                        for e in outcome.events() {
                            enc.event(&e, &mut out);
                        }
                        enc.finish(&mut out);
                    }
                    None => self.outcome = outcome,
                }
            }
            Mode::Stream { .. } => {
                if let Some(enc) = &mut self.encoder {
                    enc.finish(&mut out);
                }
            }
        }
        if self.encoder.is_none() {
            let body = whole_reply(self.call.agent, &self.outcome, ctx);
            out = if ctx.json_array { Value::Array(vec![body]).to_string() } else { body.to_string() };
        }
        out.into_bytes()
    }
}

/// The error message in a provider's error body (its `error.message`, or the text).
pub fn provider_words(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let v: Option<Value> = serde_json::from_str(text.trim()).ok();
    let message = v.as_ref().and_then(|v| {
        let e = v.get("error")?;
        e.get("message").and_then(Value::as_str).map(str::to_string).or_else(|| e.as_str().map(str::to_string))
    });
    message.unwrap_or_else(|| text.trim().chars().take(2000).collect())
}

/// An error reply of `dialect` with `status`, saying `message`.
pub fn error_body(dialect: Dialect, status: u16, message: &str) -> String {
    let kind = match status {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        529 | 503 => "overloaded_error",
        _ => "api_error",
    };
    let v = match dialect {
        Dialect::Anthropic => serde_json::json!({"type": "error", "error": {"type": kind, "message": message}}),
        Dialect::Chat | Dialect::Responses => serde_json::json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
        Dialect::Gemini => {
            let status_name = match status {
                400 | 422 => "INVALID_ARGUMENT",
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                429 => "RESOURCE_EXHAUSTED",
                503 | 529 => "UNAVAILABLE",
                _ => "INTERNAL",
            };
            serde_json::json!({"error": {"code": status, "message": message, "status": status_name}})
        }
    };
    v.to_string()
}

/// The JSON text of `args` as an object, for dialects whose tool calls carry objects.
fn args_object(args: &str, what: impl Fn() -> String) -> Result<Value, CannotCarry> {
    let text = if args.trim().is_empty() { "{}" } else { args };
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(CannotCarry(format!("{}: its arguments `{}` are not a JSON object", what(), text.chars().take(200).collect::<String>()))),
    }
}

#[cfg(test)]
mod tests;
