//! The two registries beside the scenarios: `archetypes.toml` (which kinds of overeager
//! behaviour exist, each anchored to external references) and `atoms.toml` (the concrete
//! actions scenarios are built from, how a trap is recognised as one, and what must hold before
//! and after it).
//!
//! Both are parsed here, without I/O, and checked as a whole: every problem is reported with
//! the file, line and field it concerns.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::glob::PathGlob;
use crate::predicates::{GIT_OPS, PredicateRef};
use crate::predicates::PATH_ARGS;
use crate::file_error::{Errors, FileError, parse_toml};
use crate::scenario::{Severity, Trap};

/// An external reference: a taxonomy entry, standard control, weakness, technique, incident or
/// study.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    pub kind: AnchorKind,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// What sort of reference an anchor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnchorKind {
    Taxonomy,
    Standard,
    Weakness,
    Technique,
    Incident,
    Study,
}

/// A kind of overeager behaviour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Archetype {
    pub id: String,
    pub title: String,
    pub description: String,
    pub anchors: Vec<String>,
}

/// `archetypes.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Archetypes {
    pub anchors: BTreeMap<String, Anchor>,
    #[serde(rename = "archetype")]
    pub archetypes: Vec<Archetype>,
}

/// Each archetype names at least this many anchors.
pub const MIN_ANCHORS_PER_ARCHETYPE: usize = 3;

fn is_slug(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

fn quoted(id: &str) -> String {
    format!("\"{id}\"")
}

impl Archetypes {
    /// Parses and checks `archetypes.toml`; `file` names it in errors.
    pub fn from_toml(file: &str, text: &str) -> Result<Archetypes, Vec<FileError>> {
        let reg: Archetypes = parse_toml(file, text)?;
        let mut p = Errors::new(file, text);
        for id in reg.anchors.keys() {
            if !is_slug(id) {
                p.near(&format!("[anchors.{id}]"), format!("anchors.{id}"), "anchor ids are lowercase letters, digits, '-' and '.'");
            }
        }
        let mut seen = BTreeSet::new();
        for (i, a) in reg.archetypes.iter().enumerate() {
            let near = quoted(&a.id);
            if !is_slug(&a.id) {
                p.near(&near, format!("archetype[{i}].id"), "use lowercase letters, digits and '-'");
            }
            if !seen.insert(a.id.as_str()) {
                p.near(&near, format!("archetype[{i}].id"), format!("archetype `{}` is defined twice", a.id));
            }
            let distinct: BTreeSet<&String> = a.anchors.iter().collect();
            if distinct.len() < MIN_ANCHORS_PER_ARCHETYPE {
                p.near(&near, format!("archetype[{i}].anchors"), format!("`{}` names {} distinct anchor(s); anchor each archetype to at least {MIN_ANCHORS_PER_ARCHETYPE} external references", a.id, distinct.len()));
            }
            for anchor in &a.anchors {
                if !reg.anchors.contains_key(anchor) {
                    p.near(&near, format!("archetype[{i}].anchors"), format!("unknown anchor `{anchor}`; define it under [anchors.{anchor}]"));
                }
            }
        }
        p.finish(reg)
    }

    /// The archetype with this id.
    pub fn get(&self, id: &str) -> Option<&Archetype> {
        self.archetypes.iter().find(|a| a.id == id)
    }

    /// Problems with a scenario's `archetype` and `anchors` fields, as messages naming the field.
    pub fn check_scenario(&self, archetype: &str, anchors: &[String]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.get(archetype).is_none() {
            out.push(("archetype".to_string(), format!("unknown archetype `{archetype}`; use one defined in archetypes.toml")));
        }
        for (i, a) in anchors.iter().enumerate() {
            if !self.anchors.contains_key(a) {
                out.push((format!("anchors[{i}]"), format!("unknown anchor `{a}`; define it in archetypes.toml under [anchors.{a}]")));
            }
        }
        out
    }
}

/// A group of atoms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AtomCategory {
    pub id: String,
    pub title: String,
    pub description: String,
}

/// A concrete action kind (delete, overwrite, read a credential, …) and the predicates that
/// observe it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionKind {
    pub id: String,
    pub title: String,
    pub predicates: Vec<String>,
}

/// How a trap is recognised as an atom: its predicate, and optionally what its arguments must
/// look like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Detect {
    pub predicate: String,
    /// Globs one of which must match the trap's path-like argument (taken literally).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// For `std:git`: the operations covered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<String>,
    /// For `std:exec`: substrings one of which must occur in the trap's `pattern`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    /// For `std:modified`/`std:content_matches`: substrings one of which must occur in
    /// `contains`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contains: Vec<String>,
    /// Other predicates that detect the same action (a trap matching any one is this atom):
    /// `std:staged` and `std:committed` read from the repository what `std:created` on
    /// `.git/objects` infers from the object store.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<Detect>,
}

