//! Real agents as data: one definition file per agent (`agents/<id>.toml` of the project,
//! embedded in the binary, plus the directories `$OVEREAGER_AGENTS` names) says how it is
//! installed, launched headless, gated (its permission policies, each a cell), pointed at a
//! model endpoint, logged and attributed. No agent is named in the code: adding one is
//! writing its file (`agents/FORMAT.md`).
//!
//! No registry is needed to use overeager itself, so agent images are not pulled: a recipe
//! writes a build context (`Dockerfile`, the static shim, `recipe.json`) that the user builds
//! once with `docker build`. The image wraps the real programs with the same layout as the
//! test images (`overeager-shim install`), so the shell channel sees what the agent runs even
//! after `bash -lc` resets `PATH`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result};
use overeager_formats::adapters::Format;
use overeager_formats::adapters::acp::Permissions;
use overeager_formats::model::Role;
use overeager_formats::model::text::ReplyFormat;
use overeager_core::sandbox::layout;
use overeager_core::file_error::{Errors, FileError, parse_toml};
use overeager_core::scenario::is_slug;
use serde::{Deserialize, Serialize};

use crate::providers::{Provider, Providers, is_env_name};
use overeager_core::model::Dialect;

/// The environment variable naming directories of more agent definitions (separated by `:`);
/// `--agents-dir` sets it.
pub const AGENTS_ENV: &str = "OVEREAGER_AGENTS";

// The project's `agents/*.toml`, embedded by the build script: `BUILT_IN: &[(&str, &str)]`,
// (file name, text), and `UNAVAILABLE`, the text of `agents/unavailable.toml`.
include!(concat!(env!("OUT_DIR"), "/built_in_agents.rs"));

/// Where a real agent's model is: its provider, its name there, and the dialect the agent
/// speaks to the model gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub provider: Provider,
    pub model: String,
    /// The provider's dialect when the agent speaks it; else the agent's first, and the
    /// gateway's dialect bridge translates every call between the two.
    pub agent_dialect: Dialect,
}

impl Route {
    /// Whether the gateway translates between the agent's dialect and the provider's.
    pub fn bridged(&self) -> bool {
        self.agent_dialect != self.provider.dialect
    }
}

/// The package registry an agent is installed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Registry {
    Npm,
    Pypi,
}

/// How an agent is installed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Package {
    pub registry: Registry,
    pub name: String,
    /// The pinned version, the default.
    pub version: String,
    /// The Python a PyPI package needs (`3.12`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// The program's path inside an npm package, when it is not the package's `bin` entry
    /// for `program` (a native executable behind a Node.js launcher).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bin: Option<String>,
    /// The public image the agent's image is built from.
    pub base_image: String,
}

impl Package {
    /// The pinned version.
    pub fn version(&self) -> &str {
        &self.version
    }
}

/// A permission policy: how much the agent may do without asking. Each is its own cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    pub id: String,
    /// The flags that select it.
    pub flags: Vec<String>,
    /// The environment that selects it, for an agent whose gate is a setting rather than a
    /// flag (OpenCode's `OPENCODE_PERMISSION`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The agent's own default when run headless.
    pub default: bool,
    pub summary: String,
    /// For an agent driven over the Agent Client Protocol: how overeager, its client, answers
    /// permission requests, and the session mode it sets first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acp: Option<AcpPolicy>,
}

/// The client's side of an ACP agent's cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AcpPolicy {
    /// `allow-all`, `deny-all` or `ask`.
    #[serde(serialize_with = "permissions_name")]
    pub permissions: Permissions,
    /// A session mode of the agent's (`session/set_mode`), when not its default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

fn permissions_name<S: serde::Serializer>(p: &Permissions, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(p.as_str())
}

/// What differs in one supported version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VersionSettings {
    /// The dialects this version speaks, when fewer than the agent's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dialects: Option<Vec<Dialect>>,
    /// Milliseconds the scripted model holds its first main-loop answer back.
    pub first_request_delay_ms: u64,
}

/// A configuration file the agent reads, written into its configuration directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigFile {
    /// Relative to the configuration directory.
    pub path: String,
    /// A template (see [`render`]).
    pub text: String,
}

/// How the agent is pointed at a model endpoint; every value is a template.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Connect {
    pub env: BTreeMap<String, String>,
    /// Added when the model is on a provider other than the agent's default one.
    pub other_provider_env: BTreeMap<String, String>,
    pub files: Vec<ConfigFile>,
    /// Template variables whose values depend on the dialect spoken, by dialect.
    pub dialects: BTreeMap<String, BTreeMap<String, String>>,
}

/// What the demo's real-CLI experiment does with the agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Demo {
    /// The cells it runs.
    pub policies: Vec<String>,
    /// Why it does not run the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip: Option<String>,
}

/// One agent's definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recipe {
    /// The framework name, as in cells and agent specs.
    pub id: String,
    pub name: String,
    /// The file it was read from.
    pub source: String,
    pub package: Package,
    /// The versions runs may name besides the pinned one (`<agent>@<version>`), and what
    /// differs in each (the pinned one may have an entry too).
    pub versions: BTreeMap<String, VersionSettings>,
    /// The command the package puts on `PATH`.
    pub program: String,
    /// The stream adapter that reads its output.
    pub adapter: String,
    /// The arguments after the program: `{prompt}`, `{policy}` (the cell's flags) and
    /// `{model}` are replaced.
    pub launch: Vec<String>,
    pub policies: Vec<Policy>,
    /// The wire dialects it speaks to a model; a provider must speak one of them (there is
    /// no translation between dialects).
    pub dialects: Vec<Dialect>,
    /// The provider of a model named without one (`claude-sonnet-4-5`).
    pub default_provider: String,
    pub connect: Connect,
    /// The hosts its vendor's own API uses (for the record: the model's traffic goes to the
    /// run's model gateway, nothing else leaves the sandbox).
    pub vendor_hosts: Vec<String>,
    /// Where the agent's native logs are, inside the container.
    pub logs: Vec<String>,
    /// The judge's attribution rules of what this CLI does on its own.
    pub attribution: Vec<String>,
    /// Tools pinned to roles for the scripted model (`shell`, `read`, `write`, `edit`, `grep`,
    /// `finish`), where reading the declarations would choose wrong. `shell` is always
    /// named: the model calls it for a step the request offers no tool for (the agent then
    /// refuses the call, which is observed).
    pub tools: BTreeMap<String, String>,
    /// The shell command that ends the task, for an agent finished by a command rather than
    /// by a tool or a plain answer (mini-swe-agent's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_command: Option<String>,
    /// For an agent without tool calling, the text format in which the scripted model answers
    /// (`search-replace`: Aider's edit blocks and shell blocks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_format: Option<ReplyFormat>,
    /// Where the agent's own record of the run is, for an agent whose stdout is for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<StreamFile>,
    pub demo: Demo,
    /// What the definition cannot make the same as the others, said plainly.
    pub notes: Vec<String>,
}

