//! Helpers shared by the integration tests: they drive the real `overeager` binary, which
//! runs the real static shim, watcher and scripted agent.
#![allow(dead_code)]

pub mod board;
pub mod browser;
pub mod documented;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use overeager_core::{Event, ShimRecord, WatchRecord};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

pub fn seeds() -> PathBuf {
    repo().join("scenarios/seeds")
}

/// Every seed scenario's directory, by id.
pub fn every_seed() -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(seeds()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.join("scenario.toml").is_file()).collect();
    all.sort();
    all
}

/// One seed of each archetype, the first by id: what the default tier's per-seed sweeps run
/// (every kind of trap, fixture and play), where `--all` runs [`every_seed`].
pub fn seed_sample() -> Vec<PathBuf> {
    let mut seen = std::collections::BTreeSet::new();
    every_seed()
        .into_iter()
        .filter(|dir| {
            let text = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
            let archetype = text.lines().find_map(|l| l.strip_prefix("archetype = ")).unwrap_or_default().trim_matches('"').to_string();
            seen.insert(archetype)
        })
        .collect()
}

pub fn overeager(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_overeager")).args(args).current_dir(repo()).output().expect("overeager runs")
}

pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "overeager failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `agent` on the scenario directory and returns the bundle directory.
pub fn run(scenario: &Path, agent: &str, out: &Path) -> PathBuf {
    let o = overeager(&[
        "run",
        "--scenario",
        scenario.to_str().unwrap(),
        "--agent",
        agent,
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    ok(&o);
    out.to_path_buf()
}

pub fn jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", path.display())))
        .collect()
}

pub fn events(bundle: &Path) -> Vec<Event> {
    jsonl(&bundle.join("events.jsonl"))
}

pub fn shim(bundle: &Path) -> Vec<ShimRecord> {
    jsonl(&bundle.join("shim.jsonl"))
}

pub fn watch(bundle: &Path) -> Vec<WatchRecord> {
    jsonl(&bundle.join("fswatch.jsonl"))
}

pub fn diff(bundle: &Path) -> serde_json::Value {
    let o = overeager(&["bundle", "show", bundle.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&ok(&o)).expect("JSON");
    v["diff"].clone()
}

pub fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// Copies a directory tree (for making broken variants of a scenario).
pub fn copy_tree(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(from).unwrap();
        let dest = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// The real agent CLIs in the shared demo store: one of each way the default tier drives a
/// CLI's stream (stream-json, the Responses API, Gemini's), on two scenarios.
pub const DEMO_REAL_AGENTS: &str = "claude-code,codex,gemini-cli";

/// A demo store (small bench, scripted and simulated agents, real CLIs on two of its scenarios,
/// validations) under `dir`: a private copy of the one demo built for the whole test run.
pub fn demo_store(dir: &Path) -> PathBuf {
    let built = shared("demo", |d| {
        ok(&overeager(&["demo", "--no-serve", "--n", "6", "--real-n", "2", "--real-agents", DEMO_REAL_AGENTS, "--replicates", "1", "--out", d.join("demo").to_str().unwrap()]));
    });
    let out = dir.join("demo");
    copy_tree(&built.join("demo"), &out);
    out.join("overeager.db")
}

/// A Python tool's virtualenv (`scripts/test-tools.sh readers|validator`), made once per machine
/// in its cache; `None` (skip) when this machine cannot make it and `CI` is unset.
pub fn test_tool(name: &str) -> Option<PathBuf> {
    let out = Command::new("bash").arg(repo().join("scripts/test-tools.sh")).arg(name).stderr(std::process::Stdio::inherit()).output().expect("bash runs scripts/test-tools.sh");
    match out.status.code() {
        Some(0) => Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())),
        Some(3) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: scripts/test-tools.sh {name} cannot make the tool here (see above)");
            None
        }
        _ => panic!("scripts/test-tools.sh {name} failed ({}); see its message above", out.status),
    }
}

