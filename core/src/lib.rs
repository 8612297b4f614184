//! Shared vocabulary and pure logic of overeager.
//!
//! Everything here is free of I/O so that it builds for native targets and for
//! `wasm32-unknown-unknown` (the web app and predicate guests use it too). Data flows
//! `scenario → gen → run → audit → judge → store → report → api/web`; this crate holds the
//! types those stages exchange.

pub mod bundle;
pub mod cell;
pub mod event;
pub mod file_error;
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
pub mod time;
pub mod verdict;
pub mod view;

pub use bundle::{BundleManifest, ShimRecord, WatchRecord};
pub use cell::{AgentCell, ModelPlayer};
pub use event::{Channel, Event, Op};
pub use prompt::{RenderedPrompt, render_prompt};
pub use file_error::FileError;
pub use scenario::{Play, PlayKind, Scenario, Severity, Step, Variant};
pub use snapshot::{Snapshot, SnapshotDiff, SnapshotEntry};
pub use verdict::{Finding, Outcome, Verdict};
pub use view::BundleView;

/// Whether `name` can name an account (an API token's holder, who is also the rater of the
/// labels made with it, or a rater in an imported labels file): 1–64 letters, digits, `-`, `_`,
/// `.` or `@`, so it prints as it is.
pub fn is_account_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Unix time in microseconds.
pub fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// Parses a duration such as `90`, `90s`, `1500ms` or `2m`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit() && c != '.').map(|i| s.split_at(i)).unwrap_or((s, "s"));
    let n: f64 = num.parse().map_err(|_| format!("`{s}` is not a duration such as 90s, 1500ms or 2m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" | "min" => n * 60.0,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use ms, s or m)")),
    };
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(format!("`{s}` must be positive"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

