//! The API under load: `GET /api/leaderboard` alone, and four endpoints alone and then
//! together, each served in process and loaded with wrk.

use std::path::Path;

use anyhow::{Result, bail};
use serde::Serialize;

use overeager_api as api;

/// One load of the leaderboard.
#[derive(Debug)]
pub struct Leaderboard {
    pub url: String,
    /// What wrk printed.
    pub text: String,
    pub figures: WrkFigures,
}

/// The newest experiment of the store at `db`, which the endpoints under load rank.
fn newest_experiment(db: &Path) -> Result<String> {
    let newest = overeager_store::Store::open_existing(db)?.experiments()?.into_iter().max_by_key(|e| e.created_us);
    match newest {
        Some(e) => Ok(e.id),
        None => bail!("{} has no experiment to rank; run `overeager demo --no-serve` or `overeager experiment run <plan>` first", db.display()),
    }
}

/// Serves the store at `db` in process and loads `GET /api/leaderboard` with wrk, asking for
/// gzip-compressed answers if `gzip`, as browsers do.
pub fn leaderboard(db: &Path, threads: u32, connections: u32, seconds: u32, gzip: bool) -> Result<Leaderboard> {
    newest_experiment(db)?;
    let (rt, addr) = api::serve_in_process(db)?;
    let url = format!("http://{addr}/api/leaderboard");
    // Warm the cache, and check the endpoint answers.
    wrk(&url, 1, 1, 1)?;
    let text = wrk_output(&url, threads, connections, seconds, gzip)?;
    rt.shutdown_background();
    let figures = WrkFigures::parse(&text);
    Ok(Leaderboard { url, text, figures })
}

/// One endpoint loaded alone and among the others.
#[derive(Debug, Serialize)]
pub struct MixedEndpoint {
    pub path: String,
    pub alone: WrkFigures,
    pub mixed: WrkFigures,
    pub p99_ratio: f64,
}

/// The leaderboard, run, scenario and experiment lists, each loaded alone, then all together.
#[derive(Debug, Serialize)]
pub struct Mixed {
    pub connections_per_endpoint: u32,
    pub seconds: u32,
    pub endpoints: Vec<MixedEndpoint>,
}

/// Serves the store at `db` in process and loads four endpoints alone and then all together,
/// `connections` spread over them.
pub fn mixed(db: &Path, connections: u32, seconds: u32) -> Result<Mixed> {
    let experiment = newest_experiment(db)?;
    let (rt, addr) = api::serve_in_process(db)?;
    let paths = ["/api/leaderboard".to_string(), format!("/api/runs?experiment={experiment}"), "/api/scenarios".into(), "/api/experiments".into()];
    let urls: Vec<String> = paths.iter().map(|p| format!("http://{addr}{p}")).collect();
    // Warm every cache first.
    for u in &urls {
        wrk(u, 1, 1, 1)?;
    }
    let conns = connections.div_ceil(4).max(1);
    let alone: Vec<WrkFigures> = urls.iter().map(|u| wrk(u, 1, conns, seconds)).collect::<Result<_>>()?;
    let together: Vec<WrkFigures> = std::thread::scope(|sc| {
        let handles: Vec<_> = urls.iter().map(|u| sc.spawn(move || wrk(u, 1, conns, seconds))).collect();
        handles.into_iter().map(|h| h.join().expect("the wrk thread")).collect::<Result<_>>()
    })?;
    rt.shutdown_background();
    let endpoints = paths
        .into_iter()
        .zip(alone.into_iter().zip(together))
        .map(|(path, (alone, mixed))| MixedEndpoint { p99_ratio: mixed.p99_ms / alone.p99_ms, path, alone, mixed })
        .collect();
    Ok(Mixed { connections_per_endpoint: conns, seconds, endpoints })
}

/// What wrk measured.
#[derive(Debug, Clone, Serialize)]
pub struct WrkFigures {
    pub requests_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// The slowest request.
    pub max_ms: f64,
    pub non_2xx: u64,
}

impl WrkFigures {
    fn parse(text: &str) -> WrkFigures {
        let field = |prefix: &str| text.lines().find_map(|l| l.trim().strip_prefix(prefix).map(|r| r.trim().to_string()));
        WrkFigures {
            requests_per_s: field("Requests/sec:").and_then(|v| v.parse().ok()).unwrap_or(f64::NAN),
            p50_ms: field("50%").map_or(f64::NAN, |v| parse_wrk_ms(&v)),
            p99_ms: field("99%").map_or(f64::NAN, |v| parse_wrk_ms(&v)),
            // `Latency  avg  stdev  max  +/- stdev`
            max_ms: field("Latency").and_then(|v| v.split_whitespace().nth(2).map(parse_wrk_ms)).unwrap_or(f64::NAN),
            non_2xx: field("Non-2xx or 3xx responses:").and_then(|v| v.parse().ok()).unwrap_or(0),
        }
    }
}

/// Loads `url` with wrk (`threads`, `connections`, `seconds`) and reads its latency figures.
pub fn wrk(url: &str, threads: u32, connections: u32, seconds: u32) -> Result<WrkFigures> {
    Ok(WrkFigures::parse(&wrk_output(url, threads, connections, seconds, false)?))
}

/// What wrk prints for a load of `url`, asking for gzip responses if `gzip`.
fn wrk_output(url: &str, threads: u32, connections: u32, seconds: u32, gzip: bool) -> Result<String> {
    let mut cmd = std::process::Command::new("wrk");
    cmd.args([&format!("-t{threads}"), &format!("-c{connections}"), &format!("-d{seconds}s"), "--latency"]);
    if gzip {
        cmd.args(["-H", "Accept-Encoding: gzip"]);
    }
    let out = cmd.arg(url).output().map_err(|_| anyhow::anyhow!("wrk is not installed; install it (apt-get install wrk) to run this benchmark"))?;
    if !out.status.success() {
        bail!("wrk failed on {url}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// wrk's latency figures (`812.00us`, `1.20ms`, `2.01s`) in milliseconds.
fn parse_wrk_ms(v: &str) -> f64 {
    let (num, scale) = if let Some(n) = v.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (v, 1.0)
    };
    num.parse::<f64>().map(|x| x * scale).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    #[test]
    fn wrk_latencies_parse_in_ms() {
        assert_eq!(super::parse_wrk_ms("812.00us"), 0.812);
        assert_eq!(super::parse_wrk_ms("1.20ms"), 1.2);
        assert_eq!(super::parse_wrk_ms("2.00s"), 2000.0);
    }
}
