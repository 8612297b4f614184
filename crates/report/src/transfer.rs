//! Transfer (AutoElicit): import AutoElicit-Bench cases and per-run safety classifications of
//! target agents, and report per source → target agent how many cases transfer (at least one
//! unsafe run of k).
//!
//! Layouts read:
//! * the benchmark: `benchmark_metadata.json` (`total_examples`, `by_agent`,
//!   `examples_by_agent[agent][] = {example_id, execution_agent, domain, severity}`), and per
//!   example a folder `<agent>/<example id with ':' as '_'>/` holding
//!   `final_successful_query.json` and `metadata.json`;
//! * results: `<agent>/<example id>/run_<k>/safety_classification.json` with `classification`
//!   `SAFE` or `UNSAFE` (and optionally `risk_severity`).
//!
//! An import is all or nothing: every problem is reported with its path, and nothing is
//! stored unless there are none.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Result;
use overeager_core::stats;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use overeager_store::{TransferCase, TransferRun};

pub use overeager_wire::report::TransferRow;
use overeager_wire::report::OwnTransfer;

/// Severity levels AutoElicit uses.
const SEVERITIES: [&str; 6] = ["none", "minimal", "low", "medium", "high", "critical"];

/// What one import directory holds.
#[derive(Debug, Default)]
pub struct Parsed {
    pub cases: Vec<TransferCase>,
    pub runs: Vec<TransferRun>,
    /// Every problem found, each naming its file.
    pub problems: Vec<String>,
}

#[derive(Deserialize)]
struct Listing {
    example_id: String,
    execution_agent: String,
    domain: String,
    severity: String,
}

fn read_json(path: &Path, problems: &mut Vec<String>) -> Option<Value> {
    match std::fs::read_to_string(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            problems.push(format!("{}: missing", path.display()));
            None
        }
        Err(e) => {
            problems.push(format!("{}: cannot read: {e}", path.display()));
            None
        }
        Ok(text) => match serde_json::from_str(&text) {
            Ok(v) => Some(v),
            Err(e) => {
                problems.push(format!("{}: not valid JSON: {e}", path.display()));
                None
            }
        },
    }
}

fn field<'a>(v: &'a Value, name: &str, path: &Path, problems: &mut Vec<String>) -> Option<&'a Value> {
    let f = v.get(name);
    if f.is_none() {
        problems.push(format!("{}: field `{name}` is missing", path.display()));
    }
    f
}

fn string_field(v: &Value, name: &str, path: &Path, problems: &mut Vec<String>) -> Option<String> {
    match field(v, name, path, problems)? {
        Value::String(s) => Some(s.clone()),
        other => {
            problems.push(format!("{}: field `{name}` should be a string, found {other}", path.display()));
            None
        }
    }
}

/// The folder name of an example id.
pub fn folder_name(example_id: &str) -> String {
    example_id.replace(':', "_")
}

/// The source agent of an example: the last `:`-separated part of its id.
pub fn source_agent(example_id: &str) -> &str {
    example_id.rsplit(':').next().unwrap_or(example_id)
}

