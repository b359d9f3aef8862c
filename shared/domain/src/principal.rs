//! Principals, roles, scopes and API keys (SPEC §3.2).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{Id, TenantId, Timestamp};
use crate::tenant::{PlanTier, string_enum};

string_enum! {
    /// A user's role within a tenant.
    Role, "role" { Owner = "owner", Admin = "admin", Approver = "approver", Member = "member" }
}

string_enum! {
    /// OAuth scopes. `approvals:decide` and `admin` are never granted to an MCP client registration.
    Scope, "scope" {
        McpTools = "mcp:tools",
        McpResources = "mcp:resources",
        TenantRead = "tenant:read",
        TenantWrite = "tenant:write",
        MemoryRead = "memory:read",
        MemoryWrite = "memory:write",
        ApprovalsDecide = "approvals:decide",
        Admin = "admin",
    }
}

impl Scope {
    /// Whether an MCP client registration may ever be granted this scope.
    pub const fn grantable_to_mcp_client(self) -> bool {
        !matches!(self, Self::ApprovalsDecide | Self::Admin)
    }
}

/// A set of scopes, parsed from a space- or comma-separated list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scopes(pub BTreeSet<Scope>);

impl Scopes {
    /// Parses `"mcp:tools tenant:read"` or `"mcp:tools,tenant:read"`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` on an unknown scope or an empty list.
    pub fn parse(raw: &str) -> Result<Self, Error> {
        let mut set = BTreeSet::new();
        for part in raw.split(|c: char| c == ',' || c.is_whitespace()).filter(|p| !p.is_empty()) {
            set.insert(Scope::parse(part)?);
        }
        if set.is_empty() {
            return Err(Error::invalid_field("scopes", "at least one scope is required"));
        }
        Ok(Self(set))
    }

    /// Every scope: what an owner key gets.
    pub fn all() -> Self {
        Self(Scope::ALL.iter().copied().collect())
    }

    pub fn contains(&self, scope: Scope) -> bool {
        self.0.contains(&scope)
    }

    /// # Errors
    /// `FORBIDDEN` (insufficient scope) naming the missing scope.
    pub fn require(&self, scope: Scope) -> Result<(), Error> {
        if self.contains(scope) { Ok(()) } else { Err(Error::missing_scope(scope.as_str())) }
    }

    /// Space-separated, as OAuth writes scopes.
    pub fn to_oauth_string(&self) -> String {
        self.0.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
    }
}

string_enum! {
    /// Sets of MCP tools a credential may be offered: the `canonical` tools, the `graph`
    /// tools compatible with the reference knowledge-graph memory server, and the
    /// `engineering` tools of coding agents (gates).
    Toolset, "toolset" { Canonical = "canonical", Graph = "graph", Engineering = "engineering" }
}

/// The toolsets a credential enables; `canonical` alone unless said otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toolsets(pub BTreeSet<Toolset>);

impl Default for Toolsets {
    fn default() -> Self {
        Self([Toolset::Canonical].into_iter().collect())
    }
}

impl Toolsets {
    /// Parses `"canonical,graph"` (comma- or space-separated).
    ///
    /// # Errors
    /// `INVALID_REQUEST` for an unknown toolset or an empty list.
    pub fn parse(raw: &str) -> Result<Self, Error> {
        let set: BTreeSet<Toolset> = raw
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty())
            .map(Toolset::parse)
            .collect::<Result<_, _>>()?;
        if set.is_empty() {
            return Err(Error::invalid_field("toolsets", "at least one toolset is required"));
        }
        Ok(Self(set))
    }

    pub fn contains(&self, t: Toolset) -> bool {
        self.0.contains(&t)
    }

    pub fn to_list_string(&self) -> String {
        self.0.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(",")
    }
}

string_enum! {
    /// What kind of principal acts.
    PrincipalKind, "principal_kind" { User = "user", Client = "client", Service = "service" }
}

/// Someone or something that acts within a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub tenant: TenantId,
    pub id: Id,
    pub kind: PrincipalKind,
    pub role: Role,
    pub display_name: String,
    pub created_at: Timestamp,
    /// Teams whose team memory this user reads (and whose team scope it may write to
    /// where its scopes allow): carried by the access tokens it signs in for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub teams: Vec<String>,
    /// Projects it belongs to (project memory, the engineering records).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<String>,
    /// A disabled user (kept with its login's flag): no consent, no refresh.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
}

/// The most teams (or projects) one principal or key belongs to, and the most bytes
/// their names take together: they ride in every access token, which must stay small.
pub const MAX_MEMBERSHIPS: usize = 64;
pub const MAX_MEMBERSHIP_BYTES: usize = 1024;

