//! Images for the Docker executor, made without a registry.
//!
//! The scripted and simulated agents run in an image imported from a root file system built
//! here: `busybox-static` for the usual tools, the machine's own `sh` (dash), `bash`, `git` and
//! `curl` with the shared libraries they load (the seeds' plays use them), and the shim. The real
//! programs live in `/usr/lib/overeager/real/`; every wrapped name in `/bin` is a link to the
//! shim, which finds the real one there — so `bash -lc`, `env -i` and absolute paths all go
//! through the shell channel.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::layout;
use crate::WRAPPED;
use overeager_agents::which;

/// The uid and gid the agent runs as inside containers.
pub const AGENT_UID: u64 = 1000;

/// Programs copied from this machine into the test image when present, beside busybox, as
/// (name in the image, name here). The shell is Debian's dash, as `sh` is here: busybox's own
/// shell runs its applets without a PATH lookup, which would hide them from the shell channel.
const HOST_PROGRAMS: &[(&str, &str)] = &[("sh", "dash"), ("bash", "bash"), ("git", "git"), ("curl", "curl"), ("awk", "awk")];
/// Debian packages whose programs replace busybox's applets of the same name: plays and setup
/// commands use GNU options (`find -delete`, `tar --transform`, `sed '0,/re/'`) that busybox
/// lacks, and a run must behave as it does on the local executor.
const HOST_PACKAGES: &[&str] = &["coreutils", "sed", "grep", "findutils", "gzip", "tar", "diffutils"];
/// Git's server-side programs, which `git push` to a path runs by name.
const GIT_HELPERS: &[&str] = &["git-receive-pack", "git-upload-pack", "git-upload-archive"];

/// A root file system being assembled as a tar archive, entries keyed by path so a later
/// addition replaces an earlier one.
#[derive(Default)]
pub struct Rootfs {
    entries: BTreeMap<String, Entry>,
}

enum Entry {
    Dir { mode: u32, uid: u64 },
    File { bytes: Vec<u8>, mode: u32 },
    Symlink(String),
}

impl Rootfs {
    /// Adds a directory and its missing parents (root-owned, 0755).
    pub fn dir(&mut self, path: &str, mode: u32, uid: u64) {
        let mut acc = String::new();
        for part in path.trim_matches('/').split('/').filter(|p| !p.is_empty()) {
            acc.push('/');
            acc.push_str(part);
            self.entries.entry(acc.clone()).or_insert(Entry::Dir { mode: 0o755, uid: 0 });
        }
        self.entries.insert(acc, Entry::Dir { mode, uid });
    }

    fn parent(&mut self, path: &str) {
        if let Some((p, _)) = path.rsplit_once('/')
            && !p.is_empty()
            && !self.entries.contains_key(p)
        {
            self.dir(p, 0o755, 0);
        }
    }

    /// Adds a root-owned file.
    pub fn file(&mut self, path: &str, bytes: Vec<u8>, mode: u32) {
        self.parent(path);
        self.entries.insert(path.to_string(), Entry::File { bytes, mode });
    }

    /// Adds a symbolic link.
    pub fn symlink(&mut self, path: &str, target: &str) {
        self.parent(path);
        self.entries.insert(path.to_string(), Entry::Symlink(target.to_string()));
    }

    /// Copies a program from this machine to `dest`, with every shared library it loads at
    /// the path the dynamic loader found it (as `ldd` reports).
    pub fn host_program(&mut self, src: &Path, dest: &str) -> Result<()> {
        let bytes = std::fs::read(src).with_context(|| format!("reading {}", src.display()))?;
        self.file(dest, bytes, 0o755);
        for lib in shared_libraries(src)? {
            let bytes = std::fs::read(&lib).with_context(|| format!("reading {}", lib.display()))?;
            self.file(&lib.to_string_lossy(), bytes, 0o755);
        }
        Ok(())
    }

