//! The store: scenarios, experiments, runs, verdicts, human labels and imported transfer
//! results in SQLite (WAL, versioned schema), bundles on disk by content digest.
//!
//! A run row is written when its experiment is created (status `pending`) and becomes `done`
//! in one transaction together with its verdict, after its bundle is safely in the object
//! store. A process killed at any point therefore leaves each run either pending (redone on
//! the next `experiment run`) or done with a bundle and a verdict, never in between.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use overeager_core::model::usage::exact_usd;
use overeager_core::bundle::BundleManifest;
use overeager_core::model::PlayedBy;
use overeager_core::model::usage::{RunUsage, Usage};
use overeager_core::plan::Plan;
use overeager_core::{Variant, Verdict};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use overeager_scenario::LoadedScenario;

pub use overeager_wire::experiment::Progress;

pub mod board;
pub mod labels;
pub mod predicates;
pub mod runs;
pub mod scenarios;
pub mod search;
pub mod tokens;
pub mod uploads;
pub mod versions;

/// Run counts of an experiment per (framework, model, status), with the timed-out ones.
pub(crate) const PROGRESS_SQL: &str = "SELECT framework, model, status, COUNT(*), SUM(COALESCE(timed_out, 0)) FROM runs WHERE experiment = ?1
     GROUP BY framework, model, status ORDER BY framework, model, status";

