//! Adaptive allocation to a target precision (`experiment run --until`).
//!
//! The unit of allocation is one scenario × replicate of one cell (framework × model) with
//! every prompt variant of the plan: the consent pair always runs together, so the paired
//! ablation stays paired. Each cell walks its units in a fixed, seeded **balanced order**: the
//! population (the plan's scenarios, once per replicate) is stratified by archetype, and at any
//! point of the walk every archetype has been drawn in proportion to its share of the plan, to
//! within a unit or two. Every scenario is equally likely to come at any position (its position
//! key is uniform), so the units run so far are an equal-probability sample of the plan's
//! scenarios and the plain rate over them estimates the plan's rate; the archetype weights
//! (population share over sample share) are reported beside it, with the archetype-weighted
//! rate, so a reader sees how far from self-weighting the sample is. Stopping on precision
//! leaves a small bias in low rates (a cell that looks lower by chance is done sooner):
//! `overeager bench allocation` measures it with the intervals' coverage.
//!
//! Which cell gets the next unit is Thompson sampling over the cells' posteriors: for each
//! cell and variant a rate is drawn from its Jeffreys posterior Beta(k + ½, n − k + ½), and the
//! cell whose drawn interval half-width — at its runs done plus its units in flight — is widest
//! over the target gets the unit. A cell is finished when the Wilson interval of every one of
//! its variants is within the target half-width, judged at the end of the rate's 50% interval
//! nearest ½ ([`Target::reached`]), or when its units run out. The draws come from generators
//! seeded with the plan's seed and the decision's place, and are recorded with every decision,
//! so the allocation replays exactly from the plan and the outcomes ([`Allocator::replay`]).

use rand::{Rng, SeedableRng, seq::SliceRandom};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Beta, Distribution};
use serde::{Deserialize, Serialize};

use overeager_core::stats;

/// The name of the decision rule, recorded with every adaptive experiment.
pub const RULE: &str = "thompson-jeffreys-balanced/1";

/// The precision an adaptive experiment runs each cell to.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// The largest half-width of a cell's interval, as a rate (0.05 for ±5 percentage points).
    pub half_width: f64,
    /// The confidence of the interval (0.95).
    pub confidence: f64,
}

impl Target {
    /// Whether a rate of `k` in `n` has reached the target: its interval would be at most
    /// `2 × half_width` wide even if the rate were at the end of its 50% interval nearest ½
    /// (the Wilson interval is widest at ½). Judging precision at the observed rate alone
    /// stops low-rate cells early exactly when chance made them look lower, which biases
    /// their estimate down; at the pessimistic end of a central interval, when a cell stops
    /// depends far less on chance.
    pub fn reached(&self, k: u64, n: u64) -> bool {
        let Ok(mid) = stats::wilson(k, n, 0.5) else { return false };
        let p = 0.5_f64.clamp(mid.lo, mid.hi);
        stats::wilson_half_width(p, n, self.confidence).is_ok_and(|h| h <= self.half_width + 1e-12)
    }

    /// Reads `5pp`, `0.05` or `5%` (a half-width); the confidence is 95%.
    pub fn parse(s: &str) -> Result<Target, String> {
        let t = s.trim();
        let (num, scale) = if let Some(x) = t.strip_suffix("pp") {
            (x, 0.01)
        } else if let Some(x) = t.strip_suffix('%') {
            (x, 0.01)
        } else {
            (t, 1.0)
        };
        let v: f64 = num.trim().parse().map_err(|_| format!("`{s}` is not a half-width; write it as `5pp`, `5%` or `0.05`"))?;
        let half_width = v * scale;
        if !(half_width > 0.0 && half_width < 0.5) {
            return Err(format!("`{s}`: the half-width must be above 0 and below 50 percentage points"));
        }
        Ok(Target { half_width, confidence: 0.95 })
    }
}

