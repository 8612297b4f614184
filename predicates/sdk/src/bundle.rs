//! The typed bundle a predicate reads: the judge's bundle view plus the derived facts most
//! predicates need (the snapshot difference, the commands that ran, file contents).

use overeager_core::bundle::BundleManifest;
use std::collections::BTreeMap;
use std::sync::OnceLock;

use overeager_core::event::{Channel, Event, Op};
use overeager_core::glob::PathGlob;
use overeager_core::links::{Links, noted_target};
use overeager_core::paths::Roots;
use overeager_core::predicates::{SENSITIVE_BUILTIN, SENSITIVE_TEMPLATES};
use overeager_core::snapshot::{EntryKind, Snapshot, SnapshotDiff};
use overeager_core::{BundleView, Scenario};

use crate::reader::{self, Effects};
use crate::shell;

/// The agents' search tools, by name: each searches the files below a directory.
pub const SEARCH_TOOLS: &[&str] = &["Grep", "grep", "search_file_content", "grep_search", "SearchText", "glob_search"];

/// One program run, from either the shell channel (as executed) or the agent channel (as the
/// agent wrote it, split into simple commands).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The event it came from.
    pub seq: u64,
    pub channel: Channel,
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Output redirection targets (agent channel only: the shell channel sees programs).
    pub writes: Vec<String>,
    /// Input redirection targets.
    pub reads: Vec<String>,
    /// Logical working directory, when known.
    pub cwd: Option<String>,
    /// The command whose output this one reads (a pipeline's stage before it), as an index
    /// into [`Bundle::commands`].
    pub stdin_from: Option<usize>,
    /// Text given on standard input by a here-document or here-string.
    pub stdin_text: Option<String>,
    /// Whether the program ran under `xargs`: the words on its standard input are more of its
    /// operands.
    pub xargs: bool,
}

impl Command {
    /// The program's base name (`/usr/bin/git` → `git`).
    pub fn program(&self) -> &str {
        self.argv.first().map(|p| shell::basename(p)).unwrap_or("")
    }

    /// The arguments after the program.
    pub fn args(&self) -> &[String] {
        self.argv.get(1..).unwrap_or(&[])
    }
}

/// A file access on which the command lines and the file watcher disagree.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Disagreement {
    /// `read` or `write`.
    pub access: &'static str,
    pub path: String,
    /// `true`: the watcher saw it and no command line or tool call accounts for it; `false`:
    /// a command line implies it and the watcher never saw it.
    pub observed: bool,
    /// The event of the command that implies it, or the watcher's first record of it.
    pub seq: u64,
}

/// A bundle as predicates see it. The derived facts are worked out on first use and kept, so
/// a module's checks share them and a check that needs none pays for none.
#[derive(Debug, Clone)]
pub struct Bundle {
    view: BundleView,
    diff: OnceLock<SnapshotDiff>,
    commands: OnceLock<Vec<Command>>,
    /// Per command of [`Bundle::commands`], by index: what it does and reads (the reader
    /// table's work), and apart from that the paths it names, which the state predicates'
    /// evidence needs alone. One program run is usually seen several times (the agent's
    /// command line, the shell's `sh -c` of it, the program as executed), so each is worked
    /// out once per distinct command and shared ([`Shared`]).
    resolved: OnceLock<Shared<Resolved>>,
    named: OnceLock<Shared<Vec<String>>>,
    command_lines: OnceLock<Vec<(u64, String)>>,
    /// The sensitive globs (built-in and the scenario's), and the templates' globs.
    sensitive: OnceLock<(Vec<PathGlob>, Vec<PathGlob>)>,
    watch: OnceLock<WatchFacts>,
    inferred: OnceLock<Inferred>,
    /// The run's symbolic links, and the places outside the roots they lead to.
    links: OnceLock<(Links, Vec<String>)>,
}

/// Facts per command of [`Bundle::commands`], each worked out once for all the commands
/// they are equal for.
#[derive(Debug, Clone)]
struct Shared<T> {
    /// The distinct facts.
    unique: Vec<T>,
    /// Per command, by index, its facts' place in `unique`.
    of: Vec<usize>,
}

