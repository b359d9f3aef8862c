//! The Spine write path (SPEC §2.1): ingest API → queue → loader → normalizer → writer.
//!
//! - [`IngestService::register`] / [`IngestService::connectors`]: connector registration
//!   and statuses (SPEC §4.5).
//! - [`IngestService::accept`]: checks a batch's size and each record's shape, enqueues the
//!   good records in messages of at most [`RECORDS_PER_MESSAGE`], moves the connector's
//!   status, and answers with a batch id and a per-record error for each bad record.
//! - [`IngestService::process`]: one queue message — the **loader** keeps the raw records
//!   as a blob (the only place source field names survive), the **normalizer** applies the
//!   source's declarative mapping ([`mapping`]), the **writer** stores each entity
//!   (newest source timestamp wins, versioned conditional writes), its relationships and
//!   the signals of changed fields, appends the written entities to the JSONL backup,
//!   evicts the cache and publishes the change.
//!
//! Exactly-once effects: a record's effect is decided by its source timestamp against the
//! stored one, and signal ids are derived from what changed, so a redelivered,
//! duplicated or reordered record converges to the same final state. A record that fails
//! for a reason a retry cannot fix is split off into its own message; that message is
//! retried by the queue and, after [`POISON_ATTEMPTS`] deliveries, dead-lettered — its
//! reason recorded as an [`IngestFailure`] — while the rest of its batch commits.

pub mod mapping;

use crate::backup::BackupLine;

use std::collections::BTreeMap;

use domain::connector::{ConnectorSource, ConnectorState, ConnectorStatus, IngestFailure};
use domain::principal::{CallerContext, Scope};
use domain::spine::{Entity, EntityRef, Relationship, Signal};
use domain::tenant::Tenant;
use domain::{Error, ErrorCode, Id, Page, PageRequest, Result, TenantId, Timestamp};
use ports::blob::BlobKey;
use ports::queue::{Delivery, QueueMessage};
use ports::records::{ConnectorStore, EntityStore, Expect, IngestFailureStore, SpineWrite, TenantStore};
use ports::{Backend, CacheKey};
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};

/// Most records one `POST /v1/ingest/{source}` may carry (more: 413).
pub const MAX_RECORDS_PER_BATCH: usize = 1000;
/// Largest single record, serialized (larger: a per-record error).
pub const MAX_RECORD_BYTES: usize = 64 * 1024;
/// Records per queue message (each message also stays under the queue's size limit).
pub const RECORDS_PER_MESSAGE: usize = 100;
/// Deliveries of a failing single-record message before it is dead-lettered; the
/// embedded queue and the SQS redrive policy are configured with the same number.
pub const POISON_ATTEMPTS: u32 = 5;
/// Queue message kinds.
pub const KIND_BATCH: &str = "ingest.batch";
pub const KIND_RECORD: &str = "ingest.record";
/// How a rejection of a record of an unmapped kind begins (out of scope, not a failure).
const NOT_A_KIND: &str = "not a record kind";
/// How a connector's error begins when a dependency failed in the pipeline (a retry of
/// the batch resumes the sync); any other error waits for the next accepted batch.
const PIPELINE_ERROR: &str = "pipeline: ";
const MESSAGE_BUDGET: usize = ports::queue::MAX_MESSAGE_BYTES - 8 * 1024;

/// What a queue message carries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IngestMessage {
    pub source: String,
    pub batch: String,
    pub part: u32,
    /// Index of the first record in the batch (for failure reports).
    pub first_index: u32,
    pub records: Vec<Json>,
    /// The batch's last message of a sync marked `final`.
    #[serde(default)]
    pub last_of_final: bool,
    /// Parts in this batch (for progress).
    pub parts: u32,
    /// A page a connector pulled: its pull reports progress (of the source's total), so
    /// the message does not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pulled: bool,
}

/// The ingest API's answer.
#[derive(Debug, Clone, Serialize)]
pub struct Accepted {
    pub batch_id: String,
    pub accepted: usize,
    pub rejected: Vec<Rejected>,
    pub status: ConnectorStatus,
}

#[derive(Debug, Clone, Serialize)]
pub struct Rejected {
    pub index: usize,
    pub code: &'static str,
    pub message: String,
}

/// What processing one message did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Processed {
    pub written: usize,
    /// Stale or duplicate records (no effect).
    pub unchanged: usize,
    pub signals: usize,
    /// Records split off into their own message after failing here.
    pub split: usize,
}

