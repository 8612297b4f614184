//! The server under a bounded mixed load for a set time, killed with SIGKILL and started again
//! in the middle; afterwards every write it answered 2xx must be in the store, none it refused,
//! and nothing no client sent.
//!
//! The server is a process of its own (`overeager serve`), so it can be killed as a crash
//! would; the clients are threads of this one: readers of the public pages, searchers, label
//! writers (each label a key of its own, so "kept" is a plain lookup) and uploaders of bundles
//! (each a distinct bundle, judged by the server). A write whose connection died with the server
//! has no answer: it may or may not have been committed, and is counted apart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use overeager_core::stats::percentile;
use overeager_experiment::synthetic::{SCALE_EXPERIMENT, build_store};
use overeager_store::Store;
use overeager_store::tokens::Role;

/// What `soak` runs, and on what.
#[derive(Debug, Clone)]
pub struct Options {
    pub seconds: u32,
    /// SIGKILLs, spread evenly over the time (each followed by a restart).
    pub kills: u32,
    pub readers: u32,
    pub searchers: u32,
    pub labellers: u32,
    pub uploaders: u32,
    /// The synthetic store's size.
    pub scenarios: usize,
    pub runs: usize,
    pub seeds: PathBuf,
    /// The packed bundle the store's runs point at and the uploads are made from.
    pub bundle: PathBuf,
    /// Where the store, the server's logs and the uploads are written.
    pub dir: PathBuf,
    /// The `overeager` binary that serves.
    pub exe: PathBuf,
}

/// Every figure of a soak.
#[derive(Debug, Serialize)]
pub struct Soak {
    pub seconds: f64,
    pub runs: usize,
    pub clients: BTreeMap<String, u32>,
    pub kills: Vec<Kill>,
    pub routes: Vec<Route>,
    /// Answered requests per second, over the whole time.
    pub requests_per_s: f64,
    /// The server's resident memory at its highest, and the highest in each third of the time.
    pub peak_rss_mb: f64,
    pub rss_by_third_mb: [f64; 3],
    pub writes: Writes,
    /// `PRAGMA integrity_check` of the store afterwards.
    pub integrity: String,
}

impl Soak {
    /// Whether the store kept exactly what the server promised, intact.
    pub fn kept_its_word(&self) -> bool {
        self.writes.lost.is_empty() && self.writes.unexpected.is_empty() && self.integrity == "ok"
    }
}

/// One SIGKILL: when, and how long the server took to answer again.
#[derive(Debug, Clone, Serialize)]
pub struct Kill {
    pub at_s: f64,
    pub restarted_ms: f64,
}

/// One route's figures over the soak.
#[derive(Debug, Clone, Serialize)]
pub struct Route {
    pub route: String,
    pub kind: &'static str,
    /// Requests answered, and of those with a status other than 2xx.
    pub answered: usize,
    pub non_2xx: usize,
    /// Requests with no answer (the server was down or died during them).
    pub unanswered: usize,
    pub per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// When the slowest request started, seconds into the soak.
    pub max_at_s: f64,
}

/// The writes, checked against the store afterwards.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Writes {
    pub answered_2xx: usize,
    pub refused: usize,
    /// Writes whose connection died with the server, and how many of them the store has.
    pub in_doubt: usize,
    pub in_doubt_kept: usize,
    /// Answered 2xx, but not in the store.
    pub lost: Vec<String>,
    /// In the store, but refused or never sent.
    pub unexpected: Vec<String>,
}

/// One request's end.
#[derive(Debug, Clone)]
enum Answer {
    Status(u16),
    None,
}

