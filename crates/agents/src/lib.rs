//! The agents overeager runs, as data: their definitions (`agents/*.toml`: the package, how to
//! install it, its permission policies, how to connect it to a model), the model providers and
//! their keys, the gateway process between an agent and its model, the scripted model endpoint,
//! a real model server on this machine, and the simulated policies. What runs is an
//! [`AgentSpec`], read from an agent cell's id once; the executors of `overeager-run` start it.

pub mod child;
pub mod definition;
pub mod gateway;
pub mod install;
pub mod local_model;
pub mod model_endpoint;
pub mod providers;
pub mod secrets;
pub mod sim;

use std::path::PathBuf;

use overeager_core::cell::CellError;
use overeager_core::{AgentCell, ModelPlayer, PlayKind, Variant};

/// Which agent runs, parsed from `framework:detail` (e.g. `scripted:cautious`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentSpec {
    /// A reference agent replaying one of the scenario's plays.
    Scripted(PlayKind),
    /// A simulated agent: replays a play drawn at random by its policy ([`sim`]).
    Sim(sim::SimPolicy),
    /// A real agent from its recipe ([`definition`]), under one permission policy, on one model:
    /// `claude-code:permissive:anthropic/claude-sonnet-4-5`. On the scripted model
    /// (`scripted-<play>`) it runs on any executor; on a provider's model, contained (Docker,
    /// Kubernetes) or, asked for, uncontained on this machine.
    Agent { recipe: &'static definition::Recipe, version: &'static str, policy: &'static definition::Policy, model: String },
}

impl AgentSpec {
    /// The agents this build can run, as a sentence.
    pub fn known() -> String {
        let real = match definition::all() {
            Ok(all) => all.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", "),
            Err(e) => format!("none, since {e:#}"),
        };
        format!("scripted:cautious, scripted:moderate, scripted:aggressive, sim:permissive, sim:ask, sim:wary, and <agent>:<policy>:<model> for {real} (see `overeager agent list`)")
    }

    /// The id as written on the command line.
    pub fn id(&self) -> String {
        match self {
            AgentSpec::Scripted(k) => format!("scripted:{k}"),
            AgentSpec::Sim(p) => format!("sim:{}", p.as_str()),
            AgentSpec::Agent { model, .. } => format!("{}:{model}", self.framework()),
        }
    }

    /// The framework name; a real agent's includes its permission policy, since the same
    /// agent asking first and not asking are different cells.
    pub fn framework(&self) -> String {
        match self {
            AgentSpec::Scripted(_) => "scripted".into(),
            AgentSpec::Sim(_) => "sim".into(),
            AgentSpec::Agent { recipe, version, policy, .. } => format!("{}:{}", recipe.versioned_id(version), policy.id),
        }
    }

    /// A real agent's stream adapter (its definition's `adapter`).
    pub fn adapter(&self) -> Option<&'static str> {
        match self {
            AgentSpec::Agent { recipe, .. } => Some(recipe.adapter.as_str()),
            _ => None,
        }
    }

    /// A real agent's version: the pinned one, or the one the spec names (`claude-code@2.1.330`).
    pub fn agent_version(&self) -> Option<&'static str> {
        match self {
            AgentSpec::Agent { version, .. } => Some(version),
            _ => None,
        }
    }

    /// The model label.
    pub fn model(&self) -> String {
        match self {
            AgentSpec::Scripted(k) => k.to_string(),
            AgentSpec::Sim(p) => p.as_str().to_string(),
            AgentSpec::Agent { model, .. } => model.clone(),
        }
    }

    /// Whether the agent's behaviour is simulated (reports must say so).
    pub fn simulated(&self) -> bool {
        matches!(self, AgentSpec::Sim(_))
    }

    /// The play a scripted or simulated agent replays in this run, or a real agent's scripted
    /// model plays (`None` for a real agent on a real model).
    pub fn play(&self, scenario: &overeager_core::Scenario, variant: Variant, seed: u64) -> Option<PlayKind> {
        match self {
            AgentSpec::Scripted(k) => Some(*k),
            AgentSpec::Sim(p) => Some(p.play_for(scenario, variant, seed)),
            AgentSpec::Agent { .. } => match self.model_player() {
                Some(ModelPlayer::Scripted(play)) => Some(play),
                _ => None,
            },
        }
    }

    /// Who plays, as the manifest records it: a real agent's version is the one that runs,
    /// named or pinned.
    pub fn cell(&self) -> AgentCell {
        match self {
            AgentSpec::Scripted(play) => AgentCell::Scripted { play: *play },
            AgentSpec::Sim(p) => AgentCell::Sim { policy: p.as_str().to_string() },
            AgentSpec::Agent { recipe, version, policy, model } => AgentCell::Cli { agent: recipe.id.clone(), version: Some(version.to_string()), policy: policy.id.clone(), model: model.clone() },
        }
    }

    /// What answers a real agent's model calls (`None` for overeager's own players).
    pub fn model_player(&self) -> Option<ModelPlayer<'_>> {
        match self {
            AgentSpec::Agent { model, .. } => Some(ModelPlayer::of(model)),
            _ => None,
        }
    }

    /// Whether a real agent talks to overeager's own model endpoint (scripted or replayed)
    /// rather than to a model API: it then needs no network and no key.
    pub fn offline_model(&self) -> bool {
        self.model_player().is_some_and(ModelPlayer::is_offline)
    }

    /// The judge's attribution rules a real agent's definition names that hold for the
    /// version that runs (a rule bound to other versions is left out); none for overeager's
    /// own players.
    pub fn attribution_rules(&self) -> Vec<String> {
        match self {
            AgentSpec::Agent { recipe, version, .. } => recipe.attribution_rules(version),
            _ => Vec::new(),
        }
    }

    /// Where a real agent's model calls go on `providers`, for a real agent on a provider's
    /// model (`None` for any other agent): its provider, the model's name there, and whether
    /// the gateway bridges the agent's dialect to the provider's.
    pub fn route(&self, providers: &providers::Providers) -> Option<anyhow::Result<definition::Route>> {
        match self {
            AgentSpec::Agent { recipe, version, model, .. } if !self.offline_model() => Some(recipe.route(version, model, providers)),
            _ => None,
        }
    }
}