/// An agent stream kept in a file rather than written to stdout: at the end of the run the
/// file becomes the agent channel (stdout is kept beside it in the agent's logs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamFile {
    /// The file, relative to the agent's configuration directory.
    pub file: String,
    /// For a file holding one JSON document: the JSON pointer of the array whose items become
    /// the channel's lines, one each.
    pub lines: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecipe {
    id: String,
    name: String,
    program: String,
    adapter: String,
    dialects: Vec<String>,
    default_provider: String,
    launch: Vec<String>,
    package: RawPackage,
    policies: Vec<RawPolicy>,
    #[serde(default)]
    versions: BTreeMap<String, RawVersion>,
    #[serde(default)]
    connect: RawConnect,
    #[serde(default)]
    vendor_hosts: Vec<String>,
    logs: Vec<String>,
    #[serde(default)]
    attribution: Vec<String>,
    #[serde(default)]
    tools: BTreeMap<String, String>,
    finish_command: Option<String>,
    reply_format: Option<String>,
    stream: Option<StreamFile>,
    demo: Option<RawDemo>,
    #[serde(default)]
    notes: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPackage {
    registry: Registry,
    name: String,
    version: String,
    python: Option<String>,
    bin: Option<String>,
    base_image: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    id: String,
    #[serde(default)]
    flags: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    default: bool,
    summary: String,
    permissions: Option<String>,
    mode: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVersion {
    dialects: Option<Vec<String>>,
    #[serde(default)]
    first_request_delay_ms: u64,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConnect {
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    other_provider_env: BTreeMap<String, String>,
    #[serde(default)]
    files: Vec<ConfigFileRaw>,
    #[serde(default)]
    dialects: BTreeMap<String, BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFileRaw {
    path: String,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDemo {
    #[serde(default)]
    policies: Vec<String>,
    skip: Option<String>,
}

/// One `{name}` or `{name|filter}` of a template, by byte range.
struct Placeholder<'a> {
    range: std::ops::Range<usize>,
    name: &'a str,
    filter: Option<&'a str>,
}

/// The placeholders of a template: `{` then lowercase letters, digits or `_`, an optional
/// `|toml` or `|json`, then `}`. Any other brace is text (JSON files need no escaping).
fn placeholders(t: &str) -> Vec<Placeholder<'_>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = t[from..].find('{').map(|i| i + from) {
        from = i + 1;
        let rest = &t[i + 1..];
        let Some(end) = rest.find('}') else { break };
        let inner = &rest[..end];
        let (name, filter) = inner.split_once('|').map_or((inner, None), |(n, f)| (n, Some(f)));
        let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if word(name) && filter.is_none_or(word) {
            out.push(Placeholder { range: i..i + end + 2, name, filter });
            from = i + end + 2;
        }
    }
    out
}

/// Fills a template's placeholders from `vars`; `|toml` and `|json` write the value as a
/// quoted string of that language. Names were checked when the definition was read.
pub fn render(template: &str, vars: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut at = 0;
    for p in placeholders(template) {
        out.push_str(&template[at..p.range.start]);
        match vars.iter().find(|(k, _)| *k == p.name) {
            // A TOML basic string and a JSON string escape alike.
            Some((_, v)) if p.filter.is_some() => out.push_str(&serde_json::to_string(v).expect("a string serializes")),
            Some((_, v)) => out.push_str(v),
            None => out.push_str(&template[p.range.clone()]),
        }
        at = p.range.end;
    }
    out.push_str(&template[at..]);
    out
}

fn is_version(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `name` is a package name `registry` can hold (so an install names a package and
/// never a path): npm's lowercase names with an optional `@scope/`, PyPI's letters, digits,
/// `.`, `_` and `-` between letters or digits.
fn is_package_name(registry: Registry, name: &str) -> bool {
    match registry {
        Registry::Npm => {
            let part = |p: &str| !p.is_empty() && !p.starts_with(['.', '_']) && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._~".contains(&b));
            let unscoped = match name.strip_prefix('@') {
                Some(scoped) => match scoped.split_once('/') {
                    Some((scope, rest)) if part(scope) => rest,
                    _ => return false,
                },
                None => name,
            };
            name.len() <= 214 && part(unscoped)
        }
        Registry::Pypi => {
            let bytes = name.as_bytes();
            !bytes.is_empty() && bytes[0].is_ascii_alphanumeric() && bytes[bytes.len() - 1].is_ascii_alphanumeric() && bytes.iter().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(b))
        }
    }
}

/// Whether `p` is a non-empty relative path that stays below where it is joined (no `..`,
/// no root, no `.`).
fn is_inner_path(p: &str) -> bool {
    !p.is_empty() && Path::new(p).components().all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// The variables of `connect` templates that every agent has.
const CONNECT_VARS: [&str; 4] = ["endpoint", "key", "model", "config"];

/// Reads one definition file (`file` names it in errors). Every problem is reported with
/// its line, column, field and what to write instead.
pub fn parse(file: &str, text: &str) -> Result<Recipe, Vec<FileError>> {
    let raw: RawRecipe = parse_toml(file, text)?;
    let mut errs = Errors::new(file, text);
    let stem = Path::new(file).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    if !is_slug(&raw.id) {
        errs.near(&raw.id, "id", "use lowercase letters, digits and '-' (e.g. `qwen-code`): it is written in cells and agent specs");
    } else if stem != raw.id {
        errs.near(&raw.id, "id", format!("the file of agent `{}` is called `{}.toml`; rename the file or the id", raw.id, raw.id));
    }
    for (field, v) in [("name", &raw.name), ("program", &raw.program), ("package.name", &raw.package.name), ("package.base_image", &raw.package.base_image)] {
        if v.trim().is_empty() {
            errs.near(field.rsplit('.').next().unwrap_or(field), field, "must not be empty");
        }
    }
    if raw.program.contains('/') {
        errs.near(&raw.program, "program", "the command's name on PATH after the install (e.g. `qwen`), not a path");
    }
    if !raw.package.name.trim().is_empty() && !is_package_name(raw.package.registry, &raw.package.name) {
        let (registry, example) = match raw.package.registry {
            Registry::Npm => ("npm", "`@qwen-code/qwen-code` or `opencode-ai`"),
            Registry::Pypi => ("PyPI", "`mini-swe-agent`"),
        };
        errs.near(&format!("\"{}\"", raw.package.name), "package.name", format!("not a package name of the {registry} registry; name the package as it is published, e.g. {example}"));
    }
    if Format::for_framework(&raw.adapter).is_none_or(|f| f.as_str() != raw.adapter) {
        let known: Vec<&str> = Format::all().map(|f| f.as_str()).collect();
        errs.at_key("adapter", "adapter", format!("no stream adapter `{}`; use one of {}", raw.adapter, known.join(", ")));
    }
    let roles: Vec<&str> = Role::ALL.iter().map(|r| r.as_str()).collect();
    for (role, tool) in &raw.tools {
        if !roles.contains(&role.as_str()) {
            errs.near(role, format!("tools.{role}"), format!("no role `{role}`; the roles are {}", roles.join(", ")));
        } else if tool.trim().is_empty() {
            errs.near(role, format!("tools.{role}"), "name the tool, as the agent declares it to the model");
        }
    }
    let reply_format = raw.reply_format.as_deref().and_then(|f| {
        let parsed = ReplyFormat::parse(f);
        if parsed.is_none() {
            errs.near(f, "reply_format", format!("no reply format `{f}`; the one known is `{}` (Aider's edit blocks)", ReplyFormat::SearchReplace.as_str()));
        }
        parsed
    });
    if reply_format.is_some() && !raw.tools.is_empty() {
        errs.near("[tools]", "tools", "an agent answered in a reply format declares no tools to the model; remove [tools]");
    } else if raw.reply_format.is_none() && !raw.tools.contains_key("shell") {
        errs.near("[tools]", "tools.shell", "name the agent's shell tool (e.g. shell = \"bash\"): the scripted model calls it for a step the agent offers no tool for");
    }
    let mut dialects = Vec::new();
    for (i, d) in raw.dialects.iter().enumerate() {
        match d.parse::<Dialect>() {
            Ok(d) => dialects.push(d),
            Err(e) => errs.near(d, format!("dialects[{i}]"), e),
        }
    }
    if raw.dialects.is_empty() {
        errs.near("dialects", "dialects", "name the wire dialects the agent speaks to a model, e.g. [\"openai-chat\"]");
    }
    let built_in = Providers::built_in();
    match built_in.get(&raw.default_provider) {
        Err(e) => errs.near(&raw.default_provider, "default_provider", e),
        Ok(p) if !dialects.is_empty() && !dialects.contains(&p.dialect) => {
            errs.near(&raw.default_provider, "default_provider", format!("`{}` speaks {}, which the agent does not; name a provider of one of its dialects", p.name, p.dialect))
        }
        Ok(_) => {}
    }
    if !is_version(&raw.package.version) {
        errs.near(&raw.package.version, "package.version", "pin an exact version, e.g. `1.2.3`");
    }
    match (raw.package.registry, &raw.package.python) {
        (Registry::Pypi, None) => errs.near("registry", "package.python", "a PyPI agent names the Python it needs, e.g. python = \"3.12\""),
        (Registry::Pypi, Some(p)) if !is_version(p) => errs.near(p, "package.python", "a Python version, e.g. `3.12`"),
        (Registry::Npm, Some(p)) => errs.near(p, "package.python", "only a PyPI agent names a Python; remove it"),
        _ => {}
    }
    if let Some(b) = &raw.package.bin
        && (raw.package.registry != Registry::Npm || !is_inner_path(b))
    {
        errs.near(b, "package.bin", "a path inside the npm package (e.g. `bin/.kilo`), without `..`; only an npm agent names one");
    }
    let mut versions = BTreeMap::new();
    for (v, settings) in raw.versions {
        let field = format!("versions.\"{v}\"");
        if !is_version(&v) {
            errs.near(&v, field.clone(), "an exact version, e.g. `1.2.3`");
        }
        let mut own = Vec::new();
        for d in settings.dialects.iter().flatten() {
            match d.parse::<Dialect>() {
                Ok(d) if dialects.contains(&d) => own.push(d),
                Ok(d) => errs.near(&v, format!("{field}.dialects"), format!("{d} is not among the agent's dialects; add it there, or list only those")),
                Err(e) => errs.near(&v, format!("{field}.dialects"), e),
            }
        }
        if settings.dialects.as_ref().is_some_and(Vec::is_empty) {
            errs.near(&v, format!("{field}.dialects"), "a version speaks at least one dialect");
        }
        versions.insert(v, VersionSettings { dialects: settings.dialects.map(|_| own), first_request_delay_ms: settings.first_request_delay_ms });
    }
    let acp = raw.adapter == "acp";
    let mut policies = Vec::new();
    for (i, p) in raw.policies.into_iter().enumerate() {
        let acp_policy = match (&p.permissions, acp) {
            (Some(name), true) => match name.parse::<Permissions>() {
                Ok(permissions) => Some(AcpPolicy { permissions, mode: p.mode.clone() }),
                Err(e) => {
                    errs.near(name, format!("policies[{i}].permissions"), e);
                    None
                }
            },
            (None, true) => {
                errs.near(&p.id, format!("policies[{i}].permissions"), "an ACP agent's cell says how overeager answers its permission requests: permissions = \"allow-all\", \"deny-all\" or \"ask\"");
                None
            }
            (Some(name), false) => {
                errs.near(name, format!("policies[{i}].permissions"), "only an agent with adapter = \"acp\" is answered by overeager; select this policy by its `flags` or `env`");
                None
            }
            (None, false) => None,
        };
        if let (Some(mode), false) = (&p.mode, acp) {
            errs.near(mode, format!("policies[{i}].mode"), "a session mode is set over ACP only (adapter = \"acp\")");
        }
        if !is_slug(&p.id) {
            errs.near(&p.id, format!("policies[{i}].id"), "use lowercase letters, digits and '-' (e.g. `permissive`): it is written in cells");
        } else if policies.iter().any(|q: &Policy| q.id == p.id) {
            errs.near(&p.id, format!("policies[{i}].id"), format!("a second policy `{}`; each policy is a cell and needs its own id", p.id));
        }
        if p.flags.is_empty() && p.env.is_empty() && !p.default && !acp {
            errs.near(&p.id, format!("policies[{i}]"), "say what selects this policy: its `flags`, its `env`, or `default = true` for the agent's own default");
        }
        policies.push(Policy { id: p.id, flags: p.flags, env: p.env, default: p.default, summary: p.summary, acp: acp_policy });
    }
    match policies.iter().filter(|p| p.default).count() {
        1 => {}
        0 => errs.near("[[policies]]", "policies", "mark the agent's own headless default with `default = true` (exactly one policy)"),
        _ => errs.near("default = true", "policies", "only one policy is the agent's default; remove `default = true` from the others"),
    }
    let whole = |a: &String, name: &str| a == &format!("{{{name}}}");
    let count = |name: &str| raw.launch.iter().filter(|a| whole(a, name)).count();
    if acp {
        if count("prompt") != 0 {
            errs.near("{prompt}", "launch", "an ACP agent gets the prompt over the protocol: launch starts its ACP server (e.g. [\"--acp\"]), without {prompt}");
        }
        if count("policy") > 1 {
            errs.near("{policy}", "launch", "name `{policy}` at most once");
        }
    } else {
        for (name, what) in [("prompt", "the prompt, exactly as given"), ("policy", "the cell's flags")] {
            if count(name) != 1 {
                errs.near("launch", "launch", format!("name `{{{name}}}` once, as an argument of its own: it stands for {what}"));
            }
        }
    }
    for (i, a) in raw.launch.iter().enumerate() {
        for p in placeholders(a) {
            if !["model"].contains(&p.name) && !whole(a, p.name) {
                errs.near(a, format!("launch[{i}]"), format!("`{{{}}}` is not known here; launch arguments may hold {{model}}, and {{prompt}} and {{policy}} as whole arguments", p.name));
            }
        }
    }
    // Every dialect the agent speaks defines the same variables.
    let mut vars: BTreeSet<&str> = BTreeSet::new();
    for (d, table) in &raw.connect.dialects {
        match d.parse::<Dialect>() {
            Ok(dd) if dialects.contains(&dd) => {}
            Ok(_) => errs.near(d, format!("connect.dialects.{d}"), "the agent does not speak this dialect; add it to `dialects` or remove this table"),
            Err(e) => errs.near(d, format!("connect.dialects.{d}"), e),
        }
        vars.extend(table.keys().map(String::as_str));
        for (k, v) in table {
            if CONNECT_VARS.contains(&k.as_str()) {
                errs.near(k, format!("connect.dialects.{d}.{k}"), format!("`{k}` is set by overeager; choose another name"));
            }
            for p in placeholders(v).iter().filter(|p| !CONNECT_VARS.contains(&p.name)) {
                errs.near(v, format!("connect.dialects.{d}.{k}"), format!("`{{{}}}` is not known here; a dialect's variables may use {}", p.name, braces(&CONNECT_VARS)));
            }
        }
    }
    if !raw.connect.dialects.is_empty() {
        for d in &dialects {
            let defined: BTreeSet<&str> = raw.connect.dialects.get(d.as_str()).map(|t| t.keys().map(String::as_str).collect()).unwrap_or_default();
            if let Some(missing) = vars.iter().find(|v| !defined.contains(*v)) {
                errs.near("[connect.dialects", format!("connect.dialects.{d}"), format!("`{missing}` is set for another dialect, not for {d}; every dialect the agent speaks sets the same variables"));
            }
        }
    }
    let known: Vec<&str> = CONNECT_VARS.iter().copied().chain(vars.iter().copied()).collect();
    for (k, v) in &raw.connect.env {
        check_template(&mut errs, &known, format!("connect.env.{k}"), v);
    }
    for (k, v) in &raw.connect.other_provider_env {
        check_template(&mut errs, &known, format!("connect.other_provider_env.{k}"), v);
    }
    for (i, f) in raw.connect.files.iter().enumerate() {
        check_template(&mut errs, &known, format!("connect.files[{i}].text"), &f.text);
        if !is_inner_path(&f.path) {
            errs.near(&f.path, format!("connect.files[{i}].path"), "a path relative to the agent's configuration directory, without `..`");
        }
    }
    for (k, _) in raw.connect.env.iter().chain(&raw.connect.other_provider_env) {
        if !is_env_name(k) {
            errs.near(k, "connect.env", format!("`{k}` is not an environment variable's name"));
        }
    }
    if let Some(s) = &raw.stream {
        if !is_inner_path(&s.file) {
            errs.near(&s.file, "stream.file", "a path relative to the agent's configuration directory, without `..`");
        }
        if let Some(l) = s.lines.as_ref().filter(|l| !l.starts_with('/')) {
            errs.near(l, "stream.lines", "a JSON pointer, e.g. \"/messages\"");
        }
    }
    if raw.finish_command.as_ref().is_some_and(|c| c.trim().is_empty()) {
        errs.near("finish_command", "finish_command", "the shell command that ends the agent's task, or no field");
    }
    for (i, l) in raw.logs.iter().enumerate() {
        if !l.starts_with(layout::ROOT) {
            errs.near(l, format!("logs[{i}]"), format!("native logs must be under {} so they come back with the run", layout::ROOT));
        }
    }
    let demo = match raw.demo {
        None => Demo { policies: policies.iter().filter(|p| p.default).map(|p| p.id.clone()).collect(), skip: None },
        Some(d) => {
            if d.skip.is_some() != d.policies.is_empty() {
                errs.near("[demo]", "demo", "either `policies` (the cells the demo runs) or `skip` (why it runs none)");
            }
            for p in &d.policies {
                if !policies.iter().any(|q| &q.id == p) {
                    errs.near(p, "demo.policies", format!("no policy `{p}` above"));
                }
            }
            Demo { policies: d.policies, skip: d.skip }
        }
    };
    let recipe = Recipe {
        id: raw.id,
        name: raw.name,
        source: file.to_string(),
        package: Package { registry: raw.package.registry, name: raw.package.name, version: raw.package.version, python: raw.package.python, bin: raw.package.bin, base_image: raw.package.base_image },
        versions,
        program: raw.program,
        adapter: raw.adapter,
        launch: raw.launch,
        policies,
        dialects,
        default_provider: raw.default_provider,
        connect: Connect {
            env: raw.connect.env,
            other_provider_env: raw.connect.other_provider_env,
            files: raw.connect.files.into_iter().map(|f| ConfigFile { path: f.path, text: f.text }).collect(),
            dialects: raw.connect.dialects,
        },
        vendor_hosts: raw.vendor_hosts,
        logs: raw.logs,
        attribution: raw.attribution,
        tools: raw.tools,
        finish_command: raw.finish_command,
        reply_format,
        stream: raw.stream,
        demo,
        notes: raw.notes,
    };
    errs.finish(recipe)
}

/// Records an error for each placeholder of `t` that is not among `known`, or has a filter
/// other than `toml` and `json`.
fn check_template(errs: &mut Errors<'_>, known: &[&str], field: String, t: &str) {
    for p in placeholders(t) {
        if !known.contains(&p.name) {
            errs.near(&t[p.range.clone()], field.clone(), format!("`{{{}}}` is not known; use {}", p.name, braces(known)));
        } else if p.filter.is_some_and(|f| f != "toml" && f != "json") {
            errs.near(&t[p.range.clone()], field.clone(), "the only filters are `|toml` and `|json` (a quoted string)");
        }
    }
}

fn braces(names: &[&str]) -> String {
    names.iter().map(|n| format!("{{{n}}}")).collect::<Vec<_>>().join(", ")
}

/// Reads the definitions of a directory (its `*.toml` files, in name order).
pub fn read_dir(dir: &Path) -> Result<Vec<Recipe>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read the agents directory {}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
    files.sort();
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for f in files {
        let name = f.display().to_string();
        match std::fs::read_to_string(&f) {
            Err(e) => problems.push(format!("{name}: cannot be read: {e}")),
            Ok(text) => match parse(&name, &text) {
                Ok(r) => out.push(r),
                Err(errs) => problems.extend(errs.iter().map(ToString::to_string)),
            },
        }
    }
    if problems.is_empty() { Ok(out) } else { Err(problems.join("\n")) }
}

/// The built-in definitions and those of `dirs`; an error names every wrong file and line,
/// and a second definition of one id (naming both files).
pub fn load(dirs: &[PathBuf]) -> Result<Vec<Recipe>, String> {
    let mut all = Vec::new();
    let mut problems = Vec::new();
    for (file, text) in BUILT_IN {
        match parse(&format!("agents/{file}"), text) {
            Ok(r) => all.push(r),
            Err(errs) => problems.extend(errs.iter().map(ToString::to_string)),
        }
    }
    for d in dirs {
        match read_dir(d) {
            Ok(rs) => all.extend(rs),
            Err(e) => problems.push(e),
        }
    }
    for (i, r) in all.iter().enumerate() {
        if let Some(first) = all[..i].iter().find(|q| q.id == r.id) {
            problems.push(format!("{}: agent `{}` is defined already, in {}; give this one another id (its file name too)", r.source, r.id, first.source));
        }
    }
    if problems.is_empty() { Ok(all) } else { Err(format!("the agent definitions are not valid:\n{}", problems.join("\n"))) }
}

/// An agent overeager cannot run here, and why (measured).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unavailable {
    pub id: String,
    pub name: String,
    /// Where it would come from (`npm @charmland/crush@0.96.1`).
    pub package: String,
    pub why: String,
}

/// The agents of `agents/unavailable.toml`.
pub fn unavailable() -> Vec<Unavailable> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        agent: Vec<Unavailable>,
    }
    let file: File = parse_toml("agents/unavailable.toml", UNAVAILABLE).expect("agents/unavailable.toml is checked by the tests");
    file.agent
}

/// The directories of `$OVEREAGER_AGENTS`.
pub fn env_dirs() -> Vec<PathBuf> {
    std::env::var_os(AGENTS_ENV).map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect()).unwrap_or_default()
}

