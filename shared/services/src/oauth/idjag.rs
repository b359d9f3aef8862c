//! Enterprise sign-in: verifying an Identity Assertion JWT Authorization Grant (ID-JAG,
//! `typ: oauth-id-jag+jwt`) issued by one of a tenant's trusted identity providers.
//!
//! Checks, in order: size; `typ`; algorithm pinned to RS256 or ES256 and matching the
//! key; `iss` exactly one of the tenant's trusted IdPs; signature with that IdP's key
//! (by `kid`, from its JWKS — inline or fetched over HTTPS and cached five minutes);
//! `aud` = our issuer; `exp` and `iat` within 5 s of skew and `iat` no older than five
//! minutes; `client_id` = the authenticated client; `resource` = our MCP URL; `jti`
//! never seen before from that issuer (a replay cache in the store).
//!
//! This is the one outbound HTTP call services make: fetching an IdP's JWKS. It is the
//! same on both backends.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use domain::oauth::{ID_JAG_TYP, TrustedIdp};
use domain::tenant::Tenant;
use domain::{Error, Result, Timestamp};
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use ports::Backend;
use ports::oauth::OAuthStore;
use serde::Deserialize;

use super::OAuthError;
use super::tokens::LEEWAY_SECS;

const MAX_ASSERTION_LEN: usize = 16 * 1024;
const JWKS_TTL: Duration = Duration::from_secs(300);
const MAX_JWKS_BYTES: usize = 256 * 1024;
/// An assertion older than this is refused even if unexpired (bounds the replay cache).
const MAX_AGE_SECS: i64 = 300;

#[derive(Debug, Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    /// A single string: an assertion for several audiences is not for us alone.
    #[allow(dead_code)]
    aud: String,
    jti: String,
    iat: i64,
    exp: i64,
    client_id: String,
    resource: String,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    email_verified: bool,
    /// The user's IdP groups (a list, or one string; anything else in it is ignored),
    /// mapped to teams by the tenant's `group_teams`.
    #[serde(default)]
    groups: serde_json::Value,
}

/// The strings of a `groups` claim.
fn group_names(v: &serde_json::Value) -> Vec<String> {
    match v {
        serde_json::Value::String(g) => vec![g.clone()],
        serde_json::Value::Array(items) => items.iter().filter_map(|g| g.as_str().map(str::to_owned)).collect(),
        _ => Vec::new(),
    }
}

/// What a valid assertion says about the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assertion {
    pub issuer: String,
    pub subject: String,
    pub email: Option<String>,
    /// Whether the IdP asserts it verified the e-mail (only then may it link a local account).
    pub email_verified: bool,
    pub scope: Option<String>,
    /// Teams the user's IdP groups map to (the trusted IdP's `group_teams`).
    pub teams: Vec<String>,
}

/// Fetched key sets by `jwks_uri`, with when they were fetched.
type KeySetCache = Arc<RwLock<HashMap<String, (Instant, Arc<JwkSet>)>>>;

#[derive(Clone)]
pub struct IdpKeys {
    /// `Err` when the client could not be built (a malformed proxy variable): each
    /// fetch then refuses with the reason instead of the process failing to start.
    http: std::result::Result<reqwest::Client, String>,
    cache: KeySetCache,
}

fn refuse(why: &str) -> OAuthError {
    OAuthError::new("invalid_grant", format!("the identity assertion is not acceptable: {why}"))
}

impl Default for IdpKeys {
    fn default() -> Self {
        Self::new()
    }
}

