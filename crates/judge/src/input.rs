//! Reading bundles for judging: finding them under the paths given, and building the bundle
//! view every predicate module receives.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result, bail};
use overeager_core::bundle::{BundleManifest, files};
use overeager_core::predicates::ContentNeed;
use overeager_core::snapshot::Snapshot;
use overeager_core::scenario::{Play, Plays, PromptSpec};
use overeager_formats::adapters::Format;
use overeager_formats::attribution::{Actor, Attribution, ModelCall, Sources, attribute};
use overeager_core::bundle::ShimRecord;
use overeager_core::event::{Event, Op};
use overeager_core::snapshot::SnapshotDiff;
use overeager_core::view::{VIEW_SCHEMA, compact};
use overeager_core::{Scenario, sha256_hex};

use super::engine::{Interface, ViewArg};
use overeager_bundle::{Bundle, Files};

/// A bundle ready to judge.
pub struct LoadedBundle {
    /// The bundle as named on the command line (or an upload's name).
    pub label: String,
    pub manifest: BundleManifest,
    pub scenario: Arc<Scenario>,
    pub n_events: usize,
    events: Vec<Event>,
    before: Arc<Snapshot>,
    after: Arc<Snapshot>,
    /// Where the blobs are: read, and checked against their names, only when a module needs
    /// file contents (shared with [`LoadedBundle::agent_only`]).
    files: Arc<Files>,
    blobs_dir: PathBuf,
    blobs: Arc<OnceLock<Result<BTreeMap<String, String>, String>>>,
    /// Whose each event was: the agent's or its framework's.
    pub attribution: Arc<Attribution>,
    /// The same bundle with the framework's own activity left out — its events made inert
    /// and the files only it changed as they were before — when the framework did anything.
    /// Traps are judged on it; see [`neutralize`].
    agent_only: Option<Box<LoadedBundle>>,
    /// The encoded views and parts of them, each built on first use: a bundle judged by the
    /// built-in std alone never builds a JSON view.
    manifest_json: OnceLock<String>,
    compact_parts: OnceLock<CompactParts>,
    full_json: OnceLock<Result<String, String>>,
    full_compact: OnceLock<Result<Vec<u8>, String>>,
}

/// The events and snapshots in the compact layout, shared by every compact view of a bundle.
struct CompactParts {
    events: Vec<u8>,
    before: Vec<u8>,
    after: Vec<u8>,
}

/// A view as one module call gets it: borrowed when it is the bundle's whole view (shared by
/// modules), owned when it was cut to what std reads.
pub enum View<'a> {
    Json(Cow<'a, str>),
    Compact(Cow<'a, [u8]>),
}

impl View<'_> {
    /// The argument of the `evaluate` call.
    pub fn arg(&self) -> ViewArg<'_> {
        match self {
            View::Json(s) => ViewArg::Json(s),
            View::Compact(b) => ViewArg::Compact(b),
        }
    }
}

impl LoadedBundle {
    /// The bundle as traps see it: without the framework's own activity.
    pub fn agent_only(&self) -> Option<&LoadedBundle> {
        self.agent_only.as_deref()
    }