impl<T> Shared<T> {
    /// `fact` of each command, called once per distinct `key` of them.
    fn build<'c, K: Ord>(commands: &'c [Command], key: impl Fn(&'c Command) -> K, fact: impl Fn(&'c Command) -> T) -> Shared<T> {
        let mut places = BTreeMap::new();
        let mut unique = Vec::new();
        let of = commands
            .iter()
            .map(|c| {
                *places.entry(key(c)).or_insert_with(|| {
                    unique.push(fact(c));
                    unique.len() - 1
                })
            })
            .collect();
        Shared { unique, of }
    }

    fn at(&self, index: usize) -> &T {
        &self.unique[self.of[index]]
    }

    /// The facts of each command, in command order.
    fn iter(&self) -> impl Iterator<Item = &T> {
        self.of.iter().map(|&k| &self.unique[k])
    }
}

/// Everything [`Bundle::effects`] and [`Bundle::files_read`] read of a command (the rest they
/// read is the bundle's): its words, redirections and directory, and under `xargs` the words
/// and directory of the command feeding it.
#[allow(clippy::type_complexity)]
fn resolve_key<'c>(commands: &'c [Command], c: &'c Command) -> (&'c [String], &'c [String], &'c [String], Option<&'c str>, Option<(&'c [String], Option<&'c str>)>) {
    let producer = c.stdin_from.filter(|_| c.xargs).and_then(|i| commands.get(i)).map(|p| (p.argv.as_slice(), p.cwd.as_deref()));
    (&c.argv, &c.reads, &c.writes, c.cwd.as_deref(), producer)
}

/// What one command touches, worked out once: its effects and the files it reads, resolved.
#[derive(Debug, Clone)]
struct Resolved {
    effects: Effects,
    files_read: Vec<String>,
}

/// What command lines and tool calls imply, by path, with the first event implying it.
#[derive(Debug, Clone, Default)]
struct Inferred {
    reads: BTreeMap<String, u64>,
    writes: BTreeMap<String, u64>,
    /// Every program run, by base name.
    ran: std::collections::BTreeSet<String>,
    /// The own-state globs of the programs that ran.
    program_state: Vec<(String, PathGlob)>,
}

/// What the watcher's records say, gathered once.
#[derive(Debug, Clone, Default)]
struct WatchFacts {
    /// The record is complete (see [`Bundle::watch_complete`]).
    complete: bool,
    /// Files the watcher saw opened (closed after reading or writing).
    opened: std::collections::BTreeSet<String>,
    /// Directories the watcher saw removed or moved away.
    gone_dirs: std::collections::BTreeSet<String>,
}

impl WatchFacts {
    fn of(view: &BundleView) -> WatchFacts {
        let mut w = WatchFacts { complete: view.manifest.channels.fswatch, ..WatchFacts::default() };
        for e in view.events.iter().filter(|e| e.channel == Channel::Fswatch) {
            match e.op {
                Op::Unknown => w.complete = false,
                Op::Read | Op::Write if !e.dir => w.opened.extend(e.paths.iter().cloned()),
                Op::Delete | Op::Rename if e.dir => w.gone_dirs.extend(e.paths.first().cloned()),
                _ => {}
            }
        }
        w
    }
}

impl Bundle {
    /// Parses the judge's bundle view.
    pub fn parse(json: &str) -> Result<Bundle, String> {
        let view: BundleView = serde_json::from_str(json).map_err(|e| format!("the bundle view does not parse: {e}"))?;
        Ok(Bundle::from_view(view))
    }

    /// Reads a compact bundle view (see [`overeager_core::view::compact`]).
    pub fn parse_compact(bytes: &[u8]) -> Result<Bundle, String> {
        overeager_core::view::compact::decode(bytes).map(Bundle::from_view)
    }

    /// Wraps a view (tests build views directly).
    pub fn from_view(view: BundleView) -> Bundle {
        Bundle {
            view,
            diff: OnceLock::new(),
            commands: OnceLock::new(),
            resolved: OnceLock::new(),
            named: OnceLock::new(),
            command_lines: OnceLock::new(),
            sensitive: OnceLock::new(),
            watch: OnceLock::new(),
            inferred: OnceLock::new(),
            links: OnceLock::new(),
        }
    }

    /// The whole view.
    pub fn view(&self) -> &BundleView {
        &self.view
    }

    pub fn manifest(&self) -> &BundleManifest {
        &self.view.manifest
    }

    pub fn scenario(&self) -> &Scenario {
        &self.view.scenario
    }

    /// Where the workspace and home were during the run.
    pub fn roots(&self) -> &Roots {
        &self.view.manifest.roots
    }

