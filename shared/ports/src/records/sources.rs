//! Connected sources: the deployment's source apps, a tenant's grants, the pending
//! sign-ins of connects, and where each connector's pull stands.
//!
//! | record | owner | part | sort key | body |
//! |---|---|---|---|---|
//! | source app | `_registry` | `source_app` | `{source}` | sealed under the deployment's key |
//! | grant | tenant | `connector_grant` | `{source}` | sealed under the tenant's key |
//! | sync state | tenant | `connector_sync` | `{source}` | versioned JSON |
//! | pending connect | `_registry` | `connector_oauth` | `sha256(state)` | JSON, taken once |
//!
//! Secrets are sealed by the vault (AES-256-GCM, the item's address as associated data),
//! so a store without a vault refuses them. A pending connect is found by the hash of
//! its `state` (the state itself is never stored) and taken with a conditional delete:
//! two callbacks racing with the same `state` cannot both use it.

use async_trait::async_trait;
use domain::connector::ConnectorSource;
use domain::source::{ConnectStart, Grant, SourceApp, SyncState};
use domain::{Error, ErrorCode, Result, TenantId, Timestamp};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use super::{Expect, Records, decode, encode, put, versioned};
use crate::items::{Condition, Item, Query, REGISTRY_TENANT, Write};

const APP: &str = "source_app";
const GRANT: &str = "connector_grant";
const SYNC: &str = "connector_sync";
const PENDING: &str = "connector_oauth";

/// The store of connected sources.
#[async_trait]
pub trait SourceStore: Send + Sync {
    /// Stores (or replaces) the deployment's app at `source`, sealed.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a store without a vault; `UNAVAILABLE`.
    async fn put_source_app(&self, source: &ConnectorSource, app: &SourceApp) -> Result<()>;
    /// # Errors
    /// `INTERNAL` when the sealed body does not open; `UNAVAILABLE`.
    async fn get_source_app(&self, source: &ConnectorSource) -> Result<Option<SourceApp>>;
    /// Removes it; `false` when there was none.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn delete_source_app(&self, source: &ConnectorSource) -> Result<bool>;
    /// The sources the deployment registered an app for.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn source_app_names(&self) -> Result<Vec<String>>;

    /// Stores (or replaces) the tenant's grant from `source`, sealed.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed grant or a store without a vault; `UNAVAILABLE`.
    async fn put_grant(&self, tenant: &TenantId, source: &ConnectorSource, grant: &Grant) -> Result<()>;
    /// # Errors
    /// `INTERNAL` when the sealed body does not open; `UNAVAILABLE`.
    async fn get_grant(&self, tenant: &TenantId, source: &ConnectorSource) -> Result<Option<Grant>>;
    /// Forgets it; `false` when there was none.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn delete_grant(&self, tenant: &TenantId, source: &ConnectorSource) -> Result<bool>;

    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_sync(&self, tenant: &TenantId, source: &ConnectorSource) -> Result<Option<SyncState>>;
    /// Writes `state` under `expect` and returns it with its new version.
    ///
    /// # Errors
    /// `CONFLICT` when `expect` does not hold; `UNAVAILABLE`.
    async fn put_sync(&self, state: &SyncState, expect: Expect) -> Result<SyncState>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn delete_sync(&self, tenant: &TenantId, source: &ConnectorSource) -> Result<()>;

    /// Keeps a pending connect under the hash of its `state`.
    ///
    /// # Errors
    /// `CONFLICT` when that state is pending already; `UNAVAILABLE`.
    async fn put_connect_start(&self, state: &str, start: &ConnectStart) -> Result<()>;
    /// Takes the pending connect of `state` (it is gone afterwards, whoever asked):
    /// `None` when there is none, it was taken already, or it expired before `now`.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn take_connect_start(&self, state: &str, now: Timestamp) -> Result<Option<ConnectStart>>;
}

fn state_key(state: &str) -> String {
    hex::encode(Sha256::digest(state.as_bytes()))
}

impl Records {
    fn vault_or(&self, what: &str) -> Result<&std::sync::Arc<crate::vault::Vault>> {
        self.vault.as_ref().ok_or_else(|| {
            Error::invalid_field(
                what,
                format!("{what}s are kept sealed by the vault, and this store has none (set the stack's vault KMS key)"),
            )
        })
    }

    async fn put_sealed<T: Serialize + Sync>(&self, owner: &TenantId, part: &str, sk: &str, value: &T, what: &str) -> Result<()> {
        let vault = self.vault_or(what)?;
        let o = owner.as_str();
        let sealed = vault.seal(self.items.as_ref(), owner, &format!("{o}/{part}/{sk}"), &encode(value)?).await?;
        self.items.write(vec![put(o, part, sk.to_owned(), 1, sealed, Condition::None)]).await
    }

