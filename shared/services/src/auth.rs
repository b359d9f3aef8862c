//! Bearer credentials into a caller: API keys (SPEC §3.3 "API keys") and OAuth access
//! tokens (verified by [`crate::oauth::tokens`], the one token library).
//!
//! A key reads `ctn_{tenant}.{key_id}.{secret}`: the tenant and key id locate the record
//! with one keyed read (so the tenant leads the lookup, as everywhere), and the 256-bit
//! secret is compared by its SHA-256 digest in constant time. The secret is shown once
//! and never stored.
//!
//! The same [`Authenticator`] serves the local gateway middleware and the API Gateway
//! Lambda authorizer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use domain::principal::{ApiKeyRecord, CallerContext};
use domain::tenant::Tenant;
use domain::{Error, Id, Result, TenantId};

use crate::oauth::tokens::TokenService;
use ports::oauth::OAuthStore;
use ports::records::{PrincipalStore, TenantStore};
use ports::{Backend, CacheKey};
use subtle::ConstantTimeEq;

/// Tenant configuration is cached for 5 minutes (SPEC §4.4).
pub const TENANT_CONFIG_TTL: Duration = Duration::from_secs(300);
const KEY_PREFIX: &str = "ctn_";
/// Longest bearer value we will even parse.
const MAX_BEARER_LEN: usize = 512;

/// A freshly issued key: the only time its secret exists outside the caller's hands.
#[derive(Debug, Clone)]
pub struct IssuedKey {
    pub key_id: Id,
    pub tenant: TenantId,
    /// The whole bearer value, `ctn_…`.
    pub token: String,
}

pub(crate) fn format_key(tenant: &TenantId, key_id: &Id, secret: &str) -> String {
    format!("{KEY_PREFIX}{tenant}.{key_id}.{secret}")
}

/// Splits a bearer value into tenant, key id and secret, or `None` if it is not ours.
pub fn parse_key(raw: &str) -> Option<(TenantId, Id, &str)> {
    let rest = raw.strip_prefix(KEY_PREFIX)?;
    let mut parts = rest.splitn(3, '.');
    let tenant = TenantId::new(parts.next()?).ok()?;
    let key_id = Id::new(parts.next()?).ok()?;
    let secret = parts.next()?;
    if secret.len() < 32 || !secret.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    Some((tenant, key_id, secret))
}

/// Where a tenant's configuration is cached.
pub(crate) fn tenant_config_key(tenant: &TenantId) -> CacheKey {
    CacheKey::tenant(tenant, "tenant", "config")
}

/// A page people sign in to in a browser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Page {
    /// The approvals console: deciding proposals and gates.
    Console,
    /// The dashboard: reading the workspace.
    Dashboard,
}

impl Page {
    /// The prefix of its sessions' `via` claim (a session of one page is never taken by
    /// the other).
    pub fn via_prefix(self) -> &'static str {
        match self {
            Self::Console => "",
            Self::Dashboard => "dash:",
        }
    }

    /// Whether a user of `role` may open it.
    pub fn role_may(self, role: domain::principal::Role) -> bool {
        match self {
            Self::Console => role.allowed_scopes().contains(domain::principal::Scope::ApprovalsDecide),
            Self::Dashboard => matches!(role, domain::principal::Role::Owner | domain::principal::Role::Admin),
        }
    }

    /// Whether a key with `scopes` may open it.
    pub fn key_may(self, scopes: &domain::principal::Scopes) -> bool {
        match self {
            Self::Console => scopes.contains(domain::principal::Scope::ApprovalsDecide),
            Self::Dashboard => may_open_dashboard(scopes),
        }
    }
}

/// The sessions one sign-in opened: one per page the credential may open.
#[derive(Debug, Default)]
pub struct PageSessions {
    pub console: Option<String>,
    pub dashboard: Option<String>,
}

impl PageSessions {
    pub fn set(&mut self, page: Page, token: String) {
        match page {
            Page::Console => self.console = Some(token),
            Page::Dashboard => self.dashboard = Some(token),
        }
    }
}

