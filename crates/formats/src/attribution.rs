//! Whose action each observed event was: the agent's — the model's tool calls and whatever
//! they started — or the agent framework's own (what a CLI does outside any tool call: Codex
//! CLI's repository snapshots, Claude Code's `git rev-parse` between calls, Gemini CLI reading
//! `.env` at start).
//!
//! The evidence, strongest first:
//! 1. **The process tree.** Every shell-channel record carries the chain of processes above
//!    it up to the agent's own process ([`overeager_core::bundle::Ancestor`]). A tool call that runs a
//!    command starts a shell below the framework; the framework's own programs (a `git`
//!    started directly by the CLI) have no shell between them and the CLI. The first shell
//!    below the agent's process is the tool call's when its script is the command of one of
//!    the model's calls, or when it started while the model's tool calls were being carried
//!    out (an interactive shell that tool calls type into is judged by each program's start).
//! 2. **The model's turns.** A real CLI acts for the model only between a model reply and its
//!    next request. Before the first request and after the last reply, what happens is the
//!    framework's. `model.jsonl` gives these times.
//! 3. **What was running.** A file or network event while one of the agent's programs ran is
//!    the agent's; while only the framework's ran, the framework's — unless it touches a path
//!    one of the model's file-tool calls named in that turn.
//!
//! The harness acts on the sandbox only before recording starts and after it ends (setup,
//! snapshots), so nothing recorded is the harness's. Scripted agents have no framework: all
//! of a scripted run is the agent's, as is all of a bundle recorded before process chains were
//! kept (it cannot be told apart).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use overeager_core::bundle::ShimRecord;
use overeager_core::event::{Channel, Event, Op};
use overeager_core::snapshot::SnapshotDiff;

/// Who caused an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Actor {
    /// The model, through a tool call.
    Agent,
    /// The agent framework on its own.
    Framework,
}

impl Actor {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Agent => "agent",
            Actor::Framework => "framework",
        }
    }
}

/// How a bundle's events were attributed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// A scripted agent: it has no framework.
    Scripted,
    /// From the process tree and the model's turns.
    ProcessTree,
    /// Shell records without process chains (recorded before they were kept): everything is
    /// counted as the agent's.
    Legacy,
}

/// The attribution of one bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribution {
    pub method: Method,
    /// One per event, in `seq` order.
    pub by: Vec<Actor>,
    /// Paths the snapshots show changed whose every observed change was the framework's.
    pub framework_paths: BTreeSet<String>,
}

impl Attribution {
    /// `n` events all of which are the agent's, decided by `method` (a scripted run, or one
    /// that cannot be told apart).
    pub fn all_agent(method: Method, n: usize) -> Attribution {
        Attribution { method, by: vec![Actor::Agent; n], framework_paths: BTreeSet::new() }
    }

    /// Whether any event was the framework's.
    pub fn has_framework(&self) -> bool {
        self.by.contains(&Actor::Framework) || !self.framework_paths.is_empty()
    }

    /// Who caused event `seq` (the agent for a number out of range).
    pub fn of(&self, seq: u64) -> Actor {
        self.by.get(seq as usize).copied().unwrap_or(Actor::Agent)
    }

    /// How many events each side caused: (agent, framework).
    pub fn counts(&self) -> (usize, usize) {
        let framework = self.by.iter().filter(|a| **a == Actor::Framework).count();
        (self.by.len() - framework, framework)
    }
}

/// One request of the agent to its model, as attribution needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelCall {
    pub t_us: u64,
    /// A side request (a title, a summary): not a turn of the main loop.
    pub side: bool,
}

/// What attribution reads of a bundle. (A run overeager itself played, the scripted agent or
/// a simulated policy, has no framework to tell apart: it is
/// `Attribution::all_agent(Method::Scripted, n)` without reading anything.)
pub struct Sources<'a> {
    /// The format of its stream (its definition's adapter), when known.
    pub format: Option<crate::adapters::Format>,
    /// `shim.jsonl`, in file order (shell events point into it by `raw`).
    pub shim: &'a [ShimRecord],
    /// The model requests, when the bundle recorded them.
    pub model: &'a [ModelCall],
    pub events: &'a [Event],
    pub diff: &'a SnapshotDiff,
}

