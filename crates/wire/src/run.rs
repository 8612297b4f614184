//! Runs as the run list, the run page, search and the trace viewer show them.

use overeager_core::{Variant, Verdict};
use serde::{Deserialize, Serialize};

/// A run as the run list and the trace viewer show it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRow {
    pub id: String,
    pub experiment: String,
    pub agent: String,
    pub framework: String,
    pub model: String,
    pub simulated: bool,
    /// What answered its model calls (its agent id's reading until it is done).
    pub played_by: overeager_core::model::PlayedBy,
    pub scenario: String,
    pub scenario_hash: String,
    pub variant: Variant,
    pub replicate: u32,
    pub status: String,
    pub bundle: Option<String>,
    pub overeager: Option<bool>,
    pub timed_out: bool,
    pub traps: Vec<(String, String)>,
    /// `overeager`, `clean` or `incomplete` once judged.
    pub outcome: Option<overeager_core::Outcome>,
    /// Why a failed run failed (`errored (model API): …` when its model API failed it).
    #[serde(default)]
    pub error: Option<String>,
    /// Tokens its model used and what they cost (runs on a provider's model).
    #[serde(default)]
    pub tokens: Option<overeager_core::model::usage::Usage>,
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// The errors of its earlier failed attempts, oldest first (a run failed and run again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_errors: Vec<String>,
}

/// A page of the run list.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunPage {
    /// Runs matching the filters, on every page.
    pub total: u64,
    /// Pass as `after` for the next page; `None` on the last.
    pub next: Option<i64>,
    pub runs: Vec<RunRow>,
}

/// A bundle uploaded on its own (`POST /api/bundles`) and the server's verdict on it. (A
/// leaderboard submission, of a whole cell, is `board::CellSubmission`.)
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Upload {
    pub bundle: String,
    pub run_id: String,
    pub scenario_hash: String,
    pub agent: String,
    pub framework: String,
    pub model: String,
    pub variant: Variant,
    pub overeager: bool,
    pub verdict: Verdict,
    /// What the client claimed, never used.
    pub claimed: Option<serde_json::Value>,
    pub uploaded_by: String,
    pub uploaded_us: u64,
}

/// One event of a run that matched, as the results show it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EventHit {
    pub seq: u64,
    pub channel: String,
    pub op: String,
    /// The command line, paths or text that matched.
    pub text: String,
}

/// A run that matched, with its matching events (the first ones).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunHit {
    pub run: RunRow,
    pub events: Vec<EventHit>,
    /// How many of its events matched.
    pub matched_events: usize,
}
/// `GET /api/runs/{id}`: a run, its verdict, its consent-pair partner, the same scenario in the
/// experiment's other cells, and every rater's label of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunDoc {
    pub run: RunRow,
    pub verdict: Option<Verdict>,
    /// The same cell, scenario and replicate under the other prompt.
    pub partner: Option<String>,
    pub other_cells: Vec<RunRow>,
    pub labels: Vec<crate::labels::Label>,
}

/// `GET /api/search`: the query, how many runs match in all, and this page of them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchAnswer {
    pub query: String,
    pub total: usize,
    pub runs: Vec<RunHit>,
}

/// `GET /api/bundles`: bundles uploaded one by one, newest first, with the server's verdicts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Uploads {
    pub uploads: Vec<Upload>,
}
