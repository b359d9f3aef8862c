//! The one token library (SPEC §3.3): every access token is issued and verified here —
//! by the local gateway middleware and by the API Gateway authorizer alike.
//!
//! Issued: RS256 JWTs, `typ: at+jwt` (RFC 9068), `kid` in the header, one hour.
//! Verified: algorithm pinned to RS256 before anything else; the key chosen only by our
//! own `kid` lookup in our own key store (never `jku`, `x5u` or an embedded `jwk`);
//! `exp`, `iss`, `aud`, `sub` required; leeway 5 s; `nbf` checked; `typ` must be
//! `at+jwt`, so no other JWT we might sign could pass as an access token.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use domain::oauth::{ACCESS_TOKEN_TTL_SECS, Grant};
use domain::principal::{Scopes, Toolsets};
use domain::{Error, Id, Result, TenantId};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use ports::Backend;
use serde::{Deserialize, Serialize};

/// Clock skew tolerated on `exp`, `nbf` and `iat`.
pub const LEEWAY_SECS: u64 = 5;
/// Longest token we even parse.
pub const MAX_TOKEN_LEN: usize = 8 * 1024;
const TYP: &str = "at+jwt";
/// Our keys are re-read at most this often, and at most every [`UNKNOWN_KID_BACKOFF`]
/// when a token names a key we do not know (after a rotation elsewhere).
const KEYS_TTL: Duration = Duration::from_secs(300);
const UNKNOWN_KID_BACKOFF: Duration = Duration::from_secs(30);

/// The issuer identifier for a base URL: a root URL gets its trailing slash, so that it
/// compares equal to what URL parsers render (both official MCP SDKs do so when they
/// check RFC 9207 `iss`); a URL with a path (an API Gateway stage) is kept as is.
pub fn issuer_of(base: &str) -> String {
    let base = base.trim_end_matches('/');
    let after_scheme = base.split_once("://").map_or(base, |(_, rest)| rest);
    if after_scheme.contains('/') { base.to_owned() } else { format!("{base}/") }
}

/// The MCP endpoint: the protected resource and the default token audience.
pub fn mcp_resource_of(base: &str) -> String {
    format!("{}/mcp", base.trim_end_matches('/'))
}

/// Access-token claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessClaims {
    pub iss: String,
    pub sub: String,
    pub aud: String,
    pub exp: i64,
    pub iat: i64,
    pub nbf: i64,
    pub jti: String,
    pub client_id: String,
    pub scope: String,
    /// The tenant.
    pub tid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub teams: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<String>,
    /// The MCP toolsets offered beside `canonical` (the client's, when the token was
    /// issued); absent means `canonical` alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolsets: Vec<String>,
}

/// The approvals console's session (SPEC §6.4): a JWT of its own type
/// (`console+jwt`, so it can never pass as an access token, nor one as it), audience
/// `{base}/approvals`, eight hours. It names how it was opened — an approver key, or a
/// user's sign-in — which is checked again on every request (a revoked key, a disabled
/// user or a changed role ends the session), and carries the session's CSRF secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleClaims {
    pub iss: String,
    pub sub: String,
    pub aud: String,
    pub exp: i64,
    pub iat: i64,
    pub nbf: i64,
    pub tid: String,
    /// `key:{key id}` or `user:{e-mail}`.
    pub via: String,
    pub csrf: String,
}

/// A decision link (SPEC §6.4; a notification's Approve/Reject): a JWT of its own type
/// (`decision+jwt`), audience `{base}/approvals/link`, naming the tenant, the proposal
/// and the approver it was sent to (`sub`: a principal, or `*` for a channel shared by
/// the tenant's approvers), single-use by `jti`, valid [`DECISION_LINK_SECS`] at most.
/// It never decides by itself: the approver signs in (or has a console session) first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkClaims {
    pub iss: String,
    pub sub: String,
    pub aud: String,
    pub exp: i64,
    pub iat: i64,
    pub nbf: i64,
    pub tid: String,
    /// The proposal.
    pub pid: String,
    pub jti: String,
}

impl Timed for LinkClaims {
    fn window(&self) -> (i64, i64) {
        (self.exp, self.nbf)
    }
}

/// `typ` of decision links.
const LINK_TYP: &str = "decision+jwt";
/// The longest a decision link is valid (less when the proposal's wait ends sooner).
pub const DECISION_LINK_SECS: i64 = 8 * 3600;

