//! The hot-cache port over Redis: a single node, or a cluster such as ElastiCache
//! Serverless (always cluster mode, always TLS).
//!
//! The cache only ever makes reads faster, so it must never make a request slower by
//! much: every call is bounded by [`RedisSettings::timeout`], the connection is made
//! lazily (a dead cache does not stop a service from starting), and once a call finds
//! the cache unreachable (refused, dropped, timed out) calls fail at once for
//! [`RECONNECT_BACKOFF`], so a dead cache costs callers an immediate `UNAVAILABLE`,
//! which they treat as a miss, rather than a timeout each.
//!
//! Keys carry a `{tenant}` hash tag ([`CacheKey`]), so in a cluster one tenant's keys
//! share a slot; eviction groups keys by that tag and deletes each group with one `DEL`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use domain::{Error, Result};
use ports::cache::{Cache, CacheKey, MAX_CACHE_VALUE_BYTES};
use ports::ratelimit::{Rate, RateDecision, RateLimiter};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, FromRedisValue, IntoConnectionInfo, RedisError, TlsCertificates};
use tokio::sync::Mutex;

use crate::cache_iam::{IamAuth, IamUser, MAX_CONNECTION_AGE};

/// How long after finding the cache unreachable calls fail fast instead of trying it.
pub const RECONNECT_BACKOFF: Duration = Duration::from_secs(1);

/// The default bound on one cache call, connection included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether the URLs name one Redis node or seed nodes of a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RedisMode {
    /// One node (local development, tests).
    #[default]
    Single,
    /// Redis Cluster: the client discovers the slots from the seeds. ElastiCache
    /// Serverless exposes one endpoint but speaks cluster mode, so it needs this too.
    Cluster,
}

/// Where the cache lives and how to reach it.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisSettings {
    /// `redis://host:port` or `rediss://[user:password@]host:port` (TLS). One URL in
    /// [`RedisMode::Single`]; one or more seed nodes in [`RedisMode::Cluster`].
    pub urls: Vec<String>,
    pub mode: RedisMode,
    /// PEM of a private CA to trust for `rediss://` instead of the public web roots
    /// (tests; ElastiCache uses public roots).
    pub ca_pem: Option<Vec<u8>>,
    /// Bound on one call, connecting included.
    pub timeout: Duration,
    /// ElastiCache IAM authentication: the user to sign in as with a presigned token
    /// (see [`crate::cache_iam`]); `None` connects as the URL says.
    pub iam: Option<IamUser>,
}

impl RedisSettings {
    /// One plain node, e.g. `redis://127.0.0.1:6379`.
    pub fn single(url: impl Into<String>) -> Self {
        Self { urls: vec![url.into()], mode: RedisMode::Single, ca_pem: None, timeout: DEFAULT_TIMEOUT, iam: None }
    }

    /// A cluster reached through `seeds` (`rediss://…` for TLS).
    pub fn cluster(seeds: Vec<String>) -> Self {
        Self { urls: seeds, mode: RedisMode::Cluster, ca_pem: None, timeout: DEFAULT_TIMEOUT, iam: None }
    }

    /// Trusts the CA in `pem` for TLS connections.
    #[must_use]
    pub fn with_ca_pem(mut self, pem: Vec<u8>) -> Self {
        self.ca_pem = Some(pem);
        self
    }

    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// URLs may carry a password; logs must not.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://***@{}", &url[..scheme], &url[at + 1..]),
        _ => url.to_owned(),
    }
}

impl fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSettings")
            .field("urls", &self.urls.iter().map(|u| redact(u)).collect::<Vec<_>>())
            .field("mode", &self.mode)
            .field("ca_pem", &self.ca_pem.as_ref().map(|p| format!("{} bytes", p.len())))
            .field("timeout", &self.timeout)
            .field("iam", &self.iam)
            .finish()
    }
}

/// The configured client of either kind; it connects on demand.
#[derive(Clone)]
enum Client {
    Single(redis::Client),
    Cluster(ClusterClient),
}

/// A live connection of either kind. Both multiplex over their sockets, reconnect by
/// themselves and are cheap to clone, so one is shared by every call.
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

/// The hot cache over Redis.
pub struct RedisCache {
    client: Client,
    settings: RedisSettings,
    /// Set: each new connection signs in as this IAM user with a fresh token, and a
    /// connection is replaced after [`MAX_CONNECTION_AGE`].
    iam: Option<IamAuth>,
    timeout: Duration,
    /// A tokio mutex, held across a connection attempt, so concurrent first calls make
    /// one connection rather than one each. With the connection: when it was made.
    conn: Mutex<Option<(Conn, SystemTime)>>,
    /// When the cache was last found unreachable. A std mutex, never held across an
    /// await, so recording a failure can never wait behind a stuck connection attempt.
    failed_at: std::sync::Mutex<Option<Instant>>,
    /// Where we connect, for logs (passwords redacted).
    target: String,
}

