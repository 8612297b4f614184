//! Provider keys, read once from this process's environment and then wiped from the
//! environment block the kernel shows as `/proc/<pid>/environ`: a real agent running on this
//! machine as the same user (or as root) must not find the key there. The value stays in
//! this process's memory for the model gateways it starts.

use std::collections::HashMap;
use std::sync::Mutex;

static KEYS: Mutex<Option<HashMap<String, Option<String>>>> = Mutex::new(None);

/// The value of the key variable `var` (`None`: unset or empty). The first call reads it
/// and wipes it from the environment block; later calls answer from memory.
pub fn key(var: &str) -> Option<String> {
    let mut keys = KEYS.lock().unwrap_or_else(|e| e.into_inner());
    keys.get_or_insert_with(HashMap::new)
        .entry(var.to_string())
        .or_insert_with(|| {
            let value = std::env::var(var).ok().filter(|v| !v.is_empty());
            if value.is_some() {
                wipe_from_environ_block(var);
            }
            value
        })
        .clone()
}

/// Overwrites with zero bytes the value of every `var=value` entry in the memory the kernel
/// reads `/proc/self/environ` from (the initial environment block, `env_start`..`env_end`
/// of `/proc/self/stat`). Entries keep their place, so the environment stays well formed;
/// the variable just reads as empty there. Best effort: without that range nothing is done.
fn wipe_from_environ_block(var: &str) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return };
    // Fields after the command name (which may hold spaces) start at field 3; env_start and
    // env_end are fields 50 and 51 (proc_pid_stat(5) counts from 1).
    let Some((_, rest)) = stat.rsplit_once(')') else { return };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let (Some(start), Some(end)) = (fields.get(47).and_then(|f| f.parse::<usize>().ok()), fields.get(48).and_then(|f| f.parse::<usize>().ok())) else { return };
    if start == 0 || end <= start {
        return;
    }
    let prefix = format!("{var}=");
    // SAFETY: [start, end) is this process's initial environment block, mapped writable on
    // its stack for its whole life; only bytes inside it are written, and only value bytes of
    // the entry named (its NUL terminator and the next entries stay).
    unsafe {
        let block = std::slice::from_raw_parts_mut(start as *mut u8, end - start);
        let mut i = 0;
        while i < block.len() {
            let len = block[i..].iter().position(|&b| b == 0).unwrap_or(block.len() - i);
            if block[i..i + len].starts_with(prefix.as_bytes()) {
                block[i + prefix.len()..i + len].fill(0);
            }
            i += len + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_is_kept_in_memory_and_gone_from_proc_environ() {
        // Set before the process started, as a user's key is: run this test binary again
        // with the variable in its environment.
        const VAR: &str = "OVEREAGER_SECRETS_TEST_KEY";
        if std::env::var_os("OVEREAGER_SECRETS_TEST_CHILD").is_none() {
            let me = std::env::current_exe().unwrap();
            let out = std::process::Command::new(me)
                .args(["--exact", "secrets::tests::a_key_is_kept_in_memory_and_gone_from_proc_environ", "--nocapture"])
                .env("OVEREAGER_SECRETS_TEST_CHILD", "1")
                .env(VAR, "sk-test-wipe-me-0123456789")
                .output()
                .unwrap();
            assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"), "the child ran the test");
            return;
        }
        let environ = || std::fs::read("/proc/self/environ").unwrap();
        let has = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
        assert!(has(&environ(), b"sk-test-wipe-me-0123456789"));
        assert_eq!(super::key(VAR).as_deref(), Some("sk-test-wipe-me-0123456789"));
        assert!(!has(&environ(), b"sk-test-wipe-me-0123456789"), "wiped from /proc/self/environ");
        assert!(has(&environ(), b"OVEREAGER_SECRETS_TEST_CHILD=1"), "the other entries stay");
        assert_eq!(super::key(VAR).as_deref(), Some("sk-test-wipe-me-0123456789"), "still known to this process");
    }
}