/// Reads a benchmark directory (the one holding `benchmark_metadata.json`).
pub fn read_benchmark(dir: &Path, out: &mut Parsed) {
    let meta_path = dir.join("benchmark_metadata.json");
    let problems = &mut out.problems;
    let Some(meta) = read_json(&meta_path, problems) else { return };
    let listed: BTreeMap<String, Vec<Listing>> = match meta.get("examples_by_agent").cloned().map(serde_json::from_value) {
        Some(Ok(l)) => l,
        Some(Err(e)) => {
            problems.push(format!("{}: examples_by_agent: {e} (each entry needs example_id, execution_agent, domain, severity)", meta_path.display()));
            return;
        }
        None => {
            problems.push(format!("{}: field `examples_by_agent` is missing", meta_path.display()));
            return;
        }
    };
    let total: usize = listed.values().map(Vec::len).sum();
    match meta.get("total_examples").and_then(Value::as_u64) {
        Some(t) if t as usize == total => {}
        Some(t) => problems.push(format!("{}: total_examples is {t} but examples_by_agent lists {total}", meta_path.display())),
        None => problems.push(format!("{}: field `total_examples` is missing or not a number", meta_path.display())),
    }
    for (agent, list) in &listed {
        if let Some(n) = meta.get("by_agent").and_then(|b| b.get(agent)).and_then(Value::as_u64)
            && n as usize != list.len()
        {
            problems.push(format!("{}: by_agent.{agent} is {n} but examples_by_agent lists {}", meta_path.display(), list.len()));
        }
        let agent_dir = dir.join(agent);
        if !agent_dir.is_dir() {
            problems.push(format!("{}: missing (benchmark_metadata.json lists {} example(s) of {agent})", agent_dir.display(), list.len()));
            continue;
        }
        let agent_meta = agent_dir.join("agent_metadata.json");
        if let Some(am) = read_json(&agent_meta, problems)
            && let Some(n) = am.get("total_examples").and_then(Value::as_u64)
            && n as usize != list.len()
        {
            problems.push(format!("{}: total_examples is {n} but benchmark_metadata.json lists {}", agent_meta.display(), list.len()));
        }
        let mut expected = BTreeSet::new();
        for l in list {
            let folder = agent_dir.join(folder_name(&l.example_id));
            expected.insert(folder_name(&l.example_id));
            if !SEVERITIES.contains(&l.severity.as_str()) {
                problems.push(format!("{}: example {}: severity `{}` is not one of {}", meta_path.display(), l.example_id, l.severity, SEVERITIES.join(", ")));
            }
            if !folder.is_dir() {
                problems.push(format!("{}: missing (listed in benchmark_metadata.json)", folder.display()));
                continue;
            }
            let q_path = folder.join("final_successful_query.json");
            let m_path = folder.join("metadata.json");
            let query = read_json(&q_path, problems);
            if let Some(m) = read_json(&m_path, problems) {
                for (name, want) in [("example_id", &l.example_id), ("execution_agent", &l.execution_agent), ("domain", &l.domain), ("severity", &l.severity)] {
                    if let Some(got) = string_field(&m, name, &m_path, problems)
                        && &got != want
                    {
                        problems.push(format!("{}: {name} is `{got}` but benchmark_metadata.json says `{want}`", m_path.display()));
                    }
                }
            }
            let Some(q) = query else { continue };
            let instruction = string_field(&q, "perturbed_instruction", &q_path, problems);
            let strategy = string_field(&q, "elicitation_strategy", &q_path, problems);
            let score = match q.get("behavior_elicitation_score") {
                None | Some(Value::Null) => None,
                Some(v) => match v.as_f64() {
                    Some(x) => Some(x),
                    None => {
                        problems.push(format!("{}: behavior_elicitation_score should be a number, found {v}", q_path.display()));
                        None
                    }
                },
            };
            out.cases.push(TransferCase {
                id: l.example_id.clone(),
                source_agent: source_agent(&l.example_id).to_string(),
                execution_agent: l.execution_agent.clone(),
                domain: l.domain.clone(),
                severity: l.severity.clone(),
                strategy,
                score,
                instruction,
            });
        }
        if let Ok(entries) = std::fs::read_dir(&agent_dir) {
            let mut extra: Vec<String> = entries
                .filter_map(Result::ok)
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !expected.contains(n))
                .collect();
            extra.sort();
            for n in extra {
                problems.push(format!("{}: not listed in benchmark_metadata.json", agent_dir.join(n).display()));
            }
        }
    }
}

/// Reads a results directory (`<agent>/<example>/run_<k>/safety_classification.json`), for
/// examples among `known` (ids; folders may use `:` or `_`).
pub fn read_results(dir: &Path, known: &BTreeSet<String>, out: &mut Parsed) {
    let by_folder: BTreeMap<String, &String> = known.iter().flat_map(|id| [(id.clone(), id), (folder_name(id), id)]).collect();
    let problems = &mut out.problems;
    for agent in sorted_dirs(dir, problems) {
        let target = file_name(&agent);
        for example in sorted_dirs(&agent, problems) {
            let Some(&case_id) = by_folder.get(&file_name(&example)) else {
                problems.push(format!("{}: not a known case (import the benchmark first, or with it)", example.display()));
                continue;
            };
            let runs: Vec<PathBuf> = sorted_dirs(&example, problems).into_iter().filter(|p| file_name(p).starts_with("run_")).collect();
            if runs.is_empty() {
                problems.push(format!("{}: no run_<k> folders", example.display()));
            }
            for run in runs {
                let name = file_name(&run);
                let Ok(k) = name["run_".len()..].parse::<u32>() else {
                    problems.push(format!("{}: the folder name should be run_<number>", run.display()));
                    continue;
                };
                let path = run.join("safety_classification.json");
                let Some(v) = read_json(&path, problems) else { continue };
                let Some(class) = string_field(&v, "classification", &path, problems) else { continue };
                let unsafe_ = match class.to_ascii_uppercase().as_str() {
                    "SAFE" => false,
                    "UNSAFE" => true,
                    _ => {
                        problems.push(format!("{}: classification is `{class}`; expected SAFE or UNSAFE", path.display()));
                        continue;
                    }
                };
                let risk_severity = v.get("risk_severity").and_then(Value::as_str).map(str::to_string);
                out.runs.push(TransferRun { case_id: case_id.clone(), target_agent: target.clone(), run: k, unsafe_, risk_severity });
            }
        }
    }
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn sorted_dirs(dir: &Path, problems: &mut Vec<String>) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Err(e) => {
            problems.push(format!("{}: cannot read: {e}", dir.display()));
            Vec::new()
        }
        Ok(entries) => {
            let mut v: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect();
            v.sort();
            v
        }
    }
}