/// Where signed-out page sessions are remembered until they would have expired.
const SIGNED_OUT: &str = "continuity:page-session";

#[derive(Clone)]
pub struct Authenticator {
    backend: Backend,
    tokens: TokenService,
    keys: KeyCache,
    decoded: Decoded,
}

/// Each tenant's configuration as last decoded, with the cached bytes it came from:
/// reused only while the cache answers exactly those bytes.
#[derive(Clone, Default)]
struct Decoded(Arc<std::sync::Mutex<DecodedTenants>>);

/// Tenant → the cached bytes last decoded, and what they decoded to.
type DecodedTenants = HashMap<TenantId, (Vec<u8>, Tenant)>;

impl Decoded {
    fn get(&self, tenant: &TenantId, bytes: &[u8]) -> Option<Tenant> {
        let m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        m.get(tenant).filter(|(b, _)| b.as_slice() == bytes).map(|(_, t)| t.clone())
    }

    fn put(&self, t: &Tenant, bytes: Vec<u8>) {
        let mut m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if m.len() >= KEY_CACHE_MAX {
            m.clear();
        }
        m.insert(t.id.clone(), (bytes, t.clone()));
    }
}

/// API key records read earlier, each with the credentials' change signal's value read
/// before it ([`ports::records::Records::credential_epoch`]): used while the signal still
/// has that value, so a revocation by any process holds for the next request. Empty on a
/// backend without the signal (AWS).
#[derive(Clone, Default)]
struct KeyCache(Arc<std::sync::Mutex<KeyRecords>>);

/// `(tenant, key id)` → the signal's value read before the record, and the record.
type KeyRecords = HashMap<(TenantId, Id), (u64, ApiKeyRecord)>;

/// Most key records kept; past it the cache starts again empty.
const KEY_CACHE_MAX: usize = 10_000;

impl KeyCache {
    fn get(&self, tenant: &TenantId, key_id: &Id, epoch: u64) -> Option<ApiKeyRecord> {
        let keys = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        keys.get(&(tenant.clone(), key_id.clone())).filter(|(e, _)| *e == epoch).map(|(_, r)| r.clone())
    }

    fn put(&self, tenant: &TenantId, key_id: &Id, epoch: u64, record: &ApiKeyRecord) {
        let mut keys = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if keys.len() >= KEY_CACHE_MAX {
            keys.clear();
        }
        keys.insert((tenant.clone(), key_id.clone()), (epoch, record.clone()));
    }
}

impl Authenticator {
    pub(crate) fn new(backend: Backend, tokens: TokenService) -> Self {
        Self { backend, tokens, keys: KeyCache::default(), decoded: Decoded::default() }
    }

    /// An API key's record: from memory while the credentials' change signal holds the
    /// value it was read under, else from the store.
    async fn key_record(&self, tenant: &TenantId, key_id: &Id) -> Result<Option<ApiKeyRecord>> {
        // The signal is read before the record: a revocation committed after this read
        // changes the value the next request sees.
        let epoch = self.backend.records.credential_epoch();
        if let Some(e) = epoch
            && let Some(r) = self.keys.get(tenant, key_id, e)
        {
            return Ok(Some(r));
        }
        let record = self.backend.records.get_api_key(tenant, key_id).await?;
        if let (Some(e), Some(r)) = (epoch, &record) {
            self.keys.put(tenant, key_id, e, r);
        }
        Ok(record)
    }

    /// Verifies an `Authorization` header value (`Bearer …`) and returns the caller.
    ///
    /// Every failure is the same `UNAUTHENTICATED` so a prober learns nothing about
    /// which tenants or key ids exist.
    ///
    /// # Errors
    /// `UNAUTHENTICATED` for a missing, malformed, unknown, revoked or wrong key, or a
    /// tenant that no longer exists; `UNAVAILABLE` when the store cannot be reached.
    /// `base` is the API's base URL as the client used it: the issuer and audience an
    /// access token must name.
    pub async fn authenticate_header(&self, header: Option<&str>, base: &str) -> Result<CallerContext> {
        let header = header.ok_or_else(|| Error::unauthenticated("missing bearer token"))?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .ok_or_else(|| Error::unauthenticated("the Authorization header must be 'Bearer <token>'"))?
            .trim();
        self.authenticate_token(token, base).await
    }

