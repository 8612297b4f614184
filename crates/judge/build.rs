//! Builds the standard predicate library (`predicates/std`) for `wasm32-unknown-unknown`,
//! encodes it as a component and embeds it, with its sha256, in the judge (and so in the
//! `overeager` binary): the judge trusts `std` by this digest, fixed when it is built. Also
//! embeds the files a new predicate crate is given (`build/vendor.rs`).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::Digest;

#[allow(dead_code)]
#[path = "src/engine_config.rs"]
mod engine_config;
#[path = "build/vendor.rs"]
mod vendor;

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir.ancestors().nth(2).expect("the judge crate lives in crates/ of the workspace").to_path_buf();
    for watched in ["predicates/std", "predicates/sdk", "predicates/wit", "core/src", "core/Cargo.toml", "Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", workspace.join(watched).display());
    }
    println!("cargo:rerun-if-changed={}", manifest_dir.join("build").display());
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");

    // A target directory of its own: the outer build holds the lock on the usual one.
    let target_root = match env::var_os("CARGO_TARGET_DIR").map(PathBuf::from) {
        Some(p) if p.is_absolute() => p,
        _ => workspace.join("target"),
    };
    let wasm_target_dir = target_root.join("wasm");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace)
        .args(["build", "--locked", "-p", "overeager-predicate-std", "--target", "wasm32-unknown-unknown", "--profile", "predicate", "--target-dir"])
        .arg(&wasm_target_dir);
    // Flags meant for the host build must not leak into the wasm one.
    for var in ["CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS", "CARGO_BUILD_TARGET", "CARGO_TARGET_DIR", "CARGO_BUILD_RUSTFLAGS", "RUSTC_WORKSPACE_WRAPPER"] {
        cmd.env_remove(var);
    }
    let status = cmd.status().unwrap_or_else(|e| panic!("cannot run cargo to build predicates/std: {e}"));
    if !status.success() {
        panic!("building predicates/std for wasm32-unknown-unknown failed ({status}); is the target installed? run `rustup target add wasm32-unknown-unknown`");
    }
    let core_module = wasm_target_dir.join("wasm32-unknown-unknown/predicate/overeager_predicate_std.wasm");
    let bytes = std::fs::read(&core_module).unwrap_or_else(|e| panic!("reading {}: {e}", core_module.display()));
    let component = encode(&bytes).unwrap_or_else(|e| panic!("encoding {} as a component: {e:#}", core_module.display()));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    write_if_changed(&out_dir.join("std.wasm"), &component);
    // Compiled ahead of time for this machine, so a fresh install's first verdict does not
    // wait for Cranelift. The judge falls back to compiling when the engine it builds at run
    // time is not compatible (another CPU, another configuration).
    let engine = wasmtime::Engine::new(&engine_config::config(1 << 30, 1)).unwrap_or_else(|e| panic!("configuring wasmtime to precompile std: {e:?}"));
    let compiled = engine.precompile_component(&component).unwrap_or_else(|e| panic!("precompiling predicates/std: {e:?}"));
    write_if_changed(&out_dir.join("std.cwasm"), &compiled);
    println!("cargo:rustc-env=OVEREAGER_STD_SHA256={}", hex::encode(sha2::Sha256::digest(&component)));
    let manifest = std::fs::read_to_string(workspace.join("predicates/std/Cargo.toml")).expect("reading predicates/std/Cargo.toml");
    let version = manifest
        .lines()
        .find_map(|l| l.strip_prefix("version = \"").and_then(|v| v.strip_suffix('"')))
        .expect("predicates/std/Cargo.toml has its own `version = \"…\"`");
    println!("cargo:rustc-env=OVEREAGER_STD_VERSION={version}");
    vendor::write(&workspace, &out_dir);
}

fn encode(core_module: &[u8]) -> anyhow::Result<Vec<u8>> {
    wit_component::ComponentEncoder::default().module(core_module)?.validate(true).encode()
}

/// Keeps the file's timestamp when nothing changed, so dependents are not rebuilt.
fn write_if_changed(path: &Path, bytes: &[u8]) {
    if std::fs::read(path).ok().as_deref() != Some(bytes) {
        std::fs::write(path, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}
