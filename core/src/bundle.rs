//! The audit bundle: what a run leaves behind, as files in one directory.
//!
//! Verdicts are never part of a bundle; they are computed from it. `events.jsonl` is derived
//! from the raw channels and can be derived again by a newer adapter.

use serde::{Deserialize, Serialize};

use crate::paths::Roots;
use crate::scenario::Variant;

/// Version of the bundle layout written by this build.
pub const BUNDLE_SCHEMA: u32 = 1;

/// Text files up to this size are kept so a changed file's contents can go into `blobs/`.
pub const BLOB_CAP: u64 = 256 * 1024;
/// Upper bound on the text a bundle keeps in `blobs/`.
pub const BUNDLE_BLOBS_TOTAL: usize = 16 * 1024 * 1024;

/// File names inside a bundle directory.
pub mod files {
    /// The manifest; written last, so its presence marks a complete bundle.
    pub const MANIFEST: &str = "bundle.json";
    /// The exact bytes the agent got.
    pub const PROMPT: &str = "prompt.txt";
    /// The scenario the run used, as JSON.
    pub const SCENARIO: &str = "scenario.json";
    /// Shell channel: one [`super::ShimRecord`] per line.
    pub const SHIM: &str = "shim.jsonl";
    /// Agent channel: the agent's own event stream, untouched.
    pub const AGENT: &str = "agent.jsonl";
    /// The agent's standard error, untouched.
    pub const AGENT_STDERR: &str = "agent.stderr.txt";
    /// Watch channel: one [`super::WatchRecord`] per line.
    pub const FSWATCH: &str = "fswatch.jsonl";
    /// The egress proxy's record of connections (runs that had network).
    pub const NET: &str = "net.jsonl";
    /// The scripted model endpoint's record of every request and reply (runs of a real CLI
    /// against a scripted or replayed model): one [`crate::model::ModelRecord`] per line.
    pub const MODEL: &str = "model.jsonl";
    /// A real agent's native logs, as it wrote them.
    pub const AGENT_LOGS: &str = "agent-logs";
    /// What a run on a real model used, per call and in all, and its cost
    /// ([`crate::model::usage::RunUsage`]); derived from the model channel when assembled.
    pub const USAGE: &str = "usage.json";
    /// Snapshot manifests.
    pub const SNAPSHOT_BEFORE: &str = "snapshot/before.json";
    pub const SNAPSHOT_AFTER: &str = "snapshot/after.json";
    /// Contents of text files, by sha256: changed files first, then others up to a total cap.
    pub const BLOBS: &str = "blobs";
    /// The normalized merged view.
    pub const EVENTS: &str = "events.jsonl";
    /// The runner's signature over every other file (optional; see
    /// `overeager_bundle::signature`).
    pub const RUNNER_SIGNATURE: &str = "runner-signature.json";
}

/// Which scenario a bundle ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioRef {
    pub id: String,
    /// sha256 over `scenario.toml` and the fixture tree.
    pub hash: String,
}

/// Which agent ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRef {
    /// As given on the command line, e.g. `scripted:cautious`.
    pub id: String,
    /// The agent framework, e.g. `scripted`, `claude-code`.
    pub framework: String,
    /// The framework's version.
    pub version: String,
    /// The model label (for scripted agents: the play).
    pub model: String,
    /// The id's parts as the run read them (absent in bundles recorded before it was kept:
    /// [`AgentRef::cell`] then reads the id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<crate::AgentCell>,
    /// The stream adapter that reads a real agent's output (its definition's `adapter`), so
    /// the bundle is read again without the definition; absent for the scripted and simulated
    /// agents, and in bundles recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
    /// What answered its model calls, as the run saw it (absent in bundles recorded before it
    /// was kept: [`AgentRef::played_by`] then reads the id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub played_by: Option<crate::model::PlayedBy>,
}

impl AgentRef {
    /// What answered the run's model calls: as recorded, else as the agent id says.
    pub fn played_by(&self) -> crate::model::PlayedBy {
        self.played_by.clone().unwrap_or_else(|| crate::model::PlayedBy::of_agent_id(&self.id))
    }

    /// Who played: as recorded, else as the id says.
    pub fn cell(&self) -> Result<crate::AgentCell, crate::cell::CellError> {
        match &self.cell {
            Some(c) => Ok(c.clone()),
            None => crate::AgentCell::parse(&self.id),
        }
    }

    /// Whether overeager itself played (the scripted agent or a simulated policy), so the run
    /// has no framework of its own.
    pub fn is_harness(&self) -> bool {
        self.cell().is_ok_and(|c| c.is_harness())
    }
}

/// Where the run was executed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorRef {
    /// `local` or `docker`.
    pub kind: String,
    /// The image digest, for container executors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    /// The engine that ran it (a Docker engine's address as the plan names it), or the
    /// cluster node; none for the local executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// How the agent process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ExitStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

/// What the run supervisor (`overeager-shim contain`) reports about the agent it ran. Written
/// beside the channels, not into the bundle: the executor copies it into the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupervisorReport {
    pub exit: ExitStatus,
    /// The agent ran into the wall-clock limit and was killed.
    pub timed_out: bool,
    /// Unix microseconds just before the agent started and just after it ended.
    pub started_us: u64,
    pub ended_us: u64,
    /// Processes the agent left running that the supervisor killed after it ended.
    pub stragglers_killed: u32,
}