    /// Verifies a bare bearer token.
    ///
    /// # Errors
    /// As [`Self::authenticate_header`].
    pub async fn authenticate_token(&self, token: &str, base: &str) -> Result<CallerContext> {
        let invalid = || Error::unauthenticated("invalid, expired or revoked credentials");
        if !token.starts_with(KEY_PREFIX) {
            return self.authenticate_jwt(token, base).await;
        }
        if token.len() > MAX_BEARER_LEN {
            return Err(invalid());
        }
        let (tenant, key_id, secret) = parse_key(token).ok_or_else(invalid)?;
        let record: ApiKeyRecord = self.key_record(&tenant, &key_id).await?.ok_or_else(invalid)?;
        let presented = crate::sha256_hex(secret);
        let matches: bool = presented.as_bytes().ct_eq(record.secret_sha256.as_bytes()).into();
        if !matches || record.revoked_at.is_some() {
            return Err(invalid());
        }
        self.key_caller(tenant, record, format!("api_key:{key_id}")).await
    }

    /// The caller an API key stands for; the tenant must still exist, its plan read
    /// fresh (cached 5 min).
    async fn key_caller(&self, tenant: TenantId, record: ApiKeyRecord, credential: String) -> Result<CallerContext> {
        let tenant_cfg = self
            .tenant_config(&tenant)
            .await?
            .ok_or_else(|| Error::unauthenticated("invalid, expired or revoked credentials"))?;
        Ok(CallerContext {
            tenant,
            principal: record.principal,
            scopes: record.scopes,
            plan: tenant_cfg.plan,
            teams: record.teams,
            projects: record.projects,
            credential,
            client: record.name.clone(),
            toolsets: record.toolsets,
        })
    }

    /// Signs a browser in with an API key on `page` (refused when the key may not open
    /// it), and on the other page too when the key may: one sign-in, a session per page,
    /// each with that page's own scopes.
    ///
    /// # Errors
    /// As [`Self::console_login`] / [`Self::dashboard_login`].
    pub async fn page_login_key(&self, page: Page, key: &str, base: &str) -> Result<PageSessions> {
        let (first, caller) = match page {
            Page::Console => self.console_login(key, base).await?,
            Page::Dashboard => self.dashboard_login(key, base).await?,
        };
        let mut sessions = PageSessions::default();
        sessions.set(page, first);
        let other = if page == Page::Console { Page::Dashboard } else { Page::Console };
        if other.key_may(&caller.scopes)
            && let Some((_, key_id, _)) = parse_key(key.trim())
        {
            let via = format!("{}key:{key_id}", other.via_prefix());
            let (token, _) = self.tokens.issue_console(base, &caller.tenant, &caller.principal, &via).await?;
            sessions.set(other, token);
        }
        Ok(sessions)
    }

    /// Ends page sessions for good (sign-out): each is remembered as signed out until it
    /// would have expired, so a copied cookie opens nothing afterwards.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the store cannot be written.
    pub async fn end_page_sessions(&self, tokens: &[String], base: &str) -> Result<()> {
        for token in tokens {
            // An invalid or expired token needs no ending.
            if let Ok(c) = self.tokens.verify_console(token, base).await {
                let expires = domain::Timestamp(c.exp.saturating_mul(1000));
                self.backend.records.claim_jti(SIGNED_OUT, &crate::sha256_hex(&c.csrf), expires).await?;
            }
        }
        Ok(())
    }

