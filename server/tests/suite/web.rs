//! The web app in headless Chromium, driven through chromedriver (fantoccini), against a real
//! server over a real store; and the published static site from a plain file server. Needs
//! `chromium` and `chromedriver` (the test script installs them); without them the test fails
//! when `CI` is set and is skipped otherwise.

use crate::common;


use common::browser::{Driver, browser, chromedriver, wait_for, wait_text};
use common::{Server, demo_store, ok, overeager, repo, scratch};
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, Locator};
use serde_json::Value;

/// The browser's console log (chromedriver's `se/log` endpoint).
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }
    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.into()))
    }
}

/// chromedriver for the web app's tests, which need the app built.
fn web_driver() -> Option<Driver> {
    let driver = chromedriver()?;
    common::dist();
    Some(driver)
}

/// Console entries at level SEVERE (errors), with their messages.
async fn console_errors(c: &Client) -> Vec<String> {
    let log = c.issue_cmd(BrowserLog).await.expect("the browser log");
    log.as_array().cloned().unwrap_or_default().into_iter().filter(|e| e["level"] == "SEVERE").map(|e| e["message"].as_str().unwrap_or("").to_string()).collect()
}

async fn shot(c: &Client, name: &str) {
    let dir = repo().join("target/web-shots");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), c.screenshot().await.unwrap()).unwrap();
}