/// Schema migrations, applied in order; `PRAGMA user_version` is the number applied. Never
/// edit one that has shipped: add the next.
const MIGRATIONS: &[&str] = &[
    // 1: the initial schema.
    r#"
    CREATE TABLE scenarios (
        hash      TEXT PRIMARY KEY,
        id        TEXT NOT NULL,
        title     TEXT NOT NULL,
        archetype TEXT NOT NULL,
        axes      TEXT NOT NULL,          -- JSON object axis → level
        scenario  TEXT NOT NULL           -- the scenario as JSON
    );
    CREATE TABLE experiments (
        id         TEXT PRIMARY KEY,
        title      TEXT NOT NULL,
        plan       TEXT NOT NULL,         -- the checked plan as JSON
        plan_hash  TEXT NOT NULL,
        plan_file  TEXT NOT NULL,
        created_us INTEGER NOT NULL
    );
    CREATE TABLE runs (
        id            TEXT PRIMARY KEY,
        experiment    TEXT NOT NULL REFERENCES experiments(id),
        agent         TEXT NOT NULL,
        framework     TEXT NOT NULL,
        model         TEXT NOT NULL,
        simulated     INTEGER NOT NULL,
        scenario_hash TEXT NOT NULL REFERENCES scenarios(hash),
        variant       TEXT NOT NULL CHECK (variant IN ('consent_kept', 'consent_stripped')),
        replicate     INTEGER NOT NULL,
        seed          INTEGER NOT NULL,
        status        TEXT NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
        attempts      INTEGER NOT NULL DEFAULT 0,
        bundle        TEXT,               -- sha256 of the packed bundle in the object store
        timed_out     INTEGER,
        duration_ms   INTEGER,
        error         TEXT,
        finished_us   INTEGER,
        UNIQUE (experiment, framework, model, scenario_hash, variant, replicate)
    );
    CREATE INDEX runs_by_status ON runs (experiment, status);
    CREATE TABLE verdicts (
        run                 TEXT PRIMARY KEY REFERENCES runs(id),
        overeager           INTEGER NOT NULL,
        success             INTEGER,
        conditional_success INTEGER,
        severity_total      INTEGER NOT NULL,
        critical            INTEGER NOT NULL,
        traps               TEXT NOT NULL,  -- JSON [[id, severity], …]
        complete            INTEGER NOT NULL,
        verdict             TEXT NOT NULL   -- the full verdict as JSON
    );
    CREATE TABLE labels (
        run    TEXT NOT NULL REFERENCES runs(id),
        rater  TEXT NOT NULL,
        label  INTEGER NOT NULL,
        PRIMARY KEY (run, rater)
    );
    CREATE TABLE transfer_cases (
        id              TEXT PRIMARY KEY,
        source_agent    TEXT NOT NULL,
        execution_agent TEXT NOT NULL,
        domain          TEXT NOT NULL,
        severity        TEXT NOT NULL,
        strategy        TEXT,
        score           REAL,
        instruction     TEXT,
        origin          TEXT NOT NULL      -- the directory it was imported from
    );
    CREATE TABLE transfer_runs (
        case_id        TEXT NOT NULL REFERENCES transfer_cases(id),
        target_agent   TEXT NOT NULL,
        run            INTEGER NOT NULL,
        unsafe         INTEGER NOT NULL,
        risk_severity  TEXT,
        PRIMARY KEY (case_id, target_agent, run)
    );
    "#,
    // 2: what the web app and its API add: the fixture tree of each scenario, validator results,
    // API tokens, uploaded predicates and submitted bundles.
    r#"
    ALTER TABLE scenarios ADD COLUMN fixture TEXT;   -- JSON [FixtureEntry]
    CREATE TABLE validations (
        scenario_hash TEXT PRIMARY KEY REFERENCES scenarios(hash),
        admitted      INTEGER NOT NULL,
        rejection     TEXT,
        plays         TEXT NOT NULL,              -- JSON [{play, fired, success, run}]
        validated_us  INTEGER NOT NULL
    );
    CREATE TABLE tokens (
        hash       TEXT PRIMARY KEY,              -- sha256 of the token; the token itself is never stored
        name       TEXT NOT NULL UNIQUE,
        role       TEXT NOT NULL CHECK (role IN ('writer', 'admin')),
        created_us INTEGER NOT NULL
    );
    CREATE TABLE predicates (
        digest      TEXT PRIMARY KEY,             -- sha256 of the module bytes
        id          TEXT NOT NULL,
        version     TEXT NOT NULL,
        key_id      TEXT NOT NULL,
        owner       TEXT,
        status      TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
        predicates  TEXT NOT NULL,                -- JSON [name]
        self_test   TEXT NOT NULL,                -- JSON summary of the self-test
        uploaded_by TEXT NOT NULL,
        uploaded_us INTEGER NOT NULL,
        decided_by  TEXT,
        decided_us  INTEGER
    );
    CREATE TABLE submissions (
        bundle        TEXT PRIMARY KEY,           -- sha256 of the packed bundle
        run_id        TEXT NOT NULL,
        scenario_hash TEXT NOT NULL REFERENCES scenarios(hash),
        agent         TEXT NOT NULL,
        framework     TEXT NOT NULL,
        model         TEXT NOT NULL,
        variant       TEXT NOT NULL,
        overeager     INTEGER NOT NULL,
        verdict       TEXT NOT NULL,              -- the server's own verdict
        claimed       TEXT,                       -- what the client said, kept only to show it was ignored
        submitted_by  TEXT NOT NULL,
        submitted_us  INTEGER NOT NULL
    );
    CREATE INDEX runs_by_experiment ON runs(experiment, status);
    CREATE INDEX runs_by_bundle ON runs(bundle);
    "#,
    // 3: indexes for every query the API runs (checked with EXPLAIN QUERY PLAN in the tests).
    r#"
    CREATE INDEX runs_by_scenario ON runs (scenario_hash, status);
    CREATE INDEX runs_progress ON runs (experiment, framework, model, status, timed_out);
    -- (experiment, rowid) order: a page of an experiment's runs without sorting all of them.
    CREATE INDEX runs_in_order ON runs (experiment);
    -- The same columns as runs_by_experiment (migration 2).
    DROP INDEX runs_by_status;
    CREATE INDEX scenarios_by_id ON scenarios (id);
    CREATE INDEX submissions_by_time ON submissions (submitted_us);
    "#,
    // 4: where each run executed, and what went wrong with the engines of a pool.
    r#"
    ALTER TABLE runs ADD COLUMN host TEXT;        -- the engine or node of the last attempt
    CREATE TABLE host_events (
        experiment TEXT NOT NULL REFERENCES experiments(id),
        host       TEXT NOT NULL,
        at_us      INTEGER NOT NULL,
        error      TEXT NOT NULL,
        requeued   TEXT NOT NULL                 -- JSON [run id]: runs it had that went back to pending
    );
    CREATE INDEX host_events_by_experiment ON host_events (experiment, at_us);
    "#,
    // 5: public leaderboard submissions: benchmarks, whole-cell submissions and their
    // bundles, and the runner keys this server trusts.
    r#"
    CREATE TABLE benchmarks (
        name       TEXT PRIMARY KEY,
        experiment TEXT NOT NULL REFERENCES experiments(id),
        manifest   TEXT NOT NULL,                 -- JSON Benchmark
        created_us INTEGER NOT NULL
    );
    CREATE TABLE cell_submissions (
        id           TEXT PRIMARY KEY,
        benchmark    TEXT NOT NULL REFERENCES benchmarks(name),
        framework    TEXT NOT NULL,
        model        TEXT NOT NULL,
        status       TEXT NOT NULL CHECK (status IN ('draft', 'verified', 'approved', 'rejected')),
        submitted_by TEXT NOT NULL,
        declared     TEXT NOT NULL,               -- JSON [DeclaredRun]
        report       TEXT,                        -- JSON VerifyReport of the last verification
        uploads      INTEGER NOT NULL DEFAULT 0,  -- bundle bodies received whole
        created_us   INTEGER NOT NULL,
        updated_us   INTEGER NOT NULL,
        decided_by   TEXT,
        decided_us   INTEGER,
        note         TEXT,
        rejudged     TEXT                         -- JSON Rejudged of the last re-judging
    );
    CREATE INDEX cell_submissions_by_benchmark ON cell_submissions (benchmark, status);
    CREATE TABLE cell_bundles (
        submission  TEXT NOT NULL REFERENCES cell_submissions(id),
        bundle      TEXT NOT NULL,                -- sha256 of the packed bundle
        received_us INTEGER NOT NULL,
        manifest    TEXT,                         -- bundle.json; null when unreadable
        verdict     TEXT,                         -- the server's verdict; null when refused
        runner_key  TEXT,                         -- key id of an intact runner signature
        problem     TEXT,                         -- why the bundle cannot count
        PRIMARY KEY (submission, bundle)
    );
    CREATE INDEX cell_bundles_by_bundle ON cell_bundles (bundle);
    CREATE TABLE runner_keys (
        key_id     TEXT PRIMARY KEY,
        public     TEXT NOT NULL,
        owner      TEXT,
        added_us   INTEGER NOT NULL,
        revoked_us INTEGER
    );
    "#,
    // 6: leaderboard integrity. A cell's declared runs get a table of their own (lists never
    // read them; pages read them in parts), counts are kept at write time, a submission can be
    // withdrawn or superseded, every bundle digest belongs to the account that first uploaded
    // it, and a runner key is registered to the account that may submit what it signs.
    r#"
    CREATE TABLE cell_submissions_6 (
        id             TEXT PRIMARY KEY,
        benchmark      TEXT NOT NULL REFERENCES benchmarks(name),
        framework      TEXT NOT NULL,
        model          TEXT NOT NULL,
        status         TEXT NOT NULL CHECK (status IN ('draft', 'verified', 'approved', 'rejected', 'withdrawn', 'superseded')),
        submitted_by   TEXT NOT NULL,
        declared_count INTEGER NOT NULL,
        problem_count  INTEGER,                   -- problems the last verification found
        report         TEXT,                      -- JSON VerifyReport of the last verification
        uploads        INTEGER NOT NULL DEFAULT 0,
        created_us     INTEGER NOT NULL,
        updated_us     INTEGER NOT NULL,
        decided_by     TEXT,
        decided_us     INTEGER,
        note           TEXT,
        rejudged       TEXT,
        superseded_by  TEXT                       -- the later approved submission of the same cell and submitter
    );
    INSERT INTO cell_submissions_6
        SELECT id, benchmark, framework, model, status, submitted_by, json_array_length(declared),
               CASE WHEN report IS NULL THEN NULL ELSE json_array_length(report, '$.problems') END,
               report, uploads, created_us, updated_us, decided_by, decided_us, note, rejudged, NULL
        FROM cell_submissions;
    CREATE TABLE cell_declared (
        submission TEXT NOT NULL REFERENCES cell_submissions(id),
        pos        INTEGER NOT NULL,              -- order of declaration
        bundle     TEXT NOT NULL,
        run        TEXT NOT NULL,
        claimed    TEXT,                          -- JSON: the submitter's verdict, never used
        PRIMARY KEY (submission, bundle)
    );
    INSERT INTO cell_declared
        SELECT c.id, CAST(j.key AS INTEGER), j.value ->> '$.bundle', j.value ->> '$.run', NULLIF(j.value -> '$.claimed', 'null')
        FROM cell_submissions c, json_each(c.declared) j;
    CREATE UNIQUE INDEX cell_declared_in_order ON cell_declared (submission, pos);
    DROP TABLE cell_submissions;
    ALTER TABLE cell_submissions_6 RENAME TO cell_submissions;
    CREATE INDEX cell_submissions_by_benchmark ON cell_submissions (benchmark, status);
    CREATE INDEX cell_submissions_by_time ON cell_submissions (created_us, id);
    CREATE INDEX cell_submissions_by_cell ON cell_submissions (benchmark, framework, model, submitted_by);
    ALTER TABLE cell_bundles ADD COLUMN runner_public TEXT;   -- public key (hex) of an intact runner signature
    ALTER TABLE runner_keys ADD COLUMN account TEXT;          -- the token name that may submit what it signs
    CREATE UNIQUE INDEX runner_keys_by_public ON runner_keys (public);
    CREATE TABLE bundle_owners (
        bundle   TEXT PRIMARY KEY,                -- sha256 of the packed bundle
        account  TEXT NOT NULL,                   -- the token name that first uploaded it
        first_us INTEGER NOT NULL
    );
    INSERT OR IGNORE INTO bundle_owners
        SELECT b.bundle, s.submitted_by, b.received_us FROM cell_bundles b JOIN cell_submissions s ON s.id = b.submission ORDER BY b.received_us;
    INSERT OR IGNORE INTO bundle_owners SELECT bundle, submitted_by, submitted_us FROM submissions ORDER BY submitted_us;
    "#,
    // 7: what each run on a real model used, from its bundle's usage.json: tokens (input not
    // read from the cache, output, cache reads, cache writes) and the cost in US dollars
    // where the model's price was known. NULL for runs on no provider's model.
    r#"
    ALTER TABLE runs ADD COLUMN tokens_input INTEGER;
    ALTER TABLE runs ADD COLUMN tokens_output INTEGER;
    ALTER TABLE runs ADD COLUMN tokens_cache_read INTEGER;
    ALTER TABLE runs ADD COLUMN tokens_cache_write INTEGER;
    ALTER TABLE runs ADD COLUMN cost_usd REAL;
    "#,
    // 8: the search index: each finished run's events (command line, paths, text), trigram
    // tokens so any substring of three characters or more is found from the index; and which
    // runs are indexed (runs recorded before are indexed from their bundles on opening).
    r#"
    CREATE VIRTUAL TABLE run_events USING fts5(run UNINDEXED, seq UNINDEXED, channel UNINDEXED, op UNINDEXED, cmd, paths, body, tokenize = 'trigram');
    CREATE TABLE run_events_indexed (run TEXT PRIMARY KEY REFERENCES runs(id)) WITHOUT ROWID;
    "#,
    // 9: labels made in the app (the rater's call on each fired trap, a comment, when, and
    // where a label came from), review queues (a stratified sample of an experiment's runs, in
    // the order they are reviewed), and reviewer tokens, which label and do nothing else.
    r#"
    ALTER TABLE labels ADD COLUMN traps TEXT;          -- JSON {trap id: the rater agrees it fired rightly}
    ALTER TABLE labels ADD COLUMN comment TEXT;
    ALTER TABLE labels ADD COLUMN labelled_us INTEGER; -- NULL for labels imported before it was kept
    ALTER TABLE labels ADD COLUMN source TEXT;         -- `app`, or the CSV file imported
    CREATE INDEX labels_by_rater ON labels (rater);
    CREATE TABLE review_queues (
        id         TEXT PRIMARY KEY,
        experiment TEXT NOT NULL REFERENCES experiments(id),
        size       INTEGER NOT NULL,                   -- the size asked for
        seed       INTEGER NOT NULL,
        strata     TEXT NOT NULL,                      -- JSON [Stratum]
        created_by TEXT NOT NULL,
        created_us INTEGER NOT NULL
    );
    CREATE INDEX review_queues_by_experiment ON review_queues (experiment);
    CREATE TABLE review_items (
        queue TEXT NOT NULL REFERENCES review_queues(id),
        pos   INTEGER NOT NULL,
        run   TEXT NOT NULL REFERENCES runs(id),
        PRIMARY KEY (queue, pos)
    ) WITHOUT ROWID;
    CREATE TABLE tokens_9 (
        hash       TEXT PRIMARY KEY,
        name       TEXT NOT NULL UNIQUE,
        role       TEXT NOT NULL CHECK (role IN ('reviewer', 'writer', 'admin')),
        created_us INTEGER NOT NULL
    );
    INSERT INTO tokens_9 SELECT hash, name, role, created_us FROM tokens;
    DROP TABLE tokens;
    ALTER TABLE tokens_9 RENAME TO tokens;
    "#,
    // 10: the errors of a run's earlier failed attempts, kept when it is run again (a JSON
    // array, oldest first).
    r#"
    ALTER TABLE runs ADD COLUMN earlier_errors TEXT;
    "#,
    // 11: adaptive allocation (`experiment run --until`): the rule and seed of an experiment's
    // allocation, and every decision in order, with the posterior draws it was taken on, so
    // the allocation can be replayed from the plan and the outcomes.
    r#"
    CREATE TABLE allocations (
        experiment TEXT PRIMARY KEY REFERENCES experiments(id),
        rule       TEXT NOT NULL,
        seed       INTEGER NOT NULL,
        created_us INTEGER NOT NULL
    );
    CREATE TABLE allocation_decisions (
        experiment    TEXT NOT NULL REFERENCES experiments(id),
        seq           INTEGER NOT NULL,
        round         INTEGER NOT NULL,
        framework     TEXT NOT NULL,
        model         TEXT NOT NULL,
        scenario_hash TEXT NOT NULL REFERENCES scenarios(hash),
        replicate     INTEGER NOT NULL,
        draws         TEXT NOT NULL,              -- JSON [rate drawn per variant]
        score         REAL NOT NULL,
        half_width    REAL NOT NULL,
        PRIMARY KEY (experiment, seq)
    ) WITHOUT ROWID;
    "#,
    // 12: what answered a done run's model calls, as its bundle recorded it (JSON PlayedBy;
    // NULL before the run is done, and for runs recorded before it was kept: then the agent
    // id says as much as it can).
    r#"
    ALTER TABLE runs ADD COLUMN played_by TEXT;
    "#,
    // 13: a version per topic, bumped by triggers, so caches of what is computed from the
    // results (runs, verdicts, their scenarios and experiments, approved submitted cells) are
    // not retired by a label and the agreement figures are not retired by anything else; and
    // variance decompositions kept by their input's digest (seconds each at scale, the same
    // for the same runs). A later migration that rebuilds one of these tables must create its
    // triggers again.
    r#"
    CREATE TABLE topic_versions (topic TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO topic_versions (topic, version) VALUES ('results', 0), ('labels', 0);
    CREATE TRIGGER experiments_insert_bumps_results AFTER INSERT ON experiments BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER experiments_update_bumps_results AFTER UPDATE ON experiments BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER experiments_delete_bumps_results AFTER DELETE ON experiments BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER scenarios_insert_bumps_results AFTER INSERT ON scenarios BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER scenarios_update_bumps_results AFTER UPDATE ON scenarios BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER scenarios_delete_bumps_results AFTER DELETE ON scenarios BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER runs_insert_bumps_results AFTER INSERT ON runs BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER runs_update_bumps_results AFTER UPDATE ON runs BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER runs_delete_bumps_results AFTER DELETE ON runs BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER verdicts_insert_bumps_results AFTER INSERT ON verdicts BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER verdicts_update_bumps_results AFTER UPDATE ON verdicts BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER verdicts_delete_bumps_results AFTER DELETE ON verdicts BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER benchmarks_insert_bumps_results AFTER INSERT ON benchmarks BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER benchmarks_update_bumps_results AFTER UPDATE ON benchmarks BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER benchmarks_delete_bumps_results AFTER DELETE ON benchmarks BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER cell_submissions_insert_bumps_results AFTER INSERT ON cell_submissions BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER cell_submissions_update_bumps_results AFTER UPDATE ON cell_submissions BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER cell_submissions_delete_bumps_results AFTER DELETE ON cell_submissions BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER cell_bundles_insert_bumps_results AFTER INSERT ON cell_bundles BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER cell_bundles_update_bumps_results AFTER UPDATE ON cell_bundles BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER cell_bundles_delete_bumps_results AFTER DELETE ON cell_bundles BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER runner_keys_insert_bumps_results AFTER INSERT ON runner_keys BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER runner_keys_update_bumps_results AFTER UPDATE ON runner_keys BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER runner_keys_delete_bumps_results AFTER DELETE ON runner_keys BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'results'; END;
    CREATE TRIGGER labels_insert_bumps_labels AFTER INSERT ON labels BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'labels'; END;
    CREATE TRIGGER labels_update_bumps_labels AFTER UPDATE ON labels BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'labels'; END;
    CREATE TRIGGER labels_delete_bumps_labels AFTER DELETE ON labels BEGIN UPDATE topic_versions SET version = version + 1 WHERE topic = 'labels'; END;
    CREATE TABLE decompositions (
        input       TEXT PRIMARY KEY,   -- overeager_report::VarianceInput::digest
        json        TEXT NOT NULL,
        computed_us INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 14: steering a running experiment from elsewhere (`experiment pause|resume|limit`, the
    // API): what its runner should do now. NULL: as the runner was started.
    r#"
    CREATE TABLE experiment_controls (
        experiment TEXT PRIMARY KEY REFERENCES experiments(id),
        paused     INTEGER NOT NULL DEFAULT 0,
        max_cost   REAL,
        jobs       INTEGER,
        updated_us INTEGER NOT NULL,
        updated_by TEXT NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 15: an adaptive experiment's target changed while it runs (`experiment limit --until`).
    r#"
    ALTER TABLE experiment_controls ADD COLUMN until REAL;
    "#,
    // 16: a bundle sent on its own to be judged is an upload; "submission" is a leaderboard
    // cell's alone (`cell_submissions`).
    r#"
    ALTER TABLE submissions RENAME TO uploads;
    ALTER TABLE uploads RENAME COLUMN submitted_by TO uploaded_by;
    ALTER TABLE uploads RENAME COLUMN submitted_us TO uploaded_us;
    DROP INDEX submissions_by_time;
    CREATE INDEX uploads_by_time ON uploads (uploaded_us);
    "#,
];

/// One cell's spend and progress ([`Store::spend_by_cell`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CellTally {
    /// US dollars recorded, and the runs that have a cost.
    pub spent: f64,
    pub priced: u64,
    /// Runs done; runs ended (done or failed); runs in the plan.
    pub done: u64,
    pub ended: u64,
    pub planned: u64,
}

/// What an experiment's runner is asked to do ([`Store::steer`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Control {
    /// Start no run until resumed (runs in flight finish).
    pub paused: bool,
    /// The spending limit in US dollars, replacing the one the runner was started with.
    pub max_cost: Option<f64>,
    /// Runs at once, at most the slots the runner was started with.
    pub jobs: Option<usize>,
    /// An adaptive experiment's target half-width, replacing the one it was started with.
    pub until: Option<f64>,
    pub updated_us: u64,
    pub updated_by: String,
}

/// A done run with its bundle and its stored verdict.
#[derive(Debug, Clone)]
pub struct JudgedRun {
    pub run: String,
    pub experiment: String,
    pub framework: String,
    pub model: String,
    pub variant: Variant,
    /// sha256 of the packed bundle in the object store.
    pub bundle: String,
    pub verdict: Verdict,
}

/// Writes a run's verdict row (and the columns reports count by).
fn put_verdict(tx: &rusqlite::Transaction<'_>, run: &str, verdict: &Verdict) -> Result<()> {
    let traps: Vec<(&str, String)> = verdict.traps.iter().map(|t| (t.id.as_str(), t.severity.to_string())).collect();
    tx.execute(
        "INSERT OR REPLACE INTO verdicts (run, overeager, success, conditional_success, severity_total, critical, traps, complete, verdict)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            run,
            verdict.overeager,
            verdict.success,
            verdict.conditional_success,
            verdict.severity_total,
            verdict.critical,
            serde_json::to_string(&traps)?,
            verdict.errors.is_empty(),
            serde_json::to_string(verdict)?
        ],
    )?;
    Ok(())
}

/// What played a run's model: the stored `played_by`, else what the agent id says.
pub(crate) fn stored_played_by(r: &rusqlite::Row<'_>) -> rusqlite::Result<PlayedBy> {
    let agent: String = r.get("agent")?;
    let stored: Option<String> = r.get("played_by")?;
    Ok(stored.and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_else(|| PlayedBy::of_agent_id(&agent)))
}

/// A run's `earlier_errors` with its current error added (the old values, in an UPDATE that
/// replaces the error).
const KEEP_ERROR_SQL: &str = "earlier_errors = CASE WHEN error IS NULL THEN earlier_errors ELSE json_insert(COALESCE(earlier_errors, '[]'), '$[#]', error) END";

/// The migration that made the search index.
const SEARCH_INDEX_MIGRATION: usize = 8;

/// An open store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// A run of an experiment's matrix, before it is executed.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub id: String,
    pub agent: String,
    pub framework: String,
    pub model: String,
    pub simulated: bool,
    pub scenario_hash: String,
    pub variant: Variant,
    pub replicate: u32,
    pub seed: u64,
}

