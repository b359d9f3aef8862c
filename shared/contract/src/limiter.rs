//! Contract of the rate limiter: a token bucket per key.

use std::sync::Arc;
use std::time::Duration;

use ports::ratelimit::{Rate, RateLimiter};

fn key(label: &str) -> String {
    format!("{label}-{:016x}", rand::random::<u64>())
}

pub async fn burst_then_refuse(l: Arc<dyn RateLimiter>) {
    let k = key("burst");
    let rate = Rate { capacity: 5, per_minute: 5 };
    for i in 0..5 {
        let d = l.acquire(&k, rate).await.unwrap();
        assert!(d.allowed, "request {i} is within the burst");
        assert_eq!(d.remaining, 4 - i);
    }
    let d = l.acquire(&k, rate).await.unwrap();
    assert!(!d.allowed);
    // One token every 12 s at 5 a minute.
    assert!((10..=12).contains(&d.retry_after_secs), "{}", d.retry_after_secs);
}

pub async fn keys_are_independent(l: Arc<dyn RateLimiter>) {
    let (a, b) = (key("a"), key("b"));
    let rate = Rate { capacity: 1, per_minute: 1 };
    assert!(l.acquire(&a, rate).await.unwrap().allowed);
    assert!(!l.acquire(&a, rate).await.unwrap().allowed);
    assert!(l.acquire(&b, rate).await.unwrap().allowed, "another tenant's bucket is untouched");
}

pub async fn buckets_refill(l: Arc<dyn RateLimiter>) {
    let k = key("refill");
    // One token every 2 s: the second call comes well inside it even on a loaded machine.
    let rate = Rate { capacity: 1, per_minute: 30 };
    assert!(l.acquire(&k, rate).await.unwrap().allowed);
    assert!(!l.acquire(&k, rate).await.unwrap().allowed);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(l.acquire(&k, rate).await.unwrap().allowed, "a token came back");
}

pub async fn concurrent_requests_never_exceed_capacity(l: Arc<dyn RateLimiter>) {
    let k = key("race");
    let rate = Rate { capacity: 10, per_minute: 10 };
    let mut tasks = Vec::new();
    for _ in 0..25 {
        let (l, k) = (l.clone(), k.clone());
        tasks.push(tokio::spawn(async move { l.acquire(&k, rate).await.unwrap().allowed }));
    }
    let mut allowed = 0;
    for t in tasks {
        allowed += u32::from(t.await.unwrap());
    }
    // A token refills every 6 s; 25 calls finish long before, so exactly 10 pass.
    assert_eq!(allowed, 10);
}

pub async fn peek_looks_without_taking(l: Arc<dyn RateLimiter>) {
    let k = key("peek");
    let rate = Rate { capacity: 2, per_minute: 2 };
    for _ in 0..5 {
        assert!(l.peek(&k, rate).await.unwrap().allowed, "looking takes nothing");
    }
    assert!(l.acquire(&k, rate).await.unwrap().allowed);
    assert!(l.acquire(&k, rate).await.unwrap().allowed);
    let d = l.peek(&k, rate).await.unwrap();
    assert!(!d.allowed, "the bucket is empty");
    assert!(d.retry_after_secs >= 1);
    assert!(!l.acquire(&k, rate).await.unwrap().allowed);
}
