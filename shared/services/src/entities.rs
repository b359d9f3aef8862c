//! Reading the Spine: one entity through the Spine Cache, and keyword search.
//!
//! Reads check the caller's scope first, then only ever address the caller's tenant:
//! the tenant comes from the verified credential, never from the request (wall 6).

use std::time::Duration;

use domain::principal::{CallerContext, Scope};
use domain::spine::Entity;
use domain::value::Attributes;
use domain::{EntityType, Error, Id, PageRequest, Result};
use ports::records::{EntityStore, Expect};
use ports::{Backend, CacheKey};

/// Hot entities stay cached this long (SPEC §4.4: 60–300 s); writes evict sooner.
pub const ENTITY_TTL: Duration = Duration::from_secs(120);
/// How long the last good copy of an entity is kept, to answer reads while the store is
/// unreachable (SPEC §4.4).
pub const LAST_GOOD_TTL: Duration = Duration::from_secs(24 * 3600);
/// Queue message kind of an operator write made while the store was unreachable.
pub const KIND_SPINE_WRITE: &str = "spine.write";
/// Most entities a search scans in one tenant partition before answering.
pub const MAX_SEARCH_SCAN: usize = 20_000;
pub const MAX_SEARCH_RESULTS: u32 = 100;
pub const MAX_QUERY_LEN: usize = ports::search::MAX_QUERY_CHARS;

#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    pub text: String,
    pub entity_type: Option<EntityType>,
    pub limit: Option<u32>,
}

#[derive(Debug, Clone)]
pub struct SearchResult {
    pub entities: Vec<Entity>,
    /// How many entities were examined; `truncated` when the scan cap was hit.
    pub scanned: usize,
    pub truncated: bool,
}

/// Which step of the read fallback chain answered (SPEC §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadStep {
    /// The entity's own key.
    Index,
    /// A scan of the tenant's partition of that type, matching the id without regard to
    /// ASCII case (source tools disagree on the case of their ids).
    Scan,
    /// The fortress copy of a promoted tenant.
    Fortress,
}

#[derive(Clone)]
pub struct EntityService {
    backend: Backend,
    auth: crate::auth::Authenticator,
    changes: crate::changes::Changes,
    decoded: std::sync::Arc<Decoded>,
}

/// The entities read last, by cache key, beside the cached bytes they were decoded from.
/// A hot read still fetches the bytes from the cache (so a write anywhere — the CLI, another
/// Lambda instance — is seen at once) and compares them instead of parsing them again:
/// decoding was a sixteenth of a hot `spine.entity.get` over HTTP.
#[derive(Default)]
struct Decoded(std::sync::Mutex<std::collections::HashMap<String, (Vec<u8>, Entity)>>);

/// Entities kept decoded before the table starts afresh (a few MiB at most).
const MAX_DECODED: usize = 4096;

impl Decoded {
    fn get(&self, key: &CacheKey, bytes: &[u8]) -> Option<Entity> {
        let map = self.0.lock().ok()?;
        map.get(key.as_str()).filter(|(b, _)| b.as_slice() == bytes).map(|(_, e)| e.clone())
    }

    fn put(&self, key: &CacheKey, bytes: Vec<u8>, entity: &Entity) {
        if let Ok(mut map) = self.0.lock() {
            if map.len() >= MAX_DECODED && !map.contains_key(key.as_str()) {
                map.clear();
            }
            map.insert(key.as_str().to_owned(), (bytes, entity.clone()));
        }
    }
}

fn cache_key(e_type: &EntityType, id: &Id, tenant: &domain::TenantId) -> CacheKey {
    CacheKey::tenant(tenant, "entity", &format!("{e_type}:{id}"))
}

fn last_good_key(e_type: &EntityType, id: &Id, tenant: &domain::TenantId) -> CacheKey {
    CacheKey::tenant(tenant, "entity_lkg", &format!("{e_type}:{id}"))
}

/// What an operator write did.
#[derive(Debug, Clone, PartialEq)]
pub enum Put {
    Stored(Entity),
    /// The store was unreachable: the write is queued and applied when it returns.
    Queued(Entity),
}

