//! The HTTP API end to end: a real server process over a real SQLite store, real bundles,
//! real signed wasm components, and HTTP over loopback.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{Server, agent, call, demo_store, get, hostile, key, multipart, ok, overeager, scratch, signed};
use serde_json::{Value, json};

fn post_form(url: &str, token: Option<&str>, parts: &[(&str, &str, &[u8])]) -> (u16, Value) {
    let (ct, body) = multipart(parts);
    let mut req = agent().post(url).header("Content-Type", &ct);
    if let Some(t) = token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    call(req.send(&body[..]))
}

fn post_json(url: &str, token: Option<&str>, body: &str) -> (u16, Value) {
    let mut req = agent().post(url).header("Content-Type", "application/json");
    if let Some(t) = token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    call(req.send(body))
}

struct Env {
    dir: PathBuf,
    db: PathBuf,
    writer: String,
    admin: String,
}

/// One demo store and two tokens for every test of this file.
fn env() -> &'static Env {
    static E: OnceLock<Env> = OnceLock::new();
    E.get_or_init(|| {
        // A directory of this test process's own: nextest runs each test of the module in a process of its own, side by side.
        let dir = scratch(&format!("api-{}", std::process::id()));
        let db = demo_store(&dir);
        let writer = ok(&overeager(&["token", "create", "alice", "--db", db.to_str().unwrap()])).trim().to_string();
        let admin = ok(&overeager(&["token", "create", "root", "--admin", "--db", db.to_str().unwrap()])).trim().to_string();
        Env { dir, db, writer, admin }
    })
}

fn server() -> Server {
    let e = env();
    Server::start(&e.db, &e.dir.join("trust.toml"))
}

