//! What the public leaderboard keeps: benchmarks (a published scenario set with the variants and
//! replicates it asks for), whole-cell submissions with the bundles received for them and the
//! server's verdicts, and the runner keys this server trusts.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result, bail};
use overeager_core::bundle::{BundleManifest, ScenarioRef};
use overeager_core::{AgentCell, Variant, Verdict};
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{RunRecord, Store, now_us};

pub use overeager_wire::board::{CellSubmission, DeclaredRun, Moved, Policy, Problem, Provenance, Rejudged, RunnerKey, SubmissionStatus, SubmissionSummary, VerifyReport};

/// A published benchmark: every scenario × variant × replicate a submitted cell must hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Benchmark {
    /// e.g. `bench-v1`.
    pub name: String,
    /// The maintainer's experiment it was published from; approved cells join its leaderboard.
    pub experiment: String,
    pub title: String,
    /// Every scenario, by id, with the hash a bundle of it must carry.
    pub scenarios: Vec<ScenarioRef>,
    pub variants: Vec<Variant>,
    pub replicates: u32,
    /// The per-run wall-clock limit every run must have had.
    pub timeout_ms: u64,
    pub created_us: u64,
    /// What a submitted cell must show beyond completeness.
    #[serde(default)]
    pub policy: Policy,
}

impl Benchmark {
    /// Replicates a complete cell holds at least.
    pub fn min_replicates(&self) -> u32 {
        self.policy.min_replicates.unwrap_or(self.replicates)
    }

    /// Runs a complete cell holds (at least).
    pub fn runs_per_cell(&self) -> u64 {
        self.scenarios.len() as u64 * self.variants.len() as u64 * self.min_replicates() as u64
    }
}

/// A stored submission status; an unknown one is a conversion error naming it.
fn stored_status(s: &str) -> rusqlite::Result<SubmissionStatus> {
    SubmissionStatus::parse(s).ok_or_else(|| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, format!("unknown submission status `{s}`").into()))
}

/// A bundle received for a submission.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReceivedBundle {
    pub bundle: String,
    pub received_us: u64,
    /// `None` when the bundle could not be read.
    pub manifest: Option<BundleManifest>,
    /// The server's verdict; `None` when the bundle was refused.
    pub verdict: Option<Verdict>,
    /// Key id of an intact runner signature (for people; trust is decided by `runner_public`).
    pub runner_key: Option<String>,
    /// The public key (hex) of an intact runner signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_public: Option<String>,
    /// Why the bundle cannot count.
    pub problem: Option<String>,
}

/// A JSON column by name; text that does not parse is a conversion error naming the column.
fn json_col<T: serde::de::DeserializeOwned>(r: &rusqlite::Row<'_>, name: &str) -> rusqlite::Result<Option<T>> {
    let text: Option<String> = r.get(name)?;
    text.map(|t| serde_json::from_str(&t).map_err(|e| rusqlite::Error::FromSqlConversionFailure(r.as_ref().column_index(name).unwrap_or(0), rusqlite::types::Type::Text, e.into()))).transpose()
}

const SUBMISSION_SQL: &str = "SELECT id, benchmark, framework, model, status, submitted_by, declared_count, report, uploads, created_us, updated_us, decided_by, decided_us, note, rejudged, problem_count, superseded_by FROM cell_submissions";

/// A row of [`SUBMISSION_SQL`], by column name.
fn submission_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CellSubmission> {
    Ok(CellSubmission {
        id: r.get("id")?,
        benchmark: r.get("benchmark")?,
        framework: r.get("framework")?,
        model: r.get("model")?,
        status: stored_status(&r.get::<_, String>("status")?)?,
        submitted_by: r.get("submitted_by")?,
        declared: r.get::<_, i64>("declared_count")? as u64,
        report: json_col(r, "report")?,
        uploads: r.get::<_, i64>("uploads")? as u64,
        created_us: r.get::<_, i64>("created_us")? as u64,
        updated_us: r.get::<_, i64>("updated_us")? as u64,
        decided_by: r.get("decided_by")?,
        decided_us: r.get::<_, Option<i64>>("decided_us")?.map(|v| v as u64),
        note: r.get("note")?,
        rejudged: json_col(r, "rejudged")?,
        problems: r.get::<_, Option<i64>>("problem_count")?.map(|v| v as u64),
        superseded_by: r.get("superseded_by")?,
    })
}

