//! `overeager bench scale` and `overeager bench api --mixed`: the API under a store of a
//! public leaderboard's size, and one endpoint's latency while the others are loaded.
//!
//! The scale store is synthetic and says so: its scenarios are the seed scenarios copied
//! under new ids (`<seed>-scale-<n>`), its runs belong to the experiment `scale-bench` of
//! five `sim:` agents, every run points at one real packed bundle, and every verdict is built
//! by the real verdict logic from findings drawn with a fixed seed. It measures the store and
//! the API, not any agent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use overeager_core::verdict::{Finding, LeafOutcome, decide, leaf_calls};
use overeager_core::{Variant, plan::Plan};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::json;

use crate::api::{self, AppState, Config};
use crate::audit::Bundle;
use crate::scenario::LoadedScenario;
use crate::store::{NewRun, Store, put_object_in};

/// The experiment id of a scale store.
pub const SCALE_EXPERIMENT: &str = "scale-bench";
/// Agents of a scale store: (framework, model, chance that a run is overeager).
const AGENTS: &[(&str, &str, f64)] = &[("sim-a", "m1", 0.10), ("sim-a", "m2", 0.25), ("sim-b", "m1", 0.40), ("sim-b", "m2", 0.15), ("sim-c", "m1", 0.30)];

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

/// Fills a new store at `db` with `scenarios` scenarios and `runs` judged runs of
/// [`SCALE_EXPERIMENT`].
pub fn build_store(db: &Path, seeds: &Path, bundle: &Path, scenarios: usize, runs: usize) -> Result<()> {
    if db.exists() {
        bail!("{} exists already; the scale store is built from nothing", db.display());
    }
    let mut store = Store::open(db)?;
    let digest = put_object_in(&store.objects_dir(), bundle).with_context(|| format!("storing {}", bundle.display()))?;
    let template = Bundle::open(bundle)?.manifest;
    let dirs = crate::scenario::discover(&[seeds.to_path_buf()]).map_err(anyhow::Error::msg)?;
    let loaded: Vec<LoadedScenario> = dirs.iter().map(|d| crate::scenario::load(d).map_err(|e| anyhow::anyhow!("{}: {} problem(s)", d.display(), e.len()))).collect::<Result<_>>()?;
    if loaded.is_empty() {
        bail!("no scenarios under {}", seeds.display());
    }
    let copies: Vec<LoadedScenario> = (0..scenarios)
        .map(|i| {
            let mut s = loaded[i % loaded.len()].clone();
            s.scenario.id = format!("{}-scale-{i}", s.scenario.id);
            s.hash = format!("sha256:{}", overeager_core::sha256_hex(format!("{}\n{i}", s.hash).as_bytes()));
            s
        })
        .collect();
    let plan_text = format!(
        "id = \"{SCALE_EXPERIMENT}\"\ntitle = \"Synthetic store for the scale benchmark\"\nscenarios = \"{}\"\nreplicates = {}\n{}",
        seeds.display(),
        runs.div_ceil(scenarios * 2 * AGENTS.len()).max(1),
        AGENTS.iter().map(|(f, m, _)| format!("[[agent]]\nagent = \"sim:permissive\"\nframework = \"{f}\"\nmodel = \"{m}\"\n")).collect::<String>()
    );
    let plan = Plan::from_toml("scale-bench.toml", &plan_text, crate::experiment::agent_labels).map_err(|e| anyhow::anyhow!("the scale plan: {e:?}"))?;
    // Run k ↔ (scenario, variant, agent, replicate): every run is a distinct matrix cell.
    let cell = |k: usize| {
        let (s, rest) = (k % scenarios, k / scenarios);
        let (v, rest) = (rest % 2, rest / 2);
        (s, v, rest % AGENTS.len(), rest / AGENTS.len())
    };
    let matrix: Vec<NewRun> = (0..runs)
        .map(|k| {
            let (s, v, a, replicate) = cell(k);
            NewRun {
                id: format!("scale-{k:06}"),
                agent: "sim:permissive".into(),
                framework: AGENTS[a].0.into(),
                model: AGENTS[a].1.into(),
                simulated: true,
                scenario_hash: copies[s].hash.clone(),
                variant: if v == 0 { Variant::ConsentKept } else { Variant::ConsentStripped },
                replicate: replicate as u32,
                seed: k as u64,
            }
        })
        .collect();
    store.create_experiment(&plan, "scale", "scale-bench.toml", &copies, &matrix)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(20_261_124);
    for (k, r) in matrix.iter().enumerate() {
        let (s, _, a, _) = cell(k);
        let s = &copies[s];
        let over = rng.random_bool(AGENTS[a].2);
        let broken = rng.random_bool(0.01);
        let calls = leaf_calls(&s.scenario);
        let outcomes = calls
            .iter()
            .enumerate()
            .map(|(i, c)| LeafOutcome {
                module: Some(crate::judge::STD_SHA256.to_string()),
                result: match c.site {
                    overeager_core::verdict::Site::Trap(_) if broken && i == 0 => Err("memory limit (synthetic)".into()),
                    overeager_core::verdict::Site::Trap(t) => Ok(Finding { fired: over && t == 0, evidence: vec![1], note: None }),
                    overeager_core::verdict::Site::Success(_) => Ok(Finding { fired: !over, evidence: vec![], note: None }),
                },
            })
            .collect();
        let mut manifest = template.clone();
        manifest.run_id = r.id.clone();
        manifest.variant = r.variant;
        manifest.replicate = r.replicate;
        manifest.timed_out = rng.random_bool(0.02);
        manifest.scenario.id = s.scenario.id.clone();
        manifest.scenario.hash = s.hash.clone();
        let verdict = decide(&digest, &manifest, &s.scenario, outcomes, BTreeMap::new());
        store.finish_run(&r.id, &digest, &manifest, &verdict)?;
    }
    Ok(())
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
    let store = Store::open_existing(db)?;
    let page = store.run_rows(&crate::store::web::RunFilter { experiment: Some(SCALE_EXPERIMENT.into()), limit: Some(200), ..Default::default() })?;
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
        format!("/api/bundles/{bundle}"),
        "/api/bundles".into(),
        "/api/predicates".into(),
        "/api/transfer".into(),
    ])
}

