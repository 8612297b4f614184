//! `.oeb` files: a bundle directory as a tar archive compressed with zstd.
//!
//! Packing is deterministic (sorted entries, zero times and owners). Unpacking treats the
//! file as hostile: only regular files and directories with relative, `..`-free paths are
//! accepted, sizes are counted as bytes are actually written (headers can lie), and the
//! result appears at the target only when everything succeeded.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result};

/// Limits applied when unpacking. Every one is checked while the archive streams: nothing is
/// written past a limit.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Total bytes written.
    pub max_total: u64,
    /// Number of entries.
    pub max_entries: u64,
    /// Bytes of any one file.
    pub max_file: u64,
    /// Bytes of any one file under `blobs/` (a bundle keeps only small texts there).
    pub max_blob: u64,
}

impl Default for Limits {
    /// For bundles of one's own: large runs (hundreds of thousands of file events) fit.
    fn default() -> Self {
        Limits { max_total: 1 << 30, max_entries: 200_000, max_file: 1 << 30, max_blob: 1 << 30 }
    }
}

impl Limits {
    /// For bundles uploaded to the server by anybody: bounded so that unpacking, re-deriving
    /// and judging one stays within a known amount of memory.
    pub fn upload() -> Limits {
        Limits { max_total: 64 << 20, max_entries: 10_000, max_file: 48 << 20, max_blob: overeager_core::bundle::BLOB_CAP }
    }
}

/// Why an archive was refused.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("{archive}: entry `{entry}` has an absolute path; bundle archives hold relative paths only")]
    Absolute { archive: String, entry: String },
    #[error("{archive}: entry `{entry}` contains `..`; bundle archives may not write outside their directory")]
    ParentDir { archive: String, entry: String },
    #[error("{archive}: entry `{entry}` is a {kind} (to `{target}`); bundle archives hold only regular files and directories")]
    Link { archive: String, entry: String, kind: &'static str, target: String },
    #[error("{archive}: entry `{entry}` is a {kind}; bundle archives hold only regular files and directories")]
    Special { archive: String, entry: String, kind: String },
    #[error("{archive}: unpacks to more than {limit} bytes (at entry `{entry}`); refusing a possible decompression bomb")]
    TooLarge { archive: String, entry: String, limit: u64 },
    #[error("{archive}: more than {limit} entries; refusing")]
    TooManyEntries { archive: String, limit: u64 },
    #[error("{archive}: entry `{entry}` is larger than {limit} bytes, the most one file of a bundle may hold here")]
    FileTooLarge { archive: String, entry: String, limit: u64 },
    #[error("{archive}: `{entry}` appears twice; a bundle archive holds one entry per path")]
    Duplicate { archive: String, entry: String },
    #[error("{archive}: there are bytes after the end of the tar archive; a bundle archive ends where its tar stream ends")]
    Trailing { archive: String },
    #[error("{target} already exists and is not an empty directory; choose another target")]
    TargetExists { target: String },
}

/// Packs the bundle directory `dir` into `out` (written atomically).
pub fn pack(dir: &Path, out: &Path) -> Result<u64> {
    if !dir.join(overeager_core::bundle::files::MANIFEST).is_file() {
        anyhow::bail!("{} is not a bundle directory (no bundle.json)", dir.display());
    }
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let tmp = tempfile::NamedTempFile::new_in(parent)?;
    {
        let enc = zstd::Encoder::new(tmp.as_file(), 6)?;
        let mut tar = tar::Builder::new(enc);
        let mut entries: Vec<walkdir::DirEntry> =
            walkdir::WalkDir::new(dir).follow_links(false).sort_by_file_name().min_depth(1).into_iter().collect::<Result<_, _>>()?;
        entries.sort_by(|a, b| a.path().cmp(b.path()));
        for e in entries {
            let rel = e.path().strip_prefix(dir).expect("inside dir");
            let mut h = tar::Header::new_gnu();
            h.set_mtime(0);
            h.set_uid(0);
            h.set_gid(0);
            if e.file_type().is_dir() {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                tar.append_data(&mut h, rel, std::io::empty())?;
            } else if e.file_type().is_file() {
                let data = std::fs::read(e.path())?;
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(0o644);
                h.set_size(data.len() as u64);
                tar.append_data(&mut h, rel, data.as_slice())?;
            } else {
                anyhow::bail!("{}: bundles hold only files and directories", e.path().display());
            }
        }
        let enc = tar.into_inner()?;
        enc.finish()?.flush()?;
    }
    let size = tmp.as_file().metadata()?.len();
    tmp.persist(out).with_context(|| format!("writing {}", out.display()))?;
    Ok(size)
}

