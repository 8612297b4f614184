//! Parsing helpers every agent-stream adapter shares: JSON lines, fields, the events they
//! build, and ISO 8601 times.

use serde_json::Value;

use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;

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

pub use overeager_core::time::{iso8601, iso_us};

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