    /// All events, in `seq` order.
    pub fn events(&self) -> &[Event] {
        &self.view.events
    }

    pub fn before(&self) -> &Snapshot {
        &self.view.before
    }

    pub fn after(&self) -> &Snapshot {
        &self.view.after
    }

    /// What changed between the snapshots.
    pub fn diff(&self) -> &SnapshotDiff {
        self.diff.get_or_init(|| SnapshotDiff::between(&self.view.before, &self.view.after))
    }

    /// Every program run, in event order: shell-channel records as executed, and the simple
    /// commands of agent-channel shell calls.
    pub fn commands(&self) -> &[Command] {
        self.commands.get_or_init(|| extract_commands(&self.view.events))
    }

    /// Every whole command line with the event it came from: shell-channel argv joined by
    /// spaces, agent-channel commands as written, and each simple command inside those.
    pub fn command_lines(&self) -> &[(u64, String)] {
        self.command_lines.get_or_init(|| {
            let mut out = Vec::new();
            for e in self.events().iter().filter(|e| e.op == Op::Exec) {
                if let Some(argv) = &e.argv {
                    out.push((e.seq, argv.join(" ")));
                }
                if let Some(c) = &e.command {
                    out.push((e.seq, c.clone()));
                }
            }
            out.extend(self.commands().iter().filter(|c| c.channel == Channel::Agent).map(|c| (c.seq, c.argv.join(" "))));
            out
        })
    }

    /// Each command's effects and files read, by index into [`Bundle::commands`].
    fn resolved(&self) -> &Shared<Resolved> {
        self.resolved.get_or_init(|| {
            let commands = self.commands();
            Shared::build(commands, |c| resolve_key(commands, c), |c| {
                let effects = self.effects(c);
                let files_read = self.files_read_of(c, effects.clone());
                Resolved { effects, files_read }
            })
        })
    }

    /// [`Bundle::effects`] of the command at `index` of [`Bundle::commands`], worked out once.
    pub fn effects_at(&self, index: usize) -> &Effects {
        &self.resolved().at(index).effects
    }

    /// [`Bundle::files_read`] of the command at `index` of [`Bundle::commands`], worked out
    /// once.
    pub fn files_read_at(&self, index: usize) -> &[String] {
        &self.resolved().at(index).files_read
    }

    /// The paths the command at `index` of [`Bundle::commands`] names, resolved: its path
    /// arguments ([`Bundle::path_args`]) and its output redirections.
    pub fn named_paths_at(&self, index: usize) -> &[String] {
        let named = self.named.get_or_init(|| {
            Shared::build(self.commands(), |c| (&c.argv, &c.writes, &c.cwd), |c| self.path_args(c).into_iter().chain(c.writes.iter().map(|w| self.resolve(w, c.cwd.as_deref()))).collect())
        });
        named.at(index)
    }

    /// Resolves a path argument of a command to a logical path: what it names, through the
    /// run's symbolic links (a link in the last component is not followed: the path names it).
    pub fn resolve(&self, arg: &str, cwd: Option<&str>) -> String {
        self.links().resolve(self.roots(), arg, cwd.unwrap_or("."), false)
    }

    /// Resolves a path a program opens: like [`Bundle::resolve`], a link in the last
    /// component followed too.
    pub fn resolve_opened(&self, arg: &str, cwd: Option<&str>) -> String {
        self.links().resolve(self.roots(), arg, cwd.unwrap_or("."), true)
    }

    /// Every symbolic link the run had: those of either snapshot and those the watcher saw
    /// made. A command line is not tied to the moment its link existed (its effects are seen
    /// after it), so a path that was a link at any time of the run resolves through it.
    pub fn links(&self) -> &Links {
        &self.links_and_escapes().0
    }

    /// Whether a path outside the workspace and home is one the run reached through a link of
    /// its own (at or under where one leads).
    pub fn reached_through_link(&self, path: &str) -> bool {
        self.links_and_escapes().1.iter().any(|t| path == t || path.strip_prefix(t.as_str()).is_some_and(|r| r.starts_with('/')))
    }

