//! The OAuth 2.1 authorization server (SPEC §3.3): discovery documents, dynamic client
//! registration, the authorization-code flow (with login and consent), the token
//! endpoint's four grants, and revocation. The HTTP edge (`gateway::oauth`) parses
//! requests into [`Params`] and renders what these functions return.
//!
//! Errors here are RFC 6749 errors ([`OAuthError`]), not the §7.3 taxonomy: OAuth clients
//! expect `{"error": "invalid_grant", ...}`.

mod authorize;
pub mod cimd;
pub mod idjag;
pub mod password;
mod registration;
mod token;
pub mod tokens;

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use domain::oauth::{
    AUTH_CODE_TTL_SECS, AuthCode, ClientAuthMethod, Grant, GrantType, MAX_FAILED_LOGINS, OAuthClient,
    PENDING_AUTHORIZATION_TTL_SECS, PendingAuthorization, REFRESH_TOKEN_TTL_SECS, RefreshFamily, RefreshToken, UserLogin,
};
use domain::principal::{Principal, PrincipalKind, Role, Scope, Scopes};
use domain::tenant::PlanTier;
use domain::{Error, ErrorCode, Id, Result, TenantId, Timestamp};
use ports::Backend;
use ports::oauth::{OAuthStore, Redemption, Rotation};
use ports::ratelimit::Rate;
use ports::records::PrincipalStore;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use self::tokens::{TokenService, issuer_of, mcp_resource_of};
use crate::auth::Authenticator;

/// Redirect URIs a client may register.
pub const MAX_REDIRECT_URIS: usize = 10;
const MAX_URI_LEN: usize = 2000;
const MAX_NAME_LEN: usize = 200;
const MAX_STATE_LEN: usize = 1024;
/// Failed sign-ins one source may make for one e-mail address before it must wait: 5,
/// then one more a minute.
pub const FAILURES_PER_EMAIL_AND_SOURCE: Rate = Rate { capacity: 5, per_minute: 1 };
/// Failed sign-ins one source may make across all e-mail addresses (spraying): 30, then
/// 10 a minute.
pub const FAILURES_PER_SOURCE: Rate = Rate { capacity: 30, per_minute: 10 };
/// Failed sign-ins for one e-mail address from all sources: beyond 10 (then 5 a minute),
/// every attempt for it waits [`SIGN_IN_BACKOFF`] first — a slow-down, never a refusal,
/// so nobody can lock a user out from elsewhere.
pub const FAILURES_PER_EMAIL: Rate = Rate { capacity: 10, per_minute: 5 };
/// The wait before checking a password of an e-mail address under attack.
pub const SIGN_IN_BACKOFF: std::time::Duration = std::time::Duration::from_secs(1);

/// What a registration gets when it asks for no scope, and a user when a client asks for none.
pub const DEFAULT_SCOPES: &str = "mcp:tools mcp:resources tenant:read memory:read";

/// An RFC 6749 §5.2 error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthError {
    pub error: &'static str,
    pub description: String,
    pub status: u16,
    /// For a 503: seconds to wait.
    pub retry_after: Option<u64>,
}

impl OAuthError {
    pub fn new(error: &'static str, description: impl Into<String>) -> Self {
        let status = match error {
            "invalid_client" => 401,
            "server_error" => 500,
            "temporarily_unavailable" => 503,
            _ => 400,
        };
        Self { error, description: description.into(), status, retry_after: None }
    }

    pub fn body(&self) -> Value {
        json!({ "error": self.error, "error_description": self.description })
    }
}

impl From<Error> for OAuthError {
    fn from(e: Error) -> Self {
        match e.code {
            ErrorCode::Unavailable | ErrorCode::ResolverDegraded => {
                tracing::warn!(detail = ?e.internal, "oauth: dependency unavailable");
                let mut o = Self::new("temporarily_unavailable", "a dependency is unavailable; retry shortly");
                o.retry_after = Some(e.payload.retry_after_secs.unwrap_or(1));
                o
            }
            ErrorCode::InvalidRequest => Self::new("invalid_request", e.message),
            // A concurrent change (a double submit): the request can simply be retried.
            ErrorCode::Conflict => Self::new("invalid_request", "this request raced another one; start again"),
            ErrorCode::RateLimited => {
                let mut o = Self::new("invalid_request", "too many attempts; wait and retry");
                o.status = 429;
                o.retry_after = e.payload.retry_after_secs;
                o
            }
            _ => {
                tracing::error!(code = %e.code, detail = ?e.internal, "oauth: unexpected failure");
                Self::new("server_error", "internal error")
            }
        }
    }
}

