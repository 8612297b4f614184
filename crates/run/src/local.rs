//! The local executor: a temporary workspace and `$HOME` on this machine.
//!
//! The shell shim cannot replace the machine's own `/bin/rm`, so it goes in front of them: a
//! private `bin/` directory of links to the shim, first on `PATH`. Login shells reset `PATH`
//! from `/etc/profile` (Debian's does, for every `bash -lc`); bash reads `$BASH_ENV` *after*
//! the profiles, and our hook there puts the shim directory back in front. Programs started by
//! absolute path bypass the shim locally; their file effects still reach the watch channel
//! and the snapshots. (Container images wrap the real binaries themselves.)

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use overeager_core::bundle::{Channels, SupervisorReport, files};
use overeager_core::paths::Roots;
use overeager_core::{ModelPlayer, RenderedPrompt, Snapshot, render_prompt};
use serde_json::json;

use overeager_agents::child::hand_down;
use overeager_agents::gateway::{GatewayPlan, GatewayProcess, model_api_failure, model_records};
use super::{AgentSpec, RawRun, RunRequest, SETUP_GIT_ENV, WRAPPED, snapshot};
use overeager_agents::which;

/// Copies the fixture: everything but `home/` into `work`, `home/` into `home`. Modes are
/// normalized to 0644/0755 by the executable bit, so every checkout runs the same sandbox.
fn copy_fixture(fixture: &Path, work: &Path, home: &Path) -> Result<()> {
    for entry in walkdir::WalkDir::new(fixture).follow_links(false).sort_by_file_name().min_depth(1) {
        let entry = entry.with_context(|| format!("reading fixture {}", fixture.display()))?;
        let rel = entry.path().strip_prefix(fixture).expect("inside fixture");
        let dest = match rel.strip_prefix("home") {
            Ok(r) if r.as_os_str().is_empty() => continue,
            Ok(r) => home.join(r),
            Err(_) => work.join(rel),
        };
        let ft = entry.file_type();
        if ft.is_dir() {
            std::fs::create_dir_all(&dest)?;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755))?;
        } else if ft.is_symlink() {
            symlink(std::fs::read_link(entry.path())?, &dest)?;
        } else {
            std::fs::copy(entry.path(), &dest).with_context(|| format!("copying {}", entry.path().display()))?;
            let exec = entry.metadata()?.permissions().mode() & 0o111 != 0;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(if exec { 0o755 } else { 0o644 }))?;
        }
    }
    Ok(())
}

/// The PATH the agent starts with, after the shim directory.
pub(super) const BASE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Installs the shim: `bin/overeager-shim` (a hard link, or a copy across file systems), a
/// link per wrapped program that exists here, the log-path file, and the `BASH_ENV` hook.
fn install_shim(shim: &Path, ctl: &Path, log: &Path) -> Result<PathBuf> {
    let bin = ctl.join("bin");
    std::fs::create_dir_all(&bin)?;
    let me = bin.join("overeager-shim");
    if std::fs::hard_link(shim, &me).is_err() {
        std::fs::copy(shim, &me).with_context(|| format!("copying the shim from {}", shim.display()))?;
    }
    for name in WRAPPED {
        if which(name).is_some() {
            symlink("overeager-shim", bin.join(name))?;
        }
    }
    std::fs::write(bin.join("shim.log-path"), format!("{}\n", log.display()))?;
    let hook = ctl.join("bash_env.sh");
    let b = bin.display();
    std::fs::write(
        &hook,
        format!("case \":$PATH:\" in \":{b}:\"*) ;; *) PATH=\"{b}:$PATH\"; export PATH ;; esac\n"),
    )?;
    Ok(bin)
}

