//! A bundle prepared for the trace viewer: a summary (manifest, prompt, verdict, fired traps,
//! snapshot diff, counts) and the merged events in fixed-size chunks, so the viewer shows the
//! first events at once and fetches the rest while the reader is already scrolling.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use axum::body::Bytes;
use overeager_core::Verdict;
use overeager_core::bundle::files;

use overeager_bundle::Bundle;
use overeager_store::runs::RunRow;
use overeager_store::uploads::Upload;
use overeager_wire::trace::{Conversation, TraceSummary};

/// Events per chunk.
pub const CHUNK: usize = 2000;

/// The name under which a trace serves its model calls as a conversation (JSON of
/// [`overeager_formats::model::conversation::Call`]s with the run's usage), beside [`RAW`].
pub const CONVERSATION: &str = "conversation";

/// The raw files a viewer may open, by the name used in URLs.
pub const RAW: &[(&str, &str)] = &[("shell", files::SHIM), ("agent", files::AGENT), ("fswatch", files::FSWATCH), ("net", files::NET), ("model", files::MODEL), ("prompt", files::PROMPT)];

/// Largest raw file served whole; longer ones are cut (the download has everything).
const RAW_CAP: usize = 4 << 20;

/// A bundle ready to serve.
pub struct Trace {
    pub summary: Bytes,
    pub chunks: Vec<Bytes>,
    pub raw: BTreeMap<String, Bytes>,
}

/// Reads a packed bundle and prepares it, with the run, upload and verdict it belongs to.
pub fn build(digest: &str, packed: &Path, run: Option<RunRow>, upload: Option<Upload>, verdict: Option<Verdict>) -> Result<Trace> {
    let b = Bundle::open(packed).with_context(|| format!("opening bundle {digest}"))?;
    let mut by_channel = BTreeMap::new();
    let mut by_op = BTreeMap::new();
    for e in &b.events {
        *by_channel.entry(e.channel.as_str().to_string()).or_insert(0u64) += 1;
        *by_op.entry(e.op.as_str().to_string()).or_insert(0u64) += 1;
    }
    let mut raw = BTreeMap::new();
    let mut raw_sizes = BTreeMap::new();
    for (name, file) in RAW {
        if let Ok(bytes) = std::fs::read(b.dir.join(file)) {
            raw_sizes.insert(name.to_string(), bytes.len() as u64);
            let mut bytes = bytes;
            if bytes.len() > RAW_CAP {
                bytes.truncate(RAW_CAP);
                bytes.extend_from_slice(format!("\n… cut at {RAW_CAP} bytes; download the bundle for the rest\n").as_bytes());
            }
            raw.insert(name.to_string(), Bytes::from(bytes));
        }
    }
    // The model calls as a conversation (JSON), beside the raw channels: what the trace's
    // Conversation tab shows, here and on a published site alike.
    if raw.contains_key("model") {
        let records = b.model_records()?;
        let usage = b.usage()?;
        let calls = overeager_formats::model::conversation::conversation(&records, usage.as_ref());
        let doc = Conversation {
            provider: usage.as_ref().map(|u| u.provider.clone()),
            model: usage.as_ref().map(|u| u.model.clone()),
            price: usage.as_ref().and_then(|u| u.price),
            total: usage.as_ref().map(|u| u.total),
            cost_usd: usage.as_ref().and_then(|u| u.cost_usd),
            calls,
        };
        let bytes = serde_json::to_vec(&doc)?;
        raw_sizes.insert(CONVERSATION.to_string(), bytes.len() as u64);
        raw.insert(CONVERSATION.to_string(), Bytes::from(bytes));
    }
    let prompt = raw.get("prompt").map(|p| String::from_utf8_lossy(p).into_owned()).unwrap_or_default();
    let attribution = overeager_judge::input::attribute_bundle(&b)?;
    let framework: Vec<u64> = b.events.iter().filter(|e| attribution.of(e.seq) == overeager_formats::attribution::Actor::Framework).map(|e| e.seq).collect();
    let chunks: Vec<Bytes> = b.events.chunks(CHUNK).map(|c| serde_json::to_vec(c).map(Bytes::from)).collect::<Result<_, _>>()?;
    let summary = TraceSummary {
        digest: digest.to_string(),
        manifest: b.manifest.clone(),
        prompt,
        run,
        upload,
        verdict,
        n_events: b.events.len(),
        chunk: CHUNK,
        chunks: chunks.len().max(1),
        by_channel,
        by_op,
        diff: b.diff(),
        raw: raw_sizes,
        framework,
        framework_paths: attribution.framework_paths.iter().cloned().collect(),
    };
    let summary = Bytes::from(serde_json::to_vec(&summary)?);
    let chunks = if chunks.is_empty() { vec![Bytes::from_static(b"[]")] } else { chunks };
    Ok(Trace { summary, chunks, raw })
}

impl Trace {
    /// The bytes it holds.
    pub fn size(&self) -> usize {
        self.summary.len() + self.chunks.iter().map(Bytes::len).sum::<usize>() + self.raw.values().map(Bytes::len).sum::<usize>()
    }
}

/// The most recently used traces, by bundle digest, at most `cap` of them and `cap_bytes` in
/// all (a trace larger than that is served and not kept).
pub struct Cache {
    cap: usize,
    cap_bytes: usize,
    entries: Mutex<Vec<(String, Arc<Trace>)>>,
}

impl Cache {
    pub fn new(cap: usize, cap_bytes: usize) -> Cache {
        Cache { cap, cap_bytes, entries: Mutex::new(Vec::new()) }
    }

    /// The cached trace, moved to the front.
    pub fn get(&self, digest: &str) -> Option<Arc<Trace>> {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let i = e.iter().position(|(d, _)| d == digest)?;
        let hit = e.remove(i);
        let t = hit.1.clone();
        e.insert(0, hit);
        Some(t)
    }

    pub fn put(&self, digest: &str, t: Arc<Trace>) {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        e.retain(|(d, _)| d != digest);
        e.insert(0, (digest.to_string(), t));
        e.truncate(self.cap);
        let mut total = 0;
        e.retain(|(_, t)| {
            let keep = total + t.size() <= self.cap_bytes;
            if keep {
                total += t.size();
            }
            keep
        });
    }

    /// Forgets a trace whose verdict changed.
    pub fn forget(&self, digest: &str) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).retain(|(d, _)| d != digest);
    }

    /// Forgets every trace (after verdicts were re-judged).
    pub fn clear(&self) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}