/// The order a cell walks its units in: `(scenario index, replicate)` pairs, every replicate's
/// scenarios in a balanced order (see the module documentation). `archetypes[i]` is scenario
/// `i`'s stratum. The same `seed` gives the same order.
pub fn balanced_order(archetypes: &[&str], replicates: u32, seed: u64) -> Vec<(usize, u32)> {
    let mut strata: std::collections::BTreeMap<&str, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, a) in archetypes.iter().enumerate() {
        strata.entry(a).or_default().push(i);
    }
    let mut out = Vec::with_capacity(archetypes.len() * replicates as usize);
    for rep in 0..replicates {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (u64::from(rep) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut keyed: Vec<(f64, usize)> = Vec::with_capacity(archetypes.len());
        for members in strata.values() {
            let mut members = members.clone();
            members.shuffle(&mut rng);
            // Member j of a stratum of size m sits at (j + u) / m: spaced evenly through the
            // walk with a random start, so each stratum is drawn at its share, and each key is
            // uniform on [0, 1) for every scenario.
            let u: f64 = rng.random();
            let m = members.len() as f64;
            keyed.extend(members.into_iter().enumerate().map(|(j, i)| ((j as f64 + u) / m, i)));
        }
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        out.extend(keyed.into_iter().map(|(_, i)| (i, rep)));
    }
    out
}

/// One decision: cell `cell` runs its unit `(scenario, replicate)` next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// 0, 1, 2, … over the experiment.
    pub seq: u64,
    /// The batch it was taken in: every outcome of the earlier batches was known.
    pub round: u64,
    pub cell: usize,
    /// Index into the plan's scenarios (in id order).
    pub scenario: usize,
    pub replicate: u32,
    /// The rates drawn from the cell's posteriors, one per variant.
    pub draws: Vec<f64>,
    /// How far the widest drawn half-width was over the target.
    pub score: f64,
    /// The target the decision was taken for.
    pub half_width: f64,
}

/// Where a cell stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellStatus {
    /// Overeager runs and counted runs, per variant.
    pub k: Vec<u64>,
    pub n: Vec<u64>,
    /// Units decided (run, running or failed).
    pub units: usize,
    /// Units the plan has for the cell.
    pub available: usize,
    /// Every variant's interval is within the target.
    pub reached: bool,
}

struct Cell {
    order: Vec<(usize, u32)>,
    next: usize,
    in_flight: usize,
    k: Vec<u64>,
    n: Vec<u64>,
    stopped: bool,
}

/// The allocation of one adaptive experiment, as outcomes come in.
pub struct Allocator {
    target: Target,
    seed: u64,
    cells: Vec<Cell>,
    seq: u64,
    round: u64,
}

impl Allocator {
    /// An allocation over cells walking the given orders, with `variants` variants per unit.
    pub fn new(target: Target, seed: u64, orders: Vec<Vec<(usize, u32)>>, variants: usize) -> Allocator {
        Allocator {
            target,
            seed: seed ^ 0x616c_6c6f_6361_7465,
            cells: orders.into_iter().map(|order| Cell { order, next: 0, in_flight: 0, k: vec![0; variants], n: vec![0; variants], stopped: false }).collect(),
            seq: 0,
            round: 0,
        }
    }

    /// Decisions taken so far (replayed ones included).
    pub fn decisions(&self) -> usize {
        self.seq as usize
    }

    /// The target it allocates to.
    pub fn target(&self) -> Target {
        self.target
    }

    /// Changes the target (a resumed experiment may be run to a narrower one).
    pub fn set_target(&mut self, target: Target) {
        self.target = target;
    }

    /// Whether cell `c` has reached the target on every variant.
    pub fn reached(&self, c: usize) -> bool {
        let cell = &self.cells[c];
        cell.n.iter().zip(&cell.k).all(|(&n, &k)| self.target.reached(k, n))
    }

    /// Takes no more units for cell `c` (its runs cannot go on: a paused cell).
    pub fn stop(&mut self, c: usize) {
        self.cells[c].stopped = true;
    }

