//! The providers a run may use: the built-in ones and those of the providers files named by
//! `--providers` or `$OVEREAGER_PROVIDERS` (see [`overeager_core::providers`]).

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use overeager_core::providers::{Provider, Providers};
use serde::Serialize;

/// The environment variable naming providers files (separated by `:`), read when no
/// `--providers` is given.
pub const PROVIDERS_ENV: &str = "OVEREAGER_PROVIDERS";

/// The built-in providers and those of `files` (or, when `files` is empty, of the files
/// `$OVEREAGER_PROVIDERS` names), later files overriding earlier ones by name.
pub fn load(files: &[PathBuf]) -> Result<Providers> {
    let from_env: Vec<PathBuf> = std::env::var_os(PROVIDERS_ENV).map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect()).unwrap_or_default();
    let mut providers = Providers::built_in();
    for file in if files.is_empty() { &from_env[..] } else { files } {
        let text = std::fs::read_to_string(file).with_context(|| format!("reading the providers file {}", file.display()))?;
        providers.add_file(&file.display().to_string(), &text).map_err(|errs| {
            let lines: Vec<String> = errs.iter().map(ToString::to_string).collect();
            anyhow!("the providers file {} is not valid:\n{}", file.display(), lines.join("\n"))
        })?;
    }
    Ok(providers)
}

/// Whether a provider's key is there to use (never its value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyState {
    /// The provider takes no key (a local server).
    NotNeeded,
    Present,
    Missing,
}

/// Whether `p`'s key variable is set (and not empty) in this environment.
pub fn key_state(p: &Provider) -> KeyState {
    match &p.key_env {
        None => KeyState::NotNeeded,
        Some(var) if std::env::var_os(var).is_some_and(|v| !v.is_empty()) => KeyState::Present,
        Some(_) => KeyState::Missing,
    }
}
