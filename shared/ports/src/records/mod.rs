//! Typed record-of-truth ports and their one implementation over the item port.
//!
//! Key layout (the same on SQLite and DynamoDB; see ARCHITECTURE.md):
//!
//! | record | part | sort key |
//! |---|---|---|
//! | tenant | `tenant` | `meta` (and `_registry`/`tenants`/`{slug}`) |
//! | principal | `principal` | `{id}` |
//! | API key | `apikey` | `{key_id}` |
//! | entity | `entity` | `{type}#{id}` |
//! | relationship | `rel_out` / `rel_in` | `{from}#{kind}#{to}` / `{to}#{kind}#{from}` |
//! | signal | `signal` / `signal_by_entity` / `signal_id` | `{at}#{id}` / `{type}#{id}#{at}#{sid}` / `{sid}` |
//! | memory entry | `memory` / `memory_by_scope` | `{id}` / `{scope}#{id}` |
//! | conversation turn | `turn` | `{session}#{seq}` |
//! | session index | `session` | `{principal}#{session}` |
//! | book-of-projects entry | `book` | `{project}#{id}` |
//! | KB document | `kb` | `{id}` |
//! | proposal | `proposal` / `proposal_by_state` | `{id}` / `{state}#{id}` |
//! | audit record | `audit` | `{at}#{id}` |
//! | idempotency key | `idem` | `{key}` |
//! | replayable call (its outcome) | `call` | `{principal}/{key}` |
//! | connector status | `connector` | `{source}` |
//! | gate | `gate` | `{namespace}#{action}` |
//! | task | `task` / `task_by_assignee` | `{id}` / `{assignee}#{id}` |
//! | connector credential (sealed) | `connector_cred` | `{source}` |
//! | notification channel (sealed) / failed delivery | `notify_channel` / `notify_failure` | `{id}` / `{at}#{event}` |
//! | connector grant (sealed) / pull state | `connector_grant` / `connector_sync` | `{source}` |
//! | source app (sealed) / pending connect | `source_app` / `connector_oauth` under `_registry` | `{source}` / `{sha256(state)}` |
//! | engineering record | `eng` | `{project}#{kind}#{id}` |
//! | user login | `login` | `{email}` |
//! | OAuth client / code / refresh token / refresh family / pending login / used `jti` | `oauth_client` / `oauth_code` / `oauth_refresh` / `oauth_family` / `oauth_pending` / `oauth_jti` under `_registry` | `{client_id}` / `{sha256}` / `{sha256}` / `{id}` / `{id}` / `{sha256(iss)}#{sha256(jti)}` |
//!
//! Timestamps and sequence numbers in sort keys are zero-padded to 20 digits so that
//! bytewise order is time order.

use std::sync::Arc;

use async_trait::async_trait;
use domain::audit::AuditRecord;
use domain::connector::{ConnectorSource, ConnectorState, ConnectorStatus, IngestFailure};
use domain::principal::{ApiKeyRecord, Principal};
use domain::spine::{Entity, EntityRef, Relationship, Signal};
use domain::tenant::Tenant;
use domain::{EntityType, Error, Id, Page, PageRequest, Result, TenantId, Timestamp};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::items::{Condition, Item, ItemStore, Query, REGISTRY_TENANT, Write};

mod engineering;
mod gates;
mod idempotency;
mod library;
mod memory;
mod notify;
mod proposals;
mod retention;
mod sources;
mod tasks;
pub use engineering::EngineeringStore;
pub use gates::GateStore;
pub use idempotency::{CallRecord, IdempotencyStore};
pub use library::{LibraryStore, ReviewStore};
pub use memory::{MemoryStore, memory_cursor};
pub use notify::{MAX_CHANNELS, NotifyStore};
pub use proposals::ProposalStore;
pub use retention::RetentionStore;
pub use sources::SourceStore;
pub use tasks::{CredentialStore, TaskStore};

/// How a versioned write is conditioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Create: the record must not exist yet. The stored version is 1.
    Absent,
    /// Update: the stored version must equal this; the new version is this + 1.
    Version(u64),
    /// Create or replace regardless (pipeline upserts ordered by source timestamp).
    Any,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Outgoing,
    Incoming,
}

