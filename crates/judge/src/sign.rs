//! Signing predicate modules: detached signatures over a domain-separated message, and
//! verification against the trust store (the keys themselves are [`super::keys`]).
//!
//! The signed message binds the exact module bytes (by sha256) to the predicate id, its
//! version, the WIT version it implements and the signing key, so a signature cannot be moved
//! to other bytes, another id or another interface.

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier};
use serde::{Deserialize, Serialize};

use super::engine::Interface;
use overeager_bundle::keys::{key_id, parse_public};
use super::trust::TrustStore;

/// Format tag of signature files, and the first bytes of every signed message.
pub const SIGNATURE_FORMAT: &str = "overeager-predicate-signature/1";
/// The interface versions this build runs, for messages.
pub const WIT_VERSIONS: &str = "overeager:predicate@0.2.0 and @0.1.0";

/// A detached signature, stored beside the module as `<module>.sig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureFile {
    pub format: String,
    /// The module id scenarios use, e.g. `acme/secrets`.
    pub predicate: String,
    /// The module's version.
    pub version: String,
    /// The WIT version it implements.
    pub wit: String,
    pub key_id: String,
    /// sha256 of the exact module bytes, hex.
    pub module_sha256: String,
    /// The ed25519 signature over [`signed_message`], hex.
    pub signature: String,
}

/// Why a module's signature is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("unsigned: no signature file {0}; sign it with `overeager predicate sign`")]
    Unsigned(String),
    #[error("the signature file is malformed: {0}")]
    Malformed(String),
    #[error("the module bytes do not match the signature: it was signed as sha256 {signed}, the file has sha256 {actual} (changed after signing)")]
    DigestMismatch { signed: String, actual: String },
    #[error("signed for {0}, which this build does not support (it supports {WIT_VERSIONS})")]
    WrongWit(String),
    #[error("signed by key {0}, which the trust store does not know; trust it with `overeager keys trust`")]
    UntrustedKey(String),
    #[error("signed by key {key}, which was revoked{reason}")]
    RevokedKey { key: String, reason: String },
    #[error("key {key} may sign only {allowed}, not `{id}`")]
    OutOfNamespace { key: String, id: String, allowed: String },
    #[error("the signature does not verify with key {0}: the file was not signed by this key, or was altered")]
    BadSignature(String),
}

/// The bytes that are signed: the format tag, then each field as a 4-byte big-endian length
/// and its bytes, so no two field lists give the same message.
pub fn signed_message(predicate: &str, version: &str, wit: &str, key_id: &str, module_sha256: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(256);
    m.extend_from_slice(SIGNATURE_FORMAT.as_bytes());
    m.push(0);
    for field in [predicate, version, wit, key_id, module_sha256] {
        m.extend_from_slice(&(field.len() as u32).to_be_bytes());
        m.extend_from_slice(field.as_bytes());
    }
    m
}

/// Checks a module id: lowercase segments separated by `/`, at least `namespace/name`, and
/// not in the reserved `std` namespace.
pub fn check_module_id(id: &str) -> Result<(), String> {
    overeager_core::predicates::PredicateRef::parse(&format!("{id}:x")).map_err(|e| format!("module id `{id}`: {e}"))?;
    if !id.contains('/') {
        return Err(format!("module id `{id}` needs a namespace: `<namespace>/<name>`, e.g. `acme/{id}`"));
    }
    if id == "std" || id.starts_with("std/") {
        return Err("the `std` namespace is reserved for the built-in library".into());
    }
    Ok(())
}

/// Signs module bytes that implement `interface`.
pub fn sign(key: &SigningKey, module: &[u8], predicate: &str, version: &str, interface: Interface) -> Result<SignatureFile, String> {
    check_module_id(predicate)?;
    if version.trim().is_empty() || version.contains(char::is_whitespace) {
        return Err(format!("version `{version}` must be a non-empty word such as 0.1.0"));
    }
    let id = key_id(&key.verifying_key());
    let digest = overeager_core::sha256_hex(module);
    let sig = key.sign(&signed_message(predicate, version, interface.wit(), &id, &digest));
    Ok(SignatureFile {
        format: SIGNATURE_FORMAT.into(),
        predicate: predicate.into(),
        version: version.into(),
        wit: interface.wit().into(),
        key_id: id,
        module_sha256: digest,
        signature: hex::encode(sig.to_bytes()),
    })
}

/// Parses a signature file's text.
pub fn parse_signature(text: &str) -> Result<SignatureFile, SignatureError> {
    let sig: SignatureFile = serde_json::from_str(text).map_err(|e| SignatureError::Malformed(e.to_string()))?;
    if sig.format != SIGNATURE_FORMAT {
        return Err(SignatureError::Malformed(format!("format `{}` is not {SIGNATURE_FORMAT}", sig.format)));
    }
    Ok(sig)
}

/// The signer a verification accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub predicate: String,
    pub version: String,
    pub key_id: String,
    pub owner: Option<String>,
    pub digest: String,
    /// The interface version the signer says the module implements.
    pub wit: Interface,
}

/// Verifies a module's signature and the signer's standing in the trust store.
pub fn verify(module: &[u8], sig: &SignatureFile, trust: &TrustStore) -> Result<Verified, SignatureError> {
    let actual = overeager_core::sha256_hex(module);
    if !sig.module_sha256.eq_ignore_ascii_case(&actual) {
        return Err(SignatureError::DigestMismatch { signed: sig.module_sha256.clone(), actual });
    }
    let Some(wit) = Interface::from_wit(&sig.wit) else {
        return Err(SignatureError::WrongWit(sig.wit.clone()));
    };
    check_module_id(&sig.predicate).map_err(SignatureError::Malformed)?;
    let Some(entry) = trust.get(&sig.key_id) else {
        return Err(SignatureError::UntrustedKey(sig.key_id.clone()));
    };
    if entry.revoked {
        let reason = entry.revoked_reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default();
        return Err(SignatureError::RevokedKey { key: sig.key_id.clone(), reason });
    }
    let key = parse_public(&entry.public).map_err(|e| SignatureError::Malformed(format!("trust store entry {}: {e}", sig.key_id)))?;
    let bytes: [u8; 64] = hex::decode(&sig.signature).ok().and_then(|b| b.try_into().ok()).ok_or_else(|| SignatureError::Malformed("`signature` must be 128 hex digits".into()))?;
    let message = signed_message(&sig.predicate, &sig.version, &sig.wit, &sig.key_id, &actual);
    key.verify(&message, &Signature::from_bytes(&bytes)).map_err(|_| SignatureError::BadSignature(sig.key_id.clone()))?;
    // Checked after the signature, so a forged file cannot probe the namespaces.
    if !entry.may_sign(&sig.predicate) {
        let allowed = entry.namespaces.iter().map(|n| format!("`{n}/…`")).collect::<Vec<_>>().join(", ");
        return Err(SignatureError::OutOfNamespace { key: sig.key_id.clone(), id: sig.predicate.clone(), allowed });
    }
    Ok(Verified { predicate: sig.predicate.clone(), version: sig.version.clone(), key_id: sig.key_id.clone(), owner: entry.owner.clone(), digest: actual, wit })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_unambiguous() {
        assert_ne!(signed_message("a/b", "1", "w", "k", "d"), signed_message("a/b1", "", "w", "k", "d"));
    }

    #[test]
    fn module_ids_need_a_namespace_outside_std() {
        assert!(check_module_id("acme/secrets").is_ok());
        assert!(check_module_id("secrets").is_err());
        assert!(check_module_id("std/x").is_err());
        assert!(check_module_id("Acme/x").is_err());
    }
}
