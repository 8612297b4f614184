//! What the public leaderboard keeps: benchmarks (a published scenario set with the variants and
//! replicates it asks for), whole-cell submissions with the bundles received for them and the
//! server's verdicts, and the runner keys this server trusts.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result, bail};
use overeager_core::bundle::{BundleManifest, ScenarioRef};
use overeager_core::{Variant, Verdict};
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{RunRecord, Store, now_us};

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
}

impl Benchmark {
    /// Runs a complete cell holds.
    pub fn runs_per_cell(&self) -> u64 {
        self.scenarios.len() as u64 * self.variants.len() as u64 * self.replicates as u64
    }
}

/// Where a submission is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubmissionStatus {
    /// Open: bundles are being sent, or the last verification found problems.
    Draft,
    /// Complete and consistent; waiting for an admin.
    Verified,
    /// On the leaderboard.
    Approved,
    Rejected,
}

impl SubmissionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SubmissionStatus::Draft => "draft",
            SubmissionStatus::Verified => "verified",
            SubmissionStatus::Approved => "approved",
            SubmissionStatus::Rejected => "rejected",
        }
    }

    fn parse(s: &str) -> rusqlite::Result<SubmissionStatus> {
        Ok(match s {
            "draft" => SubmissionStatus::Draft,
            "verified" => SubmissionStatus::Verified,
            "approved" => SubmissionStatus::Approved,
            "rejected" => SubmissionStatus::Rejected,
            other => return Err(rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, format!("unknown submission status `{other}`").into())),
        })
    }
}

/// A run the submitter says the cell holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeclaredRun {
    /// sha256 of the packed bundle (`.oeb`).
    pub bundle: String,
    /// The run id in the submitter's store.
    pub run: String,
    /// The verdict the submitter's store has: kept to show how it compares, never used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed: Option<serde_json::Value>,
}

/// One problem a verification found, with the runs and bundles it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// `missing`, `duplicate`, `unexpected`, `wrong_scenario`, `inconsistent_agent`,
    /// `wrong_cell`, `wrong_timeout`, `not_uploaded`, `refused` or `submitted_elsewhere`.
    pub kind: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bundles: Vec<String>,
}

/// What a verification of a whole cell found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// No problems: the submission is verified.
    pub ok: bool,
    pub checked_us: u64,
    /// Runs the benchmark asks for, runs declared, and bundles received.
    pub expected: u64,
    pub declared: u64,
    pub received: u64,
    /// Of the received, judged bundles: timed out, overeager, incomplete.
    pub timeouts: u64,
    pub overeager: u64,
    pub incomplete: u64,
    /// Runs whose claimed verdict says otherwise than the server's (the server's counts).
    pub claims_overruled: Vec<String>,
    pub problems: Vec<Problem>,
}

/// What re-judging an approved submission changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejudged {
    pub at_us: u64,
    /// Module id → version of the judge that re-judged.
    pub judge: BTreeMap<String, String>,
    pub bundles: u64,
    /// Runs whose outcome changed: (run, bundle, before, after).
    pub moved: Vec<Moved>,
}

/// A run whose outcome changed on re-judging.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    pub run: String,
    pub bundle: String,
    pub variant: Variant,
    pub before: overeager_core::Outcome,
    pub after: overeager_core::Outcome,
}

/// A whole-cell submission.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellSubmission {
    pub id: String,
    pub benchmark: String,
    pub framework: String,
    pub model: String,
    pub status: SubmissionStatus,
    pub submitted_by: String,
    pub declared: Vec<DeclaredRun>,
    pub report: Option<VerifyReport>,
    /// Bundle bodies received whole (a resumed upload does not send again what arrived).
    pub uploads: u64,
    pub created_us: u64,
    pub updated_us: u64,
    pub decided_by: Option<String>,
    pub decided_us: Option<u64>,
    pub note: Option<String>,
    pub rejudged: Option<Rejudged>,
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
    /// Key id of an intact runner signature.
    pub runner_key: Option<String>,
    /// Why the bundle cannot count.
    pub problem: Option<String>,
}

/// A runner key this server knows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunnerKey {
    pub key_id: String,
    pub public: String,
    pub owner: Option<String>,
    pub added_us: u64,
    pub revoked_us: Option<u64>,
}

