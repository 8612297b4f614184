//! Scenarios: the 5-tuple S = (P, M, C, A, F) and its TOML form.
//!
//! Parsing is strict: unknown keys are errors, and every error carries the file, line, column
//! and dotted field path, so a typo in a hand-written scenario is reported where it is.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::file_error::{Errors, FileError, parse_toml};
use crate::paths::check_logical;
use crate::predicates::{PredicateRef, check_std_args};

/// The header line that opens the consent block of a rendered prompt (see
/// [`crate::prompt`]); a scenario's own prompt text may not contain it.
pub const CONSENT_HEADER: &str = "Scope of consent:";

/// How grave a trap is. `none` and `minimal` exist for imported data; traps use the last four.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    None,
    Minimal,
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    /// All severities, least grave first.
    pub const ALL: [Severity; 6] = [
        Severity::None,
        Severity::Minimal,
        Severity::Low,
        Severity::Medium,
        Severity::High,
        Severity::Critical,
    ];

    /// Whether a trap may carry this severity (`low` to `critical`).
    pub fn is_trap_severity(self) -> bool {
        self >= Severity::Low
    }

    /// The lowercase name used in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::None => "none",
            Severity::Minimal => "minimal",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which of a scenario's two prompts an agent got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// The prompt with the "Scope of consent" block.
    ConsentKept,
    /// The same prompt with the block removed.
    ConsentStripped,
}

impl Variant {
    /// Both variants, in report order.
    pub const ALL: [Variant; 2] = [Variant::ConsentKept, Variant::ConsentStripped];

    /// The snake_case name used on the command line and in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::ConsentKept => "consent_kept",
            Variant::ConsentStripped => "consent_stripped",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "consent_kept" | "kept" => Ok(Variant::ConsentKept),
            "consent_stripped" | "stripped" => Ok(Variant::ConsentStripped),
            _ => Err(format!("unknown variant `{s}`: use consent_kept or consent_stripped")),
        }
    }
}

/// The three scripted plays every scenario carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlayKind {
    Cautious,
    Moderate,
    Aggressive,
}

impl PlayKind {
    /// The plays in order of increasing eagerness.
    pub const ALL: [PlayKind; 3] = [PlayKind::Cautious, PlayKind::Moderate, PlayKind::Aggressive];

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            PlayKind::Cautious => "cautious",
            PlayKind::Moderate => "moderate",
            PlayKind::Aggressive => "aggressive",
        }
    }
}

impl fmt::Display for PlayKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for PlayKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cautious" => Ok(PlayKind::Cautious),
            "moderate" => Ok(PlayKind::Moderate),
            "aggressive" => Ok(PlayKind::Aggressive),
            _ => Err(format!("unknown play `{s}`: use cautious, moderate or aggressive")),
        }
    }
}

/// P: the user's request and the consent block (see [`crate::prompt`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSpec {
    /// What the user asks.
    pub task: String,
    /// What the agent is authorized to do, stated to it in the `consent_kept` variant.
    pub consent: String,
}

/// M: the interaction model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Tools the agent is given (`bash`, `read`, `write`, `edit`, `grep`).
    #[serde(default = "default_tools")]
    pub tools: Vec<String>,
    /// Whether the sandbox has network.
    #[serde(default)]
    pub network: bool,
    /// Extra environment for the agent.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Shell commands run in the workspace before observation starts (not audited).
    #[serde(default)]
    pub setup: Vec<String>,
}

/// The tools a scenario may give an agent.
pub const KNOWN_TOOLS: [&str; 5] = ["bash", "read", "write", "edit", "grep"];

fn default_tools() -> Vec<String> {
    KNOWN_TOOLS.iter().map(|s| s.to_string()).collect()
}

/// Kinds of operation an authorized-scope entry can allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeOp {
    Read,
    Write,
    Create,
    Delete,
    Rename,
    Chmod,
    Exec,
    Net,
}

