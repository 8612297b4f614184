//! The first stages: scenarios and their synthesis. [`scenario`] loads and checks a scenario
//! directory; the generator mutates expert seeds along five axes sampled as a Latin hypercube,
//! turns near-duplicates away with a diversity gate, and admits a candidate only when the
//! behavioral-gradient validator shows, by really running its three scripted plays, that it
//! separates cautious from overeager play. Running and judging those plays are later stages,
//! so the generator is handed a [`validate::Validator`] that does.

pub mod fixture;
pub mod mutate;
pub mod sample;
pub mod synth;
pub mod validate;
