//! Public leaderboard submissions against a real server on loopback: a maintainer's store with
//! a published benchmark, a submitter's store with its own runs, `overeager submit` between
//! them; refusals of incomplete and inconsistent cells, an upload killed half-way and resumed,
//! runner signatures, review, re-judging, publishing, and the review and the ranked cell in
//! headless Chromium.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use common::board::{body, declare_to, problems, runs_of, setup, sha256, submit_cli, submit_raw, tampered};
use common::browser::{browser, chromedriver, wait_for, wait_text};
use common::{Server, agent, call, get, ok, overeager, repo};
use fantoccini::Locator;
use serde_json::{Value, json};

#[test]
fn incomplete_and_inconsistent_cells_are_refused_with_the_runs_named_and_claimed_verdicts_are_ignored() {
    // One writer reopens its submission of the cell with each declaration in turn; `t-sig`
    // is another account.
    let s = setup("board-refusals", &["acme", "t-sig"]);
    let server = Server::start(&s.server_db, &s.dir.join("trust.toml"));
    let url = &server.url;
    let mine = runs_of(&s, "mine");
    assert_eq!(mine.len(), 12);

    // Writes need a token; the benchmark is public.
    let (status, bench) = get(&format!("{url}/api/benchmarks/bench-t"));
    assert_eq!(status, 200);
    assert_eq!(bench["scenarios"].as_array().unwrap().len(), 3);
    let (status, e) = call(agent().post(&format!("{url}/api/submissions")).header("Content-Type", "application/json").send(&body(&json!({ "benchmark": "bench-t", "framework": "scripted", "model": "moderate", "runs": [] }))[..]));
    assert_eq!(status, 401, "{e}");
    assert!(e["error"].as_str().unwrap().contains("Authorization: Bearer"), "{e}");
    let (status, e) = call(agent().post(&format!("{url}/api/submissions")).header("Authorization", &format!("Bearer {}", s.tokens["acme"])).header("Content-Type", "application/json").send(&body(&json!({ "benchmark": "bench-nope", "framework": "scripted", "model": "moderate", "runs": [] }))[..]));
    assert_eq!(status, 404, "{e}");
    assert!(e["error"].as_str().unwrap().contains("bench-t"), "the refusal lists the benchmarks there are: {e}");

    // One run missing: refused, the missing scenario · variant · replicate named.
    let (status, answer, _) = submit_raw(url, &s.tokens["acme"], &mine[1..], None);
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["state"], "draft");
    let p = problems(&answer);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "missing");
    let first = get(&format!("{url}/api/submissions/{}", answer["id"].as_str().unwrap())).1;
    assert!(p[0].1.contains("1 run(s)") && p[0].1.contains("replicate 0"), "{p:?} {first}");

    // A run twice (the same scenario, variant and replicate from a second experiment): refused,
    // both runs named.
    let mine2 = runs_of(&s, "mine2");
    let mut dup = mine.clone();
    dup.push(mine2[0].clone());
    let (status, answer, _) = submit_raw(url, &s.tokens["acme"], &dup, None);
    assert_eq!(status, 422, "{answer}");
    let p = problems(&answer);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "duplicate");
    assert_eq!(p[0].2, vec![mine[0].0.clone(), mine2[0].0.clone()], "{p:?}");

    // A bundle that claims another scenario hash: the upload is refused and the verification
    // names the run.
    let (digest, file) = tampered(&s, &mine[3].2, "hash", |m| m["scenario"]["hash"] = json!("0".repeat(64)));
    let mut hashed = mine.clone();
    hashed[3] = (mine[3].0.clone(), digest, file);
    let (status, answer, puts) = submit_raw(url, &s.tokens["acme"], &hashed, None);
    assert_eq!(puts[3].0, 422, "{:?}", puts[3]);
    assert!(puts[3].1["error"].as_str().unwrap().contains("benchmark `bench-t` has"), "{:?}", puts[3]);
    assert_eq!(status, 422);
    let p = problems(&answer);
    assert_eq!(p.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(), ["wrong_scenario", "missing"], "{p:?}");
    assert_eq!(p[0].2, vec![mine[3].0.clone()]);

    // The agent's version changes mid-cell: refused, the odd run named.
    let (digest, file) = tampered(&s, &mine[5].2, "version", |m| m["agent"]["version"] = json!("9.9.9"));
    let mut versioned = mine.clone();
    versioned[5] = (mine[5].0.clone(), digest, file);
    let (status, answer, puts) = submit_raw(url, &s.tokens["acme"], &versioned, None);
    assert!(puts.iter().all(|(c, _)| *c == 201 || *c == 200), "{puts:?}");
    assert_eq!(status, 422);
    let p = problems(&answer);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "inconsistent_agent");
    assert!(p[0].1.contains("9.9.9"), "{p:?}");
    assert_eq!(p[0].2, vec![mine[5].0.clone()]);

    // Claimed verdicts are ignored: every run claimed clean, the server's own verdicts count.
    let (status, answer, _) = submit_raw(url, &s.tokens["acme"], &mine, Some(json!({ "overeager": false, "outcome": "clean" })));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["state"], "verified");
    let report = &answer["report"];
    let server_overeager = report["overeager"].as_u64().unwrap();
    assert!(server_overeager > 0, "the moderate play fires traps: {report}");
    assert_eq!(report["claims_overruled"].as_array().unwrap().len() as u64, server_overeager, "{report}");
    // Another account cannot declare the same bundles: each counts for the account that
    // uploaded it first.
    let (status, e) = declare_to(url, &s.tokens["t-sig"], "bench-t", ("scripted", "moderate"), &mine, None);
    assert_eq!(status, 409, "{e}");
    assert!(e["error"].as_str().unwrap().contains("first uploaded by another account"), "{e}");

    // A runner-signed bundle changed after signing is refused, whatever the change.
    let dir = s.dir.join("resigned");
    ok(&overeager(&["bundle", "unpack", mine[2].2.to_str().unwrap(), dir.to_str().unwrap()]));
    let prompt = dir.join("prompt.txt");
    let mut text = std::fs::read_to_string(&prompt).unwrap();
    text.push(' ');
    std::fs::write(&prompt, text).unwrap();
    let out = s.dir.join("resigned.oeb");
    ok(&overeager(&["bundle", "pack", dir.to_str().unwrap(), out.to_str().unwrap()]));
    // (mine2[0] is acme's since the duplicate above.)
    let mut altered = mine2[1..].to_vec();
    altered[1] = (mine[2].0.clone(), sha256(&out), out);
    let (status, _, puts) = submit_raw(url, &s.tokens["t-sig"], &altered, None);
    assert_eq!(status, 422);
    assert_eq!(puts[1].0, 422);
    assert!(puts[1].1["error"].as_str().unwrap().contains("`prompt.txt` changed after the runner signed the bundle"), "{:?}", puts[1]);

    // Approval needs an admin token, and a verified submission.
    let subs = get(&format!("{url}/api/submissions")).1;
    let verified = subs["submissions"].as_array().unwrap().iter().find(|x| x["status"] == "verified").unwrap()["id"].as_str().unwrap().to_string();
    let draft = subs["submissions"].as_array().unwrap().iter().find(|x| x["status"] == "draft").unwrap()["id"].as_str().unwrap().to_string();
    let (status, e) = call(agent().post(&format!("{url}/api/submissions/{verified}/approve")).header("Authorization", &format!("Bearer {}", s.tokens["acme"])).send_empty());
    assert_eq!(status, 403, "{e}");
    let (status, e) = call(agent().post(&format!("{url}/api/submissions/{draft}/approve")).header("Authorization", &format!("Bearer {}", s.tokens["admin"])).send_empty());
    assert_eq!(status, 409, "{e}");
    assert!(e["error"].as_str().unwrap().contains("draft"), "{e}");
}

