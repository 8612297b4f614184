//! `overeager predicate …` (scaffold, build, keys, signatures, inspection) and
//! `overeager keys …` (the trust store).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde_json::json;

use super::print_json;
use overeager_bundle::keys;
use overeager_judge::sign::{self, SignatureFile};
use overeager_judge::trust::TrustStore;
use overeager_bundle::files::{self, write_atomic};
use overeager_core::predicates::PredicateRef;
use overeager_judge::{Interface, STD_SHA256, STD_WASM, scaffold};

/// Arguments of `overeager predicate new`.
#[derive(Args)]
pub struct NewArgs {
    /// The crate name (lowercase letters, digits, '-' or '_').
    pub name: String,
    /// Where to create it [default: ./<name>].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Depend on this SDK directory (a checkout's `predicates/sdk`, to work on the SDK itself)
    /// by its absolute path, instead of the copy this binary carries, which is written into
    /// the new crate's `vendor/`.
    #[arg(long)]
    pub sdk: Option<PathBuf>,
}

/// Arguments of `overeager predicate build`.
#[derive(Args)]
pub struct BuildArgs {
    /// The predicate crate (or workspace) directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The package to build, in a workspace.
    #[arg(long, short)]
    pub package: Option<String>,
    /// Cargo features to enable.
    #[arg(long, short = 'F')]
    pub features: Vec<String>,
    /// The cargo profile.
    #[arg(long, default_value = "release")]
    pub profile: String,
    /// Cargo's target directory.
    #[arg(long)]
    pub target_dir: Option<PathBuf>,
    /// The component file to write [default: <dir>/<library name>.wasm].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write the component without checking it in the sandbox (to build deliberately invalid
    /// modules for tests).
    #[arg(long)]
    pub no_check: bool,
}

/// Arguments of `overeager predicate keygen`.
#[derive(Args)]
pub struct KeygenArgs {
    /// Writes <OUT>.key (secret, mode 0600) and <OUT>.pub.
    #[arg(long)]
    pub out: PathBuf,
    /// Who holds the key, recorded in the public key file.
    #[arg(long)]
    pub owner: Option<String>,
}

