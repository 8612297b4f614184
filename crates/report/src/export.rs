//! Runs exported for other tools: what a run looked like as a conversation (the prompt, the
//! agent's turns, its tool calls with their arguments and outputs, the commands only the shell
//! shim saw) with its verdict, in a form the ATIF and Inspect writers share.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use overeager_core::bundle::{BundleManifest, files};
use overeager_formats::attribution::{Actor, Attribution};
use overeager_core::event::{Channel, Event, Op};
use overeager_formats::transcript::{self, Calls};
pub use overeager_formats::adapters::iso8601;
use overeager_core::{Scenario, Verdict};
use serde_json::{Value, json};

use overeager_bundle::Bundle;

/// One run ready to export.
pub struct RunExport {
    /// The run id (the store's, or the bundle's own).
    pub run_id: String,
    /// The experiment it belongs to, when it came from a store.
    pub experiment: Option<String>,
    /// sha256 of the packed bundle.
    pub bundle_digest: String,
    pub manifest: BundleManifest,
    pub scenario: Scenario,
    /// The prompt the agent was given.
    pub prompt: String,
    pub verdict: Verdict,
    pub timeline: Vec<Step>,
    /// What the agent framework ran on its own, outside the model's tool calls (see
    /// `overeager_formats::attribution`): kept out of the turns, exported as metadata.
    pub framework: Vec<Call>,
    /// The agent's own note that its session started (its model, its session id).
    pub session: Option<Session>,
}

/// The agent's note that its session started, and the events that carry it.
#[derive(Debug, Clone)]
pub struct Session {
    pub note: String,
    pub seqs: Vec<u64>,
}

impl RunExport {
    /// `framework · model · variant`, the experiment cell of the run.
    pub fn cell(&self) -> String {
        format!("{} · {} · {}", self.manifest.agent.framework, self.manifest.agent.model, super::short_variant(self.manifest.variant))
    }

    /// The Inspect task a run stands alone under: `overeager/<scenario>`.
    pub fn task(&self) -> String {
        format!("overeager/{}", self.scenario.id)
    }

    /// What every export carries about the run besides its trace: scenario, variant, cell,
    /// bundle and verdict.
    pub fn metadata(&self) -> Value {
        let v = &self.verdict;
        json!({
            "run_id": self.run_id,
            "experiment": self.experiment,
            "scenario": self.scenario.id,
            "scenario_hash": v.scenario_hash,
            "scenario_title": self.scenario.title,
            "archetype": self.scenario.archetype,
            "variant": self.manifest.variant,
            "cell": self.cell(),
            "agent": self.manifest.agent.id,
            // What answered the model calls: whether this trace is a real model's at all.
            "played_by": self.manifest.agent.played_by(),
            "model_played_by": self.manifest.agent.played_by().label(),
            "replicate": self.manifest.replicate,
            "bundle_sha256": self.bundle_digest,
            "timed_out": self.manifest.timed_out,
            "verdict": {
                "outcome": v.outcome,
                "overeager": v.overeager,
                "traps": v.traps,
                "success": v.success,
                "success_checks": v.success_checks,
                "conditional_success": v.conditional_success,
                "severity_total": v.severity_total,
                "critical": v.critical,
                "errors": v.errors,
                "modules": v.modules,
                "versions": v.versions,
                "framework_effects": v.framework_effects,
                "framework_changes": v.framework_changes,
            },
            "session": self.session.as_ref().map(|s| json!({"note": s.note, "events": s.seqs})),
            "framework_commands": self.framework.iter().map(|c| json!({"argv": c.arguments["argv"], "cwd": c.arguments["cwd"], "exit": c.output, "events": c.seqs})).collect::<Vec<_>>(),
        })
    }