/// Who ran a submitted cell, how, and what the server made of it: shown beside its row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Provenance {
    pub submission: String,
    pub benchmark: String,
    pub submitted_by: String,
    pub submitted_us: u64,
    pub approved_by: Option<String>,
    pub approved_us: Option<u64>,
    /// Agent ids, framework versions, executors, image digests and hosts seen in the bundles.
    pub agents: Vec<String>,
    pub versions: Vec<String>,
    pub executors: Vec<String>,
    pub image_digests: Vec<String>,
    /// `trusted` when every bundle carries an intact signature by a trusted runner key,
    /// `self-reported` otherwise.
    pub runner: String,
    pub runner_keys: Vec<String>,
    /// Every verdict is the server's own.
    pub rejudged: bool,
    /// Module id → version of the predicates that judged it.
    pub judge: BTreeMap<String, String>,
    /// The last re-judging after the predicates changed, if any.
    pub last_rejudged_us: Option<u64>,
}

fn json_col<T: serde::de::DeserializeOwned>(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<T>> {
    let text: Option<String> = r.get(i)?;
    text.map(|t| serde_json::from_str(&t).map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, e.into()))).transpose()
}

const SUBMISSION_SQL: &str = "SELECT id, benchmark, framework, model, status, submitted_by, declared, report, uploads, created_us, updated_us, decided_by, decided_us, note, rejudged FROM cell_submissions";

fn submission_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CellSubmission> {
    let status: String = r.get(4)?;
    Ok(CellSubmission {
        id: r.get(0)?,
        benchmark: r.get(1)?,
        framework: r.get(2)?,
        model: r.get(3)?,
        status: SubmissionStatus::parse(&status)?,
        submitted_by: r.get(5)?,
        declared: json_col(r, 6)?.unwrap_or_default(),
        report: json_col(r, 7)?,
        uploads: r.get::<_, i64>(8)? as u64,
        created_us: r.get::<_, i64>(9)? as u64,
        updated_us: r.get::<_, i64>(10)? as u64,
        decided_by: r.get(11)?,
        decided_us: r.get::<_, Option<i64>>(12)?.map(|v| v as u64),
        note: r.get(13)?,
        rejudged: json_col(r, 14)?,
    })
}

