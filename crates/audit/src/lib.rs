//! The audit stage: turns one run's raw observations — the shell shim's records, the agent's
//! own stream, the file watcher's, the model channel and the before/after snapshots — into an
//! audit bundle directory that appears complete or not at all. The bundle format itself
//! (reading, deriving events, packing, verifying) is `overeager-bundle`'s.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use overeager_bundle::Bundle;
use overeager_bundle::derive::{derive_events, write_events};
use overeager_bundle::files::{check_out_free, publish, staging_dir};
use overeager_core::bundle::{AgentRef, BLOB_CAP, BUNDLE_SCHEMA, BundleManifest, ExecutorRef, ScenarioRef, files};
use overeager_formats::adapters::Format;
use overeager_core::{AgentCell, Variant};
use overeager_core::model::{ModelRecord, ModelSource, PlayedBy};
use overeager_core::model::usage::RunUsage;
use overeager_scenario::LoadedScenario;
use overeager_run::{AgentSpec, RawRun, RunRequest};

/// Copies the regular files and directories under `from` to `to` (links are not followed
/// and not kept: the tree is the agent's, and `from` itself being a link copies nothing).
pub fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    for e in walkdir::WalkDir::new(from).follow_links(false).follow_root_links(false) {
        let e = e?;
        let dest = to.join(e.path().strip_prefix(from).expect("inside the tree"));
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dest)?;
        } else if e.file_type().is_file() {
            let meta = e.metadata()?;
            let mut src = overeager_bundle::files::open_walked(e.path(), &meta, false).with_context(|| format!("copying {}", e.path().display()))?;
            let mut out = std::fs::File::create(&dest).with_context(|| format!("writing {}", dest.display()))?;
            std::io::copy(&mut src, &mut out).with_context(|| format!("copying {}", e.path().display()))?;
        }
    }
    Ok(())
}

/// What a run on a provider's model used and cost, and what answered its calls, from its
/// model channel (already in `dir`) and the route its gateway took. Runs whose model was no
/// provider's (scripted, replayed, simulated) have no usage: their token counts are nobody's
/// spending.
fn run_model(raw: &RawRun, cell: &AgentCell, dir: &Path) -> Result<(Option<RunUsage>, PlayedBy)> {
    let Some(route) = &raw.model_route else { return Ok((None, cell.played_by())) };
    let records: Vec<ModelRecord> = if raw.channels.model {
        let text = std::fs::read_to_string(dir.join(files::MODEL)).with_context(|| format!("reading {}", files::MODEL))?;
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    } else {
        Vec::new()
    };
    let provider = route.provider.name.clone();
    // The stand-in says what it is on every reply; a server on loopback is this machine's.
    let source = if records.iter().any(|r| r.stand_in) {
        ModelSource::StandIn
    } else if route.provider.on_this_machine() {
        ModelSource::LocalServer { provider }
    } else {
        ModelSource::Provider { provider }
    };
    let played = PlayedBy { source, bridged: route.bridged() };
    let usage = raw.channels.model.then(|| RunUsage::of(&route.provider.name, &route.model, &records, route.provider.price(&route.model).copied()));
    Ok((usage, played))
}

fn write_json<T: serde::Serialize>(path: &Path, v: &T) -> Result<()> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    let mut bytes = serde_json::to_vec_pretty(v)?;
    bytes.push(b'\n');
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// A fresh, hard-to-guess run id.
fn new_run_id(started_us: u64) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let seed = format!("{started_us}-{}-{n}-{:?}", std::process::id(), std::thread::current().id());
    overeager_core::sha256_hex(seed.as_bytes())[..20].to_string()
}

/// Executes one run on the request's executor and writes its bundle to `out`.
pub fn execute_to(req: &RunRequest<'_>, out: &Path) -> Result<Bundle> {
    check_out_free(out)?;
    let raw = req.executor.execute(req)?;
    assemble(&raw, req, out)
}

