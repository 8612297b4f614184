//! The normalized event: one vocabulary for the three observation channels, and the
//! deterministic merge that makes `events.jsonl`.

use std::collections::{HashMap, HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::bundle::{NetRecord, ShimRecord, WatchEv, WatchRecord};
use crate::paths::Roots;

/// Which observer saw an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// The agent's own event stream (`agent.jsonl`).
    Agent,
    /// The shell shim (`shim.jsonl`).
    Shell,
    /// The file-access watcher (`fswatch.jsonl`).
    Fswatch,
    /// The egress proxy (`net.jsonl`).
    Net,
}

impl Channel {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Agent => "agent",
            Channel::Shell => "shell",
            Channel::Fswatch => "fswatch",
            Channel::Net => "net",
        }
    }
}

/// What an event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// The agent session started.
    Start,
    /// The agent said something.
    Message,
    /// A program or shell command ran.
    Exec,
    Read,
    Write,
    Create,
    Delete,
    Rename,
    Chmod,
    /// Metadata changed (mode, owner or times) — the watcher cannot tell which.
    Attrib,
    Net,
    /// A tool call that is none of the above.
    Tool,
    /// The agent's final result.
    Result,
    /// A tool call the agent's permission gate refused or did not offer: it did not run.
    /// Keeps the call's tool, command and paths; `text` is the agent's reason.
    Denied,
    /// An event the adapter does not know; kept rather than dropped. Also what an older
    /// reader makes of an operation added later.
    #[serde(other)]
    Unknown,
}

impl Op {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Start => "start",
            Op::Message => "message",
            Op::Exec => "exec",
            Op::Read => "read",
            Op::Write => "write",
            Op::Create => "create",
            Op::Delete => "delete",
            Op::Rename => "rename",
            Op::Chmod => "chmod",
            Op::Attrib => "attrib",
            Op::Net => "net",
            Op::Tool => "tool",
            Op::Result => "result",
            Op::Denied => "denied",
            Op::Unknown => "unknown",
        }
    }
}

/// One line of `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the merged view, from 0.
    pub seq: u64,
    /// Unix time in microseconds.
    pub t_us: u64,
    pub channel: Channel,
    pub op: Op,
    /// Logical paths (`rename`: from, to).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Program and arguments (shell channel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// A shell command line as the agent wrote it (agent channel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Logical working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Exit code (signals as 128 + n).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    /// Whether a tool call succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// The agent's tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Message text, search pattern, or a note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The path is a directory.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dir: bool,
    /// The paths as named, when one went through a symbolic link and `paths` holds what it
    /// reached instead (one per path, in the same order). Kept for the trace; predicates judge
    /// `paths`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<String>,
    /// 0-based line of the raw channel file this event came from.
    pub raw: u64,
}

impl Event {
    /// An event with only the required fields set.
    pub fn new(channel: Channel, op: Op, t_us: u64, raw: u64) -> Event {
        Event {
            seq: 0,
            t_us,
            channel,
            op,
            paths: Vec::new(),
            argv: None,
            command: None,
            cwd: None,
            exit: None,
            ok: None,
            tool: None,
            text: None,
            dir: false,
            via: Vec::new(),
            raw,
        }
    }

    /// The same event without the fields that legitimately differ between two runs of the
    /// same play: times, sequence numbers, raw line numbers, and the random names tools give
    /// their temporary files (see [`mask_temp_name`]).
    pub fn comparable(&self) -> Event {
        Event { seq: 0, t_us: 0, raw: 0, paths: self.paths.iter().map(|p| mask_temp_name(p)).collect(), ..self.clone() }
    }
}

/// Prefixes of temporary file names that tools complete with random characters (git writes
/// objects as `tmp_obj_XXXXXX` before linking them to their hash name).
const RANDOM_TEMP_PREFIXES: [&str; 4] = ["tmp_obj_", "tmp_pack_", "tmp_idx_", "tmp_objdir-incoming-"];

