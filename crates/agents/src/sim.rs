//! Simulated agents: for demos and for testing the statistics end to end.
//!
//! A simulated agent replays one of the scenario's three scripted plays, picked at random with
//! probabilities that depend on the prompt variant and on the scenario's authorization
//! ambiguity. The runs themselves are real (sandbox, observers, judge); only the choice of
//! behaviour is simulated, so every effect a report shows for them was put there by the
//! numbers below — which is what makes them useful to check that reports find it. Reports
//! label their cells as simulated.

use overeager_core::{PlayKind, Scenario, Variant};
use rand::{Rng, SeedableRng};

/// A policy of a simulated agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimPolicy {
    /// Goes beyond the task readily, much more so when the prompt states no scope of consent.
    Permissive,
    /// Asks before acting outside the task; rarely overeager, somewhat more without a scope.
    AskFirst,
    /// Stays in scope almost always; a stated scope of consent makes it stricter still.
    Wary,
}

impl SimPolicy {
    /// The policies, as written after `sim:`.
    pub const KNOWN: &'static str = "sim:permissive, sim:ask, sim:wary";

    /// The name written after `sim:`.
    pub fn as_str(self) -> &'static str {
        match self {
            SimPolicy::Permissive => "permissive",
            SimPolicy::AskFirst => "ask",
            SimPolicy::Wary => "wary",
        }
    }

    /// Probabilities of the moderate and the aggressive play (the rest is cautious) with the
    /// scope of consent stated in the prompt and without it, before the ambiguity factor.
    fn base(self, variant: Variant) -> (f64, f64) {
        match (self, variant) {
            (SimPolicy::Permissive, Variant::ConsentKept) => (0.25, 0.15),
            (SimPolicy::Permissive, Variant::ConsentStripped) => (0.30, 0.40),
            (SimPolicy::AskFirst, Variant::ConsentKept) => (0.06, 0.02),
            (SimPolicy::AskFirst, Variant::ConsentStripped) => (0.12, 0.08),
            (SimPolicy::Wary, Variant::ConsentKept) => (0.015, 0.005),
            (SimPolicy::Wary, Variant::ConsentStripped) => (0.03, 0.015),
        }
    }

    /// [cautious, moderate, aggressive] for a scenario with the given ambiguity level.
    /// Overeager behaviour is scaled down when the task's wording leaves less room for it:
    /// ×1 for `implicit` (the seeds' wording), ×0.7 for `none`, ×0.4 for
    /// `explicit_out_of_scope`.
    pub fn probabilities(self, variant: Variant, ambiguity: &str) -> [f64; 3] {
        let factor = match ambiguity {
            "none" => 0.7,
            "explicit_out_of_scope" => 0.4,
            _ => 1.0,
        };
        let (m, a) = self.base(variant);
        let (m, a) = (m * factor, a * factor);
        [1.0 - m - a, m, a]
    }

    /// The play for uniform draw `u` ∈ [0, 1). The same `u` for both variants of a scenario
    /// and replicate gives paired runs (common random numbers): a run that is aggressive with
    /// the consent block is aggressive without it too, as with a real agent whose disposition
    /// on a task does not flip at random between the two prompts.
    pub fn choose(self, variant: Variant, ambiguity: &str, u: f64) -> PlayKind {
        let [c, m, _] = self.probabilities(variant, ambiguity);
        if u < c {
            PlayKind::Cautious
        } else if u < c + m {
            PlayKind::Moderate
        } else {
            PlayKind::Aggressive
        }
    }

    /// The play for a run of `scenario` with the given draw seed, which the two variants of a
    /// scenario and replicate share. Most pairs use the shared draw; a fraction
    /// [`UNPAIRED`] draw per variant instead, so that, as with real agents, some pairs
    /// disagree in the unexpected direction too (overeager only with the consent block).
    pub fn play_for(self, scenario: &Scenario, variant: Variant, seed: u64) -> PlayKind {
        let ambiguity = scenario.axes.get("ambiguity").map(String::as_str).unwrap_or("implicit");
        let u = if uniform(seed ^ 0x5ca1_ab1e) < UNPAIRED {
            let salt = match variant {
                Variant::ConsentKept => 0x6b65_7074,
                Variant::ConsentStripped => 0x7374_7270,
            };
            uniform(seed ^ salt)
        } else {
            uniform(seed)
        };
        self.choose(variant, ambiguity, u)
    }
}

impl std::str::FromStr for SimPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "permissive" => Ok(SimPolicy::Permissive),
            "ask" => Ok(SimPolicy::AskFirst),
            "wary" => Ok(SimPolicy::Wary),
            _ => Err(format!("unknown simulated policy `{s}`; known: {}", SimPolicy::KNOWN)),
        }
    }
}

/// The share of (scenario, replicate) pairs whose two variants draw independently.
pub const UNPAIRED: f64 = 0.25;

/// A uniform draw in [0, 1) determined by `seed`.
pub fn uniform(seed: u64) -> f64 {
    rand_chacha::ChaCha8Rng::seed_from_u64(seed).random::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_sum_to_one_and_order_the_policies() {
        for p in [SimPolicy::Permissive, SimPolicy::AskFirst, SimPolicy::Wary] {
            for v in Variant::ALL {
                for amb in ["implicit", "none", "explicit_out_of_scope"] {
                    let pr = p.probabilities(v, amb);
                    assert!((pr.iter().sum::<f64>() - 1.0).abs() < 1e-12 && pr.iter().all(|&x| x >= 0.0));
                }
            }
            let kept = p.probabilities(Variant::ConsentKept, "implicit");
            let stripped = p.probabilities(Variant::ConsentStripped, "implicit");
            assert!(stripped[0] < kept[0], "stripping consent makes {p:?} less cautious");
            // Paired draws never make the stripped run more cautious than the kept one.
            for i in 0..1000 {
                let u = i as f64 / 1000.0;
                assert!(p.choose(Variant::ConsentStripped, "implicit", u) >= p.choose(Variant::ConsentKept, "implicit", u));
            }
        }
        let wary = SimPolicy::Wary.probabilities(Variant::ConsentStripped, "implicit");
        let ask = SimPolicy::AskFirst.probabilities(Variant::ConsentKept, "implicit");
        assert!(wary[0] > ask[0]);
        let ask = SimPolicy::AskFirst.probabilities(Variant::ConsentStripped, "implicit");
        let permissive = SimPolicy::Permissive.probabilities(Variant::ConsentKept, "implicit");
        assert!(ask[0] > permissive[0]);
    }

    #[test]
    fn draws_are_deterministic_and_spread() {
        assert_eq!(uniform(7), uniform(7));
        let mean = (0..2000).map(uniform).sum::<f64>() / 2000.0;
        assert!((mean - 0.5).abs() < 0.03, "mean {mean}");
    }
}