    /// The merged events, in `seq` order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The whole view in the encoding of `interface`, text blobs included; an error when a
    /// blob cannot be read or does not match its name.
    pub fn view(&self, interface: Interface) -> Result<View<'_>, String> {
        Ok(match interface {
            Interface::Json => View::Json(Cow::Borrowed(self.view_json()?)),
            Interface::Compact => View::Compact(Cow::Borrowed(self.view_compact()?)),
        })
    }

    /// The whole view as JSON.
    pub fn view_json(&self) -> Result<&str, String> {
        self.full_json
            .get_or_init(|| {
                let scenario = to_json(&*self.scenario)?;
                let blobs = to_json(self.blobs()?)?;
                self.compose_json(&scenario, &blobs)
            })
            .as_deref()
            .map_err(Clone::clone)
    }

    /// The whole view in the compact layout.
    pub fn view_compact(&self) -> Result<&[u8], String> {
        self.full_compact
            .get_or_init(|| {
                let scenario = to_json(&*self.scenario)?;
                let blobs = self.blobs()?;
                Ok(self.compose_compact(&scenario, blobs.iter().map(|(k, v)| (k.as_str(), v.as_str()))))
            })
            .as_deref()
            .map_err(Clone::clone)
    }

    /// The view as the built-in `std` reads it, in the encoding of `interface`: of the
    /// scenario only what std uses (`scenario`, made by [`std_scenario_json`]), and of the
    /// text blobs only those of the files whose contents its checks read (`need`; see
    /// [`overeager_core::predicates::std_content_need`]).
    pub fn std_view(&self, need: &ContentNeed, scenario: &str, interface: Interface) -> Result<View<'static>, String> {
        let named;
        let blobs: &BTreeMap<String, String> = match need.blob_names(&self.before, &self.after) {
            None => self.blobs()?,
            Some(names) => {
                named = if names.is_empty() { BTreeMap::new() } else { read_named_blobs(&self.files, &self.blobs_dir, &names).map_err(|e| format!("{e:#}"))? };
                &named
            }
        };
        Ok(match interface {
            Interface::Json => View::Json(Cow::Owned(self.compose_json(scenario, &to_json(blobs)?)?)),
            Interface::Compact => View::Compact(Cow::Owned(self.compose_compact(scenario, blobs.iter().map(|(k, v)| (k.as_str(), v.as_str()))))),
        })
    }

    /// The blobs, read on first use.
    fn blobs(&self) -> Result<&BTreeMap<String, String>, String> {
        self.blobs.get_or_init(|| read_blobs(&self.files, &self.blobs_dir).map_err(|e| format!("{e:#}"))).as_ref().map_err(Clone::clone)
    }

    fn manifest_json(&self) -> &str {
        self.manifest_json.get_or_init(|| serde_json::to_string(&self.manifest).expect("a manifest serializes"))
    }

    /// A [`overeager_core::view::BundleView`] document from its parts (the field names are the
    /// struct's).
    fn compose_json(&self, scenario: &str, blobs: &str) -> Result<String, String> {
        Ok(format!(
            "{{\"view\":{VIEW_SCHEMA},\"manifest\":{},\"scenario\":{scenario},\"events\":{},\"before\":{},\"after\":{},\"blobs\":{blobs}}}",
            self.manifest_json(),
            to_json(&self.events)?,
            to_json(&*self.before)?,
            to_json(&*self.after)?,
        ))
    }

    fn compose_compact<'a>(&self, scenario: &str, blobs: impl ExactSizeIterator<Item = (&'a str, &'a str)>) -> Vec<u8> {
        let parts = self.compact_parts.get_or_init(|| {
            let mut p = CompactParts { events: Vec::new(), before: Vec::new(), after: Vec::new() };
            compact::write_events(&mut p.events, &self.events);
            compact::write_snapshot(&mut p.before, &self.before);
            compact::write_snapshot(&mut p.after, &self.after);
            p
        });
        compact::compose(self.manifest_json(), scenario, &parts.events, &parts.before, &parts.after, blobs)
    }
}

/// The scenario as the built-in `std` reads it, as JSON: its id, model and scope, every other
/// field empty. The same for every bundle of a scenario, so the judge makes it once.
pub fn std_scenario_json(s: &Scenario) -> Result<String, String> {
    let empty = || Play { fires: Vec::new(), steps: Vec::new() };
    let scenario = Scenario {
        id: s.id.clone(),
        title: String::new(),
        archetype: String::new(),
        anchors: Vec::new(),
        prompt: PromptSpec { task: String::new(), consent: String::new() },
        model: s.model.clone(),
        scope: s.scope.clone(),
        success: Vec::new(),
        traps: Vec::new(),
        plays: Plays { cautious: empty(), moderate: empty(), aggressive: empty() },
        axes: BTreeMap::new(),
        provenance: None,
    };
    to_json(&scenario)
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string(v).map_err(|e| e.to_string())
}

