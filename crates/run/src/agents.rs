//! Recipes for the real agents people run: how each is installed in an image, launched
//! headless, gated (its permission policy, part of the cell), keyed and logged.
//!
//! No registry is needed to use overeager itself, so agent images are not pulled: a recipe
//! writes a build context (`Dockerfile`, the static shim, `recipe.json`) that the user builds
//! once with `docker build`. The image wraps the real programs with the same layout as the
//! test images (`overeager-shim install`), so the shell channel sees what the agent runs even
//! after `bash -lc` resets `PATH`.

use std::path::Path;

use anyhow::{Context, Result};
use overeager_core::adapters::Format;
use overeager_core::sandbox::layout;
use serde::Serialize;

use crate::providers::{Dialect, Provider, Providers};

/// Where a real agent's model is: its provider, and its name there.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub provider: Provider,
    pub model: String,
}

/// How an agent is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Package {
    Npm { name: &'static str, version: &'static str },
    Pip { name: &'static str, version: &'static str },
}

impl Package {
    /// The pinned version.
    pub fn version(&self) -> &'static str {
        match self {
            Package::Npm { version, .. } | Package::Pip { version, .. } => version,
        }
    }
}

/// A permission policy: how much the agent may do without asking. Each is its own cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Policy {
    pub id: &'static str,
    /// The flags that select it.
    pub flags: &'static [&'static str],
    /// The agent's own default when run headless.
    pub default: bool,
    pub summary: &'static str,
}

/// One agent's recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Recipe {
    /// The framework name, as in cells and agent specs.
    pub id: &'static str,
    pub name: &'static str,
    pub package: Package,
    /// Other versions runs may name (`<agent>@<version>`), whose streams or wire protocols
    /// differ from the pinned one's; the pinned one is the default.
    pub also: &'static [&'static str],
    /// The public image the agent's image is built from.
    pub base_image: &'static str,
    /// The command on `PATH` after the install.
    pub program: &'static str,
    pub policies: &'static [Policy],
    /// The wire dialects it speaks to a model; a provider must speak one of them (there is
    /// no translation between dialects).
    pub dialects: &'static [Dialect],
    /// The provider of a model named without one (`claude-sonnet-4-5`).
    pub default_provider: &'static str,
    /// Fixed environment of the agent (config and session directories under the channels, so
    /// the agent's native logs come back with the run).
    pub env: &'static [(&'static str, &'static str)],
    /// Where the agent's native logs are, inside the container.
    pub logs: &'static [&'static str],
    /// What the recipe cannot make the same as the others, said plainly.
    pub notes: &'static [&'static str],
}

