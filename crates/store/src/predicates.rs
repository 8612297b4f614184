//! Uploaded predicate modules, their approval, and where stored scenarios call them.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use rusqlite::params;

use super::{Store, now_us};

pub use overeager_wire::predicates::PredicateRow;

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

impl Store {
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
}
