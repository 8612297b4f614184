//! Symbolic links of the workspace and `$HOME`, and resolving a path through them.
//!
//! Logical paths are normalized as text ([`crate::paths`]), which is what an agent named. An
//! agent that makes a link (`ln -s /tmp/x out`) and then writes `out/f` has written
//! `/tmp/x/f`, so the audit resolves named paths through the links it knows of: those of the
//! before-snapshot and those the watcher saw made. Resolution goes component by component as
//! the kernel's does (a link is expanded before a `..` that follows it). Outside the roots
//! nothing is known of links except the kernel's own under `/proc` (`/proc/self/root` is `/`,
//! `/proc/self/cwd` the working directory); there a path stays as named.
//!
//! A link the watcher saw made is known by the note its event carries, which names the link's
//! target as the link holds it. The note's wording is defined once, beside the watch record
//! ([`crate::bundle::link_note`]): the event derivation ([`crate::event`]) writes it and
//! [`noted_target`] reads it back, so neither file imports the other for it. Without the note,
//! a link made during the run would be unknown here, and a path named through it would stay
//! as named.

use std::collections::BTreeMap;

use crate::bundle::{LINK_MARK, WatchRecord};
use crate::event::Event;
use crate::paths::Roots;
use crate::snapshot::{EntryKind, Snapshot};

/// How many links one resolution may expand, as the kernel's `ELOOP` limit.
const MAX_EXPANSIONS: usize = 40;

/// The target a watch event's note gives for the link it created or moved (see
/// [`crate::bundle::link_note`]).
pub fn noted_target(e: &Event) -> Option<&str> {
    e.text.as_deref().and_then(|t| t.split_once(LINK_MARK)).map(|(_, target)| target)
}

/// Symbolic links by logical path, with their targets as the link holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Links {
    map: BTreeMap<String, String>,
}

impl Links {
    /// The links of a snapshot.
    pub fn from_snapshot(snap: &Snapshot) -> Links {
        let mut links = Links::default();
        links.add_snapshot(snap);
        links
    }

    /// Adds the links of a snapshot (a path that is a link there points where it says).
    pub fn add_snapshot(&mut self, snap: &Snapshot) {
        for (path, e) in snap {
            if e.kind == EntryKind::Symlink
                && let Some(t) = &e.target
            {
                self.map.insert(path.clone(), t.clone());
            }
        }
    }

    /// Whether no link is known.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The target of the link at a logical path.
    pub fn get(&self, path: &str) -> Option<&str> {
        self.map.get(path).map(String::as_str)
    }

    /// Records a link at a logical path.
    pub fn set(&mut self, path: &str, target: &str) {
        self.map.insert(path.to_string(), target.to_string());
    }

    /// Forgets the link at a path and every link below it (a removed directory takes them).
    pub fn remove(&mut self, path: &str) -> Vec<(String, String)> {
        let below: Vec<String> = self.map.keys().filter(|k| is_at_or_under(k, path)).cloned().collect();
        below.into_iter().filter_map(|k| self.map.remove_entry(&k)).collect()
    }

    /// Records the links of a removed subtree again under the path it was moved to.
    pub fn put_moved(&mut self, from: &str, to: &str, moved: Vec<(String, String)>) {
        for (k, t) in moved {
            self.map.insert(format!("{to}{}", &k[from.len()..]), t);
        }
    }

    /// Resolves a path as named (absolute, `~/…`, or relative to the logical working
    /// directory `cwd`) to the logical path of what it reaches. With `follow_last`, a link in
    /// the last component is followed too (an open follows it; a removal or rename does not).
    pub fn resolve(&self, roots: &Roots, path: &str, cwd: &str, follow_last: bool) -> String {
        // Without a known link or a `/proc` path this is the textual resolution exactly.
        if self.map.is_empty() && !path.contains("/proc/") && !cwd.contains("/proc/") {
            return roots.resolve(path, cwd);
        }
        let cwd_abs = roots.absolute(cwd);
        let named = if path.starts_with('/') {
            path.to_string()
        } else if path == "~" || path.starts_with("~/") {
            format!("{}{}", roots.home, &path[1..])
        } else {
            format!("{cwd_abs}/{path}")
        };
        // Components still to walk, the next one last.
        let mut pending: Vec<String> = named.split('/').rev().map(str::to_string).collect();
        let mut out = String::new();
        let mut expansions = 0;
        while let Some(seg) = pending.pop() {
            match seg.as_str() {
                "" | "." => continue,
                ".." => {
                    out.truncate(out.rfind('/').unwrap_or(0));
                    continue;
                }
                _ => {}
            }
            out.push('/');
            out.push_str(&seg);
            let last = pending.iter().all(|s| s.is_empty() || s == ".");
            if expansions >= MAX_EXPANSIONS {
                continue;
            }
            if let Some(magic) = proc_link(&out) {
                expansions += 1;
                out.clear();
                if magic == ProcLink::Cwd {
                    pending.extend(cwd_abs.split('/').rev().map(str::to_string));
                }
                continue;
            }
            if last && !follow_last {
                continue;
            }
            let Some(target) = self.map.get(&roots.logical(&out)) else { continue };
            expansions += 1;
            if target.starts_with('/') {
                out.clear();
            } else {
                out.truncate(out.rfind('/').unwrap_or(0));
            }
            pending.extend(target.split('/').rev().map(str::to_string));
        }
        if out.is_empty() {
            out.push('/');
        }
        roots.logical(&out)
    }

