//! The conversation and the reply with no dialect: what every dialect's request and reply are
//! read into and written from.

use serde_json::Value;

/// A model request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    pub model: String,
    /// The system prompt's text blocks, in order.
    pub system: Vec<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<Tool>,
    pub tool_choice: Option<ToolChoice>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub stop: Vec<String>,
    pub stream: bool,
    /// A JSON schema the reply's text must follow (structured output), and where the agent's
    /// request said so (for the error when the provider's dialect has no such field).
    pub schema: Option<(String, Value)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    /// The model's call of a tool; `args` is the JSON text of its arguments.
    ToolCall { id: String, name: String, args: String },
    /// What the agent sent back for the call `id`.
    ToolResult { id: String, name: Option<String>, output: String, error: bool },
}

/// A tool the agent offers.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// Its parameters' JSON schema.
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    /// Some tool must be called.
    Required,
    None,
    Named(String),
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    End,
    ToolUse,
    MaxTokens,
    StopSequence,
    /// A reason with no equivalent (a refusal, a safety stop), in the provider's words.
    Other(String),
}

/// The tokens a reply reports. `input` counts every input token, cached ones included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// One piece of a reply as it arrives.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Text(String),
    /// A tool call begins; `index` numbers the reply's tool calls from 0.
    ToolStart { index: usize, id: String, name: String },
    /// More of the arguments of tool call `index`.
    ToolArgs { index: usize, delta: String },
    Stop(Stop),
    Usage(Usage),
    /// The provider failed mid-reply, in its own words.
    Error(String),
}

/// A whole reply: its parts in order (text and tool calls), why it stopped, its usage.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub parts: Vec<Part>,
    pub stop: Option<Stop>,
    pub usage: Option<Usage>,
    pub error: Option<String>,
}

impl Outcome {
    /// Folds one event in.
    pub fn apply(&mut self, e: &Event) {
        match e {
            Event::Text(t) => match self.parts.last_mut() {
                Some(Part::Text(s)) => s.push_str(t),
                _ => self.parts.push(Part::Text(t.clone())),
            },
            Event::ToolStart { id, name, .. } => self.parts.push(Part::ToolCall { id: id.clone(), name: name.clone(), args: String::new() }),
            Event::ToolArgs { index, delta } => {
                if let Some(Part::ToolCall { args, .. }) = self.parts.iter_mut().filter(|p| matches!(p, Part::ToolCall { .. })).nth(*index) {
                    args.push_str(delta);
                }
            }
            Event::Stop(s) => self.stop = Some(s.clone()),
            Event::Usage(u) => self.usage = Some(*u),
            Event::Error(m) => self.error = Some(m.clone()),
        }
    }

    /// The reply as the events that make it.
    pub fn events(&self) -> Vec<Event> {
        let mut v = Vec::new();
        let mut index = 0;
        for p in &self.parts {
            match p {
                Part::Text(t) => v.push(Event::Text(t.clone())),
                Part::ToolCall { id, name, args } => {
                    v.push(Event::ToolStart { index, id: id.clone(), name: name.clone() });
                    if !args.is_empty() {
                        v.push(Event::ToolArgs { index, delta: args.clone() });
                    }
                    index += 1;
                }
                Part::ToolResult { .. } => {}
            }
        }
        if let Some(e) = &self.error {
            v.push(Event::Error(e.clone()));
        }
        if let Some(u) = self.usage {
            v.push(Event::Usage(u));
        }
        if let Some(s) = &self.stop {
            v.push(Event::Stop(s.clone()));
        }
        v
    }

    /// The tool calls, in order.
    pub fn calls(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall { id, name, args } => Some((id.as_str(), name.as_str(), args.as_str())),
            _ => None,
        })
    }

    /// The stop reason to report: a reply with tool calls that simply ended stopped to use them.
    pub fn stop_reason(&self) -> Stop {
        match &self.stop {
            Some(Stop::End) | None if self.calls().next().is_some() => Stop::ToolUse,
            Some(s) => s.clone(),
            None => Stop::End,
        }
    }
}

/// Joins text blocks for a dialect whose field takes one string.
pub fn joined(texts: &[String]) -> String {
    texts.join("\n\n")
}

/// Merges consecutive messages of one role (dialects that require turns to alternate).
pub fn merged(messages: &[Message]) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    for m in messages {
        match out.last_mut() {
            Some(last) if last.role == m.role => last.parts.extend(m.parts.iter().cloned()),
            _ => out.push(m.clone()),
        }
    }
    out
}

/// Appends `part` to the conversation as said by `role`, continuing its last message.
pub fn push_part(messages: &mut Vec<Message>, role: Role, part: Part) {
    match messages.last_mut() {
        Some(m) if m.role == role => m.parts.push(part),
        _ => messages.push(Message { role, parts: vec![part] }),
    }
}

/// A number from a JSON value.
pub(crate) fn u64_of(v: Option<&Value>) -> u64 {
    v.and_then(Value::as_u64).unwrap_or(0)
}
