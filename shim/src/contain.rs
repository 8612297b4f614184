//! The run supervisor: starts the file watcher, runs the agent under a wall-clock limit, kills
//! whatever the agent leaves behind, stops the watcher and reports how the agent ended.
//!
//! Every executor runs the agent through it — locally as a child of the runner, in a
//! container as its first process — so both sandboxes observe and end a run the same way.
//! The watcher is a thread of this process, not a child: when the supervisor is PID 1 of a
//! container it clears out stragglers with `kill(-1, SIGKILL)`, which spares only itself.

use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use overeager_core::bundle::{ExitStatus, SupervisorReport, files};

use crate::{now_us, watch};

/// How long an agent gets between SIGTERM and SIGKILL at the time limit, and how long the
/// processes it leaves behind get to finish (a shim still writing the record of a command).
const GRACE: Duration = Duration::from_millis(300);
/// Upper bound on the straggler sweep (a fork bomb keeps making new ones).
const SWEEP_LIMIT: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct Options {
    status: PathBuf,
    channels: PathBuf,
    timeout: Duration,
    sync: Option<PathBuf>,
    roots: Vec<PathBuf>,
    /// The scripted model endpoint to serve for the agent: script file, and a descriptor or
    /// an address to listen on.
    model_script: Option<String>,
    model_fd: Option<String>,
    model_listen: Option<String>,
    program: Vec<String>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let (mut status, mut channels, mut timeout, mut sync, mut roots) = (None, None, None, None, Vec::new());
    let (mut model_script, mut model_fd, mut model_listen) = (None, None, None);
    let mut it = args.iter();
    let mut program = Vec::new();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--status" => status = Some(PathBuf::from(value()?)),
            "--channels" => channels = Some(PathBuf::from(value()?)),
            "--timeout-ms" => {
                let v = value()?;
                timeout = Some(Duration::from_millis(v.parse().map_err(|_| format!("--timeout-ms `{v}` is not a number of milliseconds"))?));
            }
            "--sync" => sync = Some(PathBuf::from(value()?)),
            "--watch" => roots.push(PathBuf::from(value()?)),
            "--model-script" => model_script = Some(value()?),
            "--model-fd" => model_fd = Some(value()?),
            "--model-listen" => model_listen = Some(value()?),
            "--" => {
                program = it.by_ref().cloned().collect();
                break;
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Options {
        status: status.ok_or("--status <file> is required")?,
        channels: channels.ok_or("--channels <dir> is required")?,
        timeout: timeout.ok_or("--timeout-ms <n> is required")?,
        sync,
        roots,
        model_script,
        model_fd,
        model_listen,
        program: if program.is_empty() { return Err("name the agent's command after `--`".into()) } else { program },
    })
}

/// `overeager-shim contain --status <file> --channels <dir> --timeout-ms <n> [--sync <socket>]
/// --watch <root>... -- <program> [args...]`
pub fn main(args: &[String]) -> i32 {
    let opts = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("overeager-shim contain: {e}");
            return 2;
        }
    };
    match supervise(&opts).and_then(|report| write_report(&opts.status, &report)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("overeager-shim contain: {e}");
            1
        }
    }
}

