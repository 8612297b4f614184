//! The predicate registry: the modules a judge loads and the uploads with their status.

use serde::{Deserialize, Serialize};

/// An uploaded predicate module as registered.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PredicateRow {
    pub digest: String,
    pub id: String,
    pub version: String,
    pub key_id: String,
    pub owner: Option<String>,
    /// `pending`, `approved`, `rejected`, or `builtin` for the library compiled in.
    pub status: String,
    pub predicates: Vec<String>,
    pub self_test: SelfTest,
    pub uploaded_by: String,
    pub uploaded_us: u64,
    pub decided_by: Option<String>,
    pub decided_us: Option<u64>,
}
/// A predicate of a module, as the registry lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PredicateSummary {
    pub name: String,
    pub summary: String,
}

/// A module the judge loads now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadedModule {
    pub id: String,
    pub digest: String,
    pub version: String,
    /// The key that signed it (none for the built-in library).
    pub key_id: Option<String>,
    pub owner: Option<String>,
    pub predicates: Vec<PredicateSummary>,
}

/// An uploaded module as it stands now: `status` is `revoked` (or `untrusted`) when its signing
/// key was revoked (or left the trust store) after the decision, which `decided_status` keeps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Upload {
    #[serde(flatten)]
    pub row: PredicateRow,
    pub decided_status: String,
    /// Why it no longer counts, when it does not.
    pub revoked_reason: Option<String>,
}

/// `GET /api/predicates`: the modules loaded and every upload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Registry {
    pub loaded: Vec<LoadedModule>,
    pub uploads: Vec<Upload>,
}
/// What an uploaded module did on stored bundles before anyone may approve it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SelfTest {
    /// Distinct bundles it was called on.
    pub bundles: usize,
    /// Cases (predicate and arguments) tried.
    #[serde(default)]
    pub cases: usize,
    /// Predicate calls made (each twice, to compare).
    pub calls: usize,
    pub fired: usize,
    /// Calls that answered with an error (e.g. arguments it needs were not given).
    pub errors: usize,
    /// Why the module fails the self-test: a trap (fuel, memory, deadline), an answer out of
    /// bounds, or two different answers to the same question.
    pub failure: Option<String>,
    /// Each case and how it went, for the admin who decides.
    #[serde(default)]
    pub results: Vec<CaseResult>,
}

/// How one self-test case went.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CaseResult {
    pub predicate: String,
    pub args: String,
    pub source: String,
    pub bundles: usize,
    pub fired: usize,
    pub errors: usize,
    /// Set when this case failed the test (the test stops at the first failure).
    pub failure: Option<String>,
}
