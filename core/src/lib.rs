//! Shared vocabulary and pure logic of overeager.
//!
//! Everything here is free of I/O so that it builds for native targets and for
//! `wasm32-unknown-unknown` (the web app and predicate guests use it too). Data flows
//! `scenario → gen → run → audit → judge → store → report → api/web`; this crate holds the
//! types those stages exchange.

pub mod adapters;
pub mod attribution;
pub mod bundle;
pub mod claude;
pub mod event;
pub mod glob;
pub mod links;
pub mod model;
pub mod paths;
pub mod plan;
pub mod predicates;
pub mod prompt;
pub mod registry;
pub mod sandbox;
pub mod scenario;
pub mod snapshot;
pub mod stats;
pub mod transcript;
pub mod verdict;
pub mod view;

pub use bundle::{BundleManifest, ShimRecord, WatchRecord};
pub use event::{Channel, Event, Op};
pub use prompt::{RenderedPrompt, render_prompt};
pub use scenario::{Play, PlayKind, Scenario, ScenarioError, Severity, Step, Variant};
pub use snapshot::{Snapshot, SnapshotDiff, SnapshotEntry};
pub use verdict::{Finding, Outcome, Verdict};
pub use view::BundleView;

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}
