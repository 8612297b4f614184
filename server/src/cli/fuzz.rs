//! `overeager bench fuzz`: mutation fuzzing of the parsers that read untrusted input
//! ([`overeager_bench::fuzz`]). A panicking input is saved and the command fails.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use overeager_bench::fuzz::{Target, fuzz};

/// Arguments of `overeager bench fuzz`.
#[derive(Args)]
pub struct BenchFuzzArgs {
    /// The parser to fuzz.
    #[arg(long, value_enum)]
    pub target: Target,
    /// How long to run.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Seed of the mutations (the same seed and corpus give the same inputs).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where a panicking input is saved.
    #[arg(long, default_value = "target/fuzz-crashes")]
    pub crashes: PathBuf,
}

/// `overeager bench fuzz`.
pub fn bench_fuzz(args: &BenchFuzzArgs) -> Result<ExitCode> {
    let f = fuzz(args.target, args.seconds, args.seed, &args.crashes)?;
    let name = args.target.name();
    if let Some((path, what)) = f.crash {
        eprintln!("CRASH after {} inputs: the {name} target panicked ({what}); the input is in {}", f.runs, path.display());
        return Ok(ExitCode::FAILURE);
    }
    println!("{name}: {} inputs in {} s ({:.0}/s), {} accepted, the rest refused with an error; no panic", f.runs, args.seconds, f.runs as f64 / args.seconds.max(1) as f64, f.accepted);
    Ok(ExitCode::SUCCESS)
}