    async fn get_sealed<T: DeserializeOwned>(&self, owner: &TenantId, part: &str, sk: &str) -> Result<Option<T>> {
        let o = owner.as_str();
        let Some(item) = self.items.get(o, part, sk).await? else { return Ok(None) };
        let Some(vault) = &self.vault else { return Err(Error::internal(format!("a sealed {part} and no vault to open it"))) };
        let plain = vault.open(self.items.as_ref(), owner, &format!("{o}/{part}/{sk}"), &item.body).await?;
        decode(&Item { body: plain, ..item }).map(Some)
    }

    async fn delete_one(&self, owner: &str, part: &str, sk: &str) -> Result<bool> {
        if self.items.get(owner, part, sk).await?.is_none() {
            return Ok(false);
        }
        let write = Write::Delete { tenant: owner.to_owned(), part: part.into(), sk: sk.to_owned(), condition: Condition::None };
        self.items.write(vec![write]).await?;
        Ok(true)
    }
}

#[async_trait]
impl SourceStore for Records {
    async fn put_source_app(&self, source: &ConnectorSource, app: &SourceApp) -> Result<()> {
        app.check()?;
        self.put_sealed(&TenantId::deployment(), APP, source.as_str(), app, "source app").await
    }

    async fn get_source_app(&self, source: &ConnectorSource) -> Result<Option<SourceApp>> {
        self.get_sealed(&TenantId::deployment(), APP, source.as_str()).await
    }

    async fn delete_source_app(&self, source: &ConnectorSource) -> Result<bool> {
        self.delete_one(REGISTRY_TENANT, APP, source.as_str()).await
    }

    async fn source_app_names(&self) -> Result<Vec<String>> {
        let query = Query { tenant: REGISTRY_TENANT, part: APP, prefix: "", after: None, limit: 100, descending: false };
        let (items, _) = self.items.query(query).await?;
        Ok(items.into_iter().map(|i| i.sk).collect())
    }

    async fn put_grant(&self, tenant: &TenantId, source: &ConnectorSource, grant: &Grant) -> Result<()> {
        grant.check()?;
        self.put_sealed(tenant, GRANT, source.as_str(), grant, "connector grant").await
    }

    async fn get_grant(&self, tenant: &TenantId, source: &ConnectorSource) -> Result<Option<Grant>> {
        self.get_sealed(tenant, GRANT, source.as_str()).await
    }

    async fn delete_grant(&self, tenant: &TenantId, source: &ConnectorSource) -> Result<bool> {
        self.delete_one(tenant.as_str(), GRANT, source.as_str()).await
    }

    async fn get_sync(&self, tenant: &TenantId, source: &ConnectorSource) -> Result<Option<SyncState>> {
        self.get_one(tenant.as_str(), SYNC, source.as_str()).await
    }

    async fn put_sync(&self, state: &SyncState, expect: Expect) -> Result<SyncState> {
        let (version, condition) = versioned(expect);
        let mut stored = state.clone();
        stored.version = version;
        let write = put(state.tenant.as_str(), SYNC, state.source.to_string(), version, encode(&stored)?, condition);
        self.items.write(vec![write]).await.map_err(|e| {
            if e.code == ErrorCode::Conflict {
                Error::conflict(format!("the {} pull changed concurrently; re-read it", state.source))
            } else {
                e
            }
        })?;
        Ok(stored)
    }

    async fn delete_sync(&self, tenant: &TenantId, source: &ConnectorSource) -> Result<()> {
        self.delete_one(tenant.as_str(), SYNC, source.as_str()).await.map(|_| ())
    }

    async fn put_connect_start(&self, state: &str, start: &ConnectStart) -> Result<()> {
        let write = put(REGISTRY_TENANT, PENDING, state_key(state), 1, encode(start)?, Condition::Absent);
        self.items.write(vec![write]).await
    }

    async fn take_connect_start(&self, state: &str, now: Timestamp) -> Result<Option<ConnectStart>> {
        let sk = state_key(state);
        let Some(item) = self.items.get(REGISTRY_TENANT, PENDING, &sk).await? else { return Ok(None) };
        let delete = Write::Delete {
            tenant: REGISTRY_TENANT.into(),
            part: PENDING.into(),
            sk,
            condition: Condition::Version(item.version),
        };
        match self.items.write(vec![delete]).await {
            Ok(()) => {}
            // Another callback took it first.
            Err(e) if e.code == ErrorCode::Conflict => return Ok(None),
            Err(e) => return Err(e),
        }
        let start: ConnectStart = decode(&item)?;
        Ok((start.expires_at > now).then_some(start))
    }
}