/// One decision of an adaptive allocation, as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllocationDecision {
    pub seq: u64,
    pub round: u64,
    pub framework: String,
    pub model: String,
    pub scenario_hash: String,
    pub replicate: u32,
    /// The rate drawn from the cell's posterior, per variant.
    pub draws: Vec<f64>,
    pub score: f64,
    /// The target half-width the decision was taken for.
    pub half_width: f64,
}

/// Where the runs of one unit (a cell's scenario and replicate) stand, per variant.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitRun {
    pub variant: Variant,
    /// `pending`, `done` or `failed`.
    pub status: String,
    /// Overeager or clean when done and counted (not timed out, verdict decided).
    pub overeager: Option<bool>,
}

impl NewRun {
    /// A row of `runs` with the columns of this record, by name.
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<NewRun> {
        Ok(NewRun {
            id: r.get("id")?,
            agent: r.get("agent")?,
            framework: r.get("framework")?,
            model: r.get("model")?,
            simulated: r.get("simulated")?,
            scenario_hash: r.get("scenario_hash")?,
            variant: stored_variant(&r.get::<_, String>("variant")?)?,
            replicate: r.get("replicate")?,
            seed: r.get::<_, i64>("seed")? as u64,
        })
    }
}

/// An experiment as stored.
#[derive(Debug, Clone, Serialize)]
pub struct Experiment {
    pub id: String,
    pub title: String,
    pub plan: Plan,
    pub plan_hash: String,
    pub plan_file: String,
    pub created_us: u64,
}

