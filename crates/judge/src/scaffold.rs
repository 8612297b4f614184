//! A predicate crate from nothing to a component: `create` writes a new crate that builds
//! offline with the SDK this judge was built with, `build` compiles one for wasm and encodes it
//! as the component the judge loads.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

const TEMPLATE_CARGO: &str = include_str!("../../../predicates/template/Cargo.toml.in");
const TEMPLATE_LIB: &str = include_str!("../../../predicates/template/src/lib.rs.in");
const TEMPLATE_README: &str = include_str!("../../../predicates/template/README.md.in");
const TEMPLATE_GITIGNORE: &str = include_str!("../../../predicates/template/gitignore.in");

mod vendored {
    include!(concat!(env!("OUT_DIR"), "/vendored.rs"));
}

/// The SDK's path as the new crate's manifest names it: its own `vendor/` copy, or `--sdk`.
const VENDORED_SDK: &str = "vendor/overeager-predicate-sdk";

/// What `create` made.
#[derive(Debug)]
pub struct Created {
    /// The crate's directory.
    pub dir: PathBuf,
    /// The SDK it depends on: `None` for the copy in its `vendor/`.
    pub sdk: Option<PathBuf>,
}

/// Writes a new predicate crate named `name` into `dir` (absent or empty), with one example
/// predicate, its tests, the example bundles, and the SDK and core sources this judge was built
/// from in `vendor/` (unless `sdk` names an SDK checkout to depend on instead). The crate is
/// written beside `dir` and moved into place, so a failure leaves nothing behind.
pub fn create(name: &str, dir: &Path, sdk: Option<&Path>) -> Result<Created> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_') || !name.as_bytes()[0].is_ascii_lowercase() {
        bail!("crate name `{name}` must start with a lowercase letter and use lowercase letters, digits, '-' or '_'");
    }
    let sdk = match sdk {
        Some(p) => {
            let p = p.canonicalize().with_context(|| format!("--sdk {}: no such directory", p.display()))?;
            if !p.join("Cargo.toml").is_file() {
                bail!("--sdk {}: not a crate directory (no Cargo.toml)", p.display());
            }
            Some(p)
        }
        None => None,
    };
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        bail!("{} exists and is not empty; choose another --dir", dir.display());
    }
    let sdk_path = sdk.as_ref().map_or(VENDORED_SDK.to_string(), |p| p.display().to_string());
    let fill = |t: &str| t.replace("{{crate}}", name).replace("{{sdk}}", &sdk_path).replace("{{version}}", env!("CARGO_PKG_VERSION"));
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let staging = tempfile::Builder::new().prefix(".predicate-new-").tempdir_in(parent)?;
    let root = staging.path();
    std::fs::create_dir_all(root.join("src"))?;
    std::fs::write(root.join("Cargo.toml"), fill(TEMPLATE_CARGO))?;
    std::fs::write(root.join("src/lib.rs"), fill(TEMPLATE_LIB))?;
    std::fs::write(root.join("README.md"), fill(TEMPLATE_README))?;
    std::fs::write(root.join(".gitignore"), TEMPLATE_GITIGNORE)?;
    // The lock file of the versions the vendored sources were tested with also lets the first
    // build work offline.
    for (path, contents) in vendored::VENDORED {
        if sdk.is_some() && path.starts_with("vendor/") {
            continue;
        }
        let to = root.join(path);
        std::fs::create_dir_all(to.parent().expect("a vendored file is inside the crate"))?;
        std::fs::write(&to, contents)?;
    }
    if dir.exists() {
        std::fs::remove_dir(dir)?;
    }
    std::fs::rename(staging.keep(), dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(Created { dir: dir.to_path_buf(), sdk })
}

/// Encodes a core wasm module (with wit-bindgen's type section) as a component.
pub fn encode_component(core_module: &[u8]) -> Result<Vec<u8>> {
    wit_component::ComponentEncoder::default().module(core_module)?.validate(true).encode()
}

/// How `build` calls cargo.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// The package to build, in a workspace.
    pub package: Option<String>,
    /// Cargo features to enable.
    pub features: Vec<String>,
    /// The cargo profile.
    pub profile: String,
    /// Cargo's target directory.
    pub target_dir: Option<PathBuf>,
}

/// A predicate crate built and encoded.
#[derive(Debug)]
pub struct Built {
    /// The library's name, as cargo reports it.
    pub name: String,
    /// The core module cargo wrote.
    pub core_module: PathBuf,
    /// The component.
    pub component: Vec<u8>,
}

/// Builds the predicate crate (or workspace) in `dir` for `wasm32-unknown-unknown` and encodes
/// its library as a component; cargo's diagnostics go to standard error.
pub fn build(dir: &Path, opts: &BuildOptions) -> Result<Built> {
    let manifest = dir.join("Cargo.toml");
    if !manifest.is_file() {
        bail!("{}: no Cargo.toml; point at the predicate crate (see `overeager predicate new`)", dir.display());
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build").arg("--manifest-path").arg(&manifest).args(["--target", "wasm32-unknown-unknown", "--message-format", "json-render-diagnostics", "--profile", &opts.profile]);
    if let Some(p) = &opts.package {
        cmd.args(["-p", p]);
    }
    if !opts.features.is_empty() {
        cmd.args(["--features", &opts.features.join(",")]);
    }
    if let Some(t) = &opts.target_dir {
        cmd.arg("--target-dir").arg(t);
    }
    let output = cmd.stderr(Stdio::inherit()).output().context("running cargo")?;
    if !output.status.success() {
        bail!("cargo build failed ({}); is the target installed? `rustup target add wasm32-unknown-unknown`", output.status);
    }
    // The cdylib artifact: the last one cargo reports (the package asked for comes last).
    let mut artifact: Option<(String, PathBuf)> = None;
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if msg["reason"] != "compiler-artifact" || !msg["target"]["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "cdylib")) {
            continue;
        }
        let wasm = msg["filenames"].as_array().into_iter().flatten().filter_map(|f| f.as_str()).find(|f| f.ends_with(".wasm"));
        if let (Some(name), Some(wasm)) = (msg["target"]["name"].as_str(), wasm) {
            artifact = Some((name.to_string(), PathBuf::from(wasm)));
        }
    }
    let (name, core_module) = artifact.context("cargo built no cdylib .wasm; the crate needs `crate-type = [\"cdylib\", \"rlib\"]`")?;
    let core = std::fs::read(&core_module).with_context(|| format!("reading {}", core_module.display()))?;
    let component = encode_component(&core).with_context(|| format!("encoding {} as a component", core_module.display()))?;
    Ok(Built { name, core_module, component })
}
