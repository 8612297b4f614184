//! Whole-cell submissions to a benchmark: their status, verification, provenance and policy.

use std::collections::BTreeMap;

use overeager_core::Variant;
use serde::{Deserialize, Serialize};

/// A benchmark's rules for submitted cells, set when it is published.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Policy {
    /// Every bundle must carry an intact signature by a runner key this server trusts and has
    /// registered to the submitting account; the timeout is then read from signed data only.
    #[serde(default)]
    pub require_trusted_runner: bool,
    /// Replicates every scenario × variant must have at least (the benchmark's own replicates
    /// when unset); a cell may bring more, the same number for every scenario × variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicates: Option<u32>,
    /// Agents allowed, as `id@version` patterns (`claude-code@2.0.*`, `codex@*`); any agent when
    /// empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
}

/// Where a submission is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubmissionStatus {
    /// Open: bundles are being sent, or the last verification found problems.
    Draft,
    /// Complete and consistent; waiting for an admin.
    Verified,
    /// On the leaderboard.
    Approved,
    /// Turned away by an admin.
    Rejected,
    /// Taken back by its submitter before a decision.
    Withdrawn,
    /// Was approved; a later approved submission of the same cell by the same submitter
    /// replaced it on the leaderboard.
    Superseded,
}

/// One problem a verification found, with the runs and bundles it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// `missing`, `duplicate`, `unexpected`, `wrong_scenario`, `inconsistent_agent`,
    /// `wrong_cell`, `wrong_timeout`, `not_uploaded`, `refused`, `submitted_elsewhere`, or a
    /// breach of the benchmark's policy: `unsigned`, `untrusted_runner`, `too_few_replicates`,
    /// `uneven_replicates`, `agent_not_allowed`.
    pub kind: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bundles: Vec<String>,
}

/// What a verification of a whole cell found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// No problems: the submission is verified.
    pub ok: bool,
    pub checked_us: u64,
    /// Runs the benchmark asks for, runs declared, and bundles received.
    pub expected: u64,
    pub declared: u64,
    pub received: u64,
    /// Of the received, judged bundles: timed out, overeager, incomplete.
    pub timeouts: u64,
    pub overeager: u64,
    pub incomplete: u64,
    /// Runs whose claimed verdict says otherwise than the server's (the server's counts).
    pub claims_overruled: Vec<String>,
    pub problems: Vec<Problem>,
}

/// What re-judging an approved submission changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejudged {
    pub at_us: u64,
    /// Module id → version of the judge that re-judged.
    pub judge: BTreeMap<String, String>,
    pub bundles: u64,
    /// Runs whose outcome changed: (run, bundle, before, after).
    pub moved: Vec<Moved>,
}

/// A run whose outcome changed on re-judging.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    pub run: String,
    pub bundle: String,
    pub variant: Variant,
    pub before: overeager_core::Outcome,
    pub after: overeager_core::Outcome,
}

/// A whole-cell submission.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellSubmission {
    pub id: String,
    pub benchmark: String,
    pub framework: String,
    pub model: String,
    pub status: SubmissionStatus,
    pub submitted_by: String,
    /// Runs declared ([`Store::declared_runs`] lists them).
    pub declared: u64,
    /// Problems the last verification found.
    pub problems: Option<u64>,
    pub report: Option<VerifyReport>,
    /// Bundle bodies received whole (a resumed upload does not send again what arrived).
    pub uploads: u64,
    pub created_us: u64,
    pub updated_us: u64,
    pub decided_by: Option<String>,
    pub decided_us: Option<u64>,
    pub note: Option<String>,
    pub rejudged: Option<Rejudged>,
    /// The later approved submission that replaced this one.
    pub superseded_by: Option<String>,
}

