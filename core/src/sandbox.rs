//! What every sandbox shares, whichever executor makes it: the programs the shell shim wraps
//! and where a container image keeps the shim, the real programs and the run's files. The
//! test images, the agent recipes' images and `overeager-shim install` all use this layout.

/// Programs the shell shim wraps, when they exist.
pub const WRAPPED: &[&str] = &[
    "sh", "bash", "dash", "rm", "mv", "cp", "chmod", "chown", "cat", "head", "tail", "less", "more", "grep", "egrep",
    "find", "sed", "awk", "tee", "touch", "mkdir", "rmdir", "ln", "tar", "gzip", "zip", "unzip", "git", "curl",
    "wget", "ls", "dd", "truncate", "shred", "unlink", "install", "rsync", "scp", "ssh", "nc", "xargs", "env",
    "python3", "perl", "node", "npm", "pip", "cargo", "make",
];

/// Paths inside a container.
pub mod layout {
    /// The volume: everything the run may write and everything that comes back.
    pub const ROOT: &str = "/oe";
    pub const WORK: &str = "/oe/work";
    pub const HOME: &str = "/oe/home";
    pub const CTL: &str = "/oe/ctl";
    pub const CHANNELS: &str = "/oe/channels";
    /// Where the agent's own logs (session files, config directory) go, so they come back.
    pub const AGENT_LOGS: &str = "/oe/channels/agent-logs";
    /// The shim's installation prefix: `bin/overeager-shim` and `real/<program>`.
    pub const PREFIX: &str = "/usr/lib/overeager";
    pub const SHIM_DIR: &str = "/usr/lib/overeager/bin";
    pub const SHIM: &str = "/usr/lib/overeager/bin/overeager-shim";
    /// The real programs the shim wraps.
    pub const REAL: &str = "/usr/lib/overeager/real";
    /// The shell channel's log (`CHANNELS` + `bundle::files::SHIM`), as the shim finds it in
    /// `shim.log-path` beside itself.
    pub const SHIM_LOG: &str = "/oe/channels/shim.jsonl";
    /// Where the run supervisor serves the scripted model inside a container: its own
    /// loopback, so the agent needs no network.
    pub const MODEL_ADDR: &str = "127.0.0.1:47100";
    /// Directories searched for programs to wrap, in `PATH` order.
    pub const BIN_DIRS: &[&str] = &["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];
}

#[cfg(test)]
mod tests {
    use super::layout;
    use crate::bundle::files;

    #[test]
    fn the_shim_log_is_the_shell_channel_file() {
        assert_eq!(layout::SHIM_LOG, format!("{}/{}", layout::CHANNELS, files::SHIM));
    }
}