    /// Where the known links lead outside the workspace and home (never `/` itself, which
    /// would make everything outside "reached through a link").
    pub fn outside_targets(&self, roots: &Roots) -> Vec<String> {
        let mut out: Vec<String> = self.map.keys().map(|k| self.resolve(roots, k, ".", true)).filter(|t| t.starts_with('/') && t != "/").collect();
        out.sort();
        out.dedup();
        out
    }

    /// Whether a logical path lies at or under where a known link leads outside the roots: a
    /// place the run reached through a link of its own.
    pub fn leads_to(&self, roots: &Roots, path: &str) -> bool {
        path.starts_with('/') && self.outside_targets(roots).iter().any(|t| is_at_or_under(path, t))
    }
}

/// Rewrites the paths of the agent's own events (its file tools name paths as text) that go
/// through a symbolic link to what they reach, keeping the named ones in `via`. The links are
/// those of the before-snapshot, updated in time order by the watcher's records up to each
/// event. Events through no link are left exactly as they were.
pub fn resolve_agent_paths(events: &mut [Event], before: &Snapshot, watch: &[WatchRecord], roots: &Roots) {
    use crate::bundle::WatchEv;
    use crate::event::{Channel, Op};
    let mut links = Links::from_snapshot(before);
    let mut moving: BTreeMap<u32, (String, Vec<(String, String)>)> = BTreeMap::new();
    let mut next = 0;
    for e in events.iter_mut() {
        while let Some(r) = watch.get(next).filter(|r| r.t_us <= e.t_us) {
            next += 1;
            let path = roots.logical(&r.path);
            match r.ev {
                WatchEv::Create | WatchEv::MovedTo => {
                    if let Some((from, moved)) = r.cookie.and_then(|c| moving.remove(&c)) {
                        links.put_moved(&from, &path, moved);
                    }
                    match &r.link {
                        Some(t) => links.set(&path, t),
                        // Whatever is there now is not the link that was.
                        None if !r.dir => drop(links.remove(&path)),
                        None => {}
                    }
                }
                WatchEv::Delete => drop(links.remove(&path)),
                WatchEv::MovedFrom => {
                    let moved = links.remove(&path);
                    if let Some(c) = r.cookie {
                        moving.insert(c, (path, moved));
                    }
                }
                _ => {}
            }
        }
        if e.channel != Channel::Agent || e.paths.is_empty() || (links.is_empty() && !e.paths.iter().any(|p| p.starts_with("/proc/"))) {
            continue;
        }
        let follow_last = !matches!(e.op, Op::Delete | Op::Rename);
        let real: Vec<String> = e.paths.iter().map(|p| links.resolve(roots, p, ".", follow_last)).collect();
        if real != e.paths {
            e.via = std::mem::replace(&mut e.paths, real);
        }
    }
}

/// The kernel's own links under `/proc` that a path may go through.
#[derive(Debug, PartialEq, Eq)]
enum ProcLink {
    /// `/proc/<self|thread-self|pid>/root`: the root directory.
    Root,
    /// `/proc/<self|thread-self>/cwd`: the working directory.
    Cwd,
}

fn proc_link(abs: &str) -> Option<ProcLink> {
    let rest = abs.strip_prefix("/proc/")?;
    let (who, what) = rest.split_once('/')?;
    let pid = who == "self" || who == "thread-self" || (!who.is_empty() && who.bytes().all(|b| b.is_ascii_digit()));
    match what {
        "root" if pid => Some(ProcLink::Root),
        // Another process's working directory is not known: that path stays as named.
        "cwd" if who == "self" || who == "thread-self" => Some(ProcLink::Cwd),
        _ => None,
    }
}

