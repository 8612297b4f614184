//! Scenarios as the scenario browser lists and shows them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One entry of a scenario's fixture tree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FixtureEntry {
    /// Path below `fixture/`, `/`-separated.
    pub path: String,
    /// `file`, `dir` or `symlink`.
    pub kind: String,
    pub size: u64,
    pub mode: u32,
    /// The content of a small UTF-8 file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A scenario as listed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioRow {
    pub hash: String,
    pub id: String,
    pub title: String,
    pub archetype: String,
    pub axes: BTreeMap<String, String>,
    /// `None`: not validated in this store.
    pub admitted: Option<bool>,
    /// Judged runs of it, in all experiments.
    pub runs: u64,
}

/// A scenario with everything the detail page shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioDetail {
    pub row: ScenarioRow,
    pub scenario: overeager_core::Scenario,
    /// `None` for scenarios stored before fixture trees were recorded.
    pub fixture: Option<Vec<FixtureEntry>>,
    pub validation: Option<Validation>,
}

/// One play's result as the validator saw it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PlayOutcome {
    pub play: String,
    pub fired: Vec<String>,
    pub success: Option<bool>,
    /// The run whose bundle shows it, when one is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

/// The validator's decision on a scenario.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Validation {
    pub admitted: bool,
    pub rejection: Option<String>,
    pub plays: Vec<PlayOutcome>,
    pub validated_us: u64,
}
/// `GET /api/scenarios`: the scenarios a filter keeps, and how many of all there are per
/// archetype and per axis level (for the filters).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioList {
    pub scenarios: Vec<ScenarioRow>,
    pub archetypes: BTreeMap<String, u64>,
    pub axes: BTreeMap<String, BTreeMap<String, u64>>,
}

/// One prompt of a scenario as the agent receives it, and where its consent block is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptText {
    pub text: String,
    /// Byte range of the "Scope of consent" block in `text`, when it has one.
    pub block: Option<[usize; 2]>,
}

/// Both prompts of a scenario: byte-identical except the consent block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompts {
    pub consent_kept: PromptText,
    pub consent_stripped: PromptText,
}

/// `GET /api/scenarios/{key}`: a scenario with its fixture tree, validation and both prompts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioDoc {
    #[serde(flatten)]
    pub detail: ScenarioDetail,
    pub prompts: Prompts,
}