/// Which observation channels were active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channels {
    pub shell: bool,
    pub agent: bool,
    pub fswatch: bool,
    /// The egress proxy: only runs whose cell needs the network have it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub net: bool,
    /// The scripted model's exchanges (`model.jsonl`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model: bool,
}

/// Counts of what each channel recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Counts {
    pub shell: u64,
    pub agent: u64,
    pub fswatch: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub net: u64,
    /// Requests the agent made to the scripted model.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub model: u64,
    /// Agent-stream events the adapter did not know (op `unknown`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unknown: u64,
    pub events: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `bundle.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleManifest {
    pub schema: u32,
    pub run_id: String,
    pub scenario: ScenarioRef,
    pub variant: Variant,
    pub agent: AgentRef,
    pub replicate: u32,
    pub executor: ExecutorRef,
    /// sha256 of `prompt.txt`.
    pub prompt_sha256: String,
    /// Byte range of the consent block in `prompt.txt`, for `consent_kept`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consent_block: Option<[usize; 2]>,
    /// Unix time in microseconds when the agent started and ended.
    pub started_us: u64,
    pub ended_us: u64,
    pub duration_ms: u64,
    pub timeout_ms: u64,
    pub timed_out: bool,
    pub exit: ExitStatus,
    pub channels: Channels,
    pub counts: Counts,
    /// Where the workspace and home were during the run (raw channels use these paths).
    pub roots: Roots,
    /// Largest text file kept in `blobs/`.
    pub blob_cap: u64,
    /// The overeager version that wrote the bundle.
    pub overeager_version: String,
    /// What the run changed in each git repository of the sandbox, read from the repository's
    /// own state before and after (`None` in bundles recorded before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<Vec<RepoChange>>,
}

/// What a run changed in one git repository, from its index, references and the commits
/// they reach, before and after the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoChange {
    /// The repository's working tree, as a logical path (`.` for the workspace).
    pub repo: String,
    /// Index entries the run added or changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub staged: Vec<GitEntry>,
    /// Paths the run removed from the index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unstaged: Vec<String>,
    /// Files that a commit reachable from a reference after the run holds in a version no
    /// commit reachable before held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub committed: Vec<GitEntry>,
    /// References the run created, moved or removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<RefChange>,
    /// Why the repository could not be read completely, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A file as git stores it: its path in the repository and its blob id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GitEntry {
    pub path: String,
    pub blob: String,
}

/// A reference's object id before and after a run (`None`: it did not exist).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefChange {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// One line of `shim.jsonl`: one program run through the shell shim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimRecord {
    pub argv: Vec<String>,
    pub cwd: String,
    pub pid: u32,
    pub ppid: u32,
    pub start_us: u64,
    pub end_us: u64,
    /// Exit code, when the program exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    /// Signal number, when the program was killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The real program that ran, if one was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real: Option<String>,
    /// The processes above this one, parent first, up to the agent's own process (the
    /// supervisor's child), which comes last. Whose action a program was — a tool call's or
    /// the agent framework's own — is read from this chain (`overeager_formats::attribution`). Empty in
    /// bundles recorded before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ancestors: Vec<Ancestor>,
}

/// One process above a shim record's program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ancestor {
    pub pid: u32,
    /// Unix microseconds when it started (to the kernel's clock tick), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_us: Option<u64>,
    /// Its command line (long arguments cut, see the shim).
    pub argv: Vec<String>,
}

/// One line of `net.jsonl`: one connection the agent asked the egress proxy for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetRecord {
    /// Unix microseconds when the request arrived and when the connection ended.
    pub start_us: u64,
    pub end_us: u64,
    /// `CONNECT` (a tunnel, HTTPS) or the HTTP method of a plain request.
    pub method: String,
    pub host: String,
    pub port: u16,
    /// Whether the allowlist let it through.
    pub allowed: bool,
    /// Bytes from the agent to the host and back.
    #[serde(default)]
    pub bytes_out: u64,
    #[serde(default)]
    pub bytes_in: u64,
    /// Why it failed or was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Kinds of file-access event the watcher records (inotify's vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatchEv {
    Open,
    Access,
    Modify,
    CloseWrite,
    CloseNowrite,
    Create,
    Delete,
    MovedFrom,
    MovedTo,
    Attrib,
    DeleteSelf,
    /// The kernel queue overflowed: events were lost.
    Overflow,
    /// A directory could not be watched (its path is the record's): accesses inside it were
    /// not seen.
    Unwatched,
}
/// What a watch event's note says before a link's target (see [`link_note`]).
pub(crate) const LINK_MARK: &str = "symbolic link to ";

/// The note a watch event of a created or moved symbolic link carries: its target.
pub fn link_note(target: &str) -> String {
    format!("{LINK_MARK}{target}")
}


/// One line of `fswatch.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchRecord {
    pub t_us: u64,
    pub ev: WatchEv,
    /// Absolute path.
    pub path: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dir: bool,
    /// Pairs `moved_from` with `moved_to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie: Option<u32>,
    /// Found by scanning a directory that appeared before its watch was in place.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub synthetic: bool,
    /// The target of a symbolic link that was created or moved in (as the link holds it), so
    /// paths named through the link can be resolved to what they reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}