fn received_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ReceivedBundle> {
    Ok(ReceivedBundle {
        bundle: r.get(0)?,
        received_us: r.get::<_, i64>(1)? as u64,
        manifest: json_col(r, 2)?,
        verdict: json_col(r, 3)?,
        runner_key: r.get(4)?,
        problem: r.get(5)?,
    })
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
    pub fn create_benchmark(&mut self, name: &str, experiment: &str) -> Result<Benchmark> {
        if !overeager_core::plan::is_slug(name) {
            bail!("benchmark name `{name}`: use lowercase letters, digits, '-', '_' or '.'");
        }
        let e = self.require_experiment(experiment)?;
        let scenarios: Vec<ScenarioRef> = self.experiment_scenarios(experiment)?.into_iter().map(|(hash, id)| ScenarioRef { id, hash }).collect();
        if scenarios.is_empty() {
            bail!("experiment `{experiment}` has no runs; run it before publishing it as a benchmark");
        }
        let timeout = crate::run::parse_duration(&e.plan.timeout).map_err(anyhow::Error::msg).with_context(|| format!("the timeout of experiment `{experiment}`"))?;
        let b = Benchmark {
            name: name.to_string(),
            experiment: experiment.to_string(),
            title: e.title.clone(),
            scenarios,
            variants: e.plan.variants.clone(),
            replicates: e.plan.replicates,
            timeout_ms: timeout.as_millis() as u64,
            created_us: now_us(),
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
        let declared_json = serde_json::to_string(declared)?;
        let (id, resumed) = match open {
            Some(id) => {
                tx.execute("UPDATE cell_submissions SET declared = ?2, status = 'draft', report = NULL, updated_us = ?3 WHERE id = ?1", params![id, declared_json, now as i64])?;
                let keep: BTreeSet<&str> = declared.iter().map(|d| d.bundle.as_str()).collect();
                let held: Vec<String> = tx.prepare("SELECT bundle FROM cell_bundles WHERE submission = ?1")?.query_map([&id], |r| r.get(0))?.collect::<Result<_, _>>()?;
                for b in held.iter().filter(|b| !keep.contains(b.as_str())) {
                    tx.execute("DELETE FROM cell_bundles WHERE submission = ?1 AND bundle = ?2", params![id, b])?;
                }
                (id, true)
            }
            None => {
                let id = new_submission_id()?;
                tx.execute(
                    "INSERT INTO cell_submissions (id, benchmark, framework, model, status, submitted_by, declared, created_us, updated_us)
                     VALUES (?1, ?2, ?3, ?4, 'draft', ?5, ?6, ?7, ?7)",
                    params![id, benchmark, framework, model, who, declared_json, now as i64],
                )?;
                (id, false)
            }
        };
        tx.commit()?;
        Ok((self.cell_submission(&id)?.expect("just written"), resumed))
    }

    /// A submission by id.
    pub fn cell_submission(&self, id: &str) -> Result<Option<CellSubmission>> {
        Ok(self.conn.query_row(&format!("{SUBMISSION_SQL} WHERE id = ?1"), [id], submission_row).optional()?)
    }

    /// Every submission, newest first.
    pub fn cell_submissions(&self) -> Result<Vec<CellSubmission>> {
        let mut stmt = self.conn.prepare(&format!("{SUBMISSION_SQL} ORDER BY created_us DESC, id"))?;
        Ok(stmt.query_map([], submission_row)?.collect::<Result<_, _>>()?)
    }

    /// The bundles received for a submission, in the order they arrived.
    pub fn received(&self, id: &str) -> Result<Vec<ReceivedBundle>> {
        let mut stmt = self.conn.prepare("SELECT bundle, received_us, manifest, verdict, runner_key, problem FROM cell_bundles WHERE submission = ?1 ORDER BY received_us, bundle")?;
        Ok(stmt.query_map([id], received_row)?.collect::<Result<_, _>>()?)
    }

    /// Records a bundle received whole for a submission (counted in its uploads), which goes
    /// back to draft until verified again.
    pub fn put_received(&mut self, id: &str, b: &ReceivedBundle) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT OR REPLACE INTO cell_bundles (submission, bundle, received_us, manifest, verdict, runner_key, problem) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                id,
                b.bundle,
                b.received_us as i64,
                b.manifest.as_ref().map(serde_json::to_string).transpose()?,
                b.verdict.as_ref().map(serde_json::to_string).transpose()?,
                b.runner_key,
                b.problem
            ],
        )?;
        tx.execute("UPDATE cell_submissions SET uploads = uploads + 1, status = 'draft', report = NULL, updated_us = ?2 WHERE id = ?1", params![id, now_us() as i64])?;
        tx.commit()?;
        Ok(())
    }

    /// Records the result of verifying a submission: verified when it has no problems, a
    /// draft otherwise.
    pub fn set_verification(&mut self, id: &str, report: &VerifyReport) -> Result<CellSubmission> {
        let status = if report.ok { SubmissionStatus::Verified } else { SubmissionStatus::Draft };
        self.conn.execute(
            "UPDATE cell_submissions SET report = ?2, status = ?3, updated_us = ?4 WHERE id = ?1",
            params![id, serde_json::to_string(report)?, status.as_str(), now_us() as i64],
        )?;
        Ok(self.cell_submission(id)?.expect("exists"))
    }

    /// Approves or rejects a verified submission.
    pub fn decide_cell_submission(&mut self, id: &str, approve: bool, who: &str, note: Option<&str>) -> Result<CellSubmission> {
        let status = if approve { SubmissionStatus::Approved } else { SubmissionStatus::Rejected };
        let n = self.conn.execute(
            "UPDATE cell_submissions SET status = ?2, decided_by = ?3, decided_us = ?4, note = ?5, updated_us = ?4 WHERE id = ?1 AND status = 'verified'",
            params![id, status.as_str(), who, now_us() as i64, note],
        )?;
        if n == 0 {
            bail!("submission {id} is not verified");
        }
        Ok(self.cell_submission(id)?.expect("exists"))
    }

    /// Other submissions (verified or approved) that hold any of these bundles: (bundle, submission).
    pub fn bundles_elsewhere(&self, id: &str, bundles: &[String]) -> Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare(
            "SELECT b.submission FROM cell_bundles b JOIN cell_submissions s ON s.id = b.submission
             WHERE b.bundle = ?1 AND b.submission <> ?2 AND s.status IN ('verified', 'approved') ORDER BY b.submission",
        )?;
        let mut out = Vec::new();
        for d in bundles {
            for other in stmt.query_map(params![d, id], |r| r.get::<_, String>(0))? {
                out.push((d.clone(), other?));
            }
        }
        Ok(out)
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
                simulated: m.agent.id.starts_with("sim:"),
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
            });
        }
        Ok(out)
    }

    /// The provenance of a submission, from its bundles (`received`, from [`Store::received`])
    /// and the runner keys trusted now.
    pub fn provenance(&self, s: &CellSubmission, received: &[ReceivedBundle]) -> Result<Provenance> {
        let trusted: BTreeSet<String> = self.runner_keys()?.into_iter().filter(|k| k.revoked_us.is_none()).map(|k| k.key_id).collect();
        let mut agents = BTreeSet::new();
        let mut versions = BTreeSet::new();
        let mut executors = BTreeSet::new();
        let mut images = BTreeSet::new();
        let mut keys = BTreeSet::new();
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
            match &b.runner_key {
                Some(k) => {
                    all_trusted &= trusted.contains(k);
                    keys.insert(k.clone());
                }
                None => all_trusted = false,
            }
        }
        Ok(Provenance {
            submission: s.id.clone(),
            benchmark: s.benchmark.clone(),
            submitted_by: s.submitted_by.clone(),
            submitted_us: s.created_us,
            approved_by: (s.status == SubmissionStatus::Approved).then(|| s.decided_by.clone()).flatten(),
            approved_us: (s.status == SubmissionStatus::Approved).then_some(s.decided_us).flatten(),
            agents: agents.into_iter().collect(),
            versions: versions.into_iter().collect(),
            executors: executors.into_iter().collect(),
            image_digests: images.into_iter().collect(),
            runner: if all_trusted { "trusted" } else { "self-reported" }.into(),
            runner_keys: keys.into_iter().collect(),
            rejudged: true,
            judge,
            last_rejudged_us: s.rejudged.as_ref().map(|r| r.at_us),
        })
    }

    /// Approved submissions to benchmarks published from `experiment`, each with its records.
    pub fn approved_cells(&self, experiment: &str) -> Result<Vec<(Provenance, Vec<RunRecord>)>> {
        let names: BTreeSet<String> = self.benchmarks()?.into_iter().filter(|b| b.experiment == experiment).map(|b| b.name).collect();
        let mut out = Vec::new();
        for s in self.cell_submissions()?.into_iter().filter(|s| s.status == SubmissionStatus::Approved && names.contains(&s.benchmark)) {
            let received = self.received(&s.id)?;
            out.push((self.provenance(&s, &received)?, self.submission_records(&s, &received)?));
        }
        Ok(out)
    }

    /// The bundle `digest` as received for a submission, in the shape of a single submitted
    /// bundle (for the trace viewer).
    pub fn cell_bundle_as_submission(&self, digest: &str) -> Result<Option<super::web::Submission>> {
        let row = self
            .conn
            .query_row(
                "SELECT b.bundle, b.received_us, b.manifest, b.verdict, b.runner_key, b.problem, s.submitted_by, s.framework, s.model
                 FROM cell_bundles b JOIN cell_submissions s ON s.id = b.submission WHERE b.bundle = ?1 AND b.verdict IS NOT NULL
                 ORDER BY s.status = 'approved' DESC, b.received_us DESC LIMIT 1",
                [digest],
                |r| Ok((received_row(r)?, r.get::<_, String>(6)?, r.get::<_, String>(7)?, r.get::<_, String>(8)?)),
            )
            .optional()?;
        Ok(row.and_then(|(b, by, framework, model)| {
            let (m, v) = (b.manifest?, b.verdict?);
            Some(super::web::Submission {
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
                submitted_by: by,
                submitted_us: b.received_us,
            })
        }))
    }

    /// Trusts a runner key (again, if it was revoked).
    pub fn trust_runner(&mut self, key_id: &str, public: &str, owner: Option<&str>) -> Result<()> {
        self.conn.execute(
            "INSERT INTO runner_keys (key_id, public, owner, added_us) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (key_id) DO UPDATE SET public = excluded.public, owner = excluded.owner, revoked_us = NULL",
            params![key_id, public, owner, now_us() as i64],
        )?;
        Ok(())
    }

    /// Stops trusting a runner key; cells it signed become self-reported.
    pub fn revoke_runner(&mut self, key_id: &str) -> Result<()> {
        let n = self.conn.execute("UPDATE runner_keys SET revoked_us = ?2 WHERE key_id = ?1 AND revoked_us IS NULL", params![key_id, now_us() as i64])?;
        if n == 0 {
            bail!("runner key {key_id} is not trusted here; `overeager runner list` shows the keys");
        }
        Ok(())
    }

    /// Every runner key this store knows, trusted or revoked.
    pub fn runner_keys(&self) -> Result<Vec<RunnerKey>> {
        let mut stmt = self.conn.prepare("SELECT key_id, public, owner, added_us, revoked_us FROM runner_keys ORDER BY key_id")?;
        let rows = stmt.query_map([], |r| {
            Ok(RunnerKey { key_id: r.get(0)?, public: r.get(1)?, owner: r.get(2)?, added_us: r.get::<_, i64>(3)? as u64, revoked_us: r.get::<_, Option<i64>>(4)?.map(|v| v as u64) })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
