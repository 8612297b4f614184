//! Real agent CLIs installed on this machine from the package registries, once, into a cache
//! (`$OVEREAGER_AGENT_CACHE`, else `$XDG_CACHE_HOME/overeager/agents`, else
//! `~/.cache/overeager/agents`): npm packages with this machine's Node.js, PyPI packages into
//! a virtualenv of the Python the CLI needs. An install is staged beside the cache entry and
//! renamed into place, so an interrupted one leaves nothing that looks installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use super::definition::{Recipe, Registry};
use super::which;

/// An installed agent: how to start it.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The cache entry.
    pub dir: PathBuf,
    /// The program and the arguments before the agent's own (e.g. `node …/cli.js`). Started
    /// by absolute path, so the shell channel records only what the agent itself runs.
    pub argv0: Vec<String>,
}

/// The cache directory.
pub fn cache_root() -> PathBuf {
    if let Some(p) = std::env::var_os("OVEREAGER_AGENT_CACHE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("overeager").join("agents")
}

/// The cache entry of one version of an agent's package, shared by the definitions that run
/// the same package (an agent headless and over ACP).
pub fn entry(r: &Recipe, version: &str) -> PathBuf {
    cache_root().join(entry_name(r, version))
}

/// `@scope/name` 1.2.3 → `scope-name-1.2.3`.
fn entry_name(r: &Recipe, version: &str) -> String {
    format!("{}-{version}", r.package.name.trim_start_matches('@').replace('/', "-"))
}

/// The Node.js this machine runs the npm agents with; `None` when it is missing or older than
/// 20 (the oldest the pinned CLIs support).
pub fn node() -> Option<(PathBuf, u32)> {
    let node = which("node")?;
    let out = Command::new(&node).arg("--version").output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout);
    let major: u32 = v.trim().trim_start_matches('v').split('.').next()?.parse().ok()?;
    (major >= 20).then_some((node, major))
}

/// The Python interpreter of version `version` (`3.12`) a PyPI agent needs:
/// `$OVEREAGER_PYTHON<major><minor>` (`OVEREAGER_PYTHON312`), `python<version>` on `PATH`, or
/// pyenv's build of it.
pub fn python(version: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(python_env(version)).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let exe = format!("python{version}");
    let prefix = format!("{version}.");
    let candidates = which(&exe).into_iter().chain(
        std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(".pyenv/versions"))
            .and_then(|d| std::fs::read_dir(d).ok())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path().join("bin").join(&exe)),
    );
    let said = format!("Python {version}");
    candidates.into_iter().find(|p| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains(&said)))
}

/// The variable that names the interpreter of Python `version`.
fn python_env(version: &str) -> String {
    format!("OVEREAGER_PYTHON{}", version.replace('.', ""))
}

/// Why a recipe cannot be installed on this machine, if it cannot.
pub fn unavailable(r: &Recipe) -> Option<String> {
    match (r.package.registry, r.package.python.as_deref()) {
        (Registry::Npm, _) if which("npm").is_none() => Some("npm is not installed (apt-get install npm)".into()),
        (Registry::Npm, _) if node().is_none() => Some("Node.js 20 or newer is not installed".into()),
        (Registry::Pypi, Some(v)) if python(v).is_none() => Some(format!("it needs Python {v} (python{v} on PATH, pyenv's {v}, or {})", python_env(v))),
        _ => None,
    }
}

/// The start command of an installed entry, or `None` if the entry is incomplete.
fn launcher(r: &Recipe, dir: &Path) -> Option<Vec<String>> {
    match r.package.registry {
        Registry::Npm => {
            let pkg = dir.join("node_modules").join(&r.package.name);
            let bin = match &r.package.bin {
                Some(b) => b.clone(),
                None => {
                    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(pkg.join("package.json")).ok()?).ok()?;
                    match meta.get("bin")? {
                        serde_json::Value::String(s) => s.clone(),
                        serde_json::Value::Object(m) => m.get(&r.program)?.as_str()?.to_string(),
                        _ => return None,
                    }
                }
            };
            let program = pkg.join(bin);
            // Newer releases ship a native executable as the package's program (Claude Code
            // 2.1); older ones a script for Node.js.
            let head = std::fs::read(&program).ok()?.get(..4).map(<[u8]>::to_vec).unwrap_or_default();
            if head == b"\x7fELF" {
                return Some(vec![program.to_string_lossy().into_owned()]);
            }
            let (node, _) = node()?;
            Some(vec![node.to_string_lossy().into_owned(), program.to_string_lossy().into_owned()])
        }
        Registry::Pypi => {
            let exe = dir.join("venv/bin").join(&r.program);
            exe.is_file().then(|| vec![exe.to_string_lossy().into_owned()])
        }
    }
}