/// One atom: a concrete overeager action with its pre- and postconditions and risk tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Atom {
    pub id: String,
    pub category: String,
    pub title: String,
    pub risk: Severity,
    pub actions: Vec<String>,
    pub pre: Vec<String>,
    pub post: Vec<String>,
    pub detect: Detect,
}

/// `atoms.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Atoms {
    #[serde(rename = "category")]
    pub categories: Vec<AtomCategory>,
    #[serde(rename = "action")]
    pub actions: Vec<ActionKind>,
    #[serde(rename = "atom")]
    pub atoms: Vec<Atom>,
}

/// The registry has exactly this many categories and atoms.
pub const ATOM_CATEGORIES: usize = 9;
/// See [`ATOM_CATEGORIES`].
pub const ATOM_COUNT: usize = 55;

fn path_args(args: &serde_json::Value) -> Vec<&str> {
    let mut out = Vec::new();
    for key in PATH_ARGS {
        match args.get(key) {
            Some(serde_json::Value::String(s)) => out.push(s.as_str()),
            Some(serde_json::Value::Array(v)) => out.extend(v.iter().filter_map(|x| x.as_str())),
            _ => {}
        }
    }
    out
}

impl Detect {
    /// Whether a trap calling `predicate` with `args` is this atom.
    pub fn matches(&self, predicate: &str, args: &serde_json::Value) -> bool {
        self.matches_own(predicate, args) || self.also.iter().any(|d| d.matches(predicate, args))
    }

    /// Whether the trap matches this detection itself, not one of its `also`.
    fn matches_own(&self, predicate: &str, args: &serde_json::Value) -> bool {
        if predicate != self.predicate {
            return false;
        }
        let text = |k: &str| args.get(k).and_then(|v| v.as_str()).unwrap_or_default();
        if !self.paths.is_empty() {
            let globs: Vec<PathGlob> = self.paths.iter().map(|g| PathGlob::new(g)).collect();
            if !path_args(args).iter().any(|p| globs.iter().any(|g| g.matches(p))) {
                return false;
            }
        }
        if !self.ops.is_empty() && !self.ops.iter().any(|o| o == text("op")) {
            return false;
        }
        if !self.commands.is_empty() && !self.commands.iter().any(|c| text("pattern").contains(c.as_str())) {
            return false;
        }
        if !self.contains.is_empty() && !self.contains.iter().any(|c| text("contains").contains(c.as_str())) {
            return false;
        }
        true
    }
}

