//! What a hostile contributor tries against a public leaderboard, each against a real server on
//! loopback with real stores, real signed bundles and real signed predicate components: taking
//! someone else's runs, ranking the same cell twice or under the maintainer's name, a revoked
//! key that keeps judging, a predicate that loops only on its real arguments, cells that dodge
//! a benchmark's policy, slow uploads that hold every slot, declarations that blow up memory,
//! and the smaller holes.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::board::{Setup, body, declare_to, problems, runs_of, setup, submit_cell, submit_raw, tampered};
use common::browser::{browser, chromedriver, wait_for};
use common::{Server, agent, call, get, hostile, key, multipart, ok, oe, overeager, repo, seeds, signed};
use fantoccini::Locator;
use serde_json::{Value, json};

fn bearer(t: &str) -> String {
    format!("Bearer {t}")
}

/// POSTs a JSON body with a token: (status, answer).
fn post(url: &str, token: &str, v: &Value) -> (u16, Value) {
    call(agent().post(url).header("Authorization", &bearer(token)).header("Content-Type", "application/json").send(&body(v)[..]))
}

/// Declares `runs` as the cell `framework · model` of `bench-t`: (status, answer).
fn declare(url: &str, token: &str, cell: (&str, &str), runs: &[(String, String, PathBuf)]) -> (u16, Value) {
    declare_to(url, token, "bench-t", cell, runs, None)
}

fn put_bundle(url: &str, token: &str, id: &str, run: &(String, String, PathBuf)) -> (u16, Value) {
    let bytes = std::fs::read(&run.2).unwrap();
    call(agent().put(&format!("{url}/api/submissions/{id}/bundles/{}", run.1)).header("Authorization", &bearer(token)).send(&bytes[..]))
}

fn get_as(url: &str, token: &str) -> (u16, Value) {
    call(agent().get(url).header("Authorization", &bearer(token)).call())
}

fn trust_runner(s: &Setup, account: &str) {
    ok(&overeager(&["runner", "trust", s.runner_pub.to_str().unwrap(), "--account", account, "--db", s.server_db.to_str().unwrap()]));
}

fn runner_key_id(s: &Setup) -> String {
    let v: Value = serde_json::from_slice(&std::fs::read(&s.runner_pub).unwrap()).unwrap();
    v["key_id"].as_str().unwrap().to_string()
}

/// 1. Another writer takes bundles someone else ran: refused, and nobody but the submitter
/// and admins sees a draft's digests.
#[test]
fn a_submitted_run_belongs_to_the_account_that_first_uploaded_it_and_a_runner_key_to_its_account() {
    let s = setup("integrity-binding", &["acme", "mallory"]);
    trust_runner(&s, "acme");
    let server = Server::start(&s.server_db, &s.dir.join("trust.toml"));
    let url = &server.url;
    let (mine, mine2) = (runs_of(&s, "mine"), runs_of(&s, "mine2"));

    let (status, answer, puts) = submit_raw(url, &s.tokens["acme"], &mine, None);
    assert_eq!(status, 200, "{answer} {puts:?}");
    let id = answer["id"].as_str().unwrap().to_string();
    assert_eq!(get(&format!("{url}/api/submissions/{id}")).1["provenance"]["runner"], "trusted");

    // Strangers (anonymous, or another writer) see no digest and no trace of a cell not yet
    // approved; its submitter and admins do.
    for doc in [get(&format!("{url}/api/submissions/{id}")).1, get_as(&format!("{url}/api/submissions/{id}"), &s.tokens["mallory"]).1] {
        assert_eq!(doc["bundles_shown"], false, "{doc}");
        let runs = doc["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 12);
        assert!(runs.iter().all(|r| r["bundle"].is_null() && r["trace"].is_null()), "{doc}");
        assert!(!doc.to_string().contains(&mine[0].1), "no digest anywhere in the page");
    }
    for t in [&s.tokens["acme"], &s.tokens["admin"]] {
        let doc = get_as(&format!("{url}/api/submissions/{id}"), t).1;
        assert_eq!(doc["bundles_shown"], true);
        assert!(doc["runs"].as_array().unwrap().iter().all(|r| r["bundle"].as_str().is_some_and(|b| b.len() == 64)), "{doc}");
    }

    // The attack: the same bundles, declared first and uploaded under another cell by another
    // writer who got hold of the files. Refused at the declaration.
    let (status, e) = declare(url, &s.tokens["mallory"], ("mallory-agent", "m-1"), &mine);
    assert_eq!(status, 409, "{e}");
    assert!(e["error"].as_str().unwrap().contains("first uploaded by another account"), "{e}");
    // Bundles acme's runner signed but acme never sent: declared, then refused at the upload,
    // because the runner key is registered to acme. Nothing of them is recorded.
    let (status, opened) = declare(url, &s.tokens["mallory"], ("mallory-agent", "m-1"), &mine2);
    assert_eq!(status, 201, "{opened}");
    let mid = opened["id"].as_str().unwrap().to_string();
    let (status, e) = put_bundle(url, &s.tokens["mallory"], &mid, &mine2[0]);
    assert_eq!(status, 403, "{e}");
    assert!(e["error"].as_str().unwrap().contains("registered to another account"), "{e}");
    let doc = get_as(&format!("{url}/api/submissions/{mid}"), &s.tokens["mallory"]).1;
    assert_eq!(doc["runs_total"], 0, "{doc}");
    // The attempt reserved nothing: acme's own upload of that bundle is taken.
    let (status, opened) = declare(url, &s.tokens["acme"], ("scripted", "moderate"), &mine2);
    assert_eq!(status, 200, "acme's open submission of the cell, reopened: {opened}");
    assert_eq!(put_bundle(url, &s.tokens["acme"], &id, &mine2[0]).0, 201);
    // acme's own submission, declared and sent again as it was, is whole and its only one.
    let (status, answer, _) = submit_raw(url, &s.tokens["acme"], &mine, None);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["id"], id.as_str());
    assert!(problems(&answer).is_empty());
}

