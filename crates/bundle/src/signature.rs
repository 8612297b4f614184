//! Runner signatures: a runner that holds an ed25519 key signs each bundle it produces, so a
//! server that trusts the key knows the bundle came from that runner unaltered.
//!
//! The signature is a file in the bundle, `runner-signature.json`. It lists the sha256 of every
//! other file (the manifest included) and signs that list with the runner's key; the public key
//! travels with it, so anyone can check that nothing changed since signing, and a server
//! decides separately whether it trusts the key. A file changed, added or removed after signing
//! makes the signature fail.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier};
use serde::{Deserialize, Serialize};

use overeager_core::bundle::files;

/// Format tag of runner signature files, and the first bytes of every signed message.
pub const RUNNER_SIGNATURE_FORMAT: &str = "overeager-runner-signature/1";

/// `runner-signature.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerSignature {
    pub format: String,
    /// `ed25519:` and the first 16 hex digits of the public key's sha256.
    pub key_id: String,
    /// The 32-byte public key, hex.
    pub public: String,
    /// sha256 of every other file of the bundle, by its `/`-separated path.
    pub files: BTreeMap<String, String>,
    /// The ed25519 signature over [`signed_message`], hex.
    pub signature: String,
}

/// Why a bundle's runner signature is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureProblem {
    #[error("runner-signature.json is malformed: {0}")]
    Malformed(String),
    #[error("`{0}` changed after the runner signed the bundle")]
    Changed(String),
    #[error("`{0}` was added after the runner signed the bundle")]
    Added(String),
    #[error("`{0}` was removed after the runner signed the bundle")]
    Removed(String),
    #[error("the runner signature does not verify with key {0}: the file list was altered, or it was not signed by this key")]
    BadSignature(String),
}

/// The bytes that are signed: the format tag, the key id, then `sha256  path` per file in
/// path order, each line ended by a newline (paths hold no newline: see [`listing`]).
pub fn signed_message(key_id: &str, files: &BTreeMap<String, String>) -> Vec<u8> {
    let mut m = Vec::with_capacity(64 + files.len() * 96);
    m.extend_from_slice(RUNNER_SIGNATURE_FORMAT.as_bytes());
    m.push(0);
    m.extend_from_slice(key_id.as_bytes());
    m.push(0);
    for (path, digest) in files {
        m.extend_from_slice(format!("{digest}  {path}\n").as_bytes());
    }
    m
}

/// sha256 of every file under `dir` except the signature itself, by `/`-separated path.
pub fn listing(dir: &Path) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for entry in walkdir::WalkDir::new(dir).min_depth(1).follow_links(false) {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        if !entry.file_type().is_file() {
            continue;
        }
        let rel = entry.path().strip_prefix(dir).expect("walkdir stays below its root");
        let rel = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
        if rel == files::RUNNER_SIGNATURE {
            continue;
        }
        if rel.contains('\n') {
            anyhow::bail!("{}: a bundle file's name holds a newline", entry.path().display());
        }
        let bytes = std::fs::read(entry.path()).with_context(|| format!("reading {}", entry.path().display()))?;
        out.insert(rel, overeager_core::sha256_hex(&bytes));
    }
    Ok(out)
}

/// Signs the bundle directory `dir` with `key`, writing `runner-signature.json` into it.
pub fn sign_dir(dir: &Path, key: &SigningKey) -> Result<RunnerSignature> {
    let files = listing(dir)?;
    let key_id = crate::keys::key_id(&key.verifying_key());
    let signature = key.sign(&signed_message(&key_id, &files));
    let sig = RunnerSignature {
        format: RUNNER_SIGNATURE_FORMAT.into(),
        key_id,
        public: hex::encode(key.verifying_key().as_bytes()),
        files,
        signature: hex::encode(signature.to_bytes()),
    };
    let path = dir.join(files::RUNNER_SIGNATURE);
    std::fs::write(&path, serde_json::to_vec_pretty(&sig)?).with_context(|| format!("writing {}", path.display()))?;
    Ok(sig)
}

/// The runner key named by `OVEREAGER_RUNNER_KEY` (a secret key file), if set.
pub fn key_from_env() -> Result<Option<SigningKey>> {
    match std::env::var_os("OVEREAGER_RUNNER_KEY").filter(|v| !v.is_empty()) {
        Some(p) => crate::keys::read_secret(Path::new(&p)).map(Some).context("OVEREAGER_RUNNER_KEY"),
        None => Ok(None),
    }
}

