//! `overeager bench scale`: the API under a store of a public leaderboard's size
//! ([`overeager_bench::scale`]); `overeager bench soak`: the server under a mixed load, killed
//! and restarted ([`overeager_bench::soak`]).

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
    if let Some(r) = &s.report {
        println!(
            "report: {:.0} ms computing its variance decomposition on a fresh server, {:.0} ms with it kept in the store; after one label: the leaderboard {:.1} ms (warm {:.1}), the report {:.1} ms (warm {:.1})",
            r.computed_ms,
            r.kept_ms,
            r.leaderboard_after_label_ms,
            r.warm_leaderboard_ms,
            r.report_after_label_ms,
            r.warm_report_ms
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

/// Arguments of `overeager bench soak`.
#[derive(Args)]
pub struct BenchSoakArgs {
    /// Seconds of load.
    #[arg(long, default_value_t = 600)]
    pub seconds: u32,
    /// SIGKILLs of the server, spread evenly over the time, each followed by a restart.
    #[arg(long, default_value_t = 2)]
    pub kills: u32,
    /// Clients reading public pages (leaderboard, cells, report, runs, a run, scenarios, a
    /// trace, the labels report), one request at a time each.
    #[arg(long, default_value_t = 4)]
    pub readers: u32,
    /// Clients searching.
    #[arg(long, default_value_t = 1)]
    pub searchers: u32,
    /// Clients writing labels, each a reviewer of its own.
    #[arg(long, default_value_t = 2)]
    pub labellers: u32,
    /// Clients uploading distinct bundles for the server to judge.
    #[arg(long, default_value_t = 1)]
    pub uploaders: u32,
    /// Scenarios and runs of the synthetic store served.
    #[arg(long, default_value_t = 500)]
    pub scenarios: usize,
    #[arg(long, default_value_t = 2_400)]
    pub runs: usize,
    /// The seed scenarios copied into the store.
    #[arg(long, default_value = "scenarios/seeds")]
    pub seeds: PathBuf,
    /// The real packed bundle the runs point at and the uploads are made from.
    #[arg(long, default_value = "bundles/claude-code-permissive-aggressive.oeb")]
    pub bundle: PathBuf,
    /// Keep the store and the server's logs in this directory (which must not hold a soak's
    /// store already) instead of a temporary one.
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `overeager bench soak`.
pub fn bench_soak(args: &BenchSoakArgs) -> Result<ExitCode> {
    let tmp = tempfile::tempdir()?;
    let opts = overeager_bench::soak::Options {
        seconds: args.seconds,
        kills: args.kills,
        readers: args.readers,
        searchers: args.searchers,
        labellers: args.labellers,
        uploaders: args.uploaders,
        scenarios: args.scenarios,
        runs: args.runs,
        seeds: args.seeds.clone(),
        bundle: args.bundle.clone(),
        dir: args
            .keep
            .clone()
            .unwrap_or_else(|| tmp.path().to_path_buf()),
        exe: std::env::current_exe()?,
    };
    let s = overeager_bench::soak::soak(&opts)?;
    let status = if s.kept_its_word() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    if args.json {
        super::print_json(&serde_json::to_value(&s)?);
        return Ok(status);
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header([
        "route",
        "answered",
        "not 2xx",
        "no answer",
        "req/s",
        "p50 ms",
        "p99 ms",
        "max ms (at s)",
    ]);
    for r in &s.routes {
        t.add_row([
            r.route.clone(),
            r.answered.to_string(),
            r.non_2xx.to_string(),
            r.unanswered.to_string(),
            format!("{:.1}", r.per_s),
            format!("{:.1}", r.p50_ms),
            format!("{:.1}", r.p99_ms),
            format!("{:.0} ({:.1})", r.max_ms, r.max_at_s),
        ]);
    }
    let clients: Vec<String> = s.clients.iter().map(|(k, n)| format!("{n} {k}")).collect();
    println!(
        "{:.0} s over {} runs, {}; {:.0} requests/s answered",
        s.seconds,
        s.runs,
        clients.join(", "),
        s.requests_per_s
    );
    println!("{t}");
    for k in &s.kills {
        println!(
            "SIGKILL at {:.1} s: answering again after {:.0} ms",
            k.at_s, k.restarted_ms
        );
    }
    println!(
        "resident memory: {:.0} MB at most (by third of the time: {:.0}, {:.0}, {:.0} MB)",
        s.peak_rss_mb, s.rss_by_third_mb[0], s.rss_by_third_mb[1], s.rss_by_third_mb[2]
    );
    let w = &s.writes;
    println!(
        "writes: {} answered 2xx, {} refused, {} without an answer (the server died during them; {} of those kept); lost {}, kept though refused or never sent {}; store integrity: {}",
        w.answered_2xx,
        w.refused,
        w.in_doubt,
        w.in_doubt_kept,
        w.lost.len(),
        w.unexpected.len(),
        s.integrity
    );
    for l in w.lost.iter().chain(&w.unexpected).take(20) {
        println!("  {l}");
    }
    Ok(status)
}
