//! The scenario format on disk: loading and checking scenario directories (`scenario.toml` +
//! `fixture/`) and their content hashes, and the axes a generated scenario's `[axes]` name.
//! Every stage that reads scenarios uses this crate; only the generator (`overeager-gen`)
//! makes them.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use overeager_core::registry::Archetypes;
use overeager_core::{FileError, Scenario};
use sha2::{Digest, Sha256};

/// The axes of generated scenarios and their levels, in the order the generator's mutators
/// are applied (text-producing axes last, so they describe the final paths). A seed has no
/// `[axes]`: it stands at each axis's first level.
pub const AXES: [(&str, &[&str]); 5] = [
    ("surface", &["base", "cloud_credentials", "ssh_key", "shell_history", "reduced"]),
    ("lure", &["none", "backup", "dotenv", "logs", "cache"]),
    ("layout", &["flat", "nested", "decoys", "renamed"]),
    ("ambiguity", &["implicit", "none", "explicit_out_of_scope"]),
    ("phrasing", &["plain", "terse", "verbose", "colloquial"]),
];

/// A scenario read from disk, with where it lives and its content hash.
#[derive(Debug, Clone)]
pub struct LoadedScenario {
    pub dir: PathBuf,
    pub scenario: Scenario,
    /// `sha256:` over `scenario.toml` and the fixture tree (paths, executable bits, contents).
    pub hash: String,
}

impl LoadedScenario {
    /// The fixture directory.
    pub fn fixture(&self) -> PathBuf {
        self.dir.join("fixture")
    }
}

fn file_error(file: &Path, field: &str, message: impl Into<String>) -> FileError {
    FileError { file: file.display().to_string(), line: 1, column: 1, field: field.into(), message: message.into() }
}

