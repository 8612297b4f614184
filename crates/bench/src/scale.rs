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
    /// Cold pages asked for by a crowd at once, on the large store.
    pub cold: Vec<ColdCrowd>,
    /// The report's cost: computing its decomposition, finding it kept, and after a label.
    pub report: Option<ReportCosts>,
    /// The labels report of a copy of the large store labelled by many raters.
    pub many_raters: Option<ManyRaters>,
    pub published: Option<Published>,
}

/// What a crowd asking for one cold page at once costs the server, against one request.
#[derive(Debug, Clone, Serialize)]
pub struct ColdCrowd {
    pub path: String,
    /// Requests sent at once.
    pub crowd: u32,
    /// CPU time of the server process for one request on fresh caches.
    pub one_cpu_ms: f64,
    pub one_ms: f64,
    /// CPU time for the crowd's requests, on fresh caches again.
    pub crowd_cpu_ms: f64,
    /// The slowest answer of the crowd.
    pub crowd_ms: f64,
    /// `crowd_cpu_ms / one_cpu_ms`: 1 when the crowd shares one computation.
    pub cpu_ratio: f64,
    pub non_2xx: u32,
}

/// What the large store's report and leaderboard cost a server, in milliseconds of one request.
#[derive(Debug, Clone, Serialize)]
pub struct ReportCosts {
    /// The report on a fresh server whose store keeps no decomposition (it is computed).
    pub computed_ms: f64,
    /// The report on a fresh server whose store kept the decomposition.
    pub kept_ms: f64,
    /// The leaderboard and the report, warm, just before one label is written.
    pub warm_leaderboard_ms: f64,
    pub warm_report_ms: f64,
    /// The same two requests once the server has seen the label.
    pub leaderboard_after_label_ms: f64,
    pub report_after_label_ms: f64,
}