fn is_at_or_under(path: &str, dir: &str) -> bool {
    path == dir || (path.len() > dir.len() && path.starts_with(dir) && (path.as_bytes()[dir.len()] == b'/' || dir.ends_with('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Roots {
        Roots { workspace: "/r/work".into(), home: "/r/home".into() }
    }

    #[test]
    fn resolves_through_links_as_the_kernel_does() {
        let r = roots();
        let mut l = Links::default();
        l.set("out", "/tmp/x");
        l.set("rel", "sub/dir");
        l.set("sub/dir/up", "../..");
        l.set("~/cfg", "/r/work/conf");
        l.set("loop", "loop");
        assert_eq!(l.resolve(&r, "out/f", ".", true), "/tmp/x/f");
        assert_eq!(l.resolve(&r, "f", "out", true), "/tmp/x/f");
        // The link is expanded before the `..` after it.
        assert_eq!(l.resolve(&r, "out/../etc/passwd", ".", true), "/tmp/etc/passwd");
        assert_eq!(l.resolve(&r, "rel/a", ".", true), "sub/dir/a");
        assert_eq!(l.resolve(&r, "rel/up/a", ".", true), "a");
        assert_eq!(l.resolve(&r, "~/cfg/app.toml", ".", true), "conf/app.toml");
        assert_eq!(l.resolve(&r, "/r/work/out", ".", true), "/tmp/x");
        // A removal names the link itself.
        assert_eq!(l.resolve(&r, "out", ".", false), "out");
        assert_eq!(l.resolve(&r, "out/f", ".", false), "/tmp/x/f");
        // A loop stops where the kernel would give up.
        assert_eq!(l.resolve(&r, "loop", ".", true), "loop");
        assert_eq!(l.resolve(&r, "plain/../a", "sub", true), "sub/a");
    }

    #[test]
    fn proc_links_lead_where_they_lead() {
        let r = roots();
        let l = Links::default();
        assert_eq!(l.resolve(&r, "/proc/self/root/tmp/x/g", ".", true), "/tmp/x/g");
        assert_eq!(l.resolve(&r, "/proc/1234/root/r/work/a", ".", true), "a");
        assert_eq!(l.resolve(&r, "/proc/thread-self/root/r/home/.ssh/id", ".", true), "~/.ssh/id");
        assert_eq!(l.resolve(&r, "/proc/self/cwd/b", "sub", true), "sub/b");
        assert_eq!(l.resolve(&r, "/proc/self/root/proc/self/root/etc", ".", true), "/etc");
        assert_eq!(l.resolve(&r, "/proc/1/cwd/b", ".", true), "/proc/1/cwd/b");
        assert_eq!(l.resolve(&r, "/proc/self/status", ".", true), "/proc/self/status");
    }

    #[test]
    fn without_links_resolution_is_textual() {
        let r = roots();
        let l = Links::default();
        for (p, c) in [("a/../b", "."), ("~/x", "sub"), ("../../etc/passwd", "."), ("/r/work/q", "~"), (".", ".")] {
            assert_eq!(l.resolve(&r, p, c, true), r.resolve(p, c), "{p} from {c}");
        }
    }

    #[test]
    fn agent_paths_follow_the_links_of_their_time() {
        use crate::bundle::WatchEv;
        use crate::event::{Channel, Op};
        let r = roots();
        let mut before = Snapshot::new();
        before.insert("old".into(), crate::SnapshotEntry { kind: EntryKind::Symlink, size: 4, mode: 0o777, sha256: None, target: Some("/etc".into()) });
        let rec = |t: u64, ev: WatchEv, p: &str, link: Option<&str>| WatchRecord { t_us: t, ev, path: format!("/r/work/{p}"), dir: false, cookie: None, synthetic: false, link: link.map(str::to_string) };
        let watch = vec![rec(10, WatchEv::Create, "out", Some("/tmp/x")), rec(30, WatchEv::Delete, "out", None), rec(31, WatchEv::Delete, "old", None)];
        let ev = |t: u64, op: Op, p: &str| {
            let mut e = Event::new(Channel::Agent, op, t, 0);
            e.paths = vec![p.into()];
            e
        };
        let mut events = vec![ev(5, Op::Write, "out/f"), ev(5, Op::Read, "old/passwd"), ev(20, Op::Write, "out/f"), ev(20, Op::Delete, "out"), ev(40, Op::Write, "out/f"), ev(40, Op::Read, "old/passwd")];
        resolve_agent_paths(&mut events, &before, &watch, &r);
        let got: Vec<(&[String], &[String])> = events.iter().map(|e| (e.paths.as_slice(), e.via.as_slice())).collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let want = [(s(&["out/f"]), s(&[])), (s(&["/etc/passwd"]), s(&["old/passwd"])), (s(&["/tmp/x/f"]), s(&["out/f"])), (s(&["out"]), s(&[])), (s(&["out/f"]), s(&[])), (s(&["old/passwd"]), s(&[]))];
        for (g, w) in got.iter().zip(&want) {
            assert_eq!((g.0, g.1), (w.0.as_slice(), w.1.as_slice()));
        }
    }

    #[test]
    fn removed_and_moved_subtrees_take_their_links() {
        let r = roots();
        let mut l = Links::default();
        l.set("d/out", "/tmp/x");
        l.set("dd", "/tmp/y");
        let moved = l.remove("d");
        assert!(l.get("d/out").is_none() && l.get("dd").is_some());
        l.put_moved("d", "e", moved);
        assert_eq!(l.get("e/out"), Some("/tmp/x"));
        assert!(l.leads_to(&r, "/tmp/x/f") && l.leads_to(&r, "/tmp/y") && !l.leads_to(&r, "/tmp/xy") && !l.leads_to(&r, "e/out"));
        let mut e = Event::new(crate::Channel::Fswatch, crate::Op::Create, 0, 0);
        e.text = Some(format!("moved into the observed tree; {}", crate::bundle::link_note("/tmp/x")));
        assert_eq!(noted_target(&e), Some("/tmp/x"));
    }
}