#[async_trait]
pub trait TenantStore: Send + Sync {
    /// # Errors
    /// `CONFLICT` when the slug is taken; `UNAVAILABLE`.
    async fn create_tenant(&self, tenant: &Tenant) -> Result<()>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_tenant(&self, id: &TenantId) -> Result<Option<Tenant>>;
    /// Writes `tenant` if the stored version is `tenant.version`; returns it with the new version.
    ///
    /// # Errors
    /// `CONFLICT` on a version mismatch; `NOT_FOUND`; `UNAVAILABLE`.
    async fn update_tenant(&self, tenant: &Tenant) -> Result<Tenant>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_tenants(&self, page: &PageRequest) -> Result<Page<TenantId>>;
}

#[async_trait]
pub trait PrincipalStore: Send + Sync {
    /// # Errors
    /// `CONFLICT` when the id is taken; `UNAVAILABLE`.
    async fn create_principal(&self, principal: &Principal) -> Result<()>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_principal(&self, tenant: &TenantId, id: &Id) -> Result<Option<Principal>>;
    /// # Errors
    /// `CONFLICT` when the key id is taken; `UNAVAILABLE`.
    async fn create_api_key(&self, key: &ApiKeyRecord) -> Result<()>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_api_key(&self, tenant: &TenantId, key_id: &Id) -> Result<Option<ApiKeyRecord>>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_api_keys(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<ApiKeyRecord>>;
    /// Marks a key revoked (kept for the audit trail, never deleted).
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown key; `UNAVAILABLE`.
    async fn revoke_api_key(&self, tenant: &TenantId, key_id: &Id, at: Timestamp) -> Result<()>;
}

#[async_trait]
pub trait EntityStore: Send + Sync {
    /// Writes an entity under `expect`; returns it as stored (version set).
    ///
    /// # Errors
    /// `CONFLICT` when `expect` does not hold; `UNAVAILABLE`.
    async fn put_entity(&self, entity: &Entity, expect: Expect) -> Result<Entity>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_entity(&self, tenant: &TenantId, entity_type: &EntityType, id: &Id) -> Result<Option<Entity>>;
    /// Entities of one type (or all), ordered by `(type, id)`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed cursor; `UNAVAILABLE`.
    async fn list_entities(
        &self,
        tenant: &TenantId,
        entity_type: Option<&EntityType>,
        page: &PageRequest,
    ) -> Result<Page<Entity>>;
}

#[async_trait]
pub trait RelationshipStore: Send + Sync {
    /// Creates or replaces the edge `(from, kind, to)`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` when `from`/`to` belong to another tenant; `UNAVAILABLE`.
    async fn put_relationship(&self, rel: &Relationship) -> Result<()>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_relationships(
        &self,
        tenant: &TenantId,
        entity: &EntityRef,
        direction: Direction,
        page: &PageRequest,
    ) -> Result<Page<Relationship>>;
}

#[async_trait]
pub trait SignalStore: Send + Sync {
    /// # Errors
    /// `CONFLICT` when the signal id exists; `UNAVAILABLE`.
    async fn append_signal(&self, signal: &Signal) -> Result<()>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_signal(&self, tenant: &TenantId, id: &Id) -> Result<Option<Signal>>;
    /// Newest first; of one entity, or of the whole tenant.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_signals(&self, tenant: &TenantId, entity: Option<&EntityRef>, page: &PageRequest) -> Result<Page<Signal>>;
}

#[async_trait]
pub trait AuditLog: Send + Sync {
    /// # Errors
    /// `UNAVAILABLE`.
    async fn append_audit(&self, record: &AuditRecord) -> Result<()>;
    /// Appends many records (of any tenants), in atomic groups of at most 25.
    ///
    /// # Errors
    /// `UNAVAILABLE`; groups before the failing one are written.
    async fn append_audits(&self, records: &[AuditRecord]) -> Result<()>;
    /// Newest first.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_audit(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<AuditRecord>>;
}

#[async_trait]
pub trait IngestFailureStore: Send + Sync {
    /// Creates or replaces the failure recorded under `failure.key` (one per record).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn put_ingest_failure(&self, failure: &IngestFailure) -> Result<()>;
    /// The tenant's failures, ordered by key.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed cursor; `UNAVAILABLE`.
    async fn list_ingest_failures(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<IngestFailure>>;
}

/// Connector status (SPEC §4.5), one record per `(tenant, source)`.
///
/// Every state change goes through [`ConnectorStatus::transition`] between a read and a
/// write conditioned on the version read, so two concurrent transitions never both
/// succeed: the loser gets `CONFLICT` and re-reads, and no update is lost.
#[async_trait]
pub trait ConnectorStore: Send + Sync {
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_connector(&self, tenant: &TenantId, source: &ConnectorSource) -> Result<Option<ConnectorStatus>>;
    /// The tenant's connectors, ordered by source.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed cursor; `UNAVAILABLE`.
    async fn list_connectors(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<ConnectorStatus>>;
    /// Writes `status` under `expect` — `Absent` for the first registration, `Version(v)`
    /// for a transition computed from version `v` — and returns it as stored (version set).
    /// It checks the record's invariants, not the legality of the move: use
    /// [`ConnectorStore::transition_connector`] to change state.
    ///
    /// # Errors
    /// `INVALID_REQUEST` when `status` breaks an invariant ([`ConnectorStatus::check`]);
    /// `CONFLICT` when `expect` does not hold; `UNAVAILABLE`.
    async fn put_connector(&self, status: &ConnectorStatus, expect: Expect) -> Result<ConnectorStatus>;

    /// Moves the connector to `to`: reads it (absent = `not_connected`), applies
    /// [`ConnectorStatus::transition`] and writes the result with `Expect::Absent` (first
    /// write) or `Expect::Version` of what was read. Returns the stored status.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a progress outside [0, 1] or a `sync_error` without its stage
    /// and message; `CONFLICT` for an illegal move, or when another transition won the race
    /// (nothing is written; re-read and decide again); `UNAVAILABLE`.
    async fn transition_connector(
        &self,
        tenant: &TenantId,
        source: &ConnectorSource,
        to: ConnectorState,
        progress: Option<f64>,
        error: Option<(String, String)>,
        now: Timestamp,
    ) -> Result<ConnectorStatus> {
        let current = self.get_connector(tenant, source).await?;
        let expect = current.as_ref().map_or(Expect::Absent, |c| Expect::Version(c.version));
        let current = current.unwrap_or_else(|| ConnectorStatus::not_connected(tenant.clone(), source.clone(), now));
        let next = current.transition(to, progress, error, now)?;
        self.put_connector(&next, expect).await
    }
}

/// The typed stores over one item backend.
#[derive(Clone)]
pub struct Records {
    items: Arc<dyn ItemStore>,
    /// Encrypts entity payloads at rest (SPEC §4.2), when configured.
    vault: Option<Arc<crate::vault::Vault>>,
    /// Raised by every API key revocation, where the backend has a cheap signal every
    /// process sharing the store can read.
    epoch: Option<Arc<dyn CredentialEpoch>>,
}

/// A signal that credentials changed (an API key was revoked), cheap enough to read on
/// every request and seen by every process sharing the store: while it holds, an
/// authenticator may keep key records in memory. The embedded backend has one (a file
/// replaced on every revocation, compared by `stat`); AWS has none, so its functions
/// read the key on every request (the authorizer's own cache bounds that).
pub trait CredentialEpoch: Send + Sync {
    /// The current value: it differs after any process called [`CredentialEpoch::bump`].
    fn current(&self) -> u64;
    /// Changes the value, for every process.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the signal cannot be written.
    fn bump(&self) -> Result<()>;
}

fn pad(n: i64) -> String {
    format!("{:020}", n.max(0))
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(Error::internal)
}

pub(crate) fn decode<T: DeserializeOwned>(item: &Item) -> Result<T> {
    serde_json::from_slice(&item.body).map_err(|e| Error::internal(format!("corrupt item {}/{}: {e}", item.part, item.sk)))
}

/// A tenant's audit records are spread over this many partitions (`audit.0` …
/// `audit.7`, by a hash of the record's id): DynamoDB takes about 1 000 writes a second
/// on one partition key, so one busy tenant's audit trail would throttle on a single
/// key. Every shard sorts by `{time}#{id}`, so a listing merges them in order. Records
/// written before the sharding stay in `audit` ([`AUDIT_LEGACY`]) and are listed,
/// counted, archived and pruned with the rest.
pub const AUDIT_SHARDS: u64 = 8;
/// The single audit partition of earlier versions.
pub const AUDIT_LEGACY: &str = "audit";

/// The audit partition of the record `id`.
pub(crate) fn audit_part(id: &Id) -> String {
    // FNV-1a: stable across runs, platforms and versions.
    let h = id.as_str().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{AUDIT_LEGACY}.{}", h % AUDIT_SHARDS)
}

/// Every partition audit records may be in: the shards and the legacy one.
pub fn audit_parts() -> Vec<String> {
    std::iter::once(AUDIT_LEGACY.to_owned()).chain((0..AUDIT_SHARDS).map(|i| format!("{AUDIT_LEGACY}.{i}"))).collect()
}

/// The write of one audit record (a create: an audit record is never overwritten).
pub(crate) fn audit_put(r: &AuditRecord) -> Result<Write> {
    Ok(put(r.tenant.as_str(), &audit_part(&r.id), format!("{}#{}", pad(r.at.0), r.id), 1, encode(r)?, Condition::Absent))
}

pub(crate) fn put(tenant: &str, part: &str, sk: String, version: u64, body: Vec<u8>, condition: Condition) -> Write {
    Write::Put { item: Item { tenant: tenant.to_owned(), part: part.to_owned(), sk, version, body }, condition }
}

fn entity_ref_key(r: &EntityRef) -> String {
    format!("{}#{}", r.entity_type, r.id)
}

/// Cursors are the last sort key, hex-encoded so clients treat them as opaque.
fn encode_cursor(sk: &str) -> String {
    sk.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_cursor(raw: &str) -> Result<String> {
    let bad = || Error::invalid_field("cursor", "malformed cursor");
    if !raw.len().is_multiple_of(2) || raw.len() > 2048 {
        return Err(bad());
    }
    let bytes = (0..raw.len())
        .step_by(2)
        .map(|i| raw.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(bad))
        .collect::<Result<Vec<u8>>>()?;
    let s = String::from_utf8(bytes).map_err(|_| bad())?;
    if !s.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad());
    }
    Ok(s)
}

impl Records {
    pub fn new(items: Arc<dyn ItemStore>) -> Self {
        Self { items, vault: None, epoch: None }
    }

