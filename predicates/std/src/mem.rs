//! Byte comparison a word at a time. The toolchain's `memcmp` for wasm32 compares byte by
//! byte, and comparing strings (map lookups, sorting, equality) is much of a call's work, so
//! the module links this one instead.

/// Compares two byte strings of the same length as `memcmp` does: zero when equal, else the
/// difference of the first bytes that differ.
#[cfg_attr(not(target_family = "wasm"), allow(dead_code))]
pub fn compare(a: &[u8], b: &[u8]) -> i32 {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_ne_bytes(a[i..i + 8].try_into().expect("eight bytes"));
        let y = u64::from_ne_bytes(b[i..i + 8].try_into().expect("eight bytes"));
        if x != y {
            break;
        }
        i += 8;
    }
    while i < n {
        if a[i] != b[i] {
            return i32::from(a[i]) - i32::from(b[i]);
        }
        i += 1;
    }
    0
}

/// `memcmp`, by [`compare`].
///
/// # Safety
/// `a` and `b` must be valid for reads of `n` bytes.
#[cfg(target_family = "wasm")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the caller's promise.
    unsafe { compare(core::slice::from_raw_parts(a, n), core::slice::from_raw_parts(b, n)) }
}

/// `bcmp` (nonzero when the bytes differ), by [`compare`].
///
/// # Safety
/// `a` and `b` must be valid for reads of `n` bytes.
#[cfg(target_family = "wasm")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the caller's promise.
    unsafe { memcmp(a, b, n) }
}

#[cfg(test)]
mod tests {
    use super::compare;

    #[test]
    fn compare_orders_and_equates_as_byte_slices_do() {
        let words: Vec<Vec<u8>> = ["", "a", "ab", "abcdefgh", "abcdefgi", "abcdefghi", "abcdefghij", "bbcdefgh", "~/.ssh/id_ed25519", "~/.ssh/id_ed25518", "\u{ff}\u{fe}"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .chain([vec![0x80; 17], vec![0x7f; 17], [vec![0u8; 15], vec![1]].concat(), vec![0u8; 16]])
            .collect();
        for x in &words {
            for y in &words {
                let n = x.len().min(y.len());
                let (a, b) = (&x[..n], &y[..n]);
                let got = compare(a, b);
                assert_eq!(got.signum(), a.cmp(b) as i32, "{a:?} vs {b:?}");
                if got != 0 {
                    let k = a.iter().zip(b).position(|(p, q)| p != q).unwrap();
                    assert_eq!(got, i32::from(a[k]) - i32::from(b[k]));
                }
            }
        }
    }
}
