//! Runs as ATIF trajectories (Agent Trajectory Interchange Format, v1.7): the format of
//! Harbor / Terminal-Bench trial directories (`agent/trajectory.json`).
//!
//! The prompt is the user step; each answer of the model is an agent step with its tool calls
//! and their observations (what a call ran is listed with it); a command no call of the model
//! accounts for is an extra tool call whose `extra` says so; what the agent framework ran on
//! its own, the verdict, scenario, variant, cell and bundle digest are under the trajectory's
//! `extra`.

use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};

use super::export::{NewDir, RunExport, Source, iso8601, write_new};

/// The ATIF version written.
pub const SCHEMA_VERSION: &str = "ATIF-v1.7";

/// One run as an ATIF trajectory.
pub fn trajectory(run: &RunExport) -> Value {
    let agent = &run.manifest.agent;
    let cell = agent.cell().ok();
    let (framework, policy) = match &cell {
        Some(c) => (c.name(), c.policy()),
        None => (agent.framework.as_str(), None),
    };
    let steps: Vec<Value> = run
        .timeline
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut step = json!({
                "step_id": i + 1,
                "timestamp": iso8601(s.t_us),
                "source": match s.source { Source::User => "user", Source::Agent => "agent" },
                "message": s.message,
            });
            let mut extra = serde_json::Map::new();
            if !s.seqs.is_empty() {
                extra.insert("events".into(), json!(s.seqs));
            }
            if s.is_result {
                extra.insert("final_result".into(), json!(true));
            }
            if let Some(u) = &s.unknown {
                extra.insert("unrecognized".into(), json!(u));
            }
            if s.source == Source::Agent {
                step["model_name"] = json!(agent.model);
                if !s.calls.is_empty() {
                    step["tool_calls"] = s
                        .calls
                        .iter()
                        .map(|c| {
                            let mut ex = json!({"events": c.seqs, "observed_by": c.observed_by.as_str()});
                            if c.denied {
                                ex["denied"] = json!(true);
                            }
                            json!({"tool_call_id": c.id, "function_name": c.name, "arguments": c.arguments, "extra": ex})
                        })
                        .collect();
                    let results: Vec<Value> = s
                        .calls
                        .iter()
                        .filter(|c| c.output.is_some() || c.error)
                        .map(|c| json!({"source_call_id": c.id, "content": c.output.clone().unwrap_or_default(), "extra": {"error": c.error}}))
                        .collect();
                    if !results.is_empty() {
                        step["observation"] = json!({ "results": results });
                    }
                }
            }
            if !extra.is_empty() {
                step["extra"] = Value::Object(extra);
            }
            step
        })
        .collect();
    json!({
        "schema_version": SCHEMA_VERSION,
        "session_id": run.run_id,
        // The agent's name (its version beside it), and the permission policy it ran under.
        "agent": {"name": framework, "version": agent.version, "model_name": agent.model, "extra": {"id": agent.id, "policy": policy, "played_by": agent.played_by(), "model_played_by": agent.played_by().label()}},
        "steps": steps,
        "notes": format!("overeager run {} of scenario {}: {}", run.run_id, run.scenario.id, run.explanation()),
        "final_metrics": {"total_steps": run.timeline.len()},
        "extra": {"overeager": run.metadata()},
    })
}

/// One run's trajectory as a file's bytes.
pub fn bytes(run: &RunExport) -> Vec<u8> {
    pretty(&trajectory(run))
}

/// Writes one run's trajectory to `out` (a new file).
pub fn write_file(run: &RunExport, out: &Path) -> Result<()> {
    write_new(out, &bytes(run))
}

/// Writes one Harbor-style trial directory per run under `out` (a new directory): the
/// trajectory in `<run>/agent/trajectory.json`, and, for a decided verdict, the reward in
/// `<run>/verifier/reward.txt`: 1 when the run stayed in scope, 0 when a trap fired.
pub fn write_trials(runs: &[RunExport], out: &Path) -> Result<()> {
    let dir = NewDir::new(out)?;
    for run in runs {
        // A submitted bundle's run id is the submitter's text: never a path of its own.
        let trial = dir.path().join(super::inspect::sample_id(&run.run_id));
        std::fs::create_dir_all(trial.join("agent"))?;
        std::fs::write(trial.join("agent/trajectory.json"), bytes(run))?;
        let reward = match run.verdict.outcome {
            overeager_core::Outcome::Overeager => Some("0"),
            overeager_core::Outcome::Clean => Some("1"),
            overeager_core::Outcome::Incomplete => None,
        };
        if let Some(r) = reward {
            std::fs::create_dir_all(trial.join("verifier"))?;
            std::fs::write(trial.join("verifier/reward.txt"), format!("{r}\n"))?;
        }
    }
    dir.finish()
}

fn pretty(v: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(v).expect("JSON values serialize");
    bytes.push(b'\n');
    bytes
}