impl EntityService {
    /// After every Spine write: drops the hot cached copy (a failure is logged: it expires
    /// by TTL) and publishes the change to MCP sessions. `keep_last_good` keeps the
    /// written entity as the last good copy (operator writes); otherwise that copy is
    /// dropped too and the next read refreshes it — the pipeline writes far more entities
    /// than are read, so it does not fill the cache with them.
    pub(crate) async fn written(&self, e: &Entity, keep_last_good: bool) {
        let (hot, lkg) = (cache_key(&e.entity_type, &e.id, &e.tenant), last_good_key(&e.entity_type, &e.id, &e.tenant));
        let evicted = if keep_last_good { vec![hot] } else { vec![hot, lkg.clone()] };
        if let Err(err) = self.backend.cache.evict(&evicted).await {
            tracing::warn!(tenant = %e.tenant, error = %err, "cache eviction failed; the entry expires by TTL");
        }
        if keep_last_good && let Ok(bytes) = serde_json::to_vec(e) {
            let _ = self.backend.cache.set(&lkg, &bytes, LAST_GOOD_TTL).await;
        }
        self.changes.publish(crate::changes::Change::EntityUpdated {
            tenant: e.tenant.clone(),
            entity_type: e.entity_type.clone(),
            id: e.id.clone(),
        });
    }

    pub(crate) fn new(backend: Backend, auth: crate::auth::Authenticator, changes: crate::changes::Changes) -> Self {
        Self { backend, auth, changes, decoded: std::sync::Arc::default() }
    }

    /// The read fallback chain: index lookup → tenant-partition scan → fortress (promoted
    /// tenants only) → `None` (404). The pipeline is never a read fallback.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the store cannot be reached.
    pub async fn lookup(
        &self,
        tenant: &domain::TenantId,
        entity_type: &EntityType,
        id: &Id,
    ) -> Result<Option<(Entity, ReadStep)>> {
        let records = &self.backend.records;
        if let Some(e) = records.get_entity(tenant, entity_type, id).await? {
            return Ok(Some((e, ReadStep::Index)));
        }
        let mut page = PageRequest::first(500);
        let mut scanned = 0usize;
        loop {
            let p = records.list_entities(tenant, Some(entity_type), &page).await?;
            scanned += p.items.len();
            if let Some(e) = p.items.into_iter().find(|e| e.id.as_str().eq_ignore_ascii_case(id.as_str())) {
                return Ok(Some((e, ReadStep::Scan)));
            }
            match p.next_cursor {
                Some(c) if scanned < MAX_SEARCH_SCAN => page = PageRequest::after(500, c),
                _ => break,
            }
        }
        let promoted =
            self.auth.tenant_config(tenant).await?.is_some_and(|t| t.storage_tier == domain::tenant::StorageTier::Promoted);
        if let (true, Some(fortress)) = (promoted, &self.backend.fortress)
            && let Some(e) = fortress.get_entity(tenant, entity_type, id).await?
        {
            return Ok(Some((e, ReadStep::Fortress)));
        }
        Ok(None)
    }

