//! Token usage as the provider counted it, read from the replies in the model channel: what
//! each call cost in input, output and prompt-cache tokens, in each dialect's own fields.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Dialect, ModelRecord};

/// Tokens of one call or of a whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens not read from the prompt cache.
    pub input: u64,
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write: u64,
}

impl Usage {
    /// Every token of it.
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_write
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.input += o.input;
        self.output += o.output;
        self.cache_read += o.cache_read;
        self.cache_write += o.cache_write;
    }
}

/// US dollars per million tokens of one model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Input read from the provider's prompt cache (default: `input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Input written to the provider's prompt cache (default: `input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

impl Price {
    /// The cost of `usage` in US dollars.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let per = |tokens: u64, dollars_per_million: f64| tokens as f64 * dollars_per_million / 1e6;
        exact_usd(
            per(usage.input, self.input)
                + per(usage.output, self.output)
                + per(usage.cache_read, self.cache_read.unwrap_or(self.input))
                + per(usage.cache_write, self.cache_write.unwrap_or(self.input)),
        )
    }
}

/// `dollars` to the nearest 10⁻¹² dollar: a cost, or a sum of costs, as its figures warrant,
/// without the binary-fraction tail (`0.30000000000000004`) arithmetic leaves and JSON and CSV
/// would otherwise print. That is finer than a price per million tokens with six decimals
/// gives a token, and keeps fifteen significant digits up to $1,000.
pub fn exact_usd(dollars: f64) -> f64 {
    (dollars * 1e12).round() / 1e12
}

/// A sum of US dollars as people read it: cents for a dollar or more (`$12.34`), and three
/// significant digits below (`$0.0412`, `$0.0000308`), so a small model's cost never shows as
/// `$0.0000`; `$0` only for nothing.
pub fn usd(dollars: f64) -> String {
    if !dollars.is_finite() {
        return "—".into();
    }
    if dollars == 0.0 {
        return "$0".into();
    }
    if dollars.abs() >= 1.0 {
        return format!("${dollars:.2}");
    }
    // Decimals enough for three significant digits.
    let decimals = (2.0 - dollars.abs().log10().floor()).clamp(2.0, 12.0) as usize;
    format!("${dollars:.decimals$}")
}

/// What a run on a real model used (a bundle's `usage.json`): per call and in all, and what
/// it cost where the provider's price of the model is known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunUsage {
    /// The provider and the model's name there.
    pub provider: String,
    pub model: String,
    /// The calls whose replies reported usage, or whose usage was estimated (`estimated`), by
    /// their `seq` in the model channel.
    pub calls: Vec<(u64, Usage)>,
    /// The calls among `calls` whose server reported no usage, counted here instead: about four
    /// bytes of the request a token in, and of the answer's text a token out (an estimate, not
    /// the provider's count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub estimated: Vec<u64>,
    /// Calls in the model channel, reported usage or not.
    pub requests: u64,
    pub total: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// US dollars, when the price is known and some reply reported usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl RunUsage {
    /// The usage of a model channel's `records`, priced at `price`.
    pub fn of(provider: &str, model: &str, records: &[ModelRecord], price: Option<Price>) -> RunUsage {
        let mut calls = Vec::new();
        let mut estimated = Vec::new();
        for r in records {
            match of_reply(r) {
                Some(u) => calls.push((r.seq, u)),
                // A call the server answered without counting it: its tokens are estimated,
                // so that a run's input is never taken for zero.
                None if (200..300).contains(&r.status) && r.failure.is_none() => {
                    calls.push((r.seq, estimate(r)));
                    estimated.push(r.seq);
                }
                None => {}
            }
        }
        let mut total = Usage::default();
        for (_, u) in &calls {
            total += *u;
        }
        let cost_usd = price.filter(|_| !calls.is_empty()).map(|p| p.cost(&total));
        RunUsage { provider: provider.into(), model: model.into(), calls, estimated, requests: records.len() as u64, total, price, cost_usd }
    }

    /// Whether any call's tokens are known, reported or estimated (a call that failed has
    /// none: a run of only such calls used an unknown number, not zero).
    pub fn counted(&self) -> bool {
        !self.calls.is_empty()
    }
}