/// Checks a list of team or project names (`field` names the list in the error): each
/// a valid id, at most [`MAX_MEMBERSHIPS`] names of [`MAX_MEMBERSHIP_BYTES`] together;
/// returns them sorted, each once.
///
/// # Errors
/// `INVALID_REQUEST` naming the first bad name.
pub fn memberships(field: &str, names: Vec<String>) -> Result<Vec<String>, Error> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for name in names {
        let name = name.trim().to_owned();
        if Id::new(name.clone()).is_err() {
            return Err(Error::invalid_field(
                field,
                format!(
                    "{:?} is not a valid name (1-128 characters, no spaces, '#' or '/')",
                    name.chars().take(64).collect::<String>()
                ),
            ));
        }
        out.push(name);
    }
    out.sort();
    out.dedup();
    if out.len() > MAX_MEMBERSHIPS || out.iter().map(String::len).sum::<usize>() > MAX_MEMBERSHIP_BYTES {
        return Err(Error::invalid_field(
            field,
            format!("at most {MAX_MEMBERSHIPS} names of {MAX_MEMBERSHIP_BYTES} bytes together"),
        ));
    }
    Ok(out)
}

/// A stored API key. The secret itself is never stored: only its SHA-256 digest, and
/// keys carry 256 bits of randomness, so a fast hash is safe here (unlike passwords).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyRecord {
    pub tenant: TenantId,
    pub key_id: Id,
    pub principal: Id,
    pub scopes: Scopes,
    /// Teams and projects this key may read in team/project memory scopes.
    pub teams: Vec<String>,
    pub projects: Vec<String>,
    /// Lower-case hex SHA-256 of the secret part.
    pub secret_sha256: String,
    /// The MCP toolsets this key is offered.
    #[serde(default)]
    pub toolsets: Toolsets,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
    /// A name for people (`continuity setup` names a client's key after the client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The authenticated caller of a request, as the gateway injects it (SPEC §3.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerContext {
    pub tenant: TenantId,
    pub principal: Id,
    pub scopes: Scopes,
    pub plan: PlanTier,
    pub teams: Vec<String>,
    pub projects: Vec<String>,
    /// How the caller authenticated, for the audit ledger (`api_key:<id>`, `jwt:<jti>`).
    pub credential: String,
    /// The MCP toolsets offered to this caller.
    pub toolsets: Toolsets,
    /// The client acting, for people: the API key's name (`continuity setup` names each
    /// client's key after it: `claude-code`), when it has one.
    pub client: Option<String>,
}

impl CallerContext {
    /// Who owns what this caller opens (an MCP session): the tenant, the principal and
    /// the credential without its per-token part — the API key, or the OAuth client
    /// (`jwt:{client}:{jti}` → `jwt:{client}`), so a refreshed token keeps its sessions.
    /// Which client acted, for the audit ledger and proposals: the key's name and id
    /// (`claude-code (api_key:k1)`), else the credential without its per-token part
    /// (`api_key:k1`, `jwt:{client}`, `console`).
    pub fn via(&self) -> String {
        let credential = match self.credential.strip_prefix("jwt:") {
            Some(rest) => format!("jwt:{}", rest.rsplit_once(':').map_or(rest, |(client, _)| client)),
            None => self.credential.clone(),
        };
        match &self.client {
            Some(name) => format!("{name} ({credential})"),
            None => credential,
        }
    }

    pub fn session_owner(&self) -> String {
        let credential = match self.credential.strip_prefix("jwt:") {
            Some(rest) => format!("jwt:{}", rest.rsplit_once(':').map_or(rest, |(client, _)| client)),
            None => self.credential.clone(),
        };
        format!("{}\n{}\n{credential}", self.tenant, self.principal)
    }
}

impl std::str::FromStr for Scopes {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl std::str::FromStr for Toolsets {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memberships_are_checked_sorted_and_bounded() {
        let names = |v: &[&str]| v.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        assert_eq!(memberships("teams", names(&["sales", " core", "sales"])).unwrap(), ["core", "sales"]);
        for bad in ["", "two words", "a/b", "a#b", "é"] {
            let e = memberships("teams", names(&[bad])).unwrap_err();
            assert!(e.message.contains("not a valid name"), "{bad:?}: {}", e.message);
        }
        let many: Vec<String> = (0..=MAX_MEMBERSHIPS).map(|i| format!("t{i}")).collect();
        assert!(memberships("teams", many).is_err(), "too many names");
        let long: Vec<String> = (0..9).map(|i| format!("{i}{}", "x".repeat(127))).collect();
        assert!(memberships("projects", long).is_err(), "too many bytes for a token");
    }

    #[test]
    fn scopes_parse_both_separators() {
        let s = Scopes::parse("mcp:tools, tenant:read memory:read").unwrap();
        assert!(s.contains(Scope::McpTools) && s.contains(Scope::TenantRead) && s.contains(Scope::MemoryRead));
        assert!(Scopes::parse("mcp:tools bogus").is_err());
        assert!(Scopes::parse("  ").is_err());
    }

    #[test]
    fn require_names_the_missing_scope() {
        let s = Scopes::parse("mcp:tools").unwrap();
        let e = s.require(Scope::TenantRead).unwrap_err();
        assert_eq!(e.payload.required_scope.as_deref(), Some("tenant:read"));
    }

    #[test]
    fn privileged_scopes_never_go_to_mcp_clients() {
        assert!(!Scope::ApprovalsDecide.grantable_to_mcp_client());
        assert!(!Scope::Admin.grantable_to_mcp_client());
        assert!(Scope::McpTools.grantable_to_mcp_client());
    }
}