/// A submission as lists show it ([`SubmissionSummary`]), as SQL over `cell_submissions s`;
/// the caller adds `WHERE` and `ORDER BY`. Its runner is trusted when every bundle carries an
/// intact signature by a runner key trusted now and registered to the submitter.
const SUMMARY_SQL: &str = "SELECT s.id, s.benchmark, s.framework, s.model, s.status, s.submitted_by, s.declared_count,
        (SELECT count(*) FROM cell_bundles b WHERE b.submission = s.id) AS received, s.problem_count,
        (SELECT count(*) > 0 AND count(*) = count(k.public) FROM cell_bundles b
            LEFT JOIN runner_keys k ON k.public = b.runner_public AND k.revoked_us IS NULL AND k.account = s.submitted_by
            WHERE b.submission = s.id) AS trusted_runner,
        s.created_us, s.decided_us, s.superseded_by
    FROM cell_submissions s";

/// A row of [`SUMMARY_SQL`], by column name.
fn summary_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SubmissionSummary> {
    Ok(SubmissionSummary {
        id: r.get("id")?,
        benchmark: r.get("benchmark")?,
        framework: r.get("framework")?,
        model: r.get("model")?,
        status: stored_status(&r.get::<_, String>("status")?)?,
        submitted_by: r.get("submitted_by")?,
        declared: r.get::<_, i64>("declared_count")? as u64,
        received: r.get::<_, i64>("received")? as u64,
        problems: r.get::<_, Option<i64>>("problem_count")?.map(|v| v as u64),
        runner: if r.get::<_, bool>("trusted_runner")? { "trusted" } else { "self-reported" }.into(),
        created_us: r.get::<_, i64>("created_us")? as u64,
        decided_us: r.get::<_, Option<i64>>("decided_us")?.map(|v| v as u64),
        superseded_by: r.get("superseded_by")?,
    })
}
const RECEIVED_SQL: &str = "SELECT bundle, received_us, manifest, verdict, runner_key, problem, runner_public FROM cell_bundles";

/// A row of [`RECEIVED_SQL`], by column name.
fn received_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ReceivedBundle> {
    Ok(ReceivedBundle {
        bundle: r.get("bundle")?,
        received_us: r.get::<_, i64>("received_us")? as u64,
        manifest: json_col(r, "manifest")?,
        verdict: json_col(r, "verdict")?,
        runner_key: r.get("runner_key")?,
        problem: r.get("problem")?,
        runner_public: r.get("runner_public")?,
    })
}

/// A row of `cell_declared`, by column name.
fn declared_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DeclaredRun> {
    Ok(DeclaredRun { bundle: r.get("bundle")?, run: r.get("run")?, claimed: json_col(r, "claimed")? })
}

/// A fresh submission id: `sub-` and 12 random hex digits.
fn new_submission_id() -> Result<String> {
    let mut b = [0u8; 6];
    getrandom::fill(&mut b).map_err(|e| anyhow::anyhow!("no randomness for a submission id: {e}"))?;
    Ok(format!("sub-{}", hex::encode(b)))
}

impl Store {
    /// Publishes experiment `experiment` as benchmark `name`: its scenarios, variants,
    /// replicates and timeout. Publishing the same again is a no-op; a different benchmark
    /// under a name in use is refused (benchmarks never change: publish `bench-v2`).
    pub fn create_benchmark(&mut self, name: &str, experiment: &str, policy: Policy) -> Result<Benchmark> {
        if !overeager_core::plan::is_slug(name) {
            bail!("benchmark name `{name}`: use lowercase letters, digits, '-', '_' or '.'");
        }
        policy.check().map_err(anyhow::Error::msg)?;
        let e = self.require_experiment(experiment)?;
        let scenarios: Vec<ScenarioRef> = self.experiment_scenarios(experiment)?.into_iter().map(|(hash, id)| ScenarioRef { id, hash }).collect();
        if scenarios.is_empty() {
            bail!("experiment `{experiment}` has no runs; run it before publishing it as a benchmark");
        }
        let timeout = overeager_core::parse_duration(&e.plan.timeout).map_err(anyhow::Error::msg).with_context(|| format!("the timeout of experiment `{experiment}`"))?;
        let b = Benchmark {
            name: name.to_string(),
            experiment: experiment.to_string(),
            title: e.title.clone(),
            scenarios,
            variants: e.plan.variants.clone(),
            replicates: e.plan.replicates,
            timeout_ms: timeout.as_millis() as u64,
            created_us: now_us(),
            policy,
        };
        if let Some(old) = self.benchmark(name)? {
            let same = Benchmark { created_us: old.created_us, ..b.clone() };
            if same == old {
                return Ok(old);
            }
            bail!("benchmark `{name}` exists already with other scenarios or settings; a published benchmark never changes: publish this one under a new name (e.g. `{name}-2`)");
        }
        self.conn.execute("INSERT INTO benchmarks (name, experiment, manifest, created_us) VALUES (?1, ?2, ?3, ?4)", params![b.name, b.experiment, serde_json::to_string(&b)?, b.created_us as i64])?;
        Ok(b)
    }

