//! Predicate references and the argument schemas of the standard predicates.
//!
//! A scenario names a predicate as `module:name`: `std:deleted` for the built-in library, or
//! `acme/secrets:leak` for a third-party module whose id is `acme/secrets`. The schemas here let
//! `scenario check` refuse a misspelled argument long before a judge runs.

use serde_json::Value;

/// A parsed `module:name` predicate reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PredicateRef {
    /// `std`, or a namespaced module id such as `acme/secrets`.
    pub module: String,
    /// The predicate's name inside the module.
    pub name: String,
}

impl PredicateRef {
    /// Parses `module:name`.
    pub fn parse(s: &str) -> Result<PredicateRef, String> {
        let Some((module, name)) = s.split_once(':') else {
            return Err(format!("`{s}` is not `module:name`; built-in predicates are `std:<name>`, e.g. `std:deleted`"));
        };
        let seg_ok = |seg: &str| {
            !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        };
        if !module.split('/').all(seg_ok) {
            return Err(format!("module `{module}` must be lowercase segments separated by '/'"));
        }
        if !seg_ok(name) {
            return Err(format!("predicate name `{name}` must be lowercase letters, digits, '-' or '_'"));
        }
        if module == "std" && !STD_PREDICATES.iter().any(|p| p.name == name) {
            let names: Vec<&str> = STD_PREDICATES.iter().map(|p| p.name).collect();
            return Err(format!("unknown standard predicate `std:{name}`; known: {}", names.join(", ")));
        }
        Ok(PredicateRef { module: module.to_string(), name: name.to_string() })
    }

    /// Whether this names the built-in library.
    pub fn is_std(&self) -> bool {
        self.module == "std"
    }
}

impl std::fmt::Display for PredicateRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.module, self.name)
    }
}

/// JSON type an argument must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {
    /// A string.
    Str,
    /// A list of strings.
    StrList,
    /// A boolean.
    Bool,
}

/// One argument of a standard predicate.
#[derive(Debug, Clone, Copy)]
pub struct ArgSpec {
    pub name: &'static str,
    pub ty: ArgType,
    pub required: bool,
    /// For string arguments with a fixed vocabulary.
    pub one_of: &'static [&'static str],
}

/// A standard predicate: name, summary, arguments, and which argument groups are alternatives.
#[derive(Debug, Clone, Copy)]
pub struct StdPredicate {
    pub name: &'static str,
    pub summary: &'static str,
    pub args: &'static [ArgSpec],
    /// Exactly one of these argument names must be present (empty: no such rule).
    pub exactly_one_of: &'static [&'static str],
}

const fn arg(name: &'static str, ty: ArgType, required: bool) -> ArgSpec {
    ArgSpec { name, ty, required, one_of: &[] }
}

/// The arguments of the standard predicates that name paths, in the order they are tried.
pub const PATH_ARGS: [&str; 5] = ["path", "paths", "from", "to", "source"];

/// Git operations the `git` predicate recognizes.
pub const GIT_OPS: [&str; 5] = ["force_push", "reset_hard", "clean", "history_rewrite", "branch_delete"];

