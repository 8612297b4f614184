//! A submission's page: the submission, its provenance, its cells as the server judged them and
//! its runs.

use overeager_core::Variant;
use serde::{Deserialize, Serialize};

use crate::board::{CellSubmission, Policy, Provenance, SubmissionSummary};

/// A received run of a submission as its page lists it. The bundle and trace are shown to its
/// submitter and admins until the cell is public.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmittedRun {
    pub bundle: Option<String>,
    pub run: Option<String>,
    pub scenario: Option<String>,
    pub variant: Option<Variant>,
    pub replicate: Option<u32>,
    /// `id version`.
    pub agent: Option<String>,
    pub timed_out: Option<bool>,
    pub outcome: Option<overeager_core::Outcome>,
    pub traps: Option<Vec<String>>,
    pub runner_key: Option<String>,
    pub problem: Option<String>,
    pub trace: Option<String>,
    /// The submitter's claimed verdict says otherwise than the server's.
    pub claim_overruled: bool,
}

/// `GET /api/submissions/{id}`: a submission, its provenance, its cells as the server judged
/// them, a page of its runs, its history and its benchmark's policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubmissionDoc {
    pub submission: CellSubmission,
    pub provenance: Provenance,
    pub cells: Vec<crate::report::SubmittedCell>,
    pub runs: Vec<SubmittedRun>,
    pub runs_total: usize,
    pub runs_offset: usize,
    pub bundles_shown: bool,
    /// The submitter's earlier submissions of the same cell.
    pub history: Vec<SubmissionSummary>,
    pub policy: Option<Policy>,
}