/// Shell names: the first of them below the agent's process is where a tool call starts.
const SHELLS: [&str; 7] = ["bash", "sh", "dash", "zsh", "ksh", "ash", "fish"];

/// How long after a program ended a file event may still be its (the watcher reads the
/// kernel's queue a little after the fact).
const WATCH_SLACK_US: u64 = 5_000;

/// Attributes every event of a bundle.
pub fn attribute(src: &Sources) -> Attribution {
    if !src.shim.is_empty() && src.shim.iter().all(|r| r.ancestors.is_empty()) {
        return Attribution::all_agent(Method::Legacy, src.events.len());
    }
    let turns = Turns::of(src.model, src.format.is_some_and(|f| f.acts_after_last_request()));
    let commands: Vec<String> = src
        .events
        .iter()
        .filter(|e| e.channel == Channel::Agent && e.op == Op::Exec)
        .filter_map(|e| e.command.as_deref().map(squash))
        .filter(|c| c.len() >= 2)
        .collect();
    // The tool calls' commands as written, split once as sh splits them (with the time of
    // each call): for programs a framework starts without a shell (Codex's unified exec runs a
    // simple command directly), and for the files they redirect into.
    let lines: Vec<(u64, Vec<String>)> = src
        .events
        .iter()
        .filter(|e| e.channel == Channel::Agent && e.op == Op::Exec)
        .filter_map(|e| Some((e.t_us, shlex::split(e.command.as_deref()?)?)))
        .collect();
    let programs: Vec<Actor> = src.shim.iter().map(|r| program_actor(r, &commands, &lines, &turns)).collect();
    // The paths the model's file-tool calls named, with the turn of each call.
    // And the files the model's commands redirect into, which a framework that runs a
    // command's parts itself (Cline) writes from its own process.
    let mut named: Vec<(usize, &str)> = src
        .events
        .iter()
        .filter(|c| c.channel == Channel::Agent && c.command.is_none())
        .flat_map(|c| c.paths.iter().map(|p| (turns.window(c.t_us), p.as_str())))
        .collect();
    let redirected: Vec<(usize, String)> = lines
        .iter()
        .flat_map(|(t, words)| {
            let window = turns.window(*t);
            redirect_targets(words).into_iter().map(move |target| (window, target))
        })
        .collect();
    named.extend(redirected.iter().map(|(w, t)| (*w, t.as_str())));
    let by: Vec<Actor> = src
        .events
        .iter()
        .map(|e| match e.channel {
            Channel::Agent => Actor::Agent,
            Channel::Shell => programs.get(e.raw as usize).copied().unwrap_or(Actor::Agent),
            Channel::Fswatch | Channel::Net => timed_actor(e, src, &programs, &turns, &named),
        })
        .collect();
    let framework_paths = framework_paths(src, &by);
    Attribution { method: Method::ProcessTree, by, framework_paths }
}

/// The windows in which a real CLI carries out the model's calls: from each main-loop
/// request to the next (the scripted model answers at once, so a request's time is its
/// reply's), and after the last one too for an agent that acts on its last reply (`open`).
/// `None` when the bundle has no model record: then any time may be a tool call's.
struct Turns(Option<Vec<u64>>, bool);

impl Turns {
    fn of(model: &[ModelCall], open: bool) -> Turns {
        let mut t: Vec<u64> = model.iter().filter(|c| !c.side).map(|c| c.t_us).collect();
        t.sort_unstable();
        Turns((!t.is_empty()).then_some(t), open)
    }

    /// Whether the model's calls may have been carried out at `t`.
    fn acting(&self, t: u64) -> bool {
        match &self.0 {
            None => true,
            Some(t_req) => t_req.first().is_some_and(|&first| t >= first) && (self.1 || t_req.last().is_some_and(|&last| t <= last)),
        }
    }

    /// The index of the window holding `t`.
    fn window(&self, t: u64) -> usize {
        self.0.as_ref().map_or(0, |v| v.partition_point(|&b| b <= t))
    }
}

/// A command as compared with a shell's script: without white space, quotes and backslashes,
/// which the frameworks add or change when they wrap a command.
fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace() && !matches!(c, '\'' | '"' | '\\')).collect()
}

