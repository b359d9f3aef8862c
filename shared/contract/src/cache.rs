//! Contract of the cache port: TTL expiry, eviction, overwrite, limits, tenant isolation.

use std::sync::Arc;
use std::time::Duration;

use domain::ErrorCode;
use ports::cache::{Cache, CacheKey, MAX_CACHE_VALUE_BYTES};

use crate::fresh_tenant;

pub async fn set_get_overwrite(cache: Arc<dyn Cache>) {
    let t = fresh_tenant("cache");
    let k = CacheKey::tenant(&t, "entity", "account:1");
    assert_eq!(cache.get(&k).await.unwrap(), None, "a miss is None, never an error");
    cache.set(&k, b"v1", Duration::from_secs(60)).await.unwrap();
    assert_eq!(cache.get(&k).await.unwrap().as_deref(), Some(b"v1".as_slice()));
    cache.set(&k, b"v2", Duration::from_secs(60)).await.unwrap();
    assert_eq!(cache.get(&k).await.unwrap().as_deref(), Some(b"v2".as_slice()));
}

pub async fn entries_expire(cache: Arc<dyn Cache>) {
    let t = fresh_tenant("ttl");
    let short = CacheKey::tenant(&t, "cfg", "short");
    let long = CacheKey::tenant(&t, "cfg", "long");
    cache.set(&short, b"x", Duration::from_secs(2)).await.unwrap();
    assert!(cache.get(&short).await.unwrap().is_some());
    cache.set(&long, b"y", Duration::from_secs(60)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert_eq!(cache.get(&short).await.unwrap(), None, "expired entries are gone");
    assert!(cache.get(&long).await.unwrap().is_some(), "unexpired entries stay");
}

pub async fn eviction_removes_keys(cache: Arc<dyn Cache>) {
    let t = fresh_tenant("evict");
    let a = CacheKey::tenant(&t, "entity", "a");
    let b = CacheKey::tenant(&t, "entity", "b");
    let c = CacheKey::tenant(&t, "entity", "c");
    for k in [&a, &b, &c] {
        cache.set(k, b"v", Duration::from_secs(60)).await.unwrap();
    }
    let other = fresh_tenant("evict-other");
    cache.evict(&[a.clone(), b.clone(), CacheKey::tenant(&other, "entity", "missing")]).await.unwrap();
    assert_eq!(cache.get(&a).await.unwrap(), None);
    assert_eq!(cache.get(&b).await.unwrap(), None);
    assert!(cache.get(&c).await.unwrap().is_some());
}

pub async fn limits_are_enforced(cache: Arc<dyn Cache>) {
    let t = fresh_tenant("limits");
    let k = CacheKey::tenant(&t, "x", "big");
    let big = vec![0u8; MAX_CACHE_VALUE_BYTES + 1];
    assert_eq!(cache.set(&k, &big, Duration::from_secs(5)).await.unwrap_err().code, ErrorCode::InvalidRequest);
    assert_eq!(cache.set(&k, b"v", Duration::ZERO).await.unwrap_err().code, ErrorCode::InvalidRequest);
    assert_eq!(cache.get(&k).await.unwrap(), None);
}

pub async fn tenants_are_isolated(cache: Arc<dyn Cache>) {
    let a = fresh_tenant("ca");
    let b = fresh_tenant("cb");
    cache.set(&CacheKey::tenant(&a, "entity", "same"), b"a-secret", Duration::from_secs(60)).await.unwrap();
    assert_eq!(cache.get(&CacheKey::tenant(&b, "entity", "same")).await.unwrap(), None);
    cache.evict(&[CacheKey::tenant(&b, "entity", "same")]).await.unwrap();
    assert!(cache.get(&CacheKey::tenant(&a, "entity", "same")).await.unwrap().is_some(), "B's eviction never touches A");
}