pub(super) fn run_setup(commands: &[String], work: &Path, home: &Path) -> Result<()> {
    for (i, cmd) in commands.iter().enumerate() {
        let out = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(work)
            .env_clear()
            .env("PATH", BASE_PATH)
            .env("HOME", home)
            .env("LANG", "C.UTF-8")
            .envs(SETUP_GIT_ENV.iter().copied())
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running setup command {i}"))?;
        if !out.status.success() {
            bail!(
                "model.setup[{i}] `{cmd}` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}

/// Extra time the supervisor gets beyond the agent's limit before the runner gives up on it.
const SUPERVISOR_SLACK: Duration = Duration::from_secs(20);

/// Runs `program` under the shim's run supervisor (`overeager-shim contain`), which starts
/// the watcher, enforces the timeout and sweeps stragglers, and returns its report.
fn supervise(mut cmd: Command, ctl: &Path, timeout: Duration) -> Result<SupervisorReport> {
    let status_file = ctl.join("status.json");
    let stderr_file = ctl.join("supervisor.stderr");
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(File::create(&stderr_file)?).process_group(0);
    let mut child = overeager_process::spawn_retrying(&mut cmd).context("starting the run supervisor (overeager-shim contain)")?;
    let pgid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let r = child.wait();
        let _ = tx.send(());
        r
    });
    if rx.recv_timeout(timeout + SUPERVISOR_SLACK).is_err() {
        // SAFETY: killpg has no memory-safety preconditions.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
    let status = waiter.join().map_err(|_| anyhow::anyhow!("supervisor waiter panicked"))??;
    let stderr = std::fs::read_to_string(&stderr_file).unwrap_or_default();
    if !status.success() {
        bail!("the run supervisor failed ({status}): {}", stderr.trim());
    }
    let body = std::fs::read(&status_file).with_context(|| format!("reading the supervisor's report {}", status_file.display()))?;
    serde_json::from_slice(&body).with_context(|| format!("parsing the supervisor's report {}", status_file.display()))
}

/// A sandbox on this machine, filled from the fixture and snapshotted, before the agent runs.
/// Both executors start from one: the local one runs the agent on it, the Docker one copies
/// it into a container and the result back.
pub(super) struct Prepared {
    pub sandbox: tempfile::TempDir,
    pub work: PathBuf,
    pub home: PathBuf,
    pub ctl: PathBuf,
    pub chans: PathBuf,
    pub roots: Roots,
    pub before: Snapshot,
    pub before_texts: BTreeMap<String, Vec<u8>>,
    /// The sandbox's git repositories as they were before the run.
    pub before_git: BTreeMap<String, super::git::RepoState>,
    pub prompt: RenderedPrompt,
}

/// Makes the sandbox (`work/`, `home/`, `ctl/`, `channels/`), copies the fixture and writes
/// the prompt; with `setup_here`, also runs the scenario's setup and takes the "before"
/// snapshot (an executor that runs the setup elsewhere calls [`Prepared::snapshot_before`]).
pub(super) fn prepare(req: &RunRequest<'_>, setup_here: bool) -> Result<Prepared> {
    let scenario = &req.scenario.scenario;
    // A real CLI's own sandbox may hide /dev/shm (Codex 0.169's does): its runs use disk.
    let scratch = req.scratch.clone().unwrap_or_else(|| if matches!(req.agent, AgentSpec::Agent { .. }) { super::disk_scratch_dir() } else { super::scratch_dir() });
    let sandbox = tempfile::Builder::new().prefix("overeager-run-").tempdir_in(scratch).context("creating the sandbox")?;
    let base = sandbox.path().canonicalize()?;
    let (work, home, ctl, chans) = (base.join("work"), base.join("home"), base.join("ctl"), base.join("channels"));
    for d in [&work, &home, &ctl, &chans, &ctl.join("tmp")] {
        std::fs::create_dir_all(d)?;
    }
    copy_fixture(&req.scenario.fixture(), &work, &home)?;
    let roots = Roots { workspace: work.to_string_lossy().into_owned(), home: home.to_string_lossy().into_owned() };
    let prompt = render_prompt(&scenario.prompt, req.variant);
    std::fs::write(chans.join(files::PROMPT), &prompt.text)?;
    File::create(chans.join(files::SHIM))?;
    let mut p = Prepared { sandbox, work, home, ctl, chans, roots, before: Snapshot::new(), before_texts: BTreeMap::new(), before_git: BTreeMap::new(), prompt };
    if setup_here {
        run_setup(&scenario.model.setup, &p.work, &p.home).with_context(|| format!("setting up scenario `{}`", scenario.id))?;
        p.snapshot_before()?;
    }
    Ok(p)
}

impl Prepared {
    /// Takes the "before" snapshot of `work/` and `home/` as they are now.
    pub(super) fn snapshot_before(&mut self) -> Result<()> {
        (self.before, self.before_texts) = snapshot::take(&self.roots).context("snapshot before the run")?;
        self.before_git = super::git::states(&self.roots, &self.before);
        Ok(())
    }
}

/// The agent's command line, with `shim` the path of the shim binary and `ctl` the control
/// directory as the agent sees them. Writes what the agent needs into `ctl_here` (the same
/// directory as this process sees it).
pub(super) fn agent_command(req: &RunRequest<'_>, shim: &str, ctl: &str, ctl_here: &Path) -> Result<Vec<String>> {
    let scenario = &req.scenario.scenario;
    match &req.agent {
        AgentSpec::Agent { .. } => unreachable!("each executor starts a real agent CLI itself"),
        AgentSpec::Scripted(_) | AgentSpec::Sim(_) => {
            let kind = req.agent.play(scenario, req.variant, req.seed).expect("scripted and simulated agents replay a play");
            let payload = json!({"label": kind.as_str(), "play": scenario.plays.get(kind)});
            std::fs::write(ctl_here.join("play.json"), serde_json::to_vec(&payload)?)?;
            Ok(vec![shim.to_string(), "play".into(), "--play".into(), format!("{ctl}/play.json")])
        }
    }
}

/// The supervisor's arguments: report file, channels, limit, watcher socket and roots, all as
/// the supervisor sees them; the caller adds any model endpoint, then `--` and the agent.
pub(super) fn contain_args(ctl: &str, chans: &str, timeout: Duration, roots: &Roots) -> Vec<String> {
    let mut v: Vec<String> = vec!["contain".into(), "--status".into(), format!("{ctl}/status.json"), "--channels".into(), chans.into()];
    v.extend(["--timeout-ms".into(), timeout.as_millis().to_string(), "--sync".into(), format!("{ctl}/watch.sock")]);
    v.extend(["--watch".into(), roots.workspace.clone(), "--watch".into(), roots.home.clone()]);
    v
}

/// Takes the "after" snapshot of the prepared sandbox (whose `work/` and `home/` now hold the
/// result) and puts the run together. `agent_roots` are the roots as the agent saw them, which
/// is how its channels name paths.
pub(super) fn finish(p: Prepared, report: SupervisorReport, agent_roots: Roots, executor: &'static str, image_digest: Option<String>) -> Result<RawRun> {
    let (after, after_texts) = snapshot::take(&p.roots).context("snapshot after the run")?;
    let diff = overeager_core::SnapshotDiff::between(&p.before, &after);
    let git = super::git::changes(&p.before_git, &super::git::states(&p.roots, &after));
    let blobs = snapshot::select_blobs(&diff, [(&p.before, &p.before_texts), (&after, &after_texts)]);
    Ok(RawRun {
        _sandbox: p.sandbox,
        channels_dir: p.chans,
        prompt: p.prompt,
        roots: agent_roots,
        before: p.before,
        after,
        blobs,
        started_us: report.started_us,
        ended_us: report.ended_us,
        exit: report.exit,
        timed_out: report.timed_out,
        channels: Channels { shell: true, agent: true, fswatch: true, net: false, model: false },
        executor,
        image_digest,
        host: None,
        agent_version: env!("CARGO_PKG_VERSION").to_string(),
        model_route: None,
        git,
    })
}

/// The environment every agent starts with, whatever the executor: who it is, its home, its
/// locale and its temporary directory.
pub(super) fn agent_env(home: &str, tmpdir: &str) -> [(&'static str, String); 5] {
    [("HOME", home.to_string()), ("USER", "agent".into()), ("LOGNAME", "agent".into()), ("LANG", "C.UTF-8".into()), ("TMPDIR", tmpdir.to_string())]
}

/// The machine's device nodes programs write to and read from by name.
const DEVICE_NODES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"];

/// Keeps a run from replacing the machine's device nodes. An agent running as root could
/// otherwise rename or remove one for every program on the machine: gemini-cli runs its
/// commands with `GIT_CONFIG_GLOBAL=/dev/null`, and `git config --global` then renames its lock
/// file onto `/dev/null`. The run gets a mount namespace of its own (receiving the machine's
/// mounts, sending none back) in which each node is bind-mounted onto itself: rename and
/// unlink of a mount point fail with EBUSY, reads and writes are unchanged. Without root
/// nothing is needed (`/dev` is not writable); where root may not make a namespace (an
/// unprivileged container, whose `/dev` is its own) the run goes ahead as before.
fn protect_device_nodes(cmd: &mut Command) {
    use std::os::unix::fs::FileTypeExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let nodes: Vec<std::ffi::CString> = DEVICE_NODES
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_char_device()))
        .filter_map(|p| std::ffi::CString::new(*p).ok())
        .collect();
    let fail = || Err(std::io::Error::last_os_error());
    // SAFETY: between fork and exec only system calls, on strings made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return if std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) { Ok(()) } else { fail() };
            }
            if libc::mount(c"none".as_ptr(), c"/".as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_SLAVE, std::ptr::null()) != 0 {
                return fail();
            }
            for n in &nodes {
                if libc::mount(n.as_ptr(), n.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) != 0 {
                    return fail();
                }
            }
            Ok(())
        })
    };
}

