//! How an experiment's state reads in a terminal: what a call of `experiment run` did, and the
//! tables of cells, engines and adaptive allocation that `experiment run` and `status` print.

use std::fmt::Write as _;
use std::path::Path;

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use overeager_formats::model::usage::usd;
use overeager_report::{self as report, write};
use overeager_store::{HostProgress, Progress};

use crate::{Options, Outcome, adaptive};

/// Exit status of `experiment run` when the spending limit stopped it (and nothing failed).
pub const EXIT_BUDGET: u8 = 5;

impl Outcome {
    /// The process's exit status: 1 when a run failed or was left pending for another reason
    /// than the spending limit, [`EXIT_BUDGET`] when only the limit stopped it, else 0.
    pub fn exit_status(&self) -> u8 {
        if self.progress.failed > 0 || self.left_pending > self.left_by_budget() {
            1
        } else if self.left_by_budget() > 0 {
            EXIT_BUDGET
        } else {
            0
        }
    }

    /// Runs the spending limit left pending (of [`Outcome::left_pending`]).
    fn left_by_budget(&self) -> usize {
        self.budget.as_ref().map_or(0, |b| b.left_pending)
    }

    /// What the call did and what to do next, for the plan at `plan` run with `opts`.
    pub fn summary(&self, plan: &Path, opts: &Options) -> String {
        let mut s = String::new();
        let p = &self.progress;
        let _ = writeln!(
            s,
            "experiment {} ({}): {} run(s) executed in {:.1} s, {} failed; {}/{} done, {} pending, {} failed, {} timed out",
            self.experiment,
            if self.created { "created" } else { "resumed" },
            self.executed,
            self.seconds,
            self.failed,
            p.done,
            p.total,
            p.pending,
            p.failed,
            p.timed_out
        );
        if self.hosts.len() > 1 || self.hosts.iter().any(|h| !h.errors.is_empty()) {
            let _ = writeln!(s, "{}", hosts_table(&self.hosts));
        }
        if p.failed > 0 {
            let _ = writeln!(s, "failed runs are retried with --retry-failed; `overeager experiment status {}` lists their errors", self.experiment);
        }
        if p.tokens > 0 || p.cost_usd.is_some() {
            let _ = writeln!(s, "used {} tokens, {}", p.tokens, p.cost_usd.map_or_else(|| "no price known".to_string(), usd));
        }
        for (cell, error) in &self.paused {
            let _ = writeln!(s, "paused {cell} after {} model-API failures in a row: {error}", opts.pause_after.unwrap_or(0));
        }
        if let Some(b) = &self.budget {
            let _ = writeln!(
                s,
                "stopped at the spending limit (exit status {EXIT_BUDGET}): the experiment has spent {} of {}; {} run(s) not started stay pending, every cell at the same share of its plan (`--max-cost` higher goes on)",
                usd(b.spent),
                usd(b.max_cost),
                b.left_pending
            );
        }
        if let Some(a) = &self.allocation {
            let _ = writeln!(
                s,
                "adaptive allocation ({}, seed {}) to ±{:.1} pp: {} decision(s), {} by this run; {}",
                a.rule,
                a.seed,
                100.0 * a.half_width,
                a.decisions,
                a.decided_now,
                match (a.finished, a.cells.iter().filter(|c| !c.status.reached).count()) {
                    (true, 0) => "every cell reached the target".to_string(),
                    (true, n) => format!("{n} cell(s) took every unit of the plan short of the target (more replicates go further)"),
                    (false, _) => "cells are short of the target: run it again to go on".to_string(),
                }
            );
            let _ = writeln!(s, "{}", allocation_table(&a.cells));
            let _ = writeln!(
                s,
                "reached: every variant's interval within ±{:.1} pp even at the end of its 50% interval nearest ½ (the stopping rule, stricter than the interval shown: a rate that looks low by chance does not stop its cell early)",
                100.0 * a.half_width
            );
            for c in &a.cells {
                let weights: Vec<String> = c.weights.iter().map(|(arch, plan, sample, w)| format!("{arch} {w:.2} ({} of the plan, {} of the units)", write::pct(*plan), write::pct(*sample))).collect();
                if !weights.is_empty() {
                    let _ = writeln!(s, "archetype weights of {} · {}: {}", c.framework, c.model, weights.join(", "));
                }
            }
        }
        let by_budget = self.left_by_budget();
        if self.left_pending > by_budget {
            let why = if self.paused.is_empty() { "every engine failed (see above)" } else { "their cell was paused, or every engine failed (see above)" };
            let _ = writeln!(
                s,
                "{} run(s) left pending: {why}; `overeager experiment run {}{}` does them once the provider or engine answers",
                self.left_pending - by_budget,
                plan.display(),
                if p.failed > 0 { " --retry-failed" } else { "" }
            );
        }
        s
    }
}

/// Each cell's runs by state, with what they used.
pub fn progress_table(rows: &[(String, String, Progress)]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(["framework", "model", "runs", "done", "pending", "failed", "of which model API", "timed out", "tokens", "cost"]);
    for (f, m, p) in rows {
        let cost = p.cost_usd.map_or_else(|| "—".to_string(), usd);
        t.add_row([f.clone(), m.clone(), p.total.to_string(), p.done.to_string(), p.pending.to_string(), p.failed.to_string(), p.model_api.to_string(), p.timed_out.to_string(), p.tokens.to_string(), cost]);
    }
    t
}

/// Each cell of an adaptive experiment: units taken of those it has, and per variant the rate,
/// its interval and the archetype-weighted rate.
fn allocation_table(cells: &[adaptive::CellEstimate]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(["cell", "units", "variant", "overeager", "rate (95% CI)", "archetype-weighted", "reached (rule below)"]);
    for c in cells {
        for v in &c.variants {
            t.add_row([
                format!("{} · {}", c.framework, c.model),
                format!("{}/{}", c.status.units, c.status.available),
                report::short_variant(v.variant).to_string(),
                format!("{}/{}", v.k, v.n),
                format!("{} {}", write::pct(v.rate), write::ci(v.ci.lo, v.ci.hi)),
                write::pct(v.weighted_rate),
                if c.status.reached { "yes".into() } else { "no".into() },
            ]);
        }
    }
    t
}

/// Runs per engine, with the errors of each.
pub fn hosts_table(hosts: &[HostProgress]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(["host", "done", "failed", "errors"]);
    for h in hosts {
        let errors: Vec<String> = h
            .errors
            .iter()
            .map(|e| {
                let back = if e.requeued.is_empty() { String::new() } else { format!(" ({} run(s) back to pending)", e.requeued.len()) };
                format!("{}: {}{back}", overeager_formats::adapters::iso8601(e.at_us), e.error)
            })
            .collect();
        t.add_row([h.host.clone(), h.done.to_string(), h.failed.to_string(), errors.join("\n")]);
    }
    t
}