    /// The same store, raising `epoch` on every API key revocation.
    #[must_use]
    pub fn with_credential_epoch(mut self, epoch: Arc<dyn CredentialEpoch>) -> Self {
        self.epoch = Some(epoch);
        self
    }

    /// Makes every write committed so far durable ([`ItemStore::sync`]): what a use case
    /// run inside [`crate::durability::batched`] calls before it answers.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the storage could not confirm the writes.
    pub async fn sync(&self) -> Result<()> {
        self.items.sync().await
    }

    /// The credentials' change signal's current value, when the backend has one: an
    /// API key record read after this value was read stays valid while it holds.
    pub fn credential_epoch(&self) -> Option<u64> {
        self.epoch.as_ref().map(|e| e.current())
    }

    /// The records of `items` with this store's vault: how the mirror path (and a test
    /// playing it) writes the fortress whose read-only view this is.
    #[must_use]
    pub fn with_items(&self, items: Arc<dyn ItemStore>) -> Self {
        Self { items, vault: self.vault.clone(), epoch: None }
    }

    /// The same store with entity payloads encrypted by `vault`.
    #[must_use]
    pub fn with_vault(mut self, vault: Arc<crate::vault::Vault>) -> Self {
        self.vault = Some(vault);
        self
    }

    /// Whether the vault (if any) can open `tenant`'s data key; see
    /// [`crate::vault::Vault::check`].
    ///
    /// # Errors
    /// As [`crate::vault::Vault::check`].
    pub async fn check_vault(&self, tenant: &TenantId) -> Result<()> {
        match &self.vault {
            Some(v) => v.check(self.items.as_ref(), tenant).await,
            None => Ok(()),
        }
    }