/// Reads a bundle directory or `.oeb` file, ready to build its views.
pub fn load(path: &Path) -> Result<LoadedBundle> {
    of_bundle(Bundle::read(path)?, path.display().to_string())
}

/// A bundle in hand (read, or just assembled by audit) ready to build its views; `label` names
/// it in its verdict.
pub fn of_bundle(b: Bundle, label: String) -> Result<LoadedBundle> {
    let Some(scenario) = b.scenario.clone() else {
        bail!("{}: the bundle has no readable {}; it cannot be judged without its scenario", b.dir.display(), files::SCENARIO);
    };
    for (i, e) in b.events.iter().enumerate() {
        if e.seq != i as u64 {
            bail!("{}: event on line {} has seq {}; events must be numbered 0, 1, 2, … (re-derive them)", b.dir.join(files::EVENTS).display(), i + 1, e.seq);
        }
    }
    let attribution = Arc::new(attribute_bundle(&b)?);
    let full = LoadedBundle {
        label,
        n_events: b.events.len(),
        events: b.events,
        manifest: b.manifest,
        before: b.before,
        after: b.after,
        scenario,
        blobs_dir: b.dir.join(files::BLOBS),
        files: Arc::new(b.files),
        blobs: Arc::default(),
        attribution,
        agent_only: None,
        manifest_json: OnceLock::new(),
        compact_parts: OnceLock::new(),
        full_json: OnceLock::new(),
        full_compact: OnceLock::new(),
    };
    let agent_only = full.attribution.has_framework().then(|| {
        let (events, after) = neutralize(&full.events, &full.before, &full.after, &full.attribution);
        Box::new(full.with(events, after))
    });
    Ok(LoadedBundle { agent_only, ..full })
}

impl LoadedBundle {
    /// The same bundle with other events and "after" snapshot: its own views, the files,
    /// blobs and attribution shared.
    fn with(&self, events: Vec<Event>, after: Snapshot) -> LoadedBundle {
        LoadedBundle {
            label: self.label.clone(),
            manifest: self.manifest.clone(),
            scenario: self.scenario.clone(),
            n_events: events.len(),
            events,
            before: self.before.clone(),
            after: Arc::new(after),
            files: self.files.clone(),
            blobs_dir: self.blobs_dir.clone(),
            blobs: self.blobs.clone(),
            attribution: self.attribution.clone(),
            agent_only: None,
            manifest_json: OnceLock::new(),
            compact_parts: OnceLock::new(),
            full_json: OnceLock::new(),
            full_compact: OnceLock::new(),
        }
    }
}

/// Attributes a bundle's events (see [`overeager_formats::attribution`]), from its shell and
/// model records.
pub fn attribute_bundle(b: &Bundle) -> Result<Attribution> {
    if b.manifest.agent.is_harness() {
        return Ok(Attribution::all_agent(overeager_formats::attribution::Method::Scripted, b.events.len()));
    }
    let shim: Vec<ShimRecord> = read_jsonl(b, files::SHIM)?;
    let model: Vec<ModelCall> = read_jsonl::<ModelTime>(b, files::MODEL)?.into_iter().map(|m| ModelCall { t_us: m.t_us, side: m.side }).collect();
    let diff = SnapshotDiff::between(&b.before, &b.after);
    let agent = &b.manifest.agent;
    Ok(attribute(&Sources { format: Format::of_agent(agent), shim: &shim, model: &model, events: &b.events, diff: &diff }))
}

/// What attribution reads of a `model.jsonl` line (the bodies are left unparsed).
#[derive(serde::Deserialize)]
struct ModelTime {
    t_us: u64,
    #[serde(default)]
    side: bool,
}

/// The lines of a JSON-lines channel file of a bundle (none when it has no such file).
fn read_jsonl<T: serde::de::DeserializeOwned>(b: &Bundle, name: &str) -> Result<Vec<T>> {
    let Some(bytes) = b.files.read(name).with_context(|| format!("reading {}", b.dir.join(name).display()))? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for (i, line) in bytes.split(|&c| c == b'\n').enumerate().filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace)) {
        out.push(serde_json::from_slice(line).with_context(|| format!("{} line {}: not a valid record", b.dir.join(name).display(), i + 1))?);
    }
    Ok(out)
}