#[derive(Clone)]
pub struct IngestService {
    backend: Backend,
    /// After-write effects (cache, change notices) and operator writes queued while the
    /// store was unreachable.
    entities: crate::entities::EntityService,
    audit: crate::audit::AuditService,
}

fn unknown_source(source: &str) -> Error {
    let names: Vec<&str> = mapping::sources().into_iter().map(|(n, _)| n).collect();
    Error::not_found(format!("source {source:?}: no mapping; supported sources: {}", names.join(", ")))
}

fn connector_key(tenant: &TenantId) -> CacheKey {
    crate::capabilities::connectors_key(tenant)
}

fn short_hash(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..10])
}

/// Whether an error is about the record (a retry cannot fix it) rather than a dependency.
pub(crate) fn is_permanent(e: &Error) -> bool {
    !matches!(e.code, ErrorCode::Unavailable | ErrorCode::Internal | ErrorCode::Conflict)
}

impl IngestService {
    pub(crate) fn new(backend: Backend, entities: crate::entities::EntityService, audit: crate::audit::AuditService) -> Self {
        Self { backend, entities, audit }
    }

    fn source_of(source: &str) -> Result<(ConnectorSource, &'static mapping::SourceMapping)> {
        let m = mapping::mapping(source).ok_or_else(|| unknown_source(source))?;
        Ok((ConnectorSource::new(source)?, m))
    }

    async fn forget_connectors(&self, tenant: &TenantId) {
        if let Err(e) = self.backend.cache.evict(&[connector_key(tenant)]).await {
            tracing::warn!(tenant = %tenant, error = %e, "connector statuses not evicted; they expire by TTL");
        }
    }

    /// Moves a connector, tolerating a lost race by re-reading once.
    async fn transition(
        &self,
        tenant: &TenantId,
        source: &ConnectorSource,
        to: ConnectorState,
        progress: Option<f64>,
        error: Option<(String, String)>,
    ) -> Result<ConnectorStatus> {
        let mut last = None;
        for _ in 0..3 {
            match self
                .backend
                .records
                .transition_connector(tenant, source, to, progress, error.clone(), self.backend.clock.now())
                .await
            {
                Ok(s) => {
                    self.forget_connectors(tenant).await;
                    return Ok(s);
                }
                Err(e) if e.code == ErrorCode::Conflict => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::conflict("connector changed concurrently")))
    }

    /// Registers `source` for the caller's tenant (`POST /v1/connectors/{source}`): the
    /// connector becomes `oauth_complete` (the source's grant is held by the pushing tool;
    /// Continuity receives records, it never reads the source). Registering again is a
    /// no-op answering the current status.
    ///
    /// # Errors
    /// `FORBIDDEN` without `tenant:write`; `NOT_FOUND` for a source without a mapping
    /// (listing the supported ones); `UNAVAILABLE`. Audited either way.
    pub async fn register(&self, caller: &CallerContext, source: &str) -> Result<ConnectorStatus> {
        let result = self.connect(caller, source).await;
        self.audit.outcome(caller, "connector.register", source, &result).await;
        result
    }

    async fn connect(&self, caller: &CallerContext, source: &str) -> Result<ConnectorStatus> {
        caller.scopes.require(Scope::TenantWrite)?;
        let (source, _) = Self::source_of(source)?;
        let current = self.backend.records.get_connector(&caller.tenant, &source).await?;
        let state = current.as_ref().map_or(ConnectorState::NotConnected, |c| c.state);
        match state {
            ConnectorState::NotConnected => {
                self.transition(&caller.tenant, &source, ConnectorState::OauthPending, None, None).await?;
                self.transition(&caller.tenant, &source, ConnectorState::OauthComplete, None, None).await
            }
            ConnectorState::OauthPending => {
                self.transition(&caller.tenant, &source, ConnectorState::OauthComplete, None, None).await
            }
            _ => current.ok_or_else(|| Error::internal("connector vanished")),
        }
    }

    /// The tenant's connector statuses (`GET /v1/connectors`) and the sources it could
    /// register.
    ///
    /// # Errors
    /// `FORBIDDEN` without `tenant:read`; `UNAVAILABLE`.
    pub async fn connectors(&self, caller: &CallerContext) -> Result<Json> {
        caller.scopes.require(Scope::TenantRead)?;
        let page = self.backend.records.list_connectors(&caller.tenant, &PageRequest::first(500)).await?;
        let supported: Vec<Json> = mapping::sources().into_iter().map(|(n, t)| json!({"source": n, "records": t})).collect();
        Ok(json!({ "connectors": page.items, "supported_sources": supported }))
    }