fn is_shell(argv: &[String]) -> bool {
    argv.first().is_some_and(|a0| {
        let name = a0.rsplit('/').next().unwrap_or(a0).trim_start_matches('-');
        SHELLS.contains(&name)
    })
}

/// The script of `sh -c SCRIPT` (any spelling: `-c`, `-lc`, `-c -l`), if it is one.
fn shell_script(argv: &[String]) -> Option<&str> {
    let mut saw_c = false;
    for a in argv.iter().skip(1) {
        if let Some(flags) = a.strip_prefix('-').filter(|f| !f.starts_with('-') && !f.is_empty()) {
            saw_c |= flags.contains('c');
            continue;
        }
        if a.starts_with("--") {
            continue;
        }
        return saw_c.then_some(a.as_str());
    }
    None
}

/// Whose program a shell record is: the agent's when a shell above it, the nearest to the
/// agent's process first, is a tool call's; with no shell above it, when it runs one of the
/// tool calls' command `lines` while the model's calls were carried out; else the
/// framework's.
fn program_actor(r: &ShimRecord, commands: &[String], lines: &[(u64, Vec<String>)], turns: &Turns) -> Actor {
    // The chain from the record itself up to, not including, the agent's own process (last).
    let below_root = r.ancestors.len().saturating_sub(1);
    let own = (r.start_us, r.argv.as_slice());
    let chain: Vec<(u64, &[String])> = std::iter::once(own).chain(r.ancestors[..below_root].iter().map(|a| (a.start_us.unwrap_or(r.start_us), a.argv.as_slice()))).collect();
    if !chain.iter().any(|(_, argv)| is_shell(argv)) {
        let ran = lines.iter().any(|(_, words)| runs_command(&r.argv, words));
        return if ran && turns.acting(r.start_us) { Actor::Agent } else { Actor::Framework };
    }
    // A shell that is no tool call's (a framework's `sh -c` wrapper) may still have a tool
    // call's shell below it: each is looked at, from the agent's process down.
    let tool_call = chain.iter().rev().filter(|(_, argv)| is_shell(argv)).any(|(shell_start, argv)| match shell_script(argv) {
        Some(script) => {
            let script = squash(script);
            let named = script.len() >= 2 && commands.iter().any(|c| c.contains(&script) || script.contains(c.as_str()));
            named || turns.acting(*shell_start)
        }
        // An interactive shell that tool calls type into: each program by its own start.
        None => turns.acting(r.start_us),
    });
    if tool_call { Actor::Agent } else { Actor::Framework }
}

/// Whether the program `argv` is one a tool call's `command` (as the agent reported it) ran:
/// the call's own shell (its script, compared without white space and quotes), or a simple
/// command of it or of the script of a shell it starts (`bash -lc 'cat README.md'` ran `cat`).
pub fn command_ran(command: &str, argv: &[String]) -> bool {
    if is_shell(argv)
        && let Some(script) = shell_script(argv)
    {
        let (script, command) = (squash(script), squash(command));
        return script.len() >= 2 && (command.contains(&script) || script.contains(&command));
    }
    let Some(words) = shlex::split(command) else { return false };
    if runs_command(argv, &words) {
        return true;
    }
    shell_script(&words).filter(|_| is_shell(&words)).and_then(shlex::split).is_some_and(|inner| runs_command(argv, &inner))
}

/// Whether `argv` is a simple command of a line (its `words`, split as sh splits it) run
/// without a shell:
/// the same program, and every other word among its arguments (a word with a glob by the part
/// before the glob, as the expanded arguments begin; `~/…` by the path after the home
/// directory, which the framework expanded).
fn runs_command(argv: &[String], words: &[String]) -> bool {
    // Each simple command of a list or pipeline on its own (Cline runs `a > f && chmod 600 f`
    // part by part).
    words.split(|w| matches!(w.as_str(), "&&" | "||" | ";" | "|")).any(|part| runs_simple_command(argv, part))
}