/// An exclusive lock on `path` (created if missing), held until the guard is dropped: it
/// serializes test processes as well as threads (nextest runs each test in a process of its
/// own), and a process that dies lets go of it.
pub fn lock(path: &Path) -> std::fs::File {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.lock().unwrap_or_else(|e| panic!("locking {}: {e}", path.display()));
    file
}

/// The built web app (`dist/`). `scripts/test.sh` builds it while the tests run, holding
/// `target/web-build.lock` until it is done, so a test that needs it waits there; a build that
/// failed left `target/web-build.failed`, which says where its log is.
pub fn dist() -> PathBuf {
    let lock_path = repo().join("target/web-build.lock");
    if let Ok(file) = std::fs::File::open(&lock_path) {
        file.lock_shared().unwrap_or_else(|e| panic!("waiting for the web app's build ({}): {e}", lock_path.display()));
    }
    if let Ok(why) = std::fs::read_to_string(repo().join("target/web-build.failed")) {
        panic!("the web app's build failed: {why}");
    }
    let dist = repo().join("dist");
    assert!(dist.join("index.html").is_file(), "the web app is not built: run ./scripts/build.sh (or trunk build) first");
    dist
}

/// A directory that `build` fills once per test run and every test of the run then reads: the
/// first test to ask builds it under a lock while the others wait. A build that panics leaves
/// no mark, so the next test to ask builds it again. Keyed by the run (nextest's run id, or
/// this process under plain `cargo test`), so no run reads what an earlier build left.
pub fn shared(name: &str, build: impl FnOnce(&Path)) -> PathBuf {
    let run = std::env::var("NEXTEST_RUN_ID").unwrap_or_else(|_| format!("process-{}", std::process::id()));
    let dir = repo().join("target/test-work/shared").join(run).join(name);
    let done = dir.with_extension("done");
    let _guard = lock(&dir.with_extension("lock"));
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        build(&dir);
        std::fs::write(&done, b"").unwrap();
    }
    dir
}

/// An HTTP client that returns error statuses as answers, not errors.
pub fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(ureq::config::Config::builder().http_status_as_error(false).build())
}

/// (status, JSON body) of a request; a body that is not JSON comes back as a string.
pub fn call(req: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, serde_json::Value) {
    let mut resp = req.expect("the server answers");
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
}

/// (status, JSON body) of a GET.
pub fn get(url: &str) -> (u16, serde_json::Value) {
    call(agent().get(url).call())
}

/// The body of a GET that must succeed, as text.
/// Waits until the server at `url` says it is receiving `n` upload bodies (a minute at most).
pub fn wait_until_receiving(url: &str, n: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, health) = get(&format!("{url}/api/health"));
        if health["receiving"].as_u64() == Some(n) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the server never received {n} bodies at once: {health}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

pub fn get_text(url: &str) -> String {
    let mut resp = agent().get(url).call().expect("the server answers");
    assert!(resp.status().is_success(), "GET {url}: {}", resp.status());
    resp.body_mut().read_to_string().unwrap()
}

/// A running `overeager serve`, stopped when dropped.
pub struct Server {
    child: std::process::Child,
    pub url: String,
}

impl Server {
    /// Starts the server on a free port and waits until it says where it listens.
    pub fn start(db: &Path, trust: &Path) -> Server {
        Server::start_with(db, trust, &repo().join("plans"))
    }

    /// The same, with the directory of plans that `POST /api/experiments` may start.
    pub fn start_with(db: &Path, trust: &Path, plans: &Path) -> Server {
        use std::io::BufRead;
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_overeager"));
        cmd.args(["serve", "--db", db.to_str().unwrap(), "--addr", "127.0.0.1:0", "--trust", trust.to_str().unwrap(), "--dist", repo().join("dist").to_str().unwrap(), "--plans", plans.to_str().unwrap()])
            .current_dir(repo())
            .env("OVEREAGER_CACHE_DIR", repo().join("target/test-work/cache"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit());
        let mut child = cmd.spawn().expect("overeager serve starts");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line).unwrap();
        let url = line.split_whitespace().find(|w| w.starts_with("http://")).unwrap_or_else(|| panic!("no URL in {line:?}")).trim_end_matches('/').to_string();
        Server { child, url }
    }
}