    /// Records the pipeline could not write, with reasons (`GET /v1/ingest/failures`).
    ///
    /// # Errors
    /// `FORBIDDEN` without `tenant:read`; `UNAVAILABLE`.
    pub async fn failures(&self, caller: &CallerContext, page: &PageRequest) -> Result<Page<IngestFailure>> {
        caller.scopes.require(Scope::TenantRead)?;
        self.backend.records.list_ingest_failures(&caller.tenant, page).await
    }

    /// Accepts a batch (`POST /v1/ingest/{source}`): `{"records": [...], "final": bool}`,
    /// or one webhook payload (any object without `records`).
    ///
    /// # Errors
    /// `FORBIDDEN` without `tenant:write`; `NOT_FOUND` for an unknown source;
    /// `CONNECTOR_NOT_AVAILABLE` when the source is not registered; `PAYLOAD_TOO_LARGE`
    /// over [`MAX_RECORDS_PER_BATCH`]; `INVALID_REQUEST` for a malformed body;
    /// `UNAVAILABLE` when the queue cannot take the batch (nothing was lost: retrying
    /// the same batch is safe, records are idempotent). Audited either way.
    pub async fn accept(&self, caller: &CallerContext, source: &str, body: Json) -> Result<Accepted> {
        let result = self.accept_batch(caller, source, body).await;
        self.audit.outcome(caller, "ingest.accept", source, &result).await;
        result
    }

    async fn accept_batch(&self, caller: &CallerContext, source: &str, body: Json) -> Result<Accepted> {
        caller.scopes.require(Scope::TenantWrite)?;
        let (src, _) = Self::source_of(source)?;
        let status = self.backend.records.get_connector(&caller.tenant, &src).await?;
        let Some(status) = status.filter(|s| s.state.is_connected()) else {
            let mut e = Error::new(
                ErrorCode::ConnectorNotAvailable,
                format!("connector {source} is not registered for this workspace; POST /v1/connectors/{source} first"),
            );
            e.payload.connect_url = Some(format!("/v1/connectors/{source}"));
            return Err(e);
        };
        let (records, is_final) = match body {
            Json::Object(mut o) if o.contains_key("records") => {
                let records = match o.remove("records") {
                    Some(Json::Array(a)) => a,
                    _ => return Err(Error::invalid_field("records", "must be an array of records")),
                };
                let is_final = match o.remove("final") {
                    None | Some(Json::Null) => false,
                    Some(Json::Bool(b)) => b,
                    Some(_) => return Err(Error::invalid_field("final", "must be a boolean")),
                };
                if let Some(k) = o.keys().next() {
                    return Err(Error::invalid_field(k, "unknown field (a batch is {\"records\": [...], \"final\": bool})"));
                }
                (records, is_final)
            }
            Json::Object(o) => (vec![Json::Object(o)], false),
            _ => return Err(Error::invalid("the body must be a JSON object: a batch {\"records\": [...]} or one record")),
        };
        self.enqueue(&caller.tenant, source, status, records, is_final, false).await
    }

    /// Records a connector pulled from its source (one page), into the pipeline as a
    /// pushed batch would go: `last` ends the pass (the sync completes when its last
    /// message is processed).
    ///
    /// # Errors
    /// As [`Self::accept`], less the caller's checks.
    pub(crate) async fn accept_pulled(
        &self,
        tenant: &TenantId,
        source: &str,
        records: Vec<Json>,
        last: bool,
    ) -> Result<Accepted> {
        let (src, _) = Self::source_of(source)?;
        let status = self
            .backend
            .records
            .get_connector(tenant, &src)
            .await?
            .filter(|s| s.state.is_connected())
            .ok_or_else(|| Error::new(ErrorCode::ConnectorNotAvailable, format!("connector {source} is not connected")))?;
        self.enqueue(tenant, source, status, records, last, true).await
    }

