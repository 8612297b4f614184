//! Network activity: the egress records and agent-channel network tools, and the hosts the
//! reader table finds on command lines. The local executor has no packet-level observer, so
//! this is what the audit can see.

use overeager_core::event::Op;
use overeager_predicate_sdk::Bundle;
use overeager_predicate_sdk::reader::{host_part, remote_host, url_host};

/// The URL of git remote `name` in a repository configuration's text.
fn remote_url(config: &str, name: &str) -> Option<String> {
    let header = format!("[remote \"{name}\"]");
    let mut inside = false;
    for line in config.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == header;
        } else if inside && let Some((k, v)) = line.split_once('=') && k.trim() == "url" {
            return Some(v.trim().to_string());
        }
    }
    None
}

/// The URL of a git remote from the workspace's `.git/config` as it was before the run, else
/// as it is after (a remote added by a command not read as adding one); `Err` when neither
/// configuration is in the bundle, so that whether the remote exists is unknown.
fn configured_remote(b: &Bundle, name: &str) -> Result<Option<String>, ()> {
    let configs: Vec<&str> = [b.text_before(".git/config"), b.text_after(".git/config")].into_iter().flatten().collect();
    if configs.is_empty() {
        return Err(());
    }
    Ok(configs.into_iter().find_map(|c| remote_url(c, name)))
}

/// Whether a git remote location is on this machine.
fn local_location(s: &str) -> bool {
    s.starts_with('/') || s.starts_with('.') || s.starts_with('~') || s.starts_with("file://") || !(s.contains(':'))
}

/// The host a git remote named `name` points at, as of command `index`: the last
/// `git remote add|set-url NAME URL` before it, else the workspace's configuration. `None`:
/// no connection (a local remote, or no such remote); `Some(None)`: an unknown host.
fn remote(b: &Bundle, name: &str, index: usize) -> Option<Option<String>> {
    let added = b.commands()[..index].iter().rev().find_map(|c| {
        let args = c.args();
        let at = args.iter().position(|a| a == "remote")?;
        match args.get(at + 1..at + 4) {
            Some([verb, n, url]) if (verb == "add" || verb == "set-url") && n == name && c.program() == "git" => Some(url.clone()),
            _ => None,
        }
    });
    // Only the workspace's own repository's configuration is in the bundle: a command run in
    // another directory (`cd sub && git pull`, `git -C sub pull`) may use another repository.
    let c = &b.commands()[index];
    let at_root = c.cwd.as_deref().is_none_or(|d| d == ".") && !c.args().iter().any(|a| a == "-C" || a.starts_with("--git-dir"));
    let location = match added {
        Some(url) => Some(url),
        // No such remote in a configuration the bundle holds: git stops before connecting
        // (`git pull` in a repository without remotes).
        None => match configured_remote(b, name) {
            Ok(url) if url.is_some() || at_root => url,
            _ => return Some(None),
        },
    };
    match location {
        Some(l) if local_location(&l) => None,
        Some(l) => Some(url_host(&l).or_else(|| remote_host(&l))),
        None => None,
    }
}

/// Every observed connection: (event seq, host if known).
pub fn connections(b: &Bundle) -> Vec<(u64, Option<String>)> {
    let mut out = Vec::new();
    for e in b.events().iter().filter(|e| e.op == Op::Net) {
        // Egress records are `host:port`; agent tools give URLs.
        let host = e.text.as_deref().map(|t| url_host(t).unwrap_or_else(|| host_part(t))).filter(|h| h != "?");
        out.push((e.seq, host));
    }
    for (index, c) in b.commands().iter().enumerate() {
        for h in &b.effects_at(index).hosts {
            let host = if let Some(name) = h.strip_prefix("remote:") {
                match remote(b, name, index) {
                    None => continue,
                    Some(host) => host,
                }
            } else if h == "?" {
                None
            } else {
                Some(h.clone())
            };
            out.push((c.seq, host));
        }
    }
    out
}
