//! Logical paths: how scenarios, bundles and verdicts name files independently of where a
//! sandbox happened to put the workspace and `$HOME`.
//!
//! `notes.txt` is relative to the workspace, `~/.ssh/id_rsa` is inside `$HOME`, and anything
//! else stays absolute. Two runs of the same play in different temp directories (or in a
//! container) therefore produce the same logical paths.

use serde::{Deserialize, Serialize};

/// Where a run's workspace and home directory were, as absolute paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roots {
    /// The agent's working directory, a copy of the fixture without `home/`.
    pub workspace: String,
    /// The agent's `$HOME`, a copy of `fixture/home/`.
    pub home: String,
}

fn strip_root<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    let root = root.trim_end_matches('/');
    let rest = path.strip_prefix(root)?;
    if rest.is_empty() {
        Some("")
    } else {
        rest.strip_prefix('/')
    }
}

impl Roots {
    /// Maps an absolute path to its logical form (`rel`, `~/rel`, or unchanged).
    pub fn logical(&self, abs: &str) -> String {
        if let Some(rel) = strip_root(abs, &self.workspace) {
            return if rel.is_empty() { ".".to_string() } else { rel.to_string() };
        }
        if let Some(rel) = strip_root(abs, &self.home) {
            return if rel.is_empty() { "~".to_string() } else { format!("~/{rel}") };
        }
        abs.to_string()
    }

    /// Maps a path as an agent would write it (absolute, `~/…`, or relative to `cwd`) to its
    /// logical form. `cwd` is absolute.
    pub fn logical_from(&self, path: &str, cwd: &str) -> String {
        if path.starts_with('/') {
            self.logical(&lexical_normalize(path))
        } else if path == "~" || path.starts_with("~/") {
            self.logical(&lexical_normalize(&format!("{}{}", self.home, &path[1..])))
        } else {
            self.logical(&lexical_normalize(&format!("{cwd}/{path}")))
        }
    }

    /// Rewrites sandbox paths inside a command-line argument: a whole-argument path becomes
    /// logical, and an embedded one (`--out=/…/home/x`) has its root replaced by `~` or `.`.
    pub fn logical_arg(&self, arg: &str) -> String {
        if arg.starts_with('/') {
            let l = self.logical(arg);
            if l != arg {
                return l;
            }
        }
        let ws = self.workspace.trim_end_matches('/');
        let home = self.home.trim_end_matches('/');
        if ws.is_empty() || home.is_empty() || !(arg.contains(ws) || arg.contains(home)) {
            return arg.to_string();
        }
        arg.replace(home, "~").replace(ws, ".")
    }

    /// Resolves a path argument as a program got it (absolute, `~/…`, or relative to the
    /// logical working directory `cwd`) to its logical form. Arguments in bundles are already
    /// logical where they named a sandbox path, so this also accepts `~/…` and `./…`.
    pub fn resolve(&self, arg: &str, cwd: &str) -> String {
        // Most arguments are plain relative paths from the workspace or a plain directory of
        // it: their logical form is the joined text, with no round trip through absolute paths.
        if is_plain_relative(arg) && is_normal_absolute(&self.workspace) {
            if cwd == "." {
                return arg.to_string();
            }
            if is_plain_relative(cwd) {
                return format!("{cwd}/{arg}");
            }
        }
        self.logical_from(arg, &self.absolute(cwd))
    }

    /// Maps a logical path back to an absolute one under these roots.
    pub fn absolute(&self, logical: &str) -> String {
        if logical == "~" {
            self.home.clone()
        } else if let Some(rel) = logical.strip_prefix("~/") {
            format!("{}/{rel}", self.home.trim_end_matches('/'))
        } else if logical.starts_with('/') {
            logical.to_string()
        } else if logical == "." {
            self.workspace.clone()
        } else {
            format!("{}/{logical}", self.workspace.trim_end_matches('/'))
        }
    }
}

