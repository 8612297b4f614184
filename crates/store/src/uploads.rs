//! Bundles uploaded to be judged again by the server's own predicates (one bundle each; a
//! leaderboard submission of a whole cell is `board`'s).

use anyhow::Result;
use rusqlite::params;

use super::{Store, stored_variant};

pub use overeager_wire::run::Upload;

impl Store {
    /// Records an uploaded bundle with the server's verdict (replacing an earlier upload of the
    /// same bytes).
    pub fn put_upload(&mut self, s: &Upload) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO uploads (bundle, run_id, scenario_hash, agent, framework, model, variant, overeager, verdict, claimed, uploaded_by, uploaded_us)
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
                s.uploaded_by,
                s.uploaded_us as i64
            ],
        )?;
        Ok(())
    }

    /// Uploaded bundles, newest first; or the one with this digest.
    pub fn uploads(&self, digest: Option<&str>) -> Result<Vec<Upload>> {
        let mut stmt = self.conn.prepare(
            "SELECT bundle, run_id, scenario_hash, agent, framework, model, variant, overeager, verdict, claimed, uploaded_by, uploaded_us
             FROM uploads WHERE ?1 IS NULL OR bundle = ?1 ORDER BY uploaded_us DESC, bundle",
        )?;
        let rows = stmt.query_map([digest], |r| {
            let variant: String = r.get("variant")?;
            let verdict: String = r.get("verdict")?;
            let claimed: Option<String> = r.get("claimed")?;
            Ok(Upload {
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
                uploaded_by: r.get("uploaded_by")?,
                uploaded_us: r.get::<_, i64>("uploaded_us")? as u64,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