    /// One line naming the verdict and the traps that fired.
    pub fn explanation(&self) -> String {
        let v = &self.verdict;
        let outcome = serde_json::to_value(v.outcome).ok().and_then(|o| o.as_str().map(str::to_string)).unwrap_or_default();
        let mut s = format!("{outcome}: ");
        if v.traps.is_empty() {
            s.push_str("no trap fired");
        } else {
            let traps: Vec<String> = v.traps.iter().map(|t| format!("{} ({}, events {:?})", t.id, json!(t.severity).as_str().unwrap_or_default(), t.evidence)).collect();
            s.push_str(&format!("{} trap(s) fired: {}", traps.len(), traps.join("; ")));
        }
        if !v.errors.is_empty() {
            s.push_str(&format!("; {} check(s) without an answer", v.errors.len()));
        }
        match v.success {
            Some(true) => s.push_str("; task completed"),
            Some(false) => s.push_str("; task not completed"),
            None => {}
        }
        s
    }
}

/// Who a step is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    User,
    Agent,
}

/// One turn of the run.
#[derive(Debug, Clone)]
pub struct Step {
    pub source: Source,
    /// Unix time in microseconds (0: unknown).
    pub t_us: u64,
    /// What was said ("" when nothing).
    pub message: String,
    pub calls: Vec<Call>,
    /// The agent's final answer.
    pub is_result: bool,
    /// The agent-channel events this step stands for (besides its calls').
    pub seqs: Vec<u64>,
    /// Something the agent's stream held that the adapter did not recognize.
    pub unknown: Option<String>,
}

/// One tool call.
#[derive(Debug, Clone)]
pub struct Call {
    pub id: String,
    pub name: String,
    /// A JSON object.
    pub arguments: Value,
    pub output: Option<String>,
    pub error: bool,
    /// The agent's own call (`Agent`), or a command only the shell shim saw (`Shell`).
    pub observed_by: Channel,
    /// The permission gate refused it: it never ran.
    pub denied: bool,
    /// The events that record it.
    pub seqs: Vec<u64>,
}

fn object(v: Value) -> Value {
    match v {
        Value::Object(_) => v,
        Value::Null => json!({}),
        other => json!({ "value": other }),
    }
}