    /// One entity of the caller's tenant.
    ///
    /// # Errors
    /// `FORBIDDEN` without `tenant:read`; `NOT_FOUND`; `UNAVAILABLE` when neither the
    /// cache nor the store can answer.
    pub async fn get(&self, caller: &CallerContext, entity_type: &EntityType, id: &Id) -> Result<Entity> {
        caller.scopes.require(Scope::TenantRead)?;
        let key = cache_key(entity_type, id, &caller.tenant);
        if let Ok(Some(bytes)) = self.backend.cache.get(&key).await {
            if let Some(e) = self.decoded.get(&key, &bytes)
                && e.tenant == caller.tenant
            {
                return Ok(e);
            }
            if let Ok(e) = serde_json::from_slice::<Entity>(&bytes)
                && e.tenant == caller.tenant
            {
                self.decoded.put(&key, bytes, &e);
                return Ok(e);
            }
        }
        let lkg = last_good_key(entity_type, id, &caller.tenant);
        let found = match self.lookup(&caller.tenant, entity_type, id).await {
            Ok(found) => found,
            Err(e) if e.code == domain::ErrorCode::Unavailable => {
                // The store is unreachable: answer from the last good copy if there is one.
                if let Ok(Some(bytes)) = self.backend.cache.get(&lkg).await
                    && let Ok(entity) = serde_json::from_slice::<Entity>(&bytes)
                    && entity.tenant == caller.tenant
                {
                    tracing::warn!(tenant = %caller.tenant, error = %e, "store unreachable; served the last good copy");
                    return Ok(entity);
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        let (entity, _) = found.ok_or_else(|| Error::not_found(format!("{entity_type} {id}")))?;
        if let Ok(bytes) = serde_json::to_vec(&entity) {
            // A cache that cannot store is only a slower next read.
            let _ = self.backend.cache.set(&key, &bytes, ENTITY_TTL).await;
            let _ = self.backend.cache.set(&lkg, &bytes, LAST_GOOD_TTL).await;
        }
        Ok(entity)
    }

    /// Keyword search over the caller's tenant: every term must appear in the entity's
    /// type, id or attributes (case-insensitive). An exact id match ranks first, then
    /// matches in the entity's name. Scans at most [`MAX_SEARCH_SCAN`] entities.
    ///
    /// # Errors
    /// `FORBIDDEN` without `tenant:read`; `INVALID_REQUEST` for an over-long query;
    /// `UNAVAILABLE`.
    /// A page of the tenant's entities (of one type, or all), in key order, with the
    /// cursor of the next page.
    ///
    /// # Errors
    /// `FORBIDDEN` without `tenant:read`; `INVALID_REQUEST` for a cursor the store did not
    /// issue; `UNAVAILABLE`.
    pub async fn list(
        &self,
        caller: &CallerContext,
        entity_type: Option<&EntityType>,
        page: &PageRequest,
    ) -> Result<domain::Page<Entity>> {
        caller.scopes.require(Scope::TenantRead)?;
        self.backend.records.list_entities(&caller.tenant, entity_type, page).await
    }

    pub async fn search(&self, caller: &CallerContext, q: &SearchQuery) -> Result<SearchResult> {
        caller.scopes.require(Scope::TenantRead)?;
        if q.text.chars().count() > MAX_QUERY_LEN {
            return Err(Error::invalid_field("query", format!("at most {MAX_QUERY_LEN} characters")));
        }
        let terms: Vec<String> = q.text.split_whitespace().map(str::to_lowercase).collect();
        let whole = terms.join(" ");
        let limit = usize::try_from(q.limit.unwrap_or(20).clamp(1, MAX_SEARCH_RESULTS)).unwrap_or(20);
        let mut scored: Vec<(u8, Entity)> = Vec::new();
        let mut scanned = 0usize;
        let mut page = PageRequest::first(500);
        let mut truncated = false;
        loop {
            let p = self.backend.records.list_entities(&caller.tenant, q.entity_type.as_ref(), &page).await?;
            for e in p.items {
                scanned += 1;
                let text = e.search_text().to_lowercase();
                if terms.iter().all(|t| text.contains(t.as_str())) {
                    let id = e.id.as_str().to_lowercase();
                    let label = e.label().split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
                    // The entity named exactly (by id or whole name) first, then names that
                    // start with the query, then names holding every term, then the rest.
                    let rank = if (terms.len() == 1 && terms[0] == id) || label == whole {
                        0
                    } else if label.starts_with(&whole) {
                        1
                    } else if terms.iter().all(|t| label.contains(t.as_str())) {
                        2
                    } else {
                        3
                    };
                    scored.push((rank, e));
                }
            }
            match p.next_cursor {
                Some(c) if scanned < MAX_SEARCH_SCAN => page = PageRequest::after(500, c),
                Some(_) => {
                    truncated = true;
                    break;
                }
                None => break,
            }
        }
        scored
            .sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.entity_type.cmp(&b.1.entity_type)).then_with(|| a.1.id.cmp(&b.1.id)));
        Ok(SearchResult { entities: scored.into_iter().take(limit).map(|(_, e)| e).collect(), scanned, truncated })
    }

    /// Operator seeding path: creates or replaces an entity and evicts its cache entry.
    /// The tenant's schema applies: unknown types or fields, or missing required fields,
    /// are refused with every offending field listed.
    /// Agents never reach this (wall 4): it needs the `admin` scope, which no MCP client
    /// registration is granted. The ingestion pipeline's writer supersedes it.
    ///
    /// # Errors
    /// `FORBIDDEN` without `admin`; `INVALID_REQUEST` for bad attributes; `CONFLICT` when
    /// `expect` does not hold; `UNAVAILABLE`.
    pub async fn put(
        &self,
        caller: &CallerContext,
        entity_type: EntityType,
        id: Id,
        pole_class: domain::spine::PoleClass,
        attributes: Attributes,
        expect: Expect,
    ) -> Result<Entity> {
        caller.scopes.require(Scope::Admin)?;
        let stored = self.store(&caller.tenant, entity_type, id, Some(pole_class), attributes, expect).await?;
        self.audit_put(caller, &stored, "ok").await;
        Ok(stored)
    }

    /// An entity a person approved creating (a governed `spine.entity.create`): the
    /// operator path's checks and effects, without the operator's scope. Its class is
    /// the schema's.
    ///
    /// # Errors
    /// As [`Self::put`], without `FORBIDDEN`.
    pub(crate) async fn put_governed(
        &self,
        tenant: &domain::TenantId,
        entity_type: EntityType,
        id: Id,
        attributes: Attributes,
        expect: Expect,
    ) -> Result<Entity> {
        self.store(tenant, entity_type, id, None, attributes, expect).await
    }

    /// The write both paths share: the schema's checks, the versioned write, the blob
    /// backup line and the after-write effects. Without a `pole_class`, the schema's.
    async fn store(
        &self,
        tenant_id: &domain::TenantId,
        entity_type: EntityType,
        id: Id,
        pole_class: Option<domain::spine::PoleClass>,
        attributes: Attributes,
        expect: Expect,
    ) -> Result<Entity> {
        Entity::validate_attributes(&attributes)?;
        // The tenant's schema decides what may be written: an unknown type or field is
        // refused before anything is stored (SPEC §5.2 step 4).
        let tenant = self.auth.tenant_config(tenant_id).await?.ok_or_else(|| Error::not_found(format!("tenant {tenant_id}")))?;
        let schema = adk::resolve::schema_for(tenant.department, tenant.industry);
        schema.check_write(entity_type.as_str(), &attributes)?;
        let pole_class = match pole_class {
            Some(p) => p,
            None => schema.require_type(entity_type.as_str())?.pole_class,
        };
        let now = self.backend.clock.now();
        let existing = self.backend.records.get_entity(tenant_id, &entity_type, &id).await?;
        let entity = Entity {
            tenant: tenant_id.clone(),
            entity_type: entity_type.clone(),
            id: id.clone(),
            pole_class,
            attributes,
            created_at: existing.as_ref().map_or(now, |e| e.created_at),
            updated_at: now,
            version: 0,
            source_updated_at: None,
        };
        let stored = self.backend.records.put_entity(&entity, expect).await?;
        // The blob backup of every Spine write (SPEC §9); the write stands even if it
        // fails (logged and counted, BlobBackupFailures, which alarms on AWS):
        // `continuity backup` snapshots what the store holds.
        // Ids may hold characters blob paths do not: name the file by a digest.
        let digest = crate::sha256_hex(&format!("{}#{}", stored.entity_type, stored.id));
        let path = format!("{}/op-{}-{}.jsonl", crate::backup::folder(now), &digest[..24], stored.version);
        let line = crate::backup::encode(&[crate::backup::BackupLine::Entity(stored.clone())]);
        match (ports::blob::BlobKey::new(&stored.tenant, &path), line) {
            (Ok(key), Ok(bytes)) => {
                if let Err(e) = self.backend.blobs.put(&key, &bytes).await {
                    metrics::add(metrics::Counter::BlobBackupFailures, 1);
                    tracing::error!(tenant = %stored.tenant, error = %e, "blob backup of an operator write failed");
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                metrics::add(metrics::Counter::BlobBackupFailures, 1);
                tracing::error!(tenant = %stored.tenant, error = %e, "blob backup of an operator write failed");
            }
        }
        self.written(&stored, true).await;
        Ok(stored)
    }

    /// The audit record of an operator write, made here so every surface (HTTP, CLI) has it.
    async fn audit_put(&self, caller: &CallerContext, e: &Entity, outcome: &str) {
        let target = Some(format!("{}:{}", e.entity_type, e.id));
        let record =
            crate::audit::record(&self.backend, &caller.tenant, caller.principal.as_str(), "admin:entity.put", target, outcome);
        if let Err(err) = ports::records::AuditLog::append_audit(&self.backend.records, &record).await {
            tracing::error!(tenant = %caller.tenant, error = %err.for_operator(), "audit record lost");
        }
    }

    /// [`Self::put`], but when the store is unreachable an unconditional write
    /// (`Expect::Any`) is queued instead of failing (SPEC §4.4): the pipeline consumer
    /// applies it when the store returns, unless a newer write got there first.
    ///
    /// # Errors
    /// As [`Self::put`]; `UNAVAILABLE` when neither the store nor the queue can take it.
    pub async fn put_or_queue(
        &self,
        caller: &CallerContext,
        entity_type: EntityType,
        id: Id,
        pole_class: domain::spine::PoleClass,
        attributes: Attributes,
        expect: Expect,
    ) -> Result<Put> {
        match self.put(caller, entity_type.clone(), id.clone(), pole_class, attributes.clone(), expect).await {
            Ok(e) => Ok(Put::Stored(e)),
            Err(e) if e.code == domain::ErrorCode::Unavailable && expect == Expect::Any => {
                let now = self.backend.clock.now();
                let entity = Entity {
                    tenant: caller.tenant.clone(),
                    entity_type,
                    id,
                    pole_class,
                    attributes,
                    created_at: now,
                    updated_at: now,
                    version: 0,
                    source_updated_at: None,
                };
                let body = serde_json::to_vec(&entity).map_err(Error::internal)?;
                self.backend
                    .queue
                    .send(&ports::queue::QueueMessage {
                        tenant: caller.tenant.clone(),
                        kind: KIND_SPINE_WRITE.into(),
                        idempotency_key: format!("{}:{}:{}", entity.entity_type, entity.id, now.0),
                        body,
                    })
                    .await?;
                tracing::warn!(tenant = %caller.tenant, error = %e, "store unreachable; the write is queued");
                self.audit_put(caller, &entity, "queued").await;
                Ok(Put::Queued(entity))
            }
            Err(e) => Err(e),
        }
    }

    /// Applies a write queued by [`Self::put_or_queue`]: stored unless the stored copy
    /// was written later (then it has no effect). Idempotent.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a body that is not an entity; `UNAVAILABLE` while the store
    /// is still unreachable (the message is retried).
    pub async fn apply_queued(&self, message: &ports::queue::QueueMessage) -> Result<()> {
        let queued: Entity =
            serde_json::from_slice(&message.body).map_err(|e| Error::invalid(format!("not a queued entity: {e}")))?;
        if queued.tenant != message.tenant {
            return Err(Error::invalid("a queued write for another tenant"));
        }
        for _ in 0..5 {
            let existing = self.backend.records.get_entity(&queued.tenant, &queued.entity_type, &queued.id).await?;
            if existing.as_ref().is_some_and(|e| e.updated_at >= queued.updated_at) {
                return Ok(());
            }
            let mut e = queued.clone();
            e.created_at = existing.as_ref().map_or(queued.created_at, |x| x.created_at);
            let expect = existing.as_ref().map_or(Expect::Absent, |x| Expect::Version(x.version));
            match self.backend.records.put_entity(&e, expect).await {
                Ok(stored) => {
                    self.written(&stored, true).await;
                    return Ok(());
                }
                Err(err) if err.code == domain::ErrorCode::Conflict => {}
                Err(err) => return Err(err),
            }
        }
        Err(Error::unavailable("the entity kept changing concurrently; retry"))
    }
}

#[cfg(test)]
mod decoded_tests {
    use super::*;

    fn entity(id: &str) -> Entity {
        let json = serde_json::json!({
            "tenant": "t1", "entity_type": "account", "id": id, "pole_class": "organization",
            "attributes": {"name": "Acme"}, "created_at": 1_767_225_600_000_i64,
            "updated_at": 1_767_225_600_000_i64, "version": 1
        });
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_decoded_entity_is_reused_only_for_the_same_bytes() {
        let decoded = Decoded::default();
        let key = CacheKey::global("entity", "account:a");
        let e = entity("a");
        let bytes = serde_json::to_vec(&e).unwrap();
        assert_eq!(decoded.get(&key, &bytes), None, "nothing decoded yet");
        decoded.put(&key, bytes.clone(), &e);
        assert_eq!(decoded.get(&key, &bytes), Some(e.clone()));
        let mut changed = e.clone();
        changed.version = 2;
        assert_eq!(decoded.get(&key, &serde_json::to_vec(&changed).unwrap()), None, "changed bytes are decoded afresh");
        assert_eq!(decoded.get(&CacheKey::global("entity", "account:b"), &bytes), None, "another key");
    }

    #[test]
    fn the_table_starts_afresh_when_full() {
        let decoded = Decoded::default();
        let e = entity("a");
        let bytes = serde_json::to_vec(&e).unwrap();
        for i in 0..MAX_DECODED {
            decoded.put(&CacheKey::global("entity", &i.to_string()), bytes.clone(), &e);
        }
        assert_eq!(decoded.0.lock().unwrap().len(), MAX_DECODED);
        decoded.put(&CacheKey::global("entity", "one more"), bytes.clone(), &e);
        assert_eq!(decoded.0.lock().unwrap().len(), 1);
        assert_eq!(decoded.get(&CacheKey::global("entity", "one more"), &bytes), Some(e));
    }
}
