//! Stored scenarios as the server shows them: their fixture trees, the validator's decisions, the
//! scenario list and a scenario's page.

use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{OptionalExtension, params};

use super::Store;

pub use overeager_wire::scenario::{FixtureEntry, PlayOutcome, ScenarioDetail, ScenarioRow, Validation};

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
pub(crate) const SCENARIO_ROW_SQL: &str = "SELECT s.hash, s.id, s.title, s.archetype, s.axes, v.admitted, COALESCE(n.done, 0) AS runs
     FROM scenarios s LEFT JOIN validations v ON v.scenario_hash = s.hash
     LEFT JOIN (SELECT scenario_hash, COUNT(*) AS done FROM runs WHERE status = 'done' GROUP BY scenario_hash) n ON n.scenario_hash = s.hash";

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

    /// Bundles of runs of one scenario, newest first.
    pub fn bundles_of_scenario(&self, hash: &str, limit: usize) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare("SELECT DISTINCT bundle FROM runs WHERE scenario_hash = ?1 AND status = 'done' AND bundle IS NOT NULL ORDER BY rowid DESC LIMIT ?2")?;
        let rows = stmt.query_map(params![hash, limit as i64], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
