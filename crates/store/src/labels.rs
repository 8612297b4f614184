//! Human labels of runs and review queues.
//!
//! A label is one rater's call on one run: is it overeager, and for each trap the rule judge
//! fired, is the firing right. Labels come from the web app (with the call on each trap, a
//! comment and the time) or from a CSV import (the overall call only). A rater has at most one
//! label per run; labelling again replaces it.
//!
//! A review queue is a stratified sample of an experiment's judged runs, drawn so that a reviewer
//! sees every cell and every outcome of the rule judge, however rare: the strata are
//! (framework, model, outcome), the size is spread over them as evenly as their sizes allow, and
//! within a stratum the runs are ranked by `sha256("<seed>/<run id>")`. The draw therefore
//! depends only on the seed and the run ids: anyone can redraw it from the same store.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use overeager_core::{Outcome, Variant};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::Store;

pub use overeager_wire::labels::{Label, ReviewQueue, Stratum};
use crate::runs::{RUN_ROW_SQL, RunRow, run_row};

/// The most runs one review queue holds.
pub const MAX_QUEUE: u32 = 2000;

/// The most review queues one rater may draw of one experiment (drawing one drawn before, by
/// anyone, does not count): queues are stored for good, so a rater cannot fill the store.
pub const MAX_QUEUES_PER_RATER: u32 = 20;

/// The longest comment a label keeps, in characters.
pub const MAX_COMMENT: usize = 4000;

/// The most raters one import may name: a labels file is a review's, not a crowd's.
pub const MAX_IMPORT_RATERS: usize = 10_000;

/// The earliest time a label may carry (2000-01-01): before it is a mistaken unit or field.
const EARLIEST_LABEL_US: u64 = 946_684_800_000_000;
/// How far ahead of this machine's clock a label's time may be (another's clock runs ahead).
const CLOCK_SKEW_US: u64 = 300_000_000;

/// A label with the run it is of and the rule judge's call on that run.
#[derive(Debug, Clone, Serialize)]
pub struct LabelRow {
    #[serde(flatten)]
    pub label: Label,
    pub experiment: String,
    pub framework: String,
    pub model: String,
    pub scenario: String,
    pub variant: Variant,
    /// The rule judge's call (`None` while the run has no verdict).
    pub judge: Option<bool>,
    /// The traps the rule judge fired.
    pub fired: Vec<String>,
}

