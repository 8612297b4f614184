//! Reading a bundle back: its manifest, events, snapshots and scenario, from a directory or a
//! packed `.oeb` read into memory with the same checks as unpacking it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{Context, Result, bail};
use overeager_core::bundle::{BUNDLE_SCHEMA, BundleManifest, files};
use overeager_core::{Event, Scenario, Snapshot, SnapshotDiff};

use crate::pack;

/// Reads a JSON-lines file; a missing file is empty. Lines that do not parse are counted, not
/// fatal: a raw channel is kept as it was, whatever it holds.
pub(crate) fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<(Vec<T>, usize)> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    Ok(parse_jsonl(&text))
}

/// The values of a JSON Lines text, and how many of its lines are not one.
pub(crate) fn parse_jsonl<T: serde::de::DeserializeOwned>(text: &str) -> (Vec<T>, usize) {
    let mut out = Vec::new();
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str(line) {
            Ok(v) => out.push(v),
            Err(_) => bad += 1,
        }
    }
    (out, bad)
}

/// A bundle read back from a directory.
pub struct Bundle {
    pub dir: PathBuf,
    pub manifest: BundleManifest,
    /// The scenario the bundle carries; shared with every other bundle read in this process
    /// whose copy is byte-identical (see [`parse_scenario`]).
    pub scenario: Option<Arc<Scenario>>,
    pub events: Vec<Event>,
    /// The snapshots, shared with every other bundle read in this process whose file is
    /// byte-identical.
    pub before: Arc<Snapshot>,
    pub after: Arc<Snapshot>,
    /// Where the bundle's files are.
    pub files: Files,
    /// Keeps an unpacked `.oeb` alive while the bundle is in use.
    _unpacked: Option<tempfile::TempDir>,
}

/// Where a bundle's files are read from: its directory, or a `.oeb` read into memory.
pub enum Files {
    /// A bundle directory: its path, and an open handle that each of its files is opened
    /// relative to (the kernel then walks only the file's own path, not the directory's again).
    Dir { path: PathBuf, handle: std::fs::File },
    Memory(std::collections::BTreeMap<PathBuf, Vec<u8>>),
}

/// Opens a bundle directory or `.oeb` file.
fn open_bundle_path(path: &Path) -> Result<std::fs::File> {
    std::fs::File::open(path).with_context(|| format!("{} is not a bundle: cannot read {}", path.display(), files::MANIFEST))
}

/// The bytes of file `rel` (a relative path) of directory `dir`.
fn read_at(dir: &std::fs::File, rel: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd};
    let name = std::ffi::CString::new(rel).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `name` is NUL-terminated and `dir` an open descriptor for the whole call.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `openat` just returned this descriptor, and nothing else owns it.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    // Bundle files are small: a first read into room for a typical one saves asking the size,
    // and what is left over is given back (callers keep some files' bytes, blobs as text).
    // `File::read_to_end` would ask anyway (a `statx` and an `lseek` per file, a third of the
    // system calls of judging a bundle); reading through `Take` does not.
    let mut bytes = Vec::with_capacity(16 << 10);
    (&mut file).take(u64::MAX).read_to_end(&mut bytes)?;
    bytes.shrink_to_fit();
    Ok(bytes)
}

impl Files {
    /// A file's bytes by its path in the bundle; `None` when it is not there.
    pub fn read(&self, rel: &str) -> std::io::Result<Option<Vec<u8>>> {
        match self {
            Files::Dir { handle, .. } => match read_at(handle, rel) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            },
            Files::Memory(files) => Ok(files.get(Path::new(rel)).cloned()),
        }
    }

    /// The files directly in a directory of the bundle, by name, with their bytes.
    pub fn in_dir(&self, rel: &str) -> std::io::Result<Vec<(String, Vec<u8>)>> {
        match self {
            Files::Dir { path: dir, handle } => {
                let entries = match std::fs::read_dir(dir.join(rel)) {
                    Ok(e) => e,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(e) => return Err(e),
                };
                let mut out = Vec::new();
                for entry in entries {
                    let name = entry?.file_name().to_string_lossy().into_owned();
                    let bytes = read_at(handle, &format!("{rel}/{name}"))?;
                    out.push((name, bytes));
                }
                Ok(out)
            }
            Files::Memory(files) => Ok(files
                .iter()
                .filter(|(p, _)| p.parent() == Some(Path::new(rel)))
                .filter_map(|(p, b)| Some((p.file_name()?.to_string_lossy().into_owned(), b.clone())))
                .collect()),
        }
    }
}

/// How much a [`SharedParses`] keeps: files, and bytes of them in all; past either it starts
/// again, so a process that reads bundles of many scenarios holds a bounded amount.
const PARSES_KEPT: usize = 1024;
const PARSES_KEPT_BYTES: usize = 32 << 20;

/// Files larger than this are parsed afresh every time rather than kept.
const SHARED_PARSE_MAX_BYTES: usize = 256 << 10;

