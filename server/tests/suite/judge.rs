//! The judge end to end: real bundles from the scripted plays, the real std component and
//! real third-party components built by these tests, through the `overeager` binary.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::{copy_tree, hostile, key, ok, oe, overeager, repo, scratch, seeds, shared, signed};
use serde_json::Value;

fn fails_with(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected a failure mentioning {needle:?}; stdout: {}", String::from_utf8_lossy(&out.stdout));
    assert!(stderr.contains(needle), "expected {needle:?} in:\n{stderr}");
}

fn verdicts(stdout: &str) -> Vec<Value> {
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

fn fired(v: &Value) -> BTreeSet<String> {
    v["traps"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_string()).collect()
}

/// (scenario id, play) → the traps the play is designed to fire.
type Designed = BTreeMap<(String, String), BTreeSet<String>>;

/// Bundles of seeds × plays × variants, and what each play is designed to fire.
type SeedBundles = (PathBuf, Designed);

/// Every play × variant of one seed of each archetype (and of `cleanup-orphaned-envs`, which
/// tests below name), run once for the whole test run.
fn seed_bundles() -> &'static SeedBundles {
    static B: OnceLock<SeedBundles> = OnceLock::new();
    B.get_or_init(|| {
        let mut sample = common::seed_sample();
        let named = seeds().join("cleanup-orphaned-envs");
        if !sample.contains(&named) {
            sample.push(named);
        }
        bundles_of("judge-seeds", &sample)
    })
}

/// Every play × variant of every seed, run once for the whole test run (`--all`).
fn every_seed_bundles() -> &'static SeedBundles {
    static B: OnceLock<SeedBundles> = OnceLock::new();
    B.get_or_init(|| bundles_of("judge-every-seed", &common::every_seed()))
}

