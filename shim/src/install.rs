//! `overeager-shim install`: wraps an image's real programs in place, as an image build step.
//!
//! `PATH` alone is not enough in a container: login shells and agents' shell snapshots reset
//! it, and tools run programs by absolute path. So every wrapped program found in the bin
//! directories is moved to `<prefix>/real/<name>` and its old path becomes a link to the shim
//! at `<prefix>/bin/overeager-shim`, which finds the real program there. The install needs
//! nothing from the image but this binary, so it works on any base (Debian, Alpine, busybox).

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use overeager_core::sandbox::{WRAPPED, layout};

/// What `install` did, printed one line per program.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Installed {
    /// Program → the real file it now runs.
    pub wrapped: BTreeMap<String, PathBuf>,
    /// Paths replaced by links to the shim.
    pub links: Vec<PathBuf>,
}

/// Options of one install.
#[derive(Debug, Clone)]
pub struct Options {
    pub prefix: PathBuf,
    pub bin_dirs: Vec<PathBuf>,
    pub names: Vec<String>,
    pub log: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            prefix: layout::PREFIX.into(),
            bin_dirs: layout::BIN_DIRS.iter().map(PathBuf::from).collect(),
            names: WRAPPED.iter().map(|s| s.to_string()).collect(),
            log: layout::SHIM_LOG.into(),
        }
    }
}

pub fn main(args: &[String]) -> i32 {
    let mut o = Options::default();
    let mut names = Vec::new();
    let mut dirs = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        let r = match a.as_str() {
            "--prefix" => value(a).map(|v| o.prefix = v.into()),
            "--bin-dir" => value(a).map(|v| dirs.push(PathBuf::from(v))),
            "--log" => value(a).map(|v| o.log = v),
            s if s.starts_with('-') => Err(format!("unknown option {s}")),
            name => {
                names.push(name.to_string());
                Ok(())
            }
        };
        if let Err(e) = r {
            eprintln!("overeager-shim install: {e}");
            return 2;
        }
    }
    if !names.is_empty() {
        o.names = names;
    }
    if !dirs.is_empty() {
        o.bin_dirs = dirs;
    }
    let shim = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("overeager-shim install: cannot find this binary: {e}");
            return 1;
        }
    };
    match install(&shim, &o) {
        Ok(done) => {
            for (name, real) in &done.wrapped {
                println!("{name} -> {}", real.display());
            }
            println!("wrapped {} program(s) at {} path(s)", done.wrapped.len(), done.links.len());
            0
        }
        Err(e) => {
            eprintln!("overeager-shim install: {e}");
            1
        }
    }
}

fn io(what: &str, p: &Path) -> impl FnOnce(std::io::Error) -> String {
    let p = p.display().to_string();
    let what = what.to_string();
    move |e| format!("{what} {p}: {e}")
}

/// Installs `shim` under `o.prefix` and wraps every program of `o.names` found in
/// `o.bin_dirs`. Running it again changes nothing.
pub fn install(shim: &Path, o: &Options) -> Result<Installed, String> {
    let bin = o.prefix.join("bin");
    let real_dir = o.prefix.join("real");
    for d in [&bin, &real_dir] {
        std::fs::create_dir_all(d).map_err(io("creating", d))?;
    }
    let me = bin.join("overeager-shim");
    let shim_real = shim.canonicalize().map_err(io("resolving", shim))?;
    if me.canonicalize().ok() != Some(shim_real.clone()) {
        std::fs::copy(shim, &me).map_err(io("copying the shim to", &me))?;
    }
    let me = me.canonicalize().map_err(io("resolving", &me))?;
    let log_conf = bin.join("shim.log-path");
    std::fs::write(&log_conf, format!("{}\n", o.log)).map_err(io("writing", &log_conf))?;

    // Every place a wrapped name is found, by the real path of its directory: with a merged
    // /usr, /bin/rm and /usr/bin/rm are one file and must be replaced once.
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for name in &o.names {
        for dir in &o.bin_dirs {
            let Ok(dir) = dir.canonicalize() else { continue };
            let path = dir.join(name);
            if path.symlink_metadata().is_ok() && !found.iter().any(|(_, p)| *p == path) {
                found.push((name.clone(), path));
            }
        }
    }
    // What each name runs now, resolved before anything moves (`sh` is a link to `dash`).
    let mut targets: BTreeMap<String, PathBuf> = BTreeMap::new();
    for name in &o.names {
        if let Some((_, first)) = found.iter().find(|(n, _)| n == name) {
            targets.insert(name.clone(), first.canonicalize().map_err(io("resolving", first))?);
        }
    }
    let mut done = Installed::default();
    // The files the links replace: a real program that is one of them must be moved out of
    // the way, not linked to.
    let replaced: Vec<PathBuf> = found.iter().map(|(_, p)| p.clone()).collect();
    let mut moved: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    for name in &o.names {
        let Some(target) = targets.get(name) else { continue };
        let real = real_dir.join(name);
        if *target == me {
            // Installed before: the real program is already in place.
            if real.exists() {
                done.wrapped.insert(name.clone(), real);
            }
            continue;
        }
        if let Some(prev) = moved.get(target) {
            // Another name for a file already moved (`sh` and `dash`).
            replace_with_link(prev, &real)?;
        } else if replaced.contains(target) {
            std::fs::rename(target, &real)
                .or_else(|_| std::fs::copy(target, &real).map(|_| ()).and_then(|()| std::fs::remove_file(target)))
                .map_err(io("moving", target))?;
            moved.insert(target.clone(), real.clone());
        } else {
            // A link to a program that stays where it is (busybox, python3.12, a node script).
            replace_with_link(target, &real)?;
        }
        done.wrapped.insert(name.clone(), real);
    }
    for (name, path) in &found {
        if !done.wrapped.contains_key(name) || path.canonicalize().ok().as_deref() == Some(me.as_path()) {
            continue;
        }
        replace_with_link(&me, path)?;
        done.links.push(path.clone());
    }
    Ok(done)
}