/// 2. The same cell approved twice, a maintainer's cell name taken, reversed text, scripted
/// agents under a product name.
#[test]
fn one_row_per_cell_and_submitter_maintainer_names_reserved_and_reference_agents_marked() {
    let s = setup("integrity-rows", &["acme", "bob"]);
    let server = Server::start(&s.server_db, &s.dir.join("trust.toml"));
    let url = &server.url;
    let admin = &s.tokens["admin"];
    let approve = |id: &str| post(&format!("{url}/api/submissions/{id}/approve"), admin, &json!({}));
    let submitted_rows = || get(&format!("{url}/api/leaderboard?experiment=board&variant=kept")).1["submitted"].as_array().unwrap().clone();

    let (status, first, _) = submit_cell(url, &s.tokens["acme"], "bench-t", ("scripted", "moderate"), &runs_of(&s, "mine"), None);
    assert_eq!(status, 200, "{first}");
    let first = first["id"].as_str().unwrap().to_string();
    assert_eq!(approve(&first).0, 200);
    assert_eq!(submitted_rows().len(), 1);
    // The same cell again (the agent underneath changed, say): it replaces the first on the
    // leaderboard, which stays in the history, marked.
    let (status, second, _) = submit_cell(url, &s.tokens["acme"], "bench-t", ("scripted", "moderate"), &runs_of(&s, "mine2"), None);
    assert_eq!(status, 200, "{second}");
    let second = second["id"].as_str().unwrap().to_string();
    assert_eq!(approve(&second).0, 200);
    let rows = submitted_rows();
    assert_eq!(rows.len(), 1, "one row per cell and submitter: {rows:?}");
    assert_eq!(rows[0]["provenance"]["submission"], second.as_str());
    let old = get(&format!("{url}/api/submissions/{first}")).1;
    assert_eq!(old["submission"]["status"], "superseded");
    assert_eq!(old["submission"]["superseded_by"], second.as_str());
    let new = get(&format!("{url}/api/submissions/{second}")).1;
    assert_eq!(new["history"][0]["id"], first.as_str(), "{new}");
    assert_eq!(get(&format!("{url}/api/submissions")).1["submissions"].as_array().unwrap().len(), 2);

    // The scripted plays under a product's name are marked as what they are, as are the
    // maintainer's own scripted cells.
    assert_eq!(rows[0]["provenance"]["scripted"], true, "{}", rows[0]);
    assert_eq!(rows[0]["scripted"], true);
    let board = get(&format!("{url}/api/leaderboard?experiment=board&variant=kept")).1;
    assert!(board["cells"].as_array().unwrap().iter().all(|c| c["scripted"] == true), "{board}");

    // The maintainer's cell names are theirs, however they are spelt.
    for cell in [("scripted", "cautious"), ("Scripted", " CAUTIOUS"), ("scripted-", "aggressive")] {
        let (status, e) = declare(url, &s.tokens["bob"], cell, &runs_of(&s, "mine")[..1]);
        assert_eq!(status, 409, "{cell:?}: {e}");
        assert!(e["error"].as_str().unwrap().contains("maintainer's own cell"), "{e}");
    }
    // Text-direction and invisible characters in a cell name.
    for name in ["acme\u{202e}tpircs", "acme\u{2066}x", "a\u{200b}b", "tab\there"] {
        let (status, e) = declare(url, &s.tokens["bob"], (name, "m"), &runs_of(&s, "mine")[..1]);
        assert_eq!(status, 400, "{name:?}: {e}");
        assert!(e["error"].as_str().unwrap().contains("U+"), "{e}");
    }
}

