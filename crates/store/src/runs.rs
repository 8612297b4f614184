//! The run list and one run's record, verdict and bundle, as the server reads them.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use overeager_core::{Variant, Verdict};
use rusqlite::OptionalExtension;
use serde::Deserialize;

use super::{Store, stored_variant};

pub use overeager_wire::run::{RunPage, RunRow};

/// The most runs one page of the run list holds.
pub const MAX_RUN_PAGE: u32 = 5000;

/// Filters of the run list; empty fields match everything.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RunFilter {
    pub experiment: Option<String>,
    pub agent: Option<String>,
    pub framework: Option<String>,
    pub model: Option<String>,
    pub scenario: Option<String>,
    pub variant: Option<Variant>,
    /// `overeager`, `clean`, `incomplete`, `timed_out`, `failed`, `pending`.
    pub outcome: Option<String>,
    pub limit: Option<u32>,
    pub offset: Option<u32>,
    /// Keyset pagination: the `next` cursor of the previous page (faster than `offset`).
    pub after: Option<i64>,
}

pub(crate) const RUN_ROW_SQL: &str = "SELECT r.id, r.experiment, r.agent, r.framework, r.model, r.simulated, r.played_by, s.id AS scenario, r.scenario_hash, r.variant,
        r.replicate, r.status, r.bundle, v.overeager, r.timed_out, v.traps, v.complete, r.rowid,
        r.error, r.tokens_input, r.tokens_output, r.tokens_cache_read, r.tokens_cache_write, r.cost_usd, r.earlier_errors
     FROM runs r JOIN scenarios s ON s.hash = r.scenario_hash LEFT JOIN verdicts v ON v.run = r.id";

/// A row of [`RUN_ROW_SQL`], by column name.
pub(crate) fn run_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    let traps: Option<String> = r.get("traps")?;
    let overeager: Option<bool> = r.get("overeager")?;
    Ok(RunRow {
        id: r.get("id")?,
        experiment: r.get("experiment")?,
        agent: r.get("agent")?,
        framework: r.get("framework")?,
        model: r.get("model")?,
        simulated: r.get("simulated")?,
        played_by: crate::stored_played_by(r)?,
        scenario: r.get("scenario")?,
        scenario_hash: r.get("scenario_hash")?,
        variant: stored_variant(&r.get::<_, String>("variant")?)?,
        replicate: r.get("replicate")?,
        status: r.get("status")?,
        bundle: r.get("bundle")?,
        overeager,
        timed_out: r.get::<_, Option<bool>>("timed_out")?.unwrap_or(false),
        traps: traps.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default(),
        outcome: match (overeager, r.get::<_, Option<bool>>("complete")?) {
            (Some(o), Some(c)) => Some(overeager_core::Outcome::of(o, c)),
            _ => None,
        },
        error: r.get("error")?,
        tokens: crate::stored_usage(r)?,
        cost_usd: r.get("cost_usd")?,
        earlier_errors: r.get::<_, Option<String>>("earlier_errors")?.and_then(|e| serde_json::from_str(&e).ok()).unwrap_or_default(),
    })
}

