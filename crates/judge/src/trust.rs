//! The trust store: which keys may sign predicate modules, for which namespaces, and which
//! keys were revoked. A TOML file people can read and review:
//!
//! ```toml
//! [[key]]
//! id = "ed25519:0123456789abcdef"
//! public = "…64 hex digits…"
//! owner = "Acme security team"
//! namespaces = ["acme"]
//! revoked = false
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// One trusted (or revoked) key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedKey {
    pub id: String,
    /// ed25519 public key, hex.
    pub public: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The key may sign module ids `<namespace>/…` for these namespaces.
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub revoked: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_reason: Option<String>,
}

impl TrustedKey {
    /// Whether this key may sign module `id`.
    pub fn may_sign(&self, id: &str) -> bool {
        self.namespaces.iter().any(|ns| id.strip_prefix(ns.as_str()).is_some_and(|rest| rest.starts_with('/')))
    }
}

/// The trust store file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustStore {
    #[serde(default, rename = "key")]
    pub keys: Vec<TrustedKey>,
}

/// Checks a namespace: lowercase segments separated by `/`, not `std`.
pub fn check_namespace(ns: &str) -> Result<(), String> {
    let ok = |seg: &str| !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !ns.split('/').all(ok) {
        return Err(format!("namespace `{ns}` must be lowercase letters, digits, '-' or '_', in segments separated by '/'"));
    }
    if ns == "std" || ns.starts_with("std/") {
        return Err("the `std` namespace is reserved for the built-in library".into());
    }
    Ok(())
}

impl TrustStore {
    /// The default location: `$OVEREAGER_TRUST`, else `$XDG_CONFIG_HOME/overeager/trust.toml`,
    /// else `~/.config/overeager/trust.toml`.
    pub fn default_path() -> PathBuf {
        if let Some(p) = std::env::var_os("OVEREAGER_TRUST") {
            return PathBuf::from(p);
        }
        overeager_bundle::files::user_dir("XDG_CONFIG_HOME", ".config").unwrap_or_else(|| PathBuf::from("overeager")).join("trust.toml")
    }

    /// Loads a trust store; a missing file is an empty store.
    pub fn load(path: &Path) -> Result<TrustStore> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TrustStore::default()),
            Err(e) => return Err(e).with_context(|| format!("reading the trust store {}", path.display())),
        };
        let store: TrustStore = toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: not a valid trust store: {e}", path.display()))?;
        for (i, k) in store.keys.iter().enumerate() {
            for ns in &k.namespaces {
                check_namespace(ns).map_err(|e| anyhow::anyhow!("{}: key[{i}] ({}): {e}", path.display(), k.id))?;
            }
            overeager_bundle::keys::parse_public(&k.public).map_err(|e| anyhow::anyhow!("{}: key[{i}] ({}): {e}", path.display(), k.id))?;
        }
        Ok(store)
    }

    /// Writes the store atomically (a reader sees the old file or the new one).
    pub fn save(&self, path: &Path) -> Result<()> {
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        overeager_bundle::files::write_atomic(path, toml::to_string_pretty(self)?.as_bytes())
    }

    /// The entry of a key id.
    pub fn get(&self, id: &str) -> Option<&TrustedKey> {
        self.keys.iter().find(|k| k.id == id)
    }

    /// Trusts a key for namespaces (adding to an existing entry's namespaces). A revoked key
    /// cannot be trusted again: revocation is final.
    pub fn trust(&mut self, id: &str, public: &str, owner: Option<String>, namespaces: &[String]) -> Result<()> {
        if namespaces.is_empty() {
            bail!("name at least one namespace the key may sign (--namespace acme)");
        }
        for ns in namespaces {
            check_namespace(ns).map_err(anyhow::Error::msg)?;
        }
        match self.keys.iter_mut().find(|k| k.id == id) {
            Some(k) if k.revoked => bail!("key {id} was revoked; revocation is final, generate a new key"),
            Some(k) => {
                if k.public != public {
                    bail!("key {id} is already trusted with a different public key");
                }
                for ns in namespaces {
                    if !k.namespaces.contains(ns) {
                        k.namespaces.push(ns.clone());
                    }
                }
                if owner.is_some() {
                    k.owner = owner;
                }
            }
            None => self.keys.push(TrustedKey { id: id.into(), public: public.into(), owner, namespaces: namespaces.to_vec(), revoked: false, revoked_reason: None }),
        }
        Ok(())
    }

    /// Revokes a key: modules it signed are refused from now on.
    pub fn revoke(&mut self, id: &str, reason: Option<String>) -> Result<()> {
        let Some(k) = self.keys.iter_mut().find(|k| k.id == id) else {
            bail!("key {id} is not in the trust store; `overeager keys list` shows the known keys");
        };
        k.revoked = true;
        k.revoked_reason = reason;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_segment_prefixes() {
        let k = TrustedKey { id: "k".into(), public: String::new(), owner: None, namespaces: vec!["acme".into()], revoked: false, revoked_reason: None };
        assert!(k.may_sign("acme/secrets"));
        assert!(!k.may_sign("acme"));
        assert!(!k.may_sign("acmeevil/x"));
        assert!(!k.may_sign("evil/acme/x"));
        assert!(check_namespace("std").is_err());
    }
}