impl std::str::FromStr for AgentSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let unknown = || format!("unknown agent `{s}`; known agents: {}", AgentSpec::known());
        match AgentCell::parse(s) {
            Ok(AgentCell::Scripted { play }) => Ok(AgentSpec::Scripted(play)),
            Ok(AgentCell::Sim { policy }) => policy.parse().map(AgentSpec::Sim),
            Ok(AgentCell::Cli { agent, version, policy, model }) => {
                let recipe = definition::by_id(&agent).ok_or_else(unknown)?;
                let version = match version {
                    Some(v) => recipe.version(&v)?,
                    None => recipe.package.version(),
                };
                Ok(AgentSpec::Agent { recipe, version, policy: recipe.policy(&policy)?, model })
            }
            Err(CellError::Incomplete { agent, written }) if let Some(recipe) = definition::by_id(&agent) => {
                let policies: Vec<&str> = recipe.policies.iter().map(|p| p.id.as_str()).collect();
                Err(format!("`{s}`: a real agent is <agent>:<policy>:<model>, e.g. `{written}:{}:<model>` (policies: {})", policies[0], policies.join(", ")))
            }
            Err(CellError::Play(e) | CellError::Model(e)) => Err(e),
            Err(_) => Err(unknown()),
        }
    }
}

pub use overeager_core::cell::{REPLAY_MODEL, SCRIPTED_MODEL};

/// Finds the shim binary: `$OVEREAGER_SHIM`, else the static build next to this executable's
/// target directory, else `overeager-shim` beside this executable.
pub fn locate_shim() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("OVEREAGER_SHIM").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() { Ok(p) } else { Err(format!("OVEREAGER_SHIM={} does not exist", p.display())) };
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut candidates = Vec::new();
    for dir in exe.ancestors().skip(1).take(4) {
        candidates.push(dir.join("x86_64-unknown-linux-musl/shim/overeager-shim"));
    }
    if let Some(dir) = exe.parent() {
        candidates.push(dir.join("overeager-shim"));
        if let Some(up) = dir.parent() {
            candidates.push(up.join("overeager-shim"));
        }
    }
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        "cannot find the overeager-shim binary: build it with `cargo build --profile shim -p overeager-shim \
         --target x86_64-unknown-linux-musl` (scripts/build.sh does), or set OVEREAGER_SHIM"
            .to_string()
    })
}

/// Finds `name` on this machine's PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| {
        std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
    })
}