    /// The sha256 of the content, for naming images by what is in them.
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        for (path, e) in &self.entries {
            h.update(path.as_bytes());
            match e {
                Entry::Dir { mode, uid } => h.update(format!("d{mode:o}:{uid}")),
                Entry::File { bytes, mode } => {
                    h.update(format!("f{mode:o}:{}", bytes.len()));
                    h.update(bytes);
                }
                Entry::Symlink(t) => h.update(format!("l{t}")),
            }
            h.update([0]);
        }
        hex::encode(h.finalize())
    }

    /// The archive.
    pub fn into_tar(self) -> Result<Vec<u8>> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, e) in self.entries {
            let mut h = tar::Header::new_gnu();
            h.set_mtime(0);
            h.set_uid(0);
            h.set_gid(0);
            let rel = path.trim_start_matches('/');
            match e {
                Entry::Dir { mode, uid } => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_mode(mode);
                    h.set_uid(uid);
                    h.set_gid(uid);
                    h.set_size(0);
                    b.append_data(&mut h, format!("{rel}/"), std::io::empty())?;
                }
                Entry::File { bytes, mode } => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_mode(mode);
                    h.set_size(bytes.len() as u64);
                    b.append_data(&mut h, rel, bytes.as_slice())?;
                }
                Entry::Symlink(target) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_mode(0o777);
                    h.set_size(0);
                    b.append_link(&mut h, rel, target)?;
                }
            }
        }
        Ok(b.into_inner()?)
    }
}

