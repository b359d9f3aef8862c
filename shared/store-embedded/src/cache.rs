//! An in-process TTL cache with a bounded number of entries.
//!
//! When full, expired entries go first, then the entry closest to expiry: hot data is
//! re-cached on its next read, and a miss is only ever a slower read.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use domain::{Error, Result};
use ports::cache::{Cache, CacheKey, MAX_CACHE_VALUE_BYTES};

pub const DEFAULT_CAPACITY: usize = 50_000;

pub struct MemoryCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

/// The entries, and an index of them by expiry (so making room is a logarithmic pop of
/// the soonest to expire, not a scan of every entry).
#[derive(Default)]
struct Inner {
    entries: HashMap<String, (Vec<u8>, Instant)>,
    by_expiry: BTreeSet<(Instant, String)>,
}

impl Inner {
    fn remove(&mut self, key: &str) {
        if let Some((_, exp)) = self.entries.remove(key) {
            self.by_expiry.remove(&(exp, key.to_owned()));
        }
    }

    /// Drops the entry closest to expiry (an expired one first, as those sort first).
    fn pop_soonest(&mut self) {
        if let Some((_, key)) = self.by_expiry.pop_first() {
            self.entries.remove(&key);
        }
    }
}

impl MemoryCache {
    pub fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), inner: Mutex::new(Inner::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every entry (another process changed what they were read from).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.entries.clear();
        inner.by_expiry.clear();
    }
}

#[async_trait]
impl Cache for MemoryCache {
    async fn get(&self, key: &CacheKey) -> Result<Option<Vec<u8>>> {
        let mut inner = self.lock();
        let got = match inner.entries.get(key.as_str()) {
            Some((v, exp)) if *exp > Instant::now() => Some(v.clone()),
            Some(_) => {
                inner.remove(key.as_str());
                None
            }
            None => None,
        };
        metrics::cache_lookup(got.is_some());
        Ok(got)
    }

    async fn set(&self, key: &CacheKey, value: &[u8], ttl: Duration) -> Result<()> {
        if value.len() > MAX_CACHE_VALUE_BYTES {
            return Err(Error::invalid(format!("a cached value is at most {MAX_CACHE_VALUE_BYTES} bytes")));
        }
        if ttl.is_zero() {
            return Err(Error::invalid("a cache TTL must be positive"));
        }
        let exp = Instant::now() + ttl;
        let mut inner = self.lock();
        inner.remove(key.as_str());
        while inner.entries.len() >= self.capacity {
            inner.pop_soonest();
        }
        inner.entries.insert(key.as_str().to_owned(), (value.to_vec(), exp));
        inner.by_expiry.insert((exp, key.as_str().to_owned()));
        Ok(())
    }

    async fn evict(&self, keys: &[CacheKey]) -> Result<()> {
        let mut inner = self.lock();
        for k in keys {
            inner.remove(k.as_str());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::TenantId;

    #[tokio::test]
    async fn capacity_evicts_the_soonest_to_expire() {
        let c = MemoryCache::new(2);
        let t = TenantId::new("acme").unwrap();
        let (a, b, n) = (CacheKey::tenant(&t, "x", "a"), CacheKey::tenant(&t, "x", "b"), CacheKey::tenant(&t, "x", "n"));
        c.set(&a, b"a", Duration::from_secs(10)).await.unwrap();
        c.set(&b, b"b", Duration::from_secs(100)).await.unwrap();
        c.set(&n, b"n", Duration::from_secs(100)).await.unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c.get(&a).await.unwrap(), None);
        assert!(c.get(&b).await.unwrap().is_some());
        assert!(c.get(&n).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn replacing_a_key_keeps_the_expiry_index_exact() {
        let c = MemoryCache::new(2);
        let t = TenantId::new("acme").unwrap();
        let k = |n: &str| CacheKey::tenant(&t, "x", n);
        c.set(&k("a"), b"1", Duration::from_secs(5)).await.unwrap();
        c.set(&k("a"), b"2", Duration::from_secs(500)).await.unwrap();
        c.set(&k("b"), b"b", Duration::from_secs(50)).await.unwrap();
        assert_eq!(c.lock().by_expiry.len(), 2, "one index entry per key");
        // Full: the soonest to expire is now b (a was extended), so b goes.
        c.set(&k("c"), b"c", Duration::from_secs(100)).await.unwrap();
        assert_eq!(c.get(&k("a")).await.unwrap().as_deref(), Some(b"2".as_slice()));
        assert_eq!(c.get(&k("b")).await.unwrap(), None);
        c.evict(&[k("a"), k("c")]).await.unwrap();
        assert!(c.is_empty());
        assert!(c.lock().by_expiry.is_empty());
    }
}
