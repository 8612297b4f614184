//! An agent cell: what plays one column of an experiment, parsed from its id once.
//!
//! Ids are written `scripted:<play>`, `sim:<policy>` or `<agent>[@<version>]:<policy>:<model>`
//! on the command line, in plans and in a bundle's manifest; [`AgentCell::parse`] is the only
//! place that takes one apart, and every stage reads the parts from the type.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::PlayKind;
use crate::model::{ModelSource, PlayedBy};

/// The model name prefix that selects the built-in scripted model endpoint:
/// `scripted-cautious`, `scripted-moderate`, `scripted-aggressive`.
pub const SCRIPTED_MODEL: &str = "scripted-";

/// The model name prefix that replays a recorded run's model channel: `replay:<bundle>`.
pub const REPLAY_MODEL: &str = "replay:";

/// What answers a real agent's model calls, as the model part of its cell names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelPlayer<'a> {
    /// The scripted model, playing one of the scenario's plays (`scripted-<play>`).
    Scripted(PlayKind),
    /// The model channel of a recorded bundle, replayed (`replay:<bundle>`).
    Replay(&'a str),
    /// A model API: `<provider>/<model>`, or a model name.
    Provider(&'a str),
}

impl<'a> ModelPlayer<'a> {
    /// Reads a cell's model part.
    pub fn of(model: &'a str) -> ModelPlayer<'a> {
        if let Some(play) = model.strip_prefix(SCRIPTED_MODEL).and_then(|p| p.parse().ok()) {
            ModelPlayer::Scripted(play)
        } else if let Some(bundle) = model.strip_prefix(REPLAY_MODEL) {
            ModelPlayer::Replay(bundle)
        } else {
            ModelPlayer::Provider(model)
        }
    }

    /// Whether overeager's own model endpoint answers (scripted or replayed) rather than a
    /// model API: the agent then needs no network and no key.
    pub fn is_offline(self) -> bool {
        !matches!(self, ModelPlayer::Provider(_))
    }
}

/// Who plays a run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AgentCell {
    /// overeager's own player replaying one of the scenario's plays: no framework, no model.
    Scripted { play: PlayKind },
    /// A simulated policy (`permissive`, `ask`, `wary`) replaying plays drawn at random.
    Sim { policy: String },
    /// A real agent CLI under one of its permission policies, on one model.
    Cli {
        /// The agent definition's id (`claude-code`).
        agent: String,
        /// The version the id names (`claude-code@2.0.55`); none for the definition's pinned
        /// one. A manifest records the version that ran beside the cell.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<String>,
        /// The permission policy's id (`permissive`).
        policy: String,
        /// The model: `<provider>/<name>`, `scripted-<play>` or `replay:<bundle>`.
        model: String,
    },
}

/// Why an agent id is not a cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellError {
    /// Not of any cell's shape (no `:`, or an empty part).
    Shape(String),
    /// `scripted:` with a play that is none.
    Play(String),
    /// A real agent's id without a policy or a model.
    Incomplete {
        /// The agent's name as written before any `@version`.
        agent: String,
        /// The agent's name as written, with any `@version`.
        written: String,
    },
    /// A model that is one of overeager's own but malformed (`replay:` without a bundle,
    /// `scripted-` with an unknown play).
    Model(String),
}

impl fmt::Display for CellError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CellError::Shape(id) => write!(f, "`{id}` is no agent: scripted:<play>, sim:<policy> or <agent>:<policy>:<model>"),
            CellError::Play(e) | CellError::Model(e) => f.write_str(e),
            CellError::Incomplete { written, .. } => write!(f, "a real agent is <agent>:<policy>:<model>, e.g. `{written}:<policy>:<model>`"),
        }
    }
}

impl std::error::Error for CellError {}

impl AgentCell {
    /// Reads an agent id. Only the shape is checked here: whether the agent, its version and
    /// its policy exist is for the agent definitions to say.
    pub fn parse(id: &str) -> Result<AgentCell, CellError> {
        let shape = || CellError::Shape(id.to_string());
        let (head, rest) = id.split_once(':').filter(|(h, r)| !h.is_empty() && !r.is_empty()).ok_or_else(shape)?;
        match head {
            "scripted" => rest.parse().map(|play| AgentCell::Scripted { play }).map_err(CellError::Play),
            "sim" => Ok(AgentCell::Sim { policy: rest.to_string() }),
            _ => {
                let (agent, version) = match head.split_once('@') {
                    Some((a, v)) if !a.is_empty() && !v.is_empty() => (a, Some(v.to_string())),
                    Some(_) => return Err(shape()),
                    None => (head, None),
                };
                let Some((policy, model)) = rest.split_once(':').filter(|(p, m)| !p.is_empty() && !m.trim().is_empty()) else {
                    return Err(CellError::Incomplete { agent: agent.to_string(), written: head.to_string() });
                };
                if model.strip_prefix(REPLAY_MODEL).is_some_and(|b| b.trim().is_empty()) {
                    return Err(CellError::Model(format!("`{id}`: a replayed model names the bundle to replay: {REPLAY_MODEL}<bundle directory or .oeb>")));
                }
                if let Some(play) = model.strip_prefix(SCRIPTED_MODEL) {
                    play.parse::<PlayKind>().map_err(|e| CellError::Model(format!("`{id}`: the scripted model is {SCRIPTED_MODEL}<play>: {e}")))?;
                }
                Ok(AgentCell::Cli { agent: agent.to_string(), version, policy: policy.to_string(), model: model.to_string() })
            }
        }
    }