/// A TCP relay in front of the server that lets `allowed` bundle uploads through, then passes
/// only the head of the next one, kills the client (whose pid is in `victim`) and drops both
/// connections: an upload killed half-way.
fn killing_relay(server: &str, allowed: usize, victim: Arc<AtomicU32>) -> String {
    let upstream = server.trim_start_matches("http://").to_string();
    let server = server.to_string();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { continue };
            let mut up = TcpStream::connect(&upstream).unwrap();
            let (mut up_r, mut client_w) = (up.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut up_r, &mut client_w);
            });
            let (seen, victim, server) = (seen.clone(), victim.clone(), server.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 << 10];
                let needle = b"PUT /api/submissions/";
                loop {
                    let n = match client.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let chunk = &buf[..n];
                    if let Some(at) = chunk.windows(needle.len()).position(|w| w == needle) {
                        if seen.fetch_add(1, Ordering::SeqCst) == allowed {
                            // Headers and a little of the body, then the client dies.
                            let cut = (at + 600).min(n);
                            let _ = up.write_all(&chunk[..cut]);
                            let _ = up.flush();
                            // Killed once the server is receiving the body.
                            common::wait_until_receiving(&server, 1);
                            unsafe { libc::kill(victim.load(Ordering::SeqCst) as i32, libc::SIGKILL) };
                            let _ = up.shutdown(std::net::Shutdown::Both);
                            let _ = client.shutdown(std::net::Shutdown::Both);
                            break;
                        }
                    }
                    if up.write_all(chunk).is_err() {
                        break;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn an_upload_killed_half_way_resumes_without_sending_again_what_arrived() {
    let s = setup("board-resume", &["acme"]);
    let server = Server::start(&s.server_db, &s.dir.join("trust.toml"));
    let victim = Arc::new(AtomicU32::new(0));
    let relay = killing_relay(&server.url, 2, victim.clone());
    let mut child = Command::new(env!("CARGO_BIN_EXE_overeager"))
        .args(["submit", "mine", "--cell", "scripted·moderate", "--benchmark", "bench-t", "--server", &relay, "--db", s.client_db.to_str().unwrap()])
        .env("OVEREAGER_TOKEN", &s.tokens["acme"])
        .current_dir(repo())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    victim.store(child.id(), Ordering::SeqCst);
    let status = child.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL), "the client was killed mid-upload");
    let list = get(&format!("{}/api/submissions", server.url)).1;
    let id = list["submissions"][0]["id"].as_str().unwrap().to_string();
    let before = get(&format!("{}/api/submissions/{id}", server.url)).1;
    assert_eq!(before["submission"]["uploads"], 2, "two bundles arrived whole, the third broke off: {}", before["submission"]);
    assert_eq!(before["runs"].as_array().unwrap().len(), 2);
    assert_eq!(before["submission"]["status"], "draft");
    // The server drops the broken body as soon as it sees the connection close.
    let incoming = PathBuf::from(format!("{}.objects/incoming", s.server_db.display()));
    let left = || std::fs::read_dir(&incoming).map(|d| d.count()).unwrap_or(0);
    for _ in 0..50 {
        if left() == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(left(), 0, "the broken upload left nothing in {}", incoming.display());

    // The same command again: the rest only, then verified.
    let out = submit_cli(&s, &server.url, "mine", &s.tokens["acme"]);
    let stdout = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("submission {id} (resumed)")) && stderr.contains("2 on the server already, sending 10"), "{stderr}");
    assert!(stdout.contains("verified: waiting for an admin's review"), "{stdout}");
    let after = get(&format!("{}/api/submissions/{id}", server.url)).1;
    assert_eq!(after["submission"]["uploads"], 12, "nothing was sent twice");
    assert_eq!(after["submission"]["status"], "verified");
}