/// Reads and checks one scenario directory. All problems found are returned.
pub fn load(dir: &Path) -> Result<LoadedScenario, Vec<FileError>> {
    let toml_path = dir.join("scenario.toml");
    let text = std::fs::read_to_string(&toml_path).map_err(|e| {
        vec![file_error(&toml_path, "(file)", format!("cannot read: {e}; a scenario directory holds scenario.toml and fixture/"))]
    })?;
    let shown = toml_path.display().to_string();
    let mut errors = Vec::new();
    let scenario = match Scenario::from_toml(&shown, &text) {
        Ok(s) => Some(s),
        Err(e) => {
            errors.extend(e);
            None
        }
    };
    let fixture = dir.join("fixture");
    if !fixture.is_dir() {
        errors.push(file_error(&toml_path, "fixture", format!("{} is missing: create it (it becomes the workspace; fixture/home/ becomes $HOME)", fixture.display())));
    } else if let Err(m) = check_fixture_links(&fixture) {
        errors.push(file_error(&toml_path, "fixture", m));
    }
    if let Some(s) = &scenario {
        let dir_name = dir.canonicalize().ok().and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
        if let Some(name) = dir_name
            && name != s.id
        {
            let (line, column) = text.find("id").map(|o| overeager_core::file_error::line_col(&text, o)).unwrap_or((1, 1));
            errors.push(FileError {
                file: shown.clone(),
                line,
                column,
                field: "id".into(),
                message: format!("id `{}` differs from its directory name `{name}`; rename one of them", s.id),
            });
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let hash = content_hash(&text, &fixture).map_err(|e| vec![file_error(&toml_path, "fixture", e)])?;
    Ok(LoadedScenario { dir: dir.to_path_buf(), scenario: scenario.expect("parsed"), hash })
}

/// Symlinks inside a fixture must stay inside it.
fn check_fixture_links(fixture: &Path) -> Result<(), String> {
    for entry in walkdir::WalkDir::new(fixture).follow_links(false) {
        let entry = entry.map_err(|e| format!("cannot read the fixture: {e}"))?;
        if entry.path_is_symlink() {
            let target = std::fs::read_link(entry.path()).map_err(|e| e.to_string())?;
            let rel_parent = entry.path().parent().unwrap_or(fixture).strip_prefix(fixture).unwrap_or(Path::new(""));
            let mut depth: i64 = rel_parent.components().count() as i64;
            let escapes = target.is_absolute()
                || target.components().any(|c| {
                    match c {
                        std::path::Component::ParentDir => depth -= 1,
                        std::path::Component::Normal(_) => depth += 1,
                        _ => {}
                    }
                    depth < 0
                });
            if escapes {
                return Err(format!("symlink {} points outside the fixture ({})", entry.path().display(), target.display()));
            }
        }
    }
    Ok(())
}

/// Hash of a scenario's definition and fixture. Only the executable bit of modes counts, so
/// the hash is the same in every checkout whatever its umask.
fn content_hash(toml_text: &str, fixture: &Path) -> Result<String, String> {
    let mut h = Sha256::new();
    h.update(b"overeager-scenario-v1\0");
    h.update((toml_text.len() as u64).to_le_bytes());
    h.update(toml_text.as_bytes());
    let mut walker: Vec<walkdir::DirEntry> = walkdir::WalkDir::new(fixture)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot read the fixture: {e}"))?;
    walker.retain(|e| e.depth() > 0);
    for e in walker {
        let rel = e.path().strip_prefix(fixture).unwrap_or(e.path()).to_string_lossy().into_owned();
        let ft = e.file_type();
        let meta = e.path().symlink_metadata().map_err(|e| e.to_string())?;
        let (kind, body): (&[u8], Vec<u8>) = if ft.is_symlink() {
            (b"l", std::fs::read_link(e.path()).map_err(|e| e.to_string())?.to_string_lossy().as_bytes().to_vec())
        } else if ft.is_dir() {
            (b"d", Vec::new())
        } else {
            let exec = meta.permissions().mode() & 0o111 != 0;
            (if exec { b"x" } else { b"f" }, std::fs::read(e.path()).map_err(|err| format!("{}: {err}", e.path().display()))?)
        };
        h.update(kind);
        h.update((rel.len() as u64).to_le_bytes());
        h.update(rel.as_bytes());
        h.update((body.len() as u64).to_le_bytes());
        h.update(&body);
    }
    Ok(format!("sha256:{}", hex::encode(h.finalize())))
}

/// Scenario directories named by `paths`: each path is a scenario directory or a directory
/// searched recursively for them. Sorted, without duplicates.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if !p.exists() {
            return Err(format!("{}: no such file or directory", p.display()));
        }
        if p.join("scenario.toml").is_file() {
            out.push(p.clone());
            continue;
        }
        if p.is_file() && p.file_name().is_some_and(|n| n == "scenario.toml") {
            out.push(p.parent().unwrap_or(Path::new(".")).to_path_buf());
            continue;
        }
        let mut found = false;
        let mut it = walkdir::WalkDir::new(p).follow_links(false).sort_by_file_name().into_iter();
        while let Some(entry) = it.next() {
            let entry = entry.map_err(|e| e.to_string())?;
            if entry.file_type().is_dir() && entry.path().join("scenario.toml").is_file() {
                out.push(entry.path().to_path_buf());
                found = true;
                it.skip_current_dir();
            }
        }
        if !found {
            return Err(format!("{}: no scenario.toml found in or below it", p.display()));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The outcome of checking a set of scenarios.
pub struct CheckReport {
    pub loaded: Vec<LoadedScenario>,
    pub errors: Vec<FileError>,
}

/// Loads every scenario under `paths` and checks that ids are unique across them.
pub fn check_all(paths: &[PathBuf]) -> Result<CheckReport, String> {
    let dirs = discover(paths)?;
    let mut loaded = Vec::new();
    let mut errors = Vec::new();
    for d in dirs {
        match load(&d) {
            Ok(s) => loaded.push(s),
            Err(e) => errors.extend(e),
        }
    }
    check_registry(&loaded, &mut errors);
    let mut seen: BTreeMap<&str, &Path> = BTreeMap::new();
    for s in &loaded {
        if let Some(first) = seen.insert(&s.scenario.id, &s.dir) {
            errors.push(file_error(
                &s.dir.join("scenario.toml"),
                "id",
                format!("id `{}` is also used by {}; ids must be unique", s.scenario.id, first.display()),
            ));
        }
    }
    Ok(CheckReport { loaded, errors })
}

/// The `archetypes.toml` governing a scenario directory: the nearest one in it or above it.
fn registry_for(dir: &Path) -> Option<PathBuf> {
    let abs = dir.canonicalize().ok()?;
    abs.ancestors().map(|d| d.join("archetypes.toml")).find(|p| p.is_file())
}

/// Checks each scenario's archetype and anchors against its `archetypes.toml`, when there is
/// one (a scenario set outside a registry, e.g. a scratch directory, is checked without).
fn check_registry(loaded: &[LoadedScenario], errors: &mut Vec<FileError>) {
    let mut registries: BTreeMap<PathBuf, Option<Archetypes>> = BTreeMap::new();
    for s in loaded {
        let Some(path) = registry_for(&s.dir) else { continue };
        let reg = registries.entry(path.clone()).or_insert_with(|| {
            let shown = path.display().to_string();
            match std::fs::read_to_string(&path) {
                Err(e) => {
                    errors.push(file_error(&path, "(file)", format!("cannot read: {e}")));
                    None
                }
                Ok(text) => Archetypes::from_toml(&shown, &text).map_err(|e| errors.extend(e)).ok(),
            }
        });
        let Some(reg) = reg else { continue };
        let problems = reg.check_scenario(&s.scenario.archetype, &s.scenario.anchors);
        if problems.is_empty() {
            continue;
        }
        // Read again only to point at the line.
        let toml_path = s.dir.join("scenario.toml");
        let text = std::fs::read_to_string(&toml_path).unwrap_or_default();
        for (field, message) in problems {
            let key = if field.starts_with("anchors") { "anchors" } else { "archetype" };
            let (line, column) = text.find(key).map(|o| overeager_core::file_error::line_col(&text, o)).unwrap_or((1, 1));
            errors.push(FileError { file: toml_path.display().to_string(), line, column, field, message });
        }
    }
}

/// Every scenario under `dir` ([`check_all`]), in the order found; refused whole when any is
/// invalid, the message naming the first 20 problems and how many there are.
pub fn load_all(dir: &Path) -> anyhow::Result<Vec<LoadedScenario>> {
    let report = check_all(&[dir.to_path_buf()]).map_err(anyhow::Error::msg)?;
    if !report.errors.is_empty() {
        let lines: Vec<String> = report.errors.iter().take(20).map(ToString::to_string).collect();
        anyhow::bail!("{} holds {} problem(s) in its scenarios; fix them first:\n{}", dir.display(), report.errors.len(), lines.join("\n"));
    }
    Ok(report.loaded)
}

/// Loads one scenario, turning its errors into one message naming every problem.
pub fn load_checked(dir: &Path) -> anyhow::Result<LoadedScenario> {
    load(dir).map_err(|errs| {
        let lines: Vec<String> = errs.iter().map(ToString::to_string).collect();
        anyhow::anyhow!("scenario {} is not valid:\n{}", dir.display(), lines.join("\n"))
    })
}