/// The targets of the output redirections (`> f`, `>> f`, `>f`) among a command's words.
fn redirect_targets(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        let op = w.trim_start_matches(|c: char| c.is_ascii_digit() || c == '&');
        match op.strip_prefix(">>").or_else(|| op.strip_prefix('>')) {
            Some("") => out.extend(it.next().cloned()),
            Some(target) if !target.starts_with('&') => out.push(target.to_string()),
            _ => {}
        }
    }
    out.retain(|t| t != "/dev/null");
    out
}

/// [`runs_command`] for one simple command's words: its redirections are not arguments.
fn runs_simple_command(argv: &[String], words: &[String]) -> bool {
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    // Leading `NAME=value` words are the command's environment (Codex runs `A=x perl …` as
    // perl with A set).
    let is_assignment = |w: &String| w.split_once('=').is_some_and(|(name, _)| !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') && !name.as_bytes()[0].is_ascii_digit());
    let targets = redirect_targets(words);
    let is_redirection = |w: &String| w.trim_start_matches(|c: char| c.is_ascii_digit() || c == '&').starts_with('>') || targets.contains(w);
    let mut words = words.iter().skip_while(|w| is_assignment(w)).filter(|w| !is_redirection(w)).map(String::as_str);
    let (Some(head), Some(program)) = (words.next(), argv.first()) else { return false };
    if base(head) != base(program) {
        return false;
    }
    let args = &argv[1..];
    words.all(|w| match (w.find(['*', '?', '[']), w.strip_prefix('~')) {
        (Some(i), _) => args.iter().any(|a| a.starts_with(&w[..i])),
        (None, Some(rest)) if rest.starts_with('/') => args.iter().any(|a| a == w || a.ends_with(rest)),
        (None, _) => args.iter().any(|a| a == w),
    })
}

/// Whose a file or network event is, from what ran at the time.
fn timed_actor(e: &Event, src: &Sources, programs: &[Actor], turns: &Turns, named: &[(usize, &str)]) -> Actor {
    let t = e.t_us;
    // The programs of each side running at `t`, by name.
    let running = |who: Actor| -> Vec<&str> {
        src.shim
            .iter()
            .zip(programs)
            .filter(|(r, a)| **a == who && r.start_us <= t && t <= r.end_us.max(r.start_us) + WATCH_SLACK_US)
            .filter_map(|(r, _)| r.argv.first().map(|p| p.rsplit('/').next().unwrap_or(p)))
            .collect()
    };
    let (agent, framework) = (running(Actor::Agent), running(Actor::Framework));
    let in_git_dir = e.paths.iter().any(|p| p.starts_with(".git/") || p.contains("/.git/"));
    if !agent.is_empty() {
        // Both at once (Codex CLI snapshots the repository while a tool call runs): a
        // repository's own files go to the side whose git is running.
        if in_git_dir && framework.contains(&"git") && !agent.contains(&"git") {
            return Actor::Framework;
        }
        return Actor::Agent;
    }
    // Reported after the agent's programs ended (the watcher is late on a busy machine): a
    // repository's own files go to the side whose git ran up to [`WATCH_LATE_US`] before, when
    // only one side's did and no file tool of the turn named them.
    if in_git_dir && !named_by_file_tool(e, turns, named) {
        let git_ran = |who: Actor| {
            src.shim.iter().zip(programs).any(|(r, a)| {
                *a == who && r.start_us <= t && t <= r.end_us.max(r.start_us) + WATCH_LATE_US && r.argv.first().is_some_and(|p| p.rsplit('/').next() == Some("git"))
            })
        };
        if git_ran(Actor::Framework) && !git_ran(Actor::Agent) {
            return Actor::Framework;
        }
    }
    if !turns.acting(t) {
        return Actor::Framework;
    }
    if !framework.is_empty() && !named_by_file_tool(e, turns, named) && !(named_by_program(e, src, programs, Actor::Agent) && !named_by_program(e, src, programs, Actor::Framework)) {
        return Actor::Framework;
    }
    Actor::Agent
}

/// How late the file watcher may report a change after the program that made it ended: it
/// reads its events on a thread of its own, tens of milliseconds late on a busy machine, by
/// when a framework's next program (Claude Code's `git rev-parse` between calls) may be running.
const WATCH_LATE_US: u64 = 2_000_000;

/// Whether a program of `who` that ran up to the time of `e` (ending at most
/// [`WATCH_LATE_US`] before it) names one of `e`'s paths, or a directory above one, among its
/// arguments (`rm -f instance/invoicer.db`, resolved against the program's directory).
fn named_by_program(e: &Event, src: &Sources, programs: &[Actor], who: Actor) -> bool {
    let t = e.t_us;
    src.shim.iter().zip(programs).filter(|(r, a)| **a == who && r.start_us <= t && t <= r.end_us.max(r.start_us) + WATCH_LATE_US).any(|(r, _)| {
        r.argv.iter().skip(1).filter(|w| !w.is_empty() && !w.starts_with('-')).any(|w| {
            let word = w.trim_start_matches("./").trim_end_matches('/');
            let abs = if word.starts_with('/') { word.to_string() } else { format!("{}/{word}", r.cwd.trim_end_matches('/')) };
            // The event's paths are the workspace's: the argument names one when its absolute
            // form ends in the path or in a directory above it.
            e.paths.iter().any(|p| {
                let mut prefixes = p.match_indices('/').map(|(i, _)| &p[..i]).chain(std::iter::once(p.as_str()));
                prefixes.any(|q| !q.is_empty() && abs.ends_with(&format!("/{q}")))
            })
        })
    })
}

/// Whether a path of `e` lies at or below (or is a temporary beside) a path that one of the
/// model's file-tool calls of the same turn named (`named`: turn and path of each).
fn named_by_file_tool(e: &Event, turns: &Turns, named: &[(usize, &str)]) -> bool {
    let window = turns.window(e.t_us);
    named.iter().filter(|(w, _)| w.abs_diff(window) <= 1).any(|(_, named)| e.paths.iter().any(|p| p.starts_with(named)))
}

/// Paths the snapshots show changed, every observed change of which was the framework's.
fn framework_paths(src: &Sources, by: &[Actor]) -> BTreeSet<String> {
    let changed: BTreeSet<&String> = src.diff.touched_paths().collect();
    let mut seen: std::collections::BTreeMap<&str, (bool, bool)> = std::collections::BTreeMap::new();
    let changes = [Op::Write, Op::Create, Op::Delete, Op::Rename, Op::Chmod, Op::Attrib];
    for (e, who) in src.events.iter().zip(by) {
        if e.channel != Channel::Fswatch || !changes.contains(&e.op) {
            continue;
        }
        for p in e.paths.iter().filter(|p| changed.contains(p)) {
            let entry = seen.entry(p.as_str()).or_default();
            match who {
                Actor::Agent => entry.0 = true,
                Actor::Framework => entry.1 = true,
            }
        }
    }
    seen.into_iter().filter(|(_, (agent, framework))| *framework && !*agent).map(|(p, _)| p.to_string()).collect()
}

/// How a real CLI's run differs from its scripted play.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Divergence {
    /// Traps the run fired that the play does not.
    pub extra: Vec<String>,
    /// Traps the play fires that the run did not.
    pub missing: Vec<String>,
    pub play_success: Option<bool>,
    pub run_success: Option<bool>,
    pub cause: Cause,
}

