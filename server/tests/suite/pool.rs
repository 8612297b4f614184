//! One experiment over two real Docker engines on this machine (the default one, and a second
//! started by scripts/docker-engine-second.sh with its own data root and bridge, reached over
//! loopback TCP with TLS client certificates): every run done once, spread over both, with the
//! local executor's verdicts; and an engine stopped mid-experiment loses no run and duplicates
//! none. Without the engines these tests fail when `CI` is set and are skipped otherwise.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{ok, overeager, repo, seeds};

const SECOND: &str = "tcp://127.0.0.1:23760";
const SECOND_SOCKET: &str = "unix:///run/overeager-docker2/docker.sock";
const FIRST: &str = "unix:///var/run/docker.sock";
/// The second engine's client certificates (machine-wide, as the engine is).
const SECOND_TLS: &str = "/var/lib/overeager-docker2/tls";

/// The tests here stop and start the second engine: one at a time.
static ENGINES: Mutex<()> = Mutex::new(());

fn script(args: &[&str]) -> bool {
    Command::new(repo().join(args[0])).args(&args[1..]).stdout(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Whether both engines answer, starting them if need be.
fn engines() -> bool {
    let up = script(&["scripts/docker-engine.sh"]) && script(&["scripts/docker-engine-second.sh", "start"]);
    if !up {
        assert!(std::env::var_os("CI").is_none(), "the two Docker engines could not be started (CI is set, so this fails rather than skips)");
        eprintln!("skipped: two Docker engines are needed (scripts/docker-engine.sh, scripts/docker-engine-second.sh)");
    }
    up
}

/// A plan over the first four seeds, both scripted plays and both variants, on `executor`;
/// with `pool`, over both engines, two runs at a time each.
fn plan(dir: &Path, id: &str, replicates: u32, pool: bool) -> PathBuf {
    let set = dir.join("s");
    if !set.exists() {
        std::fs::create_dir_all(&set).unwrap();
        let mut names: Vec<_> = std::fs::read_dir(seeds()).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        for n in names.iter().take(4) {
            common::copy_tree(&seeds().join(n), &set.join(n));
        }
    }
    let tls = Path::new(SECOND_TLS);
    let (executor, hosts) = if pool {
        ("docker", format!("\n[docker]\nhosts = [{{ url = \"{FIRST}\", parallelism = 2 }}, {{ url = \"{SECOND}\", tls = {:?}, parallelism = 2 }}]\n", tls.display().to_string()))
    } else {
        ("local", String::new())
    };
    let text = format!(
        "id = \"{id}\"\nscenarios = \"s\"\nexecutor = \"{executor}\"\nreplicates = {replicates}\nparallelism = 2\ntimeout = \"60s\"\n\n[[agent]]\nagent = \"scripted:cautious\"\n\n[[agent]]\nagent = \"scripted:aggressive\"\n{hosts}"
    );
    let path = dir.join(format!("{id}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Per run cell (framework, model, scenario, variant, replicate): (status, host, attempts,
/// fired traps, success).
type Runs = BTreeMap<(String, String, String, String, i64), (String, Option<String>, i64, Option<String>, Option<bool>)>;

fn runs(db: &Path, experiment: &str) -> Runs {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut stmt = c
        .prepare(
            "SELECT r.framework, r.model, r.scenario_hash, r.variant, r.replicate, r.status, r.host, r.attempts, v.traps, v.success
             FROM runs r LEFT JOIN verdicts v ON v.run = r.id WHERE r.experiment = ?1",
        )
        .unwrap();
    stmt.query_map([experiment], |r| Ok(((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?), (r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?))))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn done_on(db: &Path, experiment: &str, host: &str) -> i64 {
    let Ok(c) = rusqlite::Connection::open(db) else { return 0 };
    c.query_row("SELECT COUNT(*) FROM runs WHERE experiment = ?1 AND host = ?2 AND status = 'done'", [experiment, host], |r| r.get(0)).unwrap_or(0)
}

/// Removes what a stopped engine left behind of this test's runs.
fn prune_second() {
    let out = Command::new(env!("CARGO_BIN_EXE_overeager")).args(["docker", "prune"]).env("DOCKER_HOST", SECOND_SOCKET).output().unwrap();
    ok(&out);
}

#[test]
fn an_experiment_spreads_over_two_engines_with_the_local_executors_verdicts() {
    let _one = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    if !engines() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    let db_s = db.to_str().unwrap();
    let pooled = plan(dir.path(), "pooled", 1, true);
    let out = overeager(&["experiment", "run", pooled.to_str().unwrap(), "--db", db_s, "--json"]);
    let summary: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!((summary["executed"].as_u64(), summary["failed"].as_u64(), summary["left_pending"].as_u64()), (Some(16), Some(0), Some(0)), "{summary}");
    let local = plan(dir.path(), "local", 1, false);
    ok(&overeager(&["experiment", "run", local.to_str().unwrap(), "--db", db_s, "--json"]));

    let (p, l) = (runs(&db, "pooled"), runs(&db, "local"));
    assert_eq!(p.len(), 16);
    let per_host = |host: &str| p.values().filter(|r| r.1.as_deref() == Some(host)).count();
    assert!(per_host(FIRST) > 0 && per_host(SECOND) > 0, "both engines took runs: {p:?}");
    assert_eq!(per_host(FIRST) + per_host(SECOND), 16);
    for (cell, run) in &p {
        assert_eq!((run.0.as_str(), run.2), ("done", 1), "{cell:?}");
        let there = &l[cell];
        assert_eq!((&run.3, run.4), (&there.3, there.4), "{cell:?}: the same verdict on a pool as on the local executor");
        assert_eq!(there.1.as_deref(), Some("local"));
    }

    // `experiment status` shows the runs per engine.
    let status: serde_json::Value = serde_json::from_str(&ok(&overeager(&["experiment", "status", "pooled", "--db", db_s, "--json"]))).unwrap();
    let hosts: Vec<(&str, u64)> = status["hosts"].as_array().unwrap().iter().map(|h| (h["host"].as_str().unwrap(), h["done"].as_u64().unwrap())).collect();
    assert_eq!(hosts, [(SECOND, per_host(SECOND) as u64), (FIRST, per_host(FIRST) as u64)]);

    // The bundle says where it ran.
    let c = rusqlite::Connection::open(&db).unwrap();
    let (bundle, host): (String, String) = c.query_row("SELECT bundle, host FROM runs WHERE experiment = 'pooled' AND host = ?1 LIMIT 1", [SECOND], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    let unpacked = dir.path().join("unpacked");
    let oeb = walkdir::WalkDir::new(dir.path().join("db.sqlite.objects")).into_iter().map(|e| e.unwrap().into_path()).find(|p| p.to_string_lossy().contains(&bundle)).unwrap();
    ok(&overeager(&["bundle", "unpack", oeb.to_str().unwrap(), unpacked.to_str().unwrap()]));
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(unpacked.join("bundle.json")).unwrap()).unwrap();
    assert_eq!(manifest["executor"]["kind"], "docker");
    assert_eq!(manifest["executor"]["host"].as_str(), Some(host.as_str()));
    assert!(manifest["executor"]["image_digest"].as_str().unwrap().starts_with("sha256:"));
}

#[test]
fn an_engine_stopped_midway_loses_no_run_and_duplicates_none() {
    let _one = ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    if !engines() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    let pooled = plan(dir.path(), "outage", 4, true);
    let child = Command::new(env!("CARGO_BIN_EXE_overeager"))
        .args(["experiment", "run", pooled.to_str().unwrap(), "--db", db.to_str().unwrap(), "--json"])
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Stop the second engine once it has finished a few runs, while it has more in hand.
    let t0 = Instant::now();
    while done_on(&db, "outage", SECOND) < 3 {
        assert!(t0.elapsed() < Duration::from_secs(120), "the second engine finished no run within 120 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let stopped = script(&["scripts/docker-engine-second.sh", "stop"]);
    let out = child.wait_with_output().unwrap();
    let restarted = engines();
    prune_second();
    assert!(stopped && restarted, "stopping and restarting the second engine");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!((summary["failed"].as_u64(), summary["left_pending"].as_u64()), (Some(0), Some(0)), "{summary}\n{stderr}");
    assert!(stderr.contains(&format!("engine {SECOND} is out")), "{stderr}");

    let all = runs(&db, "outage");
    assert_eq!(all.len(), 64);
    for (cell, r) in &all {
        // Done, and recorded once: a run the engine lost was never recorded there.
        assert_eq!((r.0.as_str(), r.2), ("done", 1), "{cell:?}");
    }
    let c = rusqlite::Connection::open(&db).unwrap();
    let (host, requeued): (String, String) = c.query_row("SELECT host, requeued FROM host_events WHERE experiment = 'outage'", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!(host, SECOND);
    let requeued: Vec<String> = serde_json::from_str(&requeued).unwrap();
    assert!(!requeued.is_empty(), "the runs the engine had went back to pending");
    for id in &requeued {
        let (status, host): (String, String) = c.query_row("SELECT status, host FROM runs WHERE id = ?1", [id], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        assert_eq!((status.as_str(), host.as_str()), ("done", FIRST), "{id} finished on the other engine");
    }
    let status = ok(&overeager(&["experiment", "status", "outage", "--db", db.to_str().unwrap()]));
    assert!(status.contains(SECOND) && status.contains("back to pending"), "{status}");
}
