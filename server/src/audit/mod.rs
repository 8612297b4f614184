//! Audit bundles: assembling a run's raw observations into a bundle directory, reading
//! bundles back, and packing them as `.oeb` files.

pub mod pack;
pub mod signature;
pub mod verify;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{Context, Result, bail};
use overeager_core::bundle::{AgentRef, BUNDLE_SCHEMA, BundleManifest, Counts, ExecutorRef, NetRecord, ScenarioRef, files};
use overeager_core::event::{merge, normalize_fswatch, normalize_net, normalize_shim};
use overeager_core::adapters::Format;
use overeager_core::model::ModelRecord;
use overeager_core::{Event, Scenario, ShimRecord, Snapshot, SnapshotDiff, WatchRecord};

use crate::run::{RawRun, RunRequest, snapshot::BLOB_CAP};

/// Reads a JSON-lines file; a missing file is empty. Lines that do not parse are counted, not
/// fatal: a raw channel is kept as it was, whatever it holds.
fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<(Vec<T>, usize)> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    Ok(parse_jsonl(&text))
}

/// The values of a JSON Lines text, and how many of its lines are not one.
fn parse_jsonl<T: serde::de::DeserializeOwned>(text: &str) -> (Vec<T>, usize) {
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

/// Derives the normalized events of a bundle directory from its raw channels; `format` is the
/// agent stream's format (see [`overeager_core::adapters`]).
pub fn derive_events(dir: &Path, roots: &overeager_core::paths::Roots, format: Format) -> Result<(Vec<Event>, Counts)> {
    let (shim, _) = read_jsonl::<ShimRecord>(&dir.join(files::SHIM))?;
    let (watch, _) = read_jsonl::<WatchRecord>(&dir.join(files::FSWATCH))?;
    let agent_text = std::fs::read_to_string(dir.join(files::AGENT)).unwrap_or_default();
    let mut agent = format.normalize(&agent_text, roots);
    let (model, _) = read_jsonl::<ModelRecord>(&dir.join(files::MODEL))?;
    overeager_core::adapters::align_with_model(&mut agent, &overeager_core::model::turns(&model));
    // The agent's file tools name paths as text; through a link they reach elsewhere.
    let before: Snapshot = match std::fs::read(dir.join(files::SNAPSHOT_BEFORE)) {
        Ok(b) => serde_json::from_slice(&b).with_context(|| format!("{} is not a valid snapshot", files::SNAPSHOT_BEFORE))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Snapshot::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", files::SNAPSHOT_BEFORE)),
    };
    overeager_core::links::resolve_agent_paths(&mut agent, &before, &watch, roots);
    let shell = normalize_shim(&shim, roots);
    let fs = normalize_fswatch(&watch, roots);
    // Only runs with network have the file; `read_jsonl` reads a missing one as empty.
    let net = normalize_net(&read_jsonl::<NetRecord>(&dir.join(files::NET))?.0);
    let counts = Counts {
        shell: shell.len() as u64,
        agent: agent.len() as u64,
        fswatch: fs.len() as u64,
        net: net.len() as u64,
        model: model.len() as u64,
        unknown: agent.iter().filter(|e| e.op == overeager_core::Op::Unknown).count() as u64,
        events: (shell.len() + agent.len() + fs.len() + net.len()) as u64,
    };
    Ok((merge(agent, shell, fs, net), counts))
}

/// Copies the regular files and directories under `from` to `to` (links are not followed
/// and not kept: the tree is the agent's, and `from` itself being a link copies nothing).
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    for e in walkdir::WalkDir::new(from).follow_links(false).follow_root_links(false) {
        let e = e?;
        let dest = to.join(e.path().strip_prefix(from).expect("inside the tree"));
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dest)?;
        } else if e.file_type().is_file() {
            let meta = e.metadata()?;
            let mut src = crate::files::open_walked(e.path(), &meta, false).with_context(|| format!("copying {}", e.path().display()))?;
            let mut out = std::fs::File::create(&dest).with_context(|| format!("writing {}", dest.display()))?;
            std::io::copy(&mut src, &mut out).with_context(|| format!("copying {}", e.path().display()))?;
        }
    }
    Ok(())
}