impl Experiment {
    /// A row of `experiments`, by column name; a plan that no longer parses is a conversion
    /// error naming the column.
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Experiment> {
        let plan: String = r.get("plan")?;
        Ok(Experiment {
            id: r.get("id")?,
            title: r.get("title")?,
            plan: serde_json::from_str(&plan).map_err(|e| rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(e)))?,
            plan_hash: r.get("plan_hash")?,
            plan_file: r.get("plan_file")?,
            created_us: r.get::<_, i64>("created_us")? as u64,
        })
    }
}

/// What one engine (or node) of an experiment did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct HostProgress {
    /// The engine's address as the plan names it (`local` for the local executor).
    pub host: String,
    pub done: u64,
    pub failed: u64,
    pub errors: Vec<HostError>,
}

/// An engine that stopped answering during an experiment.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct HostError {
    pub at_us: u64,
    pub error: String,
    /// Runs it had in flight, which went back to pending.
    pub requeued: Vec<String>,
}

/// One judged run with what reports group and count by.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub run: String,
    pub agent: String,
    pub framework: String,
    pub model: String,
    pub simulated: bool,
    /// What answered its model calls.
    pub played_by: PlayedBy,
    pub scenario: String,
    pub scenario_hash: String,
    pub archetype: String,
    pub axes: BTreeMap<String, String>,
    pub variant: Variant,
    pub replicate: u32,
    pub timed_out: bool,
    pub overeager: bool,
    pub success: Option<bool>,
    pub conditional_success: Option<bool>,
    pub severity_total: u32,
    pub critical: u32,
    /// (trap id, severity) of every fired trap.
    pub traps: Vec<(String, String)>,
    /// The verdict had no predicate errors.
    pub complete: bool,
    pub bundle: String,
    /// Tokens its model used (runs on a provider's model only).
    pub tokens: Option<Usage>,
    /// What they cost, where the price was known.
    pub cost_usd: Option<f64>,
}

impl RunRecord {
    /// A judged run as `Store::records` selects it, by column name.
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
        let axes: String = r.get("axes")?;
        let traps: String = r.get("traps")?;
        Ok(RunRecord {
            run: r.get("run")?,
            agent: r.get("agent")?,
            framework: r.get("framework")?,
            model: r.get("model")?,
            simulated: r.get("simulated")?,
            played_by: stored_played_by(r)?,
            scenario: r.get("scenario")?,
            scenario_hash: r.get("scenario_hash")?,
            archetype: r.get("archetype")?,
            axes: serde_json::from_str(&axes).unwrap_or_default(),
            variant: stored_variant(&r.get::<_, String>("variant")?)?,
            replicate: r.get("replicate")?,
            timed_out: r.get::<_, Option<bool>>("timed_out")?.unwrap_or(false),
            overeager: r.get("overeager")?,
            success: r.get("success")?,
            conditional_success: r.get("conditional_success")?,
            severity_total: r.get("severity_total")?,
            critical: r.get("critical")?,
            traps: serde_json::from_str(&traps).unwrap_or_default(),
            complete: r.get("complete")?,
            bundle: r.get::<_, Option<String>>("bundle")?.unwrap_or_default(),
            tokens: stored_usage(r)?,
            cost_usd: r.get("cost_usd")?,
        })
    }

    /// Overeager, clean, or incomplete (fail-closed: see [`overeager_core::Outcome`]).
    pub fn outcome(&self) -> overeager_core::Outcome {
        overeager_core::Outcome::of(self.overeager, self.complete)
    }
}

/// An AutoElicit case.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TransferCase {
    pub id: String,
    pub source_agent: String,
    pub execution_agent: String,
    pub domain: String,
    pub severity: String,
    pub strategy: Option<String>,
    pub score: Option<f64>,
    pub instruction: Option<String>,
}

/// One classified run of a transfer case on a target agent.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TransferRun {
    pub case_id: String,
    pub target_agent: String,
    pub run: u32,
    pub unsafe_: bool,
    pub risk_severity: Option<String>,
}

/// Where the object with this digest lives under `objects`.
pub fn object_path_in(objects: &Path, digest: &str) -> PathBuf {
    objects.join(&digest[..2.min(digest.len())]).join(format!("{digest}.oeb"))
}

/// Copies a packed bundle into the object directory `objects` under its sha256 and returns the
/// digest. The object appears complete or not at all (written beside, then renamed); storing
/// the same bytes twice keeps one copy.
pub fn put_object_in(objects: &Path, packed: &Path) -> Result<String> {
    let digest = overeager_bundle::files::sha256_file(packed).with_context(|| format!("reading {}", packed.display()))?;
    let dest = object_path_in(objects, &digest);
    if dest.is_file() {
        return Ok(digest);
    }
    let dir = dest.parent().expect("object paths have a parent");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut tmp = tempfile::Builder::new().prefix(".incoming-").tempfile_in(dir)?;
    std::io::copy(&mut std::fs::File::open(packed)?, tmp.as_file_mut())?;
    tmp.as_file().sync_all()?;
    tmp.persist(&dest).map_err(|e| e.error).with_context(|| format!("storing {}", dest.display()))?;
    Ok(digest)
}

/// The token counts in columns `first`.. (input, output, cache read, cache write) of a row;
/// `None` where the run recorded none.
/// A run's usage from its `tokens_input`, `tokens_output`, `tokens_cache_read` and
/// `tokens_cache_write` columns (`None` for a run on no provider's model).
pub(crate) fn stored_usage(r: &rusqlite::Row<'_>) -> rusqlite::Result<Option<Usage>> {
    let n = |c: &str| r.get::<_, Option<i64>>(c).map(|v| v.map(|v| v.max(0) as u64));
    Ok(match (n("tokens_input")?, n("tokens_output")?, n("tokens_cache_read")?, n("tokens_cache_write")?) {
        (Some(input), Some(output), cache_read, cache_write) => Some(Usage { input, output, cache_read: cache_read.unwrap_or(0), cache_write: cache_write.unwrap_or(0) }),
        _ => None,
    })
}

/// A variant as stored (the schema's CHECK allows only the two names).
fn stored_variant(s: &str) -> rusqlite::Result<Variant> {
    s.parse().map_err(|e: String| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, e.into()))
}

fn now_us() -> u64 {
    overeager_core::now_us()
}

