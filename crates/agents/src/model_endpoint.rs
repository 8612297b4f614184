//! The scripted model as an endpoint of its own (`overeager model serve`): one scenario's play
//! for one agent, or a stand-in provider for whole experiments serving every scenario of a
//! directory. The shim's `model` command serves it on a socket bound here.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use anyhow::{Result, bail};

use crate::definition::{self, Recipe};
use overeager_formats::model::Script;
use overeager_formats::model::catalog::{Catalog, CatalogAgent, CatalogScenario};
use overeager_core::PlayKind;
use overeager_core::paths::Roots;
use overeager_scenario::LoadedScenario;

/// The script of `play` of `scenario` for the agent `r`, its tools taking paths under `roots`
/// (learned from each request instead if `learn_roots`).
pub fn script(r: &Recipe, scenario: &LoadedScenario, play: PlayKind, roots: Roots, learn_roots: bool) -> Script {
    Script {
        label: play.as_str().to_string(),
        steps: scenario.scenario.plays.get(play).steps.clone(),
        roots,
        default_shell: r.shell_tool().to_string(),
        tools: r.tools.clone(),
        replay: None,
        first_delay_ms: 0,
        learn_roots,
        finish_command: r.finish_command.clone(),
        reply_format: r.reply_format,
    }
}

/// The stand-in provider's catalog: every scenario under `dir` in every play, for `recipes`
/// (every agent when empty) in each of their versions, `play` when a request's model name
/// names none. Also the agents' ids, for the announcement.
pub fn catalog(dir: &Path, recipes: &[&Recipe], play: PlayKind) -> Result<(Catalog, Vec<String>)> {
    let loaded = overeager_scenario::load_all(dir)?;
    if loaded.is_empty() {
        bail!("{}: no scenario directories (each holds scenario.toml and fixture/)", dir.display());
    }
    let scenarios: Vec<CatalogScenario> = loaded
        .iter()
        .map(|s| CatalogScenario {
            id: s.scenario.id.clone(),
            task: s.scenario.prompt.task.trim().to_string(),
            plays: PlayKind::ALL.into_iter().map(|k| (k, s.scenario.plays.get(k).steps.clone())).collect(),
        })
        .collect();
    let recipes: Vec<&Recipe> = if recipes.is_empty() { definition::all()?.iter().collect() } else { recipes.to_vec() };
    let agents: Vec<CatalogAgent> = recipes
        .iter()
        .flat_map(|r| r.versions().map(move |v| (r, v)))
        .map(|(r, v)| CatalogAgent {
            id: r.id.clone(),
            dialect: r.scripted_dialect(v),
            shell: r.shell_tool().to_string(),
            tools: r.tools.clone(),
            finish_command: r.finish_command.clone(),
            reply_format: r.reply_format,
        })
        .collect();
    let names: Vec<String> = agents.iter().map(|a| a.id.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    Ok((Catalog { scenarios, agents, play }, names))
}

/// How the endpoint answers besides its plays.
#[derive(Debug, Clone, Default)]
pub struct Serving {
    /// Append every request and reply to this file (the model channel's format).
    pub log: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain and key (PEM).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Answer every request from this one on (0 is the first) with the status: an outage.
    pub fail_from: Option<(u64, u16)>,
}

/// What the endpoint serves.
pub enum Plays<'a> {
    /// One script ([`script`]).
    Script(&'a Script),
    /// A stand-in provider ([`catalog`]).
    Catalog(&'a Catalog),
}

/// Serves `plays` on `listener` until the shim's `model` command ends (Ctrl-C, or this process
/// ending).
pub fn serve(listener: &TcpListener, plays: Plays<'_>, serving: &Serving) -> Result<ExitStatus> {
    let tmp = tempfile::Builder::new().prefix("overeager-model-").tempdir()?;
    let (flag, file, bytes) = match plays {
        Plays::Script(s) => ("--script", tmp.path().join("script.json"), serde_json::to_vec(s)?),
        Plays::Catalog(c) => ("--catalog", tmp.path().join("catalog.json"), serde_json::to_vec(c)?),
    };
    std::fs::write(&file, bytes)?;
    let shim = crate::locate_shim().map_err(anyhow::Error::msg)?;
    let mut cmd = std::process::Command::new(shim);
    let fd = crate::child::hand_down(&mut cmd, listener);
    crate::child::end_with_this_process(&mut cmd);
    cmd.arg("model").arg(flag).arg(&file).args(["--fd", &fd.to_string()]).stdout(std::process::Stdio::null());
    if let Some(log) = &serving.log {
        cmd.arg("--log").arg(log);
    }
    if let Some((cert, key)) = &serving.tls {
        cmd.arg("--tls-cert").arg(cert).arg("--tls-key").arg(key);
    }
    if let Some((n, status)) = serving.fail_from {
        cmd.args(["--fail-from", &n.to_string(), "--fail-status", &status.to_string()]);
    }
    Ok(cmd.status()?)
}

/// How overeager itself points the agent `r` at `url`: the environment its definition sets
/// that names the endpoint or the key, and the configuration files it writes.
pub fn endpoint_hint(r: &Recipe, url: &str) -> Result<String> {
    let dir = tempfile::tempdir()?;
    let default = r.policies.iter().find(|p| p.default).expect("a definition has a default policy");
    let env = r.connect(default, "scripted", url, r.scripted_dialect(r.package.version()), "dummy", dir.path(), "$CONFIG")?;
    let mut hint: Vec<String> = env.iter().filter(|(_, v)| v.contains(url) || v == "dummy").map(|(k, v)| format!("{k}={v}")).collect();
    hint.extend(r.connect.files.iter().map(|f| format!("and $CONFIG/{} as `connect.files` of {} says", f.path, r.source)));
    Ok(hint.join(" "))
}
