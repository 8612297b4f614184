//! The model channel's vocabulary: the wire dialects, one line of a bundle's `model.jsonl`
//! ([`ModelRecord`]), what the tokens of a run cost ([`usage`]), the tool calls a request's
//! history says were answered ([`history`]), and a run's conversation as its trace shows it
//! ([`conversation`]). The scripted model that answers agents lives with the agents' wire
//! formats (`overeager-formats`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod conversation;
pub mod history;
pub mod usage;

pub use history::{Answered, answered_calls};

/// The wire protocols agents speak to models, and providers serve. Written `anthropic`,
/// `openai-chat`, `openai-responses` and `gemini` everywhere (agent definitions, providers
/// files, a bundle's model channel); `chat` and `responses`, as model channels recorded before
/// the one spelling name the OpenAI dialects, are read too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Dialect {
    /// Anthropic Messages (`POST /v1/messages`), SSE when `stream` is set.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`), streaming or not.
    #[serde(rename = "openai-chat", alias = "chat")]
    Chat,
    /// OpenAI Responses (`POST /v1/responses`), SSE with output items.
    #[serde(rename = "openai-responses", alias = "responses")]
    Responses,
    /// Gemini `generateContent` / `streamGenerateContent`.
    #[serde(rename = "gemini")]
    Gemini,
}

impl Dialect {
    /// Every dialect, in the order they are listed.
    pub const ALL: [Dialect; 4] = [Dialect::Anthropic, Dialect::Chat, Dialect::Responses, Dialect::Gemini];

    /// The path prefix an agent's requests in this dialect carry that a provider's base URL
    /// stands for: the OpenAI dialects' base URLs end in their version (`…/v1`), the others'
    /// do not.
    pub fn agent_prefix(self) -> &'static str {
        match self {
            Dialect::Chat | Dialect::Responses => "/v1",
            Dialect::Anthropic | Dialect::Gemini => "",
        }
    }

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

    /// Its name, as every file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Anthropic => "anthropic",
            Dialect::Chat => "openai-chat",
            Dialect::Responses => "openai-responses",
            Dialect::Gemini => "gemini",
        }
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl std::str::FromStr for Dialect {
    type Err = String;
    /// Reads a name as files write it, or as earlier model channels did: the names serde
    /// accepts, so the two cannot disagree.
    fn from_str(s: &str) -> Result<Dialect, String> {
        serde_json::from_value(Value::String(s.to_string())).map_err(|_| {
            let known: Vec<&str> = Dialect::ALL.iter().map(|d| d.as_str()).collect();
            format!("unknown dialect `{s}`; use one of {}", known.join(", "))
        })
    }
}

/// What answered a run's model calls.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelSource {
    /// overeager's scripted model playing a scenario's play: a reference, not a model.
    Scripted,
    /// A simulated policy: neither an agent CLI nor a model.
    Simulated,
    /// A recorded run's model calls, answered again.
    Replay,
    /// overeager's stand-in provider (`overeager model serve`): the scripted model behind a
    /// provider's API, for rehearsing an experiment.
    StandIn,
    /// A model served on this machine (a loopback address), by a server overeager did not write.
    LocalServer { provider: String },
    /// A provider's model.
    Provider { provider: String },
}

/// What played a run's model, and whether the gateway bridged the agent's dialect to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PlayedBy {
    #[serde(flatten)]
    pub source: ModelSource,
    #[serde(default)]
    pub bridged: bool,
}

impl PlayedBy {
    /// A source, not bridged.
    pub fn direct(source: ModelSource) -> PlayedBy {
        PlayedBy { source, bridged: false }
    }

    /// What an agent id alone says played its model: the scripted agents (`scripted:…`) and a
    /// real CLI on the scripted model (`<agent>:<policy>:scripted-<play>`) the scripted model,
    /// `sim:…` a simulated policy, `…:replay:<bundle>` a replay; anything else a provider,
    /// named by the id's model (`<provider>/<model>`), whose kind only the run can tell (see
    /// [`crate::AgentCell::played_by`]); an id that is no cell, the scripted model.
    pub fn of_agent_id(id: &str) -> PlayedBy {
        crate::AgentCell::parse(id).map_or(PlayedBy::direct(ModelSource::Scripted), |c| c.played_by())
    }

    /// Whether a real model (on this machine or a provider's) answered: only then are the
    /// run's numbers about a model.
    pub fn real_model(&self) -> bool {
        matches!(self.source, ModelSource::LocalServer { .. } | ModelSource::Provider { .. })
    }

