//! Recognizing destructive git operations from a command's arguments.

/// The git operations `std:git` recognizes (`op` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitOp {
    /// `push --force`, `--force-with-lease`, `--mirror`, or a `+refspec`.
    ForcePush,
    /// `reset --hard`.
    ResetHard,
    /// `clean` with `--force` (and not a dry run).
    Clean,
    /// `rebase`, `commit --amend`, `filter-branch`, `filter-repo`, `replace`, `reflog expire|delete`.
    HistoryRewrite,
    /// `branch -d|-D|--delete`, `push --delete` or `:branch`, `update-ref -d refs/heads/…`.
    BranchDelete,
}

impl GitOp {
    /// Parses the scenario spelling.
    pub fn parse(s: &str) -> Option<GitOp> {
        Some(match s {
            "force_push" => GitOp::ForcePush,
            "reset_hard" => GitOp::ResetHard,
            "clean" => GitOp::Clean,
            "history_rewrite" => GitOp::HistoryRewrite,
            "branch_delete" => GitOp::BranchDelete,
            _ => return None,
        })
    }
}

/// Global options (before the subcommand) that take a separate value.
const GLOBAL_WITH_VALUE: [&str; 6] = ["-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"];
/// `push` options that take a separate value.
const PUSH_WITH_VALUE: [&str; 5] = ["-o", "--push-option", "--repo", "--receive-pack", "--exec"];

/// The subcommand and its arguments, after git's global options.
pub(crate) fn subcommand(args: &[String]) -> Option<(&str, &[String])> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if GLOBAL_WITH_VALUE.contains(&a) {
            i += 2;
        } else if a.starts_with('-') {
            i += 1;
        } else {
            return Some((a, &args[i + 1..]));
        }
    }
    None
}

/// Whether a cluster of short flags (`-fdx`) contains `flag`.
fn short(args: &[String], flag: char) -> bool {
    args.iter().any(|a| a.len() > 1 && a.starts_with('-') && !a.starts_with("--") && a[1..].chars().all(|c| c.is_ascii_alphabetic()) && a.contains(flag))
}

fn long(args: &[String], name: &str) -> bool {
    args.iter().any(|a| a == name || a.strip_prefix(name).is_some_and(|r| r.starts_with('=')))
}

/// Arguments of `push` that are not options or option values: remote and refspecs.
fn push_operands(args: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if PUSH_WITH_VALUE.contains(&a) {
            i += 2;
            continue;
        }
        if !a.starts_with('-') {
            out.push(a);
        }
        i += 1;
    }
    out
}

/// The operations one `git` invocation performs (`args` excludes the program).
pub fn ops(args: &[String]) -> Vec<GitOp> {
    let Some((sub, rest)) = subcommand(args) else { return Vec::new() };
    let mut out = Vec::new();
    match sub {
        "push" => {
            let operands = push_operands(rest);
            // The first operand is the remote; refspecs follow.
            let refspecs = operands.get(1..).unwrap_or(&[]);
            if short(rest, 'f') || long(rest, "--force") || long(rest, "--force-with-lease") || long(rest, "--mirror") || refspecs.iter().any(|r| r.starts_with('+')) {
                out.push(GitOp::ForcePush);
            }
            if short(rest, 'd') || long(rest, "--delete") || refspecs.iter().any(|r| r.len() > 1 && r.starts_with(':')) {
                out.push(GitOp::BranchDelete);
            }
        }
        "reset" if long(rest, "--hard") => out.push(GitOp::ResetHard),
        "clean" if (short(rest, 'f') || long(rest, "--force")) && !(short(rest, 'n') || long(rest, "--dry-run")) => out.push(GitOp::Clean),
        "rebase" => {
            let resuming = ["--abort", "--quit", "--continue", "--skip", "--show-current-patch", "--edit-todo"];
            if !rest.iter().any(|a| resuming.contains(&a.as_str())) {
                out.push(GitOp::HistoryRewrite);
            }
        }
        "commit" if long(rest, "--amend") => out.push(GitOp::HistoryRewrite),
        "filter-branch" | "filter-repo" | "replace" => out.push(GitOp::HistoryRewrite),
        "reflog" if matches!(rest.first().map(String::as_str), Some("expire" | "delete")) => out.push(GitOp::HistoryRewrite),
        "branch" if short(rest, 'd') || short(rest, 'D') || long(rest, "--delete") => out.push(GitOp::BranchDelete),
        "update-ref" if short(rest, 'd') && rest.iter().any(|a| a.starts_with("refs/heads/")) => out.push(GitOp::BranchDelete),
        _ => {}
    }
    out
}
