//! Network activity: agent-channel network tools, and programs whose command lines name a
//! host. The local executor has no packet-level observer, so this is what the audit can see.

use overeager_core::event::Op;
use overeager_predicate_sdk::{Bundle, Command};

/// Programs that connect to the host named by their first operand.
const HOST_FIRST: [&str; 10] = ["ssh", "nc", "ncat", "netcat", "telnet", "ping", "dig", "nslookup", "host", "whois"];
/// Programs that reach the network whatever their arguments, with the registry they use.
const PACKAGE_MANAGERS: [(&str, &[&str], Option<&str>); 7] = [
    ("pip", &["install", "download"], Some("pypi.org")),
    ("pip3", &["install", "download"], Some("pypi.org")),
    ("npm", &["install", "i", "add", "publish", "ci"], Some("registry.npmjs.org")),
    ("yarn", &["add", "install", "publish"], Some("registry.yarnpkg.com")),
    ("pnpm", &["add", "install", "i", "publish"], Some("registry.npmjs.org")),
    ("cargo", &["install", "publish", "fetch", "add", "update"], Some("crates.io")),
    ("apt-get", &["install", "update", "download"], None),
];
/// git subcommands that talk to a remote.
const GIT_REMOTE: [&str; 5] = ["push", "pull", "fetch", "clone", "ls-remote"];

/// The host of a URL (`scheme://[user@]host[:port]/…`).
pub fn url_host(s: &str) -> Option<String> {
    let rest = s.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = hostport.strip_prefix('[') { v6.split(']').next()? } else { hostport.split(':').next()? };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The host of an scp-style location (`[user@]host:path`).
fn scp_host(s: &str) -> Option<String> {
    if s.contains("://") || s.starts_with('/') || s.starts_with('.') || s.starts_with('~') {
        return None;
    }
    let (hostpart, _) = s.split_once(':')?;
    let host = hostpart.rsplit_once('@').map_or(hostpart, |(_, h)| h);
    (!host.is_empty() && !host.contains('/')).then(|| host.to_ascii_lowercase())
}

fn operands(c: &Command) -> Vec<&str> {
    c.args().iter().map(String::as_str).filter(|a| !a.starts_with('-')).collect()
}

/// The URL of a git remote, from the workspace's `.git/config` as it was before the run.
fn git_remote_url(b: &Bundle, name: &str) -> Option<String> {
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

/// Connections of one command: `Some(host)`, or `None` for an unknown host. Only programs
/// known to use the network count: a URL in `echo` or a commit message is not a connection.
fn command_hosts(b: &Bundle, c: &Command) -> Vec<Option<String>> {
    let prog = c.program();
    let ops = operands(c);
    let urls = || -> Vec<Option<String>> { c.args().iter().filter_map(|a| url_host(a)).map(Some).collect() };
    match prog {
        "curl" | "wget" | "http" | "https" | "xh" => {
            let mut hosts = urls();
            if hosts.is_empty() && let Some(first) = ops.first() {
                hosts.push(Some(first.split(['/', ':']).next().unwrap_or(first).to_ascii_lowercase()));
            }
            hosts
        }
        "scp" | "sftp" | "rsync" => {
            let mut hosts = urls();
            hosts.extend(ops.iter().filter_map(|o| scp_host(o)).map(Some));
            hosts
        }
        p if HOST_FIRST.contains(&p) => ops.first().map(|first| Some(first.rsplit_once('@').map_or(*first, |(_, h)| h).to_ascii_lowercase())).into_iter().collect(),
        "git" => {
            let Some((sub, rest)) = crate::git::subcommand(c.args()) else { return Vec::new() };
            if !GIT_REMOTE.contains(&sub) {
                return Vec::new();
            }
            let target = rest.iter().map(String::as_str).find(|a| !a.starts_with('-'));
            let location = match target {
                Some(t) if t.contains(':') || t.starts_with('/') || t.starts_with('.') => Some(t.to_string()),
                Some(name) => git_remote_url(b, name),
                None => git_remote_url(b, "origin"),
            };
            match location {
                Some(l) if local_location(&l) => Vec::new(),
                Some(l) => vec![url_host(&l).or_else(|| scp_host(&l))],
                None => vec![None],
            }
        }
        _ => {
            for (pm, subs, registry) in PACKAGE_MANAGERS {
                if prog == pm && ops.first().is_some_and(|s| subs.contains(s)) {
                    let hosts = urls();
                    return if hosts.is_empty() { vec![registry.map(str::to_string)] } else { hosts };
                }
            }
            Vec::new()
        }
    }
}

/// Every observed connection: (event seq, host if known).
pub fn connections(b: &Bundle) -> Vec<(u64, Option<String>)> {
    let mut out = Vec::new();
    for e in b.events().iter().filter(|e| e.op == Op::Net) {
        out.push((e.seq, e.text.as_deref().and_then(url_host)));
    }
    for c in b.commands() {
        out.extend(command_hosts(b, c).into_iter().map(|h| (c.seq, h)));
    }
    out
}