fn write_report(path: &Path, report: &SupervisorReport) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    let body = serde_json::to_vec(report).map_err(|e| e.to_string())?;
    std::fs::write(&tmp, body).and_then(|()| std::fs::rename(&tmp, path)).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds: [RawFd; 2] = [-1; 2];
    // SAFETY: pipe2 writes two fds into the array; we own them from here on.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn supervise(o: &Options) -> Result<SupervisorReport, String> {
    // Orphans of the agent become our children, so the sweep below finds them.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };

    let (stop_r, stop_w) = pipe()?;
    let (ready_tx, ready_rx) = mpsc::channel();
    let (out, sync, roots) = (o.channels.join(files::FSWATCH), o.sync.clone(), o.roots.clone());
    let watcher = std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let r = watch::run(&out, sync.as_deref(), &roots, stop_r.as_raw_fd(), || {
            let _ = ready_tx.send(());
        });
        drop(stop_r);
        r
    });
    let stop_watcher = move |stop_w: OwnedFd| -> Result<(), String> {
        drop(stop_w);
        match watcher.join() {
            Ok(Ok(())) => Ok(()),
            Ok(Err((_, msg))) => Err(format!("the file watcher failed: {msg}")),
            Err(_) => Err("the file watcher panicked".into()),
        }
    };
    if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
        return Err(stop_watcher(stop_w).err().unwrap_or_else(|| "the file watcher did not start".into()));
    }

    if let Some(script) = &o.model_script {
        let script = crate::model::load(script)?;
        let listener = crate::model::listener(o.model_fd.as_deref(), o.model_listen.as_deref())?;
        let log = File::create(o.channels.join(files::MODEL)).map_err(|e| format!("creating {}: {e}", files::MODEL))?;
        crate::model::spawn(listener, script, Some(log));
    }
    let open = |name: &str| File::create(o.channels.join(name)).map_err(|e| format!("creating {name}: {e}"));
    // The shell channel's log, inherited open: an agent's own sandbox (Codex's Landlock
    // policy) may forbid opening files outside the workspace, but not writing to a
    // descriptor it was handed. The shim checks the descriptor still is this file.
    let shim_log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(o.channels.join(files::SHIM))
        .map_err(|e| format!("opening {}: {e}", files::SHIM))?;
    // A high number: Node.js's child-process spawning does not pass low inherited numbers on
    // (measured: 9 was lost, 200 kept). F_DUPFD also clears close-on-exec.
    let log_fd = {
        use std::os::fd::AsRawFd;
        // SAFETY: duplicating a descriptor this function owns; the copy lives until exit.
        unsafe { libc::fcntl(shim_log.as_raw_fd(), libc::F_DUPFD, 300) }
    };
    if log_fd < 0 {
        return Err(format!("duplicating the {} descriptor: {}", files::SHIM, std::io::Error::last_os_error()));
    }
    let meta = shim_log.metadata().map_err(|e| format!("{}: {e}", files::SHIM))?;
    let mut cmd = Command::new(&o.program[0]);
    cmd.args(&o.program[1..]).stdin(Stdio::null()).stdout(open(files::AGENT)?).stderr(open(files::AGENT_STDERR)?).process_group(0);
    {
        use std::os::unix::fs::MetadataExt;
        cmd.env(crate::wrapper::LOG_FD_ENV, format!("{log_fd}:{}:{}", meta.dev(), meta.ino()));
        cmd.env(crate::wrapper::SUPERVISOR_PID_ENV, std::process::id().to_string());
    }
    // SAFETY: the hook only makes raw system calls on a static path (no allocation after fork).
    // A memory bomb should take the agent, not the supervisor or its watcher.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd >= 0 {
                libc::write(fd, b"1000".as_ptr().cast(), 4);
                libc::close(fd);
            }
            Ok(())
        })
    };
    let started_us = now_us();
    let agent = match overeager_process::spawn_retrying(&mut cmd) {
        Ok(child) => child.id() as libc::pid_t,
        Err(e) => {
            let _ = stop_watcher(stop_w);
            return Err(format!("starting the agent `{}`: {e}", o.program[0]));
        }
    };
    let reaped = start_reaper();
    let wait_agent = |until: Instant| -> Option<libc::c_int> {
        loop {
            match reaped.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok((pid, st)) if pid == agent => return Some(st),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    };
    let mut timed_out = false;
    let raw = match wait_agent(Instant::now() + o.timeout) {
        Some(st) => st,
        None => {
            timed_out = true;
            signal_group(agent, libc::SIGTERM);
            wait_agent(Instant::now() + GRACE).unwrap_or_else(|| {
                signal_group(agent, libc::SIGKILL);
                // A SIGKILLed process always ends; the fallback only guards a lost status.
                wait_agent(Instant::now() + Duration::from_secs(5)).unwrap_or(libc::SIGKILL)
            })
        }
    };
    let ended_us = now_us();
    let stragglers_killed = sweep(agent, &reaped);
    stop_watcher(stop_w)?;
    let exit = if libc::WIFEXITED(raw) {
        ExitStatus { code: Some(libc::WEXITSTATUS(raw)), signal: None }
    } else {
        ExitStatus { code: None, signal: Some(libc::WTERMSIG(raw)) }
    };
    Ok(SupervisorReport { exit, timed_out, started_us, ended_us, stragglers_killed })
}

