//! Taking snapshots of the workspace and `$HOME`: path → kind, size, mode, sha256.
//! Symlinks are recorded and never followed.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use overeager_core::bundle::{BLOB_CAP, BUNDLE_BLOBS_TOTAL};
use overeager_core::paths::Roots;
use overeager_core::snapshot::{EntryKind, Snapshot, SnapshotDiff, SnapshotEntry};

/// Upper bound on the text kept in memory per snapshot.
const KEEP_TOTAL: usize = 64 * 1024 * 1024;

/// Whether bytes look like text worth keeping.
pub fn is_text(bytes: &[u8]) -> bool {
    !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok()
}

/// Snapshots both roots. Returns the manifest and the contents of small text files by sha256.
pub fn take(roots: &Roots) -> std::io::Result<(Snapshot, BTreeMap<String, Vec<u8>>)> {
    let mut snap = Snapshot::new();
    let mut texts = BTreeMap::new();
    let mut kept = 0usize;
    for (root, name) in [(&roots.workspace, "."), (&roots.home, "~")] {
        // A root the run replaced by a link is recorded as that link and not walked: what it
        // leads to is not the sandbox's.
        let root_meta = Path::new(root).symlink_metadata()?;
        if root_meta.file_type().is_symlink() {
            let target = std::fs::read_link(root)?.to_string_lossy().into_owned();
            snap.insert(name.to_string(), SnapshotEntry { kind: EntryKind::Symlink, size: target.len() as u64, mode: root_meta.permissions().mode() & 0o7777, sha256: None, target: Some(target) });
            continue;
        }
        for entry in walkdir::WalkDir::new(root).follow_links(false).follow_root_links(false).sort_by_file_name().min_depth(1) {
            let entry = entry.map_err(std::io::Error::other)?;
            let path = entry.path();
            let meta = path.symlink_metadata()?;
            let ft = meta.file_type();
            let mode = meta.permissions().mode() & 0o7777;
            let logical = roots.logical(&path.to_string_lossy());
            let e = if ft.is_symlink() {
                let target = std::fs::read_link(path)?.to_string_lossy().into_owned();
                SnapshotEntry { kind: EntryKind::Symlink, size: target.len() as u64, mode, sha256: None, target: Some(target) }
            } else if ft.is_dir() {
                SnapshotEntry { kind: EntryKind::Dir, size: 0, mode, sha256: None, target: None }
            } else if ft.is_file() {
                // Small files are read whole (their text may be kept); larger ones are hashed
                // as they stream, so a huge (or sparse) file costs no memory.
                let sha = if meta.len() <= BLOB_CAP {
                    let bytes = read_file(path, &meta)?;
                    let sha = overeager_core::sha256_hex(&bytes);
                    if bytes.len() as u64 <= BLOB_CAP && kept + bytes.len() <= KEEP_TOTAL && is_text(&bytes) {
                        kept += bytes.len();
                        texts.insert(sha.clone(), bytes);
                    }
                    sha
                } else {
                    hash_file(path, &meta)?
                };
                SnapshotEntry { kind: EntryKind::File, size: meta.len(), mode, sha256: Some(sha), target: None }
            } else {
                SnapshotEntry { kind: EntryKind::Other, size: 0, mode, sha256: None, target: None }
            };
            snap.insert(logical, e);
        }
    }
    Ok((snap, texts))
}

fn hash_file(path: &Path, meta: &std::fs::Metadata) -> std::io::Result<String> {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    match overeager_bundle::files::open_walked(path, meta, false) {
        Ok(mut f) => {
            std::io::copy(&mut f, &mut h)?;
            Ok(hex::encode(h.finalize()))
        }
        // As in `read_file`: recorded as if empty.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(overeager_core::sha256_hex(b"")),
        Err(e) => Err(e),
    }
}

fn read_file(path: &Path, meta: &std::fs::Metadata) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    match overeager_bundle::files::open_walked(path, meta, false) {
        Ok(mut f) => {
            let mut b = Vec::with_capacity(meta.len() as usize);
            f.read_to_end(&mut b)?;
            Ok(b)
        }
        // An unreadable file (mode 000 after a hostile chmod) is still recorded, by size only.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// The texts a bundle keeps: first those of changed and deleted files (before and after),
/// then every other text file in path order, until [`BUNDLE_BLOBS_TOTAL`]. Keeping unchanged
/// files lets predicates read content (a secret's source, a config a success check inspects)
/// without the fixture; identical contents are stored once.
pub fn select_blobs<'a>(diff: &SnapshotDiff, sides: [(&'a Snapshot, &'a BTreeMap<String, Vec<u8>>); 2]) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut total = 0usize;
    let mut keep = |snap: &Snapshot, texts: &BTreeMap<String, Vec<u8>>, path: &str| {
        if let Some(sha) = snap.get(path).and_then(|e| e.sha256.as_ref())
            && let Some(bytes) = texts.get(sha)
            && !out.contains_key(sha)
            && total + bytes.len() <= BUNDLE_BLOBS_TOTAL
        {
            total += bytes.len();
            out.insert(sha.clone(), bytes.clone());
        }
    };
    for p in diff.changed_paths().chain(&diff.deleted) {
        for (snap, texts) in sides {
            keep(snap, texts, p);
        }
    }
    for (snap, texts) in sides {
        for p in snap.keys() {
            keep(snap, texts, p);
        }
    }
    out
}
