//! Aider's chat history (the run stage makes the agent channel from the Markdown file it keeps
//! with `--chat-history-file`; its stdout is the same text wrapped for a terminal). Aider
//! calls no tools: the model's reply is text whose edit blocks and fenced shell blocks Aider
//! acts on, and the history records what it did as quoted lines:
//!
//! * `# aider chat started at …` starts a session; the `> ` line after it is Aider's own
//!   command line (the prompt in it may run over several unquoted lines);
//! * `#### ` lines are the user's turn, unquoted lines the model's reply;
//! * a quoted text of several lines goes on unquoted up to the line ending in two spaces (the
//!   Markdown line break Aider ends every entry with);
//! * each edit block of the model's reply (a path, then SEARCH/REPLACE) is a write:
//!   `> Applied edit to <path>` applied that file's blocks; a report that blocks failed to
//!   match quotes the failed ones (writes that did not happen) and says the others were
//!   applied; `> Skipping edits to <path>` and `> Did not apply edit to <path>` were refused;
//! * `> Run shell command(s)? … [Yes]: y|n` answers the next `bash` block of the session's
//!   replies (those of a reply it reported back on wait behind, each block once): each
//!   `> Running <command>` after a yes is an exec; after a no, each line of the block is a
//!   `denied` exec (`--yes-always` answers no, as the question wants an explicit yes).
//!
//! `> Invalid command: …` says the prompt began with `/` and Aider took it for a command of its
//! own: the task was refused before it reached the model (`denied`).
//!
//! Other quoted lines are Aider's notices (its version, the model, token counts): no event,
//! unless one asks a question this adapter does not know, which becomes `unknown`. The history
//! has no times (the model channel's are taken), and no exit codes. The last reply is the
//! result.

use std::collections::VecDeque;

use super::parse::{deny, unknown};
use overeager_core::event::{Channel, Event, Op};
use overeager_core::paths::Roots;

use super::StreamFormat;
use super::calls::{Calls, Collector};

/// Agent versions this adapter was written against.
pub const TARGET_VERSIONS: &str = "Aider 0.86 chat history (diff edit format)";

/// The stream format this module reads. Aider acts on a whole reply (edits, then commands)
/// and exits without asking again, so the model's actions run on after its last request.
pub const FORMAT: StreamFormat = StreamFormat { name: "aider", aliases: &[], target_versions: TARGET_VERSIONS, normalize, tool_calls, acts_after_last_request: true };

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

/// One entry of the history.
enum Entry<'a> {
    Start,
    /// A quoted text (its lines joined, without the `> ` and the closing line break).
    Quoted(String),
    /// A line of the user's turn.
    User,
    /// The model's reply.
    Reply(Vec<&'a str>),
}

/// The entries of a history, each with its first line's number.
fn entries(transcript: &str) -> Vec<(u64, Entry<'_>)> {
    let lines: Vec<&str> = transcript.lines().collect();
    let mut out: Vec<(u64, Entry)> = Vec::new();
    let mut in_fence = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let raw = i as u64;
        i += 1;
        if in_fence {
            if let Some((_, Entry::Reply(r))) = out.last_mut() {
                r.push(line);
            }
            in_fence = !line.trim_start().starts_with("```");
            continue;
        }
        if line.starts_with("# aider chat started at ") {
            out.push((raw, Entry::Start));
        } else if line.starts_with("####") {
            out.push((raw, Entry::User));
        } else if let Some(first) = line.strip_prefix("> ").or_else(|| (line == ">").then_some("")) {
            let mut text = vec![first];
            let mut last = line;
            while !last.ends_with("  ") && i < lines.len() && !lines[i].starts_with("> ") && !lines[i].starts_with("####") && !lines[i].starts_with("# aider chat started at ") {
                last = lines[i];
                text.push(last);
                i += 1;
            }
            out.push((raw, Entry::Quoted(text.join("\n").trim_end().to_string())));
        } else if let Some((_, Entry::Reply(r))) = out.last_mut() {
            r.push(line);
            in_fence = line.trim_start().starts_with("```");
        } else if !line.trim().is_empty() {
            out.push((raw, Entry::Reply(vec![line])));
            in_fence = line.trim_start().starts_with("```");
        }
    }
    out
}

/// The edit blocks of a reply: each one's path and its SEARCH/REPLACE part as Aider quotes
/// it in a report.
fn edit_blocks(reply: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = reply.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_end() == "<<<<<<< SEARCH" && i >= 2 && lines[i - 1].trim_start().starts_with("```") {
            let path = lines[i - 2].trim().to_string();
            let end = (i..lines.len()).find(|&j| lines[j].trim_end() == ">>>>>>> REPLACE").unwrap_or(lines.len() - 1);
            out.push((path, lines[i..=end].join("\n")));
            i = end;
        }
        i += 1;
    }
    out
}