/// The run as turns: the prompt, then one turn per answer of the model — its message and
/// the tool calls it made, with what those calls ran joined to them — and the final answer
/// once. What the agent framework ran on its own ([`Actor::Framework`]) is returned apart,
/// as is the framework's note that the session started; a command no call of the model
/// accounts for becomes a call of its own, observed by the shell only.
pub fn timeline(prompt: &str, started_us: u64, events: &[Event], calls: &Calls, attribution: &Attribution) -> Timeline {
    let step = |source, t_us, message: String| Step { source, t_us, message, calls: Vec::new(), is_result: false, seqs: Vec::new(), unknown: None };
    let mut t = Timeline { steps: vec![step(Source::User, started_us, prompt.to_string())], framework: Vec::new(), session: None };
    let steps = &mut t.steps;
    // Calls already used, by key, so that several events of one call (Codex reports a patch
    // as one event per file) stay one call.
    let mut used_on_line: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let mut last_call_key: Option<(u64, usize)> = None;
    for e in events {
        match (e.channel, e.op) {
            (Channel::Agent, Op::Start) => {
                let note = format!("agent session started{}", e.text.as_deref().map(|m| format!(" ({m})")).unwrap_or_default());
                match &mut t.session {
                    Some(s) => s.seqs.push(e.seq),
                    None => t.session = Some(Session { note, seqs: vec![e.seq] }),
                }
            }
            (Channel::Agent, Op::Message) => {
                let mut s = step(Source::Agent, e.t_us, e.text.clone().unwrap_or_default());
                s.seqs.push(e.seq);
                steps.push(s);
            }
            (Channel::Agent, Op::Result) => {
                // The final answer is usually the last message again: one turn, not two.
                let text = e.text.clone().unwrap_or_default();
                match steps.last_mut() {
                    Some(last) if last.source == Source::Agent && !last.is_result && last.calls.is_empty() && last.unknown.is_none() && (last.message == text || text.is_empty()) => {
                        last.is_result = true;
                        last.seqs.push(e.seq);
                    }
                    _ => {
                        let mut s = step(Source::Agent, e.t_us, text);
                        s.is_result = true;
                        s.seqs.push(e.seq);
                        steps.push(s);
                    }
                }
            }
            (Channel::Agent, Op::Unknown) => {
                let mut s = step(Source::Agent, e.t_us, String::new());
                s.unknown = Some(e.text.clone().unwrap_or_default());
                s.seqs.push(e.seq);
                steps.push(s);
            }
            (Channel::Agent, _) => {
                let pos = used_on_line.entry(e.raw).or_insert(0);
                let key = (e.raw, *pos);
                // This line's next call, or (more events than calls on the line) its last.
                let found_key = if calls.contains_key(&key) { Some(key) } else { calls.range((e.raw, 0)..(e.raw + 1, 0)).next_back().map(|(k, _)| *k) };
                let io = found_key.and_then(|k| calls.get(&k));
                // Another event of the call before it: one call, two events.
                if found_key.is_some() && found_key == last_call_key
                    && let Some(c) = steps.last_mut().and_then(|s| s.calls.iter_mut().rev().find(|c| c.observed_by == Channel::Agent))
                {
                    c.seqs.push(e.seq);
                    continue;
                }
                *pos += 1;
                last_call_key = found_key;
                let denied = e.op == Op::Denied;
                let call = match io {
                    Some(io) if found_key == Some(key) => Call {
                        id: io.id.clone(),
                        name: io.name.clone(),
                        arguments: object(io.arguments.clone()),
                        output: if denied { e.text.clone() } else { io.output.clone() },
                        error: io.error || denied || e.ok == Some(false),
                        observed_by: Channel::Agent,
                        denied,
                        seqs: vec![e.seq],
                    },
                    _ => Call {
                        id: format!("event-{}", e.seq),
                        name: e.tool.clone().unwrap_or_else(|| e.op.as_str().to_string()),
                        arguments: event_arguments(e),
                        output: e.text.clone().filter(|_| denied),
                        error: denied || e.ok == Some(false),
                        observed_by: Channel::Agent,
                        denied,
                        seqs: vec![e.seq],
                    },
                };
                // Calls join the agent turn they follow (a message, or calls of the same
                // line); otherwise they start a turn of their own.
                let joins = steps.last().is_some_and(|s| s.source == Source::Agent && !s.is_result && s.unknown.is_none() && (s.calls.is_empty() || s.calls.iter().any(|c| c.observed_by == Channel::Agent && c.seqs.iter().any(|q| events.get(*q as usize).is_some_and(|p| p.channel == Channel::Agent && p.raw == e.raw)))));
                if !joins {
                    steps.push(step(Source::Agent, e.t_us, String::new()));
                }
                steps.last_mut().expect("a step was just ensured").calls.push(call);
            }
            (Channel::Shell, Op::Exec) => {
                let argv = e.argv.clone().unwrap_or_default();
                let call = Call {
                    id: format!("shell-{}", e.seq),
                    name: "shell".into(),
                    arguments: json!({"argv": argv, "cwd": e.cwd}),
                    output: e.exit.map(|c| format!("exit {c}")),
                    error: e.exit.is_some_and(|c| c != 0),
                    observed_by: Channel::Shell,
                    denied: false,
                    seqs: vec![e.seq],
                };
                if attribution.of(e.seq) == Actor::Framework {
                    t.framework.push(call);
                    continue;
                }
                // What a call of the model ran (its shell, and the programs below it) is
                // recorded with that call: the one whose command it is, however the two were
                // timed (a stream may report a call before its program starts, or after the
                // final answer); else the last call of the current turn.
                if let Some((si, ci)) = call_that_ran(steps, events, &argv) {
                    steps[si].calls[ci].seqs.push(e.seq);
                    continue;
                }
                let current = steps.last_mut().filter(|s| s.source == Source::Agent && !s.is_result).and_then(|s| s.calls.iter_mut().rev().find(|c| c.observed_by == Channel::Agent && !c.denied));
                if let Some(c) = current {
                    c.seqs.push(e.seq);
                    continue;
                }
                if !steps.last().is_some_and(|s| s.source == Source::Agent && !s.is_result) {
                    steps.push(step(Source::Agent, e.t_us, String::new()));
                }
                steps.last_mut().expect("a step was just ensured").calls.push(call);
            }
            _ => {}
        }
    }
    t
}

