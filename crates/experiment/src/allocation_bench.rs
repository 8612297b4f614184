//! Adaptive against uniform allocation, measured on simulated cells of known rates
//! (`overeager bench allocation`).
//!
//! Each cell is a simulated policy (`sim:…`) over a scenario set. A run's outcome is what the
//! policy's run would be: the play [`SimPolicy::play_for`] picks for the run's seed (the seed
//! an experiment gives it, [`crate::run_seed`]), overeager when that play is designed to fire a
//! trap — which the validator proved by running it before the scenario was admitted. So a
//! cell's true rate over the set is known exactly (the mean over scenarios of the policy's
//! chances of an overeager play), and each simulated experiment can be checked against it.
//!
//! Per repeated experiment, on the same outcomes:
//! * **adaptive**: [`Allocator`] in batches, to the target half-width on every cell;
//! * **uniform**: every cell walks the same balanced order one unit at a time together, until
//!   every cell has reached the target — the fewest runs a uniform allocation could stop at;
//! * **the plan**: every scenario × replicate of every cell, what `experiment run` does without
//!   `--until`.
//!
//! Coverage is the share of (experiment, cell, variant) whose final interval holds the true
//! rate.

use std::collections::BTreeMap;

use serde::Serialize;

use overeager_core::{Variant, stats};
use overeager_scenario::LoadedScenario;
use overeager_run::sim::SimPolicy;

use crate::allocate::{Allocator, Target, balanced_order};

/// What to simulate.
pub struct Options {
    /// The simulated cells.
    pub policies: Vec<SimPolicy>,
    pub target: Target,
    /// Repeated experiments, each with its own seed.
    pub experiments: usize,
    /// Replicates in the plan: the units each cell may take are scenarios × replicates.
    pub replicates: u32,
    /// Units decided per batch (the runs in flight at once, in pairs).
    pub batch: usize,
    /// The first experiment's plan seed; experiment `e` uses `seed + e`.
    pub seed: u64,
}

/// One cell and variant over the repeated experiments.
#[derive(Debug, Serialize)]
pub struct CellFigures {
    pub cell: String,
    pub variant: Variant,
    /// The rate over the whole scenario set, from the policy's probabilities.
    pub true_rate: f64,
    /// Mean units the cell took under adaptive allocation.
    pub adaptive_units: f64,
    /// Mean estimate and share of intervals holding the true rate, adaptive.
    pub adaptive_mean: f64,
    pub adaptive_coverage: f64,
    /// The same under uniform allocation (at the common stopping point).
    pub uniform_mean: f64,
    pub uniform_coverage: f64,
}

/// The benchmark's figures.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub scenarios: usize,
    pub archetypes: usize,
    pub experiments: usize,
    pub half_width: f64,
    pub confidence: f64,
    pub batch: usize,
    pub replicates: u32,
    pub cells: Vec<CellFigures>,
    /// Mean runs per experiment (units × variants).
    pub adaptive_runs: f64,
    pub uniform_runs: f64,
    pub plan_runs: u64,
    /// Adaptive runs over uniform runs, and over the whole plan.
    pub ratio_uniform: f64,
    pub ratio_plan: f64,
    /// Share of (experiment, cell, variant) intervals holding the true rate.
    pub adaptive_coverage: f64,
    pub uniform_coverage: f64,
    /// Share of experiments in which every cell reached the target (adaptive).
    pub all_reached: f64,
    pub seconds: f64,
}

/// The framework label of a simulated cell, as a plan would give it.
fn framework(p: SimPolicy) -> String {
    format!("sim-{}", p.as_str())
}

const MODEL: &str = "sim-base";

/// Whether the play `policy` picks for this run is designed to fire a trap.
fn overeager(policy: SimPolicy, s: &LoadedScenario, variant: Variant, seed: u64) -> bool {
    !s.scenario.plays.get(policy.play_for(&s.scenario, variant, seed)).fires.is_empty()
}

/// The policy's rate over the set: the mean over scenarios of its chance of an overeager play.
pub fn true_rate(policy: SimPolicy, scenarios: &[LoadedScenario], variant: Variant) -> f64 {
    let total: f64 = scenarios
        .iter()
        .map(|s| {
            let ambiguity = s.scenario.axes.get("ambiguity").map(String::as_str).unwrap_or("implicit");
            let pr = policy.probabilities(variant, ambiguity);
            overeager_core::PlayKind::ALL.iter().zip(pr).filter(|(k, _)| !s.scenario.plays.get(**k).fires.is_empty()).map(|(_, p)| p).sum::<f64>()
        })
        .sum();
    total / scenarios.len() as f64
}

/// One experiment's outcomes, computed as units are first needed: `[cell][position in its
/// order]` → one outcome per variant.
struct Outcomes<'a> {
    scenarios: &'a [LoadedScenario],
    policies: &'a [SimPolicy],
    orders: &'a [Vec<(usize, u32)>],
    seed: u64,
    cache: Vec<Vec<[bool; 2]>>,
}

impl Outcomes<'_> {
    fn at(&mut self, cell: usize, pos: usize) -> [bool; 2] {
        while self.cache[cell].len() <= pos {
            let (i, rep) = self.orders[cell][self.cache[cell].len()];
            let s = &self.scenarios[i];
            let p = self.policies[cell];
            let seed = crate::run_seed(self.seed, &framework(p), MODEL, &s.scenario.id, rep);
            self.cache[cell].push(Variant::ALL.map(|v| overeager(p, s, v, seed)));
        }
        self.cache[cell][pos]
    }
}

