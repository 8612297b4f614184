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
                overeager_core::environ::wipe_value(var);
            }
            value
        })
        .clone()
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