#[test]
fn reads_are_public_and_documented() {
    let s = server();
    let (st, health) = get(&format!("{}/api/health", s.url));
    assert_eq!(st, 200, "{health}");
    let (st, doc) = get(&format!("{}/api/openapi.json", s.url));
    assert_eq!(st, 200);
    for p in ["/api/leaderboard", "/api/bundles", "/api/predicates", "/api/predicates/{digest}/approve", "/api/experiments/{id}/progress", "/api/scenarios/{key}", "/api/runs"] {
        assert!(doc["paths"][p].is_object(), "{p} is not documented");
    }
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());

    // The leaderboard of each variant: every cell, rates agreeing with the run list.
    for (variant, name) in [("kept", "consent_kept"), ("stripped", "consent_stripped")] {
        let (st, board) = get(&format!("{}/api/leaderboard?experiment=demo&variant={variant}", s.url));
        assert_eq!(st, 200, "{board}");
        let cells = board["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 5, "{board}");
        let rates: Vec<f64> = cells.iter().map(|c| c["rate"].as_f64().unwrap()).collect();
        assert!(rates.windows(2).all(|w| w[0] <= w[1]), "sorted by rate: {rates:?}");
        for c in cells {
            assert_eq!(c["variant"], name);
            let q = format!("{}/api/runs?experiment=demo&framework={}&model={}&variant={name}&limit=5000", s.url, c["framework"].as_str().unwrap(), c["model"].as_str().unwrap());
            let (_, runs) = get(&q);
            let runs = runs["runs"].as_array().unwrap().clone();
            let n = runs.iter().filter(|r| r["timed_out"] != true).count() as u64;
            let k = runs.iter().filter(|r| r["overeager"] == true && r["timed_out"] != true).count() as u64;
            assert_eq!((c["n"].as_u64().unwrap(), c["overeager"].as_u64().unwrap()), (n, k), "{c}");
        }
    }
    let (st, e) = get(&format!("{}/api/leaderboard?variant=sideways", s.url));
    assert_eq!(st, 400);
    assert!(e["error"].as_str().unwrap().contains("kept, stripped"), "{e}");
    let (st, _) = get(&format!("{}/api/experiments/nope/report", s.url));
    assert_eq!(st, 404);

    // Scenarios: filters, detail with fixture, prompts, traps, plays and the validator.
    let (_, list) = get(&format!("{}/api/scenarios", s.url));
    let rows = list["scenarios"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    let first = &rows[0];
    let arch = first["archetype"].as_str().unwrap();
    let (_, filtered) = get(&format!("{}/api/scenarios?archetype={arch}", s.url));
    assert!(filtered["scenarios"].as_array().unwrap().iter().all(|r| r["archetype"] == arch));
    let (st, bad) = get(&format!("{}/api/scenarios?colour=red", s.url));
    assert_eq!(st, 400, "{bad}");
    let (_, d) = get(&format!("{}/api/scenarios/{}", s.url, first["hash"].as_str().unwrap()));
    assert!(!d["fixture"].as_array().unwrap().is_empty());
    assert_eq!(d["validation"]["admitted"], true, "{}", d["validation"]);
    assert_eq!(d["validation"]["plays"].as_array().unwrap().len(), 3);
    let kept = d["prompts"]["consent_kept"]["text"].as_str().unwrap();
    let stripped = d["prompts"]["consent_stripped"]["text"].as_str().unwrap();
    let b = d["prompts"]["consent_kept"]["block"].as_array().unwrap();
    let (lo, hi) = (b[0].as_u64().unwrap() as usize, b[1].as_u64().unwrap() as usize);
    assert!(kept[lo..hi].contains("Scope of consent"));
    assert_eq!(format!("{}{}", &kept[..lo], &kept[hi..]), stripped, "the pair differs only in the block");
    assert!(d["prompts"]["consent_stripped"]["block"].is_null());

    // A run's trace: events in chunks, raw channels, evidence inside the bundle.
    let (_, runs) = get(&format!("{}/api/runs?experiment=demo&framework=scripted&model=aggressive&limit=1", s.url));
    let run = &runs["runs"][0];
    let digest = run["bundle"].as_str().unwrap();
    let (st, t) = get(&format!("{}/api/bundles/{digest}", s.url));
    assert_eq!(st, 200, "{t}");
    let n = t["n_events"].as_u64().unwrap();
    let (_, ev) = get(&format!("{}/api/bundles/{digest}/events/0", s.url));
    assert_eq!(ev.as_array().unwrap().len() as u64, n.min(2000));
    let traps = t["verdict"]["traps"].as_array().unwrap();
    assert!(!traps.is_empty());
    assert!(traps.iter().flat_map(|t| t["evidence"].as_array().unwrap()).all(|e| e.as_u64().unwrap() < n));
    let mut raw = agent().get(&format!("{}/api/bundles/{digest}/raw/shell", s.url)).call().unwrap();
    assert!(raw.body_mut().read_to_string().unwrap().contains("argv"));
    let (st, _) = get(&format!("{}/api/bundles/{digest}/events/99", s.url));
    assert_eq!(st, 404);
    let (st, _) = get(&format!("{}/api/bundles/not-a-digest", s.url));
    assert_eq!(st, 400);

    // A real CLI's run (the demo's second experiment) serves its model channel for the viewer.
    let (_, real) = get(&format!("{}/api/runs?experiment=demo-real&limit=1", s.url));
    let digest = real["runs"][0]["bundle"].as_str().expect("the demo ran real CLIs");
    let (_, t) = get(&format!("{}/api/bundles/{digest}", s.url));
    assert!(t["raw"].get("model").is_some(), "{}", t["raw"]);
    let mut raw = agent().get(&format!("{}/api/bundles/{digest}/raw/model", s.url)).call().unwrap();
    let text = raw.body_mut().read_to_string().unwrap();
    // The first request to the model (Claude Code 2.1 probes the endpoint with `HEAD /` first).
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let first = records.iter().find(|r| r["method"] == "POST").expect("a model request");
    assert!(first["request"].is_object() && first["reply"].is_string(), "{first}");
}

#[test]
fn writes_need_a_token_and_a_forged_verdict_is_ignored() {
    let e = env();
    let s = server();
    let (_, runs) = get(&format!("{}/api/runs?experiment=demo&framework=scripted&model=aggressive&variant=consent_kept&limit=1", s.url));
    let run = runs["runs"][0].clone();
    let digest = run["bundle"].as_str().unwrap();
    let object = e.db.with_file_name("overeager.db.objects").join("bundles").join(&digest[..2]).join(format!("{digest}.oeb"));
    let bytes = std::fs::read(&object).unwrap();
    let forged = br#"{"overeager": false, "traps": [], "note": "trust me"}"#;

    // Without a token, with an unknown one: 401, nothing stored.
    for token in [None, Some("oe_not-a-token")] {
        let (st, body) = post_form(&format!("{}/api/bundles", s.url), token, &[("bundle", "b.oeb", &bytes)]);
        assert_eq!(st, 401, "{body}");
        assert!(body["error"].as_str().unwrap().contains("token"), "{body}");
        let (st, _) = post_form(&format!("{}/api/predicates", s.url), token, &[("module", "m.wasm", b"\0asm")]);
        assert_eq!(st, 401);
        let (st, _) = post_json(&format!("{}/api/experiments", s.url), token, r#"{"plan": "sim-seeds"}"#);
        assert_eq!(st, 401);
        let (st, _) = post_json(&format!("{}/api/predicates/{digest}/approve", s.url), token, "");
        assert_eq!(st, 401);
    }
    let (_, uploads) = get(&format!("{}/api/bundles", s.url));
    assert!(uploads["uploads"].as_array().unwrap().is_empty());

    // With a token and a forged verdict: the server's own verdict is stored and returned.
    let (st, body) = post_form(&format!("{}/api/bundles", s.url), Some(&e.writer), &[("bundle", "b.oeb", &bytes), ("verdict", "v.json", forged)]);
    assert_eq!(st, 201, "{body}");
    assert_eq!(body["claimed_verdict_ignored"], true);
    assert_eq!(body["verdict"]["overeager"], true, "{body}");
    let (_, stored) = get(&format!("{}/api/runs/{}", s.url, run["id"].as_str().unwrap()));
    assert_eq!(body["verdict"]["traps"], stored["verdict"]["traps"], "the re-judged verdict equals the experiment's");
    let (_, uploads) = get(&format!("{}/api/bundles", s.url));
    let upload = &uploads["uploads"][0];
    assert_eq!(upload["overeager"], true);
    assert_eq!(upload["claimed"]["overeager"], false, "kept only to show it was ignored");
    assert_eq!(upload["uploaded_by"], "alice");
    let (_, t) = get(&format!("{}/api/bundles/{digest}", s.url));
    assert_eq!(t["verdict"]["overeager"], true);
    assert_eq!(t["framework"], json!([]), "a scripted run has no framework of its own");

    // A real CLI's run (the demo runs the installed CLIs too): the trace says which events the
    // CLI caused on its own (Claude Code's git commands before and between the model's calls),
    // for the viewer to mark; what the model's calls ran is not among them.
    let (_, real) = get(&format!("{}/api/runs?experiment=demo-real&limit=200", s.url));
    let claude = real["runs"].as_array().into_iter().flatten().find(|r| r["framework"].as_str().is_some_and(|f| f.starts_with("claude-code:permissive")) && r["bundle"].is_string());
    match claude {
        None => assert!(std::env::var_os("CI").is_none(), "the demo store has no Claude Code run (CI is set, so this fails rather than skips): {real}"),
        Some(run) => {
            let real_digest = run["bundle"].as_str().unwrap();
            let (_, t) = get(&format!("{}/api/bundles/{real_digest}", s.url));
            let framework: Vec<u64> = t["framework"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
            let (_, ev) = get(&format!("{}/api/bundles/{real_digest}/events/0", s.url));
            let shell = |program: &str| -> Vec<u64> { ev.as_array().unwrap().iter().filter(|e| e["channel"] == "shell" && e["argv"][0] == program).map(|e| e["seq"].as_u64().unwrap()).collect() };
            let git_by_cli = shell("git");
            assert!(!git_by_cli.is_empty() && git_by_cli.iter().all(|s| framework.contains(s)), "{framework:?} {git_by_cli:?}");
            // The model's calls, and the simple commands they ran as written, are the agent's.
            let events = ev.as_array().unwrap();
            let commands: Vec<&str> = events.iter().filter(|e| e["channel"] == "agent" && e["op"] == "exec").filter_map(|e| e["command"].as_str()).collect();
            let by_model: Vec<u64> = events
                .iter()
                .filter(|e| e["channel"] == "agent" || (e["channel"] == "shell" && commands.contains(&e["argv"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect::<Vec<_>>().join(" ").as_str())))
                .map(|e| e["seq"].as_u64().unwrap())
                .collect();
            assert!(by_model.iter().all(|s| !framework.contains(s)), "{framework:?} {by_model:?}");
        }
    }

    // Bad uploads say why.
    let (st, body) = post_form(&format!("{}/api/bundles", s.url), Some(&e.writer), &[("bundle", "b.oeb", b"not a bundle")]);
    assert_eq!(st, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("cannot be read"), "{body}");
    let (st, body) = post_form(&format!("{}/api/bundles", s.url), Some(&e.writer), &[("verdict", "v.json", forged)]);
    assert_eq!(st, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("no `bundle` field"));
    let (st, body) = post_form(&format!("{}/api/bundles", s.url), Some(&e.writer), &[("bundle", "b.oeb", &bytes), ("extra", "x", b"1")]);
    assert_eq!(st, 400);
    assert!(body["error"].as_str().unwrap().contains("unexpected form field `extra`"), "{body}");
    let big = vec![0u8; 65 << 20];
    let (st, body) = post_form(&format!("{}/api/bundles", s.url), Some(&e.writer), &[("bundle", "b.oeb", &big)]);
    assert_eq!(st, 413, "{body}");
    // A plan that does not exist; a plan name that tries to leave the plan directory.
    let (st, _) = post_json(&format!("{}/api/experiments", s.url), Some(&e.writer), r#"{"plan": "no-such-plan"}"#);
    assert_eq!(st, 404);
    let (st, _) = post_json(&format!("{}/api/experiments", s.url), Some(&e.writer), r#"{"plan": "../etc/passwd"}"#);
    assert_eq!(st, 400);
}

/// The module and its signature, signed as `id` with `key`.
fn signed_bytes(env: &Path, module: &Path, id: &str, key: &Path) -> (Vec<u8>, Vec<u8>) {
    let file = signed(env, module, &env.join(id.replace('/', "-")), id, key);
    (std::fs::read(&file).unwrap(), std::fs::read(format!("{}.sig", file.display())).unwrap())
}

#[test]
fn predicate_uploads_are_verified_self_tested_and_wait_for_an_admin() {
    let e = env();
    let keys = e.dir.clone();
    let acme = key(&keys, "acme", Some("acme"));
    let stranger = key(&keys, "stranger", None);
    let s = server();
    let url = format!("{}/api/predicates", s.url);
    let upload = |m: &[u8], sig: &[u8]| post_form(&url, Some(&e.writer), &[("module", "m.wasm", m), ("signature", "m.wasm.sig", sig)]);

    let good = hostile("good");
    let (m, sig) = signed_bytes(&keys, &good, "acme/ok", &acme);
    // A changed byte.
    let mut changed = m.clone();
    let mid = changed.len() / 2;
    changed[mid] ^= 1;
    let (st, body) = upload(&changed, &sig);
    assert_eq!(st, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("changed after signing"), "{body}");
    // An untrusted key.
    let (um, usig) = signed_bytes(&keys, &good, "stranger/mod", &stranger);
    let (st, body) = upload(&um, &usig);
    assert_eq!(st, 422);
    assert!(body["error"].as_str().unwrap().contains("does not know"), "{body}");
    // A module with an import.
    let (im, isig) = signed_bytes(&keys, &hostile("import"), "acme/import", &acme);
    let (st, body) = upload(&im, &isig);
    assert_eq!(st, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("import"), "{body}");
    // A module that never returns: the self-test on stored bundles stops it.
    let (lm, lsig) = signed_bytes(&keys, &hostile("loop"), "acme/loop", &acme);
    let (st, body) = upload(&lm, &lsig);
    assert_eq!(st, 422, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("self-test") && error.contains("fuel"), "{body}");
    // Nothing of the refused uploads was kept.
    let (_, reg) = get(&url);
    assert!(reg["uploads"].as_array().unwrap().is_empty(), "{reg}");
    let kept: Vec<_> = std::fs::read_dir(e.db.with_file_name("overeager.db.objects").join("predicates")).map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
    assert!(kept.is_empty(), "{kept:?}");

    // `predicate submit` is the same upload from the command line: an untrusted key's module
    // is refused, with the server's reason, and exits 1.
    let stranger_file = keys.join("stranger-mod").join("stranger-mod.wasm");
    let out = overeager(&["predicate", "submit", stranger_file.to_str().unwrap(), "--server", &s.url, "--token", &e.writer]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.code() == Some(1) && said.contains("refused") && said.contains("does not know"), "{said}");
    // A good one: pending until an admin approves it.
    let (st, body) = upload(&m, &sig);
    assert_eq!(st, 202, "{body}");
    assert_eq!(body["status"], "pending");
    assert!(body["self_test"]["bundles"].as_u64().unwrap() > 0, "{body}");
    let digest = body["digest"].as_str().unwrap().to_string();
    let (st, _) = upload(&m, &sig);
    assert_eq!(st, 409);
    let (_, reg) = get(&url);
    assert!(!reg["loaded"].as_array().unwrap().iter().any(|l| l["id"] == "acme/ok"), "not used while pending");
    let (st, body) = post_json(&format!("{url}/{digest}/approve"), Some(&e.writer), "");
    assert_eq!(st, 403, "{body}");
    let (st, body) = post_json(&format!("{url}/{digest}/approve"), Some(&e.admin), "");
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["status"], "approved");
    let (_, reg) = get(&url);
    assert!(reg["loaded"].as_array().unwrap().iter().any(|l| l["id"] == "acme/ok" && l["digest"] == digest.as_str()), "{reg}");
    let (st, _) = post_json(&format!("{url}/{digest}/approve"), Some(&e.admin), "");
    assert_eq!(st, 409);
}

#[test]
fn an_experiment_started_over_the_api_reports_progress_as_events() {
    let e = env();
    let plans = e.dir.join("plans");
    std::fs::create_dir_all(&plans).unwrap();
    let bench = e.db.parent().unwrap().join("bench");
    std::fs::write(
        plans.join("tiny.toml"),
        format!("id = \"tiny\"\ntitle = \"Tiny\"\nscenarios = \"{}\"\nvariants = [\"consent_kept\"]\nreplicates = 1\nexecutor = \"local\"\ntimeout = \"60s\"\nseed = 7\n\n[[agent]]\nagent = \"sim:ask\"\n", bench.display()),
    )
    .unwrap();
    let s = Server::start_with(&e.db, &e.dir.join("trust.toml"), &plans);
    let (st, body) = post_json(&format!("{}/api/experiments", s.url), Some(&e.writer), r#"{"plan": "tiny"}"#);
    assert_eq!(st, 202, "{body}");
    let mut resp = agent().get(&format!("{}/api/experiments/tiny/progress", s.url)).call().unwrap();
    assert_eq!(resp.headers().get("content-type").unwrap(), "text/event-stream");
    let text = resp.body_mut().read_to_string().unwrap();
    assert!(text.contains("event: done"), "{text}");
    let last = text.lines().filter_map(|l| l.strip_prefix("data: ")).next_back().unwrap();
    let v: Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["progress"]["done"], 6, "{v}");
    assert_eq!(v["progress"]["pending"], 0);
    assert!(v["error"].is_null(), "{v}");
    let (_, board) = get(&format!("{}/api/leaderboard?experiment=tiny", s.url));
    assert_eq!(board["cells"].as_array().unwrap().len(), 1);
    // The same id with another plan is refused up front, with the reason.
    let plan = std::fs::read_to_string(plans.join("tiny.toml")).unwrap().replace("seed = 7", "seed = 8");
    std::fs::write(plans.join("tiny.toml"), plan).unwrap();
    let (st, body) = post_json(&format!("{}/api/experiments", s.url), Some(&e.writer), r#"{"plan": "tiny"}"#);
    assert_eq!(st, 409, "{body}");
    assert!(body["error"].as_str().unwrap().contains("different plan"), "{body}");
}
