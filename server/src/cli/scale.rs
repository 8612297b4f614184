//! `overeager bench scale`: the API under a store of a public leaderboard's size
//! ([`overeager_bench::scale`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};

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

/// `overeager bench scale`.
pub fn bench_scale(args: &BenchScaleArgs) -> Result<ExitCode> {
    let tmp = tempfile::tempdir()?;
    let dir = args.keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let opts = overeager_bench::scale::Options {
        scenarios: args.scenarios,
        runs: args.runs,
        small_runs: args.small_runs,
        connections: args.connections,
        seconds: args.seconds,
        seeds: args.seeds.clone(),
        bundle: args.bundle.clone(),
        dist: args.dist.clone(),
        dir,
    };
    let s = overeager_bench::scale::scale(&opts)?;
    if args.json {
        super::print_json(&serde_json::to_value(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    let linear = s.runs as f64 / s.small_runs as f64;
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header([
        "endpoint".to_string(),
        "first ms".into(),
        "single ms".into(),
        format!("p99 ms ({} conns)", s.connections),
        "req/s".into(),
        format!("single ms @{}", s.small_runs),
        format!("growth (linear = {linear:.2})"),
    ]);
    for e in &s.endpoints {
        let l = &e.large;
        t.add_row([
            e.path.clone(),
            format!("{:.1}", l.first_ms),
            format!("{:.2}", l.single_ms),
            // Searches are loaded with as many connections as the server searches at once.
            if l.connections == s.connections { format!("{:.1}", l.p99_ms) } else { format!("{:.1} ({} conn)", l.p99_ms, l.connections) },
            format!("{:.0}", l.requests_per_s),
            format!("{:.2}", e.small.single_ms),
            format!("{:.2}", e.growth),
        ]);
    }
    println!("{} scenarios, {} runs (growth from {} runs); load: {} connections for {} s per endpoint", s.scenarios, s.runs, s.small_runs, s.connections, s.seconds);
    println!("{t}");
    if let Some(u) = &s.under_search {
        println!(
            "while {} connections search `{}` for {} s: the leaderboard's p99 {:.1} ms (alone {:.1} ms, {:.0} req/s); the searches: {:.1} requests/s, {} of them refused (503 busy, or 422 over the time budget), the slowest {:.0} ms",
            u.connections, u.query, u.seconds, u.leaderboard.p99_ms, u.leaderboard_alone.p99_ms, u.leaderboard.requests_per_s, u.search.requests_per_s, u.search.non_2xx, u.search.max_ms
        );
    }
    for c in &s.cold {
        println!(
            "cold {}: one request {:.0} ms of CPU ({:.0} ms); {} at once {:.0} ms of CPU ({:.2}× one; the slowest {:.0} ms){}",
            c.path, c.one_cpu_ms, c.one_ms, c.crowd, c.crowd_cpu_ms, c.cpu_ratio, c.crowd_ms, if c.non_2xx > 0 { format!("; {} not 2xx", c.non_2xx) } else { String::new() }
        );
    }
    if let Some(m) = &s.many_raters {
        println!("labels report of {} raters ({} labels): http {} in {:.0} ms, {:.1} MB, resident memory +{:.0} MB at most", m.raters, m.labels, m.status, m.ms, m.bytes as f64 / 1e6, m.peak_rss_growth_mb);
    }
    if let Some(p) = &s.published {
        println!("published site: {} runs, {} files, {:.1} s", p.runs, p.files, p.seconds);
    }
    Ok(ExitCode::SUCCESS)
}