/// The decision links' audience for a base URL.
pub fn link_audience_of(base: &str) -> String {
    format!("{}/approvals/link", base.trim_end_matches('/'))
}

/// The validity window (`exp`, `nbf`, in seconds) of the tokens we sign.
trait Timed {
    fn window(&self) -> (i64, i64);
}

impl Timed for AccessClaims {
    fn window(&self) -> (i64, i64) {
        (self.exp, self.nbf)
    }
}

impl Timed for ConsoleClaims {
    fn window(&self) -> (i64, i64) {
        (self.exp, self.nbf)
    }
}

/// `typ` of console sessions.
const CONSOLE_TYP: &str = "console+jwt";
/// How long a console session lasts.
pub const CONSOLE_SESSION_SECS: i64 = 8 * 3600;

/// The console's audience for a base URL.
pub fn console_audience_of(base: &str) -> String {
    format!("{}/approvals", base.trim_end_matches('/'))
}

/// A verified access token, ready to become a caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedToken {
    pub tenant: TenantId,
    pub principal: Id,
    pub scopes: Scopes,
    pub client_id: String,
    pub jti: String,
    pub teams: Vec<String>,
    pub projects: Vec<String>,
    pub toolsets: Toolsets,
}

#[derive(Default)]
struct KeyCache {
    keys: HashMap<String, Arc<DecodingKey>>,
    loaded: Option<Instant>,
}

#[derive(Clone)]
pub struct TokenService {
    backend: Backend,
    cache: Arc<RwLock<KeyCache>>,
}

fn invalid() -> Error {
    Error::unauthenticated("invalid, expired or revoked credentials")
}

impl TokenService {
    pub(crate) fn new(backend: Backend) -> Self {
        Self { backend, cache: Arc::new(RwLock::new(KeyCache::default())) }
    }

    /// Signs an access token for `grant`, valid one hour from now. Returns the token and its lifetime.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the key store cannot sign.
    pub async fn issue(&self, base: &str, grant: &Grant, toolsets: &Toolsets) -> Result<(String, i64)> {
        let now = self.backend.clock.now().0 / 1000;
        let claims = AccessClaims {
            iss: issuer_of(base),
            sub: grant.principal.to_string(),
            aud: grant.resource.clone(),
            exp: now + ACCESS_TOKEN_TTL_SECS,
            iat: now,
            nbf: now,
            jti: crate::random_token(16),
            client_id: grant.client_id.to_string(),
            scope: grant.scopes.to_oauth_string(),
            tid: grant.tenant.to_string(),
            teams: grant.teams.clone(),
            projects: grant.projects.clone(),
            toolsets: if *toolsets == Toolsets::default() {
                vec![]
            } else {
                toolsets.0.iter().map(|t| t.as_str().to_owned()).collect()
            },
        };
        let token = self.sign_claims(&serde_json::to_value(&claims).map_err(Error::internal)?, TYP).await?;
        if token.len() > MAX_TOKEN_LEN {
            // Verification would refuse it: say why now instead.
            return Err(Error::invalid("the access token would be too large (too many teams or projects)"));
        }
        Ok((token, ACCESS_TOKEN_TTL_SECS))
    }