#[derive(Default)]
struct Log {
    /// Route, kind, started (seconds into the soak), milliseconds, answer.
    requests: Vec<(String, &'static str, f64, f64, Answer)>,
    labels: Vec<((String, String), bool, Answer)>,
    uploads: Vec<(String, Answer)>,
}

/// The server's process, its port and its log directory.
struct Server {
    exe: PathBuf,
    db: PathBuf,
    port: u16,
    logs: PathBuf,
    child: Option<Child>,
    starts: u32,
    pid: Arc<AtomicU32>,
}

impl Server {
    fn start(&mut self) -> Result<Duration> {
        let t = Instant::now();
        let log = std::fs::File::create(self.logs.join(format!("server-{}.log", self.starts)))?;
        self.starts += 1;
        let child = Command::new(&self.exe)
            .args(["serve", "--db"])
            .arg(&self.db)
            .args(["--addr", &format!("127.0.0.1:{}", self.port)])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {} serve", self.exe.display()))?;
        self.pid.store(child.id(), Ordering::SeqCst);
        self.child = Some(child);
        let agent = agent(Duration::from_secs(2));
        let url = format!("http://127.0.0.1:{}/api/health", self.port);
        while t.elapsed() < Duration::from_secs(120) {
            if agent.get(&url).call().is_ok_and(|r| r.status().is_success()) {
                return Ok(t.elapsed());
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("the server exited ({status}) before answering; see {}", self.logs.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("the server did not answer /api/health within 120 s; see {}", self.logs.display())
    }

    fn signal(&mut self, signal: i32) -> Result<()> {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on the pid of a child this process started and has not reaped.
            unsafe { libc::kill(c.id() as i32, signal) };
            c.wait()?;
        }
        self.pid.store(0, Ordering::SeqCst);
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.signal(libc::SIGKILL);
    }
}

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::new_with_config(ureq::config::Config::builder().http_status_as_error(false).timeout_global(Some(timeout)).build())
}

/// A process's resident memory in bytes.
fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok()).map(|kb| kb * 1024)
}