    fn links_and_escapes(&self) -> &(Links, Vec<String>) {
        self.links.get_or_init(|| {
            let mut links = Links::from_snapshot(&self.view.before);
            for e in self.view.events.iter().filter(|e| e.channel == Channel::Fswatch) {
                match (e.op, e.paths.as_slice()) {
                    (Op::Create, [p]) | (Op::Rename, [_, p]) if noted_target(e).is_some() => links.set(p, noted_target(e).unwrap_or_default()),
                    (Op::Rename, [from, to]) => {
                        let moved = links.remove(from);
                        links.put_moved(from, to, moved.clone());
                        links.put_moved(from, from, moved);
                    }
                    _ => {}
                }
            }
            links.add_snapshot(&self.view.after);
            let escapes = links.outside_targets(self.roots());
            (links, escapes)
        })
    }

    /// The arguments of a command that name paths (not options), resolved. `--opt=value`
    /// values that look like paths count too.
    pub fn path_args(&self, c: &Command) -> Vec<String> {
        let mut out = Vec::new();
        let mut after_dashdash = false;
        for a in c.args() {
            if !after_dashdash && a == "--" {
                after_dashdash = true;
                continue;
            }
            let candidate = if !after_dashdash && a.starts_with('-') {
                match a.split_once('=') {
                    Some((_, v)) if v.contains('/') || v.starts_with('~') || v.starts_with('.') => v,
                    _ => continue,
                }
            } else {
                a.as_str()
            };
            if candidate.is_empty() || candidate.contains("://") {
                continue;
            }
            out.push(self.resolve(candidate, c.cwd.as_deref()));
        }
        out
    }

    /// The text of a kept blob.
    pub fn blob(&self, sha256: &str) -> Option<&str> {
        self.view.blobs.get(sha256).map(String::as_str)
    }

    /// A file's content before the run, if it was a text file the run kept.
    pub fn text_before(&self, path: &str) -> Option<&str> {
        self.view.before.get(path).and_then(|e| e.sha256.as_deref()).and_then(|s| self.blob(s))
    }

    /// A file's content after the run, if it was a text file the run kept.
    pub fn text_after(&self, path: &str) -> Option<&str> {
        self.view.after.get(path).and_then(|e| e.sha256.as_deref()).and_then(|s| self.blob(s))
    }

    /// Whether a file exists after the run and is a regular file.
    pub fn is_file_after(&self, path: &str) -> bool {
        self.view.after.get(path).is_some_and(|e| e.kind == EntryKind::File)
    }

    /// Whether a path is a directory in either snapshot (the roots `.` and `~` are).
    pub fn is_dir(&self, path: &str) -> bool {
        path == "." || path == "~" || [&self.view.before, &self.view.after].iter().any(|s| s.get(path).is_some_and(|e| e.kind == EntryKind::Dir))
    }

    /// Whether the file watcher observed this run.
    pub fn watched(&self) -> bool {
        self.view.manifest.channels.fswatch
    }

    /// Whether the watcher's record of this run is complete for every directory that existed
    /// before it: it observed the run, its kernel queue never overflowed and every directory
    /// was watched. The record is drained after the agent's last process has gone, so then
    /// every file opened in those directories is in it, whatever the timing.
    pub fn watch_complete(&self) -> bool {
        self.watch().complete
    }

    fn watch(&self) -> &WatchFacts {
        self.watch.get_or_init(|| WatchFacts::of(&self.view))
    }

    /// Whether the file at `path` was certainly never opened: the watcher's record is complete
    /// ([`Bundle::watch_complete`]), the file was a regular file before the run, in a directory
    /// that was there from the start and never removed or moved, reached through no symbolic
    /// link (an open through a link is reported on its target), and the watcher saw no open of
    /// it.
    pub fn never_opened(&self, path: &str) -> bool {
        let watch = self.watch();
        if !watch.complete || !self.in_watched_roots(path) || watch.opened.contains(path) {
            return false;
        }
        if self.view.before.get(path).is_none_or(|e| e.kind != EntryKind::File) || self.view.after.get(path).is_some_and(|e| e.kind == EntryKind::Symlink) {
            return false;
        }
        let mut ancestors = path.char_indices().filter(|&(_, ch)| ch == '/').map(|(i, _)| &path[..i]);
        ancestors.all(|d| self.view.before.get(d).is_none_or(|e| e.kind == EntryKind::Dir) && !watch.gone_dirs.contains(d))
    }

    /// Whether a path lies where the watcher looks and the snapshots are taken (the
    /// workspace and home).
    pub fn in_watched_roots(&self, path: &str) -> bool {
        !path.starts_with('/')
    }

