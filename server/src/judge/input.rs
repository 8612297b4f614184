//! Reading bundles for judging: finding them under the paths given, and building the bundle
//! view every predicate module receives.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result, bail};
use overeager_core::bundle::{BundleManifest, files};
use overeager_core::view::{BundleView, VIEW_SCHEMA};
use overeager_core::{Scenario, sha256_hex};

use crate::audit::{Bundle, Files};

/// A bundle ready to judge.
pub struct LoadedBundle {
    /// The bundle as named on the command line (or an upload's name).
    pub label: String,
    pub manifest: BundleManifest,
    pub scenario: Scenario,
    pub n_events: usize,
    /// The bundle view as JSON, its text blobs left out (`"blobs":{}`).
    bare_json: String,
    /// Where the blobs are, read (and checked against their names) only when a module needs
    /// file contents.
    files: Files,
    blobs_dir: PathBuf,
    full_json: OnceLock<Result<String, String>>,
}

impl LoadedBundle {
    /// The view without file contents: what a module gets when none of its checks reads any.
    pub fn bare_json(&self) -> &str {
        &self.bare_json
    }

    /// The whole view, text blobs included; an error when a blob cannot be read or does not
    /// match its name.
    pub fn view_json(&self) -> Result<&str, String> {
        self.full_json
            .get_or_init(|| {
                let blobs = read_blobs(&self.files, &self.blobs_dir).map_err(|e| format!("{e:#}"))?;
                // `bare_json` ends with the empty blobs object and the view's closing brace.
                let head = self.bare_json.strip_suffix("{}}").ok_or("the bundle view is not in the expected form")?;
                let blobs = serde_json::to_string(&blobs).map_err(|e| e.to_string())?;
                Ok(format!("{head}{blobs}}}"))
            })
            .as_deref()
            .map_err(Clone::clone)
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
    let n_events = b.events.len();
    let blobs_dir = b.dir.join(files::BLOBS);
    let view = BundleView { view: VIEW_SCHEMA, manifest: b.manifest.clone(), scenario: scenario.clone(), events: b.events, before: b.before, after: b.after, blobs: BTreeMap::new() };
    let bare_json = serde_json::to_string(&view)?;
    Ok(LoadedBundle { label: path.display().to_string(), manifest: view.manifest, scenario, n_events, bare_json, files: b.files, blobs_dir, full_json: OnceLock::new() })
}

/// The text blobs of a bundle, checked against their names; `dir` names them in messages.
fn read_blobs(files: &Files, dir: &Path) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (name, bytes) in files.in_dir(files::BLOBS).with_context(|| format!("reading {}", dir.display()))? {
        if sha256_hex(&bytes) != name {
            bail!("{}: the content does not match its name (sha256); the bundle is corrupt", dir.join(&name).display());
        }
        // Blobs are text by construction; anything else is not offered to predicates.
        if let Ok(text) = String::from_utf8(bytes) {
            out.insert(name, text);
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
        let mut walk = walkdir::WalkDir::new(p).sort_by_file_name().into_iter();
        while let Some(entry) = walk.next() {
            let entry = entry.with_context(|| format!("searching {}", p.display()))?;
            let name = entry.file_name().to_string_lossy();
            if entry.depth() > 0 && name.starts_with('.') {
                // Staging directories of bundles being written, and other hidden things.
                if entry.file_type().is_dir() {
                    walk.skip_current_dir();
                }
                continue;
            }
            if entry.file_type().is_dir() && entry.path().join(files::MANIFEST).is_file() {
                out.push(entry.path().to_path_buf());
                walk.skip_current_dir();
            } else if entry.file_type().is_file() && name.ends_with(".oeb") {
                out.push(entry.path().to_path_buf());
            }
        }
        if out.len() == before {
            bail!("{}: no bundles found (a bundle is a directory with {} or a .oeb file)", p.display(), files::MANIFEST);
        }
    }
    Ok(out)
}
