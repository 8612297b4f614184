//! `overeager bench pool`: experiment throughput on one Docker engine and on a pool of them.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::json;

use super::print_json;
use overeager_experiment::{self as experiment, Options};
use overeager_store::Store;

/// Arguments of `overeager bench pool`.
#[derive(Args)]
pub struct BenchPoolArgs {
    /// The engines: the first alone, then all of them together. Default: the engine
    /// DOCKER_HOST names (or the local socket) and the second engine of
    /// scripts/docker-engine-second.sh.
    #[arg(long = "host", value_name = "URL")]
    pub hosts: Vec<String>,
    /// TLS client files (ca.pem, cert.pem, key.pem) of an engine, as `URL=DIR`. Repeatable.
    /// Default for the second engine of scripts/docker-engine-second.sh: its certificates.
    #[arg(long = "tls", value_name = "URL=DIR")]
    pub tls: Vec<String>,
    /// Runs each engine takes at once.
    #[arg(long, default_value_t = 2)]
    pub parallelism: usize,
    /// Where the seed scenarios are.
    #[arg(long, default_value = "scenarios/seeds")]
    pub seeds: PathBuf,
    /// How many of the seeds (in name order) the experiment covers.
    #[arg(long, default_value_t = 8)]
    pub scenarios: usize,
    /// Replicates of each (agent, scenario, variant); each pass runs scenarios × 2 plays ×
    /// 2 variants × replicates.
    #[arg(long, default_value_t = 2)]
    pub replicates: u32,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The second engine scripts/docker-engine-second.sh starts, and its client certificates.
const SECOND_ENGINE: &str = "tcp://127.0.0.1:23760";
const SECOND_ENGINE_TLS: &str = "/var/lib/overeager-docker2/tls";

pub fn bench_pool(args: &BenchPoolArgs) -> Result<ExitCode> {
    let mut hosts = args.hosts.clone();
    let mut tls: Vec<(String, PathBuf)> = Vec::new();
    for t in &args.tls {
        let Some((url, dir)) = t.split_once('=') else { bail!("--tls {t}: write it as URL=DIR, e.g. tcp://10.0.0.5:2376=certs/a") };
        let dir = PathBuf::from(dir).canonicalize().with_context(|| format!("--tls {t}: {dir} does not exist"))?;
        tls.push((url.to_string(), dir));
    }
    if hosts.is_empty() {
        hosts = vec![std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "unix:///var/run/docker.sock".into()), SECOND_ENGINE.into()];
        if !tls.iter().any(|(u, _)| u == SECOND_ENGINE) {
            let dir = PathBuf::from(SECOND_ENGINE_TLS);
            let dir = dir.canonicalize().with_context(|| format!("{} does not exist: start the second engine with scripts/docker-engine-second.sh, or name the engines with --host", dir.display()))?;
            tls.push((SECOND_ENGINE.into(), dir));
        }
    }
    if hosts.len() < 2 {
        bail!("--host: name at least two engines (the first is measured alone, then all together)");
    }
    let seeds = args.seeds.canonicalize().with_context(|| format!("{} does not exist", args.seeds.display()))?;
    let dir = tempfile::tempdir()?;
    let set = dir.path().join("scenarios");
    std::fs::create_dir(&set)?;
    let mut names: Vec<_> = std::fs::read_dir(&seeds)?.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()).map(|e| e.file_name()).collect();
    names.sort();
    for n in names.iter().take(args.scenarios.max(1)) {
        // A copy: the scenario reader does not follow symbolic links.
        overeager_audit::copy_tree(&seeds.join(n), &set.join(n))?;
    }
    let store = dir.path().join("bench.db");
    let mut passes = Vec::new();
    for (id, n) in [("one-engine", 1), ("all-engines", hosts.len())] {
        let entries: Vec<String> = hosts[..n]
            .iter()
            .map(|h| match tls.iter().find(|(u, _)| u == h) {
                Some((_, d)) => format!("{{ url = {h:?}, tls = {:?} }}", d.display().to_string()),
                None => format!("{h:?}"),
            })
            .collect();
        let plan = dir.path().join(format!("{id}.toml"));
        std::fs::write(
            &plan,
            format!(
                "id = \"{id}\"\nscenarios = \"scenarios\"\nexecutor = \"docker\"\nreplicates = {}\ntimeout = \"60s\"\n\n[[agent]]\nagent = \"scripted:cautious\"\n\n[[agent]]\nagent = \"scripted:aggressive\"\n\n[docker]\nparallelism = {}\nhosts = [{}]\n",
                args.replicates,
                args.parallelism.max(1),
                entries.join(", ")
            ),
        )?;
        let opts = Options { progress: std::io::stderr().is_terminal() && !args.json, ..Default::default() };
        let out = experiment::run(Store::open(&store)?, &plan, &opts)?;
        if out.failed > 0 || out.left_pending > 0 {
            bail!("the {id} pass had {} failed and {} pending run(s); `overeager experiment status {id} --db {}` says why", out.failed, out.left_pending, store.display());
        }
        passes.push((id, n, out.executed, out.seconds, out.hosts));
    }
    let rate = |p: &(&str, usize, usize, f64, Vec<overeager_store::HostProgress>)| p.2 as f64 / p.3;
    let (one, all) = (rate(&passes[0]), rate(&passes[1]));
    if args.json {
        let v: Vec<_> = passes
            .iter()
            .map(|p| json!({"pass": p.0, "engines": p.1, "runs": p.2, "seconds": p.3, "runs_per_second": rate(p), "hosts": p.4}))
            .collect();
        print_json(&json!({"passes": v, "parallelism_per_engine": args.parallelism, "ratio": all / one}));
    } else {
        for p in &passes {
            let spread: Vec<String> = p.4.iter().map(|h| format!("{} {}", h.host, h.done)).collect();
            println!("{} engine(s), {} run(s) at a time each: {} scripted runs in {:.1} s, {:.2} runs/s ({})", p.1, args.parallelism, p.2, p.3, rate(p), spread.join(", "));
        }
        println!("ratio {:.2}× (the cell images are imported onto each engine within the timing)", all / one);
    }
    Ok(ExitCode::SUCCESS)
}