    /// An entity's stored body: JSON, sealed by the vault when there is one.
    async fn entity_body(&self, e: &Entity, sk: &str) -> Result<Vec<u8>> {
        let json = encode(e)?;
        match &self.vault {
            Some(v) => v.seal(self.items.as_ref(), &e.tenant, &format!("{}/entity/{sk}", e.tenant), &json).await,
            None => Ok(json),
        }
    }

    async fn entity_of(&self, tenant: &TenantId, item: &Item) -> Result<Entity> {
        let plain = match &self.vault {
            Some(v) => v.open(self.items.as_ref(), tenant, &format!("{tenant}/entity/{}", item.sk), &item.body).await?,
            None => item.body.clone(),
        };
        let e: Entity = serde_json::from_slice(&plain).map_err(|e| Error::internal(format!("corrupt entity record: {e}")))?;
        if e.tenant != *tenant {
            return Err(Error::internal("an entity record names another tenant"));
        }
        Ok(e)
    }

    /// How many items of `part` in `tenant` have a sort key starting with `prefix`,
    /// counting at most `max` (a figure for people, bounded so it stays cheap).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    /// How many audit records `tenant` has in all its audit partitions, at most `max`.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn count_audit(&self, tenant: &str, max: u64) -> Result<u64> {
        let mut n = 0;
        for part in audit_parts() {
            if n >= max {
                break;
            }
            n += self.count(tenant, &part, "", max - n).await?;
        }
        Ok(n)
    }

