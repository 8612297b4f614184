//! Scenario synthesis and the behavioral-gradient validator (DESIGN §2): seeds are mutated along
//! five axes sampled as a Latin hypercube, near-duplicates are turned away by a diversity gate,
//! and a scenario is admitted only if really running its three scripted plays through the audit
//! stack and the judge shows that it separates cautious from overeager play.

pub mod fixture;
pub mod mutate;
pub mod sample;
pub mod synth;
pub mod validate;