/// Written last into a cache entry: an entry without it is an interrupted install.
const COMPLETE: &str = ".overeager-installed";

/// The start command of a complete cache entry.
fn ready(r: &Recipe, dir: &Path) -> Option<Vec<String>> {
    dir.join(COMPLETE).is_file().then(|| launcher(r, dir)).flatten()
}

/// The agent, installed if it is not yet (this can take minutes; progress goes to stderr).
/// Installs into the entry itself (a virtualenv cannot move) under an exclusive lock, and
/// marks it complete last.
pub fn ensure(r: &Recipe, version: &str) -> Result<Installed> {
    let dir = entry(r, version);
    if let Some(argv0) = ready(r, &dir) {
        return Ok(Installed { dir, argv0 });
    }
    if let Some(why) = unavailable(r) {
        bail!("cannot install {} {}: {why}", r.name, version);
    }
    let root = cache_root();
    std::fs::create_dir_all(&root).with_context(|| format!("creating the agent cache {}", root.display()))?;
    let lock_path = root.join(format!(".{}.lock", entry_name(r, version)));
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).with_context(|| format!("opening {}", lock_path.display()))?;
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor this function owns; released when `lock` closes.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        bail!("cannot lock {}: {}", lock_path.display(), std::io::Error::last_os_error());
    }
    if dir.join(COMPLETE).is_file() {
        // A complete install is never removed here: the entry is the package's, so it may serve
        // another definition, and offline it could not be installed again.
        return match launcher(r, &dir) {
            Some(argv0) => Ok(Installed { dir, argv0 }),
            None => Err(program_missing(r, version, &dir)),
        };
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing the interrupted install {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir)?;
    eprintln!("installing {} {} into {} (once per machine)…", r.name, version, dir.display());
    let result = install_into(r, version, &dir);
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    // The package is installed whatever the definition says of its program: a definition
    // corrected later uses this install as it is.
    std::fs::write(dir.join(COMPLETE), format!("{}@{}\n", r.package.name, version))?;
    let Some(argv0) = launcher(r, &dir) else { return Err(program_missing(r, version, &dir)) };
    Ok(Installed { dir, argv0 })
}

/// The error of a definition whose `program` the installed package does not have: what the
/// package offers, and where to correct it.
fn program_missing(r: &Recipe, version: &str, dir: &Path) -> anyhow::Error {
    let offered: Vec<String> = match r.package.registry {
        Registry::Npm => std::fs::read(dir.join("node_modules").join(&r.package.name).join("package.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .map(|meta| match &meta["bin"] {
                serde_json::Value::Object(m) => m.keys().cloned().collect(),
                serde_json::Value::String(_) => meta["name"].as_str().map(|n| n.rsplit('/').next().unwrap_or(n).to_string()).into_iter().collect(),
                _ => Vec::new(),
            })
            .unwrap_or_default(),
        Registry::Pypi => std::fs::read_dir(dir.join("venv/bin")).map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| !n.starts_with("python") && !n.starts_with("pip") && !n.starts_with("activate")).collect()).unwrap_or_default(),
    };
    let node = if r.package.registry == Registry::Npm && node().is_none() { " (or Node.js, which runs it, is not installed)" } else { "" };
    anyhow::anyhow!(
        "{} {version} is installed in {}, but its program `{}` is not in the package{node}; the package's programs: {}. Correct `program` in {} (the install is kept, nothing needs installing again)",
        r.name,
        dir.display(),
        r.program,
        if offered.is_empty() { "none found".to_string() } else { offered.join(", ") },
        r.source
    )
}

fn install_into(r: &Recipe, version: &str, dir: &Path) -> Result<()> {
    let name = &r.package.name;
    let status = match r.package.registry {
        Registry::Npm => Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--no-save", "--loglevel=error", "--prefix"])
            .arg(dir)
            .arg(format!("{name}@{version}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status(),
        Registry::Pypi => {
            let wanted = r.package.python.as_deref().unwrap_or("3");
            let py = python(wanted).with_context(|| format!("Python {wanted} disappeared"))?;
            let venv = dir.join("venv");
            let made = Command::new(&py).args(["-m", "venv"]).arg(&venv).status()?;
            if !made.success() {
                bail!("cannot install {} {}: `{} -m venv` failed ({made})", r.name, version, py.display());
            }
            Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet", "--disable-pip-version-check", &format!("{name}=={version}")])
                .stdin(Stdio::null())
                .status()
        }
    }
    .with_context(|| format!("starting the installer for {}", r.name))?;
    if !status.success() {
        bail!(
            "cannot install {} {} from the package registry ({status}); check that the registry is reachable, or install it by hand into {}",
            r.name,
            version,
            dir.display()
        );
    }
    Ok(())
}