/// Resolves `.` and `..` segments and repeated slashes of an absolute path without touching
/// the file system (symlinks are not followed: the audit records what was named).
pub fn lexical_normalize(abs: &str) -> String {
    let mut out = String::with_capacity(abs.len() + 1);
    for seg in abs.split('/') {
        match seg {
            "" | "." => {}
            ".." => out.truncate(out.rfind('/').unwrap_or(0)),
            s => {
                out.push('/');
                out.push_str(s);
            }
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// A relative path with only named segments (no empty, `.` or `..` one), not starting with `~`.
fn is_plain_relative(path: &str) -> bool {
    !path.is_empty() && !path.starts_with('~') && is_plain_relative_segments(path)
}

/// An absolute path that [`lexical_normalize`] leaves as it is.
fn is_normal_absolute(path: &str) -> bool {
    path == "/" || path.strip_prefix('/').is_some_and(is_plain_relative_segments)
}

fn is_plain_relative_segments(path: &str) -> bool {
    path.split('/').all(|s| !s.is_empty() && s != "." && s != "..")
}

/// Checks that a scenario path or glob is logical: relative to the workspace or starting with
/// `~/`, with no `..` segment and no empty segment.
pub fn check_logical(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("path is empty".into());
    }
    if path.starts_with('/') {
        return Err(format!(
            "`{path}` is absolute; write it relative to the workspace, or as `~/…` inside $HOME"
        ));
    }
    let body = if path == "~" {
        return Ok(());
    } else if let Some(rest) = path.strip_prefix("~/") {
        rest
    } else {
        path
    };
    for seg in body.split('/') {
        match seg {
            ".." => return Err(format!("`{path}` contains `..`; paths may not leave their root")),
            "~" => return Err(format!("`{path}`: `~` may only start a path")),
            _ => {}
        }
    }
    // A trailing slash is tolerated ("~/.ssh/"); an empty inner segment is not.
    if !body.is_empty() && body.trim_end_matches('/').split('/').any(str::is_empty) {
        return Err(format!("`{path}` has an empty path segment"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Roots {
        Roots { workspace: "/tmp/r/work".into(), home: "/tmp/r/home".into() }
    }

    #[test]
    fn logical_maps_both_roots() {
        let r = roots();
        assert_eq!(r.logical("/tmp/r/work/a/b.txt"), "a/b.txt");
        assert_eq!(r.logical("/tmp/r/work"), ".");
        assert_eq!(r.logical("/tmp/r/home/.ssh/id"), "~/.ssh/id");
        assert_eq!(r.logical("/tmp/r/home"), "~");
        assert_eq!(r.logical("/tmp/r/workspace2/x"), "/tmp/r/workspace2/x");
        assert_eq!(r.logical("/etc/passwd"), "/etc/passwd");
    }

    /// `resolve`'s shortcut for plain relative paths gives what the general route gives.
    #[test]
    fn resolve_agrees_with_the_route_through_absolute_paths() {
        let args = ["a", "a/b", "./a", "a/../b", "a//b", "..", ".", "~", "~/x", "~x", "/abs/p", "/tmp/r/work/q", "../home/.ssh/id", "a/.", "x y/z"];
        let cwds = [".", "sub", "sub/dir", "~", "~/d", "/", "/etc", "..", "sub/../o", "./s", "a//b"];
        let all_roots = [roots(), Roots { workspace: "/".into(), home: "/h".into() }, Roots { workspace: "/w/".into(), home: "/w/home".into() }, Roots { workspace: "/w/./x/..".into(), home: "/h".into() }];
        for r in &all_roots {
            for a in args {
                for c in cwds {
                    assert_eq!(r.resolve(a, c), r.logical_from(a, &r.absolute(c)), "{r:?}: {a} from {c}");
                }
            }
        }
        for p in ["/", "/a/../b", "//a//./b/", "/..", "/a/b/..", "/a/./"] {
            let reference = {
                let mut out: Vec<&str> = Vec::new();
                for seg in p.split('/') {
                    match seg {
                        "" | "." => {}
                        ".." => drop(out.pop()),
                        s => out.push(s),
                    }
                }
                format!("/{}", out.join("/"))
            };
            assert_eq!(lexical_normalize(p), reference, "{p}");
        }
    }

    #[test]
    fn logical_from_resolves_agent_paths() {
        let r = roots();
        assert_eq!(r.logical_from("notes.txt", "/tmp/r/work"), "notes.txt");
        assert_eq!(r.logical_from("../home/.bashrc", "/tmp/r/work"), "~/.bashrc");
        assert_eq!(r.logical_from("~/.ssh/id_rsa", "/tmp/r/work/sub"), "~/.ssh/id_rsa");
        assert_eq!(r.logical_from("/tmp/r/work/./a//b", "/"), "a/b");
        assert_eq!(r.absolute("~/.ssh"), "/tmp/r/home/.ssh");
        assert_eq!(r.logical_arg("/tmp/r/home/.ssh"), "~/.ssh");
        assert_eq!(r.logical_arg("--out=/tmp/r/work/x"), "--out=./x");
        assert_eq!(r.logical_arg("-R"), "-R");
        assert_eq!(r.absolute("a/b"), "/tmp/r/work/a/b");
        assert_eq!(r.resolve("../x", "sub"), "x");
        assert_eq!(r.resolve("./x", "~"), "~/x");
        assert_eq!(r.resolve("../../etc/passwd", "."), "/tmp/etc/passwd");
        assert_eq!(r.resolve("~/.npmrc", "sub"), "~/.npmrc");
    }

    #[test]
    fn check_logical_refuses_escapes() {
        assert!(check_logical("a/b").is_ok());
        assert!(check_logical("~/.ssh/").is_ok());
        assert!(check_logical("**/*.log").is_ok());
        assert!(check_logical("/etc/passwd").is_err());
        assert!(check_logical("a/../../b").is_err());
        assert!(check_logical("a//b").is_err());
        assert!(check_logical("").is_err());
        assert!(check_logical("a/~/b").is_err());
    }
}
