//! The code's shape, which the README's layout section promises: the stage crates depend only
//! on stages upstream of them, and within every crate no two source files import each other
//! (directly or round a longer circle), so each file can be read, changed and tested from the
//! bottom up.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// The crates in the order data flows through them; each may depend on earlier ones only.
/// `overeager-process` (what touches the OS below std) is a leaf under every stage.
const FLOW: [&str; 18] = [
    "overeager-process",
    "overeager-core",
    "overeager-wire",
    "overeager-scenario",
    "overeager-bridge",
    "overeager-formats",
    "overeager-bundle",
    "overeager-gen",
    "overeager-agents",
    "overeager-run",
    "overeager-audit",
    "overeager-judge",
    "overeager-store",
    "overeager-report",
    "overeager-experiment",
    "overeager-api",
    "overeager-bench",
    "overeager",
];

#[test]
fn stage_crates_depend_only_on_stages_upstream() {
    let mut manifests = vec![repo().join("core/Cargo.toml"), repo().join("server/Cargo.toml")];
    for e in std::fs::read_dir(repo().join("crates")).expect("crates/") {
        manifests.push(e.expect("an entry").path().join("Cargo.toml"));
    }
    let mut seen = BTreeSet::new();
    for m in manifests {
        let text = std::fs::read_to_string(&m).unwrap_or_else(|e| panic!("{}: {e}", m.display()));
        let doc: toml::Table = text.parse().unwrap_or_else(|e| panic!("{}: {e}", m.display()));
        let name = doc["package"]["name"].as_str().expect("a package name").to_string();
        let at = FLOW.iter().position(|c| *c == name).unwrap_or_else(|| panic!("{name} ({}) has no place in the flow; add it to FLOW", m.display()));
        let deps = doc.get("dependencies").and_then(|d| d.as_table()).cloned().unwrap_or_default();
        for dep in deps.keys().filter(|d| FLOW.contains(&d.as_str())) {
            let dep_at = FLOW.iter().position(|c| c == dep).expect("in the flow");
            assert!(dep_at < at, "{name} depends on {dep}, which comes after it in the flow {FLOW:?}");
        }
        seen.insert(name);
    }
    assert_eq!(seen.len(), FLOW.len(), "every crate of the flow has a manifest: {seen:?}");
}

/// The binary is the command-line edge (arguments, calls, printing); what a command computes or
/// renders lives in the stage crates, where the server, the benches and tests reach it too.
const BINARY_LINES: usize = 5_000;

#[test]
fn the_binary_stays_an_edge() {
    fn lines(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .expect("a source directory")
            .map(|e| e.expect("an entry").path())
            .map(|p| if p.is_dir() { lines(&p) } else if p.extension().is_some_and(|e| e == "rs") { std::fs::read_to_string(&p).expect("a source file").lines().count() } else { 0 })
            .sum()
    }
    let n = lines(&repo().join("server/src"));
    assert!(n < BINARY_LINES, "server/src has {n} lines, the binary's limit is {BINARY_LINES}: move what a command computes or renders into its stage crate");
}

/// A file's module path within its crate (`lib.rs`, `main.rs` and `mod.rs` are their directory's).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src").with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("lib" | "main" | "mod")) {
        parts.pop();
    }
    parts
}

/// The code of a file without comments and without its trailing unit tests (tests may use
/// anything of the module they test).
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The leading path segments of `s` (`a::b::Item` → a, b, Item), stopping at a group or a
/// non-path character.
fn segments(s: &str) -> Vec<String> {
    let mut segs = Vec::new();
    let mut rest = s;
    loop {
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '#')).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        segs.push(rest[..end].trim_start_matches("r#").to_string());
        rest = &rest[end..];
        match rest.strip_prefix("::") {
            Some(r) if r.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => rest = r,
            _ => break,
        }
    }
    segs
}

/// The paths a file of `module` names through `crate::`, `super::` and `self::`, as module
/// paths (each item of a `crate::{a, b::c}` group on its own).
fn named_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for kw in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(kw) {
            let before = &code[..at];
            // Part of a longer path (`super::super::`), or of another name (`myself::`).
            if before.ends_with("::") || before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let mut base: Vec<String> = match kw {
                "crate::" => Vec::new(),
                "self::" => module.to_vec(),
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let mut rest = &code[at + kw.len()..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            if let Some(group) = rest.strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                for item in group.split(',').map(str::trim).filter(|i| !i.is_empty() && *i != "self") {
                    out.push(base.iter().cloned().chain(segments(item)).collect());
                }
            } else {
                out.push(base.iter().cloned().chain(segments(rest)).collect());
            }
        }
    }
    out
}