/// Runs one agent on one scenario in a temporary sandbox on this machine.
pub fn execute(req: &RunRequest<'_>) -> Result<RawRun> {
    let p = prepare(req, true)?;
    let shim_log = p.chans.join(files::SHIM);
    let bin = install_shim(&req.shim, &p.ctl, &shim_log)?;
    let shim = bin.join("overeager-shim");
    let (ctl, chans) = (p.ctl.to_string_lossy().into_owned(), p.chans.to_string_lossy().into_owned());
    let real = match &req.agent {
        AgentSpec::Agent { .. } => Some(real_agent(req, &p, &shim.to_string_lossy())?),
        _ => None,
    };
    let gateway = match real.as_ref().and_then(|r| r.gateway.as_ref()) {
        Some((plan, listener)) => Some(GatewayProcess::start(&req.shim, plan, listener, &p.chans.join(files::MODEL), &p.ctl.join("gateway.stderr"))?),
        None => None,
    };
    let agent = match &real {
        Some(r) => r.argv.clone(),
        None => agent_command(req, &shim.to_string_lossy(), &ctl, &p.ctl)?,
    };
    let mut cmd = Command::new(&shim);
    cmd.args(contain_args(&ctl, &chans, req.timeout, &p.roots));
    if let Some((script, listener)) = real.as_ref().and_then(|r| r.served.as_ref()) {
        let fd = hand_down(&mut cmd, listener);
        cmd.args(["--model-script".to_string(), script.to_string_lossy().into_owned(), "--model-fd".into(), fd.to_string()]);
    }
    cmd.arg("--")
        .args(&agent)
        .current_dir(&p.work)
        .env_clear()
        // The scenario's first, so the sandbox's and the observers' own always win (the
        // checker refuses a scenario that sets them).
        .envs(&req.scenario.scenario.model.env)
        .env("PATH", format!("{}:{BASE_PATH}", bin.display()))
        .envs(agent_env(&p.home.to_string_lossy(), &p.ctl.join("tmp").to_string_lossy()))
        .env("BASH_ENV", p.ctl.join("bash_env.sh"))
        .env("OVEREAGER_SHIM_LOG", &shim_log)
        .env("OVEREAGER_SHIM_DIR", &bin)
        .env("OVEREAGER_WATCH_SYNC", p.ctl.join("watch.sock"));
    if let Some(r) = &real {
        cmd.envs(r.env.iter().map(|(k, v)| (k, v)));
    }
    protect_device_nodes(&mut cmd);
    let report = supervise(cmd, &p.ctl, req.timeout);
    let gateway_died = gateway.and_then(|g| g.stop(&p.ctl.join("gateway.stderr")));
    let secrets = real.as_ref().and_then(|r| r.gateway.as_ref()).map(|(g, _)| g.secrets()).unwrap_or_default();
    // Whatever happens next, no key stays in what the run leaves.
    overeager_agents::secrets::redact(&[&p.work, &p.home, &p.chans], &secrets)?;
    let report = report?;
    if let Some(stderr) = gateway_died {
        bail!("the model gateway ended during the run: {}", stderr.trim());
    }
    if let (Some(r), AgentSpec::Agent { recipe, .. }) = (&real, &req.agent) {
        conclude_real(recipe, &r.version, r.gateway.as_ref().map(|(g, _)| g), &p.chans, report.timed_out)?;
    }
    let roots = p.roots.clone();
    let mut raw = finish(p, report, roots, "local", None)?;
    if let Some(r) = real {
        raw.agent_version = r.version;
        raw.channels.model = true;
        raw.model_route = r.gateway.map(|(g, _)| g.route);
    }
    Ok(raw)
}

