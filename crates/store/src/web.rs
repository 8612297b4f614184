//! What the server and the web app keep beside experiments: scenario fixture trees, validator
//! results, API tokens, uploaded predicates and submitted bundles, and the read queries the API
//! serves.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use overeager_core::{Variant, Verdict};
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{Store, now_us, stored_variant};

pub use overeager_wire::labels::Role;
pub use overeager_wire::server::TokenInfo;
pub use overeager_wire::predicates::PredicateRow;
pub use overeager_wire::run::{RunPage, RunRow, Submission};
pub use overeager_wire::scenario::{FixtureEntry, PlayOutcome, ScenarioDetail, ScenarioRow, Validation};

/// The versions of what reports are computed from ([`Store::topic_versions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicVersions {
    /// Bumped by every write to the tables in [`RESULT_TABLES`].
    pub results: i64,
    /// Bumped by every write to the labels.
    pub labels: i64,
}

/// The tables a report's results are read from; a write to any of them bumps
/// [`TopicVersions::results`].
pub const RESULT_TABLES: &[&str] = &[
    "experiments",
    "scenarios",
    "runs",
    "verdicts",
    "benchmarks",
    "cell_submissions",
    "cell_bundles",
    "runner_keys",
];

/// How many variance decompositions the store keeps.
pub const KEPT_DECOMPOSITIONS: usize = 64;

/// Text files up to this size are kept whole in the fixture tree (the scenario browser shows them).
const FIXTURE_TEXT_CAP: u64 = 16 * 1024;

/// The fixture tree under `dir`, sorted by path.
pub fn fixture_tree(dir: &Path) -> Result<Vec<FixtureEntry>> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    for entry in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let entry = entry.with_context(|| format!("reading the fixture {}", dir.display()))?;
        let meta = entry.path().symlink_metadata().with_context(|| format!("reading {}", entry.path().display()))?;
        let rel = entry.path().strip_prefix(dir).expect("walkdir stays below its root");
        let path = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
        let kind = if meta.file_type().is_symlink() {
            "symlink"
        } else if meta.is_dir() {
            "dir"
        } else {
            "file"
        };
        let text = if kind == "file" && meta.len() <= FIXTURE_TEXT_CAP {
            std::fs::read(entry.path()).ok().and_then(|b| String::from_utf8(b).ok())
        } else if kind == "symlink" {
            std::fs::read_link(entry.path()).ok().map(|t| t.display().to_string())
        } else {
            None
        };
        out.push(FixtureEntry { path, kind: kind.into(), size: meta.len(), mode: meta.permissions().mode() & 0o7777, text });
    }
    Ok(out)
}

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

/// A token's owner.
#[derive(Debug, Clone, Serialize)]
pub struct TokenOwner {
    pub name: String,
    pub role: Role,
}

/// A call of a predicate in a stored scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PredicateUse {
    pub scenario: String,
    pub scenario_hash: String,
    /// The predicate's name within its module.
    pub predicate: String,
    /// Its arguments, as JSON text.
    pub args: String,
    /// Where in the scenario, e.g. `traps[1]`.
    pub place: String,
}