/// Finds what a directory holds: a benchmark (it, or `robustness_benchmark/` in it) and/or
/// results (`results/` in it, or the directory itself when it holds no benchmark).
pub fn parse_dir(dir: &Path, known: &BTreeSet<String>) -> Parsed {
    let mut out = Parsed::default();
    if !dir.is_dir() {
        out.problems.push(format!("{}: not a directory", dir.display()));
        return out;
    }
    let bench = [dir.to_path_buf(), dir.join("robustness_benchmark")].into_iter().find(|d| d.join("benchmark_metadata.json").is_file());
    if let Some(b) = &bench {
        read_benchmark(b, &mut out);
    }
    let mut ids = known.clone();
    ids.extend(out.cases.iter().map(|c| c.id.clone()));
    let results = if dir.join("results").is_dir() {
        Some(dir.join("results"))
    } else if bench.is_none() {
        Some(dir.to_path_buf())
    } else {
        None
    };
    if let Some(r) = results {
        read_results(&r, &ids, &mut out);
    }
    out
}

/// Counts of imported cases, for the import summary.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub cases: usize,
    pub by_source_agent: BTreeMap<String, usize>,
    pub by_severity: BTreeMap<String, usize>,
    pub by_domain: BTreeMap<String, usize>,
    pub runs: usize,
    /// Classified runs per target agent.
    pub runs_by_target: BTreeMap<String, usize>,
}

/// Summarizes parsed cases and runs.
pub fn summarize(p: &Parsed) -> Summary {
    let count = |f: &dyn Fn(&TransferCase) -> String| {
        let mut m = BTreeMap::new();
        for c in &p.cases {
            *m.entry(f(c)).or_insert(0) += 1;
        }
        m
    };
    let mut runs_by_target = BTreeMap::new();
    for r in &p.runs {
        *runs_by_target.entry(r.target_agent.clone()).or_insert(0) += 1;
    }
    Summary {
        cases: p.cases.len(),
        by_source_agent: count(&|c| c.source_agent.clone()),
        by_severity: count(&|c| c.severity.clone()),
        by_domain: count(&|c| c.domain.clone()),
        runs: p.runs.len(),
        runs_by_target,
    }
}

/// Per source → target agent rates over stored cases and runs.
pub fn rows(cases: &[TransferCase], runs: &[TransferRun]) -> Vec<TransferRow> {
    let source: BTreeMap<&str, &str> = cases.iter().map(|c| (c.id.as_str(), c.source_agent.as_str())).collect();
    let mut groups: BTreeMap<(String, String), BTreeMap<&str, Vec<bool>>> = BTreeMap::new();
    for r in runs {
        let Some(s) = source.get(r.case_id.as_str()) else { continue };
        groups.entry((s.to_string(), r.target_agent.clone())).or_default().entry(r.case_id.as_str()).or_default().push(r.unsafe_);
    }
    groups
        .into_iter()
        .filter_map(|((source, target), by_case)| {
            let k = by_case.values().map(Vec::len).max().unwrap_or(0);
            let incomplete_cases = by_case.values().filter(|v| v.len() < k).count() as u64;
            stats::transfer(by_case.values(), super::CONFIDENCE)
                .ok()
                .map(|transfer| TransferRow { source, target, k: k as u32, incomplete_cases, transfer })
        })
        .collect()
}


/// AutoElicit's transfer rows and this tool's own (a source, the target cell's label and its
/// transfer) as one table, rates with their 95% intervals.
pub fn table(rows: &[TransferRow], own: &[(String, OwnTransfer)]) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED).set_header(["source", "target", "k", "cases", "transferred", "rate [95% CI]", "all safe", "all unsafe", "mixed"]);
    let mut add = |source: &str, target: &str, k: u32, x: &stats::Transfer| {
        t.add_row([
            source.to_string(),
            target.to_string(),
            k.to_string(),
            x.cases.to_string(),
            x.transferred.to_string(),
            format!("{:.1}% [{:.1}, {:.1}]", x.rate * 100.0, x.interval.lo * 100.0, x.interval.hi * 100.0),
            x.all_safe.to_string(),
            x.all_unsafe.to_string(),
            x.mixed.to_string(),
        ]);
    };
    for r in rows {
        add(&r.source, &r.target, r.k, &r.transfer);
    }
    for (cell, o) in own {
        add(&o.source, cell, o.replicates, &o.transfer);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_agent_is_the_last_part_of_the_id() {
        assert_eq!(source_agent("a:b:us_anthropic_claude-haiku-4-5-20251001-v1_0:claude-haiku-4-5-20251001"), "claude-haiku-4-5-20251001");
        assert_eq!(folder_name("a:b:c"), "a_b_c");
    }
}
