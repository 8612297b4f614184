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
        // Both maps are sorted by path: one walk over the two compares each path once, where
        // a lookup per path would compare it with a dozen others.
        let mut d = SnapshotDiff::default();
        let (mut b_iter, mut a_iter) = (before.iter().peekable(), after.iter().peekable());
        loop {
            let order = match (b_iter.peek(), a_iter.peek()) {
                (None, None) => break,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some((bp, _)), Some((ap, _))) => bp.cmp(ap),
            };
            match order {
                std::cmp::Ordering::Less => {
                    let (path, _) = b_iter.next().expect("peeked");
                    d.deleted.push(path.clone());
                }
                std::cmp::Ordering::Greater => {
                    let (path, _) = a_iter.next().expect("peeked");
                    d.created.push(path.clone());
                }
                std::cmp::Ordering::Equal => {
                    let ((path, b), (_, a)) = (b_iter.next().expect("peeked"), a_iter.next().expect("peeked"));
                    if a.kind != b.kind {
                        d.kind_changed.push(path.clone());
                        continue;
                    }
                    if a.sha256 != b.sha256 || a.target != b.target {
                        d.modified.push(path.clone());
                    }
                    if a.mode != b.mode {
                        d.mode_changed.push(ModeChange { path: path.clone(), before: b.mode, after: a.mode });
                    }
                }
            }
        }
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

    /// Every path the run changed in any way: created, removed, modified, changed kind or mode.
    pub fn touched_paths(&self) -> impl Iterator<Item = &String> {
        self.created.iter().chain(&self.deleted).chain(&self.modified).chain(&self.kind_changed).chain(self.mode_changed.iter().map(|m| &m.path))
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

    /// The difference by definition: each path of either snapshot looked up in the other.
    fn diff_by_lookup(before: &Snapshot, after: &Snapshot) -> SnapshotDiff {
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

    #[test]
    fn the_walk_over_both_snapshots_agrees_with_looking_every_path_up() {
        // Snapshots drawn from a small set of paths (prefixes of each other, so the order of
        // `a`, `a/b`, `a.b` matters) and entries, many times over.
        let paths = ["a", "a.b", "a/b", "a/b/c", "b", "~/.ssh/id", "~/x", ".env", "z"];
        let entries = [
            file("1", 0o644),
            file("1", 0o600),
            file("2", 0o644),
            SnapshotEntry { kind: EntryKind::Dir, size: 0, mode: 0o755, sha256: None, target: None },
            SnapshotEntry { kind: EntryKind::Symlink, size: 0, mode: 0o777, sha256: None, target: Some("a".into()) },
            SnapshotEntry { kind: EntryKind::Symlink, size: 0, mode: 0o777, sha256: None, target: Some("b".into()) },
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut draw = || -> Snapshot {
            let mut s = Snapshot::new();
            for p in paths {
                let r = next();
                if r % 3 != 0 {
                    s.insert(p.to_string(), entries[(r / 3 % entries.len() as u64) as usize].clone());
                }
            }
            s
        };
        for _ in 0..2000 {
            let (before, after) = (draw(), draw());
            assert_eq!(SnapshotDiff::between(&before, &after), diff_by_lookup(&before, &after), "{before:?} → {after:?}");
        }
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
