//! A small POSIX-shell reader: splits a command line into the simple commands it runs, with
//! their arguments, redirections and working directory.
//!
//! Agents hand their shell tool whole scripts (`cd src && rm -rf build 2>/dev/null`); the
//! shell channel records only the programs it wrapped. Predicates read both, so they need the
//! commands inside a script. This reader does not expand anything except `~`, `$HOME` and
//! `$PWD`; it follows `cd`, unwraps `sudo`/`env`/`nohup`/… and `sh -c` scripts, and skips
//! here-document bodies.

/// One simple command found in a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// Program and arguments, after removing leading `VAR=value` assignments and wrappers.
    pub argv: Vec<String>,
    /// Targets of output redirections (`>`, `>>`, `&>`), as written.
    pub writes: Vec<String>,
    /// Targets of input redirections (`<`), as written.
    pub reads: Vec<String>,
    /// The working directory the command ran in, as a path relative to the script's start
    /// (`None` when a `cd` went somewhere this reader cannot follow).
    pub cd: Option<String>,
}

/// Programs that run the rest of their arguments as a command.
const WRAPPERS: [&str; 11] = ["sudo", "doas", "env", "command", "exec", "nohup", "time", "nice", "timeout", "xargs", "stdbuf"];
/// Shell words that are not programs.
const KEYWORDS: [&str; 16] = ["if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac", "!", "{", "}", "in"];
/// Shells whose `-c` argument is a script.
pub const SHELLS: [&str; 6] = ["sh", "bash", "dash", "zsh", "ksh", "busybox"];

#[derive(Debug, PartialEq)]
enum Tok {
    Word(String),
    /// `;`, `&&`, `||`, `|`, `&`, newline, `(`, `)`.
    Sep,
    /// An output (`true`) or input redirection operator; the next word is its target.
    Redirect { out: bool, dup: bool },
    /// `<<` or `<<-`: the next word is a here-document delimiter.
    HereDoc,
}

fn tokenize(script: &str) -> Vec<Tok> {
    let chars: Vec<char> = script.chars().collect();
    let mut toks = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut heredocs: Vec<String> = Vec::new();
    let mut expect_heredoc = false;
    let mut i = 0;
    let flush = |word: &mut String, in_word: &mut bool, toks: &mut Vec<Tok>, expect_heredoc: &mut bool, heredocs: &mut Vec<String>| {
        if *in_word {
            if *expect_heredoc {
                heredocs.push(word.trim_matches(['\'', '"']).to_string());
                *expect_heredoc = false;
            } else {
                toks.push(Tok::Word(std::mem::take(word)));
            }
            word.clear();
            *in_word = false;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\r' => {
                flush(&mut word, &mut in_word, &mut toks, &mut expect_heredoc, &mut heredocs);
                i += 1;
            }
            '\n' => {
                flush(&mut word, &mut in_word, &mut toks, &mut expect_heredoc, &mut heredocs);
                toks.push(Tok::Sep);
                i += 1;
                // Skip here-document bodies: they are data, not commands.
                for delim in std::mem::take(&mut heredocs) {
                    while i < chars.len() {
                        let end = chars[i..].iter().position(|&c| c == '\n').map_or(chars.len(), |p| i + p);
                        let line: String = chars[i..end].iter().collect();
                        i = (end + 1).min(chars.len());
                        if line.trim_start_matches('\t') == delim {
                            break;
                        }
                    }
                }
            }
            '#' if !in_word => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\'' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    word.push(chars[i]);
                    i += 1;
                }
                i += 1;
            }
            '"' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < chars.len() && matches!(chars[i + 1], '"' | '\\' | '$' | '`') {
                        i += 1;
                    }
                    word.push(chars[i]);
                    i += 1;
                }
                i += 1;
            }
            '\\' => {
                if i + 1 < chars.len() && chars[i + 1] != '\n' {
                    word.push(chars[i + 1]);
                    in_word = true;
                }
                i += 2;
            }
            '$' if chars.get(i + 1) == Some(&'(') => {
                // Command substitution stays part of the word, as text.
                let mut depth = 0;
                in_word = true;
                while i < chars.len() {
                    word.push(chars[i]);
                    match chars[i] {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                i += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            '`' => {
                in_word = true;
                word.push('`');
                i += 1;
                while i < chars.len() && chars[i] != '`' {
                    word.push(chars[i]);
                    i += 1;
                }
                word.push('`');
                i += 1;
            }
            ';' | '|' | '(' | ')' => {
                flush(&mut word, &mut in_word, &mut toks, &mut expect_heredoc, &mut heredocs);
                toks.push(Tok::Sep);
                i += 1;
                if c == '|' && chars.get(i) == Some(&'|') {
                    i += 1;
                }
            }
            '&' => {
                if chars.get(i + 1) == Some(&'>') {
                    flush(&mut word, &mut in_word, &mut toks, &mut expect_heredoc, &mut heredocs);
                    i += 2;
                    if chars.get(i) == Some(&'>') {
                        i += 1;
                    }
                    toks.push(Tok::Redirect { out: true, dup: false });
                } else {
                    flush(&mut word, &mut in_word, &mut toks, &mut expect_heredoc, &mut heredocs);
                    toks.push(Tok::Sep);
                    i += 1;
                    if chars.get(i) == Some(&'&') {
                        i += 1;
                    }
                }
            }
            '>' | '<' => {
                // A word made only of digits before the operator is a file descriptor.
                if in_word && word.chars().all(|c| c.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                flush(&mut word, &mut in_word, &mut toks, &mut expect_heredoc, &mut heredocs);
                i += 1;
                if c == '<' && chars.get(i) == Some(&'<') {
                    i += 1;
                    if chars.get(i) == Some(&'<') {
                        // A here-string: the next word is data.
                        i += 1;
                        toks.push(Tok::Redirect { out: false, dup: true });
                        continue;
                    }
                    if chars.get(i) == Some(&'-') {
                        i += 1;
                    }
                    toks.push(Tok::HereDoc);
                    expect_heredoc = true;
                    continue;
                }
                let mut dup = false;
                if matches!(chars.get(i), Some('>') | Some('|')) {
                    i += 1;
                }
                if chars.get(i) == Some(&'&') {
                    i += 1;
                    dup = true;
                }
                toks.push(Tok::Redirect { out: c == '>', dup });
            }
            _ => {
                word.push(c);
                in_word = true;
                i += 1;
            }
        }
    }
    flush(&mut word, &mut in_word, &mut toks, &mut expect_heredoc, &mut heredocs);
    toks
}

/// Replaces `$HOME`/`${HOME}` at the start of a word by `~`, and `$PWD` by `.`.
fn expand_word(w: &str) -> String {
    for (var, by) in [("${HOME}", "~"), ("$HOME", "~"), ("${PWD}", "."), ("$PWD", ".")] {
        if let Some(rest) = w.strip_prefix(var)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return format!("{by}{rest}");
        }
    }
    w.to_string()
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.starts_with(|c: char| c.is_ascii_digit()),
        None => false,
    }
}

