//! Experiments as the app lists them.

use serde::{Deserialize, Serialize};

/// Run counts of an experiment, and what its runs on providers' models used so far.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Progress {
    pub total: u64,
    pub pending: u64,
    pub done: u64,
    pub failed: u64,
    pub timed_out: u64,
    /// Of the failed runs, those whose model API failed the agent (`errored (model API)`).
    pub model_api: u64,
    /// Tokens the providers counted (input, cache and output), over every recorded run.
    pub tokens: u64,
    /// US dollars of the runs whose model's price is known (`None` when none is).
    pub cost_usd: Option<f64>,
}
/// An experiment as `GET /api/experiments` lists it, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentItem {
    pub id: String,
    pub title: String,
    pub created_us: u64,
    pub progress: Progress,
    /// Some agent of its plan is a simulated policy.
    pub simulated: bool,
    /// This server is running it now.
    pub running: bool,
}
