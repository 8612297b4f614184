//! What tells a cache the store changed: the versions of the topics reports are computed from,
//! SQLite's data version, and the kept variance decompositions; and the store's integrity check.

use anyhow::Result;
use rusqlite::{OptionalExtension, params};

use super::{Store, now_us};

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

impl Store {
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
    use crate::runs::RUN_ROW_SQL;
    use crate::scenarios::SCENARIO_ROW_SQL;
    use crate::tokens::Role;

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
}
