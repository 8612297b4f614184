//! The reader table against `corpus.toml`: command lines with what their programs' manuals say
//! they touch. Every disagreement is listed at once.

use overeager_predicate_sdk::reader::{Tree, line_effects};
use serde::Deserialize;

#[derive(Deserialize)]
struct Corpus {
    program: Vec<Group>,
}

#[derive(Deserialize)]
struct Group {
    name: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    line: String,
    #[serde(default)]
    reads: Vec<String>,
    #[serde(default)]
    trees: Vec<TreeSpec>,
    #[serde(default)]
    trees_visible: Vec<TreeSpec>,
    #[serde(default)]
    writes: Vec<String>,
    #[serde(default)]
    deletes: Vec<String>,
    execs: Vec<String>,
    #[serde(default)]
    hosts: Vec<String>,
    #[serde(default)]
    sends: Vec<String>,
}

/// A tree as the corpus states it: a directory alone (every file below it), or with the name
/// filters and depth its options give.
#[derive(Deserialize)]
#[serde(untagged)]
enum TreeSpec {
    Dir(String),
    Filtered {
        dir: String,
        #[serde(default)]
        only: Vec<String>,
        #[serde(default)]
        skip: Vec<String>,
        depth: Option<usize>,
    },
}

/// (directory, hidden files read, only, skip, depth), filters sorted.
type TreeKey = (String, bool, Vec<String>, Vec<String>, Option<usize>);

impl TreeSpec {
    fn key(&self, hidden: bool) -> TreeKey {
        match self {
            TreeSpec::Dir(d) => (d.clone(), hidden, Vec::new(), Vec::new(), None),
            TreeSpec::Filtered { dir, only, skip, depth } => (dir.clone(), hidden, sorted(only.clone()), sorted(skip.clone()), *depth),
        }
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

#[test]
fn every_corpus_line_yields_what_its_manual_says() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus.toml")).unwrap();
    let corpus: Corpus = toml::from_str(&text).unwrap();
    let mut failures = Vec::new();
    let mut lines = 0;
    let mut programs = std::collections::BTreeSet::new();
    for group in &corpus.program {
        for case in &group.cases {
            lines += 1;
            programs.extend(case.execs.iter().cloned());
            let got = line_effects(&case.line);
            let mut trees: Vec<TreeKey> = case.trees.iter().map(|t| t.key(true)).collect();
            trees.extend(case.trees_visible.iter().map(|t| t.key(false)));
            trees.sort();
            let mut got_trees: Vec<TreeKey> = got.trees.iter().map(|t: &Tree| (t.dir.clone(), t.hidden, sorted(t.only.clone()), sorted(t.skip.clone()), t.depth)).collect();
            got_trees.sort();
            let checks: [(&str, String, String); 8] = [
                ("reads", format!("{:?}", sorted(case.reads.clone())), format!("{:?}", got.reads)),
                ("trees", format!("{trees:?}"), format!("{got_trees:?}")),
                ("writes", format!("{:?}", sorted(case.writes.clone())), format!("{:?}", got.writes)),
                ("deletes", format!("{:?}", sorted(case.deletes.clone())), format!("{:?}", got.deletes)),
                ("execs", format!("{:?}", case.execs), format!("{:?}", got.execs)),
                ("hosts", format!("{:?}", sorted(case.hosts.clone())), format!("{:?}", got.hosts)),
                ("sends", format!("{:?}", sorted(case.sends.clone())), format!("{:?}", got.sends)),
                ("", String::new(), String::new()),
            ];
            for (field, want, have) in checks.iter().filter(|c| !c.0.is_empty()) {
                if want != have {
                    failures.push(format!("[{}] {:?}: {field} should be {want}, is {have}", group.name, case.line));
                }
            }
        }
    }
    assert!(lines >= 300, "the corpus has {lines} lines; it must keep at least 300");
    assert!(programs.len() >= 40, "the corpus covers {} programs; it must keep at least 40", programs.len());
    assert!(failures.is_empty(), "{} of {lines} lines disagree:\n{}", failures.len(), failures.join("\n"));
}