fn write_json<T: serde::Serialize>(path: &Path, v: &T) -> Result<()> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    let mut bytes = serde_json::to_vec_pretty(v)?;
    bytes.push(b'\n');
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// A fresh, hard-to-guess run id.
fn new_run_id(started_us: u64) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let seed = format!("{started_us}-{}-{n}-{:?}", std::process::id(), std::thread::current().id());
    overeager_core::sha256_hex(seed.as_bytes())[..20].to_string()
}

pub use crate::files::{check_out_free, publish, staging_dir};

/// Executes one run on the request's executor and writes its bundle to `out`.
pub fn execute_to(req: &RunRequest<'_>, out: &Path) -> Result<BundleManifest> {
    check_out_free(out)?;
    let raw = req.executor.execute(req)?;
    assemble(&raw, req, out)
}

/// Writes the bundle of a finished run to `out` (which must not exist yet, or be empty). The
/// bundle appears there complete or not at all.
pub fn assemble(raw: &RawRun, req: &RunRequest<'_>, out: &Path) -> Result<BundleManifest> {
    check_out_free(out)?;
    let staging = staging_dir(out)?;
    let dir = staging.path();
    for name in [files::PROMPT, files::SHIM, files::AGENT, files::AGENT_STDERR, files::FSWATCH] {
        let src = raw.channels_dir.join(name);
        if src.exists() {
            std::fs::copy(&src, dir.join(name)).with_context(|| format!("copying {name}"))?;
        } else {
            std::fs::write(dir.join(name), b"")?;
        }
    }
    for (active, name) in [(raw.channels.net, files::NET), (raw.channels.model, files::MODEL)] {
        if active {
            std::fs::copy(raw.channels_dir.join(name), dir.join(name)).with_context(|| format!("copying {name}"))?;
        }
    }
    // A real agent's own logs (session transcripts, config), as it wrote them.
    let logs = raw.channels_dir.join(files::AGENT_LOGS);
    if logs.is_dir() {
        copy_tree(&logs, &dir.join(files::AGENT_LOGS))?;
    }
    write_json(&dir.join(files::SCENARIO), &req.scenario.scenario)?;
    write_json(&dir.join(files::SNAPSHOT_BEFORE), &raw.before)?;
    write_json(&dir.join(files::SNAPSHOT_AFTER), &raw.after)?;
    std::fs::create_dir_all(dir.join(files::BLOBS))?;
    for (sha, bytes) in &raw.blobs {
        std::fs::write(dir.join(files::BLOBS).join(sha), bytes)?;
    }
    let (events, counts) = derive_events(dir, &raw.roots, req.agent.event_format())?;
    write_events(&dir.join(files::EVENTS), &events)?;
    let manifest = BundleManifest {
        schema: BUNDLE_SCHEMA,
        run_id: req.run_id.clone().unwrap_or_else(|| new_run_id(raw.started_us)),
        scenario: ScenarioRef { id: req.scenario.scenario.id.clone(), hash: req.scenario.hash.clone() },
        variant: req.variant,
        agent: AgentRef {
            id: req.agent.id(),
            framework: req.labels.as_ref().map_or_else(|| req.agent.framework().to_string(), |l| l.0.clone()),
            version: raw.agent_version.clone(),
            model: req.labels.as_ref().map_or_else(|| req.agent.model(), |l| l.1.clone()),
        },
        replicate: req.replicate,
        executor: ExecutorRef { kind: raw.executor.to_string(), image_digest: raw.image_digest.clone(), host: raw.host.clone() },
        prompt_sha256: overeager_core::sha256_hex(raw.prompt.text.as_bytes()),
        consent_block: raw.prompt.consent_block.as_ref().map(|r| [r.start, r.end]),
        started_us: raw.started_us,
        ended_us: raw.ended_us,
        duration_ms: raw.ended_us.saturating_sub(raw.started_us) / 1000,
        timeout_ms: req.timeout.as_millis() as u64,
        timed_out: raw.timed_out,
        exit: raw.exit,
        channels: raw.channels,
        counts,
        roots: raw.roots.clone(),
        blob_cap: BLOB_CAP,
        overeager_version: env!("CARGO_PKG_VERSION").to_string(),
        git: Some(raw.git.clone()),
    };
    // The manifest goes last: a directory without one is not a bundle.
    write_json(&dir.join(files::MANIFEST), &manifest)?;
    publish(staging, out)?;
    Ok(manifest)
}