fn api(url: &str) -> Value {
    let mut r = ureq::get(url).call().unwrap_or_else(|e| panic!("{url}: {e}"));
    serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap()
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

#[test]
fn the_app_shows_the_leaderboard_a_run_its_evidence_and_the_consent_block() {
    let Some(driver) = web_driver() else { return };
    let dir = scratch("web");
    let db = demo_store(&dir);
    let server = Server::start(&db, &dir.join("trust.toml"));
    let board = api(&format!("{}/api/leaderboard?experiment=demo&variant=kept", server.url));
    let expected: Vec<(String, String)> = board["cells"].as_array().unwrap().iter().map(|c| (format!("{} · {}", c["framework"].as_str().unwrap(), c["model"].as_str().unwrap()), pct(c["rate"].as_f64().unwrap()))).collect();
    let scenario = api(&format!("{}/api/scenarios", server.url))["scenarios"][0]["hash"].as_str().unwrap().to_string();

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = browser(&driver, &dir.join("profile")).await;
        // Leaderboard: the expected cells with the API's rates; simulated cells labelled.
        c.goto(&format!("{}/", server.url)).await.unwrap();
        wait_for(&c, "table.board tr.cell").await;
        let mut shown = Vec::new();
        for row in c.find_all(Locator::Css("table.board tr.cell")).await.unwrap() {
            let agent = row.attr("data-agent").await.unwrap().unwrap();
            let rate = row.find(Locator::Css("td.rate")).await.unwrap().text().await.unwrap();
            // Scripted and simulated agents use no provider's model: no tokens, no cost.
            for usage in ["td.tokens", "td.cost"] {
                assert_eq!(row.find(Locator::Css(usage)).await.unwrap().text().await.unwrap(), "—", "{agent}: {usage}");
            }
            shown.push((agent, rate));
        }
        let head = c.find(Locator::Css("table.board thead")).await.unwrap().text().await.unwrap();
        // (The header is shown in capitals.)
        let head = head.to_lowercase();
        assert!(head.contains("tokens/run") && head.contains("cost/run"), "{head}");
        assert_eq!(shown, expected, "the leaderboard shows the API's cells in its order");
        let sim = c.find_all(Locator::Css("tr.cell .badge.sim")).await.unwrap().len();
        assert_eq!(sim, 2, "the two simulated policies are labelled");
        // What explains the spread, under the table, from the report, linked to its figure.
        let terms = wait_text(&c, "table.variance tbody", "Framework").await;
        assert!(terms.contains("Scenario") && terms.contains("residual"), "{terms}");
        let link = c.find(Locator::Css("a.figure-link")).await.unwrap().attr("href").await.unwrap().unwrap();
        assert_eq!(link, "/plots?experiment=demo#variance");
        let svg = common::get_text(&format!("{}/api/experiments/demo/plots/variance.svg", server.url));
        assert!(svg.contains("What explains the spread"), "the figure it links to is served");
        shot(&c, "leaderboard.png").await;
        c.find(Locator::XPath("//button[contains(., 'stripped')]")).await.unwrap().click().await.unwrap();
        wait_for(&c, "table.board[data-variant=consent_stripped] tr.cell").await;
        assert!(c.current_url().await.unwrap().as_str().contains("variant=stripped"), "the variant is in the URL (deep link)");

        // A click on a cell lists its runs; a click on a run opens its trace.
        c.find(Locator::Css("tr.cell[data-agent='scripted · aggressive'] a")).await.unwrap().click().await.unwrap();
        let link = wait_for(&c, "a.run-link").await;
        link.click().await.unwrap();
        wait_for(&c, ".timeline[data-ready=true] .tl-row").await;
        assert_eq!(c.find(Locator::Css(".verdict")).await.unwrap().text().await.unwrap(), "OVEREAGER");
        // The trace offers the run to other tools, from the live API.
        let mut hrefs = Vec::new();
        for link in c.find_all(Locator::Css("a.export-link")).await.unwrap() {
            hrefs.push(link.attr("href").await.unwrap().unwrap());
        }
        assert_eq!(hrefs.len(), 2, "{hrefs:?}");
        assert!(hrefs[0].ends_with("/export?format=atif") && hrefs[1].ends_with("/export?format=inspect"), "{hrefs:?}");

        // The run is marked as a scripted play's.
        assert_eq!(c.find(Locator::Css(".facts .player-mark.scripted")).await.unwrap().text().await.unwrap(), "scripted play");
        let trace_url = c.current_url().await.unwrap();
        // A fired trap links to its evidence, a real link: the event is selected, marked and in view.
        let ev = wait_for(&c, ".trap .evidence-link").await;
        let seq = ev.attr("data-seq").await.unwrap().unwrap();
        assert_eq!(ev.attr("href").await.unwrap().unwrap(), format!("?event={seq}"));
        ev.click().await.unwrap();
        let row = wait_for(&c, &format!(".tl-row.selected.evidence[data-seq='{seq}']")).await;
        assert!(row.is_displayed().await.unwrap());
        assert!(row.find(Locator::Css(".flag")).await.is_ok(), "the evidence row names its trap");
        let detail = c.find(Locator::Css(".tl-detail pre")).await.unwrap().text().await.unwrap();
        assert!(detail.contains(&format!("\"seq\": {seq}")), "{detail}");
        shot(&c, "trace.png").await;

        // Keyboard: j moves to the next event.
        c.execute("document.querySelector('.timeline').focus()", vec![]).await.unwrap();
        c.find(Locator::Css(".timeline")).await.unwrap().send_keys("j").await.unwrap();
        let next = wait_for(&c, ".tl-row.selected").await.attr("data-seq").await.unwrap().unwrap();
        assert_eq!(next.parse::<u64>().unwrap(), seq.parse::<u64>().unwrap() + 1);
        // The channel filter hides the other channels.
        c.find(Locator::Css("label.chan.fswatch input")).await.unwrap().click().await.unwrap();
        c.find(Locator::Css("label.chan.agent input")).await.unwrap().click().await.unwrap();
        let rows = c.find_all(Locator::Css(".tl-row")).await.unwrap();
        assert!(!rows.is_empty());
        for r in rows {
            assert!(r.attr("class").await.unwrap().unwrap().contains("shell"));
        }
        // The trace's state is in the URL: the selected event and the channels shown.
        let url = c.current_url().await.unwrap();
        let query: std::collections::BTreeMap<String, String> = url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        assert_eq!((query.get("event").map(String::as_str), query.get("ch").map(String::as_str)), (Some(next.as_str()), Some("shell")), "{url}");
        // A deep link opens with that event selected and in view.
        let mut deep = trace_url.clone();
        deep.set_query(Some(&format!("event={seq}")));
        c.goto(deep.as_str()).await.unwrap();
        let row = wait_for(&c, &format!(".tl-row.selected[data-seq='{seq}']")).await;
        assert!(row.is_displayed().await.unwrap());
        let in_view = c.execute("const r = document.querySelector('.tl-row.selected').getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight;", vec![]).await.unwrap();
        assert_eq!(in_view, Value::Bool(true), "the linked event is scrolled into view");
        shot(&c, "trace-deep-link.png").await;
        // And the filters of a link are the page's.
        deep.set_query(Some("ch=shell,fswatch&op=exec"));
        c.goto(deep.as_str()).await.unwrap();
        wait_for(&c, ".timeline[data-ready=true] .tl-row").await;
        assert_eq!(c.find(Locator::Css("label.chan.agent input")).await.unwrap().prop("checked").await.unwrap().as_deref(), Some("false"));
        assert_eq!(c.find(Locator::Css("select.op-filter")).await.unwrap().prop("value").await.unwrap().as_deref(), Some("exec"));
        for r in c.find_all(Locator::Css(".tl-row")).await.unwrap() {
            assert!(r.find(Locator::Css(".op")).await.unwrap().text().await.unwrap() == "exec");
        }
        // The run list marks every scripted and simulated run.
        let listed = api(&format!("{}/api/runs?experiment=demo", server.url));
        let players = listed["runs"].as_array().unwrap().iter().filter(|r| {
            let (agent, model) = (r["agent"].as_str().unwrap_or(""), r["model"].as_str().unwrap_or(""));
            agent.starts_with("sim:") || agent.starts_with("scripted:") || model.starts_with("scripted-")
        }).count();
        c.goto(&format!("{}/runs?experiment=demo", server.url)).await.unwrap();
        wait_for(&c, "tr.run").await;
        let mut marks = Vec::new();
        for m in c.find_all(Locator::Css("tr.run .player-mark")).await.unwrap() {
            marks.push(m.text().await.unwrap());
        }
        assert!(players > 0 && marks.len() == players, "{players} runs to mark: {marks:?}");
        assert!(marks.iter().any(|m| m == "scripted play") && marks.iter().any(|m| m == "simulated"), "{marks:?}");
        // A real CLI's run reads as a conversation: each model call, its answer and timing.
        let real_runs = api(&format!("{}/api/runs?experiment=demo-real", server.url));
        let real = real_runs["runs"].as_array().unwrap().iter().find(|r| r["agent"].as_str().unwrap_or("").starts_with("claude-code:") && r["bundle"].is_string()).expect("the demo has real CLIs' runs").clone();
        c.goto(&format!("{}/runs/{}?tab=conversation", server.url, real["id"].as_str().unwrap())).await.unwrap();
        wait_for(&c, ".conversation li.call .tool-call").await;
        wait_text(&c, ".conversation-total", "model call").await;
        let calls = c.find_all(Locator::Css(".conversation li.call")).await.unwrap().len();
        let records = common::get_text(&format!("{}/api/bundles/{}/raw/model", server.url, real["bundle"].as_str().unwrap()));
        assert_eq!(calls, records.lines().filter(|l| !l.trim().is_empty()).count(), "one entry per model call");
        assert!(wait_for(&c, ".conversation li.call .latency").await.text().await.unwrap().ends_with(" s"));
        shot(&c, "conversation.png").await;

        // Search: `cmd:"…"` lists exactly the runs whose events hold the phrase, as a scan of
        // every run's bundle finds them; an event found links to that event in its trace.
        let mut holding: std::collections::BTreeMap<&str, std::collections::BTreeSet<String>> = Default::default();
        let phrases = ["rm -rf", "rm -f"];
        for exp in api(&format!("{}/api/experiments", server.url)).as_array().unwrap() {
            let runs = api(&format!("{}/api/runs?experiment={}&limit=5000", server.url, exp["id"].as_str().unwrap()));
            for r in runs["runs"].as_array().unwrap() {
                let Some(digest) = r["bundle"].as_str() else { continue };
                let chunks = api(&format!("{}/api/bundles/{digest}", server.url))["chunks"].as_u64().unwrap();
                for k in 0..chunks {
                    for e in api(&format!("{}/api/bundles/{digest}/events/{k}", server.url)).as_array().unwrap() {
                        let cmd = e["command"].as_str().map(str::to_string).or_else(|| e["argv"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "))).unwrap_or_default();
                        for p in phrases {
                            if cmd.contains(p) {
                                holding.entry(p).or_default().insert(r["id"].as_str().unwrap().to_string());
                            }
                        }
                    }
                }
            }
        }
        assert!(!holding.is_empty(), "the demo's runs remove files with rm");
        for p in phrases {
            let expected = holding.get(p).cloned().unwrap_or_default();
            let q = format!("cmd:\"{p}\"");
            let found = api(&format!("{}/api/search?limit=500&q={}", server.url, url::form_urlencoded::byte_serialize(q.as_bytes()).collect::<String>()));
            let ids: std::collections::BTreeSet<String> = found["runs"].as_array().unwrap().iter().map(|h| h["run"]["id"].as_str().unwrap().to_string()).collect();
            assert_eq!((found["total"].as_u64().unwrap() as usize, &ids), (expected.len(), &expected), "{q}");
            let mut page = server.url.parse::<url::Url>().unwrap();
            page.set_path("/search");
            page.query_pairs_mut().append_pair("q", &q);
            c.goto(page.as_str()).await.unwrap();
            wait_for(&c, ".search-total").await;
            let mut shown = std::collections::BTreeSet::new();
            for hit in c.find_all(Locator::Css("li.search-hit")).await.unwrap() {
                shown.insert(hit.attr("data-run").await.unwrap().unwrap());
            }
            assert!(shown.len() == expected.len().min(100) && shown.is_subset(&expected), "{q}: the page lists the runs found: {shown:?}");
            if !expected.is_empty() {
                let marked = c.find(Locator::Css("li.search-hit mark.hit")).await.unwrap().text().await.unwrap();
                assert_eq!(marked, p, "the phrase is marked in the event");
            }
        }
        shot(&c, "search.png").await;
        let link = c.find(Locator::Css("li.search-hit a.event-link")).await.unwrap();
        let seq = link.attr("data-seq").await.unwrap().unwrap();
        link.click().await.unwrap();
        wait_for(&c, &format!(".tl-row.selected[data-seq='{seq}']")).await;
        // A query that does not parse is refused, saying where and why.
        let (status, body) = common::get(&format!("{}/api/search?q=ls%20colour:red", server.url));
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].as_str().unwrap().contains("at character 4: no field `colour:`"), "{body}");

        // Compare: a consent pair whose agents took different steps, side by side from its
        // trace's link; a step only one side took is marked.
        let steps_of = |id: &str| -> Vec<String> {
            let digest = api(&format!("{}/api/runs/{id}", server.url))["run"]["bundle"].as_str().unwrap().to_string();
            let chunks = api(&format!("{}/api/bundles/{digest}", server.url))["chunks"].as_u64().unwrap();
            (0..chunks)
                .flat_map(|k| api(&format!("{}/api/bundles/{digest}/events/{k}", server.url)).as_array().unwrap().clone())
                .filter(|e| e["channel"] == "agent" && !["start", "message", "result", "unknown"].contains(&e["op"].as_str().unwrap()))
                .map(|e| format!("{} {}", e["op"], e["command"]))
                .collect()
        };
        let demo_runs = api(&format!("{}/api/runs?experiment=demo&limit=5000", server.url));
        let (a, b) = demo_runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["variant"] == "consent_kept" && r["bundle"].is_string())
            .find_map(|r| {
                let a = r["id"].as_str().unwrap().to_string();
                let b = api(&format!("{}/api/runs/{a}", server.url))["partner"].as_str()?.to_string();
                (steps_of(&a).len() != steps_of(&b).len()).then_some((a, b))
            })
            .expect("a consent pair of the demo whose agents took a different number of steps");
        c.goto(&format!("{}/runs/{a}", server.url)).await.unwrap();
        assert_eq!(wait_for(&c, "a.partner-link").await.attr("href").await.unwrap().unwrap(), format!("/runs/{b}"));
        c.find(Locator::Css(".pair a.compare-link")).await.unwrap().click().await.unwrap();
        wait_for(&c, "table.compare-steps tbody tr").await;
        assert_eq!(c.current_url().await.unwrap().query(), Some(format!("a={a}&b={b}").as_str()));
        let heads = c.find_all(Locator::Css(".compare-head h2")).await.unwrap();
        assert_eq!((heads[0].text().await.unwrap(), heads[1].text().await.unwrap()), (a.clone(), b.clone()), "both traces, side by side");
        let only = c.find_all(Locator::Css("table.compare-steps tr.only-a, table.compare-steps tr.only-b")).await.unwrap();
        assert!(!only.is_empty(), "a step only one side took is marked");
        let gap = only[0].find(Locator::Css("td.gap")).await;
        assert!(gap.is_ok(), "the other side of a one-sided step is empty");
        shot(&c, "compare.png").await;

        // The scenario page highlights the consent block in the kept prompt only.
        c.goto(&format!("{}/scenarios/{scenario}", server.url)).await.unwrap();
        let mark = wait_for(&c, "mark.consent").await;
        assert!(mark.text().await.unwrap().contains("Scope of consent"));
        assert_eq!(c.find_all(Locator::Css("mark.consent")).await.unwrap().len(), 1, "only the kept prompt has the block");
        shot(&c, "scenario.png").await;
        for page in ["/matrix", "/plots", "/predicates", "/transfer", "/submissions", "/runs?outcome=overeager"] {
            c.goto(&format!("{}{page}", server.url)).await.unwrap();
            wait_for(&c, "main section h1").await;
        }

        let errors = console_errors(&c).await;
        assert!(errors.is_empty(), "the console has errors: {errors:#?}");
        c.close().await.unwrap();
    });
}

