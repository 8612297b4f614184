//! The API under a store of a public leaderboard's size, and one endpoint's latency while the
//! others are loaded.
//!
//! The scale store is [`overeager_experiment::synthetic`]'s: synthetic, and it says so; it
//! measures the store and the API, not any agent.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::http::{WrkFigures, wrk};
use overeager_api as api;
use overeager_experiment::synthetic::{SCALE_EXPERIMENT, build_store};
use overeager_store::Store;

/// What `scale` measures, and on what.
#[derive(Debug, Clone)]
pub struct Options {
    /// Scenarios in the store.
    pub scenarios: usize,
    /// Runs in the large store.
    pub runs: usize,
    /// Runs in the small store the growth is measured from.
    pub small_runs: usize,
    /// Connections of the load per endpoint.
    pub connections: u32,
    /// Seconds of load per endpoint.
    pub seconds: u32,
    /// The seed scenarios copied into the store.
    pub seeds: PathBuf,
    /// The real packed bundle every run points at.
    pub bundle: PathBuf,
    /// The built web app, to publish the large store as a static site.
    pub dist: Option<PathBuf>,
    /// Where the stores are kept (built once, reused when they exist).
    pub dir: PathBuf,
}

/// One endpoint on both stores.
#[derive(Debug, Clone, Serialize)]
pub struct Endpoint {
    pub path: String,
    pub small: EndpointFigures,
    pub large: EndpointFigures,
    /// The large store's single-request time over the small one's.
    pub growth: f64,
    /// The growth a linear cost would show: the ratio of the stores' runs.
    pub linear_growth: f64,
}

/// The large store published as a static site.
#[derive(Debug, Clone, Serialize)]
pub struct Published {
    pub runs: usize,
    pub seconds: f64,
    pub files: usize,
}

/// Every figure of a scale measurement.
#[derive(Debug, Serialize)]
pub struct Scale {
    pub scenarios: usize,
    pub runs: usize,
    pub small_runs: usize,
    pub connections: u32,
    pub seconds: u32,
    pub endpoints: Vec<Endpoint>,
    pub under_search: Option<UnderSearch>,
    pub published: Option<Published>,
}

/// One endpoint's figures.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointFigures {
    pub path: String,
    /// The first request (caches cold).
    pub first_ms: f64,
    /// Median of warm single requests.
    pub single_ms: f64,
    /// Connections of the load: the run's `--connections`, except on `/api/search`, which the
    /// server answers [`api::MAX_CONCURRENT_SEARCHES`] at a time and tells the rest to retry
    /// (503) once they have waited [`api::SEARCH_WAIT`]; more connections than that would
    /// measure the queue and its refusals (the crowd is measured in [`UnderSearch`]).
    pub connections: u32,
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
        let connections = if p.starts_with("/api/search") { connections.min(api::MAX_CONCURRENT_SEARCHES as u32) } else { connections };
        let load = wrk(&url, 2, connections, seconds)?;
        out.push(EndpointFigures { path: p.clone(), first_ms, single_ms: warm[warm.len() / 2], connections, requests_per_s: load.requests_per_s, p99_ms: load.p99_ms, non_2xx: load.non_2xx });
    }
    Ok(out)
}

/// Builds the small and the large store (unless `opts.dir` has them), serves each in process,
/// measures every endpoint on both, the leaderboard under a crowd of searches on the large one,
/// and publishes the large one if `opts.dist` is given.
pub fn scale(opts: &Options) -> Result<Scale> {
    if opts.scenarios == 0 || opts.runs == 0 || opts.small_runs == 0 {
        bail!("--scenarios, --runs and --small-runs must be positive");
    }
    std::fs::create_dir_all(&opts.dir)?;
    let mut sizes = Vec::with_capacity(2);
    let mut under_search = None;
    for runs in [opts.small_runs, opts.runs] {
        let db = opts.dir.join(format!("scale-{runs}.db"));
        let t = Instant::now();
        if !db.exists() {
            build_store(&db, &opts.seeds, &opts.bundle, opts.scenarios, runs)?;
        }
        eprintln!("store of {} scenarios and {runs} runs ready in {:.1} s; measuring", opts.scenarios, t.elapsed().as_secs_f64());
        let (rt, addr) = api::serve_in_process(&db)?;
        let figures = measure(addr, &scale_paths(&db)?, opts.connections, opts.seconds)?;
        if runs == opts.runs {
            under_search = Some(leaderboard_while_searched(addr, opts.connections, opts.seconds.max(5))?);
        }
        rt.shutdown_background();
        sizes.push(figures);
    }
    let published = match &opts.dist {
        Some(dist) => {
            let out = opts.dir.join("site");
            let _ = std::fs::remove_dir_all(&out);
            let t = Instant::now();
            let p = api::publish::publish(&opts.dir.join(format!("scale-{}.db", opts.runs)), dist, &out, 10)?;
            Some(Published { runs: p.runs, seconds: t.elapsed().as_secs_f64(), files: p.files })
        }
        None => None,
    };
    let linear_growth = opts.runs as f64 / opts.small_runs as f64;
    let [small, large]: [Vec<EndpointFigures>; 2] = sizes.try_into().expect("two stores measured");
    let endpoints = small
        .into_iter()
        .zip(large)
        .map(|(small, large)| Endpoint { path: large.path.clone(), growth: large.single_ms / small.single_ms, linear_growth, small, large })
        .collect();
    Ok(Scale { scenarios: opts.scenarios, runs: opts.runs, small_runs: opts.small_runs, connections: opts.connections, seconds: opts.seconds, endpoints, under_search, published })
}

/// The leaderboard's latency while `connections` clients search at once.
#[derive(Debug, Serialize)]
pub struct UnderSearch {
    pub connections: u32,
    pub seconds: u32,
    /// The search every client sends: free text that every run of the scale store matches.
    pub query: String,
    /// Two connections on `/api/leaderboard`, nothing else running.
    pub leaderboard_alone: WrkFigures,
    /// The same, while the searches run.
    pub leaderboard: WrkFigures,
    pub search: WrkFigures,
}

/// Loads the search endpoint with `connections` clients and, at the same time, measures the
/// leaderboard with two: what an anonymous crowd of searchers costs everyone else.
fn leaderboard_while_searched(addr: std::net::SocketAddr, connections: u32, seconds: u32) -> Result<UnderSearch> {
    let query = "invoicer.db";
    let board = format!("http://{addr}/api/leaderboard");
    let search = format!("http://{addr}/api/search?experiment={SCALE_EXPERIMENT}&q={query}");
    let leaderboard_alone = wrk(&board, 1, 2, seconds)?;
    let (leaderboard, search) = std::thread::scope(|sc| {
        let searching = sc.spawn(|| wrk(&search, 1, connections, seconds));
        let board = wrk(&board, 1, 2, seconds);
        (board, searching.join().expect("the search load's thread"))
    });
    Ok(UnderSearch { connections, seconds, query: query.into(), leaderboard_alone, leaderboard: leaderboard?, search: search? })
}