    /// The id, as [`AgentCell::parse`] reads it.
    pub fn id(&self) -> String {
        match self {
            AgentCell::Scripted { play } => format!("scripted:{play}"),
            AgentCell::Sim { policy } => format!("sim:{policy}"),
            AgentCell::Cli { agent, version, policy, model } => match version {
                Some(v) => format!("{agent}@{v}:{policy}:{model}"),
                None => format!("{agent}:{policy}:{model}"),
            },
        }
    }

    /// The agent's name without version or policy: `scripted`, `sim`, `claude-code`.
    pub fn name(&self) -> &str {
        match self {
            AgentCell::Scripted { .. } => "scripted",
            AgentCell::Sim { .. } => "sim",
            AgentCell::Cli { agent, .. } => agent,
        }
    }

    /// The version the id names, if it names one.
    pub fn version(&self) -> Option<&str> {
        match self {
            AgentCell::Cli { version, .. } => version.as_deref(),
            _ => None,
        }
    }

    /// A real agent's permission policy, or a simulated one's.
    pub fn policy(&self) -> Option<&str> {
        match self {
            AgentCell::Scripted { .. } => None,
            AgentCell::Sim { policy } | AgentCell::Cli { policy, .. } => Some(policy),
        }
    }

    /// A real agent's model as the id names it.
    pub fn model(&self) -> Option<&str> {
        match self {
            AgentCell::Cli { model, .. } => Some(model),
            _ => None,
        }
    }

    /// Whether overeager itself plays (the scripted agent or a simulated policy): such a run
    /// has no framework, so all of it is the agent's.
    pub fn is_harness(&self) -> bool {
        !matches!(self, AgentCell::Cli { .. })
    }

    /// Whether the behaviour is simulated (reports must say so).
    pub fn is_simulated(&self) -> bool {
        matches!(self, AgentCell::Sim { .. })
    }

    /// What answers a real agent's model calls (`None` when overeager itself plays).
    pub fn model_player(&self) -> Option<ModelPlayer<'_>> {
        self.model().map(ModelPlayer::of)
    }

    /// What the cell alone says played its model: the scripted agent and a real CLI on the
    /// scripted model the scripted model, a simulated policy itself, `replay:` a replay;
    /// anything else a provider, named by the model's `<provider>/` (whose kind only the run
    /// can tell).
    pub fn played_by(&self) -> PlayedBy {
        let source = match self {
            AgentCell::Scripted { .. } => ModelSource::Scripted,
            AgentCell::Sim { .. } => ModelSource::Simulated,
            AgentCell::Cli { model, .. } if model.starts_with("scripted") => ModelSource::Scripted,
            AgentCell::Cli { model, .. } if model == "replay" || model.starts_with(REPLAY_MODEL) => ModelSource::Replay,
            AgentCell::Cli { model, .. } => ModelSource::Provider { provider: model.split_once('/').map_or("", |(p, _)| p).to_string() },
        };
        PlayedBy::direct(source)
    }
}

impl fmt::Display for AgentCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id())
    }
}

impl std::str::FromStr for AgentCell {
    type Err = CellError;
    fn from_str(s: &str) -> Result<Self, CellError> {
        AgentCell::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_of_id_reads_back_as_written() {
        for id in ["scripted:cautious", "sim:ask", "claude-code:permissive:anthropic/claude-sonnet-4-5", "claude-code@2.0.55:ask:scripted-moderate", "codex:permissive:replay:/b/run.oeb", "aider:default:local/smollm2"] {
            let cell = AgentCell::parse(id).unwrap();
            assert_eq!(cell.id(), id);
            let json = serde_json::to_string(&cell).unwrap();
            assert_eq!(serde_json::from_str::<AgentCell>(&json).unwrap(), cell, "{json}");
        }
        let cell = AgentCell::parse("claude-code@2.0.55:ask:scripted-moderate").unwrap();
        assert_eq!((cell.name(), cell.version(), cell.policy()), ("claude-code", Some("2.0.55"), Some("ask")));
        assert_eq!(cell.model_player(), Some(ModelPlayer::Scripted(PlayKind::Moderate)));
        assert!(cell.model_player().is_some_and(ModelPlayer::is_offline) && !cell.is_harness());
        assert_eq!(AgentCell::parse("codex:permissive:replay:/b/run.oeb").unwrap().model_player(), Some(ModelPlayer::Replay("/b/run.oeb")));
        assert_eq!(AgentCell::parse("aider:default:local/smollm2").unwrap().model_player(), Some(ModelPlayer::Provider("local/smollm2")));
        assert_eq!(AgentCell::parse("sim:ask").unwrap().model_player(), None);
        assert_eq!(serde_json::to_value(AgentCell::parse("scripted:aggressive").unwrap()).unwrap(), serde_json::json!({"kind": "scripted", "play": "aggressive"}));
    }

    #[test]
    fn a_malformed_id_says_what_is_wrong() {
        assert!(matches!(AgentCell::parse("claude-code"), Err(CellError::Shape(_))));
        assert!(matches!(AgentCell::parse("@1:p:m"), Err(CellError::Shape(_))));
        assert!(matches!(AgentCell::parse("scripted:bold"), Err(CellError::Play(e)) if e.contains("cautious, moderate or aggressive")));
        assert_eq!(AgentCell::parse("codex@1.2:permissive"), Err(CellError::Incomplete { agent: "codex".into(), written: "codex@1.2".into() }));
        assert_eq!(AgentCell::parse("codex:permissive: "), Err(CellError::Incomplete { agent: "codex".into(), written: "codex".into() }));
        assert!(matches!(AgentCell::parse("codex:permissive:replay:"), Err(CellError::Model(e)) if e.contains("names the bundle")));
        assert!(matches!(AgentCell::parse("codex:permissive:scripted-bold"), Err(CellError::Model(e)) if e.contains("scripted-<play>")));
    }
}
