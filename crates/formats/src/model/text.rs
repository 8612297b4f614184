//! The scripted model for an agent without tool calling, which reads the model's actions out
//! of the text of its reply: Aider's SEARCH/REPLACE edit blocks and fenced shell blocks.
//!
//! Such an agent acts on a whole reply at once, by rules of its own that a competent model
//! writes for:
//!
//! * it applies every edit block first, then runs the shell blocks in order, each line as a
//!   command of its own in the workspace;
//! * an edit block's SEARCH part must match whole lines of the file, else the block fails;
//!   when any block fails (or the agent finds any other fault it reports back), it runs none
//!   of the shell blocks and sends its report as the next request.
//!
//! So the model writes one reply for the whole play: an edit goes in an edit block when being
//! applied ahead of the shell steps cannot change what it does (no earlier shell step may have
//! changed the file or its directory), everything else as a shell block in the play's order,
//! on one line. When edit blocks failed, the agent keeps the shell blocks it did not run queued
//! (they run after the next reply's edits) and shows the model the files it now has in its
//! chat: the model sends each failed edit again as a block of the whole lines it touches (or,
//! when the file is not shown, with the shell). Like the planner, every answer is a pure
//! function of the play and the request's history.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{sh_quote, shell_command};
use overeager_core::paths::Roots;
use overeager_core::scenario::Step;

/// The text format of an agent's replies (its definition's `reply_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplyFormat {
    /// Aider's `diff` edit format: a file's path, then a fenced `<<<<<<< SEARCH` / `=======` /
    /// `>>>>>>> REPLACE` block; shell commands as fenced `bash` blocks.
    SearchReplace,
}

impl ReplyFormat {
    /// The name definitions use.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplyFormat::SearchReplace => "search-replace",
        }
    }

    /// The format called `name`.
    pub fn parse(name: &str) -> Option<ReplyFormat> {
        (name == "search-replace").then_some(ReplyFormat::SearchReplace)
    }
}

/// Programs that only read (with no output redirection), so running them after the edits
/// instead of before changes nothing an edit does.
const READ_ONLY: &[&str] = &["ls", "cat", "head", "tail", "grep", "egrep", "fgrep", "rg", "wc", "stat", "file", "diff", "cmp", "echo", "printf", "sort", "uniq", "cut", "awk", "du", "df", "pwd", "test", "[", "which", "less", "more", "tree", "sha256sum", "md5sum", "jq", "true", "column", "nl", "tr", "realpath", "basename", "dirname", "id", "whoami", "env", "date", "cd"];

/// Whether a shell step may change files: any program outside [`READ_ONLY`] (or `sed -i`,
/// `find` acting on what it finds, `awk` writing a file), or an output redirection other than
/// to `/dev/null`.
fn may_change(command: &str) -> bool {
    let Some(words) = shlex::split(&command.replace('\n', " ; ")) else { return true };
    let mut first = true;
    for (i, w) in words.iter().enumerate() {
        if matches!(w.as_str(), ";" | "&&" | "||" | "|" | "&" | "(" | ")" | "{" | "}" | "!") || w.ends_with(';') {
            first = true;
            continue;
        }
        // `>f`, `2>>f`, or `>` with its target as the next word.
        let redirect = w.trim_start_matches(|c: char| c.is_ascii_digit() || c == '&');
        if let Some(target) = redirect.strip_prefix('>') {
            let target = target.trim_start_matches('>');
            let target = if target.is_empty() { words.get(i + 1).map_or("", String::as_str) } else { target };
            if !matches!(target, "/dev/null" | "&1" | "&2") {
                return true;
            }
            continue;
        }
        if first {
            if w.contains('=') && !w.starts_with('=') {
                continue;
            }
            first = false;
            let program = w.rsplit('/').next().unwrap_or(w);
            if !READ_ONLY.contains(&program) && !matches!(program, "sed" | "find") {
                return true;
            }
        }
    }
    // The two whose arguments decide: an in-place sed, a find that deletes or runs commands,
    // an awk that writes a file.
    let has = |w: &str| words.iter().any(|x| x == w || x.starts_with(&format!("{w}=")));
    let sed_in_place = words.iter().any(|w| w == "sed") && words.iter().any(|w| w.starts_with("-i") || w == "--in-place");
    sed_in_place || (words.iter().any(|w| w == "find") && (has("-delete") || has("-exec") || has("-execdir"))) || (words.iter().any(|w| w == "awk") && command.contains("print >"))
}

/// Whether a shell step names `path` (the file, or the directory holding it).
fn names(command: &str, path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    let dir = path.rsplit_once('/').map(|(d, _)| d);
    command.contains(file) || dir.is_some_and(|d| command.contains(d))
}

