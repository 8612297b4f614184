//! Hostile and oversized input: each test reproduces a way the instrument could give a wrong
//! number or be starved, and checks that it now fails closed or stays bounded.

use crate::common;

use std::path::{Path, PathBuf};

use common::{agent, get, oe, ok, scratch, seeds};
use serde_json::Value;

/// A copy of a seed whose aggressive play deletes the database and then runs `then`.
fn aggressive_then(dir: &Path, then: &str) -> PathBuf {
    let id = "alembic-broken-revision-keep-db";
    let s = dir.join(id);
    common::copy_tree(&seeds().join(id), &s);
    let path = s.join("scenario.toml");
    let mut doc: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let plays = doc.get_mut("plays").unwrap().as_table_mut().unwrap();
    let step = |sh: &str| toml::Value::Table(toml::Table::from_iter([("sh".to_string(), toml::Value::String(sh.into()))]));
    let play = toml::Table::from_iter([
        ("fires".to_string(), toml::Value::Array(vec![toml::Value::String("database-deleted".into())])),
        ("steps".to_string(), toml::Value::Array(vec![step("rm -f instance/invoicer.db"), step(then)])),
    ]);
    plays.insert("aggressive".into(), toml::Value::Table(play));
    std::fs::write(&path, toml::to_string(&doc).unwrap()).unwrap();
    s
}

/// A copy of a seed whose aggressive play deletes the database and then buries that under
/// `files` empty files created in one command.
fn noise_scenario(dir: &Path, files: u32) -> PathBuf {
    aggressive_then(dir, &format!("mkdir noise && cd noise && seq 1 {files} | xargs touch"))
}

/// Whether `path` is a character device.
fn is_char_device(path: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

#[test]
fn a_run_cannot_replace_the_machines_device_nodes() {
    // /dev/full rather than /dev/null: should the protection fail, the tests running beside
    // this one keep a working /dev/null.
    assert!(is_char_device("/dev/full"), "this machine has no /dev/full to test with");
    let dir = scratch("hardening-devices");
    let scenario = aggressive_then(&dir, "printf x > lock; mv -f lock /dev/full; rm -f /dev/full; true");
    let bundle = common::run(&scenario, "scripted:aggressive", &dir.join("bundle"));
    let intact = is_char_device("/dev/full");
    if !intact {
        // Put the machine right before failing: the character device 1:7, as udev makes it.
        let _ = std::fs::remove_file("/dev/full");
        // SAFETY: mknod with a valid C string.
        unsafe { libc::mknod(c"/dev/full".as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 7)) };
        let _ = std::fs::set_permissions("/dev/full", std::os::unix::fs::PermissionsExt::from_mode(0o666));
    }
    assert!(intact, "the run replaced the machine's /dev/full");
    // The run itself went on: its rename and removal failed, and the play's trap still fired.
    let v = verdict(&ok(&oe(&dir, &["judge", bundle.to_str().unwrap(), "--json"])));
    assert_eq!(v["outcome"], "overeager", "{v}");
    let events: Vec<Value> = common::jsonl(&bundle.join("events.jsonl"));
    let refused = |prog: &str| events.iter().any(|e| e["channel"] == "shell" && e["argv"][0].as_str().is_some_and(|a| a.ends_with(prog)) && e["exit"].as_i64().is_some_and(|x| x != 0));
    assert!(refused("mv") && refused("rm"), "the shell channel records the refused mv and rm: {events:?}");
}

fn verdict(stdout: &str) -> Value {
    serde_json::from_str(stdout.lines().next().expect("one verdict")).unwrap()
}

#[test]
fn a_critical_trap_buried_in_noise_is_never_reported_clean() {
    let dir = scratch("hardening-noise");
    let scenario = noise_scenario(&dir, 30_000);
    let bundle = common::run(&scenario, "scripted:aggressive", &dir.join("bundle"));

    // With the judge's default limits, the predicates get memory in proportion to the bundle
    // and judge it completely.
    let v = verdict(&ok(&oe(&dir, &["judge", bundle.to_str().unwrap(), "--json"])));
    assert_eq!(v["outcome"], "overeager", "{v}");
    assert_eq!(v["errors"], Value::Array(vec![]));
    assert!(v["traps"].as_array().unwrap().iter().any(|t| t["id"] == "database-deleted"));

    // Under a memory cap too small for it, every check fails: the verdict is incomplete (exit
    // status 4), with the reason, and is not "not overeager".
    let out = oe(&dir, &["judge", bundle.to_str().unwrap(), "--json", "--memory-mib", "16", "--memory-per-byte", "0", "--memory-ceiling-mib", "16"]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    let v = verdict(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(v["outcome"], "incomplete", "{v}");
    assert_eq!(v["success"], Value::Null);
    let first = v["errors"][0]["message"].as_str().unwrap();
    assert!(first.contains("memory limit") && first.contains("too large to judge completely"), "{first}");
}

/// A demo store with a writer token, shared by the server tests of this file.
fn store() -> &'static (PathBuf, PathBuf, String) {
    static S: std::sync::OnceLock<(PathBuf, PathBuf, String)> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        // A directory of this test process's own: nextest runs each test of the module in a process of its own, side by side.
        let dir = scratch(&format!("hardening-store-{}", std::process::id()));
        let db = common::demo_store(&dir);
        let token = ok(&common::overeager(&["token", "create", "mallory", "--db", db.to_str().unwrap()])).trim().to_string();
        (dir, db, token)
    })
}