    pub async fn count(&self, tenant: &str, part: &str, prefix: &str, max: u64) -> Result<u64> {
        let mut n = 0u64;
        let mut after: Option<String> = None;
        loop {
            let q = Query { tenant, part, prefix, after: after.as_deref(), limit: 1000, descending: false };
            let (items, more) = self.items.query(q).await?;
            n += items.len() as u64;
            if !more || n >= max {
                return Ok(n.min(max));
            }
            after = items.last().map(|i| i.sk.clone());
        }
    }

    pub fn items(&self) -> &Arc<dyn ItemStore> {
        &self.items
    }

    pub(crate) async fn page<T: DeserializeOwned>(
        &self,
        tenant: &str,
        part: &str,
        prefix: &str,
        page: &PageRequest,
        descending: bool,
    ) -> Result<Page<T>> {
        let (items, next_cursor) = self.page_items(tenant, part, prefix, page, descending).await?;
        let items = items.iter().map(decode).collect::<Result<Vec<T>>>()?;
        Ok(Page { items, next_cursor })
    }

    /// One page of raw items and the cursor of the next (the paging every listing shares).
    pub(crate) async fn page_items(
        &self,
        tenant: &str,
        part: &str,
        prefix: &str,
        page: &PageRequest,
        descending: bool,
    ) -> Result<(Vec<Item>, Option<String>)> {
        let after = page.cursor.as_deref().map(decode_cursor).transpose()?;
        if let Some(a) = &after {
            // A cursor outside the requested prefix would let a caller wander; refuse it.
            if !a.starts_with(prefix) {
                return Err(Error::invalid_field("cursor", "cursor does not belong to this listing"));
            }
        }
        let (items, more) =
            self.items.query(Query { tenant, part, prefix, after: after.as_deref(), limit: page.size(), descending }).await?;
        let next_cursor = if more { items.last().map(|i| encode_cursor(&i.sk)) } else { None };
        Ok((items, next_cursor))
    }

    pub(crate) async fn get_one<T: DeserializeOwned>(&self, tenant: &str, part: &str, sk: &str) -> Result<Option<T>> {
        self.items.get(tenant, part, sk).await?.as_ref().map(decode).transpose()
    }
}

#[async_trait]
impl TenantStore for Records {
    async fn create_tenant(&self, tenant: &Tenant) -> Result<()> {
        let mut t = tenant.clone();
        t.version = 1;
        let body = encode(&t)?;
        let slug = t.id.as_str();
        self.items
            .write(vec![
                put(slug, "tenant", "meta".into(), 1, body, Condition::Absent),
                put(REGISTRY_TENANT, "tenants", slug.to_owned(), 1, encode(&t.id)?, Condition::Absent),
            ])
            .await
            .map_err(|e| {
                if e.code == domain::ErrorCode::Conflict { Error::conflict(format!("tenant {slug} already exists")) } else { e }
            })
    }

    async fn get_tenant(&self, id: &TenantId) -> Result<Option<Tenant>> {
        self.get_one(id.as_str(), "tenant", "meta").await
    }

    async fn update_tenant(&self, tenant: &Tenant) -> Result<Tenant> {
        let current = self.get_tenant(&tenant.id).await?.ok_or_else(|| Error::not_found(format!("tenant {}", tenant.id)))?;
        current.check_storage_tier_change(tenant.storage_tier)?;
        let mut next = tenant.clone();
        next.version = tenant.version + 1;
        self.items
            .write(vec![put(
                tenant.id.as_str(),
                "tenant",
                "meta".into(),
                next.version,
                encode(&next)?,
                Condition::Version(tenant.version),
            )])
            .await?;
        Ok(next)
    }