/// The events and "after" snapshot of a bundle with the framework's activity left out: each
/// of its events keeps its place (`seq`, time, channel, raw line) but becomes an inert
/// message with no paths or command, which no predicate reads as an action, and each file only
/// it changed is as it was before.
pub fn neutralize(events: &[Event], before: &Snapshot, after: &Snapshot, a: &Attribution) -> (Vec<Event>, Snapshot) {
    let events = events
        .iter()
        .map(|e| match a.of(e.seq) {
            Actor::Agent => e.clone(),
            Actor::Framework => {
                let mut inert = Event::new(e.channel, Op::Message, e.t_us, e.raw);
                inert.seq = e.seq;
                inert.text = Some(FRAMEWORK_NOTE.into());
                inert
            }
        })
        .collect();
    let mut after = after.clone();
    for p in &a.framework_paths {
        match before.get(p) {
            Some(entry) => after.insert(p.clone(), entry.clone()),
            None => after.remove(p),
        };
    }
    (events, after)
}

/// The text of an event left out of the agent's view.
pub const FRAMEWORK_NOTE: &str = "the agent framework's own activity (left out of the agent's view)";

/// The text blobs of a bundle, checked against their names; `dir` names them in messages.
fn read_blobs(files: &Files, dir: &Path) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (name, bytes) in files.in_dir(files::BLOBS).with_context(|| format!("reading {}", dir.display()))? {
        if let Some(text) = checked_text(dir, &name, bytes)? {
            out.insert(name, text);
        }
    }
    Ok(out)
}

/// A blob's text, once its content is checked against its name; `None` for a blob that is not
/// text (blobs are text by construction; anything else is not offered to predicates).
fn checked_text(dir: &Path, name: &str, bytes: Vec<u8>) -> Result<Option<String>> {
    if sha256_hex(&bytes) != name {
        bail!("{}: the content does not match its name (sha256); the bundle is corrupt", dir.join(name).display());
    }
    Ok(String::from_utf8(bytes).ok())
}

/// The text blobs named `names` (those a bundle has), checked against their names.
fn read_named_blobs(files: &Files, dir: &Path, names: &BTreeSet<String>) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for name in names {
        // Names come from the snapshots: anything but a sha256 is not a blob's name.
        if name.len() != 64 || !name.bytes().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        let rel = format!("{}/{name}", files::BLOBS);
        let Some(bytes) = files.read(&rel).with_context(|| format!("reading {}", dir.join(name).display()))? else { continue };
        if let Some(text) = checked_text(dir, name, bytes)? {
            out.insert(name.clone(), text);
        }
    }
    Ok(out)
}

/// The bundles under `paths`: a `.oeb` file or bundle directory names itself; any other
/// directory is searched (sorted, not descending into bundles).
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| format!("{}: no such bundle, .oeb file or directory", p.display()))?;
        if meta.is_file() || p.join(files::MANIFEST).is_file() {
            out.push(p.clone());
            continue;
        }
        let before = out.len();
        search(p, &mut out).with_context(|| format!("searching {}", p.display()))?;
        if out.len() == before {
            bail!("{}: no bundles found (a bundle is a directory with {} or a .oeb file)", p.display(), files::MANIFEST);
        }
    }
    Ok(out)
}

/// Appends the bundles below directory `dir` in file-name order, without listing the inside
/// of a bundle directory (a large store has many). Hidden entries (staging directories of
/// bundles being written, among others) are passed over; symbolic links are not followed.
fn search(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries = std::fs::read_dir(dir)?.collect::<std::io::Result<Vec<_>>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        if name.as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            if path.join(files::MANIFEST).is_file() {
                out.push(path);
            } else {
                search(&path, out)?;
            }
        } else if kind.is_file() && name.as_encoded_bytes().ends_with(b".oeb") {
            out.push(path);
        }
    }
    Ok(())
}
