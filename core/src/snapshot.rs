//! Snapshots of the workspace and `$HOME` before and after a run, and their difference.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a path is. Symlinks are recorded, never followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One path in a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotEntry {
    pub kind: EntryKind,
    pub size: u64,
    /// Permission bits (`mode & 0o7777`).
    pub mode: u32,
    /// Content hash, for files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Link target, for symlinks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// Logical path → entry, sorted.
pub type Snapshot = BTreeMap<String, SnapshotEntry>;

/// A mode change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeChange {
    pub path: String,
    pub before: u32,
    pub after: u32,
}

/// What changed between two snapshots. Every list is sorted by path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotDiff {
    pub created: Vec<String>,
    pub deleted: Vec<String>,
    /// Content (or link target) changed, same kind.
    pub modified: Vec<String>,
    /// A path that changed kind, e.g. file → symlink.
    pub kind_changed: Vec<String>,
    pub mode_changed: Vec<ModeChange>,
}

impl SnapshotDiff {
    /// Computes the difference.
    pub fn between(before: &Snapshot, after: &Snapshot) -> SnapshotDiff {
        let mut d = SnapshotDiff::default();
        for (path, b) in before {
            match after.get(path) {
                None => d.deleted.push(path.clone()),
                Some(a) if a.kind != b.kind => d.kind_changed.push(path.clone()),
                Some(a) => {
                    if a.sha256 != b.sha256 || a.target != b.target {
                        d.modified.push(path.clone());
                    }
                    if a.mode != b.mode {
                        d.mode_changed.push(ModeChange { path: path.clone(), before: b.mode, after: a.mode });
                    }
                }
            }
        }
        d.created = after.keys().filter(|p| !before.contains_key(*p)).cloned().collect();
        d
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.created.is_empty()
            && self.deleted.is_empty()
            && self.modified.is_empty()
            && self.kind_changed.is_empty()
            && self.mode_changed.is_empty()
    }

    /// Paths whose content now differs (created, modified, kind changed) — the ones whose
    /// text is worth keeping.
    pub fn changed_paths(&self) -> impl Iterator<Item = &String> {
        self.created.iter().chain(&self.modified).chain(&self.kind_changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(sha: &str, mode: u32) -> SnapshotEntry {
        SnapshotEntry { kind: EntryKind::File, size: 1, mode, sha256: Some(sha.into()), target: None }
    }

    #[test]
    fn diff_classifies() {
        let before: Snapshot = [
            ("a".to_string(), file("1", 0o644)),
            ("b".to_string(), file("2", 0o644)),
            ("c".to_string(), file("3", 0o644)),
        ]
        .into();
        let after: Snapshot = [
            ("a".to_string(), file("1", 0o755)),
            ("c".to_string(), file("4", 0o644)),
            ("d".to_string(), file("5", 0o644)),
        ]
        .into();
        let d = SnapshotDiff::between(&before, &after);
        assert_eq!(d.deleted, vec!["b"]);
        assert_eq!(d.created, vec!["d"]);
        assert_eq!(d.modified, vec!["c"]);
        assert_eq!(d.mode_changed, vec![ModeChange { path: "a".into(), before: 0o644, after: 0o755 }]);
    }
}