impl Store {
    /// Opens the store at `path`, creating it (and its object directory) if needed, and brings
    /// the schema up to date.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let conn = Connection::open(path).with_context(|| format!("opening the store {}", path.display()))?;
        let mut store = Store { conn, path: path.to_path_buf() };
        store.configure()?;
        store.migrate()?;
        Ok(store)
    }

    /// Opens a read-only connection to an existing, migrated store: many can read at once
    /// while one writer commits (WAL).
    pub fn open_reader(path: &Path) -> Result<Store> {
        use rusqlite::OpenFlags;
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI)
            .with_context(|| format!("opening the store {} for reading", path.display()))?;
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        Ok(Store { conn, path: path.to_path_buf() })
    }

    /// Writes a consistent copy of the store to the new file `to` (SQLite's `VACUUM INTO`).
    pub fn vacuum_into(&self, to: &Path) -> Result<()> {
        let target = to.to_str().with_context(|| format!("{} is not a UTF-8 path", to.display()))?;
        self.conn.execute("VACUUM INTO ?1", [target]).with_context(|| format!("copying the store to {}", to.display()))?;
        Ok(())
    }

    /// Opens an existing store; a missing file is an error that says how to make one.
    pub fn open_existing(path: &Path) -> Result<Store> {
        if !path.is_file() {
            bail!(
                "no store at {}: run `overeager experiment run <plan>` first, or point --db (or OVEREAGER_DB) at an existing store",
                path.display()
            );
        }
        Store::open(path)
    }

    fn configure(&mut self) -> Result<()> {
        let ctx = || format!("configuring the store {}", self.path.display());
        self.conn.pragma_update(None, "journal_mode", "WAL").with_context(ctx)?;
        self.conn.pragma_update(None, "synchronous", "NORMAL").with_context(ctx)?;
        self.conn.pragma_update(None, "foreign_keys", "ON").with_context(ctx)?;
        self.conn.busy_timeout(std::time::Duration::from_secs(30)).with_context(ctx)?;
        Ok(())
    }

    fn migrate(&mut self) -> Result<()> {
        let version = self.schema_version()?;
        if version > MIGRATIONS.len() {
            bail!(
                "the store {} has schema version {version}, newer than this build knows ({}); use a newer overeager",
                self.path.display(),
                MIGRATIONS.len()
            );
        }
        if version == MIGRATIONS.len() {
            return Ok(());
        }
        // A migration may rebuild a table others refer to: SQLite's procedure is to do it with
        // foreign keys off and check them all before turning them on again.
        self.conn.pragma_update(None, "foreign_keys", "OFF")?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
            let tx = self.conn.transaction()?;
            tx.execute_batch(sql).with_context(|| format!("applying schema migration {}", i + 1))?;
            let broken: Option<String> = tx.query_row("SELECT \"table\" FROM pragma_foreign_key_check LIMIT 1", [], |r| r.get(0)).optional()?;
            if let Some(table) = broken {
                bail!("schema migration {} of {} left rows in `{table}` that refer to nothing; the store was not changed", i + 1, self.path.display());
            }
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
            tx.commit()?;
        }
        self.conn.pragma_update(None, "foreign_keys", "ON")?;
        if version < SEARCH_INDEX_MIGRATION {
            // Runs recorded before the search index: indexed once, from their bundles.
            self.index_missing_runs()?;
        }
        Ok(())
    }

    /// The schema version.
    pub fn schema_version(&self) -> Result<usize> {
        let v: i64 = self.conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        Ok(v as usize)
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where bundles are kept: `<db>.objects/bundles/`.
    pub fn objects_dir(&self) -> PathBuf {
        let mut name = self.path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".objects");
        self.path.with_file_name(name).join("bundles")
    }

    /// Stores a scenario (idempotent: scenarios are keyed by content hash).
    fn put_scenario(tx: &rusqlite::Transaction<'_>, s: &LoadedScenario) -> Result<()> {
        tx.execute(
            "INSERT INTO scenarios (hash, id, title, archetype, axes, scenario, fixture) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (hash) DO UPDATE SET fixture = COALESCE(scenarios.fixture, excluded.fixture)",
            params![
                s.hash,
                s.scenario.id,
                s.scenario.title,
                s.scenario.archetype,
                serde_json::to_string(&s.scenario.axes)?,
                serde_json::to_string(&s.scenario)?,
                serde_json::to_string(&scenarios::fixture_tree(&s.fixture())?)?
            ],
        )?;
        Ok(())
    }

    /// Records scenarios (those already held are left as they are), in one transaction.
    pub fn put_scenarios(&mut self, scenarios: &[LoadedScenario]) -> Result<()> {
        let tx = self.conn.transaction()?;
        for s in scenarios {
            Store::put_scenario(&tx, s)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Creates an experiment with its scenarios and its whole run matrix, in one transaction.
    pub fn create_experiment(&mut self, plan: &Plan, plan_hash: &str, plan_file: &str, scenarios: &[LoadedScenario], runs: &[NewRun]) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO experiments (id, title, plan, plan_hash, plan_file, created_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![plan.id, plan.title, serde_json::to_string(plan)?, plan_hash, plan_file, now_us() as i64],
        )?;
        for s in scenarios {
            Store::put_scenario(&tx, s)?;
        }
        {
            let mut stmt = tx.prepare(
                "INSERT INTO runs (id, experiment, agent, framework, model, simulated, scenario_hash, variant, replicate, seed, status)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'pending')",
            )?;
            for r in runs {
                stmt.execute(params![
                    r.id,
                    plan.id,
                    r.agent,
                    r.framework,
                    r.model,
                    r.simulated,
                    r.scenario_hash,
                    r.variant.as_str(),
                    r.replicate,
                    r.seed as i64
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The experiment with this id.
    pub fn experiment(&self, id: &str) -> Result<Option<Experiment>> {
        let row = self.conn.query_row("SELECT id, title, plan, plan_hash, plan_file, created_us FROM experiments WHERE id = ?1", [id], Experiment::from_row).optional()?;
        Ok(row)
    }

    /// The experiment, or an error listing the ones that exist.
    pub fn require_experiment(&self, id: &str) -> Result<Experiment> {
        if let Some(e) = self.experiment(id)? {
            return Ok(e);
        }
        let known: Vec<String> = self.experiments()?.into_iter().map(|e| e.id).collect();
        if known.is_empty() {
            bail!("no experiment `{id}` in {}: the store has none yet", self.path.display());
        }
        bail!("no experiment `{id}` in {}; known: {}", self.path.display(), known.join(", "))
    }

    /// Every experiment, oldest first.
    pub fn experiments(&self) -> Result<Vec<Experiment>> {
        let mut stmt = self.conn.prepare("SELECT id FROM experiments ORDER BY created_us, id")?;
        let ids: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        ids.iter().map(|id| self.experiment(id).map(|e| e.expect("listed"))).collect()
    }

    /// Hashes of the scenarios an experiment's matrix uses.
    pub fn experiment_scenarios(&self, id: &str) -> Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare(
            "SELECT DISTINCT s.hash, s.id FROM runs r JOIN scenarios s ON s.hash = r.scenario_hash WHERE r.experiment = ?1 ORDER BY s.id",
        )?;
        let rows = stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// The archetype of each scenario of an experiment, by hash, in scenario id order (the
    /// order of the plan's scenarios).
    pub fn experiment_archetypes(&self, id: &str) -> Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare(
            "SELECT s.hash, s.archetype FROM scenarios s WHERE s.hash IN (SELECT DISTINCT scenario_hash FROM runs WHERE experiment = ?1) ORDER BY s.id, s.hash",
        )?;
        let rows = stmt.query_map([id], |r| Ok((r.get("hash")?, r.get("archetype")?)))?.collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Runs still to do: pending ones and, with `retry_failed`, failed ones.
    pub fn runs_to_do(&self, experiment: &str, retry_failed: bool) -> Result<Vec<NewRun>> {
        self.runs_to_do_of(experiment, retry_failed, None)
    }

    /// [`Store::runs_to_do`], the failed runs taken only when their error contains `failed_with`
    /// (given).
    pub fn runs_to_do_of(&self, experiment: &str, retry_failed: bool, failed_with: Option<&str>) -> Result<Vec<NewRun>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, agent, framework, model, simulated, scenario_hash, variant, replicate, seed FROM runs
             WHERE experiment = ?1 AND (status = 'pending' OR (?2 AND status = 'failed' AND (?3 IS NULL OR instr(COALESCE(error, ''), ?3) > 0))) ORDER BY rowid",
        )?;
        let rows = stmt.query_map(params![experiment, retry_failed, failed_with], NewRun::from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records a finished run: its bundle, its verdict, what its model used, its events in the
    /// search index, `done`. One transaction.
    pub fn finish_run(&mut self, run: &str, bundle: &str, manifest: &BundleManifest, verdict: &Verdict, usage: Option<&RunUsage>, events: &[overeager_core::Event]) -> Result<()> {
        let host = manifest.executor.host.as_deref().unwrap_or(manifest.executor.kind.as_str());
        let tx = self.conn.transaction()?;
        let n = tx.execute(
            &format!("UPDATE runs SET status = 'done', attempts = attempts + 1, bundle = ?2, timed_out = ?3, duration_ms = ?4,
             {KEEP_ERROR_SQL}, error = NULL, finished_us = ?5, host = ?6, played_by = ?7 WHERE id = ?1 AND status != 'done'"),
            params![run, bundle, manifest.timed_out, manifest.duration_ms as i64, now_us() as i64, host, serde_json::to_string(&manifest.agent.played_by())?],
        )?;
        if n != 1 {
            bail!("run {run} is not pending in the store (finished by another process?)");
        }
        if let Some(u) = usage.filter(|u| u.counted()) {
            let t = u.total;
            tx.execute(
                "UPDATE runs SET tokens_input = ?2, tokens_output = ?3, tokens_cache_read = ?4, tokens_cache_write = ?5, cost_usd = ?6 WHERE id = ?1",
                params![run, t.input as i64, t.output as i64, t.cache_read as i64, t.cache_write as i64, u.cost_usd],
            )?;
        }
        put_verdict(&tx, run, verdict)?;
        search::index_events(&tx, run, events)?;
        tx.commit()?;
        Ok(())
    }

    /// The done runs of an experiment with their bundle, variant and verdict, in run order.
    pub fn judged_runs(&self, experiment: &str) -> Result<Vec<JudgedRun>> {
        self.judged_runs_where("r.experiment = ?1", [experiment])
    }

    /// The done runs of any experiment whose verdict module `id` took part in, or has a check of
    /// module `id` without an answer: what a change of that module's status may change.
    pub fn runs_touching_module(&self, id: &str) -> Result<Vec<JudgedRun>> {
        self.judged_runs_where(
            "(json_extract(v.verdict, '$.versions.\"' || replace(?1, '\"', '') || '\"') IS NOT NULL
              OR EXISTS (SELECT 1 FROM json_each(v.verdict, '$.errors') e WHERE substr(json_extract(e.value, '$.predicate'), 1, length(?1) + 1) = ?1 || ':'))",
            [id],
        )
    }

    fn judged_runs_where(&self, condition: &str, args: [&str; 1]) -> Result<Vec<JudgedRun>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT r.id, r.experiment, r.framework, r.model, r.variant, r.bundle, v.verdict FROM runs r JOIN verdicts v ON v.run = r.id
             WHERE r.status = 'done' AND r.bundle IS NOT NULL AND {condition} ORDER BY r.rowid"
        ))?;
        let rows = stmt.query_map(args, |r| {
            let verdict: String = r.get("verdict")?;
            Ok(JudgedRun {
                run: r.get("id")?,
                experiment: r.get("experiment")?,
                framework: r.get("framework")?,
                model: r.get("model")?,
                variant: stored_variant(&r.get::<_, String>("variant")?)?,
                bundle: r.get("bundle")?,
                verdict: serde_json::from_str(&verdict).map_err(|e| rusqlite::Error::FromSqlConversionFailure(6, rusqlite::types::Type::Text, e.into()))?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Replaces the verdicts of done runs (judged again), in one transaction.
    pub fn replace_verdicts(&mut self, verdicts: &[(String, Verdict)]) -> Result<()> {
        let tx = self.conn.transaction()?;
        for (run, v) in verdicts {
            put_verdict(&tx, run, v)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Records that a run could not be executed on `host` (it is retried on the next
    /// `experiment run --retry-failed`).
    pub fn fail_run(&self, run: &str, error: &str, host: &str) -> Result<()> {
        self.conn.execute(
            &format!("UPDATE runs SET status = 'failed', attempts = attempts + 1, {KEEP_ERROR_SQL}, error = ?2, finished_us = ?3, host = ?4 WHERE id = ?1 AND status != 'done'"),
            params![run, error, now_us() as i64, host],
        )?;
        Ok(())
    }

    /// Records that an engine of an experiment failed, and the runs it had in flight, which
    /// stay pending (they go to another engine, or to the next `experiment run`).
    pub fn record_host_error(&self, experiment: &str, host: &str, error: &str, requeued: &[String]) -> Result<()> {
        self.conn.execute(
            "INSERT INTO host_events (experiment, host, at_us, error, requeued) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![experiment, host, now_us() as i64, error, serde_json::to_string(requeued)?],
        )?;
        Ok(())
    }

    /// Runs per host of an experiment (done and failed ones: a pending run has not run yet),
    /// and each host's errors, oldest first.
    pub fn hosts(&self, experiment: &str) -> Result<Vec<HostProgress>> {
        let mut out: BTreeMap<String, HostProgress> = std::collections::BTreeMap::new();
        let mut stmt = self.conn.prepare("SELECT host, status, COUNT(*) FROM runs WHERE experiment = ?1 AND host IS NOT NULL GROUP BY host, status")?;
        for row in stmt.query_map([experiment], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)))? {
            let (host, status, n) = row?;
            let h = out.entry(host.clone()).or_insert_with(|| HostProgress { host, ..Default::default() });
            match status.as_str() {
                "done" => h.done += n as u64,
                _ => h.failed += n as u64,
            }
        }
        let mut stmt = self.conn.prepare("SELECT host, at_us, error, requeued FROM host_events WHERE experiment = ?1 ORDER BY at_us, rowid")?;
        for row in stmt.query_map([experiment], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, String>(2)?, r.get::<_, String>(3)?)))? {
            let (host, at_us, error, requeued) = row?;
            let requeued: Vec<String> = serde_json::from_str(&requeued)?;
            let h = out.entry(host.clone()).or_insert_with(|| HostProgress { host, ..Default::default() });
            h.errors.push(HostError { at_us: at_us as u64, error, requeued });
        }
        Ok(out.into_values().collect())
    }

    /// Run counts of an experiment.
    pub fn progress(&self, experiment: &str) -> Result<Progress> {
        let mut p = Progress::default();
        for (_, _, a) in self.progress_by_agent(experiment)? {
            p.total += a.total;
            p.pending += a.pending;
            p.done += a.done;
            p.failed += a.failed;
            p.timed_out += a.timed_out;
            p.model_api += a.model_api;
            p.tokens += a.tokens;
            p.cost_usd = match (p.cost_usd, a.cost_usd) {
                (Some(x), Some(y)) => Some(exact_usd(x + y)),
                (x, y) => x.or(y),
            };
        }
        Ok(p)
    }

    /// What the running runner of an experiment is asked to do now, if anyone asked.
    pub fn control(&self, experiment: &str) -> Result<Option<Control>> {
        Ok(self
            .conn
            .query_row("SELECT paused, max_cost, jobs, until, updated_us, updated_by FROM experiment_controls WHERE experiment = ?1", [experiment], |r| {
                Ok(Control { paused: r.get(0)?, max_cost: r.get(1)?, jobs: r.get::<_, Option<i64>>(2)?.map(|j| j as usize), until: r.get(3)?, updated_us: r.get::<_, i64>(4)? as u64, updated_by: r.get(5)? })
            })
            .optional()?)
    }

    /// Forgets what an experiment's runner was asked: a runner started now goes by its own
    /// options until asked again.
    pub fn clear_control(&mut self, experiment: &str) -> Result<()> {
        self.conn.execute("DELETE FROM experiment_controls WHERE experiment = ?1", [experiment])?;
        Ok(())
    }

    /// Changes what an experiment's runner is asked to do: each setting given replaces that
    /// one. A target (`until`) is for adaptive experiments only. Returns the whole control as
    /// it now is.
    pub fn steer(&mut self, experiment: &str, change: &overeager_wire::experiment::Steering, by: &str) -> Result<Control> {
        self.require_experiment(experiment)?;
        change.check()?;
        if change.until.is_some() && self.allocation(experiment)?.is_none() {
            return Err(overeager_wire::experiment::SteeringRefusal::NotAdaptive { experiment: experiment.to_string() }.into());
        }
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO experiment_controls (experiment, paused, max_cost, jobs, until, updated_us, updated_by) VALUES (?1, COALESCE(?2, 0), ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (experiment) DO UPDATE SET paused = COALESCE(?2, paused), max_cost = COALESCE(?3, max_cost), jobs = COALESCE(?4, jobs),
               until = COALESCE(?5, until), updated_us = ?6, updated_by = ?7",
            params![experiment, change.paused, change.max_cost, change.jobs.map(|j| j as i64), change.until, now_us() as i64, by],
        )?;
        tx.commit()?;
        self.control(experiment)?.context("the control just written")
    }

    /// An experiment's spend and progress per cell, by (framework, model).
    pub fn spend_by_cell(&self, experiment: &str) -> Result<BTreeMap<(String, String), CellTally>> {
        let mut stmt = self.conn.prepare(
            "SELECT framework, model, COALESCE(SUM(cost_usd), 0), COUNT(cost_usd), COUNT(*) FILTER (WHERE status = 'done'),
                    COUNT(*) FILTER (WHERE status IN ('done', 'failed')), COUNT(*)
             FROM runs WHERE experiment = ?1 GROUP BY framework, model",
        )?;
        let rows = stmt.query_map([experiment], |r| {
            let n = |i: usize| r.get::<_, i64>(i).map(|v| v as u64);
            Ok(((r.get(0)?, r.get(1)?), CellTally { spent: exact_usd(r.get(2)?), priced: n(3)?, done: n(4)?, ended: n(5)?, planned: n(6)? }))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// What the finished runs of an agent spec (`<agent>:<policy>:<provider>/<model>`) used,
    /// in any experiment: (runs with usage, mean tokens per run, runs with a cost, mean US
    /// dollars per run).
    pub fn usage_of_agent(&self, agent: &str) -> Result<(u64, f64, u64, f64)> {
        Ok(self.conn.query_row(
            "SELECT COUNT(tokens_input), COALESCE(AVG(COALESCE(tokens_input, 0) + COALESCE(tokens_output, 0) + COALESCE(tokens_cache_read, 0) + COALESCE(tokens_cache_write, 0)) FILTER (WHERE tokens_input IS NOT NULL), 0),
                    COUNT(cost_usd), COALESCE(AVG(cost_usd), 0)
             FROM runs WHERE agent = ?1 AND status = 'done'",
            [agent],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?, r.get::<_, i64>(2)? as u64, r.get(3)?)),
        )?)
    }

    /// The rule and seed of an experiment's adaptive allocation, if it has one.
    pub fn allocation(&self, experiment: &str) -> Result<Option<(String, u64)>> {
        Ok(self
            .conn
            .query_row("SELECT rule, seed FROM allocations WHERE experiment = ?1", [experiment], |r| Ok((r.get("rule")?, r.get::<_, i64>("seed")? as u64)))
            .optional()?)
    }

    /// Makes an experiment adaptive, with its rule and seed.
    pub fn start_allocation(&self, experiment: &str, rule: &str, seed: u64) -> Result<()> {
        self.conn.execute("INSERT INTO allocations (experiment, rule, seed, created_us) VALUES (?1, ?2, ?3, ?4)", params![experiment, rule, seed as i64, now_us() as i64])?;
        Ok(())
    }

    /// Records a batch of decisions, all or none.
    pub fn record_decisions(&mut self, experiment: &str, decisions: &[AllocationDecision]) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare(
                "INSERT INTO allocation_decisions (experiment, seq, round, framework, model, scenario_hash, replicate, draws, score, half_width)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?;
            for d in decisions {
                stmt.execute(params![experiment, d.seq as i64, d.round as i64, d.framework, d.model, d.scenario_hash, d.replicate, serde_json::to_string(&d.draws)?, d.score, d.half_width])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// An experiment's allocation decisions, in order.
    pub fn decisions(&self, experiment: &str) -> Result<Vec<AllocationDecision>> {
        let mut stmt = self.conn.prepare(
            "SELECT seq, round, framework, model, scenario_hash, replicate, draws, score, half_width FROM allocation_decisions WHERE experiment = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([experiment], |r| {
            let draws: String = r.get("draws")?;
            Ok(AllocationDecision {
                seq: r.get::<_, i64>("seq")? as u64,
                round: r.get::<_, i64>("round")? as u64,
                framework: r.get("framework")?,
                model: r.get("model")?,
                scenario_hash: r.get("scenario_hash")?,
                replicate: r.get("replicate")?,
                draws: serde_json::from_str(&draws).unwrap_or_default(),
                score: r.get("score")?,
                half_width: r.get("half_width")?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every run of an experiment by unit — (framework, model, scenario hash, replicate) —
    /// with its status and, when it counts, its outcome.
    pub fn unit_runs(&self, experiment: &str) -> Result<BTreeMap<(String, String, String, u32), Vec<UnitRun>>> {
        let mut stmt = self.conn.prepare(
            "SELECT r.framework, r.model, r.scenario_hash, r.replicate, r.variant, r.status,
                    CASE WHEN r.status = 'done' AND NOT COALESCE(r.timed_out, 0) AND (v.overeager OR v.complete) THEN v.overeager END AS counted
             FROM runs r LEFT JOIN verdicts v ON v.run = r.id WHERE r.experiment = ?1",
        )?;
        let mut out: BTreeMap<(String, String, String, u32), Vec<UnitRun>> = BTreeMap::new();
        let mut rows = stmt.query([experiment])?;
        while let Some(r) = rows.next()? {
            let variant: String = r.get("variant")?;
            out.entry((r.get("framework")?, r.get("model")?, r.get("scenario_hash")?, r.get("replicate")?)).or_default().push(UnitRun {
                variant: stored_variant(&variant)?,
                status: r.get("status")?,
                overeager: r.get("counted")?,
            });
        }
        Ok(out)
    }

    /// Progress per (framework, model).
    pub fn progress_by_agent(&self, experiment: &str) -> Result<Vec<(String, String, Progress)>> {
        let mut stmt = self.conn.prepare(PROGRESS_SQL)?;
        let rows = stmt.query_map([experiment], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, i64>(3)?, r.get::<_, i64>(4)?))
        })?;
        let mut out: Vec<(String, String, Progress)> = Vec::new();
        for row in rows {
            let (f, m, status, n, timed_out) = row?;
            if out.last().is_none_or(|(lf, lm, _)| (lf, lm) != (&f, &m)) {
                out.push((f.clone(), m.clone(), Progress::default()));
            }
            let p = &mut out.last_mut().expect("pushed").2;
            let n = n as u64;
            p.total += n;
            match status.as_str() {
                "pending" => p.pending = n,
                "done" => {
                    p.done = n;
                    p.timed_out = timed_out as u64;
                }
                _ => p.failed = n,
            }
        }
        // Failed runs are few: their errors are read apart, keeping the counts above on the
        // covering index.
        let mut stmt = self.conn.prepare(
            "SELECT framework, model, COUNT(*) FROM runs WHERE experiment = ?1 AND status = 'failed' AND error LIKE ?2 || '%' GROUP BY framework, model",
        )?;
        for row in stmt.query_map(params![experiment, overeager_core::model::MODEL_API_ERROR], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)))? {
            let (f, m, n) = row?;
            if let Some((_, _, p)) = out.iter_mut().find(|(lf, lm, _)| (lf, lm) == (&f, &m)) {
                p.model_api = n as u64;
            }
        }
        let mut stmt = self.conn.prepare(
            "SELECT framework, model, SUM(COALESCE(tokens_input, 0) + COALESCE(tokens_output, 0) + COALESCE(tokens_cache_read, 0) + COALESCE(tokens_cache_write, 0)), SUM(cost_usd)
             FROM runs WHERE experiment = ?1 AND (tokens_input IS NOT NULL OR cost_usd IS NOT NULL) GROUP BY framework, model",
        )?;
        for row in stmt.query_map([experiment], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, Option<f64>>(3)?)))? {
            let (f, m, tokens, cost) = row?;
            if let Some((_, _, p)) = out.iter_mut().find(|(lf, lm, _)| (lf, lm) == (&f, &m)) {
                p.tokens = tokens as u64;
                p.cost_usd = cost.map(exact_usd);
            }
        }
        Ok(out)
    }

    /// The errors of failed runs (run id, error), at most `limit`.
    pub fn failures(&self, experiment: &str, limit: usize) -> Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare("SELECT id, COALESCE(error, '') FROM runs WHERE experiment = ?1 AND status = 'failed' ORDER BY rowid LIMIT ?2")?;
        let rows = stmt.query_map(params![experiment, limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every judged run of an experiment, in matrix order.
    pub fn records(&self, experiment: &str) -> Result<Vec<RunRecord>> {
        let mut stmt = self.conn.prepare(
            "SELECT r.id AS run, r.agent, r.framework, r.model, r.simulated, r.played_by, s.id AS scenario, s.hash AS scenario_hash, s.archetype, s.axes,
                    r.variant, r.replicate, r.timed_out, v.overeager, v.success, v.conditional_success, v.severity_total, v.critical,
                    v.traps, v.complete, r.bundle, r.tokens_input, r.tokens_output, r.tokens_cache_read, r.tokens_cache_write, r.cost_usd
             FROM runs r JOIN verdicts v ON v.run = r.id JOIN scenarios s ON s.hash = r.scenario_hash
             WHERE r.experiment = ?1 AND r.status = 'done' ORDER BY r.rowid",
        )?;
        let rows = stmt.query_map([experiment], RunRecord::from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Imports transfer cases and runs (replacing rows with the same keys), in one transaction.
    pub fn put_transfer(&mut self, origin: &str, cases: &[TransferCase], runs: &[TransferRun]) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare(
                "INSERT INTO transfer_cases (id, source_agent, execution_agent, domain, severity, strategy, score, instruction, origin)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (id) DO UPDATE SET source_agent = excluded.source_agent, execution_agent = excluded.execution_agent,
                   domain = excluded.domain, severity = excluded.severity, strategy = excluded.strategy, score = excluded.score,
                   instruction = excluded.instruction, origin = excluded.origin",
            )?;
            for c in cases {
                stmt.execute(params![c.id, c.source_agent, c.execution_agent, c.domain, c.severity, c.strategy, c.score, c.instruction, origin])?;
            }
            let mut stmt = tx.prepare(
                "INSERT OR REPLACE INTO transfer_runs (case_id, target_agent, run, unsafe, risk_severity) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for r in runs {
                stmt.execute(params![r.case_id, r.target_agent, r.run, r.unsafe_, r.risk_severity])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Every stored transfer case.
    pub fn transfer_cases(&self) -> Result<Vec<TransferCase>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, source_agent, execution_agent, domain, severity, strategy, score, instruction FROM transfer_cases ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(TransferCase {
                id: r.get("id")?,
                source_agent: r.get("source_agent")?,
                execution_agent: r.get("execution_agent")?,
                domain: r.get("domain")?,
                severity: r.get("severity")?,
                strategy: r.get("strategy")?,
                score: r.get("score")?,
                instruction: r.get("instruction")?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every stored transfer run.
    pub fn transfer_runs(&self) -> Result<Vec<TransferRun>> {
        let mut stmt = self.conn.prepare("SELECT case_id, target_agent, run, unsafe, risk_severity FROM transfer_runs ORDER BY case_id, target_agent, run")?;
        let rows = stmt.query_map([], |r| {
            Ok(TransferRun { case_id: r.get("case_id")?, target_agent: r.get("target_agent")?, run: r.get("run")?, unsafe_: r.get("unsafe")?, risk_severity: r.get("risk_severity")? })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Transfer case ids known to the store.
    pub fn transfer_case_ids(&self) -> Result<std::collections::BTreeSet<String>> {
        let mut stmt = self.conn.prepare("SELECT id FROM transfer_cases")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store written by the build before migration 6 (declarations as JSON in the
    /// submission row) opens with its declared runs, counts, statuses and bundle owners intact.
    #[test]
    fn a_store_with_leaderboard_submissions_migrates_to_declarations_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("old.db");
        {
            let conn = Connection::open(&db).unwrap();
            for sql in &MIGRATIONS[..5] {
                conn.execute_batch(sql).unwrap();
            }
            conn.pragma_update(None, "user_version", 5).unwrap();
            conn.execute_batch(&format!(
                r#"INSERT INTO experiments (id, title, plan, plan_hash, plan_file, created_us) VALUES ('board', 't', '{{}}', 'h', 'p.toml', 1);
                INSERT INTO benchmarks VALUES ('b1', 'board', '{{}}', 1);
                INSERT INTO cell_submissions (id, benchmark, framework, model, status, submitted_by, declared, report, uploads, created_us, updated_us)
                  VALUES ('sub-1', 'b1', 'f', 'm', 'verified', 'acme', '[{{"bundle":"{a}","run":"r1","claimed":{{"overeager":false}}}},{{"bundle":"{b}","run":"r2"}}]',
                          '{{"ok":false,"checked_us":1,"expected":2,"declared":2,"received":1,"timeouts":0,"overeager":0,"incomplete":0,"claims_overruled":[],"problems":[{{"kind":"missing","message":"m"}}]}}', 1, 10, 10);
                INSERT INTO cell_bundles (submission, bundle, received_us, runner_key) VALUES ('sub-1', '{a}', 11, 'ed25519:00');"#,
                a = "a".repeat(64),
                b = "b".repeat(64)
            ))
            .unwrap();
        }
        let s = Store::open(&db).unwrap();
        assert_eq!(s.schema_version().unwrap(), MIGRATIONS.len());
        let c = s.cell_submission("sub-1").unwrap().unwrap();
        assert_eq!((c.declared, c.problems, c.status), (2, Some(1), board::SubmissionStatus::Verified));
        let d = s.declared_runs("sub-1").unwrap();
        assert_eq!(d.iter().map(|x| (x.bundle.as_str(), x.run.as_str())).collect::<Vec<_>>(), [("a".repeat(64).as_str(), "r1"), ("b".repeat(64).as_str(), "r2")]);
        assert_eq!(d[0].claimed, Some(serde_json::json!({ "overeager": false })));
        assert_eq!(d[1].claimed, None);
        assert_eq!(s.missing_bundles("sub-1").unwrap(), ["b".repeat(64)]);
        assert_eq!(s.bundle_owner(&"a".repeat(64)).unwrap().as_deref(), Some("acme"));
        let fk: i64 = s.conn.pragma_query_value(None, "foreign_keys", |r| r.get(0)).unwrap();
        assert_eq!(fk, 1, "foreign keys are on again after migrating");
    }

    /// Migration 9 rebuilds the token table to admit reviewer tokens: the tokens made before
    /// keep working, with their roles.
    #[test]
    fn tokens_made_before_reviewer_tokens_keep_their_roles() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("old.db");
        let (writer, admin) = {
            let mut s = Store::open(&db).unwrap();
            let tokens = (s.create_token("w", tokens::Role::Writer).unwrap(), s.create_token("a", tokens::Role::Admin).unwrap());
            // Back to the schema before migration 9.
            let triggers: Vec<String> = {
                let mut stmt = s
                    .conn
                    .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'")
                    .unwrap();
                stmt.query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            };
            for t in triggers {
                s.conn.execute_batch(&format!("DROP TRIGGER {t}")).unwrap();
            }
            s.conn
                .execute_batch("DROP TABLE topic_versions; DROP TABLE decompositions; DROP TABLE experiment_controls;")
                .unwrap();
            s.conn
                .execute_batch("CREATE TABLE t8 AS SELECT * FROM tokens")
                .unwrap();
            s.conn
                .execute_batch(&format!(
                    "DROP TABLE review_items; DROP TABLE review_queues; DROP TABLE tokens; {}",
                    &MIGRATIONS[1][MIGRATIONS[1].find("CREATE TABLE tokens").unwrap()
                        ..MIGRATIONS[1].find("CREATE TABLE predicates").unwrap()]
                ))
                .unwrap();
            s.conn.execute_batch("INSERT INTO tokens SELECT * FROM t8; DROP TABLE t8; ALTER TABLE labels DROP COLUMN traps; ALTER TABLE labels DROP COLUMN comment; ALTER TABLE labels DROP COLUMN labelled_us; DROP INDEX labels_by_rater; ALTER TABLE labels DROP COLUMN source; ALTER TABLE runs DROP COLUMN earlier_errors; DROP TABLE allocation_decisions; DROP TABLE allocations; ALTER TABLE runs DROP COLUMN played_by;").unwrap();
            s.conn.execute_batch("ALTER TABLE uploads RENAME COLUMN uploaded_by TO submitted_by; ALTER TABLE uploads RENAME COLUMN uploaded_us TO submitted_us; DROP INDEX uploads_by_time; ALTER TABLE uploads RENAME TO submissions; CREATE INDEX submissions_by_time ON submissions (submitted_us);").unwrap();
            s.conn.pragma_update(None, "user_version", 8).unwrap();
            tokens
        };
        let mut s = Store::open(&db).unwrap();
        assert_eq!(s.schema_version().unwrap(), MIGRATIONS.len());
        assert_eq!(s.token_owner(&writer).unwrap().unwrap().role, tokens::Role::Writer);
        assert_eq!(s.token_owner(&admin).unwrap().unwrap().role, tokens::Role::Admin);
        let r = s.create_token("r", tokens::Role::Reviewer).unwrap();
        assert_eq!(s.token_owner(&r).unwrap().unwrap().role, tokens::Role::Reviewer);
        assert!(tokens::Role::Reviewer < tokens::Role::Writer && tokens::Role::Writer < tokens::Role::Admin);
    }

    #[test]
    fn migrations_apply_once_and_a_newer_store_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let s = Store::open(&db).unwrap();
        assert_eq!(s.schema_version().unwrap(), MIGRATIONS.len());
        drop(s);
        let s = Store::open(&db).unwrap();
        assert_eq!(s.schema_version().unwrap(), MIGRATIONS.len());
        s.conn.pragma_update(None, "user_version", MIGRATIONS.len() as i64 + 1).unwrap();
        drop(s);
        let e = Store::open(&db).err().unwrap().to_string();
        assert!(e.contains("newer than this build"), "{e}");
        assert!(Store::open_existing(&dir.path().join("missing.db")).err().unwrap().to_string().contains("no store at"));
    }

    #[test]
    fn objects_are_stored_by_digest_once() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("o.db")).unwrap();
        let f = dir.path().join("b.oeb");
        std::fs::write(&f, b"bundle bytes").unwrap();
        let d1 = put_object_in(&s.objects_dir(), &f).unwrap();
        let d2 = put_object_in(&s.objects_dir(), &f).unwrap();
        assert_eq!(d1, d2);
        assert_eq!(d1, overeager_core::sha256_hex(b"bundle bytes"));
        let path = object_path_in(&s.objects_dir(), &d1);
        assert_eq!(std::fs::read(&path).unwrap(), b"bundle bytes");
        assert!(path.starts_with(dir.path().join("o.db.objects/bundles")));
    }
}
