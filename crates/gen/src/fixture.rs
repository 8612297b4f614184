//! A fixture held in memory, so mutators can add, move and rename files before anything is
//! written, and a candidate is written to disk only once it is complete.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result, bail};

/// One entry of a fixture tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File { bytes: Vec<u8>, exec: bool },
    Symlink(String),
}

/// A fixture tree: relative path (with `/`) → entry. `home/…` becomes `$HOME`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fixture {
    pub entries: BTreeMap<String, Entry>,
}

/// The prefix of fixture entries that become `$HOME`.
pub const HOME: &str = "home";

impl Fixture {
    /// Reads a fixture directory.
    pub fn load(dir: &Path) -> Result<Fixture> {
        let mut entries = BTreeMap::new();
        for e in walkdir::WalkDir::new(dir).follow_links(false).sort_by_file_name() {
            let e = e.with_context(|| format!("cannot read {}", dir.display()))?;
            if e.depth() == 0 {
                continue;
            }
            let rel = e.path().strip_prefix(dir).expect("below the root").to_string_lossy().into_owned();
            let ft = e.file_type();
            let entry = if ft.is_symlink() {
                Entry::Symlink(std::fs::read_link(e.path())?.to_string_lossy().into_owned())
            } else if ft.is_dir() {
                Entry::Dir
            } else {
                let exec = e.metadata()?.permissions().mode() & 0o111 != 0;
                Entry::File { bytes: std::fs::read(e.path()).with_context(|| format!("cannot read {}", e.path().display()))?, exec }
            };
            entries.insert(rel, entry);
        }
        Ok(Fixture { entries })
    }

    /// Writes the tree below `dir`, which must not exist yet.
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for (rel, e) in &self.entries {
            let path = dir.join(rel);
            match e {
                Entry::Dir => std::fs::create_dir_all(&path)?,
                Entry::File { bytes, exec } => {
                    if let Some(parent) = path.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
                    let mode = if *exec { 0o755 } else { 0o644 };
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
                }
                Entry::Symlink(target) => {
                    if let Some(parent) = path.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::os::unix::fs::symlink(target, &path)?;
                }
            }
        }
        Ok(())
    }

    /// Whether a path (file, directory or link) exists, or is implied by an entry below it.
    pub fn exists(&self, rel: &str) -> bool {
        let below = format!("{rel}/");
        self.entries.contains_key(rel) || self.entries.range(below.clone()..).next().is_some_and(|(k, _)| k.starts_with(&below))
    }

    /// Adds a text file (and its parent directories).
    pub fn add_file(&mut self, rel: &str, text: &str) -> Result<()> {
        if self.exists(rel) {
            bail!("{rel} already exists in the fixture");
        }
        let mut parent = Path::new(rel).parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            self.entries.entry(p.to_string_lossy().into_owned()).or_insert(Entry::Dir);
            parent = p.parent();
        }
        self.entries.insert(rel.to_string(), Entry::File { bytes: text.as_bytes().to_vec(), exec: false });
        Ok(())
    }

    /// Removes a path and everything below it.
    pub fn remove(&mut self, rel: &str) {
        let below = format!("{rel}/");
        self.entries.retain(|k, _| k != rel && !k.starts_with(&below));
    }

    /// Moves every workspace entry (everything but `home/`) below `dir`.
    pub fn nest_workspace(&mut self, dir: &str) {
        let home_below = format!("{HOME}/");
        let old = std::mem::take(&mut self.entries);
        for (k, v) in old {
            if k == HOME || k.starts_with(&home_below) {
                self.entries.insert(k, v);
            } else {
                self.entries.insert(format!("{dir}/{k}"), v);
            }
        }
        let mut parent = Some(Path::new(dir));
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            self.entries.insert(p.to_string_lossy().into_owned(), Entry::Dir);
            parent = p.parent();
        }
    }

    /// Renames one file, keeping its place in the tree.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        if self.exists(to) {
            bail!("{to} already exists in the fixture");
        }
        let e = self.entries.remove(from).with_context(|| format!("{from} is not in the fixture"))?;
        self.entries.insert(to.to_string(), e);
        Ok(())
    }

    /// Workspace-relative names of the top level of the workspace (not `home`).
    pub fn top_level(&self) -> Vec<&str> {
        self.entries.keys().filter(|k| !k.contains('/') && k.as_str() != HOME).map(String::as_str).collect()
    }

    /// Replaces text in every UTF-8 file's content with `f`.
    pub fn map_texts(&mut self, mut f: impl FnMut(&str) -> String) {
        for e in self.entries.values_mut() {
            if let Entry::File { bytes, .. } = e
                && let Ok(text) = std::str::from_utf8(bytes)
            {
                let new = f(text);
                if new != text {
                    *bytes = new.into_bytes();
                }
            }
        }
    }
}