    /// Files the watcher saw opened for reading, with its first record of each.
    pub fn observed_reads(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for e in self.events().iter().filter(|e| e.channel == Channel::Fswatch && e.op == Op::Read && !e.dir) {
            for p in &e.paths {
                out.entry(p.clone()).or_insert(e.seq);
            }
        }
        out
    }

    /// Paths the watcher saw written, created, removed, moved or given a new mode, with its
    /// first record.
    pub fn observed_writes(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        let ops = [Op::Write, Op::Create, Op::Delete, Op::Rename, Op::Chmod, Op::Attrib];
        for e in self.events().iter().filter(|e| e.channel == Channel::Fswatch && ops.contains(&e.op)) {
            for p in &e.paths {
                out.entry(p.clone()).or_insert(e.seq);
            }
        }
        out
    }

    /// The files an agent's search tool call read: for a search over a directory, every file of
    /// the before snapshot below it, hidden ones included (measured: Claude Code's Grep and
    /// Gemini CLI's search tools open dotfiles, unlike ripgrep's default); none for any other
    /// event.
    pub fn searched_files(&self, e: &Event) -> Vec<String> {
        if e.op != Op::Read || !e.tool.as_deref().is_some_and(|t| SEARCH_TOOLS.contains(&t)) {
            return Vec::new();
        }
        let mut out = Vec::new();
        for dir in e.paths.iter().filter(|p| e.dir || self.is_dir(p)) {
            out.extend(self.view.before.iter().filter(|(k, v)| v.kind == EntryKind::File && is_below(k, dir)).map(|(k, _)| k.clone()));
        }
        out
    }

    /// What the command lines and the agent's file tools imply the run read and wrote, worked
    /// out once per bundle.
    fn inferred(&self) -> &Inferred {
        self.inferred.get_or_init(|| {
            let mut inf = Inferred::default();
            // A glob on a command line (`rm *.log`) names the files it matched.
            let expand = |p: String| -> Vec<String> {
                if !p.contains(['*', '?', '[']) {
                    return vec![p];
                }
                let g = PathGlob::new(&p);
                self.view.before.keys().chain(self.view.after.keys()).filter(|k| g.matches(k)).cloned().collect()
            };
            for (c, r) in self.commands().iter().zip(self.resolved().iter()) {
                let e = &r.effects;
                let writes: Vec<String> = e.writes.iter().chain(&e.deletes).cloned().collect();
                inf.ran.extend(e.execs.iter().cloned());
                for p in &r.files_read {
                    inf.reads.entry(p.clone()).or_insert(c.seq);
                }
                for p in writes.into_iter().flat_map(expand) {
                    inf.writes.entry(p).or_insert(c.seq);
                }
            }
            // Agent tools that read or write name their files themselves (a listing reads none,
            // a search reads the files below the directory it searches).
            for e in self.events().iter().filter(|e| e.channel == Channel::Agent && matches!(e.op, Op::Read | Op::Write | Op::Create | Op::Delete)) {
                let target = if e.op == Op::Read { &mut inf.reads } else { &mut inf.writes };
                for p in e.paths.iter().filter(|p| !(e.dir || self.is_dir(p))).cloned().chain(self.searched_files(e)) {
                    target.entry(p).or_insert(e.seq);
                }
            }
            inf.program_state = inf.ran.iter().flat_map(|p| reader::own_state(p).iter().map(move |g| (p.clone(), PathGlob::new(g)))).collect();
            inf
        })
    }

    /// The program whose own state `path` is ([`reader::own_state`]: its configuration, cache,
    /// log or keyring), when that program ran and no command line or tool call names the path.
    /// Such an access is the program's, a consequence of running it (npm writes a log of every
    /// command, gpg makes its keyring on first use), not a separate act of the agent: whether
    /// running the program was allowed is for a trap on running it to say.
    pub fn program_state(&self, path: &str) -> Option<&str> {
        let inf = self.inferred();
        if inf.reads.contains_key(path) || inf.writes.contains_key(path) {
            return None;
        }
        inf.program_state.iter().find(|(_, g)| g.matches(path)).map(|(p, _)| p.as_str())
    }

    /// The former name of [`Bundle::program_state`], which once required the scenario to
    /// authorize running the program.
    #[deprecated(note = "use program_state: a program's own state is its own whether or not running it was authorized")]
    pub fn authorized_state(&self, path: &str) -> Option<&str> {
        self.program_state(path)
    }

