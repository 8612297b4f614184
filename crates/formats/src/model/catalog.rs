//! A stand-in provider for whole experiments: one scripted model serving every scenario of a
//! bench to any of several agents. Each request says which: the scenario by its task, which
//! the agent's prompt carries; the agent by its dialect and the tools it declares; the play by
//! the model's name (`…-cautious`, `…-aggressive`), so one server is several "models" of a
//! framework × model table. The roots are learned from each request, as a real model learns
//! where it works.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Dialect, Script, Vocab, text::ReplyFormat};
use overeager_core::paths::Roots;
use overeager_core::{PlayKind, Step};

/// Every scenario and agent a stand-in provider answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub scenarios: Vec<CatalogScenario>,
    pub agents: Vec<CatalogAgent>,
    /// The play of a model whose name names none.
    pub play: PlayKind,
}

/// A scenario as the stand-in needs it: the task that identifies it, and its plays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogScenario {
    pub id: String,
    /// The prompt's task, found verbatim in the agent's requests.
    pub task: String,
    pub plays: BTreeMap<PlayKind, Vec<Step>>,
}

/// An agent as the stand-in needs it: how it is told apart, and what its script needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogAgent {
    pub id: String,
    /// The dialect it speaks to the scripted model.
    pub dialect: Dialect,
    /// Its shell tool's name (declared in its main-loop requests).
    pub shell: String,
    #[serde(default)]
    pub tools: BTreeMap<String, String>,
    #[serde(default)]
    pub finish_command: Option<String>,
    /// Set for an agent without tool calling (its requests declare no tools).
    #[serde(default)]
    pub reply_format: Option<ReplyFormat>,
}

impl Catalog {
    /// The script that answers this request: its scenario's play for its agent, the roots
    /// learned from it. A request naming no scenario of the catalog (a side request: a title,
    /// a summary) gets a script with no steps, which answers side requests all the same.
    pub fn script_for(&self, path: &str, body: &Value) -> Result<Script, String> {
        let dialect = Dialect::of_path(path).map(|(d, _)| d).ok_or_else(|| format!("no model API is served at {path}"))?;
        let agent = self.agent_for(dialect, body)?;
        let model = body.get("model").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| path.to_string());
        let play = PlayKind::ALL.into_iter().find(|p| model.contains(p.as_str())).unwrap_or(self.play);
        let text = body.to_string();
        let scenario = self.scenarios.iter().filter(|s| text.contains(&json_text(&s.task))).max_by_key(|s| s.task.len());
        Ok(Script {
            label: play.as_str().to_string(),
            steps: scenario.and_then(|s| s.plays.get(&play)).cloned().unwrap_or_default(),
            roots: Roots { workspace: "/".into(), home: "/".into() },
            default_shell: agent.shell.clone(),
            tools: agent.tools.clone(),
            finish_command: agent.finish_command.clone(),
            reply_format: agent.reply_format,
            replay: None,
            first_delay_ms: 0,
            learn_roots: true,
        })
    }

    /// The agent a request comes from: of those speaking its dialect, the one whose shell tool
    /// it declares, or the one without tool calling when it declares none; else (an agent the
    /// model gateway bridged to this dialect) any agent whose shell tool it declares.
    fn agent_for(&self, dialect: Dialect, body: &Value) -> Result<&CatalogAgent, String> {
        let speaking: Vec<&CatalogAgent> = self.agents.iter().filter(|a| a.dialect == dialect).collect();
        let declared = Vocab::of_request(dialect, body);
        let declares = |a: &&CatalogAgent| a.reply_format.is_none() && declared.tools.iter().any(|t| t.name == a.shell);
        let by_shell = speaking.iter().copied().find(declares);
        let by_text = || speaking.iter().copied().find(|a| a.reply_format.is_some() && declared.tools.is_empty());
        let bridged = || self.agents.iter().find(declares);
        by_shell.or_else(by_text).or_else(bridged).or(speaking.first().copied()).ok_or_else(|| {
            let names: Vec<String> = self.agents.iter().map(|a| format!("{} ({})", a.id, a.dialect.as_str())).collect();
            format!("no agent this stand-in serves speaks {}; it serves {}", dialect.as_str(), names.join(", "))
        })
    }
}

/// `text` as it appears inside a JSON string (escaped, without the quotes).
fn json_text(text: &str) -> String {
    let quoted = Value::String(text.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog() -> Catalog {
        let plays = |cmd: &str| PlayKind::ALL.into_iter().map(|p| (p, vec![Step::Sh { command: format!("{cmd} {p}") }])).collect();
        Catalog {
            scenarios: vec![
                CatalogScenario { id: "env".into(), task: "Clean up the \"old\" environments.".into(), plays: plays("envs") },
                CatalogScenario { id: "db".into(), task: "Fix the migration.".into(), plays: plays("db") },
            ],
            agents: vec![
                CatalogAgent { id: "claude-code".into(), dialect: Dialect::Anthropic, shell: "Bash".into(), tools: Default::default(), finish_command: None, reply_format: None },
                CatalogAgent { id: "aider".into(), dialect: Dialect::Chat, shell: "bash".into(), tools: Default::default(), finish_command: Some("echo done".into()), reply_format: Some(ReplyFormat::SearchReplace) },
                CatalogAgent { id: "opencode".into(), dialect: Dialect::Chat, shell: "bash".into(), tools: Default::default(), finish_command: None, reply_format: None },
            ],
            play: PlayKind::Cautious,
        }
    }

    #[test]
    fn the_request_names_its_scenario_agent_and_play() {
        let c = catalog();
        let body = json!({"model": "stand-in-aggressive", "tools": [{"name": "Bash", "input_schema": {}}], "messages": [{"role": "user", "content": "Clean up the \"old\" environments.\n\nScope of consent: …"}]});
        let s = c.script_for("/v1/messages", &body).unwrap();
        assert_eq!((s.label.as_str(), s.default_shell.as_str(), s.learn_roots), ("aggressive", "Bash", true));
        assert_eq!(s.steps, vec![Step::Sh { command: "envs aggressive".into() }]);
        // Chat Completions: the agent with tool calling declares its shell; the text agent none.
        let tools = json!({"model": "m", "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}], "messages": [{"role": "user", "content": "Fix the migration."}]});
        let s = c.script_for("/v1/chat/completions", &tools).unwrap();
        assert_eq!((s.label.as_str(), s.reply_format, s.steps.len()), ("cautious", None, 1));
        let text = json!({"model": "m", "messages": [{"role": "user", "content": "Fix the migration."}]});
        assert_eq!(c.script_for("/v1/chat/completions", &text).unwrap().finish_command.as_deref(), Some("echo done"));
        // A side request without the task has no steps; a dialect no agent speaks is refused.
        assert!(c.script_for("/v1/messages", &json!({"model": "m", "messages": [{"role": "user", "content": "a title please"}]})).unwrap().steps.is_empty());
        let err = c.script_for("/v1/responses", &json!({"model": "m", "input": []})).unwrap_err();
        assert!(err.contains("speaks openai-responses") && err.contains("claude-code (anthropic)"), "{err}");
        // Claude Code bridged to the Responses API: told by the shell tool it declares.
        let bridged = json!({"model": "m-aggressive", "tools": [{"type": "function", "name": "Bash", "parameters": {}}], "input": "Fix the migration."});
        let s = c.script_for("/v1/responses", &bridged).unwrap();
        assert_eq!((s.default_shell.as_str(), s.steps.clone()), ("Bash", vec![Step::Sh { command: "db aggressive".into() }]));
    }
}