/// A call's tokens estimated from its bytes, about four a token: the request the provider got
/// in, the answer's text out.
fn estimate(r: &ModelRecord) -> Usage {
    let request = r.bridged.as_ref().map_or(&r.request, |b| &b.request);
    let count = |bytes: usize| (bytes as u64).div_ceil(4);
    Usage { input: count(request.to_string().len()).max(1), output: count(reply_text(r).len()), cache_read: 0, cache_write: 0 }
}

fn n(v: &Value, path: &[&str]) -> u64 {
    path.iter().try_fold(v, |v, k| v.get(k)).and_then(Value::as_u64).unwrap_or(0)
}

/// The text of a reply, in any dialect: a stream's deltas in order, or a whole reply's text
/// blocks.
pub(crate) fn reply_text(r: &ModelRecord) -> String {
    let docs = documents(r);
    let mut deltas = String::new();
    for d in &docs {
        // Anthropic `delta.text`; Chat Completions `choices[].delta.content`; Responses'
        // `response.output_text.delta` events.
        if let Some(t) = d.get("delta").and_then(|x| x.get("text")).and_then(Value::as_str) {
            deltas.push_str(t);
        }
        for c in d.get("choices").and_then(Value::as_array).into_iter().flatten() {
            if let Some(t) = c.get("delta").and_then(|x| x.get("content")).and_then(Value::as_str) {
                deltas.push_str(t);
            }
        }
        if d["type"] == "response.output_text.delta"
            && let Some(t) = d.get("delta").and_then(Value::as_str)
        {
            deltas.push_str(t);
        }
    }
    if !deltas.is_empty() {
        return deltas;
    }
    // Whole replies (and Gemini's chunks, each a whole reply's shape): every text block.
    let mut out = String::new();
    for d in &docs {
        texts(d, &mut out);
    }
    out
}

/// Appends every string under a `text` key, and Chat Completions' `message.content`.
fn texts(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                match (k.as_str(), x) {
                    ("text", Value::String(s)) => out.push_str(s),
                    ("message", m) if m.get("content").is_some_and(Value::is_string) => out.push_str(m["content"].as_str().unwrap_or_default()),
                    _ => texts(x, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|x| texts(x, out)),
        _ => {}
    }
}

/// The JSON documents of a reply: the body, or each `data:` line of a stream.
pub(crate) fn documents(record: &ModelRecord) -> Vec<Value> {
    documents_of(&record.content_type, &record.reply)
}

fn documents_of(content_type: &str, reply: &str) -> Vec<Value> {
    if content_type.contains("event-stream") {
        reply.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect()
    } else {
        serde_json::from_str(reply).into_iter().collect()
    }
}