/// Parsed JSON files kept and shared, keyed by their exact bytes (a lookup compares them all).
/// Bundles repeat files: every bundle of a scenario carries the same `scenario.json` and, as
/// the scenario's fixture is the same, the same before-snapshot; a run that changed nothing
/// has that snapshot after it too. Parsing them was most of reading a bundle.
struct SharedParses<T>(OnceLock<Mutex<Kept<T>>>);

/// What a [`SharedParses`] holds, and the size of the files it holds.
struct Kept<T> {
    parsed: HashMap<Box<[u8]>, Arc<T>>,
    bytes: usize,
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept { parsed: HashMap::new(), bytes: 0 }
    }
}

impl<T: serde::de::DeserializeOwned> SharedParses<T> {
    const fn new() -> Self {
        SharedParses(OnceLock::new())
    }

    fn parse(&self, bytes: &[u8]) -> serde_json::Result<Arc<T>> {
        let kept = self.0.get_or_init(Mutex::default);
        if let Some(v) = kept.lock().unwrap_or_else(|e| e.into_inner()).parsed.get(bytes) {
            return Ok(v.clone());
        }
        let value: Arc<T> = Arc::new(serde_json::from_slice(bytes)?);
        if bytes.len() <= SHARED_PARSE_MAX_BYTES {
            let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
            if kept.parsed.len() >= PARSES_KEPT || kept.bytes + bytes.len() > PARSES_KEPT_BYTES {
                *kept = Kept::default();
            }
            if kept.parsed.insert(bytes.into(), value.clone()).is_none() {
                kept.bytes += bytes.len();
            }
        }
        Ok(value)
    }
}

/// A bundle's `scenario.json`, parsed (and shared, see [`SharedParses`]); `None` when it is not
/// a scenario.
pub fn parse_scenario(bytes: &[u8]) -> Option<Arc<Scenario>> {
    static SCENARIOS: SharedParses<Scenario> = SharedParses::new();
    SCENARIOS.parse(bytes).ok()
}

/// A snapshot file, parsed (and shared, see [`SharedParses`]).
fn parse_snapshot(bytes: &[u8]) -> serde_json::Result<Arc<Snapshot>> {
    static SNAPSHOTS: SharedParses<Snapshot> = SharedParses::new();
    SNAPSHOTS.parse(bytes)
}

impl Bundle {
    /// Opens a bundle directory or a packed `.oeb` file (unpacked into a temporary directory,
    /// for callers that read its raw files by path).
    pub fn open(path: &Path) -> Result<Bundle> {
        if path.is_file() {
            let tmp = tempfile::Builder::new().prefix("overeager-bundle-").tempdir()?;
            let dir = tmp.path().join("b");
            pack::unpack(path, &dir, &pack::Limits::default())?;
            let mut b = Bundle::open_dir(&dir)?;
            b._unpacked = Some(tmp);
            return Ok(b);
        }
        Bundle::open_dir(path)
    }

    /// Reads a bundle directory in place, or a `.oeb` file into memory with the same checks as
    /// unpacking it: what judging needs, without temporary files.
    pub fn read(path: &Path) -> Result<Bundle> {
        // One open tells a directory from a `.oeb` file: asking first would walk the path twice.
        let handle = open_bundle_path(path)?;
        if handle.metadata().is_ok_and(|m| m.is_file()) {
            drop(handle);
            let files = pack::read_into_memory(path, &pack::Limits::default())?;
            return Bundle::from_files(path, Files::Memory(files));
        }
        Bundle::from_files(path, Files::Dir { path: path.to_path_buf(), handle })
    }

    /// The bundle just written to `dir` from these parts (what audit assembled), taken as they
    /// are rather than read back and parsed again; the files read on demand (channels, blobs)
    /// are read from `dir`.
    pub fn of_parts(dir: &Path, manifest: BundleManifest, scenario: Arc<Scenario>, events: Vec<Event>, before: Arc<Snapshot>, after: Arc<Snapshot>) -> Result<Bundle> {
        let files = Files::Dir { path: dir.to_path_buf(), handle: open_bundle_path(dir)? };
        Ok(Bundle { dir: dir.to_path_buf(), manifest, scenario: Some(scenario), events, before, after, files, _unpacked: None })
    }

    fn open_dir(dir: &Path) -> Result<Bundle> {
        Bundle::from_files(dir, Files::Dir { path: dir.to_path_buf(), handle: open_bundle_path(dir)? })
    }

