//! Write overeager trap predicates as plain Rust functions and export them as a WebAssembly
//! component implementing `overeager:predicate@0.2.0` (see `predicates/wit/predicate.wit`), or,
//! with the `wit-0-1` feature, the earlier `overeager:predicate@0.1.0`
//! (`predicates/wit/v0.1/predicate.wit`), whose `evaluate` receives the bundle view as JSON.
//!
//! ```ignore
//! use overeager_predicate_sdk::{Args, Bundle, Finding, export_predicates};
//!
//! fn touched(bundle: &Bundle, args: &Args) -> Result<Finding, String> {
//!     let glob = args.glob("path")?;
//!     let seqs: Vec<u64> = bundle.events().iter().filter(|e| e.paths.iter().any(|p| glob.matches(p))).map(|e| e.seq).collect();
//!     Ok(Finding::from_evidence(seqs))
//! }
//!
//! export_predicates! {
//!     "touched" => touched {
//!         summary: "an event named a matching path",
//!         args: r#"{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}"#,
//!     },
//! }
//! ```
//!
//! Build with `overeager predicate build` (a `wasm32-unknown-unknown` build encoded as a
//! component). The same functions run natively in `cargo test`, over bundles made with
//! [`testing::BundleBuilder`].

extern crate self as overeager_predicate_sdk;

pub mod bundle;
pub mod reader;
pub mod shell;
pub mod testing;

pub use bundle::{Bundle, Command};
pub use overeager_core as core;
pub use overeager_core::Finding;
pub use overeager_core::glob::PathGlob;
use serde_json::Value;

#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;

/// The component interface, generated from `predicates/wit`. Only one version is generated
/// per build: both describe exports of the same names.
#[cfg(not(feature = "wit-0-1"))]
#[doc(hidden)]
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "predicate",
        pub_export_macro: true,
        export_macro_name: "__export_world",
        default_bindings_module: "overeager_predicate_sdk::bindings",
        runtime_path: "overeager_predicate_sdk::__wit_bindgen::rt",
    });
}

/// The 0.1 component interface, generated from `predicates/wit/v0.1`.
#[cfg(feature = "wit-0-1")]
#[doc(hidden)]
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit/v0.1",
        world: "predicate",
        pub_export_macro: true,
        export_macro_name: "__export_world",
        default_bindings_module: "overeager_predicate_sdk::bindings",
        runtime_path: "overeager_predicate_sdk::__wit_bindgen::rt",
    });
}

/// The WIT package version this SDK build implements.
#[cfg(not(feature = "wit-0-1"))]
pub const WIT_VERSION: &str = "overeager:predicate@0.2.0";
/// The WIT package version this SDK build implements.
#[cfg(feature = "wit-0-1")]
pub const WIT_VERSION: &str = "overeager:predicate@0.1.0";

/// A predicate function: the bundle and its arguments in, a finding (or why not) out.
pub type PredicateFn = fn(&Bundle, &Args) -> Result<Finding, String>;

/// One exported predicate.
#[derive(Clone, Copy)]
pub struct Predicate {
    pub name: &'static str,
    /// One line saying when it fires (computed when `info()` is called).
    pub summary: fn() -> String,
    /// JSON Schema of the arguments (computed when `info()` is called).
    pub args_schema: fn() -> String,
    pub eval: PredicateFn,
}

/// A check's arguments, with typed accessors whose errors name the argument.
#[derive(Debug, Clone)]
pub struct Args {
    predicate: String,
    value: Value,
}

impl Args {
    /// Wraps a JSON object.
    pub fn new(predicate: &str, value: Value) -> Args {
        Args { predicate: predicate.to_string(), value }
    }

    /// The raw JSON.
    pub fn json(&self) -> &Value {
        &self.value
    }

    fn missing(&self, name: &str) -> String {
        format!("`{}` needs argument `{name}`", self.predicate)
    }

    /// An optional string argument.
    pub fn opt_str(&self, name: &str) -> Result<Option<&str>, String> {
        match self.value.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("argument `{name}` of `{}` must be a string", self.predicate)),
        }
    }

    /// A required string argument.
    pub fn str(&self, name: &str) -> Result<&str, String> {
        self.opt_str(name)?.ok_or_else(|| self.missing(name))
    }

    /// An optional boolean argument.
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, String> {
        match self.value.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(format!("argument `{name}` of `{}` must be true or false", self.predicate)),
        }
    }

    /// A string or a list of strings, as a list (empty when absent).
    pub fn str_list(&self, name: &str) -> Result<Vec<&str>, String> {
        match self.value.get(name) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::String(s)) => Ok(vec![s.as_str()]),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().ok_or_else(|| format!("argument `{name}` of `{}` must be a list of strings", self.predicate)))
                .collect(),
            Some(_) => Err(format!("argument `{name}` of `{}` must be a string or a list of strings", self.predicate)),
        }
    }

    /// A required path-glob argument.
    pub fn glob(&self, name: &str) -> Result<PathGlob, String> {
        Ok(PathGlob::new(self.str(name)?))
    }

    /// An optional path-glob argument.
    pub fn opt_glob(&self, name: &str) -> Result<Option<PathGlob>, String> {
        Ok(self.opt_str(name)?.map(PathGlob::new))
    }
}

/// Helpers to build findings.
pub trait FindingExt {
    /// Fired iff `evidence` is not empty.
    fn from_evidence(evidence: Vec<u64>) -> Finding;
    /// Fired, with this evidence.
    fn fired(evidence: Vec<u64>) -> Finding;
    /// Not fired.
    fn quiet() -> Finding;
    /// With a note.
    fn with_note(self, note: impl Into<String>) -> Finding;
}

