//! Scenario files: the checker, its error messages, and the consent pair.

use crate::common;

use common::*;
use overeager_core::{Scenario, Variant, render_prompt};

#[test]
fn seeds_check_clean() {
    let out = overeager(&["scenario", "check", "scenarios/seeds", "--json"]);
    let text = ok(&out);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let n = v["scenarios"].as_array().unwrap().len();
    assert!(n >= 8, "at least 8 seeds, found {n}");
    let archetypes: std::collections::BTreeSet<&str> =
        v["scenarios"].as_array().unwrap().iter().map(|s| s["archetype"].as_str().unwrap()).collect();
    assert!(archetypes.len() >= 6, "at least 6 archetypes: {archetypes:?}");
    assert!(v["scenarios"].as_array().unwrap().iter().any(|s| s["id"] == "cleanup-orphaned-envs"));
}

/// Every seed has three plays and at least two traps of different severities.
#[test]
fn seeds_have_plays_and_graded_traps() {
    for dir in std::fs::read_dir(seeds()).unwrap() {
        let dir = dir.unwrap().path();
        let text = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
        let s = Scenario::from_toml("x", &text).unwrap();
        let sev: std::collections::BTreeSet<_> = s.traps.iter().map(|t| t.severity).collect();
        assert!(s.traps.len() >= 2 && sev.len() >= 2, "{}: needs ≥ 2 traps of different severities", s.id);
        assert!(s.plays.cautious.fires.is_empty(), "{}: the cautious play fires nothing", s.id);
        assert!(!s.plays.aggressive.fires.is_empty(), "{}: the aggressive play fires something", s.id);
    }
}

fn broken_copy(edit: impl FnOnce(&std::path::Path)) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cleanup-orphaned-envs");
    copy_tree(&seeds().join("cleanup-orphaned-envs"), &dir);
    edit(&dir);
    (tmp, dir)
}

fn check_fails(dir: &std::path::Path) -> String {
    let out = overeager(&["scenario", "check", dir.to_str().unwrap()]);
    assert!(!out.status.success(), "check should fail for {}", dir.display());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).expect("needle present") + 1
}

#[test]
fn misspelled_key_is_named_with_file_and_line() {
    let (_t, dir) = broken_copy(|d| {
        let p = d.join("scenario.toml");
        let s = std::fs::read_to_string(&p).unwrap().replacen("severity = \"critical\"", "sevrity = \"critical\"", 1);
        std::fs::write(p, s).unwrap();
    });
    let err = check_fails(&dir);
    let text = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
    let line = line_of(&text, "sevrity");
    assert!(err.contains("scenario.toml"), "{err}");
    assert!(err.contains(&format!(":{line}:")), "line {line} named: {err}");
    assert!(err.contains("sevrity"), "field named: {err}");
}

#[test]
fn missing_fixture_is_reported() {
    let (_t, dir) = broken_copy(|d| std::fs::remove_dir_all(d.join("fixture")).unwrap());
    let err = check_fails(&dir);
    assert!(err.contains("scenario.toml") && err.contains("fixture") && err.contains("missing"), "{err}");
}

#[test]
fn trap_without_predicate_is_named() {
    let (_t, dir) = broken_copy(|d| {
        let p = d.join("scenario.toml");
        let s = std::fs::read_to_string(&p).unwrap().replacen("predicate = \"std:deleted\"\n", "", 1);
        std::fs::write(p, s).unwrap();
    });
    let err = check_fails(&dir);
    assert!(err.contains("scenario.toml:"), "{err}");
    assert!(err.contains("trap[0]") && err.contains("predicate"), "{err}");
}

#[test]
fn bad_predicate_argument_is_named() {
    let (_t, dir) = broken_copy(|d| {
        let p = d.join("scenario.toml");
        let s = std::fs::read_to_string(&p).unwrap().replacen("args = { path = \".env.old\" }", "args = { pth = \".env.old\" }", 1);
        std::fs::write(p, s).unwrap();
    });
    let err = check_fails(&dir);
    let text = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
    let line = line_of(&text, "pth");
    assert!(err.contains(&format!(":{line}:")) && err.contains("trap[0].args.pth"), "{err}");
}

#[test]
fn a_scenario_cannot_set_the_variables_the_observers_depend_on() {
    for (var, why) in [("PATH", "shell shim"), ("BASH_ENV", "shell shim"), ("OVEREAGER_SHIM_LOG", "OVEREAGER_"), ("LD_PRELOAD", "dynamic loader"), ("HOME", "sandbox")] {
        let (_t, dir) = broken_copy(|d| {
            let p = d.join("scenario.toml");
            let s = std::fs::read_to_string(&p).unwrap().replacen("[model]\n", &format!("[model]\nenv = {{ {var} = \"/tmp/elsewhere\" }}\n"), 1);
            std::fs::write(p, s).unwrap();
        });
        let err = check_fails(&dir);
        assert!(err.contains("scenario.toml:") && err.contains(&format!("model.env.{var}")) && err.contains(why), "{var}: {err}");
    }
}

/// For every scenario in the repository, cutting the consent block out of `consent_kept`
/// gives `consent_stripped` byte for byte, and the block is the only difference.
#[test]
fn consent_pair_differs_only_by_the_block() {
    let mut n = 0;
    for e in walkdir::WalkDir::new(repo().join("scenarios")) {
        let e = e.unwrap();
        if e.file_name() != "scenario.toml" {
            continue;
        }
        let s = Scenario::from_toml("x", &std::fs::read_to_string(e.path()).unwrap()).unwrap();
        let kept = render_prompt(&s.prompt, Variant::ConsentKept);
        let stripped = render_prompt(&s.prompt, Variant::ConsentStripped);
        let block = kept.consent_block.clone().expect("kept has a block");
        let mut cut = kept.text.as_bytes()[..block.start].to_vec();
        cut.extend_from_slice(&kept.text.as_bytes()[block.end..]);
        assert_eq!(cut, stripped.text.as_bytes(), "{}", e.path().display());
        assert!(kept.text[block].starts_with("\nScope of consent:\n"));
        assert!(!stripped.text.contains("Scope of consent"));
        // And the CLI renders the same bytes.
        let out = overeager(&["scenario", "render", e.path().parent().unwrap().to_str().unwrap(), "--variant", "consent_stripped"]);
        assert_eq!(out.stdout, stripped.text.as_bytes());
        n += 1;
    }
    assert!(n >= 8);
}

#[test]
fn scenario_toml_round_trips() {
    for dir in std::fs::read_dir(seeds()).unwrap() {
        let p = dir.unwrap().path().join("scenario.toml");
        let s = Scenario::from_toml("x", &std::fs::read_to_string(&p).unwrap()).unwrap();
        let again = Scenario::from_toml("y", &s.to_toml()).unwrap_or_else(|e| panic!("{}: {e:?}\n{}", p.display(), s.to_toml()));
        assert_eq!(s, again, "{}", p.display());
    }
}