/// Reaps every child (the agent, and orphans reparented to us) and reports (pid, status).
fn start_reaper() -> Receiver<(libc::pid_t, libc::c_int)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        loop {
            let mut st = 0;
            // SAFETY: waitpid writes the status into a local.
            let pid = unsafe { libc::waitpid(-1, &mut st, 0) };
            if pid > 0 {
                let _ = tx.send((pid, st));
            } else if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                // No children right now.
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    });
    rx
}

fn signal_group(pgid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: killpg has no memory-safety preconditions.
    unsafe { libc::killpg(pgid, sig) };
}

/// Our direct children, from `/proc/<pid>/stat`.
fn children() -> Vec<libc::pid_t> {
    let me = std::process::id() as libc::pid_t;
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
            // The command name (field 2) may contain spaces and parentheses; fields after the
            // last `)` are state, ppid, ….
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            rest.split_whitespace().nth(1).and_then(|p| p.parse::<libc::pid_t>().ok()) == Some(me)
        })
        .collect()
}

/// Ends everything the agent left running: a grace period for its process group to finish,
/// then SIGKILL to the group, to every process in the container when we are its PID 1, and to
/// every remaining child (orphans reparent to us) until none is left. Returns how many
/// processes were killed.
fn sweep(agent: libc::pid_t, reaped: &Receiver<(libc::pid_t, libc::c_int)>) -> u32 {
    let grace_end = Instant::now() + GRACE;
    // SAFETY: signal 0 only checks whether the group has members.
    while unsafe { libc::killpg(agent, 0) } == 0 && Instant::now() < grace_end {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut killed = std::collections::HashSet::new();
    let end = Instant::now() + SWEEP_LIMIT;
    loop {
        let left = children();
        // SAFETY: signal 0 only checks whether the group has members.
        let group_alive = unsafe { libc::killpg(agent, 0) } == 0;
        if (left.is_empty() && !group_alive) || Instant::now() > end {
            break;
        }
        signal_group(agent, libc::SIGKILL);
        if std::process::id() == 1 {
            // SAFETY: as PID 1 of a PID namespace, -1 reaches every other process in it.
            unsafe { libc::kill(-1, libc::SIGKILL) };
        }
        for pid in left {
            // SAFETY: plain signal delivery to our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed.insert(pid);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    while reaped.try_recv().is_ok() {}
    killed.len() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_the_command_after_the_separator() {
        let o = parse(&args("--status s.json --channels ch --timeout-ms 1500 --watch /w --watch /h -- sh -c true")).unwrap();
        assert_eq!(o.timeout, Duration::from_millis(1500));
        assert_eq!(o.roots, [PathBuf::from("/w"), PathBuf::from("/h")]);
        assert_eq!(o.program, ["sh", "-c", "true"]);
        assert!(parse(&args("--status s --channels c --timeout-ms x -- a")).unwrap_err().contains("`x`"));
        assert!(parse(&args("--status s --channels c --timeout-ms 5")).unwrap_err().contains("after `--`"));
        assert!(parse(&args("--bogus")).unwrap_err().contains("--bogus"));
    }
}