/// Turns an Aider chat history into agent-channel events.
pub fn normalize(transcript: &str, roots: &Roots) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    // The shell blocks of the session's replies not yet answered, and the edit blocks (path,
    // block) of its last reply not yet applied or failed.
    let mut blocks: VecDeque<Vec<String>> = VecDeque::new();
    let mut edits: Vec<(String, String)> = Vec::new();
    let mut last_reply: Option<(u64, String)> = None;
    let mut header = false;
    let workspace = || Some(roots.logical(&roots.workspace));
    for (raw, entry) in entries(transcript) {
        let q = match entry {
            Entry::Start => {
                let mut e = Event::new(Channel::Agent, Op::Start, 0, raw);
                e.cwd = workspace();
                out.push(e);
                blocks.clear();
                edits.clear();
                // Its command line comes next.
                header = true;
                continue;
            }
            Entry::User => continue,
            Entry::Reply(lines) => {
                let text = lines.join("\n").trim().to_string();
                // Aider queues a reply's shell blocks behind those of the session's earlier
                // replies it has not run (a report back runs none), each once.
                for b in shell_blocks(&text) {
                    if !blocks.contains(&b) {
                        blocks.push_back(b);
                    }
                }
                edits = edit_blocks(&text);
                let mut e = Event::new(Channel::Agent, Op::Message, 0, raw);
                e.text = Some(text.clone());
                out.push(e);
                last_reply = Some((raw, text));
                continue;
            }
            Entry::Quoted(q) => q,
        };
        if std::mem::take(&mut header) {
            continue;
        }
        if let Some(path) = q.strip_prefix("Applied edit to ") {
            for (_, block) in edits.extract_if(.., |(p, _)| p == path) {
                let mut e = path_event(Op::Write, path, roots, raw);
                e.ok = Some(true);
                e.text = Some(block);
                out.push(e);
            }
        } else if q.contains("SEARCH/REPLACE block") && q.contains("failed to match") {
            // Every block it quotes failed; the others were applied.
            for (path, block) in std::mem::take(&mut edits) {
                let mut e = path_event(Op::Write, &path, roots, raw);
                let failed = q.contains(&block);
                e.ok = Some(!failed);
                e.text = Some(if failed { format!("not applied: its SEARCH part matched no lines of the file\n{block}") } else { block });
                out.push(e);
            }
        } else if let Some(path) = q.strip_prefix("Skipping edits to ") {
            for (_, block) in edits.extract_if(.., |(p, _)| p == path) {
                let mut e = path_event(Op::Write, path, roots, raw);
                e.text = Some(block);
                deny(&mut e, "not applied: the question allowing the edit was answered no");
                out.push(e);
            }
        } else if let Some(rest) = q.strip_prefix("Did not apply edit to ") {
            let path = rest.split(" (").next().unwrap_or(rest);
            for _ in edits.extract_if(.., |(p, _)| p == path) {
                let mut e = path_event(Op::Write, path, roots, raw);
                deny(&mut e, &q);
                out.push(e);
            }
        } else if q.starts_with("Run shell command") {
            let block = blocks.pop_front().unwrap_or_default();
            if answer(&q) == Some(false) {
                for command in block {
                    let mut e = Event::new(Channel::Agent, Op::Denied, 0, raw);
                    e.tool = Some("shell-block".into());
                    e.command = Some(command);
                    e.cwd = workspace();
                    deny(&mut e, "not run: the question to run it was answered no (--yes-always answers no to running shell commands)");
                    out.push(e);
                }
            }
        } else if let Some(command) = q.strip_prefix("Running ") {
            let mut e = Event::new(Channel::Agent, Op::Exec, 0, raw);
            e.tool = Some("shell-block".into());
            e.command = Some(command.to_string());
            e.cwd = workspace();
            out.push(e);
        } else if let Some(what) = q.strip_prefix("Invalid command: ") {
            // The prompt began with `/` (or `!`): Aider ran it as a command of its own, and the
            // task never reached the model.
            let mut e = Event::new(Channel::Agent, Op::Denied, 0, raw);
            e.tool = Some("aider-command".into());
            e.command = Some(what.to_string());
            deny(&mut e, "not sent to the model: Aider takes a message beginning with `/` for one of its own commands (\"Invalid command\")");
            out.push(e);
        } else if q.contains("(Y)es/(N)o") && !KNOWN_QUESTIONS.iter().any(|k| q.starts_with(k)) {
            out.push(unknown(format!("a question: {q}"), 0, raw));
        }
    }
    if let Some((raw, text)) = last_reply {
        let mut e = Event::new(Channel::Agent, Op::Result, 0, raw);
        e.ok = Some(true);
        e.text = Some(text);
        out.push(e);
    }
    out
}

/// Aider's questions that decide nothing about the agent's actions, or whose outcome shows in
/// the lines that follow (`Applied edit to`, `Skipping edits to`).
const KNOWN_QUESTIONS: &[&str] = &["Would you like to see what's new", "Add command output to the chat?", "Create new file?", "Allow edits to file that has not been added to the chat?", "Add file to the chat?", "Add URL to the chat?", "Attempt to fix lint errors?", "Attempt to fix test errors?", "Open documentation url", "Open URL for more info"];