/// A text that cannot go inside an edit block: a fence, or a line the agent reads as one of
/// the block's own markers.
fn unfenceable(text: &str) -> bool {
    text.lines().any(|l| {
        let t = l.trim_end();
        t.starts_with("```") || (t.len() >= 5 && (t.starts_with("<<<<<") || t.starts_with(">>>>>") || t.chars().all(|c| c == '=')))
    })
}

/// How the first reply plays each step: `true` for an edit block.
fn in_edit_blocks(steps: &[Step]) -> Vec<bool> {
    let mut out: Vec<bool> = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let block = match step {
            Step::Edit { path, old, new } => {
                let in_workspace = !path.starts_with('~') && !path.starts_with('/') && !path.split('/').any(|c| c == "..");
                let earlier_by_shell = steps[..i].iter().zip(&out).any(|(s, &in_block)| match s {
                    Step::Sh { command } => may_change(command) && names(command, path),
                    Step::Write { path: p, .. } | Step::Edit { path: p, .. } => !in_block && p == path,
                    Step::Read { .. } | Step::Grep { .. } => false,
                });
                in_workspace && !old.trim().is_empty() && !unfenceable(old) && !unfenceable(new) && !earlier_by_shell
            }
            _ => false,
        };
        out.push(block);
    }
    out
}

fn with_newline(s: &str) -> String {
    if s.ends_with('\n') { s.to_string() } else { format!("{s}\n") }
}

/// The SEARCH/REPLACE part of an edit block, as the agent also quotes it when it fails.
fn search_replace(old: &str, new: &str) -> String {
    format!("<<<<<<< SEARCH\n{}=======\n{}>>>>>>> REPLACE\n", with_newline(old), with_newline(new))
}

/// The edit block of an edit step.
fn edit_block(path: &str, old: &str, new: &str) -> String {
    format!("{path}\n```\n{}```\n", search_replace(old, new))
}

/// A step as one line for a shell block: the agent runs each line as a command of its own,
/// so a command of several lines is passed to `eval` whole, its text rebuilt by `printf`
/// from one quoted line.
fn one_line(step: &Step, roots: &Roots) -> String {
    let command = shell_command(step, roots);
    if !command.contains('\n') {
        return command;
    }
    let format = command.replace('\\', "\\\\").replace('%', "%%").replace('\n', "\\n");
    format!("eval \"$(printf {})\"", sh_quote(&format))
}

fn shell_block(step: &Step, roots: &Roots) -> String {
    format!("```bash\n{}\n```\n", one_line(step, roots))
}

/// The opening line of every reply, which also tells the model's own earlier replies apart
/// from the agent's examples in the history.
fn opening(label: &str) -> String {
    format!("Here is the {label} play, step by step.\n")
}

/// Whether an assistant message is one of the model's own replies (of any play, so that a
/// replay counts them too).
fn is_ours(text: &str) -> bool {
    text.lines().next().is_some_and(|l| l.starts_with("Here is the ") && l.ends_with(" play, step by step."))
}

/// The text of `path` as the agent shows the model the files in its chat: a user message
/// holding the path on a line of its own, then the file fenced (the fence is one the file does
/// not contain). The last such copy.
fn file_in_chat(history: &[(&str, String)], path: &str) -> Option<String> {
    const FENCES: [(&str, &str); 7] = [("```", "```"), ("````", "````"), ("<source>", "</source>"), ("<code>", "</code>"), ("<pre>", "</pre>"), ("<codeblock>", "</codeblock>"), ("<sourcecode>", "</sourcecode>")];
    let key = format!("\n{path}\n");
    history.iter().rev().filter(|(role, _)| *role == "user").find_map(|(_, text)| {
        text.match_indices(&key).find_map(|(k, _)| {
            let rest = &text[k + key.len()..];
            let (fence, _) = rest.split_once('\n')?;
            let (_, close) = FENCES.iter().find(|(open, _)| *open == fence)?;
            let body = &rest[fence.len() + 1..];
            body.find(close).map(|e| body[..e].to_string())
        })
    })
}

/// An edit widened to the whole lines it touches in `content` (at its first occurrence): the
/// SEARCH and REPLACE parts of a block that matches.
fn whole_lines(content: &str, old: &str, new: &str) -> Option<(String, String)> {
    let i = content.find(old)?;
    let start = content[..i].rfind('\n').map_or(0, |k| k + 1);
    let after = i + old.len();
    let end = if old.ends_with('\n') || after == content.len() { after } else { content[after..].find('\n').map_or(content.len(), |k| after + k + 1) };
    Some((content[start..end].to_string(), format!("{}{new}{}", &content[start..i], &content[after..end])))
}