/// The shared libraries `program` loads, from `ldd` (none for a static binary).
fn shared_libraries(program: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd").arg(program).output().context("running ldd (Debian package libc-bin)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text.contains("not a dynamic executable") || text.contains("statically linked") {
        return Ok(Vec::new());
    }
    let mut libs = Vec::new();
    for line in text.lines() {
        // `libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x…)` or `/lib64/ld-linux-x86-64.so.2 (0x…)`
        let path = match line.split_once("=>") {
            Some((_, right)) => right.split_whitespace().next(),
            None => line.split_whitespace().next().filter(|p| p.starts_with('/')),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    if libs.is_empty() {
        bail!("ldd {} listed no libraries: {}", program.display(), text.trim());
    }
    Ok(libs)
}

/// Where busybox-static installs its binary on Debian.
const BUSYBOX: &str = "/bin/busybox";

/// Installs the shim into `fs` the way every image has it: the binary in
/// `/usr/lib/overeager/bin`, its log path beside it, and in `/bin` a link to it for each
/// wrapped program that `real/` holds (and a link to the real one for every other program).
pub fn install_shim(fs: &mut Rootfs, shim: &Path, programs: &[String]) -> Result<()> {
    fs.host_program(shim, layout::SHIM)?;
    fs.file(&format!("{}/shim.log-path", layout::SHIM_DIR), format!("{}\n", layout::SHIM_LOG).into_bytes(), 0o644);
    for name in programs {
        let link = if WRAPPED.contains(&name.as_str()) { layout::SHIM.to_string() } else { format!("{}/{name}", layout::REAL) };
        fs.symlink(&format!("/bin/{name}"), &link);
    }
    Ok(())
}

/// The root file system of the scripted agents' image: busybox, the machine's git and curl,
/// the shim (which is also the scripted agent), `/etc/passwd` naming the agent user, and the
/// mount points.
pub fn scripted_rootfs(shim: &Path) -> Result<Rootfs> {
    let busybox = Path::new(BUSYBOX);
    if !busybox.is_file() {
        bail!("{BUSYBOX} is missing: install Debian's busybox-static (scripts/setup.sh --test does)");
    }
    let mut fs = Rootfs::default();
    fs.host_program(busybox, &format!("{}/busybox", layout::REAL))?;
    let list = Command::new(busybox).arg("--list").output().context("running busybox --list")?;
    let mut programs: Vec<String> = String::from_utf8_lossy(&list.stdout).lines().map(str::trim).filter(|l| !l.is_empty() && !l.contains('/') && *l != "busybox").map(String::from).collect();
    for name in &programs {
        fs.symlink(&format!("{}/{name}", layout::REAL), "busybox");
    }
    let mut host: Vec<(String, PathBuf)> = HOST_PROGRAMS.iter().filter_map(|(name, here)| Some((name.to_string(), which(here)?))).collect();
    host.extend(package_programs(HOST_PACKAGES));
    for (name, path) in host {
        fs.host_program(&path.canonicalize()?, &format!("{}/{name}", layout::REAL))?;
        if !programs.contains(&name) {
            programs.push(name);
        }
    }
    if let Some(git) = which("git") {
        // Git looks for its helpers and templates where it was installed (`--exec-path`,
        // and `share/` under the same prefix).
        let exec = Command::new(&git).arg("--exec-path").output().context("running git --exec-path")?;
        let exec = String::from_utf8_lossy(&exec.stdout).trim().to_string();
        for helper in GIT_HELPERS {
            fs.symlink(&format!("{exec}/{helper}"), &format!("{}/git", layout::REAL));
        }
        let prefix = Path::new(&exec).parent().and_then(Path::parent).unwrap_or(Path::new("/usr"));
        add_tree(&mut fs, &prefix.join("share/git-core/templates"))?;
    }
    install_shim(&mut fs, shim, &programs)?;
    fs.symlink("/usr/bin", "../bin");
    fs.symlink("/usr/sbin", "../bin");
    fs.symlink("/sbin", "bin");
    fs.file("/etc/passwd", format!("root:x:0:0:root:/root:/bin/sh\nagent:x:{AGENT_UID}:{AGENT_UID}:agent:{}:/bin/sh\n", layout::HOME).into_bytes(), 0o644);
    fs.file("/etc/group", format!("root:x:0:\nagent:x:{AGENT_UID}:\n").into_bytes(), 0o644);
    for d in ["/tmp", "/proc", "/sys", "/dev", layout::ROOT, "/root", "/etc/ssl"] {
        fs.dir(d, if d == "/tmp" { 0o1777 } else { 0o755 }, 0);
    }
    Ok(fs)
}

/// Where an offline agent image keeps the agent's installed package (its cache entry).
pub const AGENTS_DIR: &str = "/opt/overeager/agents";

/// Directory names of other platforms' prebuilt binaries, which npm packages of the agents
/// ship beside this one's (Codex CLI ships all of them): left out of the image.
const FOREIGN_PLATFORMS: &[&str] = &["aarch64", "arm64", "darwin", "win32", "windows"];

/// The root file system of a real agent's image, made without a registry: the scripted
/// image's tools, this machine's Node.js (as the real `node`, which the shim wraps for the
/// agent's own use), perl (the scripted model's edits through a shell use it), and the agent's
/// package as installed in this machine's agent cache, under [`AGENTS_DIR`].
pub fn agent_rootfs(shim: &Path, installed: &Path) -> Result<Rootfs> {
    let mut fs = scripted_rootfs(shim)?;
    let (node, _) = overeager_agents::install::node().context("the agent image needs Node.js 20 or newer on this machine")?;
    fs.host_program(&node.canonicalize()?, &format!("{}/node", layout::REAL))?;
    fs.symlink("/bin/node", layout::SHIM);
    if let Some(perl) = which("perl") {
        fs.host_program(&perl.canonicalize()?, &format!("{}/perl", layout::REAL))?;
        fs.symlink("/bin/perl", layout::SHIM);
    }
    let name = installed.file_name().context("an agent cache entry has a name")?.to_string_lossy().into_owned();
    add_tree_to(&mut fs, installed, &format!("{AGENTS_DIR}/{name}"), &|p: &Path| {
        !p.components().any(|c| FOREIGN_PLATFORMS.iter().any(|f| c.as_os_str().to_string_lossy().contains(f)))
    })?;
    Ok(fs)
}

/// The programs in `/bin` and `/usr/bin` that Debian `packages` installed here, by name
/// (none when dpkg is not there).
fn package_programs(packages: &[&str]) -> Vec<(String, PathBuf)> {
    let Ok(out) = Command::new("dpkg").arg("-L").args(packages).output() else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| ["/bin/", "/usr/bin/"].iter().any(|d| l.starts_with(d) && !l[d.len()..].contains('/')))
        .filter_map(|l| {
            let p = PathBuf::from(l);
            let name = p.file_name()?.to_string_lossy().into_owned();
            std::fs::metadata(&p).ok().filter(|m| m.is_file()).map(|_| (name, p))
        })
        .collect()
}

/// Copies a directory tree of regular files from this machine (when it exists) to the same
/// place in the image.
fn add_tree(fs: &mut Rootfs, root: &Path) -> Result<()> {
    add_tree_to(fs, root, &root.to_string_lossy(), &|_| true)
}

/// Copies the directories, regular files and links under `root` that `keep` accepts (by path
/// relative to `root`) to `dest` in the image.
fn add_tree_to(fs: &mut Rootfs, root: &Path, dest: &str, keep: &dyn Fn(&Path) -> bool) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if !root.is_dir() {
        return Ok(());
    }
    let walk = walkdir::WalkDir::new(root).follow_links(false).sort_by_file_name().into_iter();
    for e in walk.filter_entry(|e| keep(e.path().strip_prefix(root).unwrap_or(e.path()))) {
        let e = e?;
        let rel = e.path().strip_prefix(root).expect("inside the tree");
        let path = if rel.as_os_str().is_empty() { dest.to_string() } else { format!("{dest}/{}", rel.display()) };
        if e.file_type().is_dir() {
            fs.dir(&path, 0o755, 0);
        } else if e.file_type().is_symlink() {
            fs.symlink(&path, &std::fs::read_link(e.path())?.to_string_lossy());
        } else if e.file_type().is_file() {
            let mode = e.metadata()?.permissions().mode() & 0o777;
            fs.file(&path, std::fs::read(e.path())?, mode);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_libraries_of_a_dynamic_program_and_none_of_a_static_one() {
        let libs = shared_libraries(&which("git").expect("git is installed")).unwrap();
        assert!(libs.iter().any(|l| l.to_string_lossy().contains("libc.so")), "{libs:?}");
        assert!(libs.iter().any(|l| l.to_string_lossy().contains("ld-linux")), "{libs:?}");
        if Path::new(BUSYBOX).is_file() {
            assert!(shared_libraries(Path::new(BUSYBOX)).unwrap().is_empty());
        }
    }

    #[test]
    fn archives_parents_before_children_with_the_given_owners() {
        let mut fs = Rootfs::default();
        fs.file("/a/b/c.txt", b"hi".to_vec(), 0o644);
        fs.symlink("/bin/sh", "/usr/lib/overeager/bin/overeager-shim");
        fs.dir("/oe/work", 0o755, AGENT_UID);
        let d1 = fs.digest();
        let tar = fs.into_tar().unwrap();
        let mut ar = tar::Archive::new(tar.as_slice());
        let seen: Vec<(String, u64)> = ar.entries().unwrap().map(|e| {
            let e = e.unwrap();
            (e.path().unwrap().to_string_lossy().into_owned(), e.header().uid().unwrap())
        }).collect();
        let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a/", "a/b/", "a/b/c.txt", "bin/", "bin/sh", "oe/", "oe/work/"]);
        assert_eq!(seen.last().unwrap().1, AGENT_UID);
        let mut again = Rootfs::default();
        again.file("/a/b/c.txt", b"hi".to_vec(), 0o644);
        assert_ne!(again.digest(), d1);
    }
}
