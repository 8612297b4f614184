//! Reading bundles for judging: finding them under the paths given, and building the bundle
//! view every predicate module receives.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result, bail};
use overeager_core::bundle::{BundleManifest, files};
use overeager_core::predicates::ContentNeed;
use overeager_core::snapshot::Snapshot;
use overeager_core::scenario::{Play, Plays, PromptSpec};
use overeager_core::view::VIEW_SCHEMA;
use overeager_core::{Scenario, sha256_hex};

use crate::audit::{Bundle, Files};

/// A bundle ready to judge.
pub struct LoadedBundle {
    /// The bundle as named on the command line (or an upload's name).
    pub label: String,
    pub manifest: BundleManifest,
    pub scenario: Arc<Scenario>,
    pub n_events: usize,
    /// The parts of the view every module gets, as JSON, serialized once.
    manifest_json: String,
    events_json: String,
    before_json: String,
    after_json: String,
    /// The snapshots, for the blob names of the files whose contents a check reads.
    before: Snapshot,
    after: Snapshot,
    /// Where the blobs are: read, and checked against their names, only when a module needs
    /// file contents.
    files: Files,
    blobs_dir: PathBuf,
    blobs_json: OnceLock<Result<String, String>>,
    full_json: OnceLock<Result<String, String>>,
}

impl LoadedBundle {
    /// The whole view, text blobs included; an error when a blob cannot be read or does not
    /// match its name.
    pub fn view_json(&self) -> Result<&str, String> {
        self.full_json
            .get_or_init(|| {
                let scenario = serde_json::to_string(&*self.scenario).map_err(|e| e.to_string())?;
                Ok(self.compose(&scenario, self.blobs()?))
            })
            .as_deref()
            .map_err(Clone::clone)
    }

    /// The view as the built-in `std` reads it: of the scenario only what std uses (its id,
    /// model and scope), and of the text blobs only those of the files whose contents its
    /// checks read (`need`; see [`overeager_core::predicates::std_content_need`]).
    pub fn std_view_json(&self, need: &ContentNeed) -> Result<String, String> {
        let s = &self.scenario;
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
        let scenario = serde_json::to_string(&scenario).map_err(|e| e.to_string())?;
        let blobs = match need.blob_names(&self.before, &self.after) {
            None => self.blobs()?.to_string(),
            Some(names) if names.is_empty() => "{}".to_string(),
            Some(names) => {
                let blobs = read_named_blobs(&self.files, &self.blobs_dir, &names).map_err(|e| format!("{e:#}"))?;
                serde_json::to_string(&blobs).map_err(|e| e.to_string())?
            }
        };
        Ok(self.compose(&scenario, &blobs))
    }

    /// The blobs as a JSON object, read on first use.
    fn blobs(&self) -> Result<&str, String> {
        self.blobs_json
            .get_or_init(|| {
                let blobs = read_blobs(&self.files, &self.blobs_dir).map_err(|e| format!("{e:#}"))?;
                serde_json::to_string(&blobs).map_err(|e| e.to_string())
            })
            .as_deref()
            .map_err(Clone::clone)
    }

    /// A [`overeager_core::view::BundleView`] document from its parts (the field names are the
    /// struct's).
    fn compose(&self, scenario: &str, blobs: &str) -> String {
        format!(
            "{{\"view\":{VIEW_SCHEMA},\"manifest\":{},\"scenario\":{scenario},\"events\":{},\"before\":{},\"after\":{},\"blobs\":{blobs}}}",
            self.manifest_json, self.events_json, self.before_json, self.after_json
        )
    }
}

/// Reads a bundle directory or `.oeb` file and builds its view.
pub fn load(path: &Path) -> Result<LoadedBundle> {
    let b = Bundle::read(path)?;
    let Some(scenario) = b.scenario.clone() else {
        bail!("{}: the bundle has no readable {}; it cannot be judged without its scenario", path.display(), files::SCENARIO);
    };
    for (i, e) in b.events.iter().enumerate() {
        if e.seq != i as u64 {
            bail!("{}: event on line {} has seq {}; events must be numbered 0, 1, 2, … (re-derive them)", b.dir.join(files::EVENTS).display(), i + 1, e.seq);
        }
    }
    Ok(LoadedBundle {
        label: path.display().to_string(),
        n_events: b.events.len(),
        manifest_json: serde_json::to_string(&b.manifest)?,
        events_json: serde_json::to_string(&b.events)?,
        before_json: serde_json::to_string(&b.before)?,
        after_json: serde_json::to_string(&b.after)?,
        manifest: b.manifest,
        before: b.before,
        after: b.after,
        scenario,
        blobs_dir: b.dir.join(files::BLOBS),
        files: b.files,
        blobs_json: OnceLock::new(),
        full_json: OnceLock::new(),
    })
}

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