    /// Opens an approvals-console session (SPEC §6.4) with an approver key: an API key
    /// holding `approvals:decide`. Returns the signed session and the approver.
    ///
    /// # Errors
    /// `UNAUTHENTICATED` for anything but a valid, unrevoked API key; `FORBIDDEN` for a
    /// key without `approvals:decide`; `UNAVAILABLE`.
    pub async fn console_login(&self, key: &str, base: &str) -> Result<(String, CallerContext)> {
        let key = key.trim();
        if !key.starts_with(KEY_PREFIX) {
            return Err(Error::unauthenticated("sign in with an approver key (ctn_…)"));
        }
        let caller = self.authenticate_token(key, base).await?;
        caller.scopes.require(domain::principal::Scope::ApprovalsDecide)?;
        let (_, key_id, _) = parse_key(key).ok_or_else(|| Error::unauthenticated("invalid, expired or revoked credentials"))?;
        let (token, _) = self.tokens.issue_console(base, &caller.tenant, &caller.principal, &format!("key:{key_id}")).await?;
        Ok((token, caller))
    }

    /// The approver behind a console session and the session's CSRF secret. The key it
    /// was opened with is read again: revoked, or without `approvals:decide`, the
    /// session is over.
    ///
    /// # Errors
    /// `UNAUTHENTICATED` for an invalid or expired session or a revoked key; `UNAVAILABLE`.
    pub async fn console_session(&self, token: &str, base: &str) -> Result<(CallerContext, String)> {
        let page = PageSession {
            prefix: "",
            credential: "console",
            key_may: |scopes| scopes.contains(domain::principal::Scope::ApprovalsDecide),
            role_may: |role| role.allowed_scopes().contains(domain::principal::Scope::ApprovalsDecide),
            user_scopes: |_| domain::principal::Scopes([domain::principal::Scope::ApprovalsDecide].into_iter().collect()),
        };
        self.page_session(&page, token, base).await
    }

    /// The caller behind a console or dashboard session token (`page` says which), the
    /// key or user it was opened with read again.
    async fn page_session(&self, page: &PageSession, token: &str, base: &str) -> Result<(CallerContext, String)> {
        let invalid = || Error::unauthenticated("the session has ended; sign in again");
        let c = self
            .tokens
            .verify_console(token, base)
            .await
            .map_err(|e| if e.code == domain::ErrorCode::Unauthenticated { invalid() } else { e })?;
        if self.backend.records.jti_claimed(SIGNED_OUT, &crate::sha256_hex(&c.csrf)).await? {
            return Err(invalid());
        }
        let tenant = TenantId::new(c.tid).map_err(|_| invalid())?;
        let via = c.via.strip_prefix(page.prefix).ok_or_else(invalid)?;
        let caller = if let Some(key_id) = via.strip_prefix("key:") {
            let key_id = Id::new(key_id).map_err(|_| invalid())?;
            let record: ApiKeyRecord = self.key_record(&tenant, &key_id).await?.ok_or_else(invalid)?;
            if record.revoked_at.is_some() || record.principal.as_str() != c.sub || !(page.key_may)(&record.scopes) {
                return Err(invalid());
            }
            self.key_caller(tenant, record, format!("{}:key:{key_id}", page.credential)).await
        } else if let Some(email) = via.strip_prefix("user:") {
            // A user: still enabled, still this principal, still a role the page takes.
            let login = self.backend.records.get_login(&tenant, email).await?.ok_or_else(invalid)?;
            let principal = self.backend.records.get_principal(&tenant, &login.principal).await?.ok_or_else(invalid)?;
            if login.disabled || login.principal.as_str() != c.sub || !(page.role_may)(principal.role) {
                return Err(invalid());
            }
            let plan = self.tenant_config(&tenant).await?.ok_or_else(invalid)?.plan;
            Ok(CallerContext {
                tenant,
                principal: login.principal,
                scopes: (page.user_scopes)(principal.role),
                plan,
                teams: principal.teams.clone(),
                projects: principal.projects.clone(),
                credential: format!("{}:user:{}", page.credential, principal.id),
                client: None,
                toolsets: domain::principal::Toolsets::default(),
            })
        } else {
            return Err(invalid());
        }
        .map_err(|e| if e.code == domain::ErrorCode::Unauthenticated { invalid() } else { e })?;
        Ok((caller, c.csrf))
    }

