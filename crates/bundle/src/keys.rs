//! ed25519 key pairs and their files: what signs predicate modules and runner bundles, and
//! what a trust store or a server holds to check them.

use std::path::Path;

use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

/// Format tag of secret key files.
pub const SECRET_KEY_FORMAT: &str = "overeager-ed25519-secret/1";
/// Format tag of public key files.
pub const PUBLIC_KEY_FORMAT: &str = "overeager-ed25519-public/1";
/// A secret key file (keep it private: mode 0600).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretKeyFile {
    pub format: String,
    pub key_id: String,
    /// The 32-byte ed25519 seed, hex.
    pub secret: String,
}

/// A public key file, handed to whoever should trust the key.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicKeyFile {
    pub format: String,
    pub key_id: String,
    /// The 32-byte ed25519 public key, hex.
    pub public: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// The key id of a public key: `ed25519:` and the first 16 hex digits of its sha256.
pub fn key_id(public: &VerifyingKey) -> String {
    format!("ed25519:{}", &overeager_core::sha256_hex(public.as_bytes())[..16])
}

/// A fresh key pair from the operating system's random source.
pub fn generate(owner: Option<String>) -> anyhow::Result<(SecretKeyFile, PublicKeyFile)> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("no randomness for a new key: {e}"))?;
    let sk = SigningKey::from_bytes(&seed);
    let id = key_id(&sk.verifying_key());
    Ok((
        SecretKeyFile { format: SECRET_KEY_FORMAT.into(), key_id: id.clone(), secret: hex::encode(seed) },
        PublicKeyFile { format: PUBLIC_KEY_FORMAT.into(), key_id: id, public: hex::encode(sk.verifying_key().as_bytes()), owner },
    ))
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("reading {what} {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: not a valid {what}: {e}", path.display()))
}

/// Reads a secret key file.
pub fn read_secret(path: &Path) -> anyhow::Result<SigningKey> {
    let f: SecretKeyFile = read_json(path, "secret key file")?;
    if f.format != SECRET_KEY_FORMAT {
        anyhow::bail!("{}: format `{}` is not {SECRET_KEY_FORMAT}", path.display(), f.format);
    }
    let seed: [u8; 32] = hex::decode(&f.secret).ok().and_then(|b| b.try_into().ok()).ok_or_else(|| anyhow::anyhow!("{}: `secret` must be 64 hex digits", path.display()))?;
    let sk = SigningKey::from_bytes(&seed);
    if key_id(&sk.verifying_key()) != f.key_id {
        anyhow::bail!("{}: `key_id` does not match the key", path.display());
    }
    Ok(sk)
}

/// Parses the public key of a public key file.
pub fn parse_public(hex_key: &str) -> Result<VerifyingKey, String> {
    let bytes: [u8; 32] = hex::decode(hex_key).ok().and_then(|b| b.try_into().ok()).ok_or("a public key must be 64 hex digits")?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| format!("not an ed25519 public key: {e}"))
}

/// Reads a public key file.
pub fn read_public(path: &Path) -> anyhow::Result<(PublicKeyFile, VerifyingKey)> {
    let f: PublicKeyFile = read_json(path, "public key file")?;
    if f.format != PUBLIC_KEY_FORMAT {
        anyhow::bail!("{}: format `{}` is not {PUBLIC_KEY_FORMAT}", path.display(), f.format);
    }
    let key = parse_public(&f.public).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if key_id(&key) != f.key_id {
        anyhow::bail!("{}: `key_id` does not match the key", path.display());
    }
    Ok((f, key))
}
