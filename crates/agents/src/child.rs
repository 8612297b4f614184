//! Helpers for the processes a run starts beside its agent (the scripted model, the model
//! gateway): handing them a listening socket, and ending them with this process.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Has the child `cmd` starts be ended (SIGTERM) when this process ends, however it ends: a
/// server started for the user's command does not outlive it.
pub fn end_with_this_process(cmd: &mut Command) {
    // SAFETY: only prctl, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        })
    };
}

/// Lets the child `cmd` starts inherit `listener` (this process keeps it close-on-exec, so no
/// other child gets it) and returns its descriptor number, for the child's command line.
pub fn hand_down(cmd: &mut Command, listener: &std::net::TcpListener) -> std::os::fd::RawFd {
    use std::os::fd::AsRawFd;
    let fd = listener.as_raw_fd();
    // SAFETY: only fcntl on a descriptor this process owns, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::fcntl(fd, libc::F_SETFD, 0);
            Ok(())
        })
    };
    fd
}