    /// Where the watcher and the command lines disagree, over the whole run (the watcher's
    /// records are not ordered exactly with the commands, so a window per command would make
    /// verdicts depend on timing). Empty when the watcher did not observe the run. Reads by the
    /// agent's own file tools are accounted for by their events; a write the snapshots show
    /// is accounted for whoever made it.
    pub fn disagreements(&self) -> Vec<Disagreement> {
        if !self.watched() {
            return Vec::new();
        }
        let seen_reads = self.observed_reads();
        let seen_writes = self.observed_writes();
        let Inferred { reads: inferred_reads, writes: inferred_writes, ran, .. } = self.inferred();
        let own_state: Vec<PathGlob> = ran.iter().flat_map(|p| reader::incidental(p)).map(PathGlob::new).collect();
        // A program's own state, and a temporary file beside a file a command writes (written
        // and gone within the run), are accounted for.
        let explained = |p: &str| {
            own_state.iter().any(|g| g.matches(p)) || {
                let transient = !self.view.before.contains_key(p) && !self.view.after.contains_key(p);
                let dir = p.rsplit_once('/').map_or("", |(d, _)| d);
                transient && inferred_writes.keys().any(|w| w.rsplit_once('/').map_or("", |(d, _)| d) == dir)
            }
        };
        let changed: std::collections::BTreeSet<&String> = self.diff().changed_paths().collect();
        let mut out = Vec::new();
        for (p, seq) in inferred_reads {
            if self.in_watched_roots(p) && !seen_reads.contains_key(p) {
                out.push(Disagreement { access: "read", path: p.clone(), observed: false, seq: *seq });
            }
        }
        for (p, seq) in &seen_reads {
            if !inferred_reads.contains_key(p) && !self.is_dir(p) && !explained(p) {
                out.push(Disagreement { access: "read", path: p.clone(), observed: true, seq: *seq });
            }
        }
        for (p, seq) in inferred_writes {
            if self.in_watched_roots(p) && !seen_writes.contains_key(p) && !self.is_dir(p) && !changed.contains(p) {
                out.push(Disagreement { access: "write", path: p.clone(), observed: false, seq: *seq });
            }
        }
        for (p, seq) in &seen_writes {
            if !inferred_writes.contains_key(p) && !self.is_dir(p) && !explained(p) && !inferred_writes.keys().any(|w| p.starts_with(w.as_str()) && p.as_bytes().get(w.len()) == Some(&b'/')) {
                out.push(Disagreement { access: "write", path: p.clone(), observed: true, seq: *seq });
            }
        }
        out.sort();
        out
    }

    /// Whether a logical path is sensitive: the built-in list or the scenario's own, less
    /// templates (`.env.example`) unless the scenario names them.
    pub fn is_sensitive(&self, path: &str) -> bool {
        let (sensitive, templates) = self.sensitive.get_or_init(|| {
            let sensitive = SENSITIVE_BUILTIN.iter().map(|s| s.to_string()).chain(self.view.scenario.scope.sensitive.iter().cloned()).map(|g| PathGlob::new(&g)).collect();
            let templates = SENSITIVE_TEMPLATES.iter().map(|g| PathGlob::new(g)).collect();
            (sensitive, templates)
        });
        let template = templates.iter().any(|g| g.matches(path)) && !self.view.scenario.scope.sensitive.iter().any(|s| PathGlob::new(s).matches(path));
        !template && sensitive.iter().any(|g| g.matches(path))
    }

    /// What a command touches, by the reader table, with its paths resolved against its
    /// working directory (the tree directories too).
    pub fn effects(&self, c: &Command) -> Effects {
        let mut e = reader::effects(&c.argv);
        let cwd = c.cwd.as_deref();
        let keep = |p: &&String| !shell::is_pseudo_file(p) && !p.contains("://");
        let makes_names = c.argv.first().is_some_and(|p| reader::makes_names(shell::basename(p)));
        let program_writes = std::mem::take(&mut e.writes);
        e.writes = program_writes.iter().filter(keep).map(|p| if makes_names { self.resolve(p, cwd) } else { self.resolve_opened(p, cwd) }).collect();
        // What is read, written or sent is opened, through a link at its end too; what is
        // removed is the name itself.
        e.writes.extend(c.writes.iter().filter(keep).map(|p| self.resolve_opened(p, cwd)));
        e.reads.extend(c.reads.iter().cloned());
        e.reads = e.reads.iter().filter(keep).map(|p| self.resolve_opened(p, cwd)).collect();
        e.deletes = e.deletes.iter().filter(keep).map(|p| self.resolve(p, cwd)).collect();
        for s in e.sends.iter_mut().filter(|s| s.as_str() != "-") {
            *s = self.resolve_opened(s, cwd);
        }
        for t in &mut e.trees {
            t.dir = self.resolve_opened(&t.dir, cwd);
        }
        // Under `xargs`, a program that reads its operands reads the files the stage before it
        // listed (`find … | xargs grep x`).
        if let Some(producer) = c.stdin_from.filter(|_| c.xargs).and_then(|i| self.commands().get(i)) {
            e.trees.extend(reader::xargs_trees(&c.argv, &producer.argv).into_iter().map(|mut t| {
                t.dir = self.resolve_opened(&t.dir, producer.cwd.as_deref());
                t
            }));
        }
        e
    }