    /// Reads a bundle's manifest, events, snapshots and scenario; `dir` names it in messages.
    fn from_files(dir: &Path, files: Files) -> Result<Bundle> {
        let mpath = dir.join(files::MANIFEST);
        let text = files
            .read(files::MANIFEST)
            .ok()
            .flatten()
            .and_then(|b| String::from_utf8(b).ok())
            .with_context(|| format!("{} is not a bundle: cannot read {}", dir.display(), files::MANIFEST))?;
        let manifest: BundleManifest =
            serde_json::from_str(&text).with_context(|| format!("{}: not a valid bundle manifest", mpath.display()))?;
        if manifest.schema > BUNDLE_SCHEMA {
            bail!("{}: bundle schema {} is newer than this build reads ({BUNDLE_SCHEMA}); upgrade overeager", mpath.display(), manifest.schema);
        }
        let events_path = dir.join(files::EVENTS);
        let events_bytes = files.read(files::EVENTS).with_context(|| format!("reading {}", events_path.display()))?.unwrap_or_default();
        let events_text = String::from_utf8(events_bytes).map_err(|_| anyhow::anyhow!("{}: not UTF-8 text; re-derive the events with a current build", events_path.display()))?;
        let (events, bad) = parse_jsonl::<Event>(&events_text);
        if bad > 0 {
            bail!("{}: {bad} line(s) are not valid events; re-derive them with a current build", dir.join(files::EVENTS).display());
        }
        let read_snap = |name: &str| -> Result<Arc<Snapshot>> {
            let p = dir.join(name);
            let bytes = files.read(name).with_context(|| format!("reading {}", p.display()))?.with_context(|| format!("reading {}: no such file", p.display()))?;
            parse_snapshot(&bytes).with_context(|| format!("{}: not a valid snapshot", p.display()))
        };
        let scenario = files.read(files::SCENARIO).ok().flatten().and_then(|b| parse_scenario(&b));
        Ok(Bundle {
            dir: dir.to_path_buf(),
            before: read_snap(files::SNAPSHOT_BEFORE)?,
            after: read_snap(files::SNAPSHOT_AFTER)?,
            manifest,
            scenario,
            events,
            files,
            _unpacked: None,
        })
    }

    /// What the run's model used and cost (`usage.json`), for a run on a provider's model.
    pub fn usage(&self) -> Result<Option<overeager_formats::model::usage::RunUsage>> {
        parse_usage(self.files.read(overeager_core::bundle::files::USAGE))
    }

    /// The model channel's records (`model.jsonl`; none for a run that had none), read as
    /// the events are derived from it: a line that is not a record is left out.
    pub fn model_records(&self) -> Result<Vec<overeager_formats::model::ModelRecord>> {
        let bytes = self.files.read(files::MODEL).with_context(|| format!("reading {}", files::MODEL))?;
        Ok(bytes.map(|b| parse_jsonl(&String::from_utf8_lossy(&b)).0).unwrap_or_default())
    }

    /// What changed between the snapshots.
    pub fn diff(&self) -> SnapshotDiff {
        SnapshotDiff::between(&self.before, &self.after)
    }
}

/// The `usage.json` of the bundle directory `dir`, if it has one.
pub fn usage_in(dir: &Path) -> Result<Option<overeager_formats::model::usage::RunUsage>> {
    let path = dir.join(files::USAGE);
    parse_usage(match std::fs::read(&path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    })
}

fn parse_usage(read: std::io::Result<Option<Vec<u8>>>) -> Result<Option<overeager_formats::model::usage::RunUsage>> {
    match read.with_context(|| format!("reading {}", files::USAGE))? {
        Some(bytes) => Ok(Some(serde_json::from_slice(&bytes).with_context(|| format!("{} is not a usage record", files::USAGE))?)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_identical_files_share_one_parse_and_others_do_not() {
        let kept: SharedParses<Snapshot> = SharedParses::new();
        let a = br#"{"a.txt":{"kind":"file","size":1,"mode":420}}"#;
        let b = br#"{"a.txt": {"kind":"file","size":1,"mode":420}}"#;
        let (first, again, other) = (kept.parse(a).unwrap(), kept.parse(a).unwrap(), kept.parse(b).unwrap());
        assert!(Arc::ptr_eq(&first, &again));
        assert!(!Arc::ptr_eq(&first, &other), "a file with other bytes gets its own parse, even when it means the same");
        assert_eq!(*first, *other);
        assert!(kept.parse(b"{").is_err(), "a file that does not parse is an error, and is not kept");
    }

    #[test]
    fn shared_parses_stay_bounded() {
        let kept: SharedParses<serde_json::Value> = SharedParses::new();
        for i in 0..PARSES_KEPT + 10 {
            kept.parse(format!("[{i}]").as_bytes()).unwrap();
        }
        let held = kept.0.get().unwrap().lock().unwrap();
        assert!(held.parsed.len() <= PARSES_KEPT && held.bytes <= PARSES_KEPT_BYTES);
        drop(held);
        let large = format!("\"{}\"", "x".repeat(SHARED_PARSE_MAX_BYTES));
        let (one, two) = (kept.parse(large.as_bytes()).unwrap(), kept.parse(large.as_bytes()).unwrap());
        assert!(!Arc::ptr_eq(&one, &two), "a file over the size limit is parsed afresh, not kept");
    }
}