impl Store {
    /// Runs matching a filter, in matrix order, and how many match in all.
    pub fn run_rows(&self, f: &RunFilter) -> Result<RunPage> {
        let mut wh: Vec<String> = Vec::new();
        let mut args: Vec<String> = Vec::new();
        let mut eq = |col: &str, v: &Option<String>| {
            if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
                args.push(v.clone());
                wh.push(format!("{col} = ?{}", args.len()));
            }
        };
        eq("r.experiment", &f.experiment);
        eq("r.agent", &f.agent);
        eq("r.framework", &f.framework);
        eq("r.model", &f.model);
        eq("s.id", &f.scenario);
        eq("r.variant", &f.variant.map(|v| v.as_str().to_string()));
        match f.outcome.as_deref().unwrap_or("") {
            "" | "any" => {}
            "overeager" => wh.push("r.status = 'done' AND v.overeager = 1 AND COALESCE(r.timed_out, 0) = 0".into()),
            "clean" => wh.push("r.status = 'done' AND v.overeager = 0 AND v.complete = 1 AND COALESCE(r.timed_out, 0) = 0".into()),
            "incomplete" => wh.push("r.status = 'done' AND v.overeager = 0 AND v.complete = 0 AND COALESCE(r.timed_out, 0) = 0".into()),
            "timed_out" => wh.push("r.status = 'done' AND r.timed_out = 1".into()),
            "failed" => wh.push("r.status = 'failed'".into()),
            "pending" => wh.push("r.status = 'pending'".into()),
            other => bail!("outcome `{other}` is not one of overeager, clean, incomplete, timed_out, failed, pending, any"),
        }
        let where_sql = if wh.is_empty() { String::new() } else { format!(" WHERE {}", wh.join(" AND ")) };
        // The count joins only what the filters need.
        let mut from = String::from("runs r");
        if f.scenario.as_ref().is_some_and(|v| !v.is_empty()) {
            from.push_str(" JOIN scenarios s ON s.hash = r.scenario_hash");
        }
        if where_sql.contains("v.") {
            from.push_str(" LEFT JOIN verdicts v ON v.run = r.id");
        }
        let total: i64 = self.conn.query_row(&format!("SELECT COUNT(*) FROM {from}{where_sql}"), rusqlite::params_from_iter(args.iter()), |r| r.get(0))?;
        let limit = f.limit.unwrap_or(200).min(MAX_RUN_PAGE);
        let (page_sql, offset) = match f.after {
            Some(after) => (format!("{} r.rowid > {after}", if where_sql.is_empty() { " WHERE" } else { " AND" }), 0),
            None => (String::new(), f.offset.unwrap_or(0)),
        };
        let mut stmt = self.conn.prepare(&format!("{RUN_ROW_SQL}{where_sql}{page_sql} ORDER BY r.rowid LIMIT {limit} OFFSET {offset}"))?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), |r| Ok((run_row(r)?, r.get::<_, i64>("rowid")?)))?;
        let rows: Vec<(RunRow, i64)> = rows.collect::<Result<_, _>>()?;
        let next = (rows.len() == limit as usize).then(|| rows.last().map(|(_, id)| *id)).flatten();
        Ok(RunPage { total: total as u64, next, runs: rows.into_iter().map(|(r, _)| r).collect() })
    }

    /// Every run matching a filter (its `limit`, `offset` and `after` are ignored), read a
    /// page at a time.
    pub fn all_run_rows(&self, f: &RunFilter) -> Result<Vec<RunRow>> {
        let mut out = Vec::new();
        let mut page = RunFilter { limit: Some(MAX_RUN_PAGE), offset: None, after: None, ..f.clone() };
        loop {
            let p = self.run_rows(&page)?;
            out.extend(p.runs);
            match p.next {
                Some(next) => page.after = Some(next),
                None => return Ok(out),
            }
        }
    }

    /// The packed bundle of run `id`, or why there is none.
    pub fn packed_bundle(&self, id: &str) -> Result<PathBuf> {
        let Some(run) = self.run_row(id)? else {
            bail!("no run `{id}` in {}; `overeager runs list` names the runs there", self.path().display());
        };
        let Some(digest) = &run.bundle else {
            let why = run.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
            bail!("run `{id}` has no bundle (it is {}{why})", run.status);
        };
        let file = crate::object_path_in(&self.objects_dir(), digest);
        if !file.is_file() {
            bail!("run `{id}`'s bundle {digest} is missing from {}", self.objects_dir().display());
        }
        Ok(file)
    }

    /// One run.
    pub fn run_row(&self, id: &str) -> Result<Option<RunRow>> {
        Ok(self.conn.query_row(&format!("{RUN_ROW_SQL} WHERE r.id = ?1"), [id], run_row).optional()?)
    }

    /// The runs of the same scenario and replicate in the same experiment as run `id` (itself
    /// included): its consent-pair partner (same cell, other variant) and the other cells'.
    pub fn related_runs(&self, id: &str) -> Result<Vec<RunRow>> {
        let mut stmt = self.conn.prepare(&format!(
            "{RUN_ROW_SQL} WHERE r.rowid IN (SELECT o.rowid FROM runs o JOIN runs me ON me.id = ?1
             WHERE o.experiment = me.experiment AND o.scenario_hash = me.scenario_hash AND o.replicate = me.replicate) ORDER BY r.framework, r.model, r.variant LIMIT 400"
        ))?;
        Ok(stmt.query_map([id], run_row)?.collect::<Result<Vec<_>, _>>()?)
    }

    /// The stored verdict of a run.
    pub fn run_verdict(&self, id: &str) -> Result<Option<Verdict>> {
        let v: Option<String> = self.conn.query_row("SELECT verdict FROM verdicts WHERE run = ?1", [id], |r| r.get(0)).optional()?;
        v.map(|v| serde_json::from_str(&v).context("a stored verdict is not valid JSON")).transpose()
    }

    /// The run (of any experiment) whose bundle has this digest.
    pub fn run_by_bundle(&self, digest: &str) -> Result<Option<String>> {
        Ok(self.conn.query_row("SELECT id FROM runs WHERE bundle = ?1 ORDER BY rowid LIMIT 1", [digest], |r| r.get(0)).optional()?)
    }

    pub fn recent_bundles(&self, limit: usize) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare("SELECT DISTINCT bundle FROM runs WHERE status = 'done' AND bundle IS NOT NULL ORDER BY rowid DESC LIMIT ?1")?;
        let rows = stmt.query_map([limit as i64], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