impl IdpKeys {
    pub fn new() -> Self {
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls::client_config())
            .timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("the key fetcher cannot start: {e}"));
        Self { http, cache: Arc::new(RwLock::new(HashMap::new())) }
    }

    async fn keyset(&self, idp: &TrustedIdp) -> Result<Arc<JwkSet>> {
        if let Some(inline) = &idp.jwks {
            return serde_json::from_value(inline.clone())
                .map(Arc::new)
                .map_err(|e| Error::internal(format!("the trusted IdP's inline JWKS is malformed: {e}")));
        }
        let uri = idp.jwks_uri.as_deref().ok_or_else(|| Error::internal("the trusted IdP has no keys configured"))?;
        if let Ok(c) = self.cache.read()
            && let Some((at, set)) = c.get(uri)
            && at.elapsed() < JWKS_TTL
        {
            return Ok(set.clone());
        }
        let http = self.http.as_ref().map_err(|why| Error::unavailable(format!("IdP JWKS {uri}: {why}")))?;
        let mut resp = http.get(uri).send().await.map_err(|e| Error::unavailable(format!("IdP JWKS {uri}: {e}")))?;
        if !resp.status().is_success() {
            return Err(Error::unavailable(format!("IdP JWKS {uri}: HTTP {}", resp.status())));
        }
        let too_big = || Error::unavailable(format!("IdP JWKS {uri}: larger than {MAX_JWKS_BYTES} bytes"));
        if resp.content_length().is_some_and(|n| n > MAX_JWKS_BYTES as u64) {
            return Err(too_big());
        }
        // Read in chunks so an endless body cannot exhaust memory.
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| Error::unavailable(format!("IdP JWKS {uri}: {e}")))? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(too_big());
            }
            body.extend_from_slice(&chunk);
        }
        let set: Arc<JwkSet> =
            Arc::new(serde_json::from_slice(&body).map_err(|e| Error::unavailable(format!("IdP JWKS {uri}: {e}")))?);
        if let Ok(mut c) = self.cache.write() {
            c.insert(uri.to_owned(), (Instant::now(), set.clone()));
        }
        Ok(set)
    }

    /// Verifies `assertion` for `tenant`, presented by `client_id` to the issuer `issuer`
    /// protecting `resource`.
    ///
    /// # Errors
    /// `invalid_grant` naming the failed check; `temporarily_unavailable` when the IdP's
    /// keys or the replay cache cannot be reached.
    #[allow(clippy::too_many_arguments)]
    pub async fn verify(
        &self,
        backend: &Backend,
        assertion: &str,
        tenant: &Tenant,
        client_id: &str,
        issuer: &str,
        resource: &str,
        now: Timestamp,
    ) -> Result<Assertion, OAuthError> {
        if assertion.len() > MAX_ASSERTION_LEN || assertion.bytes().filter(|b| *b == b'.').count() != 2 {
            return Err(refuse("malformed"));
        }
        let header = jsonwebtoken::decode_header(assertion).map_err(|_| refuse("malformed header"))?;
        if !header.typ.as_deref().is_some_and(|t| t.eq_ignore_ascii_case(ID_JAG_TYP)) {
            return Err(refuse("typ must be oauth-id-jag+jwt"));
        }
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(refuse("alg must be RS256 or ES256"));
        }
        // The issuer is read unverified only to pick which trusted IdP's keys to use.
        let unverified: Claims =
            jsonwebtoken::dangerous::insecure_decode_claims(assertion).map_err(|_| refuse("malformed claims"))?;
        let idp = tenant
            .trusted_idps
            .iter()
            .find(|i| i.issuer == unverified.iss)
            .ok_or_else(|| refuse("issuer not trusted by this tenant"))?;
        let set = self.keyset(idp).await.map_err(OAuthError::from)?;
        let jwk = match header.kid.as_deref() {
            Some(kid) => set.find(kid),
            None if set.keys.len() == 1 => set.keys.first(),
            None => None,
        }
        .ok_or_else(|| refuse("unknown signing key"))?;
        let family_ok = matches!(
            (&jwk.algorithm, header.alg),
            (AlgorithmParameters::RSA(_), Algorithm::RS256) | (AlgorithmParameters::EllipticCurve(_), Algorithm::ES256)
        );
        if !family_ok {
            return Err(refuse("alg does not match the key"));
        }
        let key = DecodingKey::from_jwk(jwk).map_err(|_| refuse("unusable signing key"))?;
        let mut v = Validation::new(header.alg);
        v.leeway = LEEWAY_SECS;
        v.validate_nbf = true;
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        v.set_issuer(&[&idp.issuer]);
        let root = issuer.trim_end_matches('/');
        v.set_audience(&[issuer.to_owned(), root.to_owned(), format!("{root}/")]);
        let claims = jsonwebtoken::decode::<Claims>(assertion, &key, &v)
            .map_err(|e| {
                use jsonwebtoken::errors::ErrorKind as K;
                refuse(match e.kind() {
                    K::InvalidSignature => "bad signature",
                    K::ExpiredSignature => "expired",
                    K::ImmatureSignature => "not yet valid",
                    K::InvalidAudience => "aud is not this authorization server",
                    K::InvalidIssuer => "issuer mismatch",
                    K::MissingRequiredClaim(_) => "a required claim is missing",
                    _ => "invalid",
                })
            })?
            .claims;
        let now_s = now.0 / 1000;
        #[allow(clippy::cast_possible_wrap)]
        let skew = LEEWAY_SECS as i64;
        if claims.iat > now_s + skew {
            return Err(refuse("issued in the future"));
        }
        if claims.iat < now_s - MAX_AGE_SECS {
            return Err(refuse("issued too long ago"));
        }
        if claims.client_id != client_id {
            return Err(refuse("client_id is not the authenticated client"));
        }
        let base = resource.trim_end_matches("/mcp");
        if claims.resource != resource && claims.resource.trim_end_matches('/') != base.trim_end_matches('/') {
            return Err(refuse("resource is not this server"));
        }
        if claims.jti.is_empty() || claims.jti.len() > 512 {
            return Err(refuse("jti is missing"));
        }
        let fresh = backend
            .records
            // Kept only as long as the assertion could be accepted (its `iat` bound).
            .claim_jti(&claims.iss, &claims.jti, Timestamp(claims.exp.min(claims.iat + MAX_AGE_SECS + skew).saturating_mul(1000)))
            .await
            .map_err(OAuthError::from)?;
        if !fresh {
            return Err(refuse("replayed (jti already used)"));
        }
        let teams = idp.teams_of(&group_names(&claims.groups));
        Ok(Assertion {
            issuer: claims.iss,
            subject: claims.sub,
            email: claims.email,
            email_verified: claims.email_verified,
            scope: claims.scope,
            teams,
        })
    }
}