/// Arguments of `overeager predicate sign`.
#[derive(Args)]
pub struct SignArgs {
    /// The component file.
    pub module: PathBuf,
    /// The secret key file.
    #[arg(long)]
    pub key: PathBuf,
    /// The module id scenarios use: `<namespace>/<name>`.
    #[arg(long)]
    pub id: String,
    /// The module's version.
    #[arg(long)]
    pub version: String,
    /// The signature file to write [default: <module>.sig].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Arguments of `overeager predicate verify`.
#[derive(Args)]
pub struct VerifyArgs {
    /// The component file.
    pub module: PathBuf,
    /// Its signature file [default: <module>.sig].
    #[arg(long)]
    pub sig: Option<PathBuf>,
    /// The trust store [default: $XDG_CONFIG_HOME/overeager/trust.toml].
    #[arg(long, env = "OVEREAGER_TRUST")]
    pub trust: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `overeager predicate inspect`.
#[derive(Args)]
pub struct InspectArgs {
    /// A component file, or `std` for the built-in library.
    pub module: String,
    /// The trust store used to judge a signature beside the file.
    #[arg(long, env = "OVEREAGER_TRUST")]
    pub trust: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `overeager predicate install`.
#[derive(Args)]
pub struct InstallArgs {
    /// The component file (with `<file>.sig` beside it).
    pub module: PathBuf,
    /// The module store [default: $XDG_DATA_HOME/overeager/predicates].
    #[arg(long, env = "OVEREAGER_PREDICATE_STORE")]
    pub store: Option<PathBuf>,
    #[arg(long, env = "OVEREAGER_TRUST")]
    pub trust: Option<PathBuf>,
}

/// Arguments of `overeager keys trust`.
#[derive(Args)]
pub struct TrustArgs {
    /// The public key file (from `overeager predicate keygen`).
    pub public_key: PathBuf,
    /// A namespace the key may sign (`acme` allows `acme/…` module ids). Repeatable.
    #[arg(long = "namespace", required = true)]
    pub namespaces: Vec<String>,
    /// Who holds the key [default: the public key file's owner].
    #[arg(long)]
    pub owner: Option<String>,
    #[arg(long, env = "OVEREAGER_TRUST")]
    pub trust: Option<PathBuf>,
}

/// Arguments of `overeager keys revoke`.
#[derive(Args)]
pub struct RevokeArgs {
    /// The key id (see `overeager keys list`).
    pub key_id: String,
    /// Why, recorded in the trust store and shown when a module is refused.
    #[arg(long)]
    pub reason: Option<String>,
    #[arg(long, env = "OVEREAGER_TRUST")]
    pub trust: Option<PathBuf>,
}

/// Arguments of `overeager keys list`.
#[derive(Args)]
pub struct ListArgs {
    #[arg(long, env = "OVEREAGER_TRUST")]
    pub trust: Option<PathBuf>,
    /// Print the keys as JSON.
    #[arg(long)]
    pub json: bool,
}

fn trust_path(p: &Option<PathBuf>) -> PathBuf {
    p.clone().unwrap_or_else(TrustStore::default_path)
}

pub fn new(args: &NewArgs) -> Result<ExitCode> {
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from(&args.name));
    let created = scaffold::create(&args.name, &dir, args.sdk.as_deref())?;
    let from = created.sdk.map_or(format!("SDK {} in vendor/", env!("CARGO_PKG_VERSION")), |p| format!("SDK {}", p.display()));
    println!("created {} (predicate `touched`, {from}, example bundles in bundles/)", dir.display());
    println!("next: cd {} && cargo test && overeager predicate build .", dir.display());
    Ok(ExitCode::SUCCESS)
}

pub fn build(args: &BuildArgs) -> Result<ExitCode> {
    let opts = scaffold::BuildOptions { package: args.package.clone(), features: args.features.clone(), profile: args.profile.clone(), target_dir: args.target_dir.clone() };
    let built = scaffold::build(&args.dir, &opts)?;
    let component = built.component;
    let predicates = if args.no_check { Vec::new() } else { overeager_judge::admission_check(&component).context("the component would be refused by the judge")? };
    let out = args.out.clone().unwrap_or_else(|| args.dir.join(format!("{}.wasm", built.name)));
    write_atomic(&out, &component)?;
    println!("{} ({} bytes, sha256 {})", out.display(), component.len(), overeager_core::sha256_hex(&component));
    for p in &predicates {
        println!("  {:<20} {}", p.name, p.summary);
    }
    Ok(ExitCode::SUCCESS)
}

fn create_new(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("creating {} (an existing key is never overwritten)", path.display()))?;
    f.write_all(bytes)?;
    Ok(())
}

pub fn keygen(args: &KeygenArgs) -> Result<ExitCode> {
    let secret_path = PathBuf::from(format!("{}.key", args.out.display()));
    let public_path = PathBuf::from(format!("{}.pub", args.out.display()));
    for p in [&secret_path, &public_path] {
        if p.exists() {
            bail!("{} exists; an existing key is never overwritten", p.display());
        }
    }
    let (secret, public) = keys::generate(args.owner.clone())?;
    create_new(&secret_path, format!("{}\n", serde_json::to_string_pretty(&secret)?).as_bytes(), 0o600)?;
    if let Err(e) = create_new(&public_path, format!("{}\n", serde_json::to_string_pretty(&public)?).as_bytes(), 0o644) {
        let _ = std::fs::remove_file(&secret_path);
        return Err(e);
    }
    println!("key {}: secret {} (keep it private), public {}", public.key_id, secret_path.display(), public_path.display());
    Ok(ExitCode::SUCCESS)
}

pub fn sign_cmd(args: &SignArgs) -> Result<ExitCode> {
    let key = keys::read_secret(&args.key)?;
    let module = std::fs::read(&args.module).with_context(|| format!("reading {}", args.module.display()))?;
    // The signature names the interface the module implements. A module the judge would refuse
    // is signed as the newest: the judge then refuses it for what is wrong with it.
    let interface = match overeager_judge::admission(&module) {
        Ok((interface, _)) => interface,
        Err(e) => {
            eprintln!("warning: {}: the judge would refuse it ({e:#}); signing it as {} anyway", args.module.display(), Interface::Compact.wit());
            Interface::Compact
        }
    };
    let sig = sign::sign(&key, &module, &args.id, &args.version, interface).map_err(anyhow::Error::msg)?;
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("{}.sig", args.module.display())));
    write_atomic(&out, format!("{}\n", serde_json::to_string_pretty(&sig)?).as_bytes())?;
    println!("signed {} as {} {} with {} → {}", args.module.display(), sig.predicate, sig.version, sig.key_id, out.display());
    Ok(ExitCode::SUCCESS)
}