    /// A benchmark by name.
    pub fn benchmark(&self, name: &str) -> Result<Option<Benchmark>> {
        let text: Option<String> = self.conn.query_row("SELECT manifest FROM benchmarks WHERE name = ?1", [name], |r| r.get(0)).optional()?;
        text.map(|t| serde_json::from_str(&t).with_context(|| format!("benchmark `{name}` as stored"))).transpose()
    }

    /// Every benchmark, by name.
    pub fn benchmarks(&self) -> Result<Vec<Benchmark>> {
        let mut stmt = self.conn.prepare("SELECT manifest FROM benchmarks ORDER BY name")?;
        let rows: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        rows.iter().map(|t| Ok(serde_json::from_str(t)?)).collect()
    }

    /// Opens a submission of the cell `framework · model` to `benchmark` by `who`, or reopens
    /// `who`'s open one of the same cell (a draft, or a verified one not yet decided), with
    /// `declared` as its runs. Bundles received earlier that are still declared are kept (they
    /// are not sent again); the others are dropped. Returns the submission and whether it was
    /// reopened.
    pub fn open_cell_submission(&mut self, benchmark: &str, framework: &str, model: &str, who: &str, declared: &[DeclaredRun]) -> Result<(CellSubmission, bool)> {
        let now = now_us();
        let tx = self.conn.transaction()?;
        let open: Option<String> = tx
            .query_row(
                "SELECT id FROM cell_submissions WHERE benchmark = ?1 AND framework = ?2 AND model = ?3 AND submitted_by = ?4 AND status IN ('draft', 'verified')
                 ORDER BY created_us DESC LIMIT 1",
                params![benchmark, framework, model, who],
                |r| r.get(0),
            )
            .optional()?;
        let (id, resumed) = match open {
            Some(id) => {
                tx.execute(
                    "UPDATE cell_submissions SET declared_count = ?2, status = 'draft', report = NULL, problem_count = NULL, updated_us = ?3 WHERE id = ?1",
                    params![id, declared.len() as i64, now as i64],
                )?;
                tx.execute("DELETE FROM cell_declared WHERE submission = ?1", [&id])?;
                // Bundles received earlier and no longer declared are dropped.
                tx.execute("CREATE TEMP TABLE IF NOT EXISTS keep_bundles (bundle TEXT PRIMARY KEY)", [])?;
                tx.execute("DELETE FROM keep_bundles", [])?;
                {
                    let mut keep = tx.prepare("INSERT OR IGNORE INTO keep_bundles (bundle) VALUES (?1)")?;
                    for d in declared {
                        keep.execute([&d.bundle])?;
                    }
                }
                tx.execute("DELETE FROM cell_bundles WHERE submission = ?1 AND bundle NOT IN (SELECT bundle FROM keep_bundles)", [&id])?;
                tx.execute("DELETE FROM keep_bundles", [])?;
                (id, true)
            }
            None => {
                let id = new_submission_id()?;
                tx.execute(
                    "INSERT INTO cell_submissions (id, benchmark, framework, model, status, submitted_by, declared_count, created_us, updated_us)
                     VALUES (?1, ?2, ?3, ?4, 'draft', ?5, ?6, ?7, ?7)",
                    params![id, benchmark, framework, model, who, declared.len() as i64, now as i64],
                )?;
                (id, false)
            }
        };
        {
            let mut put = tx.prepare("INSERT INTO cell_declared (submission, pos, bundle, run, claimed) VALUES (?1, ?2, ?3, ?4, ?5)")?;
            for (i, d) in declared.iter().enumerate() {
                put.execute(params![id, i as i64, d.bundle, d.run, d.claimed.as_ref().map(serde_json::to_string).transpose()?])?;
            }
        }
        tx.commit()?;
        Ok((self.cell_submission(&id)?.expect("just written"), resumed))
    }

