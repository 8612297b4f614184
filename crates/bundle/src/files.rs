//! File-system helpers shared by the stages.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

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

/// A temporary sibling of `out`, for writing a directory that appears only when complete.
pub fn staging_dir(out: &Path) -> Result<tempfile::TempDir> {
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "bundle".into());
    tempfile::Builder::new()
        .prefix(&format!(".{name}.partial-"))
        .tempdir_in(parent)
        .with_context(|| format!("creating a staging directory in {}", parent.display()))
}

/// Refuses to overwrite anything but an empty directory.
pub fn check_out_free(out: &Path) -> Result<()> {
    if out.exists() {
        let empty = out.is_dir() && std::fs::read_dir(out)?.next().is_none();
        if !empty {
            bail!("{} already exists; choose another --out or remove it", out.display());
        }
    }
    Ok(())
}

/// Moves a finished staging directory to `out`.
pub fn publish(staging: tempfile::TempDir, out: &Path) -> Result<()> {
    if out.is_dir() {
        std::fs::remove_dir(out).with_context(|| format!("{} is not empty", out.display()))?;
    }
    let path = staging.keep();
    std::fs::rename(&path, out).with_context(|| format!("moving the bundle into {}", out.display()))?;
    Ok(())
}

/// Opens the regular file a directory walk found, refusing anything else: the last component
/// is not followed if it became a link, and the file opened must be the one the walk saw (same
/// device and inode), so a component swapped for a link meanwhile cannot lead the reader out
/// of the tree. `write` opens it for writing (without truncating).
pub fn open_walked(path: &Path, seen: &std::fs::Metadata, write: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new().read(!write).write(write).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK).open(path)?;
    let now = file.metadata()?;
    if !now.is_file() || now.dev() != seen.dev() || now.ino() != seen.ino() {
        return Err(std::io::Error::other(format!("{} changed while it was read", path.display())));
    }
    Ok(file)
}

/// The sha256 (hex) of a file, read in fixed-size pieces: memory stays bounded whatever the
/// file's size (a sparse file of many GiB costs only the time to read it).
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut h)?;
    Ok(hex::encode(h.finalize()))
}
