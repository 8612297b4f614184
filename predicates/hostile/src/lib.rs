//! Predicates that misbehave on purpose, one behaviour per cargo feature. The judge's tests
//! build each variant as a real component and check that the sandbox contains it: the judge
//! survives, the failure is recorded with a specific error, and other modules' findings are
//! unchanged. Without a feature, `check` behaves and fires on the first event.
#![allow(unreachable_code)]

use std::hint::black_box;

use overeager_predicate_sdk::{Args, Bundle, Finding, FindingExt};

fn depth(n: u64) -> u64 {
    if black_box(n) == u64::MAX { 0 } else { depth(n + 1).wrapping_add(1) }
}

/// The misbehaviour selected by the build's feature.
pub fn check(bundle: &Bundle, _args: &Args) -> Result<Finding, String> {
    #[cfg(feature = "loop-on-path")]
    {
        // Behaves unless given the argument a scenario would pass: a self-test that calls it
        // with empty arguments never sees the loop.
        if _args.opt_str("path")?.is_some() {
            let mut x = 0u64;
            loop {
                x = black_box(x.wrapping_add(1));
            }
        }
    }
    #[cfg(feature = "loop")]
    {
        let mut x = 0u64;
        loop {
            x = black_box(x.wrapping_add(1));
        }
    }
    #[cfg(feature = "membomb")]
    {
        let mut hoard = Vec::new();
        loop {
            hoard.push(black_box(vec![7u8; 1 << 20]));
        }
    }
    #[cfg(feature = "recursion")]
    {
        return Ok(Finding::fired(vec![depth(0)]));
    }
    #[cfg(feature = "bigresult")]
    {
        return Ok(Finding::fired(Vec::new()).with_note("x".repeat(100 << 20)));
    }
    #[cfg(feature = "badseq")]
    {
        return Ok(Finding::fired(vec![bundle.events().len() as u64 + 1000]));
    }
    #[cfg(feature = "panic")]
    {
        panic!("a bug in a third-party predicate");
    }
    #[cfg(feature = "snoop")]
    {
        return Ok(snoop::look(bundle));
    }
    let _ = depth;
    Ok(Finding::from_evidence(bundle.events().first().map(|e| e.seq).into_iter().collect()))
}

/// What one call can leave for the next in the same process: a static, and bytes of linear
/// memory. `look` fires, saying what it found, if anything of an earlier call is visible; then
/// it leaves both behind for the next call.
#[cfg(feature = "snoop")]
mod snoop {
    use overeager_predicate_sdk::{Bundle, Finding, FindingExt};

    static mut CALLS: u32 = 0;
    /// The marker's bytes, each xor 0x5a, so that the marker itself never sits in the data
    /// segment (or anywhere in memory) until a call writes it.
    const MARKER: [u8; 12] = [0x29, 0x34, 0x35, 0x35, 0x2a, 0x77, 0x37, 0x3b, 0x28, 0x31, 0x3f, 0x28];

    fn marker_at(p: *const u8) -> bool {
        // SAFETY: the callers only pass addresses inside this instance's linear memory.
        (0..MARKER.len()).all(|j| unsafe { core::ptr::read_volatile(p.add(j)) } == MARKER[j] ^ 0x5a)
    }

    pub fn look(bundle: &Bundle) -> Finding {
        let mut seen = Vec::new();
        // SAFETY: single-threaded; this module is the only user of the static.
        let calls = unsafe { CALLS };
        if calls > 0 {
            seen.push(format!("a static counts {calls} earlier call(s)"));
        }
        #[cfg(target_arch = "wasm32")]
        {
            let size = core::arch::wasm32::memory_size(0) * 65536;
            let found = (16..size.saturating_sub(MARKER.len())).filter(|&a| marker_at(a as *const u8)).count();
            if found > 0 {
                seen.push(format!("{found} marker(s) written by an earlier call are in linear memory"));
            }
        }
        // Leave traces for the next call: the static, and the marker with this run's id, leaked.
        unsafe { CALLS = calls + 1 };
        let mut trace: Vec<u8> = MARKER.iter().map(|b| b ^ 0x5a).collect();
        trace.extend_from_slice(bundle.manifest().run_id.as_bytes());
        std::mem::forget(trace);
        if seen.is_empty() { Finding::quiet() } else { Finding::fired(Vec::new()).with_note(seen.join("; ")) }
    }
}

#[cfg(not(feature = "import"))]
overeager_predicate_sdk::export_predicates! {
    "check" => check { summary: "misbehaves as the build's feature says", args: r#"{"type":"object"}"# },
}

/// The same exports, in a world that also imports a host function.
#[cfg(all(feature = "import", target_arch = "wasm32"))]
mod importing {
    wit_bindgen::generate!({
        inline: r#"
            package test:hostile;

            interface host {
                read-file: func(path: string) -> string;
            }

            world importing {
                import host;
                record predicate-info { name: string, summary: string, args-schema: string }
                record check { name: string, args: string }
                record finding { fired: bool, evidence: list<u64>, note: option<string> }
                export info: func() -> list<predicate-info>;
                export evaluate: func(bundle-json: string, checks: list<check>) -> list<result<finding, string>>;
            }
        "#,
        world: "importing",
    });

    struct Module;

    impl Guest for Module {
        fn info() -> Vec<PredicateInfo> {
            vec![PredicateInfo { name: "check".into(), summary: "reads a host file".into(), args_schema: "{}".into() }]
        }

        fn evaluate(_bundle_json: String, checks: Vec<Check>) -> Vec<Result<Finding, String>> {
            let leaked = test::hostile::host::read_file("/etc/shadow");
            checks.iter().map(|_| Ok(Finding { fired: true, evidence: Vec::new(), note: Some(leaked.clone()) })).collect()
        }
    }

    export!(Module);
}