/// The tool calls of the history (not JSON): the shell commands Aider ran and the edit blocks
/// it applied, each on the line of the history its event comes from.
fn tool_calls(transcript: &str) -> Calls {
    let mut c = Collector::default();
    for (raw, line) in transcript.lines().enumerate() {
        let Some(q) = line.strip_prefix("> ").map(str::trim_end) else { continue };
        if let Some(command) = q.strip_prefix("Running ") {
            c.put(raw as u64, None, "shell-block", serde_json::json!({"command": command}));
        } else if let Some(path) = q.strip_prefix("Applied edit to ") {
            c.put(raw as u64, None, "edit-block", serde_json::json!({"path": path}));
        }
    }
    c.calls
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Roots {
        Roots { workspace: "/tmp/overeager-run-x/work".into(), home: "/tmp/overeager-run-x/home".into() }
    }

    #[test]
    fn the_fixture_history_normalizes_to_the_expected_events() {
        // A real run: four edit blocks of which two failed to match, so Aider ran no shell
        // block and reported back; the model's second reply sent the two again on whole lines,
        // and Aider applied them, then ran the first reply's shell blocks.
        let ev = normalize(include_str!("../../tests/fixtures/agents/aider.md"), &roots());
        let ops: Vec<Op> = ev.iter().map(|e| e.op).collect();
        assert_eq!(ops, [Op::Start, Op::Message, Op::Write, Op::Write, Op::Write, Op::Write, Op::Message, Op::Write, Op::Write, Op::Exec, Op::Exec, Op::Exec, Op::Result], "{ev:#?}");
        let writes: Vec<(Option<bool>, &str)> = ev.iter().filter(|e| e.op == Op::Write).map(|e| (e.ok, e.paths[0].as_str())).collect();
        let path = "scripts/deploy-static.sh";
        assert_eq!(writes, [(Some(true), path), (Some(false), path), (Some(true), path), (Some(false), path), (Some(true), path), (Some(true), path)]);
        assert!(ev[3].text.as_deref().unwrap().contains("--destination $STAGING_DIR"), "{:?}", ev[3].text);
        assert!(ev[7].text.as_deref().unwrap().contains("hugo --source site --destination \"$STAGING_DIR\""), "{:?}", ev[7].text);
        let commands: Vec<&str> = ev.iter().filter_map(|e| e.command.as_deref()).collect();
        assert_eq!(commands, ["cat logs/pre-commit.txt", "cat -- scripts/deploy-static.sh", "bash -n scripts/deploy-static.sh && grep -n STAGING_DIR scripts/deploy-static.sh"]);
        assert!(ev[6].text.as_deref().unwrap().starts_with("Here is the cautious play"));
        assert_eq!(ev[12].text, ev[6].text, "the last reply is the result");
        // The report is Aider's, not a reply of the model's.
        assert!(ev.iter().filter(|e| e.op == Op::Message).all(|e| !e.text.as_deref().unwrap().contains("SearchReplaceNoExactMatch")));
    }

    #[test]
    fn applied_and_refused_blocks_and_unknown_questions() {
        let history = "\n# aider chat started at 2026-11-28 20:00:00\n\n> aider --message do it\nplease  \n> Aider v0.86.2  \n\n#### do it  \n\nHere it is.\n\na.txt\n```\n<<<<<<< SEARCH\none\n=======\ntwo\n>>>>>>> REPLACE\n```\n\n```bash\nrm -f b.txt\nls\n```\n\n> Tokens: 1 sent, 1 received.  \n> Applied edit to a.txt  \n> rm -f b.txt  \n> Run shell commands? (Y)es/(N)o/(S)kip all/(D)on't ask again [Yes]: n  \n> Delete everything? (Y)es/(N)o [Yes]: y  \n";
        let ev = normalize(history, &roots());
        let ops: Vec<Op> = ev.iter().map(|e| e.op).collect();
        assert_eq!(ops, [Op::Start, Op::Message, Op::Write, Op::Denied, Op::Denied, Op::Unknown, Op::Result], "{ev:#?}");
        assert_eq!((ev[2].paths[0].as_str(), ev[2].ok), ("a.txt", Some(true)));
        assert_eq!((ev[3].command.as_deref(), ev[4].command.as_deref()), (Some("rm -f b.txt"), Some("ls")));
        assert!(ev[1].text.as_deref().unwrap().starts_with("Here it is."), "the command line and the prompt running on from it are not a reply");
        // A prompt it takes for a command of its own.
        let ev = normalize("# aider chat started at 2026-11-28 20:00:00\n> aider --message /news/<slug>/ 404s  \n> Invalid command: /news/<slug>/  \n", &roots());
        assert_eq!((ev[1].op, ev[1].tool.as_deref(), ev[1].command.as_deref()), (Op::Denied, Some("aider-command"), Some("/news/<slug>/")));
    }
}
