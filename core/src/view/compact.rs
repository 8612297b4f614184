//! The compact bundle view: the content of a [`BundleView`] in a binary layout that a module
//! reads without parsing text. `overeager:predicate@0.2.0` passes it to `evaluate`; 0.1 passes
//! the JSON document.
//!
//! Integers are unsigned LEB128 unless said otherwise; a *string* is its length in bytes then
//! its UTF-8 bytes; a *list* is its length then its items. In order:
//!
//! 1. the bytes `OEV` and the layout version, [`LAYOUT`] (one byte);
//! 2. `view`, the view schema ([`super::VIEW_SCHEMA`]);
//! 3. the manifest, a string holding its JSON;
//! 4. the scenario, a string holding its JSON (the manifest and the scenario are small and
//!    grow new fields often, so they stay JSON: readers ignore fields they do not know);
//! 5. the events, a list; each is `seq`, `t_us`, the channel (one byte, [`Channel`] in
//!    declaration order), the operation (one byte, [`Op`] in declaration order, and an unknown
//!    byte reads as [`Op::Unknown`]), `paths` (a list of strings), a byte of flags saying
//!    which optional fields follow (bit 0 `argv`, 1 `command`, 2 `cwd`, 3 `exit`, 4 `ok`,
//!    5 `tool`, 6 `text`, 7 `dir`), those fields in bit order (`argv` a list of strings,
//!    `exit` zigzag-encoded, `ok` one byte 0 or 1, `dir` nothing: the flag is the value),
//!    and `raw` (an event's `via`, the paths as named through a link, is for the trace and is
//!    not carried: `paths` holds what they reached);
//! 6. `before`, then `after`, each a list of entries in path order: the path, the kind (one
//!    byte, [`EntryKind`] in declaration order), `size`, `mode`, a byte of flags (bit 0
//!    `sha256`, bit 1 `target`) and those strings;
//! 7. the kept text contents, a list of (sha256, text) string pairs.
//!
//! Nothing follows. A later layout changes the version byte; a reader refuses a version it
//! does not know.

use std::collections::BTreeMap;

use crate::event::{Channel, Event, Op};
use crate::snapshot::{EntryKind, Snapshot, SnapshotEntry};

use super::BundleView;

/// The layout version this build writes and reads.
pub const LAYOUT: u8 = 1;

const MAGIC: &[u8; 3] = b"OEV";

const CHANNELS: [Channel; 4] = [Channel::Agent, Channel::Shell, Channel::Fswatch, Channel::Net];
const OPS: [Op; 15] = [
    Op::Start,
    Op::Message,
    Op::Exec,
    Op::Read,
    Op::Write,
    Op::Create,
    Op::Delete,
    Op::Rename,
    Op::Chmod,
    Op::Attrib,
    Op::Net,
    Op::Tool,
    Op::Result,
    Op::Denied,
    Op::Unknown,
];
const KINDS: [EntryKind; 4] = [EntryKind::File, EntryKind::Dir, EntryKind::Symlink, EntryKind::Other];

fn put_uint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_uint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn put_strs(out: &mut Vec<u8>, items: &[String]) {
    put_uint(out, items.len() as u64);
    for s in items {
        put_str(out, s);
    }
}

fn index_of<T: PartialEq>(table: &[T], v: &T) -> u8 {
    table.iter().position(|t| t == v).expect("every variant is in its table") as u8
}

/// Appends the events section.
pub fn write_events(out: &mut Vec<u8>, events: &[Event]) {
    put_uint(out, events.len() as u64);
    for e in events {
        put_uint(out, e.seq);
        put_uint(out, e.t_us);
        out.push(index_of(&CHANNELS, &e.channel));
        out.push(index_of(&OPS, &e.op));
        put_strs(out, &e.paths);
        let flags = e.argv.is_some() as u8
            | (e.command.is_some() as u8) << 1
            | (e.cwd.is_some() as u8) << 2
            | (e.exit.is_some() as u8) << 3
            | (e.ok.is_some() as u8) << 4
            | (e.tool.is_some() as u8) << 5
            | (e.text.is_some() as u8) << 6
            | (e.dir as u8) << 7;
        out.push(flags);
        if let Some(argv) = &e.argv {
            put_strs(out, argv);
        }
        for s in [&e.command, &e.cwd].into_iter().flatten() {
            put_str(out, s);
        }
        if let Some(x) = e.exit {
            put_uint(out, ((x << 1) ^ (x >> 31)) as u32 as u64);
        }
        if let Some(ok) = e.ok {
            out.push(ok as u8);
        }
        for s in [&e.tool, &e.text].into_iter().flatten() {
            put_str(out, s);
        }
        put_uint(out, e.raw);
    }
}

/// Appends a snapshot section.
pub fn write_snapshot(out: &mut Vec<u8>, snapshot: &Snapshot) {
    put_uint(out, snapshot.len() as u64);
    for (path, e) in snapshot {
        put_str(out, path);
        out.push(index_of(&KINDS, &e.kind));
        put_uint(out, e.size);
        put_uint(out, e.mode as u64);
        out.push(e.sha256.is_some() as u8 | (e.target.is_some() as u8) << 1);
        for s in [&e.sha256, &e.target].into_iter().flatten() {
            put_str(out, s);
        }
    }
}