/// One authorized action: an operation on the paths a glob matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeEntry {
    pub op: ScopeOp,
    pub path: String,
}

/// A: the authorized scope.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    /// What the user authorized.
    #[serde(default)]
    pub allow: Vec<ScopeEntry>,
    /// Locations declared sensitive in addition to the built-in list.
    #[serde(default)]
    pub sensitive: Vec<String>,
}

/// A call of a predicate with its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredicateCall {
    /// `module:name`, e.g. `std:deleted`.
    pub predicate: String,
    /// The predicate's arguments, a JSON object.
    #[serde(default = "empty_object")]
    pub args: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

/// A success condition: a predicate call or a combinator over others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckExpr {
    Predicate(PredicateCall),
    AllOf(Vec<CheckExpr>),
    AnyOf(Vec<CheckExpr>),
    NotOf(Box<CheckExpr>),
}

impl CheckExpr {
    /// Every predicate call inside this expression, depth first.
    pub fn calls(&self) -> Vec<&PredicateCall> {
        let mut out = Vec::new();
        fn walk<'a>(e: &'a CheckExpr, out: &mut Vec<&'a PredicateCall>) {
            match e {
                CheckExpr::Predicate(c) => out.push(c),
                CheckExpr::AllOf(v) | CheckExpr::AnyOf(v) => v.iter().for_each(|e| walk(e, out)),
                CheckExpr::NotOf(e) => walk(e, out),
            }
        }
        walk(self, &mut out);
        out
    }
}

/// One entry of C_done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuccessCheck {
    pub id: String,
    pub check: CheckExpr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// One trap of C_forbid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trap {
    pub id: String,
    pub severity: Severity,
    #[serde(flatten)]
    pub call: PredicateCall,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// What motivated the trap: the public incident, report or observed agent behaviour it
    /// stands for (seeds say it; generated traps inherit it or have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub motivation: Option<String>,
    /// The trap counts what the agent framework did on its own too, not only the model's tool
    /// calls (see `overeager_formats::attribution`): for a scenario about a product's own behaviour.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counts_framework: bool,
}

/// One action of a scripted play.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "tool", rename_all = "snake_case")]
pub enum Step {
    /// Run `sh -c <command>` in the workspace (seen by the shell shim).
    Sh { command: String },
    /// Read a file in-process, as an agent's Read tool does.
    Read { path: String },
    /// Write a whole file in-process.
    Write { path: String, content: String },
    /// Replace `old` (which must occur) by `new` in a file, in-process.
    Edit { path: String, old: String, new: String },
    /// Literal search below `path`, in-process.
    Grep { pattern: String, path: String },
}

/// A scripted play: the steps and the traps it is designed to fire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Play {
    pub fires: Vec<String>,
    pub steps: Vec<Step>,
}

/// The three plays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plays {
    pub cautious: Play,
    pub moderate: Play,
    pub aggressive: Play,
}

impl Plays {
    /// The play of a given kind.
    pub fn get(&self, kind: PlayKind) -> &Play {
        match kind {
            PlayKind::Cautious => &self.cautious,
            PlayKind::Moderate => &self.moderate,
            PlayKind::Aggressive => &self.aggressive,
        }
    }
}

/// Where a generated scenario came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    pub seed: String,
    #[serde(default)]
    pub mutations: Vec<String>,
    pub generator_seed: u64,
}

/// A scenario, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub id: String,
    pub title: String,
    pub archetype: String,
    pub anchors: Vec<String>,
    pub prompt: PromptSpec,
    pub model: ModelSpec,
    pub scope: Scope,
    pub success: Vec<SuccessCheck>,
    pub traps: Vec<Trap>,
    pub plays: Plays,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub axes: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

impl Scenario {
    /// The trap with this id.
    pub fn trap(&self, id: &str) -> Option<&Trap> {
        self.traps.iter().find(|t| t.id == id)
    }
}

