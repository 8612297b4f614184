//! How fast the trace viewer becomes usable on a 100,000-event bundle, in headless Chromium.
//!
//! A real bundle of a demo run is extended to 100,000 events (copies of its watcher events, so
//! every event is a valid one), packed, and submitted to a real server, which judges it; the
//! browser then opens `/bundles/<digest>`. Figures: time from navigation to the first rows and
//! to the first answered key press (interactive), time until all events are loaded, and the
//! time to render after a scroll jump once everything is loaded.
//!
//! `cargo bench -p overeager --bench trace_viewer` (needs chromium, chromedriver and dist/).

#[path = "../tests/suite/common/mod.rs"]
mod common;

use std::io::Write as _;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use common::{Server, demo_store, ok, overeager, repo};
use fantoccini::{ClientBuilder, Locator};
use serde_json::{Value, json};

const EVENTS: usize = 100_000;

fn main() {
    let work = repo().join("target/bench-work/trace-viewer");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let db = demo_store(&work);
    let objects = db.with_file_name("overeager.db.objects").join("bundles");

    // The bundle of an aggressive run, grown to EVENTS events.
    let packed_bundles = std::fs::read_dir(&objects).unwrap().flatten().flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten()).map(|e| e.path()).collect::<Vec<_>>();
    let mut chosen = None;
    for p in packed_bundles {
        let dir = work.join("bundle");
        let _ = std::fs::remove_dir_all(&dir);
        ok(&overeager(&["bundle", "unpack", p.to_str().unwrap(), dir.to_str().unwrap()]));
        let manifest: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("bundle.json")).unwrap()).unwrap();
        if manifest["agent"]["id"] == "scripted:aggressive" {
            chosen = Some(dir);
            break;
        }
    }
    let dir = chosen.expect("an aggressive run");
    let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let events: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let fill: Vec<&Value> = events.iter().filter(|e| e["channel"] == "fswatch").collect();
    let last_t = events.last().unwrap()["t_us"].as_u64().unwrap();
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("events.jsonl")).unwrap());
    for e in &events {
        writeln!(f, "{e}").unwrap();
    }
    for i in events.len()..EVENTS {
        let mut e = fill[i % fill.len()].clone();
        e["seq"] = json!(i);
        e["t_us"] = json!(last_t + i as u64 * 7);
        writeln!(f, "{e}").unwrap();
    }
    f.flush().unwrap();
    drop(f);
    let packed = work.join("big.oeb");
    ok(&overeager(&["bundle", "pack", dir.to_str().unwrap(), packed.to_str().unwrap()]));

    let server = Server::start(&db, &work.join("trust.toml"));
    let token = ok(&overeager(&["token", "create", "bench", "--db", db.to_str().unwrap()])).trim().to_string();
    let boundary = "bench-boundary";
    let mut body = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"bundle\"; filename=\"big.oeb\"\r\n\r\n").into_bytes();
    body.extend(std::fs::read(&packed).unwrap());
    body.extend(format!("\r\n--{boundary}--\r\n").as_bytes());
    let mut resp = ureq::post(&format!("{}/api/bundles", server.url))
        .header("Authorization", &format!("Bearer {token}"))
        .header("Content-Type", &format!("multipart/form-data; boundary={boundary}"))
        .send(&body[..])
        .expect("the upload is accepted");
    let sub: Value = serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
    let digest = sub["bundle"].as_str().unwrap().to_string();
    eprintln!("bundle {digest}: {EVENTS} events, {} bytes packed, verdict overeager={}", std::fs::metadata(&packed).unwrap().len(), sub["verdict"]["overeager"]);

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut driver = std::process::Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .expect("chromedriver");
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let rounds = 5;
    let mut results = Vec::new();
    rt.block_on(async {
        for round in 0..rounds {
            let profile = work.join(format!("profile-{round}"));
            let caps = json!({ "browserName": "chrome", "goog:chromeOptions": { "binary": "/usr/bin/chromium", "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000", format!("--user-data-dir={}", profile.display())] } });
            let Value::Object(caps) = caps else { unreachable!() };
            let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new()).capabilities(caps).connect(&format!("http://127.0.0.1:{port}")).await.unwrap();
            let wait = |css: &'static str| {
                let c = c.clone();
                async move { c.wait().at_most(Duration::from_secs(60)).every(Duration::from_millis(5)).for_element(Locator::Css(css)).await.unwrap() }
            };
            // A cold cache on the server side too: a fresh bundle load every round would need
            // a restart; the first round is the cold one and is reported separately.
            let start = Instant::now();
            c.goto(&format!("{}/bundles/{digest}", server.url)).await.unwrap();
            wait(".timeline[data-ready=true] .tl-row").await;
            let first_rows = start.elapsed();
            if std::env::var_os("TRACE_VIEWER_TIMINGS").is_some() {
                let t: Value = c.execute("return [performance.now(), performance.getEntriesByType('resource').map(e => [e.name.slice(-40), Math.round(e.startTime), Math.round(e.responseEnd)])]", vec![]).await.unwrap();
                eprintln!("page timings (ms since navigation): {t}");
            }
            c.execute("document.querySelector('.timeline').focus()", vec![]).await.unwrap();
            c.find(Locator::Css(".timeline")).await.unwrap().send_keys("j").await.unwrap();
            wait(".tl-row.selected").await;
            let interactive = start.elapsed();
            // All events loaded.
            loop {
                let n: Value = c.execute("return document.querySelectorAll('.tl-row').length && document.querySelector('.controls .muted').textContent", vec![]).await.unwrap();
                if n.as_str().is_some_and(|t| t.starts_with(&format!("{EVENTS} of"))) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let all_loaded = start.elapsed();
            // Scroll jumps once everything is loaded: ms from setting scrollTop to the next frame
            // after the rows are re-rendered, averaged over 20 jumps.
            let per_jump: Value = c
                .execute_async(
                    "const done = arguments[arguments.length - 1]; const el = document.querySelector('.timeline'); let i = 0; const t0 = performance.now();
                     function step() { if (i === 20) { done((performance.now() - t0) / 20); return; } el.scrollTop = (i * 4999) % (el.scrollHeight - 600); el.dispatchEvent(new Event('scroll')); i++; requestAnimationFrame(() => requestAnimationFrame(step)); }
                     step();",
                    vec![],
                )
                .await
                .unwrap();
            results.push((first_rows, interactive, all_loaded, per_jump.as_f64().unwrap_or(f64::NAN)));
            c.close().await.unwrap();
        }
    });
    // The browsers chromedriver started are in its process group.
    unsafe { libc::kill(-(driver.id() as i32), libc::SIGKILL) };
    let _ = driver.wait();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (i, (f, it, a, j)) in results.iter().enumerate() {
        eprintln!("round {i}: first rows {:.0} ms, interactive {:.0} ms, all {EVENTS} events loaded {:.0} ms, scroll jump {j:.1} ms", ms(*f), ms(*it), ms(*a));
    }
    let mut inter: Vec<f64> = results.iter().skip(1).map(|r| ms(r.1)).collect();
    inter.sort_by(f64::total_cmp);
    let report = json!({
        "events": EVENTS,
        "cold_interactive_ms": ms(results[0].1),
        "warm_interactive_ms_median": inter[inter.len() / 2],
        "all_loaded_ms": results.iter().map(|r| ms(r.2)).collect::<Vec<_>>(),
        "scroll_jump_ms": results.iter().map(|r| r.3).collect::<Vec<_>>(),
    });
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
}