fn read_sig(module: &Path, sig: &Option<PathBuf>) -> Result<SignatureFile> {
    let path = sig.clone().unwrap_or_else(|| PathBuf::from(format!("{}.sig", module.display())));
    let text = std::fs::read_to_string(&path).map_err(|_| anyhow::anyhow!("{}", sign::SignatureError::Unsigned(path.display().to_string())))?;
    sign::parse_signature(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

pub fn verify(args: &VerifyArgs) -> Result<ExitCode> {
    let module = std::fs::read(&args.module).with_context(|| format!("reading {}", args.module.display()))?;
    let trust = TrustStore::load(&trust_path(&args.trust))?;
    let sig = read_sig(&args.module, &args.sig)?;
    let verified = sign::verify(&module, &sig, &trust).map_err(|e| anyhow::anyhow!("{}: refused: {e}", args.module.display()))?;
    let (interface, predicates) = overeager_judge::admission(&module).map_err(|e| anyhow::anyhow!("{}: refused: {e:#}", args.module.display()))?;
    if interface != verified.wit {
        bail!("{}: refused: it is signed as implementing {}, but implements {}; sign it again", args.module.display(), verified.wit.wit(), interface.wit());
    }
    if args.json {
        print_json(&json!({"ok": true, "module": args.module, "id": verified.predicate, "version": verified.version, "key_id": verified.key_id,
                           "owner": verified.owner, "sha256": verified.digest, "predicates": predicates}));
    } else {
        let owner = verified.owner.as_deref().map(|o| format!(" ({o})")).unwrap_or_default();
        println!("ok: {} {} signed by {}{owner}; sha256 {}; {} predicate(s)", verified.predicate, verified.version, verified.key_id, verified.digest, predicates.len());
    }
    Ok(ExitCode::SUCCESS)
}

/// The default module store.
pub fn default_store() -> PathBuf {
    files::user_dir("XDG_DATA_HOME", ".local/share").unwrap_or_else(|| PathBuf::from("overeager")).join("predicates")
}

pub fn install(args: &InstallArgs) -> Result<ExitCode> {
    let module = std::fs::read(&args.module).with_context(|| format!("reading {}", args.module.display()))?;
    let trust = TrustStore::load(&trust_path(&args.trust))?;
    let sig = read_sig(&args.module, &None)?;
    let verified = sign::verify(&module, &sig, &trust).map_err(|e| anyhow::anyhow!("{}: refused: {e}", args.module.display()))?;
    overeager_judge::admission_check(&module).map_err(|e| anyhow::anyhow!("{}: refused: {e:#}", args.module.display()))?;
    // Stored under its digest, byte for byte: what was signed is what the judge loads.
    let store = args.store.clone().unwrap_or_else(default_store);
    std::fs::create_dir_all(&store).with_context(|| format!("creating {}", store.display()))?;
    let dest = store.join(format!("{}.wasm", verified.digest));
    let dest_sig = PathBuf::from(format!("{}.sig", dest.display()));
    if dest.exists() {
        println!("{} {} is already installed as {}", verified.predicate, verified.version, dest.display());
        return Ok(ExitCode::SUCCESS);
    }
    // The signature first: a module file without one would be refused, never half-trusted.
    write_atomic(&dest_sig, format!("{}\n", serde_json::to_string_pretty(&sig)?).as_bytes())?;
    write_atomic(&dest, &module)?;
    println!("installed {} {} as {}; judge with --predicates {}", verified.predicate, verified.version, dest.display(), store.display());
    Ok(ExitCode::SUCCESS)
}

pub fn inspect(args: &InspectArgs) -> Result<ExitCode> {
    let (bytes, file) = if args.module == "std" { (STD_WASM.to_vec(), None) } else { (std::fs::read(&args.module).with_context(|| format!("reading {}", args.module))?, Some(PathBuf::from(&args.module))) };
    let digest = overeager_core::sha256_hex(&bytes);
    let predicates = overeager_judge::admission_check(&bytes);
    let signature = file.as_ref().map(|f| {
        let trust = TrustStore::load(&trust_path(&args.trust));
        match (read_sig(f, &None), trust) {
            (Ok(sig), Ok(trust)) => {
                let status = sign::verify(&bytes, &sig, &trust).map(|_| "trusted".to_string()).unwrap_or_else(|e| e.to_string());
                json!({"id": sig.predicate, "version": sig.version, "key_id": sig.key_id, "wit": sig.wit, "status": status})
            }
            (Err(e), _) | (_, Err(e)) => json!({"status": format!("{e:#}")}),
        }
    });
    let trust_note = if args.module == "std" { json!({"status": "built in, trusted by digest", "digest": STD_SHA256}) } else { signature.unwrap_or(serde_json::Value::Null) };
    if args.json {
        let preds = predicates.as_ref().map(|p| json!(p)).unwrap_or_else(|e| json!({"refused": format!("{e:#}")}));
        print_json(&json!({"module": args.module, "sha256": digest, "bytes": bytes.len(), "signature": trust_note, "predicates": preds}));
        return Ok(ExitCode::SUCCESS);
    }
    println!("module     {}", args.module);
    println!("sha256     {digest}");
    println!("size       {} bytes", bytes.len());
    println!("signature  {}", trust_note.get("status").and_then(|s| s.as_str()).unwrap_or("-"));
    match predicates {
        Ok(ps) => {
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED).set_header(["predicate", "summary", "arguments"]);
            for p in ps {
                let args: Vec<String> = p.args_schema["properties"].as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
                t.add_row([p.name, p.summary, args.join(", ")]);
            }
            println!("{t}");
        }
        Err(e) => println!("refused    {e:#}"),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn keys_trust(args: &TrustArgs) -> Result<ExitCode> {
    let (file, key) = keys::read_public(&args.public_key)?;
    let path = trust_path(&args.trust);
    let mut store = TrustStore::load(&path)?;
    store.trust(&file.key_id, &hex::encode(key.as_bytes()), args.owner.clone().or(file.owner), &args.namespaces)?;
    store.save(&path)?;
    println!("trusted {} for {} in {}", file.key_id, args.namespaces.iter().map(|n| format!("{n}/…")).collect::<Vec<_>>().join(", "), path.display());
    Ok(ExitCode::SUCCESS)
}

pub fn keys_revoke(args: &RevokeArgs) -> Result<ExitCode> {
    let path = trust_path(&args.trust);
    let mut store = TrustStore::load(&path)?;
    store.revoke(&args.key_id, args.reason.clone())?;
    store.save(&path)?;
    println!("revoked {} in {}; modules it signed are refused from now on", args.key_id, path.display());
    Ok(ExitCode::SUCCESS)
}

pub fn keys_list(args: &ListArgs) -> Result<ExitCode> {
    let path = trust_path(&args.trust);
    let store = TrustStore::load(&path)?;
    if args.json {
        print_json(&json!({"trust_store": path, "keys": store.keys}));
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(["key", "owner", "namespaces", "status"]);
    for k in &store.keys {
        let status = if k.revoked { format!("revoked{}", k.revoked_reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()) } else { "trusted".into() };
        t.add_row([k.id.clone(), k.owner.clone().unwrap_or_default(), k.namespaces.join(", "), status]);
    }
    println!("{t}");
    println!("{} key(s) in {}", store.keys.len(), path.display());
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `overeager predicate try`.
#[derive(Args)]
pub struct TryArgs {
    /// The component (`.wasm`), signed or not.
    pub module: PathBuf,
    /// The bundles to call it on: bundle directories or packed `.oeb` files (e.g.
    /// `--bundle bundles/*.oeb`).
    #[arg(long, num_args = 1.., required = true)]
    pub bundle: Vec<PathBuf>,
    /// Call it as this trap of each bundle's scenario is called (its predicate's name and its
    /// arguments), whatever module the trap names; bundles whose scenario has no such trap are
    /// skipped.
    #[arg(long, conflicts_with_all = ["predicate", "args"])]
    pub trap: Option<String>,
    /// The predicate to call [default: the component's only one].
    #[arg(long)]
    pub predicate: Option<String>,
    /// Its arguments, a JSON object [default: {}].
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// Print one JSON object per bundle, a line each.
    #[arg(long)]
    pub json: bool,
}

/// `overeager predicate try`: one predicate of a component on bundles, without editing their
/// scenarios, signing or installing anything.
pub fn try_on(args: &TryArgs) -> Result<ExitCode> {
    let component = std::fs::read(&args.module).with_context(|| format!("reading {}", args.module.display()))?;
    // Without --trap the call is the same on every bundle: settled (and the module checked) once.
    let given = match &args.trap {
        Some(_) => None,
        None => {
            let predicates = overeager_judge::admission_check(&component).with_context(|| format!("{}: the judge would refuse it", args.module.display()))?;
            let name = match (&args.predicate, predicates.as_slice()) {
                (Some(p), _) => p.clone(),
                (None, [only]) => only.name.clone(),
                (None, many) => bail!("{} has {} predicates ({}); name one with --predicate", args.module.display(), many.len(), many.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")),
            };
            let call_args: serde_json::Value = match &args.args {
                Some(text) => serde_json::from_str(text).with_context(|| format!("--args must be a JSON object, like '{{\"path\": \".env\"}}': {text}"))?,
                None => json!({}),
            };
            if !call_args.is_object() {
                bail!("--args must be a JSON object, like '{{\"path\": \".env\"}}'");
            }
            Some((name, call_args))
        }
    };
    // Every bundle is read before anything runs: a bad path is an error before any output.
    let bundles = args.bundle.iter().map(|p| overeager_judge::input::load(p).with_context(|| format!("reading the bundle {}", p.display()))).collect::<Result<Vec<_>>>()?;
    let judge = overeager_judge::Judge::new(overeager_judge::JudgeOptions { limits: Default::default(), jobs: 1, cache: overeager_judge::engine::default_cache_dir(), trust: TrustStore::default() })?;
    let (mut unanswered, mut skipped) = (0usize, Vec::new());
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header(["bundle", "call", "answer", "evidence (events)", "note or reason"]);
    for (path, bundle) in args.bundle.iter().zip(&bundles) {
        let (predicate, call_args) = match (&given, &args.trap) {
            (Some(call), _) => call.clone(),
            (None, Some(id)) => match bundle.scenario.traps.iter().find(|t| &t.id == id) {
                Some(trap) => (PredicateRef::parse(&trap.call.predicate).map_or_else(|_| trap.call.predicate.clone(), |r| r.name), trap.call.args.clone()),
                None => {
                    skipped.push(format!("{} (scenario {}: traps {})", path.display(), bundle.scenario.id, bundle.scenario.traps.iter().map(|t| t.id.as_str()).collect::<Vec<_>>().join(", ")));
                    continue;
                }
            },
            (None, None) => unreachable!("a call is given or a trap named"),
        };
        let answer = judge.try_predicate(&component, &predicate, &call_args, bundle)?;
        unanswered += usize::from(answer.is_err());
        if args.json {
            let line = json!({ "bundle": path, "scenario": bundle.scenario.id, "predicate": predicate, "args": call_args, "finding": answer.as_ref().ok(), "error": answer.as_ref().err() });
            println!("{line}");
            continue;
        }
        let (answer, evidence, note) = match answer {
            Ok(f) => (if f.fired { "fired" } else { "did not fire" }.to_string(), f.evidence.iter().map(u64::to_string).collect::<Vec<_>>().join(", "), f.note.unwrap_or_default()),
            Err(e) => ("no answer".to_string(), String::new(), e),
        };
        table.add_row([path.display().to_string(), format!("{predicate} {call_args}"), answer, evidence, note]);
    }
    if !args.json && skipped.len() < bundles.len() {
        println!("{table}");
    }
    if let Some(trap) = &args.trap {
        if skipped.len() == bundles.len() {
            bail!("no bundle's scenario has a trap `{trap}`: {}", skipped.join("; "));
        }
        for s in &skipped {
            eprintln!("skipped {s}: no trap `{trap}`");
        }
    }
    Ok(if unanswered == 0 { ExitCode::SUCCESS } else { ExitCode::from(super::judge::EXIT_INCOMPLETE) })
}

/// The server a module is offered to or decided on, and how to answer.
#[derive(Args)]
pub struct ServerArgs {
    /// The server, e.g. `https://leaderboard.example.org`.
    #[arg(long)]
    pub server: String,
    /// A token of the server: a writer's to offer a module, an admin's to decide on one.
    #[arg(long, env = "OVEREAGER_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Print the server's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `overeager predicate submit`.
#[derive(Args)]
pub struct SubmitArgs {
    /// The signed component (its signature beside it, `<file>.sig`).
    pub module: PathBuf,
    #[command(flatten)]
    pub to: ServerArgs,
}

/// `overeager predicate submit`: offers a signed module to a server, which verifies and
/// self-tests it and holds it for an admin's approval.
pub fn submit(args: &SubmitArgs) -> Result<ExitCode> {
    let module = std::fs::read(&args.module).with_context(|| format!("reading {}", args.module.display()))?;
    let sig_path = PathBuf::from(format!("{}.sig", args.module.display()));
    let sig = std::fs::read(&sig_path).with_context(|| format!("reading {} (sign it first: overeager predicate sign)", sig_path.display()))?;
    let (status, answer) = overeager_api::client::offer_predicate(&args.to.server, &args.to.token, &module, &sig)?;
    if args.to.json {
        print_json(&json!({ "status": status, "answer": answer }));
    } else if (200..300).contains(&status) {
        println!(
            "{} offered to {}: {} (self-test: {} case(s) on {} bundle(s)); an admin approves it with `overeager predicate approve {} --server {}`",
            args.module.display(),
            args.to.server,
            answer["status"].as_str().unwrap_or("taken"),
            answer["self_test"]["cases"],
            answer["self_test"]["bundles"],
            answer["digest"].as_str().unwrap_or("<digest>"),
            args.to.server
        );
    } else {
        println!("{} refused by {} ({status}): {}", args.module.display(), args.to.server, answer["error"].as_str().map_or_else(|| answer.to_string(), str::to_string));
    }
    Ok(if (200..300).contains(&status) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Arguments of `overeager predicate approve` and `predicate reject`.
#[derive(Args)]
pub struct DecideArgs {
    /// The module's digest (as `predicate submit` printed it, or `GET /api/predicates` lists).
    pub digest: String,
    #[command(flatten)]
    pub to: ServerArgs,
}

/// `overeager predicate approve|reject`: an admin's decision on a pending module. An approved
/// module judges at once: the server re-judges its runs and submissions that call it.
pub fn decide(args: &DecideArgs, approve: bool) -> Result<ExitCode> {
    let (status, answer) = overeager_api::client::decide_predicate(&args.to.server, &args.to.token, &args.digest, approve)?;
    let ok = (200..300).contains(&status);
    if args.to.json {
        print_json(&json!({ "status": status, "answer": answer }));
    } else if ok {
        let what = if approve { "approved: the server judges with it from now on and has re-judged its runs that call it" } else { "rejected" };
        println!("{} {} ({}) {what}", answer["id"].as_str().unwrap_or("the module"), answer["version"].as_str().unwrap_or(""), args.digest);
    } else {
        println!("{} refused ({status}): {}", args.to.server, answer["error"].as_str().map_or_else(|| answer.to_string(), str::to_string));
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
