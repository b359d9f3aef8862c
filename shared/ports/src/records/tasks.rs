//! Dispatched tasks and the connector credentials governed actions use.
//!
//! A task is one versioned item at `task/{id}` plus `task_by_assignee/{assignee}#{id}`
//! (written in the same atomic batch), so an assignee's tasks are one range read.
//! A connector credential is one item at `connector_cred/{source}` whose body is sealed
//! by the vault (AES-256-GCM under the tenant's data key, the item's address as
//! associated data): a store without a vault refuses to keep one.

use async_trait::async_trait;
use domain::action::Credential;
use domain::spine::Task;
use domain::{Error, ErrorCode, Id, Page, PageRequest, Result, TenantId};

use super::{Expect, Records, decode, encode, put, versioned};
use crate::items::{Condition, Write};

/// The task store.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Writes `task` under `expect` (`Absent` to create, `Version` to update) and returns
    /// it with its new version.
    ///
    /// # Errors
    /// `CONFLICT` when `expect` does not hold; `UNAVAILABLE`.
    async fn put_task(&self, task: &Task, expect: Expect) -> Result<Task>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_task(&self, tenant: &TenantId, id: &Id) -> Result<Option<Task>>;
    /// The tenant's tasks (or one assignee's), newest first.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed cursor; `UNAVAILABLE`.
    async fn list_tasks(&self, tenant: &TenantId, assignee: Option<&Id>, page: &PageRequest) -> Result<Page<Task>>;
}

/// Connector credentials, sealed by the vault.
#[async_trait]
pub trait CredentialStore: Send + Sync {
    /// Stores (or replaces) the credential of `source`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed credential or a store without a vault;
    /// `UNAVAILABLE`.
    async fn put_credential(&self, tenant: &TenantId, source: &Id, credential: &Credential) -> Result<()>;
    /// # Errors
    /// `INTERNAL` when the sealed body does not open (another tenant's, tampered);
    /// `UNAVAILABLE`.
    async fn get_credential(&self, tenant: &TenantId, source: &Id) -> Result<Option<Credential>>;
    /// Removes it; `false` when there was none.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn delete_credential(&self, tenant: &TenantId, source: &Id) -> Result<bool>;
    /// The sources the tenant holds a credential for.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn credential_sources(&self, tenant: &TenantId) -> Result<Vec<String>>;
}

const CRED: &str = "connector_cred";

#[async_trait]
impl TaskStore for Records {
    async fn put_task(&self, task: &Task, expect: Expect) -> Result<Task> {
        let t = task.tenant.as_str();
        let (version, condition) = versioned(expect);
        let mut stored = task.clone();
        stored.version = version;
        let body = encode(&stored)?;
        let writes = vec![
            put(t, "task", task.id.to_string(), version, body.clone(), condition),
            put(t, "task_by_assignee", format!("{}#{}", task.assignee, task.id), version, body, Condition::None),
        ];
        self.items.write(writes).await.map_err(|e| {
            if e.code != ErrorCode::Conflict {
                return e;
            }
            match expect {
                Expect::Absent => Error::conflict(format!("task {} exists already", task.id)),
                _ => Error::conflict(format!("task {} changed concurrently; re-read it", task.id)),
            }
        })?;
        Ok(stored)
    }

    async fn get_task(&self, tenant: &TenantId, id: &Id) -> Result<Option<Task>> {
        self.get_one(tenant.as_str(), "task", id.as_str()).await
    }

    async fn list_tasks(&self, tenant: &TenantId, assignee: Option<&Id>, page: &PageRequest) -> Result<Page<Task>> {
        match assignee {
            Some(a) => self.page(tenant.as_str(), "task_by_assignee", &format!("{a}#"), page, true).await,
            None => self.page(tenant.as_str(), "task", "", page, true).await,
        }
    }
}

#[async_trait]
impl CredentialStore for Records {
    async fn put_credential(&self, tenant: &TenantId, source: &Id, credential: &Credential) -> Result<()> {
        credential.check()?;
        let Some(vault) = &self.vault else {
            return Err(Error::invalid_field(
                "credential",
                "connector credentials are kept sealed by the vault, and this store has none (set the stack's vault KMS key)",
            ));
        };
        let t = tenant.as_str();
        let sealed = vault.seal(self.items.as_ref(), tenant, &format!("{t}/{CRED}/{source}"), &encode(credential)?).await?;
        self.items.write(vec![put(t, CRED, source.to_string(), 1, sealed, Condition::None)]).await
    }

    async fn get_credential(&self, tenant: &TenantId, source: &Id) -> Result<Option<Credential>> {
        let t = tenant.as_str();
        let Some(item) = self.items.get(t, CRED, source.as_str()).await? else { return Ok(None) };
        let Some(vault) = &self.vault else {
            return Err(Error::internal("a sealed connector credential and no vault to open it"));
        };
        let plain = vault.open(self.items.as_ref(), tenant, &format!("{t}/{CRED}/{source}"), &item.body).await?;
        let opened = crate::items::Item { body: plain, ..item };
        decode(&opened).map(Some)
    }

    async fn delete_credential(&self, tenant: &TenantId, source: &Id) -> Result<bool> {
        let t = tenant.as_str();
        if self.items.get(t, CRED, source.as_str()).await?.is_none() {
            return Ok(false);
        }
        self.items
            .write(vec![Write::Delete {
                tenant: t.to_owned(),
                part: CRED.into(),
                sk: source.to_string(),
                condition: Condition::None,
            }])
            .await?;
        Ok(true)
    }

    async fn credential_sources(&self, tenant: &TenantId) -> Result<Vec<String>> {
        let (items, _) = self.page_items(tenant.as_str(), CRED, "", &PageRequest::first(500), false).await?;
        Ok(items.into_iter().map(|i| i.sk).collect())
    }
}
