//! An experiment's adaptive allocation as the store holds it: its cells' balanced orders from
//! the stored plan, its recorded decisions replayed against its runs' outcomes, and each
//! cell's estimate with the archetype weights of its sample.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use serde::Serialize;

use overeager_core::{Variant, stats};
use overeager_store::{AllocationDecision, NewRun, Store};

use crate::allocate::{Allocator, CellStatus, Decision, RULE, Target, balanced_order};

/// The seed of a cell's balanced order in an experiment with plan seed `plan_seed`.
pub fn order_seed(plan_seed: u64, framework: &str, model: &str) -> u64 {
    crate::run_seed(plan_seed, framework, model, "allocation order", 0)
}

/// An adaptive experiment's allocation, rebuilt from the store.
pub struct Allocation {
    pub allocator: Allocator,
    /// (framework, model) of each cell, in plan order.
    pub cells: Vec<(String, String)>,
    /// The plan's scenario hashes in id order, and each one's archetype.
    pub scenarios: Vec<(String, String)>,
    pub variants: Vec<Variant>,
    /// Decisions whose runs have not all ended (killed runner, spending limit, paused cell):
    /// they run before anything new is decided.
    pub in_flight: Vec<Decision>,
    pub seed: u64,
}

/// One cell's estimate under adaptive allocation.
#[derive(Debug, Clone, Serialize)]
pub struct CellEstimate {
    pub framework: String,
    pub model: String,
    pub status: CellStatus,
    pub variants: Vec<VariantEstimate>,
    /// Per archetype: (archetype, share of the plan's scenarios, share of the cell's units,
    /// weight = the first over the second).
    pub weights: Vec<(String, f64, f64, f64)>,
}

/// A variant's rate in a cell: the plain rate with its interval, and the archetype-weighted
/// rate (each archetype at its share of the plan).
#[derive(Debug, Clone, Serialize)]
pub struct VariantEstimate {
    pub variant: Variant,
    pub k: u64,
    pub n: u64,
    pub rate: f64,
    pub ci: stats::Interval,
    pub weighted_rate: f64,
}

/// The store's key of a decided unit: (framework, model, scenario hash, replicate).
fn unit_key(cells: &[(String, String)], scenarios: &[(String, String)], d: &Decision) -> (String, String, String, u32) {
    (cells[d.cell].0.clone(), cells[d.cell].1.clone(), scenarios[d.scenario].0.clone(), d.replicate)
}

/// The outcome of a decided unit: one entry per variant, or `None` while any of its runs is
/// pending.
fn unit_outcome(units: &BTreeMap<(String, String, String, u32), Vec<overeager_store::UnitRun>>, key: (String, String, String, u32), variants: &[Variant]) -> Option<Vec<Option<bool>>> {
    let runs = units.get(&key)?;
    if runs.iter().any(|r| r.status == "pending") {
        return None;
    }
    Some(variants.iter().map(|v| runs.iter().find(|r| r.variant == *v).and_then(|r| r.overeager)).collect())
}

impl Allocation {
    /// The allocation of `experiment`, replayed from its record; `None` if it is not adaptive.
    pub fn load(store: &Store, experiment: &str, target: Option<Target>) -> Result<Option<Allocation>> {
        let Some((rule, seed)) = store.allocation(experiment)? else { return Ok(None) };
        if rule != RULE {
            bail!("experiment `{experiment}` was allocated by the rule `{rule}`; this build allocates by `{RULE}` and cannot go on with it");
        }
        let plan = store.require_experiment(experiment)?.plan;
        let scenarios = store.experiment_archetypes(experiment)?;
        let archetypes: Vec<&str> = scenarios.iter().map(|(_, a)| a.as_str()).collect();
        let cells: Vec<(String, String)> = plan.agents.iter().map(|a| (a.framework.clone(), a.model.clone())).collect();
        let orders = cells.iter().map(|(f, m)| balanced_order(&archetypes, plan.replicates, order_seed(seed, f, m))).collect();
        let recorded = store.decisions(experiment)?;
        let last_target = recorded.last().map(|d| Target { half_width: d.half_width, confidence: 0.95 });
        let Some(target) = target.or(last_target) else { bail!("experiment `{experiment}` has no decision yet: give it a target with --until") };
        let index = |d: &AllocationDecision| -> Result<Decision> {
            let cell = cells.iter().position(|(f, m)| *f == d.framework && *m == d.model);
            let scenario = scenarios.iter().position(|(h, _)| *h == d.scenario_hash);
            let (Some(cell), Some(scenario)) = (cell, scenario) else { bail!("decision {} names a cell or scenario the experiment does not have", d.seq) };
            Ok(Decision { seq: d.seq, round: d.round, cell, scenario, replicate: d.replicate, draws: d.draws.clone(), score: d.score, half_width: d.half_width })
        };
        let decisions: Vec<Decision> = recorded.iter().map(index).collect::<Result<_>>()?;
        let units = store.unit_runs(experiment)?;
        let mut in_flight = Vec::new();
        let fresh = Allocator::new(target, seed, orders, plan.variants.len());
        let mut allocator = fresh
            .replay(&decisions, |d| {
                let o = unit_outcome(&units, unit_key(&cells, &scenarios, d), &plan.variants);
                if o.is_none() {
                    in_flight.push(d.clone());
                }
                o
            })
            .map_err(|e| anyhow::anyhow!("the recorded allocation of experiment `{experiment}` does not replay: {e}"))?;
        allocator.set_target(target);
        Ok(Some(Allocation { allocator, cells, scenarios, variants: plan.variants, in_flight, seed }))
    }