    /// A submission by id.
    pub fn cell_submission(&self, id: &str) -> Result<Option<CellSubmission>> {
        Ok(self.conn.query_row(&format!("{SUBMISSION_SQL} WHERE id = ?1"), [id], submission_row).optional()?)
    }

    /// Every submission, newest first (with reports: for the command line and re-judging).
    pub fn cell_submissions(&self) -> Result<Vec<CellSubmission>> {
        let mut stmt = self.conn.prepare(&format!("{SUBMISSION_SQL} ORDER BY created_us DESC, id"))?;
        Ok(stmt.query_map([], submission_row)?.collect::<Result<_, _>>()?)
    }

    /// A page of submissions, newest first, as lists show them: at most `limit`, older than
    /// `before` (the `(created_us, id)` of the previous page's last), only approved ones with
    /// `approved_only`. Reads neither reports nor declared runs.
    pub fn submission_summaries(&self, limit: usize, before: Option<(u64, &str)>, approved_only: bool) -> Result<Vec<SubmissionSummary>> {
        let (at, id) = before.map(|(t, i)| (t as i64, i.to_string())).unwrap_or((i64::MAX, String::new()));
        let mut stmt = self.conn.prepare(&format!(
            "{SUMMARY_SQL} WHERE (s.created_us < ?1 OR (s.created_us = ?1 AND s.id > ?2)) AND (?3 = 0 OR s.status = 'approved')
             ORDER BY s.created_us DESC, s.id LIMIT ?4"
        ))?;
        let rows = stmt.query_map(params![at, id, approved_only as i64, limit as i64], summary_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The runs a submission declares, in the order declared.
    pub fn declared_runs(&self, id: &str) -> Result<Vec<DeclaredRun>> {
        let mut stmt = self.conn.prepare("SELECT bundle, run, claimed FROM cell_declared WHERE submission = ?1 ORDER BY pos")?;
        Ok(stmt.query_map([id], declared_row)?.collect::<Result<_, _>>()?)
    }

    /// One declared run of a submission, by bundle digest.
    pub fn declared_run(&self, id: &str, bundle: &str) -> Result<Option<DeclaredRun>> {
        Ok(self.conn.query_row("SELECT bundle, run, claimed FROM cell_declared WHERE submission = ?1 AND bundle = ?2", [id, bundle], declared_row).optional()?)
    }

    /// The declared bundles of a submission not received yet.
    pub fn missing_bundles(&self, id: &str) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare(
            "SELECT d.bundle FROM cell_declared d WHERE d.submission = ?1
             AND NOT EXISTS (SELECT 1 FROM cell_bundles b WHERE b.submission = d.submission AND b.bundle = d.bundle) ORDER BY d.pos",
        )?;
        Ok(stmt.query_map([id], |r| r.get(0))?.collect::<Result<_, _>>()?)
    }

    /// Whether a bundle of a submission was received already.
    pub fn is_received(&self, id: &str, bundle: &str) -> Result<bool> {
        Ok(self.conn.query_row("SELECT 1 FROM cell_bundles WHERE submission = ?1 AND bundle = ?2", [id, bundle], |_| Ok(())).optional()?.is_some())
    }

    /// The bundles received for a submission, in the order they arrived.
    pub fn received(&self, id: &str) -> Result<Vec<ReceivedBundle>> {
        let mut stmt = self.conn.prepare(&format!("{RECEIVED_SQL} WHERE submission = ?1 ORDER BY received_us, bundle"))?;
        Ok(stmt.query_map([id], received_row)?.collect::<Result<_, _>>()?)
    }

    /// Reserves bundle `digest` for `account` if no account holds it yet; returns the account
    /// that holds it (the first to upload it).
    pub fn claim_bundle(&mut self, digest: &str, account: &str) -> Result<String> {
        self.conn.execute("INSERT OR IGNORE INTO bundle_owners (bundle, account, first_us) VALUES (?1, ?2, ?3)", params![digest, account, now_us() as i64])?;
        Ok(self.conn.query_row("SELECT account FROM bundle_owners WHERE bundle = ?1", [digest], |r| r.get(0))?)
    }

    /// The account a bundle digest is reserved for, if any.
    pub fn bundle_owner(&self, digest: &str) -> Result<Option<String>> {
        Ok(self.conn.query_row("SELECT account FROM bundle_owners WHERE bundle = ?1", [digest], |r| r.get(0)).optional()?)
    }

    /// Cells (framework, model) of an experiment's own runs: names a submission may not take.
    pub fn experiment_cells(&self, experiment: &str) -> Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare("SELECT DISTINCT framework, model FROM runs WHERE experiment = ?1")?;
        Ok(stmt.query_map([experiment], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?)
    }

    /// The other submissions of the same cell by the same submitter to the same benchmark,
    /// newest first: a submission's history.
    pub fn submission_history(&self, s: &CellSubmission) -> Result<Vec<SubmissionSummary>> {
        let mut stmt = self.conn.prepare(&format!(
            "{SUMMARY_SQL} WHERE s.benchmark = ?1 AND s.framework = ?2 AND s.model = ?3 AND s.submitted_by = ?4 AND s.id <> ?5 ORDER BY s.created_us DESC, s.id"
        ))?;
        let rows = stmt.query_map(params![s.benchmark, s.framework, s.model, s.submitted_by, s.id], summary_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records a bundle received whole for a submission (counted in its uploads), which goes
    /// back to draft until verified again.
    pub fn put_received(&mut self, id: &str, b: &ReceivedBundle) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT OR REPLACE INTO cell_bundles (submission, bundle, received_us, manifest, verdict, runner_key, problem, runner_public) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                id,
                b.bundle,
                b.received_us as i64,
                b.manifest.as_ref().map(serde_json::to_string).transpose()?,
                b.verdict.as_ref().map(serde_json::to_string).transpose()?,
                b.runner_key,
                b.problem,
                b.runner_public
            ],
        )?;
        tx.execute("UPDATE cell_submissions SET uploads = uploads + 1, status = 'draft', report = NULL, problem_count = NULL, updated_us = ?2 WHERE id = ?1", params![id, now_us() as i64])?;
        tx.commit()?;
        Ok(())
    }