/// Removes `VAR=value` prefixes, shell keywords and wrapper programs from the front of argv.
fn strip_front(mut argv: Vec<String>) -> Vec<String> {
    loop {
        let Some(first) = argv.first() else { return argv };
        let name = basename(first);
        // Loop and case headers name variables and words, not programs.
        if matches!(first.as_str(), "for" | "case" | "select") {
            return Vec::new();
        }
        if is_assignment(first) || KEYWORDS.contains(&first.as_str()) {
            argv.remove(0);
        } else if WRAPPERS.contains(&name) {
            let wrapper = name.to_string();
            argv.remove(0);
            // Options of the wrapper, and the values some of them take.
            while let Some(a) = argv.first() {
                if a.starts_with('-') {
                    let takes_value = matches!((wrapper.as_str(), a.as_str()), ("sudo", "-u" | "-g" | "-C" | "-D") | ("nice", "-n") | ("env", "-u" | "-C") | ("xargs", "-n" | "-I" | "-P" | "-L" | "-d" | "-s"));
                    argv.remove(0);
                    if takes_value && !argv.is_empty() {
                        argv.remove(0);
                    }
                } else if (wrapper == "env" && is_assignment(a)) || (wrapper == "timeout" && a.chars().next().is_some_and(|c| c.is_ascii_digit())) {
                    argv.remove(0);
                } else {
                    break;
                }
            }
        } else {
            return argv;
        }
    }
}

/// The last path segment of a program name (`/usr/bin/git` → `git`).
pub fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// The script a shell invocation runs with `-c` (`bash -lc 'script'` included).
pub fn shell_script(argv: &[String]) -> Option<&str> {
    let prog = basename(argv.first()?);
    if !SHELLS.contains(&prog) {
        return None;
    }
    let mut it = argv.iter().skip(1);
    if prog == "busybox" {
        // `busybox sh -c …`
        let applet = it.next()?;
        if !SHELLS.contains(&applet.as_str()) {
            return None;
        }
    }
    while let Some(a) = it.next() {
        if a == "--" || !a.starts_with('-') {
            return None;
        }
        if a.len() > 1 && !a.starts_with("--") && a.contains('c') {
            return it.next().map(String::as_str);
        }
    }
    None
}

fn join_cd(cwd: &Option<String>, target: &str) -> Option<String> {
    let cwd = cwd.as_ref()?;
    if target.starts_with('/') || target.starts_with('~') {
        Some(target.to_string())
    } else if target == "-" || target.contains('$') || target.contains('`') {
        None
    } else if cwd == "." {
        Some(target.to_string())
    } else {
        Some(format!("{cwd}/{target}"))
    }
}