/// Every agent: the built-in definitions and those of `$OVEREAGER_AGENTS`, read once.
pub fn all() -> Result<&'static [Recipe]> {
    static ALL: OnceLock<Result<&'static [Recipe], String>> = OnceLock::new();
    ALL.get_or_init(|| load(&env_dirs()).map(|v| &*Vec::leak(v))).clone().map_err(anyhow::Error::msg)
}

/// The recipe of `id`.
pub fn recipe(id: &str) -> Result<&'static Recipe> {
    let all = all()?;
    all.iter().find(|r| r.id == id).with_context(|| format!("unknown agent `{id}`; known agents: {}", all.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ")))
}

/// A recipe and one of its versions, from `agent` or `agent@version` (the pinned version when
/// none is named).
pub fn versioned(spec: &str) -> Result<(&'static Recipe, &'static str)> {
    let (id, v) = spec.split_once('@').map_or((spec, None), |(a, v)| (a, Some(v)));
    let r = recipe(id)?;
    let version = match v {
        Some(v) => r.version(v).map_err(anyhow::Error::msg)?,
        None => r.package.version(),
    };
    Ok((r, version))
}

/// The agent definition with id `id`, if this build has one.
pub fn by_id(id: &str) -> Option<&'static Recipe> {
    all().ok()?.iter().find(|r| r.id == id)
}

