//! Checking a bundle somebody else assembled. The judge reads the derived files
//! (`events.jsonl`, the snapshots); the raw channels are what the observers wrote. A bundle is
//! accepted only when its derived files follow from its raw channels: the events are derived
//! again with this build's adapters and must match byte for byte, the manifest's counts must
//! be the derived counts, the after-snapshot must agree with what the file watcher saw last of
//! every path, and every blob must be the content of a snapshot entry, within the blob caps.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};
use overeager_core::bundle::{BundleManifest, files};
use overeager_core::{Channel, Event, Op, Snapshot};

use overeager_core::bundle::{BLOB_CAP, BUNDLE_BLOBS_TOTAL};

/// How a bundle's derived files disagree with its raw channels.
#[derive(Debug, thiserror::Error)]
pub enum Mismatch {
    #[error("events.jsonl does not follow from the raw channels: line {line} is {sent}, but the raw channels give {derived}")]
    Events { line: usize, sent: String, derived: String },
    #[error("bundle.json counts {sent} events per channel, but the raw channels give {derived}")]
    Counts { sent: String, derived: String },
    #[error("snapshot/after.json {what} `{path}`, but the file watcher's last record of it (event {seq}) says it {watched}")]
    Snapshot { what: &'static str, path: String, seq: u64, watched: &'static str },
    #[error("blobs/{name} is the content of no snapshot entry; a bundle holds only the text of files it snapshotted")]
    StrayBlob { name: String },
    #[error("blobs/{name} is {size} bytes; a blob holds at most {cap} bytes")]
    BlobTooLarge { name: String, size: u64, cap: u64 },
    #[error("blobs/ holds {size} bytes; a bundle holds at most {cap}")]
    BlobsTooLarge { size: u64, cap: u64 },
}

/// Checks that the bundle directory's derived files follow from its raw channels.
/// `Err` is either a [`Mismatch`] (the bundle is inconsistent) or an unreadable file.
pub fn verify(dir: &Path) -> Result<()> {
    let mpath = dir.join(files::MANIFEST);
    let manifest: BundleManifest = serde_json::from_slice(&std::fs::read(&mpath).with_context(|| format!("reading {}", files::MANIFEST))?)
        .with_context(|| format!("{} is not a valid bundle manifest", files::MANIFEST))?;
    let format = crate::derive::event_format(&manifest, Path::new(files::MANIFEST))?;
    let (events, counts) = crate::derive::derive_events(dir, &manifest.roots, format)?;
    let derived = crate::derive::events_jsonl(&events)?;
    let sent = std::fs::read(dir.join(files::EVENTS)).unwrap_or_default();
    if sent != derived {
        return Err(first_difference(&sent, &derived).into());
    }
    if manifest.counts != counts {
        return Err(Mismatch::Counts { sent: serde_json::to_string(&manifest.counts)?, derived: serde_json::to_string(&counts)? }.into());
    }
    let read_snap = |name: &str| -> Result<Snapshot> {
        serde_json::from_slice(&std::fs::read(dir.join(name)).with_context(|| format!("reading {name}"))?).with_context(|| format!("{name} is not a valid snapshot"))
    };
    let (before, after) = (read_snap(files::SNAPSHOT_BEFORE)?, read_snap(files::SNAPSHOT_AFTER)?);
    check_after(&events, &after)?;
    check_blobs(&dir.join(files::BLOBS), &before, &after)
}

/// The first line where the sent and derived `events.jsonl` differ, shortened for a message.
fn first_difference(sent: &[u8], derived: &[u8]) -> Mismatch {
    let short = |l: Option<&[u8]>| match l {
        None => "missing (the file ends)".to_string(),
        Some(l) => {
            let s = String::from_utf8_lossy(l);
            if s.chars().count() > 160 { format!("`{}…`", s.chars().take(160).collect::<String>()) } else { format!("`{s}`") }
        }
    };
    let (mut a, mut b) = (sent.split(|&c| c == b'\n'), derived.split(|&c| c == b'\n'));
    let mut line = 1;
    loop {
        let (x, y) = (a.next(), b.next());
        if x != y || (x.is_none() && y.is_none()) {
            return Mismatch::Events { line, sent: short(x), derived: short(y) };
        }
        line += 1;
    }
}

/// Every path the watcher saw last as written or created must be in the after-snapshot, and
/// every path it saw last as deleted or moved away must not be. Skipped when the watcher's
/// queue overflowed (its record is then known to be partial). Only paths of the snapshot's
/// own tree (the workspace) are checked.
fn check_after(events: &[Event], after: &Snapshot) -> Result<(), Mismatch> {
    let watch = || events.iter().filter(|e| e.channel == Channel::Fswatch);
    if watch().any(|e| e.op == Op::Unknown) {
        return Ok(());
    }
    let in_tree = |p: &str| !p.is_empty() && !p.starts_with('/') && !p.starts_with('~') && !p.split('/').any(|c| c == "..");
    // path → (exists, seq of the last record)
    let mut last: BTreeMap<String, (bool, u64)> = BTreeMap::new();
    for e in watch() {
        match (e.op, e.paths.as_slice()) {
            (Op::Create | Op::Write, [p]) => {
                last.insert(p.clone(), (true, e.seq));
            }
            (Op::Delete, [p]) => {
                // Whatever was under a removed directory went with it.
                for k in keys_under(&last, p) {
                    last.insert(k, (false, e.seq));
                }
                last.insert(p.clone(), (false, e.seq));
            }
            (Op::Rename, [from, to]) => {
                for k in keys_under(&last, from) {
                    last.insert(k, (false, e.seq));
                }
                last.insert(from.clone(), (false, e.seq));
                // What is under the target now is the moved tree's, which the watcher did not
                // list: earlier records there decide nothing.
                for k in keys_under(&last, to) {
                    last.remove(&k);
                }
                last.insert(to.clone(), (true, e.seq));
            }
            _ => {}
        }
    }
    for (path, (exists, seq)) in last.into_iter().filter(|(p, _)| in_tree(p)) {
        let present = after.contains_key(&path);
        if exists && !present {
            return Err(Mismatch::Snapshot { what: "has no", path, seq, watched: "was written or created, and nothing removed it after" });
        }
        if !exists && present {
            return Err(Mismatch::Snapshot { what: "still has", path, seq, watched: "was deleted or moved away" });
        }
    }
    Ok(())
}

/// The tracked paths strictly under directory `p`.
fn keys_under(last: &BTreeMap<String, (bool, u64)>, p: &str) -> Vec<String> {
    let prefix = format!("{p}/");
    last.range(prefix.clone()..).take_while(|(k, _)| k.starts_with(&prefix)).map(|(k, _)| k.clone()).collect()
}

fn check_blobs(dir: &Path, before: &Snapshot, after: &Snapshot) -> Result<()> {
    let known: BTreeSet<&str> = before.values().chain(after.values()).filter_map(|e| e.sha256.as_deref()).collect();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).context("reading blobs/"),
    };
    let mut total = 0u64;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let size = entry.metadata()?.len();
        if size > BLOB_CAP {
            return Err(Mismatch::BlobTooLarge { name, size, cap: BLOB_CAP }.into());
        }
        total += size;
        if total > BUNDLE_BLOBS_TOTAL as u64 {
            return Err(Mismatch::BlobsTooLarge { size: total, cap: BUNDLE_BLOBS_TOTAL as u64 }.into());
        }
        if !known.contains(name.as_str()) {
            return Err(Mismatch::StrayBlob { name }.into());
        }
    }
    Ok(())
}