/// Copies a seed scenario with one more trap, calling `predicate` with `args` (TOML).
fn scenario_with_trap(dir: &Path, seed: &str, predicate: &str, args: &str) -> PathBuf {
    let set = dir.join("set-extra");
    common::copy_tree(&seeds().join(seed), &set.join(seed));
    let toml = set.join(seed).join("scenario.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    let at = text.find("[plays.").unwrap();
    text.insert_str(at, &format!("[[trap]]\nid = \"third-party\"\nseverity = \"low\"\npredicate = \"{predicate}\"\nargs = {args}\nsummary = \"a third-party predicate's finding\"\n\n"));
    std::fs::write(&toml, text).unwrap();
    set
}

/// Each stored verdict of the experiment `third-party`: its outcome, and the version of
/// `module` that took part (none when it did not).
fn outcomes_of_third_party(s: &Setup, module: &str) -> Vec<(String, Option<String>)> {
    let conn = rusqlite::Connection::open(&s.server_db).unwrap();
    let mut stmt = conn
        .prepare("SELECT json_extract(v.verdict, '$.outcome'), json_extract(v.verdict, '$.versions.\"' || ?1 || '\"') FROM verdicts v JOIN runs r ON r.id = v.run WHERE r.experiment = 'third-party'")
        .unwrap();
    stmt.query_map([module], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
}

fn run_plan(s: &Setup, id: &str, set: &Path, extra: &[&str]) {
    let plan = s.dir.join(format!("{id}.toml"));
    std::fs::write(&plan, format!("id = \"{id}\"\nscenarios = \"{}\"\nvariants = [\"consent_kept\"]\nreplicates = 1\nexecutor = \"local\"\ntimeout = \"60s\"\nseed = 3\n\n[[agent]]\nagent = \"scripted:cautious\"\nframework = \"scripted\"\nmodel = \"cautious\"\n", set.display())).unwrap();
    let mut args = vec!["experiment", "run", plan.to_str().unwrap(), "--db", s.server_db.to_str().unwrap()];
    args.extend_from_slice(extra);
    ok(&oe(&s.dir, &args));
}

fn upload_module(url: &str, token: &str, module: &Path) -> (u16, Value) {
    let (m, sig) = (std::fs::read(module).unwrap(), std::fs::read(format!("{}.sig", module.display())).unwrap());
    let (ct, b) = multipart(&[("module", "module", &m), ("signature", "signature", &sig)]);
    call(agent().post(&format!("{url}/api/predicates")).header("Authorization", &bearer(token)).header("Content-Type", &ct).send(&b[..]))
}

fn upload_single(url: &str, token: &str, bundle: &Path) -> (u16, Value) {
    let (ct, b) = multipart(&[("bundle", "b.oeb", &std::fs::read(bundle).unwrap())]);
    call(agent().post(&format!("{url}/api/bundles")).header("Authorization", &bearer(token)).header("Content-Type", &ct).send(&b[..]))
}

/// 3. Revoking a predicate key or a runner key on a running server.
#[test]
fn revoking_a_predicate_key_or_a_runner_key_bites_at_once_and_what_the_module_judged_is_judged_again() {
    let s = setup("integrity-revoke", &["acme"]);
    trust_runner(&s, "acme");
    let pkey = key(&s.dir, "acme-predicates", Some("acme"));
    let module = signed(&s.dir, &hostile("good"), &s.dir.join("modules"), "acme/ok", &pkey);
    // A scenario that uses the module, run with it (`experiment run --predicates`).
    let set = scenario_with_trap(&s.dir, "bandit-subprocess-shell-true", "acme/ok:check", "{}");
    run_plan(&s, "third-party", &set, &["--predicates", module.to_str().unwrap()]);
    // `export` of a bundle judged with it takes the module too.
    let conn = rusqlite::Connection::open(&s.server_db).unwrap();
    let digest: String = conn.query_row("SELECT bundle FROM runs WHERE experiment = 'third-party'", [], |r| r.get(0)).unwrap();
    let bundle = PathBuf::from(format!("{}.objects/bundles/{}/{digest}.oeb", s.server_db.display(), &digest[..2]));
    ok(&oe(&s.dir, &["export", bundle.to_str().unwrap(), "--format", "atif", "--out", s.dir.join("export.json").to_str().unwrap(), "--predicates", module.to_str().unwrap()]));
    let exported = std::fs::read_to_string(s.dir.join("export.json")).unwrap();
    assert!(exported.contains("acme/ok"), "the export's verdict was judged with the module");

    let server = Server::start(&s.server_db, &s.dir.join("trust.toml"));
    let url = &server.url;
    let (status, row) = upload_module(url, &s.tokens["acme"], &module);
    assert_eq!(status, 202, "{row}");
    let mdigest = row["digest"].as_str().unwrap().to_string();
    assert_eq!(post(&format!("{url}/api/predicates/{mdigest}/approve"), &s.tokens["admin"], &json!({})).0, 200);
    let (status, judged) = upload_single(url, &s.tokens["acme"], &bundle);
    assert_eq!(status, 201, "{judged}");
    assert!(judged["verdict"]["versions"]["acme/ok"].is_string(), "judged with the module: {judged}");

    // The key is revoked in the trust store the server reads, while it runs.
    let key_id = serde_json::from_slice::<Value>(&std::fs::read(pkey.with_extension("pub")).unwrap()).unwrap()["key_id"].as_str().unwrap().to_string();
    ok(&oe(&s.dir, &["keys", "revoke", &key_id, "--reason", "leaked"]));
    let reg = get(&format!("{url}/api/predicates")).1;
    let up = reg["uploads"].as_array().unwrap().iter().find(|u| u["digest"] == mdigest.as_str()).unwrap().clone();
    assert_eq!(up["status"], "revoked", "{up}");
    assert_eq!(up["revoked_reason"], "leaked");
    assert!(!reg["loaded"].as_array().unwrap().iter().any(|m| m["id"] == "acme/ok"), "unloaded at once: {reg}");
    // What it judged is judged again without it: the check it answered has no answer now.
    let uploads = get(&format!("{url}/api/bundles")).1;
    let v = uploads["uploads"].as_array().unwrap().iter().find(|x| x["bundle"] == digest.as_str()).unwrap()["verdict"].clone();
    assert!(v["versions"]["acme/ok"].is_null(), "{v}");
    assert_eq!(v["outcome"], "incomplete", "{v}");
    // So are the runs of the server's own experiment that it judged.
    let runs_judged = || outcomes_of_third_party(&s, "acme/ok");
    let judged = runs_judged();
    assert!(!judged.is_empty() && judged.iter().all(|(o, v)| o == "incomplete" && v.is_none()), "{judged:?}");
    // Another build of the module (it loops only when given a `path`, which this scenario does
    // not give), signed by a new key and approved: those runs get verdicts again at once.
    let pkey2 = key(&s.dir, "acme-predicates-2", Some("acme"));
    let module2 = s.dir.join("modules2").join("acme-ok.wasm");
    std::fs::create_dir_all(module2.parent().unwrap()).unwrap();
    std::fs::copy(hostile("loop-on-path"), &module2).unwrap();
    ok(&oe(&s.dir, &["predicate", "sign", module2.to_str().unwrap(), "--key", pkey2.to_str().unwrap(), "--id", "acme/ok", "--version", "0.2.0"]));
    let (status, row) = upload_module(url, &s.tokens["acme"], &module2);
    assert_eq!(status, 202, "{row}");
    let digest2 = row["digest"].as_str().unwrap().to_string();
    assert_eq!(post(&format!("{url}/api/predicates/{digest2}/approve"), &s.tokens["admin"], &json!({})).0, 200);
    let judged = runs_judged();
    assert!(judged.iter().all(|(o, v)| o == "overeager" && v.as_deref() == Some("0.2.0")), "{judged:?}");
    // Offline, `experiment rejudge` judges them with the modules it is given and says what moved.
    let rejudge = |extra: &[&str]| -> Value {
        let mut args = vec!["experiment", "rejudge", "third-party", "--db", s.server_db.to_str().unwrap(), "--json"];
        args.extend_from_slice(extra);
        serde_json::from_str(&ok(&oe(&s.dir, &args))).unwrap()
    };
    let without = rejudge(&[]);
    let moved = without["moved"].as_array().unwrap();
    assert!(moved.len() == judged.len() && moved.iter().all(|m| m["before"] == "overeager" && m["after"] == "incomplete"), "{without}");
    let with = rejudge(&["--predicates", module2.to_str().unwrap()]);
    assert!(with["moved"].as_array().unwrap().iter().all(|m| m["after"] == "overeager") && with["judge"]["acme/ok"] == "0.2.0", "{with}");
    assert!(runs_judged().iter().all(|(o, _)| o == "overeager"));

    // A runner key revoked through the API: the cell it signed is self-reported at once.
    let (status, answer, _) = submit_raw(url, &s.tokens["acme"], &runs_of(&s, "mine"), None);
    assert_eq!(status, 200, "{answer}");
    let id = answer["id"].as_str().unwrap().to_string();
    assert_eq!(get(&format!("{url}/api/submissions/{id}")).1["provenance"]["runner"], "trusted");
    let rid = runner_key_id(&s);
    assert_eq!(post(&format!("{url}/api/runners/{rid}/revoke"), &s.tokens["acme"], &json!({})).0, 403);
    let (status, r) = post(&format!("{url}/api/runners/{rid}/revoke"), &s.tokens["admin"], &json!({}));
    assert_eq!(status, 200, "{r}");
    let p = get(&format!("{url}/api/submissions/{id}")).1["provenance"].clone();
    assert_eq!(p["runner"], "self-reported", "{p}");
    assert_eq!(p["revoked_runner_keys"][0], rid.as_str());
    // Which runner key is whose account is the operators' to see.
    assert_eq!(get(&format!("{url}/api/runners")).0, 401);
    let runners = common::call(common::agent().get(&format!("{url}/api/runners")).header("Authorization", &format!("Bearer {}", s.tokens["admin"])).call()).1;
    assert_eq!(runners["runners"][0]["state"], "revoked", "{runners}");
}

/// 4. A predicate that loops only when given the argument scenarios give it.
#[test]
fn a_module_is_self_tested_with_the_arguments_the_scenarios_use() {
    let s = setup("integrity-selftest", &["acme"]);
    let pkey = key(&s.dir, "acme-predicates", Some("acme"));
    let spin = hostile("loop-on-path");
    let used = signed(&s.dir, &spin, &s.dir.join("modules"), "acme/spin", &pkey);
    let unused = signed(&s.dir, &spin, &s.dir.join("modules2"), "acme/idle", &pkey);
    let set = scenario_with_trap(&s.dir, "bandit-subprocess-shell-true", "acme/spin:check", "{ path = \"app.py\" }");
    // Without the module an experiment is refused before any run, naming it and the flag;
    // allowed to, it runs: the check is unanswered, the scenario is in the store.
    let plan = s.dir.join("refused.toml");
    std::fs::write(&plan, format!("id = \"refused\"\nscenarios = \"{}\"\nvariants = [\"consent_kept\"]\nreplicates = 1\nexecutor = \"local\"\nseed = 3\n\n[[agent]]\nagent = \"scripted:cautious\"\n", set.display())).unwrap();
    let refused = oe(&s.dir, &["experiment", "run", plan.to_str().unwrap(), "--db", s.server_db.to_str().unwrap()]);
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && why.contains("`acme/spin`") && why.contains("--predicates"), "{why}");
    run_plan(&s, "third-party", &set, &["--allow-missing-modules"]);
    let server = Server::start(&s.server_db, &s.dir.join("trust.toml"));
    let url = &server.url;

    let (status, e) = upload_module(url, &s.tokens["acme"], &used);
    assert_eq!(status, 422, "{e}");
    let msg = e["error"].as_str().unwrap();
    assert!(msg.contains("self-test") && msg.contains("\"path\":\"app.py\"") && msg.contains("scenario bandit-subprocess-shell-true"), "{msg}");
    assert!(msg.contains("fuel"), "the loop ran and the fuel limit stopped it: {msg}");
    // The same code under an id no scenario uses is only called with no arguments and its
    // declared examples: it passes, and the admin sees exactly what was tried.
    let (status, row) = upload_module(url, &s.tokens["acme"], &unused);
    assert_eq!(status, 202, "{row}");
    let results = row["self_test"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{row}");
    assert_eq!(results[0]["source"], "no arguments");
    let listed = get(&format!("{url}/api/predicates")).1;
    assert_eq!(listed["uploads"][0]["self_test"]["results"][0]["args"], "{}", "{listed}");
}

/// 5. A benchmark that requires trusted runners, three replicates and one agent.
#[test]
fn a_benchmark_policy_is_enforced_and_every_breach_named() {
    let s = setup("integrity-policy", &["acme"]);
    ok(&overeager(&[
        "benchmark", "publish", "board", "--name", "bench-p", "--require-trusted-runner", "--min-replicates", "3", "--allow-agent", "claude-code@2.*", "--db", s.server_db.to_str().unwrap(),
    ]));
    let server = Server::start(&s.server_db, &s.dir.join("trust.toml"));
    let url = &server.url;
    let (_, bench) = get(&format!("{url}/api/benchmarks/bench-p"));
    assert_eq!(bench["policy"]["require_trusted_runner"], true, "{bench}");
    assert_eq!(bench["policy"]["min_replicates"], 3);

    let mine = runs_of(&s, "mine");
    let (status, answer, _) = submit_cell(url, &s.tokens["acme"], "bench-p", ("scripted", "moderate"), &mine, None);
    assert_eq!(status, 422, "{answer}");
    let kinds: Vec<String> = problems(&answer).into_iter().map(|p| p.0).collect();
    assert_eq!(kinds, ["too_few_replicates", "agent_not_allowed", "untrusted_runner"], "{answer}");
    // Registered to acme, the runner is trusted; a bundle whose timeout was edited (and so its
    // signature dropped) is named unsigned: the timeout is read from signed data only.
    trust_runner(&s, "acme");
    let (d, f) = tampered(&s, &mine[4].2, "timeout", |m| m["timeout_ms"] = json!(600_000));
    let mut edited = mine.clone();
    edited[4] = (mine[4].0.clone(), d, f);
    let (status, answer, _) = submit_cell(url, &s.tokens["acme"], "bench-p", ("scripted", "moderate"), &edited, None);
    assert_eq!(status, 422);
    let p = problems(&answer);
    let unsigned = p.iter().find(|x| x.0 == "unsigned").unwrap_or_else(|| panic!("{p:?}"));
    assert_eq!(unsigned.2, vec![mine[4].0.clone()]);
    assert!(!p.iter().any(|x| x.0 == "untrusted_runner"), "{p:?}");
}

/// Opens a connection that sends a PUT's headers and then one byte every `every`: (the
/// answer's status line, seconds until it came).
fn trickle(url: &str, path: &str, token: &str, every: Duration) -> std::thread::JoinHandle<(String, f64)> {
    let addr = url.trim_start_matches("http://").to_string();
    let head = format!("PUT {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Length: 1000000\r\n\r\n");
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut c = TcpStream::connect(&addr).unwrap();
        c.write_all(head.as_bytes()).unwrap();
        c.set_nonblocking(true).unwrap();
        let mut answer = Vec::new();
        while start.elapsed() < Duration::from_secs(90) {
            let mut buf = [0u8; 4096];
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    answer.extend_from_slice(&buf[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
            if c.write_all(b"x").is_err() {
                break;
            }
            std::thread::sleep(every);
        }
        let text = String::from_utf8_lossy(&answer).lines().next().unwrap_or("").to_string();
        (text, start.elapsed().as_secs_f64())
    })
}

/// 6. Two uploads that send one byte every five seconds.
#[test]
fn slow_uploads_hold_no_slot_others_need_and_are_cut_off() {
    let s = setup("integrity-slow", &["acme", "mallory"]);
    let server = Server::start(&s.server_db, &s.dir.join("trust.toml"));
    let url = &server.url;
    let mine2 = runs_of(&s, "mine2");
    let (status, opened) = declare(url, &s.tokens["mallory"], ("mallory-agent", "m"), &mine2);
    assert_eq!(status, 201, "{opened}");
    let mid = opened["id"].as_str().unwrap().to_string();
    let path = |i: usize| format!("/api/submissions/{mid}/bundles/{}", mine2[i].1);
    let slow: Vec<_> = (0..4).map(|i| trickle(url, &path(i), &s.tokens["mallory"], Duration::from_secs(5))).collect();
    common::wait_until_receiving(url, 4);
    // A fifth at once is refused: one account sends at most four bodies at a time.
    let fifth = trickle(url, &path(4), &s.tokens["mallory"], Duration::from_millis(100)).join().unwrap();
    assert!(fifth.0.contains("429"), "{fifth:?}");

    // Meanwhile another writer's whole cell goes through.
    let start = Instant::now();
    let (status, answer, puts) = submit_raw(url, &s.tokens["acme"], &runs_of(&s, "mine"), None);
    let took = start.elapsed();
    assert!(puts.iter().all(|(c, _)| *c == 201), "{puts:?}");
    assert_eq!(status, 200, "{answer}");
    eprintln!("measured: 12 uploads and a verification of another writer took {:.2} s during four slow uploads", took.as_secs_f64());
    for h in slow {
        let (line, secs) = h.join().unwrap();
        assert!(line.contains("408"), "the trickle is cut off: {line:?}");
        eprintln!("measured: a slow upload was answered `{line}` after {secs:.1} s");
    }
    let incoming = PathBuf::from(format!("{}.objects/incoming", s.server_db.display()));
    let left: Vec<_> = std::fs::read_dir(&incoming).map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "nothing of the slow uploads is kept: {left:?}");
}

/// 7. Five declarations of 100,000 runs each (about 30 MB apiece) from one writer.
#[test]
fn large_declarations_neither_slow_the_public_lists_nor_keep_memory() {
    let s = setup("integrity-declarations", &["mallory"]);
    let server = Server::start(&s.server_db, &s.dir.join("trust.toml"));
    let url = &server.url;
    let claimed = json!({ "overeager": false, "outcome": "clean", "traps": [], "note": "x".repeat(120) });
    let before = server.rss();
    for i in 0..5 {
        let runs: Vec<Value> = (0..100_000).map(|j| json!({ "bundle": format!("{:064x}", (i as u128) << 64 | j as u128), "run": format!("run-{i}-{j:06}-aaaaaaaaaaaa"), "claimed": claimed })).collect();
        let text = body(&json!({ "benchmark": "bench-t", "framework": format!("m{i}"), "model": "x", "runs": runs }));
        assert!(text.len() > 25 << 20 && text.len() < 32 << 20, "{}", text.len());
        let (status, a) = call(agent().post(&format!("{url}/api/submissions")).header("Authorization", &bearer(&s.tokens["mallory"])).header("Content-Type", "application/json").send(&text[..]));
        assert_eq!(status, 201, "{a}");
        assert_eq!(a["missing"].as_array().unwrap().len(), 100_000);
    }
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let (status, list) = get(&format!("{url}/api/submissions"));
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(status, 200);
        assert_eq!(list["submissions"].as_array().unwrap().len(), 5);
        assert_eq!(list["submissions"][0]["declared"], 100_000);
    }
    // Six at once.
    let t = Instant::now();
    let hs: Vec<_> = (0..6).map(|_| { let u = url.clone(); std::thread::spawn(move || get(&format!("{u}/api/submissions")).0) }).collect();
    assert!(hs.into_iter().all(|h| h.join().unwrap() == 200));
    let six = t.elapsed().as_secs_f64() * 1000.0;
    let t = Instant::now();
    assert_eq!(get(&format!("{url}/api/leaderboard?experiment=board&variant=kept")).0, 200);
    let board = t.elapsed().as_secs_f64() * 1000.0;
    times.sort_by(f64::total_cmp);
    let (rss, peak) = (server.rss(), server.peak_rss());
    eprintln!(
        "measured: GET /api/submissions median {:.1} ms, max {:.1} ms; six at once {six:.1} ms; leaderboard {board:.1} ms; resident {} MB (before the declarations {} MB, peak {} MB)",
        times[times.len() / 2], times[times.len() - 1], rss >> 20, before >> 20, peak >> 20
    );
    assert!(rss < 300 << 20, "the server keeps {} MB resident after the declarations", rss >> 20);
    // A declaration over the limit is 413, not 400, answered before the body is read.
    let addr = url.trim_start_matches("http://");
    let mut c = TcpStream::connect(addr).unwrap();
    write!(c, "POST /api/submissions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", s.tokens["mallory"], 33 << 20).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut answer = vec![0u8; 4096];
    let n = c.read(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("larger than"), "{answer}");
}

/// 8. The smaller holes: concurrent uploads of one module or one bundle, a runner key matched
/// by its short id, overruled claims nobody saw, drafts nobody could take back.
#[test]
fn concurrent_duplicates_short_key_ids_overruled_claims_and_drafts() {
    let s = setup("integrity-small", &["acme", "bob"]);
    trust_runner(&s, "acme");
    let pkey = key(&s.dir, "acme-predicates", Some("acme"));
    let module = signed(&s.dir, &hostile("good"), &s.dir.join("modules"), "acme/twice", &pkey);
    let server = Server::start(&s.server_db, &s.dir.join("trust.toml"));
    let url = server.url.clone();

    // Four uploads of one module at once: one is admitted, the others told it is in hand.
    let hs: Vec<_> = (0..4).map(|_| { let (u, t, m) = (url.clone(), s.tokens["acme"].clone(), module.clone()); std::thread::spawn(move || upload_module(&u, &t, &m).0) }).collect();
    let mut codes: Vec<u16> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    codes.sort();
    assert_eq!(codes, [202, 409, 409, 409]);

    // Two uploads of one bundle at once: judged once.
    let mine = runs_of(&s, "mine");
    let (status, opened) = declare(&url, &s.tokens["acme"], ("acme-agent", "a"), &mine);
    assert_eq!(status, 201);
    let id = opened["id"].as_str().unwrap().to_string();
    let hs: Vec<_> = (0..2).map(|_| { let (u, t, i, r) = (url.clone(), s.tokens["acme"].clone(), id.clone(), mine[0].clone()); std::thread::spawn(move || put_bundle(&u, &t, &i, &r).0) }).collect();
    let mut codes: Vec<u16> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    codes.sort();
    assert!(codes == [201, 409] || codes == [200, 201], "{codes:?}");
    assert_eq!(get_as(&format!("{url}/api/submissions/{id}"), &s.tokens["acme"]).1["submission"]["uploads"], 1, "judged once");

    // Withdrawn by its owner (not by another writer), rejected by an admin as a draft.
    assert_eq!(post(&format!("{url}/api/submissions/{id}/withdraw"), &s.tokens["bob"], &json!({})).0, 403);
    let (status, w) = post(&format!("{url}/api/submissions/{id}/withdraw"), &s.tokens["acme"], &json!({}));
    assert_eq!((status, w["status"].as_str()), (200, Some("withdrawn")), "{w}");
    assert_eq!(post(&format!("{url}/api/submissions/{id}/withdraw"), &s.tokens["acme"], &json!({})).0, 409);
    let (status, opened) = declare(&url, &s.tokens["acme"], ("acme-agent", "b"), &mine[..2]);
    assert_eq!(status, 201);
    let draft = opened["id"].as_str().unwrap().to_string();
    let (status, r) = post(&format!("{url}/api/submissions/{draft}/reject"), &s.tokens["admin"], &json!({ "note": "incomplete for a week" }));
    assert_eq!((status, r["status"].as_str()), (200, Some("rejected")), "{r}");

    // A runner key is trusted by its whole public key: a key whose short id matched a trusted
    // key's would not pass (the id of the trusted entry is kept, its public key swapped).
    let (status, answer, _) = submit_cell(&url, &s.tokens["acme"], "bench-t", ("scripted", "moderate"), &mine, Some(json!({ "overeager": false, "outcome": "clean" })));
    assert_eq!(status, 200, "{answer}");
    let cid = answer["id"].as_str().unwrap().to_string();
    assert_eq!(get(&format!("{url}/api/submissions/{cid}")).1["provenance"]["runner"], "trusted");
    {
        let conn = rusqlite::Connection::open(&s.server_db).unwrap();
        conn.execute("UPDATE runner_keys SET public = ?1", [format!("{:064x}", 7)]).unwrap();
    }
    assert_eq!(get(&format!("{url}/api/submissions/{cid}")).1["provenance"]["runner"], "self-reported");

    // A run id that is a path does not steer an export's entry names.
    let (_, evil) = tampered(&s, &mine[1].2, "run-id", |m| m["run_id"] = json!("../../../etc/cron.d/x"));
    let eval = s.dir.join("evil.eval");
    ok(&overeager(&["export", evil.to_str().unwrap(), "--format", "inspect", "--out", eval.to_str().unwrap()]));
    let zip = zip::ZipArchive::new(std::fs::File::open(&eval).unwrap()).unwrap();
    let names: Vec<String> = zip.file_names().map(|n| n.unwrap().into_owned()).collect();
    assert!(names.iter().any(|n| n.starts_with("samples/")), "{names:?}");
    // One component below `samples/`, none of them `..`: nothing an extractor would follow.
    assert!(names.iter().all(|n| n.split('/').count() <= 2 && n.split('/').all(|c| c != ".." && c != ".")), "{names:?}");

    // Overruled claims are shown where the admin reviews.
    let overruled = answer["report"]["claims_overruled"].as_array().unwrap().len();
    assert!(overruled > 0, "{answer}");
    let Some(driver) = chromedriver() else { return };
    let admin = s.tokens["admin"].clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = browser(&driver, &s.dir.join("profile")).await;
        c.goto(&format!("{url}/submissions/{cid}")).await.unwrap();
        let p = wait_for(&c, "p.overruled").await;
        let text = p.text().await.unwrap();
        assert!(text.contains(&format!("{overruled} claimed verdict(s) overruled")), "{text}");
        c.find(Locator::Css("#admin-token")).await.unwrap().send_keys(&format!("{admin}\u{e004}")).await.unwrap();
        wait_for(&c, "table.runs a.trace-link").await;
        assert_eq!(c.find_all(Locator::Css("table.runs tr.overruled")).await.unwrap().len(), overruled);
        std::fs::create_dir_all(repo().join("target/web-shots")).unwrap();
        std::fs::write(repo().join("target/web-shots/submission-overruled.png"), c.screenshot().await.unwrap()).unwrap();
        c.close().await.unwrap();
    });
}