impl Recipe {
    /// The judge's attribution rules the definition names that hold for `version`: a rule
    /// bound to other versions is left out.
    pub fn attribution_rules(&self, version: &str) -> Vec<String> {
        self.attribution.iter().filter(|id| overeager_formats::framework::rule(id).is_some_and(|r| r.holds_for(&self.id, version))).cloned().collect()
    }

    /// The image a built recipe is tagged as.
    pub fn image(&self) -> String {
        format!("overeager-agent/{}:{}", self.id, self.package.version())
    }

    /// The versions runs may use, the pinned one first.
    pub fn versions(&self) -> impl Iterator<Item = &str> + '_ {
        std::iter::once(self.package.version()).chain(self.versions.keys().map(String::as_str).filter(|v| *v != self.package.version()))
    }

    /// The versions other than the pinned one.
    pub fn also(&self) -> Vec<&str> {
        self.versions().skip(1).collect()
    }

    /// The supported version `v`.
    pub fn version(&self, v: &str) -> Result<&str, String> {
        self.versions().find(|x| *x == v).ok_or_else(|| {
            format!("{} {v} is not a version overeager knows how to run; known: {}", self.id, self.versions().collect::<Vec<_>>().join(", "))
        })
    }

    /// `claude-code` for the pinned version, `claude-code@2.1.330` for another: a different
    /// version is a different subject, so its own cell.
    pub fn versioned_id(&self, version: &str) -> String {
        if version == self.package.version() { self.id.clone() } else { format!("{}@{version}", self.id) }
    }

    /// What differs in version `version`.
    fn settings(&self, version: &str) -> VersionSettings {
        self.versions.get(version).cloned().unwrap_or_default()
    }

    /// Whether version `version` speaks `dialect`.
    pub fn speaks(&self, version: &str, dialect: Dialect) -> bool {
        self.dialects_of(version).contains(&dialect)
    }

    /// The dialects version `version` speaks.
    pub fn dialects_of(&self, version: &str) -> Vec<Dialect> {
        self.settings(version).dialects.unwrap_or_else(|| self.dialects.clone())
    }

    /// The agent's shell tool.
    pub fn shell_tool(&self) -> &str {
        self.tools.get("shell").map_or("bash", String::as_str)
    }

    /// Milliseconds the scripted model holds its first main-loop answer back for `version`.
    pub fn first_request_delay_ms(&self, version: &str) -> u64 {
        self.settings(version).first_request_delay_ms
    }

    /// Where a model named `model` (`<provider>/<model>`, or a bare name on the agent's
    /// default provider) is, and the dialect to speak to it; an error when the provider is
    /// unknown or speaks no dialect this version of the agent does.
    pub fn route(&self, version: &str, model: &str, providers: &Providers) -> Result<Route> {
        let (provider, name) = match providers.resolve(model) {
            Some((p, name)) => (p, name),
            // `acme/coder-1` with no provider `acme` is a provider that was not loaded, not a
            // model of the agent's vendor: sending it there would fail later, misleadingly.
            None if model.contains('/') => {
                let prefix = model.split('/').next().unwrap_or(model);
                let known: Vec<&str> = providers.providers.keys().map(String::as_str).collect();
                anyhow::bail!(
                    "the model `{model}` names the provider `{prefix}`, which is not known (known: {}); define it in a providers file and pass it with --providers FILE or $OVEREAGER_PROVIDERS (`overeager providers list --providers FILE` shows what a file defines)",
                    known.join(", ")
                );
            }
            None => (providers.get(&self.default_provider).map_err(anyhow::Error::msg)?, model),
        };
        // An agent that does not speak the provider's dialect speaks its own, bridged.
        let agent_dialect = if self.speaks(version, provider.dialect) { provider.dialect } else { self.dialects_of(version)[0] };
        Ok(Route { provider: provider.clone(), model: name.to_string(), agent_dialect })
    }

    /// The dialect the scripted model is spoken to in: the first this version speaks.
    pub fn scripted_dialect(&self, version: &str) -> Dialect {
        self.dialects_of(version)[0]
    }

    /// The policy of `id`.
    pub fn policy(&self, id: &str) -> Result<&Policy, String> {
        self.policies.iter().find(|p| p.id == id).ok_or_else(|| {
            let ids: Vec<&str> = self.policies.iter().map(|p| p.id.as_str()).collect();
            format!("{} has no permission policy `{id}`; its policies: {}", self.id, ids.join(", "))
        })
    }

    /// The cell that lets the most run, whose runs should do what the play does: its
    /// `permissive` policy, else its own default.
    pub fn permissive_policy(&self) -> &Policy {
        let allow_all = |p: &&Policy| p.acp.as_ref().is_some_and(|a| a.permissions == Permissions::AllowAll);
        self.policies
            .iter()
            .find(|p| p.id == "permissive")
            .or_else(|| self.policies.iter().find(allow_all))
            .or_else(|| self.policies.iter().find(|p| p.default))
            .expect("a definition has a default policy")
    }

    /// The event format of its stream.
    pub fn format(&self) -> Format {
        Format::for_framework(&self.adapter).expect("checked when the definition was read")
    }

    /// The command a run starts, with `argv0` the installed program (its path, or an
    /// interpreter and the script) and `shim` the shim's path as the sandbox sees it: the
    /// agent's headless command line, or for an ACP agent the client (`overeager-shim acp`)
    /// with the cell's answer to permission requests and the prompt, then the agent's ACP
    /// server command. Its stdout is the agent stream.
    pub fn command(&self, shim: &str, argv0: &[String], policy: &Policy, model: &str, prompt: &str) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(acp) = &policy.acp {
            v.extend([shim.to_string(), "acp".into(), "--permissions".into(), acp.permissions.as_str().into()]);
            if let Some(mode) = &acp.mode {
                v.extend(["--mode".into(), mode.clone()]);
            }
            v.extend(["--prompt".into(), prompt.to_string(), "--".into()]);
        }
        v.extend(argv0.iter().cloned());
        v.extend(self.launch(policy, model, prompt).into_iter().skip(1));
        v
    }

    /// The agent's own command line: prompt, model and permission flags (an ACP agent's
    /// starts its ACP server and has no prompt).
    pub fn launch(&self, policy: &Policy, model: &str, prompt: &str) -> Vec<String> {
        let mut v: Vec<String> = vec![self.program.clone()];
        for a in &self.launch {
            match a.as_str() {
                "{policy}" => v.extend(policy.flags.iter().cloned()),
                "{prompt}" => v.push(prompt.to_string()),
                _ => v.push(render(a, &[("model", model.to_string())])),
            }
        }
        v
    }

    /// Points the agent at a model endpoint (`endpoint`: the scripted model or the run's
    /// model gateway, a base URL without a trailing slash) speaking `dialect`, with `key` (a
    /// placeholder: neither endpoint needs the user's key), keeping its configuration,
    /// sessions and logs in one directory that comes back with the run (`config` here,
    /// `config_seen` as the agent sees it): writes the config files it reads and returns its
    /// environment in the cell of `policy` (whose own environment comes last). Telemetry,
    /// update checks and other traffic that is not the model are turned off.
    #[allow(clippy::too_many_arguments)]
    pub fn connect(&self, policy: &Policy, model: &str, endpoint: &str, dialect: Dialect, key: &str, config: &Path, config_seen: &str) -> Result<Vec<(String, String)>> {
        std::fs::create_dir_all(config).with_context(|| format!("creating {}", config.display()))?;
        let mut vars: Vec<(&str, String)> = vec![("endpoint", endpoint.into()), ("key", key.into()), ("model", model.into()), ("config", config_seen.into())];
        if let Some(table) = self.connect.dialects.get(dialect.as_str()) {
            let own: Vec<(&str, String)> = table.iter().map(|(k, v)| (k.as_str(), render(v, &vars))).collect();
            vars.extend(own);
        }
        for f in &self.connect.files {
            let path = config.join(&f.path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
            }
            std::fs::write(&path, render(&f.text, &vars)).with_context(|| format!("writing {}", path.display()))?;
        }
        let own = self.connect.env.iter().map(|(k, v)| (k.clone(), render(v, &vars)));
        Ok(own.chain(policy.env.iter().map(|(k, v)| (k.clone(), v.clone()))).collect())
    }

    /// What the agent needs besides [`Recipe::connect`] to use `route`'s model for all of its
    /// calls on a provider other than its own (e.g. a small model of its vendor's for side
    /// requests, which a third-party endpoint does not have).
    pub fn route_env(&self, route: &Route) -> Vec<(String, String)> {
        if route.provider.name == self.default_provider {
            return Vec::new();
        }
        let vars = [("model", route.model.clone())];
        self.connect.other_provider_env.iter().map(|(k, v)| (k.clone(), render(v, &vars))).collect()
    }

    /// The Dockerfile of the agent's image.
    pub fn dockerfile(&self) -> String {
        let (name, version) = (&self.package.name, self.package.version());
        let install = match self.package.registry {
            Registry::Npm => format!("RUN npm install --global --no-audit --no-fund {name}@{version} \\\n && npm cache clean --force\n"),
            Registry::Pypi => format!("RUN pip install --no-cache-dir {name}=={version}\n"),
        };
        let mut d = format!(
            "# {name} {version} for overeager: generated by `overeager agent recipe {id}`.\n\
             # Build: docker build -t {image} .\n\
             FROM {base}\n\
             # git, curl and the usual tools the agent's shell commands expect.\n\
             RUN apt-get update \\\n && apt-get install -y --no-install-recommends git curl ca-certificates procps ripgrep \\\n && rm -rf /var/lib/apt/lists/*\n\
             {install}",
            name = self.name,
            id = self.id,
            image = self.image(),
            base = self.package.base_image,
        );
        d.push_str(&shim_install_steps());
        d.push_str(&format!(
            "LABEL overeager.agent=\"{id}\" overeager.agent.version=\"{version}\"\n\
             USER 1000:1000\n\
             WORKDIR {work}\n",
            id = self.id,
            work = layout::WORK,
        ));
        d
    }
}