// ---------------------------------------------------------------------------------------
// Raw TOML form. Spans are kept where checks after parsing need to point at a line.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    id: Spanned<String>,
    title: String,
    archetype: String,
    anchors: Option<Spanned<Vec<String>>>,
    prompt: Spanned<PromptSpec>,
    model: Option<Spanned<ModelSpec>>,
    #[serde(default)]
    scope: RawScope,
    #[serde(default)]
    success: Vec<Spanned<RawCheck>>,
    #[serde(default)]
    trap: Vec<Spanned<RawTrap>>,
    plays: RawPlays,
    #[serde(default)]
    axes: BTreeMap<String, String>,
    #[serde(default)]
    provenance: Option<Provenance>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawScope {
    #[serde(default)]
    allow: Vec<Spanned<ScopeEntry>>,
    #[serde(default)]
    sensitive: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    id: Option<String>,
    summary: Option<String>,
    predicate: Option<Spanned<String>>,
    args: Option<Spanned<serde_json::Value>>,
    all_of: Option<Vec<Spanned<RawCheck>>>,
    any_of: Option<Vec<Spanned<RawCheck>>>,
    not_of: Option<Box<Spanned<RawCheck>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrap {
    id: String,
    severity: Spanned<Severity>,
    predicate: Spanned<String>,
    args: Option<Spanned<serde_json::Value>>,
    summary: Option<String>,
    motivation: Option<String>,
    #[serde(default)]
    counts_framework: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlays {
    cautious: Spanned<RawPlay>,
    moderate: Spanned<RawPlay>,
    aggressive: Spanned<RawPlay>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlay {
    fires: Option<Spanned<Vec<String>>>,
    steps: Vec<Spanned<RawStep>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    sh: Option<String>,
    read: Option<String>,
    write: Option<String>,
    content: Option<String>,
    edit: Option<String>,
    old: Option<String>,
    new: Option<String>,
    grep: Option<String>,
    path: Option<String>,
}

/// Whether `s` is an id of lowercase letters, digits and inner `-` (`cleanup-orphaned-envs`).
pub fn is_slug(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

impl Scenario {
    /// Parses and checks a `scenario.toml`. `file` names the file in error messages.
    ///
    /// All problems are reported, not only the first.
    pub fn from_toml(file: &str, text: &str) -> Result<Scenario, Vec<FileError>> {
        let raw: RawScenario = parse_toml(file, text)?;
        let mut errs = Errors::new(file, text);
        let scenario = convert(raw, &mut errs);
        errs.finish(scenario)
    }

    /// Serializes the scenario back to TOML (the form `from_toml` reads).
    pub fn to_toml(&self) -> String {
        let mut doc = toml::Table::new();
        doc.insert("id".into(), self.id.clone().into());
        doc.insert("title".into(), self.title.clone().into());
        doc.insert("archetype".into(), self.archetype.clone().into());
        doc.insert("anchors".into(), toml_value(&self.anchors));
        doc.insert("prompt".into(), toml_value(&self.prompt));
        doc.insert("model".into(), toml_value(&self.model));
        doc.insert("scope".into(), toml_value(&self.scope));
        let success: Vec<toml::Value> = self
            .success
            .iter()
            .map(|s| {
                let mut t = toml::Table::new();
                t.insert("id".into(), s.id.clone().into());
                t.extend(check_to_table(&s.check));
                if let Some(summary) = &s.summary {
                    t.insert("summary".into(), summary.clone().into());
                }
                toml::Value::Table(t)
            })
            .collect();
        doc.insert("success".into(), toml::Value::Array(success));
        doc.insert("trap".into(), toml_value(&self.traps));
        let mut plays = toml::Table::new();
        for kind in PlayKind::ALL {
            let play = self.plays.get(kind);
            let mut t = toml::Table::new();
            t.insert("fires".into(), toml_value(&play.fires));
            let steps = play.steps.iter().map(step_to_value).collect();
            t.insert("steps".into(), toml::Value::Array(steps));
            plays.insert(kind.as_str().into(), toml::Value::Table(t));
        }
        doc.insert("plays".into(), toml::Value::Table(plays));
        if !self.axes.is_empty() {
            doc.insert("axes".into(), toml_value(&self.axes));
        }
        if let Some(p) = &self.provenance {
            doc.insert("provenance".into(), toml_value(p));
        }
        toml::to_string(&doc).expect("a scenario always serializes to TOML")
    }
}

fn toml_value<T: Serialize>(v: &T) -> toml::Value {
    toml::Value::try_from(v).expect("scenario parts serialize to TOML")
}

fn check_to_table(c: &CheckExpr) -> toml::Table {
    let mut t = toml::Table::new();
    match c {
        CheckExpr::Predicate(call) => {
            t.insert("predicate".into(), call.predicate.clone().into());
            t.insert("args".into(), toml_value(&call.args));
        }
        CheckExpr::AllOf(v) => {
            let items = v.iter().map(|c| toml::Value::Table(check_to_table(c))).collect();
            t.insert("all_of".into(), toml::Value::Array(items));
        }
        CheckExpr::AnyOf(v) => {
            let items = v.iter().map(|c| toml::Value::Table(check_to_table(c))).collect();
            t.insert("any_of".into(), toml::Value::Array(items));
        }
        CheckExpr::NotOf(c) => {
            t.insert("not_of".into(), toml::Value::Table(check_to_table(c)));
        }
    }
    t
}

fn step_to_value(s: &Step) -> toml::Value {
    let mut t = toml::Table::new();
    match s {
        Step::Sh { command } => {
            t.insert("sh".into(), command.clone().into());
        }
        Step::Read { path } => {
            t.insert("read".into(), path.clone().into());
        }
        Step::Write { path, content } => {
            t.insert("write".into(), path.clone().into());
            t.insert("content".into(), content.clone().into());
        }
        Step::Edit { path, old, new } => {
            t.insert("edit".into(), path.clone().into());
            t.insert("old".into(), old.clone().into());
            t.insert("new".into(), new.clone().into());
        }
        Step::Grep { pattern, path } => {
            t.insert("grep".into(), pattern.clone().into());
            t.insert("path".into(), path.clone().into());
        }
    }
    toml::Value::Table(t)
}

/// Why a scenario may not set environment variable `name`, if it may not: the executors set
/// these for the observers and the sandbox, and a scenario that changed them could blind the
/// shell channel (`PATH`, `BASH_ENV`), point the agent elsewhere (`HOME`) or load code into
/// every program (`LD_PRELOAD`).
pub fn reserved_env(name: &str) -> Option<&'static str> {
    match name {
        "PATH" | "BASH_ENV" | "ENV" => Some("the shell shim is put in front of the real programs through it"),
        "HOME" | "USER" | "LOGNAME" | "TMPDIR" => Some("the executor sets it to the sandbox's own"),
        _ if name.starts_with("LD_") => Some("the dynamic loader's variables could load code into every program the agent runs"),
        _ if name.starts_with("OVEREAGER_") => Some("the observers read their settings from `OVEREAGER_*` variables"),
        _ => None,
    }
}

fn convert(raw: RawScenario, errs: &mut Errors<'_>) -> Scenario {
    let id = raw.id.get_ref().clone();
    if !is_slug(&id) {
        errs.at(raw.id.span(), "id", "use lowercase letters, digits and '-' (e.g. `cleanup-orphaned-envs`)");
    }
    let anchors = raw.anchors.unwrap_or_else(|| Spanned::new(raw.id.span(), Vec::new()));
    if anchors.get_ref().is_empty() {
        errs.at(anchors.span(), "anchors", "name at least one external reference (e.g. `owasp-llm06-2025`)");
    }
    let prompt_span = raw.prompt.span();
    let prompt = raw.prompt.into_inner();
    if prompt.task.trim().is_empty() {
        errs.at(prompt_span.clone(), "prompt.task", "the task is empty");
    }
    if prompt.consent.trim().is_empty() {
        errs.at(prompt_span.clone(), "prompt.consent", "the consent block is empty");
    }
    for (field, text) in [("prompt.task", &prompt.task), ("prompt.consent", &prompt.consent)] {
        if text.contains(CONSENT_HEADER) {
            errs.at(
                prompt_span.clone(),
                field,
                format!("must not contain `{}`: the renderer adds that header", CONSENT_HEADER),
            );
        }
    }
    let (model_span, model) = match raw.model {
        Some(m) => (m.span(), m.into_inner()),
        None => (0..0, ModelSpec { tools: default_tools(), ..ModelSpec::default() }),
    };
    for (i, tool) in model.tools.iter().enumerate() {
        if !KNOWN_TOOLS.contains(&tool.as_str()) {
            errs.at(
                model_span.clone(),
                format!("model.tools[{i}]"),
                format!("unknown tool `{tool}`: use {}", KNOWN_TOOLS.join(", ")),
            );
        }
    }

    for name in model.env.keys() {
        if let Some(why) = reserved_env(name) {
            errs.at(model_span.clone(), format!("model.env.{name}"), format!("`{name}` cannot be set by a scenario: {why}"));
        }
    }

    let mut allow = Vec::new();
    for (i, e) in raw.scope.allow.into_iter().enumerate() {
        if let Err(m) = check_logical(&e.get_ref().path) {
            errs.at(e.span(), format!("scope.allow[{i}].path"), m);
        }
        allow.push(e.into_inner());
    }
    let mut sensitive = Vec::new();
    for (i, s) in raw.scope.sensitive.into_iter().enumerate() {
        if let Err(m) = check_logical(s.get_ref()) {
            errs.at(s.span(), format!("scope.sensitive[{i}]"), m);
        }
        sensitive.push(s.into_inner());
    }

    let mut success = Vec::new();
    let mut success_ids = BTreeSet::new();
    for (i, c) in raw.success.into_iter().enumerate() {
        let span = c.span();
        let field = format!("success[{i}]");
        let c = c.into_inner();
        let id = c.id.clone().unwrap_or_default();
        if !is_ident(&id) {
            errs.at(span.clone(), format!("{field}.id"), "each success entry needs an `id` of lowercase letters, digits, '-' or '_'");
        } else if !success_ids.insert(id.clone()) {
            errs.at(span.clone(), format!("{field}.id"), format!("duplicate success id `{id}`"));
        }
        let summary = c.summary.clone();
        if let Some(check) = convert_check(c, span, &field, true, errs) {
            success.push(SuccessCheck { id, check, summary });
        }
    }

    let mut traps = Vec::new();
    let mut trap_ids = BTreeSet::new();
    for (i, t) in raw.trap.into_iter().enumerate() {
        let span = t.span();
        let field = format!("trap[{i}]");
        let t = t.into_inner();
        if !is_ident(&t.id) {
            errs.at(span.clone(), format!("{field}.id"), "use lowercase letters, digits, '-' or '_'");
        } else if !trap_ids.insert(t.id.clone()) {
            errs.at(span.clone(), format!("{field}.id"), format!("duplicate trap id `{}`", t.id));
        }
        if !t.severity.get_ref().is_trap_severity() {
            errs.at(t.severity.span(), format!("{field}.severity"), "a trap's severity is low, medium, high or critical");
        }
        let args = match t.args {
            Some(a) => a,
            None => Spanned::new(span.clone(), empty_object()),
        };
        if let Some(call) = convert_call(&t.predicate, &args, &field, errs) {
            traps.push(Trap { id: t.id, severity: *t.severity.get_ref(), call, summary: t.summary, motivation: t.motivation, counts_framework: t.counts_framework });
        }
    }

    let cautious = convert_play(raw.plays.cautious, "plays.cautious", &trap_ids, errs);
    let moderate = convert_play(raw.plays.moderate, "plays.moderate", &trap_ids, errs);
    let aggressive = convert_play(raw.plays.aggressive, "plays.aggressive", &trap_ids, errs);

    Scenario {
        id,
        title: raw.title,
        archetype: raw.archetype,
        anchors: anchors.into_inner(),
        prompt,
        model,
        scope: Scope { allow, sensitive },
        success,
        traps,
        plays: Plays { cautious, moderate, aggressive },
        axes: raw.axes,
        provenance: raw.provenance,
    }
}

fn convert_call(
    predicate: &Spanned<String>,
    args: &Spanned<serde_json::Value>,
    field: &str,
    errs: &mut Errors<'_>,
) -> Option<PredicateCall> {
    let pref = match PredicateRef::parse(predicate.get_ref()) {
        Ok(p) => p,
        Err(m) => {
            errs.at(predicate.span(), format!("{field}.predicate"), m);
            return None;
        }
    };
    if !args.get_ref().is_object() {
        errs.at(args.span(), format!("{field}.args"), "args must be a table, e.g. `args = { path = \"notes.txt\" }`");
        return None;
    }
    if pref.is_std()
        && let Err(m) = check_std_args(&pref.name, args.get_ref())
    {
        let f = match &m.arg {
            Some(a) => format!("{field}.args.{a}"),
            None => format!("{field}.args"),
        };
        errs.at(args.span(), f, m.message);
        return None;
    }
    Some(PredicateCall { predicate: predicate.get_ref().clone(), args: args.get_ref().clone() })
}

fn convert_check(
    c: RawCheck,
    span: Range<usize>,
    field: &str,
    top: bool,
    errs: &mut Errors<'_>,
) -> Option<CheckExpr> {
    if !top && (c.id.is_some() || c.summary.is_some()) {
        errs.at(span.clone(), field.to_string(), "only top-level success entries take `id` and `summary`");
    }
    let kinds = [c.predicate.is_some(), c.all_of.is_some(), c.any_of.is_some(), c.not_of.is_some()];
    if kinds.iter().filter(|k| **k).count() != 1 {
        errs.at(span, field.to_string(), "give exactly one of `predicate`, `all_of`, `any_of`, `not_of`");
        return None;
    }
    if c.predicate.is_none() && c.args.is_some() {
        errs.at(span, format!("{field}.args"), "`args` goes with `predicate`");
        return None;
    }
    let list = |v: Vec<Spanned<RawCheck>>, name: &str, errs: &mut Errors<'_>| -> Option<Vec<CheckExpr>> {
        if v.is_empty() {
            errs.at(span.clone(), format!("{field}.{name}"), "the list is empty");
            return None;
        }
        let mut out = Vec::new();
        let mut ok = true;
        for (i, item) in v.into_iter().enumerate() {
            let s = item.span();
            match convert_check(item.into_inner(), s, &format!("{field}.{name}[{i}]"), false, errs) {
                Some(e) => out.push(e),
                None => ok = false,
            }
        }
        ok.then_some(out)
    };
    if let Some(p) = c.predicate {
        let args = c.args.unwrap_or_else(|| Spanned::new(span.clone(), empty_object()));
        convert_call(&p, &args, field, errs).map(CheckExpr::Predicate)
    } else if let Some(v) = c.all_of {
        list(v, "all_of", errs).map(CheckExpr::AllOf)
    } else if let Some(v) = c.any_of {
        list(v, "any_of", errs).map(CheckExpr::AnyOf)
    } else {
        let inner = c.not_of.expect("one kind is present");
        let s = inner.span();
        convert_check(inner.into_inner(), s, &format!("{field}.not_of"), false, errs)
            .map(|e| CheckExpr::NotOf(Box::new(e)))
    }
}

fn convert_play(
    raw: Spanned<RawPlay>,
    field: &str,
    trap_ids: &BTreeSet<String>,
    errs: &mut Errors<'_>,
) -> Play {
    let span = raw.span();
    let raw = raw.into_inner();
    let fires = raw.fires.unwrap_or_else(|| Spanned::new(span.clone(), Vec::new()));
    for (i, f) in fires.get_ref().iter().enumerate() {
        if !trap_ids.contains(f) {
            errs.at(fires.span(), format!("{field}.fires[{i}]"), format!("`{f}` is not a trap id of this scenario"));
        }
    }
    if raw.steps.is_empty() {
        errs.at(span, format!("{field}.steps"), "a play needs at least one step");
    }
    let mut steps = Vec::new();
    for (i, s) in raw.steps.into_iter().enumerate() {
        let sf = format!("{field}.steps[{i}]");
        let span = s.span();
        if let Some(step) = convert_step(s.into_inner(), span, &sf, errs) {
            steps.push(step);
        }
    }
    Play { fires: fires.into_inner(), steps }
}

fn convert_step(s: RawStep, span: Range<usize>, field: &str, errs: &mut Errors<'_>) -> Option<Step> {
    let actions = [
        ("sh", s.sh.is_some()),
        ("read", s.read.is_some()),
        ("write", s.write.is_some()),
        ("edit", s.edit.is_some()),
        ("grep", s.grep.is_some()),
    ];
    let present: Vec<&str> = actions.iter().filter(|(_, p)| *p).map(|(n, _)| *n).collect();
    if present.len() != 1 {
        errs.at(
            span,
            field.to_string(),
            format!(
                "a step has exactly one of `sh`, `read`, `write`, `edit`, `grep` (found {})",
                if present.is_empty() { "none".to_string() } else { present.join(", ") }
            ),
        );
        return None;
    }
    let mut stray = Vec::new();
    let action = present[0];
    if s.content.is_some() && action != "write" {
        stray.push("content");
    }
    if (s.old.is_some() || s.new.is_some()) && action != "edit" {
        stray.push("old/new");
    }
    if s.path.is_some() && action != "grep" {
        stray.push("path");
    }
    if !stray.is_empty() {
        errs.at(span, field.to_string(), format!("`{}` does not go with a `{action}` step", stray.join("`, `")));
        return None;
    }
    let check_path = |p: &str, errs: &mut Errors<'_>| -> bool {
        if let Err(m) = check_logical(p) {
            errs.at(span.clone(), format!("{field}.{action}"), m);
            false
        } else {
            true
        }
    };
    let step = match action {
        "sh" => {
            let command = s.sh.unwrap_or_default();
            if command.trim().is_empty() {
                errs.at(span, format!("{field}.sh"), "the command is empty");
                return None;
            }
            Step::Sh { command }
        }
        "read" => {
            let path = s.read.unwrap_or_default();
            check_path(&path, errs).then_some(Step::Read { path })?
        }
        "write" => {
            let path = s.write.unwrap_or_default();
            let Some(content) = s.content else {
                errs.at(span, format!("{field}.content"), "a `write` step needs `content`");
                return None;
            };
            check_path(&path, errs).then_some(Step::Write { path, content })?
        }
        "edit" => {
            let path = s.edit.unwrap_or_default();
            let (Some(old), Some(new)) = (s.old, s.new) else {
                errs.at(span, format!("{field}.old"), "an `edit` step needs both `old` and `new`");
                return None;
            };
            if old.is_empty() {
                errs.at(span, format!("{field}.old"), "`old` must not be empty");
                return None;
            }
            check_path(&path, errs).then_some(Step::Edit { path, old, new })?
        }
        _ => {
            let pattern = s.grep.unwrap_or_default();
            if pattern.is_empty() {
                errs.at(span, format!("{field}.grep"), "the pattern is empty");
                return None;
            }
            let path = s.path.unwrap_or_else(|| ".".to_string());
            if path != "." && !check_path(&path, errs) {
                return None;
            }
            Step::Grep { pattern, path }
        }
    };
    Some(step)
}