/// The bundles of `seed_dirs`' plays, built once per run under the shared name `name`.
fn bundles_of(name: &str, seed_dirs: &[PathBuf]) -> SeedBundles {
    let mut designed = BTreeMap::new();
    let mut ids = Vec::new();
    for s in seed_dirs {
        let text = std::fs::read_to_string(s.join("scenario.toml")).unwrap();
        let toml: toml::Value = toml::from_str(&text).unwrap();
        let id = toml["id"].as_str().unwrap().to_string();
        for play in ["cautious", "moderate", "aggressive"] {
            let fires: BTreeSet<String> = toml["plays"][play]["fires"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
            designed.insert((id.clone(), play.to_string()), fires);
        }
        ids.push((id, s.clone()));
    }
    let dir = shared(name, |dir| {
        for (id, s) in &ids {
            for play in ["cautious", "moderate", "aggressive"] {
                for variant in ["consent_kept", "consent_stripped"] {
                    let out = dir.join(format!("{id}-{play}-{variant}"));
                    ok(&overeager(&["run", "--scenario", s.to_str().unwrap(), "--agent", &format!("scripted:{play}"), "--variant", variant, "--out", out.to_str().unwrap(), "--json"]));
                }
            }
        }
    });
    (dir, designed)
}

#[test]
fn seed_plays_fire_exactly_the_traps_they_are_designed_to_fire() {
    plays_fire_as_designed(seed_bundles(), "judge-designed");
}

#[test]
fn all_seed_plays_fire_exactly_the_traps_they_are_designed_to_fire_on_every_seed() {
    plays_fire_as_designed(every_seed_bundles(), "judge-designed-every-seed");
}

fn plays_fire_as_designed((dir, designed): &SeedBundles, name: &str) {
    let env = scratch(name);
    let out = oe(&env, &["judge", dir.to_str().unwrap(), "--json"]);
    let vs = verdicts(&ok(&out));
    assert_eq!(vs.len(), designed.len() * 2, "one verdict per bundle");
    for v in &vs {
        let play = v["agent"].as_str().unwrap().strip_prefix("scripted:").unwrap().to_string();
        let want = &designed[&(v["scenario"].as_str().unwrap().to_string(), play.clone())];
        assert_eq!(&fired(v), want, "{}", v["bundle"]);
        assert_eq!(v["errors"], Value::Array(vec![]), "{}", v["bundle"]);
        assert_eq!(v["overeager"], Value::Bool(!want.is_empty()));
        // The contract's fields are all there.
        for k in ["bundle", "overeager", "traps", "success", "severity_total", "critical", "errors"] {
            assert!(v.get(k).is_some(), "missing `{k}`");
        }
        if play == "cautious" {
            assert_eq!(v["success"], Value::Bool(true), "cautious completes the task: {}", v["bundle"]);
            assert_eq!(v["conditional_success"], Value::Bool(true));
        }
        for t in v["traps"].as_array().unwrap() {
            assert!(!t["evidence"].as_array().unwrap().is_empty(), "{} cites evidence in {}", t["id"], v["bundle"]);
        }
    }
}

#[test]
fn verdicts_are_byte_identical_across_repeats_and_thread_counts() {
    let (dir, _) = seed_bundles();
    let env = scratch("judge-determinism");
    let d = dir.to_str().unwrap();
    let one = ok(&oe(&env, &["judge", d, "--json", "--jobs", "1"]));
    let again = ok(&oe(&env, &["judge", d, "--json", "--jobs", "1"]));
    let all = ok(&oe(&env, &["judge", d, "--json", "--jobs", "4", "--no-cache"]));
    assert_eq!(one, again);
    assert_eq!(one, all);
}

/// A run is judged from what audit assembled, in memory; the same bundle read back from disk
/// gets the byte-identical verdict (the sweep judges the first way, `judge` the second).
#[test]
fn a_run_judged_as_assembled_and_as_read_back_gets_one_verdict() {
    let env = scratch("judge-in-memory");
    let sample = env.join("seeds");
    for dir in common::seed_sample() {
        copy_tree(&dir, &sample.join(dir.file_name().unwrap()));
    }
    let out = env.join("sweep");
    let swept = ok(&overeager(&["sweep", "--seeds", sample.to_str().unwrap(), "--out", out.to_str().unwrap(), "--json"]));
    let in_memory: BTreeMap<String, Value> = verdicts(&swept).into_iter().map(|l| (l["bundle"].as_str().unwrap().to_string(), l["verdict"].clone())).collect();
    let from_disk: BTreeMap<String, Value> = verdicts(&ok(&oe(&env, &["judge", out.to_str().unwrap(), "--json"]))).into_iter().map(|v| (v["bundle"].as_str().unwrap().to_string(), v)).collect();
    assert_eq!(in_memory.len(), 3 * common::seed_sample().len());
    assert_eq!(in_memory, from_disk);
}

/// A bundle whose judging allocates far more than std's bump arena holds (8 MiB; here tens of
/// thousands of snapshot entries, decoded as strings and maps) is judged completely, and as its
/// small self is: past the arena, the module's reusing allocator serves the call.
#[test]
fn a_bundle_too_large_for_the_modules_arena_is_judged_as_its_small_self() {
    let (dir, designed) = seed_bundles();
    let env = scratch("judge-large");
    let ((id, _), _) = designed.iter().find(|((_, play), fires)| play == "aggressive" && !fires.is_empty()).expect("a seed whose aggressive play fires traps");
    let small = dir.join(format!("{id}-aggressive-consent_stripped"));
    let large = env.join("large");
    copy_tree(&small, &large);
    for snap in ["snapshot/before.json", "snapshot/after.json"] {
        let path = large.join(snap);
        let mut entries: serde_json::Map<String, Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let dir_entry = serde_json::json!({"kind": "dir", "size": 0, "mode": 0o755});
        entries.insert("zz-filler".into(), dir_entry.clone());
        for i in 0..60_000 {
            entries.insert(format!("zz-filler/d{i:06}"), dir_entry.clone());
        }
        std::fs::write(&path, serde_json::to_string(&entries).unwrap()).unwrap();
    }
    let out = ok(&oe(&env, &["judge", "--json", small.to_str().unwrap(), large.to_str().unwrap()]));
    let vs = verdicts(&out);
    assert_eq!(vs.len(), 2);
    for v in &vs {
        assert!(v["errors"].as_array().unwrap().is_empty() && v["outcome"] != "incomplete", "{v}");
    }
    assert!(!fired(&vs[0]).is_empty());
    assert_eq!(fired(&vs[0]), fired(&vs[1]));
}

#[test]
fn compare_lists_the_verdicts_two_std_builds_disagree_on() {
    let (dir, designed) = seed_bundles();
    let env = scratch("judge-compare");
    let d = dir.to_str().unwrap();
    // Every verdict names the std release that judged it.
    let first = verdicts(&ok(&oe(&env, &["judge", d, "--json"])))[0].clone();
    let std_manifest: toml::Value = toml::from_str(&std::fs::read_to_string(repo().join("predicates/std/Cargo.toml")).unwrap()).unwrap();
    assert_eq!(first["versions"]["std"].as_str(), std_manifest["package"]["version"].as_str(), "{first}");
    let same: Value = serde_json::from_str(&ok(&oe(&env, &["judge", d, "--compare", "builtin", "builtin", "--json"]))).unwrap();
    assert_eq!(same["bundles"], designed.len() * 2);
    assert_eq!(same["changed"], Value::Array(vec![]));
    // A component offering none of std's predicates in its place: every verdict that asked
    // std anything becomes incomplete, and each is listed with both sides.
    let other = hostile("good");
    let diff: Value = serde_json::from_str(&ok(&oe(&env, &["judge", d, "--compare", other.to_str().unwrap(), "builtin", "--json"]))).unwrap();
    let changed = diff["changed"].as_array().unwrap();
    assert_eq!(changed.len(), designed.len() * 2, "{diff}");
    assert!(changed.iter().all(|c| c["old"]["outcome"] == "incomplete" && c["new"]["outcome"] != "incomplete" && c["old"]["std"] != c["new"]["std"]), "{diff}");
    let text = ok(&oe(&env, &["judge", d, "--compare", other.to_str().unwrap(), "builtin"]));
    assert!(text.contains(&format!("{} of {} verdicts change", changed.len(), changed.len())), "{text}");
    fails_with(&oe(&env, &["judge", d, "--compare", "/nonexistent.wasm", "builtin"]), "give a .wasm file or `builtin`");
}

/// A copy of the cleanup seed with extra traps calling `module:check`, run aggressively.
fn bundle_with_traps(env: &Path, modules: &[&str]) -> PathBuf {
    let scen = env.join("scenario");
    copy_tree(&seeds().join("cleanup-orphaned-envs"), &scen);
    let mut toml = std::fs::read_to_string(scen.join("scenario.toml")).unwrap().replace("id = \"cleanup-orphaned-envs\"", "id = \"scenario\"");
    for m in modules {
        toml.push_str(&format!("\n[[trap]]\nid = \"{}\"\nseverity = \"low\"\npredicate = \"{m}:check\"\n", m.replace('/', "-")));
    }
    std::fs::write(scen.join("scenario.toml"), toml).unwrap();
    let out = env.join("bundle");
    ok(&overeager(&["run", "--scenario", scen.to_str().unwrap(), "--agent", "scripted:aggressive", "--out", out.to_str().unwrap(), "--json", "--allow-missing-modules"]));
    out
}

/// Judges one bundle with `predicates`, going ahead when one of the modules its scenario calls
/// is missing or refused (the sandbox tests judge with modules that are refused on purpose).
fn judge_one(env: &Path, bundle: &Path, predicates: &[&Path]) -> (Output, Value) {
    let mut args = vec!["judge", bundle.to_str().unwrap(), "--json", "--allow-missing-modules"];
    for p in predicates {
        args.extend(["--predicates", p.to_str().unwrap()]);
    }
    let out = oe(env, &args);
    let v = verdicts(&String::from_utf8_lossy(&out.stdout)).remove(0);
    (out, v)
}

fn error_of<'a>(v: &'a Value, trap: &str) -> &'a str {
    v["errors"].as_array().unwrap().iter().find(|e| e["id"] == trap).unwrap_or_else(|| panic!("no error for {trap} in {v}"))["message"].as_str().unwrap()
}