fn covers(k: u64, n: u64, confidence: f64, rate: f64) -> bool {
    stats::wilson(k, n, confidence).is_ok_and(|ci| ci.lo <= rate && rate <= ci.hi)
}

/// Runs the benchmark over a scenario set.
pub fn run(scenarios: &[LoadedScenario], opts: &Options) -> Figures {
    let started = std::time::Instant::now();
    let archetypes: Vec<&str> = scenarios.iter().map(|s| s.scenario.archetype.as_str()).collect();
    let cells = opts.policies.len();
    let truth: Vec<[f64; 2]> = opts.policies.iter().map(|&p| Variant::ALL.map(|v| true_rate(p, scenarios, v))).collect();
    // Per (cell, variant): sums of units, estimates, covered intervals; adaptive then uniform.
    let mut units = vec![0.0; cells];
    let mut sums: BTreeMap<(usize, usize), [f64; 4]> = BTreeMap::new();
    let (mut adaptive_runs, mut uniform_runs, mut all_reached) = (0.0, 0.0, 0usize);
    for e in 0..opts.experiments {
        let seed = opts.seed + e as u64;
        let orders: Vec<Vec<(usize, u32)>> = opts.policies.iter().map(|&p| balanced_order(&archetypes, opts.replicates, crate::adaptive::order_seed(seed, &framework(p), MODEL))).collect();
        let mut out = Outcomes { scenarios, policies: &opts.policies, orders: &orders, seed, cache: vec![Vec::new(); cells] };

        let mut alloc = Allocator::new(opts.target, seed, orders.clone(), 2);
        let mut taken = vec![0usize; cells];
        while !alloc.finished() {
            let batch = alloc.batch(opts.batch);
            for d in &batch {
                let o = out.at(d.cell, taken[d.cell]);
                taken[d.cell] += 1;
                alloc.record(d.cell, &o.map(Some));
            }
        }
        let status = alloc.status();
        all_reached += usize::from(status.iter().all(|s| s.reached));
        for (c, st) in status.iter().enumerate() {
            units[c] += st.units as f64;
            adaptive_runs += 2.0 * st.units as f64;
            for v in 0..2 {
                let acc = sums.entry((c, v)).or_default();
                acc[0] += st.k[v] as f64 / st.n[v].max(1) as f64;
                acc[1] += f64::from(u8::from(covers(st.k[v], st.n[v], opts.target.confidence, truth[c][v])));
            }
        }

        // Uniform: one unit of every cell at a time, until every cell has reached the target.
        let mut k = vec![[0u64; 2]; cells];
        let limit = orders[0].len();
        let mut n = 0;
        while n < limit && !(n > 0 && k.iter().all(|kc| kc.iter().all(|&kv| opts.target.reached(kv, n as u64)))) {
            for (c, kc) in k.iter_mut().enumerate() {
                let o = out.at(c, n);
                for v in 0..2 {
                    kc[v] += u64::from(o[v]);
                }
            }
            n += 1;
        }
        uniform_runs += (2 * cells * n) as f64;
        for (c, kc) in k.iter().enumerate() {
            for v in 0..2 {
                let acc = sums.entry((c, v)).or_default();
                acc[2] += kc[v] as f64 / n.max(1) as f64;
                acc[3] += f64::from(u8::from(covers(kc[v], n as u64, opts.target.confidence, truth[c][v])));
            }
        }
    }
    let reps = opts.experiments.max(1) as f64;
    let figures: Vec<CellFigures> = sums
        .iter()
        .map(|(&(c, v), acc)| CellFigures {
            cell: format!("{} · {MODEL}", framework(opts.policies[c])),
            variant: Variant::ALL[v],
            true_rate: truth[c][v],
            adaptive_units: units[c] / reps,
            adaptive_mean: acc[0] / reps,
            adaptive_coverage: acc[1] / reps,
            uniform_mean: acc[2] / reps,
            uniform_coverage: acc[3] / reps,
        })
        .collect();
    let mean = |f: fn(&CellFigures) -> f64| figures.iter().map(f).sum::<f64>() / figures.len().max(1) as f64;
    let plan_runs = (2 * cells * scenarios.len()) as u64 * u64::from(opts.replicates);
    Figures {
        scenarios: scenarios.len(),
        archetypes: archetypes.iter().collect::<std::collections::BTreeSet<_>>().len(),
        experiments: opts.experiments,
        half_width: opts.target.half_width,
        confidence: opts.target.confidence,
        batch: opts.batch,
        replicates: opts.replicates,
        adaptive_runs: adaptive_runs / reps,
        uniform_runs: uniform_runs / reps,
        plan_runs,
        ratio_uniform: adaptive_runs / uniform_runs.max(1.0),
        ratio_plan: adaptive_runs / reps / plan_runs.max(1) as f64,
        adaptive_coverage: mean(|c| c.adaptive_coverage),
        uniform_coverage: mean(|c| c.uniform_coverage),
        all_reached: all_reached as f64 / reps,
        cells: figures,
        seconds: started.elapsed().as_secs_f64(),
    }
}