    async fn list_tenants(&self, page: &PageRequest) -> Result<Page<TenantId>> {
        self.page(REGISTRY_TENANT, "tenants", "", page, false).await
    }
}

#[async_trait]
impl PrincipalStore for Records {
    async fn create_principal(&self, principal: &Principal) -> Result<()> {
        self.items
            .write(vec![put(
                principal.tenant.as_str(),
                "principal",
                principal.id.to_string(),
                1,
                encode(principal)?,
                Condition::Absent,
            )])
            .await
    }

    async fn get_principal(&self, tenant: &TenantId, id: &Id) -> Result<Option<Principal>> {
        self.get_one(tenant.as_str(), "principal", id.as_str()).await
    }

    async fn create_api_key(&self, key: &ApiKeyRecord) -> Result<()> {
        self.items
            .write(vec![put(key.tenant.as_str(), "apikey", key.key_id.to_string(), 1, encode(key)?, Condition::Absent)])
            .await
    }

    async fn get_api_key(&self, tenant: &TenantId, key_id: &Id) -> Result<Option<ApiKeyRecord>> {
        self.get_one(tenant.as_str(), "apikey", key_id.as_str()).await
    }

    async fn list_api_keys(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<ApiKeyRecord>> {
        self.page(tenant.as_str(), "apikey", "", page, false).await
    }

    async fn revoke_api_key(&self, tenant: &TenantId, key_id: &Id, at: Timestamp) -> Result<()> {
        let item = self
            .items
            .get(tenant.as_str(), "apikey", key_id.as_str())
            .await?
            .ok_or_else(|| Error::not_found(format!("key {key_id}")))?;
        let mut key: ApiKeyRecord = decode(&item)?;
        if key.revoked_at.is_some() {
            return Ok(());
        }
        key.revoked_at = Some(at);
        self.items
            .write(vec![put(
                tenant.as_str(),
                "apikey",
                key_id.to_string(),
                item.version + 1,
                encode(&key)?,
                Condition::Version(item.version),
            )])
            .await?;
        // After the commit: a process that reads the new value reads the revoked record.
        match &self.epoch {
            Some(e) => e.bump(),
            None => Ok(()),
        }
    }
}

pub(crate) fn versioned(expect: Expect) -> (u64, Condition) {
    match expect {
        Expect::Absent => (1, Condition::Absent),
        Expect::Version(v) => (v + 1, Condition::Version(v)),
        Expect::Any => (0, Condition::None),
    }
}

/// One ingested record's whole effect: the signals of what changed, its relationships,
/// and the entity itself under `expect`.
#[derive(Debug, Clone)]
pub struct SpineWrite {
    pub entity: Entity,
    pub expect: Expect,
    pub relationships: Vec<Relationship>,
    pub signals: Vec<Signal>,
}

impl Records {
    /// Applies many records' effects in as few atomic batches as the store takes
    /// ([`ItemStore::max_batch`]) — one SQLite transaction for a whole message; DynamoDB
    /// transactions of 25 items — never splitting one record's effect across batches, so
    /// an entity is never stored without its signals and relationships. Signals and
    /// relationships are idempotent overwrites (their keys derive from what they say);
    /// entities are versioned. Returns the stored entities in order.
    ///
    /// # Errors
    /// `CONFLICT` when an entity's `expect` fails (that batch is not written; earlier
    /// batches stay written, so the caller re-reads and decides again); `INVALID_REQUEST`
    /// when one record's effect alone exceeds a batch; `UNAVAILABLE`.
    pub async fn apply_spine_writes(&self, writes: &[SpineWrite]) -> Result<Vec<Entity>> {
        let max = self.items.max_batch();
        let mut stored = Vec::with_capacity(writes.len());
        let mut batch: Vec<Write> = Vec::new();
        for w in writes {
            let mut group = Vec::new();
            for s in &w.signals {
                let (t, body, at) = (s.tenant.as_str(), encode(s)?, pad(s.at.0));
                group.push(put(t, "signal_id", s.id.to_string(), 1, body.clone(), Condition::None));
                group.push(put(t, "signal", format!("{at}#{}", s.id), 1, body.clone(), Condition::None));
                group.push(put(
                    t,
                    "signal_by_entity",
                    format!("{}#{at}#{}", entity_ref_key(&s.entity), s.id),
                    1,
                    body,
                    Condition::None,
                ));
            }
            for r in &w.relationships {
                let (t, from, to, body) = (r.tenant.as_str(), entity_ref_key(&r.from), entity_ref_key(&r.to), encode(r)?);
                group.push(put(t, "rel_out", format!("{from}#{}#{to}", r.kind), 1, body.clone(), Condition::None));
                group.push(put(t, "rel_in", format!("{to}#{}#{from}", r.kind), 1, body, Condition::None));
            }
            let (version, condition) = versioned(w.expect);
            if w.expect == Expect::Any {
                return Err(Error::invalid("apply_spine_writes needs Absent or Version for each entity"));
            }
            let mut e = w.entity.clone();
            e.version = version;
            let sk = format!("{}#{}", e.entity_type, e.id);
            let body = self.entity_body(&e, &sk).await?;
            group.push(put(e.tenant.as_str(), "entity", sk, version, body, condition));
            stored.push(e);
            if group.len() > max {
                return Err(Error::invalid(format!("one record's effect is {} writes; at most {max}", group.len())));
            }
            if batch.len() + group.len() > max {
                self.items.write(std::mem::take(&mut batch)).await?;
            }
            batch.extend(group);
        }
        if !batch.is_empty() {
            self.items.write(batch).await?;
        }
        Ok(stored)
    }
}

#[async_trait]
impl EntityStore for Records {
    async fn put_entity(&self, entity: &Entity, expect: Expect) -> Result<Entity> {
        let tenant = entity.tenant.as_str();
        let sk = format!("{}#{}", entity.entity_type, entity.id);
        let (mut version, condition) = versioned(expect);
        if expect == Expect::Any {
            // Unconditional replace still bumps the version the caller can see.
            version = self.items.get(tenant, "entity", &sk).await?.map_or(1, |i| i.version + 1);
        }
        let mut stored = entity.clone();
        stored.version = version;
        let body = self.entity_body(&stored, &sk).await?;
        self.items.write(vec![put(tenant, "entity", sk, version, body, condition)]).await?;
        Ok(stored)
    }

