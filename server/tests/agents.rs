//! The real agent CLIs, installed from the package registries, run headless on the local
//! executor against the built-in scripted model endpoint, through the real audit stack. No
//! internet, no key. When an agent cannot be installed on this machine the test fails if `CI`
//! is set (scripts/test.sh installs them) and is skipped otherwise.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::*;
use overeager_core::bundle::WatchEv;
use overeager_core::{Channel, Event, Op};
use serde_json::Value;

/// Every step kind (shell, in-process read, grep and edit) in the cautious play; deletions
/// and a whole-file write in the aggressive one.
const SCENARIO: &str = "alembic-broken-revision-keep-db";
const DB: &str = "instance/invoicer.db";
const REVISION: &str = "alembic/versions/3c9e1f2a7b44_add_invoice_due_date.py";

/// Installs `agent` into the machine's agent cache (once); `false` means skip.
fn installed(agent: &str) -> bool {
    let out = overeager(&["agent", "install", agent]);
    if out.status.success() {
        return true;
    }
    let msg = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(std::env::var_os("CI").is_none(), "{agent} cannot be installed (CI is set, so this fails rather than skips): {msg}");
    eprintln!("skipping {agent}: {msg}");
    false
}

struct Run {
    dir: PathBuf,
    manifest: Value,
    events: Vec<Event>,
    shell: Vec<String>,
    verdict: Value,
}

fn run_cell(work: &Path, cell: &str, play: &str) -> Run {
    let dir = work.join(format!("{}-{play}", cell.replace(':', "-")));
    let spec = format!("{cell}:scripted-{play}");
    let out = overeager(&["run", "--scenario", seeds().join(SCENARIO).to_str().unwrap(), "--agent", &spec, "--out", dir.to_str().unwrap(), "--timeout", "150s", "--json"]);
    ok(&out);
    let manifest: Value = serde_json::from_slice(&std::fs::read(dir.join("bundle.json")).unwrap()).unwrap();
    let shell = shim(&dir).iter().map(|r| r.argv.join(" ")).collect();
    let judged = ok_or_incomplete(&overeager(&["judge", dir.to_str().unwrap(), "--json"]));
    let verdict: Value = serde_json::from_str(judged.lines().next().unwrap()).unwrap();
    Run { events: events(&dir), dir, manifest, shell, verdict }
}

fn ok_or_incomplete(out: &std::process::Output) -> String {
    assert!(out.status.code() == Some(0), "judge failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fired(r: &Run) -> BTreeSet<String> {
    r.verdict["traps"].as_array().into_iter().flatten().filter_map(|t| t["id"].as_str()).map(str::to_string).collect()
}

fn scripted_fires(play: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(seeds().join(SCENARIO).join("scenario.toml")).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    v["plays"][play]["fires"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect()
}

fn deleted(r: &Run) -> bool {
    strings(&diff(&r.dir)["deleted"]).iter().any(|p| p == DB)
}

/// What every real run must show: the agent's stream parsed with nothing unknown, the model
/// channel kept, the agent's version recorded, the run not timed out.
fn common_checks(r: &Run, version_prefix: &str) {
    let m = &r.manifest;
    assert_eq!(m["timed_out"], false, "{}", r.dir.display());
    assert!(m["agent"]["version"].as_str().unwrap().starts_with(version_prefix), "{m}");
    assert_eq!(m["channels"]["model"], true);
    assert!(m["counts"]["model"].as_u64().unwrap() >= 2, "{m}");
    assert_eq!(m["counts"].get("unknown").and_then(Value::as_u64).unwrap_or(0), 0, "unknown agent events in {}: {:?}", r.dir.display(), r.events.iter().filter(|e| e.op == Op::Unknown).map(|e| e.text.clone()).collect::<Vec<_>>());
    assert!(r.events.iter().any(|e| e.channel == Channel::Agent && e.op == Op::Start), "the stream's start was read");
    assert!(r.dir.join("model.jsonl").is_file());
}

fn shell_ran(r: &Run, needle: &str) -> bool {
    r.shell.iter().any(|c| c.contains(needle))
}

fn watched_read(r: &Run, path: &str) -> bool {
    watch(&r.dir).iter().any(|w| w.path.ends_with(path) && matches!(w.ev, WatchEv::Open | WatchEv::Access | WatchEv::CloseNowrite))
}

fn denied(r: &Run) -> Vec<&Event> {
    r.events.iter().filter(|e| e.op == Op::Denied).collect()
}

#[test]
fn claude_code_every_policy() {
    if !installed("claude-code") {
        return;
    }
    let work = scratch("agents-claude");
    // Permissive: everything runs; the verdict is the scripted play's.
    for play in ["cautious", "aggressive"] {
        let r = run_cell(&work, "claude-code:permissive", play);
        common_checks(&r, "2.0");
        assert_eq!(fired(&r), scripted_fires(play), "{play}: {}", r.verdict);
        assert!(denied(&r).is_empty());
        if play == "cautious" {
            assert_eq!(r.verdict["success"], true, "{}", r.verdict);
            // Read, Grep and Edit run inside the agent: only the watcher sees them.
            assert!(watched_read(&r, REVISION), "the in-process Read reached the watch channel");
            assert!(!shell_ran(&r, "cat"), "no shell was used to read");
            assert!(shell_ran(&r, "ls alembic/versions"));
        } else {
            assert!(shell_ran(&r, "rm -f instance/invoicer.db"), "{:?}", r.shell);
            assert!(deleted(&r));
        }
    }
    // Asking (print mode's default): the shell deletions are refused, recorded as denied, and
    // nothing fires that did not happen.
    let r = run_cell(&work, "claude-code:ask", "aggressive");
    common_checks(&r, "2.0");
    assert!(!denied(&r).is_empty(), "refusals are events");
    assert!(!deleted(&r));
    assert!(!fired(&r).contains("database-deleted"), "{}", r.verdict);
    // Accept-edits: the Write runs, the rm is refused.
    let r = run_cell(&work, "claude-code:accept-edits", "aggressive");
    common_checks(&r, "2.0");
    assert!(!deleted(&r));
    assert!(strings(&diff(&r.dir)["created"]).iter().any(|p| p == "alembic/versions/0001_initial.py"), "{}", diff(&r.dir));
}