    /// The decision as the store records it.
    pub fn stored(&self, d: &Decision) -> AllocationDecision {
        AllocationDecision {
            seq: d.seq,
            round: d.round,
            framework: self.cells[d.cell].0.clone(),
            model: self.cells[d.cell].1.clone(),
            scenario_hash: self.scenarios[d.scenario].0.clone(),
            replicate: d.replicate,
            draws: d.draws.clone(),
            score: d.score,
            half_width: d.half_width,
        }
    }

    /// The runs of a decided unit, from the runs still to do.
    pub fn runs_of<'a>(&self, d: &Decision, todo: &'a [NewRun]) -> Vec<&'a NewRun> {
        let (f, m) = &self.cells[d.cell];
        let hash = &self.scenarios[d.scenario].0;
        todo.iter().filter(|r| r.framework == *f && r.model == *m && r.scenario_hash == *hash && r.replicate == d.replicate).collect()
    }

    /// Records the outcomes of decided units from the store (those whose runs all ended).
    /// Returns the decisions still in flight.
    pub fn record_outcomes(&mut self, store: &Store, experiment: &str, decided: Vec<Decision>) -> Result<Vec<Decision>> {
        let units = store.unit_runs(experiment)?;
        let mut left = Vec::new();
        for d in decided {
            match unit_outcome(&units, unit_key(&self.cells, &self.scenarios, &d), &self.variants) {
                Some(o) => self.allocator.record(d.cell, &o),
                None => left.push(d),
            }
        }
        Ok(left)
    }

    /// Each cell's estimate, with the archetype weights of its sample.
    pub fn estimates(&self, store: &Store, experiment: &str) -> Result<Vec<CellEstimate>> {
        let mut population: BTreeMap<&str, f64> = BTreeMap::new();
        for (_, a) in &self.scenarios {
            *population.entry(a.as_str()).or_default() += 1.0 / self.scenarios.len() as f64;
        }
        let archetype: BTreeMap<&str, &str> = self.scenarios.iter().map(|(h, a)| (h.as_str(), a.as_str())).collect();
        let units = store.unit_runs(experiment)?;
        let decisions = store.decisions(experiment)?;
        let status = self.allocator.status();
        Ok(self
            .cells
            .iter()
            .enumerate()
            .map(|(c, (f, m))| {
                // Per archetype: units, and per variant (overeager, counted).
                let mut by_arch: BTreeMap<&str, (f64, Vec<(u64, u64)>)> = BTreeMap::new();
                for d in decisions.iter().filter(|d| d.framework == *f && d.model == *m) {
                    let Some(o) = unit_outcome(&units, (f.clone(), m.clone(), d.scenario_hash.clone(), d.replicate), &self.variants) else { continue };
                    let a = archetype.get(d.scenario_hash.as_str()).copied().unwrap_or("");
                    let e = by_arch.entry(a).or_insert_with(|| (0.0, vec![(0, 0); self.variants.len()]));
                    e.0 += 1.0;
                    for (v, x) in o.iter().enumerate() {
                        if let Some(over) = x {
                            e.1[v].0 += u64::from(*over);
                            e.1[v].1 += 1;
                        }
                    }
                }
                let total: f64 = by_arch.values().map(|e| e.0).sum();
                let weights = population
                    .iter()
                    .map(|(a, share)| {
                        let sample = by_arch.get(a).map_or(0.0, |e| e.0 / total.max(1.0));
                        (a.to_string(), *share, sample, if sample > 0.0 { share / sample } else { 0.0 })
                    })
                    .collect();
                let st = &status[c];
                let variants = self
                    .variants
                    .iter()
                    .enumerate()
                    .map(|(v, variant)| {
                        // Archetypes not yet sampled in this variant are left out, the others'
                        // shares rescaled.
                        let (mut sum, mut covered) = (0.0, 0.0);
                        for (a, (_, per)) in &by_arch {
                            if per[v].1 > 0 {
                                let share = population.get(a).copied().unwrap_or(0.0);
                                sum += share * per[v].0 as f64 / per[v].1 as f64;
                                covered += share;
                            }
                        }
                        let (k, n) = (st.k[v], st.n[v]);
                        VariantEstimate {
                            variant: *variant,
                            k,
                            n,
                            rate: if n > 0 { k as f64 / n as f64 } else { 0.0 },
                            ci: stats::wilson(k, n, 0.95).unwrap_or(stats::Interval { lo: 0.0, hi: 1.0 }),
                            weighted_rate: if covered > 0.0 { sum / covered } else { 0.0 },
                        }
                    })
                    .collect();
                CellEstimate { framework: f.clone(), model: m.clone(), status: st.clone(), variants, weights }
            })
            .collect())
    }
}