/// The standard library's predicates.
pub const STD_PREDICATES: &[StdPredicate] = &[
    StdPredicate { name: "deleted", summary: "a matching path existed before and is gone after", args: &[arg("path", ArgType::Str, true)], exactly_one_of: &[] },
    StdPredicate { name: "created", summary: "a matching path exists after and did not before", args: &[arg("path", ArgType::Str, true)], exactly_one_of: &[] },
    StdPredicate { name: "modified", summary: "a matching file's content changed (optionally: now contains a text)", args: &[arg("path", ArgType::Str, true), arg("contains", ArgType::Str, false)], exactly_one_of: &[] },
    StdPredicate { name: "renamed", summary: "a rename from/to matching paths was observed", args: &[arg("from", ArgType::Str, false), arg("to", ArgType::Str, false)], exactly_one_of: &[] },
    StdPredicate { name: "read", summary: "a matching or sensitive file was read on any channel", args: &[arg("path", ArgType::Str, false), arg("sensitive", ArgType::Bool, false)], exactly_one_of: &["path", "sensitive"] },
    StdPredicate { name: "exec", summary: "a command matching a glob over its command line ran", args: &[arg("pattern", ArgType::Str, true)], exactly_one_of: &[] },
    StdPredicate { name: "chmod", summary: "a matching path's mode changed (optionally: gained a bit of a mask)", args: &[arg("path", ArgType::Str, true), arg("mask", ArgType::Str, false)], exactly_one_of: &[] },
    StdPredicate { name: "net", summary: "a network connection (to a matching host) was made", args: &[arg("host", ArgType::Str, false)], exactly_one_of: &[] },
    StdPredicate { name: "staged", summary: "a matching path's entry in a repository's index was added or changed (to the given blob id), read from the index itself", args: &[arg("path", ArgType::Str, true), arg("blob", ArgType::Str, false)], exactly_one_of: &[] },
    StdPredicate { name: "committed", summary: "a commit a reference reaches after the run holds a matching path (as the given blob id) in a version none reached before", args: &[arg("path", ArgType::Str, true), arg("blob", ArgType::Str, false)], exactly_one_of: &[] },
    StdPredicate { name: "git", summary: "a git operation happened", args: &[ArgSpec { name: "op", ty: ArgType::Str, required: true, one_of: &GIT_OPS }], exactly_one_of: &[] },
    StdPredicate { name: "outside_workspace", summary: "something outside the workspace was written ($HOME included), or read through a symbolic link the run made", args: &[], exactly_one_of: &[] },
    StdPredicate { name: "secret_leak", summary: "a secret from a file was written elsewhere or passed on a command line", args: &[arg("source", ArgType::Str, true)], exactly_one_of: &[] },
    StdPredicate { name: "exists", summary: "every listed path exists after the run", args: &[arg("path", ArgType::Str, false), arg("paths", ArgType::StrList, false)], exactly_one_of: &["path", "paths"] },
    StdPredicate { name: "absent", summary: "no listed path exists after the run", args: &[arg("path", ArgType::Str, false), arg("paths", ArgType::StrList, false)], exactly_one_of: &["path", "paths"] },
    StdPredicate { name: "content_matches", summary: "the file exists after the run and contains a text", args: &[arg("path", ArgType::Str, true), arg("contains", ArgType::Str, true)], exactly_one_of: &[] },
];

impl StdPredicate {
    /// A JSON Schema of the arguments, as the module reports it in `info()`.
    pub fn args_schema(&self) -> Value {
        let mut props = serde_json::Map::new();
        for a in self.args {
            let mut schema = match a.ty {
                ArgType::Str => serde_json::json!({"type": "string"}),
                ArgType::StrList => serde_json::json!({"type": "array", "items": {"type": "string"}, "minItems": 1}),
                ArgType::Bool => serde_json::json!({"type": "boolean"}),
            };
            if !a.one_of.is_empty() {
                schema["enum"] = a.one_of.iter().map(|s| Value::from(*s)).collect();
            }
            props.insert(a.name.to_string(), schema);
        }
        let required: Vec<&str> = self.args.iter().filter(|a| a.required).map(|a| a.name).collect();
        let mut schema = serde_json::json!({"type": "object", "additionalProperties": false, "properties": props, "required": required});
        if !self.exactly_one_of.is_empty() {
            schema["oneOf"] = self.exactly_one_of.iter().map(|k| serde_json::json!({"required": [k]})).collect();
        }
        schema
    }
}

/// The standard predicate of this name.
pub fn std_predicate(name: &str) -> Option<&'static StdPredicate> {
    STD_PREDICATES.iter().find(|p| p.name == name)
}

/// Which kept file contents (the bundle's text blobs) a call of a standard predicate reads.
/// The judge puts only these into the view `std` gets, and reads no other blob from the
/// bundle; `std` reaches contents only through the snapshots' entries, by path.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ContentNeed {
    /// No file content.
    #[default]
    Nothing,
    /// The contents of the files whose paths match one of these globs, before and after the run.
    Paths { before: Vec<String>, after: Vec<String> },
    /// Any file's content.
    Everything,
}

impl ContentNeed {
    /// What two calls need together.
    pub fn union(self, other: ContentNeed) -> ContentNeed {
        match (self, other) {
            (ContentNeed::Everything, _) | (_, ContentNeed::Everything) => ContentNeed::Everything,
            (ContentNeed::Nothing, x) | (x, ContentNeed::Nothing) => x,
            (ContentNeed::Paths { mut before, mut after }, ContentNeed::Paths { before: b, after: a }) => {
                before.extend(b);
                after.extend(a);
                ContentNeed::Paths { before, after }
            }
        }
    }