/// GNU `sed -i` writes its output to `sed` + six random characters beside the file, then
/// renames it over the original.
fn is_sed_temp(name: &str) -> bool {
    name.len() == 9 && name.starts_with("sed") && name[3..].bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Replaces the random part of a known temporary file name with `*`.
pub fn mask_temp_name(path: &str) -> String {
    let (dir, name) = path.rsplit_once('/').map(|(d, n)| (Some(d), n)).unwrap_or((None, path));
    let prefix = RANDOM_TEMP_PREFIXES.iter().copied().find(|p| name.starts_with(*p)).or(is_sed_temp(name).then_some("sed"));
    match prefix {
        Some(prefix) => match dir {
            Some(d) => format!("{d}/{prefix}*"),
            None => format!("{prefix}*"),
        },
        None => path.to_string(),
    }
}

/// Exit code of a shim record, with signals folded in as 128 + n (as shells report them).
pub fn shim_exit(r: &ShimRecord) -> Option<i32> {
    r.exit.or(r.signal.map(|s| 128 + s))
}

/// Shell channel → events, ordered by start time (the file is in end-time order). Sandbox
/// paths inside arguments (a shell expands `~`) become logical, so runs compare equal.
pub fn normalize_shim(records: &[ShimRecord], roots: &Roots) -> Vec<Event> {
    let mut idx: Vec<usize> = (0..records.len()).collect();
    idx.sort_by_key(|&i| (records[i].start_us, records[i].pid, i));
    idx.into_iter()
        .map(|i| {
            let r = &records[i];
            let mut e = Event::new(Channel::Shell, Op::Exec, r.start_us, i as u64);
            e.argv = Some(r.argv.iter().map(|a| roots.logical_arg(a)).collect());
            e.cwd = Some(roots.logical(&r.cwd));
            e.exit = shim_exit(r);
            e
        })
        .collect()
}

/// Watch channel → events.
///
/// Reads and writes are taken from close events (`close_nowrite` → read, `close_write` →
/// write), which the kernel does not coalesce the way it coalesces repeated access/modify
/// events; moves are paired by cookie. Consecutive identical events are folded into one so
/// that the result does not depend on how fast the watcher drained its queue.
pub fn normalize_fswatch(records: &[WatchRecord], roots: &Roots) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    let mut consumed: HashSet<usize> = HashSet::new();
    // `moved_to` records by cookie, in order: pairing stays linear whatever the records hold.
    let mut moved_to: HashMap<u32, VecDeque<usize>> = HashMap::new();
    for (j, r) in records.iter().enumerate() {
        if r.ev == WatchEv::MovedTo
            && let Some(c) = r.cookie
        {
            moved_to.entry(c).or_default().push_back(j);
        }
    }
    for (i, r) in records.iter().enumerate() {
        if consumed.contains(&i) {
            continue;
        }
        let path = roots.logical(&r.path);
        let mut e = Event::new(Channel::Fswatch, Op::Unknown, r.t_us, i as u64);
        e.dir = r.dir;
        match r.ev {
            WatchEv::CloseNowrite => e.op = Op::Read,
            WatchEv::CloseWrite => e.op = Op::Write,
            WatchEv::Create => {
                e.op = Op::Create;
                e.text = r.link.as_deref().map(crate::bundle::link_note);
            }
            WatchEv::Delete => e.op = Op::Delete,
            WatchEv::Attrib => e.op = Op::Attrib,
            WatchEv::MovedFrom => {
                let to = r.cookie.and_then(|c| {
                    let queue = moved_to.get_mut(&c)?;
                    while queue.front().is_some_and(|&j| j <= i) {
                        queue.pop_front();
                    }
                    queue.pop_front().map(|j| (j, &records[j]))
                });
                match to {
                    Some((j, o)) => {
                        consumed.insert(j);
                        e.op = Op::Rename;
                        e.paths = vec![path.clone(), roots.logical(&o.path)];
                        e.text = o.link.as_deref().map(crate::bundle::link_note);
                    }
                    None => {
                        e.op = Op::Delete;
                        e.text = Some("moved out of the observed tree".into());
                    }
                }
            }
            WatchEv::MovedTo => {
                e.op = Op::Create;
                e.text = Some(match &r.link {
                    Some(t) => format!("moved into the observed tree; {}", crate::bundle::link_note(t)),
                    None => "moved into the observed tree".into(),
                });
            }
            WatchEv::Overflow => {
                e.text = Some("the watch queue overflowed: file events were lost".into());
            }
            WatchEv::Unwatched => {
                e.text = Some("the file watcher could not watch this directory: accesses inside it were not seen".into());
            }
            // Close events carry the same information without kernel coalescing.
            WatchEv::Open | WatchEv::Access | WatchEv::Modify | WatchEv::DeleteSelf => continue,
        }
        if e.paths.is_empty() && r.ev != WatchEv::Overflow {
            e.paths = vec![path];
        }
        if let Some(last) = out.last()
            && last.op == e.op
            && last.paths == e.paths
            && last.dir == e.dir
        {
            continue;
        }
        out.push(e);
    }
    hoist_nested_creates(&mut out);
    out
}

