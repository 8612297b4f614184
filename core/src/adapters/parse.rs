//! Parsing helpers every agent-stream adapter shares: JSON lines, fields, the events they
//! build, and ISO 8601 times.

use serde_json::Value;

use crate::event::{Channel, Event, Op};
use crate::paths::Roots;

/// The lines of a JSON-lines transcript with their 0-based line numbers: `Some(value)` for a
/// line that parses as JSON, `None` for one that does not. Blank lines are skipped.
pub(crate) fn json_lines(transcript: &str) -> impl Iterator<Item = (u64, Option<Value>)> + '_ {
    transcript.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(i, l)| (i as u64, serde_json::from_str(l).ok()))
}

pub(crate) fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// An `unknown` event that says what was not recognized.
pub(crate) fn unknown(what: String, t: u64, raw: u64) -> Event {
    let mut e = Event::new(Channel::Agent, Op::Unknown, t, raw);
    e.text = Some(what);
    e
}

/// Turns a tool-call event into the record of a call the agent's permission gate refused or
/// did not offer: it did not run.
pub(crate) fn deny(e: &mut Event, reason: &str) {
    e.op = Op::Denied;
    e.ok = Some(false);
    e.exit = None;
    e.text = Some(reason.chars().take(500).collect());
}

/// An agent event with a path, resolved against the agent's working directory.
pub(crate) fn path_event(op: Op, tool: &str, path: Option<&str>, roots: &Roots, cwd: &str, t: u64, raw: u64) -> Event {
    let mut e = Event::new(Channel::Agent, op, t, raw);
    e.tool = Some(tool.to_string());
    e.paths.extend(path.map(|p| roots.logical_from(p, cwd)));
    e
}

/// Finds `<label> N` (e.g. `Exit Code: 2`) in a tool's output text.
pub(crate) fn exit_code_after(text: &str, label: &str) -> Option<i32> {
    let at = text.find(label)?;
    let rest = text[at + label.len()..].trim_start();
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '-')).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Unix microseconds of an RFC 3339 / ISO 8601 time such as `2025-10-10T12:00:00.123Z` or
/// `2024-06-01T12:00:00.123456` (no zone: UTC). `None` if it does not parse.
pub fn iso_us(s: &str) -> Option<u64> {
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-');
    let (y, m, day): (i64, i64, i64) = (d.next()?.parse().ok()?, d.next()?.parse().ok()?, d.next()?.parse().ok()?);
    let (time, offset_s) = match time.find(['Z', '+']).or_else(|| time.rfind('-').filter(|&i| i >= 8)) {
        Some(i) => {
            let zone = &time[i..];
            let off = if zone == "Z" {
                0
            } else {
                let sign = if zone.starts_with('-') { -1 } else { 1 };
                let (hh, mm) = zone[1..].split_once(':').unwrap_or((&zone[1..], "0"));
                sign * (hh.parse::<i64>().ok()? * 3600 + mm.parse::<i64>().ok()? * 60)
            };
            (&time[..i], off)
        }
        None => (time, 0),
    };
    let mut t = time.split(':');
    let (hh, mm): (i64, i64) = (t.next()?.parse().ok()?, t.next()?.parse().ok()?);
    let sec = t.next()?;
    let (whole, frac) = sec.split_once('.').unwrap_or((sec, ""));
    let ss: i64 = whole.parse().ok()?;
    let micros: i64 = format!("{:0<6}", &frac[..frac.len().min(6)]).parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    // Days from the civil date (proleptic Gregorian), after Howard Hinnant's algorithm.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss - offset_s;
    u64::try_from(secs * 1_000_000 + micros).ok()
}

/// ISO 8601 (UTC, microseconds) of a Unix time in microseconds.
pub fn iso8601(t_us: u64) -> String {
    let secs = (t_us / 1_000_000) as i64;
    let micros = t_us % 1_000_000;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // The civil date of a day count: the inverse of the one in `iso_us`.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// A tool call of a tool no adapter names, read from its name and arguments as the scripted
/// model reads a declaration: a `command` is a shell command; a path with contents or with old
/// and new strings is a write; a path under a name that says read or view is a read; a pattern
/// is a search. `None` when nothing says what it does (it stays a plain tool event).
pub(crate) fn tool_call_by_shape(name: &str, input: &Value, roots: &Roots, cwd: &str, t: u64, raw: u64) -> Option<Event> {
    let lower = name.to_lowercase();
    let says = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    let path = ["file_path", "filePath", "filepath", "absolute_path", "path", "dir_path"].iter().find_map(|k| str_field(input, k));
    let has = |keys: &[&str]| keys.iter().any(|k| input.get(k).is_some());
    if let Some(command) = str_field(input, "command").or(str_field(input, "cmd")).filter(|_| path.is_none() && says(&["bash", "shell", "terminal", "exec", "run", "cmd"])) {
        let mut e = Event::new(Channel::Agent, Op::Exec, t, raw);
        e.tool = Some(name.to_string());
        e.command = Some(command.to_string());
        e.cwd = Some(roots.logical(cwd));
        return Some(e);
    }
    if path.is_some() && has(&["content", "contents", "file_text", "old_string", "oldString", "old_str", "new_string", "newString"]) {
        return Some(path_event(Op::Write, name, path, roots, cwd, t, raw));
    }
    if input.get("pattern").is_some() && says(&["grep", "search", "glob", "find"]) {
        let mut e = path_event(Op::Read, name, path.or(Some(".")), roots, cwd, t, raw);
        e.dir = true;
        e.text = str_field(input, "pattern").map(str::to_string);
        return Some(e);
    }
    if path.is_some() && says(&["read", "view", "cat", "list", "ls"]) {
        let mut e = path_event(Op::Read, name, path, roots, cwd, t, raw);
        e.dir = says(&["list", "ls"]);
        return Some(e);
    }
    None
}