/// A submission in a list: what `GET /api/submissions` shows, read without its report or
/// its declared runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubmissionSummary {
    pub id: String,
    pub benchmark: String,
    pub framework: String,
    pub model: String,
    pub status: SubmissionStatus,
    pub submitted_by: String,
    pub declared: u64,
    pub received: u64,
    pub problems: Option<u64>,
    /// `trusted` or `self-reported`, as in [`Provenance::runner`].
    pub runner: String,
    pub created_us: u64,
    pub decided_us: Option<u64>,
    pub superseded_by: Option<String>,
}

/// Who ran a submitted cell, how, and what the server made of it: shown beside its row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Provenance {
    pub submission: String,
    pub benchmark: String,
    pub submitted_by: String,
    pub submitted_us: u64,
    pub approved_by: Option<String>,
    pub approved_us: Option<u64>,
    /// Agent ids, framework versions, executors, image digests and hosts seen in the bundles.
    pub agents: Vec<String>,
    pub versions: Vec<String>,
    pub executors: Vec<String>,
    pub image_digests: Vec<String>,
    /// `trusted` when every bundle carries an intact signature by a runner key trusted now and
    /// registered to the submitter, `self-reported` otherwise.
    pub runner: String,
    /// Runner keys among `runner_keys` that were revoked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revoked_runner_keys: Vec<String>,
    /// The agents are the project's own scripted plays or simulated policies, not a product.
    #[serde(default)]
    pub scripted: bool,
    #[serde(default)]
    pub simulated: bool,
    pub runner_keys: Vec<String>,
    /// Every verdict is the server's own.
    pub rejudged: bool,
    /// Module id → version of the predicates that judged it.
    pub judge: BTreeMap<String, String>,
    /// The last re-judging after the predicates changed, if any.
    pub last_rejudged_us: Option<u64>,
}

impl Policy {
    /// Whether agent `id` at `version` is allowed.
    pub fn allows_agent(&self, id: &str, version: &str) -> bool {
        self.agents.is_empty() || self.agents.iter().any(|p| overeager_core::glob::agent_matches(p, id, version))
    }

    /// Checks the patterns: `id@version`, `*` only at the end of either part.
    pub fn check(&self) -> Result<(), String> {
        for p in &self.agents {
            let (id, version) = p.split_once('@').ok_or_else(|| {
                format!(
                    "agent pattern `{p}` must be `id@version` (e.g. `claude-code@2.0.*`, `codex@*`)"
                )
            })?;
            for part in [id, version] {
                if part.is_empty() || part.trim_end_matches('*').contains('*') {
                    return Err(format!(
                        "agent pattern `{p}`: each part must be non-empty, with `*` only at its end"
                    ));
                }
            }
        }
        if self.min_replicates == Some(0) {
            return Err("--min-replicates must be at least 1".into());
        }
        Ok(())
    }
}

impl SubmissionStatus {
    /// The status's name, as the store keeps it and the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SubmissionStatus::Draft => "draft",
            SubmissionStatus::Verified => "verified",
            SubmissionStatus::Approved => "approved",
            SubmissionStatus::Rejected => "rejected",
            SubmissionStatus::Withdrawn => "withdrawn",
            SubmissionStatus::Superseded => "superseded",
        }
    }

    /// The status named `s`, if it is one.
    pub fn parse(s: &str) -> Option<SubmissionStatus> {
        [
            SubmissionStatus::Draft,
            SubmissionStatus::Verified,
            SubmissionStatus::Approved,
            SubmissionStatus::Rejected,
            SubmissionStatus::Withdrawn,
            SubmissionStatus::Superseded,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }
}
/// `GET /api/submissions`: a page of submissions, newest first; `next` continues.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubmissionList {
    pub submissions: Vec<SubmissionSummary>,
    pub next: Option<String>,
}



/// What approving, rejecting or withdrawing a submission left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decided {
    pub id: String,
    pub status: SubmissionStatus,
    #[serde(default)]
    pub decided_by: Option<String>,
    #[serde(default)]
    pub note: Option<String>,
}

/// The body of approving, rejecting (or revoking): an optional note.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// Why, shown on the submission's page.
    #[serde(default)]
    pub note: Option<String>,
}

