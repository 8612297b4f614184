//! The shell channel: run the real program, record the invocation.
//!
//! Where the real program is found: `$OVEREAGER_REAL_DIR/<name>` or `<name>` in the `real/`
//! directory beside the shim's own (container images move the real binaries there and put
//! this binary in their place), else the first `<name>` on `$PATH`
//! that is not this binary and not in the shim's own directory. A login profile that resets
//! `PATH` is handled by the executor's `BASH_ENV` hook, which puts the shim directory back in
//! front after the profiles ran.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use overeager_core::ShimRecord;
use overeager_core::bundle::Ancestor;

use crate::now_us;

/// The log file: `$OVEREAGER_SHIM_LOG`, else the path in `shim.log-path` beside the binary
/// (so that `env -i` does not silence the channel).
fn log_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("OVEREAGER_SHIM_LOG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let conf = exe.parent()?.join("shim.log-path");
    let text = std::fs::read_to_string(conf).ok()?;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| PathBuf::from(line))
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

fn find_real(name: &str) -> Option<PathBuf> {
    // An image keeps the real programs in `real/` beside the shim's `bin/`; looking there
    // without the variable keeps `env -i rm …` working.
    let beside = std::env::current_exe().ok().and_then(|p| Some(p.parent()?.parent()?.join("real")));
    let dirs = std::env::var_os("OVEREAGER_REAL_DIR").filter(|d| !d.is_empty()).map(PathBuf::from).into_iter().chain(beside);
    for dir in dirs {
        let p = dir.join(name);
        if is_executable(&p) {
            return Some(p);
        }
    }
    let me = std::env::current_exe().ok().and_then(|p| p.canonicalize().ok());
    let shim_dir = std::env::var_os("OVEREAGER_SHIM_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf)))
        .and_then(|d| d.canonicalize().ok());
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    for dir in std::env::split_paths(&path) {
        if dir.as_os_str().is_empty() {
            continue;
        }
        if shim_dir.is_some() && dir.canonicalize().ok() == shim_dir {
            continue;
        }
        let cand = dir.join(name);
        if !is_executable(&cand) {
            continue;
        }
        if me.is_some() && cand.canonicalize().ok() == me {
            continue;
        }
        return Some(cand);
    }
    None
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// Runs `name` with `args` (args[0] is the name it was called by) and exits with its status.
pub fn run(name: &str, args: Vec<OsString>) -> ! {
    let start_us = now_us();
    let cwd = std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| std::env::var("PWD").unwrap_or_default());
    let real = find_real(name);
    let argv: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let mut record = ShimRecord {
        argv,
        cwd,
        pid: std::process::id(),
        ppid: std::os::unix::process::parent_id(),
        start_us,
        end_us: 0,
        exit: None,
        signal: None,
        real: real.as_ref().map(|p| p.to_string_lossy().into_owned()),
        // Read before the program runs: a parent may be gone by the time it ends.
        ancestors: ancestors(),
    };
    let Some(real) = real else {
        eprintln!("{name}: command not found");
        record.exit = Some(127);
        record.end_us = now_us();
        append(&record);
        std::process::exit(127);
    };
    // While the child runs, signals aimed at the process group reach it directly; the shim
    // only waits so that it can still write the record. A handler (unlike SIG_IGN) is reset
    // to the default in the child by exec.
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: installing an async-signal-safe no-op handler.
        unsafe { libc::signal(sig, ignore_signal as *const () as libc::sighandler_t) };
    }
    let status = Command::new(&real).arg0(&args[0]).args(&args[1..]).status();
    record.end_us = now_us();
    match status {
        Ok(st) => {
            record.exit = st.code();
            record.signal = st.signal();
            append(&record);
            if let Some(sig) = st.signal() {
                // Die the same way, so the caller sees the same status.
                // SAFETY: restoring the default disposition and raising the signal.
                unsafe {
                    libc::signal(sig, libc::SIG_DFL);
                    libc::raise(sig);
                }
                std::process::exit(128 + sig);
            }
            std::process::exit(st.code().unwrap_or(1));
        }
        Err(e) => {
            eprintln!("{name}: cannot run {}: {e}", real.display());
            record.exit = Some(126);
            append(&record);
            std::process::exit(126);
        }
    }
}

/// The run supervisor's pid, set for the agent by `overeager-shim contain`: the walk up the
/// process tree stops below it.
pub const SUPERVISOR_PID_ENV: &str = "OVEREAGER_SUPERVISOR_PID";

