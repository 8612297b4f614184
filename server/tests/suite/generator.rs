//! The generator: reproducible byte for byte, resumable, every admitted scenario valid; and the
//! registries it relies on.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::{ok, overeager, repo, seeds};
use overeager_core::registry::{Archetypes, Atoms};
use overeager_core::{Scenario, Variant, render_prompt};
use serde_json::Value;

fn work(name: &str) -> PathBuf {
    let dir = repo().join("target/test-work/gen").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    dir
}

/// Every file below `dir`, relative path → bytes (and the executable bit).
fn tree(dir: &Path) -> BTreeMap<String, (Vec<u8>, bool)> {
    use std::os::unix::fs::PermissionsExt;
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let exec = e.metadata().unwrap().permissions().mode() & 0o111 != 0;
            (rel, (std::fs::read(e.path()).unwrap(), exec))
        })
        .collect()
}

fn generate(n: usize, seed: u64, out: &Path) -> std::process::Output {
    overeager(&["gen", "--seeds", "scenarios/seeds", "--n", &n.to_string(), "--seed", &seed.to_string(), "--out", out.to_str().unwrap(), "--json"])
}

/// The part of a report that describes the admitted set. Why a *rejected* candidate was
/// rejected can differ between runs when its plays are not deterministic (git re-reading a file
/// it considers racily clean), so reasons and per-stage counts are left out.
fn admitted_part(r: &Value) -> Value {
    let keep = ["params", "seeds", "seeds_rejected", "admitted", "axis_balance", "archetypes", "per_seed", "min_distance"];
    Value::Object(r.as_object().unwrap().iter().filter(|(k, _)| keep.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect())
}

fn report(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("gen-report.json")).unwrap()).unwrap()
}

#[test]
fn gen_is_reproducible_resumable_and_admits_only_valid_scenarios() {
    // Scenarios to admit: enough for every stage to pass and refuse some (bench-v1's 500 are
    // reproduced in the all tier).
    const N: usize = 8;
    let (a, b) = (work("a"), work("b"));
    ok(&generate(N, 5, &a));
    ok(&generate(N, 5, &b));
    let (ta, tb) = (tree(&a), tree(&b));
    assert_eq!(ta.keys().collect::<Vec<_>>(), tb.keys().collect::<Vec<_>>(), "same files");
    for (k, v) in &ta {
        if !k.starts_with(".gen-journal") && k != "gen-report.json" {
            assert!(tb[k] == *v, "{k} differs between two runs with the same seed");
        }
    }
    assert_eq!(admitted_part(&report(&a)), admitted_part(&report(&b)));

    // The report accounts for every candidate, and N were admitted.
    let r = report(&a);
    assert_eq!(r["admitted"], N);
    let stages: BTreeMap<&str, &Value> = r["stages"].as_array().unwrap().iter().map(|s| (s["stage"].as_str().unwrap(), s)).collect();
    assert_eq!(stages.keys().copied().collect::<BTreeSet<_>>(), ["consent_pair", "designed", "diversity", "mutate", "validate"].into_iter().collect());
    let mutate = stages["mutate"];
    let rejected_at_mutate: u64 = mutate["rejected"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(mutate["passed"].as_u64().unwrap() + rejected_at_mutate, r["candidates"].as_u64().unwrap());
    assert_eq!(stages["consent_pair"]["passed"], N);
    let balance_total: u64 = r["axis_balance"]["lure"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(balance_total, N as u64);

    // Every admitted scenario: generated provenance and axes, a consent pair that differs only
    // by the block, and the validator admits it again on its own.
    let manifest = std::fs::read_to_string(a.join("MANIFEST")).unwrap();
    assert_eq!(manifest.lines().count(), N);
    let ids: Vec<String> = manifest.lines().map(|l| l.split_whitespace().nth(1).unwrap().to_string()).collect();
    for id in &ids {
        let text = std::fs::read_to_string(a.join(id).join("scenario.toml")).unwrap();
        let s = Scenario::from_toml(id, &text).unwrap();
        let p = s.provenance.as_ref().expect("provenance");
        assert!(id.starts_with(&p.seed), "{id} names its seed");
        assert_eq!(p.generator_seed, 5);
        assert_eq!(s.axes.len(), 5, "{id}: {:?}", s.axes);
        let kept = render_prompt(&s.prompt, Variant::ConsentKept);
        let stripped = render_prompt(&s.prompt, Variant::ConsentStripped);
        assert_eq!(kept.without_block(), stripped.text, "{id}");
        assert_ne!(kept.text, stripped.text, "{id}");
    }
    let v = overeager(&["validate", a.to_str().unwrap(), "--json"]);
    for line in ok(&v).lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["admitted"], true, "{v}");
        assert_eq!(v["designed_mismatch"], Value::Array(vec![]), "{v}");
        let fired: BTreeSet<&str> = v["plays"].as_array().unwrap().iter().flat_map(|p| p["fired"].as_array().unwrap().iter().map(|t| t.as_str().unwrap())).collect();
        let text = std::fs::read_to_string(a.join(v["scenario"].as_str().unwrap()).join("scenario.toml")).unwrap();
        let s = Scenario::from_toml("x", &text).unwrap();
        for t in &s.traps {
            assert!(fired.contains(t.id.as_str()), "{}: trap {} fires under no play", s.id, t.id);
        }
    }

    // Interrupted: the report and half the scenarios are gone, the journal is cut mid-line.
    // Running again with the same arguments finishes the job with the same bytes.
    std::fs::remove_file(a.join("gen-report.json")).unwrap();
    for id in ids.iter().step_by(2) {
        std::fs::remove_dir_all(a.join(id)).unwrap();
    }
    let journal = a.join(".gen-journal.jsonl");
    let j = std::fs::read_to_string(&journal).unwrap();
    std::fs::write(&journal, &j[..j.len() - 20]).unwrap();
    ok(&generate(N, 5, &a));
    let resumed = tree(&a);
    for (k, v) in &tb {
        if k != ".gen-journal.jsonl" && k != "gen-report.json" {
            assert!(resumed.get(k) == Some(v), "{k} differs after resuming");
        }
    }

    // Other parameters into the same directory are refused, and nothing is touched.
    let before = tree(&a);
    let o = generate(N, 6, &a);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("different parameters"), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(tree(&a) == before);
}

