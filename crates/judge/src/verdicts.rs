//! Verdicts for a terminal: a table of them, and the ones two judges (usually two builds of std)
//! disagree on. Two verdicts disagree when their outcome, fired traps or the task's success
//! differ; the module digests they name differ by construction and are shown, not compared.

use std::path::PathBuf;

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use overeager_core::{Outcome, Verdict};

use crate::{Judge, STD_ID};

/// What a comparison looks at in one judge's answer for a bundle.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Judged {
    /// A verdict: its outcome, fired traps, success and the std digest that judged it.
    Verdict { outcome: Outcome, traps: Vec<String>, success: Option<bool>, std: Option<String> },
    /// The bundle could not be judged.
    Error { error: String },
}

impl Judged {
    fn of(v: &Result<Verdict, String>) -> Judged {
        match v {
            Ok(v) => Judged::Verdict { outcome: v.outcome, traps: v.traps.iter().map(|t| t.id.clone()).collect(), success: v.success, std: v.modules.get(STD_ID).cloned() },
            Err(e) => Judged::Error { error: e.clone() },
        }
    }

    /// The same call, whatever module judged it.
    fn same_call(&self, other: &Judged) -> bool {
        match (self, other) {
            (Judged::Verdict { outcome: a, traps: ta, success: sa, .. }, Judged::Verdict { outcome: b, traps: tb, success: sb, .. }) => (a, ta, sa) == (b, tb, sb),
            (a, b) => a == b,
        }
    }

    fn text(&self) -> String {
        match self {
            Judged::Verdict { outcome, traps, .. } => format!("{} [{}]", outcome.as_str(), traps.join(", ")),
            Judged::Error { error } => format!("unreadable: {error}"),
        }
    }
}

/// A bundle the two judges call differently.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Change {
    pub bundle: String,
    pub scenario: String,
    pub old: Judged,
    pub new: Judged,
}

/// Judges `paths` with `old` then `new` (`jobs` at a time; `on_each` after every bundle, twice
/// per bundle in all) and returns the bundles whose calls differ, in the order of `paths`.
pub fn compare(old: &Judge, new: &Judge, paths: &[PathBuf], jobs: usize, require_modules: bool, on_each: &(dyn Fn() + Sync)) -> anyhow::Result<Vec<Change>> {
    let before = old.judge_all(paths, jobs, require_modules, on_each)?;
    let after = new.judge_all(paths, jobs, require_modules, on_each)?;
    let mut changed = Vec::new();
    for ((p, a), b) in paths.iter().zip(&before).zip(&after) {
        let (ja, jb) = (Judged::of(a), Judged::of(b));
        if !ja.same_call(&jb) {
            let scenario = a.as_ref().or(b.as_ref()).map(|v| v.scenario.clone()).unwrap_or_default();
            changed.push(Change { bundle: p.display().to_string(), scenario, old: ja, new: jb });
        }
    }
    Ok(changed)
}

/// The changes as a table: bundle, scenario, and each side's outcome with its fired traps.
pub fn changes_table(changes: &[Change]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(["bundle", "scenario", "old", "new"]);
    for c in changes {
        t.add_row([c.bundle.clone(), c.scenario.clone(), c.old.text(), c.new.text()]);
    }
    t
}

/// A short text for a verdict's fired traps: `id (severity), …`, or `-`.
pub fn traps_text(v: &Verdict) -> String {
    if v.traps.is_empty() {
        return "-".into();
    }
    v.traps.iter().map(|t| format!("{} ({})", t.id, t.severity)).collect::<Vec<_>>().join(", ")
}

/// `yes`, `no` or `?`.
pub fn tri(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "?",
    }
}

/// The verdicts of `paths` as a table, a row each, an unreadable bundle with its reason.
pub fn table(paths: &[PathBuf], results: &[Result<Verdict, String>]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(["bundle", "scenario", "agent", "variant", "overeager", "traps fired", "severity", "success", "errors"]);
    for (p, r) in paths.iter().zip(results) {
        match r {
            Ok(v) => {
                let outcome = match v.outcome {
                    Outcome::Overeager => "YES",
                    Outcome::Clean => "no",
                    Outcome::Incomplete => "INCOMPLETE",
                };
                t.add_row([v.bundle.clone(), v.scenario.clone(), v.agent.clone(), v.variant.to_string(), outcome.into(), traps_text(v), v.severity_total.to_string(), tri(v.success).into(), v.errors.len().to_string()]);
            }
            Err(e) => {
                t.add_row([p.display().to_string(), "unreadable".into(), e.chars().take(100).collect()]);
            }
        }
    }
    t
}
