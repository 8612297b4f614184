//! Runs as Inspect eval logs (log format version 2), readable by `inspect view`,
//! `inspect log dump` and `inspect_ai.log.read_eval_log`.
//!
//! One log holds the runs of one experiment cell (or one run), one sample per run: the
//! conversation as `messages`; `model`, `tool`, `info` and `score` events; the verdict as the
//! sample's `overeager` score (`I`: a trap fired, `C`: stayed in scope, `N`: no verdict) with
//! an explanation naming the traps. A `.eval` log is a ZIP (deflate) of `header.json`,
//! `samples/<id>_epoch_1.json` and `summaries.json`; a `.json` log is the same object with the
//! samples inline.

use std::io::Write;
use std::path::Path;

use anyhow::{Result, bail};
use overeager_core::Outcome;
use overeager_core::event::Channel;
use serde_json::{Value, json};
use sha2::Digest;

use super::export::{Call, NewDir, RunExport, Source, Step, iso8601, write_new};

/// The log format version written.
pub const LOG_VERSION: u32 = 2;
/// The score's name, and the scorer's.
pub const SCORER: &str = "overeager";

/// A log's file type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// A ZIP archive.
    Eval,
    /// One JSON document.
    Json,
}

impl Encoding {
    /// The encoding an output file's extension asks for.
    pub fn of(path: &Path) -> Result<Encoding> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("eval") => Ok(Encoding::Eval),
            Some("json") => Ok(Encoding::Json),
            _ => bail!("{}: an Inspect log is a `.eval` or `.json` file; name --out accordingly", path.display()),
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Encoding::Eval => "eval",
            Encoding::Json => "json",
        }
    }
}

/// The score value of a verdict.
fn score_value(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Overeager => "I",
        Outcome::Clean => "C",
        Outcome::Incomplete => "N",
    }
}

/// A short stable id from parts (Inspect ids are free-form strings).
fn stable_id(parts: &[&str]) -> String {
    let mut h = sha2::Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..11])
}

/// Inspect's model name for a run's agent: `framework/model`, and what played the model when
/// that was no real model or was bridged (`…/scripted-model (stand-in provider)`), so that no
/// viewer of the log takes it for a real model's.
fn model_name(run: &RunExport) -> String {
    let played = run.manifest.agent.played_by();
    let mark = if played.real_model() && !played.bridged { String::new() } else { format!(" ({})", played.label()) };
    format!("{}/{}{mark}", run.manifest.agent.framework, run.manifest.agent.model)
}

fn seconds_since(t_us: u64, start_us: u64) -> f64 {
    t_us.saturating_sub(start_us) as f64 / 1e6
}

fn tool_error(c: &Call) -> Value {
    json!({"type": if c.denied { "approval" } else { "unknown" }, "message": c.output.clone().unwrap_or_else(|| "the tool reported an error".into())})
}

fn assistant(step: &Step, model: &str) -> Value {
    // The bundle's events this message stands for, as a reader's way back to them.
    let seqs: Vec<u64> = step.seqs.iter().copied().chain(step.calls.iter().filter(|c| c.observed_by == Channel::Agent).flat_map(|c| c.seqs.iter().copied())).collect();
    let mut m = json!({"role": "assistant", "content": step.message, "source": "generate", "model": model, "metadata": {"events": seqs}});
    let calls: Vec<Value> = step.calls.iter().filter(|c| c.observed_by == Channel::Agent).map(|c| json!({"id": c.id, "function": c.name, "arguments": c.arguments, "type": "function"})).collect();
    if !calls.is_empty() {
        m["tool_calls"] = Value::Array(calls);
    }
    m
}

