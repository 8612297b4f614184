//! The watch channel: inotify over the workspace and `$HOME`, recording file access by any
//! process — including reads done in-process by an agent's own tools, which no shell sees.
//!
//! Protocol with the executor: the watcher prints `ready` once every directory is watched;
//! it stops when its standard input closes, after draining what the kernel has queued. With
//! `--sync <socket>`, a client that connects and sends one byte gets one byte back once every
//! event queued before the connect has been written out (the scripted agent does this after
//! each step, which makes the merged timeline deterministic).

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{BufWriter, ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};
use overeager_core::bundle::{WatchEv, WatchRecord};

use crate::{flag, now_us};

fn mask() -> WatchMask {
    WatchMask::OPEN
        | WatchMask::ACCESS
        | WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::CLOSE_NOWRITE
        | WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::ATTRIB
        | WatchMask::DONT_FOLLOW
        | WatchMask::EXCL_UNLINK
}

struct Watcher {
    inotify: Inotify,
    dirs: HashMap<WatchDescriptor, PathBuf>,
    /// Paths known to exist, so a directory scanned late does not report a creation twice.
    known: HashSet<PathBuf>,
    /// Directories the watcher itself listed, with how many of their events (open, close)
    /// are still to be skipped.
    own_listings: HashMap<PathBuf, u8>,
    /// The watched roots.
    roots: HashSet<PathBuf>,
    /// Directories watched before the agent started.
    initial_dirs: HashSet<PathBuf>,
    /// Directories seen moved away in the batch of events being handled, by move cookie.
    moved_dirs: HashMap<u32, PathBuf>,
    out: BufWriter<File>,
}

impl Watcher {
    fn emit(&mut self, ev: WatchEv, path: &Path, dir: bool, cookie: u32, synthetic: bool) {
        // A link made or moved in is recorded with its target, so that paths named through it
        // can be judged by what they reach (the kernel reports nothing beyond it).
        let link = match ev {
            WatchEv::Create | WatchEv::MovedTo if !dir => std::fs::symlink_metadata(path)
                .ok()
                .filter(|m| m.file_type().is_symlink())
                .and_then(|_| std::fs::read_link(path).ok())
                .map(|t| t.to_string_lossy().into_owned()),
            _ => None,
        };
        let rec = WatchRecord {
            t_us: now_us(),
            ev,
            path: path.to_string_lossy().into_owned(),
            dir,
            cookie: (cookie != 0).then_some(cookie),
            synthetic,
            link,
        };
        let _ = serde_json::to_writer(&mut self.out, &rec);
        let _ = self.out.write_all(b"\n");
    }

    /// Watches every directory below `root` before the agent starts. The whole tree is
    /// listed first and watched after, so the watcher's own listing is not recorded.
    fn add_initial(&mut self, root: &Path) {
        let mut dirs = vec![root.to_path_buf()];
        let mut i = 0;
        while i < dirs.len() {
            let d = dirs[i].clone();
            self.known.insert(d.clone());
            for (path, is_dir) in list_sorted(&d) {
                self.known.insert(path.clone());
                if is_dir {
                    dirs.push(path);
                }
            }
            i += 1;
        }
        for d in dirs {
            if self.watch(&d) {
                self.initial_dirs.insert(d);
            } else {
                // The bundle must say so: an absent record proves nothing here.
                self.emit(WatchEv::Unwatched, &d, true, 0, false);
            }
        }
    }

    /// Watches a directory that appeared during the run, and everything already inside it.
    /// The watch goes first and the listing after, so nothing created in between is missed;
    /// entries not known yet are recorded as synthetic creations, in sorted order. The
    /// listing's own open/access/close events (as reported by the parent's watch) are the
    /// watcher's, not the agent's, and are skipped.
    fn add_late(&mut self, dir: &Path) {
        // The watch refuses anything but a real directory, so a link swapped in for the one
        // reported is neither watched nor listed.
        if !self.watch_with(dir, mask() | WatchMask::ONLYDIR) {
            self.emit(WatchEv::Unwatched, dir, true, 0, false);
            return;
        }
        self.known.insert(dir.to_path_buf());
        // Two opens: the check that it is still a directory, and the listing.
        self.own_listings.insert(dir.to_path_buf(), 2);
        let Some(listing) = list_dir_nofollow(dir) else {
            self.own_listings.remove(dir);
            return;
        };
        for (path, is_dir) in listing {
            if self.known.insert(path.clone()) {
                self.emit(WatchEv::Create, &path, is_dir, 0, true);
            }
            if is_dir {
                self.add_late(&path);
            }
        }
    }

    fn watch(&mut self, dir: &Path) -> bool {
        self.watch_with(dir, mask())
    }

    fn watch_with(&mut self, dir: &Path, mask: WatchMask) -> bool {
        match self.inotify.watches().add(dir, mask) {
            Ok(wd) => {
                self.dirs.insert(wd, dir.to_path_buf());
                true
            }
            Err(e) => {
                eprintln!("overeager-shim watch: cannot watch {}: {e}", dir.display());
                false
            }
        }
    }