    async fn get_entity(&self, tenant: &TenantId, entity_type: &EntityType, id: &Id) -> Result<Option<Entity>> {
        match self.items.get(tenant.as_str(), "entity", &format!("{entity_type}#{id}")).await? {
            Some(item) => self.entity_of(tenant, &item).await.map(Some),
            None => Ok(None),
        }
    }

    async fn list_entities(
        &self,
        tenant: &TenantId,
        entity_type: Option<&EntityType>,
        page: &PageRequest,
    ) -> Result<Page<Entity>> {
        let prefix = entity_type.map(|t| format!("{t}#")).unwrap_or_default();
        let (items, next_cursor) = self.page_items(tenant.as_str(), "entity", &prefix, page, false).await?;
        let mut out = Vec::with_capacity(items.len());
        for i in &items {
            out.push(self.entity_of(tenant, i).await?);
        }
        Ok(Page { items: out, next_cursor })
    }
}

#[async_trait]
impl RelationshipStore for Records {
    async fn put_relationship(&self, rel: &Relationship) -> Result<()> {
        let t = rel.tenant.as_str();
        let from = entity_ref_key(&rel.from);
        let to = entity_ref_key(&rel.to);
        let body = encode(rel)?;
        self.items
            .write(vec![
                put(t, "rel_out", format!("{from}#{}#{to}", rel.kind), 1, body.clone(), Condition::None),
                put(t, "rel_in", format!("{to}#{}#{from}", rel.kind), 1, body, Condition::None),
            ])
            .await
    }

    async fn list_relationships(
        &self,
        tenant: &TenantId,
        entity: &EntityRef,
        direction: Direction,
        page: &PageRequest,
    ) -> Result<Page<Relationship>> {
        let part = match direction {
            Direction::Outgoing => "rel_out",
            Direction::Incoming => "rel_in",
        };
        self.page(tenant.as_str(), part, &format!("{}#", entity_ref_key(entity)), page, false).await
    }
}

#[async_trait]
impl SignalStore for Records {
    async fn append_signal(&self, s: &Signal) -> Result<()> {
        let t = s.tenant.as_str();
        let body = encode(s)?;
        let at = pad(s.at.0);
        self.items
            .write(vec![
                put(t, "signal_id", s.id.to_string(), 1, body.clone(), Condition::Absent),
                put(t, "signal", format!("{at}#{}", s.id), 1, body.clone(), Condition::Absent),
                put(t, "signal_by_entity", format!("{}#{at}#{}", entity_ref_key(&s.entity), s.id), 1, body, Condition::Absent),
            ])
            .await
    }

    async fn get_signal(&self, tenant: &TenantId, id: &Id) -> Result<Option<Signal>> {
        self.get_one(tenant.as_str(), "signal_id", id.as_str()).await
    }