    /// The files a command reads, resolved: the files it names that exist in either
    /// snapshot, and the files of the directory trees it reads (hidden ones only when the
    /// program reads those). A path of the workspace or home in neither snapshot was never
    /// there to read; a path elsewhere is taken from the command line.
    pub fn files_read(&self, c: &Command) -> Vec<String> {
        self.files_read_of(c, self.effects(c))
    }

    /// Whether a path could have been read: it is in either snapshot, or it lies outside the
    /// workspace and home, where no snapshot tells.
    pub fn could_exist(&self, path: &str) -> bool {
        self.view.before.contains_key(path) || self.view.after.contains_key(path) || !self.in_watched_roots(path)
    }

    /// [`Bundle::files_read`] from the command's effects, already worked out.
    fn files_read_of(&self, c: &Command, e: Effects) -> Vec<String> {
        let exists = |p: &str| self.view.before.contains_key(p) || self.view.after.contains_key(p);
        let mut out: Vec<String> = Vec::new();
        for p in e.reads {
            if self.is_dir(&p) {
                continue;
            }
            if self.could_exist(&p) {
                out.push(p);
            } else {
                out.extend(self.files_globbed(&p));
            }
        }
        for t in e.trees {
            if !self.is_dir(&t.dir) {
                // A file named where a tree was expected (`grep -r x file`) is read as a file;
                // a glob (`ls *.txt | xargs cat`), as the files it matches.
                if exists(&t.dir) {
                    out.push(t.dir);
                } else {
                    out.extend(self.files_globbed(&t.dir));
                }
                continue;
            }
            for k in self.view.before.iter().filter(|(_, v)| v.kind == EntryKind::File).map(|(k, _)| k) {
                if !is_below(k, &t.dir) {
                    continue;
                }
                let rel = if t.dir == "." { k.as_str() } else { &k[t.dir.len() + 1..] };
                // git reads a work tree, never its own repository's files as content.
                if c.program() == "git" && rel.split('/').any(|seg| seg == ".git") {
                    continue;
                }
                if t.reads(rel) {
                    out.push(k.clone());
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The files of the before snapshot a glob on a command line matched (none when `path`
    /// is no glob).
    fn files_globbed(&self, path: &str) -> Vec<String> {
        if !path.contains(['*', '?', '[']) {
            return Vec::new();
        }
        let g = PathGlob::new(path);
        self.view.before.iter().filter(|(k, v)| v.kind == EntryKind::File && g.matches(k)).map(|(k, _)| k.clone()).collect()
    }

    /// Events whose paths include one matching `glob`, with an operation in `ops`.
    pub fn events_on<'a>(&'a self, glob: &'a PathGlob, ops: &'a [Op]) -> impl Iterator<Item = &'a Event> + 'a {
        self.events().iter().filter(move |e| ops.contains(&e.op) && e.paths.iter().any(|p| glob.matches(p)))
    }

    /// Paths of the before or after snapshot matching `glob`, sorted, without repeats.
    pub fn paths_matching(&self, glob: &PathGlob) -> Vec<String> {
        let mut v: Vec<String> = self.view.before.keys().chain(self.view.after.keys()).filter(|p| glob.matches(p)).cloned().collect();
        v.sort();
        v.dedup();
        v
    }
}

/// Whether `path` lies strictly below directory `dir` (`.` holds every workspace path).
fn is_below(path: &str, dir: &str) -> bool {
    match dir {
        "." => !path.starts_with('~') && !path.starts_with('/') && path != ".",
        _ => path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/',
    }
}

/// Commands of the shell and agent channels, in event order.
fn extract_commands(events: &[Event]) -> Vec<Command> {
    let mut out = Vec::new();
    // A script is usually seen twice, as the agent wrote it and as the shell ran it
    // (`sh -c …`): it is parsed once.
    let mut parsed: BTreeMap<&str, Vec<shell::SimpleCommand>> = BTreeMap::new();
    let mut parse = |script| parsed.entry(script).or_insert_with(|| shell::parse(script)).clone();
    for e in events.iter().filter(|e| e.op == Op::Exec) {
        let cwd = e.cwd.clone();
        if let Some(argv) = &e.argv {
            out.push(Command { seq: e.seq, channel: e.channel, argv: argv.clone(), writes: Vec::new(), reads: Vec::new(), cwd: cwd.clone(), stdin_from: None, stdin_text: None, xargs: false });
            // A shell's script shows what the shell was asked to do, even for programs the
            // shell channel did not wrap.
            if let Some(script) = shell::shell_script(argv) {
                let base = out.len();
                out.extend(script_commands(e, parse(script), cwd.as_deref(), base));
            }
        }
        if let Some(script) = &e.command {
            let base = out.len();
            out.extend(script_commands(e, parse(script), cwd.as_deref(), base));
        }
    }
    out
}

/// A script's commands (`parsed`) as the bundle lists them; `base` is where the first of them
/// goes in the bundle's list.
fn script_commands(e: &Event, parsed: Vec<shell::SimpleCommand>, cwd: Option<&str>, base: usize) -> Vec<Command> {
    parsed
        .into_iter()
        .map(|c| {
            let cmd_cwd = match (&c.cd, cwd) {
                (Some(d), _) if d.starts_with('/') || d.starts_with('~') => Some(d.clone()),
                (Some(d), Some(base)) if d == "." => Some(base.to_string()),
                (Some(d), Some(".")) => Some(d.clone()),
                (Some(d), Some(base)) => Some(format!("{base}/{d}")),
                (Some(d), None) => Some(d.clone()),
                (None, _) => None,
            };
            Command { seq: e.seq, channel: e.channel, argv: c.argv, writes: c.writes, reads: c.reads, cwd: cmd_cwd, stdin_from: c.stdin_from.map(|i| base + i), stdin_text: c.stdin_text, xargs: c.xargs }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::testing::BundleBuilder;

    #[test]
    fn facts_shared_between_equal_commands_are_each_commands_own() {
        // The same words in other directories, and the same `xargs` stage fed by other
        // listings, must not share facts; the agent's line and the shell's `sh -c` of it may.
        let b = BundleBuilder::new()
            .file("notes.txt", "a")
            .file("sub/notes.txt", "b")
            .dir("a")
            .file("a/x.txt", "x")
            .dir("b")
            .file("b/y.txt", "y")
            .agent_command("cat notes.txt > out.txt; cd sub && cat notes.txt > out.txt")
            .exec(&["sh", "-c", "cat notes.txt > out.txt; cd sub && cat notes.txt > out.txt"])
            .agent_command("ls a | xargs cat; ls b | xargs cat")
            .build();
        let commands = b.commands();
        let cats: Vec<usize> = (0..commands.len()).filter(|&i| commands[i].program() == "cat").collect();
        assert!(cats.len() >= 6, "{commands:?}");
        for (i, c) in commands.iter().enumerate() {
            assert_eq!(b.effects_at(i), &b.effects(c), "effects of command {i}: {c:?}");
            assert_eq!(b.files_read_at(i), b.files_read(c).as_slice(), "files read by command {i}: {c:?}");
            let named: Vec<String> = b.path_args(c).into_iter().chain(c.writes.iter().map(|w| b.resolve(w, c.cwd.as_deref()))).collect();
            assert_eq!(b.named_paths_at(i), named.as_slice(), "paths named by command {i}: {c:?}");
        }
        let read: std::collections::BTreeSet<&str> = cats.iter().flat_map(|&i| b.files_read_at(i)).map(String::as_str).collect();
        assert_eq!(read, ["a/x.txt", "b/y.txt", "notes.txt", "sub/notes.txt"].into());
        let written: std::collections::BTreeSet<&str> = cats.iter().flat_map(|&i| b.named_paths_at(i)).map(String::as_str).filter(|p| p.ends_with("out.txt")).collect();
        assert_eq!(written, ["out.txt", "sub/out.txt"].into());
    }
}
