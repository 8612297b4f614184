//! `overeager bench scale` and `overeager bench api --mixed`: the API under a store of a
//! public leaderboard's size, and one endpoint's latency while the others are loaded.
//!
//! The scale store is [`overeager_experiment::synthetic`]'s: synthetic, and it says so; it
//! measures the store and the API, not any agent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;
use serde_json::json;

use overeager_api as api;
use overeager_experiment::synthetic::{SCALE_EXPERIMENT, build_store};
use overeager_store::Store;

/// Arguments of `overeager bench scale`.
#[derive(Args)]
pub struct BenchScaleArgs {
    /// Scenarios in the store.
    #[arg(long, default_value_t = 500)]
    pub scenarios: usize,
    /// Runs in the large store.
    #[arg(long, default_value_t = 10_000)]
    pub runs: usize,
    /// Runs in the small store the growth is measured from.
    #[arg(long, default_value_t = 2_400)]
    pub small_runs: usize,
    /// Connections of the load per endpoint.
    #[arg(long, default_value_t = 16)]
    pub connections: u32,
    /// Seconds of load per endpoint.
    #[arg(long, default_value_t = 3)]
    pub seconds: u32,
    /// The seed scenarios copied into the store.
    #[arg(long, default_value = "scenarios/seeds")]
    pub seeds: PathBuf,
    /// The real packed bundle every run points at.
    #[arg(long, default_value = "bundles/claude-code-permissive-aggressive.oeb")]
    pub bundle: PathBuf,
    /// The built web app, to publish the large store as a static site and count its runs.
    #[arg(long)]
    pub dist: Option<PathBuf>,
    /// Keep the stores in this directory instead of a temporary one.
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One endpoint's figures.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointFigures {
    pub path: String,
    /// The first request (caches cold).
    pub first_ms: f64,
    /// Median of warm single requests.
    pub single_ms: f64,
    pub requests_per_s: f64,
    pub p99_ms: f64,
    pub non_2xx: u64,
}

/// The API paths measured on a scale store.
fn scale_paths(db: &Path) -> Result<Vec<String>> {
    let mut store = Store::open_existing(db)?;
    // A review queue of 50 runs, each labelled by one rater (with the judge's call): what a
    // reviewer's pages read. Drawn once; a kept store has it already.
    let t = Instant::now();
    let queue = store.create_queue(SCALE_EXPERIMENT, 50, 1, "bench")?;
    eprintln!("a 50-run review queue drawn from {} strata in {:.1} ms", queue.strata.len(), t.elapsed().as_secs_f64() * 1000.0);
    let labels: Vec<overeager_store::labels::Label> = store
        .queue_runs(&queue.id)?
        .into_iter()
        .map(|r| overeager_store::labels::Label { run: r.id, rater: "bench".into(), overeager: r.overeager.unwrap_or(false), traps: Default::default(), comment: None, labelled_us: None, source: Some("bench scale".into()) })
        .collect();
    store.put_labels(&labels)?;
    let page = store.run_rows(&overeager_store::web::RunFilter { experiment: Some(SCALE_EXPERIMENT.into()), limit: Some(200), ..Default::default() })?;
    let run = page.runs.first().context("the scale store has runs")?;
    let bundle = run.bundle.clone().context("scale runs have a bundle")?;
    let after = page.next.map(|n| format!("&after={n}")).unwrap_or_default();
    Ok(vec![
        "/api/health".into(),
        "/api/leaderboard".into(),
        "/api/cells".into(),
        "/api/experiments".into(),
        format!("/api/experiments/{SCALE_EXPERIMENT}"),
        format!("/api/experiments/{SCALE_EXPERIMENT}/report"),
        "/api/scenarios".into(),
        format!("/api/scenarios/{}", run.scenario_hash),
        format!("/api/runs?experiment={SCALE_EXPERIMENT}"),
        format!("/api/runs?experiment={SCALE_EXPERIMENT}{after}"),
        format!("/api/runs?experiment={SCALE_EXPERIMENT}&framework=sim-b&model=m1&outcome=overeager"),
        format!("/api/runs/{}", run.id),
        // Search: run fields only; an event field (every run's events hold it); free text.
        format!("/api/search?experiment={SCALE_EXPERIMENT}&q=framework:sim-b%20outcome:overeager"),
        format!("/api/search?experiment={SCALE_EXPERIMENT}&q=cmd:%22rm%20-f%22"),
        format!("/api/search?experiment={SCALE_EXPERIMENT}&q=invoicer.db"),
        // Review: a queue's page and an experiment's labels report.
        format!("/api/queues/{}", queue.id),
        format!("/api/labels/report?experiment={SCALE_EXPERIMENT}"),
        format!("/api/bundles/{bundle}"),
        "/api/bundles".into(),
        "/api/predicates".into(),
        "/api/transfer".into(),
    ])
}

