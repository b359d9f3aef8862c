//! Administration: what `continuity tenant|key|user|client …` do — tenants, API keys,
//! trusted IdPs ([`AdminService`]), users and service clients ([`identity`]) — and who
//! may do what through the admin HTTP API ([`api`]).
//!
//! Every change is audited here, by the use case, with the acting operator
//! ([`AdminService::acting_as`]: `cli:<user>` for the CLI), so no surface that asks for
//! one can forget it.

pub mod api;
pub mod book;
pub mod credentials;
pub mod identity;
pub mod promotion;

pub use api::{AdminApi, NewTenant, UserChanges, UserView};
pub use identity::{IssuedClient, NewServiceClient, NewUser};

use domain::principal::{ApiKeyRecord, CallerContext, Principal, PrincipalKind, Role, Scopes};
use domain::tenant::{Department, Industry, PlanTier, StorageTier, Tenant};
use domain::{Error, Id, PageRequest, Result, TenantId};
use ports::Backend;
use ports::records::{AuditLog as _, PrincipalStore, TenantStore};

use crate::auth::{IssuedKey, format_key};

/// The tenant `continuity serve` creates on first start.
pub const LOCAL_TENANT: &str = "local";

#[derive(Debug, Clone, Default)]
pub struct TenantChanges {
    pub plan: Option<PlanTier>,
    pub department: Option<Department>,
    pub industry: Option<Industry>,
    pub storage_tier: Option<StorageTier>,
    pub display_name: Option<String>,
    pub rate_limit_per_minute: Option<u32>,
    /// Triage weights and thresholds (checked before anything is written).
    pub triage: Option<domain::tenant::TriagePolicy>,
}

#[derive(Debug, Clone)]
pub struct KeyRequest {
    pub tenant: TenantId,
    pub scopes: Scopes,
    /// Principal the key acts as; created as a service principal when absent.
    pub principal: Option<Id>,
    pub teams: Vec<String>,
    pub projects: Vec<String>,
}

#[derive(Clone)]
pub struct AdminService {
    backend: Backend,
    /// Who the audit ledger names for the changes this handle makes.
    actor: std::sync::Arc<str>,
}

impl AdminService {
    pub(crate) fn new(backend: Backend) -> Self {
        Self { backend, actor: "operator".into() }
    }

    /// The same service, recording `actor` in the audit ledger as the one who made each
    /// change (`cli:alice`, `admin-api:<principal>`).
    #[must_use]
    pub fn acting_as(&self, actor: impl Into<String>) -> Self {
        Self { backend: self.backend.clone(), actor: actor.into().into() }
    }

    /// One audit record for a change this service made. The change is done; a record
    /// that cannot be written is logged as lost (the change is not undone).
    async fn audited(&self, tenant: &TenantId, action: &str, target: &str, outcome: &str) {
        let record = crate::audit::record(&self.backend, tenant, &self.actor, action, Some(target.to_owned()), outcome);
        if let Err(e) = self.backend.records.append_audit(&record).await {
            tracing::error!(tenant = %tenant, action, error = %e.for_operator(), "audit record lost");
        }
    }

    /// # Errors
    /// `CONFLICT` when the slug exists; `UNAVAILABLE`.
    pub async fn create_tenant(
        &self,
        id: TenantId,
        plan: PlanTier,
        department: Department,
        industry: Industry,
    ) -> Result<Tenant> {
        let t = Tenant::new(id, plan, department, industry, self.backend.clock.now());
        self.backend.records.create_tenant(&t).await?;
        self.audited(&t.id, "admin:tenant.create", t.id.as_str(), &format!("plan {plan}")).await;
        Ok(t)
    }