    async fn list_signals(&self, tenant: &TenantId, entity: Option<&EntityRef>, page: &PageRequest) -> Result<Page<Signal>> {
        match entity {
            Some(e) => self.page(tenant.as_str(), "signal_by_entity", &format!("{}#", entity_ref_key(e)), page, true).await,
            None => self.page(tenant.as_str(), "signal", "", page, true).await,
        }
    }
}

#[async_trait]
impl AuditLog for Records {
    async fn append_audit(&self, r: &AuditRecord) -> Result<()> {
        self.items.write(vec![audit_put(r)?]).await
    }

    async fn append_audits(&self, records: &[AuditRecord]) -> Result<()> {
        for group in records.chunks(self.items.max_batch()) {
            let writes = group.iter().map(audit_put).collect::<Result<Vec<_>>>()?;
            self.items.write(writes).await?;
        }
        Ok(())
    }

    /// Newest first, merged from every audit partition ([`AUDIT_SHARDS`]): each is read
    /// from the cursor on, and the page is the newest `size` of them.
    async fn list_audit(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<AuditRecord>> {
        let after = page.cursor.as_deref().map(decode_cursor).transpose()?;
        let size = page.size();
        let mut reads = tokio::task::JoinSet::new();
        for part in audit_parts() {
            let (items, t, after) = (self.items.clone(), tenant.as_str().to_owned(), after.clone());
            reads.spawn(async move {
                items
                    .query(Query { tenant: &t, part: &part, prefix: "", after: after.as_deref(), limit: size, descending: true })
                    .await
            });
        }
        let (mut all, mut more) = (Vec::new(), false);
        while let Some(read) = reads.join_next().await {
            let (items, m) = read.map_err(|e| Error::internal(format!("audit read: {e}")))??;
            more |= m;
            all.extend(items);
        }
        all.sort_by(|a, b| b.sk.cmp(&a.sk));
        more |= all.len() > size as usize;
        all.truncate(size as usize);
        let next_cursor = if more { all.last().map(|i| encode_cursor(&i.sk)) } else { None };
        Ok(Page { items: all.iter().map(decode).collect::<Result<Vec<_>>>()?, next_cursor })
    }
}

#[async_trait]
impl IngestFailureStore for Records {
    async fn put_ingest_failure(&self, f: &IngestFailure) -> Result<()> {
        self.items.write(vec![put(f.tenant.as_str(), "ingest_failure", f.key.clone(), 1, encode(f)?, Condition::None)]).await
    }

    async fn list_ingest_failures(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<IngestFailure>> {
        self.page(tenant.as_str(), "ingest_failure", "", page, false).await
    }
}

#[async_trait]
impl ConnectorStore for Records {
    async fn get_connector(&self, tenant: &TenantId, source: &ConnectorSource) -> Result<Option<ConnectorStatus>> {
        self.get_one(tenant.as_str(), "connector", source.as_str()).await
    }

    async fn list_connectors(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<ConnectorStatus>> {
        self.page(tenant.as_str(), "connector", "", page, false).await
    }

    async fn put_connector(&self, status: &ConnectorStatus, expect: Expect) -> Result<ConnectorStatus> {
        status.check()?;
        let tenant = status.tenant.as_str();
        let sk = status.source.as_str();
        let (mut version, condition) = versioned(expect);
        if expect == Expect::Any {
            version = self.items.get(tenant, "connector", sk).await?.map_or(1, |i| i.version + 1);
        }
        let mut stored = status.clone();
        stored.version = version;
        self.items.write(vec![put(tenant, "connector", sk.to_owned(), version, encode(&stored)?, condition)]).await.map_err(
            |e| {
                if e.code != domain::ErrorCode::Conflict {
                    return e;
                }
                match expect {
                    Expect::Absent => Error::conflict(format!("connector {} is already registered", status.source)),
                    _ => Error::conflict(format!(
                        "connector {} changed concurrently (expected version {}); re-read it",
                        status.source,
                        version.saturating_sub(1)
                    )),
                }
            },
        )?;
        Ok(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let c = encode_cursor("account#acme-1");
        assert_eq!(decode_cursor(&c).unwrap(), "account#acme-1");
        assert!(decode_cursor("zz").is_err());
        assert!(decode_cursor("abc").is_err());
        assert!(decode_cursor("00").is_err());
    }
}
