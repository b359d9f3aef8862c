//! Storage tiers (SPEC §4.2, seed `000`): a promoted tenant's records are also kept in
//! the fortress — a second store (a separate SQLite file on embedded, a separate
//! DynamoDB table on AWS) that the read fallback chain reads last.
//!
//! [`Mirrored`] is the item store every service writes through: a write lands in the
//! main store, and — for a tenant being promoted or promoted — the same writes land in
//! the fortress too (dual-write), unconditionally (the main store already checked the
//! conditions). Which tenants those are is read from their [`Promotion`] records
//! (`_registry/fortress/{tenant}`) and refreshed every [`MIRROR_REFRESH`], so a
//! promotion waits that long before its last pass (every process then mirrors).
//! A fortress write that fails is logged; the promotion's next run reconciles and
//! checks the fortress by hash.
//!
//! The fortress is its own trust domain: only this mirror path writes it — the
//! dual-write here, and a promotion's backfill and reconcile
//! (`Backend::fortress_writer`, used by `services::admin::promotion` alone; a layering
//! test holds that). What every other use case sees, `Backend::fortress`, is
//! [`ReadOnly`]: a write through it is refused.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use domain::{Error, Result, Timestamp};
use serde::{Deserialize, Serialize};

use crate::Clock;
use crate::items::{Condition, Item, ItemStore, Query, REGISTRY_TENANT, Write};

/// The registry part holding each tenant's promotion record (key: the tenant).
pub const PART: &str = "fortress";
/// How often a process re-reads which tenants it mirrors.
pub const MIRROR_REFRESH: Duration = Duration::from_secs(10);

/// Where a tenant's promotion stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromotionState {
    /// Dual-writing, and copying what the main store held before.
    Backfilling,
    /// The fortress holds the tenant (checked by hash); dual-writing goes on.
    Promoted,
}

/// A tenant's promotion to the fortress, stored in the main store's registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Promotion {
    pub tenant: String,
    pub state: PromotionState,
    /// Where the backfill's scan of the main store resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Records copied (or found equal) so far.
    pub copied: u64,
    /// The backfill's scan reached the end: later runs only reconcile and verify.
    #[serde(default)]
    pub backfilled: bool,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    #[serde(default)]
    pub version: u64,
}

/// The main item store, mirroring promoted tenants' writes into the fortress.
pub struct Mirrored {
    main: Arc<dyn ItemStore>,
    fortress: Arc<dyn ItemStore>,
    /// The backend's clock: the refresh is timed by it, as the promotion's wait is.
    clock: Arc<dyn Clock>,
    known: RwLock<Option<(Timestamp, Arc<BTreeSet<String>>)>>,
}

impl Mirrored {
    pub fn new(main: Arc<dyn ItemStore>, fortress: Arc<dyn ItemStore>, clock: Arc<dyn Clock>) -> Self {
        Self { main, fortress, clock, known: RwLock::new(None) }
    }

    /// The tenants whose writes are mirrored, re-read every [`MIRROR_REFRESH`].
    async fn mirrored(&self) -> Result<Arc<BTreeSet<String>>> {
        if let Some((at, set)) = self.known.read().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref()
            && u128::try_from(self.clock.now().0 - at.0).is_ok_and(|ms| ms < MIRROR_REFRESH.as_millis())
        {
            return Ok(set.clone());
        }
        let mut set = BTreeSet::new();
        let mut after: Option<String> = None;
        loop {
            let (items, more) = self
                .main
                .query(Query {
                    tenant: REGISTRY_TENANT,
                    part: PART,
                    prefix: "",
                    after: after.as_deref(),
                    limit: 500,
                    descending: false,
                })
                .await?;
            after = items.last().map(|i| i.sk.clone());
            set.extend(items.into_iter().map(|i| i.sk));
            if !more {
                break;
            }
        }
        let set = Arc::new(set);
        *self.known.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((self.clock.now(), set.clone()));
        Ok(set)
    }
}

fn tenant_of(w: &Write) -> &str {
    match w {
        Write::Put { item, .. } => &item.tenant,
        Write::Delete { tenant, .. } => tenant,
    }
}

#[async_trait]
impl ItemStore for Mirrored {
    async fn get(&self, tenant: &str, part: &str, sk: &str) -> Result<Option<Item>> {
        self.main.get(tenant, part, sk).await
    }

    async fn query(&self, query: Query<'_>) -> Result<(Vec<Item>, bool)> {
        self.main.query(query).await
    }

    async fn scan_tenant(&self, tenant: &str, cursor: Option<&str>, limit: u32) -> Result<(Vec<Item>, Option<String>)> {
        self.main.scan_tenant(tenant, cursor, limit).await
    }

    async fn sync(&self) -> Result<()> {
        self.main.sync().await?;
        self.fortress.sync().await
    }

    async fn write(&self, writes: Vec<Write>) -> Result<()> {
        // Only the writes of promoted tenants are copied (none on the common path).
        let mirrored: Vec<Write> = match self.mirrored().await {
            Ok(set) => writes
                .iter()
                .filter(|w| set.contains(tenant_of(w)))
                .map(|w| match w.clone() {
                    Write::Put { item, .. } => Write::Put { item, condition: Condition::None },
                    Write::Delete { tenant, part, sk, .. } => Write::Delete { tenant, part, sk, condition: Condition::None },
                })
                .collect(),
            Err(e) => {
                tracing::warn!(code = ?e.code, "fortress: could not read which tenants are promoted; this write is not mirrored");
                Vec::new()
            }
        };
        self.main.write(writes).await?;
        for chunk in mirrored.chunks(self.fortress.max_batch().max(1)) {
            if let Err(e) = self.fortress.write(chunk.to_vec()).await {
                // The main store holds the write; the promotion's next run reconciles.
                tracing::warn!(code = ?e.code, "fortress: a mirrored write failed; `continuity tenant promote` reconciles it");
            }
        }
        Ok(())
    }

    fn max_batch(&self) -> usize {
        self.main.max_batch()
    }
}

/// The fortress as the services read it: every read passes, every write is refused
/// (`INTERNAL`: a program error, not bad input), so no use case can change the verified
/// copy by mistake. The mirror path holds the writable store.
pub struct ReadOnly(Arc<dyn ItemStore>);

impl ReadOnly {
    pub fn new(fortress: Arc<dyn ItemStore>) -> Self {
        Self(fortress)
    }
}

#[async_trait]
impl ItemStore for ReadOnly {
    async fn get(&self, tenant: &str, part: &str, sk: &str) -> Result<Option<Item>> {
        self.0.get(tenant, part, sk).await
    }

    async fn query(&self, query: Query<'_>) -> Result<(Vec<Item>, bool)> {
        self.0.query(query).await
    }

    async fn scan_tenant(&self, tenant: &str, cursor: Option<&str>, limit: u32) -> Result<(Vec<Item>, Option<String>)> {
        self.0.scan_tenant(tenant, cursor, limit).await
    }

    async fn write(&self, _: Vec<Write>) -> Result<()> {
        Err(Error::internal("the fortress is written only by the mirror path (ports::fortress): this write was refused"))
    }

    fn max_batch(&self) -> usize {
        self.0.max_batch()
    }
}