    /// # Errors
    /// `NOT_FOUND`; `UNAVAILABLE`.
    pub async fn show_tenant(&self, id: &TenantId) -> Result<Tenant> {
        self.backend.records.get_tenant(id).await?.ok_or_else(|| Error::not_found(format!("tenant {id}")))
    }

    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn list_tenants(&self) -> Result<Vec<TenantId>> {
        let mut out = Vec::new();
        let mut page = PageRequest::first(500);
        loop {
            let p = self.backend.records.list_tenants(&page).await?;
            out.extend(p.items);
            match p.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => return Ok(out),
            }
        }
    }

    /// Applies changes with optimistic concurrency and evicts the cached config.
    ///
    /// # Errors
    /// `NOT_FOUND`; `INVALID_REQUEST` for a storage-tier downgrade; `CONFLICT` when a
    /// concurrent change won; `UNAVAILABLE`.
    pub async fn set_tenant(&self, id: &TenantId, changes: TenantChanges) -> Result<Tenant> {
        self.modify_tenant(id, "admin:tenant.set", id.as_str(), |t| {
            if let Some(p) = changes.plan {
                t.plan = p;
            }
            if let Some(d) = changes.department {
                t.department = d;
            }
            if let Some(i) = changes.industry {
                t.industry = i;
            }
            if let Some(s) = changes.storage_tier {
                t.check_storage_tier_change(s)?;
                t.storage_tier = s;
            }
            if let Some(n) = changes.display_name {
                if n.is_empty() || n.len() > 200 {
                    return Err(Error::invalid_field("display_name", "must be 1-200 characters"));
                }
                t.display_name = n;
            }
            if let Some(r) = changes.rate_limit_per_minute {
                t.rate_limit_per_minute = Some(r);
            }
            if let Some(p) = changes.triage {
                p.check()?;
                t.triage = Some(p);
            }
            Ok(())
        })
        .await
    }

    /// Reads the tenant, applies `change`, writes it back under optimistic concurrency
    /// and evicts the cached configuration.
    async fn modify_tenant(
        &self,
        id: &TenantId,
        action: &str,
        target: &str,
        change: impl FnOnce(&mut Tenant) -> Result<()>,
    ) -> Result<Tenant> {
        let mut t = self.show_tenant(id).await?;
        change(&mut t)?;
        t.updated_at = self.backend.clock.now();
        let stored = self.backend.records.update_tenant(&t).await?;
        let _ = self.backend.cache.evict(&[crate::auth::tenant_config_key(id)]).await;
        self.audited(id, action, target, &format!("version {}", stored.version)).await;
        Ok(stored)
    }

    /// Trusts an identity provider for the tenant's enterprise sign-in (ID-JAG), or
    /// replaces the entry with the same issuer.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for an invalid IdP; `NOT_FOUND`; `CONFLICT`; `UNAVAILABLE`.
    pub async fn trust_idp(&self, id: &TenantId, idp: domain::oauth::TrustedIdp) -> Result<Tenant> {
        idp.validate()?;
        let issuer = idp.issuer.clone();
        self.modify_tenant(id, "admin:idp.add", &issuer, |t| {
            t.trusted_idps.retain(|i| i.issuer != idp.issuer);
            if t.trusted_idps.len() >= 20 {
                return Err(Error::invalid("a tenant trusts at most 20 identity providers"));
            }
            t.trusted_idps.push(idp);
            Ok(())
        })
        .await
    }

    /// Stops trusting an identity provider.
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown tenant or issuer; `CONFLICT`; `UNAVAILABLE`.
    pub async fn distrust_idp(&self, id: &TenantId, issuer: &str) -> Result<Tenant> {
        self.modify_tenant(id, "admin:idp.remove", issuer, |t| {
            let before = t.trusted_idps.len();
            t.trusted_idps.retain(|i| i.issuer != issuer);
            if t.trusted_idps.len() == before {
                return Err(Error::not_found(format!("trusted IdP {issuer}")));
            }
            Ok(())
        })
        .await
    }

    /// Issues an API key; the returned token is the only copy of its secret.
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown tenant; `UNAVAILABLE`.
    pub async fn create_key(&self, req: KeyRequest) -> Result<IssuedKey> {
        self.create_key_with_toolsets(req, domain::principal::Toolsets::default()).await
    }

    /// [`Self::create_key`] offering the key the given MCP toolsets.
    ///
    /// # Errors
    /// As [`Self::create_key`].
    pub async fn create_key_with_toolsets(&self, req: KeyRequest, toolsets: domain::principal::Toolsets) -> Result<IssuedKey> {
        self.create_named_key(req, toolsets, None).await
    }

    /// [`Self::create_key_with_toolsets`] with a name for people (at most 64 printable
    /// characters), shown by `key list`.
    ///
    /// # Errors
    /// As [`Self::create_key`]; `INVALID_ARGUMENT` for a bad name.
    pub async fn create_named_key(
        &self,
        req: KeyRequest,
        toolsets: domain::principal::Toolsets,
        name: Option<String>,
    ) -> Result<IssuedKey> {
        if let Some(n) = &name
            && (n.is_empty() || n.chars().count() > 64 || n.chars().any(char::is_control))
        {
            return Err(Error::invalid_field("name", "a key's name is 1 to 64 printable characters"));
        }
        self.show_tenant(&req.tenant).await?;
        let mut req = req;
        req.teams = domain::principal::memberships("teams", req.teams)?;
        req.projects = domain::principal::memberships("projects", req.projects)?;
        let now = self.backend.clock.now();
        let key_id = crate::new_id(&self.backend);
        let principal = match req.principal {
            Some(p) => {
                if self.backend.records.get_principal(&req.tenant, &p).await?.is_none() {
                    return Err(Error::not_found(format!("principal {p}")));
                }
                p
            }
            None => {
                let p = Principal {
                    tenant: req.tenant.clone(),
                    id: Id::new(format!("svc-{key_id}"))?,
                    kind: PrincipalKind::Service,
                    role: Role::Member,
                    display_name: format!("API key {key_id}"),
                    created_at: now,
                    teams: Vec::new(),
                    projects: Vec::new(),
                    disabled: false,
                };
                self.backend.records.create_principal(&p).await?;
                p.id
            }
        };
        let secret = crate::random_token(32);
        let record = ApiKeyRecord {
            tenant: req.tenant.clone(),
            key_id: key_id.clone(),
            principal,
            scopes: req.scopes,
            teams: req.teams,
            projects: req.projects,
            secret_sha256: crate::sha256_hex(&secret),
            toolsets,
            created_at: now,
            revoked_at: None,
            name,
        };
        let scopes = record.scopes.to_oauth_string();
        self.backend.records.create_api_key(&record).await?;
        self.audited(&req.tenant, "admin:key.create", key_id.as_str(), &format!("scopes {scopes}")).await;
        Ok(IssuedKey { token: format_key(&req.tenant, &key_id, &secret), key_id, tenant: req.tenant })
    }

    /// # Errors
    /// `NOT_FOUND`; `UNAVAILABLE`.
    pub async fn revoke_key(&self, tenant: &TenantId, key_id: &Id) -> Result<()> {
        self.backend.records.revoke_api_key(tenant, key_id, self.backend.clock.now()).await?;
        self.audited(tenant, "admin:key.revoke", key_id.as_str(), "revoked").await;
        Ok(())
    }

    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn list_keys(&self, tenant: &TenantId) -> Result<Vec<ApiKeyRecord>> {
        let mut out = Vec::new();
        let mut page = PageRequest::first(500);
        loop {
            let p = self.backend.records.list_api_keys(tenant, &page).await?;
            out.extend(p.items);
            match p.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => return Ok(out),
            }
        }
    }

    /// First start of a home: the `local` tenant on `enterprise` with an owner and an
    /// owner key holding every scope. Returns `None` when the tenant already exists.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn bootstrap_local(&self) -> Result<Option<IssuedKey>> {
        let id = TenantId::new(LOCAL_TENANT)?;
        if let Some(t) = self.backend.records.get_tenant(&id).await? {
            // A home made before the admin API: its owner is still its operator.
            if !t.operator {
                self.make_operator(&id).await?;
            }
            return Ok(None);
        }
        self.bootstrap_operator(&id).await.map(Some)
    }

    /// The operator's tenant of a new deployment (`continuity --backend aws bootstrap`, or
    /// `serve`'s first start): the tenant on `enterprise`, marked as the operator's, its
    /// owner, and an owner key holding every scope (`admin` included), whose token is
    /// returned — the only copy.
    ///
    /// # Errors
    /// `CONFLICT` when the tenant exists; `UNAVAILABLE`.
    pub async fn bootstrap_operator(&self, id: &TenantId) -> Result<IssuedKey> {
        self.create_tenant(id.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await?;
        self.make_operator(id).await?;
        let owner = Principal {
            tenant: id.clone(),
            id: Id::new("owner")?,
            kind: PrincipalKind::User,
            role: Role::Owner,
            display_name: "Owner".into(),
            created_at: self.backend.clock.now(),
            teams: Vec::new(),
            projects: Vec::new(),
            disabled: false,
        };
        self.backend.records.create_principal(&owner).await?;
        self.create_key(KeyRequest {
            tenant: id.clone(),
            scopes: Scopes::all(),
            principal: Some(owner.id),
            teams: vec![],
            projects: vec![],
        })
        .await
    }

    /// A caller context acting as the operator of `tenant` (admin commands on the home).
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown tenant; `UNAVAILABLE`.
    pub async fn operator(&self, tenant: &TenantId) -> Result<CallerContext> {
        let t = self.show_tenant(tenant).await?;
        Ok(CallerContext {
            tenant: t.id,
            principal: Id::new("operator")?,
            scopes: Scopes::all(),
            plan: t.plan,
            teams: vec![],
            projects: vec![],
            credential: "operator:cli".into(),
            client: None,
            toolsets: domain::principal::Toolsets::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use ports::SystemClock;

    #[tokio::test]
    async fn issued_keys_authenticate_and_revocation_bites() {
        let dir = tempfile::tempdir().unwrap();
        let backend = store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap();
        let services = crate::Services::new(backend);
        let key = services.admin.bootstrap_local().await.unwrap().unwrap();
        assert!(services.admin.bootstrap_local().await.unwrap().is_none(), "bootstrap runs once");
        let caller =
            services.auth.authenticate_header(Some(&format!("Bearer {}", key.token)), "http://127.0.0.1:1").await.unwrap();
        assert_eq!(caller.tenant.as_str(), "local");
        assert_eq!(caller.plan, PlanTier::Enterprise);
        assert_eq!(caller.scopes, Scopes::all());

        // A tampered secret of the right shape fails the same way as garbage.
        let mut bad = key.token.clone();
        let last = bad.pop().unwrap();
        bad.push(if last == '0' { '1' } else { '0' });
        let e = services.auth.authenticate_token(&bad, "http://127.0.0.1:1").await.unwrap_err();
        assert_eq!(e.code, domain::ErrorCode::Unauthenticated);
        assert_eq!(services.auth.authenticate_token("garbage", "http://127.0.0.1:1").await.unwrap_err().message, e.message);

        services.admin.revoke_key(&key.tenant, &key.key_id).await.unwrap();
        assert!(services.auth.authenticate_token(&key.token, "http://127.0.0.1:1").await.is_err());
    }
}