    /// Signs arbitrary claims with our current key (tests build hostile tokens with it).
    ///
    /// # Errors
    /// `UNAVAILABLE` when the key store cannot sign.
    pub async fn sign_claims(&self, claims: &serde_json::Value, typ: &str) -> Result<String> {
        // The kid is only known once signed (KMS names it), so sign over a header naming
        // the key the store will use: ask it for the current kid first.
        let kid = self
            .backend
            .signer
            .public_keys()
            .await?
            .first()
            .map(|k| k.kid.clone())
            .ok_or_else(|| Error::unavailable("no signing key"))?;
        let header = serde_json::json!({ "alg": "RS256", "typ": typ, "kid": kid });
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header).map_err(Error::internal)?),
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).map_err(Error::internal)?)
        );
        let sig = self.backend.signer.sign(input.as_bytes()).await?;
        if sig.kid != kid {
            return Err(Error::unavailable("the signing key changed while signing; retry"));
        }
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.bytes)))
    }

    /// Signs a console session for `principal` of `tenant`, opened `via` an approver key
    /// (`key:{id}`) or a user's sign-in (`user:{e-mail}`); returns the token and its CSRF
    /// secret.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the key store cannot sign.
    pub async fn issue_console(&self, base: &str, tenant: &TenantId, principal: &Id, via: &str) -> Result<(String, String)> {
        let now = self.backend.clock.now().0 / 1000;
        let csrf = crate::random_token(24);
        let claims = ConsoleClaims {
            iss: issuer_of(base),
            sub: principal.to_string(),
            aud: console_audience_of(base),
            exp: now + CONSOLE_SESSION_SECS,
            iat: now,
            nbf: now,
            tid: tenant.to_string(),
            via: via.to_owned(),
            csrf: csrf.clone(),
        };
        let token = self.sign_claims(&serde_json::to_value(&claims).map_err(Error::internal)?, CONSOLE_TYP).await?;
        Ok((token, csrf))
    }

    /// Signs a decision link for proposal `pid` of `tenant`, bound to `approver` (`None`:
    /// any approver of the tenant), valid until `until` (seconds) or
    /// [`DECISION_LINK_SECS`], whichever is sooner.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the key store cannot sign.
    pub async fn issue_link(&self, base: &str, tenant: &TenantId, pid: &Id, approver: Option<&Id>, until: i64) -> Result<String> {
        let now = self.backend.clock.now().0 / 1000;
        let claims = LinkClaims {
            iss: issuer_of(base),
            sub: approver.map_or_else(|| "*".to_owned(), ToString::to_string),
            aud: link_audience_of(base),
            exp: (now + DECISION_LINK_SECS).min(until),
            iat: now,
            nbf: now,
            tid: tenant.to_string(),
            pid: pid.to_string(),
            jti: crate::random_token(16),
        };
        self.sign_claims(&serde_json::to_value(&claims).map_err(Error::internal)?, LINK_TYP).await
    }

    /// Verifies a decision link presented at `base` (the access tokens' rules, its own
    /// `typ` and audience). Whether it was used is the caller's to check.
    ///
    /// # Errors
    /// `UNAUTHENTICATED` for anything but a valid, unexpired link; `UNAVAILABLE`.
    pub async fn verify_link(&self, token: &str, base: &str) -> Result<LinkClaims> {
        self.decode_ours(token, LINK_TYP, base, &[link_audience_of(base)]).await
    }

    /// Verifies a console session presented at `base` (same rules as access tokens:
    /// RS256 pinned, our key by kid, `exp`/`nbf`/`iss`/`aud` checked, its own `typ`).
    ///
    /// # Errors
    /// `UNAUTHENTICATED` for anything but a valid session; `UNAVAILABLE`.
    pub async fn verify_console(&self, token: &str, base: &str) -> Result<ConsoleClaims> {
        let c: ConsoleClaims = self.decode_ours(token, CONSOLE_TYP, base, &[console_audience_of(base)]).await?;
        #[allow(clippy::cast_possible_wrap)]
        if c.iat > self.backend.clock.now().0 / 1000 + LEEWAY_SECS as i64 {
            return Err(invalid());
        }
        Ok(c)
    }

    /// The claims of a JWT we signed: size and shape first; only the header is read
    /// before the signature is checked, and only to pin the algorithm and `typ` and find
    /// our key by kid; then `iss` (ours for `base`), `aud` (one of `audiences`), and
    /// `exp` and `nbf` against the backend's clock — the clock that issued them (the
    /// token library's own check would read the system's).
    async fn decode_ours<C: serde::de::DeserializeOwned + Timed>(
        &self,
        token: &str,
        typ: &str,
        base: &str,
        audiences: &[String],
    ) -> Result<C> {
        if token.len() > MAX_TOKEN_LEN || token.bytes().filter(|b| *b == b'.').count() != 2 {
            return Err(invalid());
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| invalid())?;
        if header.alg != Algorithm::RS256 || header.typ.as_deref() != Some(typ) {
            return Err(invalid());
        }
        let kid = header.kid.ok_or_else(invalid)?;
        let key = self.key(&kid).await?.ok_or_else(invalid)?;
        let mut v = Validation::new(Algorithm::RS256);
        v.leeway = LEEWAY_SECS;
        v.validate_exp = false;
        v.validate_nbf = false;
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        v.set_issuer(&[issuer_of(base)]);
        v.set_audience(audiences);
        let data = jsonwebtoken::decode::<C>(token, &key, &v).map_err(|e| {
            tracing::debug!(reason = %e, typ, "token refused");
            invalid()
        })?;
        let now = self.backend.clock.now().0 / 1000;
        #[allow(clippy::cast_possible_wrap)]
        let leeway = LEEWAY_SECS as i64;
        let (exp, nbf) = data.claims.window();
        if exp + leeway < now || nbf > now + leeway {
            tracing::debug!(typ, "token refused: expired or not yet valid");
            return Err(invalid());
        }
        Ok(data.claims)
    }

    /// Our JWK Set, for `/.well-known/jwks.json`.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the key store cannot be reached.
    pub async fn jwks(&self) -> Result<serde_json::Value> {
        let keys = self.backend.signer.public_keys().await?;
        Ok(serde_json::json!({ "keys": keys }))
    }

    async fn key(&self, kid: &str) -> Result<Option<Arc<DecodingKey>>> {
        let (hit, stale, may_reload) = {
            let c = self.cache.read().map_err(|_| Error::internal("key cache poisoned"))?;
            let age = c.loaded.map(|t| t.elapsed());
            (c.keys.get(kid).cloned(), age.is_none_or(|a| a > KEYS_TTL), age.is_none_or(|a| a > UNKNOWN_KID_BACKOFF))
        };
        if let Some(k) = &hit
            && !stale
        {
            return Ok(Some(k.clone()));
        }
        if hit.is_none() && !stale && !may_reload {
            return Ok(None);
        }
        let published = match self.backend.signer.public_keys().await {
            Ok(k) => k,
            // The key store is unreachable: keys we already know stay good.
            Err(e) if hit.is_some() => {
                tracing::warn!(error = %e, "signing keys could not be re-read; using the cached ones");
                return Ok(hit);
            }
            Err(e) => return Err(e),
        };
        let mut keys = HashMap::new();
        for jwk in published {
            let key = DecodingKey::from_rsa_components(&jwk.n, &jwk.e)
                .map_err(|e| Error::internal(format!("our key {}: {e}", jwk.kid)))?;
            keys.insert(jwk.kid, Arc::new(key));
        }
        let found = keys.get(kid).cloned();
        let mut c = self.cache.write().map_err(|_| Error::internal("key cache poisoned"))?;
        c.keys = keys;
        c.loaded = Some(Instant::now());
        Ok(found)
    }

    /// Verifies an access token presented to the API at `base`.
    ///
    /// # Errors
    /// `UNAUTHENTICATED` (always the same message) for anything but a valid token;
    /// `UNAVAILABLE` when our key store cannot be read.
    pub async fn verify(&self, token: &str, base: &str) -> Result<VerifiedToken> {
        let b = base.trim_end_matches('/');
        let c: AccessClaims = self.decode_ours(token, TYP, base, &[mcp_resource_of(base), b.to_owned(), format!("{b}/")]).await?;
        let now = self.backend.clock.now().0 / 1000;
        #[allow(clippy::cast_possible_wrap)]
        if c.iat > now + LEEWAY_SECS as i64 {
            return Err(invalid());
        }
        Ok(VerifiedToken {
            tenant: TenantId::new(c.tid).map_err(|_| invalid())?,
            principal: Id::new(c.sub).map_err(|_| invalid())?,
            scopes: Scopes::parse(&c.scope).map_err(|_| invalid())?,
            client_id: c.client_id,
            jti: c.jti,
            teams: c.teams,
            projects: c.projects,
            toolsets: if c.toolsets.is_empty() {
                Toolsets::default()
            } else {
                Toolsets::parse(&c.toolsets.join(",")).map_err(|_| invalid())?
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuers_follow_url_rendering() {
        assert_eq!(issuer_of("http://127.0.0.1:8787"), "http://127.0.0.1:8787/");
        assert_eq!(issuer_of("http://127.0.0.1:8787/"), "http://127.0.0.1:8787/");
        assert_eq!(
            issuer_of("https://abc.execute-api.eu-west-1.amazonaws.com/prod"),
            "https://abc.execute-api.eu-west-1.amazonaws.com/prod"
        );
        assert_eq!(mcp_resource_of("http://h:1/"), "http://h:1/mcp");
    }
}
