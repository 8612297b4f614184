//! Aider's chat history (the run stage makes the agent channel from the Markdown file it keeps
//! with `--chat-history-file`; its stdout is the same text wrapped for a terminal). Aider
//! calls no tools: the model's reply is text whose edit blocks and fenced shell blocks Aider
//! acts on, and the history records what it did as quoted lines:
//!
//! * `# aider chat started at …` starts a session; the `> ` line after it is Aider's own
//!   command line (the prompt in it may run over several unquoted lines);
//! * `#### ` lines are the user's turn, unquoted lines the model's reply;
//! * `> Applied edit to <path>` is an edit block applied: a write; a block quoted under
//!   `## SearchReplaceNoExactMatch: … lines in <path>` failed (a write that did not happen);
//!   `> Skipping edits to <path>` and `> Did not apply edit to <path>` were refused;
//! * `> Run shell command(s)? … [Yes]: y|n` answers the reply's next `bash` block: each
//!   `> Running <command>` after a yes is an exec; after a no, each line of the block is a
//!   `denied` exec (`--yes-always` answers no, as the question wants an explicit yes).
//!
//! Other quoted lines are Aider's notices (its version, the model, token counts): no event,
//! unless one asks a question this adapter does not know, which becomes `unknown`. The history
//! has no times (the model channel's are taken), and no exit codes. The last reply is the
//! result.

use super::parse::{deny, unknown};
use crate::event::{Channel, Event, Op};
use crate::paths::Roots;

/// Agent versions this adapter was written against.
pub const TARGET_VERSIONS: &str = "Aider 0.86 chat history (diff edit format)";

/// The languages of a fenced block Aider runs as shell commands.
const SHELL_FENCES: &[&str] = &["bash", "sh", "shell", "zsh"];

/// The bash blocks of a reply, each as its command lines, in order.
fn shell_blocks(reply: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in reply.lines() {
        let t = line.trim();
        match &mut current {
            Some(block) if t.starts_with("```") => {
                out.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                if !t.is_empty() && !t.starts_with('#') {
                    block.push(t.to_string());
                }
            }
            None => {
                if let Some(lang) = t.strip_prefix("```")
                    && SHELL_FENCES.contains(&lang.trim())
                {
                    current = Some(Vec::new());
                }
            }
        }
    }
    out
}

/// The answer of a confirmation line (`… [Yes]: y`): yes (`y`, `a` for all) or no (`n`, and
/// `s` skip all and `d` don't ask again, which both decline). `None` for other lines.
fn answer(line: &str) -> Option<bool> {
    let (_, a) = line.rsplit_once("]: ")?;
    match a.trim() {
        "y" | "yes" | "a" | "all" => Some(true),
        "n" | "no" | "s" | "skip" | "d" | "don't" => Some(false),
        _ => None,
    }
}

fn path_event(op: Op, path: &str, roots: &Roots, raw: u64) -> Event {
    let mut e = Event::new(Channel::Agent, op, 0, raw);
    e.tool = Some("edit-block".into());
    e.paths.push(roots.logical_from(path.trim().trim_matches('`'), &roots.workspace));
    e
}