#[test]
fn an_approved_cell_is_ranked_with_provenance_rejudged_and_published_and_reviewed_in_the_browser() {
    let Some(driver) = chromedriver() else { return };
    let dist = common::dist();
    let s = setup("board-browser", &["acme"]);
    ok(&overeager(&["runner", "trust", s.runner_pub.to_str().unwrap(), "--account", "acme", "--db", s.server_db.to_str().unwrap()]));
    let server = Server::start(&s.server_db, &s.dir.join("trust.toml"));
    let url = server.url.clone();
    let out = submit_cli(&s, &url, "mine", &s.tokens["acme"]);
    let stdout = ok(&out);
    assert!(stdout.contains("verified"), "{stdout}");
    let id = get(&format!("{url}/api/submissions")).1["submissions"][0]["id"].as_str().unwrap().to_string();
    let doc = get(&format!("{url}/api/submissions/{id}")).1;
    assert_eq!(doc["provenance"]["runner"], "trusted", "every bundle is signed by the trusted runner key");
    assert_eq!(doc["provenance"]["versions"].as_array().unwrap().len(), 1);
    let (status, board) = get(&format!("{url}/api/leaderboard?experiment=board&variant=kept"));
    assert_eq!(status, 200);
    assert!(board["submitted"].as_array().unwrap().is_empty(), "not ranked before approval");

    let admin = s.tokens["admin"].clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = browser(&driver, &s.dir.join("profile")).await;
        // The admin reviews the verified submission in the app.
        c.goto(&format!("{url}/submissions/{id}")).await.unwrap();
        wait_for(&c, ".review button.approve").await;
        assert_eq!(c.find(Locator::Css("#submission-status")).await.unwrap().text().await.unwrap(), "verified");
        // Before approval, only the submitter and admins see the bundles.
        assert_eq!(c.find_all(Locator::Css("table.runs a.trace-link")).await.unwrap().len(), 0, "no digests for strangers");
        wait_for(&c, "p.bundles-hidden").await;
        // The admin's token (Tab leaves the field) shows the page as the admin sees it.
        c.find(Locator::Css("#admin-token")).await.unwrap().send_keys(&format!("{admin}\u{e004}")).await.unwrap();
        wait_for(&c, "table.runs a.trace-link").await;
        assert_eq!(c.find_all(Locator::Css("table.runs a.trace-link")).await.unwrap().len(), 12, "every run links to its trace");
        c.find(Locator::Css("#review-note")).await.unwrap().send_keys("complete, trusted runner").await.unwrap();
        std::fs::create_dir_all(repo().join("target/web-shots")).unwrap();
        std::fs::write(repo().join("target/web-shots/submission-review.png"), c.screenshot().await.unwrap()).unwrap();
        c.find(Locator::Css(".review button.approve")).await.unwrap().click().await.unwrap();
        c.wait().at_most(common::browser::WAIT).for_element(Locator::XPath("//span[@id='submission-status' and text()='approved']")).await.unwrap();

        // Ranked on the benchmark's leaderboard, beside the maintainer's cells, with its badges.
        c.goto(&format!("{url}/?experiment=board")).await.unwrap();
        let css = format!("table.board tr.cell.submitted[data-submission='{id}']");
        let text = wait_text(&c, &css, "submitted by acme").await;
        let row = wait_for(&c, &css).await;
        assert!(text.contains("submitted by acme") && text.contains("re-judged") && text.contains("trusted runner"), "{text}");
        // The project's scripted plays are marked as such, submitted or the maintainer's own.
        assert!(text.contains("scripted"), "{text}");
        assert_eq!(c.find_all(Locator::Css("table.board tr.cell .badge.scripted")).await.unwrap().len(), 3);
        let api_board = get(&format!("{url}/api/leaderboard?experiment=board&variant=kept")).1;
        let cell = &api_board["submitted"][0];
        let rate = row.find(Locator::Css("td.rate")).await.unwrap().text().await.unwrap();
        assert_eq!(rate, format!("{:.1}%", cell["rate"].as_f64().unwrap() * 100.0));
        assert_eq!(c.find_all(Locator::Css("table.board tr.cell")).await.unwrap().len(), 3, "two maintainer cells and the submitted one");
        std::fs::write(repo().join("target/web-shots/leaderboard-submitted.png"), c.screenshot().await.unwrap()).unwrap();
        // Its link leads to the submission and on to a run's trace.
        row.find(Locator::Css("a")).await.unwrap().click().await.unwrap();
        wait_for(&c, "table.runs a.trace-link").await.click().await.unwrap();
        wait_for(&c, ".timeline[data-ready=true] .tl-row").await;
        c.close().await.unwrap();
    });
    let doc = get(&format!("{url}/api/submissions/{id}")).1;
    assert_eq!(doc["submission"]["decided_by"], "boss");
    assert_eq!(doc["submission"]["note"], "complete, trusted runner");
    let cell = &get(&format!("{url}/api/leaderboard?experiment=board&variant=kept")).1["submitted"][0];
    for k in ["submitted_by", "approved_by", "benchmark", "runner", "agents", "versions", "executors", "judge"] {
        assert!(!cell["provenance"][k].is_null(), "provenance has {k}: {cell}");
    }

    // Re-judging with the same predicates moves nothing; a verdict made by other predicates
    // (here: one written over in the store) is put right and reported as moved.
    let rejudge = || call(agent().post(&format!("{url}/api/submissions/rejudge")).header("Authorization", &format!("Bearer {admin}")).send_empty());
    let (status, r) = rejudge();
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["submissions"][0]["moved"].as_array().unwrap().len(), 0, "{r}");
    let overeager_bundle = doc["runs"].as_array().unwrap().iter().find(|r| r["outcome"] == "overeager").unwrap()["bundle"].as_str().unwrap().to_string();
    {
        let conn = rusqlite::Connection::open(&s.server_db).unwrap();
        let v: String = conn.query_row("SELECT verdict FROM cell_bundles WHERE bundle = ?1", [&overeager_bundle], |r| r.get(0)).unwrap();
        let mut v: Value = serde_json::from_str(&v).unwrap();
        v["overeager"] = json!(false);
        v["traps"] = json!([]);
        v["outcome"] = json!("clean");
        conn.execute("UPDATE cell_bundles SET verdict = ?2 WHERE bundle = ?1", rusqlite::params![overeager_bundle, v.to_string()]).unwrap();
    }
    let (status, r) = rejudge();
    assert_eq!(status, 200);
    let moved = r["submissions"][0]["moved"].as_array().unwrap();
    assert_eq!(moved.len(), 1, "{r}");
    assert_eq!((moved[0]["bundle"].as_str().unwrap(), moved[0]["before"].as_str().unwrap(), moved[0]["after"].as_str().unwrap()), (overeager_bundle.as_str(), "clean", "overeager"));
    let (status, _) = call(agent().post(&format!("{url}/api/submissions/rejudge")).header("Authorization", &format!("Bearer {}", s.tokens["acme"])).send_empty());
    assert_eq!(status, 403, "re-judging needs an admin token");

    // `publish` includes the approved submission, its page and its traces.
    let site = s.dir.join("site");
    let out = ok(&overeager(&["publish", "--db", s.server_db.to_str().unwrap(), "--out", site.to_str().unwrap(), "--dist", dist.to_str().unwrap(), "--json"]));
    let published: Value = serde_json::from_str(&out).unwrap();
    assert!(published["traces"].as_u64().unwrap() >= 12 + 24);
    let list: Value = serde_json::from_slice(&std::fs::read(site.join("api/submissions.json")).unwrap()).unwrap();
    assert_eq!(list["submissions"][0]["id"], id.as_str());
    assert!(site.join(format!("submissions/{id}/index.html")).is_file());
    let report: Value = serde_json::from_slice(&std::fs::read(site.join("api/experiments/board/report.json")).unwrap()).unwrap();
    assert_eq!(report["submitted"][0]["provenance"]["runner"], "trusted");
    assert!(site.join(format!("api/bundles/{overeager_bundle}.json")).is_file());
}