/// The checks every executor makes of a real agent's run once it ended: on a real model,
/// that its model API did not fail it ([`model_api_failure`]); that it asked its model at
/// all ([`check_agent_started`]), unless it timed out.
pub(super) fn conclude_real(recipe: &overeager_agents::definition::Recipe, version: &str, gateway: Option<&GatewayPlan>, chans: &Path, timed_out: bool) -> Result<()> {
    if let Some(stream) = &recipe.stream {
        take_stream_file(stream, &chans.join(files::AGENT_LOGS).join(&recipe.id), chans)?;
    }
    let records = model_records(chans);
    if let Some(g) = gateway
        && let Some(e) = model_api_failure(&records, &g.route.provider.name)
    {
        bail!(e);
    }
    if !timed_out {
        check_agent_started(recipe, version, &records, chans)?;
    }
    Ok(())
}

/// Makes the file an agent keeps its own record of the run in (`config`: its configuration
/// directory) the agent channel: the file's text, or with `lines` the items of the array at
/// that JSON pointer, one per line. What it wrote to stdout stays, as `stdout.txt` in its
/// configuration directory. An agent that ended before writing the file leaves an empty
/// channel (and so no model request to show: the caller's check reports it).
fn take_stream_file(stream: &overeager_agents::definition::StreamFile, config: &Path, chans: &Path) -> Result<()> {
    let channel = chans.join(files::AGENT);
    std::fs::create_dir_all(config)?;
    if channel.exists() {
        std::fs::rename(&channel, config.join("stdout.txt")).context("keeping the agent's stdout")?;
    }
    let text = std::fs::read_to_string(config.join(&stream.file)).unwrap_or_default();
    let lines = match (&stream.lines, text.trim().is_empty()) {
        (Some(pointer), false) => {
            let doc: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("the agent's record {} is not JSON", stream.file))?;
            let items = doc.pointer(pointer).and_then(serde_json::Value::as_array).with_context(|| format!("the agent's record {} has no array at {pointer}", stream.file))?;
            items.iter().map(|i| format!("{i}\n")).collect()
        }
        _ => text,
    };
    std::fs::write(&channel, lines).context("writing the agent channel")
}