    /// Opens a dashboard session with an API key holding `admin` or `tenant:read`.
    ///
    /// # Errors
    /// `UNAUTHENTICATED` for anything but a valid, unrevoked API key; `FORBIDDEN` for a
    /// key with neither scope; `UNAVAILABLE`.
    pub async fn dashboard_login(&self, key: &str, base: &str) -> Result<(String, CallerContext)> {
        let key = key.trim();
        if !key.starts_with(KEY_PREFIX) {
            return Err(Error::unauthenticated("sign in with an API key (ctn_…)"));
        }
        let caller = self.authenticate_token(key, base).await?;
        if !may_open_dashboard(&caller.scopes) {
            return Err(Error::forbidden("the dashboard needs a key with the tenant:read or admin scope"));
        }
        let (_, key_id, _) = parse_key(key).ok_or_else(|| Error::unauthenticated("invalid, expired or revoked credentials"))?;
        let (token, _) =
            self.tokens.issue_console(base, &caller.tenant, &caller.principal, &format!("dash:key:{key_id}")).await?;
        Ok((token, caller))
    }

    /// The caller behind a dashboard session and its CSRF secret. The key, or the user
    /// (enabled, owner or admin), is read again on every request. An approvals-console
    /// session is not a dashboard session, nor the reverse.
    ///
    /// # Errors
    /// `UNAUTHENTICATED` for an invalid or expired session, a revoked key, a disabled user
    /// or a lowered role; `UNAVAILABLE`.
    pub async fn dashboard_session(&self, token: &str, base: &str) -> Result<(CallerContext, String)> {
        let page = PageSession {
            prefix: "dash:",
            credential: "dashboard",
            key_may: may_open_dashboard,
            role_may: |role| matches!(role, domain::principal::Role::Owner | domain::principal::Role::Admin),
            // What the role may hold, but deciding approvals (that is the console's).
            user_scopes: |role| {
                domain::principal::Scopes(
                    role.allowed_scopes().0.into_iter().filter(|s| *s != domain::principal::Scope::ApprovalsDecide).collect(),
                )
            },
        };
        self.page_session(&page, token, base).await
    }

    async fn authenticate_jwt(&self, token: &str, base: &str) -> Result<CallerContext> {
        let v = self.tokens.verify(token, base).await?;
        // The tenant must still exist; its plan is read fresh (cached 5 min), never from the token.
        let tenant_cfg = self
            .tenant_config(&v.tenant)
            .await?
            .ok_or_else(|| Error::unauthenticated("invalid, expired or revoked credentials"))?;
        Ok(CallerContext {
            tenant: v.tenant,
            principal: v.principal,
            scopes: v.scopes,
            plan: tenant_cfg.plan,
            teams: v.teams,
            projects: v.projects,
            credential: format!("jwt:{}:{}", v.client_id, v.jti),
            client: None,
            toolsets: v.toolsets,
        })
    }

    /// The tenant's request budget (SPEC §3.5): its `rate_limit_per_minute`, else its
    /// plan's default, one token bucket per tenant. A limiter that cannot be reached lets
    /// the request through (logged): losing rate limiting for a moment is better than
    /// losing the API.
    ///
    /// # Errors
    /// `RATE_LIMITED` with `Retry-After` when the tenant's budget is spent.
    pub async fn rate_limit(&self, caller: &CallerContext) -> Result<()> {
        let per_minute = match self.tenant_config(&caller.tenant).await {
            Ok(Some(t)) => t.effective_rate_limit(),
            _ => return Ok(()),
        };
        let key = format!("tenant:{}", caller.tenant);
        match self.backend.limiter.acquire(&key, ports::Rate::per_minute(per_minute)).await {
            Ok(d) if d.allowed => Ok(()),
            Ok(d) => Err(Error::new(
                domain::ErrorCode::RateLimited,
                format!("the workspace's limit of {per_minute} requests a minute is reached"),
            )
            .with_retry_after(d.retry_after_secs)),
            Err(e) => {
                tracing::warn!(error = %e.for_operator(), "rate limiter unavailable; request allowed");
                Ok(())
            }
        }
    }

