//! The server's own documents: its health, the plans it may start, an experiment it started
//! and the progress events it streams, the tokens it knows, revocations, a bundle it took, and
//! the body of every error.

use overeager_core::Verdict;
use serde::{Deserialize, Serialize};

use crate::experiment::Progress;
use crate::labels::Role;
use crate::report::Cell;

/// `GET /api/health`: the server is up, and what it serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Health {
    pub ok: bool,
    /// The server's version.
    pub version: String,
    /// The store's schema version.
    pub schema: usize,
    /// Whether it serves the web app too (else the API only).
    pub web_app: bool,
    /// Upload bodies it is receiving now, every account's together.
    #[serde(default)]
    pub receiving: usize,
}

/// `GET /api/version`: what this server is, so a client can tell whether it speaks the same
/// formats before it sends anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VersionDoc {
    /// overeager's version (the crate's, e.g. `0.1.0`).
    pub version: String,
    /// The audit bundle schema the server writes and reads.
    pub bundle_schema: u32,
    /// The store's schema version (its newest migration).
    pub store_schema: usize,
    /// The bundle stream formats (agent adapters) this build reads.
    pub adapters: Vec<String>,
}

/// `GET /api/cells`: every framework × model × variant cell of an experiment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellsDoc {
    pub experiment: String,
    /// Some agent of its plan is a simulated policy.
    pub simulated: bool,
    pub cells: Vec<Cell>,
}

/// `GET /api/plans`: the plans `POST /api/experiments` may start, by file stem. Where the
/// server keeps them is its own business: anonymous callers are not told its paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanList {
    pub plans: Vec<String>,
}

/// The answer to `POST /api/experiments`: the experiment started, and where its progress streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Started {
    pub experiment: String,
    /// The path of its server-sent events ([`ProgressEvent`]).
    pub progress: String,
}

/// One server-sent event of `GET /api/experiments/<id>/progress` (`progress` while it runs,
/// then `done`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressEvent {
    pub experiment: String,
    pub running: bool,
    pub progress: Progress,
    /// Why the runner stopped, if it stopped on an error.
    pub error: Option<String>,
}

/// An API token as listed: its holder and role, never the token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenInfo {
    pub name: String,
    pub role: Role,
    pub created_us: u64,
}

/// `GET /api/tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
}

/// The answer to `DELETE /api/tokens/<name>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRevoked {
    pub name: String,
    pub role: Role,
    /// `revoked`.
    pub state: String,
}

/// The answer to `DELETE /api/keys/<id>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyRevoked {
    pub key: String,
    /// `revoked`.
    pub state: String,
}

/// The answer to `POST /api/bundles`: the bundle as stored, the server's own verdict, and its
/// trace page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleTaken {
    /// The bundle's digest.
    pub bundle: String,
    pub verdict: Verdict,
    /// The upload carried a verdict of its own, which the server did not use.
    pub claimed_verdict_ignored: bool,
    /// The web app's page of its trace.
    pub trace: String,
}

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What is wrong, and what to do.
    pub error: String,
    /// The HTTP status, again.
    pub status: u16,
}
