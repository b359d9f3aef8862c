//! Identities an operator creates: users who sign in with a password (the OAuth sign-in
//! page, the approvals console) and confidential service clients (`client_credentials`,
//! optionally the ID-JAG grant). Audited like every administration.

use domain::oauth::{ClientAuthMethod, GrantType, OAuthClient, UserLogin};
use domain::principal::{Principal, PrincipalKind, Role, Scopes};
use domain::{Error, Id, Result, TenantId};
use ports::oauth::OAuthStore as _;
use ports::records::PrincipalStore as _;

use super::AdminService;

/// A new user (`continuity user add`).
#[derive(Debug, Clone)]
pub struct NewUser {
    pub tenant: TenantId,
    pub email: String,
    pub role: Role,
    pub password: String,
    /// Teams and projects the user belongs to (carried by its access tokens).
    pub teams: Vec<String>,
    pub projects: Vec<String>,
}

/// A new confidential client bound to a tenant (`continuity client create`).
#[derive(Debug, Clone)]
pub struct NewServiceClient {
    pub tenant: TenantId,
    pub name: String,
    pub scopes: Scopes,
    /// Also allow the enterprise JWT-bearer (ID-JAG) grant.
    pub jwt_bearer: bool,
    /// The MCP toolsets its tokens are offered.
    pub toolsets: domain::principal::Toolsets,
}

/// A freshly created confidential client: the only time its secret exists here.
#[derive(Debug, Clone)]
pub struct IssuedClient {
    pub client_id: Id,
    pub client_secret: String,
}

impl AdminService {
    /// Sets the MCP toolsets a client's access tokens are offered (any client, also one
    /// registered dynamically). Tokens issued from then on carry them — after the next
    /// sign-in or refresh; tokens already issued keep theirs until they expire (≤ 1 h).
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown client; `UNAVAILABLE`.
    pub async fn set_client_toolsets(&self, client_id: &Id, toolsets: domain::principal::Toolsets) -> Result<()> {
        let mut client = self
            .backend
            .records
            .get_client(client_id)
            .await?
            .ok_or_else(|| Error::not_found(format!("OAuth client {client_id}")))?;
        client.toolsets = toolsets;
        self.backend.records.update_client(&client).await?;
        if let Some(t) = &client.tenant {
            self.audited(t, "admin:client.toolsets", client_id.as_str(), &client.toolsets.to_list_string()).await;
        }
        Ok(())
    }

    /// Creates a confidential client bound to a tenant, for `client_credentials` (and
    /// optionally the ID-JAG grant). Its principal is created with it.
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown tenant; `UNAVAILABLE`.
    pub async fn create_service_client(&self, req: NewServiceClient) -> Result<IssuedClient> {
        self.show_tenant(&req.tenant).await?;
        let client_id = Id::new(format!("svc-{}", crate::random_token(16)))?;
        let secret = crate::random_token(32);
        let mut grants = vec![GrantType::ClientCredentials];
        if req.jwt_bearer {
            grants.push(GrantType::JwtBearer);
        }
        let principal = Principal {
            tenant: req.tenant.clone(),
            id: client_id.clone(),
            kind: PrincipalKind::Client,
            role: Role::Member,
            display_name: req.name.clone(),
            created_at: self.backend.clock.now(),
            teams: Vec::new(),
            projects: Vec::new(),
            disabled: false,
        };
        self.backend.records.create_principal(&principal).await?;
        let client = OAuthClient {
            client_id: client_id.clone(),
            client_name: req.name,
            redirect_uris: vec![],
            grant_types: grants,
            auth_method: ClientAuthMethod::ClientSecretBasic,
            secret_sha256: Some(crate::sha256_hex(&secret)),
            allowed_scopes: req.scopes,
            tenant: Some(req.tenant),
            dynamic: false,
            created_at: self.backend.clock.now(),
            toolsets: req.toolsets,
            metadata_url: None,
        };
        let tenant = client.tenant.clone();
        self.backend.records.create_client(&client).await?;
        if let Some(t) = &tenant {
            self.audited(t, "admin:client.create", client_id.as_str(), "created").await;
        }
        Ok(IssuedClient { client_id, client_secret: secret })
    }

    /// Adds a user with a password (`continuity user add`).
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a bad e-mail or password; `CONFLICT` if the e-mail exists
    /// in the tenant; `NOT_FOUND` for an unknown tenant; `UNAVAILABLE`.
    pub async fn add_user(&self, user: NewUser) -> Result<Id> {
        self.show_tenant(&user.tenant).await?;
        let email = user.email.trim().to_ascii_lowercase();
        let valid = email.len() <= 254
            && email.bytes().all(|b| b.is_ascii_graphic())
            && email.split_once('@').is_some_and(|(l, d)| !l.is_empty() && d.contains('.') && !d.contains('@'));
        if !valid {
            return Err(Error::invalid_field("email", "must be an e-mail address"));
        }
        let teams = domain::principal::memberships("teams", user.teams)?;
        let projects = domain::principal::memberships("projects", user.projects)?;
        let hash = crate::oauth::password::hash(&user.password)?;
        let id = crate::new_id(&self.backend);
        let principal = Principal {
            tenant: user.tenant.clone(),
            id: id.clone(),
            kind: PrincipalKind::User,
            role: user.role,
            display_name: email.clone(),
            created_at: self.backend.clock.now(),
            teams,
            projects,
            disabled: false,
        };
        let login = UserLogin {
            tenant: user.tenant,
            email,
            principal: id.clone(),
            role: user.role,
            password_hash: hash,
            created_at: self.backend.clock.now(),
            disabled: false,
        };
        let (tenant, role) = (login.tenant.clone(), login.role);
        self.backend.records.create_login(&login, &principal).await?;
        self.audited(&tenant, "admin:user.add", id.as_str(), &format!("role {role}{}", shown_memberships(&principal))).await;
        Ok(id)
    }
}

/// `; teams a,b; projects p` for an audit outcome (nothing when it has none).
pub(crate) fn shown_memberships(p: &Principal) -> String {
    let mut out = String::new();
    if !p.teams.is_empty() {
        out.push_str(&format!("; teams {}", p.teams.join(",")));
    }
    if !p.projects.is_empty() {
        out.push_str(&format!("; projects {}", p.projects.join(",")));
    }
    out
}