/// Every recipe.
pub const RECIPES: &[Recipe] = &[
    Recipe {
        id: "claude-code",
        name: "Claude Code",
        package: Package::Npm { name: "@anthropic-ai/claude-code", version: "2.0.55" },
        also: &["2.1.330"],
        base_image: "node:22-bookworm-slim",
        program: "claude",
        policies: &[
            Policy { id: "ask", flags: &["--permission-mode", "default"], default: true, summary: "read-only tools and commands (ls, Read, Grep) run; writes and commands that need approval (rm) are refused in print mode" },
            Policy { id: "accept-edits", flags: &["--permission-mode", "acceptEdits"], default: false, summary: "file edits run, and so does an rm of named files in the workspace; other commands that need approval (an rm with a glob) are refused" },
            Policy { id: "permissive", flags: &["--dangerously-skip-permissions"], default: false, summary: "every tool call runs without asking" },
        ],
        dialects: &[Dialect::Anthropic],
        default_provider: "anthropic",
        env: &[("IS_SANDBOX", "1"), ("CLAUDE_CONFIG_DIR", "/oe/channels/agent-logs/claude"), ("DISABLE_AUTOUPDATER", "1"), ("DISABLE_TELEMETRY", "1")],
        logs: &["/oe/channels/agent-logs/claude/projects/**/*.jsonl (session transcripts)"],
        notes: &["Read, Edit, Write and Grep run inside the agent process: only the agent stream and the file watcher see them."],
    },
    Recipe {
        id: "codex",
        name: "OpenAI Codex CLI",
        package: Package::Npm { name: "@openai/codex", version: "0.58.0" },
        also: &["0.169.0"],
        base_image: "node:22-bookworm-slim",
        program: "codex",
        policies: &[
            Policy { id: "read-only", flags: &["--sandbox", "read-only"], default: true, summary: "exec's default: every command runs, in a read-only Landlock sandbox, so writes and deletions fail; nothing is asked" },
            Policy { id: "full-auto", flags: &["--sandbox", "workspace-write"], default: false, summary: "workspace-write sandbox: commands may change the workspace and /tmp, nothing is asked" },
            Policy { id: "permissive", flags: &["--dangerously-bypass-approvals-and-sandbox"], default: false, summary: "no sandbox, no approvals" },
        ],
        // 0.58 speaks Chat Completions to a custom provider; later versions refuse
        // `wire_api = "chat"` and speak only Responses (see `Recipe::speaks`).
        dialects: &[Dialect::OpenaiChat, Dialect::OpenaiResponses],
        default_provider: "openai",
        env: &[("CODEX_HOME", "/oe/channels/agent-logs/codex")],
        logs: &["/oe/channels/agent-logs/codex/sessions/**/*.jsonl (rollout files)", "/oe/channels/agent-logs/codex/log/codex-tui.log"],
        notes: &[
            "Codex's own sandbox needs Landlock and seccomp; in a container without capabilities it may refuse to start a sandboxed command, which the run records as a failed command.",
            "`command_execution` items carry the wrapped command (`bash -lc …`); the shell channel sees the programs it runs.",
        ],
    },
    Recipe {
        id: "gemini-cli",
        name: "Gemini CLI",
        package: Package::Npm { name: "@google/gemini-cli", version: "0.61.0" },
        also: &["0.17.1"],
        base_image: "node:22-bookworm-slim",
        program: "gemini",
        policies: &[
            Policy { id: "ask", flags: &["--approval-mode", "default"], default: true, summary: "headless, the tools that need confirmation are not offered: no shell, no writes; calls to them are refused" },
            Policy { id: "auto-edit", flags: &["--approval-mode", "auto_edit"], default: false, summary: "file writes and edits run; the shell is still not offered" },
            Policy { id: "permissive", flags: &["--yolo"], default: false, summary: "every tool call runs without asking" },
        ],
        dialects: &[Dialect::Gemini],
        default_provider: "google",
        env: &[("GEMINI_CLI_TRUST_WORKSPACE", "true")],
        logs: &["/oe/home/.gemini/tmp/**/logs.json (session logs; under the agent's $HOME, so its snapshot shows them)"],
        notes: &["Non-JSON lines may be interleaved in the stream; the adapter keeps them raw."],
    },
    Recipe {
        id: "openhands",
        name: "OpenHands CLI",
        package: Package::Pip { name: "openhands", version: "1.16.0" },
        also: &[],
        base_image: "python:3.12-slim-bookworm",
        program: "openhands",
        policies: &[Policy {
            id: "always-approve",
            flags: &["--always-approve"],
            default: true,
            summary: "headless mode always approves; the interactive ask-every-action default cannot run headless",
        }],
        // LiteLLM inside: `openai/<model>` speaks Chat Completions, `anthropic/<model>` Messages.
        dialects: &[Dialect::OpenaiChat, Dialect::Anthropic],
        default_provider: "anthropic",
        env: &[("OPENHANDS_PERSISTENCE_DIR", "/oe/channels/agent-logs/openhands"), ("OPENHANDS_WORK_DIR", "/oe/work")],
        logs: &["/oe/channels/agent-logs/openhands/conversations/<id>/events/*.json (V1 events)"],
        notes: &[
            "The model is written <provider>/<model> (anthropic/claude-sonnet-4-5); LiteLLM inside it is pointed at the model gateway in the provider's dialect.",
            "OpenHands asks before every action in its terminal UI; headless it cannot, so its only cell here is `always-approve`, recorded as such.",
        ],
    },
];

/// The recipe of `id`.
pub fn recipe(id: &str) -> Result<&'static Recipe> {
    RECIPES.iter().find(|r| r.id == id).with_context(|| format!("unknown agent `{id}`; known agents: {}", known()))
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

fn known() -> String {
    RECIPES.iter().map(|r| r.id).collect::<Vec<_>>().join(", ")
}

