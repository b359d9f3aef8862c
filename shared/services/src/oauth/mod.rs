//! The OAuth 2.1 authorization server (SPEC §3.3): discovery documents, dynamic client
//! registration, the authorization-code flow (with login and consent), the token
//! endpoint's four grants, and revocation. The HTTP edge (`gateway::oauth`) parses
//! requests into [`Params`] and renders what these functions return.
//!
//! Errors here are RFC 6749 errors ([`OAuthError`]), not the §7.3 taxonomy: OAuth clients
//! expect `{"error": "invalid_grant", ...}`.

pub mod idjag;
pub mod password;
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
    /// The CSRF token (only returned when the pending login is created).
    pub csrf: Option<String>,
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

/// A redirect URI we accept at registration: https, http on a loopback host (native
/// apps, RFC 8252 §7.3), or a private-use scheme (RFC 8252 §7.1) — never a fragment,
/// never `javascript:`/`data:`/`file:`.
fn valid_redirect_uri(uri: &str) -> bool {
    if uri.len() > MAX_URI_LEN || !uri.is_ascii() || uri.contains('#') || uri.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return false;
    }
    let Some((scheme, rest)) = uri.split_once(':') else { return false };
    let lower = scheme.to_ascii_lowercase();
    if lower == "http" || lower == "https" {
        // The exact lower-case `scheme://` form only: `HTTP://x` or `http:x` would slip
        // past a case-sensitive prefix test and still reach a browser as http.
        return (uri.starts_with("https://") || uri.starts_with("http://")) && domain::oauth::is_secure_url(uri);
    }
    let scheme_ok = scheme.len() >= 2
        && scheme.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    scheme_ok && !rest.is_empty() && !NOT_PRIVATE_USE.contains(&lower.as_str())
}

/// Schemes that are not an app's private-use scheme (RFC 8252 §7.1): script and local
/// content, and network protocols a browser or the OS would hand the code to someone
/// else (`ftp:`, `ws:`, `mailto:`…).
const NOT_PRIVATE_USE: &[&str] = &[
    "javascript",
    "data",
    "file",
    "vbscript",
    "blob",
    "about",
    "filesystem",
    "view-source",
    "ftp",
    "ftps",
    "sftp",
    "tftp",
    "ws",
    "wss",
    "mailto",
    "tel",
    "sms",
    "smsto",
    "mms",
    "fax",
    "callto",
    "gopher",
    "ldap",
    "ldaps",
    "smtp",
    "imap",
    "pop",
    "telnet",
    "ssh",
    "git",
    "svn",
    "irc",
    "ircs",
    "news",
    "nntp",
    "rtsp",
    "rtmp",
    "sip",
    "sips",
    "xmpp",
    "magnet",
    "urn",
    "jar",
    "chrome",
    "chrome-extension",
    "moz-extension",
    "resource",
    "intent",
];

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
}