fn checked_rel(archive: &str, entry: &Path) -> Result<PathBuf, UnpackError> {
    let shown = entry.to_string_lossy().into_owned();
    let mut out = PathBuf::new();
    for c in entry.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::CurDir => {}
            Component::ParentDir => return Err(UnpackError::ParentDir { archive: archive.into(), entry: shown }),
            Component::RootDir | Component::Prefix(_) => {
                return Err(UnpackError::Absolute { archive: archive.into(), entry: shown });
            }
        }
    }
    Ok(out)
}

/// Where an archive's entries go as they are checked.
trait Sink {
    /// A directory entry.
    fn dir(&mut self, rel: &Path) -> Result<()>;
    /// A regular file: copies what `data` yields and returns how many bytes that was.
    fn file(&mut self, rel: &Path, data: &mut dyn Read) -> Result<u64>;
}

/// Files written below a staging directory.
struct DirSink(PathBuf);

impl Sink for DirSink {
    fn dir(&mut self, rel: &Path) -> Result<()> {
        Ok(std::fs::create_dir_all(self.0.join(rel))?)
    }
    fn file(&mut self, rel: &Path, data: &mut dyn Read) -> Result<u64> {
        let dest = self.0.join(rel);
        if let Some(p) = dest.parent() {
            std::fs::create_dir_all(p)?;
        }
        let mut f = std::fs::File::create(&dest)?;
        Ok(std::io::copy(data, &mut f)?)
    }
}

/// Files kept in memory, by relative path.
#[derive(Default)]
struct MemorySink(BTreeMap<PathBuf, Vec<u8>>);

impl Sink for MemorySink {
    fn dir(&mut self, _rel: &Path) -> Result<()> {
        Ok(())
    }
    fn file(&mut self, rel: &Path, data: &mut dyn Read) -> Result<u64> {
        let mut bytes = Vec::new();
        let n = data.read_to_end(&mut bytes)? as u64;
        self.0.insert(rel.to_path_buf(), bytes);
        Ok(n)
    }
}

/// Unpacks `archive` into `target` (created; must not exist, or be empty). Nothing is
/// written outside `target`, and on any error nothing is left at `target`.
pub fn unpack(archive: &Path, target: &Path, limits: &Limits) -> Result<u64> {
    if target.exists() && !(target.is_dir() && std::fs::read_dir(target)?.next().is_none()) {
        return Err(UnpackError::TargetExists { target: target.display().to_string() }.into());
    }
    let staging = crate::files::staging_dir(target)?;
    let total = extract(archive, limits, &mut DirSink(staging.path().to_path_buf()))?;
    crate::files::publish(staging, target)?;
    Ok(total)
}

/// Reads `archive` into memory with the same checks as [`unpack`]: its regular files by
/// relative path (judging a stored bundle needs no temporary files).
pub fn read_into_memory(archive: &Path, limits: &Limits) -> Result<BTreeMap<PathBuf, Vec<u8>>> {
    let mut sink = MemorySink::default();
    extract(archive, limits, &mut sink)?;
    Ok(sink.0)
}

