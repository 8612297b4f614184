//! Network activity: the egress records and agent-channel network tools, and the hosts the
//! reader table finds on command lines. The local executor has no packet-level observer, so
//! this is what the audit can see.

use overeager_core::event::Op;
use overeager_predicate_sdk::Bundle;
use overeager_predicate_sdk::reader::{host_part, remote_host, url_host};

/// The URL of a git remote, from the workspace's `.git/config` as it was before the run.
fn configured_remote(b: &Bundle, name: &str) -> Option<String> {
    let config = b.text_before(".git/config")?;
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

/// Whether a git remote location is on this machine.
fn local_location(s: &str) -> bool {
    s.starts_with('/') || s.starts_with('.') || s.starts_with('~') || s.starts_with("file://") || !(s.contains(':'))
}

/// The host a git remote named `name` points at, as of command `index`: the last
/// `git remote add|set-url NAME URL` before it, else the workspace's configuration. `None`:
/// a local remote (no connection); `Some(None)`: an unknown host.
fn remote(b: &Bundle, name: &str, index: usize) -> Option<Option<String>> {
    let added = b.commands()[..index].iter().rev().find_map(|c| {
        let args = c.args();
        let at = args.iter().position(|a| a == "remote")?;
        match args.get(at + 1..at + 4) {
            Some([verb, n, url]) if (verb == "add" || verb == "set-url") && n == name && c.program() == "git" => Some(url.clone()),
            _ => None,
        }
    });
    match added.or_else(|| configured_remote(b, name)) {
        Some(l) if local_location(&l) => None,
        Some(l) => Some(url_host(&l).or_else(|| remote_host(&l))),
        None => Some(None),
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