/// Which labels to read.
#[derive(Debug, Clone, Copy)]
pub enum LabelScope<'a> {
    All,
    Experiment(&'a str),
    Queue(&'a str),
    Run(&'a str),
}

/// A judged run that a queue may draw.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub run: String,
    pub framework: String,
    pub model: String,
    pub outcome: Outcome,
}

/// The rank of a run in a draw with `seed`: lower is drawn first.
fn rank(seed: u64, run: &str) -> String {
    overeager_core::sha256_hex(format!("{seed}/{run}").as_bytes())
}

/// Draws up to `size` runs: every stratum gets an equal share, a stratum smaller than its share
/// gives what it lacks to the others, and within a stratum the lowest ranks are drawn. Returns
/// the runs in the order they are reviewed (by rank, so the strata are interleaved) and the
/// strata, sorted by (framework, model, outcome).
pub fn stratified_sample(candidates: &[Candidate], size: u32, seed: u64) -> (Vec<String>, Vec<Stratum>) {
    let mut groups: BTreeMap<(String, String, String), (Outcome, Vec<(String, String)>)> = BTreeMap::new();
    for c in candidates {
        let key = (c.framework.clone(), c.model.clone(), c.outcome.as_str().to_string());
        groups.entry(key).or_insert_with(|| (c.outcome, Vec::new())).1.push((rank(seed, &c.run), c.run.clone()));
    }
    let sizes: Vec<usize> = groups.values().map(|(_, v)| v.len()).collect();
    let mut take = vec![0usize; sizes.len()];
    let mut left = (size as usize).min(sizes.iter().sum());
    while left > 0 {
        let open: Vec<usize> = (0..sizes.len()).filter(|&i| take[i] < sizes[i]).collect();
        let share = (left / open.len()).max(1);
        for i in open {
            let add = share.min(sizes[i] - take[i]).min(left);
            take[i] += add;
            left -= add;
        }
    }
    let mut drawn: Vec<(String, String)> = Vec::new();
    let mut strata = Vec::new();
    for (((framework, model, _), (outcome, mut runs)), n) in groups.into_iter().zip(take) {
        runs.sort();
        strata.push(Stratum { framework, model, outcome, runs: runs.len() as u32, drawn: n as u32 });
        drawn.extend(runs.into_iter().take(n));
    }
    drawn.sort();
    (drawn.into_iter().map(|(_, run)| run).collect(), strata)
}

/// The id of the queue of `experiment` with this size and seed.
pub fn queue_id(experiment: &str, size: u32, seed: u64) -> String {
    format!("{experiment}-n{size}-s{seed}")
}

const LABEL_ROW_SQL: &str = "SELECT l.run, l.rater, l.label, l.traps AS agreed, l.comment, l.labelled_us, l.source,
        r.experiment, r.framework, r.model, s.id AS scenario, r.variant, v.overeager AS judge, v.traps AS fired
     FROM labels l JOIN runs r ON r.id = l.run JOIN scenarios s ON s.hash = r.scenario_hash LEFT JOIN verdicts v ON v.run = l.run";

/// A row of [`LABEL_ROW_SQL`], by column name.
fn label_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LabelRow> {
    let traps: BTreeMap<String, bool> = r.get::<_, Option<String>>("agreed")?.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    let fired: Vec<(String, String)> = r.get::<_, Option<String>>("fired")?.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    let variant: String = r.get("variant")?;
    Ok(LabelRow {
        label: Label {
            run: r.get("run")?,
            rater: r.get("rater")?,
            overeager: r.get("label")?,
            traps,
            comment: r.get("comment")?,
            labelled_us: r.get::<_, Option<i64>>("labelled_us")?.map(|t| t as u64),
            source: r.get("source")?,
        },
        experiment: r.get("experiment")?,
        framework: r.get("framework")?,
        model: r.get("model")?,
        scenario: r.get("scenario")?,
        variant: crate::stored_variant(&variant)?,
        judge: r.get("judge")?,
        fired: fired.into_iter().map(|(id, _)| id).collect(),
    })
}

impl Store {
    /// Stores imported labels as they are, each replacing its rater's earlier label of the run.
    /// All or nothing.
    pub fn put_labels(&mut self, labels: &[Label]) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare(
                "INSERT OR REPLACE INTO labels (run, rater, label, traps, comment, labelled_us, source) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for l in labels {
                let traps = if l.traps.is_empty() { None } else { Some(serde_json::to_string(&l.traps)?) };
                stmt.execute(params![l.run, l.rater, l.overeager, traps, l.comment, l.labelled_us.map(|t| t as i64), l.source])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Stores a label made in the app, replacing the rater's earlier label of the run. The run
    /// must be judged, and the label must call each trap the judge fired and no other.
    pub fn put_label(&mut self, label: &Label) -> Result<Label> {
        let fired: Option<String> = self.conn.query_row("SELECT traps FROM verdicts WHERE run = ?1", [&label.run], |r| r.get(0)).optional()?;
        let Some(fired) = fired else {
            bail!("run `{}` has no verdict yet: only judged runs are labelled", label.run);
        };
        let fired: Vec<(String, String)> = serde_json::from_str(&fired)?;
        let fired: Vec<String> = fired.into_iter().map(|(id, _)| id).collect();
        let unknown: Vec<&String> = label.traps.keys().filter(|t| !fired.contains(t)).collect();
        if !unknown.is_empty() {
            bail!("trap(s) {} did not fire in run `{}`; it fired: {}", join(unknown), label.run, if fired.is_empty() { "none".into() } else { join(&fired) });
        }
        let missing: Vec<&String> = fired.iter().filter(|t| !label.traps.contains_key(*t)).collect();
        if !missing.is_empty() {
            bail!("say whether you agree with each trap that fired: {} {} no call", join(&missing), if missing.len() == 1 { "has" } else { "have" });
        }
        let comment = label.comment.as_deref().map(str::trim).filter(|c| !c.is_empty());
        if comment.is_some_and(|c| c.chars().count() > MAX_COMMENT) {
            bail!("the comment has more than {MAX_COMMENT} characters");
        }
        let stored = Label { comment: comment.map(str::to_string), labelled_us: Some(crate::now_us()), source: Some("app".into()), ..label.clone() };
        self.put_labels(std::slice::from_ref(&stored))?;
        Ok(stored)
    }

    /// What is wrong with importing `rows` (each label with its line in `file`), by line: the
    /// app's rules for a label (a rater's name, a comment's length, a time that has passed,
    /// calls only on traps the judge fired in the run), a known run, one label per run and
    /// rater in the file, and no label already stored for that run and rater unless `replace`
    /// (an import must not silently drop a label made in the app, or its calls on traps).
    pub fn import_problems(&self, file: &str, rows: &[(u64, Label)], replace: bool) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        let raters: std::collections::BTreeSet<&str> = rows.iter().map(|(_, l)| l.rater.as_str()).collect();
        if raters.len() > MAX_IMPORT_RATERS {
            problems.push(format!("{file}: {} raters; one import names at most {MAX_IMPORT_RATERS}: split the file", raters.len()));
        }
        let now = crate::now_us();
        let mut seen: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        let mut fired_stmt = self.conn.prepare("SELECT traps FROM verdicts WHERE run = ?1")?;
        let mut run_stmt = self.conn.prepare("SELECT 1 FROM runs WHERE id = ?1")?;
        let mut label_stmt = self.conn.prepare("SELECT COALESCE(source, 'the app') FROM labels WHERE run = ?1 AND rater = ?2")?;
        for (line, l) in rows {
            let at = format!("{file}:{line}");
            if !overeager_core::is_account_name(&l.rater) {
                problems.push(format!("{at}: rater `{}` is not a rater's name: use 1–64 letters, digits, '-', '_', '.' or '@' (as a token's name), in a `rater` column or with --rater", l.rater.escape_debug()));
            }
            if let Some(first) = seen.insert((&l.run, &l.rater), *line) {
                problems.push(format!("{at}: run {} is labelled again by `{}` (first on line {first})", l.run.escape_debug(), l.rater.escape_debug()));
            }
            if let Some(c) = &l.comment
                && c.trim().chars().count() > MAX_COMMENT
            {
                problems.push(format!("{at}: the comment has {} characters; a label keeps at most {MAX_COMMENT}", c.trim().chars().count()));
            }
            if let Some(t) = l.labelled_us
                && !(EARLIEST_LABEL_US..=now + CLOCK_SKEW_US).contains(&t)
            {
                problems.push(format!("{at}: labelled at a time {} (a label's time is between 2000 and now)", if t > now { "in the future" } else { "before 2000" }));
            }
            if !run_stmt.exists([&l.run])? {
                problems.push(format!("{at}: no run {} in the store", l.run.escape_debug()));
                continue;
            }
            let fired: Option<String> = fired_stmt.query_row([&l.run], |r| r.get(0)).optional()?;
            let fired: Vec<String> = match fired {
                Some(text) => serde_json::from_str::<Vec<(String, String)>>(&text)?.into_iter().map(|(id, _)| id).collect(),
                None => Vec::new(),
            };
            let unknown: Vec<&String> = l.traps.keys().filter(|t| !fired.contains(t)).collect();
            if !unknown.is_empty() {
                problems.push(format!("{at}: trap(s) {} did not fire in run {}; it fired: {}", join(unknown.iter().map(|t| t.escape_debug().to_string())), l.run, if fired.is_empty() { "none".into() } else { join(&fired) }));
            }
            if !replace && let Some(source) = label_stmt.query_row(params![l.run, l.rater], |r| r.get::<_, String>(0)).optional()? {
                problems.push(format!("{at}: `{}` labelled run {} already (from {}); pass --replace to replace stored labels", l.rater.escape_debug(), l.run, source.escape_debug()));
            }
        }
        Ok(problems)
    }

    /// Removes one rater's label of a run; whether there was one.
    pub fn delete_label(&mut self, run: &str, rater: &str) -> Result<bool> {
        Ok(self.conn.execute("DELETE FROM labels WHERE run = ?1 AND rater = ?2", params![run, rater])? > 0)
    }

    /// Labels in a scope, with their runs, in the order runs were created, then by rater.
    pub fn labels(&self, scope: LabelScope<'_>) -> Result<Vec<LabelRow>> {
        let (filter, arg) = match scope {
            LabelScope::All => ("", None),
            LabelScope::Experiment(e) => ("WHERE r.experiment = ?1", Some(e)),
            LabelScope::Queue(q) => ("WHERE l.run IN (SELECT run FROM review_items WHERE queue = ?1)", Some(q)),
            LabelScope::Run(id) => ("WHERE l.run = ?1", Some(id)),
        };
        let mut stmt = self.conn.prepare(&format!("{LABEL_ROW_SQL} {filter} ORDER BY r.rowid, l.rater"))?;
        let rows = match arg {
            Some(a) => stmt.query_map([a], label_row)?.collect::<Result<Vec<_>, _>>()?,
            None => stmt.query_map([], label_row)?.collect::<Result<Vec<_>, _>>()?,
        };
        Ok(rows)
    }

    /// Labelled runs of an experiment (or of every experiment) that the rule judge has judged:
    /// (run, rater, label, judge's overeager verdict), by rater.
    pub fn labelled(&self, experiment: Option<&str>) -> Result<Vec<(String, String, bool, bool)>> {
        let rows = self.labels(experiment.map_or(LabelScope::All, LabelScope::Experiment))?;
        Ok(judged_pairs(&rows))
    }

    /// The judged runs of an experiment a queue may draw.
    pub fn queue_candidates(&self, experiment: &str) -> Result<Vec<Candidate>> {
        let mut stmt = self.conn.prepare(
            "SELECT r.id, r.framework, r.model, v.overeager, v.complete FROM runs r JOIN verdicts v ON v.run = r.id
             WHERE r.experiment = ?1 AND r.status = 'done' ORDER BY r.rowid",
        )?;
        let rows = stmt.query_map([experiment], |r| {
            Ok(Candidate { run: r.get("id")?, framework: r.get("framework")?, model: r.get("model")?, outcome: Outcome::of(r.get("overeager")?, r.get("complete")?) })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Draws the review queue of an experiment with this size and seed, or returns it when it
    /// was drawn before (a queue, once drawn, keeps its runs).
    pub fn create_queue(&mut self, experiment: &str, size: u32, seed: u64, by: &str) -> Result<ReviewQueue> {
        if !(1..=MAX_QUEUE).contains(&size) {
            bail!("a review queue holds 1 to {MAX_QUEUE} runs, not {size}");
        }
        self.require_experiment(experiment)?;
        let id = queue_id(experiment, size, seed);
        if let Some(q) = self.queue(&id)? {
            return Ok(q);
        }
        let drawn: u32 = self.conn.query_row("SELECT COUNT(*) FROM review_queues WHERE experiment = ?1 AND created_by = ?2", params![experiment, by], |r| r.get(0))?;
        if drawn >= MAX_QUEUES_PER_RATER {
            bail!("`{by}` has drawn {drawn} review queues of `{experiment}`, the most one rater may; review one of those (they are listed on the labels page), or draw again one drawn before (same size and seed)");
        }
        let candidates = self.queue_candidates(experiment)?;
        if candidates.is_empty() {
            bail!("experiment `{experiment}` has no judged runs to review yet");
        }
        let (runs, strata) = stratified_sample(&candidates, size, seed);
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO review_queues (id, experiment, size, seed, strata, created_by, created_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![id, experiment, size, seed as i64, serde_json::to_string(&strata)?, by, crate::now_us() as i64],
        )?;
        {
            let mut stmt = tx.prepare("INSERT INTO review_items (queue, pos, run) VALUES (?1, ?2, ?3)")?;
            for (pos, run) in runs.iter().enumerate() {
                stmt.execute(params![id, pos as i64, run])?;
            }
        }
        tx.commit()?;
        Ok(self.queue(&id)?.expect("just stored"))
    }

    /// A review queue.
    pub fn queue(&self, id: &str) -> Result<Option<ReviewQueue>> {
        Ok(self.queues_where("WHERE q.id = ?1", "", id)?.pop())
    }

    /// One page of an experiment's review queues, newest first, and how many it has in all.
    pub fn queues_page(&self, experiment: &str, limit: u32, offset: u64) -> Result<(Vec<ReviewQueue>, u64)> {
        let total: i64 = self.conn.query_row("SELECT COUNT(*) FROM review_queues WHERE experiment = ?1", [experiment], |r| r.get(0))?;
        let page = self.queues_where("WHERE q.experiment = ?1", &format!(" LIMIT {limit} OFFSET {offset}"), experiment)?;
        Ok((page, total as u64))
    }

    fn queues_where(&self, filter: &str, page: &str, arg: &str) -> Result<Vec<ReviewQueue>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT q.id, q.experiment, q.size, q.seed, q.strata, q.created_by, q.created_us, (SELECT COUNT(*) FROM review_items i WHERE i.queue = q.id) AS items
             FROM review_queues q {filter} ORDER BY q.created_us DESC, q.id{page}"
        ))?;
        let rows = stmt.query_map([arg], |r| {
            let strata: String = r.get("strata")?;
            Ok(ReviewQueue {
                id: r.get("id")?,
                experiment: r.get("experiment")?,
                size: r.get("size")?,
                seed: r.get::<_, i64>("seed")? as u64,
                strata: serde_json::from_str(&strata).map_err(|e| rusqlite::Error::FromSqlConversionFailure(4, rusqlite::types::Type::Text, e.into()))?,
                created_by: r.get("created_by")?,
                created_us: r.get::<_, i64>("created_us")? as u64,
                items: r.get("items")?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The runs of a queue, in review order.
    pub fn queue_runs(&self, id: &str) -> Result<Vec<RunRow>> {
        let mut stmt = self.conn.prepare(&format!("{RUN_ROW_SQL} JOIN review_items i ON i.run = r.id WHERE i.queue = ?1 ORDER BY i.pos"))?;
        let rows = stmt.query_map([id], run_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// (run, rater, label, judge) of the rows the rule judge has judged: what agreement is counted on.
pub fn judged_pairs(rows: &[LabelRow]) -> Vec<(String, String, bool, bool)> {
    let mut out: Vec<(String, String, bool, bool)> =
        rows.iter().filter_map(|r| r.judge.map(|j| (r.label.run.clone(), r.label.rater.clone(), r.label.overeager, j))).collect();
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

fn join<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    items.into_iter().map(|s| format!("`{}`", s.as_ref())).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cands(spec: &[(&str, Outcome, usize)]) -> Vec<Candidate> {
        spec.iter()
            .flat_map(|&(fw, o, n)| (0..n).map(move |i| Candidate { run: format!("{fw}-{}-{i}", o.as_str()), framework: fw.into(), model: "m".into(), outcome: o }))
            .collect()
    }

    #[test]
    fn a_sample_spreads_over_the_strata_and_is_fixed_by_its_seed() {
        // Overeager runs are rare in cell a: an equal share still reaches them all.
        let c = cands(&[("a", Outcome::Overeager, 2), ("a", Outcome::Clean, 40), ("b", Outcome::Overeager, 30), ("b", Outcome::Clean, 30)]);
        let (runs, strata) = stratified_sample(&c, 20, 7);
        assert_eq!(runs.len(), 20);
        let drawn: Vec<(String, u32, u32)> = strata.iter().map(|s| (format!("{}/{}", s.framework, s.outcome.as_str()), s.runs, s.drawn)).collect();
        // 20 over 4 strata is 5 each; a/overeager has 2, and its 3 go to the others (1 each).
        assert_eq!(
            drawn,
            vec![("a/clean".into(), 40, 6), ("a/overeager".into(), 2, 2), ("b/clean".into(), 30, 6), ("b/overeager".into(), 30, 6)]
        );
        let again = stratified_sample(&c, 20, 7).0;
        assert_eq!(runs, again, "the same seed draws the same runs in the same order");
        let other = stratified_sample(&c, 20, 8).0;
        assert_ne!(runs, other, "another seed draws others");
        let mut unique = runs.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), runs.len(), "no run twice");
        // The order interleaves the strata rather than listing them one after another.
        let first_half: std::collections::BTreeSet<&str> = runs[..10].iter().map(|r| r.split('-').next().unwrap()).collect();
        assert_eq!(first_half.len(), 2, "{runs:?}");
        // The draw of a stratum is its lowest ranks: a smaller queue is drawn from the same order.
        let small = stratified_sample(&c, 4, 7).0;
        for r in &small {
            assert!(runs.contains(r), "{r} is in the larger draw too");
        }
    }

    #[test]
    fn a_sample_larger_than_the_experiment_takes_every_run() {
        let c = cands(&[("a", Outcome::Clean, 3), ("a", Outcome::Incomplete, 1)]);
        let (runs, strata) = stratified_sample(&c, 50, 1);
        assert_eq!(runs.len(), 4);
        assert!(strata.iter().all(|s| s.runs == s.drawn));
        assert!(stratified_sample(&[], 5, 1).0.is_empty());
    }
}