impl Divergence {
    /// A run that could not be compared at all: the harness's to explain.
    pub fn failed(detail: String) -> Divergence {
        Divergence { extra: Vec::new(), missing: Vec::new(), play_success: None, run_success: None, cause: Cause::Harness { detail } }
    }
}

/// Who a difference from the play is down to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Cause {
    /// A named rule of the CLI, shown by the events cited.
    Framework { rule: &'static str, summary: &'static str, evidence: Vec<u64>, detail: String },
    /// Nothing the CLI is known to do explains it: overeager drove the CLI wrong.
    Harness { detail: String },
}

#[cfg(test)]
mod tests {
    use super::*;
    use overeager_core::bundle::Ancestor;

    fn anc(pid: u32, start: u64, argv: &[&str]) -> Ancestor {
        Ancestor { pid, start_us: Some(start), argv: argv.iter().map(|s| s.to_string()).collect() }
    }

    fn rec(argv: &[&str], start: u64, ancestors: Vec<Ancestor>) -> ShimRecord {
        ShimRecord {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: "/w".into(),
            pid: 9,
            ppid: 8,
            start_us: start,
            end_us: start + 10_000,
            exit: Some(0),
            signal: None,
            real: None,
            ancestors,
        }
    }

    fn ev(channel: Channel, op: Op, t: u64, raw: u64) -> Event {
        Event::new(channel, op, t, raw)
    }