/// Milliseconds of one GET, failing on a non-2xx answer.
fn timed_get(agent: &ureq::Agent, url: &str) -> Result<f64> {
    let t = Instant::now();
    let mut r = agent.get(url).call().with_context(|| format!("GET {url}"))?;
    let _ = r.body_mut().read_to_vec()?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if !r.status().is_success() {
        bail!("GET {url}: status {}", r.status());
    }
    Ok(ms)
}

/// Measures every path: a cold request, the median of 7 warm ones, then `connections`
/// connections of load for `seconds`.
fn measure(addr: std::net::SocketAddr, paths: &[String], connections: u32, seconds: u32) -> Result<Vec<EndpointFigures>> {
    let agent = ureq::Agent::new_with_config(ureq::config::Config::builder().http_status_as_error(false).build());
    let mut out = Vec::new();
    for p in paths {
        let url = format!("http://{addr}{p}");
        let first_ms = timed_get(&agent, &url)?;
        let mut warm: Vec<f64> = (0..7).map(|_| timed_get(&agent, &url)).collect::<Result<_>>()?;
        warm.sort_by(f64::total_cmp);
        let load = super::web::wrk(&url, 2, connections, seconds)?;
        out.push(EndpointFigures { path: p.clone(), first_ms, single_ms: warm[warm.len() / 2], requests_per_s: load.requests_per_s, p99_ms: load.p99_ms, non_2xx: load.non_2xx });
    }
    Ok(out)
}