#[test]
fn the_published_site_works_from_a_plain_file_server() {
    let Some(driver) = web_driver() else { return };
    let dir = scratch("web-publish");
    let db = demo_store(&dir);
    let site = dir.join("site");
    let out = ok(&overeager(&["publish", "--db", db.to_str().unwrap(), "--out", site.to_str().unwrap(), "--json"]));
    let p: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(p["runs"], p["traces"], "{p}");
    // Publishing again into the same place is refused; nothing is lost.
    let again = overeager(&["publish", "--db", db.to_str().unwrap(), "--out", site.to_str().unwrap()]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("already exists"));

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // A file server with no knowledge of the app: directories serve their index.html.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let files = axum::Router::new().fallback_service(tower_http::services::ServeDir::new(&site));
        tokio::spawn(async move { axum::serve(listener, files).await.unwrap() });
        let base = format!("http://{addr}");
        let run = serde_json::from_slice::<Value>(&std::fs::read(site.join("api/experiments/demo/runs.json")).unwrap()).unwrap()["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["overeager"] == true)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        let c = browser(&driver, &dir.join("profile")).await;
        c.goto(&format!("{base}/")).await.unwrap();
        wait_for(&c, "table.board tr.cell").await;
        assert!(c.find(Locator::Css("header .badge")).await.unwrap().text().await.unwrap().contains("published"));
        // A deep link straight to a trace.
        c.goto(&format!("{base}/runs/{run}")).await.unwrap();
        wait_for(&c, ".timeline[data-ready=true] .tl-row").await;
        // The run's exports are files of the site, where the page's links point.
        let mut hrefs = Vec::new();
        for link in c.find_all(Locator::Css("a.export-link")).await.unwrap() {
            hrefs.push(link.attr("href").await.unwrap().unwrap());
        }
        assert_eq!(hrefs, [format!("/api/runs/{run}/export/atif.json"), format!("/api/runs/{run}/export/inspect.eval")]);
        let trajectory: Value = serde_json::from_slice(&std::fs::read(site.join(hrefs[0].trim_start_matches('/'))).unwrap()).unwrap();
        assert_eq!(trajectory["extra"]["overeager"]["run_id"], run.as_str());
        assert!(std::fs::read(site.join(hrefs[1].trim_start_matches('/'))).unwrap().starts_with(b"PK"), "an Inspect .eval log is a ZIP");
        let ev = wait_for(&c, ".trap .evidence-link").await;
        let seq = ev.attr("data-seq").await.unwrap().unwrap();
        ev.click().await.unwrap();
        wait_for(&c, &format!(".tl-row.selected.evidence[data-seq='{seq}']")).await;
        c.find(Locator::XPath("//button[contains(., 'raw: shell')]")).await.unwrap().click().await.unwrap();
        wait_text(&c, "pre.raw", "argv").await;
        // Filters on a static site are applied in the browser.
        c.goto(&format!("{base}/runs?outcome=overeager")).await.unwrap();
        wait_for(&c, "a.run-link").await;
        for o in c.find_all(Locator::Css("td.outcome")).await.unwrap() {
            assert_eq!(o.text().await.unwrap(), "overeager");
        }
        let errors = console_errors(&c).await;
        assert!(errors.is_empty(), "the console has errors: {errors:#?}");
        c.close().await.unwrap();
    });
}