    fn claude_root() -> Ancestor {
        anc(100, 0, &["node", "/usr/lib/claude/cli.js"])
    }

    #[test]
    fn a_program_the_cli_starts_itself_is_the_framework_s() {
        let shim = vec![
            // git started by the CLI between two calls.
            rec(&["git", "rev-parse", "HEAD"], 150, vec![claude_root()]),
            // The tool call's shell, then its program.
            rec(&["ls", "-la"], 160, vec![anc(120, 155, &["/bin/bash", "-c", "-l", "eval 'ls -la' < /dev/null"]), claude_root()]),
            // A pipeline the CLI runs in a shell of its own, before any model call.
            rec(&["grep", "code"], 20, vec![anc(110, 19, &["/bin/sh", "-c", "ps ax | grep code"]), claude_root()]),
        ];
        let mut call = ev(Channel::Agent, Op::Exec, 140, 0);
        call.command = Some("ls -la".into());
        let events = vec![call, ev(Channel::Shell, Op::Exec, 150, 0), ev(Channel::Shell, Op::Exec, 160, 1), ev(Channel::Shell, Op::Exec, 20, 2)];
        let model = [ModelCall { t_us: 100, side: false }, ModelCall { t_us: 130, side: true }, ModelCall { t_us: 200, side: false }];
        let a = attribute(&Sources { format: None, shim: &shim, model: &model, events: &events, diff: &SnapshotDiff::default() });
        assert_eq!(a.method, Method::ProcessTree);
        assert_eq!(a.by, vec![Actor::Agent, Actor::Framework, Actor::Agent, Actor::Framework]);
    }

    #[test]
    fn file_events_follow_what_ran_and_the_model_s_turns() {
        // Times in milliseconds, as µs.
        let ms = 1000;
        let codex = anc(100, 0, &["codex"]);
        let shim = vec![
            rec(&["git", "add", "--all"], 300 * ms, vec![codex.clone()]),
            rec(&["bash", "-lc", "rm x"], 150 * ms, vec![codex.clone()]),
            // A snapshot taken while a tool call's `cat` runs.
            rec(&["git", "commit-tree", "abc"], 350 * ms, vec![codex.clone()]),
            rec(&["cat", "README.md"], 350 * ms, vec![anc(130, 349 * ms, &["bash", "-lc", "cat README.md"]), codex]),
        ];
        let mut write = ev(Channel::Agent, Op::Write, 120 * ms, 0);
        write.paths = vec!["notes.md".into()];
        let at = |t: u64, p: &str| {
            let mut e = ev(Channel::Fswatch, Op::Create, t * ms, 0);
            e.paths = vec![p.into()];
            e
        };
        let events = vec![
            write,
            at(50, ".env"),                 // before the first request: the framework's
            at(125, "notes.md.tmp.1"),      // the file tool's own temporary
            at(155, "y"),                   // while the agent's rm ran
            at(305, ".git/objects/ab/cd"),  // while only the framework's git ran
            at(305, "notes.md"),            // … but a path the turn's file tool named
            at(900, ".bash_history"),       // after the last reply
            at(352, ".git/objects/ef/01"),  // the snapshot's object, while both ran
            at(353, "README.md"),           // the tool call's read, while both ran
            at(377, ".git/objects/ef/02"),  // the snapshot's, reported after both ended
        ];
        let model = [ModelCall { t_us: 100 * ms, side: false }, ModelCall { t_us: 400 * ms, side: false }];
        let diff = SnapshotDiff { created: vec![".git/objects/ab/cd".into(), "notes.md".into()], ..SnapshotDiff::default() };
        let a = attribute(&Sources { format: None, shim: &shim, model: &model, events: &events, diff: &diff });
        let by: Vec<&str> = a.by.iter().map(|a| a.as_str()).collect();
        assert_eq!(by, ["agent", "framework", "agent", "agent", "framework", "agent", "framework", "framework", "agent", "framework"]);
        assert_eq!(a.framework_paths.into_iter().collect::<Vec<_>>(), vec![".git/objects/ab/cd".to_string()]);
    }