    /// A short label: `scripted model`, `simulated policy`, `replay`, `stand-in provider`,
    /// `local model server (local)`, `provider (anthropic)`; `, bridged` when it was.
    pub fn label(&self) -> String {
        let base = match &self.source {
            ModelSource::Scripted => "scripted model".to_string(),
            ModelSource::Simulated => "simulated policy".to_string(),
            ModelSource::Replay => "replay".to_string(),
            ModelSource::StandIn => "stand-in provider".to_string(),
            ModelSource::LocalServer { provider } => format!("local model server ({provider})"),
            ModelSource::Provider { provider } => format!("provider ({provider})"),
        };
        if self.bridged { format!("{base}, bridged") } else { base }
    }

    /// The kind alone, as a column of a table or a filter names it: `scripted`, `simulated`,
    /// `replay`, `stand_in`, `local_server`, `provider`.
    pub fn kind(&self) -> &'static str {
        match self.source {
            ModelSource::Scripted => "scripted",
            ModelSource::Simulated => "simulated",
            ModelSource::Replay => "replay",
            ModelSource::StandIn => "stand_in",
            ModelSource::LocalServer { .. } => "local_server",
            ModelSource::Provider { .. } => "provider",
        }
    }
}

/// The reply header by which overeager's stand-in provider (and the scripted model it serves)
/// says what it is, so a run on it is never taken for a real model's.
pub const STAND_IN_HEADER: &str = "x-overeager-model";

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
    /// The reply came from overeager's own stand-in provider (its [`STAND_IN_HEADER`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stand_in: bool,
    /// A call the gateway's dialect bridge translated, or sent changed (an answer's length kept
    /// within the provider's limit, a stream's usage asked for): the provider's side of it. The
    /// fields above are the agent's side (what it sent and what it received).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridged: Option<Box<ProviderSide>>,
}

/// What the provider of a bridged call received and sent, in its own dialect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderSide {
    pub dialect: Dialect,
    /// Path and query as the provider was asked.
    pub path: String,
    /// The request the provider received (not recorded, like the agent's, past the run's
    /// model record limit; `null` when the bridge refused the call and nothing was sent).
    pub request: Value,
    pub content_type: String,
    /// The reply exactly as the provider sent it, or its beginning when `reply_bytes` is set.
    pub reply: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_bytes: Option<u64>,
    /// Fields of the agent's request left out as hints the provider's dialect has no place for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    /// What the gateway changed besides the dialect, in words (an answer's length kept within
    /// the provider's limit, a stream's usage asked for).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

impl ModelRecord {
    /// The reply the provider sent, in its dialect: the provider's side of a bridged call,
    /// else the reply itself. Usage is counted from it, so a bridged call's tokens are the
    /// provider's own.
    pub fn provider_reply(&self) -> (Option<Dialect>, &str, &str) {
        match &self.bridged {
            Some(b) => (Some(b.dialect), &b.content_type, &b.reply),
            None => (self.dialect, &self.content_type, &self.reply),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dialect_is_written_one_way_and_read_either_way() {
        for d in Dialect::ALL {
            assert_eq!(serde_json::to_value(d).unwrap(), d.as_str());
            assert_eq!(d.as_str().parse::<Dialect>(), Ok(d));
        }
        assert_eq!(("chat".parse(), "responses".parse()), (Ok(Dialect::Chat), Ok(Dialect::Responses)));
        assert_eq!(serde_json::from_str::<Dialect>("\"chat\"").unwrap(), Dialect::Chat);
        let e = "openai".parse::<Dialect>().unwrap_err();
        assert!(e.contains("`openai`") && e.contains("openai-chat, openai-responses"), "{e}");
    }

    #[test]
    fn an_agent_id_says_what_played_its_model_as_far_as_it_can() {
        let kind = |id: &str| PlayedBy::of_agent_id(id).kind();
        assert_eq!(kind("scripted:aggressive"), "scripted");
        assert_eq!(kind("claude-code:permissive:scripted-aggressive"), "scripted");
        assert_eq!(kind("sim:permissive"), "simulated");
        assert_eq!(kind("codex:permissive:replay:/b/run.oeb"), "replay");
        let p = PlayedBy::of_agent_id("aider:default:local/smollm2");
        assert_eq!((p.kind(), p.label()), ("provider", "provider (local)".to_string()));
        assert!(p.real_model() && !PlayedBy::of_agent_id("sim:ask").real_model());
        let bridged = PlayedBy { source: ModelSource::StandIn, bridged: true };
        assert_eq!(bridged.label(), "stand-in provider, bridged");
        let json = serde_json::to_value(&bridged).unwrap();
        assert_eq!(json, serde_json::json!({"kind": "stand_in", "bridged": true}));
        assert_eq!(serde_json::from_value::<PlayedBy>(serde_json::json!({"kind": "provider", "provider": "anthropic"})).unwrap().label(), "provider (anthropic)");
    }
}