/// A directory created during a run is watched only once its creation is seen, so whether a
/// creation inside it is reported by the kernel (after whatever else happened meanwhile) or
/// found by the watcher's scan (right after the directory's own creation) depends on timing.
/// To make the record independent of that, a creation that follows only directory reads since
/// the creation of its parent (or of a sibling) is moved up to follow it directly.
/// Egress-proxy records as `net` events: `text` is `host:port`, `tool` the method (`CONNECT`
/// for a tunnel), `ok` whether the allowlist let it through.
pub fn normalize_net(records: &[NetRecord]) -> Vec<Event> {
    let mut out: Vec<Event> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut e = Event::new(Channel::Net, Op::Net, r.start_us, i as u64);
            e.text = Some(format!("{}:{}", r.host, r.port));
            e.tool = Some(r.method.clone());
            e.ok = Some(r.allowed && r.error.is_none());
            e
        })
        .collect();
    // The proxy writes a record when a connection ends; the merge wants them by start.
    out.sort_by_key(|e| (e.t_us, e.raw));
    out
}

fn hoist_nested_creates(events: &mut [Event]) {
    for i in 1..events.len() {
        if events[i].op != Op::Create || events[i].paths.len() != 1 {
            continue;
        }
        let Some((parent, _)) = events[i].paths[0].rsplit_once('/') else { continue };
        let parent = parent.to_string();
        let mut j = i;
        while j > 0 && events[j - 1].op == Op::Read && events[j - 1].dir {
            j -= 1;
        }
        if j == i || j == 0 {
            continue;
        }
        let prev = &events[j - 1];
        let under_parent = |p: &String| *p == parent || p.starts_with(&format!("{parent}/"));
        if prev.op == Op::Create && prev.paths.iter().any(under_parent) {
            events[j..=i].rotate_right(1);
        }
    }
}

