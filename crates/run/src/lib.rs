//! Running an agent on a scenario in a sandbox and collecting the raw observations.
//!
//! An executor prepares the workspace and `$HOME` from the fixture, puts the shell shim in
//! front of the real programs, starts the watcher before the agent, enforces the timeout, and
//! hands back a [`RawRun`]; the `audit` stage turns that into a bundle.

pub mod docker;
pub mod git;
pub mod kubernetes;
pub mod local;
pub mod pool;
pub mod snapshot;

pub use overeager_agents::AgentSpec;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use overeager_core::bundle::{Channels, ExitStatus};
use overeager_core::paths::Roots;
use overeager_core::{RenderedPrompt, Snapshot, Variant};

use overeager_scenario::LoadedScenario;

/// Where runs happen.
#[derive(Clone)]
pub enum Executor {
    /// A temporary workspace on this machine.
    Local,
    /// A hardened container per run on a Docker engine.
    Docker(std::sync::Arc<docker::DockerExecutor>),
    /// A hardened pod per run on a Kubernetes cluster.
    Kubernetes(std::sync::Arc<kubernetes::KubeExecutor>),
}

impl Executor {
    /// The executors by name, for messages.
    pub const KNOWN: &'static str = "local, docker, kubernetes";

    /// Opens the executor named `kind` (`local`, `docker` or `kubernetes`; the last two
    /// connect here, Kubernetes with the current kubeconfig context and namespace `default`).
    pub fn open(kind: &str) -> anyhow::Result<Executor> {
        match kind {
            "local" => Ok(Executor::Local),
            "docker" => Ok(Executor::Docker(docker::DockerExecutor::connect()?)),
            "kubernetes" => {
                Ok(Executor::Kubernetes(kubernetes::KubeExecutor::connect(&Default::default())?))
            }
            other => anyhow::bail!("unknown executor `{other}`; known executors: {}", Self::KNOWN),
        }
    }

    /// Runs the request.
    pub fn execute(&self, req: &RunRequest<'_>) -> anyhow::Result<RawRun> {
        match self {
            Executor::Local => local::execute(req),
            Executor::Docker(d) => d.execute(req),
            Executor::Kubernetes(k) => k.execute(req),
        }
    }

    /// Where runs go, as runs record it: `local`, or the engine's address.
    pub fn host(&self) -> String {
        match self {
            Executor::Local => "local".into(),
            Executor::Docker(d) => d.address().into(),
            Executor::Kubernetes(k) => k.address(),
        }
    }

    /// Whether it can still take runs (an engine that stopped answering cannot).
    pub fn ping(&self) -> anyhow::Result<()> {
        match self {
            Executor::Local => Ok(()),
            Executor::Docker(d) => d.ping(),
            Executor::Kubernetes(k) => k.ping(),
        }
    }
}

/// One run to execute.
pub struct RunRequest<'a> {
    /// Where it runs.
    pub executor: &'a Executor,
    pub scenario: &'a LoadedScenario,
    pub agent: AgentSpec,
    pub variant: Variant,
    pub replicate: u32,
    pub timeout: Duration,
    /// The shim binary to install in the sandbox.
    pub shim: PathBuf,
    /// Seed of the run's random draws (a simulated agent's choice of play).
    pub seed: u64,
    /// The run id to record; a fresh one when `None`.
    pub run_id: Option<String>,
    /// Framework and model labels to record instead of the agent's own.
    pub labels: Option<(String, String)>,
    /// Where to make the sandbox, instead of [`scratch_dir`].
    pub scratch: Option<PathBuf>,
    /// `host:port` pairs the agent may reach through the egress proxy, besides its model API
    /// (Docker executor only; a run with none has no network at all).
    pub egress: Vec<String>,
    /// Let a real agent on a real model API run on the local executor, where nothing contains
    /// it (`run --uncontained`): it can touch anything this user can.
    pub uncontained: bool,
    /// The model providers a real agent's model may be on; `None`: the built-in ones and
    /// those of the files `$OVEREAGER_PROVIDERS` names.
    pub providers: Option<std::sync::Arc<overeager_agents::providers::Providers>>,
}

impl<'a> RunRequest<'a> {
    /// The providers this run may use.
    pub fn providers(&self) -> anyhow::Result<std::sync::Arc<overeager_agents::providers::Providers>> {
        match &self.providers {
            Some(p) => Ok(p.clone()),
            None => overeager_agents::providers::load(&[]).map(std::sync::Arc::new),
        }
    }

    /// One run of `agent` with the defaults of a single run: kept variant, replicate 0, a
    /// 120 s limit, seed 0, a fresh run id, the agent's own labels, no network, contained.
    pub fn new(executor: &'a Executor, scenario: &'a LoadedScenario, agent: AgentSpec, shim: PathBuf) -> RunRequest<'a> {
        RunRequest {
            executor,
            scenario,
            agent,
            variant: Variant::ConsentKept,
            replicate: 0,
            timeout: Duration::from_secs(120),
            shim,
            seed: 0,
            run_id: None,
            labels: None,
            scratch: None,
            egress: Vec::new(),
            uncontained: false,
            providers: None,
        }
    }
}