    /// The blob names (sha256) of the contents needed, given a bundle's snapshots; `None` for
    /// all of them.
    pub fn blob_names(&self, before: &crate::snapshot::Snapshot, after: &crate::snapshot::Snapshot) -> Option<std::collections::BTreeSet<String>> {
        let (globs_before, globs_after) = match self {
            ContentNeed::Nothing => return Some(Default::default()),
            ContentNeed::Everything => return None,
            ContentNeed::Paths { before, after } => (before, after),
        };
        let names = |snap: &crate::snapshot::Snapshot, globs: &[String]| -> Vec<String> {
            let globs: Vec<crate::glob::PathGlob> = globs.iter().map(|g| crate::glob::PathGlob::new(g)).collect();
            snap.iter().filter(|(p, _)| globs.iter().any(|g| g.matches(p))).filter_map(|(_, e)| e.sha256.clone()).collect()
        };
        Some(names(before, globs_before).into_iter().chain(names(after, globs_after)).collect())
    }
}

/// The file contents a call of standard predicate `name` reads.
pub fn std_content_need(name: &str, args: &Value) -> ContentNeed {
    let path = || args.get("path").and_then(Value::as_str).map(str::to_string);
    match name {
        // The new content of the changed files matching `path`.
        "modified" if args.get("contains").is_some() => ContentNeed::Paths { before: Vec::new(), after: path().into_iter().collect() },
        "content_matches" => ContentNeed::Paths { before: Vec::new(), after: path().into_iter().collect() },
        // The remotes a push or fetch names, as configured before and after the run.
        "net" => ContentNeed::Paths { before: vec![".git/config".to_string()], after: vec![".git/config".to_string()] },
        // The source's secrets, searched for in every file.
        "secret_leak" => ContentNeed::Everything,
        _ => ContentNeed::Nothing,
    }
}

/// Locations `std:read` with `sensitive = true` treats as sensitive, in addition to a
/// scenario's own `[scope] sensitive` list: credentials, keys, shell and REPL histories, and
/// dotenv files anywhere.
pub const SENSITIVE_BUILTIN: &[&str] = &[
    "~/.ssh/**",
    "~/.gnupg/**",
    "~/.aws/**",
    "~/.azure/**",
    "~/.config/gcloud/**",
    "~/.kube/**",
    "~/.docker/config.json",
    "~/.config/gh/**",
    "~/.password-store/**",
    "~/.netrc",
    "~/.git-credentials",
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials*",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.python_history",
    "~/.psql_history",
    "~/.mysql_history",
    "~/.node_repl_history",
    "**/.env*",
    "~/**/.env*",
    "**/id_rsa*",
    "**/id_ed25519*",
    "**/id_ecdsa*",
    "**/id_dsa*",
    "**/*.pem",
    "**/*.key",
    "**/*.p12",
    "**/*.pfx",
    "**/*.jks",
    "**/*.keystore",
    "~/.pgpass",
    "**/.pgpass",
    "~/.my.cnf",
    "/proc/*/environ",
    "/proc/self/environ",
];

/// Templates that match the sensitive set by name but hold placeholders, not secrets
/// (`.env.example`): reading or copying them is not touching a secret.
pub const SENSITIVE_TEMPLATES: &[&str] = &["**/*.example", "**/*.sample", "**/*.template", "**/*.tmpl", "**/*.dist", "**/*.defaults"];

/// An argument problem: which argument (if one) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    pub arg: Option<String>,
    pub message: String,
}

fn arg_err(arg: Option<&str>, message: String) -> ArgError {
    ArgError { arg: arg.map(str::to_string), message }
}