/// The latest of the model's calls (step, call) whose command ran `argv`.
fn call_that_ran(steps: &[Step], events: &[Event], argv: &[String]) -> Option<(usize, usize)> {
    if argv.is_empty() {
        return None;
    }
    steps.iter().enumerate().rev().find_map(|(si, s)| {
        s.calls.iter().enumerate().rev().find_map(|(ci, c)| {
            let command = c.seqs.first().and_then(|q| events.get(*q as usize)).and_then(|e| e.command.as_deref())?;
            (c.observed_by == Channel::Agent && !c.denied && overeager_formats::attribution::command_ran(command, argv)).then_some((si, ci))
        })
    })
}

/// A run's turns, and what the framework did outside them.
pub struct Timeline {
    pub steps: Vec<Step>,
    pub framework: Vec<Call>,
    pub session: Option<Session>,
}

/// The arguments of a call the agent's stream does not describe, from its event.
fn event_arguments(e: &Event) -> Value {
    let mut args = serde_json::Map::new();
    if let Some(c) = &e.command {
        args.insert("command".into(), json!(c));
    }
    if !e.paths.is_empty() {
        args.insert("paths".into(), json!(e.paths));
    }
    if let Some(t) = &e.text {
        args.insert("text".into(), json!(t));
    }
    Value::Object(args)
}

/// Reads a bundle (directory or `.oeb`) for export: checked as `bundle verify` checks it,
/// judged with the built-in predicates, turned into turns.
pub fn from_bundle(path: &Path, judge: &overeager_judge::Judge) -> Result<RunExport> {
    let b = Bundle::open(path)?;
    overeager_bundle::verify::verify(&b.dir).with_context(|| format!("{}: the bundle fails its checks (run `overeager bundle verify` on it); nothing was exported", path.display()))?;
    let digest = if path.is_file() {
        overeager_core::sha256_hex(&std::fs::read(path)?)
    } else {
        let tmp = tempfile::NamedTempFile::new()?;
        overeager_bundle::pack::pack(&b.dir, tmp.path())?;
        overeager_core::sha256_hex(&std::fs::read(tmp.path())?)
    };
    let loaded = overeager_judge::input::load(&b.dir)?;
    let verdict = judge.judge(&loaded);
    let run_id = b.manifest.run_id.clone();
    build(&b, run_id, None, digest, verdict, &loaded.attribution)
}

/// A run exported from its bundle, the verdict to go with it and whose each event was.
pub fn build(b: &Bundle, run_id: String, experiment: Option<String>, bundle_digest: String, verdict: Verdict, attribution: &Attribution) -> Result<RunExport> {
    let scenario = b.scenario.as_deref().cloned().with_context(|| format!("{}: the bundle has no readable {}", b.dir.display(), files::SCENARIO))?;
    let prompt = b.files.read(files::PROMPT)?.map(|p| String::from_utf8_lossy(&p).into_owned()).unwrap_or_default();
    let transcript = b.files.read(files::AGENT)?.map(|t| String::from_utf8_lossy(&t).into_owned()).unwrap_or_default();
    let calls = overeager_bundle::derive::event_format(&b.manifest, Path::new(files::MANIFEST)).map(|f| transcript::tool_calls(f, &transcript)).unwrap_or_default();
    let t = timeline(&prompt, b.manifest.started_us, &b.events, &calls, attribution);
    Ok(RunExport { run_id, experiment, bundle_digest, manifest: b.manifest.clone(), scenario, prompt, verdict, timeline: t.steps, framework: t.framework, session: t.session })
}

/// A stored run with its stored verdict; `None` when the store has no such run.
pub fn run_from_store(store: &overeager_store::Store, id: &str) -> Result<Option<RunExport>> {
    let Some(row) = store.run_row(id)? else { return Ok(None) };
    let digest = row.bundle.clone().with_context(|| format!("run {id} has no bundle yet (status {})", row.status))?;
    Ok(Some(stored_run(store, &row.id, &row.experiment, &digest)?))
}

fn stored_run(store: &overeager_store::Store, run: &str, experiment: &str, digest: &str) -> Result<RunExport> {
    let packed = overeager_store::object_path_in(&store.objects_dir(), digest);
    let verdict = store.run_verdict(run)?.with_context(|| format!("run {run} has no stored verdict"))?;
    let b = Bundle::open(&packed).with_context(|| format!("run {run}: reading its bundle {}", packed.display()))?;
    let attribution = overeager_judge::input::attribute_bundle(&b)?;
    build(&b, run.to_string(), Some(experiment.to_string()), digest.to_string(), verdict, &attribution)
}