/// The content of the request's messages in order, with their roles.
fn messages(body: &Value) -> Vec<(&str, String)> {
    let text = |c: &Value| match c {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    };
    body.get("messages")
        .and_then(Value::as_array)
        .map(|ms| ms.iter().map(|m| (m.get("role").and_then(Value::as_str).unwrap_or(""), m.get("content").map(text).unwrap_or_default())).collect())
        .unwrap_or_default()
}

/// The model's reply to a request, and which of its own turns this is (0 for the first).
pub fn reply(format: ReplyFormat, steps: &[Step], roots: &Roots, label: &str, body: &Value) -> (usize, String) {
    let ReplyFormat::SearchReplace = format;
    let opening = opening(label);
    let history = messages(body);
    let ours: Vec<usize> = history.iter().enumerate().filter(|(_, (role, text))| *role == "assistant" && is_ours(text)).map(|(i, _)| i).collect();
    let blocks = in_edit_blocks(steps);
    let mut out = opening.clone();
    match ours.as_slice() {
        [] => {
            for (step, &block) in steps.iter().zip(&blocks) {
                out.push('\n');
                out.push_str(&match step {
                    Step::Edit { path, old, new } if block => edit_block(path, old, new),
                    _ => shell_block(step, roots),
                });
            }
        }
        [first] => {
            // The agent reported back instead of running the shell blocks: the edit blocks it
            // quotes failed and the others were applied, unless it could not read the reply's
            // blocks at all (its parse error points at the line with `^^^`). The shell blocks
            // it did not run stay queued, to run after this reply's edits; so the reply
            // is the failed edits, each now matching whole lines of the file as the request
            // shows it (the failure added the file to the chat), or with the shell.
            let reports: String = history[first + 1..].iter().filter(|(role, _)| *role == "user").map(|(_, t)| t.as_str()).collect::<Vec<_>>().join("\n");
            if reports.contains("^^^") {
                out.push_str("\nAll of it again, with the shell:\n");
                for step in steps {
                    out.push('\n');
                    out.push_str(&shell_block(step, roots));
                }
                return (ours.len(), out);
            }
            out.push_str("\nThe edits that did not match, again:\n");
            for (step, &block) in steps.iter().zip(&blocks) {
                let Step::Edit { path, old, new } = step else { continue };
                if !block || !reports.contains(&search_replace(old, new)) {
                    continue;
                }
                out.push('\n');
                match file_in_chat(&history, path).and_then(|content| whole_lines(&content, old, new)) {
                    Some((search, replace)) if !unfenceable(&search) && !unfenceable(&replace) => out.push_str(&edit_block(path, &search, &replace)),
                    _ => out.push_str(&shell_block(step, roots)),
                }
            }
        }
        _ => out.push_str(&format!("\nDone: the {label} play's {} step(s) were sent.\n", steps.len())),
    }
    (ours.len(), out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn roots() -> Roots {
        Roots { workspace: "/w".into(), home: "/h".into() }
    }

    fn sh(c: &str) -> Step {
        Step::Sh { command: c.into() }
    }

    fn edit(p: &str, old: &str, new: &str) -> Step {
        Step::Edit { path: p.into(), old: old.into(), new: new.into() }
    }

    #[test]
    fn edits_widen_to_whole_lines() {
        assert_eq!(whole_lines("a\nb part c\nd", "part", "whole"), Some(("b part c\n".into(), "b whole c\n".into())));
        assert_eq!(whole_lines("a\nend part", "part", "x"), Some(("end part".into(), "end x".into())));
        assert_eq!(whole_lines("x = 1\ny", "x = 1\n", "x = 2\n"), Some(("x = 1\n".into(), "x = 2\n".into())));
        assert_eq!(whole_lines("abc", "zz", "y"), None);
    }

    #[test]
    fn read_only_commands_are_told_apart() {
        for c in ["ls -la alembic/versions", "cat a b | grep -n x > /dev/null 2>&1", "head -n 5 x && wc -l x", "sed -n '1,/<trk>/p' a.gpx", "find . -name '*.py'", "A=1 grep x y"] {
            assert!(!may_change(c), "{c}");
        }
        for c in ["rm -f a", "sed -i 's/a/b/' f", "cat a > b", "find . -delete", "mv a b", "cd d && cp a b", "python x.py", "echo x >> f", "unparsable 'quote"] {
            assert!(may_change(c), "{c}");
        }
    }

    #[test]
    fn an_edit_goes_in_a_block_unless_an_earlier_shell_step_may_have_changed_it() {
        let steps = vec![
            sh("ls src"),
            edit("src/a.py", "x = 1\n", "x = 2\n"),
            sh("rm -f lib/*.py"),
            edit("lib/b.py", "y = 1", "y = 2"),
            edit("~/.bashrc", "a", "b"),
            edit("src/c.md", "```\ncode\n```", "x"),
            edit("src/a.py", "x = 2", "x = 3"),
        ];
        assert_eq!(in_edit_blocks(&steps), [false, true, false, false, false, false, true]);
        // Once an edit of a file goes to the shell, the later ones follow it there.
        let steps = vec![sh("sed -i s/a/b/ f.txt"), edit("f.txt", "b", "c"), edit("f.txt", "c", "d")];
        assert_eq!(in_edit_blocks(&steps), [false, false, false]);
    }

    #[test]
    fn the_first_reply_is_the_whole_play_in_its_order() {
        let steps = vec![sh("ls"), Step::Read { path: "~/.ssh/id_rsa".into() }, edit("a.txt", "one", "two"), Step::Write { path: "d/n.txt".into(), content: "l1\nl2 100%\n".into() }];
        let body = json!({"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "example"}, {"role": "assistant", "content": "example reply"}, {"role": "user", "content": "task"}]});
        let (turn, text) = reply(ReplyFormat::SearchReplace, &steps, &roots(), "cautious", &body);
        assert_eq!(turn, 0);
        let expected = "Here is the cautious play, step by step.\n\n```bash\nls\n```\n\n```bash\ncat -- /h/.ssh/id_rsa\n```\n\na.txt\n```\n<<<<<<< SEARCH\none\n=======\ntwo\n>>>>>>> REPLACE\n```\n\n```bash\neval \"$(printf 'mkdir -p -- d && printf '\\''%%s'\\'' '\\''l1\\nl2 100%%\\n'\\'' > d/n.txt')\"\n```\n";
        assert_eq!(text, expected);
        // The one-line form runs the same command.
        let line = text.lines().find(|l| l.starts_with("eval")).unwrap();
        let dir = std::env::temp_dir().join(format!("oe-text-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = std::process::Command::new("sh").arg("-c").arg(line).current_dir(&dir).status().unwrap();
        assert!(ok.success());
        assert_eq!(std::fs::read_to_string(dir.join("d/n.txt")).unwrap(), "l1\nl2 100%\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn after_a_report_failed_edits_are_sent_again_on_whole_lines_and_then_the_model_is_done() {
        let steps = vec![sh("ls"), edit("a.txt", "one", "two"), edit("b.txt", "part", "whole"), edit("c.txt", "gone", "x")];
        let first = reply(ReplyFormat::SearchReplace, &steps, &roots(), "moderate", &json!({"messages": [{"role": "user", "content": "task"}]})).1;
        let report = "# 2 SEARCH/REPLACE blocks failed to match!\n\n## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in b.txt\n<<<<<<< SEARCH\npart\n=======\nwhole\n>>>>>>> REPLACE\n\n## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in c.txt\n<<<<<<< SEARCH\ngone\n=======\nx\n>>>>>>> REPLACE\n\nThe SEARCH section must exactly match";
        // The files it added to the chat, as it shows them: b.txt, not c.txt.
        let files = "I have *added these files to the chat* so you can go ahead and edit them.\n\nb.txt\n```\nfirst line\nthe part in it\nlast\n```\n";
        let body = json!({"messages": [{"role": "user", "content": files}, {"role": "user", "content": "task"}, {"role": "assistant", "content": first}, {"role": "user", "content": report}]});
        let (turn, text) = reply(ReplyFormat::SearchReplace, &steps, &roots(), "moderate", &body);
        assert_eq!(turn, 1);
        assert!(text.contains("b.txt\n```\n<<<<<<< SEARCH\nthe part in it\n=======\nthe whole in it\n>>>>>>> REPLACE\n```"), "{text}");
        assert!(text.contains("perl") && text.contains("c.txt") && !text.contains("a.txt") && !text.contains("```bash\nls"), "queued shell blocks are not sent again: {text}");
        let body = json!({"messages": [{"role": "assistant", "content": first}, {"role": "user", "content": report}, {"role": "assistant", "content": text}, {"role": "user", "content": "again"}]});
        let (turn, last) = reply(ReplyFormat::SearchReplace, &steps, &roots(), "moderate", &body);
        assert_eq!(turn, 2);
        assert!(!last.contains("```"), "{last}");
    }
}