/// The reference set: regenerated from the seeds, it reproduces the committed manifest.
#[test]
fn all_bench_v1_reproduces_its_manifest() {
    let out = work("bench-v1");
    let o = overeager(&[
        "gen",
        "--seeds",
        "scenarios/seeds",
        "--n",
        "500",
        "--seed",
        "20261121",
        "--out",
        out.to_str().unwrap(),
        "--expect",
        "scenarios/bench-v1/MANIFEST",
    ]);
    ok(&o);
    let committed: Value = serde_json::from_str(&std::fs::read_to_string(repo().join("scenarios/bench-v1/gen-report.json")).unwrap()).unwrap();
    assert_eq!(admitted_part(&report(&out)), admitted_part(&committed), "the generator's report differs from the committed one");
    assert_eq!(committed["admitted"], 500);

    // On the regenerated set, adaptive allocation reaches ±5 pp on every simulated cell with
    // at most 60% of the runs uniform allocation needs, and its intervals cover the true rates.
    let bench: Value = serde_json::from_str(&ok(&overeager(&["bench", "allocation", "--scenarios", out.to_str().unwrap(), "--experiments", "200", "--json"]))).unwrap();
    assert_eq!(bench["all_reached"], 1.0, "{bench}");
    assert!(bench["ratio_uniform"].as_f64().unwrap() <= 0.60, "{bench}");
    assert!(bench["adaptive_coverage"].as_f64().unwrap() >= 0.93, "{bench}");
    for c in bench["cells"].as_array().unwrap() {
        assert!(c["adaptive_coverage"].as_f64().unwrap() >= 0.9, "{c}");
    }
}

#[test]
fn gen_refuses_a_directory_it_did_not_write() {
    let dir = work("foreign");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("thesis.tex"), "\\documentclass{article}").unwrap();
    let o = generate(3, 1, &dir);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not written by `overeager gen`"), "{err}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "nothing was added");
}

fn registries() -> (Archetypes, Atoms) {
    let read = |n: &str| std::fs::read_to_string(repo().join("scenarios").join(n)).unwrap();
    let a = Archetypes::from_toml("archetypes.toml", &read("archetypes.toml")).unwrap_or_else(|e| panic!("{e:?}"));
    let t = Atoms::from_toml("atoms.toml", &read("atoms.toml")).unwrap_or_else(|e| panic!("{e:?}"));
    (a, t)
}

#[test]
fn registries_cover_every_seed() {
    let (archetypes, atoms) = registries();
    assert!(archetypes.archetypes.len() >= 24, "{} archetypes", archetypes.archetypes.len());
    assert_eq!(atoms.categories.len(), 9);
    assert_eq!(atoms.atoms.len(), 55);
    let mut per_archetype: BTreeMap<String, usize> = archetypes.archetypes.iter().map(|a| (a.id.clone(), 0)).collect();
    let mut seeds_seen = 0;
    let mut unclassified = Vec::new();
    for e in std::fs::read_dir(seeds()).unwrap() {
        let dir = e.unwrap().path();
        let text = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
        let s = Scenario::from_toml(&dir.display().to_string(), &text).unwrap();
        seeds_seen += 1;
        assert!(archetypes.check_scenario(&s.archetype, &s.anchors).is_empty(), "{}", s.id);
        *per_archetype.get_mut(&s.archetype).unwrap() += 1;
        for t in &s.traps {
            if atoms.classify(t).is_none() {
                unclassified.push(format!("{}/{}", s.id, t.id));
            }
        }
    }
    assert!(seeds_seen >= 60, "{seeds_seen} seeds");
    let empty: Vec<_> = per_archetype.iter().filter(|(_, n)| **n == 0).map(|(a, _)| a.clone()).collect();
    assert!(empty.is_empty(), "archetypes without a seed: {empty:?}");
    assert!(unclassified.is_empty(), "traps no atom describes: {unclassified:?}");
}

#[test]
fn a_seed_with_an_unknown_archetype_is_refused_by_the_checker() {
    let root = repo().join("target/test-work/gen-registry");
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join("scenarios/seeds/odd");
    common::copy_tree(&seeds().join("cleanup-orphaned-envs"), &dir);
    std::fs::copy(repo().join("scenarios/archetypes.toml"), root.join("scenarios/archetypes.toml")).unwrap();
    let text = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
    let text = text.replace("id = \"cleanup-orphaned-envs\"", "id = \"odd\"").replace("archetype = \"orphaned-environment-cleanup\"", "archetype = \"made-up\"");
    std::fs::write(dir.join("scenario.toml"), text).unwrap();
    let o = overeager(&["scenario", "check", dir.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("scenario.toml:3:1: archetype: unknown archetype `made-up`"), "{err}");
}
