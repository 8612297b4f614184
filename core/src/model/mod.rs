//! The model channel's vocabulary: the wire dialects, one line of a bundle's `model.jsonl`
//! ([`ModelRecord`]), what the tokens of a run cost ([`usage`]), the tool calls a request's
//! history says were answered ([`history`]), and a run's conversation as its trace shows it
//! ([`conversation`]). The scripted model that answers agents lives with the agents' wire
//! formats (`overeager-agents`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod conversation;
pub mod history;
pub mod usage;

pub use history::{Answered, answered_calls};

/// The wire protocols the four CLIs speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    /// Anthropic Messages (`POST /v1/messages`), SSE when `stream` is set.
    Anthropic,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`), streaming or not.
    Chat,
    /// OpenAI Responses (`POST /v1/responses`), SSE with output items.
    Responses,
    /// Gemini `generateContent` / `streamGenerateContent`.
    Gemini,
}

impl Dialect {
    /// The dialect of a request path, and whether the reply streams by the path alone
    /// (Gemini's `:streamGenerateContent`). `None` for paths no dialect serves.
    pub fn of_path(path: &str) -> Option<(Dialect, bool)> {
        let path = path.split('?').next().unwrap_or(path);
        if path.ends_with("/messages") {
            Some((Dialect::Anthropic, false))
        } else if path.ends_with("/chat/completions") {
            Some((Dialect::Chat, false))
        } else if path.ends_with("/responses") {
            Some((Dialect::Responses, false))
        } else if path.ends_with(":streamGenerateContent") {
            Some((Dialect::Gemini, true))
        } else if path.ends_with(":generateContent") {
            Some((Dialect::Gemini, false))
        } else {
            None
        }
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Anthropic => "anthropic",
            Dialect::Chat => "chat",
            Dialect::Responses => "responses",
            Dialect::Gemini => "gemini",
        }
    }
}

/// How the error of a run whose model API failed the agent begins (the run is no
/// observation: it gets no verdict, counts in no rate, and is run again with
/// `experiment run --retry-failed`).
pub const MODEL_API_ERROR: &str = "errored (model API)";

/// How the model gateway's record of a call the run's end caught unanswered begins: the call
/// was in flight, or its reply had begun and then went silent (stalled).
pub const UNANSWERED_AT_END: [&str; 2] = ["in flight at the run's end", "stream stalled"];

/// One line of a bundle's model channel (`model.jsonl`): a request the agent made and the
/// reply it got, verbatim.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRecord {
    pub seq: u64,
    /// Unix time of the request, in microseconds.
    pub t_us: u64,
    pub method: String,
    /// Path and query as requested.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<Dialect>,
    /// Whether the request was a side request (no agent tools).
    #[serde(default)]
    pub side: bool,
    /// The main-loop turn answered: the number of the model's calls in the request's history
    /// (main-loop requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// The request body (JSON when it parses, else the text; a note of its size when the run's
    /// model record was full, see `request_bytes`).
    pub request: Value,
    /// The request's size in bytes when it is not recorded: the run's model record had reached
    /// its limit (the gateway's `MAX_RUN_RECORD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_bytes: Option<u64>,
    pub status: u16,
    pub content_type: String,
    /// The reply body exactly as sent, or its beginning when `reply_bytes` is set.
    pub reply: String,
    /// The reply's whole size in bytes when `reply` holds only its beginning: one reply is
    /// recorded up to a limit, and a run's model record up to another (the gateway's
    /// `MAX_REPLY` and `MAX_RUN_RECORD`); the agent received all of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_bytes: Option<u64>,
    /// A replay that had no recorded answer says so here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergence: Option<String>,
    /// A call a real model answered through the model gateway: the provider's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// How the provider's API failed on this call, as the gateway classified it: `http 500`,
    /// `http 429` (any error status), `no connection: …`, `connection dropped before the
    /// reply: …`, `reply cut short after N bytes`, `error event in the stream`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Microseconds the gateway itself added to the call: from the agent's request read to it
    /// sent on (connecting to the provider aside, which an agent talking to it directly
    /// spends too), plus from the reply's first bytes arriving to them passed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay_us: Option<u64>,
    /// Microseconds from the request read to the reply's end: the call's latency as the agent
    /// saw it (until the run ended, for a call still in flight then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_us: Option<u64>,
}
