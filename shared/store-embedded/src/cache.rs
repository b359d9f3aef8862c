//! An in-process TTL cache with a bounded number of entries.
//!
//! When full, expired entries go first, then the entry closest to expiry: hot data is
//! re-cached on its next read, and a miss is only ever a slower read.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use domain::{Error, Result};
use ports::cache::{Cache, CacheKey, MAX_CACHE_VALUE_BYTES};

pub const DEFAULT_CAPACITY: usize = 50_000;

pub struct MemoryCache {
    capacity: usize,
    entries: Mutex<HashMap<String, (Vec<u8>, Instant)>>,
}

impl MemoryCache {
    pub fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), entries: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Vec<u8>, Instant)>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl Cache for MemoryCache {
    async fn get(&self, key: &CacheKey) -> Result<Option<Vec<u8>>> {
        let mut map = self.lock();
        match map.get(key.as_str()) {
            Some((v, exp)) if *exp > Instant::now() => Ok(Some(v.clone())),
            Some(_) => {
                map.remove(key.as_str());
                Ok(None)
            }
            None => Ok(None),
        }
    }

    async fn set(&self, key: &CacheKey, value: &[u8], ttl: Duration) -> Result<()> {
        if value.len() > MAX_CACHE_VALUE_BYTES {
            return Err(Error::invalid(format!("a cached value is at most {MAX_CACHE_VALUE_BYTES} bytes")));
        }
        if ttl.is_zero() {
            return Err(Error::invalid("a cache TTL must be positive"));
        }
        let now = Instant::now();
        let mut map = self.lock();
        if map.len() >= self.capacity && !map.contains_key(key.as_str()) {
            map.retain(|_, (_, exp)| *exp > now);
            if map.len() >= self.capacity
                && let Some(victim) = map.iter().min_by_key(|(_, (_, exp))| *exp).map(|(k, _)| k.clone())
            {
                map.remove(&victim);
            }
        }
        map.insert(key.as_str().to_owned(), (value.to_vec(), now + ttl));
        Ok(())
    }

    async fn evict(&self, keys: &[CacheKey]) -> Result<()> {
        let mut map = self.lock();
        for k in keys {
            map.remove(k.as_str());
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
}