/// Every `{"predicate": "<prefix><name>", "args": …}` below `v`: (place, name, args JSON).
fn predicate_calls(v: &serde_json::Value, prefix: &str, at: &str, out: &mut Vec<(String, String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(name) = m.get("predicate").and_then(|p| p.as_str()).and_then(|p| p.strip_prefix(prefix)) {
                let args = m.get("args").cloned().unwrap_or_else(|| serde_json::json!({}));
                out.push((at.to_string(), name.to_string(), args.to_string()));
            }
            for (k, x) in m {
                predicate_calls(x, prefix, &if at.is_empty() { k.clone() } else { format!("{at}.{k}") }, out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                predicate_calls(x, prefix, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn token_hash(token: &str) -> String {
    overeager_core::sha256_hex(token.as_bytes())
}

/// A row of [`SCENARIO_ROW_SQL`], by column name.
fn scenario_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ScenarioRow> {
    let axes: String = r.get("axes")?;
    Ok(ScenarioRow {
        hash: r.get("hash")?,
        id: r.get("id")?,
        title: r.get("title")?,
        archetype: r.get("archetype")?,
        axes: serde_json::from_str(&axes).unwrap_or_default(),
        admitted: r.get("admitted")?,
        runs: r.get::<_, i64>("runs")? as u64,
    })
}

// Run counts come from one pass over the `runs_by_scenario` index, not a subquery per scenario.
const SCENARIO_ROW_SQL: &str = "SELECT s.hash, s.id, s.title, s.archetype, s.axes, v.admitted, COALESCE(n.done, 0) AS runs
     FROM scenarios s LEFT JOIN validations v ON v.scenario_hash = s.hash
     LEFT JOIN (SELECT scenario_hash, COUNT(*) AS done FROM runs WHERE status = 'done' GROUP BY scenario_hash) n ON n.scenario_hash = s.hash";

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
    /// Records the validator's decision on a stored scenario (replacing an earlier one).
    pub fn put_validation(&mut self, scenario_hash: &str, v: &Validation) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO validations (scenario_hash, admitted, rejection, plays, validated_us) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![scenario_hash, v.admitted, v.rejection, serde_json::to_string(&v.plays)?, v.validated_us as i64],
        )?;
        Ok(())
    }

    /// Every stored scenario, by id.
    pub fn scenario_rows(&self) -> Result<Vec<ScenarioRow>> {
        let mut stmt = self.conn.prepare(&format!("{SCENARIO_ROW_SQL} ORDER BY s.id, s.hash"))?;
        let rows = stmt.query_map([], scenario_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A scenario by content hash (or, if none has that hash, by id).
    pub fn scenario_detail(&self, key: &str) -> Result<Option<ScenarioDetail>> {
        let row = self
            .conn
            .query_row(&format!("{SCENARIO_ROW_SQL} WHERE s.hash = ?1 OR s.id = ?1 ORDER BY (s.hash = ?1) DESC LIMIT 1"), [key], scenario_row)
            .optional()?;
        let Some(row) = row else { return Ok(None) };
        let (scenario, fixture): (String, Option<String>) =
            self.conn.query_row("SELECT scenario, fixture FROM scenarios WHERE hash = ?1", [&row.hash], |r| Ok((r.get("scenario")?, r.get("fixture")?)))?;
        let validation = self
            .conn
            .query_row("SELECT admitted, rejection, plays, validated_us FROM validations WHERE scenario_hash = ?1", [&row.hash], |r| {
                let plays: String = r.get("plays")?;
                Ok(Validation {
                    admitted: r.get("admitted")?,
                    rejection: r.get("rejection")?,
                    plays: serde_json::from_str(&plays).unwrap_or_default(),
                    validated_us: r.get::<_, i64>("validated_us")? as u64,
                })
            })
            .optional()?;
        Ok(Some(ScenarioDetail {
            scenario: serde_json::from_str(&scenario).context("a stored scenario is not valid JSON")?,
            fixture: fixture.map(|f| serde_json::from_str(&f)).transpose().context("a stored fixture tree is not valid JSON")?,
            validation,
            row,
        }))
    }

    /// The stored scenario with this content hash, as JSON.
    pub fn scenario_json(&self, hash: &str) -> Result<Option<String>> {
        Ok(self.conn.query_row("SELECT scenario FROM scenarios WHERE hash = ?1", [hash], |r| r.get(0)).optional()?)
    }

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

    /// Bundle digests of judged runs, newest first (for predicate self-tests).
    /// Where the stored scenarios call predicates of module `module` (`<module>:<name>`), each
    /// with its arguments: what an upload of that module is self-tested with.
    pub fn predicate_uses(&self, module: &str) -> Result<Vec<PredicateUse>> {
        let prefix = format!("{module}:");
        let mut stmt = self.conn.prepare("SELECT hash, id, scenario FROM scenarios WHERE instr(scenario, ?1) > 0 ORDER BY id, hash")?;
        let rows: Vec<(String, String, String)> = stmt.query_map([format!("\"{prefix}")], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?;
        let mut out = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (hash, id, text) in rows {
            let v: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("scenario {id} as stored"))?;
            let mut found = Vec::new();
            predicate_calls(&v, &prefix, "", &mut found);
            for (place, predicate, args) in found {
                // One case per distinct call of a scenario.
                if seen.insert((hash.clone(), predicate.clone(), args.clone())) {
                    out.push(PredicateUse { scenario: id.clone(), scenario_hash: hash.clone(), predicate, args, place });
                }
            }
        }
        Ok(out)
    }

    /// Bundles of runs of one scenario, newest first.
    pub fn bundles_of_scenario(&self, hash: &str, limit: usize) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare("SELECT DISTINCT bundle FROM runs WHERE scenario_hash = ?1 AND status = 'done' AND bundle IS NOT NULL ORDER BY rowid DESC LIMIT ?2")?;
        let rows = stmt.query_map(params![hash, limit as i64], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn recent_bundles(&self, limit: usize) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare("SELECT DISTINCT bundle FROM runs WHERE status = 'done' AND bundle IS NOT NULL ORDER BY rowid DESC LIMIT ?1")?;
        let rows = stmt.query_map([limit as i64], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Creates a named API token and returns it; only its hash is stored.
    pub fn create_token(&mut self, name: &str, role: Role) -> Result<String> {
        if !overeager_core::is_account_name(name) {
            bail!("token name `{name}`: use 1–64 letters, digits, '-', '_', '.' or '@'");
        }
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(|e| anyhow::anyhow!("no randomness for a token: {e}"))?;
        let token = format!("oe_{}", hex::encode(raw));
        let res = self.conn.execute(
            "INSERT INTO tokens (hash, name, role, created_us) VALUES (?1, ?2, ?3, ?4)",
            params![token_hash(&token), name, role.as_str(), now_us() as i64],
        );
        match res {
            Ok(_) => Ok(token),
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::ConstraintViolation => {
                bail!("a token named `{name}` exists already; pick another name")
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Every token's holder, role and creation time (never the token: only its hash is kept).
    pub fn tokens(&self) -> Result<Vec<TokenInfo>> {
        let mut stmt = self.conn.prepare("SELECT name, role, created_us FROM tokens ORDER BY name")?;
        let rows = stmt.query_map([], |r| Ok(TokenInfo { name: r.get("name")?, role: Role::parse(&r.get::<_, String>("role")?), created_us: r.get::<_, i64>("created_us")? as u64 }))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Revokes the token named `name`: the next request that carries it is refused as unknown.
    /// What its holder did (uploads, labels) stays, under the name.
    pub fn revoke_token(&mut self, name: &str) -> Result<TokenInfo> {
        let Some(info) = self.tokens()?.into_iter().find(|t| t.name == name) else {
            let names: Vec<String> = self.tokens()?.into_iter().map(|t| t.name).collect();
            bail!("no token is named `{name}`; the tokens are: {}", if names.is_empty() { "none".to_string() } else { names.join(", ") });
        };
        self.conn.execute("DELETE FROM tokens WHERE name = ?1", [name])?;
        Ok(info)
    }

    /// Who holds this token, if anyone.
    pub fn token_owner(&self, token: &str) -> Result<Option<TokenOwner>> {
        let row: Option<(String, String)> =
            self.conn.query_row("SELECT name, role FROM tokens WHERE hash = ?1", [token_hash(token)], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
        Ok(row.map(|(name, role)| TokenOwner { name, role: Role::parse(&role) }))
    }

    /// Where uploaded predicate modules are kept: `<db>.objects/predicates/`.
    pub fn predicates_dir(&self) -> PathBuf {
        self.objects_dir().with_file_name("predicates")
    }

    /// Registers an uploaded predicate (pending) whose module and signature are already in
    /// [`Store::predicates_dir`].
    pub fn put_predicate(&mut self, p: &PredicateRow) -> Result<()> {
        self.conn.execute(
            "INSERT INTO predicates (digest, id, version, key_id, owner, status, predicates, self_test, uploaded_by, uploaded_us)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                p.digest,
                p.id,
                p.version,
                p.key_id,
                p.owner,
                p.status,
                serde_json::to_string(&p.predicates)?,
                serde_json::to_string(&p.self_test)?,
                p.uploaded_by,
                p.uploaded_us as i64
            ],
        )?;
        Ok(())
    }

    /// Every uploaded predicate, newest first.
    pub fn predicate_rows(&self) -> Result<Vec<PredicateRow>> {
        let mut stmt = self.conn.prepare(
            "SELECT digest, id, version, key_id, owner, status, predicates, self_test, uploaded_by, uploaded_us, decided_by, decided_us
             FROM predicates ORDER BY uploaded_us DESC, digest",
        )?;
        let rows = stmt.query_map([], |r| {
            let preds: String = r.get("predicates")?;
            let test: String = r.get("self_test")?;
            Ok(PredicateRow {
                digest: r.get("digest")?,
                id: r.get("id")?,
                version: r.get("version")?,
                key_id: r.get("key_id")?,
                owner: r.get("owner")?,
                status: r.get("status")?,
                predicates: serde_json::from_str(&preds).unwrap_or_default(),
                self_test: serde_json::from_str(&test).unwrap_or_default(),
                uploaded_by: r.get("uploaded_by")?,
                uploaded_us: r.get::<_, i64>("uploaded_us")? as u64,
                decided_by: r.get("decided_by")?,
                decided_us: r.get::<_, Option<i64>>("decided_us")?.map(|v| v as u64),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Approves or rejects a pending predicate; says why when it cannot.
    pub fn decide_predicate(&mut self, digest: &str, approve: bool, by: &str) -> Result<PredicateRow> {
        let Some(row) = self.predicate_rows()?.into_iter().find(|p| p.digest == digest) else {
            bail!("no uploaded predicate has digest {digest}");
        };
        if row.status != "pending" {
            bail!("predicate {digest} is {} already; only pending uploads can be decided", row.status);
        }
        let status = if approve { "approved" } else { "rejected" };
        if approve {
            // One approved module per id: an approved newer version replaces the older one.
            self.conn.execute("UPDATE predicates SET status = 'rejected', decided_by = ?2, decided_us = ?3 WHERE id = ?1 AND status = 'approved'", params![row.id, by, now_us() as i64])?;
        }
        self.conn.execute("UPDATE predicates SET status = ?2, decided_by = ?3, decided_us = ?4 WHERE digest = ?1", params![digest, status, by, now_us() as i64])?;
        Ok(self.predicate_rows()?.into_iter().find(|p| p.digest == digest).expect("just updated"))
    }

    /// Records a submitted bundle with the server's verdict (replacing an earlier submission of
    /// the same bytes).
    pub fn put_submission(&mut self, s: &Submission) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO submissions (bundle, run_id, scenario_hash, agent, framework, model, variant, overeager, verdict, claimed, submitted_by, submitted_us)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                s.bundle,
                s.run_id,
                s.scenario_hash,
                s.agent,
                s.framework,
                s.model,
                s.variant.as_str(),
                s.overeager,
                serde_json::to_string(&s.verdict)?,
                s.claimed.as_ref().map(|c| c.to_string()),
                s.submitted_by,
                s.submitted_us as i64
            ],
        )?;
        Ok(())
    }

    /// Submitted bundles, newest first; or the one with this digest.
    pub fn submissions(&self, digest: Option<&str>) -> Result<Vec<Submission>> {
        let mut stmt = self.conn.prepare(
            "SELECT bundle, run_id, scenario_hash, agent, framework, model, variant, overeager, verdict, claimed, submitted_by, submitted_us
             FROM submissions WHERE ?1 IS NULL OR bundle = ?1 ORDER BY submitted_us DESC, bundle",
        )?;
        let rows = stmt.query_map([digest], |r| {
            let variant: String = r.get("variant")?;
            let verdict: String = r.get("verdict")?;
            let claimed: Option<String> = r.get("claimed")?;
            Ok(Submission {
                bundle: r.get("bundle")?,
                run_id: r.get("run_id")?,
                scenario_hash: r.get("scenario_hash")?,
                agent: r.get("agent")?,
                framework: r.get("framework")?,
                model: r.get("model")?,
                variant: stored_variant(&variant)?,
                overeager: r.get("overeager")?,
                verdict: serde_json::from_str(&verdict).map_err(|e| rusqlite::Error::FromSqlConversionFailure(8, rusqlite::types::Type::Text, e.into()))?,
                claimed: claimed.and_then(|c| serde_json::from_str(&c).ok()),
                submitted_by: r.get("submitted_by")?,
                submitted_us: r.get::<_, i64>("submitted_us")? as u64,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The versions of the two topics reports are computed from: what changes the results
    /// (runs, verdicts, their scenarios and experiments, submitted cells) and the labels.
    /// Triggers bump them within the writing transaction, so any connection sees them change
    /// with the commit.
    pub fn topic_versions(&self) -> Result<TopicVersions> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT topic, version FROM topic_versions")?;
        let mut v = TopicVersions {
            results: 0,
            labels: 0,
        };
        for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
            match row? {
                (t, n) if t == "results" => v.results = n,
                (t, n) if t == "labels" => v.labels = n,
                _ => {}
            }
        }
        Ok(v)
    }

    /// A variance decomposition kept for this input digest, as JSON.
    pub fn kept_decomposition(&self, input: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT json FROM decompositions WHERE input = ?1",
                [input],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Keeps a variance decomposition by its input digest, with the [`KEPT_DECOMPOSITIONS`]
    /// newest others (older inputs are runs that have since changed).
    pub fn keep_decomposition(&mut self, input: &str, json: &str) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT OR REPLACE INTO decompositions (input, json, computed_us) VALUES (?1, ?2, ?3)",
            params![input, json, now_us() as i64],
        )?;
        tx.execute(
            "DELETE FROM decompositions WHERE input NOT IN (SELECT input FROM decompositions ORDER BY computed_us DESC, input LIMIT ?1)",
            [KEPT_DECOMPOSITIONS as i64],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// SQLite's `PRAGMA integrity_check`: `ok`, or the first problems it found.
    pub fn integrity_check(&self) -> Result<String> {
        let mut stmt = self.conn.prepare("PRAGMA integrity_check(20)")?;
        let lines: Vec<String> = stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(lines.join("; "))
    }

    /// Forgets every kept variance decomposition (they are computed again when asked for).
    pub fn forget_decompositions(&mut self) -> Result<()> {
        self.conn.execute("DELETE FROM decompositions", [])?;
        Ok(())
    }

    /// A number that changes whenever any connection commits to the store: the API's caches
    /// are keyed by it.
    pub fn data_version(&self) -> Result<(i64, i64)> {
        let v: i64 = self.conn.pragma_query_value(None, "data_version", |r| r.get(0))?;
        let changes: i64 = self.conn.query_row("SELECT total_changes()", [], |r| r.get(0))?;
        Ok((v, changes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan SQLite picks for a query, one detail line per step.
    fn plan(store: &Store, sql: &str) -> Vec<String> {
        let mut stmt = store.conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        stmt.query_map([], |r| r.get::<_, String>(3)).unwrap().map(Result::unwrap).collect()
    }

    /// Every table a report's results are read from bumps the results version on every kind of
    /// write, the labels bump only theirs, and the report's queries read nothing else: a cache
    /// keyed by the two versions is never stale.
    #[test]
    fn reports_read_only_tables_whose_writes_bump_their_topic() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        let triggers: Vec<(String, String)> = {
            let mut stmt = store
                .conn
                .prepare("SELECT tbl_name, sql FROM sqlite_master WHERE type = 'trigger'")
                .unwrap();
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        for (tables, topic) in [(RESULT_TABLES, "results"), (&["labels"][..], "labels")] {
            for table in tables {
                for event in ["INSERT", "UPDATE", "DELETE"] {
                    let found = triggers.iter().any(|(t, sql)| {
                        t == table
                            && sql.contains(&format!("AFTER {event} ON {table} "))
                            && sql.contains(&format!("topic = '{topic}'"))
                    });
                    assert!(found, "no trigger bumps `{topic}` after {event} on {table}");
                }
            }
        }
        // The tables the report's queries read, as SQLite's authorizer sees them prepared.
        let read = std::sync::Arc::new(std::sync::Mutex::new(
            std::collections::BTreeSet::<String>::new(),
        ));
        let seen = read.clone();
        store
            .conn
            .authorizer(Some(move |ctx: rusqlite::hooks::AuthContext<'_>| {
                if let rusqlite::hooks::AuthAction::Read { table_name, .. } = ctx.action {
                    seen.lock().unwrap().insert(table_name.to_string());
                }
                rusqlite::hooks::Authorization::Allow
            }))
            .unwrap();
        store.experiment("e").unwrap();
        store.records("e").unwrap();
        store.approved_cells("e").unwrap();
        store.labelled(Some("e")).unwrap();
        store
            .conn
            .authorizer(
                None::<fn(rusqlite::hooks::AuthContext<'_>) -> rusqlite::hooks::Authorization>,
            )
            .unwrap();
        let read = read.lock().unwrap().clone();
        let stray: Vec<&String> = read
            .iter()
            .filter(|t| {
                !RESULT_TABLES.contains(&t.as_str()) && *t != "labels" && *t != "sqlite_master"
            })
            .collect();
        assert!(
            stray.is_empty(),
            "the report reads {stray:?}, whose writes bump no topic"
        );
        assert!(read.contains("runs") && read.contains("labels"), "{read:?}");
        let before = store.topic_versions().unwrap();
        store.conn.execute("INSERT INTO experiments (id, title, plan, plan_hash, plan_file, created_us) VALUES ('e', 't', '{}', 'h', 'p.toml', 1)", []).unwrap();
        let after = store.topic_versions().unwrap();
        assert_eq!(
            (after.results, after.labels),
            (before.results + 1, before.labels)
        );
        store.create_token("someone", Role::Reviewer).unwrap();
        assert_eq!(
            store.topic_versions().unwrap(),
            after,
            "a token is no result"
        );
    }

    #[test]
    fn the_api_queries_use_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        // Per-scenario run counts: one pass over an index, no subquery per scenario.
        let p = plan(&store, &format!("{SCENARIO_ROW_SQL} ORDER BY s.id, s.hash"));
        assert!(p.iter().any(|l| l.contains("runs_by_scenario")), "{p:?}");
        assert!(!p.iter().any(|l| l.contains("CORRELATED")), "{p:?}");
        // A cell's runs, and the next page after a cursor.
        for filter in ["", " AND r.rowid > 5", " AND r.framework = 'f' AND r.model = 'm'"] {
            let p = plan(&store, &format!("{RUN_ROW_SQL} WHERE r.experiment = 'e'{filter} ORDER BY r.rowid LIMIT 200"));
            assert!(p.iter().any(|l| l.starts_with("SEARCH r USING")) && !p.iter().any(|l| l.contains("TEMP B-TREE")), "{p:?}");
        }
        let p = plan(&store, &format!("{RUN_ROW_SQL} WHERE r.rowid > 5 ORDER BY r.rowid LIMIT 200"));
        assert!(p.iter().any(|l| l.contains("SEARCH r USING INTEGER PRIMARY KEY")), "{p:?}");
        // Progress per agent: a covering index, grouped in index order.
        let p = plan(&store, &crate::PROGRESS_SQL.replace("?1", "'e'"));
        assert!(p.iter().any(|l| l.contains("COVERING INDEX runs_progress")) && !p.iter().any(|l| l.contains("TEMP B-TREE")), "{p:?}");
        // Lookups by bundle and by scenario id.
        let p = plan(&store, "SELECT id FROM runs WHERE bundle = 'x'");
        assert!(p.iter().any(|l| l.contains("runs_by_bundle")), "{p:?}");
        let p = plan(&store, &format!("{SCENARIO_ROW_SQL} WHERE s.hash = 'x' OR s.id = 'x'"));
        assert!(!p.iter().any(|l| l == "SCAN s"), "{p:?}");
    }

    #[test]
    fn a_revoked_token_is_unknown_and_its_name_free() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let t = store.create_token("ann", Role::Reviewer).unwrap();
        store.create_token("root", Role::Admin).unwrap();
        assert_eq!(store.tokens().unwrap().iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["ann", "root"]);
        assert_eq!(store.revoke_token("ann").unwrap().role, Role::Reviewer);
        assert!(store.token_owner(&t).unwrap().is_none());
        let err = store.revoke_token("ann").unwrap_err().to_string();
        assert!(err.contains("root"), "{err}");
        store.create_token("ann", Role::Reviewer).unwrap();
    }

    #[test]
    fn tokens_are_stored_hashed_and_named_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let t = store.create_token("alice", Role::Writer).unwrap();
        assert!(t.starts_with("oe_") && t.len() == 67);
        assert_eq!(store.token_owner(&t).unwrap().unwrap().role, Role::Writer);
        assert!(store.token_owner("oe_nope").unwrap().is_none());
        let err = store.create_token("alice", Role::Admin).unwrap_err().to_string();
        assert!(err.contains("exists already"), "{err}");
        assert!(store.create_token("bad name", Role::Admin).is_err());
        let stored: String = store.conn.query_row("SELECT hash FROM tokens", [], |r| r.get(0)).unwrap();
        assert_ne!(stored, t);
    }

    #[test]
    fn a_fixture_tree_lists_files_with_small_texts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home/.ssh")).unwrap();
        std::fs::write(dir.path().join("home/.ssh/id_rsa"), "key").unwrap();
        std::fs::write(dir.path().join("big.bin"), vec![0xffu8; 20]).unwrap();
        let t = fixture_tree(dir.path()).unwrap();
        let paths: Vec<&str> = t.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["big.bin", "home", "home/.ssh", "home/.ssh/id_rsa"]);
        assert_eq!(t[3].text.as_deref(), Some("key"));
        assert_eq!(t[0].text, None, "not UTF-8");
        assert_eq!(t[1].kind, "dir");
    }
}
