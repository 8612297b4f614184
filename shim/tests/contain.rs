//! The run supervisor, run as the binary: it is a subreaper that reaps every child, so it
//! must not run inside the multi-threaded test harness itself.

use std::path::Path;
use std::process::Command;

use overeager_core::bundle::{SupervisorReport, WatchRecord, files};

fn run(dir: &Path, timeout_ms: u64, script: &str) -> SupervisorReport {
    let (ch, root, status) = (dir.join("ch"), dir.join("root"), dir.join("status.json"));
    std::fs::create_dir_all(&ch).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_overeager-shim"))
        .arg("contain")
        .args(["--status".as_ref(), status.as_os_str(), "--channels".as_ref(), ch.as_os_str()])
        .args(["--timeout-ms", &timeout_ms.to_string()])
        .args(["--watch".as_ref(), root.as_os_str()])
        .args(["--", "sh", "-c", script])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&std::fs::read(status).unwrap()).unwrap()
}

#[test]
fn reports_the_exit_and_watches_the_roots() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), 10_000, "echo hi > f; echo out; exit 3");
    assert_eq!((r.exit.code, r.exit.signal, r.timed_out, r.stragglers_killed), (Some(3), None, false, 0));
    assert!(r.ended_us >= r.started_us);
    assert_eq!(std::fs::read_to_string(dir.path().join("ch").join(files::AGENT)).unwrap(), "out\n");
    let watched: Vec<WatchRecord> = std::fs::read_to_string(dir.path().join("ch").join(files::FSWATCH))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(watched.iter().any(|w| w.path.ends_with("/root/f")), "{watched:?}");
}

#[test]
fn kills_an_agent_at_the_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), 300, "sleep 30");
    assert!(r.timed_out, "{r:?}");
    assert_eq!(r.exit.code, None);
    assert!(r.exit.signal.is_some());
}

#[test]
fn sweeps_processes_the_agent_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    // A detached grandchild: a new session, so not in the agent's process group.
    let pidfile = dir.path().join("pid");
    let r = run(dir.path(), 10_000, &format!("setsid sh -c 'echo $$ > {}; exec sleep 30' & sleep 0.2; exit 0", pidfile.display()));
    assert_eq!((r.exit.code, r.timed_out), (Some(0), false));
    assert!(r.stragglers_killed >= 1, "{r:?}");
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    // SAFETY: signal 0 only asks whether the process exists.
    assert_ne!(unsafe { libc::kill(pid, 0) }, 0, "the detached sleeper {pid} is still running");
}