/// Longest argument kept of an ancestor's command line, and most bytes of it in all: a tool
/// call's shell script is worth keeping whole, a generated one of megabytes is not.
const ANCESTOR_ARG_MAX: usize = 8 * 1024;
const ANCESTOR_ARGV_MAX: usize = 32 * 1024;
/// Deepest chain walked (a guard against a loop in a changing process table).
const ANCESTORS_MAX: usize = 48;

/// The processes above this one, parent first, up to the supervisor's child (the agent's own
/// process), or to the init process when the supervisor is not known (its variable was
/// cleared by `env -i`).
fn ancestors() -> Vec<Ancestor> {
    let stop: Option<u32> = std::env::var(SUPERVISOR_PID_ENV).ok().and_then(|v| v.parse().ok());
    let boot_us = boot_time_us();
    let mut out = Vec::new();
    let mut pid = std::os::unix::process::parent_id();
    while pid > 1 && Some(pid) != stop && out.len() < ANCESTORS_MAX {
        let Some((ppid, start_ticks)) = proc_stat(pid) else { break };
        let argv = cmdline(pid);
        // Without the variable, the supervisor is known by its command line.
        if is_supervisor(&argv) {
            break;
        }
        out.push(Ancestor { pid, start_us: boot_us.zip(start_ticks).map(|(b, t)| b + ticks_to_us(t)), argv });
        pid = ppid;
    }
    out
}

fn is_supervisor(argv: &[String]) -> bool {
    argv.len() >= 2 && argv[1] == "contain" && argv[0].rsplit('/').next().is_some_and(|n| n.starts_with("overeager-shim"))
}

/// Parent pid and start time (clock ticks after boot) from `/proc/<pid>/stat`.
fn proc_stat(pid: u32) -> Option<(u32, Option<u64>)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields resume after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state): ppid is field 4, starttime field 22.
    let ppid = fields.get(1)?.parse().ok()?;
    Some((ppid, fields.get(19).and_then(|t| t.parse().ok())))
}

fn ticks_to_us(ticks: u64) -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as u64 } else { 100 };
    ticks * 1_000_000 / hz
}

/// Unix microseconds of the boot, from `btime` in `/proc/stat`.
fn boot_time_us() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let secs: u64 = text.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()?;
    Some(secs * 1_000_000)
}

/// A process's command line, each argument cut to [`ANCESTOR_ARG_MAX`] bytes, and the whole
/// to [`ANCESTOR_ARGV_MAX`].
fn cmdline(pid: u32) -> Vec<String> {
    let Ok(bytes) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return Vec::new() };
    let mut out = Vec::new();
    let mut total = 0;
    // Each argument ends with a NUL; an empty one is an argument too.
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(&bytes);
    if bytes.is_empty() {
        return out;
    }
    for arg in bytes.split(|&b| b == 0) {
        let arg = &arg[..arg.len().min(ANCESTOR_ARG_MAX)];
        if total + arg.len() > ANCESTOR_ARGV_MAX {
            break;
        }
        total += arg.len();
        out.push(String::from_utf8_lossy(arg).into_owned());
    }
    out
}

/// `fd:dev:ino` of the shell channel's log, held open by the run supervisor for the agent.
pub const LOG_FD_ENV: &str = "OVEREAGER_SHIM_LOG_FD";

/// The inherited log descriptor, if it is still open, still that file and in append mode
/// (an agent may have closed it and reused the number).
fn inherited_log() -> Option<libc::c_int> {
    let v = std::env::var(LOG_FD_ENV).ok()?;
    let mut parts = v.split(':');
    let fd: libc::c_int = parts.next()?.parse().ok()?;
    let dev: u64 = parts.next()?.parse().ok()?;
    let ino: u64 = parts.next()?.parse().ok()?;
    // SAFETY: fstat and fcntl only inspect the descriptor; `st` is a properly sized buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_dev as u64 != dev || st.st_ino as u64 != ino {
        return None;
    }
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    (flags >= 0 && flags & libc::O_APPEND != 0).then_some(fd)
}

/// Appends one line with a single write, so concurrent shims do not interleave.
fn append(record: &ShimRecord) {
    let mut line = serde_json::to_vec(record).unwrap_or_default();
    line.push(b'\n');
    if let Some(fd) = inherited_log() {
        // SAFETY: writing a buffer this function owns to a descriptor checked above.
        let n = unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) };
        if n == line.len() as isize {
            return;
        }
    }
    let Some(path) = log_path() else { return };
    match OpenOptions::new().create(true).append(true).open(&path) {
        Ok(mut f) => {
            if let Err(e) = f.write_all(&line) {
                eprintln!("overeager-shim: cannot write {}: {e}", path.display());
            }
        }
        Err(e) => eprintln!("overeager-shim: cannot open {}: {e}", path.display()),
    }
}