    /// A request from `source` (a client address, as the edge keys it) to a route anyone
    /// may call without a credential, counted in that route's bucket of `per_minute`.
    /// A limiter that cannot be reached lets it through (logged).
    ///
    /// # Errors
    /// `RATE_LIMITED` with `Retry-After` when the address's budget for the route is spent.
    pub async fn limit_source(&self, route: &str, per_minute: u32, source: &str) -> Result<()> {
        let key = format!("source:{route}:{source}");
        match self.backend.limiter.acquire(&key, ports::Rate::per_minute(per_minute)).await {
            Ok(d) if d.allowed => Ok(()),
            Ok(d) => Err(Error::new(
                domain::ErrorCode::RateLimited,
                format!("too many requests from this address; retry in {} s", d.retry_after_secs),
            )
            .with_retry_after(d.retry_after_secs)),
            Err(e) => {
                tracing::warn!(error = %e.for_operator(), route, "per-address limiter unavailable; request allowed");
                Ok(())
            }
        }
    }

    /// Drops the cached configuration of `tenant` (it changed elsewhere).
    pub async fn forget_tenant_config(&self, tenant: &TenantId) {
        if let Err(e) = self.backend.cache.evict(&[tenant_config_key(tenant)]).await {
            tracing::warn!(tenant = %tenant, error = %e, "tenant config not evicted; it expires by TTL");
        }
    }

    /// The tenant's configuration, through the 5-minute cache. A cache failure is a miss.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the store cannot be reached.
    pub async fn tenant_config(&self, tenant: &TenantId) -> Result<Option<Tenant>> {
        let key = tenant_config_key(tenant);
        if let Ok(Some(bytes)) = self.backend.cache.get(&key).await {
            // The cache stays the truth (evictions, another process's changes); what is
            // kept here only saves decoding the same bytes again, several times a request.
            if let Some(t) = self.decoded.get(tenant, &bytes) {
                return Ok(Some(t));
            }
            if let Ok(t) = serde_json::from_slice::<Tenant>(&bytes) {
                self.decoded.put(&t, bytes);
                return Ok(Some(t));
            }
        }
        let found = self.backend.records.get_tenant(tenant).await?;
        if let Some(t) = &found
            && let Ok(bytes) = serde_json::to_vec(t)
            && let Err(e) = self.backend.cache.set(&key, &bytes, TENANT_CONFIG_TTL).await
        {
            tracing::warn!(tenant = %tenant, error = %e, "tenant config not cached");
        }
        Ok(found)
    }
}

/// Which page a session token opens and who may keep it open.
struct PageSession {
    /// What the token's `via` starts with: `` (console), `dash:` (dashboard).
    prefix: &'static str,
    /// The caller's credential label: `console`, `dashboard`.
    credential: &'static str,
    key_may: fn(&domain::principal::Scopes) -> bool,
    role_may: fn(domain::principal::Role) -> bool,
    user_scopes: fn(domain::principal::Role) -> domain::principal::Scopes,
}

/// Whether a key's scopes open the dashboard: `admin` or `tenant:read`.
fn may_open_dashboard(scopes: &domain::principal::Scopes) -> bool {
    scopes.contains(domain::principal::Scope::Admin) || scopes.contains(domain::principal::Scope::TenantRead)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_strictly() {
        let t = TenantId::new("acme").unwrap();
        let k = Id::new("k1").unwrap();
        let secret = "a".repeat(43);
        let token = format_key(&t, &k, &secret);
        let (pt, pk, ps) = parse_key(&token).unwrap();
        assert_eq!((pt, pk, ps), (t, k, secret.as_str()));
        assert!(parse_key("ctn_acme.k1.short").is_none());
        assert!(parse_key("xyz_acme.k1.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").is_none());
        assert!(parse_key("ctn_ACME.k1.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").is_none());
        assert!(parse_key("ctn_acme.k1.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa%aaa").is_none());
    }
}
