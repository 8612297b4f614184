//! A bundle for a terminal (`overeager run` and `bundle show`): what ran and how it ended, what
//! the model used, what changed in the workspace, whose each event was, and the events.

use std::fmt::Write as _;

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use overeager_core::bundle::BundleManifest;
use overeager_formats::attribution::{Attribution, Method};
use overeager_formats::model::usage::usd;

use crate::Bundle;

/// How the run ended: `timeout`, `signal N` or the exit code.
pub fn exit_text(m: &BundleManifest) -> String {
    if m.timed_out {
        "timeout".into()
    } else if let Some(s) = m.exit.signal {
        format!("signal {s}")
    } else {
        m.exit.code.map(|c| c.to_string()).unwrap_or_else(|| "?".into())
    }
}

impl Bundle {
    /// The run, its observers' counts, the model's usage and the workspace's changes, a line each.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let m = &self.manifest;
        let d = self.diff();
        let _ = writeln!(s, "bundle    {}", self.dir.display());
        if let Some(sc) = &self.scenario {
            let _ = writeln!(s, "scenario  {} — {}", sc.id, sc.title);
        }
        let _ = writeln!(s, "run       {} ({} on {}, {}, replicate {})", m.run_id, m.agent.id, m.scenario.id, m.variant, m.replicate);
        let _ = writeln!(s, "executor  {}   exit {}   {} ms", m.executor.kind, exit_text(m), m.duration_ms);
        let _ = writeln!(s, "channels  shell {}  agent {}  fswatch {}  → {} events", m.counts.shell, m.counts.agent, m.counts.fswatch, m.counts.events);
        if m.channels.model || m.counts.unknown > 0 {
            let _ = writeln!(s, "agent     {} {}: {} model requests, {} unknown agent events", m.agent.framework, m.agent.version, m.counts.model, m.counts.unknown);
        }
        if let Ok(Some(u)) = self.usage() {
            let t = u.total;
            let cost = u.cost_usd.map_or_else(|| "no price known".to_string(), usd);
            let _ = if u.counted() {
                let estimated = match u.estimated.len() {
                    0 => String::new(),
                    n => format!(" ({n} of them counted here, estimated: the server reported no usage)"),
                };
                writeln!(s, "model     {}/{}: {} tokens in ({} from cache, {} to cache), {} out over {} calls{estimated}; {cost}", u.provider, u.model, t.input + t.cache_read + t.cache_write, t.cache_read, t.cache_write, t.output, u.requests)
            } else {
                writeln!(s, "model     {}/{}: {} calls, none answered; their token usage is unknown", u.provider, u.model, u.requests)
            };
        }
        let _ = writeln!(s, "played by {}", m.agent.played_by().label());
        let list = |v: &[String]| if v.is_empty() { "-".to_string() } else { v.join(", ") };
        let _ = writeln!(s, "deleted   {}", list(&d.deleted));
        let _ = writeln!(s, "created   {}", list(&d.created));
        let _ = writeln!(s, "modified  {}", list(&d.modified));
        let modes: Vec<String> = d.mode_changed.iter().map(|c| format!("{} {:o}→{:o}", c.path, c.before, c.after)).collect();
        let _ = writeln!(s, "modes     {}", list(&modes));
        s
    }

    /// The first `max` events, a row each: who did it (by `attribution`), the channel, the
    /// operation, what it was (at most 90 characters) and its exit code.
    pub fn events_table(&self, attribution: &Attribution, max: usize) -> Table {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_header(["seq", "by", "channel", "op", "what", "exit"]);
        for e in self.events.iter().take(max) {
            let what = if let Some(argv) = &e.argv {
                argv.join(" ")
            } else if let Some(c) = &e.command {
                c.clone()
            } else if !e.paths.is_empty() {
                let p = e.paths.join(" → ");
                match &e.tool {
                    Some(tool) => format!("{tool} {p}"),
                    None => p,
                }
            } else {
                e.text.clone().or(e.tool.clone()).unwrap_or_default()
            };
            let what: String = what.chars().take(90).collect();
            t.add_row([e.seq.to_string(), attribution.of(e.seq).as_str().into(), e.channel.as_str().into(), e.op.as_str().into(), what, e.exit.map(|c| c.to_string()).unwrap_or_default()]);
        }
        t
    }
}

/// How the events were told apart, with the count of each side and the paths only the framework
/// changed.
pub fn attribution_text(attribution: &Attribution) -> String {
    let (agent, framework) = attribution.counts();
    let how = match attribution.method {
        Method::Scripted => "a scripted agent: all its own",
        Method::ProcessTree => "from the process tree and the model's turns",
        Method::Legacy => "no process chains recorded: all counted as the agent's",
    };
    let mut s = format!("Attribution ({how}): {agent} event(s) the agent's, {framework} the framework's own\n");
    if !attribution.framework_paths.is_empty() {
        let _ = writeln!(s, "Changed by the framework alone: {}", attribution.framework_paths.iter().cloned().collect::<Vec<_>>().join(", "));
    }
    s
}
