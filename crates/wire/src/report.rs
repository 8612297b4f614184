//! A report: every table of `overeager report`, as the API serves it and the leaderboard reads it.

use overeager_core::Variant;
use overeager_core::model::PlayedBy;
use overeager_core::model::usage::Usage;
use overeager_core::stats::{self, Interval};
use serde::{Deserialize, Serialize};

use crate::board::Provenance;

/// `kept` or `stripped`.
pub fn short_variant(v: Variant) -> &'static str {
    match v {
        Variant::ConsentKept => "kept",
        Variant::ConsentStripped => "stripped",
    }
}

/// One framework × model × variant cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    pub framework: String,
    pub model: String,
    pub variant: Variant,
    pub simulated: bool,
    /// The agent is one of the project's scripted plays (a reference, not a product).
    #[serde(default)]
    pub scripted: bool,
    /// What answered the cell's model calls: of a cell whose runs differ in it, the first that
    /// is no real model (so a cell is never shown as a real model's unless all of it is).
    pub played_by: PlayedBy,
    /// Runs judged, including timeouts and incomplete verdicts.
    pub runs: u64,
    /// Timed-out runs: reported, and left out of `n`.
    pub timeouts: u64,
    /// Runs the rates are over: decided (overeager or clean) and not timed out.
    pub n: u64,
    /// Overeager runs (at least one trap fired).
    pub overeager: u64,
    pub rate: f64,
    pub ci: Interval,
    /// Fired critical traps, and runs with at least one.
    pub critical_traps: u64,
    pub critical_runs: u64,
    /// Sum of severity weights over fired traps, and its mean per run.
    pub severity_total: u64,
    pub severity_mean: f64,
    /// Runs that completed the task, over runs whose completion is known.
    pub completed: u64,
    pub completion_known: u64,
    pub completion_rate: f64,
    /// Completed without any trap firing.
    pub conditional_success: u64,
    pub conditional_success_rate: f64,
    /// Runs whose verdict is incomplete (no trap fired, some check without an answer): left
    /// out of `n`, never counted as clean. A run with a fired trap counts as overeager even if
    /// another check failed.
    pub incomplete: u64,
    /// Runs on a provider's model whose usage was recorded, and the tokens they used in all.
    #[serde(default)]
    pub usage_runs: u64,
    #[serde(default)]
    pub tokens: Usage,
    /// Of those, runs whose model's price was known, and what they cost in all (US dollars).
    #[serde(default)]
    pub priced_runs: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Cell {
    /// `framework · model`.
    pub fn agent(&self) -> String {
        format!("{} · {}", self.framework, self.model)
    }
    /// `framework · model`, with what played the model when it was no real model or was
    /// bridged (`… [stand-in provider]`), for tables and figures.
    pub fn marked_agent(&self) -> String {
        match (self.played_by.real_model(), self.played_by.bridged) {
            (true, false) => self.agent(),
            _ => format!("{} [{}]", self.agent(), self.played_by.label()),
        }
    }
    /// `framework · model · variant`.
    pub fn label(&self) -> String {
        format!("{} · {}", self.agent(), short_variant(self.variant))
    }
}

/// The paired consent ablation of one agent: McNemar's exact test over (scenario, replicate)
/// pairs run with and without the consent block.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Consent {
    pub framework: String,
    pub model: String,
    pub simulated: bool,
    pub pairs: u64,
    /// Overeager in both, in neither.
    pub both: u64,
    pub neither: u64,
    /// Discordant: overeager only with the block kept (b), only with it stripped (c).
    pub only_kept: u64,
    pub only_stripped: u64,
    pub rate_kept: f64,
    pub rate_stripped: f64,
    pub p: f64,
    /// Holm-adjusted over the agents of the report.
    pub p_holm: f64,
}

/// Fisher's exact test between two cells.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    /// The shared label: the model (across frameworks) or the framework (across models).
    pub shared: String,
    pub variant: Variant,
    pub a: String,
    pub b: String,
    pub k_a: u64,
    pub n_a: u64,
    pub k_b: u64,
    pub n_b: u64,
    /// rate_a − rate_b, with Newcombe's hybrid score interval.
    pub diff: f64,
    pub diff_ci: Option<Interval>,
    pub p: f64,
    /// Holm-adjusted within its family (cross-framework tests, or model gaps).
    pub p_holm: f64,
}

/// Overeager rate of one archetype in one cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArchetypeRate {
    pub archetype: String,
    /// Index into [`Report::cells`].
    pub cell: usize,
    pub k: u64,
    pub n: u64,
}

/// χ² test of independence between an axis's level and being overeager.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AxisTest {
    pub axis: String,
    /// `framework · model`, or `all agents`.
    pub agents: String,
    /// (level, overeager, n) for every level with runs.
    pub levels: Vec<(String, u64, u64)>,
    pub chi2: Option<stats::ChiSquare>,
    /// Why there is no test, when there is none.
    pub note: Option<String>,
}

/// Transfer of overeager's own scenarios to a cell: a scenario transfers if at least one of its
/// replicates was overeager.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OwnTransfer {
    pub source: String,
    pub cell: usize,
    pub replicates: u32,
    pub transfer: stats::Transfer,
}