impl fmt::Debug for RedisCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCache").field("target", &self.target).field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

fn redis_err(what: &str, e: &RedisError) -> Error {
    Error::unavailable(format!("redis {what}: {e}"))
}

/// rustls needs one process-wide crypto provider. The AWS SDK's rustls uses aws-lc-rs;
/// if another crate in the same binary also enables rustls's `ring` feature, rustls can
/// no longer pick one by itself and the Redis TLS handshake would panic, so install
/// aws-lc-rs unless someone already chose.
fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is then installed.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

impl RedisCache {
    /// Configures the cache; no connection is made until the first call.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for no URLs, more than one URL in single mode, or a URL or CA
    /// the Redis client refuses.
    pub fn new(settings: &RedisSettings) -> Result<Self> {
        if settings.urls.iter().any(|u| u.starts_with("rediss://")) || settings.ca_pem.is_some() {
            ensure_crypto_provider();
        }
        Ok(Self {
            client: build_client(settings, None)?,
            settings: settings.clone(),
            iam: None,
            timeout: settings.timeout,
            conn: Mutex::new(None),
            failed_at: std::sync::Mutex::new(None),
            target: settings.urls.iter().map(|u| redact(u)).collect::<Vec<_>>().join(","),
        })
    }

    /// This cache signing in as an ElastiCache IAM user.
    #[must_use]
    pub fn with_iam(mut self, auth: IamAuth) -> Self {
        self.iam = Some(auth);
        self
    }

    /// Checks that the cache answers (`PING`), for health endpoints.
    ///
    /// # Errors
    /// `UNAVAILABLE` when it does not, within the timeout.
    pub async fn ping(&self) -> Result<()> {
        let _: String = self.run("PING", redis::cmd("PING")).await?;
        Ok(())
    }

    /// The failure time slot; a panic elsewhere while holding it cannot corrupt an
    /// `Option<Instant>`, so a poisoned lock is simply taken over.
    fn failed_at(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.failed_at.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn connect(&self) -> Result<Conn> {
        if self.failed_at().is_some_and(|at| at.elapsed() < RECONNECT_BACKOFF) {
            return Err(Error::unavailable(format!("redis {}: recently unreachable", self.target)));
        }
        let mut slot = self.conn.lock().await;
        let now = self.iam.as_ref().map_or_else(SystemTime::now, IamAuth::now);
        if let Some((conn, since)) = slot.as_ref() {
            let stale = self.iam.is_some() && now.duration_since(*since).unwrap_or_default() >= MAX_CONNECTION_AGE;
            if !stale {
                return Ok(conn.clone());
            }
        }
        let client = match &self.iam {
            None => self.client.clone(),
            Some(auth) => {
                let token = auth.token().await?;
                build_client(&self.settings, Some((auth.user.user.clone(), token)))?
            }
        };
        let conn = match &client {
            Client::Single(c) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(self.timeout)
                    .set_response_timeout(self.timeout)
                    // No retry loop inside the manager: its backoff starts near a second,
                    // which every call would wait out while the cache is down. Our own
                    // fail-fast window spaces the attempts instead.
                    .set_number_of_retries(0);
                ConnectionManager::new_with_config(c.clone(), config).await.map(Conn::Single)
            }
            Client::Cluster(c) => c.get_async_connection().await.map(Conn::Cluster),
        };
        match conn {
            Ok(conn) => {
                *slot = Some((conn.clone(), now));
                *self.failed_at() = None;
                Ok(conn)
            }
            Err(e) => {
                self.unreachable();
                tracing::warn!(target = %self.target, error = %e, "redis connection failed");
                Err(redis_err("connect", &e))
            }
        }
    }

    /// Opens the fail-fast window after a call found the cache unreachable, and drops
    /// the connection so the first call after the window connects afresh. (Both kinds
    /// would reconnect by themselves, but a `ConnectionManager` remembers its last failed
    /// reconnect and hands it to the next caller, costing a second window.) If the slot
    /// is locked, a connection attempt is under way and will replace it anyway.
    fn unreachable(&self) {
        *self.failed_at() = Some(Instant::now());
        if let Ok(mut slot) = self.conn.try_lock() {
            *slot = None;
        }
    }

    /// Runs one command within the timeout, connecting first if needed.
    async fn run<T: FromRedisValue>(&self, what: &str, cmd: Cmd) -> Result<T> {
        let call = async {
            let conn = self.connect().await?;
            let result = match conn {
                Conn::Single(mut c) => cmd.query_async(&mut c).await,
                Conn::Cluster(mut c) => cmd.query_async(&mut c).await,
            };
            match result {
                Ok(v) => Ok(v),
                Err(e) => {
                    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout() {
                        self.unreachable();
                    }
                    Err(redis_err(what, &e))
                }
            }
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result,
            Err(_) => {
                self.unreachable();
                Err(Error::unavailable(format!("redis {what} timed out after {:?}", self.timeout)))
            }
        }
    }
}