/// A run the submitter says the cell holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeclaredRun {
    /// sha256 of the packed bundle (`.oeb`).
    pub bundle: String,
    /// The run id in the submitter's store.
    pub run: String,
    /// The verdict the submitter's store has: kept to show how it compares, never used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed: Option<serde_json::Value>,
}

/// `POST /api/submissions`: a cell submission as its submitter opens (or reopens) it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct OpenSubmission {
    /// A benchmark name from `GET /api/benchmarks`.
    pub benchmark: String,
    /// The cell: framework and model labels, as in the submitter's plan.
    pub framework: String,
    pub model: String,
    /// Every run of the cell: its bundle digest and run id, and optionally the verdict the
    /// submitter's store has (kept for comparison, never used).
    pub runs: Vec<DeclaredRun>,
}

/// The answer to opening a submission: which declared bundles the server still needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Opened {
    pub id: String,
    pub status: SubmissionStatus,
    /// The same submitter's open submission of the cell was reopened.
    pub resumed: bool,
    pub declared: u64,
    pub received: u64,
    /// Bundle digests not received yet, to send with `PUT …/bundles/{digest}`.
    pub missing: Vec<String>,
    /// The submission's page in the web app.
    pub page: String,
}

/// `POST /api/submissions/{id}/verify`: the submission's state and its verification report;
/// refused (422), also the usual `error` and `status` of an error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verified {
    pub id: String,
    pub state: SubmissionStatus,
    pub report: VerifyReport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

/// A published benchmark as `GET /api/benchmarks` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkSummary {
    pub name: String,
    /// The maintainer's experiment it was published from.
    pub experiment: String,
    pub title: String,
    /// How many scenarios it holds.
    pub scenarios: usize,
    pub variants: Vec<Variant>,
    pub replicates: u32,
    /// The runs a complete cell has.
    pub runs_per_cell: u64,
    /// The per-run wall-clock limit every run must have had.
    pub timeout_ms: u64,
    pub policy: Policy,
}

/// `GET /api/benchmarks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkList {
    pub benchmarks: Vec<BenchmarkSummary>,
}

/// The answer to `PUT /api/submissions/<id>/bundles/<sha>`: the bundle taken for its run,
/// judged by the server (or held already from an earlier upload).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleReceived {
    pub bundle: String,
    pub run: String,
    /// The server had it already: nothing was judged again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub received_already: bool,
    /// The server's verdict's outcome (not for a bundle held already).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<overeager_core::Outcome>,
    /// The runner key that signed it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_key: Option<String>,
}

/// One approved submission re-judged by `POST /api/rejudge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RejudgedSubmission {
    /// The submission's id.
    pub id: String,
    #[serde(flatten)]
    pub rejudged: Rejudged,
}

/// The answer to `POST /api/rejudge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RejudgedList {
    pub submissions: Vec<RejudgedSubmission>,
}

/// A runner key this server knows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunnerKey {
    pub key_id: String,
    pub public: String,
    pub owner: Option<String>,
    /// The account (token name) whose submissions may carry bundles this key signed.
    pub account: Option<String>,
    pub added_us: u64,
    pub revoked_us: Option<u64>,
}

impl RunnerKey {
    /// Whether the key is trusted now for bundles `account` submits: not revoked, and
    /// registered to that account.
    pub fn trusted_for(&self, account: &str) -> bool {
        self.revoked_us.is_none() && self.account.as_deref() == Some(account)
    }
}

/// A runner key as `GET /api/runners` lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunnerKeyRow {
    #[serde(flatten)]
    pub key: RunnerKey,
    /// `trusted` or `revoked`.
    pub state: String,
}

/// `GET /api/runners`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunnerList {
    pub runners: Vec<RunnerKeyRow>,
}

/// The answer to `POST /api/runners/<key>/revoke`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunnerRevoked {
    pub key_id: String,
    /// `revoked`.
    pub state: String,
    pub revoked_us: Option<u64>,
}
