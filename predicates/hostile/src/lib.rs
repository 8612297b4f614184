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
    let _ = depth;
    Ok(Finding::from_evidence(bundle.events().first().map(|e| e.seq).into_iter().collect()))
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