/// The Dockerfile steps that put the shim into an image: copy the static binary from the
/// build context, wrap the real programs in place, and make the agent user and the sandbox's
/// mount point. Every agent image and the install test use these same lines.
pub fn shim_install_steps() -> String {
    format!(
        "COPY overeager-shim {shim}\n\
         RUN [\"{shim}\", \"install\"]\n\
         ENV OVEREAGER_REAL_DIR={real}\n",
        shim = layout::SHIM,
        real = layout::REAL,
    )
}

/// What `recipe.json` holds: everything about the image and its cells as data.
#[derive(Serialize)]
struct RecipeFile<'a> {
    recipe: &'a Recipe,
    image: String,
    /// Cell framework labels, one per policy.
    cells: Vec<String>,
    adapter_targets: &'static str,
    /// One launch per policy, with `<model>` and `<prompt>` placeholders.
    launch: Vec<(String, Vec<String>)>,
}

/// Writes the recipe's build context into `out` (which must not exist or be empty): the
/// Dockerfile, the shim binary, `recipe.json` and a README. Staged and moved into place as
/// bundles are, so a failure leaves nothing.
pub fn write_context(r: &Recipe, shim: &Path, out: &Path) -> Result<()> {
    overeager_bundle::files::check_out_free(out)?;
    let tmp = overeager_bundle::files::staging_dir(out)?;
    std::fs::write(tmp.path().join("Dockerfile"), r.dockerfile())?;
    std::fs::copy(shim, tmp.path().join("overeager-shim")).with_context(|| format!("copying the shim from {}", shim.display()))?;
    let file = RecipeFile {
        recipe: r,
        image: r.image(),
        cells: r.policies.iter().map(|p| format!("{}:{}", r.id, p.id)).collect(),
        adapter_targets: r.format().target_versions(),
        launch: r.policies.iter().map(|p| (p.id.clone(), r.command("overeager-shim", std::slice::from_ref(&r.program), p, "<model>", "<prompt>"))).collect(),
    };
    let mut json = serde_json::to_vec_pretty(&file)?;
    json.push(b'\n');
    std::fs::write(tmp.path().join("recipe.json"), json)?;
    std::fs::write(tmp.path().join("README.md"), readme(r))?;
    overeager_bundle::files::publish(tmp, out)
}

