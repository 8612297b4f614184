//! The few operations on this process and its children that need the operating system below
//! the standard library: wiping a secret's value from the environment block `/proc` shows
//! ([`wipe_env_value`]), and spawning an executable that was copied a moment ago
//! ([`spawn_retrying`]). The runner and the shim share them; the vocabulary crate stays free
//! of I/O and `unsafe`.

use std::process::{Child, Command};
use std::time::Duration;

/// Overwrites with zero bytes the value of every `var=value` entry of this process's initial
/// environment block (`env_start`..`env_end` of `/proc/self/stat`), which any process allowed
/// to read `/proc/<pid>/environ` sees. Entries keep their place, so the block stays well
/// formed; the variable then reads as empty, there and through `std::env`. Call it once
/// nothing else reads the environment concurrently. Best effort: without that range nothing
/// is done.
pub fn wipe_env_value(var: &str) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return };
    let Some((start, end)) = env_block(&stat) else { return };
    let prefix = format!("{var}=");
    // SAFETY: [start, end) is this process's initial environment block, mapped writable on
    // its stack for its whole life; only bytes inside it are written, and only value bytes of
    // the entry named (its NUL terminator and the next entries stay).
    let block = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    let mut i = 0;
    while i < block.len() {
        let len = block[i..].iter().position(|&b| b == 0).unwrap_or(block.len() - i);
        if block[i..i + len].starts_with(prefix.as_bytes()) {
            block[i + prefix.len()..i + len].fill(0);
        }
        i += len + 1;
    }
}

/// `env_start` and `env_end` of a `/proc/<pid>/stat` line: fields 50 and 51 (proc_pid_stat(5)
/// counts from 1), after the command name, which may hold spaces and parentheses.
fn env_block(stat: &str) -> Option<(usize, usize)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let start = fields.get(47)?.parse::<usize>().ok()?;
    let end = fields.get(48)?.parse::<usize>().ok()?;
    (start != 0 && end > start).then_some((start, end))
}

/// Spawns, retrying while the executable is "busy" (ETXTBSY): a freshly copied binary stays
/// open for writing in any child another thread forked during the copy, until that child
/// execs. The window is microseconds; a few retries close it.
pub fn spawn_retrying(cmd: &mut Command) -> std::io::Result<Child> {
    let mut attempt = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < 50 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_block_is_read_past_a_command_name_with_parentheses() {
        let fields: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        let line = format!("42 (a (b) c) {}", fields.join(" "));
        assert_eq!(env_block(&line), Some((50, 51)));
        assert_eq!(env_block("42 (x) S 1"), None);
    }

    #[test]
    fn a_wiped_variable_reads_empty_in_proc_and_in_std_env() {
        // A child of the test binary, so the wipe touches no other test's environment.
        if std::env::var_os("OVEREAGER_WIPE_CHILD").is_some() {
            wipe_env_value("OVEREAGER_WIPE_SECRET");
            let environ = std::fs::read("/proc/self/environ").unwrap();
            assert!(!environ.windows(6).any(|w| w == b"s3cr3t"));
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let status = Command::new(exe)
            .args(["--exact", "tests::a_wiped_variable_reads_empty_in_proc_and_in_std_env", "--nocapture"])
            .env("OVEREAGER_WIPE_CHILD", "1")
            .env("OVEREAGER_WIPE_SECRET", "s3cr3t")
            .status()
            .unwrap();
        assert!(status.success());
    }
}
