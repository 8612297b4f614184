//! The two halves of judging one bundle, with criterion: building the view a module is given
//! (the compact layout of `overeager:predicate@0.2.0` against the JSON document of 0.1.0, and
//! decoding each again, as a module does), and one `evaluate` call of the built-in std in a
//! fresh instance of the judge's engine configuration.
//!
//! The bundles are real: the aggressive play of three seeds, run by the `overeager` binary.
//! `cargo bench -p overeager --bench judge` (the whole judge, with throughput on thousands of
//! bundles, is `overeager bench judge`).

#[path = "../tests/suite/common/mod.rs"]
#[allow(dead_code)]
mod common;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;

use common::{ok, overeager, repo, seeds};
use overeager_judge::{STD_WASM, engine_config};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use overeager_core::predicates::PredicateRef;
use overeager_core::verdict::leaf_calls;
use overeager_core::view::{BundleView, VIEW_SCHEMA, compact};
use wasmtime::component::{Component, ComponentType, Lift, Linker, Lower};
use wasmtime::{Engine, Store};

const SEEDS: [&str; 3] = ["cleanup-orphaned-envs", "alembic-broken-revision-keep-db", "requests-ledger-staging-ca-rotation"];

/// `check`, as the interface defines it.
#[derive(ComponentType, Lower, Clone)]
#[component(record)]
struct Check {
    name: String,
    args: String,
}

/// `finding`, as the interface defines it (lifted whole, as the judge does; not inspected).
#[allow(dead_code)]
#[derive(ComponentType, Lift)]
#[component(record)]
struct Finding {
    fired: bool,
    evidence: Vec<u64>,
    note: Option<String>,
}

/// A bundle directory read into a view (every text blob included) and std's checks of its
/// scenario.
fn read_bundle(dir: &Path) -> (BundleView, Vec<Check>) {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()));
    let mut blobs = BTreeMap::new();
    for entry in std::fs::read_dir(dir.join("blobs")).unwrap().flatten() {
        if let Ok(text) = std::fs::read_to_string(entry.path()) {
            blobs.insert(entry.file_name().to_string_lossy().into_owned(), text);
        }
    }
    let view = BundleView {
        view: VIEW_SCHEMA,
        manifest: serde_json::from_str(&read("bundle.json")).unwrap(),
        scenario: serde_json::from_str(&read("scenario.json")).unwrap(),
        events: read("events.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect(),
        before: serde_json::from_str(&read("snapshot/before.json")).unwrap(),
        after: serde_json::from_str(&read("snapshot/after.json")).unwrap(),
        blobs,
    };
    let checks = leaf_calls(&view.scenario)
        .iter()
        .filter_map(|leaf| PredicateRef::parse(&leaf.call.predicate).ok().filter(|r| r.module == "std").map(|r| Check { name: r.name, args: leaf.call.args.to_string() }))
        .collect();
    (view, checks)
}

fn bundles() -> Vec<(String, BundleView, Vec<Check>)> {
    let work = repo().join("target/bench-work/judge");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    SEEDS
        .iter()
        .map(|id| {
            let out = work.join(id);
            ok(&overeager(&["run", "--scenario", seeds().join(id).to_str().unwrap(), "--agent", "scripted:aggressive", "--out", out.to_str().unwrap()]));
            let (view, checks) = read_bundle(&out);
            (id.to_string(), view, checks)
        })
        .collect()
}

fn views(c: &mut Criterion) {
    let bundles = bundles();
    let mut encode = c.benchmark_group("view encoding");
    for (id, view, _) in &bundles {
        encode.throughput(Throughput::Elements(1));
        encode.bench_with_input(BenchmarkId::new("compact (0.2)", id), view, |b, v| b.iter(|| compact::encode(black_box(v))));
        encode.bench_with_input(BenchmarkId::new("json (0.1)", id), view, |b, v| b.iter(|| serde_json::to_string(black_box(v)).unwrap()));
    }
    encode.finish();
    let mut decode = c.benchmark_group("view decoding");
    for (id, view, _) in &bundles {
        let (bytes, json) = (compact::encode(view), serde_json::to_string(view).unwrap());
        decode.bench_with_input(BenchmarkId::new("compact (0.2)", id), &bytes, |b, v| b.iter(|| compact::decode(black_box(v)).unwrap()));
        decode.bench_with_input(BenchmarkId::new("json (0.1)", id), &json, |b, v| b.iter(|| serde_json::from_str::<BundleView>(black_box(v)).unwrap()));
    }
    decode.finish();

    // One call as the judge makes it: a fresh instance from the pool, fuel and a deadline set,
    // the view and checks lowered, the findings lifted; the store dropped (the slot reset).
    let engine = Engine::new(&engine_config::config(3 << 30, 16)).unwrap();
    let component = Component::new(&engine, STD_WASM).unwrap();
    let linker: Linker<()> = Linker::new(&engine);
    let pre = linker.instantiate_pre(&component).unwrap();
    let mut evaluate = c.benchmark_group("std evaluate, fresh instance");
    for (id, view, checks) in &bundles {
        let bytes = compact::encode(view);
        evaluate.bench_with_input(BenchmarkId::new(format!("{} checks", checks.len()), id), &bytes, |b, bytes| {
            b.iter(|| {
                let mut store = Store::new(&engine, ());
                store.set_fuel(u64::MAX / 2).unwrap();
                store.set_epoch_deadline(u64::MAX / 2);
                let instance = pre.instantiate(&mut store).unwrap();
                let f = instance.get_typed_func::<(&[u8], &[Check]), (Vec<Result<Finding, String>>,)>(&mut store, "evaluate").unwrap();
                let (answers,) = f.call(&mut store, (bytes, checks)).unwrap();
                assert!(answers.iter().all(Result::is_ok));
                answers
            })
        });
    }
    evaluate.bench_function("instantiation alone", |b| {
        b.iter(|| {
            let mut store = Store::new(&engine, ());
            store.set_fuel(u64::MAX / 2).unwrap();
            pre.instantiate(&mut store).unwrap()
        })
    });
    evaluate.finish();
}

criterion_group!(benches, views);
criterion_main!(benches);
