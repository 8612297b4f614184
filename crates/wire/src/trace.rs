//! A bundle as the trace viewer reads it: its summary, and its model calls as a conversation.

use std::collections::BTreeMap;

use overeager_core::Verdict;
use overeager_core::bundle::BundleManifest;
use overeager_core::model::conversation::Call;
use overeager_core::model::usage::{Price, Usage};
use overeager_core::snapshot::SnapshotDiff;
use serde::{Deserialize, Serialize};

use crate::run::{RunRow, Upload};

/// `GET /api/bundles/{digest}`: what the trace viewer shows first; the events follow in chunks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TraceSummary {
    pub digest: String,
    pub manifest: BundleManifest,
    pub prompt: String,
    /// The run of an experiment this bundle belongs to.
    pub run: Option<RunRow>,
    /// The upload it came from (on its own, or into a leaderboard submission).
    pub upload: Option<Upload>,
    /// The server's verdict (the run's or the upload's).
    pub verdict: Option<Verdict>,
    pub n_events: usize,
    /// Events per chunk, and chunks.
    pub chunk: usize,
    pub chunks: usize,
    /// Events per channel and per op.
    pub by_channel: BTreeMap<String, u64>,
    pub by_op: BTreeMap<String, u64>,
    pub diff: SnapshotDiff,
    /// Raw files present, with their sizes.
    pub raw: BTreeMap<String, u64>,
    /// The events the agent framework caused on its own (not the model's tool calls), and the
    /// files only it changed.
    #[serde(default)]
    pub framework: Vec<u64>,
    #[serde(default)]
    pub framework_paths: Vec<String>,
}

/// `GET /api/bundles/{digest}/raw/conversation`: the model calls, with the run's usage.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Conversation {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub price: Option<Price>,
    pub total: Option<Usage>,
    pub cost_usd: Option<f64>,
    pub calls: Vec<Call>,
}
