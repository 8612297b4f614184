//! A run's model calls read as a conversation: for each call, what the model answered (a tool
//! call, with what the tool gave back, or text), how long it took, the tokens the provider
//! counted and what they cost.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::usage::{RunUsage, Usage, reply_text};
use super::{ModelRecord, answered_calls};

/// Text longer than this is cut (marked) in a conversation: the raw channel has all of it.
const SHOWN: usize = 4000;

/// One call of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub seq: u64,
    /// Milliseconds since the run's first call.
    pub t_ms: f64,
    /// The call's latency as the agent saw it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// A side request (a title, a summary), not a turn of the agent's main loop.
    pub side: bool,
    /// The main-loop turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    pub answer: Answer,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The reply's whole size when the record kept only its beginning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_bytes: Option<u64>,
}

/// What the model answered on one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// A tool call, and what the agent sent back as its result (from a later request).
    ToolCall { name: String, args: Value, result: Option<String>, error: bool },
    Text { text: String },
    /// Nothing readable (a failed call, an empty reply).
    Nothing,
}

/// The conversation of a model channel, with each call's tokens and cost from the run's usage.
pub fn conversation(records: &[ModelRecord], usage: Option<&RunUsage>) -> Vec<Call> {
    let first = records.iter().map(|r| r.t_us).min().unwrap_or(0);
    // The fullest history: the last main-loop request of the run holds every call answered.
    let history = records
        .iter()
        .filter(|r| !r.side && r.step.is_some())
        .max_by_key(|r| r.step)
        .and_then(|r| Some(answered_calls(r.dialect?, &r.request)))
        .unwrap_or_default();
    records
        .iter()
        .map(|r| {
            let tokens = usage.and_then(|u| u.calls.iter().find(|(seq, _)| *seq == r.seq)).map(|(_, t)| *t);
            let answer = match r.step.filter(|_| !r.side).and_then(|k| history.get(k)) {
                Some(a) => Answer::ToolCall { name: a.name.clone(), args: a.args.clone(), result: a.output.as_deref().map(cut), error: a.error },
                None => match reply_text(r) {
                    t if t.trim().is_empty() => Answer::Nothing,
                    t => Answer::Text { text: cut(&t) },
                },
            };
            Call {
                seq: r.seq,
                t_ms: r.t_us.saturating_sub(first) as f64 / 1000.0,
                duration_ms: r.duration_us.map(|d| d as f64 / 1000.0),
                side: r.side,
                step: r.step,
                status: r.status,
                failure: r.failure.clone(),
                answer,
                tokens,
                cost_usd: tokens.and_then(|t| Some(usage?.price?.cost(&t))),
                reply_bytes: r.reply_bytes,
            }
        })
        .collect()
}

fn cut(text: &str) -> String {
    if text.len() <= SHOWN {
        return text.to_string();
    }
    let mut end = SHOWN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} more bytes in the raw model channel]", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_cut_and_says_how_much_more_there_is() {
        assert!(cut(&"x".repeat(SHOWN + 10)).ends_with("[10 more bytes in the raw model channel]"));
        assert_eq!(cut("short"), "short");
    }
}