/// The client for `settings`, signing in as `auth` (user, password) when given.
fn build_client(settings: &RedisSettings, auth: Option<(String, String)>) -> Result<Client> {
    let invalid = |e: RedisError| Error::invalid_field("redis", format!("bad cache configuration: {e}"));
    let certs = || TlsCertificates { client_tls: None, root_cert: settings.ca_pem.clone() };
    Ok(match (settings.mode, settings.urls.as_slice()) {
        (_, []) => return Err(Error::invalid_field("redis", "no URL configured")),
        (RedisMode::Single, [url]) => {
            let mut info = url.as_str().into_connection_info().map_err(invalid)?;
            if let Some((user, password)) = auth {
                info.redis.username = Some(user);
                info.redis.password = Some(password);
            }
            let client = match &settings.ca_pem {
                Some(_) => redis::Client::build_with_tls(info, certs()),
                None => redis::Client::open(info),
            };
            Client::Single(client.map_err(invalid)?)
        }
        (RedisMode::Single, _) => return Err(Error::invalid_field("redis", "single mode takes exactly one URL")),
        (RedisMode::Cluster, seeds) => {
            let mut builder = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
                .connection_timeout(settings.timeout)
                .response_timeout(settings.timeout)
                // Redirections (MOVED/ASK) during resharding need a retry or two;
                // more would only outlast our own timeout.
                .retries(2);
            if settings.ca_pem.is_some() {
                builder = builder.certs(certs());
            }
            if let Some((user, password)) = auth {
                builder = builder.username(user).password(password);
            }
            Client::Cluster(builder.build().map_err(invalid)?)
        }
    })
}