/// The key an intact runner signature was made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedBy {
    /// For people: 16 hex digits of the key's hash.
    pub key_id: String,
    /// The whole public key, hex: what trust is decided on.
    pub public: String,
}

/// Checks the runner signature of the bundle directory `dir`: `Ok(None)` when it has none,
/// `Ok(Some(signer))` when it is intact and signed by that key (whether to trust the key is
/// the caller's decision), and the first problem otherwise.
pub fn check_dir(dir: &Path) -> Result<Option<SignedBy>, SignatureProblem> {
    let path = dir.join(files::RUNNER_SIGNATURE);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SignatureProblem::Malformed(e.to_string())),
    };
    let sig: RunnerSignature = serde_json::from_slice(&text).map_err(|e| SignatureProblem::Malformed(e.to_string()))?;
    if sig.format != RUNNER_SIGNATURE_FORMAT {
        return Err(SignatureProblem::Malformed(format!("format `{}` is not {RUNNER_SIGNATURE_FORMAT}", sig.format)));
    }
    let public = crate::keys::parse_public(&sig.public).map_err(SignatureProblem::Malformed)?;
    if crate::keys::key_id(&public) != sig.key_id {
        return Err(SignatureProblem::Malformed(format!("key id {} is not the id of the public key it carries", sig.key_id)));
    }
    let bytes: [u8; 64] = hex::decode(&sig.signature).ok().and_then(|b| b.try_into().ok()).ok_or_else(|| SignatureProblem::Malformed("`signature` must be 128 hex digits".into()))?;
    public.verify(&signed_message(&sig.key_id, &sig.files), &Signature::from_bytes(&bytes)).map_err(|_| SignatureProblem::BadSignature(sig.key_id.clone()))?;
    let actual = listing(dir).map_err(|e| SignatureProblem::Malformed(format!("{e:#}")))?;
    for (path, digest) in &sig.files {
        match actual.get(path) {
            None => return Err(SignatureProblem::Removed(path.clone())),
            Some(d) if d != digest => return Err(SignatureProblem::Changed(path.clone())),
            Some(_) => {}
        }
    }
    if let Some(extra) = actual.keys().find(|p| !sig.files.contains_key(*p)) {
        return Err(SignatureProblem::Added(extra.clone()));
    }
    Ok(Some(SignedBy { key_id: sig.key_id, public: hex::encode(public.as_bytes()) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("bundle.json"), b"{}").unwrap();
        std::fs::create_dir_all(d.path().join("snapshot")).unwrap();
        std::fs::write(d.path().join("snapshot/after.json"), b"[]").unwrap();
        d
    }

    #[test]
    fn an_intact_bundle_verifies_and_any_change_after_signing_is_named() {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let d = bundle();
        assert_eq!(check_dir(d.path()), Ok(None), "unsigned");
        let sig = sign_dir(d.path(), &key).unwrap();
        assert_eq!(sig.files.len(), 2);
        assert_eq!(check_dir(d.path()), Ok(Some(SignedBy { key_id: sig.key_id.clone(), public: sig.public.clone() })));

        std::fs::write(d.path().join("snapshot/after.json"), b"[1]").unwrap();
        assert_eq!(check_dir(d.path()), Err(SignatureProblem::Changed("snapshot/after.json".into())));
        std::fs::write(d.path().join("snapshot/after.json"), b"[]").unwrap();
        std::fs::write(d.path().join("verdict.json"), b"{}").unwrap();
        assert_eq!(check_dir(d.path()), Err(SignatureProblem::Added("verdict.json".into())));
        std::fs::remove_file(d.path().join("verdict.json")).unwrap();
        std::fs::remove_file(d.path().join("bundle.json")).unwrap();
        assert_eq!(check_dir(d.path()), Err(SignatureProblem::Removed("bundle.json".into())));
    }

    #[test]
    fn a_file_list_edited_to_match_altered_files_fails_the_signature() {
        let key = SigningKey::from_bytes(&[9u8; 32]);
        let d = bundle();
        sign_dir(d.path(), &key).unwrap();
        std::fs::write(d.path().join("bundle.json"), b"{\"x\":1}").unwrap();
        let path = d.path().join(files::RUNNER_SIGNATURE);
        let mut sig: RunnerSignature = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        sig.files.insert("bundle.json".into(), overeager_core::sha256_hex(b"{\"x\":1}"));
        std::fs::write(&path, serde_json::to_vec(&sig).unwrap()).unwrap();
        assert_eq!(check_dir(d.path()), Err(SignatureProblem::BadSignature(sig.key_id)));
    }
}
