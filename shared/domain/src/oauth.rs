//! OAuth 2.1 records (SPEC §3.3): clients, user logins, authorization codes, refresh
//! tokens and their families, trusted identity providers.
//!
//! No secret is ever stored: client secrets, codes and refresh tokens carry 256 bits of
//! randomness and are stored as SHA-256 digests; passwords as argon2id PHC strings.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{Id, TenantId, Timestamp};
use crate::principal::{Role, Scopes};
use crate::tenant::string_enum;

/// Access tokens live one hour.
pub const ACCESS_TOKEN_TTL_SECS: i64 = 3600;
/// Refresh tokens live thirty days.
pub const REFRESH_TOKEN_TTL_SECS: i64 = 30 * 24 * 3600;
/// Authorization codes live one minute and are single use.
pub const AUTH_CODE_TTL_SECS: i64 = 60;
/// A login/consent page must be completed within ten minutes.
pub const PENDING_AUTHORIZATION_TTL_SECS: i64 = 600;
/// The JWT-bearer grant type of an identity assertion (ID-JAG).
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// The `typ` header an Identity Assertion JWT must carry.
pub const ID_JAG_TYP: &str = "oauth-id-jag+jwt";

string_enum! {
    /// How a client authenticates at the token endpoint (RFC 7591 `token_endpoint_auth_method`).
    ClientAuthMethod, "token_endpoint_auth_method" {
        None = "none",
        ClientSecretBasic = "client_secret_basic",
        ClientSecretPost = "client_secret_post",
    }
}

string_enum! {
    /// OAuth grant types this server implements.
    GrantType, "grant_type" {
        AuthorizationCode = "authorization_code",
        RefreshToken = "refresh_token",
        ClientCredentials = "client_credentials",
        JwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer",
    }
}

/// A registered OAuth client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthClient {
    pub client_id: Id,
    pub client_name: String,
    pub redirect_uris: Vec<String>,
    pub grant_types: Vec<GrantType>,
    pub auth_method: ClientAuthMethod,
    /// SHA-256 (hex) of the client secret; `None` for public clients.
    pub secret_sha256: Option<String>,
    /// The scopes this client may ever be granted.
    pub allowed_scopes: Scopes,
    /// Confidential service clients are bound to one tenant (`client_credentials`).
    pub tenant: Option<TenantId>,
    /// Registered through RFC 7591 (never `approvals:decide` or `admin`).
    pub dynamic: bool,
    pub created_at: Timestamp,
    /// The MCP toolsets the client's access tokens are offered (`canonical` unless an
    /// operator enabled more: `continuity client toolsets`).
    #[serde(default)]
    pub toolsets: crate::principal::Toolsets,
    /// For a client described by a Client ID Metadata Document: the document's URL (its
    /// `client_id` on the wire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_url: Option<String>,
}

impl OAuthClient {
    pub fn allows_grant(&self, grant: GrantType) -> bool {
        self.grant_types.contains(&grant)
    }

    pub fn is_confidential(&self) -> bool {
        self.secret_sha256.is_some()
    }
}

/// A user's password login within a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserLogin {
    pub tenant: TenantId,
    /// Lower-cased e-mail address.
    pub email: String,
    pub principal: Id,
    pub role: Role,
    /// argon2id PHC string.
    pub password_hash: String,
    pub created_at: Timestamp,
    pub disabled: bool,
}

impl Role {
    /// The scopes a user of this role may hold. Owners and admins hold everything,
    /// approvers everything but `admin`, members the everyday scopes.
    pub fn allowed_scopes(self) -> Scopes {
        use crate::principal::Scope;
        let all = Scopes::all();
        match self {
            Self::Owner | Self::Admin => all,
            Self::Approver => Scopes(all.0.into_iter().filter(|s| *s != Scope::Admin).collect()),
            Self::Member => Scopes(all.0.into_iter().filter(|s| s.grantable_to_mcp_client()).collect()),
        }
    }
}

/// Who an authorization was granted to: what the code and the refresh family carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub tenant: TenantId,
    pub principal: Id,
    pub client_id: Id,
    pub scopes: Scopes,
    /// The RFC 8707 resource the tokens are for (their `aud`).
    pub resource: String,
    pub teams: Vec<String>,
    pub projects: Vec<String>,
}

/// A single-use authorization code (stored under its digest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthCode {
    pub grant: Grant,
    pub redirect_uri: String,
    /// BASE64URL(SHA256(code_verifier)), S256 only.
    pub code_challenge: String,
    pub expires_at: Timestamp,
    /// Set when redeemed; a second redemption is refused and revokes what the first issued.
    pub redeemed_at: Option<Timestamp>,
    /// The refresh family the redemption started, so that reuse can revoke it.
    pub family: Option<Id>,
    /// Whether the authorization request named the redirect URI (then the token
    /// request must repeat it, RFC 6749 §4.1.3).
    #[serde(default = "yes")]
    pub redirect_uri_explicit: bool,
}

fn yes() -> bool {
    true
}

/// One refresh token (stored under its digest). Rotation marks it `rotated_at` and
/// issues a successor in the same family; presenting a rotated token revokes the family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshToken {
    pub family: Id,
    pub grant: Grant,
    pub issued_at: Timestamp,
    pub expires_at: Timestamp,
    pub rotated_at: Option<Timestamp>,
}

/// A refresh family: every token descended from one authorization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshFamily {
    pub id: Id,
    pub client_id: Id,
    pub tenant: TenantId,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
    /// Why it was revoked (`reuse_detected`, `revoked_by_client`, `code_reuse`).
    pub revoked_reason: Option<String>,
}

