//! Token buckets in process (one `continuity serve` is the only consumer).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use async_trait::async_trait;
use domain::{Error, Result};
use ports::ratelimit::{Rate, RateDecision, RateLimiter};

/// Buckets kept before idle (full) ones are dropped.
const MAX_BUCKETS: usize = 100_000;

#[derive(Default)]
pub struct MemoryLimiter {
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl MemoryLimiter {
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl RateLimiter for MemoryLimiter {
    async fn acquire(&self, key: &str, rate: Rate) -> Result<RateDecision> {
        self.bucket(key, rate, true)
    }

    async fn peek(&self, key: &str, rate: Rate) -> Result<RateDecision> {
        self.bucket(key, rate, false)
    }
}

impl MemoryLimiter {
    /// Refills `key`'s bucket and, when `take`, takes a token if there is one.
    fn bucket(&self, key: &str, rate: Rate, take: bool) -> Result<RateDecision> {
        let now = Instant::now();
        let cap = f64::from(rate.capacity.max(1));
        let per_ms = f64::from(rate.per_minute.max(1)) / 60_000.0;
        let mut buckets = self.buckets.lock().map_err(|_| Error::internal("rate limiter lock poisoned"))?;
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(key) {
            // Drop buckets that have refilled completely: forgetting them changes nothing.
            buckets.retain(|_, (tokens, at)| *tokens + now.duration_since(*at).as_secs_f64() * 1000.0 * per_ms < cap);
        }
        let (tokens, at) = buckets.entry(key.to_owned()).or_insert((cap, now));
        let refilled = (*tokens + now.duration_since(*at).as_secs_f64() * 1000.0 * per_ms).min(cap);
        *at = now;
        if refilled >= 1.0 {
            *tokens = if take { refilled - 1.0 } else { refilled };
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let remaining = tokens.floor() as u32;
            Ok(RateDecision { allowed: true, remaining, retry_after_secs: 0 })
        } else {
            *tokens = refilled;
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let wait_ms = ((1.0 - refilled) / per_ms).ceil() as u64;
            Ok(RateDecision { allowed: false, remaining: 0, retry_after_secs: wait_ms.div_ceil(1000).max(1) })
        }
    }
}
