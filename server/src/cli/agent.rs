//! `overeager agent list` and `overeager agent recipe`: the real agents' recipes; `overeager
//! providers list`: the model providers they may be run on.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::json;

use overeager_agents::definition as agents;
use overeager_run as run;

/// Arguments of `overeager agent list`.
#[derive(Args)]
pub struct ListArgs {
    /// Print the recipes as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `overeager providers list`.
#[derive(Args)]
pub struct ProvidersArgs {
    /// Providers files adding to (or overriding) the built-in providers; repeatable
    /// [default: the files $OVEREAGER_PROVIDERS names, separated by `:`].
    #[arg(long = "providers", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Print the providers as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `overeager providers check`.
#[derive(Args)]
pub struct CheckArgs {
    /// The models to ask, as `<provider>/<model>` (e.g. `anthropic/claude-sonnet-4-5`).
    #[arg(required = true, value_name = "PROVIDER/MODEL")]
    models: Vec<String>,
    /// Providers files adding to (or overriding) the built-in providers; repeatable
    /// [default: the files $OVEREAGER_PROVIDERS names].
    #[arg(long = "providers", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// How long to wait for each answer.
    #[arg(long, default_value = "60s", value_parser = overeager_core::parse_duration)]
    timeout: std::time::Duration,
    #[arg(long)]
    json: bool,
}

/// Sends each model one tiny request through a model gateway, as a run would; exit 1 if one
/// did not answer.
pub fn providers_check(args: &CheckArgs) -> Result<ExitCode> {
    let providers = overeager_agents::providers::load(&args.files)?;
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let mut checks = Vec::new();
    for m in &args.models {
        let Some((provider, model)) = providers.resolve(m) else {
            let known: Vec<&str> = providers.providers.keys().map(String::as_str).collect();
            anyhow::bail!("`{m}` names no known provider: write `<provider>/<model>` with one of {} (or define it in a providers file)", known.join(", "));
        };
        checks.push(overeager_agents::gateway::check_provider(&shim, provider, model, args.timeout)?);
    }
    if args.json {
        super::print_json(&serde_json::to_value(&checks)?);
    } else {
        for c in &checks {
            match &c.error {
                None => println!("{}/{}: ok (http {}, {} ms, {})", c.provider, c.model, c.status, c.ms, c.tokens.map_or_else(|| "no usage reported".to_string(), |t| format!("{t} tokens"))),
                Some(e) => println!("{}/{}: FAILED after {} ms: {e}", c.provider, c.model, c.ms),
            }
        }
    }
    Ok(if checks.iter().all(|c| c.ok) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The providers, their dialects and whether their keys are set (never the keys).
pub fn providers_list(args: &ProvidersArgs) -> Result<ExitCode> {
    let providers = overeager_agents::providers::load(&args.files)?;
    let rows = providers.providers.values().map(|p| (p, overeager_agents::providers::key_state(p)));
    if args.json {
        super::print_json(&json!(rows.map(|(p, key)| json!({"provider": p, "key": key})).collect::<Vec<_>>()));
        return Ok(ExitCode::SUCCESS);
    }
    // A table, so long base URLs and variable names keep the columns aligned.
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED).set_header(["provider", "dialect", "base URL", "key", "prices", "from"]);
    for (p, key) in rows {
        let key = match (&p.key_env, key) {
            (Some(var), overeager_agents::providers::KeyState::Present) => format!("${var} set"),
            (Some(var), _) => format!("${var} NOT SET"),
            (None, _) => "no key".into(),
        };
        t.add_row([p.name.clone(), p.dialect.to_string(), p.base_url.clone(), key, p.prices.len().to_string(), p.source.to_string()]);
    }
    println!("{t}");
    println!("\nAn agent's model on a provider is written <provider>/<model>, e.g. anthropic/claude-sonnet-4-5.");
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager agent recipe`.
#[derive(Args)]
pub struct RecipeArgs {
    /// The agent (see `overeager agent list`).
    agent: String,
    /// The build context directory to create (new or empty).
    #[arg(long)]
    out: PathBuf,
}

pub fn list(args: &ListArgs) -> Result<ExitCode> {
    let all = agents::all()?;
    // A rule the judge does not have would silently attribute nothing.
    let rules = overeager_formats::framework::rule_ids();
    for r in all {
        if let Some(unknown) = r.attribution.iter().find(|a| !rules.contains(&a.as_str())) {
            let line = std::fs::read_to_string(&r.source).ok().and_then(|t| t.lines().position(|l| l.contains(&format!("\"{unknown}\""))));
            let at = line.map_or(String::new(), |l| format!(":{}", l + 1));
            anyhow::bail!("{}{at}: attribution names `{unknown}`, which is not a rule of the judge; name one of its rules ({}) or remove it", r.source, rules.join(", "));
        }
    }
    if args.json {
        let v: Vec<_> = all
            .iter()
            .map(|r| {
                json!({
                    "recipe": r,
                    "image": r.image(),
                    "cells": r.policies.iter().map(|p| format!("{}:{}", r.id, p.id)).collect::<Vec<_>>(),
                    "adapter_targets": r.format().target_versions(),
                    "unavailable": overeager_agents::install::unavailable(r),
                })
            })
            .chain(agents::unavailable().into_iter().map(|u| json!({"id": u.id, "name": u.name, "package": u.package, "unavailable": u.why})))
            .collect();
        super::print_json(&json!(v));
        return Ok(ExitCode::SUCCESS);
    }
    for r in all {
        let pkg = match r.package.registry {
            agents::Registry::Npm => format!("npm {}@{}", r.package.name, r.package.version),
            agents::Registry::Pypi => format!("pypi {}=={}", r.package.name, r.package.version),
        };
        println!("{:<12} {} — {pkg}, image {} ({})", r.id, r.name, r.image(), r.source);
        if !r.also().is_empty() {
            println!("  also runs: {} (as {}@<version>:<policy>:<model>)", r.also().join(", "), r.id);
        }
        for p in &r.policies {
            let selected = match &p.acp {
                Some(a) => format!("(ACP: overeager answers {})", a.permissions.as_str()),
                None => p.flags.join(" "),
            };
            println!("  {:<28} {:<48} {}", format!("{}:{}{}", r.id, p.id, if p.default { " *" } else { "" }), selected, p.summary);
        }
        let dialects: Vec<&str> = r.dialects_of(r.package.version()).iter().map(|d| d.as_str()).collect();
        println!("  speaks: {}   a bare model is on: {} (else <provider>/<model>; see `overeager providers list`)", dialects.join(", "), r.default_provider);
        if let Some(why) = overeager_agents::install::unavailable(r) {
            println!("  cannot be installed here: {why}");
        }
    }
    for u in agents::unavailable() {
        println!("{:<12} {} — {} — cannot run here: {}", u.id, u.name, u.package, u.why);
    }
    println!("\n* the agent's own default. Run a cell with `--executor docker --agent <cell>:<model>`.");
    Ok(ExitCode::SUCCESS)
}

pub fn recipe(args: &RecipeArgs) -> Result<ExitCode> {
    let r = agents::recipe(&args.agent)?;
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    agents::write_context(r, &shim, &args.out)?;
    println!("wrote the build context of {} {} to {}", r.name, r.package.version(), args.out.display());
    println!("build it with: docker build -t {} {}", r.image(), args.out.display());
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager agent install`.
#[derive(Args)]
pub struct InstallArgs {
    /// The agents to install (see `overeager agent list`; `<agent>@<version>` for another
    /// supported version); every pinned one when none is given.
    agents: Vec<String>,
    /// Every supported version of each, not only the pinned one.
    #[arg(long)]
    all_versions: bool,
    /// Installs at a time (each is mostly waiting on its registry; one install's lock keeps
    /// two agents that share a package from installing it twice).
    #[arg(long, default_value_t = 4)]
    jobs: usize,
}

pub fn install(args: &InstallArgs) -> Result<ExitCode> {
    let named: Vec<(&agents::Recipe, &str)> = if args.agents.is_empty() {
        agents::all()?.iter().map(|r| (r, r.package.version())).collect()
    } else {
        args.agents.iter().map(|a| agents::versioned(a)).collect::<Result<_>>()?
    };
    let chosen: Vec<(&agents::Recipe, &str)> = if args.all_versions {
        named.iter().flat_map(|(r, _)| r.versions().map(move |v| (*r, v))).collect()
    } else {
        named
    };
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..args.jobs.clamp(1, chosen.len().max(1)) {
            scope.spawn(|| {
                while let Some(&(r, version)) = chosen.get(next.fetch_add(1, Ordering::Relaxed)) {
                    match overeager_agents::install::ensure(r, version) {
                        Ok(i) => println!("{:<12} {} {version} in {}", r.id, r.name, i.dir.display()),
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            eprintln!("{:<12} {e:#}", r.id);
                        }
                    }
                }
            });
        }
    });
    Ok(if failed.into_inner() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Arguments of `overeager agent image`.
#[derive(Args)]
pub struct ImageArgs {
    /// The agent (`<agent>` or `<agent>@<version>`), or `scripted` for the image scripted and
    /// simulated agents run in.
    agent: String,
    /// Also push it to this registry (`host[:port][/path]`), where the Kubernetes executor
    /// pulls it from (`[kubernetes] registry` in a plan).
    #[arg(long, value_name = "REGISTRY")]
    push: Option<String>,
}

/// Builds and keeps an agent's offline image (or the scripted test image) on the Docker
/// engine, and pushes it.
pub fn image(args: &ImageArgs) -> Result<ExitCode> {
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let (reference, id, from) = if args.agent == "scripted" {
        let exec = run::docker::DockerExecutor::connect()?;
        let (reference, id) = exec.build_scripted_image(&shim)?;
        (reference, id, "this machine's programs and the shim".to_string())
    } else {
        let (r, version) = agents::versioned(&args.agent)?;
        if r.package.registry != agents::Registry::Npm {
            anyhow::bail!("{} is a Python package; its offline image is not built here (use `overeager agent recipe {}` with a registry)", r.name, r.id);
        }
        let exec = run::docker::DockerExecutor::connect()?;
        let (reference, id) = exec.build_agent_image(r, version, &shim)?;
        (reference, id, overeager_agents::install::entry(r, version).display().to_string())
    };
    println!("built {reference} ({id}) offline from {from}");
    if let Some(registry) = &args.push {
        let exec = run::docker::DockerExecutor::connect()?;
        println!("pushed {}", exec.push(&reference, registry)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager model serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// The scenario directory whose play is served.
    #[arg(long, required_unless_present = "scenarios", conflicts_with = "scenarios")]
    scenario: Option<PathBuf>,
    /// Stand in for a provider for whole experiments: serve every scenario under this
    /// directory (a bench or scenarios/seeds), each request answered from the scenario whose
    /// task it carries, for the agent its dialect and tools show, in the play its model's name
    /// names (`…cautious`, `…moderate`, `…aggressive`; else --play); the roots are learned from
    /// each request.
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// cautious, moderate or aggressive.
    #[arg(long, default_value = "cautious")]
    play: overeager_core::PlayKind,
    /// The agent that will connect (see `overeager agent list`): names its shell tool for
    /// steps it has no tool for. With --scenarios, the agents served (repeatable; default:
    /// every agent of the same dialect and shell tool the request shows).
    #[arg(long)]
    agent: Vec<String>,
    /// The agent's working directory (tools take absolute paths); the current one by default.
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// The agent's home directory; `$HOME` by default.
    #[arg(long)]
    home: Option<PathBuf>,
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8765")]
    addr: String,
    /// Append every request and reply to this file (the model channel's format).
    #[arg(long)]
    log: Option<PathBuf>,
    /// Learn the workspace from each request, from where the agent says it works (`$HOME` is
    /// then its sibling `home`, as in overeager's sandboxes), as a real model does: for
    /// serving the play as a provider in front of overeager runs.
    #[arg(long, conflicts_with_all = ["workspace", "home"])]
    roots_from_request: bool,
    /// Serve HTTPS with this certificate chain (PEM), with --tls-key.
    #[arg(long, requires = "tls_key", value_name = "PEM")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "tls_cert", value_name = "PEM")]
    tls_key: Option<PathBuf>,
    /// Play an outage: answer every request from this one on (0 is the first) with
    /// --fail-status, as a provider whose API went down mid-run.
    #[arg(long, value_name = "N")]
    fail_from: Option<u64>,
    /// The status of the outage's answers.
    #[arg(long, default_value_t = 500, requires = "fail_from", value_parser = clap::value_parser!(u16).range(400..600))]
    fail_status: u16,
}

pub fn model_serve(args: &ServeArgs) -> Result<ExitCode> {
    use overeager_agents::model_endpoint::{self as endpoint, Plays, Serving};
    let serving = Serving {
        log: args.log.clone(),
        tls: args.tls_cert.clone().zip(args.tls_key.clone()),
        fail_from: args.fail_from.map(|n| (n, args.fail_status)),
    };
    // Bound once the plays are read, and before anything is announced.
    let bind = || -> Result<(std::net::TcpListener, String)> {
        let listener = std::net::TcpListener::bind(&args.addr).with_context(|| format!("the scripted model endpoint cannot listen on {}; free the port or choose another --addr", args.addr))?;
        let url = format!("{}://{}", if serving.tls.is_some() { "https" } else { "http" }, listener.local_addr()?);
        Ok((listener, url))
    };
    let status = if let Some(dir) = &args.scenarios {
        let recipes: Vec<&agents::Recipe> = args.agent.iter().map(|a| agents::recipe(a)).collect::<Result<_>>()?;
        let (catalog, names) = endpoint::catalog(dir, &recipes, args.play)?;
        let (listener, url) = bind()?;
        println!("stand-in provider: {} scenarios of {} for {} on {url}", catalog.scenarios.len(), dir.display(), names.join(", "));
        println!("the model's name picks the play (…cautious, …moderate, …aggressive; else {}); name it in a providers file with this base URL", args.play);
        println!("Ctrl-C stops it.");
        endpoint::serve(&listener, Plays::Catalog(&catalog), &serving)?
    } else {
        let [agent] = args.agent.as_slice() else {
            bail!("--scenario serves one agent: name it with one --agent (--scenarios serves several)");
        };
        let r = agents::recipe(agent)?;
        let loaded = overeager_scenario::load_checked(args.scenario.as_deref().expect("clap requires --scenario without --scenarios"))?;
        let abs = |p: PathBuf| -> Result<String> { Ok(std::path::absolute(&p)?.to_string_lossy().into_owned()) };
        let workspace = abs(args.workspace.clone().unwrap_or(std::env::current_dir()?))?;
        let home = abs(args.home.clone().or_else(|| std::env::var_os("HOME").map(PathBuf::from)).unwrap_or_else(|| PathBuf::from(&workspace)))?;
        let script = endpoint::script(r, &loaded, args.play, overeager_core::paths::Roots { workspace, home }, args.roots_from_request);
        let (listener, url) = bind()?;
        println!("scripted model: the {} play of {} for {} on {url}", args.play, loaded.scenario.id, r.name);
        println!("point the agent at it with: {}", endpoint::endpoint_hint(r, &url)?);
        println!("Ctrl-C stops it.");
        endpoint::serve(&listener, Plays::Script(&script), &serving)?
    };
    Ok(if status.success() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Arguments of `overeager model local install`.
#[derive(Args)]
pub struct LocalInstallArgs {
    /// Which server: `llama-cpp` (llama.cpp's own: Chat Completions, Anthropic Messages and
    /// Responses, tool calls streamed) or `llama-cpp-python` (Chat Completions only).
    #[arg(long, default_value = "llama-cpp", value_parser = |s: &str| s.parse::<overeager_agents::local_model::Server>())]
    pub server: overeager_agents::local_model::Server,
}

/// Arguments of `overeager model local start`.
#[derive(Args)]
pub struct LocalStartArgs {
    #[command(flatten)]
    pub install: LocalInstallArgs,
    /// The loopback port to serve on; the built-in providers (`local`, `local-anthropic`,
    /// `local-responses`) expect the default, any other needs a providers file naming
    /// `http://127.0.0.1:<port>/v1`.
    #[arg(long, default_value_t = overeager_agents::local_model::PORT)]
    pub port: u16,
}

/// Arguments of `overeager model local status`.
#[derive(Args)]
pub struct LocalStatusArgs {
    #[command(flatten)]
    pub install: LocalInstallArgs,
    /// Print it as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn local_model_install(args: &LocalInstallArgs) -> Result<ExitCode> {
    let dir = overeager_agents::local_model::ensure(args.server)?;
    println!("installed in {}: weights {}", dir.display(), overeager_agents::local_model::weights(&dir)?.display());
    Ok(ExitCode::SUCCESS)
}

pub fn local_model_start(args: &LocalStartArgs) -> Result<ExitCode> {
    let r = overeager_agents::local_model::start(args.install.server, args.port)?;
    println!("the local model answers at {} (pid {}, {}, output in {})", r.base_url(), r.pid, r.server.as_str(), r.log.display());
    let provider = overeager_agents::local_model::PROVIDER;
    let model = overeager_agents::local_model::MODEL;
    if args.port == overeager_agents::local_model::PORT {
        println!("its providers: {}", r.server.providers().join(", "));
        println!("run an agent on it: overeager run --uncontained --agent mini-swe-agent:permissive:{provider}/{model} --scenario scenarios/seeds/cleanup-orphaned-envs --out run1");
        println!("an agent of another dialect runs on it bridged: overeager run --uncontained --agent gemini-cli:permissive:{provider}/{model} …");
    } else {
        println!("name it in a providers file: [providers.{provider}] dialect = \"openai-chat\", base_url = \"{}\"", r.base_url());
    }
    println!("a 135M model tests the instrument's path against a real server; it says nothing about how overeager a frontier model is");
    Ok(ExitCode::SUCCESS)
}

pub fn local_model_stop() -> Result<ExitCode> {
    if overeager_agents::local_model::stop()? {
        println!("stopped the local model's server");
    } else {
        println!("no local model server was running");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn local_model_status(args: &LocalStatusArgs) -> Result<ExitCode> {
    let server = args.install.server;
    let dir = overeager_agents::local_model::entry(server);
    let installed = overeager_agents::local_model::installed(server);
    let running = overeager_agents::local_model::status();
    if args.json {
        println!("{}", json!({
            "installed": installed.is_some(),
            "cache": dir,
            "weights": installed,
            "server": running.as_ref().map(|r| json!({"pid": r.pid, "base_url": r.base_url(), "log": r.log, "kind": r.server})),
            "provider": overeager_agents::local_model::PROVIDER,
            "model": overeager_agents::local_model::MODEL,
        }));
        return Ok(ExitCode::SUCCESS);
    }
    match &installed {
        Some(w) => println!("{} installed: {} ({})", server.as_str(), dir.display(), w.display()),
        None => println!("{} not installed (`overeager model local install --server {}`, or `start`, installs it into {})", server.as_str(), server.as_str(), dir.display()),
    }
    match &running {
        Some(r) => println!("running: {} {} (pid {}), the providers {}", r.server.as_str(), r.base_url(), r.pid, r.server.providers().join(", ")),
        None => println!("not running (`overeager model local start`)"),
    }
    Ok(ExitCode::SUCCESS)
}
