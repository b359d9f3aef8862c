//! The item port: what a record-of-truth backend must provide.
//!
//! An item lives at `(tenant, part, sk)`: the tenant leads every partition (wall 6),
//! `part` names a record kind or an index of one, and `sk` orders items within it.
//! Sort keys are printable ASCII (every id is validated to be so), compared bytewise.
//! Each item carries an opaque `body` and a `version` used by conditional writes.
//!
//! Backends: `store_embedded::SqliteItems` (one `items` table, `WITHOUT ROWID`) and
//! `store_aws::DynamoItems` (one table, `PK = "{tenant}#{part}"`, `SK = sk`).

use async_trait::async_trait;
use domain::Result;

/// The pseudo-tenant holding the tenant registry. Real tenant slugs start with a letter,
/// so no tenant can ever address this partition.
pub const REGISTRY_TENANT: &str = "_registry";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub tenant: String,
    pub part: String,
    pub sk: String,
    pub version: u64,
    pub body: Vec<u8>,
}

/// A condition a write must meet, checked atomically with the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Always write.
    None,
    /// The item must not exist (create, idempotency claim).
    Absent,
    /// The item must exist with exactly this version (optimistic concurrency).
    Version(u64),
    /// The item must exist.
    Exists,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    Put { item: Item, condition: Condition },
    Delete { tenant: String, part: String, sk: String, condition: Condition },
}

/// A range query inside one `(tenant, part)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query<'a> {
    pub tenant: &'a str,
    pub part: &'a str,
    /// Only sort keys starting with this prefix.
    pub prefix: &'a str,
    /// Exclusive start: the last sort key of the previous page.
    pub after: Option<&'a str>,
    pub limit: u32,
    pub descending: bool,
}

/// Writes every backend takes in one atomic batch (DynamoDB's transaction limit is 100).
/// A backend may take more ([`ItemStore::max_batch`]).
pub const MAX_WRITES_PER_BATCH: usize = 25;

#[async_trait]
pub trait ItemStore: Send + Sync {
    /// Reads one item.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the backend cannot be reached.
    async fn get(&self, tenant: &str, part: &str, sk: &str) -> Result<Option<Item>>;

    /// Reads up to `limit` items in sort-key order, plus whether more may follow.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the backend cannot be reached.
    async fn query(&self, query: Query<'_>) -> Result<(Vec<Item>, bool)>;

    /// Applies all writes atomically: either every condition holds and every write lands,
    /// or nothing is written.
    ///
    /// # Errors
    /// `CONFLICT` when any condition fails; `INVALID_REQUEST` for more than
    /// [`Self::max_batch`] writes; `UNAVAILABLE` when the backend cannot be reached.
    async fn write(&self, writes: Vec<Write>) -> Result<()>;

    /// Every item of `tenant` in every part, a page at a time, for exports (complete
    /// backups): up to about `limit` items and the cursor of the next page (`None` at
    /// the end). The order is the backend's own; the cursor is opaque. Another tenant's
    /// items are never returned (`acme` does not see `acme2`).
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed cursor; `UNAVAILABLE`.
    async fn scan_tenant(&self, tenant: &str, cursor: Option<&str>, limit: u32) -> Result<(Vec<Item>, Option<String>)>;

    /// Makes every write committed so far durable: the writes a use case made inside
    /// [`crate::durability::batched`], which a backend may have left to this call. A
    /// backend whose every write is durable by itself has nothing to do.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the storage could not confirm the writes.
    async fn sync(&self) -> Result<()> {
        Ok(())
    }

    /// The most writes [`Self::write`] takes at once: at least [`MAX_WRITES_PER_BATCH`].
    /// Bulk appends (the audit ledger's group commit) chunk by it, so a backend whose
    /// batch is one local transaction pays one commit for many records.
    fn max_batch(&self) -> usize {
        MAX_WRITES_PER_BATCH
    }
}