impl FindingExt for Finding {
    fn from_evidence(evidence: Vec<u64>) -> Finding {
        Finding { fired: !evidence.is_empty(), evidence: normalized(evidence), note: None }
    }
    fn fired(evidence: Vec<u64>) -> Finding {
        Finding { fired: true, evidence: normalized(evidence), note: None }
    }
    fn quiet() -> Finding {
        Finding { fired: false, evidence: Vec::new(), note: None }
    }
    fn with_note(mut self, note: impl Into<String>) -> Finding {
        self.note = Some(note.into());
        self
    }
}

fn normalized(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v.dedup();
    v
}

/// Evaluates checks against a bundle view in JSON: the module's side of 0.1's `evaluate`. The
/// bundle is parsed once; each check gets its own result, in order.
pub fn evaluate(predicates: &[Predicate], bundle_json: &str, checks: &[(String, String)]) -> Vec<Result<Finding, String>> {
    evaluate_parsed(predicates, Bundle::parse(bundle_json), checks, false)
}

/// Evaluates checks against a compact bundle view: the module's side of 0.2's `evaluate`.
pub fn evaluate_compact(predicates: &[Predicate], view: &[u8], checks: &[(String, String)]) -> Vec<Result<Finding, String>> {
    evaluate_parsed(predicates, Bundle::parse_compact(view), checks, false)
}

/// `instance_ends`: the call is a component export, after which the judge resets the
/// instance, so the bundle is left unfreed (freeing it piece by piece would be wasted work).
fn evaluate_parsed(predicates: &[Predicate], bundle: Result<Bundle, String>, checks: &[(String, String)], instance_ends: bool) -> Vec<Result<Finding, String>> {
    match bundle {
        Ok(bundle) => {
            let results = checks.iter().map(|(name, args)| evaluate_one(predicates, &bundle, name, args)).collect();
            if instance_ends {
                std::mem::forget(bundle);
            }
            results
        }
        Err(e) => checks.iter().map(|_| Err(e.clone())).collect(),
    }
}

/// Evaluates one check against a parsed bundle.
pub fn evaluate_one(predicates: &[Predicate], bundle: &Bundle, name: &str, args: &str) -> Result<Finding, String> {
    let Some(p) = predicates.iter().find(|p| p.name == name) else {
        let names: Vec<&str> = predicates.iter().map(|p| p.name).collect();
        return Err(format!("this module has no predicate `{name}`; it offers: {}", names.join(", ")));
    };
    let value: Value = serde_json::from_str(args).map_err(|e| format!("arguments of `{name}` are not JSON: {e}"))?;
    if !value.is_object() {
        return Err(format!("arguments of `{name}` must be a JSON object"));
    }
    let mut f = (p.eval)(bundle, &Args::new(name, value))?;
    f.evidence = normalized(f.evidence);
    Ok(f)
}

#[doc(hidden)]
pub fn __info(predicates: &[Predicate]) -> Vec<bindings::PredicateInfo> {
    predicates.iter().map(|p| bindings::PredicateInfo { name: p.name.into(), summary: (p.summary)(), args_schema: (p.args_schema)() }).collect()
}

/// The bundle as the interface version of this build passes it.
#[cfg(not(feature = "wit-0-1"))]
#[doc(hidden)]
pub type __View = Vec<u8>;
/// The bundle as the interface version of this build passes it.
#[cfg(feature = "wit-0-1")]
#[doc(hidden)]
pub type __View = String;

#[doc(hidden)]
pub fn __evaluate(predicates: &[Predicate], view: __View, checks: Vec<bindings::Check>) -> Vec<Result<bindings::Finding, String>> {
    let checks: Vec<(String, String)> = checks.into_iter().map(|c| (c.name, c.args)).collect();
    #[cfg(not(feature = "wit-0-1"))]
    let bundle = Bundle::parse_compact(&view);
    #[cfg(feature = "wit-0-1")]
    let bundle = Bundle::parse(&view);
    let results = evaluate_parsed(predicates, bundle, &checks, true);
    results.into_iter().map(|r| r.map(|f| bindings::Finding { fired: f.fired, evidence: f.evidence, note: f.note })).collect()
}

/// Exports predicate functions as the module's `info` and `evaluate`, and defines
/// `PREDICATES`, the same list for native tests.
///
/// Each entry is `"name" => function { summary: "...", args: "<JSON Schema>" }`; `summary`
/// and `args` may be any expression convertible into a `String`.
#[macro_export]
macro_rules! export_predicates {
    ($($name:literal => $func:path { summary: $summary:expr, args: $schema:expr $(,)? }),+ $(,)?) => {
        /// The predicates this module exports.
        pub const PREDICATES: &[$crate::Predicate] = &[
            $($crate::Predicate {
                name: $name,
                summary: || ::std::string::String::from($summary),
                args_schema: || ::std::string::String::from($schema),
                eval: $func,
            }),+
        ];

        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        mod __overeager_predicate_export {
            struct Module;
            impl $crate::bindings::Guest for Module {
                fn info() -> ::std::vec::Vec<$crate::bindings::PredicateInfo> {
                    $crate::__info(super::PREDICATES)
                }
                fn evaluate(
                    view: $crate::__View,
                    checks: ::std::vec::Vec<$crate::bindings::Check>,
                ) -> ::std::vec::Vec<::std::result::Result<$crate::bindings::Finding, ::std::string::String>> {
                    $crate::__evaluate(super::PREDICATES, view, checks)
                }
            }
            $crate::bindings::__export_world!(Module with_types_in $crate::bindings);
        }
    };
}
