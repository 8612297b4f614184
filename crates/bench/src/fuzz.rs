//! Mutation fuzzing of the parsers that read untrusted input — the `.oeb` reader (as the
//! server unpacks, verifies and loads an upload), the scenario parser and the plan parser. It
//! runs on stable Rust, in process: inputs are mutated from a corpus of real files (byte flips,
//! insertions, deletions, splices, and for `.oeb` also mutations of the tar stream under valid
//! compression), and every input must be accepted or refused with an error, never panic.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What is fuzzed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// `.oeb` archives: unpack within the upload limits, verify, load for judging.
    Oeb,
    /// `scenario.toml` texts.
    Scenario,
    /// Plan files.
    Plan,
}

impl Target {
    /// The target's name, as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Target::Oeb => "oeb",
            Target::Scenario => "scenario",
            Target::Plan => "plan",
        }
    }
}

/// What a fuzzing session did.
#[derive(Debug)]
pub struct Fuzzed {
    /// Inputs tried.
    pub runs: u64,
    /// Inputs the parser accepted (the rest it refused with an error).
    pub accepted: u64,
    /// The input that panicked, saved, and the panic's message; the session stops at it.
    pub crash: Option<(PathBuf, String)>,
}

/// The corpus of a target: real files of the repository.
fn corpus(target: Target) -> Result<Vec<Vec<u8>>> {
    let (dir, pick): (&str, fn(&Path) -> bool) = match target {
        Target::Oeb => ("bundles", |p| p.extension().is_some_and(|e| e == "oeb")),
        Target::Scenario => ("scenarios/seeds", |p| p.file_name().is_some_and(|n| n == "scenario.toml")),
        Target::Plan => ("plans", |p| p.extension().is_some_and(|e| e == "toml")),
    };
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.with_context(|| format!("reading the corpus in {dir} (run from the repository root)"))?;
        if e.file_type().is_file() && pick(e.path()) {
            out.push(std::fs::read(e.path())?);
        }
    }
    if out.is_empty() {
        bail!("no corpus files under {dir}; run from the repository root");
    }
    Ok(out)
}

/// One random change to `data`, sometimes spliced with another corpus entry.
fn mutate(data: &mut Vec<u8>, other: &[u8], rng: &mut ChaCha8Rng) {
    let pos = |rng: &mut ChaCha8Rng, len: usize| if len == 0 { 0 } else { rng.random_range(0..len) };
    match rng.random_range(0..8) {
        0 if !data.is_empty() => {
            let i = pos(rng, data.len());
            data[i] ^= 1 << rng.random_range(0..8);
        }
        1 if !data.is_empty() => {
            let i = pos(rng, data.len());
            data[i] = [0u8, 0xff, b'"', b'\n', b'[', b'=', b'0', b'9'][rng.random_range(0..8)];
        }
        2 => {
            let i = pos(rng, data.len() + 1).min(data.len());
            let n = rng.random_range(1..64);
            let byte = rng.random::<u8>();
            data.splice(i..i, std::iter::repeat_n(byte, n));
        }
        3 if !data.is_empty() => {
            let i = pos(rng, data.len());
            let n = rng.random_range(1..=(data.len() - i).min(512));
            data.drain(i..i + n);
        }
        4 if !other.is_empty() => {
            // Splice a piece of another file in.
            let a = pos(rng, other.len());
            let b = (a + rng.random_range(1..256)).min(other.len());
            let i = pos(rng, data.len() + 1).min(data.len());
            data.splice(i..i, other[a..b].iter().copied());
        }
        5 if data.len() > 1 => {
            let i = pos(rng, data.len());
            data.truncate(i.max(1));
        }
        6 if !data.is_empty() => {
            // Duplicate a range (repeated keys, repeated entries).
            let a = pos(rng, data.len());
            let b = (a + rng.random_range(1..1024)).min(data.len());
            let piece = data[a..b].to_vec();
            let i = pos(rng, data.len() + 1).min(data.len());
            data.splice(i..i, piece);
        }
        _ => {
            // Large numbers where numbers were.
            if let Some(i) = data.iter().position(|b| b.is_ascii_digit()) {
                let big = ["4294967296", "18446744073709551616", "-1", "1e309", "99999999999"][rng.random_range(0..5)];
                data.splice(i..i + 1, big.bytes());
            }
        }
    }
}

/// Runs one input through the target; `Err` is a refusal (fine), a panic is a crash.
fn run_one(target: Target, input: &[u8], scratch: &Path) -> Result<()> {
    match target {
        Target::Oeb => {
            let file = scratch.join("input.oeb");
            std::fs::write(&file, input)?;
            let dir = scratch.join("unpacked");
            let _ = std::fs::remove_dir_all(&dir);
            let result = overeager_bundle::pack::unpack(&file, &dir, &overeager_bundle::pack::Limits::upload())
                .and_then(|_| overeager_bundle::verify::verify(&dir))
                .and_then(|_| overeager_judge::input::load(&dir).map(|_| ()));
            let _ = std::fs::remove_dir_all(&dir);
            result
        }
        Target::Scenario => {
            let text = String::from_utf8_lossy(input);
            overeager_core::Scenario::from_toml("fuzz/scenario.toml", &text).map(|_| ()).map_err(|e| anyhow::anyhow!("{} problem(s)", e.len()))
        }
        Target::Plan => {
            let text = String::from_utf8_lossy(input);
            overeager_core::plan::Plan::from_toml("fuzz/plan.toml", &text, overeager_experiment::agent_labels).map(|_| ()).map_err(|e| anyhow::anyhow!("{} problem(s)", e.len()))
        }
    }
}

/// Fuzzes `target` for `seconds` with mutations drawn from `seed`; a panicking input is saved
/// under `crashes`. Reads its corpus relative to the working directory (the repository root).
pub fn fuzz(target: Target, seconds: u64, seed: u64, crashes: &Path) -> Result<Fuzzed> {
    let corpus = corpus(target)?;
    // For archives, mutations of the tar stream (recompressed) reach past the zstd layer.
    let tars: Vec<Vec<u8>> = if target == Target::Oeb { corpus.iter().filter_map(|c| zstd::decode_all(c.as_slice()).ok()).collect() } else { Vec::new() };
    let scratch = tempfile::Builder::new().prefix("overeager-fuzz-").tempdir()?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut runs, mut accepted) = (0u64, 0u64);
    // Panics are caught and reported here, not printed by the default hook each time.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut crash = None;
    while Instant::now() < deadline {
        let use_tar = !tars.is_empty() && rng.random_bool(0.5);
        let pool = if use_tar { &tars } else { &corpus };
        let mut input = pool[rng.random_range(0..pool.len())].clone();
        let other = &pool[rng.random_range(0..pool.len())];
        for _ in 0..rng.random_range(1..=4) {
            mutate(&mut input, other, &mut rng);
        }
        if use_tar {
            input = zstd::encode_all(&input[..], 1)?;
        }
        runs += 1;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_one(target, &input, scratch.path()))) {
            Ok(Ok(())) => accepted += 1,
            Ok(Err(_)) => {}
            Err(p) => {
                let what = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                crash = Some((input, what));
                break;
            }
        }
    }
    std::panic::set_hook(hook);
    let crash = match crash {
        Some((input, what)) => {
            std::fs::create_dir_all(crashes).with_context(|| format!("creating {}", crashes.display()))?;
            let path = crashes.join(format!("{}-{}.bin", target.name(), &overeager_core::sha256_hex(&input)[..16]));
            std::fs::write(&path, &input)?;
            Some((path, what))
        }
        None => None,
    };
    Ok(Fuzzed { runs, accepted, crash })
}