/// Presses keys as a user does, on whatever has the focus.
async fn press(c: &Client, keys: &str) {
    use fantoccini::actions::{InputSource, KeyAction, KeyActions};
    let mut actions = KeyActions::new("keys".to_string());
    for k in keys.chars() {
        actions = actions.then(KeyAction::Down { value: k }).then(KeyAction::Up { value: k });
    }
    c.perform_actions(actions).await.unwrap();
}

/// Waits until the page's path is `path`.
async fn wait_path(c: &Client, path: &str) {
    for _ in 0..200 {
        if c.current_url().await.unwrap().path() == path {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the page did not go to {path}: it is at {}", c.current_url().await.unwrap());
}

/// The run a trace page shows, from its URL.
async fn run_shown(c: &Client) -> String {
    let url = c.current_url().await.unwrap();
    url.path().strip_prefix("/runs/").unwrap_or_else(|| panic!("not a trace: {url}")).to_string()
}

#[test]
fn a_reviewer_labels_runs_on_their_traces_through_a_review_queue() {
    let Some(driver) = web_driver() else { return };
    let dir = scratch("web-labels");
    let db = demo_store(&dir);
    let dbs = db.to_str().unwrap();
    let token = ok(&overeager(&["token", "create", "ann", "--reviewer", "--db", dbs])).trim().to_string();
    let server = Server::start(&db, &dir.join("trust.toml"));
    let judged = api(&format!("{}/api/runs?experiment=demo&outcome=overeager&limit=1", server.url))["runs"][0].clone();
    let judged_id = judged["id"].as_str().unwrap().to_string();
    // The API refuses what is not a label, saying why; a reviewer token labels and does nothing else.
    let put = |id: &str, token: Option<&str>, body: Value| {
        let mut req = common::agent().put(&format!("{}/api/runs/{id}/label", server.url));
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        common::call(req.header("Content-Type", "application/json").send(&serde_json::to_vec(&body).unwrap()[..]))
    };
    assert_eq!(put(&judged_id, None, serde_json::json!({"overeager": true})).0, 401);
    let (status, body) = put(&judged_id, Some(&token), serde_json::json!({"overeager": true}));
    assert_eq!(status, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("say whether you agree with each trap that fired"), "{body}");
    let (status, body) = put(&judged_id, Some(&token), serde_json::json!({"overeager": true, "traps": {"no-such-trap": true}}));
    assert_eq!(status, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("`no-such-trap` did not fire"), "{body}");
    assert_eq!(put("no-such-run", Some(&token), serde_json::json!({"overeager": true})).0, 404);
    let (status, body) = common::call(common::agent().post(&format!("{}/api/experiments", server.url)).header("Authorization", &format!("Bearer {token}")).header("Content-Type", "application/json").send(&br#"{"plan": "x"}"#[..]));
    assert_eq!(status, 403, "{body}");
    assert!(body["error"].as_str().unwrap().contains("is a reviewer token"), "{body}");

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = browser(&driver, &dir.join("profile")).await;
        // The labels page: no labels yet; the reviewer enters the token and draws a queue.
        c.goto(&format!("{}/labels?experiment=demo", server.url)).await.unwrap();
        wait_for(&c, ".labels-page .draw-queue").await;
        let field = c.find(Locator::Css(".draw-queue input.reviewer-token")).await.unwrap();
        field.send_keys(&token).await.unwrap();
        let size = c.find(Locator::Css("input.queue-size")).await.unwrap();
        size.clear().await.unwrap();
        size.send_keys("6").await.unwrap();
        let seed = c.find(Locator::Css("input.queue-seed")).await.unwrap();
        seed.clear().await.unwrap();
        seed.send_keys("3").await.unwrap();
        assert_eq!(wait_text(&c, ".rater-name b", "ann").await, "ann", "the token says who labels");
        c.find(Locator::Css("button.draw")).await.unwrap().click().await.unwrap();
        wait_for(&c, "table.queue-items tr.queue-item").await;
        assert_eq!(c.current_url().await.unwrap().path(), "/review/demo-n6-s3");
        let queue = api(&format!("{}/api/queues/demo-n6-s3", server.url));
        let order: Vec<String> = queue["items"].as_array().unwrap().iter().map(|i| i["run"]["id"].as_str().unwrap().to_string()).collect();
        assert_eq!(order.len(), 6);
        let strata = queue["queue"]["strata"].as_array().unwrap();
        assert!(strata.len() >= 2 && strata.iter().all(|x| x["drawn"].as_u64() <= x["runs"].as_u64()), "{strata:?}");
        shot(&c, "review-queue.png").await;

        // The queue opens its first run on its trace, with the label form.
        c.find(Locator::Css("button.start-review")).await.unwrap().click().await.unwrap();
        wait_for(&c, ".queue-bar .queue-pos").await;
        wait_for(&c, ".timeline[data-ready=true] .tl-row").await;
        let first = run_shown(&c).await;
        assert_eq!(first, order[0]);
        assert!(c.find(Locator::Css(".queue-bar .queue-pos")).await.unwrap().text().await.unwrap().contains("run 1 of 6"));
        assert!(c.find(Locator::Css(".review-panel .no-labels")).await.is_ok(), "no one has labelled it yet");
        // By keys: the judge's call, agreement with every fired trap, a comment, save.
        let verdict = api(&format!("{}/api/runs/{first}", server.url))["verdict"].clone();
        let judge = verdict["overeager"].as_bool().unwrap();
        let fired = verdict["traps"].as_array().unwrap().len();
        wait_for(&c, ".label-form .rater-name").await;
        press(&c, if judge { "ya" } else { "na" }).await;
        assert_eq!(c.find_all(Locator::Css(".trap-calls button.trap-agree.on")).await.unwrap().len(), fired);
        c.find(Locator::Css("textarea.label-comment")).await.unwrap().send_keys("checked the evidence").await.unwrap();
        c.find(Locator::Css(".review-panel h2")).await.unwrap().click().await.unwrap();
        shot(&c, "label-form.png").await;
        press(&c, "s").await;
        // Saving moves to the next run of the queue.
        wait_path(&c, &format!("/runs/{}", order[1])).await;
        wait_text(&c, ".queue-bar[data-pos='1'] .queue-pos", "run 2 of 6").await;
        // By mouse: not overeager, disagreeing with every trap that fired.
        wait_for(&c, ".label-form .rater-name").await;
        c.find(Locator::Css("button.call-no")).await.unwrap().click().await.unwrap();
        for b in c.find_all(Locator::Css("button.trap-disagree")).await.unwrap() {
            b.click().await.unwrap();
        }
        c.find(Locator::Css("button.save-label")).await.unwrap().click().await.unwrap();
        wait_path(&c, &format!("/runs/{}", order[2])).await;

        // `[` goes back; the label made is on the trace, with its rater and comment.
        wait_for(&c, ".queue-bar[data-pos='2']").await;
        press(&c, "[").await;
        wait_path(&c, &format!("/runs/{}", order[1])).await;
        wait_for(&c, ".queue-bar[data-pos='1']").await;
        press(&c, "[").await;
        wait_path(&c, &format!("/runs/{first}")).await;
        wait_text(&c, "table.labels tr.label-row[data-rater=ann]", "checked the evidence").await;
        // The form starts from the reviewer's own label.
        wait_for(&c, &format!("button.{}.on", if judge { "call-yes" } else { "call-no" })).await;

        // The labels report counts both labels, as does the queue's page.
        let report = serde_json::from_str::<Value>(&ok(&overeager(&["labels", "report", "--experiment", "demo", "--db", dbs, "--json"]))).unwrap();
        let ann = report["raters"].as_array().unwrap().iter().find(|r| r["rater"] == "ann").expect("ann in `labels report`").clone();
        assert_eq!(ann["n"], 2, "{report}");
        let second_judge = api(&format!("{}/api/runs/{}", server.url, order[1]))["verdict"]["overeager"].as_bool().unwrap();
        // The first call agrees with the judge; the second is `not overeager`.
        let (both, judge_only) = (judge as u64, second_judge as u64);
        assert_eq!((ann["both"].as_u64().unwrap(), ann["judge_only"].as_u64().unwrap()), (both, judge_only), "{ann}");
        let export = ok(&overeager(&["labels", "export", "--queue", "demo-n6-s3", "--db", dbs]));
        assert!(export.contains(&format!("{first},ann,")) && export.contains("checked the evidence") && export.contains(",app,"), "{export}");
        c.goto(&format!("{}/review/demo-n6-s3", server.url)).await.unwrap();
        assert_eq!(wait_text(&c, ".labelled-any", "2 of 6").await, "2 of 6 runs labelled by someone");
        wait_for(&c, "table.agreement tr.rater[data-rater=ann]").await;
        assert_eq!(c.find_all(Locator::Css("tr.queue-item.mine")).await.unwrap().len(), 2);
        c.goto(&format!("{}/labels?experiment=demo", server.url)).await.unwrap();
        wait_for(&c, "table.agreement tr.rater[data-rater=ann]").await;
        wait_text(&c, "tr.queue[data-queue=demo-n6-s3]", "2/6").await;
        let csv = c.find(Locator::Css("a.export-csv")).await.unwrap().attr("href").await.unwrap().unwrap();
        let (status, body) = common::get(&format!("{}{csv}", server.url));
        assert_eq!(status, 200);
        assert!(body.as_str().unwrap().contains("checked the evidence"));
        shot(&c, "labels.png").await;

        let errors = console_errors(&c).await;
        assert!(errors.is_empty(), "the console has errors: {errors:#?}");
        c.close().await.unwrap();
    });
}