impl Recipe {
    /// The image a built recipe is tagged as.
    pub fn image(&self) -> String {
        format!("overeager-agent/{}:{}", self.id, self.package.version())
    }

    /// The versions runs may use, the pinned one first.
    pub fn versions(&self) -> impl Iterator<Item = &'static str> + '_ {
        std::iter::once(self.package.version()).chain(self.also.iter().copied())
    }

    /// The supported version `v`.
    pub fn version(&self, v: &str) -> Result<&'static str, String> {
        self.versions().find(|x| *x == v).ok_or_else(|| {
            format!("{} {v} is not a version overeager knows how to run; known: {}", self.id, self.versions().collect::<Vec<_>>().join(", "))
        })
    }

    /// `claude-code` for the pinned version, `claude-code@2.1.330` for another: a different
    /// version is a different subject, so its own cell.
    pub fn versioned_id(&self, version: &str) -> String {
        if version == self.package.version() { self.id.to_string() } else { format!("{}@{version}", self.id) }
    }

    /// Whether version `version` speaks `dialect`.
    pub fn speaks(&self, version: &str, dialect: Dialect) -> bool {
        self.dialects.contains(&dialect) && !(self.id == "codex" && dialect == Dialect::OpenaiChat && version != "0.58.0")
    }

    /// The dialects version `version` speaks.
    pub fn dialects_of(&self, version: &str) -> Vec<Dialect> {
        self.dialects.iter().copied().filter(|d| self.speaks(version, *d)).collect()
    }

    /// Where a model named `model` (`<provider>/<model>`, or a bare name on the agent's
    /// default provider) is, and the dialect to speak to it; an error when the provider is
    /// unknown or speaks no dialect this version of the agent does.
    pub fn route(&self, version: &str, model: &str, providers: &Providers) -> Result<Route> {
        let (provider, name) = match providers.resolve(model) {
            Some((p, name)) => (p, name),
            None => (providers.get(self.default_provider).map_err(anyhow::Error::msg)?, model),
        };
        if !self.speaks(version, provider.dialect) {
            let spoken: Vec<&str> = self.dialects_of(version).iter().map(|d| d.as_str()).collect();
            anyhow::bail!(
                "{} {version} speaks {}; the provider `{}` speaks {}. overeager does not translate between dialects: \
                 choose a provider that speaks {}, or add one to a providers file",
                self.name,
                spoken.join(" and "),
                provider.name,
                provider.dialect,
                spoken.join(" or ")
            );
        }
        Ok(Route { provider: provider.clone(), model: name.to_string() })
    }

    /// The dialect the scripted model is spoken to in: the first this version speaks.
    pub fn scripted_dialect(&self, version: &str) -> Dialect {
        self.dialects_of(version)[0]
    }

    /// The policy of `id`.
    pub fn policy(&self, id: &str) -> Result<&'static Policy, String> {
        let policies: &'static [Policy] = self.policies;
        policies.iter().find(|p| p.id == id).ok_or_else(|| {
            let ids: Vec<&str> = policies.iter().map(|p| p.id).collect();
            format!("{} has no permission policy `{id}`; its policies: {}", self.id, ids.join(", "))
        })
    }

    /// The event format of its stream.
    pub fn format(&self) -> Format {
        Format::for_framework(self.id).expect("every recipe has an adapter")
    }

    /// The headless command line: prompt, model and permission flags. Its stdout is the agent
    /// stream.
    pub fn launch(&self, policy: &Policy, model: &str, prompt: &str) -> Vec<String> {
        let mut v: Vec<String> = vec![self.program.into()];
        let s = |x: &str| x.to_string();
        match self.id {
            "claude-code" => v.extend([s("-p"), s(prompt), s("--output-format"), s("stream-json"), s("--verbose"), s("--model"), s(model)]),
            "codex" => v.extend([s("exec"), s("--json"), s("--skip-git-repo-check"), s("--model"), s(model)]),
            "gemini-cli" => v.extend([s("--output-format"), s("stream-json"), s("--model"), s(model)]),
            // `-t`, not `--file`: a file's contents reach the model wrapped in a preamble that names
            // the file, so the agent would not get the prompt's exact bytes.
            "openhands" => v.extend([s("--headless"), s("--json"), s("--override-with-envs"), s("-t"), s(prompt)]),
            _ => {}
        }
        v.extend(policy.flags.iter().map(|f| f.to_string()));
        match self.id {
            "codex" => v.push(prompt.into()),
            "gemini-cli" => v.extend([s("--prompt"), s(prompt)]),
            _ => {}
        }
        v
    }

    /// Points the agent at a model endpoint (`endpoint`: the scripted model or the run's
    /// model gateway, a base URL without a trailing slash) speaking `dialect`, with `key` (a
    /// placeholder: neither endpoint needs the user's key), keeping its configuration,
    /// sessions and logs in one directory that comes back with the run (`config` here,
    /// `config_seen` as the agent sees it): writes the config files it reads and returns its
    /// environment. Telemetry, update checks and other traffic that is not the model are
    /// turned off.
    #[allow(clippy::too_many_arguments)]
    pub fn connect(&self, model: &str, endpoint: &str, dialect: Dialect, key: &str, config: &Path, config_seen: &str) -> Result<Vec<(String, String)>> {
        std::fs::create_dir_all(config).with_context(|| format!("creating {}", config.display()))?;
        let c = config_seen.to_string();
        let pairs: Vec<(&str, String)> = match self.id {
            "claude-code" => vec![
                ("ANTHROPIC_BASE_URL", endpoint.into()),
                ("ANTHROPIC_API_KEY", key.into()),
                ("CLAUDE_CONFIG_DIR", c),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                ("DISABLE_AUTOUPDATER", "1".into()),
                ("DISABLE_TELEMETRY", "1".into()),
                ("DISABLE_ERROR_REPORTING", "1".into()),
                // Lets --dangerously-skip-permissions run where the user is root.
                ("IS_SANDBOX", "1".into()),
            ],
            "codex" => {
                let wire = if dialect == Dialect::OpenaiChat { "chat" } else { "responses" };
                let toml = format!(
                    "model = {m}\nmodel_provider = \"overeager\"\n\n[model_providers.overeager]\nname = \"overeager\"\nbase_url = {u}\nwire_api = \"{wire}\"\nenv_key = \"OVEREAGER_MODEL_KEY\"\n",
                    m = toml_str(model),
                    u = toml_str(&format!("{endpoint}/v1")),
                );
                std::fs::write(config.join("config.toml"), toml)?;
                vec![("CODEX_HOME", c), ("OVEREAGER_MODEL_KEY", key.into())]
            }
            "gemini-cli" => {
                let dot = config.join(".gemini");
                std::fs::create_dir_all(&dot)?;
                let settings = serde_json::json!({
                    "privacy": {"usageStatisticsEnabled": false},
                    "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                    "telemetry": {"enabled": false},
                    "security": {"auth": {"selectedType": "gemini-api-key"}},
                });
                std::fs::write(dot.join("settings.json"), serde_json::to_vec_pretty(&settings)?)?;
                vec![("GEMINI_CLI_HOME", c), ("GEMINI_API_KEY", key.into()), ("GOOGLE_GEMINI_BASE_URL", endpoint.into()), ("GEMINI_CLI_TRUST_WORKSPACE", "true".into())]
            }
            "openhands" => {
                // LiteLLM's `anthropic/` provider appends /v1/messages to its base; `openai/`
                // appends /chat/completions, so its base carries the version.
                let (prefix, base) = if dialect == Dialect::Anthropic { ("anthropic", endpoint.to_string()) } else { ("openai", format!("{endpoint}/v1")) };
                vec![
                    ("LLM_MODEL", format!("{prefix}/{model}")),
                    ("LLM_BASE_URL", base),
                    ("LLM_API_KEY", key.into()),
                    ("OPENHANDS_PERSISTENCE_DIR", c),
                    ("LITELLM_LOCAL_MODEL_COST_MAP", "True".into()),
                    ("OPENHANDS_SUPPRESS_BANNER", "1".into()),
                ]
            }
            other => anyhow::bail!("no endpoint set-up for agent `{other}`"),
        };
        Ok(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// What the agent needs besides [`Recipe::connect`] to use `route`'s model for all of its
    /// calls: Claude Code sends its side requests to a small model of Anthropic's, which a
    /// third-party endpoint does not have.
    pub fn route_env(&self, route: &Route) -> Vec<(String, String)> {
        match self.id {
            "claude-code" if route.provider.name != "anthropic" => {
                ["ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL"].iter().map(|k| (k.to_string(), route.model.clone())).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The Dockerfile of the agent's image.
    pub fn dockerfile(&self) -> String {
        let install = match self.package {
            Package::Npm { name, version } => format!(
                "RUN npm install --global --no-audit --no-fund {name}@{version} \\\n && npm cache clean --force\n"
            ),
            Package::Pip { name, version } => format!("RUN pip install --no-cache-dir {name}=={version}\n"),
        };
        let mut d = format!(
            "# {name} {version} for overeager: generated by `overeager agent recipe {id}`.\n\
             # Build: docker build -t {image} .\n\
             FROM {base}\n\
             # git, curl and the usual tools the agent's shell commands expect.\n\
             RUN apt-get update \\\n && apt-get install -y --no-install-recommends git curl ca-certificates procps ripgrep \\\n && rm -rf /var/lib/apt/lists/*\n\
             {install}",
            name = self.name,
            version = self.package.version(),
            id = self.id,
            image = self.image(),
            base = self.base_image,
        );
        d.push_str(&shim_install_steps());
        d.push_str(&format!(
            "LABEL overeager.agent=\"{id}\" overeager.agent.version=\"{version}\"\n\
             USER 1000:1000\n\
             WORKDIR {work}\n",
            id = self.id,
            version = self.package.version(),
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
        launch: r.policies.iter().map(|p| (p.id.to_string(), r.launch(p, "<model>", "<prompt>"))).collect(),
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
        base = r.base_image,
        image = r.image(),
        provider = r.default_provider,
        dialects = r.dialects_of(r.package.version()).iter().map(|d| d.as_str()).collect::<Vec<_>>().join(" or "),
        id = r.id,
        policy = r.policies.iter().find(|p| p.default).map(|p| p.id).unwrap_or("ask"),
    );
    for p in r.policies {
        s.push_str(&format!("- `{}:{}`{}: `{}` — {}\n", r.id, p.id, if p.default { " (default)" } else { "" }, p.flags.join(" "), p.summary));
    }
    s.push_str(
        "\n## Network\n\nThe container has no route out. Its only peer is the run's sidecar: the model gateway,\n\
         which alone reaches the provider's host and records every call in the bundle's\n\
         `model.jsonl`, and the egress proxy for hosts a run allows, which records every\n\
         connection in `net.jsonl`.\n\n## Native logs\n\n",
    );
    for l in r.logs {
        s.push_str(&format!("- {l}\n"));
    }
    if !r.notes.is_empty() {
        s.push_str("\n## Notes\n\n");
        for n in r.notes {
            s.push_str(&format!("- {n}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_recipe_is_complete_and_pinned() {
        for r in RECIPES {
            assert!(r.package.version().chars().all(|c| c.is_ascii_digit() || c == '.'), "{}: pinned to an exact version", r.id);
            assert_eq!(r.policies.iter().filter(|p| p.default).count(), 1, "{}: one default policy", r.id);
            assert!(!r.dialects.is_empty() && !r.logs.is_empty(), "{}", r.id);
            assert!(crate::providers::Providers::built_in().get(r.default_provider).is_ok_and(|p| r.speaks(r.package.version(), p.dialect)), "{}: its default provider speaks its dialect", r.id);
            for v in r.versions() {
                assert!(!r.dialects_of(v).is_empty(), "{} {v} speaks a dialect", r.id);
            }
            assert!(r.logs.iter().all(|l| l.starts_with(layout::ROOT)), "{}: native logs come back with the run", r.id);
            let d = r.dockerfile();
            assert!(d.contains(&format!("FROM {}\n", r.base_image)));
            assert!(d.contains(r.package.version()));
            assert!(d.contains(&shim_install_steps()));
            assert!(d.contains("USER 1000:1000"));
            for p in r.policies {
                let argv = r.launch(p, "m-1", "do the task");
                assert_eq!(argv[0], r.program);
                for f in p.flags {
                    assert!(argv.iter().any(|a| a == f), "{}:{} launch has {f}", r.id, p.id);
                }
                assert!(argv.iter().any(|a| a == "do the task"), "{}: the prompt reaches it as given", r.id);
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
        assert!(recipe("aider").unwrap_err().to_string().contains("claude-code, codex, gemini-cli, openhands"));
    }

    #[test]
    fn a_real_agent_spec_names_agent_policy_and_model() {
        use crate::AgentSpec;
        let a: AgentSpec = "claude-code:permissive:claude-sonnet-4-5".parse().unwrap();
        assert_eq!((a.framework(), a.model(), a.id()), ("claude-code:permissive".into(), "claude-sonnet-4-5".into(), "claude-code:permissive:claude-sonnet-4-5".into()));
        assert_eq!(a.event_format(), Format::ClaudeCode);
        assert!(!a.simulated());
        let g: AgentSpec = "gemini-cli:ask:gemini-2.5-pro".parse().unwrap();
        assert_eq!(g.event_format(), Format::GeminiCli);
        let no_model = "claude-code:permissive".parse::<AgentSpec>().unwrap_err();
        assert!(no_model.contains("<agent>:<policy>:<model>"), "{no_model}");
        let bad_policy = "codex:yolo:gpt-5".parse::<AgentSpec>().unwrap_err();
        assert!(bad_policy.contains("read-only, full-auto, permissive"), "{bad_policy}");
        // Another supported version is another cell; an unknown one is refused with the list.
        let v: AgentSpec = "claude-code@2.1.330:ask:scripted-cautious".parse().unwrap();
        assert_eq!((v.framework(), v.agent_version(), v.scripted_model()), ("claude-code@2.1.330:ask".into(), Some("2.1.330"), Some(overeager_core::PlayKind::Cautious)));
        assert_eq!(v.id(), "claude-code@2.1.330:ask:scripted-cautious");
        let pinned: AgentSpec = "claude-code@2.0.55:ask:m".parse().unwrap();
        assert_eq!(pinned.framework(), "claude-code:ask", "the pinned version keeps the plain name");
        let bad = "codex@9.9.9:permissive:m".parse::<AgentSpec>().unwrap_err();
        assert!(bad.contains("0.58.0, 0.169.0"), "{bad}");
        let bad = "codex:permissive:scripted-reckless".parse::<AgentSpec>().unwrap_err();
        assert!(bad.contains("cautious, moderate or aggressive"), "{bad}");
        assert!("codex:permissive:replay:".parse::<AgentSpec>().unwrap_err().contains("replay:<bundle"));
        let r: AgentSpec = "codex:permissive:replay:runs/x".parse().unwrap();
        assert_eq!((r.replayed_bundle(), r.offline_model()), (Some("runs/x"), true));
    }

    #[test]
    fn a_provider_in_a_dialect_the_agent_does_not_speak_is_refused_naming_both() {
        let providers = crate::providers::Providers::built_in();
        let claude = recipe("claude-code").unwrap();
        let r = claude.route("2.0.55", "claude-sonnet-4-5", &providers).unwrap();
        assert_eq!((r.provider.name.as_str(), r.model.as_str()), ("anthropic", "claude-sonnet-4-5"), "a bare model is on the agent's own provider");
        let err = claude.route("2.0.55", "vllm/qwen3-coder", &providers).unwrap_err().to_string();
        assert!(err.contains("speaks anthropic") && err.contains("`vllm` speaks openai-chat") && err.contains("does not translate"), "{err}");
        // Codex 0.58 speaks Chat Completions to a local server; later versions do not.
        let codex = recipe("codex").unwrap();
        assert_eq!(codex.route("0.58.0", "vllm/qwen3-coder", &providers).unwrap().model, "qwen3-coder");
        let err = codex.route("0.169.0", "ollama/qwen3-coder", &providers).unwrap_err().to_string();
        assert!(err.contains("0.169.0 speaks openai-responses;") && err.contains("`ollama` speaks openai-chat"), "{err}");
        let err = recipe("gemini-cli").unwrap().route("0.61.0", "openai/gpt-5", &providers).unwrap_err().to_string();
        assert!(err.contains("speaks gemini") && err.contains("`openai` speaks openai-responses"), "{err}");
        // OpenHands' LiteLLM model names read as <provider>/<model>.
        let oh = recipe("openhands").unwrap().route("1.16.0", "anthropic/claude-sonnet-4-5", &providers).unwrap();
        assert_eq!((oh.provider.name.as_str(), oh.model.as_str()), ("anthropic", "claude-sonnet-4-5"));
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
}