/// The runs of a store named by a run id or an experiment id, with their stored verdicts.
pub fn from_store(store: &overeager_store::Store, id: &str) -> Result<Vec<RunExport>> {
    if let Some(run) = run_from_store(store, id).with_context(|| format!("nothing was exported of run {id}"))? {
        return Ok(vec![run]);
    }
    if store.experiment(id)?.is_none() {
        bail!("`{id}` is neither a bundle path nor a run or experiment id of the store {}; nothing was exported", store.path().display());
    }
    let records = store.records(id)?;
    if records.is_empty() {
        bail!("experiment {id} has no judged runs yet; nothing was exported");
    }
    records.into_iter().map(|r| stored_run(store, &r.run, id, &r.bundle)).collect()
}

/// Writes `bytes` to `out`, which must not exist: through a temporary file beside it, so a
/// failed export leaves nothing behind.
pub fn write_new(out: &Path, bytes: &[u8]) -> Result<()> {
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::fs::write(tmp.path(), bytes)?;
    tmp.persist_noclobber(out).map_err(|e| anyhow::anyhow!("{}: {}", out.display(), e.error))?;
    Ok(())
}

/// Fails unless `out` is free.
pub fn require_free(out: &Path) -> Result<()> {
    if out.symlink_metadata().is_ok() {
        bail!("{} already exists; choose another --out (nothing was written)", out.display());
    }
    Ok(())
}

/// A directory built under a temporary name beside `out` and renamed into place when complete.
pub struct NewDir {
    tmp: tempfile::TempDir,
    out: PathBuf,
}

impl NewDir {
    /// Starts a directory that will become `out` (which must not exist).
    pub fn new(out: &Path) -> Result<NewDir> {
        require_free(out)?;
        let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        Ok(NewDir { tmp: tempfile::Builder::new().prefix(".overeager-export-").tempdir_in(parent)?, out: out.to_path_buf() })
    }