impl OAuthService {
    pub fn new(backend: Backend, auth: Authenticator, tokens: TokenService) -> Self {
        Self { backend, auth, tokens, idp: idjag::IdpKeys::new() }
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

    // ---- registration --------------------------------------------------------------

    /// RFC 7591 dynamic client registration. Never grants `approvals:decide` or `admin`.
    ///
    /// # Errors
    /// `invalid_redirect_uri` / `invalid_client_metadata` naming the problem.
    pub async fn register(&self, body: &Value) -> OResult<Value> {
        let meta = |m: &str| OAuthError::new("invalid_client_metadata", m.to_owned());
        let obj = body.as_object().ok_or_else(|| meta("the body must be a JSON object"))?;
        let uris: Vec<String> = match obj.get("redirect_uris") {
            Some(Value::Array(a)) if !a.is_empty() && a.len() <= MAX_REDIRECT_URIS => a
                .iter()
                .map(|u| {
                    u.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| OAuthError::new("invalid_redirect_uri", "redirect URIs must be strings"))
                })
                .collect::<OResult<_>>()?,
            _ => {
                return Err(OAuthError::new(
                    "invalid_redirect_uri",
                    format!("redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs"),
                ));
            }
        };
        if let Some(bad) = uris.iter().find(|u| !valid_redirect_uri(u)) {
            let shown: String = bad.chars().take(100).collect();
            return Err(OAuthError::new(
                "invalid_redirect_uri",
                format!("{shown:?} is not allowed: use https, http on localhost, or a private-use scheme, without a fragment"),
            ));
        }
        let method = match obj.get("token_endpoint_auth_method") {
            None | Some(Value::Null) => ClientAuthMethod::None,
            Some(Value::String(m)) => ClientAuthMethod::parse(m)
                .map_err(|_| meta("token_endpoint_auth_method must be none, client_secret_basic or client_secret_post"))?,
            Some(_) => return Err(meta("token_endpoint_auth_method must be a string")),
        };
        let grants: Vec<GrantType> = match obj.get("grant_types") {
            None | Some(Value::Null) => vec![GrantType::AuthorizationCode, GrantType::RefreshToken],
            Some(Value::Array(a)) => a
                .iter()
                .map(|g| g.as_str().and_then(|g| GrantType::parse(g).ok()).ok_or_else(|| meta("unsupported grant type")))
                .collect::<OResult<_>>()?,
            Some(_) => return Err(meta("grant_types must be an array")),
        };
        if grants.is_empty() || grants.iter().any(|g| !matches!(g, GrantType::AuthorizationCode | GrantType::RefreshToken)) {
            return Err(meta(
                "a registered client may use authorization_code and refresh_token only; service clients are created by an administrator",
            ));
        }
        if let Some(rt) = obj.get("response_types") {
            let ok = rt.as_array().is_some_and(|a| a.iter().all(|r| r.as_str() == Some("code")));
            if !ok {
                return Err(meta("response_types may only contain code"));
            }
        }
        let scopes = match obj.get("scope") {
            None | Some(Value::Null) => Scopes(Scope::ALL.iter().copied().filter(|s| s.grantable_to_mcp_client()).collect()),
            Some(Value::String(s)) => {
                let parsed = Scopes::parse(s).map_err(|_| OAuthError::new("invalid_client_metadata", "unknown scope"))?;
                if let Some(bad) = parsed.0.iter().find(|s| !s.grantable_to_mcp_client()) {
                    return Err(meta(&format!("the scope {bad} is never granted to a registered client")));
                }
                parsed
            }
            Some(_) => return Err(meta("scope must be a string")),
        };
        let name = match obj.get("client_name") {
            Some(Value::String(n)) if n.chars().count() <= MAX_NAME_LEN && !n.chars().any(char::is_control) => n.clone(),
            Some(Value::String(_)) => return Err(meta("client_name is too long or has control characters")),
            None | Some(Value::Null) => "Unnamed client".into(),
            Some(_) => return Err(meta("client_name must be a string")),
        };
        let secret = (method != ClientAuthMethod::None).then(|| crate::random_token(32));
        let client = OAuthClient {
            client_id: Id::new(format!("dyn-{}", crate::random_token(16))).map_err(OAuthError::from)?,
            client_name: name,
            redirect_uris: uris,
            grant_types: grants,
            auth_method: method,
            secret_sha256: secret.as_deref().map(sha256_hex),
            allowed_scopes: scopes,
            tenant: None,
            dynamic: true,
            created_at: self.now(),
            toolsets: domain::principal::Toolsets::default(),
        };
        self.backend.records.create_client(&client).await.map_err(OAuthError::from)?;
        tracing::info!(client_id = %client.client_id, "oauth client registered");
        let mut out = json!({
            "client_id": client.client_id.as_str(),
            "client_id_issued_at": client.created_at.0 / 1000,
            "client_name": client.client_name,
            "redirect_uris": client.redirect_uris,
            "grant_types": client.grant_types.iter().map(|g| g.as_str()).collect::<Vec<_>>(),
            "response_types": ["code"],
            "token_endpoint_auth_method": client.auth_method.as_str(),
            "scope": client.allowed_scopes.to_oauth_string(),
        });
        if let Some(s) = secret {
            out["client_secret"] = json!(s);
            out["client_secret_expires_at"] = json!(0);
        }
        Ok(out)
    }

    // ---- client authentication -----------------------------------------------------

    /// Authenticates the client of a token/revocation request (RFC 6749 §2.3).
    async fn authenticate_client(&self, params: &Params, creds: &ClientCredentials) -> OResult<OAuthClient> {
        let bad = || OAuthError::new("invalid_client", "client authentication failed");
        let form_secret = params.get("client_secret");
        let (id, secret) = match (&creds.basic, form_secret) {
            (Some(_), Some(_)) => {
                return Err(OAuthError::new("invalid_request", "use one client authentication method, not two"));
            }
            (Some((id, secret)), None) => {
                if params.get("client_id").is_some_and(|f| f != id) {
                    return Err(OAuthError::new("invalid_request", "client_id does not match the Authorization header"));
                }
                (id.as_str(), Some(secret.as_str()))
            }
            (None, Some(secret)) => (params.require("client_id")?, Some(secret)),
            (None, None) => (params.require("client_id")?, None),
        };
        let client_id = Id::new(id).map_err(|_| bad())?;
        let client = self.backend.records.get_client(&client_id).await.map_err(OAuthError::from)?.ok_or_else(bad)?;
        match (&client.secret_sha256, secret) {
            (None, None) => Ok(client),
            (Some(stored), Some(given)) => {
                // Basic and post are both accepted for a confidential client: the secret is what matters.
                if ct_eq(stored, &sha256_hex(given)) { Ok(client) } else { Err(bad()) }
            }
            _ => Err(bad()),
        }
    }

    // ---- authorization endpoint ----------------------------------------------------