    /// Marks the entity a source deleted (`deleted_at`, a `deleted` signal), as of `at`;
    /// `false` when the Spine does not hold it, or holds a newer copy (a record of the
    /// source written after the deletion stands).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub(crate) async fn mark_deleted(
        &self,
        tenant: &TenantId,
        source: &str,
        entity_type: &str,
        native_id: &str,
        at: Timestamp,
    ) -> Result<bool> {
        let entity_type = domain::EntityType::new(entity_type)?;
        let id = mapping::canonical_id(source, entity_type.as_str(), native_id);
        let Some(existing) = self.backend.records.get_entity(tenant, &entity_type, &id).await? else { return Ok(false) };
        if existing.attributes.contains_key("deleted_at") || existing.source_updated_at.is_some_and(|t| t > at) {
            return Ok(false);
        }
        let effect = crate::actions::Effect {
            entity: EntityRef { entity_type, id },
            changes: vec![crate::actions::Change {
                field: "deleted_at".into(),
                value: domain::value::Value::Text(at.to_rfc3339()),
                signal: Some("deleted"),
            }],
            at: Some(at),
        };
        Ok(self.apply_change(tenant, &effect).await?.is_some())
    }

    async fn enqueue(
        &self,
        tenant: &TenantId,
        source: &str,
        status: ConnectorStatus,
        records: Vec<Json>,
        is_final: bool,
        pulled: bool,
    ) -> Result<Accepted> {
        let (src, map) = Self::source_of(source)?;
        if records.len() > MAX_RECORDS_PER_BATCH {
            return Err(Error::new(
                ErrorCode::PayloadTooLarge,
                format!("{} records in one batch; at most {MAX_RECORDS_PER_BATCH}", records.len()),
            ));
        }
        let mut rejected = Vec::new();
        let mut good: Vec<(usize, Json, usize)> = Vec::new();
        let latest = Timestamp(self.backend.clock.now().0.saturating_add(mapping::MAX_SOURCE_CLOCK_SKEW_MS));
        for (i, r) in records.into_iter().enumerate() {
            let size = serde_json::to_vec(&r).map(|v| v.len()).unwrap_or(usize::MAX);
            let verdict = if size > MAX_RECORD_BYTES {
                Err(Error::new(ErrorCode::PayloadTooLarge, format!("record of {size} bytes; at most {MAX_RECORD_BYTES}")))
            } else {
                map.check_shape(source, &r, latest)
            };
            match verdict {
                Ok(()) => good.push((i, r, size)),
                Err(e) => rejected.push(Rejected { index: i, code: e.code.as_str(), message: e.message }),
            }
        }
        let batch = crate::new_id(&self.backend).to_string();
        // Chunk into messages by count and size.
        let mut chunks: Vec<(u32, Vec<Json>)> = Vec::new();
        let mut bytes = 0;
        for (i, r, size) in good {
            let full = chunks.last().is_none_or(|(_, c)| c.len() >= RECORDS_PER_MESSAGE || bytes + size > MESSAGE_BUDGET);
            if full {
                chunks.push((u32::try_from(i).unwrap_or(u32::MAX), Vec::new()));
                bytes = 0;
            }
            bytes += size + 1;
            if let Some((_, c)) = chunks.last_mut() {
                c.push(r);
            }
        }
        let accepted: usize = chunks.iter().map(|(_, c)| c.len()).sum();
        if pulled && is_final && chunks.is_empty() {
            // A pull's last page was empty: its end still goes through the queue, so the
            // connector completes after the pages before it, not before they are written.
            chunks.push((0, Vec::new()));
        }
        // The first batch starts the initial sync; later ones are deltas.
        let mut status = match status.state {
            ConnectorState::OauthComplete => {
                self.transition(tenant, &src, ConnectorState::SyncingInitial, Some(0.0), None).await?
            }
            ConnectorState::SyncComplete => self.transition(tenant, &src, ConnectorState::SyncingDelta, None, None).await?,
            ConnectorState::SyncError => {
                let to = if status.error_stage.as_deref() == Some("syncing_initial") {
                    ConnectorState::SyncingInitial
                } else {
                    ConnectorState::SyncingDelta
                };
                let progress = (to == ConnectorState::SyncingInitial).then_some(0.0);
                self.transition(tenant, &src, to, progress, None).await?
            }
            _ => status,
        };
        let parts = u32::try_from(chunks.len()).unwrap_or(u32::MAX);
        for (part, (first_index, records)) in chunks.into_iter().enumerate() {
            let part = u32::try_from(part).unwrap_or(u32::MAX);
            let msg = IngestMessage {
                source: source.to_owned(),
                batch: batch.clone(),
                part,
                first_index,
                records,
                last_of_final: is_final && part + 1 == parts,
                parts,
                pulled,
            };
            let body = serde_json::to_vec(&msg).map_err(Error::internal)?;
            self.backend
                .queue
                .send(&QueueMessage {
                    tenant: tenant.clone(),
                    kind: KIND_BATCH.into(),
                    idempotency_key: format!("{batch}:{part}"),
                    body,
                })
                .await?;
        }
        if parts == 0 && is_final {
            // Records of kinds the mapping does not cover are out of scope, not failures.
            let failed = rejected.iter().find(|r| !r.message.starts_with(NOT_A_KIND));
            match failed {
                // Nothing to queue: the sync completes now (the answer says so).
                None => status = self.complete(tenant, &src).await?.unwrap_or(status),
                // A final batch that brought nothing usable did not complete anything.
                Some(first) => {
                    let reason = format!(
                        "every record of the final batch was rejected ({}); the first, record {}: {}",
                        rejected.len(),
                        first.index,
                        first.message
                    );
                    status = self.fail_sync(tenant, &src, reason).await?.unwrap_or(status);
                }
            }
        }
        Ok(Accepted { batch_id: batch, accepted, rejected, status })
    }

    /// Puts a connector that is syncing in `sync_error` with `reason` (the stage it was in
    /// is kept, so the next good batch resumes it). `None` when it was not syncing.
    async fn fail_sync(&self, tenant: &TenantId, source: &ConnectorSource, reason: String) -> Result<Option<ConnectorStatus>> {
        let current = self.backend.records.get_connector(tenant, source).await?;
        match current {
            Some(c) if matches!(c.state, ConnectorState::SyncingInitial | ConnectorState::SyncingDelta) => {
                let stage = c.state.as_str().to_owned();
                tracing::warn!(tenant = %tenant, source = %source, reason = %reason, "sync ended in error");
                match self.transition(tenant, source, ConnectorState::SyncError, None, Some((stage, reason))).await {
                    Ok(s) => Ok(Some(s)),
                    // Another writer moved it on (completed it, or resumed it): theirs stands.
                    Err(e) if e.code == ErrorCode::Conflict => Ok(None),
                    Err(e) => Err(e),
                }
            }
            _ => Ok(None),
        }
    }

    /// Completes a connector that is syncing; its new status, or `None` when it was not
    /// syncing.
    async fn complete(&self, tenant: &TenantId, source: &ConnectorSource) -> Result<Option<ConnectorStatus>> {
        let current = self.backend.records.get_connector(tenant, source).await?;
        if current.is_some_and(|c| matches!(c.state, ConnectorState::SyncingInitial | ConnectorState::SyncingDelta)) {
            return self.transition(tenant, source, ConnectorState::SyncComplete, None, None).await.map(Some);
        }
        Ok(None)
    }

    /// Processes one delivery of an ingest message (the pipeline consumer).
    ///
    /// # Errors
    /// The message must be retried (released, or reported as a batch item failure on
    /// SQS): `UNAVAILABLE` when a dependency failed; for a single-record message, the
    /// record's own error (it is dead-lettered after [`POISON_ATTEMPTS`] deliveries).
    pub async fn process(&self, delivery: &Delivery) -> Result<Processed> {
        let m = &delivery.message;
        let msg: IngestMessage =
            serde_json::from_slice(&m.body).map_err(|e| Error::invalid(format!("not an ingest message: {e}")))?;
        let (src, map) = Self::source_of(&msg.source)?;
        let tenant =
            self.backend.records.get_tenant(&m.tenant).await?.ok_or_else(|| Error::not_found(format!("tenant {}", m.tenant)))?;
        // Loader: the raw records as received, the only place source names survive.
        // A split-off record gets its own file: it must not overwrite its batch's.
        let one = if m.kind == KIND_RECORD { format!("-r{}", msg.first_index) } else { String::new() };
        let raw_path = format!("raw/{}/{}-{}{one}.json", msg.source, msg.batch, msg.part);
        let raw_key = BlobKey::new(&m.tenant, &raw_path)?;
        let raw = serde_json::to_vec(&msg.records).map_err(Error::internal)?;
        self.backend.blobs.put(&raw_key, &raw).await.inspect_err(|e| tracing::warn!(error = %e, "loader failed"))?;

        let mut out = Processed::default();
        // Normalizer + checks, record by record; a record that fails for a reason a retry
        // cannot fix goes to `failed`.
        let mut failed: Vec<(u32, &Json, Error)> = Vec::new();
        let mut ready: BTreeMap<(String, String), (u32, mapping::Normalized)> = BTreeMap::new();
        for (offset, record) in msg.records.iter().enumerate() {
            let index = msg.first_index + u32::try_from(offset).unwrap_or(u32::MAX);
            match map.normalize(&msg.source, record).and_then(|n| Self::check(&tenant, &n).map(|()| n)) {
                Ok(n) => {
                    // The same entity twice in one message: the newer record alone counts.
                    let key = (n.entity_type.to_string(), n.id.to_string());
                    match ready.get(&key) {
                        Some((_, old)) if old.source_updated_at > n.source_updated_at => out.unchanged += 1,
                        Some(_) => {
                            out.unchanged += 1;
                            ready.insert(key, (index, n));
                        }
                        None => {
                            ready.insert(key, (index, n));
                        }
                    }
                }
                Err(e) => failed.push((index, record, e)),
            }
        }
        // Writer, fast path: read what is stored, plan every effect, apply them in as few
        // atomic batches as the store takes. If another writer raced us (a version
        // moved), the record-by-record path below decides again for each.
        let normalized: Vec<mapping::Normalized> = ready.into_values().map(|(_, n)| n).collect();
        let mut planned = Vec::new();
        for n in &normalized {
            let existing = self.backend.records.get_entity(&tenant.id, &n.entity_type, &n.id).await?;
            match self.plan(&tenant, n, existing.as_ref())? {
                Some(w) => planned.push(w),
                None => out.unchanged += 1,
            }
        }
        let mut backup: Vec<SpineWrite> = Vec::new();
        match self.backend.records.apply_spine_writes(&planned).await {
            Ok(stored) => {
                out.written += stored.len();
                out.signals += planned.iter().map(|w| w.signals.len()).sum::<usize>();
                for (mut w, e) in planned.into_iter().zip(stored) {
                    w.entity = e;
                    backup.push(w);
                }
            }
            Err(e) if e.code == ErrorCode::Conflict => {
                for w in &planned {
                    let n = normalized
                        .iter()
                        .find(|n| n.entity_type == w.entity.entity_type && n.id == w.entity.id)
                        .ok_or_else(|| Error::internal("planned write without its record"))?;
                    match self.write(&tenant, n).await? {
                        Some(w) => {
                            out.written += 1;
                            out.signals += w.signals.len();
                            backup.push(w);
                        }
                        None => out.unchanged += 1,
                    }
                }
            }
            Err(e) => return Err(e),
        }
        for w in &backup {
            self.entities.written(&w.entity, false).await;
        }
        for (index, record, e) in failed {
            if !is_permanent(&e) {
                return Err(e);
            }
            if m.kind == KIND_RECORD {
                let dead = delivery.receive_count >= POISON_ATTEMPTS;
                let failure = IngestFailure {
                    tenant: m.tenant.clone(),
                    key: m.idempotency_key.clone(),
                    source: src.clone(),
                    raw_blob: raw_path.clone(),
                    index,
                    reason: e.message.clone(),
                    attempts: delivery.receive_count,
                    dead_lettered: dead,
                    at: self.backend.clock.now(),
                };
                self.backend.records.put_ingest_failure(&failure).await?;
                tracing::warn!(tenant = %m.tenant, key = %m.idempotency_key, attempts = delivery.receive_count, reason = %e.message, "ingest record failed");
                return Err(e);
            }
            // Split the record off: it is retried (and dead-lettered) alone while the
            // rest of this batch commits.
            let single = IngestMessage {
                source: msg.source.clone(),
                batch: msg.batch.clone(),
                part: msg.part,
                first_index: index,
                records: vec![record.clone()],
                last_of_final: false,
                parts: msg.parts,
                pulled: msg.pulled,
            };
            tracing::info!(tenant = %m.tenant, index, reason = %e.message, "record split off for retry");
            self.backend
                .queue
                .send(&QueueMessage {
                    tenant: m.tenant.clone(),
                    kind: KIND_RECORD.into(),
                    idempotency_key: format!("{}:{}:{index}", msg.batch, msg.part),
                    body: serde_json::to_vec(&single).map_err(Error::internal)?,
                })
                .await?;
            out.split += 1;
        }
        // Blob backup of every Spine write (SPEC §9), one file per message: a redelivery
        // rewrites the same file.
        if !backup.is_empty() {
            let path = format!(
                "{}/{}-{}-{}.jsonl",
                crate::backup::folder(self.backend.clock.now()),
                msg.batch,
                msg.part,
                msg.first_index
            );
            let mut lines = Vec::new();
            for w in backup {
                lines.extend(w.signals.into_iter().map(BackupLine::Signal));
                lines.extend(w.relationships.into_iter().map(BackupLine::Relationship));
                lines.push(BackupLine::Entity(w.entity));
            }
            self.backend.blobs.put(&BlobKey::new(&m.tenant, &path)?, &crate::backup::encode(&lines)?).await?;
        }
        if m.kind == KIND_BATCH {
            // A batch that succeeds after a failure put its connector in sync_error
            // resumes the sync it was part of.
            // Only from a pipeline failure (a dependency that failed), and only by a batch
            // that wrote or confirmed something: a sync that ended in error for its records
            // waits for the next accepted batch.
            if let Some(c) = self.backend.records.get_connector(&m.tenant, &src).await?
                && c.state == ConnectorState::SyncError
                && c.error_message.as_deref().is_some_and(|e| e.starts_with(PIPELINE_ERROR))
                && out.written + out.unchanged > 0
            {
                let to = if c.error_stage.as_deref() == Some("syncing_initial") {
                    ConnectorState::SyncingInitial
                } else {
                    ConnectorState::SyncingDelta
                };
                let progress = (to == ConnectorState::SyncingInitial).then_some(c.progress.unwrap_or(0.0));
                // Advisory like progress: a lost race leaves the state to the winner.
                let _ = self.transition(&m.tenant, &src, to, progress, None).await;
            }
            if msg.last_of_final && msg.parts == 1 && out.written == 0 && out.unchanged == 0 && out.split > 0 {
                // Every record of a one-message final batch failed: the sync did not
                // complete (the split-off records are retried alone and dead-lettered).
                let reason =
                    format!("every record of the final batch failed ({}); see the ingest failures for the reasons", out.split);
                self.fail_sync(&m.tenant, &src, reason).await?;
            } else if msg.last_of_final {
                self.complete(&m.tenant, &src).await?;
            } else if !msg.pulled
                && let Some(c) = self.backend.records.get_connector(&m.tenant, &src).await?
                && c.state == ConnectorState::SyncingInitial
            {
                #[allow(clippy::cast_precision_loss)]
                let p = (f64::from(msg.part + 1) / f64::from(msg.parts.max(1))).min(0.99);
                if c.progress.is_none_or(|old| p > old) {
                    // Progress is advisory: a lost race only delays the next update.
                    let _ = self.transition(&m.tenant, &src, ConnectorState::SyncingInitial, Some(p), None).await;
                }
            }
        }
        Ok(out)
    }

    /// The tenant's schema and the attribute limits: what a retry cannot fix.
    fn check(tenant: &Tenant, n: &mapping::Normalized) -> Result<()> {
        adk::resolve::schema_for(tenant.department, tenant.industry).check_write(n.entity_type.as_str(), &n.attributes)?;
        Entity::validate_attributes(&n.attributes)
    }

    /// One record's effect against what is stored, or `None` when the record is stale or
    /// a duplicate (its source timestamp is not newer than the stored one). Signal ids
    /// derive from the change, so a redelivery plans the very same signals.
    fn plan(&self, tenant: &Tenant, n: &mapping::Normalized, existing: Option<&Entity>) -> Result<Option<SpineWrite>> {
        if existing.is_some_and(|e| e.source_updated_at.is_some_and(|t| t >= n.source_updated_at)) {
            return Ok(None);
        }
        let schema = adk::resolve::schema_for(tenant.department, tenant.industry);
        let pole_class = schema.require_type(n.entity_type.as_str())?.pole_class;
        let me = EntityRef { entity_type: n.entity_type.clone(), id: n.id.clone() };
        let mut signals = Vec::new();
        if let Some(e) = existing {
            for (field, kind) in &n.signals {
                let (before, after) = (e.attributes.get(field), n.attributes.get(field));
                if before == after {
                    continue;
                }
                let ts = n.source_updated_at.0.to_string();
                signals.push(Signal {
                    tenant: tenant.id.clone(),
                    id: Id::new(format!("sig-{}", short_hash(&[n.entity_type.as_str(), n.id.as_str(), field, &ts])))?,
                    entity: me.clone(),
                    kind: kind.clone(),
                    at: n.source_updated_at,
                    before: before.cloned(),
                    after: after.cloned(),
                });
            }
        }
        let relationships = n
            .relationships
            .iter()
            .map(|(kind, to_type, to_id)| Relationship {
                tenant: tenant.id.clone(),
                from: me.clone(),
                to: EntityRef { entity_type: to_type.clone(), id: to_id.clone() },
                kind: kind.clone(),
                valid_from: n.source_updated_at,
                valid_to: None,
                attributes: BTreeMap::new(),
            })
            .collect();
        let now = self.backend.clock.now();
        Ok(Some(SpineWrite {
            entity: Entity {
                tenant: tenant.id.clone(),
                entity_type: n.entity_type.clone(),
                id: n.id.clone(),
                pole_class,
                attributes: n.attributes.clone(),
                created_at: existing.map_or(now, |e| e.created_at),
                updated_at: now,
                version: 0,
                source_updated_at: Some(n.source_updated_at),
            },
            expect: existing.map_or(Expect::Absent, |e| Expect::Version(e.version)),
            relationships,
            signals,
        }))
    }

    /// A source's answer to an approved action, applied to the Spine entity it changed:
    /// the changed fields over the stored ones, as a write of that source at the
    /// answer's modification time — or, without one, just after the stored copy's, so
    /// the source's next sync of the record (newer) still wins — with signals for the
    /// fields that moved. `None` when the Spine does not hold the entity (nothing to
    /// update).
    ///
    /// # Errors
    /// `INVALID_REQUEST` when the changed entity breaks the tenant's schema;
    /// `UNAVAILABLE`.
    pub async fn apply_change(&self, tenant: &TenantId, effect: &crate::actions::Effect) -> Result<Option<Entity>> {
        let t = self.backend.records.get_tenant(tenant).await?.ok_or_else(|| Error::not_found(format!("tenant {tenant}")))?;
        let EntityRef { entity_type, id } = &effect.entity;
        let Some(existing) = self.backend.records.get_entity(tenant, entity_type, id).await? else { return Ok(None) };
        let mut attributes = existing.attributes.clone();
        let mut signals = BTreeMap::new();
        for c in &effect.changes {
            attributes.insert(c.field.clone(), c.value.clone());
            if let Some(kind) = c.signal {
                signals.insert(c.field.clone(), domain::EntityType::new(kind)?);
            }
        }
        let after_stored = Timestamp(existing.source_updated_at.map_or(1, |s| s.0.saturating_add(1)));
        let at = effect.at.filter(|t| *t >= after_stored).unwrap_or(after_stored);
        let n = mapping::Normalized {
            entity_type: entity_type.clone(),
            id: id.clone(),
            attributes,
            source_updated_at: at,
            relationships: Vec::new(),
            signals,
        };
        Self::check(&t, &n)?;
        let Some(w) = self.write(&t, &n).await? else { return Ok(None) };
        self.entities.written(&w.entity, false).await;
        Ok(Some(w.entity))
    }

    /// Writer, record by record (after a lost race): read, plan, write; again on conflict.
    /// Returns what was written (the entity as stored), or `None` for a stale record.
    async fn write(&self, tenant: &Tenant, n: &mapping::Normalized) -> Result<Option<SpineWrite>> {
        for _ in 0..5 {
            let existing = self.backend.records.get_entity(&tenant.id, &n.entity_type, &n.id).await?;
            let Some(mut w) = self.plan(tenant, n, existing.as_ref())? else { return Ok(None) };
            match self.backend.records.apply_spine_writes(std::slice::from_ref(&w)).await {
                Ok(mut stored) => {
                    if let Some(e) = stored.pop() {
                        w.entity = e;
                    }
                    return Ok(Some(w));
                }
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::unavailable("the entity kept changing concurrently; retry"))
    }

    /// A batch that cannot be processed right now (a dependency failed) puts its
    /// connector in `sync_error` with the failing stage; the next accepted batch or a
    /// successful retry of this one resumes it (see [`Self::process`]).
    pub async fn record_stage_error(&self, d: &Delivery, e: &Error) {
        let Ok(msg) = serde_json::from_slice::<IngestMessage>(&d.message.body) else { return };
        let Ok(src) = ConnectorSource::new(msg.source) else { return };
        let tenant = &d.message.tenant;
        if let Ok(Some(c)) = self.backend.records.get_connector(tenant, &src).await
            && matches!(c.state, ConnectorState::SyncingInitial | ConnectorState::SyncingDelta)
        {
            let stage = c.state.as_str().to_owned();
            let _ = self
                .transition(
                    tenant,
                    &src,
                    ConnectorState::SyncError,
                    None,
                    Some((stage, format!("{PIPELINE_ERROR}{}", e.message))),
                )
                .await;
        }
    }
}
