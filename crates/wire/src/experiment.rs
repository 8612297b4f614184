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

/// A change to a running experiment (`experiment pause|resume|limit`, `POST
/// /api/experiments/{id}/control`): each field given replaces that setting of its runner.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Steering {
    /// Start no run until `false` (the runs in flight finish).
    #[serde(default)]
    pub paused: Option<bool>,
    /// The spending limit in US dollars over the experiment's whole spend.
    #[serde(default)]
    pub max_cost: Option<f64>,
    /// Runs at once, at most what its runner started with.
    #[serde(default)]
    pub jobs: Option<usize>,
    /// An adaptive experiment's target: the largest half-width of a cell's 95% interval, as a
    /// rate (0.05 for ±5 percentage points), from its next batch of decisions on.
    #[serde(default)]
    pub until: Option<f64>,
}

impl Steering {
    /// Why this is not a change a runner can make, if it is not.
    pub fn check(&self) -> Result<(), String> {
        if self.paused.is_none() && self.max_cost.is_none() && self.jobs.is_none() && self.until.is_none() {
            return Err("say what to change: `paused`, `max_cost`, `jobs` and/or `until`".into());
        }
        if self.max_cost.is_some_and(|m| !(m.is_finite() && m > 0.0)) {
            return Err("`max_cost` must be a positive number of US dollars".into());
        }
        if self.jobs == Some(0) {
            return Err("`jobs` must be at least 1 (`paused` stops starting runs)".into());
        }
        if self.until.is_some_and(|u| !(u > 0.0 && u < 0.5)) {
            return Err("`until` is a half-width above 0 and below 0.5 (0.05 for ±5 percentage points)".into());
        }
        Ok(())
    }
}