/// Agreement of one human rater with the rule judge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabelAgreement {
    pub rater: String,
    pub n: u64,
    pub kappa: Option<f64>,
    /// κ's 95% interval ([`stats::Kappa::interval`]).
    pub kappa_ci: Option<[f64; 2]>,
    /// Why κ is undefined, or that the interval is rough (few runs).
    pub kappa_note: Option<String>,
    /// Human overeager & judge overeager, human only, judge only, neither.
    pub both: u64,
    pub human_only: u64,
    pub judge_only: u64,
    pub neither: u64,
    /// Of the runs the rater calls overeager, the share the judge flags.
    pub recall: Option<f64>,
    pub recall_ci: Option<Interval>,
    /// Of the runs the judge flags, the share the rater calls overeager.
    pub precision: Option<f64>,
    pub precision_ci: Option<Interval>,
}

/// Everything a report shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub experiment: String,
    pub title: String,
    /// At least one cell's agent is simulated.
    pub simulated: bool,
    /// What played the model in its cells, each kind once: a report whose cells are not all
    /// real models says so.
    #[serde(default)]
    pub played_by: Vec<PlayedBy>,
    pub confidence: f64,
    pub overeager_version: String,
    pub runs: u64,
    pub timeouts: u64,
    /// Runs with an incomplete verdict (left out of every rate).
    pub incomplete: u64,
    /// Pooled overeager rate over every decided, non-timed-out run.
    pub overall_rate: f64,
    pub cells: Vec<Cell>,
    pub consent: Vec<Consent>,
    pub cross_framework: Vec<Comparison>,
    pub model_gaps: Vec<Comparison>,
    pub archetypes: Vec<String>,
    pub archetype_rates: Vec<ArchetypeRate>,
    pub axes: Vec<AxisTest>,
    pub own_transfer: Vec<OwnTransfer>,
    pub labels: Vec<LabelAgreement>,
    /// How much of the spread of overeager over runs the framework, the model, their
    /// interaction and the scenario explain (with two or more cells).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variance: Option<Decomposition>,
    /// Approved public submissions to benchmarks published from this experiment: each cell
    /// computed from the server's own verdicts on the submitted bundles, with its provenance.
    /// They stand beside `cells` and take part in none of the experiment's comparisons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub submitted: Vec<SubmittedCell>,
}

/// A cell of an approved submission.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubmittedCell {
    #[serde(flatten)]
    pub cell: Cell,
    pub provenance: Provenance,
}

/// The terms the deviance is decomposed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Term {
    Framework,
    Model,
    Interaction,
    Scenario,
}

impl Term {
    pub const ALL: [Term; 4] = [
        Term::Framework,
        Term::Model,
        Term::Interaction,
        Term::Scenario,
    ];

    /// How a report names it.
    pub fn label(self) -> &'static str {
        match self {
            Term::Framework => "framework",
            Term::Model => "model",
            Term::Interaction => "framework × model",
            Term::Scenario => "scenario",
        }
    }

    /// Its bit in a set of terms (a model's terms are a `u8` of these bits).
    pub fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// One term's share of the deviance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub term: Term,
    /// Part of the variant-only model's deviance this term removes (Shapley average).
    pub share: f64,
    /// Percentile bootstrap interval over scenarios.
    pub lo: f64,
    pub hi: f64,
}

/// The decomposition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decomposition {
    /// The terms with more than one level (a term with one level explains nothing).
    pub shares: Vec<Share>,
    /// What none of the terms explains: one less the shares.
    pub residual: f64,
    /// Deviance of the variant-only model, and of the full one.
    pub null_deviance: f64,
    pub full_deviance: f64,
    pub runs: f64,
    pub scenarios: usize,
    /// Bootstrap resamples behind the intervals, and their confidence.
    pub resamples: usize,
    pub confidence: f64,
}

/// Two raters on the runs both labelled.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RaterPair {
    pub a: String,
    pub b: String,
    /// Runs both labelled.
    pub n: u64,
    /// Runs on which they gave the same call.
    pub same: u64,
    pub kappa: Option<f64>,
    /// κ's 95% interval.
    pub kappa_ci: Option<[f64; 2]>,
    /// Why κ is undefined, or that the interval is rough (few runs).
    pub kappa_note: Option<String>,
}

/// A trap's firings as the raters called them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrapAgreement {
    pub trap: String,
    /// Calls on a firing of this trap (one per rater and run).
    pub calls: u64,
    pub agree: u64,
    pub disagree: u64,
    /// The share of calls that agree the trap fired rightly, with its Wilson interval.
    pub share: f64,
    pub share_ci: Option<Interval>,
}

/// Everything the labels report shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabelReport {
    /// Labels counted.
    pub labels: u64,
    /// Runs with at least one label.
    pub runs: u64,
    /// Labels of runs the rule judge has not judged (left out of the agreement).
    pub unjudged: u64,
    /// Each rater against the judge: the `raters_total` raters, or when there are more than
    /// the report shows, those with the most labels.
    pub raters: Vec<LabelAgreement>,
    /// Raters with a label in the scope.
    #[serde(default)]
    pub raters_total: u64,
    /// Pairs of raters on the runs both labelled, among the `pairs_among` raters with the most
    /// labels (all of them when few).
    pub pairs: Vec<RaterPair>,
    #[serde(default)]
    pub pairs_among: u64,
    pub traps: Vec<TrapAgreement>,
    pub confidence: f64,
}

/// Transfer from one source agent to one target agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TransferRow {
    pub source: String,
    pub target: String,
    /// Runs per case (the most any case has).
    pub k: u32,
    /// Cases with fewer runs than `k`.
    pub incomplete_cases: u64,
    pub transfer: stats::Transfer,
}
/// `GET /api/transfer`: AutoElicit cases stored, by severity, and transfer per source → target.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TransferDoc {
    pub cases: usize,
    pub by_severity: std::collections::BTreeMap<String, u64>,
    pub rows: Vec<TransferRow>,
}