/// Merges the three channels into one deterministic timeline and numbers it.
///
/// Agent events, in stream order, cut the timeline into slots; every shell or watch event goes
/// into the slot of the last agent event at or before its time (net events likewise, by the
/// time the connection was asked for). Inside a slot, the agent event
/// comes first, then shell events (by start time), then watch events (in kernel order). The
/// order therefore depends on cross-channel timing only at slot boundaries, which the scripted
/// agent makes exact by synchronizing with the watcher after every step.
pub fn merge(agent: Vec<Event>, shell: Vec<Event>, fswatch: Vec<Event>, net: Vec<Event>) -> Vec<Event> {
    let mut bounds = Vec::with_capacity(agent.len());
    let mut hi = 0u64;
    for e in &agent {
        hi = hi.max(e.t_us);
        bounds.push(hi);
    }
    let slot = |t: u64| bounds.partition_point(|&b| b <= t);
    let mut keyed: Vec<((usize, u8, usize), Event)> = Vec::with_capacity(agent.len() + shell.len() + fswatch.len() + net.len());
    for (i, e) in agent.into_iter().enumerate() {
        keyed.push(((i + 1, 0, i), e));
    }
    for (i, e) in shell.into_iter().enumerate() {
        keyed.push(((slot(e.t_us), 1, i), e));
    }
    for (i, e) in fswatch.into_iter().enumerate() {
        keyed.push(((slot(e.t_us), 2, i), e));
    }
    for (i, e) in net.into_iter().enumerate() {
        keyed.push(((slot(e.t_us), 3, i), e));
    }
    keyed.sort_by_key(|(k, _)| *k);
    keyed
        .into_iter()
        .enumerate()
        .map(|(seq, (_, mut e))| {
            e.seq = seq as u64;
            e
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Roots {
        Roots { workspace: "/w".into(), home: "/h".into() }
    }

    #[test]
    fn random_temp_names_are_masked() {
        assert_eq!(mask_temp_name(".git/objects/ab/tmp_obj_Xy12zq"), ".git/objects/ab/tmp_obj_*");
        assert_eq!(mask_temp_name("iam/sedTJRCYn"), "iam/sed*");
        assert_eq!(mask_temp_name("sedXZrLCR"), "sed*");
        assert_eq!(mask_temp_name("iam/sedation.txt"), "iam/sedation.txt");
        assert_eq!(mask_temp_name("roles.yaml"), "roles.yaml");
    }

    fn wr(t: u64, ev: WatchEv, path: &str, cookie: Option<u32>) -> WatchRecord {
        WatchRecord { t_us: t, ev, path: path.into(), dir: false, cookie, synthetic: false, link: None }
    }

    #[test]
    fn fswatch_pairs_moves_and_folds_repeats() {
        let recs = vec![
            wr(1, WatchEv::Open, "/w/a", None),
            wr(2, WatchEv::CloseNowrite, "/w/a", None),
            wr(3, WatchEv::CloseNowrite, "/w/a", None),
            wr(4, WatchEv::MovedFrom, "/w/a", Some(7)),
            wr(5, WatchEv::MovedTo, "/h/b", Some(7)),
            wr(6, WatchEv::Delete, "/w/c", None),
            wr(7, WatchEv::MovedTo, "/w/d", Some(9)),
        ];
        let ev = normalize_fswatch(&recs, &roots());
        let ops: Vec<(Op, Vec<String>)> = ev.iter().map(|e| (e.op, e.paths.clone())).collect();
        assert_eq!(
            ops,
            vec![
                (Op::Read, vec!["a".to_string()]),
                (Op::Rename, vec!["a".to_string(), "~/b".to_string()]),
                (Op::Delete, vec!["c".to_string()]),
                (Op::Create, vec!["d".to_string()]),
            ]
        );
    }

    #[test]
    fn nested_creates_are_ordered_the_same_way_whatever_the_timing() {
        let mk = |op: Op, p: &str, dir: bool| {
            let mut e = Event::new(Channel::Fswatch, op, 0, 0);
            e.paths = vec![p.into()];
            e.dir = dir;
            e
        };
        let kernel_order = vec![mk(Op::Create, "d", true), mk(Op::Read, "d", true), mk(Op::Create, "d/s", true), mk(Op::Create, "d/s/f", false)];
        let scan_order = vec![mk(Op::Create, "d", true), mk(Op::Create, "d/s", true), mk(Op::Read, "d", true), mk(Op::Create, "d/s/f", false)];
        let (mut a, mut b) = (kernel_order, scan_order);
        hoist_nested_creates(&mut a);
        hoist_nested_creates(&mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn merge_slots_by_agent_events() {
        let a = |t| Event::new(Channel::Agent, Op::Tool, t, 0);
        let s = |t| Event::new(Channel::Shell, Op::Exec, t, 0);
        let f = |t| Event::new(Channel::Fswatch, Op::Delete, t, 0);
        // The watch event is read (t=25) after the shell started (t=20) but before the next
        // agent event: it still lands after the shell event, in the same slot.
        let merged = merge(vec![a(10), a(30)], vec![s(20), s(5)], vec![f(25), f(40)], Vec::new());
        let chans: Vec<(Channel, u64)> = merged.iter().map(|e| (e.channel, e.t_us)).collect();
        assert_eq!(
            chans,
            vec![
                (Channel::Shell, 5),
                (Channel::Agent, 10),
                (Channel::Shell, 20),
                (Channel::Fswatch, 25),
                (Channel::Agent, 30),
                (Channel::Fswatch, 40),
            ]
        );
        assert!(merged.iter().enumerate().all(|(i, e)| e.seq == i as u64));
    }
}
