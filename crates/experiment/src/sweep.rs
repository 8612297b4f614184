//! `overeager sweep`: every seed under the three scripted plays, run on this machine in
//! parallel and judged by the built-in predicates, with no store. Each run must fire exactly the
//! traps its play is designed to fire.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use rayon::prelude::*;

use overeager_audit::run_one;
use overeager_core::bundle::BundleManifest;
use overeager_core::{PlayKind, Variant, Verdict};
use overeager_judge::verdicts;
use overeager_run::{self as run, AgentSpec};

/// One play of one scenario.
pub struct SweepRow {
    pub scenario: String,
    pub play: PlayKind,
    /// The traps the play is designed to fire.
    pub designed: Vec<String>,
    /// Where its bundle is.
    pub out: PathBuf,
    /// The run's manifest, or why it failed.
    pub result: Result<BundleManifest>,
    /// The verdict, unless the run failed or its bundle could not be read back.
    pub verdict: Option<Verdict>,
}

impl SweepRow {
    /// The run fired exactly the traps its play is designed to fire, every check answered.
    pub fn as_designed(&self) -> bool {
        self.verdict.as_ref().is_some_and(|v| {
            let fired: BTreeSet<&str> = v.traps.iter().map(|t| t.id.as_str()).collect();
            let designed: BTreeSet<&str> = self.designed.iter().map(String::as_str).collect();
            fired == designed && v.errors.is_empty()
        })
    }
}

/// The sweep's runs, in scenario and play order.
pub struct Sweep {
    pub scenarios: usize,
    pub rows: Vec<SweepRow>,
    /// The runs' wall clock (judging excluded).
    pub seconds: f64,
}

/// Runs every scenario under `seeds` × every play, `jobs` at a time, into `out` (replaced whole
/// when every run is done), and judges each bundle. `on_run` is called after each run with the
/// number of runs in all.
pub fn sweep(seeds: &Path, out: &Path, jobs: usize, on_run: &(dyn Fn(u64) + Sync)) -> Result<Sweep> {
    let loaded = overeager_scenario::load_all(seeds)?;
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let staging = overeager_bundle::files::staging_dir(out)?;
    let plays: Vec<_> = loaded.iter().flat_map(|s| PlayKind::ALL.into_iter().map(move |k| (s, k))).collect();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs.max(1)).build()?;
    let started = Instant::now();
    let ran: Vec<(PlayKind, Result<overeager_bundle::Bundle>)> = pool.install(|| {
        plays
            .par_iter()
            .map(|(s, k)| {
                let dir = staging.path().join(&s.scenario.id).join(k.as_str());
                let result = run_one(s, AgentSpec::Scripted(*k), Variant::ConsentKept, 0, Duration::from_secs(120), &run::Executor::Local, &shim, &dir);
                on_run(plays.len() as u64);
                (*k, result)
            })
            .collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    // Every bundle judged by the built-in predicates, from what audit assembled, before the
    // bundles move to `out` (a predicate reads the blobs it asks for where they were written).
    let judge = overeager_judge::Judge::new(overeager_judge::JudgeOptions {
        limits: overeager_judge::engine::Limits::default(),
        jobs: jobs.max(1),
        cache: overeager_judge::engine::default_cache_dir(),
        trust: overeager_judge::trust::TrustStore::default(),
    })?;
    let rows = pool.install(|| {
        plays
            .par_iter()
            .zip(ran)
            .map(|((s, _), (play, result))| {
                let dir = out.join(&s.scenario.id).join(play.as_str());
                let (result, verdict) = match result {
                    Ok(b) => {
                        let manifest = b.manifest.clone();
                        (Ok(manifest), overeager_judge::input::of_bundle(b, dir.display().to_string()).ok().map(|b| judge.judge(&b)))
                    }
                    Err(e) => (Err(e), None),
                };
                SweepRow { scenario: s.scenario.id.clone(), play, designed: s.scenario.plays.get(play).fires.clone(), out: dir, result, verdict }
            })
            .collect()
    });
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("replacing {}", out.display()))?;
    }
    overeager_bundle::files::publish(staging, out)?;
    Ok(Sweep { scenarios: loaded.len(), rows, seconds })
}

impl Sweep {
    /// A JSON object per run: its manifest's figures, the designed traps and the verdict, or why
    /// it has none.
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.rows
            .iter()
            .map(|r| match (&r.result, &r.verdict) {
                (Ok(m), Some(v)) => serde_json::json!({"scenario": r.scenario, "play": r.play, "bundle": r.out, "run_id": m.run_id, "exit": m.exit,
                       "timed_out": m.timed_out, "duration_ms": m.duration_ms, "counts": m.counts,
                       "designed_traps": r.designed, "as_designed": r.as_designed(), "verdict": v}),
                (Ok(_), None) => serde_json::json!({"scenario": r.scenario, "play": r.play, "bundle": r.out, "error": "the bundle could not be read back"}),
                (Err(e), _) => serde_json::json!({"scenario": r.scenario, "play": r.play, "error": format!("{e:#}")}),
            })
            .collect()
    }

    /// A table of the runs and what to do next, for a sweep written to `out`.
    pub fn text(&self, out: &Path) -> String {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_header(["scenario", "play", "exit", "ms", "events", "traps fired (severity)", "sev. total", "task done", "as designed"]);
        for r in &self.rows {
            match (&r.result, &r.verdict) {
                (Ok(m), Some(v)) => {
                    t.add_row([
                        r.scenario.clone(),
                        r.play.to_string(),
                        overeager_bundle::show::exit_text(m),
                        m.duration_ms.to_string(),
                        m.counts.events.to_string(),
                        verdicts::traps_text(v),
                        v.severity_total.to_string(),
                        verdicts::tri(v.success).into(),
                        if r.as_designed() { "yes".into() } else { format!("NO (designed: {})", if r.designed.is_empty() { "-".into() } else { r.designed.join(", ") }) },
                    ]);
                }
                (Ok(_), None) => {
                    t.add_row([r.scenario.clone(), r.play.to_string(), "unreadable bundle".into()]);
                }
                (Err(e), _) => {
                    let msg: String = format!("{e:#}").chars().take(80).collect();
                    t.add_row([r.scenario.clone(), r.play.to_string(), "error".into(), msg]);
                }
            }
        }
        let overeager = self.rows.iter().filter_map(|r| r.verdict.as_ref()).filter(|v| v.overeager).count();
        format!(
            "{t}\n{} runs of {} scenarios in {:.1} s on the local executor; {overeager} overeager; verdicts by std {}; bundles in {}\n\
             inspect one with: overeager bundle show {}\nre-judge them with: overeager judge {}\n",
            self.rows.len(),
            self.scenarios,
            self.seconds,
            &overeager_judge::STD_SHA256[..12],
            out.display(),
            out.join("cleanup-orphaned-envs/aggressive").display(),
            out.display()
        )
    }
}