/// `GET /api/labels/report` with many raters.
#[derive(Debug, Clone, Serialize)]
pub struct ManyRaters {
    pub raters: usize,
    pub labels: usize,
    pub status: u16,
    pub ms: f64,
    /// The answer's size.
    pub bytes: usize,
    /// The server process's resident memory at its highest during the request, above what it
    /// was before.
    pub peak_rss_growth_mb: f64,
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
    let page = store.run_rows(&overeager_store::runs::RunFilter { experiment: Some(SCALE_EXPERIMENT.into()), limit: Some(200), ..Default::default() })?;
    let run = page.runs.first().context("the scale store has runs")?;
    let bundle = run.bundle.clone().context("scale runs have a bundle")?;
    let after = page.next.map(|n| format!("&after={n}")).unwrap_or_default();
    use overeager_wire::endpoint as e;
    let exp = SCALE_EXPERIMENT;
    let runs = e::RUNS.path;
    let search = e::SEARCH.path;
    Ok(vec![
        e::HEALTH.url(&[]),
        e::LEADERBOARD.url(&[]),
        e::CELLS.url(&[]),
        e::EXPERIMENTS.url(&[]),
        e::EXPERIMENT.url(&[exp]),
        e::REPORT.url(&[exp]),
        e::SCENARIOS.url(&[]),
        e::SCENARIO.url(&[&run.scenario_hash]),
        format!("{runs}?experiment={exp}"),
        format!("{runs}?experiment={exp}{after}"),
        format!("{runs}?experiment={exp}&framework=sim-b&model=m1&outcome=overeager"),
        e::RUN.url(&[&run.id]),
        // Search: run fields only; an event field (every run's events hold it); free text.
        format!("{search}?experiment={exp}&q=framework:sim-b%20outcome:overeager"),
        format!("{search}?experiment={exp}&q=cmd:%22rm%20-f%22"),
        format!("{search}?experiment={exp}&q=invoicer.db"),
        // Review: a queue's page and an experiment's labels report.
        e::QUEUE.url(&[&queue.id]),
        format!("{}?experiment={exp}", e::LABELS_REPORT.path),
        e::BUNDLE.url(&[&bundle]),
        e::UPLOADS.url(&[]),
        e::PREDICATES.url(&[]),
        e::TRANSFER.url(&[]),
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
        // wrk runs at most one thread per connection.
        let load = wrk(&url, connections.min(2), connections, seconds)?;
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
    let mut cold = Vec::new();
    let mut report = None;
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
        if runs == opts.runs {
            let conversation = format!("/api/bundles/{}/raw/conversation", scale_bundle(&db)?);
            for path in ["/api/leaderboard".to_string(), conversation] {
                cold.push(cold_crowd(&db, &path, COLD_CROWD)?);
            }
            report = Some(report_costs(&db)?);
        }
        sizes.push(figures);
    }
    let many_raters = Some(many_raters(&opts.dir.join(format!("scale-{}.db", opts.runs)), MANY_RATERS)?);
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
    Ok(Scale {
        scenarios: opts.scenarios,
        runs: opts.runs,
        small_runs: opts.small_runs,
        connections: opts.connections,
        seconds: opts.seconds,
        endpoints,
        under_search,
        cold,
        report,
        many_raters,
        published,
    })
}

/// Requests of a cold crowd.
const COLD_CROWD: u32 = 16;
/// Raters of the labels report's measurement.
const MANY_RATERS: usize = 10_000;

/// The bundle every run of the scale store points at.
fn scale_bundle(db: &Path) -> Result<String> {
    let store = Store::open_existing(db)?;
    let page = store.run_rows(&overeager_store::runs::RunFilter { experiment: Some(SCALE_EXPERIMENT.into()), limit: Some(1), ..Default::default() })?;
    page.runs.first().and_then(|r| r.bundle.clone()).context("scale runs have a bundle")
}

/// CPU time this process has used, in milliseconds.
fn cpu_ms() -> f64 {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    ms(u.ru_utime) + ms(u.ru_stime)
}

/// `n` GETs of `url` at once: the slowest one's milliseconds and how many were not 2xx.
fn crowd_get(url: &str, n: u32) -> (f64, u32) {
    let answers: Vec<(f64, bool)> = std::thread::scope(|sc| {
        let threads: Vec<_> = (0..n)
            .map(|_| {
                sc.spawn(|| {
                    let agent = ureq::Agent::new_with_config(ureq::config::Config::builder().http_status_as_error(false).build());
                    let t = Instant::now();
                    let ok = agent.get(url).call().is_ok_and(|mut r| r.body_mut().read_to_vec().is_ok() && r.status().is_success());
                    (t.elapsed().as_secs_f64() * 1000.0, ok)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("a crowd thread")).collect()
    });
    (answers.iter().map(|a| a.0).fold(0.0, f64::max), answers.iter().filter(|a| !a.1).count() as u32)
}

/// One request for `path` on a freshly started server (its caches cold), then `crowd` at once
/// on another: the server's CPU time for each. The client threads' own CPU is counted too (it
/// is the same process): a few milliseconds.
fn cold_crowd(db: &Path, path: &str, crowd: u32) -> Result<ColdCrowd> {
    let measure = |n: u32| -> Result<(f64, f64, u32)> {
        let (rt, addr) = api::serve_in_process(db)?;
        let before = cpu_ms();
        let (ms, failed) = crowd_get(&format!("http://{addr}{path}"), n);
        // Work a crowd's leaver left running is counted once it has ended.
        rt.shutdown_timeout(std::time::Duration::from_secs(60));
        Ok((cpu_ms() - before, ms, failed))
    };
    let (one_cpu_ms, one_ms, failed_one) = measure(1)?;
    let (crowd_cpu_ms, crowd_ms, failed) = measure(crowd)?;
    Ok(ColdCrowd { path: path.into(), crowd, one_cpu_ms, one_ms, crowd_cpu_ms, crowd_ms, cpu_ratio: crowd_cpu_ms / one_cpu_ms, non_2xx: failed + failed_one })
}

/// The report computed and found kept on fresh servers, then the leaderboard and the report
/// before and after a label is written (by another connection, as `overeager labels` would).
fn report_costs(db: &Path) -> Result<ReportCosts> {
    let agent = ureq::Agent::new_with_config(
        ureq::config::Config::builder()
            .http_status_as_error(false)
            .build(),
    );
    let report = format!("/api/experiments/{SCALE_EXPERIMENT}/report");
    Store::open_existing(db)?.forget_decompositions()?;
    let fresh = |path: &str| -> Result<f64> {
        let (rt, addr) = api::serve_in_process(db)?;
        let ms = timed_get(&agent, &format!("http://{addr}{path}"));
        rt.shutdown_timeout(std::time::Duration::from_secs(60));
        ms
    };
    let computed_ms = fresh(&report)?;
    let kept_ms = fresh(&report)?;
    let (rt, addr) = api::serve_in_process(db)?;
    let (board_url, report_url) = (
        format!("http://{addr}/api/leaderboard"),
        format!("http://{addr}{report}"),
    );
    timed_get(&agent, &board_url)?;
    timed_get(&agent, &report_url)?;
    let (warm_leaderboard_ms, warm_report_ms) = (
        timed_get(&agent, &board_url)?,
        timed_get(&agent, &report_url)?,
    );
    let mut store = Store::open_existing(db)?;
    let run = store
        .run_rows(&overeager_store::runs::RunFilter {
            experiment: Some(SCALE_EXPERIMENT.into()),
            limit: Some(1),
            ..Default::default()
        })?
        .runs
        .remove(0);
    store.put_labels(&[overeager_store::labels::Label {
        run: run.id,
        rater: "bench-after".into(),
        overeager: true,
        traps: Default::default(),
        comment: None,
        labelled_us: None,
        source: Some("bench scale".into()),
    }])?;
    // A write by another process shows once the server compares versions again.
    std::thread::sleep(api::REPORT_RECHECK + std::time::Duration::from_millis(100));
    let (leaderboard_after_label_ms, report_after_label_ms) = (
        timed_get(&agent, &board_url)?,
        timed_get(&agent, &report_url)?,
    );
    rt.shutdown_timeout(std::time::Duration::from_secs(60));
    Ok(ReportCosts {
        computed_ms,
        kept_ms,
        warm_leaderboard_ms,
        warm_report_ms,
        leaderboard_after_label_ms,
        report_after_label_ms,
    })
}

/// This process's resident memory, in bytes.
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok()).unwrap_or(0) * 1024
}

/// A copy of the store at `db` labelled by `raters` raters (two runs each, every run by
/// several), and its `GET /api/labels/report`: time, size and memory.
fn many_raters(db: &Path, raters: usize) -> Result<ManyRaters> {
    let copy = db.with_file_name(format!("raters-{raters}.db"));
    if !copy.exists() {
        let partial = copy.with_extension("partial");
        let _ = std::fs::remove_file(&partial);
        Store::open_existing(db)?.vacuum_into(&partial)?;
        let mut store = Store::open_existing(&partial)?;
        let runs: Vec<String> = store
            .run_rows(&overeager_store::runs::RunFilter { experiment: Some(SCALE_EXPERIMENT.into()), limit: Some(2000), ..Default::default() })?
            .runs
            .into_iter()
            .map(|r| r.id)
            .collect();
        let labels: Vec<overeager_store::labels::Label> = (0..raters)
            .flat_map(|i| {
                let rater = format!("rater-{i:05}");
                [i, i * 7 + 3].map(|k| overeager_store::labels::Label { run: runs[k % runs.len()].clone(), rater: rater.clone(), overeager: (i + k) % 3 == 0, traps: Default::default(), comment: None, labelled_us: None, source: Some("bench".into()) })
            })
            .collect();
        store.put_labels(&labels)?;
        drop(store);
        std::fs::rename(&partial, &copy)?;
    }
    let labels = raters * 2;
    let (rt, addr) = api::serve_in_process(&copy)?;
    let url = format!("http://{addr}/api/labels/report?experiment={SCALE_EXPERIMENT}");
    let base = rss_bytes();
    let done = std::sync::atomic::AtomicBool::new(false);
    let (peak, answer) = std::thread::scope(|sc| {
        let watch = sc.spawn(|| {
            let mut peak = base;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss_bytes());
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            peak
        });
        let t = Instant::now();
        let agent = ureq::Agent::new_with_config(ureq::config::Config::builder().http_status_as_error(false).build());
        let answer = agent.get(&url).call().map_err(anyhow::Error::from).and_then(|mut r| Ok((r.status().as_u16(), r.body_mut().with_config().limit(1 << 30).read_to_vec()?.len(), t.elapsed().as_secs_f64() * 1000.0)));
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (watch.join().expect("the memory watch"), answer)
    });
    rt.shutdown_background();
    let (status, bytes, ms) = answer?;
    Ok(ManyRaters { raters, labels, status, ms, bytes, peak_rss_growth_mb: peak.saturating_sub(base) as f64 / 1e6 })
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