/// One run as a sample, and its summary for `summaries.json`.
pub fn sample(run: &RunExport) -> (Value, Value) {
    let model = model_name(run);
    let start = run.manifest.started_us;
    // Every event's time fields: when (never before the run started) and seconds into it.
    let event = |kind: &str, t: u64, body: Value| {
        let mut e = json!({"event": kind, "timestamp": iso8601(t.max(start)), "working_start": seconds_since(t, start)});
        e.as_object_mut().expect("an object").extend(body.as_object().expect("an object").clone());
        e
    };
    let info = |t: u64, data: Value| event("info", t, json!({"source": SCORER, "data": data}));
    let mut messages: Vec<Value> = Vec::new();
    let mut events: Vec<Value> = Vec::new();
    // Messages since the last model turn: the input of the next one.
    let mut pending: Vec<Value> = Vec::new();
    if let Some(session) = &run.session {
        events.push(info(run.manifest.started_us, json!({"session": session.note, "events": session.seqs})));
    }
    for step in &run.timeline {
        match step.source {
            Source::User => {
                let m = json!({"role": "user", "content": step.message, "source": "input"});
                messages.push(m.clone());
                pending.push(m);
            }
            Source::Agent => {
                if let Some(u) = &step.unknown {
                    events.push(info(step.t_us, json!({"unrecognized": u, "events": step.seqs})));
                    continue;
                }
                let agent_calls = step.calls.iter().any(|c| c.observed_by == Channel::Agent);
                if !step.message.is_empty() || agent_calls {
                    let m = assistant(step, &model);
                    events.push(event(
                        "model",
                        step.t_us,
                        json!({
                            "model": model, "input": std::mem::take(&mut pending), "tools": [], "tool_choice": "auto", "config": {},
                            "output": {"model": model, "choices": [{"message": m, "stop_reason": if agent_calls { "tool_calls" } else { "stop" }}], "completion": step.message},
                        }),
                    ));
                    messages.push(m);
                }
                let mut shell_only = Vec::new();
                for c in &step.calls {
                    if c.observed_by == Channel::Shell {
                        shell_only.push(c);
                        continue;
                    }
                    let mut tool = event("tool", step.t_us, json!({"type": "function", "id": c.id, "function": c.name, "arguments": c.arguments, "result": c.output.clone().unwrap_or_default()}));
                    let mut msg = json!({"role": "tool", "content": c.output.clone().unwrap_or_default(), "tool_call_id": c.id, "function": c.name, "metadata": {"events": c.seqs}});
                    if c.error {
                        tool["error"] = tool_error(c);
                        msg["error"] = tool_error(c);
                    }
                    events.push(tool);
                    messages.push(msg.clone());
                    pending.push(msg);
                }
                // The commands of this turn that no tool call shows, as one note.
                if !shell_only.is_empty() {
                    let commands: Vec<Value> = shell_only.iter().map(|c| json!({"argv": c.arguments["argv"], "cwd": c.arguments["cwd"], "result": c.output})).collect();
                    let seqs: Vec<u64> = shell_only.iter().flat_map(|c| c.seqs.iter().copied()).collect();
                    events.push(info(step.t_us, json!({"observed_by": "shell", "note": "commands only the shell shim saw", "commands": commands, "events": seqs})));
                }
            }
        }
    }
    let end = run.manifest.ended_us.max(start);
    for t in &run.verdict.traps {
        events.push(info(end, json!({"finding": "trap fired", "trap": t.id, "severity": t.severity, "predicate": t.predicate, "evidence": t.evidence, "note": t.note})));
    }
    for e in &run.verdict.errors {
        events.push(info(end, json!({"finding": "check without an answer", "check": e})));
    }
    let metadata = run.metadata();
    let score = json!({"value": score_value(run.verdict.outcome), "explanation": run.explanation(), "metadata": metadata["verdict"]});
    events.push(event("score", end, json!({"score": score, "target": "", "intermediate": false, "scorer": SCORER})));
    let last = messages.iter().rev().find(|m| m["role"] == "assistant").cloned();
    let total = seconds_since(end, start);
    let mut sample = json!({
        "id": sample_id(&run.run_id), "epoch": 1, "input": run.prompt, "target": "",
        "messages": messages,
        "scores": {SCORER: score},
        "metadata": metadata,
        "events": events,
        "started_at": iso8601(start), "completed_at": iso8601(end),
        "total_time": total, "working_time": total,
    });
    if let Some(m) = last {
        sample["output"] = json!({"model": model, "choices": [{"message": m, "stop_reason": "stop"}], "completion": m["content"]});
    }
    let summary = json!({
        "id": sample_id(&run.run_id), "epoch": 1, "input": run.prompt, "target": "",
        "scores": {SCORER: {"value": score["value"], "explanation": score["explanation"]}},
        "metadata": {"scenario": run.scenario.id, "variant": run.manifest.variant, "cell": run.cell(), "outcome": run.verdict.outcome},
        "started_at": iso8601(start), "completed_at": iso8601(end), "total_time": total, "working_time": total,
        "completed": true, "message_count": sample["messages"].as_array().map_or(0, Vec::len),
    });
    (sample, summary)
}

