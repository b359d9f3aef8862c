//! The admin HTTP API's use case (`/v1/admin/…`, scope `admin`): who may administer
//! which tenant, decided here for every surface that serves it (`continuity serve` and
//! the `AdminFunction` Lambda).
//!
//! - A key with the `admin` scope administers **its own tenant**: its keys, users,
//!   service clients, trusted IdPs, entities, and the tenant's department, industry,
//!   display name and triage policy.
//! - Commercial settings (plan, storage tier, rate limit) and other tenants — creating,
//!   listing, showing and changing them — belong to the **operator**: an `admin` key of
//!   the operator's tenant ([`Tenant::operator`], the tenant `bootstrap` creates).
//!
//! Every change is audited by [`AdminService`] with the acting principal
//! (`admin-api:{tenant}/{principal}`); a refused call changes nothing.

use domain::oauth::TrustedIdp;
use domain::principal::{ApiKeyRecord, CallerContext, Role, Scope, Toolsets};
use domain::tenant::Tenant;
use domain::{Error, Id, Result, TenantId};
use ports::oauth::OAuthStore as _;
use ports::records::PrincipalStore as _;

use super::{AdminService, IssuedClient, KeyRequest, NewServiceClient, NewUser, TenantChanges};
use crate::auth::IssuedKey;

/// What one caller may do through the admin API.
pub struct AdminApi {
    admin: AdminService,
    caller: CallerContext,
    operator: bool,
}

impl AdminService {
    /// The admin API for `caller`.
    ///
    /// # Errors
    /// `FORBIDDEN` without the `admin` scope; `NOT_FOUND` when the caller's tenant is
    /// gone; `UNAVAILABLE`.
    pub async fn for_caller(&self, caller: &CallerContext) -> Result<AdminApi> {
        caller.scopes.require(Scope::Admin)?;
        let own = self.show_tenant(&caller.tenant).await?;
        Ok(AdminApi {
            admin: self.acting_as(format!("admin-api:{}/{}", caller.tenant, caller.principal)),
            caller: caller.clone(),
            operator: own.operator,
        })
    }

    /// Marks `id` as the operator's tenant (bootstrap; `serve`'s `local` tenant).
    ///
    /// # Errors
    /// `NOT_FOUND`; `CONFLICT`; `UNAVAILABLE`.
    pub async fn make_operator(&self, id: &TenantId) -> Result<Tenant> {
        self.modify_tenant(id, "admin:tenant.operator", id.as_str(), |t| {
            t.operator = true;
            Ok(())
        })
        .await
    }
}

impl AdminApi {
    /// Whether the caller is the operator (administers every tenant).
    pub fn is_operator(&self) -> bool {
        self.operator
    }

    fn operator_only(&self, what: &str) -> Result<()> {
        if self.operator {
            Ok(())
        } else {
            Err(Error::forbidden(format!("{what} is for the operator (an admin key of the operator's tenant)")))
        }
    }

    /// The caller's own tenant, or any tenant for the operator.
    fn check(&self, tenant: &TenantId) -> Result<()> {
        if self.operator || *tenant == self.caller.tenant {
            Ok(())
        } else {
            Err(Error::forbidden(format!("this key administers tenant {} only", self.caller.tenant)))
        }
    }

    /// # Errors
    /// `FORBIDDEN` unless operator; `CONFLICT` when the id exists; `UNAVAILABLE`.
    pub async fn create_tenant(&self, t: NewTenant) -> Result<Tenant> {
        self.operator_only("creating a tenant")?;
        self.admin.create_tenant(t.id, t.plan, t.department, t.industry).await
    }

