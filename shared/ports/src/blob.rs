//! The blob-store port: raw payloads and JSONL backups, always under the tenant's prefix.

use async_trait::async_trait;
use domain::{Error, Result, TenantId};

/// Upper bound on one blob.
pub const MAX_BLOB_BYTES: usize = 16 * 1024 * 1024;

/// `{tenant}/{path}`; path segments are `[A-Za-z0-9._=-]+`, never `.` or `..`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlobKey {
    tenant: TenantId,
    path: String,
}

impl BlobKey {
    /// # Errors
    /// `INVALID_REQUEST` for an empty path, an empty/dot segment or a disallowed character.
    pub fn new(tenant: &TenantId, path: &str) -> Result<Self> {
        if path.is_empty() || path.len() > 512 {
            return Err(Error::invalid_field("path", "must be 1-512 characters"));
        }
        for seg in path.split('/') {
            let ok = !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '='));
            if !ok {
                return Err(Error::invalid_field("path", format!("invalid path segment {seg:?}")));
            }
        }
        Ok(Self { tenant: tenant.clone(), path: path.to_owned() })
    }

    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The full object key: `{tenant}/{path}`.
    pub fn full(&self) -> String {
        format!("{}/{}", self.tenant, self.path)
    }
}

#[async_trait]
pub trait BlobStore: Send + Sync {
    /// Stores (or replaces) a blob durably.
    ///
    /// # Errors
    /// `INVALID_REQUEST` over [`MAX_BLOB_BYTES`]; `UNAVAILABLE`.
    async fn put(&self, key: &BlobKey, bytes: &[u8]) -> Result<()>;

    /// # Errors
    /// `UNAVAILABLE`.
    async fn get(&self, key: &BlobKey) -> Result<Option<Vec<u8>>>;

    /// Lists the tenant's blob paths starting with `prefix`, sorted, at most `limit`
    /// after the exclusive `after` path.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list(&self, tenant: &TenantId, prefix: &str, after: Option<&str>, limit: u32) -> Result<Vec<BlobKey>>;

    /// Deletes a blob; deleting one that is not there is fine.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn delete(&self, key: &BlobKey) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_cannot_escape_the_tenant() {
        let t = TenantId::new("acme").unwrap();
        assert!(BlobKey::new(&t, "raw/2026-11-29/batch-1.json").is_ok());
        for bad in ["", "../x", "a/../b", "a//b", "/abs", "a/./b", "a b", "a\\b"] {
            assert!(BlobKey::new(&t, bad).is_err(), "{bad:?}");
        }
    }
}