    /// Measured on a busy machine (Claude Code 2.0.55, accept-edits): the watcher reported
    /// the deletions of `rm -f instance/invoicer.db …` 25 ms after `rm` ended, while Claude
    /// Code's own `git rev-parse` ran; they are still the tool call's.
    #[test]
    fn a_change_reported_late_is_the_program_s_that_named_the_path() {
        let ms = 1000;
        let bash = anc(120, 899 * ms, &["/bin/bash", "-c", "-l", "eval 'rm -f instance/invoicer.db' < /dev/null"]);
        let mut rm = rec(&["rm", "-f", "instance/invoicer.db", "build"], 900 * ms, vec![bash, claude_root()]);
        rm.end_us = 912 * ms;
        let mut git = rec(&["git", "rev-parse", "--abbrev-ref", "HEAD"], 930 * ms, vec![claude_root()]);
        git.end_us = 940 * ms;
        let mut late_git = rec(&["git", "status"], 4000 * ms, vec![claude_root()]);
        late_git.end_us = 4100 * ms;
        let shim = vec![rm, git, late_git];
        let mut call = ev(Channel::Agent, Op::Exec, 890 * ms, 0);
        call.command = Some("rm -f instance/invoicer.db".into());
        let at = |t: u64, p: &str| {
            let mut e = ev(Channel::Fswatch, Op::Delete, t * ms, 0);
            e.paths = vec![p.into()];
            e
        };
        let events = vec![
            call,
            at(938, "instance/invoicer.db"),   // late, while the CLI's git runs: rm's
            at(938, "build/out.o"),            // below a directory rm named: rm's
            at(938, "instance/other.db"),      // named by nobody: the running git's
            at(4050, "instance/invoicer.db"),  // long after rm, while another git runs
        ];
        let model = [ModelCall { t_us: 800 * ms, side: false }, ModelCall { t_us: 5000 * ms, side: false }];
        let a = attribute(&Sources { format: None, shim: &shim, model: &model, events: &events, diff: &SnapshotDiff::default() });
        let by: Vec<&str> = a.by.iter().map(|a| a.as_str()).collect();
        assert_eq!(by, ["agent", "agent", "agent", "framework", "framework"]);
    }

    #[test]
    fn a_command_run_without_a_shell_is_the_tool_call_s_when_it_is_the_call_s_command() {
        // Codex's unified exec: programs directly below the CLI, which expands globs itself.
        let codex = anc(100, 0, &["codex-acp"]);
        let shim = vec![
            rec(&["rm", "-f", "db/a.py", "db/b.py"], 150, vec![codex.clone()]),
            rec(&["git", "commit-tree", "abc"], 160, vec![codex.clone()]),
            rec(&["rm", "-f", "other"], 170, vec![codex]),
        ];
        let mut call = ev(Channel::Agent, Op::Exec, 140, 0);
        call.command = Some("rm -f db/*.py".into());
        let mut status = ev(Channel::Agent, Op::Exec, 141, 1);
        status.command = Some("git status".into());
        let events = vec![call, status, ev(Channel::Shell, Op::Exec, 150, 0), ev(Channel::Shell, Op::Exec, 160, 1), ev(Channel::Shell, Op::Exec, 170, 2)];
        let model = [ModelCall { t_us: 100, side: false }, ModelCall { t_us: 200, side: false }];
        let a = attribute(&Sources { format: None, shim: &shim, model: &model, events: &events, diff: &SnapshotDiff::default() });
        assert_eq!(a.by, vec![Actor::Agent, Actor::Agent, Actor::Agent, Actor::Framework, Actor::Framework]);
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let runs_command = |argv: &[String], line: &str| runs_command(argv, &shlex::split(line).unwrap());
        assert!(runs_command(&v(&["/usr/bin/ls", "-la", "x"]), "ls -la 'x'"));
        assert!(!runs_command(&v(&["ls", "-la"]), "ls -la x"));
        assert!(!runs_command(&v(&["cat", "x"]), "ls x"));
        assert!(runs_command(&v(&["grep", "-n", "a", "/home/u/.kube/config"]), "grep -n 'a' ~/.kube/config"));
        assert!(runs_command(&v(&["perl", "-pi", "-e", "s/\\Q$ENV{OLD}\\E//", "--", "f.sql"]), "OLD='a b\n' perl -pi -e 's/\\Q$ENV{OLD}\\E//' -- f.sql"));
        assert!(!runs_command(&v(&["perl", "x"]), "OLD=1 python x"));
        // A list's parts, each with its redirections set apart.
        let line = "echo 'a:b' > ~/.pgpass && chmod 600 ~/.pgpass";
        assert!(runs_command(&v(&["chmod", "600", "/home/u/.pgpass"]), line));
        assert!(runs_command(&v(&["echo", "a:b"]), line));
        assert!(!runs_command(&v(&["chmod", "644", "/home/u/.pgpass"]), line));
        assert_eq!(redirect_targets(&v(&["echo", "x", ">", "~/.pgpass", "2>&1", ">>log", "2>/dev/null"])), ["~/.pgpass", "log"]);
    }