    /// Every tenant for the operator; the caller's own otherwise.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn list_tenants(&self) -> Result<Vec<TenantId>> {
        if self.operator { self.admin.list_tenants().await } else { Ok(vec![self.caller.tenant.clone()]) }
    }

    /// # Errors
    /// `FORBIDDEN`; `NOT_FOUND`; `UNAVAILABLE`.
    pub async fn show_tenant(&self, tenant: &TenantId) -> Result<Tenant> {
        self.check(tenant)?;
        self.admin.show_tenant(tenant).await
    }

    /// # Errors
    /// `FORBIDDEN` (another tenant, or a commercial setting without being the operator);
    /// as [`AdminService::set_tenant`].
    pub async fn set_tenant(&self, tenant: &TenantId, changes: TenantChanges) -> Result<Tenant> {
        self.check(tenant)?;
        if changes.plan.is_some() || changes.storage_tier.is_some() || changes.rate_limit_per_minute.is_some() {
            self.operator_only("changing the plan, storage tier or rate limit")?;
        }
        self.admin.set_tenant(tenant, changes).await
    }

    /// A run of the tenant's promotion to the fortress (operator only), bounded to
    /// `max_records`.
    ///
    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::promote_tenant`].
    pub async fn promote_tenant(&self, tenant: &TenantId, max_records: Option<u64>) -> Result<super::promotion::PromotionReport> {
        self.check(tenant)?;
        self.operator_only("promoting a tenant to the fortress")?;
        self.admin.promote_tenant(tenant, max_records, &|_| {}).await
    }

    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::usage`].
    pub async fn usage(&self, tenant: &TenantId) -> Result<super::promotion::UsageReport> {
        self.check(tenant)?;
        self.admin.usage(tenant).await
    }

    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::create_key_with_toolsets`].
    pub async fn create_key(&self, req: KeyRequest, toolsets: Toolsets) -> Result<IssuedKey> {
        self.check(&req.tenant)?;
        self.admin.create_key_with_toolsets(req, toolsets).await
    }

    /// # Errors
    /// `FORBIDDEN`; `UNAVAILABLE`.
    pub async fn list_keys(&self, tenant: &TenantId) -> Result<Vec<ApiKeyRecord>> {
        self.check(tenant)?;
        self.admin.list_keys(tenant).await
    }

    /// # Errors
    /// `FORBIDDEN`; `NOT_FOUND`; `UNAVAILABLE`.
    pub async fn revoke_key(&self, tenant: &TenantId, key: &Id) -> Result<()> {
        self.check(tenant)?;
        self.admin.revoke_key(tenant, key).await
    }

    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::add_user`].
    pub async fn add_user(&self, user: NewUser) -> Result<Id> {
        self.check(&user.tenant)?;
        self.admin.add_user(user).await
    }

    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::set_user`].
    pub async fn set_user(&self, tenant: &TenantId, email: &str, changes: UserChanges) -> Result<()> {
        self.check(tenant)?;
        self.admin.set_user(tenant, email, changes).await
    }

    /// The tenant's users (e-mail, role, disabled, memberships), by e-mail.
    ///
    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::list_users`].
    pub async fn list_users(&self, tenant: &TenantId) -> Result<Vec<UserView>> {
        self.check(tenant)?;
        self.admin.list_users(tenant).await
    }

    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::put_book_entry`].
    pub async fn put_book_entry(
        &self,
        tenant: &TenantId,
        project: &str,
        id: &str,
        title: &str,
        body: &str,
    ) -> Result<domain::spine::BookEntry> {
        self.check(tenant)?;
        self.admin.put_book_entry(tenant, project, id, title, body).await
    }

    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::set_credential`].
    pub async fn set_credential(&self, tenant: &TenantId, source: &str, credential: domain::action::Credential) -> Result<()> {
        self.check(tenant)?;
        self.admin.set_credential(tenant, source, credential).await
    }

    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::remove_credential`].
    pub async fn remove_credential(&self, tenant: &TenantId, source: &str) -> Result<()> {
        self.check(tenant)?;
        self.admin.remove_credential(tenant, source).await
    }

    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::credential_sources`].
    pub async fn credential_sources(&self, tenant: &TenantId) -> Result<Vec<String>> {
        self.check(tenant)?;
        self.admin.credential_sources(tenant).await
    }

    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::create_service_client`].
    pub async fn create_client(&self, req: NewServiceClient) -> Result<IssuedClient> {
        self.check(&req.tenant)?;
        self.admin.create_service_client(req).await
    }

    /// Sets the toolsets of one of the tenant's clients (a dynamically registered
    /// client belongs to no tenant: operator only).
    ///
    /// # Errors
    /// `FORBIDDEN`; `NOT_FOUND`; `UNAVAILABLE`.
    pub async fn set_client_toolsets(&self, tenant: &TenantId, client: &Id, toolsets: Toolsets) -> Result<()> {
        self.check(tenant)?;
        let found = self.admin.backend.records.get_client(client).await?;
        match found {
            Some(c) if c.tenant.as_ref() == Some(tenant) || (c.tenant.is_none() && self.operator) => {}
            // Another tenant's client answers as an unknown one.
            _ => return Err(Error::not_found(format!("OAuth client {client}"))),
        }
        self.admin.set_client_toolsets(client, toolsets).await
    }

    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::trust_idp`].
    pub async fn trust_idp(&self, tenant: &TenantId, idp: TrustedIdp) -> Result<Tenant> {
        self.check(tenant)?;
        self.admin.trust_idp(tenant, idp).await
    }

    /// # Errors
    /// `FORBIDDEN`; as [`AdminService::distrust_idp`].
    pub async fn distrust_idp(&self, tenant: &TenantId, issuer: &str) -> Result<Tenant> {
        self.check(tenant)?;
        self.admin.distrust_idp(tenant, issuer).await
    }
}