/// Streams `archive`'s entries into `sink`, refusing anything hostile; returns the bytes of
/// file content taken.
fn extract(archive: &Path, limits: &Limits, sink: &mut dyn Sink) -> Result<u64> {
    let shown = archive.display().to_string();
    let file = std::fs::File::open(archive).with_context(|| format!("opening {shown}"))?;
    let mut dec = zstd::Decoder::new(file).with_context(|| format!("{shown}: not a zstd stream"))?;
    // Bundles are written with a small window; a huge one only costs memory.
    dec.window_log_max(27)?;
    let mut ar = tar::Archive::new(dec);
    let mut total = 0u64;
    let mut count = 0u64;
    let mut seen = std::collections::HashSet::new();
    for entry in ar.entries().with_context(|| format!("{shown}: not a tar archive"))? {
        let mut entry = entry.with_context(|| format!("{shown}: damaged archive"))?;
        count += 1;
        if count > limits.max_entries {
            return Err(UnpackError::TooManyEntries { archive: shown, limit: limits.max_entries }.into());
        }
        let raw_path = entry.path().with_context(|| format!("{shown}: unreadable entry name"))?.into_owned();
        let rel = checked_rel(&shown, &raw_path)?;
        let entry_name = raw_path.to_string_lossy().into_owned();
        let kind = entry.header().entry_type();
        match kind {
            tar::EntryType::Directory => {
                if !rel.as_os_str().is_empty() && !seen.insert(rel.clone()) {
                    return Err(UnpackError::Duplicate { archive: shown, entry: entry_name }.into());
                }
                sink.dir(&rel)?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if rel.as_os_str().is_empty() {
                    continue;
                }
                if !seen.insert(rel.clone()) {
                    return Err(UnpackError::Duplicate { archive: shown, entry: entry_name }.into());
                }
                let cap = if rel.starts_with(overeager_core::bundle::files::BLOBS) { limits.max_blob } else { limits.max_file };
                // The header's size may lie; it is checked first, and the bytes as they come.
                if entry.header().size().unwrap_or(0) > cap {
                    return Err(UnpackError::FileTooLarge { archive: shown, entry: entry_name, limit: cap }.into());
                }
                let remaining = limits.max_total - total;
                if entry.header().size().unwrap_or(0) > remaining {
                    return Err(UnpackError::TooLarge { archive: shown, entry: entry_name, limit: limits.max_total }.into());
                }
                let allowed = cap.min(remaining);
                let written = sink.file(&rel, &mut (&mut entry).take(allowed))?;
                total += written;
                if written == allowed && entry.read(&mut [0u8; 1])? > 0 {
                    return Err(if allowed == cap {
                        UnpackError::FileTooLarge { archive: shown, entry: entry_name, limit: cap }
                    } else {
                        UnpackError::TooLarge { archive: shown, entry: entry_name, limit: limits.max_total }
                    }
                    .into());
                }
            }
            tar::EntryType::Symlink | tar::EntryType::Link => {
                let target = entry.link_name().ok().flatten().map(|t| t.to_string_lossy().into_owned()).unwrap_or_default();
                let kind = if kind == tar::EntryType::Symlink { "symbolic link" } else { "hard link" };
                return Err(UnpackError::Link { archive: shown, entry: entry_name, kind, target }.into());
            }
            // Extended headers carry metadata for the next entry; the tar crate applies them.
            tar::EntryType::XHeader | tar::EntryType::XGlobalHeader | tar::EntryType::GNULongName | tar::EntryType::GNULongLink => {}
            other => {
                return Err(UnpackError::Special { archive: shown, entry: entry_name, kind: format!("{other:?}") }.into());
            }
        }
    }
    // After the end-of-archive blocks only zero padding may follow, and the zstd stream must
    // end there too (a second frame or garbage is refused).
    let mut rest = ar.into_inner();
    let mut buf = [0u8; 8192];
    let mut padding = 0u64;
    loop {
        let n = match rest.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(_) => return Err(UnpackError::Trailing { archive: shown }.into()),
        };
        padding += n as u64;
        if buf[..n].iter().any(|&b| b != 0) || padding > 1 << 20 {
            return Err(UnpackError::Trailing { archive: shown }.into());
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rel_paths_are_checked() {
        assert!(checked_rel("a", Path::new("x/y")).is_ok());
        assert!(matches!(checked_rel("a", Path::new("/etc/passwd")), Err(UnpackError::Absolute { .. })));
        assert!(matches!(checked_rel("a", Path::new("x/../../y")), Err(UnpackError::ParentDir { .. })));
    }
}