/// A login + consent in progress (between `GET /oauth/authorize` and the redirect).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingAuthorization {
    pub id: Id,
    /// SHA-256 of the CSRF token held by the browser (cookie + form field).
    pub csrf_sha256: String,
    pub client_id: Id,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
    pub scopes: Scopes,
    pub resource: String,
    /// Set once the user has signed in, before consent.
    pub user: Option<(TenantId, Id)>,
    pub expires_at: Timestamp,
    /// Whether the request named the redirect URI.
    #[serde(default = "yes")]
    pub redirect_uri_explicit: bool,
    /// Failed sign-ins on this page; at [`MAX_FAILED_LOGINS`] it is used up.
    #[serde(default)]
    pub failed_logins: u32,
}

/// Failed sign-ins one login page allows before it must be started again.
pub const MAX_FAILED_LOGINS: u32 = 5;

/// An identity provider a tenant trusts for enterprise sign-in (ID-JAG, SPEC §3.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustedIdp {
    /// The IdP's `iss`, compared exactly.
    pub issuer: String,
    /// Where its signing keys are published.
    pub jwks_uri: Option<String>,
    /// Or the keys themselves (a JWK Set), for IdPs whose JWKS is not reachable from here.
    pub jwks: Option<serde_json::Value>,
    /// IdP group → team: a user whose assertion lists the group (its `groups` claim)
    /// is signed in as a member of the team, besides the teams it has here.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub group_teams: std::collections::BTreeMap<String, String>,
}

/// The most group mappings one trusted IdP holds (they live in the tenant's record).
pub const MAX_GROUP_MAPPINGS: usize = 32;

impl TrustedIdp {
    /// The teams `groups` map to, sorted, each once.
    pub fn teams_of(&self, groups: &[String]) -> Vec<String> {
        let teams: std::collections::BTreeSet<&String> = groups.iter().filter_map(|g| self.group_teams.get(g)).collect();
        teams.into_iter().cloned().collect()
    }
}

impl TrustedIdp {
    /// # Errors
    /// `INVALID_REQUEST` when the issuer is not an https URL (http only on loopback) or
    /// neither or both key sources are given.
    pub fn validate(&self) -> Result<(), Error> {
        if !is_secure_url(&self.issuer) {
            return Err(Error::invalid_field("issuer", "must be an https URL (http only for localhost)"));
        }
        if self.group_teams.len() > MAX_GROUP_MAPPINGS {
            return Err(Error::invalid_field("group_teams", format!("at most {MAX_GROUP_MAPPINGS} mappings")));
        }
        for (group, team) in &self.group_teams {
            if group.is_empty() || group.len() > 128 || group.chars().any(char::is_control) {
                return Err(Error::invalid_field("group_teams", "a group name is 1-128 bytes without control characters"));
            }
            crate::Id::new(team.clone()).map_err(|_| {
                Error::invalid_field(
                    "group_teams",
                    format!("{:?} is not a valid team name", team.chars().take(64).collect::<String>()),
                )
            })?;
        }
        match (&self.jwks_uri, &self.jwks) {
            (Some(u), None) if is_secure_url(u) => Ok(()),
            (Some(_), None) => Err(Error::invalid_field("jwks_uri", "must be an https URL (http only for localhost)")),
            (None, Some(v)) if v.get("keys").is_some_and(serde_json::Value::is_array) => Ok(()),
            (None, Some(_)) => Err(Error::invalid_field("jwks", "must be a JWK Set with a keys array")),
            _ => Err(Error::invalid_field("jwks", "give exactly one of jwks_uri or jwks")),
        }
    }
}

/// `https://…`, or `http://` on a loopback host (development and tests).
pub fn is_secure_url(raw: &str) -> bool {
    if let Some(rest) = raw.strip_prefix("https://") {
        return !rest.is_empty() && !rest.starts_with('/');
    }
    raw.strip_prefix("http://").is_some_and(|rest| {
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = host.rsplit_once(':').map_or(host, |(h, p)| if p.bytes().all(|b| b.is_ascii_digit()) { h } else { host });
        matches!(host, "localhost" | "127.0.0.1" | "[::1]")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::Scope;

    #[test]
    fn roles_bound_scopes() {
        assert!(Role::Owner.allowed_scopes().contains(Scope::Admin));
        assert!(!Role::Approver.allowed_scopes().contains(Scope::Admin));
        assert!(Role::Approver.allowed_scopes().contains(Scope::ApprovalsDecide));
        assert!(!Role::Member.allowed_scopes().contains(Scope::ApprovalsDecide));
        assert!(Role::Member.allowed_scopes().contains(Scope::MemoryWrite));
    }

    #[test]
    fn secure_urls() {
        for ok in [
            "https://idp.example.com",
            "https://idp.example.com/x",
            "http://localhost:9/x",
            "http://127.0.0.1",
            "http://[::1]:80/",
        ] {
            assert!(is_secure_url(ok), "{ok}");
        }
        for bad in ["http://idp.example.com", "https://", "ftp://x", "http://localhost.evil.com/", "http://127.0.0.1.nip.io"] {
            assert!(!is_secure_url(bad), "{bad}");
        }
    }

    #[test]
    fn idps_need_one_key_source() {
        let mut idp =
            TrustedIdp { issuer: "https://idp.example.com".into(), jwks_uri: None, jwks: None, group_teams: Default::default() };
        assert!(idp.validate().is_err());
        idp.jwks = Some(serde_json::json!({"keys": []}));
        assert!(idp.validate().is_ok());
        idp.jwks_uri = Some("https://idp.example.com/jwks".into());
        assert!(idp.validate().is_err());
        idp.jwks = None;
        assert!(idp.validate().is_ok());
        idp.issuer = "http://idp.example.com".into();
        assert!(idp.validate().is_err());
    }
}