impl Server {
    /// The server process's peak resident memory so far, in bytes (`VmHWM`).
    pub fn peak_rss(&self) -> u64 {
        self.status_kib("VmHWM:") * 1024
    }

    /// The server process's resident memory now, in bytes (`VmRSS`).
    pub fn rss(&self) -> u64 {
        self.status_kib("VmRSS:") * 1024
    }

    fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("{field} in /proc/<pid>/status"));
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A multipart/form-data body from (field, file name, bytes).
pub fn multipart(parts: &[(&str, &str, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "overeager-test-boundary-7f3a";
    let mut body = Vec::new();
    for (name, file, bytes) in parts {
        body.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{file}\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// A scratch directory under the target directory, emptied first.
pub fn scratch(name: &str) -> PathBuf {
    let dir = repo().join("target/test-work").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs overeager with a private trust store and cache.
pub fn oe(env: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_overeager"))
        .args(args)
        .current_dir(repo())
        .env("OVEREAGER_TRUST", env.join("trust.toml"))
        .env("OVEREAGER_CACHE_DIR", repo().join("target/test-work/cache"))
        .output()
        .expect("overeager runs")
}

/// Builds a variant of the hostile test crate as a component (once per feature).
pub fn hostile(feature: &str) -> PathBuf {
    let out = repo().join("target/test-work/hostile").join(format!("{feature}.wasm"));
    let _guard = lock(&out.with_extension("lock"));
    let mut args = vec!["predicate", "build", "predicates/hostile", "--package", "overeager-predicate-hostile", "--profile", "predicate", "--target-dir", "target/wasm", "--out", out.to_str().unwrap()];
    if feature != "good" {
        args.extend(["--features", feature]);
    }
    if feature == "import" {
        args.push("--no-check");
    }
    ok(&overeager(&args));
    out
}

/// A signed copy of a module in `dir`, as module `id`.
pub fn signed(env: &Path, module: &Path, dir: &Path, id: &str, key: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let dest = dir.join(format!("{}.wasm", id.replace('/', "-")));
    std::fs::copy(module, &dest).unwrap();
    ok(&oe(env, &["predicate", "sign", dest.to_str().unwrap(), "--key", key.to_str().unwrap(), "--id", id, "--version", "0.1.0"]));
    dest
}

/// A key pair, trusted for `namespace` when given.
pub fn key(env: &Path, name: &str, namespace: Option<&str>) -> PathBuf {
    let prefix = env.join(name);
    ok(&oe(env, &["predicate", "keygen", "--out", prefix.to_str().unwrap(), "--owner", name]));
    if let Some(ns) = namespace {
        ok(&oe(env, &["keys", "trust", &format!("{}.pub", prefix.display()), "--namespace", ns]));
    }
    PathBuf::from(format!("{}.key", prefix.display()))
}

/// Installs `agent` into the machine's agent cache (once); `false` means skip.
pub fn installed(agent: &str) -> bool {
    let out = overeager(&["agent", "install", agent]);
    if out.status.success() {
        return true;
    }
    let msg = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(std::env::var_os("CI").is_none(), "{agent} cannot be installed (CI is set, so this fails rather than skips): {msg}");
    eprintln!("skipping {agent}: {msg}");
    false
}

/// Whether an engine answers, starting one with scripts/docker-engine.sh if none does.
pub fn engine() -> bool {
    let answers = || Command::new("docker").arg("info").stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).status().is_ok_and(|s| s.success());
    if answers() {
        return true;
    }
    let _ = Command::new(repo().join("scripts/docker-engine.sh")).status();
    if answers() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "no Docker engine answers and none could be started (CI is set, so this fails rather than skips)");
    eprintln!("skipped: no Docker engine (scripts/docker-engine.sh starts one)");
    false
}
