//! Per-tenant rate limiting (SPEC §3.5): a token bucket per key, refilled continuously.
//! Embedded: in process. AWS: one Lua script on Redis, so every Lambda shares the bucket.

use async_trait::async_trait;
use domain::Result;

/// A bucket's shape: `capacity` tokens (the burst), refilled at `per_minute` a minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub capacity: u32,
    pub per_minute: u32,
}

impl Rate {
    /// A bucket that allows a whole minute's quota as a burst.
    pub fn per_minute(n: u32) -> Self {
        let n = n.max(1);
        Self { capacity: n, per_minute: n }
    }

    /// Milliseconds until one token is back.
    pub fn millis_per_token(self) -> u64 {
        (60_000 / u64::from(self.per_minute.max(1))).max(1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateDecision {
    pub allowed: bool,
    /// Whole tokens left after this request.
    pub remaining: u32,
    /// When refused: seconds until a token is back (at least 1).
    pub retry_after_secs: u64,
}

#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Takes one token from `key`'s bucket if there is one.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the shared limiter cannot be reached (callers fail open).
    async fn acquire(&self, key: &str, rate: Rate) -> Result<RateDecision>;

    /// Whether `key`'s bucket has a token, without taking it: for limits that count
    /// only failures (a sign-in checks first, and takes a token only when it fails).
    ///
    /// # Errors
    /// `UNAVAILABLE` when the shared limiter cannot be reached.
    async fn peek(&self, key: &str, rate: Rate) -> Result<RateDecision>;
}