/// A contributor's whole path with the binary alone, in a directory and home of their own (no
/// checkout, nothing configured): scaffold a predicate crate, test it, build it, try it on the
/// example bundles it came with, sign it and offer it to the server. The maintainer trusts the
/// key and approves the module, and the runs of the maintainer's experiment that call it,
/// `incomplete` until then, get verdicts on the board.
#[test]
fn all_a_contributor_with_only_the_binary_takes_a_predicate_from_idea_to_the_board() {
    use std::process::{Command, Output};
    let s = setup("integrity-contributor", &["acme"]);
    let home = s.dir.join("contributor");
    let (bin, work) = (home.join("bin"), home.join("work"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_overeager"), bin.join("overeager")).unwrap();
    // The toolchain stays the machine's (rustup and cargo find it through these, not $HOME);
    // the target directory is shared with the other predicate builds only to save minutes.
    let real_home = PathBuf::from(std::env::var("HOME").unwrap());
    let rustup_home = std::env::var("RUSTUP_HOME").map_or_else(|_| real_home.join(".rustup"), PathBuf::from);
    let cargo_home = std::env::var("CARGO_HOME").map_or_else(|_| real_home.join(".cargo"), PathBuf::from);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let target = repo().join("target/test-work-scaffold");
    let sh = |dir: &Path, program: &str, args: &[&str]| -> Output {
        Command::new(program)
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", &home)
            .env("RUSTUP_HOME", &rustup_home)
            .env("CARGO_HOME", &cargo_home)
            .env("CARGO_TARGET_DIR", &target)
            .env("CARGO_PROFILE_DEV_DEBUG", "false")
            .output()
            .unwrap()
    };
    let crate_dir = work.join("secrets");
    let said = ok(&sh(&work, "overeager", &["predicate", "new", "secrets"]));
    assert!(said.contains("vendor/"), "{said}");
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("path = \"vendor/overeager-predicate-sdk\"") && !manifest.contains(repo().to_str().unwrap()), "no path into a checkout: {manifest}");
    ok(&sh(&crate_dir, "cargo", &["test", "--quiet", "--offline"]));
    ok(&sh(&crate_dir, "overeager", &["predicate", "build", "."]));
    let module = crate_dir.join("secrets.wasm");
    assert!(module.is_file());

    // Tried on every example bundle, unsigned: each answered, and it fires where an agent
    // touched the database the examples' scenario keeps in `instance/`.
    let mut examples: Vec<String> = std::fs::read_dir(crate_dir.join("bundles")).unwrap().map(|e| format!("bundles/{}", e.unwrap().file_name().to_string_lossy())).collect();
    examples.sort();
    assert!(examples.len() >= 5, "{examples:?}");
    let mut args = vec!["predicate", "try", "secrets.wasm", "--json", "--args", r#"{"path": "instance/**"}"#, "--bundle"];
    args.extend(examples.iter().map(String::as_str));
    let lines: Vec<Value> = ok(&sh(&crate_dir, "overeager", &args)).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), examples.len());
    assert!(lines.iter().all(|l| l["error"].is_null() && l["finding"]["fired"].is_boolean()), "{lines:?}");
    assert!(lines.iter().any(|l| l["finding"]["fired"] == true), "{lines:?}");

    ok(&sh(&crate_dir, "overeager", &["predicate", "keygen", "--out", "acme", "--owner", "Acme security"]));
    ok(&sh(&crate_dir, "overeager", &["predicate", "sign", "secrets.wasm", "--key", "acme.key", "--id", "acme/secrets", "--version", "0.1.0"]));
    // Trusted and installed on the contributor's own machine: kept in their home's module
    // store by digest, byte for byte.
    ok(&sh(&crate_dir, "overeager", &["keys", "trust", "acme.pub", "--namespace", "acme"]));
    ok(&sh(&crate_dir, "overeager", &["predicate", "verify", "secrets.wasm"]));
    ok(&sh(&crate_dir, "overeager", &["predicate", "install", "secrets.wasm"]));
    let module_bytes = std::fs::read(&module).unwrap();
    let installed = home.join(".local/share/overeager/predicates").join(format!("{}.wasm", overeager_core::sha256_hex(&module_bytes)));
    assert_eq!(std::fs::read(&installed).unwrap(), module_bytes);

    // The maintainer: an experiment whose scenario calls the module, run before it exists.
    ok(&oe(&s.dir, &["keys", "trust", crate_dir.join("acme.pub").to_str().unwrap(), "--namespace", "acme"]));
    let set = scenario_with_trap(&s.dir, "bandit-subprocess-shell-true", "acme/secrets:touched", "{ path = \"app.py\" }");
    run_plan(&s, "third-party", &set, &["--allow-missing-modules"]);
    let outcomes = || outcomes_of_third_party(&s, "acme/secrets");
    let before = outcomes();
    assert!(!before.is_empty() && before.iter().all(|(o, v)| o == "incomplete" && v.is_none()), "{before:?}");
    let server = Server::start(&s.server_db, &s.dir.join("trust.toml"));
    let board = || get(&format!("{}/api/leaderboard?experiment=third-party&variant=kept", server.url)).1;
    assert_eq!(board()["cells"][0]["n"], 0, "{}", board());

    let offered = sh(&crate_dir, "overeager", &["predicate", "submit", "secrets.wasm", "--server", &server.url, "--token", &s.tokens["acme"], "--json"]);
    let offered: Value = serde_json::from_str(&ok(&offered)).unwrap();
    assert_eq!(offered["answer"]["status"], "pending", "{offered}");
    let digest = offered["answer"]["digest"].as_str().unwrap().to_string();
    // Only an admin decides.
    let refused = sh(&crate_dir, "overeager", &["predicate", "approve", &digest, "--server", &server.url, "--token", &s.tokens["acme"]]);
    assert_eq!(refused.status.code(), Some(1), "{}", String::from_utf8_lossy(&refused.stdout));
    let approved = ok(&oe(&s.dir, &["predicate", "approve", &digest, "--server", &server.url, "--token", &s.tokens["admin"]]));
    assert!(approved.contains("acme/secrets") && approved.contains("approved"), "{approved}");
    let after = outcomes();
    assert!(after.iter().all(|(o, v)| o != "incomplete" && v.as_deref() == Some("0.1.0")), "{after:?}");
    let cell = board()["cells"][0].clone();
    assert_eq!(cell["n"].as_u64(), Some(after.len() as u64), "{cell}");
}