/// The usage a reply reports, `None` when it reports none (an error, a stream cut short, a
/// server that does not count). Each dialect's counts are mapped so that `input` excludes
/// cached tokens, as Anthropic's do.
pub fn of_reply(record: &ModelRecord) -> Option<Usage> {
    let (dialect, content_type, reply) = record.provider_reply();
    let dialect = dialect?;
    let mut found = None;
    for doc in documents_of(content_type, reply) {
        match dialect {
            Dialect::Anthropic => {
                // A stream: `message_start` carries the input counts, each `message_delta`
                // the output count so far.
                let (start, delta) = (doc.get("message").and_then(|m| m.get("usage")), doc.get("usage").filter(|_| doc["type"] == "message_delta"));
                let whole = doc.get("usage").filter(|_| doc["type"] == "message");
                if let Some(u) = start.or(whole) {
                    let usage: &mut Usage = found.get_or_insert_with(Usage::default);
                    usage.input = n(u, &["input_tokens"]);
                    usage.cache_read = n(u, &["cache_read_input_tokens"]);
                    usage.cache_write = n(u, &["cache_creation_input_tokens"]);
                    usage.output = usage.output.max(n(u, &["output_tokens"]));
                }
                if let Some(u) = delta {
                    let usage = found.get_or_insert_with(Usage::default);
                    usage.output = usage.output.max(n(u, &["output_tokens"]));
                    // Some compatible servers put the input counts on the last delta only.
                    usage.input = usage.input.max(n(u, &["input_tokens"]));
                    usage.cache_read = usage.cache_read.max(n(u, &["cache_read_input_tokens"]));
                }
            }
            Dialect::Chat => {
                if let Some(u) = doc.get("usage").filter(|u| u.is_object()) {
                    let cached = n(u, &["prompt_tokens_details", "cached_tokens"]);
                    found = Some(Usage { input: n(u, &["prompt_tokens"]).saturating_sub(cached), output: n(u, &["completion_tokens"]), cache_read: cached, cache_write: 0 });
                }
            }
            Dialect::Responses => {
                let u = doc.get("response").and_then(|r| r.get("usage")).or_else(|| doc.get("usage")).filter(|u| u.is_object());
                if let Some(u) = u {
                    let cached = n(u, &["input_tokens_details", "cached_tokens"]);
                    found = Some(Usage { input: n(u, &["input_tokens"]).saturating_sub(cached), output: n(u, &["output_tokens"]), cache_read: cached, cache_write: 0 });
                }
            }
            Dialect::Gemini => {
                // Each streamed chunk carries the counts so far; the last is the whole.
                if let Some(u) = doc.get("usageMetadata") {
                    let cached = n(u, &["cachedContentTokenCount"]);
                    let output = n(u, &["candidatesTokenCount"]) + n(u, &["thoughtsTokenCount"]);
                    found = Some(Usage { input: n(u, &["promptTokenCount"]).saturating_sub(cached), output, cache_read: cached, cache_write: 0 });
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_keep_three_significant_digits_below_one() {
        assert_eq!(usd(3.08e-05), "$0.0000308");
        assert_eq!(usd(0.0412), "$0.0412");
        assert_eq!(usd(0.5), "$0.500");
        assert_eq!(usd(12.345), "$12.35");
        assert_eq!(usd(0.0), "$0");
        assert_eq!(usd(1.0), "$1.00");
    }

    #[test]
    fn costs_and_their_sums_carry_no_binary_fraction_tail() {
        assert_eq!(exact_usd(0.1 + 0.2), 0.3);
        assert_eq!((0.1 + 0.2).to_string(), "0.30000000000000004");
        // 1,234 tokens in and 567 out at $3 and $15 a million: exactly $0.012207.
        let price = Price { input: 3.0, output: 15.0, cache_read: None, cache_write: None };
        let cost = price.cost(&Usage { input: 1234, output: 567, ..Usage::default() });
        assert_eq!(cost.to_string(), "0.012207");
        assert_eq!(exact_usd((0..10).map(|_| cost).sum()).to_string(), "0.12207");
    }

    fn record(dialect: Dialect, content_type: &str, reply: &str) -> ModelRecord {
        ModelRecord { dialect: Some(dialect), content_type: content_type.into(), reply: reply.into(), status: 200, ..Default::default() }
    }

    #[test]
    fn each_dialect_counts_in_its_own_fields() {
        let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"cache_read_input_tokens\":100,\"cache_creation_input_tokens\":7,\"output_tokens\":1}}}\n\n\
                   event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":30}}\n\n";
        assert_eq!(of_reply(&record(Dialect::Anthropic, "text/event-stream", sse)), Some(Usage { input: 12, output: 30, cache_read: 100, cache_write: 7 }));
        let whole = r#"{"type":"message","usage":{"input_tokens":5,"output_tokens":9}}"#;
        assert_eq!(of_reply(&record(Dialect::Anthropic, "application/json", whole)), Some(Usage { input: 5, output: 9, ..Usage::default() }));
        let chat = "data: {\"choices\":[]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":8,\"prompt_tokens_details\":{\"cached_tokens\":20}}}\n\ndata: [DONE]\n";
        assert_eq!(of_reply(&record(Dialect::Chat, "text/event-stream", chat)), Some(Usage { input: 30, output: 8, cache_read: 20, cache_write: 0 }));
        let responses = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":40,\"output_tokens\":4,\"input_tokens_details\":{\"cached_tokens\":10}}}}\n";
        assert_eq!(of_reply(&record(Dialect::Responses, "text/event-stream", responses)), Some(Usage { input: 30, output: 4, cache_read: 10, cache_write: 0 }));
        let gemini = "data: {\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":1}}\n\ndata: {\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":6,\"thoughtsTokenCount\":2}}\n";
        assert_eq!(of_reply(&record(Dialect::Gemini, "text/event-stream", gemini)), Some(Usage { input: 9, output: 8, cache_read: 0, cache_write: 0 }));
        assert_eq!(of_reply(&record(Dialect::Chat, "application/json", r#"{"error":{"message":"down"}}"#)), None);
        let mut total = Usage::default();
        total += Usage { input: 1, output: 2, cache_read: 3, cache_write: 4 };
        total += Usage { input: 1, output: 2, cache_read: 3, cache_write: 4 };
        assert_eq!((total.input, total.total()), (2, 20));
    }

    #[test]
    fn a_bridged_call_counts_the_provider_s_tokens() {
        let mut r = record(Dialect::Anthropic, "application/json", r#"{"type":"message","usage":{"input_tokens":1,"output_tokens":1}}"#);
        r.bridged = Some(Box::new(crate::model::ProviderSide {
            dialect: Dialect::Chat,
            path: "/v1/chat/completions".into(),
            request: Value::Null,
            content_type: "text/event-stream".into(),
            reply: "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":700,\"completion_tokens\":9}}\n\ndata: [DONE]\n".into(),
            reply_bytes: None,
            dropped: Vec::new(),
            changed: Vec::new(),
        }));
        assert_eq!(of_reply(&r), Some(Usage { input: 700, output: 9, cache_read: 0, cache_write: 0 }));
    }

    #[test]
    fn a_run_is_priced_from_its_calls() {
        let calls = [
            ModelRecord { seq: 0, ..record(Dialect::Anthropic, "application/json", r#"{"type":"message","usage":{"input_tokens":1000000,"output_tokens":200000,"cache_read_input_tokens":2000000}}"#) },
            ModelRecord { seq: 1, status: 500, ..record(Dialect::Anthropic, "application/json", r#"{"type":"error"}"#) },
        ];
        let price = Price { input: 3.0, output: 15.0, cache_read: Some(0.3), cache_write: None };
        let u = RunUsage::of("anthropic", "claude-sonnet-4-5", &calls, Some(price));
        assert_eq!((u.requests, u.calls.len(), u.total.output), (2, 1, 200_000));
        assert!((u.cost_usd.unwrap() - (3.0 + 3.0 + 0.6)).abs() < 1e-9, "{:?}", u.cost_usd);
        assert_eq!(RunUsage::of("local", "m", &calls, None).cost_usd, None);
        let uncounted = RunUsage::of("local", "m", &calls[1..], Some(price));
        assert!(!uncounted.counted() && uncounted.cost_usd.is_none(), "a failed call's usage is unknown, not zero");
        // A server that answered without counting: estimated, and marked so.
        let chat = "data: {\"choices\":[{\"delta\":{\"content\":\"All tidy now.\"}}]}\n\ndata: [DONE]\n";
        let mut silent = record(Dialect::Chat, "text/event-stream", chat);
        silent.seq = 7;
        silent.request = serde_json::json!({"messages": [{"role": "user", "content": "tidy up the build directory, please"}]});
        let u = RunUsage::of("local", "m", &[silent], None);
        assert_eq!((u.estimated.as_slice(), u.calls[0].1.output, u.calls[0].1.input > 10), (&[7u64][..], 4, true), "{u:?}");
    }
}