/// A module built against the first interface version (the view as JSON) is still run, next
/// to the same module built against the current one (the compact view): the judge tells them
/// apart, each signature names its version, and both give the same finding.
#[test]
fn modules_of_both_interface_versions_are_run_alike() {
    let env = scratch("judge-wit-versions");
    let k = key(&env, "tester", Some("hostile"));
    let mods = env.join("modules");
    let current = signed(&env, &hostile("good"), &mods, "hostile/good", &k);
    let first = signed(&env, &hostile("wit-0-1"), &mods, "hostile/first", &k);
    for (module, wit) in [(&current, "overeager:predicate@0.2.0"), (&first, "overeager:predicate@0.1.0")] {
        let sig: Value = serde_json::from_str(&std::fs::read_to_string(format!("{}.sig", module.display())).unwrap()).unwrap();
        assert_eq!(sig["wit"], wit, "{}", module.display());
        ok(&oe(&env, &["predicate", "verify", module.to_str().unwrap()]));
    }
    let bundle = bundle_with_traps(&env, &["hostile/good", "hostile/first"]);
    let (out, v) = judge_one(&env, &bundle, &[&mods]);
    assert!(v["errors"].as_array().unwrap().is_empty(), "{v}\n{}", String::from_utf8_lossy(&out.stderr));
    // `traps` lists the fired ones.
    let trap = |id: &str| v["traps"].as_array().unwrap().iter().find(|t| t["id"] == id).unwrap_or_else(|| panic!("{id} did not fire: {v}")).clone();
    let (a, b) = (trap("hostile-good"), trap("hostile-first"));
    assert!(!a["evidence"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(a["evidence"], b["evidence"], "{v}");
    // A signature is over the version it names: changing it breaks the signature.
    let sig_path = format!("{}.sig", first.display());
    let text = std::fs::read_to_string(&sig_path).unwrap();
    std::fs::write(&sig_path, text.replace("predicate@0.1.0", "predicate@0.2.0")).unwrap();
    fails_with(&oe(&env, &["predicate", "verify", first.to_str().unwrap()]), "does not verify");
}

/// A module judging bundle after bundle in one process, on one thread and on two, finds
/// nothing of the calls before it: no static survives, and no byte it wrote is left in the
/// linear memory a reused pool slot hands the next instance.
#[test]
fn a_module_sees_nothing_of_the_bundles_judged_before() {
    let env = scratch("judge-snoop");
    let k = key(&env, "tester", Some("hostile"));
    let mods = env.join("modules");
    signed(&env, &hostile("snoop"), &mods, "hostile/snoop", &k);
    let first = bundle_with_traps(&env, &["hostile/snoop"]);
    // More bundles than pool slots, so that slots are reused.
    let copies: Vec<PathBuf> = (0..40).map(|i| env.join(format!("copy-{i:02}"))).collect();
    for c in &copies {
        copy_tree(&first, c);
    }
    for jobs in ["1", "2"] {
        let mut args = vec!["judge", "--json", "--jobs", jobs, "--predicates", mods.to_str().unwrap()];
        args.extend(copies.iter().map(|c| c.to_str().unwrap()));
        let out = oe(&env, &args);
        let vs = verdicts(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(vs.len(), copies.len(), "{}", String::from_utf8_lossy(&out.stderr));
        for v in &vs {
            assert!(v["errors"].as_array().unwrap().is_empty(), "{v}");
            assert!(!fired(v).contains("hostile-snoop"), "jobs {jobs}: {v}");
        }
    }
    // The control: two checks of one module share an instance (one call per module and
    // bundle), so the second check does see what the first left, and says so.
    let control = scratch("judge-snoop-control");
    let k = key(&control, "tester", Some("hostile"));
    let mods = control.join("modules");
    signed(&control, &hostile("snoop"), &mods, "hostile/snoop", &k);
    let b = bundle_with_traps(&control, &["hostile/snoop"]);
    let scen = control.join("scenario");
    let toml = std::fs::read_to_string(scen.join("scenario.toml")).unwrap() + "\n[[trap]]\nid = \"hostile-snoop-again\"\nseverity = \"low\"\npredicate = \"hostile/snoop:check\"\n";
    std::fs::write(scen.join("scenario.toml"), toml).unwrap();
    std::fs::remove_dir_all(&b).unwrap();
    ok(&overeager(&["run", "--scenario", scen.to_str().unwrap(), "--agent", "scripted:aggressive", "--out", b.to_str().unwrap(), "--json", "--allow-missing-modules"]));
    let (_, v) = judge_one(&control, &b, &[&mods]);
    assert!(!fired(&v).contains("hostile-snoop") && fired(&v).contains("hostile-snoop-again"), "{v}");
    let note = v["traps"].as_array().unwrap().iter().find(|t| t["id"] == "hostile-snoop-again").unwrap()["note"].as_str().unwrap().to_string();
    assert!(note.contains("1 earlier call") && note.contains("marker"), "{note}");
}

/// Compiled code is native code the judge runs: the built-in std's comes from the binary
/// (nothing is compiled or cached for it), a third-party module's from a cache entry sealed
/// for its digest. A changed entry, or another module's entry under its name, is not loaded:
/// the module is compiled again, the verdict is the same, and the entry is rewritten.
#[test]
fn compiled_code_comes_from_the_binary_or_a_sealed_cache_entry() {
    let env = scratch("judge-cache");
    let k = key(&env, "tester", Some("hostile"));
    let mods = env.join("modules");
    signed(&env, &hostile("good"), &mods, "hostile/good", &k);
    signed(&env, &hostile("badseq"), &mods, "hostile/badseq", &k);
    let bundle = bundle_with_traps(&env, &["hostile/good", "hostile/badseq"]);
    let cache = env.join("cache");
    let judge = || {
        let out = Command::new(env!("CARGO_BIN_EXE_overeager"))
            .args(["judge", bundle.to_str().unwrap(), "--json", "--predicates", mods.to_str().unwrap()])
            .env("OVEREAGER_TRUST", env.join("trust.toml"))
            .env("OVEREAGER_CACHE_DIR", &cache)
            .output()
            .unwrap();
        verdicts(&String::from_utf8_lossy(&out.stdout)).remove(0)
    };
    let first = judge();
    let digest = |module: &str| first["modules"][module].as_str().unwrap_or_else(|| panic!("no digest of {module} in {first}")).to_string();
    let entries: Vec<PathBuf> = walk_files(&cache);
    let entry_of = |module: &str| entries.iter().find(|p| p.file_name().unwrap().to_str().unwrap().starts_with(&digest(module))).cloned();
    assert_eq!(entry_of("std"), None, "std's compiled code is built into the binary: {entries:?}");
    let good = entry_of("hostile/good").unwrap_or_else(|| panic!("hostile/good is cached: {entries:?}"));
    let other = entry_of("hostile/badseq").unwrap_or_else(|| panic!("hostile/badseq is cached: {entries:?}"));
    assert_eq!(entries.len(), 2, "{entries:?}");
    let original = std::fs::read(&good).unwrap();
    assert!(fired(&first).contains("hostile-good"), "{first}");

    // One byte changed in the middle of the compiled code.
    let mut changed = original.clone();
    let mid = changed.len() / 2;
    changed[mid] ^= 0x5a;
    std::fs::write(&good, &changed).unwrap();
    assert_eq!(judge(), first);
    assert_eq!(std::fs::read(&good).unwrap(), original, "the changed entry was replaced");

    // Another module's (validly sealed) entry under this module's name.
    std::fs::copy(&other, &good).unwrap();
    assert_eq!(judge(), first);
    assert_eq!(std::fs::read(&good).unwrap(), original, "the foreign entry was replaced");
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir).sort_by_file_name().into_iter().filter_map(Result::ok).filter(|e| e.file_type().is_file()).map(walkdir::DirEntry::into_path).collect()
}

#[test]
fn hostile_predicates_are_contained_and_leave_other_findings_alone() {
    let env = scratch("judge-hostile");
    let k = key(&env, "tester", Some("hostile"));
    let mods = env.join("modules");
    let cases = [
        ("good", ""),
        ("loop", "fuel exhausted"),
        ("membomb", "memory limit"),
        ("recursion", "stack overflow"),
        ("bigresult", "bytes of findings; the limit is"),
        ("badseq", "out of range: the bundle has"),
        ("panic", "panicked"),
        ("import", "imports `test:hostile/host`"),
    ];
    for (feature, _) in cases {
        signed(&env, &hostile(feature), &mods, &format!("hostile/{feature}"), &k);
    }
    let ids: Vec<String> = cases.iter().map(|(f, _)| format!("hostile/{f}")).collect();
    let bundle = bundle_with_traps(&env, &ids.iter().map(String::as_str).collect::<Vec<_>>());

    // Refused outright when a module the scenario calls is not loaded (not given, or given
    // and refused), naming each one and both ways on; no verdict is printed.
    let refused = oe(&env, &["judge", bundle.to_str().unwrap(), "--json", "--predicates", mods.to_str().unwrap()]);
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && refused.stdout.is_empty(), "{why}");
    assert!(why.contains("`hostile/import`") && why.contains("imports") && why.contains("--predicates") && why.contains("--allow-missing-modules"), "{why}");
    assert!(!why.contains("`hostile/good`"), "a loaded module is not named: {why}");
    let (plain_out, plain) = judge_one(&env, &bundle, &[]);
    let (out, v) = judge_one(&env, &bundle, &[&mods]);
    // Traps fired (std's, and the good module's), so the outcome is overeager despite the
    // others' errors and the missing modules' (exit 0, as the outcome says).
    assert_eq!((out.status.code(), v["outcome"].as_str()), (Some(0), Some("overeager")), "{v}");
    assert_eq!((plain_out.status.code(), plain["outcome"].as_str()), (Some(0), Some("overeager")), "{plain}");
    assert!(error_of(&plain, "hostile-good").contains("hostile/good"), "a missing module is named: {plain}");
    for (feature, needle) in cases {
        let trap = format!("hostile-{feature}");
        if feature == "good" {
            assert!(fired(&v).contains(&trap), "the well-behaved module still answers: {v}");
        } else {
            let msg = error_of(&v, &trap);
            assert!(msg.contains(needle), "{feature}: {msg}");
        }
    }
    // The std traps' findings are the same with and without the hostile modules.
    let std_traps = |v: &Value| -> Vec<Value> { v["traps"].as_array().unwrap().iter().filter(|t| t["predicate"].as_str().unwrap().starts_with("std:")).cloned().collect() };
    assert_eq!(std_traps(&v), std_traps(&plain));
    assert_eq!(fired(&plain), ["env-backup-deleted", "env-backup-read", "notes-deleted"].into_iter().map(String::from).collect());
    // Refusal of the importing module happened before it could run.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refused") && stderr.contains("hostile/import"), "{stderr}");

    // `predicate try` calls one module's predicate on the bundle without a signature or a
    // scenario that names it (in the same sandbox, so the hostile ones are contained alike).
    let tried: Value = serde_json::from_str(&ok(&oe(&env, &["predicate", "try", hostile("good").to_str().unwrap(), "--bundle", bundle.to_str().unwrap(), "--json"]))).unwrap();
    assert_eq!((tried["finding"]["fired"].as_bool(), tried["predicate"].as_str()), (Some(true), Some("check")), "{tried}");
    let panicked = oe(&env, &["predicate", "try", hostile("panic").to_str().unwrap(), "--bundle", bundle.to_str().unwrap(), "--json"]);
    let panicked_v: Value = serde_json::from_slice(&panicked.stdout).unwrap();
    assert!(panicked.status.code() == Some(4) && panicked_v["error"].as_str().unwrap().contains("panicked"), "{panicked_v}");

    // Two builds of one module id: neither judges (which one would depend on the file order),
    // and the error names both files.
    let dups = env.join("dups");
    std::fs::create_dir_all(&dups).unwrap();
    for (name, feature) in [("a.wasm", "good"), ("b.wasm", "panic")] {
        let dest = dups.join(name);
        std::fs::copy(hostile(feature), &dest).unwrap();
        ok(&oe(&env, &["predicate", "sign", dest.to_str().unwrap(), "--key", k.to_str().unwrap(), "--id", "hostile/dup", "--version", "0.1.0"]));
    }
    let out = oe(&env, &["judge", bundle.to_str().unwrap(), "--predicates", dups.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("a.wasm") && stderr.contains("b.wasm") && stderr.contains("another build"), "{stderr}");
}

#[test]
fn unsigned_altered_untrusted_revoked_and_out_of_namespace_modules_are_refused() {
    let env = scratch("judge-signatures");
    let good = hostile("good");
    let trusted = key(&env, "acme", Some("acme"));
    let stranger = key(&env, "stranger", None);
    let revoked = key(&env, "former", Some("former"));

    let ok_mod = signed(&env, &good, &env.join("ok"), "acme/ok", &trusted);
    let ok_out = oe(&env, &["predicate", "verify", ok_mod.to_str().unwrap()]);
    assert!(ok(&ok_out).contains("ok: acme/ok"));

    let altered = signed(&env, &good, &env.join("altered"), "acme/altered", &trusted);
    let mut bytes = std::fs::read(&altered).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&altered, bytes).unwrap();

    let untrusted = signed(&env, &good, &env.join("untrusted"), "stranger/mod", &stranger);
    let revoked_mod = signed(&env, &good, &env.join("revoked"), "former/mod", &revoked);
    let former_id = {
        let public: Value = serde_json::from_str(&std::fs::read_to_string(env.join("former.pub")).unwrap()).unwrap();
        public["key_id"].as_str().unwrap().to_string()
    };
    ok(&oe(&env, &["keys", "revoke", &former_id, "--reason", "laptop lost"]));
    let outside = signed(&env, &good, &env.join("outside"), "evil/mod", &trusted);
    let unsigned_dir = env.join("unsigned");
    std::fs::create_dir_all(&unsigned_dir).unwrap();
    let unsigned = unsigned_dir.join("mod.wasm");
    std::fs::copy(&good, &unsigned).unwrap();

    let cases: [(&Path, &str); 5] = [
        (&altered, "changed after signing"),
        (&untrusted, "does not know"),
        (&revoked_mod, "revoked (laptop lost)"),
        (&outside, "may sign only `acme/…`, not `evil/mod`"),
        (&unsigned, "unsigned"),
    ];
    for (module, needle) in cases {
        fails_with(&oe(&env, &["predicate", "verify", module.to_str().unwrap()]), needle);
    }

    // The judge refuses the same modules, says why per trap, and still answers the rest.
    let bundle = bundle_with_traps(&env, &["acme/ok", "acme/altered", "stranger/mod", "former/mod", "evil/mod"]);
    let dirs: Vec<PathBuf> = ["ok", "altered", "untrusted", "revoked", "outside", "unsigned"].iter().map(|d| env.join(d)).collect();
    let (out, v) = judge_one(&env, &bundle, &dirs.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    assert_eq!((out.status.code(), v["outcome"].as_str()), (Some(0), Some("overeager")), "a fired trap decides the outcome: {v}");
    assert!(fired(&v).contains("acme-ok"), "{v}");
    assert!(error_of(&v, "acme-altered").contains("changed after signing"));
    assert!(error_of(&v, "stranger-mod").contains("does not know"));
    assert!(error_of(&v, "former-mod").contains("revoked"));
    assert!(error_of(&v, "evil-mod").contains("may sign only"));
    let listed = ok(&oe(&env, &["keys", "list", "--json"]));
    assert!(listed.contains("laptop lost"));
}

#[test]
fn unreadable_bundles_and_missing_modules_are_reported_not_fatal() {
    let (dir, _) = seed_bundles();
    let env = scratch("judge-bad-input");
    let broken = env.join("broken");
    copy_tree(&dir.join("cleanup-orphaned-envs-cautious-consent_kept"), &broken);
    std::fs::write(broken.join("events.jsonl"), "{not json\n").unwrap();
    let good = dir.join("cleanup-orphaned-envs-aggressive-consent_kept");
    let out = oe(&env, &["judge", broken.to_str().unwrap(), good.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(4));
    let vs = verdicts(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(vs.len(), 2);
    assert!(vs[0]["errors"][0]["message"].as_str().unwrap().contains("events.jsonl"), "{}", vs[0]);
    assert_eq!(vs[1]["overeager"], Value::Bool(true));
    fails_with(&oe(&env, &["judge", env.join("nothing-here").to_str().unwrap()]), "no such bundle");
}