fn write_events(path: &Path, events: &[Event]) -> Result<()> {
    std::fs::write(path, events_jsonl(events)?).with_context(|| format!("writing {}", path.display()))
}

/// `events.jsonl` exactly as a bundle holds it: one compact JSON object per line.
fn events_jsonl(events: &[Event]) -> Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(events.len() * 160);
    for e in events {
        serde_json::to_writer(&mut buf, e)?;
        buf.push(b'\n');
    }
    Ok(buf)
}

/// The format of a bundle's agent stream: the one its agent writes.
pub fn event_format(manifest: &BundleManifest, mpath: &Path) -> Result<Format> {
    Format::for_agent(&manifest.agent.id)
        .or_else(|| Format::for_framework(manifest.agent.framework.split(':').next().unwrap_or("")))
        .with_context(|| format!("{}: no adapter for agent `{}`", mpath.display(), manifest.agent.id))
}

/// What [`rederive`] found.
#[derive(Debug, serde::Serialize)]
pub struct Rederived {
    pub counts: Counts,
    /// The agent stream's `unknown` events, by what the adapter said of them.
    pub unknown: std::collections::BTreeMap<String, u64>,
    /// Whether `events.jsonl` changed.
    pub changed: bool,
}

/// Derives `events.jsonl` of a bundle directory again from its raw channels with this build's
/// adapters (the agent stream's format is the one its agent writes), and updates the
/// manifest's counts. Both files are replaced atomically; verdicts change only through them.
pub fn rederive(dir: &Path) -> Result<Rederived> {
    if dir.is_file() {
        bail!("{}: re-deriving works on a bundle directory; unpack it first (`overeager bundle unpack`)", dir.display());
    }
    let mpath = dir.join(files::MANIFEST);
    let text = std::fs::read_to_string(&mpath).with_context(|| format!("{} is not a bundle: cannot read {}", dir.display(), files::MANIFEST))?;
    let mut manifest: BundleManifest = serde_json::from_str(&text).with_context(|| format!("{}: not a valid bundle manifest", mpath.display()))?;
    let format = event_format(&manifest, &mpath)?;
    let (events, counts) = derive_events(dir, &manifest.roots, format)?;
    let mut unknown = std::collections::BTreeMap::new();
    for e in events.iter().filter(|e| e.op == overeager_core::Op::Unknown && e.channel == overeager_core::Channel::Agent) {
        *unknown.entry(e.text.clone().unwrap_or_default()).or_insert(0) += 1;
    }
    let buf = events_jsonl(&events)?;
    let changed = std::fs::read(dir.join(files::EVENTS)).ok().as_deref() != Some(buf.as_slice());
    crate::files::write_atomic(&dir.join(files::EVENTS), &buf)?;
    manifest.counts = counts;
    let mut m = serde_json::to_vec_pretty(&manifest)?;
    m.push(b'\n');
    crate::files::write_atomic(&mpath, &m)?;
    Ok(Rederived { counts, unknown, changed })
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

    /// What changed between the snapshots.
    pub fn diff(&self) -> SnapshotDiff {
        SnapshotDiff::between(&self.before, &self.after)
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