/// A tenant to create.
#[derive(Debug, Clone)]
pub struct NewTenant {
    pub id: TenantId,
    pub plan: domain::tenant::PlanTier,
    pub department: domain::tenant::Department,
    pub industry: domain::tenant::Industry,
}

/// One user as the admin API and the CLI list it (never the password hash).
#[derive(Debug, Clone, serde::Serialize)]
pub struct UserView {
    pub email: String,
    pub principal: Id,
    pub role: Role,
    pub disabled: bool,
    pub teams: Vec<String>,
    pub projects: Vec<String>,
}

/// The most users one listing returns.
const MAX_LISTED_USERS: usize = 10_000;

/// What `set_user` changes (absent: unchanged). Memberships are replaced whole.
#[derive(Debug, Clone, Default)]
pub struct UserChanges {
    pub role: Option<Role>,
    pub disabled: Option<bool>,
    pub teams: Option<Vec<String>>,
    pub projects: Option<Vec<String>>,
}

impl AdminService {
    /// Changes a user's role, memberships, and/or disables (or re-enables) them. A
    /// disabled user cannot sign in, refresh a token or use a console session (each is
    /// checked again); changed memberships reach its tokens at the next sign-in or
    /// refresh (an access token already issued keeps its own for at most an hour).
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown user; `UNAVAILABLE`.
    pub async fn set_user(&self, tenant: &TenantId, email: &str, changes: UserChanges) -> Result<()> {
        let UserChanges { role, disabled, teams, projects } = changes;
        let teams = teams.map(|t| domain::principal::memberships("teams", t)).transpose()?;
        let projects = projects.map(|p| domain::principal::memberships("projects", p)).transpose()?;
        let records = &self.backend.records;
        let mut login = records.get_login(tenant, email).await?.ok_or_else(|| Error::not_found(format!("user {email}")))?;
        let mut principal =
            records.get_principal(tenant, &login.principal).await?.ok_or_else(|| Error::not_found(format!("user {email}")))?;
        if let Some(r) = role {
            login.role = r;
            principal.role = r;
        }
        if let Some(d) = disabled {
            login.disabled = d;
            principal.disabled = d;
        }
        if let Some(t) = teams {
            principal.teams = t;
        }
        if let Some(p) = projects {
            principal.projects = p;
        }
        records.update_login(&login, &principal).await?;
        let outcome = format!(
            "role {}{}{}",
            login.role.as_str(),
            if login.disabled { ", disabled" } else { "" },
            super::identity::shown_memberships(&principal)
        );
        self.audited(tenant, "admin:user.set", &login.email, &outcome).await;
        Ok(())
    }

    /// The tenant's users with their role and memberships, by e-mail (at most 10 000).
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown tenant; `UNAVAILABLE`.
    pub async fn list_users(&self, tenant: &TenantId) -> Result<Vec<UserView>> {
        self.show_tenant(tenant).await?;
        let records = &self.backend.records;
        let mut out = Vec::new();
        let mut page = domain::PageRequest::first(200);
        loop {
            let p = records.list_logins(tenant, &page).await?;
            for login in p.items {
                let member = records.get_principal(tenant, &login.principal).await?;
                let (teams, projects) = member.map(|m| (m.teams, m.projects)).unwrap_or_default();
                out.push(UserView {
                    email: login.email,
                    principal: login.principal,
                    role: login.role,
                    disabled: login.disabled,
                    teams,
                    projects,
                });
            }
            match p.next_cursor {
                Some(c) if out.len() < MAX_LISTED_USERS => page.cursor = Some(c),
                _ => break,
            }
        }
        out.truncate(MAX_LISTED_USERS);
        Ok(out)
    }
}
