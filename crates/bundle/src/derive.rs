//! A bundle's normalized events, derived from its raw channels with this build's adapters.

use std::path::Path;

use anyhow::{Context, Result, bail};
use overeager_formats::adapters::Format;
use overeager_core::bundle::{BundleManifest, Counts, NetRecord, files};
use overeager_core::event::{merge, normalize_fswatch, normalize_net, normalize_shim};
use overeager_formats::model::ModelRecord;
use overeager_core::{Event, ShimRecord, Snapshot, WatchRecord};

use crate::read::read_jsonl;

/// Derives the normalized events of a bundle directory from its raw channels; `format` is the
/// agent stream's format (see [`overeager_formats::adapters`]).
pub fn derive_events(dir: &Path, roots: &overeager_core::paths::Roots, format: Format) -> Result<(Vec<Event>, Counts)> {
    let (shim, _) = read_jsonl::<ShimRecord>(&dir.join(files::SHIM))?;
    let (watch, _) = read_jsonl::<WatchRecord>(&dir.join(files::FSWATCH))?;
    let agent_text = std::fs::read_to_string(dir.join(files::AGENT)).unwrap_or_default();
    let mut agent = format.normalize(&agent_text, roots);
    let (model, _) = read_jsonl::<ModelRecord>(&dir.join(files::MODEL))?;
    overeager_formats::adapters::align_with_model(&mut agent, &overeager_formats::model::turns(&model));
    // The agent's file tools name paths as text; through a link they reach elsewhere.
    let before: Snapshot = match std::fs::read(dir.join(files::SNAPSHOT_BEFORE)) {
        Ok(b) => serde_json::from_slice(&b).with_context(|| format!("{} is not a valid snapshot", files::SNAPSHOT_BEFORE))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Snapshot::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", files::SNAPSHOT_BEFORE)),
    };
    overeager_core::links::resolve_agent_paths(&mut agent, &before, &watch, roots);
    let shell = normalize_shim(&shim, roots);
    let fs = normalize_fswatch(&watch, roots);
    // Only runs with network have the file; `read_jsonl` reads a missing one as empty.
    let net = normalize_net(&read_jsonl::<NetRecord>(&dir.join(files::NET))?.0);
    let counts = Counts {
        shell: shell.len() as u64,
        agent: agent.len() as u64,
        fswatch: fs.len() as u64,
        net: net.len() as u64,
        model: model.len() as u64,
        unknown: agent.iter().filter(|e| e.op == overeager_core::Op::Unknown).count() as u64,
        events: (shell.len() + agent.len() + fs.len() + net.len()) as u64,
    };
    Ok((merge(agent, shell, fs, net), counts))
}

pub fn write_events(path: &Path, events: &[Event]) -> Result<()> {
    std::fs::write(path, events_jsonl(events)?).with_context(|| format!("writing {}", path.display()))
}

/// `events.jsonl` exactly as a bundle holds it: one compact JSON object per line.
pub fn events_jsonl(events: &[Event]) -> Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(events.len() * 160);
    for e in events {
        serde_json::to_writer(&mut buf, e)?;
        buf.push(b'\n');
    }
    Ok(buf)
}

/// The format of a bundle's agent stream: the one its agent writes ([`Format::of_agent`]).
pub fn event_format(manifest: &BundleManifest, mpath: &Path) -> Result<Format> {
    Format::of_agent(&manifest.agent)
        .with_context(|| format!("{}: no adapter for agent `{}`", mpath.display(), manifest.agent.id))
}

/// What [`rederive`] found.
#[derive(Debug, serde::Serialize)]
pub struct Rederived {
    pub counts: Counts,
    /// The agent stream's `unknown` events, by what the adapter said of them.
    pub unknown: std::collections::BTreeMap<String, u64>,
    /// Whether `events.jsonl` changed.
    pub changed: bool,
}

/// Derives `events.jsonl` of a bundle directory again from its raw channels with this build's
/// adapters (the agent stream's format is the one its agent writes), and updates the
/// manifest's counts. Both files are replaced atomically; verdicts change only through them.
pub fn rederive(dir: &Path) -> Result<Rederived> {
    if dir.is_file() {
        bail!("{}: re-deriving works on a bundle directory; unpack it first (`overeager bundle unpack`)", dir.display());
    }
    let mpath = dir.join(files::MANIFEST);
    let text = std::fs::read_to_string(&mpath).with_context(|| format!("{} is not a bundle: cannot read {}", dir.display(), files::MANIFEST))?;
    let mut manifest: BundleManifest = serde_json::from_str(&text).with_context(|| format!("{}: not a valid bundle manifest", mpath.display()))?;
    let format = event_format(&manifest, &mpath)?;
    let (events, counts) = derive_events(dir, &manifest.roots, format)?;
    let mut unknown = std::collections::BTreeMap::new();
    for e in events.iter().filter(|e| e.op == overeager_core::Op::Unknown && e.channel == overeager_core::Channel::Agent) {
        *unknown.entry(e.text.clone().unwrap_or_default()).or_insert(0) += 1;
    }
    let buf = events_jsonl(&events)?;
    let changed = std::fs::read(dir.join(files::EVENTS)).ok().as_deref() != Some(buf.as_slice());
    crate::files::write_atomic(&dir.join(files::EVENTS), &buf)?;
    manifest.counts = counts;
    let mut m = serde_json::to_vec_pretty(&manifest)?;
    m.push(b'\n');
    crate::files::write_atomic(&mpath, &m)?;
    Ok(Rederived { counts, unknown, changed })
}