    #[test]
    fn a_tool_shell_below_a_framework_wrapper_is_still_the_tool_s() {
        let root = anc(100, 0, &["python", "-m", "openhands"]);
        // Commands typed into an interactive shell that the framework started through a
        // wrapper script of its own, before the first model call.
        let wrapper = anc(110, 5, &["sh", "-c", "tmux new-session -d -s oh bash"]);
        let interactive = anc(120, 6, &["bash"]);
        let shim = vec![rec(&["rm", "x"], 150, vec![interactive.clone(), anc(115, 5, &["tmux"]), wrapper.clone(), root.clone()]), rec(&["git", "config", "user.name"], 7, vec![interactive, wrapper, root])];
        let events = vec![ev(Channel::Shell, Op::Exec, 150, 0), ev(Channel::Shell, Op::Exec, 7, 1)];
        let model = [ModelCall { t_us: 100, side: false }, ModelCall { t_us: 200, side: false }];
        let a = attribute(&Sources { format: None, shim: &shim, model: &model, events: &events, diff: &SnapshotDiff::default() });
        assert_eq!(a.by, vec![Actor::Agent, Actor::Framework]);
    }

    #[test]
    fn an_agent_that_acts_on_its_last_reply_acts_after_its_last_request() {
        // Aider's one request, then its own process applying an edit block: the agent's. For
        // a tool-calling agent the same file event after its last request is the framework's.
        let shim = vec![rec(&["git", "--version"], 150, vec![anc(90, 1, &["python", "aider"])])];
        let events = vec![ev(Channel::Shell, Op::Exec, 150, 0), ev(Channel::Fswatch, Op::Write, 40_000, 0)];
        let model = [ModelCall { t_us: 30_000, side: false }];
        let by = |format| attribute(&Sources { format, shim: &shim, model: &model, events: &events, diff: &SnapshotDiff::default() }).by;
        assert_eq!(by(Some(crate::adapters::Format::named("aider").unwrap()))[1], Actor::Agent);
        assert_eq!(by(None)[1], Actor::Framework);
    }

    #[test]
    fn a_run_recorded_without_process_chains_is_all_the_agent_s() {
        let events = vec![ev(Channel::Shell, Op::Exec, 1, 0)];
        let shim = vec![rec(&["git", "status"], 1, Vec::new())];
        let a = attribute(&Sources { format: None, shim: &shim, model: &[], events: &events, diff: &SnapshotDiff::default() });
        assert_eq!((a.method, a.by.clone()), (Method::Legacy, vec![Actor::Agent]));
    }

    #[test]
    fn scripts_are_found_in_every_spelling() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(shell_script(&v(&["bash", "-lc", "ls"])), Some("ls"));
        assert_eq!(shell_script(&v(&["/bin/bash", "-c", "-l", "eval x"])), Some("eval x"));
        assert_eq!(shell_script(&v(&["bash", "--norc", "-c", "ls"])), Some("ls"));
        assert_eq!(shell_script(&v(&["bash", "script.sh"])), None);
        assert_eq!(shell_script(&v(&["bash"])), None);
        assert!(is_shell(&v(&["-bash"])) && is_shell(&v(&["/usr/bin/zsh", "-c", "x"])) && !is_shell(&v(&["node"])));
    }
}
