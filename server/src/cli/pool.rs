//! `overeager bench pool`: experiment throughput on one Docker engine and on a pool of them.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::print_json;
use overeager_bench::experiments::Engine;

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
    let engines: Vec<Engine> = hosts.into_iter().map(|url| Engine { tls: tls.iter().find(|(u, _)| *u == url).map(|(_, d)| d.clone()), url }).collect();
    let f = overeager_bench::experiments::pool(&engines, &args.seeds, args.scenarios, args.replicates, args.parallelism, std::io::stderr().is_terminal() && !args.json)?;
    if args.json {
        print_json(&serde_json::to_value(&f)?);
        return Ok(ExitCode::SUCCESS);
    }
    for p in &f.passes {
        let spread: Vec<String> = p.hosts.iter().map(|h| format!("{} {}", h.host, h.done)).collect();
        println!("{} engine(s), {} run(s) at a time each: {} scripted runs in {:.1} s, {:.2} runs/s ({})", p.engines, f.parallelism_per_engine, p.runs, p.seconds, p.runs_per_second, spread.join(", "));
    }
    println!("ratio {:.2}× (the cell images are imported onto each engine within the timing)", f.ratio);
    Ok(ExitCode::SUCCESS)
}