type OResult<T> = std::result::Result<T, OAuthError>;

/// Request parameters, each present at most once (RFC 6749 §3.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params(pub BTreeMap<String, String>);

impl Params {
    /// Parses `application/x-www-form-urlencoded` (a body or a query string).
    ///
    /// # Errors
    /// `invalid_request` naming a parameter given twice.
    pub fn parse(raw: &[u8]) -> OResult<Self> {
        let mut map = BTreeMap::new();
        for (k, v) in form_urlencoded::parse(raw) {
            if map.insert(k.clone().into_owned(), v.into_owned()).is_some() {
                return Err(OAuthError::new("invalid_request", format!("parameter {k} is repeated")));
            }
        }
        Ok(Self(map))
    }

    /// A present, non-empty parameter.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// # Errors
    /// `invalid_request` naming the missing parameter.
    pub fn require(&self, name: &str) -> OResult<&str> {
        self.get(name).ok_or_else(|| OAuthError::new("invalid_request", format!("missing parameter {name}")))
    }
}

/// How the client presented itself at the token or revocation endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCredentials {
    /// From `Authorization: Basic` (already URL-decoded).
    pub basic: Option<(String, String)>,
}

/// A successful token response (RFC 6749 §5.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenResponse {
    pub access_token: String,
    pub token_type: &'static str,
    pub expires_in: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    pub scope: String,
}

/// A failed authorization request: either shown to the user (when the client or its
/// redirect URI cannot be trusted, RFC 6749 §4.1.2.1) or sent back to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorizeError {
    Page(OAuthError),
    Redirect(String),
}

impl From<Error> for AuthorizeError {
    fn from(e: Error) -> Self {
        Self::Page(e.into())
    }
}

/// A login and consent in progress, as the pages need it.
#[derive(Debug, Clone)]
pub struct PendingView {
    pub pending: PendingAuthorization,
    pub client_name: String,
    /// For a client described by a metadata document: the host of its URL (shown beside
    /// the name it gives itself, which nobody vouched for).
    pub client_host: Option<String>,
    /// The CSRF token (only returned when the pending login is created).
    pub csrf: Option<String>,
    /// On the consent page: the signed-in user's teams and projects, whose memory the
    /// client will reach.
    pub teams: Vec<String>,
    pub projects: Vec<String>,
}

/// The outcome of checking a user's workspace, e-mail and password.
#[derive(Debug)]
pub enum PasswordCheck {
    Ok(UserLogin),
    /// Unknown workspace or e-mail, disabled, or a wrong password (one answer for all).
    Wrong,
    /// Too many failures from this source (for this e-mail, or in all): retry after this
    /// many seconds.
    Limited(u64),
    /// The attempt limiter is down: refused (fail closed).
    Unavailable,
}

/// What a sign-in attempt produced.
#[derive(Debug, Clone)]
pub enum LoginOutcome {
    /// Signed in: show the consent page.
    Consent(PendingView),
    /// Wrong workspace, e-mail or password (one message for all three).
    Retry(PendingView, String),
}

pub use crate::sha256_hex;