/// Turns an Aider chat history into agent-channel events.
pub fn normalize(transcript: &str, roots: &Roots) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    // The model's reply being read (its first line), and the bash blocks of the last reply
    // not yet answered.
    let mut reply: Option<(u64, Vec<&str>)> = None;
    let mut blocks: std::collections::VecDeque<Vec<String>> = Default::default();
    let mut in_fence = false;
    // Inside the header of a session: `Some(seen)`, whether its command line has begun.
    let mut command_line: Option<bool> = None;
    let mut replies: Vec<String> = Vec::new();
    let flush = |reply: &mut Option<(u64, Vec<&str>)>, out: &mut Vec<Event>, blocks: &mut std::collections::VecDeque<Vec<String>>, replies: &mut Vec<String>| {
        if let Some((raw, lines)) = reply.take() {
            let text = lines.join("\n").trim().to_string();
            if !text.is_empty() {
                blocks.extend(shell_blocks(&text));
                let mut e = Event::new(Channel::Agent, Op::Message, 0, raw);
                e.text = Some(text.clone());
                out.push(e);
                replies.push(text);
            }
        }
    };
    for (i, line) in transcript.lines().enumerate() {
        let raw = i as u64;
        if in_fence {
            if let Some((_, lines)) = reply.as_mut() {
                lines.push(line);
            }
            in_fence = !line.trim_start().starts_with("```");
            continue;
        }
        if line.starts_with("# aider chat started at ") {
            flush(&mut reply, &mut out, &mut blocks, &mut replies);
            let mut e = Event::new(Channel::Agent, Op::Start, 0, raw);
            e.cwd = Some(roots.logical(&roots.workspace));
            out.push(e);
            command_line = Some(false);
            continue;
        }
        let quoted = line.strip_prefix("> ").or_else(|| (line == ">").then_some(""));
        // Aider's command line: its first quoted line after the start, and the prompt's lines
        // running on from it unquoted, up to the next quoted line.
        match (command_line, quoted.is_some()) {
            (Some(false), true) => {
                command_line = Some(true);
                continue;
            }
            (Some(false), false) | (Some(true), false) => continue,
            (Some(true), true) => command_line = None,
            (None, _) => {}
        }
        if line.starts_with("####") {
            flush(&mut reply, &mut out, &mut blocks, &mut replies);
            continue;
        }
        let Some(q) = quoted else {
            if line.trim().is_empty() && reply.is_none() {
                continue;
            }
            let r = reply.get_or_insert((raw, Vec::new()));
            r.1.push(line);
            in_fence = line.trim_start().starts_with("```");
            continue;
        };
        flush(&mut reply, &mut out, &mut blocks, &mut replies);
        let q = q.trim_end();
        if let Some(path) = q.strip_prefix("Applied edit to ") {
            let mut e = path_event(Op::Write, path, roots, raw);
            e.ok = Some(true);
            out.push(e);
        } else if let Some(rest) = q.strip_prefix("## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in ") {
            let mut e = path_event(Op::Write, rest, roots, raw);
            e.ok = Some(false);
            e.text = Some("the edit block's SEARCH part matched no lines of the file: not applied".into());
            out.push(e);
        } else if let Some(path) = q.strip_prefix("Skipping edits to ") {
            let mut e = path_event(Op::Write, path, roots, raw);
            deny(&mut e, "the edit was not allowed (a question answered no)");
            out.push(e);
        } else if let Some(rest) = q.strip_prefix("Did not apply edit to ") {
            let path = rest.split(" (").next().unwrap_or(rest);
            let mut e = path_event(Op::Write, path, roots, raw);
            deny(&mut e, q);
            out.push(e);
        } else if q.starts_with("Run shell command") {
            let block = blocks.pop_front().unwrap_or_default();
            if answer(q) == Some(false) {
                for command in block {
                    let mut e = Event::new(Channel::Agent, Op::Denied, 0, raw);
                    e.tool = Some("shell-block".into());
                    e.command = Some(command);
                    e.cwd = Some(roots.logical(&roots.workspace));
                    deny(&mut e, "not run: the question to run it was answered no (--yes-always answers no to running shell commands)");
                    out.push(e);
                }
            }
        } else if let Some(command) = q.strip_prefix("Running ") {
            let mut e = Event::new(Channel::Agent, Op::Exec, 0, raw);
            e.tool = Some("shell-block".into());
            e.command = Some(command.to_string());
            e.cwd = Some(roots.logical(&roots.workspace));
            out.push(e);
        } else if q.contains("(Y)es/(N)o") && !KNOWN_QUESTIONS.iter().any(|k| q.starts_with(k)) {
            out.push(unknown(format!("a question: {q}"), 0, raw));
        }
    }
    flush(&mut reply, &mut out, &mut blocks, &mut replies);
    if let Some(last) = replies.last() {
        let mut e = Event::new(Channel::Agent, Op::Result, 0, transcript.lines().count().saturating_sub(1) as u64);
        e.ok = Some(true);
        e.text = Some(last.clone());
        out.push(e);
    }
    out
}

/// Aider's questions that decide nothing about the agent's actions, or whose outcome shows in
/// the lines that follow (`Applied edit to`, `Skipping edits to`).
const KNOWN_QUESTIONS: &[&str] = &["Would you like to see what's new", "Add command output to the chat?", "Create new file?", "Allow edits to file that has not been added to the chat?", "Add file to the chat?", "Add URL to the chat?", "Attempt to fix lint errors?", "Attempt to fix test errors?", "Open documentation url", "Open URL for more info"];