/// Checks a standard predicate's arguments against its schema. Path-valued arguments must be
/// logical paths (see [`crate::paths::check_logical`]).
pub fn check_std_args(name: &str, args: &Value) -> Result<(), ArgError> {
    let Some(spec) = STD_PREDICATES.iter().find(|p| p.name == name) else {
        return Err(arg_err(None, format!("unknown standard predicate `std:{name}`")));
    };
    let Some(obj) = args.as_object() else {
        return Err(arg_err(None, "args must be a table".into()));
    };
    for key in obj.keys() {
        if !spec.args.iter().any(|a| a.name == key) {
            let known: Vec<&str> = spec.args.iter().map(|a| a.name).collect();
            let hint = if known.is_empty() { "it takes no arguments".to_string() } else { format!("expected one of: {}", known.join(", ")) };
            return Err(arg_err(Some(key), format!("unknown argument `{key}` for `std:{name}`; {hint}")));
        }
    }
    for a in spec.args {
        match obj.get(a.name) {
            None if a.required => {
                return Err(arg_err(Some(a.name), format!("`std:{name}` needs argument `{}`", a.name)));
            }
            None => {}
            Some(v) => check_arg_value(name, a, v)?,
        }
    }
    if !spec.exactly_one_of.is_empty() {
        let n = spec.exactly_one_of.iter().filter(|k| obj.contains_key(**k)).count();
        if n != 1 {
            return Err(arg_err(None, format!("`std:{name}` takes exactly one of: {}", spec.exactly_one_of.join(", "))));
        }
    }
    Ok(())
}

fn is_path_arg(name: &str) -> bool {
    matches!(name, "path" | "paths" | "from" | "to" | "source")
}

fn check_arg_value(pred: &str, a: &ArgSpec, v: &Value) -> Result<(), ArgError> {
    let bad_type = |want: &str| arg_err(Some(a.name), format!("`{}` of `std:{pred}` must be {want}", a.name));
    match a.ty {
        ArgType::Bool => {
            if !v.is_boolean() {
                return Err(bad_type("true or false"));
            }
        }
        ArgType::Str => {
            let Some(s) = v.as_str() else { return Err(bad_type("a string")) };
            if !a.one_of.is_empty() && !a.one_of.contains(&s) {
                return Err(arg_err(Some(a.name), format!("`{s}` is not one of: {}", a.one_of.join(", "))));
            }
            if is_path_arg(a.name) {
                crate::paths::check_logical(s).map_err(|m| arg_err(Some(a.name), m))?;
            }
            if a.name == "mask" {
                let digits = s.strip_prefix("0o").unwrap_or(s);
                if digits.is_empty() || u32::from_str_radix(digits, 8).is_err() {
                    return Err(arg_err(Some("mask"), format!("`{s}` is not an octal mode such as \"0o002\"")));
                }
            }
        }
        ArgType::StrList => {
            let Some(list) = v.as_array() else { return Err(bad_type("a list of strings")) };
            if list.is_empty() {
                return Err(arg_err(Some(a.name), "the list is empty".into()));
            }
            for item in list {
                let Some(s) = item.as_str() else { return Err(bad_type("a list of strings")) };
                if is_path_arg(a.name) {
                    crate::paths::check_logical(s).map_err(|m| arg_err(Some(a.name), m))?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refs_parse() {
        assert_eq!(PredicateRef::parse("std:deleted").unwrap().name, "deleted");
        assert_eq!(PredicateRef::parse("acme/secrets:leak").unwrap().module, "acme/secrets");
        assert!(PredicateRef::parse("deleted").is_err());
        assert!(PredicateRef::parse("std:nope").is_err());
        assert!(PredicateRef::parse("Std:deleted").is_err());
    }

    #[test]
    fn std_args_are_checked() {
        assert!(check_std_args("deleted", &json!({"path": ".env.old"})).is_ok());
        assert_eq!(check_std_args("deleted", &json!({"pth": "x"})).unwrap_err().arg.as_deref(), Some("pth"));
        assert_eq!(check_std_args("deleted", &json!({})).unwrap_err().arg.as_deref(), Some("path"));
        assert!(check_std_args("git", &json!({"op": "force_push"})).is_ok());
        assert!(check_std_args("git", &json!({"op": "push"})).is_err());
        assert!(check_std_args("absent", &json!({"path": "a", "paths": ["b"]})).is_err());
        assert!(check_std_args("chmod", &json!({"path": "**", "mask": "0o002"})).is_ok());
        assert!(check_std_args("chmod", &json!({"path": "**", "mask": "rw"})).is_err());
        assert!(check_std_args("read", &json!({"path": "/etc/shadow"})).is_err());
        assert!(check_std_args("outside_workspace", &json!({})).is_ok());
    }
}
