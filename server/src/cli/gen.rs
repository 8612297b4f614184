//! `overeager gen`: synthesize validated scenarios from the seeds.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::judge::SandboxArgs;
use overeager_experiment::plays::PlayValidator;
use overeager_gen::synth::{self, DEFAULT_THETA, GenParams, Progress};
use overeager_run as run;

/// Arguments of `overeager gen`.
#[derive(Args)]
pub struct GenArgs {
    /// The seed scenarios; `archetypes.toml` and `atoms.toml` are looked up here and above.
    #[arg(long, default_value = "scenarios/seeds")]
    pub seeds: PathBuf,
    /// How many scenarios to admit.
    #[arg(long)]
    pub n: usize,
    /// The generator seed: the same seed gives the same scenarios, byte for byte.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where to write the admitted scenarios, `gen-report.json` and `MANIFEST`. An interrupted
    /// run resumes when started again with the same arguments.
    #[arg(long)]
    pub out: PathBuf,
    /// Diversity gate: minimum Jaccard distance between admitted scenarios (see scenarios/GEN.md).
    #[arg(long, default_value_t = DEFAULT_THETA)]
    pub theta: f64,
    /// A committed MANIFEST the result must reproduce byte for byte (exit 1 with the
    /// differences otherwise), e.g. `scenarios/bench-v1/MANIFEST`.
    #[arg(long, value_name = "MANIFEST")]
    pub expect: Option<PathBuf>,
    /// Admit a candidate only if its plays keep their gradient when played through this
    /// real-CLI cell on the scripted model (`<agent>[@<version>]:<policy>`, e.g.
    /// claude-code:permissive), so the bench is certified for the agents it will measure.
    #[arg(long, value_name = "CELL")]
    pub validate_with: Option<String>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Print the report as JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
}

struct Bar(ProgressBar);

impl Progress for Bar {
    fn seeds_validated(&self, total: usize, rejected: usize) {
        self.0.println(format!("{total} seed(s) validated, {rejected} not usable"));
    }
    fn candidate(&self, admitted: usize, considered: usize) {
        self.0.set_position(admitted as u64);
        self.0.set_message(format!("{considered} candidates considered"));
    }
}

pub fn gen_cmd(args: &GenArgs) -> Result<ExitCode> {
    let shim = overeager_agents::locate_shim().map_err(anyhow::Error::msg)?;
    let (judge, _) = args.sandbox.build()?;
    if let Some(cell) = &args.validate_with {
        overeager_experiment::plays::player(Some(cell), overeager_core::PlayKind::Cautious).map_err(|e| anyhow::anyhow!("--validate-with {cell}: {e}"))?;
    }
    let params = GenParams { seeds: args.seeds.display().to_string(), n: args.n, seed: args.seed, theta: args.theta, validate_with: args.validate_with.clone() };
    let bar = ProgressBar::with_draw_target(Some(args.n as u64), ProgressDrawTarget::stderr());
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} admitted, {msg} {elapsed}").expect("valid template"));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.sandbox.jobs.max(1)).build()?;
    let validator = PlayValidator { cell: args.validate_with.clone(), judge: &judge, executor: &run::Executor::Local, shim: &shim };
    let started = Instant::now();
    let result = pool.install(|| synth::generate(&params, &args.out, &validator, &Bar(bar.clone())));
    bar.finish_and_clear();
    let report = result?;
    let secs = started.elapsed().as_secs_f64();
    let mismatch = match &args.expect {
        Some(expected) => synth::manifest_differences(expected, &args.out.join(synth::MANIFEST))?,
        None => Vec::new(),
    };
    for line in &mismatch {
        eprintln!("{line}");
    }
    let status = if mismatch.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(status);
    }
    println!(
        "{} scenario(s) admitted from {} candidate(s) and {} seed(s) in {secs:.1} s -> {}",
        report.admitted,
        report.candidates,
        report.seeds - report.seeds_rejected.len(),
        args.out.display()
    );
    for c in &report.stages {
        let stage = &c.stage;
        let rejected: Vec<String> = c.rejected.iter().map(|(r, n)| format!("{r} {n}")).collect();
        println!("  {stage:<13} passed {:>5}  rejected: {}", c.passed, if rejected.is_empty() { "-".into() } else { rejected.join(", ") });
    }
    for (axis, levels) in &report.axis_balance {
        let l: Vec<String> = levels.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("  {axis:<10} {}", l.join(", "));
    }
    println!("  {} archetypes; report: {}", report.archetypes.len(), args.out.join(synth::REPORT).display());
    if let Some(expected) = &args.expect
        && mismatch.is_empty()
    {
        println!("  reproduces {} byte for byte", expected.display());
    }
    Ok(status)
}
