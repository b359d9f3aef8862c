//! Notification channels and failed deliveries.
//!
//! | record | part | sort key | body |
//! |---|---|---|---|
//! | channel | `notify_channel` | `{id}` | sealed by the vault (the URL and the signing secret are credentials) |
//! | failed delivery | `notify_failure` | `{at}#{id}` | JSON, newest first |

use async_trait::async_trait;
use domain::notify::{Channel, Failure};
use domain::{Error, Id, Page, PageRequest, Result, TenantId};

use super::{Records, encode, pad, put};
use crate::items::{Condition, Query, Write};

const CHANNEL: &str = "notify_channel";
const FAILURE: &str = "notify_failure";
/// Channels a tenant may have.
pub const MAX_CHANNELS: usize = 20;

#[async_trait]
pub trait NotifyStore: Send + Sync {
    /// Stores (or replaces) a channel, sealed.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed channel or a store without a vault; `UNAVAILABLE`.
    async fn put_channel(&self, channel: &Channel) -> Result<()>;
    /// The tenant's channels (at most [`MAX_CHANNELS`]), opened.
    ///
    /// # Errors
    /// `INTERNAL` when a sealed body does not open; `UNAVAILABLE`.
    async fn list_channels(&self, tenant: &TenantId) -> Result<Vec<Channel>>;
    /// Removes one; `false` when there was none.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn delete_channel(&self, tenant: &TenantId, id: &Id) -> Result<bool>;
    /// Keeps a delivery that kept failing.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn put_notify_failure(&self, tenant: &TenantId, failure: &Failure) -> Result<()>;
    /// Failed deliveries, newest first.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed cursor; `UNAVAILABLE`.
    async fn list_notify_failures(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<Failure>>;
}

#[async_trait]
impl NotifyStore for Records {
    async fn put_channel(&self, channel: &Channel) -> Result<()> {
        channel.check()?;
        let vault = self.vault.as_ref().ok_or_else(|| {
            Error::invalid_field("channel", "notification channels are kept sealed by the vault, and this store has none")
        })?;
        let t = channel.tenant.as_str();
        let sk = channel.id.to_string();
        let sealed = vault.seal(self.items.as_ref(), &channel.tenant, &format!("{t}/{CHANNEL}/{sk}"), &encode(channel)?).await?;
        self.items.write(vec![put(t, CHANNEL, sk, 1, sealed, Condition::None)]).await
    }

    async fn list_channels(&self, tenant: &TenantId) -> Result<Vec<Channel>> {
        let t = tenant.as_str();
        let limit = u32::try_from(MAX_CHANNELS).unwrap_or(20);
        let (items, _) =
            self.items.query(Query { tenant: t, part: CHANNEL, prefix: "", after: None, limit, descending: false }).await?;
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let Some(vault) = &self.vault else { return Err(Error::internal("a sealed channel and no vault to open it")) };
            let plain = vault.open(self.items.as_ref(), tenant, &format!("{t}/{CHANNEL}/{}", item.sk), &item.body).await?;
            out.push(serde_json::from_slice(&plain).map_err(|e| Error::internal(format!("corrupt channel {}: {e}", item.sk)))?);
        }
        Ok(out)
    }

    async fn delete_channel(&self, tenant: &TenantId, id: &Id) -> Result<bool> {
        let t = tenant.as_str();
        if self.items.get(t, CHANNEL, id.as_str()).await?.is_none() {
            return Ok(false);
        }
        let write = Write::Delete { tenant: t.to_owned(), part: CHANNEL.into(), sk: id.to_string(), condition: Condition::None };
        self.items.write(vec![write]).await?;
        Ok(true)
    }

    async fn put_notify_failure(&self, tenant: &TenantId, failure: &Failure) -> Result<()> {
        let sk = format!("{}#{}", pad(failure.at.0), failure.event.id);
        self.items.write(vec![put(tenant.as_str(), FAILURE, sk, 1, encode(failure)?, Condition::None)]).await
    }

    async fn list_notify_failures(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<Failure>> {
        self.page(tenant.as_str(), FAILURE, "", page, true).await
    }
}