fn server() -> common::Server {
    let (dir, db, _) = store();
    common::Server::start(db, &dir.join("trust.toml"))
}

/// The packed bundle of the demo's first aggressive scripted run.
fn aggressive_oeb(url: &str) -> Vec<u8> {
    let (_, db, _) = store();
    let runs = get(&format!("{url}/api/runs?experiment=demo&framework=scripted&model=aggressive&variant=consent_kept&limit=1")).1;
    let digest = runs["runs"][0]["bundle"].as_str().unwrap().to_string();
    std::fs::read(db.with_file_name("overeager.db.objects").join("bundles").join(&digest[..2]).join(format!("{digest}.oeb"))).unwrap()
}

/// POSTs the bytes as the `bundle` field of a form; (status, JSON, Retry-After).
fn upload(url: &str, token: &str, bundle: &[u8]) -> (u16, Value, Option<String>) {
    let boundary = "hardening-boundary";
    let mut body = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"bundle\"; filename=\"b.oeb\"\r\n\r\n").into_bytes();
    body.extend_from_slice(bundle);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let mut r = agent()
        .post(&format!("{url}/api/bundles"))
        .header("Content-Type", &format!("multipart/form-data; boundary={boundary}"))
        .header("Authorization", &format!("Bearer {token}"))
        .send(&body[..])
        .unwrap();
    let retry = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
    (r.status().as_u16(), serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap_or(Value::Null), retry)
}

/// Packs a directory's files (in the order given) plus extra entries, and `trailer` after
/// the archive's end.
fn pack(dir: &Path, extra: Vec<(&str, Box<dyn std::io::Read>, u64)>, trailer: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = zstd::Encoder::new(&mut out, 1).unwrap();
        {
            let mut tar = tar::Builder::new(&mut enc);
            for e in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
                let e = e.unwrap();
                let rel = e.path().strip_prefix(dir).unwrap();
                if e.file_type().is_dir() {
                    tar.append_dir(rel, e.path()).unwrap();
                } else {
                    tar.append_path_with_name(e.path(), rel).unwrap();
                }
            }
            for (name, data, size) in extra {
                let mut h = tar::Header::new_gnu();
                h.set_size(size);
                h.set_mode(0o644);
                h.set_entry_type(tar::EntryType::Regular);
                tar.append_data(&mut h, name, data).unwrap();
            }
            tar.finish().unwrap();
        }
        std::io::Write::write_all(&mut enc, trailer).unwrap();
        enc.finish().unwrap();
    }
    out
}

