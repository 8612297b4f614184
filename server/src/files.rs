//! File-system helpers shared by the stages.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Writes a file atomically: a reader sees the old content or the new, never a part. The
/// directory must exist.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).with_context(|| format!("writing in {}", dir.display()))?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map_err(|e| e.error).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// `$<xdg_var>/overeager`, else `$HOME/<home_default>/overeager`: the XDG base directories.
pub fn user_dir(xdg_var: &str, home_default: &str) -> Option<PathBuf> {
    let base = std::env::var_os(xdg_var).map(PathBuf::from).or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(home_default)))?;
    Some(base.join("overeager"))
}
