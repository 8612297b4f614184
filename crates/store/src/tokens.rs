//! API tokens: stored hashed, each naming its holder and role.

use anyhow::{Result, bail};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{Store, now_us};

pub use overeager_wire::labels::Role;
pub use overeager_wire::server::TokenInfo;

/// A token's owner.
#[derive(Debug, Clone, Serialize)]
pub struct TokenOwner {
    pub name: String,
    pub role: Role,
}

fn token_hash(token: &str) -> String {
    overeager_core::sha256_hex(token.as_bytes())
}

impl Store {
    /// Creates a named API token and returns it; only its hash is stored.
    pub fn create_token(&mut self, name: &str, role: Role) -> Result<String> {
        if !overeager_core::is_account_name(name) {
            bail!("token name `{name}`: use 1–64 letters, digits, '-', '_', '.' or '@'");
        }
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(|e| anyhow::anyhow!("no randomness for a token: {e}"))?;
        let token = format!("oe_{}", hex::encode(raw));
        let res = self.conn.execute(
            "INSERT INTO tokens (hash, name, role, created_us) VALUES (?1, ?2, ?3, ?4)",
            params![token_hash(&token), name, role.as_str(), now_us() as i64],
        );
        match res {
            Ok(_) => Ok(token),
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::ConstraintViolation => {
                bail!("a token named `{name}` exists already; pick another name")
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Every token's holder, role and creation time (never the token: only its hash is kept).
    pub fn tokens(&self) -> Result<Vec<TokenInfo>> {
        let mut stmt = self.conn.prepare("SELECT name, role, created_us FROM tokens ORDER BY name")?;
        let rows = stmt.query_map([], |r| Ok(TokenInfo { name: r.get("name")?, role: Role::parse(&r.get::<_, String>("role")?), created_us: r.get::<_, i64>("created_us")? as u64 }))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Revokes the token named `name`: the next request that carries it is refused as unknown.
    /// What its holder did (uploads, labels) stays, under the name.
    pub fn revoke_token(&mut self, name: &str) -> Result<TokenInfo> {
        let Some(info) = self.tokens()?.into_iter().find(|t| t.name == name) else {
            let names: Vec<String> = self.tokens()?.into_iter().map(|t| t.name).collect();
            bail!("no token is named `{name}`; the tokens are: {}", if names.is_empty() { "none".to_string() } else { names.join(", ") });
        };
        self.conn.execute("DELETE FROM tokens WHERE name = ?1", [name])?;
        Ok(info)
    }

    /// Who holds this token, if anyone.
    pub fn token_owner(&self, token: &str) -> Result<Option<TokenOwner>> {
        let row: Option<(String, String)> =
            self.conn.query_row("SELECT name, role FROM tokens WHERE hash = ?1", [token_hash(token)], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
        Ok(row.map(|(name, role)| TokenOwner { name, role: Role::parse(&role) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revoked_token_is_unknown_and_its_name_free() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let t = store.create_token("ann", Role::Reviewer).unwrap();
        store.create_token("root", Role::Admin).unwrap();
        assert_eq!(store.tokens().unwrap().iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["ann", "root"]);
        assert_eq!(store.revoke_token("ann").unwrap().role, Role::Reviewer);
        assert!(store.token_owner(&t).unwrap().is_none());
        let err = store.revoke_token("ann").unwrap_err().to_string();
        assert!(err.contains("root"), "{err}");
        store.create_token("ann", Role::Reviewer).unwrap();
    }

    #[test]
    fn tokens_are_stored_hashed_and_named_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let t = store.create_token("alice", Role::Writer).unwrap();
        assert!(t.starts_with("oe_") && t.len() == 67);
        assert_eq!(store.token_owner(&t).unwrap().unwrap().role, Role::Writer);
        assert!(store.token_owner("oe_nope").unwrap().is_none());
        let err = store.create_token("alice", Role::Admin).unwrap_err().to_string();
        assert!(err.contains("exists already"), "{err}");
        assert!(store.create_token("bad name", Role::Admin).is_err());
        let stored: String = store.conn.query_row("SELECT hash FROM tokens", [], |r| r.get(0)).unwrap();
        assert_ne!(stored, t);
    }
}
