//! The commands the README and `docs/` show, as a reader sees them: the shell blocks of each
//! page and the `overeager …` commands in them. Both the command line's own check (that they
//! parse, in the binary's unit tests) and the suite's (that they run) read them from here.

use std::path::{Path, PathBuf};

/// The Markdown pages that show commands: the README and every page of `docs/`.
pub fn pages(repo: &Path) -> Vec<PathBuf> {
    let mut out = vec![repo.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo.join("docs")).expect("docs/").map(|e| e.expect("an entry").path()).filter(|p| p.extension().is_some_and(|x| x == "md")).collect();
    docs.sort();
    out.extend(docs);
    out
}

/// A code block of a page: the line its first line is on, its fence's language, its text.
pub struct Block {
    pub line: usize,
    pub lang: String,
    pub text: String,
}

/// Every fenced code block of `text`.
pub fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            match open.take() {
                Some(b) => out.push(b),
                None => open = Some(Block { line: i + 2, lang: lang.trim().to_string(), text: String::new() }),
            }
            continue;
        }
        if let Some(b) = open.as_mut() {
            b.text.push_str(line);
            b.text.push('\n');
        }
    }
    out
}

/// A documented command: its line, the `VAR=value` settings before it, and its words.
pub struct Documented {
    pub line: usize,
    pub env: Vec<(String, String)>,
    pub words: Vec<String>,
}

/// Every `overeager …` command of a page's code blocks ([`block_commands`]).
pub fn commands(text: &str) -> Vec<Documented> {
    blocks(text).iter().flat_map(block_commands).collect()
}

/// The `overeager …` commands of a code block: continuation lines joined, the `VAR=value`
/// settings before a command kept apart, a trailing `# comment` cut.
pub fn block_commands(block: &Block) -> Vec<Documented> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in block.text.lines().enumerate() {
        let (at, joined) = match pending.take() {
            Some((at, so_far)) => (at, format!("{so_far} {}", line.trim())),
            None => (block.line + i, line.trim().to_string()),
        };
        if let Some(open) = joined.strip_suffix('\\') {
            pending = Some((at, open.to_string()));
            continue;
        }
        let Some(words) = shlex::split(&joined) else { continue };
        let settings = words.iter().take_while(|w| w.contains('=') && !w.starts_with('-')).count();
        let env = words[..settings].iter().filter_map(|w| w.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
        // The command ends at a comment, a redirection or the next command of a list.
        let operator = |w: &str| w.starts_with('#') || w.starts_with('>') || w.starts_with("2>") || matches!(w, "<" | "|" | "||" | "&" | "&&" | ";");
        let words: Vec<String> = words[settings..].iter().take_while(|w| !operator(w)).cloned().collect();
        if words.first().map(String::as_str) == Some("overeager") {
            out.push(Documented { line: at, env, words });
        }
    }
    out
}