/// A run id as a sample id, which a `.eval` log also uses in a member's file name
/// (`samples/<id>_epoch_1.json`): a submitted bundle's run id is the submitter's text, so
/// anything but letters, digits, `.`, `_` and `-` becomes `_`, and a leading `.` is kept from
/// making a hidden or relative name.
pub fn sample_id(run_id: &str) -> String {
    let id: String = run_id.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect();
    if id.is_empty() || id.starts_with('.') { format!("run-{id}") } else { id }
}

/// The log header (the log without its samples) of these runs, under task `task`.
pub fn header(task: &str, runs: &[RunExport]) -> Value {
    let ids: Vec<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    let first = runs.iter().map(|r| r.manifest.started_us).min().unwrap_or(0);
    let last = runs.iter().map(|r| r.manifest.ended_us).max().unwrap_or(first);
    let decided: Vec<&RunExport> = runs.iter().filter(|r| r.verdict.outcome != Outcome::Incomplete).collect();
    let overeager = decided.iter().filter(|r| r.verdict.outcome == Outcome::Overeager).count();
    let rate = |k: usize| if decided.is_empty() { 0.0 } else { k as f64 / decided.len() as f64 };
    let models: std::collections::BTreeSet<String> = runs.iter().map(model_name).collect();
    let model = models.into_iter().collect::<Vec<_>>().join(", ");
    let mut key = vec![task];
    key.extend(ids.iter().copied());
    let id = stable_id(&key);
    json!({
        "version": LOG_VERSION,
        "status": "success",
        "eval": {
            "eval_id": id, "run_id": stable_id(&[&id, "run"]), "task_id": stable_id(&[task]),
            "created": iso8601(first), "task": task, "task_version": 0,
            "dataset": {"name": "overeager", "samples": runs.len(), "sample_ids": ids, "shuffled": false},
            "model": model, "config": {"epochs": 1},
            "packages": {"overeager": env!("CARGO_PKG_VERSION")},
            "metadata": {"exporter": "overeager", "cells": runs.iter().map(RunExport::cell).collect::<std::collections::BTreeSet<_>>(),
                         "played_by": runs.iter().map(|r| r.manifest.agent.played_by()).collect::<std::collections::BTreeSet<_>>()},
            "scorers": [{"name": SCORER, "options": {}, "metrics": [{"name": "overeager_rate", "options": {}}, {"name": "in_scope_rate", "options": {}}], "metadata": {}}],
        },
        "plan": {"name": "plan", "steps": [], "config": {}},
        "results": {
            "total_samples": runs.len(), "completed_samples": runs.len(),
            "scores": [{
                "name": SCORER, "scorer": SCORER, "scored_samples": decided.len(), "unscored_samples": runs.len() - decided.len(), "params": {},
                "metrics": {
                    "overeager_rate": {"name": "overeager_rate", "value": rate(overeager), "params": {}},
                    "in_scope_rate": {"name": "in_scope_rate", "value": rate(decided.len() - overeager), "params": {}},
                },
            }],
        },
        "stats": {"started_at": iso8601(first), "completed_at": iso8601(last)},
    })
}