/// The Redis Cluster hash tag of a key: the text between the first `{` and the next `}`
/// when non-empty, else the whole key. Keys with one tag hash to one slot.
fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{')
        && let Some(len) = key[open + 1..].find('}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// Groups keys so each group lies in one cluster slot (a multi-key `DEL` across slots
/// fails with CROSSSLOT).
fn by_slot(keys: &[CacheKey]) -> BTreeMap<&str, Vec<&str>> {
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for k in keys {
        groups.entry(hash_tag(k.as_str())).or_default().push(k.as_str());
    }
    groups
}

/// `SET … PX` takes whole milliseconds; round up so a sub-millisecond TTL is not zero.
fn ttl_millis(ttl: Duration) -> u64 {
    let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    if Duration::from_millis(ms) < ttl { ms.saturating_add(1) } else { ms }
}

#[async_trait]
impl Cache for RedisCache {
    async fn get(&self, key: &CacheKey) -> Result<Option<Vec<u8>>> {
        let got: Option<Vec<u8>> = self.run("GET", redis::cmd("GET").arg(key.as_str()).clone()).await?;
        metrics::cache_lookup(got.is_some());
        Ok(got)
    }

    async fn set(&self, key: &CacheKey, value: &[u8], ttl: Duration) -> Result<()> {
        if value.len() > MAX_CACHE_VALUE_BYTES {
            return Err(Error::invalid_field("value", format!("must be at most {MAX_CACHE_VALUE_BYTES} bytes")));
        }
        if ttl.is_zero() {
            return Err(Error::invalid_field("ttl", "must be positive"));
        }
        let mut cmd = redis::cmd("SET");
        cmd.arg(key.as_str()).arg(value).arg("PX").arg(ttl_millis(ttl));
        let _: () = self.run("SET", cmd).await?;
        Ok(())
    }

    async fn evict(&self, keys: &[CacheKey]) -> Result<()> {
        for group in by_slot(keys).into_values() {
            let mut cmd = redis::cmd("DEL");
            cmd.arg(group);
            let _: u64 = self.run("DEL", cmd).await?;
        }
        Ok(())
    }
}

/// Readiness of the AWS backend beyond what every backend checks: the cache (the Spine
/// Cache and the rate limiter) answers `PING`. A cache that is down slows reads and lets
/// requests through unlimited, so it fails the check: the operator should know.
pub struct CacheReadiness(pub std::sync::Arc<RedisCache>);

#[async_trait]
impl ports::health::Readiness for CacheReadiness {
    async fn check(&self) -> Vec<ports::health::Check> {
        let pong: Result<String> = self.0.run("PING", redis::cmd("PING")).await;
        vec![match pong {
            Ok(_) => ports::health::Check::ok("cache"),
            Err(e) => ports::health::Check::failed(
                "cache",
                format!("the cache does not answer: {}", e.internal.as_deref().unwrap_or(&e.message)),
            ),
        }]
    }
}

/// The token bucket as one atomic script: refill by elapsed time (Redis's own clock, so
/// every Lambda agrees), take a token if there is one (only look when `ARGV[3]` is 0),
/// and expire idle buckets once they would be full again. Returns
/// `{allowed, tokens_left_x1000, wait_ms}`.
const TOKEN_BUCKET: &str = r"
local cap = tonumber(ARGV[1])
local per_ms = tonumber(ARGV[2]) / 60000
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(b[1]) or cap
local at = tonumber(b[2]) or now
if now > at then tokens = math.min(cap, tokens + (now - at) * per_ms) end
local allowed = 0
local wait = 0
if tokens >= 1 then
  if ARGV[3] == '1' then tokens = tokens - 1 end
  allowed = 1
else
  wait = math.ceil((1 - tokens) / per_ms)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(cap / per_ms) + 1000)
return {allowed, math.floor(tokens * 1000), wait}
";

#[async_trait]
impl RateLimiter for RedisCache {
    async fn acquire(&self, key: &str, rate: Rate) -> Result<RateDecision> {
        self.bucket(key, rate, true).await
    }

    async fn peek(&self, key: &str, rate: Rate) -> Result<RateDecision> {
        self.bucket(key, rate, false).await
    }
}

impl RedisCache {
    async fn bucket(&self, key: &str, rate: Rate, take: bool) -> Result<RateDecision> {
        // The key is its own hash tag: one bucket, one slot.
        let redis_key = format!("ratelimit:{{{key}}}");
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(TOKEN_BUCKET).arg(1).arg(&redis_key).arg(rate.capacity.max(1)).arg(rate.per_minute.max(1)).arg(if take {
            "1"
        } else {
            "0"
        });
        let (allowed, left_milli, wait_ms): (i64, i64, i64) = self.run("rate limit", cmd).await?;
        let remaining = u32::try_from(left_milli / 1000).unwrap_or(0);
        let retry_after_secs = u64::try_from(wait_ms).unwrap_or(0).div_ceil(1000).max(1);
        Ok(if allowed == 1 {
            RateDecision { allowed: true, remaining, retry_after_secs: 0 }
        } else {
            RateDecision { allowed: false, remaining: 0, retry_after_secs }
        })
    }
}

#[cfg(test)]
mod tests {
    use domain::TenantId;

    use super::*;

    #[test]
    fn keys_group_by_tenant_slot() {
        let a = TenantId::new("acme").unwrap();
        let b = TenantId::new("beta").unwrap();
        let keys = [
            CacheKey::tenant(&a, "entity", "1"),
            CacheKey::tenant(&b, "entity", "1"),
            CacheKey::tenant(&a, "entity", "{2}"),
            CacheKey::global("caps", "x"),
        ];
        let groups = by_slot(&keys);
        assert_eq!(groups.len(), 3);
        assert_eq!(groups["acme"], ["c:{acme}:entity:1", "c:{acme}:entity:{2}"]);
        assert_eq!(groups["beta"], ["c:{beta}:entity:1"]);
        assert_eq!(groups["_global"], ["c:{_global}:caps:x"]);
    }

    #[test]
    fn hash_tags_follow_redis_rules() {
        assert_eq!(hash_tag("c:{acme}:x"), "acme");
        assert_eq!(hash_tag("plain"), "plain");
        assert_eq!(hash_tag("a{}b{c}"), "a{}b{c}");
        assert_eq!(hash_tag("a{b"), "a{b");
    }

    #[test]
    fn ttls_round_up_to_milliseconds() {
        assert_eq!(ttl_millis(Duration::from_micros(1)), 1);
        assert_eq!(ttl_millis(Duration::from_millis(300)), 300);
        assert_eq!(ttl_millis(Duration::from_micros(1500)), 2);
    }

    #[test]
    fn settings_never_print_passwords() {
        let s = RedisSettings::cluster(vec!["rediss://user:hunter2@cache.example:6379".into()]).with_ca_pem(b"pem".to_vec());
        let printed = format!("{s:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("cache.example:6379"));
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }

    #[test]
    fn configuration_errors_are_invalid_requests() {
        let none = RedisSettings { urls: vec![], ..RedisSettings::single("redis://x") };
        assert!(RedisCache::new(&none).is_err());
        let two = RedisSettings { urls: vec!["redis://a".into(), "redis://b".into()], ..RedisSettings::single("redis://x") };
        assert!(RedisCache::new(&two).is_err());
        assert!(RedisCache::new(&RedisSettings::single("not a url")).is_err());
        assert!(RedisCache::new(&RedisSettings::single("redis://127.0.0.1:1")).is_ok(), "no connection is made");
    }
}
