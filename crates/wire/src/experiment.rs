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
    /// Why this is not a change a runner can make, if it is not (whether the experiment can
    /// take a target is the store's to say).
    pub fn check(&self) -> Result<(), SteeringRefusal> {
        if self.paused.is_none() && self.max_cost.is_none() && self.jobs.is_none() && self.until.is_none() {
            return Err(SteeringRefusal::NothingToChange);
        }
        if self.max_cost.is_some_and(|m| !(m.is_finite() && m > 0.0)) {
            return Err(SteeringRefusal::MaxCost);
        }
        if self.jobs == Some(0) {
            return Err(SteeringRefusal::Jobs);
        }
        if self.until.is_some_and(|u| !(u > 0.0 && u < 0.5)) {
            return Err(SteeringRefusal::Until);
        }
        Ok(())
    }
}

/// Why a [`Steering`] is refused. The same refusal reaches the API and the command line, each
/// of which names the fields its own way ([`SteeringRefusal::text`]).
#[derive(Debug, Clone, PartialEq)]
pub enum SteeringRefusal {
    /// No field is given.
    NothingToChange,
    /// `max_cost` is not a positive number.
    MaxCost,
    /// `jobs` is 0.
    Jobs,
    /// `until` is not a half-width in (0, 0.5).
    Until,
    /// `until` for an experiment that does not allocate adaptively.
    NotAdaptive { experiment: String },
}

/// How a caller names the fields of a [`Steering`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldNames {
    /// As the API's JSON body: `max_cost`.
    Json,
    /// As `experiment limit`'s flags: `--max-cost` (pausing is `experiment pause`).
    Flags,
}

impl SteeringRefusal {
    /// The refusal and what to do, in the caller's names for the fields.
    pub fn text(&self, names: FieldNames) -> String {
        let field = |json: &str| match names {
            FieldNames::Json => format!("`{json}`"),
            FieldNames::Flags => format!("--{}", json.replace('_', "-")),
        };
        match self {
            SteeringRefusal::NothingToChange => match names {
                FieldNames::Json => "say what to change: `paused`, `max_cost`, `jobs` and/or `until`".into(),
                FieldNames::Flags => "say what to change: --max-cost USD, --jobs N and/or --until HALF-WIDTH (`experiment pause` and `resume` pause)".into(),
            },
            SteeringRefusal::MaxCost => format!("{} must be a positive number of US dollars", field("max_cost")),
            SteeringRefusal::Jobs => {
                let pause = if names == FieldNames::Json { "`paused`" } else { "`experiment pause`" };
                format!("{} must be at least 1 ({pause} stops starting runs)", field("jobs"))
            }
            SteeringRefusal::Until => format!("{} is a half-width above 0 and below 0.5 (0.05 for ±5 percentage points)", field("until")),
            SteeringRefusal::NotAdaptive { experiment } => {
                format!("experiment `{experiment}` does not allocate adaptively, so it has no target ({}) to change; a target is set when an experiment starts", field("until"))
            }
        }
    }
}

/// In the API's names.
impl std::fmt::Display for SteeringRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text(FieldNames::Json))
    }
}

impl std::error::Error for SteeringRefusal {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_fields_as_its_caller_does() {
        let refused = Steering { jobs: Some(0), ..Steering::default() }.check().unwrap_err();
        assert_eq!(refused, SteeringRefusal::Jobs);
        assert_eq!(refused.text(FieldNames::Json), "`jobs` must be at least 1 (`paused` stops starting runs)");
        assert_eq!(refused.text(FieldNames::Flags), "--jobs must be at least 1 (`experiment pause` stops starting runs)");
        assert!(SteeringRefusal::MaxCost.text(FieldNames::Flags).starts_with("--max-cost "));
        assert_eq!(Steering::default().check(), Err(SteeringRefusal::NothingToChange));
        assert_eq!(Steering { until: Some(0.5), ..Steering::default() }.check(), Err(SteeringRefusal::Until));
        assert_eq!(Steering { paused: Some(true), ..Steering::default() }.check(), Ok(()));
    }
}
