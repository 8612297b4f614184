//! The Docker executor against a real engine: verdicts equal the local executor's for every
//! seed × play, a hostile play is contained and recorded, and no container, volume or image
//! is left behind — after success, timeout, or Ctrl-C. Without an engine these tests fail
//! when `CI` is set (scripts/test.sh starts one) and are skipped otherwise.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{ok, overeager, repo, scratch, seeds, shim};
use serde_json::Value;

/// Whether an engine answers, starting one with scripts/docker-engine.sh if none does.
fn engine() -> bool {
    let answers = || Command::new("docker").arg("info").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if answers() {
        return true;
    }
    let _ = Command::new(repo().join("scripts/docker-engine.sh")).status();
    if answers() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "no Docker engine answers and none could be started (CI is set, so this fails rather than skips)");
    eprintln!("skipped: no Docker engine (scripts/docker-engine.sh starts one)");
    false
}

/// Names of the containers, volumes and images labelled as made by process `pid` here.
fn leftovers(pid: u32) -> Vec<String> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let filter = format!("label=overeager.owner={}:{pid}", host.trim());
    let mut found = Vec::new();
    for args in [vec!["ps", "-a", "--format", "container {{.Names}}"], vec!["volume", "ls", "--format", "volume {{.Name}}"], vec!["images", "--format", "image {{.Repository}}:{{.Tag}}"]] {
        let out = Command::new("docker").args(&args).args(["--filter", &filter]).output().unwrap();
        assert!(out.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        found.extend(String::from_utf8_lossy(&out.stdout).lines().map(String::from));
    }
    found
}

/// Runs overeager, returning its output and its pid (the owner its Docker objects name).
fn overeager_pid(args: &[&str]) -> (std::process::Output, u32) {
    let child = Command::new(env!("CARGO_BIN_EXE_overeager")).args(args).current_dir(repo()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    (child.wait_with_output().unwrap(), pid)
}

/// Per scenario, per play: the traps fired, success, and verdict errors.
fn verdicts(executor: &str) -> BTreeMap<String, Value> {
    let (out, pid) = overeager_pid(&["validate", "--executor", executor, "--jobs", "2", "--json", seeds().to_str().unwrap()]);
    // Rejected scenarios exit non-zero; the comparison below is what matters.
    assert!(!out.stdout.is_empty(), "validate --executor {executor} printed nothing: {}", String::from_utf8_lossy(&out.stderr));
    if executor == "docker" {
        assert_eq!(leftovers(pid), Vec::<String>::new(), "validate left Docker objects behind");
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let plays: Vec<Value> = v["plays"].as_array().unwrap().iter().map(|p| serde_json::json!([p["play"], p["fired"], p["success"], p["errors"]])).collect();
            (v["scenario"].as_str().unwrap().to_string(), serde_json::json!({"admitted": v["admitted"], "plays": plays}))
        })
        .collect()
}

#[test]
fn docker_verdicts_equal_local_verdicts_for_every_seed_and_play() {
    if !engine() {
        return;
    }
    let local = verdicts("local");
    let docker = verdicts("docker");
    let n = std::fs::read_dir(seeds()).unwrap().count();
    assert_eq!(local.len(), n);
    assert_eq!(docker.len(), n);
    for (id, l) in &local {
        assert_eq!(l["plays"].as_array().unwrap().len(), 3, "{id}: every play ran locally: {l}");
        assert_eq!(Some(l), docker.get(id), "{id}: local and docker verdicts differ");
    }
}

#[test]
fn a_hostile_play_is_contained_recorded_and_cleaned_up() {
    if !engine() {
        return;
    }
    let dir = scratch("docker-hostile");
    let bundle = dir.join("bundle");
    let scenario = repo().join("server/tests/fixtures/hostile-sandbox");
    let args = ["run", "--scenario", scenario.to_str().unwrap(), "--agent", "scripted:aggressive", "--executor", "docker", "--timeout", "8s", "--json", "--out", bundle.to_str().unwrap()];
    let (out, pid) = overeager_pid(&args);
    // `run` exits 3 for a run that hit its time limit.
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(leftovers(pid), Vec::<String>::new(), "the run left Docker objects behind");

    // Sleeping past the limit: killed and recorded as a timeout.
    assert_eq!(manifest["timed_out"], true, "{manifest}");
    assert_eq!(manifest["executor"]["kind"], "docker");
    assert!(manifest["executor"]["image_digest"].as_str().unwrap().starts_with("sha256:"));
    let records = shim(&bundle);
    let step = |needle: &str| records.iter().find(|r| r.argv.first().map(String::as_str) == Some("sh") && r.argv.iter().any(|a| a.contains(needle))).unwrap_or_else(|| panic!("no shell record for `{needle}`: {records:?}"));
    // Writing outside the workspace: refused by the read-only root, nothing reached this machine.
    assert_ne!(step("/etc/overeager-escape").exit, Some(0));
    assert!(!Path::new("/etc/overeager-escape").exists());
    let agent = std::fs::read_to_string(bundle.join("agent.jsonl")).unwrap();
    assert!(agent.contains("Read-only file system"), "the agent's stream records the refused write");
    // The network call: no route out.
    assert!(records.iter().any(|r| r.argv[0] == "curl" && r.exit.is_some_and(|c| c != 0)), "{records:?}");
    // The memory bomb: killed by the memory limit (SIGKILL), and the run went on.
    let awk = records.iter().find(|r| r.argv[0] == "awk").expect("awk ran");
    assert_eq!(awk.signal, Some(9), "{awk:?}");
    // The fork bomb and the sleep: the step was ended at the time limit.
    assert!(step("exec /usr/lib/overeager/real/sleep").signal.is_some());
    // The trap the play set off is in the bundle like any other.
    let judged = ok(&overeager(&["judge", "--json", bundle.to_str().unwrap()]));
    assert!(judged.contains("netrc-deleted"), "{judged}");
}

#[test]
fn ctrl_c_removes_what_the_run_made() {
    if !engine() {
        return;
    }
    let dir = scratch("docker-interrupt");
    let scenario = repo().join("server/tests/fixtures/hostile-sandbox");
    let mut child = Command::new(env!("CARGO_BIN_EXE_overeager"))
        .args(["run", "--scenario", scenario.to_str().unwrap(), "--agent", "scripted:aggressive", "--executor", "docker", "--timeout", "120s"])
        .arg("--out")
        .arg(dir.join("bundle"))
        .current_dir(repo())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until the run's container exists, then interrupt as a terminal would.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !leftovers(pid).iter().any(|o| o.starts_with("container ")) {
        assert!(Instant::now() < deadline, "the run never created its container");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it was interrupted");
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(leftovers(pid), Vec::<String>::new(), "Ctrl-C left Docker objects behind");
    assert!(!dir.join("bundle").exists(), "an interrupted run leaves no bundle");
}