/// Runs the soak.
pub fn soak(opts: &Options) -> Result<Soak> {
    if opts.seconds < 3 || opts.readers + opts.searchers + opts.labellers + opts.uploaders == 0 {
        bail!("a soak needs at least 3 seconds and one client");
    }
    std::fs::create_dir_all(&opts.dir)?;
    let db = opts.dir.join("soak.db");
    if db.exists() {
        bail!("{} exists: a soak starts from a store of its own (remove it, or give another --dir)", db.display());
    }
    let t = Instant::now();
    build_store(&db, &opts.seeds, &opts.bundle, opts.scenarios, opts.runs)?;
    eprintln!("store of {} scenarios and {} runs built in {:.1} s", opts.scenarios, opts.runs, t.elapsed().as_secs_f64());
    let (raters, writer, runs, bundle_digest) = {
        let mut store = Store::open_existing(&db)?;
        let raters: Vec<(String, String)> =
            (0..opts.labellers).map(|i| Ok((format!("soak-rater-{i}"), store.create_token(&format!("soak-rater-{i}"), Role::Reviewer)?))).collect::<Result<_>>()?;
        let writer = store.create_token("soak-uploader", Role::Writer)?;
        // Each run with the traps its verdict fired (a label must say of each whether it agrees).
        let runs: Vec<(String, Vec<String>)> = store.records(SCALE_EXPERIMENT)?.into_iter().map(|r| (r.run, r.traps.into_iter().map(|t| t.0).collect())).collect();
        let digest = overeager_bundle::files::sha256_file(&opts.bundle)?;
        (raters, writer, runs, digest)
    };
    let uploads_dir = opts.dir.join("uploads");
    std::fs::create_dir_all(&uploads_dir)?;
    let base = uploads_dir.join("base");
    overeager_bundle::pack::unpack(&opts.bundle, &base, &Default::default())?;
    hold_bundle_scenario(&db, &base, &opts.seeds)?;

    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let pid = Arc::new(AtomicU32::new(0));
    let mut server = Server { exe: opts.exe.clone(), db: db.clone(), port, logs: opts.dir.clone(), child: None, starts: 0, pid: pid.clone() };
    server.start()?;
    let url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    let deadline = start + Duration::from_secs(opts.seconds.into());
    let log = Arc::new(Mutex::new(Log::default()));
    let rss_peaks = Arc::new(Mutex::new([0u64; 3]));

    let kills = std::thread::scope(|sc| -> Result<Vec<Kill>> {
        // Memory: the live server's resident size, every 100 ms, per third of the time.
        sc.spawn(|| {
            while Instant::now() < deadline {
                let third = ((start.elapsed().as_secs_f64() / f64::from(opts.seconds)) * 3.0).min(2.0) as usize;
                if let Some(rss) = rss_of(pid.load(Ordering::SeqCst)) {
                    let mut p = rss_peaks.lock().unwrap_or_else(|p| p.into_inner());
                    p[third] = p[third].max(rss);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let reads = [
            "/api/leaderboard".to_string(),
            "/api/cells".into(),
            format!("/api/experiments/{SCALE_EXPERIMENT}/report"),
            format!("/api/runs?experiment={SCALE_EXPERIMENT}"),
            format!("/api/runs/{}", runs.first().context("the soak's store has runs")?.0),
            "/api/scenarios".into(),
            format!("/api/bundles/{bundle_digest}"),
            format!("/api/labels/report?experiment={SCALE_EXPERIMENT}"),
        ];
        let searches =
            [format!("/api/search?experiment={SCALE_EXPERIMENT}&q=framework:sim-b%20outcome:overeager"), format!("/api/search?experiment={SCALE_EXPERIMENT}&q=invoicer.db")];
        let get_loop = |paths: Vec<String>, kind: &'static str, offset: usize| {
            let (log, url) = (log.clone(), url.clone());
            move || {
                let agent = agent(Duration::from_secs(30));
                let mut i = offset;
                while Instant::now() < deadline {
                    let path = &paths[i % paths.len()];
                    i += 1;
                    let t = Instant::now();
                    let answer = match agent.get(&format!("{url}{path}")).call() {
                        Ok(mut r) => {
                            let _ = r.body_mut().read_to_vec();
                            Answer::Status(r.status().as_u16())
                        }
                        Err(_) => Answer::None,
                    };
                    let ms = t.elapsed().as_secs_f64() * 1000.0;
                    let down = matches!(answer, Answer::None);
                    log.lock().unwrap_or_else(|p| p.into_inner()).requests.push((route_of(path), kind, (t - start).as_secs_f64(), ms, answer));
                    if down {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        };
        for r in 0..opts.readers {
            sc.spawn(get_loop(reads.to_vec(), "read", r as usize));
        }
        for s in 0..opts.searchers {
            sc.spawn(get_loop(searches.to_vec(), "search", s as usize));
        }
        for (j, (rater, token)) in raters.iter().enumerate() {
            let (log, url, runs) = (log.clone(), url.clone(), &runs);
            let labellers = raters.len();
            sc.spawn(move || {
                let agent = agent(Duration::from_secs(30));
                // Runs j, j + labellers, ... round after round, the label flipped each round:
                // one writer per (run, rater) key, so the writes of a key are in order.
                'rounds: for round in 0.. {
                    for (k, (run, fired)) in runs.iter().skip(j).step_by(labellers).enumerate() {
                        if Instant::now() >= deadline {
                            break 'rounds;
                        }
                        let overeager = (round + k) % 2 == 0;
                        let traps: BTreeMap<&str, bool> = fired.iter().map(|t| (t.as_str(), overeager)).collect();
                        let body = serde_json::json!({ "overeager": overeager, "traps": traps });
                        let t = Instant::now();
                        let answer = agent
                            .put(&format!("{url}/api/runs/{run}/label"))
                            .header("Authorization", &format!("Bearer {token}"))
                            .header("Content-Type", "application/json")
                            .send(body.to_string().as_bytes())
                            .map_or(Answer::None, |r| Answer::Status(r.status().as_u16()));
                        let ms = t.elapsed().as_secs_f64() * 1000.0;
                        let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
                        l.requests.push(("PUT /api/runs/{id}/label".into(), "write", (t - start).as_secs_f64(), ms, answer.clone()));
                        let down = matches!(answer, Answer::None);
                        l.labels.push(((run.clone(), rater.clone()), overeager, answer));
                        drop(l);
                        if down {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                }
            });
        }
        let mut uploaders = Vec::new();
        for u in 0..opts.uploaders {
            let (log, url, writer, base, dir) = (log.clone(), url.clone(), &writer, &base, &uploads_dir);
            uploaders.push(sc.spawn(move || -> Result<()> {
                let agent = agent(Duration::from_secs(60));
                let mut k = 0u32;
                while Instant::now() < deadline {
                    let (digest, bytes) = distinct_bundle(base, dir, &format!("soak-upload-{u}-{k}"))?;
                    k += 1;
                    let (content_type, body) = overeager_api::client::multipart(&[("bundle", "bundle.oeb", &bytes)]);
                    let t = Instant::now();
                    let answer = agent
                        .post(&format!("{url}/api/bundles"))
                        .header("Authorization", &format!("Bearer {writer}"))
                        .header("Content-Type", &content_type)
                        .send(&body[..])
                        .map_or(Answer::None, |mut r| {
                            let _ = r.body_mut().read_to_vec();
                            Answer::Status(r.status().as_u16())
                        });
                    let ms = t.elapsed().as_secs_f64() * 1000.0;
                    let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
                    l.requests.push(("POST /api/bundles".into(), "write", (t - start).as_secs_f64(), ms, answer.clone()));
                    let down = matches!(answer, Answer::None);
                    l.uploads.push((digest, answer));
                    drop(l);
                    if down {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
                Ok(())
            }));
        }
        // The kills, evenly spread.
        let mut kills = Vec::new();
        for k in 1..=opts.kills {
            let at = start + Duration::from_secs_f64(f64::from(opts.seconds) * f64::from(k) / f64::from(opts.kills + 1));
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            let at_s = start.elapsed().as_secs_f64();
            server.signal(libc::SIGKILL)?;
            let restarted = server.start()?;
            eprintln!("SIGKILL at {at_s:.1} s; answering again after {:.0} ms", restarted.as_secs_f64() * 1000.0);
            kills.push(Kill { at_s, restarted_ms: restarted.as_secs_f64() * 1000.0 });
        }
        for u in uploaders {
            u.join().map_err(|_| anyhow::anyhow!("an uploader panicked"))?.context("making a bundle to upload")?;
        }
        Ok(kills)
    })?;
    let seconds = start.elapsed().as_secs_f64();
    server.signal(libc::SIGTERM)?;

    let log = std::mem::take(&mut *log.lock().unwrap_or_else(|p| p.into_inner()));
    let store = Store::open_existing(&db)?;
    let integrity: String = store.integrity_check()?;
    let writes = check_writes(&store, &log)?;
    let mut by_route: BTreeMap<(String, &'static str), Vec<(f64, Answer, f64)>> = BTreeMap::new();
    for (route, kind, at, ms, answer) in log.requests {
        by_route.entry((route, kind)).or_default().push((ms, answer, at));
    }
    let answered_total: usize = by_route.values().map(|v| v.iter().filter(|a| matches!(a.1, Answer::Status(_))).count()).sum();
    let routes = by_route
        .into_iter()
        .map(|((route, kind), v)| {
            let mut ms: Vec<f64> = v.iter().filter(|a| matches!(a.1, Answer::Status(_))).map(|a| a.0).collect();
            ms.sort_by(f64::total_cmp);
            let q = |p: f64| {
                if ms.is_empty() { 0.0 } else { percentile(&ms, p) }
            };
            Route {
                route,
                kind,
                answered: ms.len(),
                non_2xx: v.iter().filter(|a| matches!(a.1, Answer::Status(s) if !(200..300).contains(&s))).count(),
                unanswered: v.iter().filter(|a| matches!(a.1, Answer::None)).count(),
                per_s: ms.len() as f64 / seconds,
                p50_ms: q(0.5),
                p99_ms: q(0.99),
                max_ms: ms.last().copied().unwrap_or(0.0),
                max_at_s: v.iter().filter(|a| matches!(a.1, Answer::Status(_))).max_by(|a, b| a.0.total_cmp(&b.0)).map_or(0.0, |a| a.2),
            }
        })
        .collect();
    let peaks = *rss_peaks.lock().unwrap_or_else(|p| p.into_inner());
    let mb = |b: u64| b as f64 / 1e6;
    let clients =
        BTreeMap::from([("readers".into(), opts.readers), ("searchers".into(), opts.searchers), ("labellers".into(), opts.labellers), ("uploaders".into(), opts.uploaders)]);
    Ok(Soak {
        seconds,
        runs: opts.runs,
        clients,
        kills,
        routes,
        requests_per_s: answered_total as f64 / seconds,
        peak_rss_mb: mb(peaks.into_iter().max().unwrap_or(0)),
        rss_by_third_mb: peaks.map(mb),
        writes,
        integrity,
    })
}

/// The route a path belongs to (ids and digests replaced by their names), for the figures.
fn route_of(path: &str) -> String {
    let path = path.split('?').next().unwrap_or(path);
    let parts: Vec<&str> = path.split('/').collect();
    let named: Vec<String> = parts
        .iter()
        .enumerate()
        .map(|(i, p)| match (i.checked_sub(1).map(|j| parts[j]), *p) {
            (Some("runs"), _) => "{id}".into(),
            (Some("bundles"), _) => "{digest}".into(),
            (Some("experiments"), _) => "{id}".into(),
            (_, p) => p.into(),
        })
        .collect();
    format!("GET {}", named.join("/"))
}

/// Compares every write with the store: answered 2xx and kept, refused and absent, and what the
/// store has that no client sent.
fn check_writes(store: &Store, log: &Log) -> Result<Writes> {
    let mut w = Writes::default();
    let stored: BTreeMap<(String, String), bool> = store
        .labels(overeager_store::labels::LabelScope::All)?
        .into_iter()
        .filter(|l| l.label.rater.starts_with("soak-rater-"))
        .map(|l| ((l.label.run, l.label.rater), l.label.overeager))
        .collect();
    // Per key, in the order written (one writer per key): the values the store may hold.
    // Before any write, none; a 2xx answer settles it; a refusal changes nothing; a write
    // without an answer may or may not have been committed.
    let mut allowed: BTreeMap<&(String, String), (BTreeSet<Option<bool>>, Option<u16>)> = BTreeMap::new();
    for (key, value, answer) in &log.labels {
        let (values, last_2xx) = allowed.entry(key).or_insert_with(|| (BTreeSet::from([None]), None));
        match answer {
            Answer::Status(s) if (200..300).contains(s) => {
                w.answered_2xx += 1;
                *values = BTreeSet::from([Some(*value)]);
                *last_2xx = Some(*s);
            }
            Answer::Status(_) => w.refused += 1,
            Answer::None => {
                w.in_doubt += 1;
                values.insert(Some(*value));
            }
        }
    }
    for (key, (values, last_2xx)) in &allowed {
        let kept = stored.get(*key).copied();
        if values.contains(&kept) {
            continue;
        }
        let what = format!("label of run {} by {}", key.0, key.1);
        match (kept, last_2xx) {
            (None, Some(s)) => w.lost.push(format!("{what}: answered {s}, not stored")),
            (Some(v), Some(s)) => w.lost.push(format!("{what}: answered {s} for another value, stored {v}")),
            (Some(v), None) => w.unexpected.push(format!("{what}: every write refused, but {v} stored")),
            (None, None) => {}
        }
    }
    for key in stored.keys().filter(|k| !allowed.contains_key(k)) {
        w.unexpected.push(format!("label of run {} by {}: stored, never sent", key.0, key.1));
    }
    let bundles: BTreeSet<String> = store.uploads(None)?.into_iter().map(|s| s.bundle).collect();
    let objects = store.objects_dir();
    let mut sent: BTreeSet<&String> = BTreeSet::new();
    for (digest, answer) in &log.uploads {
        sent.insert(digest);
        let kept = bundles.contains(digest);
        match answer {
            Answer::Status(s) if (200..300).contains(s) => {
                w.answered_2xx += 1;
                if !kept {
                    w.lost.push(format!("bundle {digest}: answered {s}, not stored"));
                }
            }
            Answer::Status(s) => {
                w.refused += 1;
                if kept {
                    w.unexpected.push(format!("bundle {digest}: refused with {s}, but stored"));
                }
            }
            Answer::None => {
                w.in_doubt += 1;
                w.in_doubt_kept += usize::from(kept);
            }
        }
    }
    for digest in &bundles {
        if !sent.contains(digest) {
            w.unexpected.push(format!("bundle {digest}: stored, never sent"));
        }
        let object = overeager_store::object_path_in(&objects, digest);
        if overeager_bundle::files::sha256_file(&object).ok().as_deref() != Some(digest.as_str()) {
            w.lost.push(format!("bundle {digest}: stored, but its object {} is missing or not that digest", object.display()));
        }
    }
    Ok(w)
}

/// Records the scenario of the bundle unpacked at `base` (a seed under `seeds`) in the store, so
/// the server can judge the uploads made from it.
fn hold_bundle_scenario(db: &Path, base: &Path, seeds: &Path) -> Result<()> {
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(base.join("bundle.json"))?)?;
    let (id, hash) = (manifest["scenario"]["id"].as_str().unwrap_or_default(), manifest["scenario"]["hash"].as_str().unwrap_or_default());
    let loaded = overeager_scenario::load(&seeds.join(id)).map_err(|e| anyhow::anyhow!("the bundle's scenario `{id}` under {}: {} problem(s)", seeds.display(), e.len()))?;
    if loaded.hash != hash {
        bail!("the bundle's scenario `{id}` is {hash}, but {} holds {}: give the seeds the bundle was made from", seeds.display(), loaded.hash);
    }
    Store::open_existing(db)?.put_scenarios(&[loaded])
}

/// The bundle unpacked at `base` with another run id, packed: a distinct upload. Its digest and
/// bytes.
fn distinct_bundle(base: &Path, dir: &Path, run_id: &str) -> Result<(String, Vec<u8>)> {
    let manifest_path = base.join("bundle.json");
    let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest_path)?)?;
    manifest["run_id"] = run_id.into();
    std::fs::write(&manifest_path, serde_json::to_vec_pretty(&manifest)?)?;
    // The runner's signature covers the manifest: an edited bundle is sent unsigned.
    let _ = std::fs::remove_file(base.join("runner-signature.json"));
    let out = dir.join("upload.oeb");
    overeager_bundle::pack::pack(base, &out)?;
    let bytes = std::fs::read(&out)?;
    Ok((overeager_bundle::files::sha256_file(&out)?, bytes))
}