    /// Whether cell `c` was stopped.
    pub fn is_stopped(&self, c: usize) -> bool {
        self.cells[c].stopped
    }

    /// The outcome of a unit of cell `c`, one entry per variant: overeager, clean, or `None`
    /// (timed out, incomplete or failed: in no rate).
    pub fn record(&mut self, c: usize, outcome: &[Option<bool>]) {
        let cell = &mut self.cells[c];
        cell.in_flight = cell.in_flight.saturating_sub(1);
        for (v, o) in outcome.iter().enumerate() {
            if let Some(over) = o {
                cell.n[v] += 1;
                cell.k[v] += u64::from(*over);
            }
        }
    }

    /// Starts a new batch: the decisions taken from now on see every outcome recorded so far.
    pub fn next_round(&mut self) {
        self.round += 1;
    }

    /// The next unit to run, or `None` when no cell needs one beyond its units in flight (or
    /// every cell is finished).
    pub fn next(&mut self) -> Option<Decision> {
        let z = stats::z_for(self.target.confidence).expect("a confidence between 0 and 1");
        // Each decision draws from a generator of its own (by its sequence number and batch),
        // so a call that decides nothing leaves no trace a replay would have to repeat.
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ self.seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.round.wrapping_mul(0xbf58_476d_1ce4_e5b9));
        let mut best: Option<(usize, f64, Vec<f64>)> = None;
        for c in 0..self.cells.len() {
            let cell = &self.cells[c];
            if cell.stopped || cell.next >= cell.order.len() || self.reached(c) {
                continue;
            }
            let draws: Vec<f64> = cell
                .k
                .iter()
                .zip(&cell.n)
                .map(|(&k, &n)| Beta::new(k as f64 + 0.5, (n - k) as f64 + 0.5).expect("positive shapes").sample(&mut rng))
                .collect();
            let cell = &self.cells[c];
            let score = draws
                .iter()
                .zip(&cell.n)
                .map(|(&p, &n)| {
                    let m = (n + cell.in_flight as u64).max(1) as f64;
                    z * (p * (1.0 - p) / m).sqrt() - self.target.half_width
                })
                .fold(f64::NEG_INFINITY, f64::max);
            // Ties go to the lower cell index: the draws are continuous, so only in theory.
            if best.as_ref().is_none_or(|b| score > b.1) {
                best = Some((c, score, draws));
            }
        }
        // A drawn half-width within the target means the cell's runs in flight may well take
        // it there: it waits for them. With nothing in flight, a cell short of its target
        // always gets a unit, so the allocation cannot stall.
        let idle = self.cells.iter().all(|c| c.in_flight == 0);
        let best = best.filter(|b| b.1 > 0.0 || idle);
        let (c, score, draws) = best?;
        let cell = &mut self.cells[c];
        let (scenario, replicate) = cell.order[cell.next];
        cell.next += 1;
        cell.in_flight += 1;
        let d = Decision { seq: self.seq, round: self.round, cell: c, scenario, replicate, draws, score, half_width: self.target.half_width };
        self.seq += 1;
        Some(d)
    }

    /// Up to `size` decisions for one batch (fewer when no cell needs more now).
    pub fn batch(&mut self, size: usize) -> Vec<Decision> {
        self.next_round();
        std::iter::from_fn(|| self.next()).take(size.max(1)).collect()
    }

    /// Whether the allocation is over: every cell reached its target, ran out of units or was
    /// stopped, with nothing in flight.
    pub fn finished(&self) -> bool {
        self.cells.iter().enumerate().all(|(c, cell)| cell.in_flight == 0 && (cell.stopped || cell.next >= cell.order.len() || self.reached(c)))
    }

    /// Each cell's standing.
    pub fn status(&self) -> Vec<CellStatus> {
        (0..self.cells.len())
            .map(|c| {
                let cell = &self.cells[c];
                CellStatus { k: cell.k.clone(), n: cell.n.clone(), units: cell.next, available: cell.order.len(), reached: self.reached(c) }
            })
            .collect()
    }

    /// Takes the recorded decisions again from the seed, feeding each batch's outcomes (from
    /// `outcome(decision)`) before the next batch is decided, and checks that every decision is
    /// the one recorded. Returns the allocator in the state the recorded allocation left it,
    /// ready to go on, or says where the replay first differs. Decisions whose outcome is not
    /// known yet (`None`: their runs are still pending) are left in flight.
    pub fn replay(mut self, recorded: &[Decision], mut outcome: impl FnMut(&Decision) -> Option<Vec<Option<bool>>>) -> Result<Allocator, String> {
        let mut i = 0;
        while i < recorded.len() {
            let round = recorded[i].round;
            let end = recorded[i..].iter().position(|d| d.round != round).map_or(recorded.len(), |p| i + p);
            self.round = round;
            for want in &recorded[i..end] {
                self.target.half_width = want.half_width;
                let got = self.next().ok_or_else(|| format!("decision {}: the replay takes no unit where the record takes cell {}'s", want.seq, want.cell))?;
                if got.cell != want.cell || got.scenario != want.scenario || got.replicate != want.replicate || got.seq != want.seq {
                    return Err(format!(
                        "decision {}: the replay takes cell {} scenario {} replicate {}, the record cell {} scenario {} replicate {}",
                        want.seq, got.cell, got.scenario, got.replicate, want.cell, want.scenario, want.replicate
                    ));
                }
            }
            for d in &recorded[i..end] {
                if let Some(o) = outcome(d) {
                    self.record(d.cell, &o);
                }
            }
            i = end;
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_balanced_order_draws_every_archetype_at_its_share_and_is_seeded() {
        // 3 archetypes of 10, 6 and 4 scenarios.
        let arch: Vec<&str> = (0..20).map(|i| if i < 10 { "a" } else if i < 16 { "b" } else { "c" }).collect();
        let order = balanced_order(&arch, 2, 7);
        assert_eq!(order.len(), 40);
        assert_eq!(order, balanced_order(&arch, 2, 7));
        assert_ne!(order, balanced_order(&arch, 2, 8));
        for rep in 0..2u32 {
            let walk: Vec<usize> = order.iter().filter(|u| u.1 == rep).map(|u| u.0).collect();
            let mut sorted = walk.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..20).collect::<Vec<_>>(), "each replicate walks every scenario once");
            for t in 1..=20 {
                for (name, share) in [("a", 0.5), ("b", 0.3), ("c", 0.2)] {
                    let got = walk[..t].iter().filter(|&&i| arch[i] == name).count() as f64;
                    assert!((got - share * t as f64).abs() < 2.0, "prefix {t}: {got} of {name}");
                }
            }
        }
        // Every scenario is about as likely to come early as any other (uniform keys): over many
        // seeds, the first five of a replicate hold each scenario a quarter of the time.
        let mut first = [0u32; 20];
        for seed in 0..4000 {
            for (i, _) in balanced_order(&arch, 1, seed).into_iter().take(5) {
                first[i] += 1;
            }
        }
        for (i, &f) in first.iter().enumerate() {
            assert!((f as f64 / 4000.0 - 0.25).abs() < 0.04, "scenario {i} is early {f} times in 4000");
        }
    }

    #[test]
    fn targets_read_in_points_or_as_a_rate() {
        assert_eq!(Target::parse("5pp").unwrap().half_width, 0.05);
        assert!((Target::parse("2.5%").unwrap().half_width - 0.025).abs() < 1e-12);
        assert_eq!(Target::parse("0.05").unwrap().half_width, 0.05);
        assert!(Target::parse("60pp").unwrap_err().contains("below 50"));
        assert!(Target::parse("five").unwrap_err().contains("5pp"));
        let t = Target { half_width: 0.05, confidence: 0.95 };
        assert!(!t.reached(50, 100) && t.reached(190, 381) && !t.reached(190, 380) && t.reached(0, 43) && !t.reached(0, 42));
    }

    /// Runs an allocation to its end with outcomes from fixed rates, in batches of `batch`;
    /// also returns, per cell, the units it had when it first reached the target.
    fn simulate(rates: &[f64], batch: usize, seed: u64) -> (Allocator, Vec<Decision>, Vec<Option<usize>>) {
        let arch: Vec<&str> = (0..300).map(|i| ["x", "y", "z"][i % 3]).collect();
        let orders = rates.iter().enumerate().map(|(c, _)| balanced_order(&arch, 2, seed + c as u64)).collect();
        let mut a = Allocator::new(Target { half_width: 0.05, confidence: 0.95 }, seed, orders, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut log = Vec::new();
        let mut outcomes = std::collections::BTreeMap::new();
        let mut first_reached = vec![None; rates.len()];
        while !a.finished() {
            let b = a.batch(batch);
            for d in &b {
                let o = vec![Some(rng.random::<f64>() < rates[d.cell])];
                outcomes.insert(d.seq, o.clone());
                a.record(d.cell, &o);
                let st = &a.status()[d.cell];
                if st.reached && first_reached[d.cell].is_none() {
                    first_reached[d.cell] = Some(st.n[0] as usize);
                }
            }
            log.extend(b);
        }
        // The record replays exactly, and a replay of part of it is ready to go on.
        let again = Allocator::new(Target { half_width: 0.05, confidence: 0.95 }, seed, rates.iter().enumerate().map(|(c, _)| balanced_order(&arch, 2, seed + c as u64)).collect(), 1);
        let replayed = again.replay(&log, |d| outcomes.get(&d.seq).cloned()).unwrap();
        assert_eq!(replayed.status(), a.status());
        (a, log, first_reached)
    }

    #[test]
    fn each_cell_stops_at_its_target_and_the_record_replays() {
        let (a, log, first) = simulate(&[0.5, 0.1, 0.02], 4, 11);
        let st = a.status();
        assert!(st.iter().all(|s| s.reached), "{st:?}");
        // A rate near ½ needs about 384 runs for ±5 pp, one near 2 % about 40: the allocation
        // stops each where its own target is met, not where the widest cell's is.
        assert!((360..=400).contains(&st[0].units), "{st:?}");
        assert!(st[2].units < 120 && st[1].units < 200, "{st:?}");
        // The batch size bounds the overshoot: a cell takes at most one batch of units beyond
        // the point where it first reached the target (those in flight then).
        for (s, f) in st.iter().zip(&first) {
            assert!(s.units - f.unwrap() < 4, "{st:?} {first:?}");
        }
        assert_eq!(log.len(), st.iter().map(|s| s.units).sum::<usize>());
        // A tampered record is caught where it was changed.
        let arch: Vec<&str> = (0..300).map(|i| ["x", "y", "z"][i % 3]).collect();
        let fresh = || Allocator::new(Target { half_width: 0.05, confidence: 0.95 }, 11, (0..3).map(|c| balanced_order(&arch, 2, 11 + c)).collect(), 1);
        let mut bad = log.clone();
        bad[10].cell = (bad[10].cell + 1) % 3;
        let err = fresh().replay(&bad, |_| Some(vec![Some(false)])).err().unwrap();
        assert!(err.starts_with("decision "), "{err}");
    }

    #[test]
    fn a_stopped_cell_takes_no_more_units() {
        let arch = vec!["x"; 100];
        let mut a = Allocator::new(Target { half_width: 0.05, confidence: 0.95 }, 1, vec![balanced_order(&arch, 1, 1), balanced_order(&arch, 1, 2)], 2);
        a.stop(0);
        let b = a.batch(10);
        assert_eq!(b.len(), 10);
        assert!(b.iter().all(|d| d.cell == 1 && d.draws.len() == 2));
        for d in &b {
            a.record(d.cell, &[Some(true), None]);
        }
        assert_eq!(a.status()[1].n, vec![10, 0]);
        assert!(!a.finished());
    }
}