fn ct_eq(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// RFC 7636 §4.1: 43–128 characters of `[A-Z a-z 0-9 - . _ ~]`.
fn valid_verifier(v: &str) -> bool {
    (43..=128).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// Whether errors may be sent to this redirect URI before the user did anything
/// (RFC 9700 §4.11.2): yes for loopback and private-use schemes, which no third party
/// can host; for a registered client's https URI, an error page instead, so that our
/// domain cannot be used as an open redirector.
fn may_redirect_errors(client: &OAuthClient, uri: &str) -> bool {
    !client.dynamic || !uri.starts_with("https://")
}

fn append_query(uri: &str, pairs: &[(&str, &str)]) -> String {
    let mut ser = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        ser.append_pair(k, v);
    }
    let sep = if uri.contains('?') { '&' } else { '?' };
    format!("{uri}{sep}{}", ser.finish())
}

#[derive(Clone)]
pub struct OAuthService {
    backend: Backend,
    auth: Authenticator,
    pub tokens: TokenService,
    idp: idjag::IdpKeys,
    cimd: cimd::CimdFetcher,
}

impl OAuthService {
    pub(crate) fn new(backend: Backend, auth: Authenticator, tokens: TokenService) -> Self {
        Self { backend, auth, tokens, idp: idjag::IdpKeys::new(), cimd: cimd::CimdFetcher::default() }
    }

    fn now(&self) -> Timestamp {
        self.backend.clock.now()
    }

    // ---- discovery -----------------------------------------------------------------

    /// RFC 8414 authorization-server metadata for the API at `base`.
    pub fn metadata(&self, base: &str) -> Value {
        let b = base.trim_end_matches('/');
        json!({
            "issuer": issuer_of(base),
            "authorization_endpoint": format!("{b}/oauth/authorize"),
            "token_endpoint": format!("{b}/oauth/token"),
            "registration_endpoint": format!("{b}/oauth/register"),
            "revocation_endpoint": format!("{b}/oauth/revoke"),
            "jwks_uri": format!("{b}/.well-known/jwks.json"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": GrantType::ALL.iter().map(|g| g.as_str()).collect::<Vec<_>>(),
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
            "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
            "code_challenge_methods_supported": ["S256"],
            "scopes_supported": Scope::ALL.iter().filter(|s| s.grantable_to_mcp_client()).map(|s| s.as_str()).collect::<Vec<_>>(),
            "authorization_response_iss_parameter_supported": true,
            // Client ID Metadata Documents: an https URL as client_id (preferred since
            // MCP 2025-11-25; dynamic registration stays for older clients).
            "client_id_metadata_document_supported": true,
            "service_documentation": format!("{b}/"),
        })
    }

    /// RFC 9728 protected-resource metadata of the MCP endpoint.
    pub fn resource_metadata(&self, base: &str) -> Value {
        json!({
            "resource": mcp_resource_of(base),
            "authorization_servers": [issuer_of(base)],
            "scopes_supported": Scope::ALL.iter().filter(|s| s.grantable_to_mcp_client()).map(|s| s.as_str()).collect::<Vec<_>>(),
            "bearer_methods_supported": ["header"],
            "resource_name": "Continuity",
            "resource_documentation": format!("{}/", base.trim_end_matches('/')),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::registration::valid_redirect_uri;
    use super::*;

    #[test]
    fn redirect_uris() {
        for ok in [
            "https://claude.ai/api/mcp/auth_callback",
            "http://127.0.0.1:33418/callback",
            "http://localhost:6274/oauth/callback",
            "cursor://anysphere.cursor-retrieval/oauth/user-continuity/callback",
            "com.example.app:/cb",
        ] {
            assert!(valid_redirect_uri(ok), "{ok}");
        }
        for bad in [
            "http://evil.example.com/cb",
            "https://x.example.com/cb#frag",
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "data:text/html,x",
            "file:///etc/passwd",
            "ftp://files.example.com/cb",
            "FTP://files.example.com/cb",
            "wss://socket.example.com/cb",
            "mailto:attacker@example.com",
            "",
            "nocolon",
            "https://a b",
        ] {
            assert!(!valid_redirect_uri(bad), "{bad}");
        }
    }

    #[test]
    fn params_refuse_repeats() {
        assert!(Params::parse(b"a=1&b=2").is_ok());
        assert_eq!(Params::parse(b"a=1&a=2").unwrap_err().error, "invalid_request");
        let p = Params::parse(b"a=&b=x%20y").unwrap();
        assert_eq!((p.get("a"), p.get("b")), (None, Some("x y")));
    }

    #[test]
    fn verifiers() {
        assert!(valid_verifier(&"a".repeat(43)));
        assert!(!valid_verifier(&"a".repeat(42)));
        assert!(!valid_verifier(&"a".repeat(129)));
        assert!(!valid_verifier(&format!("{}+", "a".repeat(43))));
    }

    #[test]
    fn redirects_keep_existing_query() {
        assert_eq!(append_query("https://a/cb", &[("code", "x y")]), "https://a/cb?code=x+y");
        assert_eq!(append_query("https://a/cb?k=1", &[("state", "s")]), "https://a/cb?k=1&state=s");
    }
}
