//! A synthetic store of a public leaderboard's size, for measuring the store and the API
//! (`overeager bench scale`, `bench api --mixed`). It says what it is: its scenarios are the
//! seed scenarios copied under new ids (`<seed>-scale-<n>`), its runs belong to the experiment
//! [`SCALE_EXPERIMENT`] of five `sim:` agents, every run points at one real packed bundle, and
//! every verdict is built by the real verdict logic from findings drawn with a fixed seed. It
//! measures the store and the API, not any agent.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use overeager_bundle::Bundle;
use overeager_core::verdict::{Finding, LeafOutcome, decide, leaf_calls};
use overeager_core::{Variant, plan::Plan};
use overeager_scenario::LoadedScenario;
use overeager_store::{NewRun, Store, put_object_in};
use rand::{Rng, SeedableRng};

/// The experiment id of a scale store.
pub const SCALE_EXPERIMENT: &str = "scale-bench";
/// Agents of a scale store: (framework, model, chance that a run is overeager).
const AGENTS: &[(&str, &str, f64)] = &[("sim-a", "m1", 0.10), ("sim-a", "m2", 0.25), ("sim-b", "m1", 0.40), ("sim-b", "m2", 0.15), ("sim-c", "m1", 0.30)];

/// Fills a new store at `db` with `scenarios` scenarios and `runs` judged runs of
/// [`SCALE_EXPERIMENT`].
pub fn build_store(db: &Path, seeds: &Path, bundle: &Path, scenarios: usize, runs: usize) -> Result<()> {
    if db.exists() {
        bail!("{} exists already; the scale store is built from nothing", db.display());
    }
    let mut store = Store::open(db)?;
    let digest = put_object_in(&store.objects_dir(), bundle).with_context(|| format!("storing {}", bundle.display()))?;
    let real = Bundle::open(bundle)?;
    let (template, events) = (real.manifest.clone(), real.events.clone());
    let dirs = overeager_scenario::discover(&[seeds.to_path_buf()]).map_err(anyhow::Error::msg)?;
    let loaded: Vec<LoadedScenario> = dirs.iter().map(|d| overeager_scenario::load(d).map_err(|e| anyhow::anyhow!("{}: {} problem(s)", d.display(), e.len()))).collect::<Result<_>>()?;
    if loaded.is_empty() {
        bail!("no scenarios under {}", seeds.display());
    }
    let copies: Vec<LoadedScenario> = (0..scenarios)
        .map(|i| {
            let mut s = loaded[i % loaded.len()].clone();
            s.scenario.id = format!("{}-scale-{i}", s.scenario.id);
            s.hash = format!("sha256:{}", overeager_core::sha256_hex(format!("{}\n{i}", s.hash).as_bytes()));
            s
        })
        .collect();
    let plan_text = format!(
        "id = \"{SCALE_EXPERIMENT}\"\ntitle = \"Synthetic store for the scale benchmark\"\nscenarios = \"{}\"\nreplicates = {}\n{}",
        seeds.display(),
        runs.div_ceil(scenarios * 2 * AGENTS.len()).max(1),
        AGENTS.iter().map(|(f, m, _)| format!("[[agent]]\nagent = \"sim:permissive\"\nframework = \"{f}\"\nmodel = \"{m}\"\n")).collect::<String>()
    );
    let plan = Plan::from_toml("scale-bench.toml", &plan_text, crate::agent_labels).map_err(|e| anyhow::anyhow!("the scale plan: {e:?}"))?;
    // Run k ↔ (scenario, variant, agent, replicate): every run is a distinct matrix cell.
    let cell = |k: usize| {
        let (s, rest) = (k % scenarios, k / scenarios);
        let (v, rest) = (rest % 2, rest / 2);
        (s, v, rest % AGENTS.len(), rest / AGENTS.len())
    };
    let matrix: Vec<NewRun> = (0..runs)
        .map(|k| {
            let (s, v, a, replicate) = cell(k);
            NewRun {
                id: format!("scale-{k:06}"),
                agent: "sim:permissive".into(),
                framework: AGENTS[a].0.into(),
                model: AGENTS[a].1.into(),
                simulated: true,
                scenario_hash: copies[s].hash.clone(),
                variant: if v == 0 { Variant::ConsentKept } else { Variant::ConsentStripped },
                replicate: replicate as u32,
                seed: k as u64,
            }
        })
        .collect();
    store.create_experiment(&plan, "scale", "scale-bench.toml", &copies, &matrix)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(20_261_124);
    for (k, r) in matrix.iter().enumerate() {
        let (s, _, a, _) = cell(k);
        let s = &copies[s];
        let over = rng.random_bool(AGENTS[a].2);
        let broken = rng.random_bool(0.01);
        let calls = leaf_calls(&s.scenario);
        let outcomes = calls
            .iter()
            .enumerate()
            .map(|(i, c)| LeafOutcome {
                module: Some(overeager_judge::STD_SHA256.to_string()),
                result: match c.site {
                    overeager_core::verdict::Site::Trap(_) if broken && i == 0 => Err("memory limit (synthetic)".into()),
                    overeager_core::verdict::Site::Trap(t) => Ok(Finding { fired: over && t == 0, evidence: vec![1], note: None }),
                    overeager_core::verdict::Site::Success(_) => Ok(Finding { fired: !over, evidence: vec![], note: None }),
                },
            })
            .collect();
        let mut manifest = template.clone();
        manifest.run_id = r.id.clone();
        manifest.variant = r.variant;
        manifest.replicate = r.replicate;
        manifest.timed_out = rng.random_bool(0.02);
        manifest.scenario.id = s.scenario.id.clone();
        manifest.scenario.hash = s.hash.clone();
        let verdict = decide(&digest, &manifest, &s.scenario, outcomes, BTreeMap::new());
        store.finish_run(&r.id, &digest, &manifest, &verdict, None, &events)?;
    }
    Ok(())
}
