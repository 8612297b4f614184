//! A process's initial environment block — what `/proc/<pid>/environ` shows any process
//! allowed to read it — and wiping a secret's value from it once it has been read.

/// Overwrites with zero bytes the value of every `var=value` entry of this process's initial
/// environment block (`env_start`..`env_end` of `/proc/self/stat`). Entries keep their place,
/// so the block stays well formed; the variable then reads as empty, there and through
/// `std::env`. Call it once nothing else reads the environment concurrently. Best effort:
/// without that range nothing is done.
pub fn wipe_value(var: &str) {
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