    /// Stops watching the directories moved out of the roots (a move whose other half did
    /// not come with it). Their watches would go on naming what happens in them, wherever they
    /// went, by their old paths. A directory moved within the roots is watched again under its
    /// new name on `moved_to`.
    fn unwatch_moved_away(&mut self) {
        for (_, prefix) in std::mem::take(&mut self.moved_dirs) {
            let gone: Vec<WatchDescriptor> = self.dirs.iter().filter(|(_, d)| d.starts_with(&prefix)).map(|(wd, _)| wd.clone()).collect();
            for wd in gone {
                self.dirs.remove(&wd);
                let _ = self.inotify.watches().remove(wd);
            }
        }
    }

    /// Reads everything the kernel has queued. Returns false on a fatal read error.
    fn drain(&mut self, buf: &mut [u8]) -> bool {
        loop {
            let events: Vec<(WatchDescriptor, EventMask, u32, Option<std::ffi::OsString>)> =
                match self.inotify.read_events(buf) {
                    Ok(evs) => evs.map(|e| (e.wd, e.mask, e.cookie, e.name.map(OsStr::to_os_string))).collect(),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => {
                        eprintln!("overeager-shim watch: read failed: {e}");
                        return false;
                    }
                };
            if events.is_empty() {
                return true;
            }
            for (wd, m, cookie, name) in events {
                self.handle(wd, m, cookie, name);
            }
            self.unwatch_moved_away();
        }
    }

    fn handle(&mut self, wd: WatchDescriptor, m: EventMask, cookie: u32, name: Option<std::ffi::OsString>) {
        if m.contains(EventMask::Q_OVERFLOW) {
            self.emit(WatchEv::Overflow, Path::new(""), false, 0, false);
            return;
        }
        if m.contains(EventMask::IGNORED) {
            self.dirs.remove(&wd);
            return;
        }
        let Some(base) = self.dirs.get(&wd).cloned() else { return };
        // Events on a directory itself are reported by its own watch and by its parent's. The
        // parent's watch was there first, while the directory's own watch may or may not exist
        // yet when the event happens; using only the parent's report keeps the record the
        // same from run to run. Roots have no watched parent, so theirs are kept.
        if name.is_none() && !self.roots.contains(&base) {
            return;
        }
        // Opening a directory created during the run races with its parent's late watch;
        // only directories whose parent was watched from the start report opens.
        if m.contains(EventMask::ISDIR)
            && (m.contains(EventMask::OPEN) || m.contains(EventMask::ACCESS) || m.contains(EventMask::CLOSE_NOWRITE))
            && !self.initial_dirs.contains(&base)
        {
            return;
        }
        let path = match &name {
            Some(n) => base.join(n),
            None => base,
        };
        let dir = m.contains(EventMask::ISDIR);
        if dir
            && (m.contains(EventMask::OPEN) || m.contains(EventMask::ACCESS) || m.contains(EventMask::CLOSE_NOWRITE))
            && let Some(left) = self.own_listings.get_mut(&path)
        {
            if m.contains(EventMask::CLOSE_NOWRITE) {
                *left -= 1;
                if *left == 0 {
                    self.own_listings.remove(&path);
                }
            }
            return;
        }
        let kinds = [
            (EventMask::OPEN, WatchEv::Open),
            (EventMask::ACCESS, WatchEv::Access),
            (EventMask::MODIFY, WatchEv::Modify),
            (EventMask::CLOSE_WRITE, WatchEv::CloseWrite),
            (EventMask::CLOSE_NOWRITE, WatchEv::CloseNowrite),
            (EventMask::CREATE, WatchEv::Create),
            (EventMask::DELETE, WatchEv::Delete),
            (EventMask::MOVED_FROM, WatchEv::MovedFrom),
            (EventMask::MOVED_TO, WatchEv::MovedTo),
            (EventMask::ATTRIB, WatchEv::Attrib),
            (EventMask::DELETE_SELF, WatchEv::DeleteSelf),
        ];
        for (bit, ev) in kinds {
            if !m.contains(bit) {
                continue;
            }
            match ev {
                WatchEv::Create | WatchEv::MovedTo => {
                    if ev == WatchEv::MovedTo {
                        self.moved_dirs.remove(&cookie);
                    }
                    // A creation already reported by a late directory scan is not repeated.
                    if self.known.insert(path.clone()) || ev == WatchEv::MovedTo {
                        self.emit(ev, &path, dir, cookie, false);
                    }
                    if dir {
                        self.add_late(&path);
                    }
                }
                WatchEv::Delete | WatchEv::MovedFrom => {
                    self.known.remove(&path);
                    if dir {
                        let prefix = path.clone();
                        self.known.retain(|p| !p.starts_with(&prefix));
                        if ev == WatchEv::MovedFrom {
                            self.moved_dirs.insert(cookie, prefix);
                        }
                    }
                    self.emit(ev, &path, dir, cookie, false);
                }
                // The watched directory's own events duplicate its parent's.
                WatchEv::DeleteSelf => {}
                _ => self.emit(ev, &path, dir, cookie, false),
            }
        }
    }
}