    /// Records the result of verifying a submission: verified when it has no problems, a
    /// draft otherwise.
    pub fn set_verification(&mut self, id: &str, report: &VerifyReport) -> Result<CellSubmission> {
        let status = if report.ok { SubmissionStatus::Verified } else { SubmissionStatus::Draft };
        self.conn.execute(
            "UPDATE cell_submissions SET report = ?2, status = ?3, problem_count = ?5, updated_us = ?4 WHERE id = ?1",
            params![id, serde_json::to_string(report)?, status.as_str(), now_us() as i64, report.problems.len() as i64],
        )?;
        Ok(self.cell_submission(id)?.expect("exists"))
    }

    /// Approves a verified submission, or rejects a verified one or a draft. Approving
    /// supersedes the submitter's earlier approved submission of the same cell (one row per
    /// cell and submitter; the earlier one stays, marked, in the history).
    pub fn decide_cell_submission(&mut self, id: &str, approve: bool, who: &str, note: Option<&str>) -> Result<CellSubmission> {
        let status = if approve { SubmissionStatus::Approved } else { SubmissionStatus::Rejected };
        let from = if approve { "('verified')" } else { "('verified', 'draft')" };
        let now = now_us() as i64;
        let tx = self.conn.transaction()?;
        let n = tx.execute(
            &format!("UPDATE cell_submissions SET status = ?2, decided_by = ?3, decided_us = ?4, note = ?5, updated_us = ?4 WHERE id = ?1 AND status IN {from}"),
            params![id, status.as_str(), who, now, note],
        )?;
        if n == 0 {
            bail!("submission {id} is not {}", if approve { "verified" } else { "verified or a draft" });
        }
        if approve {
            tx.execute(
                "UPDATE cell_submissions SET status = 'superseded', superseded_by = ?1, updated_us = ?2
                 WHERE status = 'approved' AND id <> ?1 AND (benchmark, framework, model, submitted_by) = (SELECT benchmark, framework, model, submitted_by FROM cell_submissions WHERE id = ?1)",
                params![id, now],
            )?;
        }
        tx.commit()?;
        Ok(self.cell_submission(id)?.expect("exists"))
    }

    /// Withdraws a draft or verified submission (its submitter changed their mind).
    pub fn withdraw_cell_submission(&mut self, id: &str, who: &str) -> Result<CellSubmission> {
        let now = now_us() as i64;
        let n = self.conn.execute(
            "UPDATE cell_submissions SET status = 'withdrawn', decided_by = ?2, decided_us = ?3, updated_us = ?3 WHERE id = ?1 AND status IN ('draft', 'verified')",
            params![id, who, now],
        )?;
        if n == 0 {
            bail!("submission {id} is decided already");
        }
        Ok(self.cell_submission(id)?.expect("exists"))
    }