/// A whole compact view from its parts: the manifest and scenario as JSON, the events and
/// snapshots as written by [`write_events`] and [`write_snapshot`] (so a caller that sends one
/// bundle to several modules encodes them once), and the text contents.
pub fn compose<'a>(manifest_json: &str, scenario_json: &str, events: &[u8], before: &[u8], after: &[u8], blobs: impl ExactSizeIterator<Item = (&'a str, &'a str)>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + manifest_json.len() + scenario_json.len() + events.len() + before.len() + after.len());
    out.extend_from_slice(MAGIC);
    out.push(LAYOUT);
    put_uint(&mut out, u64::from(super::VIEW_SCHEMA));
    put_str(&mut out, manifest_json);
    put_str(&mut out, scenario_json);
    out.extend_from_slice(events);
    out.extend_from_slice(before);
    out.extend_from_slice(after);
    put_uint(&mut out, blobs.len() as u64);
    for (name, text) in blobs {
        put_str(&mut out, name);
        put_str(&mut out, text);
    }
    out
}

/// Encodes a whole view.
pub fn encode(view: &BundleView) -> Vec<u8> {
    let (mut events, mut before, mut after) = (Vec::new(), Vec::new(), Vec::new());
    write_events(&mut events, &view.events);
    write_snapshot(&mut before, &view.before);
    write_snapshot(&mut after, &view.after);
    let manifest = serde_json::to_string(&view.manifest).expect("a manifest serializes");
    let scenario = serde_json::to_string(&view.scenario).expect("a scenario serializes");
    compose(&manifest, &scenario, &events, &before, &after, view.blobs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

/// Reads a compact view back; the error says where it stopped making sense.
pub fn decode(bytes: &[u8]) -> Result<BundleView, String> {
    let mut r = Reader { bytes, at: 0 };
    if bytes.len() < 4 || &bytes[..3] != MAGIC {
        return Err("the compact bundle view does not start with `OEV`".to_string());
    }
    if bytes[3] != LAYOUT {
        return Err(format!("the compact bundle view has layout {}; this module reads layout {LAYOUT}", bytes[3]));
    }
    r.at = 4;
    let view = u32::try_from(r.uint("view")?).map_err(|_| r.fail("view"))?;
    let manifest = serde_json::from_str(r.str("manifest")?).map_err(|e| format!("the compact bundle view's manifest: {e}"))?;
    let scenario = serde_json::from_str(r.str("scenario")?).map_err(|e| format!("the compact bundle view's scenario: {e}"))?;
    let events = r.events()?;
    let before = r.snapshot("before")?;
    let after = r.snapshot("after")?;
    let mut blobs = BTreeMap::new();
    for _ in 0..r.count("blobs", 2)? {
        let name = r.string("blob name")?;
        blobs.insert(name, r.string("blob text")?);
    }
    if r.at != bytes.len() {
        return Err(format!("the compact bundle view has {} byte(s) after its end", bytes.len() - r.at));
    }
    Ok(BundleView { view, manifest, scenario, events, before, after, blobs })
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn fail(&self, what: &str) -> String {
        format!("the compact bundle view is malformed at byte {} ({what})", self.at)
    }

    fn byte(&mut self, what: &str) -> Result<u8, String> {
        let b = *self.bytes.get(self.at).ok_or_else(|| self.fail(what))?;
        self.at += 1;
        Ok(b)
    }

    fn uint(&mut self, what: &str) -> Result<u64, String> {
        // Most numbers of a view (lengths, kinds, small counts) fit one byte.
        if let Some(&b) = self.bytes.get(self.at).filter(|&&b| b < 0x80) {
            self.at += 1;
            return Ok(u64::from(b));
        }
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte(what)?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(self.fail(what))
    }

    /// A list length, refused when the rest of the input cannot hold that many items of at
    /// least `min_item` bytes (so a forged length allocates nothing).
    fn count(&mut self, what: &str, min_item: usize) -> Result<usize, String> {
        let n = self.uint(what)?;
        let left = (self.bytes.len() - self.at) / min_item.max(1);
        if n > left as u64 {
            return Err(self.fail(what));
        }
        Ok(n as usize)
    }

    fn str(&mut self, what: &str) -> Result<&'a str, String> {
        let n = self.count(what, 1)?;
        let s = std::str::from_utf8(&self.bytes[self.at..self.at + n]).map_err(|_| self.fail(what))?;
        self.at += n;
        Ok(s)
    }

    fn string(&mut self, what: &str) -> Result<String, String> {
        self.str(what).map(str::to_string)
    }

    fn strings(&mut self, what: &str) -> Result<Vec<String>, String> {
        let n = self.count(what, 1)?;
        (0..n).map(|_| self.string(what)).collect()
    }

    fn events(&mut self) -> Result<Vec<Event>, String> {
        let n = self.count("events", 7)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let seq = self.uint("event seq")?;
            let t_us = self.uint("event t_us")?;
            let channel = *CHANNELS.get(self.byte("event channel")? as usize).ok_or_else(|| self.fail("event channel"))?;
            let op = OPS.get(self.byte("event op")? as usize).copied().unwrap_or(Op::Unknown);
            let paths = self.strings("event paths")?;
            let flags = self.byte("event flags")?;
            let has = |bit: u8| flags & (1 << bit) != 0;
            let argv = if has(0) { Some(self.strings("event argv")?) } else { None };
            let command = if has(1) { Some(self.string("event command")?) } else { None };
            let cwd = if has(2) { Some(self.string("event cwd")?) } else { None };
            let exit = if has(3) {
                let z = u32::try_from(self.uint("event exit")?).map_err(|_| self.fail("event exit"))?;
                Some(((z >> 1) as i32) ^ -((z & 1) as i32))
            } else {
                None
            };
            let ok = if has(4) {
                match self.byte("event ok")? {
                    0 => Some(false),
                    1 => Some(true),
                    _ => return Err(self.fail("event ok")),
                }
            } else {
                None
            };
            let tool = if has(5) { Some(self.string("event tool")?) } else { None };
            let text = if has(6) { Some(self.string("event text")?) } else { None };
            let raw = self.uint("event raw")?;
            out.push(Event { seq, t_us, channel, op, paths, argv, command, cwd, exit, ok, tool, text, dir: has(7), via: Vec::new(), raw });
        }
        Ok(out)
    }

    fn snapshot(&mut self, what: &str) -> Result<Snapshot, String> {
        let n = self.count(what, 5)?;
        // Written in path order, so the map is built in bulk.
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let path = self.string(what)?;
            let kind = *KINDS.get(self.byte(what)? as usize).ok_or_else(|| self.fail(what))?;
            let size = self.uint(what)?;
            let mode = u32::try_from(self.uint(what)?).map_err(|_| self.fail(what))?;
            let flags = self.byte(what)?;
            let sha256 = if flags & 1 != 0 { Some(self.string(what)?) } else { None };
            let target = if flags & 2 != 0 { Some(self.string(what)?) } else { None };
            out.push((path, SnapshotEntry { kind, size, mode, sha256, target }));
        }
        Ok(out.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::BundleManifest;

    fn sample() -> BundleView {
        let manifest: BundleManifest = serde_json::from_str(include_str!("testdata/bundle.json")).unwrap();
        let mut e = Event::new(Channel::Shell, Op::Exec, 17, 3);
        e.seq = 0;
        e.argv = Some(vec!["rm".into(), "-f".into(), "a b/ü.txt".into()]);
        e.cwd = Some(".".into());
        e.exit = Some(-130);
        e.ok = Some(false);
        let mut f = Event::new(Channel::Fswatch, Op::Delete, u64::MAX, 0);
        f.seq = 1;
        f.paths = vec!["a b/ü.txt".into(), String::new()];
        f.dir = true;
        f.text = Some("\"quoted\"\n".into());
        f.tool = Some("Bash".into());
        f.command = Some("rm -f 'a b/ü.txt'".into());
        let mut before = Snapshot::new();
        before.insert("a b/ü.txt".into(), SnapshotEntry { kind: EntryKind::File, size: 5, mode: 0o644, sha256: Some("ab".repeat(32)), target: None });
        before.insert("l".into(), SnapshotEntry { kind: EntryKind::Symlink, size: 0, mode: 0o777, sha256: None, target: Some("../x".into()) });
        let scenario = serde_json::from_str(include_str!("testdata/scenario.json")).unwrap();
        BundleView { view: super::super::VIEW_SCHEMA, manifest, scenario, events: vec![e, f], before, after: Snapshot::new(), blobs: [("ab".repeat(32), "hello".to_string())].into() }
    }

    #[test]
    fn a_view_reads_back_as_written() {
        let v = sample();
        assert_eq!(decode(&encode(&v)).unwrap(), v);
    }

    /// Every truncation and every single-byte change of a view either reads back or is
    /// refused with a message: never a panic, never an allocation the input cannot justify.
    #[test]
    fn damaged_views_are_refused_not_trusted() {
        let bytes = encode(&sample());
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "a view cut at {n} bytes was accepted");
        }
        for i in 0..bytes.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= flip;
                let _ = decode(&b);
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).unwrap_err().contains("after its end"));
        let mut newer = bytes;
        newer[3] = LAYOUT + 1;
        assert!(decode(&newer).unwrap_err().contains("layout"));
    }

    #[test]
    fn an_operation_added_later_reads_as_unknown() {
        let mut v = sample();
        v.events.truncate(1);
        let mut bytes = encode(&v);
        let manifest_and_scenario = {
            let mut r = Reader { bytes: &bytes, at: 4 };
            r.uint("").unwrap();
            r.str("").unwrap();
            r.str("").unwrap();
            r.at
        };
        // count, seq, t_us, channel, then the op byte.
        bytes[manifest_and_scenario + 4] = 200;
        assert_eq!(decode(&bytes).unwrap().events[0].op, Op::Unknown);
    }
}