/// Entries of a directory, sorted, with whether each is a directory (links not followed).
fn list_sorted(dir: &Path) -> Vec<(PathBuf, bool)> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut v: Vec<(PathBuf, bool)> = rd
        .filter_map(Result::ok)
        .map(|e| {
            let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
            (e.path(), is_dir)
        })
        .collect();
    v.sort();
    v
}

/// Entries of a directory named by `dir`, as [`list_sorted`], or `None` when `dir` is not a
/// directory reached without following a link in its last component (one swapped in after
/// the watch was placed).
fn list_dir_nofollow(dir: &Path) -> Option<Vec<(PathBuf, bool)>> {
    use std::os::unix::fs::OpenOptionsExt;
    let handle = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC).open(dir).ok()?;
    let listing = list_sorted(dir);
    // Still the directory that was opened: the listing was of it.
    let (a, b) = (handle.metadata().ok()?, std::fs::symlink_metadata(dir).ok()?);
    use std::os::unix::fs::MetadataExt;
    (b.is_dir() && a.dev() == b.dev() && a.ino() == b.ino()).then_some(listing)
}

/// `overeager-shim watch --out <file> [--sync <socket>] <root>...`
pub fn main(args: &[String]) -> i32 {
    let Some(out) = flag(args, "--out") else {
        eprintln!("overeager-shim watch: --out <file> is required");
        return 2;
    };
    let sync = flag(args, "--sync").map(PathBuf::from);
    let mut roots = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if a == "--out" || a == "--sync" {
            skip = true;
            continue;
        }
        roots.push(PathBuf::from(a));
    }
    let ready = || {
        println!("ready");
        let _ = std::io::stdout().flush();
    };
    match run(Path::new(out), sync.as_deref(), &roots, std::io::stdin().as_raw_fd(), ready) {
        Ok(()) => 0,
        Err((code, msg)) => {
            eprintln!("overeager-shim watch: {msg}");
            code
        }
    }
}

/// Watches `roots`, writing events to `out`, until `stop_fd` reaches end of file; calls
/// `ready` once every directory is watched. Errors carry an exit code (2: bad arguments).
pub fn run(out: &Path, sync: Option<&Path>, roots: &[PathBuf], stop_fd: std::os::fd::RawFd, ready: impl FnOnce()) -> Result<(), (i32, String)> {
    if roots.is_empty() {
        return Err((2, "name at least one directory to watch".into()));
    }
    let file = File::create(out).map_err(|e| (1, format!("cannot create {}: {e}", out.display())))?;
    let inotify = Inotify::init().map_err(|e| (1, format!("inotify is not available: {e}")))?;
    let mut w = Watcher { inotify, dirs: HashMap::new(), known: HashSet::new(), own_listings: HashMap::new(), roots: roots.iter().cloned().collect(), initial_dirs: HashSet::new(), moved_dirs: HashMap::new(), out: BufWriter::new(file) };
    for root in roots {
        if !root.is_dir() {
            return Err((2, format!("{} is not a directory", root.display())));
        }
        w.add_initial(root);
    }
    let listener = match sync {
        Some(p) => {
            let l = UnixListener::bind(p).map_err(|e| (1, format!("cannot listen on {}: {e}", p.display())))?;
            let _ = l.set_nonblocking(true);
            Some(l)
        }
        None => None,
    };
    ready();

    let mut buf = vec![0u8; 64 * 1024];
    let ino_fd = w.inotify.as_raw_fd();
    loop {
        let mut fds = vec![
            libc::pollfd { fd: ino_fd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: stop_fd, events: libc::POLLIN, revents: 0 },
        ];
        if let Some(l) = &listener {
            fds.push(libc::pollfd { fd: l.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        }
        // SAFETY: fds is a valid array of pollfd for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if fds[0].revents != 0 && !w.drain(&mut buf) {
            break;
        }
        if fds.len() > 2 && fds[2].revents != 0 {
            if let Some(l) = &listener {
                while let Ok((mut conn, _)) = l.accept() {
                    let _ = conn.set_nonblocking(false);
                    let mut b = [0u8; 1];
                    let _ = conn.read(&mut b);
                    w.drain(&mut buf);
                    let _ = w.out.flush();
                    let _ = conn.write_all(b"k");
                }
            }
        }
        if fds[1].revents != 0 {
            let mut b = [0u8; 256];
            // SAFETY: reading into a local buffer.
            let r = unsafe { libc::read(stop_fd, b.as_mut_ptr().cast(), b.len()) };
            if r <= 0 {
                break;
            }
        }
    }
    w.drain(&mut buf);
    let _ = w.out.flush();
    if let Some(p) = sync {
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}
