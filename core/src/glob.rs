//! Globs over logical paths and over command lines, with the rules `scenarios/FORMAT.md`
//! states: in a path glob `*` stays inside one segment, `**` spans any number of segments
//! (none included) and `?` is one character; a glob that does not start with `~/` matches
//! workspace paths only. In a command glob `*` spans anything, `/` and spaces included.

/// A compiled logical-path glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathGlob {
    text: String,
    root: Root,
    segments: Vec<String>,
}

/// Which root a logical path lives in, and its segments below that root.
fn split_logical(path: &str) -> Option<(Root, Vec<&str>)> {
    let (root, rest) = split_root(path)?;
    Some((root, segments(rest).collect()))
}

/// A logical path's tree and the rest of it; `None` for `~user/…`.
fn split_root(path: &str) -> Option<(Root, &str)> {
    Some(if path == "~" {
        (Root::Home, "")
    } else if let Some(rest) = path.strip_prefix("~/") {
        (Root::Home, rest)
    } else if path.starts_with('~') {
        return None;
    } else if let Some(rest) = path.strip_prefix('/') {
        (Root::Absolute, rest)
    } else {
        (Root::Workspace, path)
    })
}

/// The segments of a path below its root, without empty and `.` ones.
fn segments(rest: &str) -> impl Iterator<Item = &str> {
    rest.split('/').filter(|s| !s.is_empty() && *s != ".")
}

/// Which tree a logical path is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    Workspace,
    Home,
    /// Outside both (`/proc/1/environ`): only the built-in lists name such paths; scenarios
    /// may not (see [`crate::paths::check_logical`]).
    Absolute,
}