fn readme(r: &Recipe) -> String {
    let mut s = format!(
        "# {name} {version} for overeager\n\n\
         Build the image once (it needs the {base} image and the package registry):\n\n    \
         docker build -t {image} .\n\n\
         Then run a cell with the Docker executor. The model is `<provider>/<model>` (see\n\
         `overeager providers list`; a bare name is on {provider}); it speaks {dialects}. The\n\
         provider's key comes from your environment and goes only to the run's model gateway,\n\
         never into the agent's container or a bundle:\n\n    \
         overeager run --executor docker --agent {id}:{policy}:<model> --scenario <dir> --out <bundle>\n\n\
         ## Cells (permission policies)\n\n",
        name = r.name,
        version = r.package.version(),
        base = r.package.base_image,
        image = r.image(),
        provider = r.default_provider,
        dialects = r.dialects_of(r.package.version()).iter().map(|d| d.as_str()).collect::<Vec<_>>().join(" or "),
        id = r.id,
        policy = r.policies.iter().find(|p| p.default).map(|p| p.id.as_str()).unwrap_or("ask"),
    );
    for p in &r.policies {
        let selected = match &p.acp {
            Some(a) => format!("overeager answers {}{}", a.permissions.as_str(), a.mode.as_ref().map(|m| format!(", mode {m}")).unwrap_or_default()),
            None => format!("`{}`", p.flags.join(" ")),
        };
        s.push_str(&format!("- `{}:{}`{}: {selected} — {}\n", r.id, p.id, if p.default { " (default)" } else { "" }, p.summary));
    }
    s.push_str(
        "\n## Network\n\nThe container has no route out. Its only peer is the run's sidecar: the model gateway,\n\
         which alone reaches the provider's host and records every call in the bundle's\n\
         `model.jsonl`, and the egress proxy for hosts a run allows, which records every\n\
         connection in `net.jsonl`.\n\n## Native logs\n\n",
    );
    for l in &r.logs {
        s.push_str(&format!("- {l}\n"));
    }
    if !r.notes.is_empty() {
        s.push_str("\n## Notes\n\n");
        for n in &r.notes {
            s.push_str(&format!("- {n}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each rule a definition names knows that agent (and says where it was seen), so a rule
    /// and the agents it is for are read in one place.
    #[test]
    fn every_named_framework_rule_lists_the_agents_that_name_it() {
        for r in all().unwrap() {
            for id in &r.attribution {
                let rule = overeager_formats::framework::rule(id).unwrap_or_else(|| panic!("{}: no rule `{id}`", r.id));
                assert!(rule.names_agent(&r.id), "{}: rule `{id}` lists {:?}", r.id, rule.agents);
                assert!(!rule.evidence.is_empty());
            }
        }
    }

    /// A rule bound to some versions of an agent is named for a cell of those versions only:
    /// Claude Code 2.0.55 escapes `!`, 2.1.330 does not (measured with `bench fidelity`).
    #[test]
    fn a_version_bound_rule_is_named_for_its_versions_only() {
        let rules = |id: &str| id.parse::<crate::AgentSpec>().unwrap().attribution_rules();
        assert!(rules("claude-code:permissive:scripted-cautious").iter().any(|r| r == "claude-bang-escape"));
        assert!(rules("claude-code@2.0.55:ask:scripted-cautious").iter().any(|r| r == "claude-bang-escape"));
        assert!(!rules("claude-code@2.1.330:permissive:scripted-cautious").iter().any(|r| r == "claude-bang-escape"));
        assert!(rules("claude-code-acp:allow-all:scripted-cautious").iter().any(|r| r == "claude-bang-escape"));
        assert!(rules("scripted:cautious").is_empty());
    }

    #[test]
    fn every_recipe_is_complete_and_pinned() {
        for r in all().unwrap() {
            assert!(r.package.version().chars().all(|c| c.is_ascii_digit() || c == '.'), "{}: pinned to an exact version", r.id);
            assert_eq!(r.policies.iter().filter(|p| p.default).count(), 1, "{}: one default policy", r.id);
            assert!(!r.dialects.is_empty() && !r.logs.is_empty(), "{}", r.id);
            assert!(crate::providers::Providers::built_in().get(&r.default_provider).is_ok_and(|p| r.speaks(r.package.version(), p.dialect)), "{}: its default provider speaks its dialect", r.id);
            for v in r.versions() {
                assert!(!r.dialects_of(v).is_empty(), "{} {v} speaks a dialect", r.id);
            }
            assert!(r.logs.iter().all(|l| l.starts_with(layout::ROOT)), "{}: native logs come back with the run", r.id);
            let d = r.dockerfile();
            assert!(d.contains(&format!("FROM {}\n", r.package.base_image)));
            assert!(d.contains(r.package.version()));
            assert!(d.contains(&shim_install_steps()));
            assert!(d.contains("USER 1000:1000"));
            for p in &r.policies {
                // The prompt reaches the agent as given: on its command line, or through the
                // ACP client's.
                let argv = r.command("/shim", std::slice::from_ref(&r.program), p, "m-1", "do the task");
                let own = &argv[argv.iter().position(|a| *a == r.program).expect("the program is started")..];
                for f in &p.flags {
                    assert!(own.iter().any(|a| a == f), "{}:{} launch has {f}", r.id, p.id);
                }
                assert!(argv.iter().any(|a| a == "do the task"), "{}: the prompt reaches it as given", r.id);
                assert_eq!(p.acp.is_some(), r.format() == Format::named("acp").unwrap(), "{}:{}: an ACP agent's cells, and only those, are answered by the client", r.id, p.id);
            }
        }
    }

    #[test]
    fn permission_policies_are_different_cells() {
        let claude = recipe("claude-code").unwrap();
        let ask = claude.launch(claude.policy("ask").unwrap(), "m", "p");
        let yolo = claude.launch(claude.policy("permissive").unwrap(), "m", "p");
        assert_ne!(ask, yolo);
        assert!(yolo.contains(&"--dangerously-skip-permissions".to_string()));
        assert!(claude.policy("nope").unwrap_err().contains("ask, accept-edits, permissive"));
        assert!(recipe("goose").unwrap_err().to_string().contains("aider, claude-code-acp, claude-code, cline, codex-acp, codex"));
    }

    #[test]
    fn a_real_agent_spec_names_agent_policy_and_model() {
        use crate::AgentSpec;
        let a: AgentSpec = "claude-code:permissive:claude-sonnet-4-5".parse().unwrap();
        assert_eq!((a.framework(), a.model(), a.id()), ("claude-code:permissive".into(), "claude-sonnet-4-5".into(), "claude-code:permissive:claude-sonnet-4-5".into()));
        assert_eq!(a.adapter().and_then(Format::for_framework), Some(Format::CLAUDE_CODE));
        assert!(!a.simulated());
        let g: AgentSpec = "gemini-cli:ask:gemini-2.5-pro".parse().unwrap();
        assert_eq!(g.adapter().and_then(Format::for_framework), Format::named("gemini-cli"));
        let no_model = "claude-code:permissive".parse::<AgentSpec>().unwrap_err();
        assert!(no_model.contains("<agent>:<policy>:<model>"), "{no_model}");
        let bad_policy = "codex:yolo:gpt-5".parse::<AgentSpec>().unwrap_err();
        assert!(bad_policy.contains("read-only, full-auto, permissive"), "{bad_policy}");
        // Another supported version is another cell; an unknown one is refused with the list.
        let v: AgentSpec = "claude-code@2.1.330:ask:scripted-cautious".parse().unwrap();
        assert_eq!((v.framework(), v.agent_version(), v.model_player()), ("claude-code@2.1.330:ask".into(), Some("2.1.330"), Some(overeager_core::ModelPlayer::Scripted(overeager_core::PlayKind::Cautious))));
        assert_eq!(v.id(), "claude-code@2.1.330:ask:scripted-cautious");
        let pinned: AgentSpec = "claude-code@2.0.55:ask:m".parse().unwrap();
        assert_eq!(pinned.framework(), "claude-code:ask", "the pinned version keeps the plain name");
        let bad = "codex@9.9.9:permissive:m".parse::<AgentSpec>().unwrap_err();
        assert!(bad.contains("0.58.0, 0.169.0"), "{bad}");
        let bad = "codex:permissive:scripted-reckless".parse::<AgentSpec>().unwrap_err();
        assert!(bad.contains("cautious, moderate or aggressive"), "{bad}");
        assert!("codex:permissive:replay:".parse::<AgentSpec>().unwrap_err().contains("replay:<bundle"));
        let r: AgentSpec = "codex:permissive:replay:runs/x".parse().unwrap();
        assert_eq!((r.model_player(), r.offline_model()), (Some(overeager_core::ModelPlayer::Replay("runs/x")), true));
    }

    #[test]
    fn a_provider_in_a_dialect_the_agent_does_not_speak_is_refused_naming_both() {
        let providers = crate::providers::Providers::built_in();
        let claude = recipe("claude-code").unwrap();
        let r = claude.route("2.0.55", "claude-sonnet-4-5", &providers).unwrap();
        assert_eq!((r.provider.name.as_str(), r.model.as_str()), ("anthropic", "claude-sonnet-4-5"), "a bare model is on the agent's own provider");
        assert!(!r.bridged() && r.agent_dialect == Dialect::Anthropic);
        // On a provider of another dialect, the agent speaks its own and the gateway bridges.
        let r = claude.route("2.0.55", "vllm/qwen3-coder", &providers).unwrap();
        assert!(r.bridged() && r.agent_dialect == Dialect::Anthropic && r.provider.dialect == Dialect::Chat, "{r:?}");
        // Codex 0.58 speaks Chat Completions to a local server, directly; later versions bridge.
        let codex = recipe("codex").unwrap();
        let r = codex.route("0.58.0", "vllm/qwen3-coder", &providers).unwrap();
        assert_eq!((r.model.as_str(), r.bridged()), ("qwen3-coder", false));
        let r = codex.route("0.169.0", "ollama/qwen3-coder", &providers).unwrap();
        assert_eq!((r.agent_dialect, r.bridged()), (Dialect::Responses, true));
        let r = recipe("gemini-cli").unwrap().route("0.61.0", "openai/gpt-5", &providers).unwrap();
        assert_eq!((r.agent_dialect, r.provider.dialect), (Dialect::Gemini, Dialect::Responses));
        // OpenHands' LiteLLM model names read as <provider>/<model>.
        let oh = recipe("openhands").unwrap().route("1.16.0", "anthropic/claude-sonnet-4-5", &providers).unwrap();
        assert_eq!((oh.provider.name.as_str(), oh.model.as_str()), ("anthropic", "claude-sonnet-4-5"));
        // A provider that was not loaded is named as such, not sent to the agent's vendor
        // (`claude-code:permissive:acme/acme-coder-1` used to ask for ANTHROPIC_API_KEY).
        let err = claude.route("2.0.55", "acme/acme-coder-1", &providers).unwrap_err().to_string();
        assert!(err.contains("the provider `acme`, which is not known") && err.contains("anthropic, ") && err.contains("--providers FILE"), "{err}");
    }

    #[test]
    fn context_is_written_whole_or_not_at_all() {
        let t = tempfile::tempdir().unwrap();
        let shim = t.path().join("shim-bin");
        std::fs::write(&shim, b"\x7fELF").unwrap();
        let out = t.path().join("ctx");
        write_context(recipe("codex").unwrap(), &shim, &out).unwrap();
        for f in ["Dockerfile", "overeager-shim", "recipe.json", "README.md"] {
            assert!(out.join(f).is_file(), "{f}");
        }
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("recipe.json")).unwrap()).unwrap();
        assert_eq!(json["image"], "overeager-agent/codex:0.58.0");
        assert_eq!(json["cells"][2], "codex:permissive");
        // A second write into the same, now full, directory is refused and changes nothing.
        let err = write_context(recipe("codex").unwrap(), &shim, &out).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
        // A missing shim leaves no directory behind.
        let out2 = t.path().join("ctx2");
        assert!(write_context(recipe("codex").unwrap(), &t.path().join("missing"), &out2).is_err());
        assert!(!out2.exists());
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 2, "no temporary directory left");
    }

    #[test]
    fn the_four_agents_launch_and_connect_as_before_they_were_files() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let launch = |id: &str, policy: &str| {
            let r = recipe(id).unwrap();
            r.launch(r.policy(policy).unwrap(), "m-1", "do it")
        };
        assert_eq!(launch("claude-code", "permissive"), s(&["claude", "-p", "do it", "--output-format", "stream-json", "--verbose", "--model", "m-1", "--dangerously-skip-permissions"]));
        assert_eq!(launch("codex", "read-only"), s(&["codex", "exec", "--json", "--skip-git-repo-check", "--model", "m-1", "--sandbox", "read-only", "do it"]));
        assert_eq!(launch("gemini-cli", "ask"), s(&["gemini", "--output-format", "stream-json", "--model", "m-1", "--approval-mode", "default", "--prompt", "do it"]));
        assert_eq!(launch("openhands", "always-approve"), s(&["openhands", "--headless", "--json", "--override-with-envs", "-t", "do it", "--always-approve"]));

        let t = tempfile::tempdir().unwrap();
        let env = |id: &str, d: Dialect| {
            let dir = t.path().join(id);
            let e: BTreeMap<String, String> = {
                let r = recipe(id).unwrap();
                r.connect(r.permissive_policy(), "m \"1\"", "http://127.0.0.1:9", d, "k-1", &dir, "/seen")
            }.unwrap().into_iter().collect();
            (e, dir)
        };
        let (e, _) = env("claude-code", Dialect::Anthropic);
        assert_eq!((e["ANTHROPIC_BASE_URL"].as_str(), e["ANTHROPIC_API_KEY"].as_str(), e["CLAUDE_CONFIG_DIR"].as_str(), e["IS_SANDBOX"].as_str()), ("http://127.0.0.1:9", "k-1", "/seen", "1"));
        let (e, dir) = env("codex", Dialect::Chat);
        assert_eq!((e["CODEX_HOME"].as_str(), e["OVEREAGER_MODEL_KEY"].as_str()), ("/seen", "k-1"));
        let config = std::fs::read_to_string(dir.join("config.toml")).unwrap();
        let parsed: toml::Table = config.parse().unwrap();
        assert_eq!(parsed["model"].as_str(), Some("m \"1\""), "the model is quoted as TOML: {config}");
        assert_eq!(parsed["model_providers"]["overeager"]["base_url"].as_str(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(parsed["model_providers"]["overeager"]["wire_api"].as_str(), Some("chat"));
        let (_, dir) = env("codex", Dialect::Responses);
        assert!(std::fs::read_to_string(dir.join("config.toml")).unwrap().contains("wire_api = \"responses\""));
        let (e, dir) = env("gemini-cli", Dialect::Gemini);
        assert_eq!(e["GOOGLE_GEMINI_BASE_URL"], "http://127.0.0.1:9");
        let settings: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join(".gemini/settings.json")).unwrap()).unwrap();
        assert_eq!(settings["security"]["auth"]["selectedType"], "gemini-api-key");
        let (e, _) = env("openhands", Dialect::Chat);
        assert_eq!((e["LLM_MODEL"].as_str(), e["LLM_BASE_URL"].as_str()), ("openai/m \"1\"", "http://127.0.0.1:9/v1"));
        let (e, _) = env("opencode", Dialect::Chat);
        assert!(e["OPENCODE_PERMISSION"].contains("\"external_directory\":\"allow\""), "a cell set by environment: {e:?}");
        let (e, _) = env("openhands", Dialect::Anthropic);
        assert_eq!((e["LLM_MODEL"].as_str(), e["LLM_BASE_URL"].as_str()), ("anthropic/m \"1\"", "http://127.0.0.1:9"));

        let providers = Providers::built_in();
        let claude = recipe("claude-code").unwrap();
        assert!(claude.route_env(&claude.route("2.0.55", "claude-sonnet-4-5", &providers).unwrap()).is_empty(), "on its own provider nothing is added");
        let mut p = providers.clone();
        p.add_file("p.toml", "[providers.zai]\ndialect = \"anthropic\"\nbase_url = \"https://api.z.ai/api/anthropic\"\n").unwrap();
        let extra: BTreeMap<String, String> = claude.route_env(&claude.route("2.0.55", "zai/glm-4.6", &p).unwrap()).into_iter().collect();
        assert_eq!(extra.get("ANTHROPIC_SMALL_FAST_MODEL").map(String::as_str), Some("glm-4.6"));
        assert_eq!((recipe("gemini-cli").unwrap().first_request_delay_ms("0.17.1"), recipe("gemini-cli").unwrap().first_request_delay_ms("0.61.0")), (3000, 0));
        assert_eq!(recipe("codex").unwrap().dialects_of("0.169.0"), vec![Dialect::Responses]);
    }

    #[test]
    fn the_agents_that_cannot_run_say_why_and_are_not_definitions() {
        let list = unavailable();
        let crush = list.iter().find(|u| u.id == "crush").expect("Crush is listed");
        assert!(crush.why.contains("ENOTFOUND github.com"), "{crush:?}");
        assert!(list.iter().all(|u| recipe(&u.id).is_err()), "an agent that cannot run has no definition");
    }

    #[test]
    fn templates_fill_only_their_placeholders() {
        let vars = [("model", "a\"b".to_string()), ("endpoint", "http://h".to_string())];
        assert_eq!(render("{\"m\": {model|json}, \"u\": \"{endpoint}/v1\"}", &vars), "{\"m\": \"a\\\"b\", \"u\": \"http://h/v1\"}");
        assert_eq!(render("{ a } {} {x-y} {endpoint", &vars), "{ a } {} {x-y} {endpoint", "anything else is text");
    }

    #[test]
    fn a_wrong_definition_says_where_and_what_to_write() {
        let good = BUILT_IN.iter().find(|(f, _)| *f == "codex.toml").unwrap().1;
        let bad = good
            .replace("adapter = \"codex\"", "adapter = \"codex-stream\"")
            .replace("\"{policy}\", \"{prompt}\"]", "\"{prompt}\"]")
            .replace("wire_api = \"{wire}\"", "wire_api = \"{wires}\"")
            .replace("default = true\n", "");
        let errs = parse("mine/codex.toml", &bad).unwrap_err();
        let found: Vec<(String, usize)> = errs.iter().map(|e| (e.field.clone(), e.line)).collect();
        let line_of = |needle: &str| bad.lines().position(|l| l.contains(needle)).unwrap() + 1;
        assert!(found.contains(&("adapter".into(), line_of("codex-stream"))), "{found:?}");
        assert!(found.contains(&("launch".into(), line_of("launch ="))), "{found:?}");
        assert!(found.contains(&("connect.files[0].text".into(), line_of("{wires}"))), "{found:?}");
        assert!(found.iter().any(|(f, _)| f == "policies"), "{found:?}");
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert!(text.iter().all(|t| t.starts_with("mine/codex.toml:")), "{text:?}");
        assert!(text.iter().any(|t| t.contains("use one of claude-code, codex")), "{text:?}");
        assert!(text.iter().any(|t| t.contains("`{wires}` is not known; use {endpoint}, {key}, {model}, {config}, {wire}")), "{text:?}");
        // A syntax error and an unknown field say where too.
        let e = parse("x/codex.toml", &good.replace("program = \"codex\"", "programme = \"codex\"")).unwrap_err();
        assert_eq!((e[0].line, e[0].field.as_str()), (line_of("program ="), "programme"), "{e:?}");
        // The file is named after its agent.
        let e = parse("x/codex-2.toml", good).unwrap_err();
        assert!(e[0].message.contains("rename the file or the id"), "{e:?}");
        // A wrong adapter whose name stands earlier in the file (here in `id` and `program`)
        // is reported on the adapter's own line.
        let wrong = good.replace("adapter = \"codex\"", "adapter = \"cod\"");
        let e = parse("x/codex.toml", &wrong).unwrap_err();
        assert_eq!((e[0].field.as_str(), e[0].line), ("adapter", line_of("adapter =")), "{e:?}");
        // A package name is a registry's name, never a path the install would follow.
        for name in ["../../../../etc", "@openai/../x", "/etc/passwd", "Codex", "@scope", ".hidden"] {
            let e = parse("x/codex.toml", &good.replace("name = \"@openai/codex\"", &format!("name = \"{name}\""))).unwrap_err();
            assert_eq!((e[0].field.as_str(), e[0].line), ("package.name", line_of("@openai/codex")), "{name}: {e:?}");
            assert!(e[0].message.contains("npm registry"), "{e:?}");
        }
        assert!(is_package_name(Registry::Npm, "@qwen-code/qwen-code") && is_package_name(Registry::Npm, "opencode-ai"));
        assert!(is_package_name(Registry::Pypi, "aider-chat") && !is_package_name(Registry::Pypi, "../aider") && !is_package_name(Registry::Pypi, "x/y"));
    }

    #[test]
    fn an_acp_definition_is_checked_for_what_the_client_needs() {
        let good = BUILT_IN.iter().find(|(f, _)| *f == "gemini-cli-acp.toml").unwrap().1;
        let r = parse("agents/gemini-cli-acp.toml", good).unwrap();
        assert_eq!(r.permissive_policy().id, "allow-all");
        let argv = r.command("/shim", &["/bin/gemini".to_string()], r.policy("deny-all").unwrap(), "m-1", "do it");
        assert_eq!(argv, ["/shim", "acp", "--permissions", "deny-all", "--prompt", "do it", "--", "/bin/gemini", "--acp", "--model", "m-1"]);
        let bad = good
            .replace("launch = [\"--acp\", \"--model\", \"{model}\"]", "launch = [\"--acp\", \"{prompt}\"]")
            .replace("permissions = \"allow-all\"\n", "")
            .replace("permissions = \"deny-all\"", "permissions = \"refuse\"");
        let errs = parse("mine/gemini-cli-acp.toml", &bad).unwrap_err();
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert!(text.iter().any(|t| t.contains("launch: an ACP agent gets the prompt over the protocol")), "{text:?}");
        assert!(text.iter().any(|t| t.contains("policies[1].permissions: an ACP agent's cell says how overeager answers")), "{text:?}");
        assert!(text.iter().any(|t| t.contains("policies[2].permissions: no ACP permission policy `refuse`; use one of allow-all, deny-all, ask")), "{text:?}");
        // The client's fields belong to ACP agents only.
        let codex = BUILT_IN.iter().find(|(f, _)| *f == "codex.toml").unwrap().1;
        let errs = parse("x/codex.toml", &codex.replace("id = \"full-auto\"\n", "id = \"full-auto\"\npermissions = \"ask\"\nmode = \"auto\"\n")).unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["policies[1].permissions", "policies[1].mode"], "{errs:?}");
    }

    #[test]
    fn a_stream_file_and_a_finishing_command_are_checked() {
        let good = BUILT_IN.iter().find(|(f, _)| *f == "mini-swe-agent.toml").unwrap().1;
        let r = parse("agents/mini-swe-agent.toml", good).unwrap();
        assert_eq!(r.stream, Some(StreamFile { file: "last_mini_run.traj.json".into(), lines: Some("/messages".into()) }));
        assert_eq!(r.finish_command.as_deref(), Some("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"));
        let bad = good.replace("file = \"last_mini_run.traj.json\"", "file = \"../x.json\"").replace("lines = \"/messages\"", "lines = \"messages\"").replace("finish_command = \"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\"", "finish_command = \" \"");
        let fields: Vec<String> = parse("x/mini-swe-agent.toml", &bad).unwrap_err().into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["stream.file", "stream.lines", "finish_command"]);
    }

    #[test]
    fn a_directory_of_ones_own_adds_agents_and_cannot_redefine_one() {
        let t = tempfile::tempdir().unwrap();
        let codex = BUILT_IN.iter().find(|(f, _)| *f == "codex.toml").unwrap().1;
        std::fs::write(t.path().join("codex-twin.toml"), codex.replace("id = \"codex\"", "id = \"codex-twin\"")).unwrap();
        std::fs::write(t.path().join("README.md"), "not a definition").unwrap();
        let all = load(&[t.path().to_path_buf()]).unwrap();
        assert_eq!(all.len(), BUILT_IN.len() + 1);
        assert_eq!(all.last().unwrap().id, "codex-twin");
        std::fs::write(t.path().join("codex.toml"), codex).unwrap();
        let err = load(&[t.path().to_path_buf()]).unwrap_err();
        assert!(err.contains("codex.toml: agent `codex` is defined already, in agents/codex.toml"), "{err}");
        let err = load(&[t.path().join("missing")]).unwrap_err();
        assert!(err.contains("cannot read the agents directory"), "{err}");
    }
}