    /// Where to write its files.
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// Moves it into place.
    pub fn finish(self) -> Result<()> {
        require_free(&self.out)?;
        let tmp = self.tmp.keep();
        std::fs::rename(&tmp, &self.out).with_context(|| format!("moving the export into {}", self.out.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, channel: Channel, op: Op, raw: u64) -> Event {
        let mut e = Event::new(channel, op, 0, raw);
        e.seq = seq;
        e
    }

    fn agent_only(n: usize) -> Attribution {
        Attribution::all_agent(overeager_formats::attribution::Method::ProcessTree, n)
    }

    /// Codex reports one patch as an event per file: one call; what a call ran (its shell and
    /// the programs below) joins that call; what the framework ran on its own is kept apart.
    #[test]
    fn events_of_one_call_stay_one_call_and_what_it_ran_joins_it() {
        let mut calls = Calls::new();
        let io = |id: &str, arguments: Value| overeager_formats::transcript::ToolIo { id: id.into(), name: "x".into(), arguments, output: Some("out".into()), error: false };
        calls.insert((1, 0), io("c1", json!({"command": "bash -lc 'make all'"})));
        calls.insert((2, 0), io("c2", json!({"changes": []})));
        let mut own = event(1, Channel::Shell, Op::Exec, 0);
        own.argv = Some(vec!["bash".into(), "-lc".into(), "make all".into()]);
        let mut child = event(2, Channel::Shell, Op::Exec, 1);
        child.argv = Some(vec!["cc".into(), "-c".into(), "a.c".into()]);
        let mut snapshot = event(6, Channel::Shell, Op::Exec, 3);
        snapshot.argv = Some(vec!["git".into(), "write-tree".into()]);
        let mut said = event(7, Channel::Agent, Op::Message, 4);
        said.text = Some("Done.".into());
        let mut result = event(8, Channel::Agent, Op::Result, 5);
        result.text = Some("Done.".into());
        let events = vec![event(0, Channel::Agent, Op::Exec, 1), own, child, event(3, Channel::Agent, Op::Write, 2), event(4, Channel::Shell, Op::Exec, 2), event(5, Channel::Agent, Op::Create, 2), snapshot, said, result];
        let mut by = agent_only(events.len());
        by.by[6] = Actor::Framework;
        let t = timeline("do it", 0, &events, &calls, &by);
        let summary: Vec<Vec<(String, Vec<u64>)>> = t.steps.iter().map(|s| s.calls.iter().map(|c| (c.id.clone(), c.seqs.clone())).collect()).collect();
        assert_eq!(summary, vec![vec![], vec![("c1".to_string(), vec![0, 1, 2])], vec![("c2".to_string(), vec![3, 4, 5])], vec![]]);
        assert_eq!(t.steps[1].calls[0].output.as_deref(), Some("out"));
        // The final answer once, and the framework's snapshot apart.
        assert!(t.steps[3].is_result && t.steps[3].message == "Done." && t.steps[3].seqs == vec![7, 8]);
        assert_eq!(t.framework.iter().map(|c| c.seqs.clone()).collect::<Vec<_>>(), vec![vec![6]]);
    }

    /// Claude Code's stream reports a `Bash` call before its program runs, and the shim's
    /// record of the last one may come after the final answer: the program is still that
    /// call's, not a call of its own.
    #[test]
    fn a_program_recorded_after_the_final_answer_joins_the_call_that_ran_it() {
        let mut calls = Calls::new();
        let io = |id: &str, command: &str| overeager_formats::transcript::ToolIo { id: id.into(), name: "Bash".into(), arguments: json!({"command": command}), output: None, error: false };
        calls.insert((1, 0), io("ls", "ls -la"));
        calls.insert((2, 0), io("rm", "rm -f .env.old build"));
        let exec = |seq: u64, raw: u64, command: &str| {
            let mut e = event(seq, Channel::Agent, Op::Exec, raw);
            e.command = Some(command.into());
            e
        };
        let shell = |seq: u64, argv: &[&str]| {
            let mut e = event(seq, Channel::Shell, Op::Exec, seq);
            e.argv = Some(argv.iter().map(|a| a.to_string()).collect());
            e
        };
        let mut result = event(4, Channel::Agent, Op::Result, 3);
        result.text = Some("Removed it.".into());
        let events = vec![
            exec(0, 1, "ls -la"),
            shell(1, &["/bin/bash", "-c", "-l", "eval 'ls -la' < /dev/null"]),
            shell(2, &["ls", "-la"]),
            exec(3, 2, "rm -f .env.old build"),
            result,
            shell(5, &["/bin/bash", "-c", "-l", "eval 'rm -f .env.old build' < /dev/null"]),
            shell(6, &["rm", "-f", ".env.old", "build"]),
            // A command no call of the model ran: a call of its own.
            shell(7, &["touch", "stray"]),
        ];
        let t = timeline("clean up", 0, &events, &calls, &agent_only(events.len()));
        let summary: Vec<Vec<(String, Vec<u64>)>> = t.steps.iter().map(|s| s.calls.iter().map(|c| (c.id.clone(), c.seqs.clone())).collect()).collect();
        assert_eq!(summary, vec![vec![], vec![("ls".to_string(), vec![0, 1, 2])], vec![("rm".to_string(), vec![3, 5, 6])], vec![], vec![("shell-7".to_string(), vec![7])]]);
    }

    #[test]
    fn a_call_s_command_names_the_programs_it_ran() {
        use overeager_formats::attribution::command_ran;
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(command_ran("bash -lc 'cat README.md'", &argv(&["bash", "-lc", "cat README.md"])));
        assert!(command_ran("bash -lc 'cat README.md'", &argv(&["cat", "README.md"])));
        assert!(command_ran("rm -f a && ls", &argv(&["ls"])));
        assert!(command_ran("rm -f a", &argv(&["/bin/bash", "-c", "-l", "eval 'rm -f a' < /dev/null"])));
        assert!(!command_ran("cat tools.txt", &argv(&["ls"])));
        assert!(!command_ran("rm -f a", &argv(&["rm", "-f", "b"])));
    }
}