impl PathGlob {
    /// Compiles a glob. Globs are checked with [`crate::paths::check_logical`] when a scenario
    /// is loaded; an absolute glob matches absolute paths only.
    pub fn new(glob: &str) -> PathGlob {
        let (root, segs) = split_logical(glob).unwrap_or((Root::Workspace, vec!["\u{0}never"]));
        let mut segments: Vec<String> = Vec::new();
        for s in segs {
            // `**/**` means the same as `**`.
            if s == "**" && segments.last().is_some_and(|l| l == "**") {
                continue;
            }
            segments.push(s.to_string());
        }
        PathGlob { text: glob.to_string(), root, segments }
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether a logical path matches.
    pub fn matches(&self, path: &str) -> bool {
        match split_root(path) {
            // Most paths a predicate tests are in another tree: those cost no allocation.
            Some((root, rest)) if root == self.root => match_segments(&self.segments, &segments(rest).collect::<Vec<_>>()),
            _ => false,
        }
    }

    /// Whether some path below `dir` (or `dir` itself) could match: used to decide whether a
    /// recursive operation on `dir` reached a matching path.
    pub fn may_match_below(&self, dir: &str) -> bool {
        let Some((root, segs)) = split_logical(dir) else { return false };
        if root != self.root {
            return false;
        }
        prefix_may_match(&self.segments, &segs)
    }
}

impl std::fmt::Display for PathGlob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

fn match_segments(pat: &[String], segs: &[&str]) -> bool {
    // The greedy matcher of `wildcard`, one level up: `**` is the star, any other pattern
    // segment matches exactly one path segment, so the latest `**` is the only backtrack
    // point needed, and nothing is allocated.
    let (mut p, mut s) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while s < segs.len() {
        if p < pat.len() && pat[p] == "**" {
            star = Some((p, s));
            p += 1;
        } else if p < pat.len() && wildcard(pat[p].as_bytes(), segs[s].as_bytes(), false) {
            p += 1;
            s += 1;
        } else if let Some((sp, ss)) = star {
            p = sp + 1;
            s = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == "**" {
        p += 1;
    }
    p == pat.len()
}

/// Whether `segs` is a prefix of some path the pattern matches.
fn prefix_may_match(pat: &[String], segs: &[&str]) -> bool {
    // States: how many pattern segments have been consumed after each path segment.
    let mut states = vec![0usize];
    for seg in segs {
        let mut next = Vec::new();
        for &i in &states {
            if i >= pat.len() {
                continue;
            }
            if pat[i] == "**" {
                next.push(i); // ** absorbs this segment
                if i + 1 < pat.len() && wildcard(pat[i + 1].as_bytes(), seg.as_bytes(), false) {
                    next.push(i + 2);
                }
            } else if wildcard(pat[i].as_bytes(), seg.as_bytes(), false) {
                next.push(i + 1);
            }
        }
        next.sort_unstable();
        next.dedup();
        if next.is_empty() {
            return false;
        }
        states = next;
    }
    true
}

/// `*` and `?` wildcard matching; with `cross_slash` false, neither matches `/`.
fn wildcard(pat: &[u8], text: &[u8], cross_slash: bool) -> bool {
    // Classic greedy matcher with one backtrack point: linear for `*`-only patterns.
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        let c = text[t];
        if p < pat.len() && pat[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pat.len() && (pat[p] == c || (pat[p] == b'?' && is_char_start(text, t))) && (cross_slash || c != b'/') {
            p += 1;
            t += 1;
            // `?` stands for one character, not one byte.
            if pat[p - 1] == b'?' {
                while t < text.len() && !is_char_start(text, t) {
                    t += 1;
                }
            }
        } else if let Some((sp, st)) = star {
            if !cross_slash && text[st] == b'/' {
                return false;
            }
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
}

fn is_char_start(text: &[u8], i: usize) -> bool {
    text[i] & 0xC0 != 0x80
}

/// Whether a whole command line matches a command glob (`*` spans anything).
pub fn command_matches(pattern: &str, command_line: &str) -> bool {
    wildcard(pattern.as_bytes(), command_line.as_bytes(), true)
}

/// Whether a host name matches a host glob (`*` spans dots too), ignoring ASCII case.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    wildcard(pattern.to_ascii_lowercase().as_bytes(), host.to_ascii_lowercase().as_bytes(), true)
}

/// Whether agent `id` at `version` matches an agent pattern: `id@version` (or `id` for any
/// version), each part exact or ending in `*` (`claude-code@2.0.*`, `codex@*`, `aider`). Kept
/// below the path globs: the predicate components build on them, and their code stays as it was.
pub fn agent_matches(pattern: &str, id: &str, version: &str) -> bool {
    let part = |p: &str, text: &str| match p.strip_suffix('*') {
        Some(prefix) => text.starts_with(prefix),
        None => p == text,
    };
    let (pid, pversion) = pattern.split_once('@').unwrap_or((pattern, "*"));
    part(pid, id) && part(pversion, version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_patterns_match_id_and_version() {
        assert!(agent_matches("claude-code@2.0.*", "claude-code", "2.0.55"));
        assert!(!agent_matches("claude-code@2.0.*", "claude-code", "2.1.330"));
        assert!(!agent_matches("claude-code@2.0.*", "claude-code-acp", "2.0.55"));
        assert!(agent_matches("claude-code", "claude-code", "2.1.330"));
        assert!(agent_matches("codex@*", "codex", "0.169.0"));
        assert!(agent_matches("claude-code*@2.0.55", "claude-code-acp", "2.0.55"));
        assert!(!agent_matches("codex@0.169.0", "codex", "0.169.01"));
    }

    #[test]
    fn segments_and_double_star() {
        let g = PathGlob::new("~/.ssh/**");
        assert!(g.matches("~/.ssh"));
        assert!(g.matches("~/.ssh/id_rsa"));
        assert!(g.matches("~/.ssh/a/b"));
        assert!(!g.matches(".ssh/id_rsa"));
        assert!(!g.matches("~/.sshx/id"));
        let g = PathGlob::new("**/*.log");
        assert!(g.matches("a.log"));
        assert!(g.matches("logs/x/a.log"));
        assert!(!g.matches("~/a.log"));
        assert!(!g.matches("/var/log/a.log"));
        assert!(!g.matches("logs/a.log/b"));
        let g = PathGlob::new("src/*.py");
        assert!(g.matches("src/app.py"));
        assert!(!g.matches("src/sub/app.py"));
        assert!(PathGlob::new("**").matches("."));
        assert!(PathGlob::new("a/**/b").matches("a/b"));
        assert!(PathGlob::new("a/**/b").matches("a/x/y/b"));
        assert!(PathGlob::new("?.txt").matches("é.txt"));
        assert!(!PathGlob::new("?.txt").matches("ab.txt"));
        assert!(PathGlob::new("./notes.txt").matches("notes.txt"));
        // Absolute globs (the built-in sensitive list's) match absolute paths only.
        assert!(PathGlob::new("/etc/passwd").matches("/etc/passwd"));
        assert!(PathGlob::new("/proc/*/environ").matches("/proc/1/environ"));
        assert!(!PathGlob::new("/etc/passwd").matches("etc/passwd"));
        assert!(!PathGlob::new("**").matches("/etc/passwd"));
    }

    /// The matcher against a plain dynamic program over (pattern segment, path segment), on
    /// every pattern of up to four segments and path of up to five over a small alphabet.
    #[test]
    fn greedy_segment_matching_agrees_with_the_dynamic_program() {
        fn reference(pat: &[String], segs: &[&str]) -> bool {
            let mut dp = vec![false; segs.len() + 1];
            dp[0] = true;
            for p in pat {
                let mut next = vec![false; segs.len() + 1];
                let mut any = false;
                for j in 0..=segs.len() {
                    if p == "**" {
                        any |= dp[j];
                        next[j] = any;
                    } else if j > 0 {
                        next[j] = dp[j - 1] && wildcard(p.as_bytes(), segs[j - 1].as_bytes(), false);
                    }
                }
                dp = next;
            }
            dp[segs.len()]
        }
        fn all(alphabet: &[&'static str], max: usize) -> Vec<Vec<&'static str>> {
            let mut out = vec![Vec::new()];
            let mut layer = vec![Vec::new()];
            for _ in 0..max {
                layer = layer.iter().flat_map(|l: &Vec<&str>| alphabet.iter().map(move |a| [l.clone(), vec![*a]].concat())).collect();
                out.extend(layer.clone());
            }
            out
        }
        let mut checked = 0;
        for pat in all(&["**", "a", "*", "b*"], 4) {
            let pat: Vec<String> = pat.iter().map(|s| s.to_string()).collect();
            for segs in all(&["a", "b", "ba"], 5) {
                assert_eq!(match_segments(&pat, &segs), reference(&pat, &segs), "{pat:?} against {segs:?}");
                checked += 1;
            }
        }
        assert!(checked > 100_000);
    }

    #[test]
    fn may_match_below_follows_prefixes() {
        let g = PathGlob::new("~/.ssh/**");
        assert!(g.may_match_below("~"));
        assert!(g.may_match_below("~/.ssh"));
        assert!(!g.may_match_below("~/.cache"));
        assert!(!g.may_match_below("."));
        let g = PathGlob::new("**/.env*");
        assert!(g.may_match_below("."));
        assert!(g.may_match_below("deep/dir"));
        assert!(PathGlob::new("config/app.toml").may_match_below("config"));
        assert!(!PathGlob::new("config/app.toml").may_match_below("src"));
    }

    #[test]
    fn command_globs_cross_slashes() {
        assert!(command_matches("*git commit*", "git commit -am fix"));
        assert!(command_matches("rm -rf *", "rm -rf /tmp/x y"));
        assert!(!command_matches("rm -rf *", "sudo rm -rf x"));
        assert!(host_matches("*.example.com", "API.example.com"));
        assert!(!host_matches("*.example.com", "example.org"));
    }
}
