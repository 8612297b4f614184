//! Building bundles by hand, for predicates' native unit tests.
//!
//! ```
//! use overeager_predicate_sdk::testing::BundleBuilder;
//! let bundle = BundleBuilder::new()
//!     .file(".env", "API_KEY=abc123def456\n")
//!     .exec(&["rm", ".env"])
//!     .deleted(".env")
//!     .build();
//! assert_eq!(bundle.diff().deleted, vec![".env"]);
//! ```

use std::collections::BTreeMap;

use overeager_core::bundle::{AgentRef, BUNDLE_SCHEMA, BundleManifest, Channels, Counts, ExecutorRef, ExitStatus, ScenarioRef};
use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;
use overeager_core::scenario::{ModelSpec, Play, Plays, PromptSpec, Scenario, Scope, ScopeEntry, ScopeOp, Variant};
use overeager_core::snapshot::{EntryKind, SnapshotEntry};
use overeager_core::view::VIEW_SCHEMA;
use overeager_core::{BundleView, sha256_hex};

use crate::Bundle;

/// A bundle under construction. Files added with [`BundleBuilder::file`] exist before and
/// after; the other methods change one side or add events.
#[derive(Debug, Clone)]
pub struct BundleBuilder {
    view: BundleView,
}

impl Default for BundleBuilder {
    fn default() -> Self {
        BundleBuilder::new()
    }
}

fn empty_play() -> Play {
    Play { fires: Vec::new(), steps: Vec::new() }
}

impl BundleBuilder {
    /// An empty run of an empty scenario, with the workspace at `/sandbox/work` and `$HOME`
    /// at `/sandbox/home`.
    pub fn new() -> BundleBuilder {
        let roots = Roots { workspace: "/sandbox/work".into(), home: "/sandbox/home".into() };
        let manifest = BundleManifest {
            schema: BUNDLE_SCHEMA,
            run_id: "test-run".into(),
            scenario: ScenarioRef { id: "test".into(), hash: String::new() },
            variant: Variant::ConsentStripped,
            agent: AgentRef { id: "test".into(), framework: "test".into(), version: "0".into(), model: "test".into(), cell: None, adapter: None, played_by: None },
            replicate: 0,
            executor: ExecutorRef { kind: "local".into(), image_digest: None, host: None },
            prompt_sha256: String::new(),
            consent_block: None,
            started_us: 0,
            ended_us: 0,
            duration_ms: 0,
            timeout_ms: 0,
            timed_out: false,
            exit: ExitStatus::default(),
            channels: Channels { shell: true, agent: true, fswatch: true, net: false, model: false },
            counts: Counts::default(),
            roots,
            blob_cap: 256 * 1024,
            overeager_version: "test".into(),
            git: None,
        };
        let scenario = Scenario {
            id: "test".into(),
            title: "test".into(),
            archetype: "test".into(),
            anchors: Vec::new(),
            prompt: PromptSpec { task: String::new(), consent: String::new() },
            model: ModelSpec::default(),
            scope: Scope::default(),
            success: Vec::new(),
            traps: Vec::new(),
            plays: Plays { cautious: empty_play(), moderate: empty_play(), aggressive: empty_play() },
            axes: BTreeMap::new(),
            provenance: None,
        };
        BundleBuilder {
            view: BundleView { view: VIEW_SCHEMA, manifest, scenario, events: Vec::new(), before: BTreeMap::new(), after: BTreeMap::new(), blobs: BTreeMap::new() },
        }
    }

    fn entry(&mut self, content: &str, mode: u32) -> SnapshotEntry {
        let sha = sha256_hex(content.as_bytes());
        self.view.blobs.insert(sha.clone(), content.to_string());
        SnapshotEntry { kind: EntryKind::File, size: content.len() as u64, mode, sha256: Some(sha), target: None }
    }

    /// What the run changed in its repositories, as the executor records it.
    pub fn git(mut self, repos: Vec<overeager_core::bundle::RepoChange>) -> Self {
        self.view.manifest.git = Some(repos);
        self
    }

    /// A text file present before and after, unchanged (mode 0644).
    pub fn file(mut self, path: &str, content: &str) -> Self {
        let e = self.entry(content, 0o644);
        self.view.before.insert(path.into(), e.clone());
        self.view.after.insert(path.into(), e);
        self
    }

    /// A directory present before and after.
    pub fn dir(mut self, path: &str) -> Self {
        let e = SnapshotEntry { kind: EntryKind::Dir, size: 0, mode: 0o755, sha256: None, target: None };
        self.view.before.insert(path.into(), e.clone());
        self.view.after.insert(path.into(), e);
        self
    }

    /// The file's content after the run (created if it did not exist).
    pub fn written(mut self, path: &str, content: &str) -> Self {
        let mode = self.view.after.get(path).map_or(0o644, |e| e.mode);
        let e = self.entry(content, mode);
        self.view.after.insert(path.into(), e);
        self
    }

    /// The path is gone after the run.
    pub fn deleted(mut self, path: &str) -> Self {
        self.view.after.remove(path);
        self
    }

    /// The path's mode after the run.
    pub fn mode_after(mut self, path: &str, mode: u32) -> Self {
        if let Some(e) = self.view.after.get_mut(path) {
            e.mode = mode;
        }
        self
    }

    /// Marks the run as observed by the agent's own stream only (no shell shim, no file
    /// watcher): command lines alone then say what ran and was read.
    pub fn agent_only(mut self) -> Self {
        self.view.manifest.channels.fswatch = false;
        self.view.manifest.channels.shell = false;
        self
    }

    /// Authorizes an operation on a path (or running a program, with [`ScopeOp::Exec`]) in the
    /// scenario's scope.
    pub fn allow(mut self, op: ScopeOp, path: &str) -> Self {
        self.view.scenario.scope.allow.push(ScopeEntry { op, path: path.to_string() });
        self
    }

    /// Adds a file to the scenario's sensitive list.
    pub fn sensitive(mut self, glob: &str) -> Self {
        self.view.scenario.scope.sensitive.push(glob.into());
        self
    }

    /// Appends an event; its `seq` is set to its position.
    pub fn event(mut self, mut e: Event) -> Self {
        e.seq = self.view.events.len() as u64;
        e.raw = e.seq;
        self.view.events.push(e);
        self
    }

    /// A program run seen by the shell channel, in the workspace.
    pub fn exec(self, argv: &[&str]) -> Self {
        let mut e = Event::new(Channel::Shell, Op::Exec, 0, 0);
        e.argv = Some(argv.iter().map(|s| s.to_string()).collect());
        e.cwd = Some(".".into());
        self.event(e)
    }

    /// A shell command the agent asked for.
    pub fn agent_command(self, command: &str) -> Self {
        let mut e = Event::new(Channel::Agent, Op::Exec, 0, 0);
        e.tool = Some("Bash".into());
        e.command = Some(command.into());
        self.event(e)
    }

    /// A file-level event with paths.
    pub fn op(self, channel: Channel, op: Op, paths: &[&str]) -> Self {
        let mut e = Event::new(channel, op, 0, 0);
        e.paths = paths.iter().map(|s| s.to_string()).collect();
        self.event(e)
    }

    /// The view as built.
    pub fn view(&self) -> &BundleView {
        &self.view
    }

    /// The view as the judge would pass it.
    pub fn json(&self) -> String {
        serde_json::to_string(&self.view).expect("a bundle view serializes")
    }

    /// The typed bundle.
    pub fn build(self) -> Bundle {
        Bundle::from_view(self.view)
    }
}
