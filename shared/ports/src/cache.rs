//! The hot-cache port (SPEC §4.4). A miss is never an error, only a slower read.

use std::time::Duration;

use async_trait::async_trait;
use domain::{Result, TenantId};

/// Upper bound on one cached value.
pub const MAX_CACHE_VALUE_BYTES: usize = 512 * 1024;

/// A tenant-scoped cache key: `c:{tenant}:{namespace}:{key}`. The braces are a Redis
/// Cluster hash tag, so one tenant's keys live on one shard and never mix with another's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey(String);

impl CacheKey {
    /// A key for one tenant's data.
    pub fn tenant(tenant: &TenantId, namespace: &str, key: &str) -> Self {
        Self(format!("c:{{{tenant}}}:{namespace}:{key}"))
    }

    /// A key for data that belongs to no tenant (the capability registry).
    pub fn global(namespace: &str, key: &str) -> Self {
        Self(format!("c:{{_global}}:{namespace}:{key}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[async_trait]
pub trait Cache: Send + Sync {
    /// Reads a value; `None` when absent or expired.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the cache cannot be reached (callers treat that as a miss).
    async fn get(&self, key: &CacheKey) -> Result<Option<Vec<u8>>>;

    /// Stores a value that expires after `ttl`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for values over [`MAX_CACHE_VALUE_BYTES`] or a zero TTL;
    /// `UNAVAILABLE` when the cache cannot be reached.
    async fn set(&self, key: &CacheKey, value: &[u8], ttl: Duration) -> Result<()>;

    /// Evicts keys (a write evicts what it changed). Absent keys are fine.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the cache cannot be reached.
    async fn evict(&self, keys: &[CacheKey]) -> Result<()>;
}
