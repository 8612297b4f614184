//! Latin-hypercube sampling over discrete axes, and the document distance of the diversity
//! gate.

use std::collections::BTreeSet;

use overeager_core::Scenario;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

use super::fixture::Fixture;

/// A Latin hypercube over discrete dimensions: `n` points; in every dimension each level is
/// used `n / k` times (±1), and the columns are permuted independently. Point `i` is
/// `[level index per dimension]`.
pub fn latin_hypercube(dims: &[usize], n: usize, rng: &mut ChaCha8Rng) -> Vec<Vec<usize>> {
    let mut columns: Vec<Vec<usize>> = dims
        .iter()
        .map(|&k| {
            let mut col: Vec<usize> = (0..n).map(|i| i * k / n.max(1)).collect();
            col.shuffle(rng);
            col
        })
        .collect();
    (0..n).map(|i| columns.iter_mut().map(|c| c[i]).collect()).collect()
}

/// The generator's RNG for round `round` of the sampling.
pub fn round_rng(generator_seed: u64, round: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(generator_seed);
    r.set_stream(u64::MAX - round);
    r
}

/// A scenario as a set of hashed features, for the diversity gate.
///
/// Features: the seed and each axis level; every run of three consecutive words of the task;
/// every fixture path; every trap (predicate and arguments); every play step. Two scenarios are
/// at distance `1 − |A ∩ B| / |A ∪ B|` (Jaccard distance): 0 for the same document, 1 for
/// documents sharing nothing.
#[derive(Debug, Clone)]
pub struct Features(Vec<u64>);

fn h(parts: &[&str]) -> u64 {
    let mut d = Sha256::new();
    for p in parts {
        d.update(p.as_bytes());
        d.update([0]);
    }
    u64::from_le_bytes(d.finalize()[..8].try_into().expect("8 bytes"))
}

impl Features {
    /// The features of a candidate.
    pub fn of(seed: &str, s: &Scenario, fixture: &Fixture) -> Features {
        let mut set = BTreeSet::new();
        set.insert(h(&["seed", seed]));
        for (axis, level) in &s.axes {
            set.insert(h(&["axis", axis, level]));
        }
        let words: Vec<String> = s
            .prompt
            .task
            .split(|c: char| !c.is_alphanumeric() && !matches!(c, '.' | '_' | '-' | '/' | '~'))
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        for w in words.windows(3) {
            set.insert(h(&["task", &w.join(" ")]));
        }
        for path in fixture.entries.keys() {
            set.insert(h(&["file", path]));
        }
        for t in &s.traps {
            set.insert(h(&["trap", &t.call.predicate, &t.call.args.to_string()]));
        }
        for kind in overeager_core::PlayKind::ALL {
            for step in &s.plays.get(kind).steps {
                set.insert(h(&["step", kind.as_str(), &serde_json::to_string(step).expect("steps serialize")]));
            }
        }
        Features(set.into_iter().collect())
    }

    /// Jaccard distance between two feature sets (both sorted).
    pub fn distance(&self, other: &Features) -> f64 {
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j, mut common) = (0, 0, 0usize);
        while i < a.len() && j < b.len() {
            match a[i].cmp(&b[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    common += 1;
                    i += 1;
                    j += 1;
                }
            }
        }
        let union = a.len() + b.len() - common;
        if union == 0 { 0.0 } else { 1.0 - common as f64 / union as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_level_is_used_equally_often() {
        let mut rng = round_rng(7, 0);
        let pts = latin_hypercube(&[4, 3, 5], 60, &mut rng);
        for (d, k) in [4usize, 3, 5].iter().enumerate() {
            for level in 0..*k {
                assert_eq!(pts.iter().filter(|p| p[d] == level).count(), 60 / k);
            }
        }
        let again = latin_hypercube(&[4, 3, 5], 60, &mut round_rng(7, 0));
        assert_eq!(pts, again, "the same seed gives the same sample");
        assert_ne!(pts, latin_hypercube(&[4, 3, 5], 60, &mut round_rng(8, 0)));
    }

    #[test]
    fn jaccard_distance() {
        let a = Features(vec![1, 2, 3, 4]);
        let b = Features(vec![3, 4, 5, 6]);
        assert!((a.distance(&b) - (1.0 - 2.0 / 6.0)).abs() < 1e-12);
        assert_eq!(a.distance(&a), 0.0);
        assert_eq!(a.distance(&Features(vec![9])), 1.0);
    }
}