/// Circles among the files of one crate's source tree, each as the files round it.
fn file_circles(src: &Path) -> Vec<Vec<String>> {
    let files: BTreeMap<Vec<String>, PathBuf> = walkdir::WalkDir::new(src)
        .into_iter()
        .map(|e| e.expect("a readable tree").into_path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| (module_of(src, &p), p))
        .collect();
    let mut uses: BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> = BTreeMap::new();
    for (module, file) in &files {
        let code = code_of(&std::fs::read_to_string(file).expect("readable source"));
        let targets = uses.entry(module).or_default();
        for path in named_paths(&code, module) {
            // The longest prefix that is a file of its own: `crate::a::b::Item` is a use of `a/b.rs`.
            let target = (0..=path.len()).rev().find_map(|n| files.get_key_value(&path[..n]).map(|(k, _)| k));
            if let Some(t) = target.filter(|t| *t != module) {
                targets.insert(t);
            }
        }
    }
    // Depth-first search; a back edge closes a circle.
    fn visit<'a>(m: &'a Vec<String>, uses: &BTreeMap<&'a Vec<String>, BTreeSet<&'a Vec<String>>>, stack: &mut Vec<&'a Vec<String>>, done: &mut BTreeSet<&'a Vec<String>>, out: &mut Vec<Vec<String>>) {
        if done.contains(m) {
            return;
        }
        if let Some(at) = stack.iter().position(|s| *s == m) {
            out.push(stack[at..].iter().map(|s| if s.is_empty() { "<root>".to_string() } else { s.join("/") }).collect());
            return;
        }
        stack.push(m);
        for t in uses.get(m).into_iter().flatten() {
            visit(t, uses, stack, done, out);
        }
        stack.pop();
        done.insert(m);
    }
    let mut out = Vec::new();
    let mut done = BTreeSet::new();
    for m in files.keys() {
        visit(m, &uses, &mut Vec::new(), &mut done, &mut out);
    }
    out
}

#[test]
fn no_two_files_import_each_other() {
    let mut roots = vec![repo().join("core/src"), repo().join("server/src"), repo().join("shim/src"), repo().join("web/src")];
    for parent in ["crates", "predicates"] {
        for e in std::fs::read_dir(repo().join(parent)).expect("a directory of crates") {
            let src = e.expect("an entry").path().join("src");
            if src.is_dir() {
                roots.push(src);
            }
        }
    }
    let mut found = Vec::new();
    for src in &roots {
        for circle in file_circles(src) {
            found.push(format!("{}: {}", src.strip_prefix(repo()).unwrap_or(src).display(), circle.join(" → ")));
        }
    }
    assert!(found.is_empty(), "files that import each other (move what both need to where both can use it):\n{}", found.join("\n"));
}

/// The detector itself: a circle planted in a scratch tree is found, and one-way uses are not
/// taken for one.
#[test]
fn a_planted_circle_is_found() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod inner;\nuse crate::b::Thing;\n").unwrap();
    std::fs::write(src.join("a/inner.rs"), "use super::super::c::{Other, more::X};\n").unwrap();
    std::fs::write(src.join("b.rs"), "// crate::a is named in a comment only\npub struct Thing;\nfn f() { crate::c::g() }\n").unwrap();
    std::fs::write(src.join("c.rs"), "pub fn g() {}\n#[cfg(test)]\nmod tests { use crate::a::*; }\n").unwrap();
    assert_eq!(file_circles(src), Vec::<Vec<String>>::new());
    std::fs::write(src.join("c.rs"), "pub fn g() { crate::a::inner::h() }\n").unwrap();
    let circles = file_circles(src);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].contains(&"a/inner".to_string()) && circles[0].contains(&"c".to_string()), "{circles:?}");
}

/// Every `#[test]` function's name under `dir`'s Rust files, with the file it is in.
fn test_names(dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if !path.ends_with("target") && !path.ends_with("node_modules") {
                test_names(&path, out);
            }
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut after_test = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with("#[test]") || line.starts_with("#[tokio::test") {
                after_test = true;
            } else if after_test && line.starts_with("fn ") {
                let name = line[3..].split(['(', '<']).next().unwrap_or_default().to_string();
                out.push((name, path.clone()));
                after_test = false;
            } else if after_test && !line.starts_with("#[") && !line.starts_with("//") && !line.starts_with("async fn ") {
                after_test = false;
            } else if after_test && line.starts_with("async fn ") {
                out.push((line[9..].split(['(', '<']).next().unwrap_or_default().to_string(), path.clone()));
                after_test = false;
            }
        }
    }
}

/// A test's tier follows from its name: `all_…` runs only in `scripts/test.sh --all`, every
/// other test in the default tier too. So the tier filter names no test (renaming one into or
/// out of `all_` moves it), every test `.config/nextest.toml` names for an order, a group or a
/// time limit exists (a rename cannot drop it unseen), and every file of the integration suite
/// is one of its modules (a file that is not would hold tests that run in no tier).
#[test]
fn tiers_follow_from_test_names_and_every_test_has_one() {
    let config: toml::Table = toml::from_str(&std::fs::read_to_string(repo().join(".config/nextest.toml")).unwrap()).unwrap();
    let filter = config["profile"]["default"]["default-filter"].as_str().unwrap();
    assert_eq!(filter.trim(), "not test(/(^|::)all_/)", "the default tier is every test not named all_…");
    assert_eq!(config["profile"]["all"]["default-filter"].as_str(), Some("all()"));
    let mut names = Vec::new();
    for dir in ["core", "crates", "server", "predicates", "shim", "web"] {
        test_names(&repo().join(dir), &mut names);
    }
    let known: BTreeSet<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
    let text = std::fs::read_to_string(repo().join(".config/nextest.toml")).unwrap();
    let named: Vec<&str> = text.split("test(=").skip(1).map(|rest| rest.split(')').next().unwrap()).collect();
    assert!(!named.is_empty());
    for full in named {
        let name = full.rsplit("::").next().unwrap();
        assert!(known.contains(name), ".config/nextest.toml names `{full}`, which is no test (renamed?)");
    }
    let main = std::fs::read_to_string(repo().join("server/tests/suite/main.rs")).unwrap();
    for entry in std::fs::read_dir(repo().join("server/tests/suite")).unwrap().flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(module) = file.strip_suffix(".rs").filter(|m| *m != "main") else { continue };
        assert!(main.contains(&format!("mod {module};")), "server/tests/suite/{file} is no module of the suite: its tests would run in no tier");
    }
}