/// Writes the bundle of a finished run to `out` (which must not exist yet, or be empty). The
/// bundle appears there complete or not at all. The bundle returned holds the parts it was
/// written from (manifest, scenario, events, snapshots), so judging it reads nothing back but
/// the channels and blobs a predicate asks for.
pub fn assemble(raw: &RawRun, req: &RunRequest<'_>, out: &Path) -> Result<Bundle> {
    check_out_free(out)?;
    let staging = staging_dir(out)?;
    let dir = staging.path();
    for name in [files::PROMPT, files::SHIM, files::AGENT, files::AGENT_STDERR, files::FSWATCH] {
        let src = raw.channels_dir.join(name);
        if src.exists() {
            std::fs::copy(&src, dir.join(name)).with_context(|| format!("copying {name}"))?;
        } else {
            std::fs::write(dir.join(name), b"")?;
        }
    }
    for (active, name) in [(raw.channels.net, files::NET), (raw.channels.model, files::MODEL)] {
        if active {
            std::fs::copy(raw.channels_dir.join(name), dir.join(name)).with_context(|| format!("copying {name}"))?;
        }
    }
    let cell = req.agent.cell();
    let (usage, played_by) = run_model(raw, &cell, dir)?;
    if let Some(usage) = usage {
        write_json(&dir.join(files::USAGE), &usage)?;
    }
    // A real agent's own logs (session transcripts, config), as it wrote them.
    let logs = raw.channels_dir.join(files::AGENT_LOGS);
    if logs.is_dir() {
        copy_tree(&logs, &dir.join(files::AGENT_LOGS))?;
    }
    write_json(&dir.join(files::SCENARIO), &req.scenario.scenario)?;
    write_json(&dir.join(files::SNAPSHOT_BEFORE), &raw.before)?;
    write_json(&dir.join(files::SNAPSHOT_AFTER), &raw.after)?;
    std::fs::create_dir_all(dir.join(files::BLOBS))?;
    for (sha, bytes) in &raw.blobs {
        std::fs::write(dir.join(files::BLOBS).join(sha), bytes)?;
    }
    let agent = AgentRef {
        id: req.agent.id(),
        framework: req.labels.as_ref().map_or_else(|| req.agent.framework().to_string(), |l| l.0.clone()),
        version: raw.agent_version.clone(),
        model: req.labels.as_ref().map_or_else(|| req.agent.model(), |l| l.1.clone()),
        cell: Some(cell),
        adapter: req.agent.adapter().map(str::to_string),
        played_by: Some(played_by),
    };
    // The format re-deriving and verifying will read the manifest for, so the two never differ.
    let format = Format::of_agent(&agent).with_context(|| format!("no stream adapter for agent `{}`", agent.id))?;
    let (events, counts) = derive_events(dir, &raw.roots, format)?;
    write_events(&dir.join(files::EVENTS), &events)?;
    let manifest = BundleManifest {
        schema: BUNDLE_SCHEMA,
        run_id: req.run_id.clone().unwrap_or_else(|| new_run_id(raw.started_us)),
        scenario: ScenarioRef { id: req.scenario.scenario.id.clone(), hash: req.scenario.hash.clone() },
        variant: req.variant,
        agent,
        replicate: req.replicate,
        executor: ExecutorRef { kind: raw.executor.to_string(), image_digest: raw.image_digest.clone(), host: raw.host.clone() },
        prompt_sha256: overeager_core::sha256_hex(raw.prompt.text.as_bytes()),
        consent_block: raw.prompt.consent_block.as_ref().map(|r| [r.start, r.end]),
        started_us: raw.started_us,
        ended_us: raw.ended_us,
        duration_ms: raw.ended_us.saturating_sub(raw.started_us) / 1000,
        timeout_ms: req.timeout.as_millis() as u64,
        timed_out: raw.timed_out,
        exit: raw.exit,
        channels: raw.channels,
        counts,
        roots: raw.roots.clone(),
        blob_cap: BLOB_CAP,
        overeager_version: env!("CARGO_PKG_VERSION").to_string(),
        git: Some(raw.git.clone()),
    };
    // The manifest goes last: a directory without one is not a bundle.
    write_json(&dir.join(files::MANIFEST), &manifest)?;
    publish(staging, out)?;
    Bundle::of_parts(out, manifest, Arc::new(req.scenario.scenario.clone()), events, Arc::new(raw.before.clone()), Arc::new(raw.after.clone()))
}

/// Runs one agent on one scenario and writes the bundle to `out`.
pub fn run_one(
    loaded: &LoadedScenario,
    agent: AgentSpec,
    variant: Variant,
    replicate: u32,
    timeout: Duration,
    executor: &overeager_run::Executor,
    shim: &Path,
    out: &Path,
) -> Result<Bundle> {
    let req = RunRequest { variant, replicate, timeout, ..RunRequest::new(executor, loaded, agent, shim.to_path_buf()) };
    execute_to(&req, out)
}
