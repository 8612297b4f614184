//! The judge over thousands of bundles: set-up, the first verdict on a fresh machine, reading
//! alone, judging on one thread and on many (with the same verdicts), one instantiation, and
//! the two halves of one bundle's judging.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use serde::Serialize;

use overeager_audit::run_one;
use overeager_core::{PlayKind, Variant, Verdict};
use overeager_judge::engine::Limits;
use overeager_judge::trust::TrustStore;
use overeager_judge::{Judge, JudgeOptions, Origin, STD_ID, input};
use overeager_run::{self as run, AgentSpec};

/// The first verdict of a fresh machine.
#[derive(Debug, Serialize)]
pub struct FirstVerdict {
    /// With an empty cache of compiled code.
    pub empty_cache: f64,
    /// The same once more.
    pub again: f64,
}

/// Reading and parsing alone.
#[derive(Debug, Serialize)]
pub struct LoadOnly {
    pub seconds: f64,
    pub bundles_per_second: f64,
    /// On this many threads.
    pub threads: usize,
}

/// One judging pass over every bundle.
#[derive(Debug, Serialize)]
pub struct Pass {
    pub threads: usize,
    pub seconds: f64,
    pub bundles_per_second: f64,
}

/// Every figure of `judging`.
#[derive(Debug, Serialize)]
pub struct JudgeFigures {
    pub bundles: usize,
    pub distinct_bundles: usize,
    pub mean_view_bytes: usize,
    pub judge_setup_ms: f64,
    pub first_verdict_ms: FirstVerdict,
    /// Where std's compiled code came from the first time.
    pub std_compiled_code: Origin,
    pub load_only: LoadOnly,
    pub judge: Vec<Pass>,
    pub instantiation_us: f64,
    pub view_encoding_us: f64,
    pub evaluate_us: f64,
    /// The deterministic count of std's work on one bundle.
    pub evaluate_fuel: f64,
    pub peak_rss_mib: Option<f64>,
    pub machine: crate::Machine,
}

/// Peak resident memory of this process so far, from `/proc/self/status`.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Hard-links every file of `src` into a new directory `dst`.
fn link_tree(src: &Path, dst: &Path) -> Result<()> {
    for entry in walkdir::WalkDir::new(src) {
        let entry = entry?;
        let rel = entry.path().strip_prefix(src).expect("walkdir stays below its root");
        let target = dst.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target)?;
        } else {
            std::fs::hard_link(entry.path(), &target).or_else(|_| std::fs::copy(entry.path(), &target).map(|_| ()))?;
        }
    }
    Ok(())
}

/// Plays every seed × play × variant under `seeds` into real bundles, links them into
/// `bundles` copies, and measures the judge `build` makes (timed: the judge's set-up) on them,
/// on one thread and on `jobs`; `limits` are the first verdicts' judges'.
pub fn judging(seeds: &Path, bundles: usize, instantiations: usize, limits: &Limits, jobs: usize, build: &dyn Fn() -> Result<Judge>) -> Result<JudgeFigures> {
    let loaded = overeager_scenario::load_all(seeds)?;
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let tmp = tempfile::tempdir()?;
    // The real bundles: every seed × play × variant.
    let mut originals = Vec::new();
    for s in &loaded {
        for k in PlayKind::ALL {
            for v in Variant::ALL {
                let out = tmp.path().join("runs").join(format!("{}-{k}-{v}", s.scenario.id));
                run_one(s, AgentSpec::Scripted(k), v, 0, Duration::from_secs(120), &run::Executor::Local, &shim, &out)?;
                originals.push(out);
            }
        }
    }
    let n = bundles.max(originals.len());
    let mut paths = Vec::with_capacity(n);
    for i in 0..n {
        let dst = tmp.path().join("bundles").join(format!("{i:06}"));
        link_tree(&originals[i % originals.len()], &dst)?;
        paths.push(dst);
    }

    // The first verdict of a fresh machine (an empty cache of compiled code: std's code comes
    // from the binary when it fits this machine), then the same once more.
    let first_verdict_ms = |cache: &Path| -> Result<(f64, Origin)> {
        let t = Instant::now();
        let judge = Judge::new(JudgeOptions { limits: *limits, jobs: 1, cache: Some(cache.to_path_buf()), trust: TrustStore::default() })?;
        let verdict = judge.judge(&input::load(&paths[0])?);
        if verdict.outcome == overeager_core::verdict::Outcome::Incomplete {
            bail!("the first bundle's verdict is incomplete: {:?}", verdict.errors);
        }
        Ok((t.elapsed().as_secs_f64() * 1000.0, judge.origin(STD_ID).context("std is loaded")?))
    };
    let cache = tmp.path().join("compiled");
    let (cold_ms, origin) = first_verdict_ms(&cache)?;
    let (warm_ms, _) = first_verdict_ms(&cache)?;

    let started = Instant::now();
    let judge = build()?;
    let setup_ms = started.elapsed().as_secs_f64() * 1000.0;

    // Reading and parsing bundles alone, to separate I/O from judging.
    let t = Instant::now();
    let views: Vec<_> = paths.par_iter().map(|p| input::load(p)).collect::<Result<Vec<_>>>()?;
    let load_s = t.elapsed().as_secs_f64();
    let view_bytes: usize = views.iter().map(|v| v.view_compact().map_or(0, <[u8]>::len)).sum();
    drop(views);

    let mut passes = Vec::new();
    let mut verdicts_first: Option<Vec<Result<Verdict, String>>> = None;
    for jobs in [1, jobs.max(1)] {
        let t = Instant::now();
        let results = judge.judge_all(&paths, jobs, false, &|| {})?;
        let secs = t.elapsed().as_secs_f64();
        let failed = Judge::incomplete(&results);
        if failed > 0 {
            bail!("{failed} bundle(s) were not judged cleanly; run `overeager judge` on them to see why");
        }
        passes.push(Pass { threads: jobs, seconds: secs, bundles_per_second: n as f64 / secs });
        match &verdicts_first {
            None => verdicts_first = Some(results),
            Some(first) => {
                if first != &results {
                    bail!("verdicts differ between 1 and {jobs} threads");
                }
            }
        }
    }
    let inst_us = judge.bench_instantiate(instantiations.max(1))? * 1e6;
    // The two halves of one bundle's judging: building the view std gets (files read, parsed,
    // serialized), and one `evaluate` call on it.
    let sample = &paths[..paths.len().min(originals.len())];
    let t = Instant::now();
    let calls: Vec<_> = sample.iter().map(|p| input::load(p).map_err(|e| format!("{e:#}")).and_then(|b| judge.std_call(&b))).collect::<Result<_, String>>().map_err(anyhow::Error::msg)?;
    let encode_us = t.elapsed().as_secs_f64() / sample.len() as f64 * 1e6;
    let (evaluate_s, evaluate_fuel) = judge.bench_evaluate(&calls)?;
    Ok(JudgeFigures {
        bundles: n,
        distinct_bundles: originals.len(),
        mean_view_bytes: view_bytes / n,
        judge_setup_ms: setup_ms,
        first_verdict_ms: FirstVerdict { empty_cache: cold_ms, again: warm_ms },
        std_compiled_code: origin,
        load_only: LoadOnly { seconds: load_s, bundles_per_second: n as f64 / load_s, threads: rayon::current_num_threads() },
        judge: passes,
        instantiation_us: inst_us,
        view_encoding_us: encode_us,
        evaluate_us: evaluate_s * 1e6,
        evaluate_fuel,
        peak_rss_mib: peak_rss_bytes().map(|b| b as f64 / (1 << 20) as f64),
        machine: crate::Machine::this(),
    })
}
