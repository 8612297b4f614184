//! Human labels, review queues and the roles of API tokens.

use std::collections::BTreeMap;

use overeager_core::Outcome;
use serde::{Deserialize, Serialize};

/// Who may write through the API, from least to most: each role may do what the ones before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Labels runs and draws review queues; nothing else.
    Reviewer,
    /// Starts experiments, uploads bundles and predicates.
    Writer,
    /// Also approves or rejects uploaded predicates.
    Admin,
}

/// One rater's label of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Label {
    pub run: String,
    pub rater: String,
    /// The rater's call: is the run overeager?
    pub overeager: bool,
    /// For each trap the rule judge fired: does the rater agree it fired rightly? Empty for an
    /// imported label.
    #[serde(default)]
    pub traps: BTreeMap<String, bool>,
    #[serde(default)]
    pub comment: Option<String>,
    /// When it was made (Unix µs); unknown for labels imported before times were kept.
    #[serde(default)]
    pub labelled_us: Option<u64>,
    /// `app`, or the name of the CSV file it was imported from.
    #[serde(default)]
    pub source: Option<String>,
}

/// One stratum of a review queue: a cell and the rule judge's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stratum {
    pub framework: String,
    pub model: String,
    pub outcome: Outcome,
    /// Judged runs of the experiment in this stratum.
    pub runs: u32,
    /// Of those, how many the queue holds.
    pub drawn: u32,
}

/// A review queue.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReviewQueue {
    pub id: String,
    pub experiment: String,
    /// The size asked for (the queue holds fewer when the experiment has fewer judged runs).
    pub size: u32,
    pub seed: u64,
    pub strata: Vec<Stratum>,
    /// Runs the queue holds.
    pub items: u32,
    pub created_by: String,
    pub created_us: u64,
}

impl Role {
    /// The role's name, as the store keeps it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Reviewer => "reviewer",
            Role::Writer => "writer",
            Role::Admin => "admin",
        }
    }

    /// The role named `s`; anything else is the least, a reviewer.
    pub fn parse(s: &str) -> Role {
        match s {
            "admin" => Role::Admin,
            "writer" => Role::Writer,
            _ => Role::Reviewer,
        }
    }
}
/// `GET /api/whoami`: the holder of a token (the rater of its labels) and its role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Whoami {
    pub name: String,
    pub role: Role,
}

/// `DELETE /api/runs/{id}/label`: whether the rater had a label of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelDeleted {
    pub run: String,
    pub rater: String,
    pub deleted: bool,
}








/// `PUT /api/runs/{id}/label`: a label as the app sends it (the rater is the token's holder).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LabelBody {
    /// Is the run overeager?
    pub overeager: bool,
    /// For each trap the rule judge fired: does the firing look right?
    #[serde(default)]
    pub traps: BTreeMap<String, bool>,
    #[serde(default)]
    pub comment: Option<String>,
}

/// `POST /api/queues`: what a review queue is drawn with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewQueue {
    pub experiment: String,
    /// Runs to draw (1 to 2000; fewer when the experiment has fewer judged runs).
    pub size: u32,
    /// The seed of the draw (default 1): the same seed draws the same runs.
    #[serde(default = "one")]
    pub seed: u64,
}

fn one() -> u64 {
    1
}