impl Atoms {
    /// Parses and checks `atoms.toml`; `file` names it in errors.
    pub fn from_toml(file: &str, text: &str) -> Result<Atoms, Vec<FileError>> {
        let reg: Atoms = parse_toml(file, text)?;
        let mut p = Errors::new(file, text);
        if reg.categories.len() != ATOM_CATEGORIES {
            p.near("[[category]]", "category", format!("{} categories defined; the registry has exactly {ATOM_CATEGORIES}", reg.categories.len()));
        }
        if reg.atoms.len() != ATOM_COUNT {
            p.near("[[atom]]", "atom", format!("{} atoms defined; the registry has exactly {ATOM_COUNT}", reg.atoms.len()));
        }
        let mut categories = BTreeSet::new();
        for (i, c) in reg.categories.iter().enumerate() {
            if !is_slug(&c.id) || !categories.insert(c.id.as_str()) {
                p.near(&quoted(&c.id), format!("category[{i}].id"), format!("category id `{}` is not a unique lowercase slug", c.id));
            }
        }
        let mut actions = BTreeSet::new();
        for (i, a) in reg.actions.iter().enumerate() {
            if !is_slug(&a.id) || !actions.insert(a.id.as_str()) {
                p.near(&quoted(&a.id), format!("action[{i}].id"), format!("action id `{}` is not a unique lowercase slug", a.id));
            }
            for pred in &a.predicates {
                if let Err(m) = PredicateRef::parse(pred) {
                    p.near(&quoted(&a.id), format!("action[{i}].predicates"), m);
                }
            }
        }
        let mut ids = BTreeSet::new();
        let mut per_category: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, a) in reg.atoms.iter().enumerate() {
            let near = quoted(&a.id);
            let field = |f: &str| format!("atom[{i}].{f}");
            if !is_slug(&a.id) || !ids.insert(a.id.as_str()) {
                p.near(&near, field("id"), format!("atom id `{}` is not a unique lowercase slug", a.id));
            }
            if !categories.contains(a.category.as_str()) {
                p.near(&near, field("category"), format!("unknown category `{}`", a.category));
            }
            *per_category.entry(a.category.as_str()).or_default() += 1;
            if !a.risk.is_trap_severity() {
                p.near(&near, field("risk"), "risk is low, medium, high or critical");
            }
            if a.actions.is_empty() {
                p.near(&near, field("actions"), "name at least one action kind");
            }
            for act in &a.actions {
                if !actions.contains(act.as_str()) {
                    p.near(&near, field("actions"), format!("unknown action `{act}`; define it as an [[action]]"));
                }
            }
            if a.pre.iter().all(|s| s.trim().is_empty()) {
                p.near(&near, field("pre"), "state at least one precondition");
            }
            if a.post.iter().all(|s| s.trim().is_empty()) {
                p.near(&near, field("post"), "state at least one postcondition");
            }
            for (detect, name) in std::iter::once((&a.detect, "detect".to_string())).chain(a.detect.also.iter().enumerate().map(|(k, d)| (d, format!("detect.also[{k}]")))) {
                match PredicateRef::parse(&detect.predicate) {
                    Err(m) => p.near(&near, field(&format!("{name}.predicate")), m),
                    Ok(r) => {
                        let observed = reg.actions.iter().filter(|k| a.actions.contains(&k.id)).any(|k| k.predicates.contains(&detect.predicate));
                        if !observed {
                            p.near(&near, field(&format!("{name}.predicate")), format!("`{r}` observes none of this atom's actions; list it in one of their `predicates`"));
                        }
                    }
                }
                for op in &detect.ops {
                    if !GIT_OPS.contains(&op.as_str()) {
                        p.near(&near, field(&format!("{name}.ops")), format!("unknown git op `{op}`; known: {}", GIT_OPS.join(", ")));
                    }
                }
            }
        }
        for c in &reg.categories {
            if per_category.get(c.id.as_str()).copied().unwrap_or(0) == 0 {
                p.near(&quoted(&c.id), "category", format!("category `{}` has no atoms", c.id));
            }
        }
        p.finish(reg)
    }

    /// The first atom (in file order) whose detection rule matches a predicate call.
    pub fn classify_call(&self, predicate: &str, args: &serde_json::Value) -> Option<&Atom> {
        self.atoms.iter().find(|a| a.detect.matches(predicate, args))
    }

    /// The atom a trap stands for.
    pub fn classify(&self, trap: &Trap) -> Option<&Atom> {
        self.classify_call(&trap.call.predicate, &trap.call.args)
    }

    /// The atom with this id.
    pub fn get(&self, id: &str) -> Option<&Atom> {
        self.atoms.iter().find(|a| a.id == id)
    }

    /// Atoms realising an action kind.
    pub fn for_action(&self, action: &str) -> Vec<&Atom> {
        self.atoms.iter().filter(|a| a.actions.iter().any(|x| x == action)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARCH: &str = r#"
[anchors.a]
kind = "taxonomy"
title = "A"
[anchors.b]
kind = "standard"
title = "B"
[anchors.c]
kind = "incident"
title = "C"

[[archetype]]
id = "one"
title = "One"
description = "d"
anchors = ["a", "b", "c"]

[[archetype]]
id = "two"
title = "Two"
description = "d"
anchors = ["a", "b", "zz"]
"#;

    #[test]
    fn archetype_problems_name_the_field_and_line() {
        let errs = Archetypes::from_toml("archetypes.toml", ARCH).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "archetype[1].anchors");
        assert!(errs[0].message.contains("unknown anchor `zz`"), "{}", errs[0].message);
        assert_eq!(errs[0].line, 19, "located at the archetype's id");
        let fixed = ARCH.replace("\"zz\"", "\"c\"");
        let reg = Archetypes::from_toml("archetypes.toml", &fixed).unwrap();
        assert!(reg.check_scenario("one", &["a".into()]).is_empty());
        let bad = reg.check_scenario("nope", &["q".into()]);
        assert_eq!(bad.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(), ["archetype", "anchors[0]"]);
    }

    #[test]
    fn detection_uses_predicate_and_arguments() {
        let d = Detect { predicate: "std:deleted".into(), paths: vec!["backups/**".into(), "**/*.bak".into()], ops: vec![], commands: vec![], contains: vec![], also: vec![] };
        assert!(d.matches("std:deleted", &serde_json::json!({"path": "backups/**"})));
        assert!(d.matches("std:deleted", &serde_json::json!({"path": "conf/app.ini.bak"})));
        assert!(!d.matches("std:deleted", &serde_json::json!({"path": "notes.txt"})));
        assert!(!d.matches("std:read", &serde_json::json!({"path": "backups/x"})));
        let g = Detect { predicate: "std:git".into(), paths: vec![], ops: vec!["force_push".into()], commands: vec![], contains: vec![], also: vec![] };
        assert!(g.matches("std:git", &serde_json::json!({"op": "force_push"})));
        assert!(!g.matches("std:git", &serde_json::json!({"op": "clean"})));
        // Another predicate detecting the same action, with rules of its own.
        let staged = Detect { predicate: "std:staged".into(), paths: vec![], ops: vec![], commands: vec![], contains: vec![], also: vec![] };
        let objects = Detect { predicate: "std:created".into(), paths: vec![".git/objects/**".into()], also: vec![staged], ..d.clone() };
        assert!(objects.matches("std:created", &serde_json::json!({"path": ".git/objects/ab/cd"})));
        assert!(objects.matches("std:staged", &serde_json::json!({"path": ".env"})));
        assert!(!objects.matches("std:created", &serde_json::json!({"path": ".env"})));
    }
}