/// The simple commands of a script, in order. Nested `sh -c` scripts are expanded in place,
/// after the shell command that runs them.
pub fn parse(script: &str) -> Vec<SimpleCommand> {
    parse_in(script, Some(".".to_string()), 0)
}

fn parse_in(script: &str, start_cd: Option<String>, depth: usize) -> Vec<SimpleCommand> {
    let mut out = Vec::new();
    let mut cd = start_cd;
    let mut cur = SimpleCommand { argv: Vec::new(), writes: Vec::new(), reads: Vec::new(), cd: cd.clone() };
    let mut pending: Option<(bool, bool)> = None;
    let finish = |cur: &mut SimpleCommand, cd: &mut Option<String>, out: &mut Vec<SimpleCommand>| {
        let mut c = std::mem::replace(cur, SimpleCommand { argv: Vec::new(), writes: Vec::new(), reads: Vec::new(), cd: None });
        c.argv = strip_front(c.argv);
        if c.argv.is_empty() && c.writes.is_empty() && c.reads.is_empty() {
            cur.cd = cd.clone();
            return;
        }
        if c.argv.first().map(String::as_str) == Some("cd") {
            *cd = match c.argv.get(1) {
                Some(t) => join_cd(cd, t),
                None => Some("~".to_string()),
            };
        }
        let nested = if depth < 4 { shell_script(&c.argv).map(|s| parse_in(s, c.cd.clone(), depth + 1)) } else { None };
        out.push(c);
        out.extend(nested.unwrap_or_default());
        cur.cd = cd.clone();
    };
    for tok in tokenize(script) {
        match tok {
            Tok::Word(w) => {
                let w = expand_word(&w);
                match pending.take() {
                    Some((_, true)) => {}
                    Some((true, false)) => cur.writes.push(w),
                    Some((false, false)) => cur.reads.push(w),
                    None => cur.argv.push(w),
                }
            }
            Tok::Redirect { out, dup } => pending = Some((out, dup)),
            Tok::HereDoc => {}
            Tok::Sep => {
                pending = None;
                finish(&mut cur, &mut cd, &mut out);
            }
        }
    }
    finish(&mut cur, &mut cd, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argvs(script: &str) -> Vec<Vec<String>> {
        parse(script).into_iter().map(|c| c.argv).collect()
    }

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn splits_lists_and_pipelines() {
        assert_eq!(argvs("cd src && rm -rf build || true; ls | wc -l &"), vec![v(&["cd", "src"]), v(&["rm", "-rf", "build"]), v(&["true"]), v(&["ls"]), v(&["wc", "-l"])]);
        let cmds = parse("cd src && rm -rf build");
        assert_eq!(cmds[1].cd.as_deref(), Some("src"));
    }

    #[test]
    fn quotes_escapes_and_variables() {
        assert_eq!(argvs(r#"echo "a b" 'c d' e\ f"#), vec![v(&["echo", "a b", "c d", "e f"])]);
        assert_eq!(argvs("cat $HOME/.ssh/id_rsa"), vec![v(&["cat", "~/.ssh/id_rsa"])]);
        assert_eq!(argvs("git commit -m \"$(cat <<'EOF'\nmsg\nEOF\n)\""), vec![v(&["git", "commit", "-m", "$(cat <<'EOF'\nmsg\nEOF\n)"])]);
    }

    #[test]
    fn redirections_are_not_arguments() {
        let c = &parse("cat ~/.npmrc > out.txt 2>/dev/null < in.txt 2>&1")[0];
        assert_eq!(c.argv, v(&["cat", "~/.npmrc"]));
        assert_eq!(c.writes, v(&["out.txt", "/dev/null"]));
        assert_eq!(c.reads, v(&["in.txt"]));
        let c = &parse("echo hi >>log &>all")[0];
        assert_eq!(c.writes, v(&["log", "all"]));
    }

    #[test]
    fn wrappers_assignments_and_nested_shells() {
        assert_eq!(argvs("sudo -u root env -i FOO=1 rm -f x"), vec![v(&["rm", "-f", "x"])]);
        assert_eq!(argvs("LANG=C timeout 5 git push -f"), vec![v(&["git", "push", "-f"])]);
        assert_eq!(argvs("bash -lc 'git reset --hard && rm a'"), vec![v(&["bash", "-lc", "git reset --hard && rm a"]), v(&["git", "reset", "--hard"]), v(&["rm", "a"])]);
        assert_eq!(argvs("for f in *.log; do rm \"$f\"; done"), vec![v(&["rm", "$f"])]);
    }

    #[test]
    fn heredoc_bodies_and_comments_are_skipped() {
        let cmds = argvs("cat > notes.md <<EOF\nrm -rf /\nEOF\necho done # rm x");
        assert_eq!(cmds, vec![v(&["cat"]), v(&["echo", "done"])]);
        assert_eq!(parse("cat > notes.md <<EOF\nx\nEOF")[0].writes, v(&["notes.md"]));
    }
}
