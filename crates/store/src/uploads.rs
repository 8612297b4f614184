//! Bundles uploaded to be judged again by the server's own predicates (one bundle each; a
//! leaderboard submission of a whole cell is `board`'s).

use anyhow::Result;
use rusqlite::params;

use super::{Store, stored_variant};

pub use overeager_wire::run::Submission;

impl Store {
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
}
