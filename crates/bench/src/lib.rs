//! The measurements behind `overeager bench`. Each drives the stages as a user's command
//! would (real runs, real bundles, the real judge, the API served in process), times them, and
//! returns its figures as a type; the binary prints them as a table or as JSON.
//!
//! It sits at the end of the flow: a measurement may use any stage, and no stage uses it.

use serde::Serialize;

use overeager_core::stats::percentile;

pub mod experiments;
pub mod fidelity;
pub mod fuzz;
pub mod http;
pub mod judging;
pub mod runs;
pub mod scale;
pub mod soak;

/// The machine a measurement ran on.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Machine {
    /// Cores available to this process.
    pub cores: usize,
}

impl Machine {
    /// This machine.
    pub fn this() -> Machine {
        Machine { cores: std::thread::available_parallelism().map_or(1, |n| n.get()) }
    }
}

/// The spread of a set of timings, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub n: usize,
    pub min_ms: f64,
    pub median_ms: f64,
    pub p90_ms: f64,
    pub max_ms: f64,
}

impl Spread {
    /// The spread of `ms`.
    pub fn of(mut ms: Vec<f64>) -> Spread {
        ms.sort_by(f64::total_cmp);
        Spread { n: ms.len(), min_ms: percentile(&ms, 0.0), median_ms: percentile(&ms, 0.5), p90_ms: percentile(&ms, 0.9), max_ms: percentile(&ms, 1.0) }
    }
}