/// What an executor observed, before it is assembled into a bundle. Dropping it removes the
/// sandbox.
pub struct RawRun {
    /// The sandbox's temporary directory (workspace, home, control files, raw channels).
    pub _sandbox: tempfile::TempDir,
    /// Where the raw channel files were written (`shim.jsonl`, `agent.jsonl`, …).
    pub channels_dir: PathBuf,
    pub prompt: RenderedPrompt,
    pub roots: Roots,
    pub before: Snapshot,
    pub after: Snapshot,
    /// Contents of text files worth keeping (before and after versions of changed files), by
    /// sha256.
    pub blobs: BTreeMap<String, Vec<u8>>,
    pub started_us: u64,
    pub ended_us: u64,
    pub exit: ExitStatus,
    pub timed_out: bool,
    pub channels: Channels,
    pub executor: &'static str,
    /// The image the run's container was made from (Docker executor).
    pub image_digest: Option<String>,
    /// The engine or node that ran it (container executors).
    pub host: Option<String>,
    pub agent_version: String,
    /// Where a real agent's model calls went, for a run on a provider's model: the provider
    /// (with its prices), the model's name there and whether the gateway bridged dialects.
    pub model_route: Option<overeager_agents::definition::Route>,
    /// What the run changed in the sandbox's git repositories.
    pub git: Vec<overeager_core::bundle::RepoChange>,
}

/// Where sandboxes and other short-lived run directories go: `$OVEREAGER_SCRATCH` if set,
/// else `/dev/shm` when it is a writable memory file system with at least 1 GiB free, else the
/// system temp directory. Runs write many small files (fixture copy, snapshots, channels) and
/// delete them at once, so memory-backed storage makes validation several times faster.
pub fn scratch_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(p) = std::env::var_os("OVEREAGER_SCRATCH").filter(|p| !p.is_empty()) {
            return PathBuf::from(p);
        }
        let shm = Path::new("/dev/shm");
        if shm_usable(shm) { shm.to_path_buf() } else { std::env::temp_dir() }
    })
    .clone()
}

/// Where the sandboxes of real agent CLIs go: `$OVEREAGER_SCRATCH` if set, else the system
/// temp directory (never `/dev/shm`, which an agent's own sandbox may replace).
pub fn disk_scratch_dir() -> PathBuf {
    std::env::var_os("OVEREAGER_SCRATCH").filter(|p| !p.is_empty()).map(PathBuf::from).unwrap_or_else(std::env::temp_dir)
}

/// A directory under [`scratch_dir`] owned by this process (`overeager-runner-<pid>-…`),
/// removed when dropped. Creating one first removes those of processes that no longer exist,
/// so sandboxes of a runner that was killed do not pile up in (memory-backed) scratch space.
pub fn runner_dir() -> std::io::Result<tempfile::TempDir> {
    let base = scratch_dir();
    if let Ok(entries) = std::fs::read_dir(&base) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_prefix("overeager-runner-").and_then(|r| r.split('-').next()).and_then(|p| p.parse::<i32>().ok()) else {
                continue;
            };
            // SAFETY: signal 0 only asks whether the process exists.
            let gone = unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            if gone {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    tempfile::Builder::new().prefix(&format!("overeager-runner-{}-", std::process::id())).tempdir_in(base)
}

fn shm_usable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    let free = st.f_bavail as u64 * st.f_frsize as u64;
    // SAFETY: as above; access(2) only reads the path.
    let writable = unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0;
    writable && free >= 1 << 30
}

pub use overeager_core::sandbox::WRAPPED;

/// Fixed author and committer for git commands in scenario setup, so repositories (and
/// their commit ids) are the same on every run.
pub const SETUP_GIT_ENV: &[(&str, &str)] = &[
    ("GIT_AUTHOR_NAME", "Fixture Author"),
    ("GIT_AUTHOR_EMAIL", "author@fixture.invalid"),
    ("GIT_AUTHOR_DATE", "2025-01-01T00:00:00Z"),
    ("GIT_COMMITTER_NAME", "Fixture Author"),
    ("GIT_COMMITTER_EMAIL", "author@fixture.invalid"),
    ("GIT_COMMITTER_DATE", "2025-01-01T00:00:00Z"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    // No background maintenance after each setup commit: it changes nothing the run sees and
    // costs a process per commit.
    ("GIT_CONFIG_COUNT", "2"),
    ("GIT_CONFIG_KEY_0", "maintenance.auto"),
    ("GIT_CONFIG_VALUE_0", "false"),
    ("GIT_CONFIG_KEY_1", "gc.auto"),
    ("GIT_CONFIG_VALUE_1", "0"),
];