/// A log of `runs` in `encoding`.
pub fn log_bytes(task: &str, runs: &[RunExport], encoding: Encoding) -> Result<Vec<u8>> {
    let header = header(task, runs);
    let (samples, summaries): (Vec<Value>, Vec<Value>) = runs.iter().map(sample).unzip();
    match encoding {
        Encoding::Json => {
            // The header's fields first and `samples` last: Inspect reads a log's header by
            // streaming it up to `samples`.
            let head = serde_json::to_string_pretty(&header)?;
            let head = head.trim_end().strip_suffix('}').expect("an object ends with `}`").trim_end();
            Ok(format!("{head},\n  \"samples\": {}\n}}\n", serde_json::to_string(&samples)?).into_bytes())
        }
        Encoding::Eval => {
            let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            // Fixed member times: the same runs give the same bytes.
            let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated).last_modified_time(zip::DateTime::default());
            let mut member = |name: &str, v: &Value| -> Result<()> {
                zip.start_file(name, opts)?;
                zip.write_all(&serde_json::to_vec(v)?)?;
                Ok(())
            };
            member("header.json", &header)?;
            for s in &samples {
                member(&format!("samples/{}_epoch_1.json", s["id"].as_str().unwrap_or_default()), s)?;
            }
            member("summaries.json", &Value::Array(summaries))?;
            Ok(zip.finish()?.into_inner())
        }
    }
}

/// The file name Inspect's viewer lists a log under: its start time, task and id.
pub fn file_name(task: &str, runs: &[RunExport], encoding: Encoding) -> String {
    let h = header(task, runs);
    let created = h["eval"]["created"].as_str().unwrap_or_default().split('.').next().unwrap_or_default().replace(':', "-");
    let slug: String = task.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
    format!("{created}+00-00_{slug}_{}.{}", h["eval"]["eval_id"].as_str().unwrap_or_default(), encoding.extension())
}

/// Writes one log of `runs` to `out` (a new file; its extension picks the encoding).
pub fn write_file(task: &str, runs: &[RunExport], out: &Path) -> Result<()> {
    let encoding = Encoding::of(out)?;
    write_new(out, &log_bytes(task, runs, encoding)?)
}

/// Writes logs into a new directory `out`: one per experiment cell, or one per run.
pub fn write_dir(experiment: &str, runs: Vec<RunExport>, per_run: bool, encoding: Encoding, out: &Path) -> Result<Vec<String>> {
    let mut groups: std::collections::BTreeMap<String, Vec<RunExport>> = std::collections::BTreeMap::new();
    for r in runs {
        let key = if per_run { r.run_id.clone() } else { r.cell() };
        groups.entry(key).or_default().push(r);
    }
    let dir = NewDir::new(out)?;
    let mut names = Vec::new();
    for (key, runs) in &groups {
        let task = format!("overeager/{experiment}/{key}");
        let name = file_name(&task, runs, encoding);
        std::fs::write(dir.path().join(&name), log_bytes(&task, runs, encoding)?)?;
        names.push(name);
    }
    dir.finish()?;
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::sample_id;

    #[test]
    fn a_run_id_cannot_steer_a_member_name() {
        assert_eq!(sample_id("r-20261127-ab12.3_x"), "r-20261127-ab12.3_x");
        assert_eq!(sample_id("../../etc/cron.d/x"), "run-.._.._etc_cron.d_x");
        assert_eq!(sample_id("a/b\\c"), "a_b_c");
        assert_eq!(sample_id(""), "run-");
        assert!(!sample_id("\u{202e}evil").contains('\u{202e}'));
    }
}