    /// Validates an authorization request and starts a pending login.
    ///
    /// # Errors
    /// [`AuthorizeError::Page`] when the client or redirect URI is not to be trusted;
    /// [`AuthorizeError::Redirect`] back to the client for every other problem.
    pub async fn begin_authorize(&self, base: &str, params: &Params) -> std::result::Result<PendingView, AuthorizeError> {
        let page = |e: &'static str, d: &str| AuthorizeError::Page(OAuthError::new(e, d.to_owned()));
        let client_id = params.get("client_id").ok_or_else(|| page("invalid_request", "missing client_id"))?;
        let client_id = Id::new(client_id).map_err(|_| page("invalid_client", "unknown client"))?;
        let client =
            self.backend.records.get_client(&client_id).await?.ok_or_else(|| page("invalid_client", "unknown client"))?;
        let redirect_uri_explicit = params.get("redirect_uri").is_some();
        let redirect_uri = match params.get("redirect_uri") {
            Some(u) if client.redirect_uris.iter().any(|r| r == u) => u.to_owned(),
            Some(_) => return Err(page("invalid_request", "redirect_uri does not exactly match a registered redirect URI")),
            None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
            None => return Err(page("invalid_request", "missing redirect_uri")),
        };
        let state = params.get("state").map(str::to_owned);
        if state.as_ref().is_some_and(|s| s.len() > MAX_STATE_LEN) {
            return Err(page("invalid_request", "state is too long"));
        }
        let issuer = issuer_of(base);
        let redirect_errors = may_redirect_errors(&client, &redirect_uri);
        let fail = |error: &'static str, description: &str| {
            if !redirect_errors {
                return AuthorizeError::Page(OAuthError::new(error, description.to_owned()));
            }
            let mut pairs = vec![("error", error), ("error_description", description)];
            if let Some(s) = &state {
                pairs.push(("state", s.as_str()));
            }
            pairs.push(("iss", issuer.as_str()));
            AuthorizeError::Redirect(append_query(&redirect_uri, &pairs))
        };
        if params.get("response_type") != Some("code") {
            return Err(fail("unsupported_response_type", "response_type must be code"));
        }
        if !client.allows_grant(GrantType::AuthorizationCode) {
            return Err(fail("unauthorized_client", "this client may not use the authorization code flow"));
        }
        let challenge =
            params.get("code_challenge").ok_or_else(|| fail("invalid_request", "PKCE is required: send code_challenge"))?;
        if params.get("code_challenge_method") != Some("S256") {
            return Err(fail("invalid_request", "code_challenge_method must be S256"));
        }
        if challenge.len() != 43 || !challenge.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(fail("invalid_request", "code_challenge must be BASE64URL(SHA256(verifier))"));
        }
        let resource = self.check_resource(base, params.get("resource")).map_err(|e| fail(e.error, &e.description))?;
        let requested = match params.get("scope") {
            Some(s) => Scopes::parse(s).map_err(|_| fail("invalid_scope", "unknown scope"))?,
            None => Scopes::parse(DEFAULT_SCOPES).map_err(|_| fail("server_error", "default scopes"))?,
        };
        // Grant what the client may have of what it asked for (never `approvals:decide`
        // or `admin` to a registered client); refuse only when nothing is left.
        let requested = Scopes(
            requested
                .0
                .into_iter()
                .filter(|s| client.allowed_scopes.contains(*s) && (!client.dynamic || s.grantable_to_mcp_client()))
                .collect(),
        );
        if requested.0.is_empty() {
            return Err(fail("invalid_scope", "this client may have none of the requested scopes"));
        }
        let csrf = crate::random_token(32);
        let pending = PendingAuthorization {
            id: Id::new(crate::random_token(16)).map_err(AuthorizeError::from)?,
            csrf_sha256: sha256_hex(&csrf),
            client_id: client.client_id.clone(),
            redirect_uri,
            state,
            code_challenge: challenge.to_owned(),
            scopes: requested,
            resource,
            user: None,
            expires_at: self.now().plus_millis(PENDING_AUTHORIZATION_TTL_SECS * 1000),
            redirect_uri_explicit,
            failed_logins: 0,
        };
        self.backend.records.put_pending(&pending, None).await?;
        Ok(PendingView { pending, client_name: client.client_name, csrf: Some(csrf) })
    }

    /// RFC 8707: the resource must be us (the MCP URL or the API base); absent means the
    /// MCP URL. Returns the canonical form, which becomes the token's `aud`.
    fn check_resource(&self, base: &str, resource: Option<&str>) -> OResult<String> {
        let mcp = mcp_resource_of(base);
        let root = base.trim_end_matches('/');
        match resource {
            None => Ok(mcp),
            Some(r) if r == mcp => Ok(mcp),
            Some(r) if r == root || r == format!("{root}/") => Ok(root.to_owned()),
            Some(_) => Err(OAuthError::new("invalid_target", "resource must be this server's MCP URL")),
        }
    }

    async fn pending(&self, id: &str, csrf: &str) -> std::result::Result<(PendingAuthorization, u64), AuthorizeError> {
        let expired = || {
            AuthorizeError::Page(OAuthError::new(
                "invalid_request",
                "this sign-in has expired or was already used; start again from your app",
            ))
        };
        let id = Id::new(id).map_err(|_| expired())?;
        let (p, v) = self.backend.records.get_pending(&id).await?.ok_or_else(expired)?;
        if p.expires_at < self.now() {
            return Err(expired());
        }
        if !ct_eq(&p.csrf_sha256, &sha256_hex(csrf)) {
            return Err(AuthorizeError::Page(OAuthError::new(
                "invalid_request",
                "the form is stale or forged (CSRF check failed)",
            )));
        }
        Ok((p, v))
    }

    /// Checks a user's password (argon2id, on the blocking pool; a dummy hash is
    /// verified for an unknown user so timing says nothing). Only failures count, per
    /// source and e-mail ([`FAILURES_PER_EMAIL_AND_SOURCE`]) and per source
    /// ([`FAILURES_PER_SOURCE`]): past either, that source is refused for a while. Failures
    /// from other sources only slow a correct password down ([`FAILURES_PER_EMAIL`],
    /// [`SIGN_IN_BACKOFF`]) — they never refuse it. `source` is the client's address
    /// (`None`: unknown, all such callers share one budget). Used by the OAuth sign-in
    /// page and the approvals console.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the store cannot be read; `INTERNAL` if the check cannot run.
    pub async fn check_password(
        &self,
        tenant: &str,
        email: &str,
        password_given: &str,
        source: Option<std::net::IpAddr>,
    ) -> Result<PasswordCheck> {
        let email = email.trim().to_ascii_lowercase();
        let who = sha256_hex(&format!("{}\n{email}", tenant.trim()));
        let from = source.map_or_else(|| "unknown".to_owned(), |ip| ip.to_string());
        let mine = [
            (format!("signin-fail:{who}:{from}"), FAILURES_PER_EMAIL_AND_SOURCE),
            (format!("signin-fail:source:{from}"), FAILURES_PER_SOURCE),
        ];
        let everyone = format!("signin-fail:{who}");
        let limiter = &self.backend.limiter;
        for (key, rate) in &mine {
            match limiter.peek(key, *rate).await {
                Ok(d) if !d.allowed => return Ok(PasswordCheck::Limited(d.retry_after_secs)),
                Ok(_) => {}
                // Fail closed: without the limiter, password guessing would be unbounded.
                Err(e) => {
                    tracing::warn!(error = %e, "sign-in limiter unavailable; sign-in refused");
                    return Ok(PasswordCheck::Unavailable);
                }
            }
        }
        match limiter.peek(&everyone, FAILURES_PER_EMAIL).await {
            Ok(d) if !d.allowed => tokio::time::sleep(SIGN_IN_BACKOFF).await,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "sign-in limiter unavailable; sign-in refused");
                return Ok(PasswordCheck::Unavailable);
            }
        }
        let login = match TenantId::new(tenant.trim()) {
            Ok(t) => self.backend.records.get_login(&t, &email).await?,
            Err(_) => None,
        };
        let given = password_given.to_owned();
        let stored = login.as_ref().filter(|l| !l.disabled).map(|l| l.password_hash.clone());
        let ok = tokio::task::spawn_blocking(move || match stored {
            Some(hash) => password::verify(&given, &hash),
            None => {
                password::verify_dummy(&given);
                false
            }
        })
        .await
        .map_err(|e| Error::internal(format!("password check: {e}")))?;
        if let Some(l) = login.filter(|_| ok) {
            return Ok(PasswordCheck::Ok(l));
        }
        for (key, rate) in mine.iter().chain(std::iter::once(&(everyone, FAILURES_PER_EMAIL))) {
            if let Err(e) = limiter.acquire(key, *rate).await {
                tracing::warn!(error = %e, "a failed sign-in was not counted");
            }
        }
        Ok(PasswordCheck::Wrong)
    }

    /// Opens an approvals-console session (SPEC §6.4) for a user who signs in with their
    /// workspace, e-mail and password and whose role may decide approvals (owner, admin,
    /// approver). Returns the signed session.
    ///
    /// # Errors
    /// `UNAUTHENTICATED` (one message) for an unknown workspace or e-mail, a disabled
    /// user or a wrong password; `FORBIDDEN` for a role that cannot decide (member);
    /// `RATE_LIMITED` after too many attempts; `UNAVAILABLE`.
    pub async fn console_login_user(
        &self,
        base: &str,
        tenant: &str,
        email: &str,
        password: &str,
        source: Option<std::net::IpAddr>,
    ) -> Result<String> {
        let login = match self.check_password(tenant, email, password, source).await? {
            PasswordCheck::Ok(l) => l,
            PasswordCheck::Wrong => return Err(Error::unauthenticated("Unknown workspace, e-mail or password.")),
            PasswordCheck::Limited(secs) => {
                return Err(Error::new(domain::ErrorCode::RateLimited, format!("Too many attempts. Wait {secs} seconds."))
                    .with_retry_after(secs));
            }
            PasswordCheck::Unavailable => return Err(Error::unavailable("the sign-in limiter is unavailable")),
        };
        let role = self.backend.records.get_principal(&login.tenant, &login.principal).await?.map(|p| p.role);
        if !role.is_some_and(|r| r.allowed_scopes().contains(domain::principal::Scope::ApprovalsDecide)) {
            return Err(Error::forbidden("Your role cannot decide approvals (it takes owner, admin or approver)."));
        }
        tracing::info!(tenant = %login.tenant, principal = %login.principal, "approvals console: user signed in");
        let (token, _) =
            self.tokens.issue_console(base, &login.tenant, &login.principal, &format!("user:{}", login.email)).await?;
        Ok(token)
    }

    /// Checks a sign-in on the login page: the failure limits of [`Self::check_password`]
    /// and 5 failures per login page (then it must be started again); argon2 runs on the
    /// blocking pool.
    ///
    /// # Errors
    /// [`AuthorizeError::Page`] for an expired, forged or used-up form.
    pub async fn login(
        &self,
        pending_id: &str,
        csrf: &str,
        tenant: &str,
        email: &str,
        password_given: &str,
        source: Option<std::net::IpAddr>,
    ) -> std::result::Result<LoginOutcome, AuthorizeError> {
        let (mut p, v) = self.pending(pending_id, csrf).await?;
        let client_name = self.client_name(&p.client_id).await?;
        let view = |p: PendingAuthorization| PendingView { pending: p, client_name: client_name.clone(), csrf: None };
        let wrong = "Unknown workspace, e-mail or password.".to_owned();
        if p.failed_logins >= MAX_FAILED_LOGINS {
            return Err(AuthorizeError::Page(OAuthError::new(
                "access_denied",
                "too many failed sign-ins; start again from your app",
            )));
        }
        let login = match self.check_password(tenant, email, password_given, source).await? {
            PasswordCheck::Limited(secs) => {
                return Ok(LoginOutcome::Retry(view(p), format!("Too many attempts. Wait {secs} seconds and try again.")));
            }
            PasswordCheck::Unavailable => {
                return Ok(LoginOutcome::Retry(view(p), "Sign-in is briefly unavailable. Try again in a few seconds.".into()));
            }
            PasswordCheck::Wrong => None,
            PasswordCheck::Ok(login) => Some(login),
        };
        let Some(login) = login else {
            tracing::info!("sign-in refused");
            p.failed_logins += 1;
            let failed = p.failed_logins;
            self.backend.records.put_pending(&p, Some(v)).await?;
            if failed >= MAX_FAILED_LOGINS {
                return Err(AuthorizeError::Page(OAuthError::new(
                    "access_denied",
                    "too many failed sign-ins; start again from your app",
                )));
            }
            return Ok(LoginOutcome::Retry(view(p), wrong));
        };
        let client = self.backend.records.get_client(&p.client_id).await?;
        if client.and_then(|c| c.tenant).is_some_and(|t| t != login.tenant) {
            return Ok(LoginOutcome::Retry(view(p), "This application belongs to another workspace.".into()));
        }
        p.user = Some((login.tenant.clone(), login.principal.clone()));
        self.backend.records.put_pending(&p, Some(v)).await?;
        tracing::info!(tenant = %login.tenant, principal = %login.principal, "signed in for consent");
        Ok(LoginOutcome::Consent(view(p)))
    }

    async fn client_name(&self, id: &Id) -> Result<String> {
        Ok(self.backend.records.get_client(id).await?.map_or_else(|| "Unknown client".to_owned(), |c| c.client_name))
    }

    /// The consent decision. Returns where to send the browser.
    ///
    /// # Errors
    /// [`AuthorizeError::Page`] for an expired, forged or not-signed-in form.
    pub async fn consent(
        &self,
        base: &str,
        pending_id: &str,
        csrf: &str,
        approve: bool,
    ) -> std::result::Result<String, AuthorizeError> {
        let (p, v) = self.pending(pending_id, csrf).await?;
        let (tenant, principal) =
            p.user.clone().ok_or_else(|| AuthorizeError::Page(OAuthError::new("invalid_request", "sign in first")))?;
        // One decision per pending login, even if the form is posted twice.
        self.backend.records.take_pending(&p.id, v).await.map_err(|e| {
            if e.code == ErrorCode::Conflict {
                AuthorizeError::Page(OAuthError::new("invalid_request", "this sign-in was already completed"))
            } else {
                e.into()
            }
        })?;
        let issuer = issuer_of(base);
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if !approve {
            pairs.push(("error", "access_denied".into()));
            pairs.push(("error_description", "the user declined".into()));
        } else {
            let role = self.backend.records.get_principal(&tenant, &principal).await?.map(|pr| pr.role);
            let Some(role) = role else {
                return Err(AuthorizeError::Page(OAuthError::new("access_denied", "the user no longer exists")));
            };
            let allowed = role.allowed_scopes();
            let scopes = Scopes(p.scopes.0.iter().copied().filter(|s| allowed.contains(*s)).collect());
            if scopes.0.is_empty() {
                pairs.push(("error", "invalid_scope".into()));
                pairs.push(("error_description", "your role allows none of the requested scopes".into()));
            } else {
                let code = crate::random_token(32);
                let record = AuthCode {
                    grant: Grant {
                        tenant: tenant.clone(),
                        principal: principal.clone(),
                        client_id: p.client_id.clone(),
                        scopes,
                        resource: p.resource.clone(),
                        teams: vec![],
                        projects: vec![],
                    },
                    redirect_uri: p.redirect_uri.clone(),
                    code_challenge: p.code_challenge.clone(),
                    expires_at: self.now().plus_millis(AUTH_CODE_TTL_SECS * 1000),
                    redeemed_at: None,
                    family: None,
                    redirect_uri_explicit: p.redirect_uri_explicit,
                };
                self.backend.records.create_code(&sha256_hex(&code), &record).await?;
                tracing::info!(tenant = %tenant, principal = %principal, client_id = %p.client_id, "authorization granted");
                pairs.push(("code", code));
            }
        }
        if let Some(s) = &p.state {
            pairs.push(("state", s.clone()));
        }
        pairs.push(("iss", issuer));
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Ok(append_query(&p.redirect_uri, &borrowed))
    }

    // ---- token endpoint ------------------------------------------------------------

    /// The token endpoint.
    ///
    /// # Errors
    /// RFC 6749 §5.2 errors.
    pub async fn token(&self, base: &str, params: &Params, creds: &ClientCredentials) -> OResult<TokenResponse> {
        let grant_type = params.require("grant_type")?;
        let grant = GrantType::parse(grant_type)
            .map_err(|_| OAuthError::new("unsupported_grant_type", format!("grant_type {grant_type:?} is not supported")))?;
        let client = self.authenticate_client(params, creds).await?;
        if !client.allows_grant(grant) {
            return Err(OAuthError::new("unauthorized_client", format!("this client may not use {grant}")));
        }
        match grant {
            GrantType::AuthorizationCode => self.grant_code(base, params, &client).await,
            GrantType::RefreshToken => self.grant_refresh(base, params, &client).await,
            GrantType::ClientCredentials => self.grant_client_credentials(base, params, &client).await,
            GrantType::JwtBearer => self.grant_jwt_bearer(base, params, &client).await,
        }
    }

    fn new_refresh(&self, family: &RefreshFamily, grant: &Grant) -> (String, RefreshToken) {
        let now = self.now();
        let record = RefreshToken {
            family: family.id.clone(),
            grant: grant.clone(),
            issued_at: now,
            expires_at: now.plus_millis(REFRESH_TOKEN_TTL_SECS * 1000),
            rotated_at: None,
        };
        (crate::random_token(32), record)
    }

    /// The access token (offered the client's toolsets as they are now) and the response.
    async fn access_response(
        &self,
        base: &str,
        grant: &Grant,
        client: &OAuthClient,
        refresh_token: Option<String>,
    ) -> OResult<TokenResponse> {
        let (access, ttl) = self.tokens.issue(base, grant, &client.toolsets).await.map_err(OAuthError::from)?;
        Ok(TokenResponse {
            access_token: access,
            token_type: "Bearer",
            expires_in: ttl,
            refresh_token,
            scope: grant.scopes.to_oauth_string(),
        })
    }

    fn new_family(&self, grant: &Grant) -> OResult<RefreshFamily> {
        Ok(RefreshFamily {
            id: Id::new(crate::random_token(16)).map_err(OAuthError::from)?,
            client_id: grant.client_id.clone(),
            tenant: grant.tenant.clone(),
            created_at: self.now(),
            revoked_at: None,
            revoked_reason: None,
        })
    }

    async fn grant_code(&self, base: &str, params: &Params, client: &OAuthClient) -> OResult<TokenResponse> {
        let code = params.require("code")?;
        let verifier = params.require("code_verifier")?;
        let redirect_uri = params.get("redirect_uri");
        let invalid = |d: &str| OAuthError::new("invalid_grant", d.to_owned());
        let unknown = "unknown, expired or used authorization code";
        if !valid_verifier(verifier) {
            return Err(OAuthError::new("invalid_request", "code_verifier must be 43-128 unreserved characters"));
        }
        if code.len() > 256 {
            return Err(invalid(unknown));
        }
        let digest = sha256_hex(code);
        let records = &self.backend.records;
        let rec = records.get_code(&digest).await.map_err(OAuthError::from)?.ok_or_else(|| invalid(unknown))?;
        let g = rec.grant.clone();
        let family = self.new_family(&g)?;
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        let problem = if rec.redeemed_at.is_some() || rec.expires_at < self.now() {
            Some(unknown)
        } else if g.client_id != client.client_id {
            Some("the code was issued to another client")
        } else if redirect_uri.is_some_and(|u| u != rec.redirect_uri) || (redirect_uri.is_none() && rec.redirect_uri_explicit) {
            Some("redirect_uri does not match the authorization request")
        } else if !ct_eq(&challenge, &rec.code_challenge) {
            Some("PKCE verification failed")
        } else if params.get("resource").is_some_and(|r| r != g.resource) {
            Some("resource does not match the authorization request")
        } else {
            None
        };
        if let Some(p) = problem {
            // A code gets one presentation, right or wrong: spend it now (a second
            // presentation of a spent code revokes what the first one issued).
            if let Redemption::Redeemed(_) =
                records.redeem_code(&digest, self.now(), &family, None).await.map_err(OAuthError::from)?
            {
                records.revoke_family(&family.id, "invalid_redemption", self.now()).await.map_err(OAuthError::from)?;
            }
            if rec.redeemed_at.is_some() {
                tracing::warn!(client_id = %client.client_id, "authorization code reused; what it issued is revoked");
            }
            return Err(invalid(p));
        }
        let refresh = client.allows_grant(GrantType::RefreshToken).then(|| self.new_refresh(&family, &g));
        let refresh_digest = refresh.as_ref().map(|(t, _)| sha256_hex(t));
        let first = match (&refresh_digest, &refresh) {
            (Some(d), Some((_, r))) => Some((d.as_str(), r)),
            _ => None,
        };
        let spent = records.redeem_code(&digest, self.now(), &family, first).await.map_err(OAuthError::from)?;
        if !matches!(spent, Redemption::Redeemed(_)) {
            return Err(invalid(unknown));
        }
        let resp = self.access_response(base, &g, client, refresh.map(|(t, _)| t)).await?;
        tracing::info!(tenant = %g.tenant, principal = %g.principal, client_id = %client.client_id, "tokens issued (authorization_code)");
        Ok(resp)
    }

    async fn grant_refresh(&self, base: &str, params: &Params, client: &OAuthClient) -> OResult<TokenResponse> {
        let presented = params.require("refresh_token")?;
        let invalid = || OAuthError::new("invalid_grant", "unknown, expired or revoked refresh token");
        if presented.len() > 256 {
            return Err(invalid());
        }
        let digest = sha256_hex(presented);
        let current = self.backend.records.get_refresh(&digest).await.map_err(OAuthError::from)?.ok_or_else(invalid)?;
        if current.grant.client_id != client.client_id {
            return Err(invalid());
        }
        if current.expires_at < self.now() {
            return Err(invalid());
        }
        // Re-check who the grant is for: a principal that is gone gets nothing, and the
        // scopes never exceed what its role and the client allow today.
        let mut stored = current.grant.clone();
        let role = self
            .backend
            .records
            .get_principal(&stored.tenant, &stored.principal)
            .await
            .map_err(OAuthError::from)?
            .map(|p| p.role);
        let Some(role) = role else { return Err(invalid()) };
        let allowed = role.allowed_scopes();
        stored.scopes = Scopes(
            stored.scopes.0.iter().copied().filter(|s| allowed.contains(*s) && client.allowed_scopes.contains(*s)).collect(),
        );
        if stored.scopes.0.is_empty() {
            return Err(OAuthError::new("invalid_scope", "none of the granted scopes is allowed any more"));
        }
        // A `scope` parameter narrows this access token only; the successor refresh token
        // keeps the grant (RFC 6749 §6).
        let mut grant = stored.clone();
        if let Some(s) = params.get("scope") {
            let narrowed = Scopes::parse(s).map_err(|_| OAuthError::new("invalid_scope", "unknown scope"))?;
            if narrowed.0.iter().any(|x| !stored.scopes.contains(*x)) {
                return Err(OAuthError::new("invalid_scope", "a refresh may only narrow the granted scopes"));
            }
            grant.scopes = narrowed;
        }
        if params.get("resource").is_some_and(|r| r != grant.resource) {
            return Err(OAuthError::new("invalid_target", "resource does not match the original grant"));
        }
        let family = self.backend.records.get_family(&current.family).await.map_err(OAuthError::from)?.ok_or_else(invalid)?;
        let (token, record) = self.new_refresh(&family, &stored);
        match self
            .backend
            .records
            .rotate_refresh(&digest, self.now(), &sha256_hex(&token), &record)
            .await
            .map_err(OAuthError::from)?
        {
            Rotation::Rotated(_) => {
                tracing::info!(tenant = %grant.tenant, client_id = %client.client_id, "tokens refreshed");
                self.access_response(base, &grant, client, Some(token)).await
            }
            Rotation::Reused(_) => {
                tracing::warn!(tenant = %grant.tenant, client_id = %client.client_id, family = %family.id, "refresh token reuse: family revoked");
                Err(invalid())
            }
            Rotation::Revoked(_) | Rotation::Unknown => Err(invalid()),
        }
    }

    async fn tenant_plan(&self, tenant: &TenantId) -> OResult<PlanTier> {
        let t = self.auth.tenant_config(tenant).await.map_err(OAuthError::from)?;
        t.map(|t| t.plan).ok_or_else(|| OAuthError::new("invalid_client", "the client's tenant no longer exists"))
    }

    /// The requested scopes the client may have (RFC 6749 §3.3: the server may grant
    /// less than asked, and says so in the response's `scope`); all allowed ones when
    /// none is asked for.
    fn requested_scopes(params: &Params, allowed: &Scopes) -> OResult<Scopes> {
        match params.get("scope") {
            None => Ok(allowed.clone()),
            Some(s) => {
                let req = Scopes::parse(s).map_err(|_| OAuthError::new("invalid_scope", "unknown scope"))?;
                let granted = Scopes(req.0.intersection(&allowed.0).copied().collect());
                if granted.0.is_empty() {
                    return Err(OAuthError::new("invalid_scope", "this client may have none of the requested scopes"));
                }
                Ok(granted)
            }
        }
    }

    async fn grant_client_credentials(&self, base: &str, params: &Params, client: &OAuthClient) -> OResult<TokenResponse> {
        let tenant = client
            .tenant
            .clone()
            .ok_or_else(|| OAuthError::new("unauthorized_client", "this client is not bound to a tenant"))?;
        if !client.is_confidential() {
            return Err(OAuthError::new("unauthorized_client", "client_credentials needs a confidential client"));
        }
        self.tenant_plan(&tenant).await?;
        let resource = self.check_resource(base, params.get("resource"))?;
        let scopes = Self::requested_scopes(params, &client.allowed_scopes)?;
        let grant = Grant {
            tenant: tenant.clone(),
            principal: client.client_id.clone(),
            client_id: client.client_id.clone(),
            scopes,
            resource,
            teams: vec![],
            projects: vec![],
        };
        let resp = self.access_response(base, &grant, client, None).await?;
        tracing::info!(tenant = %tenant, client_id = %client.client_id, "tokens issued (client_credentials)");
        Ok(resp)
    }

    async fn grant_jwt_bearer(&self, base: &str, params: &Params, client: &OAuthClient) -> OResult<TokenResponse> {
        let assertion = params.require("assertion")?;
        let tenant_id = client
            .tenant
            .clone()
            .ok_or_else(|| OAuthError::new("unauthorized_client", "enterprise sign-in needs a client bound to a tenant"))?;
        if !client.is_confidential() {
            return Err(OAuthError::new("unauthorized_client", "enterprise sign-in needs a confidential client"));
        }
        let tenant = self
            .auth
            .tenant_config(&tenant_id)
            .await
            .map_err(OAuthError::from)?
            .ok_or_else(|| OAuthError::new("invalid_client", "the client's tenant no longer exists"))?;
        if tenant.plan != PlanTier::Enterprise {
            return Err(OAuthError::new("unauthorized_client", "enterprise sign-in (ID-JAG) needs the enterprise plan"));
        }
        let resource = self.check_resource(base, params.get("resource"))?;
        let a = self
            .idp
            .verify(&self.backend, assertion, &tenant, client.client_id.as_str(), &issuer_of(base), &resource, self.now())
            .await?;
        // The user: a local login with the asserted e-mail, else a member principal
        // named after the IdP subject (created on first sign-in).
        // A local account is linked only through an e-mail the IdP says it verified;
        // otherwise the user is a member principal named after the IdP subject.
        let by_email = match (&a.email, a.email_verified) {
            (Some(e), true) => self.backend.records.get_login(&tenant.id, e).await.map_err(OAuthError::from)?,
            _ => None,
        };
        let principal = match by_email {
            Some(l) if !l.disabled => l.principal,
            Some(_) => return Err(OAuthError::new("invalid_grant", "this user is disabled")),
            None => {
                let id = Id::new(format!("sso-{}", &sha256_hex(&format!("{}\n{}", a.issuer, a.subject))[..32]))
                    .map_err(OAuthError::from)?;
                let p = Principal {
                    tenant: tenant.id.clone(),
                    id: id.clone(),
                    kind: PrincipalKind::User,
                    role: Role::Member,
                    display_name: a.email.clone().unwrap_or_else(|| a.subject.chars().take(100).collect()),
                    created_at: self.now(),
                };
                match self.backend.records.create_principal(&p).await {
                    Ok(()) => {}
                    Err(e) if e.code == ErrorCode::Conflict => {}
                    Err(e) => return Err(e.into()),
                }
                id
            }
        };
        let role = self
            .backend
            .records
            .get_principal(&tenant.id, &principal)
            .await
            .map_err(OAuthError::from)?
            .map(|p| p.role)
            .ok_or_else(|| OAuthError::new("invalid_grant", "the user no longer exists"))?;
        let allowed = Scopes(role.allowed_scopes().0.intersection(&client.allowed_scopes.0).copied().collect());
        let mut scopes = Self::requested_scopes(params, &allowed)?;
        if let Some(asserted) = a.scope.as_deref() {
            // The IdP's scope bounds the grant; words we do not know (`openid`…) grant nothing.
            let known: std::collections::BTreeSet<Scope> =
                asserted.split_whitespace().filter_map(|w| Scope::parse(w).ok()).collect();
            scopes = Scopes(scopes.0.intersection(&known).copied().collect());
        }
        if scopes.0.is_empty() {
            return Err(OAuthError::new("invalid_scope", "no requested scope is allowed"));
        }
        let grant = Grant {
            tenant: tenant.id.clone(),
            principal,
            client_id: client.client_id.clone(),
            scopes,
            resource,
            teams: vec![],
            projects: vec![],
        };
        let resp = self.access_response(base, &grant, client, None).await?;
        tracing::info!(tenant = %tenant.id, client_id = %client.client_id, "tokens issued (jwt-bearer ID-JAG)");
        Ok(resp)
    }

    // ---- revocation ----------------------------------------------------------------

    /// RFC 7009: revoking a refresh token revokes its family. Unknown tokens and access
    /// tokens (which expire within the hour and are not tracked) answer success too.
    ///
    /// # Errors
    /// `invalid_client`, `invalid_request`, `temporarily_unavailable`.
    pub async fn revoke(&self, params: &Params, creds: &ClientCredentials) -> OResult<()> {
        let client = self.authenticate_client(params, creds).await?;
        let token = params.require("token")?;
        if token.len() > 256 {
            return Ok(());
        }
        if let Some(rt) = self.backend.records.get_refresh(&sha256_hex(token)).await.map_err(OAuthError::from)?
            && rt.grant.client_id == client.client_id
        {
            self.backend.records.revoke_family(&rt.family, "revoked_by_client", self.now()).await.map_err(OAuthError::from)?;
            tracing::info!(client_id = %client.client_id, "refresh family revoked by the client");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
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