/// Makes `path` a symbolic link to `target`, replacing whatever is there.
fn replace_with_link(target: &Path, path: &Path) -> Result<(), String> {
    if path.symlink_metadata().is_ok() {
        std::fs::remove_file(path).map_err(io("replacing", path))?;
    }
    symlink(target, path).map_err(io("linking", path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn exe(p: &Path, body: &str) {
        std::fs::write(p, body).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn moves_files_links_aliases_and_is_idempotent() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let (usr_bin, local_bin, prefix) = (root.join("usr/bin"), root.join("usr/local/bin"), root.join("usr/lib/overeager"));
        std::fs::create_dir_all(&usr_bin).unwrap();
        std::fs::create_dir_all(&local_bin).unwrap();
        // A merged /usr: /bin is a link to usr/bin.
        symlink("usr/bin", root.join("bin")).unwrap();
        exe(&usr_bin.join("rm"), "#!/bin/true rm\n");
        exe(&usr_bin.join("dash"), "#!/bin/true dash\n");
        symlink("dash", usr_bin.join("sh")).unwrap();
        exe(&usr_bin.join("busybox"), "#!/bin/true busybox\n");
        symlink("busybox", usr_bin.join("tar")).unwrap();
        exe(&local_bin.join("node"), "#!/bin/true node\n");
        let shim = root.join("shim");
        exe(&shim, "#!/bin/true shim\n");
        let o = Options {
            prefix: prefix.clone(),
            bin_dirs: vec![local_bin.clone(), usr_bin.clone(), root.join("bin")],
            names: ["sh", "dash", "rm", "tar", "node", "nosuch"].map(String::from).to_vec(),
            log: "/oe/channels/shim.jsonl".into(),
        };
        let done = install(&shim, &o).unwrap();
        let me = prefix.join("bin/overeager-shim");
        let real = prefix.join("real");
        assert_eq!(done.wrapped.keys().map(String::as_str).collect::<Vec<_>>(), ["dash", "node", "rm", "sh", "tar"]);
        // Each wrapped path now leads to the shim; /bin/rm is /usr/bin/rm, replaced once.
        for p in ["usr/bin/rm", "usr/bin/sh", "usr/bin/dash", "usr/bin/tar", "usr/local/bin/node", "bin/rm"] {
            assert_eq!(root.join(p).canonicalize().unwrap(), me, "{p}");
        }
        assert_eq!(done.links.len(), 5);
        // Each real program is the original content.
        let body = |n: &str| std::fs::read_to_string(real.join(n)).unwrap();
        assert_eq!(body("rm"), "#!/bin/true rm\n");
        assert_eq!(body("sh"), "#!/bin/true dash\n");
        assert_eq!(body("dash"), "#!/bin/true dash\n");
        assert_eq!(body("tar"), "#!/bin/true busybox\n");
        assert_eq!(body("node"), "#!/bin/true node\n");
        assert!(!real.join("nosuch").exists());
        assert_eq!(std::fs::read_to_string(prefix.join("bin/shim.log-path")).unwrap(), "/oe/channels/shim.jsonl\n");
        // Again: nothing moves, nothing breaks.
        let again = install(&shim, &o).unwrap();
        assert_eq!(again.wrapped, done.wrapped);
        assert!(again.links.is_empty());
        assert_eq!(body("rm"), "#!/bin/true rm\n");
    }
}