/// A server on the store, in this process; its address and the runtime that serves it.
pub fn serve_in_process(db: &Path) -> Result<(tokio::runtime::Runtime, std::net::SocketAddr)> {
    let state = AppState::open(Config { db: db.to_path_buf(), dist: None, trust: PathBuf::from("/nonexistent"), plans: PathBuf::from("plans") })?;
    let rt = super::web::runtime()?;
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(api::serve(state, "127.0.0.1:0".parse().expect("an address"), move |a| {
        let _ = tx.send(a);
    }));
    let addr = rx.recv().context("the server did not start")?;
    Ok((rt, addr))
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
    for runs in [args.small_runs, args.runs] {
        let db = dir.join(format!("scale-{runs}.db"));
        let t = Instant::now();
        if !db.exists() {
            build_store(&db, &args.seeds, &args.bundle, args.scenarios, runs)?;
        }
        eprintln!("store of {} scenarios and {runs} runs ready in {:.1} s; measuring", args.scenarios, t.elapsed().as_secs_f64());
        let (rt, addr) = serve_in_process(&db)?;
        let figures = measure(addr, &scale_paths(&db)?, args.connections, args.seconds)?;
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
        super::print_json(&json!({ "scenarios": args.scenarios, "runs": args.runs, "small_runs": args.small_runs, "connections": args.connections, "endpoints": rows, "published": published }));
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
    if let Some(p) = published {
        println!("published site: {} runs, {} files, {:.1} s", p["runs"], p["files"], p["seconds"].as_f64().unwrap_or(0.0));
    }
    Ok(ExitCode::SUCCESS)
}