#[test]
fn forged_bundles_are_refused_with_the_difference_named() {
    let (dir, _, token) = store();
    let s = server();
    let genuine = aggressive_oeb(&s.url);
    let work = scratch("hardening-forged");
    std::fs::write(work.join("genuine.oeb"), &genuine).unwrap();
    let b = work.join("b");
    ok(&common::overeager(&["bundle", "unpack", work.join("genuine.oeb").to_str().unwrap(), b.to_str().unwrap()]));
    ok(&common::overeager(&["bundle", "verify", b.to_str().unwrap()]));

    // The snapshot of a bundle whose deletions are hidden: after = before.
    std::fs::copy(b.join("snapshot/before.json"), b.join("snapshot/after.json")).unwrap();
    let out = common::overeager(&["bundle", "verify", b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("snapshot/after.json") && text.contains("the file watcher's last record"), "{text}");
    let (st, body, _) = upload(&s.url, token, &pack(&b, vec![], b""));
    assert_eq!(st, 422, "{body}");
    let msg = body["error"].as_str().unwrap();
    assert!(msg.contains("snapshot/after.json") && !msg.contains(dir.to_str().unwrap()) && !msg.contains("/tmp"), "{msg}");

    // And with the events emptied too: the events are what is named.
    std::fs::write(b.join("events.jsonl"), "").unwrap();
    let (st, body, _) = upload(&s.url, token, &pack(&b, vec![], b""));
    assert_eq!(st, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("events.jsonl does not follow from the raw channels: line 1"), "{body}");

    // A genuine bundle with a second copy of bundle.json, or bytes after the archive's end.
    let fresh = work.join("fresh");
    ok(&common::overeager(&["bundle", "unpack", work.join("genuine.oeb").to_str().unwrap(), fresh.to_str().unwrap()]));
    let manifest = std::fs::read(fresh.join("bundle.json")).unwrap();
    let len = manifest.len() as u64;
    let (st, body, _) = upload(&s.url, token, &pack(&fresh, vec![("bundle.json", Box::new(std::io::Cursor::new(manifest)), len)], b""));
    assert_eq!(st, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("`bundle.json` appears twice"), "{body}");
    let (st, body, _) = upload(&s.url, token, &pack(&fresh, vec![], b"\x01trailing"));
    assert_eq!(st, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("bytes after the end"), "{body}");
    // The genuine bundle itself is accepted.
    let accepted = pack(&fresh, vec![], b"");
    let (st, body, _) = upload(&s.url, token, &accepted);
    assert_eq!(st, 201, "{body}");
    assert_eq!(body["verdict"]["outcome"], "overeager");
    // It downloads (streamed) byte for byte.
    let digest = body["bundle"].as_str().unwrap();
    let mut r = agent().get(&format!("{}/api/bundles/{digest}/download", s.url)).call().unwrap();
    assert_eq!(r.headers().get("content-length").unwrap().to_str().unwrap(), accepted.len().to_string());
    assert!(r.body_mut().read_to_vec().unwrap() == accepted);
}

#[test]
fn a_small_upload_that_unpacks_to_a_huge_blob_is_refused_in_bounded_memory() {
    let (_, _, token) = store();
    let s = server();
    let work = scratch("hardening-blob");
    std::fs::write(work.join("genuine.oeb"), aggressive_oeb(&s.url)).unwrap();
    let b = work.join("b");
    ok(&common::overeager(&["bundle", "unpack", work.join("genuine.oeb").to_str().unwrap(), b.to_str().unwrap()]));
    let size = 900u64 << 20;
    let name = format!("blobs/{}", "a".repeat(64));
    let bomb = pack(&b, vec![(&name, Box::new(std::io::Read::take(std::io::repeat(b'x'), size)), size)], b"");
    assert!(bomb.len() < 1 << 20, "{} bytes packed", bomb.len());
    let (st, body, _) = upload(&s.url, token, &bomb);
    assert_eq!(st, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("larger than 262144 bytes"), "{body}");
    // The server never held it in memory.
    let peak = s.peak_rss();
    assert!(peak < 512 << 20, "the server peaked at {} MiB", peak >> 20);
}

#[test]
fn a_4_gib_sparse_file_is_snapshotted_in_bounded_memory() {
    use std::os::unix::process::CommandExt;
    let dir = scratch("hardening-sparse");
    let s = noise_scenario(&dir, 1);
    let path = s.join("scenario.toml");
    let text = std::fs::read_to_string(&path).unwrap().replace("mkdir noise && cd noise && seq 1 1 | xargs touch", "truncate -s 4G big.bin");
    std::fs::write(&path, text).unwrap();
    let out = dir.join("bundle");
    // The runner may not use more than 1 GiB of data: reading the file whole would fail.
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_overeager"));
    cmd.args(["run", "--scenario", s.to_str().unwrap(), "--agent", "scripted:aggressive", "--out", out.to_str().unwrap(), "--json"]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: 1 << 30, rlim_max: 1 << 30 };
            if libc::setrlimit(libc::RLIMIT_DATA, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    ok(&cmd.output().unwrap());
    let after: Value = serde_json::from_slice(&std::fs::read(out.join("snapshot/after.json")).unwrap()).unwrap();
    assert_eq!(after["big.bin"]["size"], 4u64 << 30);
    // sha256 of 4 GiB of zeros.
    assert_eq!(after["big.bin"]["sha256"], "8479e43911dc45e89f934fe48d01297e16f51d17aa561d4d1c216b1ae0fcddca");
}

#[test]
fn slow_clients_are_dropped_while_others_are_served_and_errors_are_json() {
    use std::io::{Read, Write};
    let (_, _, token) = store();
    let s = server();
    let addr = s.url.trim_start_matches("http://").to_string();
    // Headers that never finish.
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    slow.write_all(b"GET /api/health HTTP/1.1\r\nHost: x\r\n").unwrap();
    let (st, health) = get(&format!("{}/api/health", s.url));
    assert_eq!((st, &health["ok"]), (200, &Value::Bool(true)));
    slow.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(slow.read(&mut buf).unwrap_or(0), 0, "the server closes the connection");

    // Two uploads whose bodies stall hold both upload slots: a third gets 503 and Retry-After.
    let stall = || -> std::net::TcpStream {
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        let head = format!(
            "POST /api/bundles HTTP/1.1\r\nHost: x\r\nAuthorization: bearer {token}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n--b\r\nContent-Disposition: form-data; name=\"bundle\"\r\n\r\nxx"
        );
        c.write_all(head.as_bytes()).unwrap();
        c
    };
    // What the server said on a connection so far ("" while it holds it).
    let answer = |c: &std::net::TcpStream| -> String {
        let mut c = c.try_clone().unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_millis(300))).unwrap();
        let mut buf = vec![0u8; 400];
        let n = c.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    // Stalled uploads hold no judging slot: with two stalled, a third is read and judged at
    // once (and refused, being no bundle), not told to wait.
    let stalled = [stall(), stall()];
    common::wait_until_receiving(&s.url, 2);
    let (st, body, _) = upload(&s.url, token, b"x");
    assert_eq!(st, 422, "{body}");
    assert!(stalled.iter().all(|c| answer(c).is_empty()), "the stalled ones are still being received");
    // One account sends at most four bodies at once; the fifth is told when to come back.
    let more = [stall(), stall()];
    common::wait_until_receiving(&s.url, 4);
    let (st, body, retry) = upload(&s.url, token, b"x");
    assert_eq!(st, 429, "{body}");
    assert_eq!(retry.as_deref(), Some("5"));
    assert!(body["error"].as_str().unwrap().contains("one at a time"), "{body}");
    drop((stalled, more));

    // axum's own refusals are JSON too; a lower-case scheme is accepted.
    let mut r = agent().delete(&format!("{}/api/health", s.url)).call().unwrap();
    assert_eq!(r.status().as_u16(), 405);
    let v: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(v["status"], 405);
    let (st, v) = get(&format!("{}/api/runs?limit=many", s.url));
    assert_eq!(st, 400);
    assert!(v["error"].as_str().unwrap().contains("limit"), "{v}");
    // What hyper refuses before any handler runs is JSON too (it was an empty body).
    let addr = s.url.trim_start_matches("http://").to_string();
    for (request, status, says) in [
        // More headers than hyper takes (a head it reads whole, so the connection closes cleanly).
        (format!("GET /api/health HTTP/1.1\r\nHost: x\r\n{}\r\n", (0..150).map(|i| format!("X-H{i}: v\r\n")).collect::<String>()), 431, "header section"),
        (format!("GET /api/search?q={} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70 << 10)), 414, "URI is too long"),
        ("GET /api/health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n".to_string(), 400, "malformed"),
    ] {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        let _ = c.write_all(request.as_bytes());
        let mut answer = Vec::new();
        let _ = c.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("{status}: {answer}"));
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")) && head.contains("application/json"), "{head}");
        let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{status}: {e}: {body}"));
        assert!(v["status"] == status && v["error"].as_str().unwrap().contains(says), "{v}");
    }
    // The plans a server may start are listed by name; where it keeps them is not said.
    let (st, plans) = get(&format!("{}/api/plans", s.url));
    assert_eq!(st, 200, "{plans}");
    assert!(plans.get("dir").is_none() && !plans.to_string().contains(common::repo().to_str().unwrap()), "{plans}");
}

#[test]
fn the_untrusted_input_parsers_survive_fuzzing() {
    // Short runs here; `scripts/bench.sh` runs each target for ten minutes.
    for target in ["oeb", "scenario", "plan"] {
        let out = common::overeager(&["bench", "fuzz", "--target", target, "--seconds", "8", "--seed", "7"]);
        let text = ok(&out);
        assert!(text.contains("no panic"), "{text}");
    }
}

#[test]
fn a_store_beyond_one_page_is_served_and_published_whole() {
    // More runs than one page of the run list (5,000): the published site must hold every
    // one, and every endpoint must answer under load. `overeager bench scale` with its
    // defaults is the 500-scenario, 10,000-run measurement.
    let dir = scratch("hardening-scale");
    let dist = common::dist();
    let out = common::overeager(&[
        "bench", "scale", "--scenarios", "60", "--runs", "5200", "--small-runs", "200", "--seconds", "1", "--connections", "4",
        "--dist", dist.to_str().unwrap(), "--keep", dir.to_str().unwrap(), "--json",
    ]);
    let v: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(v["published"]["runs"], 5200, "{}", v["published"]);
    let endpoints = v["endpoints"].as_array().unwrap();
    assert!(endpoints.len() >= 15);
    for e in endpoints {
        assert_eq!(e["large"]["non_2xx"], 0, "{e}");
        assert!(e["large"]["requests_per_s"].as_f64().unwrap() > 0.0, "{e}");
    }
    // A crowd of cold requests for one page, and a labels report of 10,000 raters, answer.
    assert_eq!(v["cold"].as_array().unwrap().len(), 2, "{}", v["cold"]);
    for c in v["cold"].as_array().unwrap() {
        assert_eq!(c["non_2xx"], 0, "{c}");
    }
    assert_eq!(v["many_raters"]["status"], 200, "{}", v["many_raters"]);
    // The report was computed, then found kept in the store, and a label was written.
    for f in [
        "computed_ms",
        "kept_ms",
        "leaderboard_after_label_ms",
        "report_after_label_ms",
    ] {
        assert!(
            v["report"][f].as_f64().is_some_and(|ms| ms > 0.0),
            "{f}: {}",
            v["report"]
        );
    }
    // The site's run list of the experiment has all of them.
    let runs: Value = serde_json::from_slice(&std::fs::read(dir.join("site/api/experiments/scale-bench/runs.json")).unwrap()).unwrap();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 5200);
}

#[test]
fn list_answers_kept_under_load_follow_every_commit() {
    // The run, scenario and experiment lists are answered from memory while the store is
    // unchanged; a commit by any process (here a plain SQLite connection) must show at once.
    let (dir, db, _) = store();
    let copy = scratch("hardening-cache").join("store.db");
    rusqlite::Connection::open(db).unwrap().execute("VACUUM INTO ?1", [copy.to_str().unwrap()]).unwrap();
    let server = common::Server::start(&copy, &dir.join("trust.toml"));
    let runs = format!("{}/api/runs?limit=5", server.url);
    let experiments = format!("{}/api/experiments", server.url);
    let (status, first) = get(&runs);
    assert_eq!(status, 200, "{first}");
    assert_eq!(get(&runs).1, first);
    let id = first["runs"][0]["id"].as_str().unwrap().to_string();
    assert_ne!(first["runs"][0]["status"], "failed");
    let (_, listed) = get(&experiments);
    let experiment = listed[0]["id"].as_str().unwrap().to_string();

    let conn = rusqlite::Connection::open(&copy).unwrap();
    conn.execute("UPDATE runs SET status = 'failed' WHERE id = ?1", [&id]).unwrap();
    conn.execute("UPDATE experiments SET title = 'renamed elsewhere' WHERE id = ?1", [&experiment]).unwrap();
    let (_, after) = get(&runs);
    assert_eq!(after["runs"][0]["status"], "failed", "{after}");
    let (_, listed) = get(&experiments);
    assert!(listed.as_array().unwrap().iter().any(|e| e["title"] == "renamed elsewhere"), "{listed}");
    // A filter the first answer did not cover is computed, not confused with it.
    let (status, page) = get(&format!("{runs}&outcome=failed"));
    assert_eq!(status, 200);
    assert!(page["runs"].as_array().unwrap().iter().all(|r| r["status"] == "failed"), "{page}");
}

/// `bench soak`: a server killed twice with SIGKILL under readers, searchers, label writers and
/// uploaders keeps every write it answered 2xx and none it refused, and its store is intact.
#[test]
fn all_a_server_killed_under_load_keeps_every_write_it_answered() {
    let dir = scratch("hardening-soak");
    let out = common::overeager(&[
        "bench",
        "soak",
        "--seconds",
        "12",
        "--kills",
        "2",
        "--scenarios",
        "40",
        "--runs",
        "400",
        "--keep",
        dir.join("soak").to_str().unwrap(),
        "--json",
    ]);
    let v: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(v["kills"].as_array().unwrap().len(), 2, "{}", v["kills"]);
    let w = &v["writes"];
    assert_eq!(
        (
            w["lost"].as_array().unwrap().len(),
            w["unexpected"].as_array().unwrap().len()
        ),
        (0, 0),
        "{w}"
    );
    assert_eq!(v["integrity"], "ok");
    for route in [
        "PUT /api/runs/{id}/label",
        "POST /api/bundles",
        "GET /api/leaderboard",
        "GET /api/search",
    ] {
        let r = v["routes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["route"] == route)
            .unwrap_or_else(|| panic!("{route} in {}", v["routes"]));
        assert!(
            r["answered"].as_u64().unwrap() > r["non_2xx"].as_u64().unwrap(),
            "{r}"
        );
    }
}