/// A real agent that ended without one main-loop request to its model never ran the task
/// (a crash at start, a rejected flag or config): an error, not an observation of an agent
/// that did nothing — unless its own stream records that it refused the task itself (Aider
/// takes a prompt beginning with `/` for one of its own commands), which is the framework's
/// doing and observed as such. Says which agent and version, and what it printed (from
/// `chans`); `records` are its model channel's.
pub(super) fn check_agent_started(recipe: &overeager_agents::definition::Recipe, version: &str, records: &[overeager_formats::model::ModelRecord], chans: &Path) -> Result<()> {
    if records.iter().any(|r| !r.side && r.step.is_some()) {
        return Ok(());
    }
    let stderr = std::fs::read_to_string(chans.join(files::AGENT_STDERR)).unwrap_or_default();
    let stdout = std::fs::read_to_string(chans.join(files::AGENT)).unwrap_or_default();
    // Paths play no part in whether it refused.
    let anywhere = Roots { workspace: "/".into(), home: "/".into() };
    if recipe.format().normalize(&stdout, &anywhere).iter().any(|e| e.op == overeager_core::Op::Denied) {
        return Ok(());
    }
    let tail = |t: &str| t.lines().rev().filter(|l| !l.trim().is_empty()).take(8).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
    let said = [tail(&stderr), tail(&stdout)].into_iter().filter(|t| !t.is_empty()).collect::<Vec<_>>().join("\n");
    bail!("{} {version} ended before asking the model anything, so the run is not an observation. Its last output:\n{said}\n{}", recipe.name, start_advice(recipe, version, &said))
}