/// `overeager bench scale`.
pub fn bench_scale(args: &BenchScaleArgs) -> Result<ExitCode> {
    if args.scenarios == 0 || args.runs == 0 || args.small_runs == 0 {
        bail!("--scenarios, --runs and --small-runs must be positive");
    }
    let tmp = tempfile::tempdir()?;
    let dir = args.keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let mut sizes = BTreeMap::new();
    let mut searched = None;
    for runs in [args.small_runs, args.runs] {
        let db = dir.join(format!("scale-{runs}.db"));
        let t = Instant::now();
        if !db.exists() {
            build_store(&db, &args.seeds, &args.bundle, args.scenarios, runs)?;
        }
        eprintln!("store of {} scenarios and {runs} runs ready in {:.1} s; measuring", args.scenarios, t.elapsed().as_secs_f64());
        let (rt, addr) = api::serve_in_process(&db)?;
        let figures = measure(addr, &scale_paths(&db)?, args.connections, args.seconds)?;
        if runs == args.runs {
            searched = Some(leaderboard_while_searched(addr, args.connections, args.seconds.max(5))?);
        }
        rt.shutdown_background();
        sizes.insert(runs, figures);
    }
    let published = match &args.dist {
        Some(dist) => {
            let out = dir.join("site");
            let _ = std::fs::remove_dir_all(&out);
            let t = Instant::now();
            let p = api::publish::publish(&dir.join(format!("scale-{}.db", args.runs)), dist, &out, 10)?;
            Some(json!({ "runs": p.runs, "seconds": t.elapsed().as_secs_f64(), "files": p.files }))
        }
        None => None,
    };
    let small = &sizes[&args.small_runs];
    let large = &sizes[&args.runs];
    let scale = args.runs as f64 / args.small_runs as f64;
    if args.json {
        let rows: Vec<_> = small
            .iter()
            .zip(large)
            .map(|(s, l)| json!({ "path": l.path, "small": s, "large": l, "growth": l.single_ms / s.single_ms, "linear_growth": scale }))
            .collect();
        super::print_json(&json!({ "scenarios": args.scenarios, "runs": args.runs, "small_runs": args.small_runs, "connections": args.connections, "endpoints": rows, "under_search": searched, "published": published }));
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header([
        "endpoint".to_string(),
        "first ms".into(),
        "single ms".into(),
        format!("p99 ms ({} conns)", args.connections),
        "req/s".into(),
        format!("single ms @{}", args.small_runs),
        format!("growth (linear = {scale:.2})"),
    ]);
    for (s, l) in small.iter().zip(large) {
        t.add_row([
            l.path.clone(),
            format!("{:.1}", l.first_ms),
            format!("{:.2}", l.single_ms),
            format!("{:.1}", l.p99_ms),
            format!("{:.0}", l.requests_per_s),
            format!("{:.2}", s.single_ms),
            format!("{:.2}", l.single_ms / s.single_ms),
        ]);
    }
    println!("{} scenarios, {} runs (growth from {} runs); load: {} connections for {} s per endpoint", args.scenarios, args.runs, args.small_runs, args.connections, args.seconds);
    println!("{t}");
    if let Some(s) = searched {
        println!(
            "while {} connections search `{}` for {} s: the leaderboard's p99 {:.1} ms (alone {:.1} ms, {:.0} req/s); the searches: {:.1} requests/s, {} of them refused (503 busy, or 422 over the time budget), the slowest {:.0} ms",
            s.connections, s.query, s.seconds, s.leaderboard.p99_ms, s.leaderboard_alone.p99_ms, s.leaderboard.requests_per_s, s.search.requests_per_s, s.search.non_2xx, s.search.max_ms
        );
    }
    if let Some(p) = published {
        println!("published site: {} runs, {} files, {:.1} s", p["runs"], p["files"], p["seconds"].as_f64().unwrap_or(0.0));
    }
    Ok(ExitCode::SUCCESS)
}

/// The leaderboard's latency while `connections` clients search at once.
#[derive(Debug, Serialize)]
pub struct UnderSearch {
    pub connections: u32,
    pub seconds: u32,
    /// The search every client sends: free text that every run of the scale store matches.
    pub query: String,
    /// Two connections on `/api/leaderboard`, nothing else running.
    pub leaderboard_alone: super::web::WrkFigures,
    /// The same, while the searches run.
    pub leaderboard: super::web::WrkFigures,
    pub search: super::web::WrkFigures,
}

/// Loads the search endpoint with `connections` clients and, at the same time, measures the
/// leaderboard with two: what an anonymous crowd of searchers costs everyone else.
fn leaderboard_while_searched(addr: std::net::SocketAddr, connections: u32, seconds: u32) -> Result<UnderSearch> {
    let query = "invoicer.db";
    let board = format!("http://{addr}/api/leaderboard");
    let search = format!("http://{addr}/api/search?experiment={SCALE_EXPERIMENT}&q={query}");
    let leaderboard_alone = super::web::wrk(&board, 1, 2, seconds)?;
    let (leaderboard, search) = std::thread::scope(|sc| {
        let searching = sc.spawn(|| super::web::wrk(&search, 1, connections, seconds));
        let board = super::web::wrk(&board, 1, 2, seconds);
        (board, searching.join().expect("the search load's thread"))
    });
    Ok(UnderSearch { connections, seconds, query: query.into(), leaderboard_alone, leaderboard: leaderboard?, search: search? })
}