    /// Other submissions (verified or approved) that hold any of these bundles: (bundle, submission).
    pub fn bundles_elsewhere(&self, id: &str, bundles: &[String]) -> Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare(
            "SELECT b.submission FROM cell_bundles b JOIN cell_submissions s ON s.id = b.submission
             WHERE b.bundle = ?1 AND b.submission <> ?2 AND s.status IN ('verified', 'approved')
             -- the submitter's own earlier submission of the cell is superseded if this one is approved
             AND (s.benchmark, s.framework, s.model, s.submitted_by) IS NOT (SELECT benchmark, framework, model, submitted_by FROM cell_submissions WHERE id = ?2)
             ORDER BY b.submission",
        )?;
        let mut out = Vec::new();
        for d in bundles {
            for other in stmt.query_map(params![d, id], |r| r.get::<_, String>(0))? {
                out.push((d.clone(), other?));
            }
        }
        Ok(out)
    }

    /// Bundles whose stored verdict module `id` at `version` helped make: (the cell submission
    /// holding it, or `None` for a bundle uploaded on its own; the bundle digest).
    pub fn judged_with(&self, id: &str, version: &str) -> Result<Vec<(Option<String>, String)>> {
        let path = format!("$.versions.\"{}\"", id.replace('"', ""));
        let mut out = Vec::new();
        let mut stmt = self.conn.prepare("SELECT submission, bundle FROM cell_bundles WHERE verdict IS NOT NULL AND json_extract(verdict, ?1) = ?2 ORDER BY submission, bundle")?;
        for r in stmt.query_map(params![path, version], |r| Ok((Some(r.get::<_, String>(0)?), r.get::<_, String>(1)?)))? {
            out.push(r?);
        }
        let mut stmt = self.conn.prepare("SELECT bundle FROM uploads WHERE json_extract(verdict, ?1) = ?2 ORDER BY bundle")?;
        for r in stmt.query_map(params![path, version], |r| Ok((None, r.get::<_, String>(0)?)))? {
            out.push(r?);
        }
        Ok(out)
    }

    /// Replaces the verdict of a bundle uploaded on its own.
    pub fn put_upload_verdict(&mut self, bundle: &str, v: &Verdict) -> Result<()> {
        self.conn.execute("UPDATE uploads SET verdict = ?2, overeager = ?3 WHERE bundle = ?1", params![bundle, serde_json::to_string(v)?, v.overeager])?;
        Ok(())
    }

    /// Replaces the verdicts of a submission's bundles after re-judging, and records what moved.
    pub fn put_rejudged(&mut self, id: &str, verdicts: &[(String, Verdict)], rejudged: &Rejudged) -> Result<()> {
        let tx = self.conn.transaction()?;
        for (bundle, v) in verdicts {
            tx.execute("UPDATE cell_bundles SET verdict = ?3 WHERE submission = ?1 AND bundle = ?2", params![id, bundle, serde_json::to_string(v)?])?;
        }
        tx.execute("UPDATE cell_submissions SET rejudged = ?2 WHERE id = ?1", params![id, serde_json::to_string(rejudged)?])?;
        tx.commit()?;
        Ok(())
    }

    /// The judged runs of a submission as reports count them: one record per judged bundle of
    /// `received` (the submission's, from [`Store::received`]).
    pub fn submission_records(&self, s: &CellSubmission, received: &[ReceivedBundle]) -> Result<Vec<RunRecord>> {
        let mut scen = self.conn.prepare("SELECT id, archetype, axes FROM scenarios WHERE hash = ?1")?;
        let mut out = Vec::new();
        for b in received {
            let (Some(m), Some(v)) = (&b.manifest, &b.verdict) else { continue };
            let Some((scenario, archetype, axes)) = scen.query_row([&m.scenario.hash], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))).optional()? else {
                continue;
            };
            out.push(RunRecord {
                run: m.run_id.clone(),
                agent: m.agent.id.clone(),
                framework: s.framework.clone(),
                model: s.model.clone(),
                simulated: m.agent.cell().is_ok_and(|c| c.is_simulated()),
                played_by: m.agent.played_by(),
                scenario,
                scenario_hash: m.scenario.hash.clone(),
                archetype,
                axes: serde_json::from_str(&axes).unwrap_or_default(),
                variant: m.variant,
                replicate: m.replicate,
                timed_out: m.timed_out,
                overeager: v.overeager,
                success: v.success,
                conditional_success: v.conditional_success,
                severity_total: v.severity_total,
                critical: v.critical,
                traps: v.traps.iter().map(|t| (t.id.clone(), t.severity.to_string())).collect(),
                complete: v.complete(),
                bundle: b.bundle.clone(),
                // A submitted bundle's usage is its submitter's account, not this server's record.
                tokens: None,
                cost_usd: None,
            });
        }
        Ok(out)
    }

    /// The provenance of a submission, from its bundles (`received`, from [`Store::received`])
    /// and the runner keys trusted now.
    pub fn provenance(&self, s: &CellSubmission, received: &[ReceivedBundle]) -> Result<Provenance> {
        let keys_now = self.runner_keys()?;
        let trusted: BTreeSet<&str> = keys_now.iter().filter(|k| k.trusted_for(&s.submitted_by)).map(|k| k.public.as_str()).collect();
        let revoked: BTreeSet<&str> = keys_now.iter().filter(|k| k.revoked_us.is_some()).map(|k| k.public.as_str()).collect();
        let mut agents = BTreeSet::new();
        let mut versions = BTreeSet::new();
        let mut executors = BTreeSet::new();
        let mut images = BTreeSet::new();
        let mut keys = BTreeSet::new();
        let mut revoked_keys = BTreeSet::new();
        let mut judge = BTreeMap::new();
        let mut all_trusted = !received.is_empty();
        for b in received {
            if let Some(m) = &b.manifest {
                agents.insert(m.agent.id.clone());
                versions.insert(m.agent.version.clone());
                executors.insert(match &m.executor.host {
                    Some(h) => format!("{} on {h}", m.executor.kind),
                    None => m.executor.kind.clone(),
                });
                images.extend(m.executor.image_digest.clone());
            }
            if let Some(v) = &b.verdict {
                judge.extend(v.versions.clone());
            }
            match (&b.runner_key, &b.runner_public) {
                (Some(k), Some(public)) => {
                    all_trusted &= trusted.contains(public.as_str());
                    keys.insert(k.clone());
                    if revoked.contains(public.as_str()) {
                        revoked_keys.insert(k.clone());
                    }
                }
                _ => all_trusted = false,
            }
        }
        let only = |kind: fn(&AgentCell) -> bool| !agents.is_empty() && agents.iter().all(|a: &String| AgentCell::parse(a).is_ok_and(|c| kind(&c)));
        Ok(Provenance {
            submission: s.id.clone(),
            benchmark: s.benchmark.clone(),
            submitted_by: s.submitted_by.clone(),
            submitted_us: s.created_us,
            approved_by: (s.status == SubmissionStatus::Approved).then(|| s.decided_by.clone()).flatten(),
            approved_us: (s.status == SubmissionStatus::Approved).then_some(s.decided_us).flatten(),
            scripted: only(|c| matches!(c, AgentCell::Scripted { .. })),
            simulated: only(AgentCell::is_simulated),
            agents: agents.into_iter().collect(),
            versions: versions.into_iter().collect(),
            executors: executors.into_iter().collect(),
            image_digests: images.into_iter().collect(),
            runner: if all_trusted { "trusted" } else { "self-reported" }.into(),
            runner_keys: keys.into_iter().collect(),
            revoked_runner_keys: revoked_keys.into_iter().collect(),
            rejudged: true,
            judge,
            last_rejudged_us: s.rejudged.as_ref().map(|r| r.at_us),
        })
    }

    /// Approved submissions to benchmarks published from `experiment`, each with its records.
    pub fn approved_cells(&self, experiment: &str) -> Result<Vec<(Provenance, Vec<RunRecord>)>> {
        let names: BTreeSet<String> = self.benchmarks()?.into_iter().filter(|b| b.experiment == experiment).map(|b| b.name).collect();
        let mut stmt = self.conn.prepare(&format!("{SUBMISSION_SQL} WHERE status = 'approved' ORDER BY created_us DESC, id"))?;
        let approved: Vec<CellSubmission> = stmt.query_map([], submission_row)?.collect::<Result<_, _>>()?;
        let mut out = Vec::new();
        for s in approved.into_iter().filter(|s| names.contains(&s.benchmark)) {
            let received = self.received(&s.id)?;
            out.push((self.provenance(&s, &received)?, self.submission_records(&s, &received)?));
        }
        Ok(out)
    }

    /// The bundle `digest` as received for a submission, in the shape of a bundle uploaded on
    /// its own (for the trace viewer).
    pub fn cell_bundle_as_upload(&self, digest: &str) -> Result<Option<super::uploads::Upload>> {
        let row = self
            .conn
            .query_row(
                "SELECT b.bundle, b.received_us, b.manifest, b.verdict, b.runner_key, b.problem, b.runner_public, s.submitted_by, s.framework, s.model
                 FROM cell_bundles b JOIN cell_submissions s ON s.id = b.submission WHERE b.bundle = ?1 AND b.verdict IS NOT NULL
                 ORDER BY s.status = 'approved' DESC, b.received_us DESC LIMIT 1",
                [digest],
                |r| Ok((received_row(r)?, r.get::<_, String>("submitted_by")?, r.get::<_, String>("framework")?, r.get::<_, String>("model")?)),
            )
            .optional()?;
        Ok(row.and_then(|(b, by, framework, model)| {
            let (m, v) = (b.manifest?, b.verdict?);
            Some(super::uploads::Upload {
                bundle: b.bundle,
                run_id: m.run_id,
                scenario_hash: m.scenario.hash,
                agent: m.agent.id,
                framework,
                model,
                variant: m.variant,
                overeager: v.overeager,
                verdict: v,
                claimed: None,
                uploaded_by: by,
                uploaded_us: b.received_us,
            })
        }))
    }

    /// Trusts a runner key (again, if it was revoked) and registers it to `account`: bundles it
    /// signs are accepted only in that account's submissions. A key registered to another
    /// account is not moved silently.
    pub fn trust_runner(&mut self, key_id: &str, public: &str, owner: Option<&str>, account: &str, move_account: bool) -> Result<()> {
        if let Some(k) = self.runner_keys()?.into_iter().find(|k| k.public == public)
            && let Some(other) = k.account.filter(|a| a != account)
            && !move_account
        {
            bail!("runner key {key_id} is registered to account `{other}`; pass --move to register it to `{account}` instead");
        }
        self.conn.execute(
            "INSERT INTO runner_keys (key_id, public, owner, account, added_us) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (key_id) DO UPDATE SET public = excluded.public, owner = excluded.owner, account = excluded.account, revoked_us = NULL",
            params![key_id, public, owner, account, now_us() as i64],
        )?;
        Ok(())
    }

    /// Stops trusting a runner key (by key id or public key); cells it signed become
    /// self-reported at once.
    pub fn revoke_runner(&mut self, key: &str) -> Result<RunnerKey> {
        let n = self.conn.execute("UPDATE runner_keys SET revoked_us = ?2 WHERE (key_id = ?1 OR public = ?1) AND revoked_us IS NULL", params![key, now_us() as i64])?;
        if n == 0 {
            bail!("runner key {key} is not trusted here; `overeager runner list` (or GET /api/runners) shows the keys");
        }
        Ok(self.runner_keys()?.into_iter().find(|k| k.key_id == key || k.public == key).expect("just revoked"))
    }

    /// Public keys of the runner keys trusted now for bundles `account` submits.
    pub fn trusted_runner_keys(&self, account: &str) -> Result<BTreeSet<String>> {
        Ok(self.runner_keys()?.into_iter().filter(|k| k.trusted_for(account)).map(|k| k.public).collect())
    }

    /// The registered runner key with this public key (hex), trusted or revoked.
    pub fn runner_by_public(&self, public: &str) -> Result<Option<RunnerKey>> {
        Ok(self.runner_keys()?.into_iter().find(|k| k.public == public))
    }

    /// Every runner key this store knows, trusted or revoked.
    pub fn runner_keys(&self) -> Result<Vec<RunnerKey>> {
        let mut stmt = self.conn.prepare("SELECT key_id, public, owner, added_us, revoked_us, account FROM runner_keys ORDER BY key_id")?;
        let rows = stmt.query_map([], |r| {
            Ok(RunnerKey {
                key_id: r.get("key_id")?,
                public: r.get("public")?,
                owner: r.get("owner")?,
                added_us: r.get::<_, i64>("added_us")? as u64,
                revoked_us: r.get::<_, Option<i64>>("revoked_us")?.map(|v| v as u64),
                account: r.get("account")?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