/// What to do about an agent that ended before asking its model, from what it said: only an
/// install that is really broken is worth reinstalling.
fn start_advice(recipe: &overeager_agents::definition::Recipe, version: &str, said: &str) -> String {
    let lower = said.to_ascii_lowercase();
    // SAFETY: geteuid has no preconditions.
    if lower.contains("root") && unsafe { libc::geteuid() } == 0 {
        return format!(
            "It refuses to run as root, which agents run as here. Some CLIs allow it when told they are in a sandbox: \
             the definition's [connect.env] must set the variable this one reads (Claude Code's is IS_SANDBOX = \"1\", as \
             in agents/claude-code.toml); compare {}'s definition with the built-in one of its package.",
            recipe.id
        );
    }
    let broken = ["cannot find module", "modulenotfounderror", "no such file", "not found", "enoent", "importerror", "exec format error"];
    if broken.iter().any(|b| lower.contains(b)) {
        return format!(
            "The install looks broken: `overeager agent install {}` checks it (remove {} to reinstall).",
            recipe.id,
            overeager_agents::install::entry(recipe, version).display()
        );
    }
    format!("Check that the definition's flags and environment suit {} {version} (`overeager agent list` shows where it is defined).", recipe.name)
}

/// The API key a real agent is given: the scripted model checks none, and the model gateway
/// puts the real one on each request itself.
pub(super) const SCRIPTED_KEY: &str = "scripted-model-no-key";

/// A real agent CLI ready to start: its command line and environment, and the model it talks
/// to: the scripted model the supervisor serves it on a socket bound here, or the model
/// gateway started beside it.
struct RealAgent {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    version: String,
    served: Option<(PathBuf, std::net::TcpListener)>,
    /// The gateway to start, and the loopback socket it serves on.
    gateway: Option<(GatewayPlan, std::net::TcpListener)>,
}

/// The scripted model's script for a real agent's run: the play its model names, or the
/// exchanges of the bundle it replays (their sandbox paths moved to this run's).
pub(super) fn model_script(req: &RunRequest<'_>, roots: &Roots, ctl: &Path) -> Result<PathBuf> {
    let AgentSpec::Agent { recipe, version, .. } = &req.agent else { unreachable!("called for real agents") };
    let first_delay_ms = recipe.first_request_delay_ms(version);
    let default_shell = recipe.shell_tool().to_string();
    let script = match req.agent.model_player() {
        Some(ModelPlayer::Scripted(kind)) => overeager_formats::model::Script {
            label: kind.as_str().to_string(),
            steps: req.scenario.scenario.plays.get(kind).steps.clone(),
            roots: roots.clone(),
            default_shell,
            tools: recipe.tools.clone(),
            replay: None,
            first_delay_ms,
            learn_roots: false,
            finish_command: recipe.finish_command.clone(),
            reply_format: recipe.reply_format,
        },
        Some(ModelPlayer::Replay(bundle)) => overeager_formats::model::Script {
            label: "replay".into(),
            steps: Vec::new(),
            roots: roots.clone(),
            default_shell,
            tools: recipe.tools.clone(),
            replay: Some(recorded_exchanges(Path::new(bundle), roots)?),
            first_delay_ms,
            learn_roots: false,
            finish_command: None,
            reply_format: recipe.reply_format,
        },
        _ => unreachable!("only a scripted or replayed model is served"),
    };
    let path = ctl.join("model-script.json");
    std::fs::write(&path, serde_json::to_vec(&script)?)?;
    Ok(path)
}

/// The model channel of a recorded bundle (directory or `.oeb`), with the recorded run's
/// sandbox roots in every reply replaced by `roots`, so its tool calls name this run's files.
fn recorded_exchanges(bundle: &Path, roots: &Roots) -> Result<Vec<overeager_formats::model::ModelRecord>> {
    let b = overeager_bundle::Bundle::read(bundle)?;
    let manifest = &b.manifest;
    let shown = |name: &str| bundle.join(name).display().to_string();
    let model = b.files.read(files::MODEL).with_context(|| format!("reading {}", shown(files::MODEL)))?;
    // Strictly, line by line: a replay must not skip a recorded answer.
    let text = String::from_utf8(model.with_context(|| format!("{} has no model channel ({}) to replay", bundle.display(), files::MODEL))?)
        .with_context(|| format!("{}: not UTF-8", shown(files::MODEL)))?;
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let mut r: overeager_formats::model::ModelRecord = serde_json::from_str(line).with_context(|| format!("{}:{}: not a model record", shown(files::MODEL), i + 1))?;
        r.reply = r.reply.replace(&manifest.roots.workspace, &roots.workspace).replace(&manifest.roots.home, &roots.home);
        records.push(r);
    }
    Ok(records)
}

/// Installs (once) and configures a real agent CLI for a run on this machine; `shim` is the
/// shim binary an ACP agent's client runs from.
fn real_agent(req: &RunRequest<'_>, p: &Prepared, shim: &str) -> Result<RealAgent> {
    let AgentSpec::Agent { recipe, version, policy, model } = &req.agent else { unreachable!("called for real agents") };
    let offline = req.agent.offline_model();
    if !offline && !req.uncontained {
        bail!(
            "{} talks to a real model API, and a real model may have the agent touch anything this user can: \
             on the local executor a real agent runs against the scripted model (`{}:{}:{}<play>`) or a replayed \
             one (`{}<bundle>`), or, with --uncontained, uncontained; use --executor docker, where it is contained \
             (build its image with `overeager agent recipe {}`)",
            req.agent.id(),
            recipe.id,
            policy.id,
            overeager_agents::SCRIPTED_MODEL,
            overeager_agents::REPLAY_MODEL,
            recipe.id
        );
    }
    let gateway = if offline {
        None
    } else {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("the model gateway cannot listen on 127.0.0.1 (no free loopback port?)")?;
        Some((GatewayPlan::new(&req.agent, &*req.providers()?)?, listener))
    };
    let installed = overeager_agents::install::ensure(recipe, version).with_context(|| format!("preparing {} {version} for `{}`", recipe.name, req.agent.id()))?;
    let config = p.chans.join(files::AGENT_LOGS).join(&recipe.id);
    let (env, served, model_name) = match &gateway {
        None => {
            let script = model_script(req, &p.roots, &p.ctl)?;
            let listener = std::net::TcpListener::bind("127.0.0.1:0").context("the scripted model endpoint cannot listen on 127.0.0.1 (no free loopback port?)")?;
            let url = format!("http://{}", listener.local_addr()?);
            (recipe.connect(policy, model, &url, recipe.scripted_dialect(version), SCRIPTED_KEY, &config, &config.to_string_lossy())?, Some((script, listener)), model.as_str())
        }
        Some((g, listener)) => {
            let url = format!("http://{}", listener.local_addr()?);
            let mut env = recipe.connect(policy, &g.route.model, &url, g.route.agent_dialect, SCRIPTED_KEY, &config, &config.to_string_lossy())?;
            env.extend(recipe.route_env(&g.route));
            (env, None, g.route.model.as_str())
        }
    };
    let argv = recipe.command(shim, &installed.argv0, policy, model_name, &p.prompt.text);
    Ok(RealAgent { argv, env, version: version.to_string(), served, gateway })
}

/// One run of a real agent CLI *bare*, for measuring what observing it costs: the same
/// prepared workspace and home, the same scripted model (served by `overeager-shim model`,
/// started before the clock), the same command line and environment, but no supervisor,
/// watcher, shell shim, snapshots or bundle. Returns the CLI's wall time in milliseconds.
pub fn bench_bare(req: &RunRequest<'_>) -> Result<f64> {
    let p = prepare(req, true)?;
    let r = real_agent(req, &p, &req.shim.to_string_lossy())?;
    let (script, listener) = r.served.as_ref().context("the bare comparison runs against the scripted model")?;
    let mut model = Command::new(&req.shim);
    let fd = hand_down(&mut model, listener);
    model.args(["model", "--script"]).arg(script).args(["--fd", &fd.to_string()]).stdout(Stdio::null()).stderr(Stdio::null());
    let mut server = model.spawn().context("starting the scripted model for the bare run")?;
    let mut cmd = Command::new(&r.argv[0]);
    cmd.args(&r.argv[1..])
        .current_dir(&p.work)
        .env_clear()
        .env("PATH", BASE_PATH)
        .envs(agent_env(&p.home.to_string_lossy(), &p.ctl.join("tmp").to_string_lossy()))
        .envs(&req.scenario.scenario.model.env)
        .envs(r.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let t = std::time::Instant::now();
    let status = cmd.status();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let _ = server.kill();
    let _ = server.wait();
    let status = status.with_context(|| format!("starting {}", r.argv[0]))?;
    if !status.success() {
        bail!("the bare run of {} failed ({status})", req.agent.id());
    }
    Ok(ms)
}

