//! Hybrid search and the ingestion of searchable text (SPEC §5.4): chunking, rule-based
//! POLE+O extraction, embedding, linking to similar records, and **readback
//! verification** — a synthetic query must retrieve the new chunk, byte for byte,
//! before the record is marked verified (confidence 0.96, freshness locked); otherwise
//! it goes to the review queue, visible to approvers.
//!
//! Every query is confined to the caller's tenant and to scopes the caller may read
//! ([`MemoryScope::readable_by`]) before the index is asked (wall 6).

use std::collections::BTreeSet;

use domain::memory::{MemoryScope, Verification};
use domain::principal::{CallerContext, Scope};
use domain::spine::KbDocument;
use domain::{Error, Id, Page, PageRequest, Result, TenantId, Timestamp};
use ports::Backend;
use ports::Embedder;
use ports::records::{EngineeringStore, LibraryStore, MemoryStore, ReviewStore};
use ports::search::{CONTEXT, Context, DocKind, LATE, MAX_HITS, SearchDoc, SearchHit, SearchMode, SearchQuery, check_query};

/// Longest chunk, in characters; paragraphs are kept whole when they fit.
pub const CHUNK_CHARS: usize = 1_200;
/// Most chunks one record is cut into (a 16 KiB memory body or a long KB document).
pub const MAX_CHUNKS: usize = 64;
/// The review-queue kind of an index entry whose record is gone.
pub const ORPHAN_KIND: &str = "index";

/// How deep a readback query looks for the new chunk.
pub const READBACK_K: usize = 10;
/// The work-queue kind of a deferred readback (or of a removal's second sweep), run
/// once the index's refresh window has passed.
pub const KIND_READBACK: &str = "search.readback";
/// The waits (ms) between tries of a readback on an index that makes writes visible
/// after a refresh: on the request path only when the deferred one cannot be queued.
const REFRESH_RETRIES: [u64; 4] = [0, 1_000, 2_000, 4_000];
pub mod facts;
mod readback;
mod text;
pub mod vectors;

use readback::Readback;
pub(crate) use readback::synthetic_query;
pub use text::{chunks, extract};

/// Hybrid search's `hits` (best first) ordered again: the best [`LATE`]`.pool` by late
/// interaction with `query` ([`ports::search::Late::rerank`]) when `embedder` has token
/// states (a model run in this process), then every turn's score raised by its
/// neighbours' in the conversation ([`ports::search::Context`], with the weight for
/// the order the hits are in: none after late interaction, as served). What every
/// hybrid search of the services does, and what the recall benchmark measures.
///
/// # Errors
/// `INTERNAL` when the model fails.
pub async fn reorder(embedder: &dyn Embedder, query: &str, hits: Vec<SearchHit>) -> Result<Vec<SearchHit>> {
    reorder_with(embedder, query, hits, &CONTEXT).await
}

/// [`reorder`] with another conversation-context setting (the recall benchmark's
/// sweep).
///
/// # Errors
/// As [`reorder`].
pub async fn reorder_with(
    embedder: &dyn Embedder,
    query: &str,
    hits: Vec<SearchHit>,
    context: &Context,
) -> Result<Vec<SearchHit>> {
    if hits.len() < 2 {
        return Ok(hits);
    }
    // What was embedded when the chunk was written (`chunks_of`: its title, then its
    // text), whose token states the model kept then. The title's tokens are matched too
    // (a speaker's name, a date).
    let texts: Vec<String> = hits.iter().take(LATE.pool).map(|h| format!("{}\n{}", h.title, h.text)).collect();
    Ok(match embedder.token_states(query, &texts).await? {
        Some((question, docs)) => context.apply_after_late(LATE.rerank(hits, &question, &docs)),
        None => context.apply(hits),
    })
}

/// Similarity above which an existing record is linked as related.
pub const LINK_SIMILARITY: f32 = 0.80;
pub const VERIFIED_CONFIDENCE: f64 = 0.96;
pub const UNVERIFIED_CONFIDENCE: f64 = 0.30;

/// Largest knowledge-base document body (it is cut into at most [`MAX_CHUNKS`] chunks).
pub const MAX_KB_BYTES: usize = 64 * 1024;

/// A knowledge-base document as submitted (`POST /v1/kb/documents`).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KbInput {
    /// Replaces the document with this id; a new id when absent.
    pub id: Option<String>,
    /// `org` (default), `team:<id>` or `project:<id>`.
    pub scope: Option<String>,
    pub title: String,
    pub body: String,
    pub source: Option<String>,
}

/// What to index: one memory entry or KB document.
#[derive(Debug, Clone)]
pub struct IndexRequest<'a> {
    pub tenant: &'a TenantId,
    pub scope: &'a MemoryScope,
    pub kind: DocKind,
    pub doc: &'a Id,
    pub title: &'a str,
    pub body: &'a str,
    pub at: Timestamp,
    /// When what it records happened, when that is not `at` (see `SearchDoc::occurred_at`).
    pub occurred: Option<Timestamp>,
}

/// A searchable source record: id, title, body, kind, and whether it belongs in the index.
/// A record the reindex compares with the index.
struct Source {
    id: Id,
    title: String,
    body: String,
    kind: DocKind,
    /// Whether it belongs in the index (active, not expired).
    live: bool,
    at: Timestamp,
    occurred: Option<Timestamp>,
}

/// The searchable form of each kind of record, shared by the reindex and the review
/// queue's retry.
impl Source {
    fn memory(m: domain::memory::MemoryEntry, now: Timestamp) -> Self {
        let (live, occurred) = (m.live_at(now), Some(m.happened_at()));
        Self { id: m.id, title: m.title, body: m.body, kind: DocKind::Memory, live, at: m.updated_at, occurred }
    }

    fn kb(d: KbDocument) -> Self {
        Self { id: d.id, title: d.title, body: d.body, kind: DocKind::Kb, live: true, at: d.created_at, occurred: None }
    }

    fn turn(t: domain::memory::ConversationTurn) -> Self {
        let live = t.forgotten.is_none();
        Self { title: turn_title(&t), id: t.id, body: t.content, kind: DocKind::Turn, live, at: t.at, occurred: Some(t.at) }
    }

    fn engineering(r: domain::engineering::EngRecord, now: Timestamp) -> Self {
        Self {
            title: r.body.title(),
            body: r.body.text(),
            live: !r.expired(now),
            at: r.updated_at,
            occurred: Some(r.created_at),
            kind: DocKind::Engineering,
            id: r.id,
        }
    }
}

/// A time window on when things happened: `since` inclusive, `until` exclusive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
}

impl Window {
    /// Whether something that happened at `at` falls in the window.
    pub fn contains(&self, at: Timestamp) -> bool {
        self.since.is_none_or(|s| at >= s) && self.until.is_none_or(|u| at < u)
    }
}

/// What a reindex did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReindexReport {
    /// Records (re)indexed, how many of them passed readback, and how many wait for a
    /// readback after the index's refresh window (queued, off this run).
    pub indexed: usize,
    pub verified: usize,
    pub pending: usize,
    /// Records already indexed and left alone.
    pub kept: usize,
    /// Superseded entries taken out of the index.
    pub removed: usize,
    /// Index entries without a record, flagged for review.
    pub orphaned: usize,
    /// The run stopped at its time budget ([`SearchService::reindex_within`]): what it
    /// did stays done, and a run after it goes on from there (it keeps what is indexed).
    pub unfinished: bool,
}

/// Hybrid search and verified indexing, over the backend's index and embedder.
#[derive(Clone)]
pub struct SearchService {
    backend: Backend,
    audit: crate::audit::AuditService,
    filler: std::sync::Arc<vectors::Filler>,
}

impl SearchService {
    pub(crate) fn new(backend: Backend, audit: crate::audit::AuditService) -> Self {
        Self { backend, audit, filler: std::sync::Arc::default() }
    }

    /// Whether a search index is configured (an AWS stack may have none: searches then
    /// scan the store by keywords).
    pub fn enabled(&self) -> bool {
        self.backend.search.name() != "none"
    }

    /// Indexes a record and proves it retrievable. Returns its verification (also
    /// stored; a failed one is in the review queue). Embedder and index failures do not
    /// fail the caller's write: the record is stored, unverified, queued for review, and
    /// the reindex job retries it.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the verification record cannot be written.
    pub async fn index(&self, r: IndexRequest<'_>) -> Result<Option<Verification>> {
        if !self.enabled() {
            return Ok(None);
        }
        let mut pending = false;
        let (verified, reason, related) = match self.chunks_of(&r).await {
            Err(e) => {
                // Nothing reached the index: the reindex job finds the record missing and
                // retries; meanwhile it waits in the review queue.
                tracing::warn!(code = ?e.code, "embedding failed; the record goes to review");
                (false, format!("the embedder failed ({}); the reindex job retries", e.code), Vec::new())
            }
            Ok(docs) => {
                // Similar records of the same scope, found before this one is written.
                let related = self.similar(&r, &docs).await;
                // A shorter record replaces a longer one: drop its old chunks first.
                let written = async {
                    self.backend.search.remove(r.tenant, r.scope, r.doc).await?;
                    self.backend.search.upsert(&docs).await
                }
                .await;
                let (verified, reason) = match written {
                    Err(e) => {
                        tracing::warn!(code = ?e.code, "search index write failed; the record goes to review");
                        (false, "the index write failed; the reindex job retries".to_owned())
                    }
                    Ok(()) if self.defer_readback(&r, &docs).await => {
                        pending = true;
                        let secs = self.backend.search.visible_after().as_secs();
                        (false, format!("written; its readback runs once the index has refreshed (within {secs} s)"))
                    }
                    Ok(()) => self.readback(r.tenant, r.scope, r.kind, &docs).await,
                };
                (verified, reason, related)
            }
        };
        // The review queue is read by approvers: a personal memory or a session turn
        // (its owner's alone) shows there by id and scope only — no title, no
        // extracted entities, no links.
        let private = matches!(r.scope, MemoryScope::Personal(_) | MemoryScope::Session(_));
        let v = Verification {
            tenant: r.tenant.clone(),
            kind: r.kind.as_str().to_owned(),
            doc: r.doc.clone(),
            scope: r.scope.clone(),
            title: if private { String::new() } else { r.title.chars().take(200).collect() },
            verified,
            pending,
            confidence: if verified { VERIFIED_CONFIDENCE } else { UNVERIFIED_CONFIDENCE },
            fresh_at: verified.then(|| self.backend.clock.now()),
            reason,
            entities: if private { Vec::new() } else { extract(&format!("{}\n{}", r.title, r.body)) },
            related: if private { Vec::new() } else { related },
            at: self.backend.clock.now(),
        };
        self.backend.records.put_verification(&v).await?;
        Ok(Some(v))
    }

    /// The record's chunks, embedded.
    async fn chunks_of(&self, r: &IndexRequest<'_>) -> Result<Vec<SearchDoc>> {
        let mut docs = Self::unembedded(r)?;
        let texts: Vec<String> = docs.iter().map(|d| format!("{}\n{}", d.title, d.text)).collect();
        let vectors = self.backend.embedder.embed(&texts).await?;
        if vectors.len() != docs.len() {
            return Err(Error::unavailable("the embedder answered a different number of vectors"));
        }
        for (d, v) in docs.iter_mut().zip(vectors) {
            d.vector = v;
            d.embedder = self.backend.embedder.name().to_owned();
        }
        Ok(docs)
    }

    /// The record's chunks, without vectors yet ([`vectors::NO_VECTOR_YET`]).
    fn unembedded(r: &IndexRequest<'_>) -> Result<Vec<SearchDoc>> {
        chunks(r.body)
            .into_iter()
            .enumerate()
            .map(|(i, text)| {
                Ok(SearchDoc {
                    tenant: r.tenant.clone(),
                    scope: r.scope.clone(),
                    id: Id::new(format!("{}~{i}", r.doc))?,
                    doc: r.doc.clone(),
                    kind: r.kind,
                    title: r.title.to_owned(),
                    text,
                    vector: Vec::new(),
                    embedder: vectors::NO_VECTOR_YET.to_owned(),
                    updated_at: r.at,
                    occurred_at: r.occurred,
                })
            })
            .collect()
    }

    /// Indexes a new conversation turn. In a long-lived process on an index consistent
    /// at once it answers once the turn is found by its words, and its vector follows
    /// within moments, batched with others' ([`vectors`]; when [`vectors::MAX_PENDING`]
    /// wait, the write waits for room); elsewhere as [`Self::index`].
    ///
    /// # Errors
    /// As [`Self::index`].
    pub async fn index_turn(&self, r: IndexRequest<'_>) -> Result<()> {
        if !self.enabled() || !self.vectors_later() {
            return self.index(r).await.map(|_| ());
        }
        let docs = Self::unembedded(&r)?;
        if let Err(e) = self.backend.search.upsert(&docs).await {
            tracing::warn!(code = ?e.code, "a turn's words were not indexed; indexing it whole");
            return self.index(r).await.map(|_| ());
        }
        let mut job = vectors::Job { tenant: r.tenant.clone(), scope: r.scope.clone(), kind: r.kind, docs };
        // Too many wait: this write waits for room (the writers then go at the batches'
        // pace, which bounds every turn's wait for its vector); past a long wait it
        // embeds its own.
        let deadline = self.backend.clock.now().0 + i64::try_from(vectors::MAX_ROOM_WAIT.as_millis()).unwrap_or(i64::MAX);
        loop {
            match self.queue_vector(job) {
                Ok(()) => return Ok(()),
                Err(back) if self.backend.clock.now().0 < deadline => {
                    job = back;
                    self.backend.clock.sleep(std::time::Duration::from_millis(2)).await;
                }
                Err(_) => return self.index(r).await.map(|_| ()),
            }
        }
    }

    async fn similar(&self, r: &IndexRequest<'_>, docs: &[SearchDoc]) -> Vec<Id> {
        let Some(first) = docs.first() else { return Vec::new() };
        let q = SearchQuery {
            tenant: r.tenant.clone(),
            scopes: vec![r.scope.clone()],
            kind: None,
            text: synthetic_query(r.title, &first.text),
            vector: Some(first.vector.clone()),
            embedder: first.embedder.clone(),
            mode: SearchMode::Vector,
            k: 4,
            since: None,
            until: None,
        };
        let hits = self.backend.search.search(&q).await.unwrap_or_default();
        hits.into_iter()
            .filter(|h| h.doc != *r.doc && h.similarity.is_some_and(|s| s >= LINK_SIMILARITY))
            .map(|h| h.doc)
            .take(3)
            .collect()
    }

    /// Removes a record from the index (superseded org memory, replaced documents).
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be written.
    pub async fn unindex(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id) -> Result<()> {
        // What the embedder keeps of the chunks (a local model's token states) goes too.
        if self.backend.embedder.keeps_states()
            && let Ok(chunks) = self.backend.search.chunks(tenant, scope, doc).await
        {
            let texts: Vec<String> = chunks.iter().map(|c| format!("{}\n{}", c.title, c.text)).collect();
            self.backend.embedder.forget(&texts);
        }
        self.backend.search.remove(tenant, scope, doc).await?;
        if !self.backend.search.visible_after().is_zero() {
            // A chunk written inside the refresh window was not found to remove: sweep
            // again once the window has passed (everything written before now).
            let now = self.backend.clock.now();
            let sweep = Readback {
                kind: None,
                doc: doc.clone(),
                scope: scope.storage_key(),
                at: now.0 + 1,
                chunks: Vec::new(),
                written: now.0,
            };
            if let Err(e) = self.queue_readback(tenant, &sweep).await {
                tracing::warn!(code = ?e.code, "the removal's second sweep could not be queued; the daily reindex finds what is left");
            }
        }
        Ok(())
    }

    /// Hybrid search of `scopes` for `caller`. Every scope must be readable by the
    /// caller (`FORBIDDEN` otherwise) — checked here, before the index is asked. In
    /// hybrid mode the index's best candidates are ordered again by [`reorder`] (late
    /// interaction when the embedder runs in this process, else conversation context).
    ///
    /// # Errors
    /// `INVALID_REQUEST` for an unusable query; `FORBIDDEN` for an unreadable scope;
    /// `UNAVAILABLE` when the index or the embedder is unreachable (or none is configured).
    pub async fn search(
        &self,
        caller: &CallerContext,
        scopes: Vec<MemoryScope>,
        kind: Option<DocKind>,
        text: &str,
        k: usize,
        mode: SearchMode,
    ) -> Result<Vec<SearchHit>> {
        self.search_window(caller, scopes, kind, text, k, mode, Window::default()).await
    }

    /// [`SearchService::search`] of what happened within `window`.
    ///
    /// # Errors
    /// As [`SearchService::search`].
    #[allow(clippy::too_many_arguments)]
    pub async fn search_window(
        &self,
        caller: &CallerContext,
        scopes: Vec<MemoryScope>,
        kind: Option<DocKind>,
        text: &str,
        k: usize,
        mode: SearchMode,
        window: Window,
    ) -> Result<Vec<SearchHit>> {
        self.query(caller, scopes, kind, text, k, mode, window, mode == SearchMode::Hybrid).await
    }

    /// [`SearchService::search_window`], ordered again by late interaction when
    /// `reorder` (and the embedder has token states); without it, in the fused order —
    /// for a pool of candidates whose order does not matter.
    ///
    /// # Errors
    /// As [`SearchService::search`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn query(
        &self,
        caller: &CallerContext,
        scopes: Vec<MemoryScope>,
        kind: Option<DocKind>,
        text: &str,
        k: usize,
        mode: SearchMode,
        window: Window,
        reorder: bool,
    ) -> Result<Vec<SearchHit>> {
        check_query(text)?;
        if let Some(s) = scopes.iter().find(|s| !s.readable_by(caller)) {
            return Err(Error::forbidden(format!("scope {} is not readable with this credential", s.storage_key())));
        }
        let vector = if mode == SearchMode::Keyword { None } else { Some(self.backend.embedder.embed_query(text).await?) };
        let q = SearchQuery {
            tenant: caller.tenant.clone(),
            scopes,
            kind,
            text: text.to_owned(),
            vector,
            embedder: self.backend.embedder.name().to_owned(),
            mode,
            // Late interaction orders the best `LATE.pool` again, so at least that many
            // are fetched.
            k: if reorder { k.clamp(LATE.pool, MAX_HITS) } else { k },
            since: window.since,
            until: window.until,
        };
        let hits = self.backend.search.search(&q).await?;
        let mut hits = if reorder { self::reorder(self.backend.embedder.as_ref(), text, hits).await? } else { hits };
        hits.truncate(k);
        Ok(hits)
    }

    /// Stores a knowledge-base document and indexes it, verified by readback. Needs
    /// `tenant:write` and a scope the caller can read (org, one of its teams or
    /// projects); `global` is operator-written and refused here.
    ///
    /// # Errors
    /// `FORBIDDEN` without `tenant:write` or for a scope the caller cannot read;
    /// `INVALID_REQUEST` for an empty or oversized title/body or a bad scope or id;
    /// `UNAVAILABLE` when the store is unreachable. Audited either way.
    pub async fn put_kb_document(&self, caller: &CallerContext, input: KbInput) -> Result<(KbDocument, Option<Verification>)> {
        let result = self.store_kb(caller, input).await;
        let target = result.as_ref().map_or_else(|_| "-".to_owned(), |(d, _)| d.id.to_string());
        self.audit.outcome(caller, "kb.put", &target, &result).await;
        result
    }

    async fn store_kb(&self, caller: &CallerContext, input: KbInput) -> Result<(KbDocument, Option<Verification>)> {
        caller.scopes.require(Scope::TenantWrite)?;
        let scope = MemoryScope::parse(input.scope.as_deref().unwrap_or("org"))?;
        match &scope {
            MemoryScope::Org | MemoryScope::Team(_) | MemoryScope::Project(_) => {}
            _ => return Err(Error::invalid_field("scope", "knowledge-base documents go in org, team:<id> or project:<id>")),
        }
        if !scope.readable_by(caller) {
            return Err(Error::forbidden(format!("scope {} is not readable with this credential", scope.storage_key())));
        }
        if input.title.trim().is_empty() || input.title.chars().count() > 200 {
            return Err(Error::invalid_field("title", "1 to 200 characters"));
        }
        if input.body.trim().is_empty() || input.body.len() > MAX_KB_BYTES {
            return Err(Error::invalid_field("body", format!("1 to {MAX_KB_BYTES} bytes")));
        }
        let id = match input.id {
            Some(id) => Id::new(id)?,
            None => crate::new_id(&self.backend),
        };
        // An id names one document: moving it to another scope is refused, not copied. Where
        // it lives is said only to a caller who may read that scope.
        if let Some(old) = self.backend.records.get_kb_document(&caller.tenant, &id).await?
            && old.scope != scope
        {
            if old.scope.readable_by(caller) {
                return Err(Error::conflict(format!("document {id} is in scope {}", old.scope.storage_key())));
            }
            return Err(Error::conflict(format!("the id {id} is taken; choose another")));
        }
        let doc = KbDocument {
            tenant: caller.tenant.clone(),
            id,
            scope,
            title: input.title,
            body: input.body,
            source: input.source,
            created_at: self.backend.clock.now(),
        };
        self.backend.records.put_kb_document(&doc).await?;
        let v = self
            .index(IndexRequest {
                tenant: &doc.tenant,
                scope: &doc.scope,
                kind: DocKind::Kb,
                doc: &doc.id,
                title: &doc.title,
                body: &doc.body,
                at: doc.created_at,
                occurred: None,
            })
            .await?;
        Ok((doc, v))
    }

    /// The two-way reindex (SPEC §9) of one tenant's searchable records — memory of
    /// every scope (org, team, project, personal, session), knowledge-base documents,
    /// conversation turns and engineering records — against the index. Forward: a record missing from the index
    /// (or every record, with `full`, after an embedder change) is chunked, embedded,
    /// indexed and verified; a superseded, forgotten or expired entry still indexed is
    /// taken out. Backward: an indexed record whose source record is gone is flagged
    /// `orphaned — content unrecoverable` in the review queue. Idempotent. `progress`
    /// is called after each record indexed.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the store, the index or the embedder is unreachable.
    pub async fn reindex(&self, tenant: &TenantId, full: bool, progress: &(dyn Fn(usize) + Sync)) -> Result<ReindexReport> {
        self.reindex_within(tenant, full, progress, None).await
    }

    /// [`Self::reindex`] that stops once `budget` has passed (measured from its start,
    /// after at least one record (re)indexed or removed), reporting itself
    /// [`ReindexReport::unfinished`]: how a large tenant's daily reindex fits the
    /// pipeline function's timeout, one run after another. Only a plain reindex goes on
    /// where the last stopped (it keeps what is indexed); a `full` one starts over, so
    /// give it no budget.
    ///
    /// # Errors
    /// As [`Self::reindex`].
    pub async fn reindex_within(
        &self,
        tenant: &TenantId,
        full: bool,
        progress: &(dyn Fn(usize) + Sync),
        budget: Option<std::time::Duration>,
    ) -> Result<ReindexReport> {
        let started = std::time::Instant::now();
        let spent = || budget.is_some_and(|b| started.elapsed() >= b);
        let mut report = ReindexReport::default();
        if !self.enabled() {
            return Ok(report);
        }
        let records = &self.backend.records;
        let now = self.backend.clock.now();
        let mut by_scope: std::collections::BTreeMap<MemoryScope, Vec<Source>> = std::collections::BTreeMap::new();
        by_scope.entry(MemoryScope::Org).or_default();
        let (memory, _) = crate::all_pages(usize::MAX, |p| async move { records.list_all_memory(tenant, &p).await }).await?;
        for m in memory {
            let scope = m.scope.clone();
            by_scope.entry(scope).or_default().push(Source::memory(m, now));
        }
        let (kb, _) = crate::all_pages(usize::MAX, |p| async move { records.list_kb_documents(tenant, &p).await }).await?;
        for d in kb {
            by_scope.entry(d.scope.clone()).or_default().push(Source::kb(d));
        }
        let (turns, _) = crate::all_pages(usize::MAX, |p| async move { records.list_all_turns(tenant, &p).await }).await?;
        for t in turns {
            by_scope.entry(MemoryScope::Session(t.session.clone())).or_default().push(Source::turn(t));
        }
        let (eng, _) = crate::all_pages(usize::MAX, |p| async move { records.list_all_eng_records(tenant, &p).await }).await?;
        for r in eng {
            by_scope.entry(MemoryScope::Project(r.project.clone())).or_default().push(Source::engineering(r, now));
        }
        for (scope, docs) in by_scope {
            let indexed: BTreeSet<Id> = self.backend.search.doc_ids(tenant, &scope, 1_000_000).await?.into_iter().collect();
            let mut known = BTreeSet::new();
            for doc in docs {
                known.insert(doc.id.clone());
                if !doc.live {
                    if indexed.contains(&doc.id) {
                        self.unindex(tenant, &scope, &doc.id).await?;
                        report.removed += 1;
                        if spent() {
                            report.unfinished = true;
                            return Ok(report);
                        }
                    }
                    continue;
                }
                if indexed.contains(&doc.id) && !full {
                    report.kept += 1;
                    continue;
                }
                let v = self
                    .index(IndexRequest {
                        tenant,
                        scope: &scope,
                        kind: doc.kind,
                        doc: &doc.id,
                        title: &doc.title,
                        body: &doc.body,
                        at: doc.at,
                        occurred: doc.occurred,
                    })
                    .await?;
                report.indexed += 1;
                match v {
                    Some(v) if v.verified => report.verified += 1,
                    Some(v) if v.pending => report.pending += 1,
                    _ => {}
                }
                progress(report.indexed);
                if spent() {
                    report.unfinished = true;
                    return Ok(report);
                }
            }
            for orphan in indexed.difference(&known) {
                let v = Verification {
                    tenant: tenant.clone(),
                    kind: ORPHAN_KIND.into(),
                    doc: orphan.clone(),
                    scope: scope.clone(),
                    title: String::new(),
                    verified: false,
                    pending: false,
                    confidence: 0.0,
                    fresh_at: None,
                    reason: "orphaned — content unrecoverable: indexed, but its record is gone".into(),
                    entities: Vec::new(),
                    related: Vec::new(),
                    at: now,
                };
                self.backend.records.put_verification(&v).await?;
                report.orphaned += 1;
            }
        }
        Ok(report)
    }

    /// Loads what the index keeps in memory (every partition, on the embedded index)
    /// ahead of the first search after a start; returns how many partitions it loaded.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be read.
    pub async fn warm_up(&self) -> Result<usize> {
        self.backend.search.warm_up().await
    }

    /// Saves what the index keeps in this process, for the next start to read instead of
    /// rebuilding it (`serve` calls it as it stops). Returns how many partitions it saved.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be read.
    pub async fn save(&self) -> Result<usize> {
        self.backend.search.save().await
    }

    /// The review queue: records whose readback failed. For approvers and admins.
    ///
    /// # Errors
    /// `FORBIDDEN` without `approvals:decide` or `admin`; `INVALID_REQUEST` for a bad cursor.
    pub async fn review_queue(&self, caller: &CallerContext, page: &PageRequest) -> Result<Page<Verification>> {
        may_review(caller)?;
        self.backend.records.list_review(&caller.tenant, page).await
    }

    /// Indexes a record of the review queue again now, with readback (after an outage
    /// has passed, say); its new verification — off the queue when it passed.
    ///
    /// # Errors
    /// `FORBIDDEN` without `approvals:decide` or `admin`; `NOT_FOUND` when it is not in
    /// the queue; `INVALID_REQUEST` when its record is gone or no longer searchable (forget it
    /// instead); `UNAVAILABLE` when the store, the index or the embedder is unreachable.
    pub async fn retry_review(&self, caller: &CallerContext, kind: &str, doc: &Id) -> Result<Verification> {
        let target = format!("{kind}/{doc}");
        let result = async {
            let v = self.queued(caller, kind, doc).await?;
            let source = self.source_of(&v).await?.ok_or_else(|| {
                Error::invalid("its record is gone or no longer searchable (forgotten, superseded, expired): forget it instead")
            })?;
            self.index(IndexRequest {
                tenant: &caller.tenant,
                scope: &v.scope,
                kind: source.kind,
                doc: &source.id,
                title: &source.title,
                body: &source.body,
                at: source.at,
                occurred: source.occurred,
            })
            .await?
            .ok_or_else(|| Error::unavailable("no search index is configured"))
        }
        .await;
        self.audit.outcome(caller, "review.retry", &target, &result).await;
        result
    }

    /// Takes a record off the review queue: an orphan's leftover chunks leave the index;
    /// a record stays as it is (searchable, marked unverified, at low confidence) until a
    /// later readback verifies it. A person's call, kept in the audit ledger.
    ///
    /// # Errors
    /// `FORBIDDEN` without `approvals:decide` or `admin`; `NOT_FOUND` when it is not in
    /// the queue; `UNAVAILABLE`.
    pub async fn forget_review(&self, caller: &CallerContext, kind: &str, doc: &Id) -> Result<()> {
        let target = format!("{kind}/{doc}");
        let result = async {
            let v = self.queued(caller, kind, doc).await?;
            if v.kind == ORPHAN_KIND {
                self.backend.search.remove(&caller.tenant, &v.scope, doc).await?;
            }
            self.backend.records.dismiss_review(&caller.tenant, kind, doc).await
        }
        .await;
        self.audit.outcome(caller, "review.forget", &target, &result).await;
        result
    }

    /// The failed verification of a record in `caller`'s review queue.
    async fn queued(&self, caller: &CallerContext, kind: &str, doc: &Id) -> Result<Verification> {
        may_review(caller)?;
        self.backend
            .records
            .in_review(&caller.tenant, kind, doc)
            .await?
            .ok_or_else(|| Error::not_found(format!("{kind} {doc} is not in the review queue")))
    }

    /// The searchable record behind a verification, if it still exists and belongs in
    /// the index.
    async fn source_of(&self, v: &Verification) -> Result<Option<Source>> {
        let (records, t, now) = (&self.backend.records, &v.tenant, self.backend.clock.now());
        let source = match (v.kind.as_str(), &v.scope) {
            ("memory", _) => records.get_memory(t, &v.doc).await?.map(|m| Source::memory(m, now)),
            ("kb", _) => records.get_kb_document(t, &v.doc).await?.map(Source::kb),
            ("engineering", MemoryScope::Project(p)) => {
                records.get_eng_record(t, p, &v.doc).await?.map(|r| Source::engineering(r, now))
            }
            ("turn", MemoryScope::Session(session)) => {
                let (turns, _) = crate::all_pages(100_000, |p| async move { records.list_turns(t, session, &p).await }).await?;
                turns.into_iter().find(|x| x.id == v.doc).map(Source::turn)
            }
            _ => None,
        };
        Ok(source.filter(|s| s.live))
    }

    /// Every scope `caller` may read among global, org, its teams and its projects.
    pub fn shared_scopes(caller: &CallerContext) -> Vec<MemoryScope> {
        let mut s = vec![MemoryScope::Global, MemoryScope::Org];
        s.extend(caller.teams.iter().map(|t| MemoryScope::Team(t.clone())));
        s.extend(caller.projects.iter().map(|p| MemoryScope::Project(p.clone())));
        s
    }
}

/// Approvers (`approvals:decide`) and admins (`admin`: the dashboard's owners and
/// admins, whose dashboard session leaves deciding to the console) work the review queue.
fn may_review(caller: &CallerContext) -> Result<()> {
    if caller.scopes.contains(Scope::Admin) { Ok(()) } else { caller.scopes.require(Scope::ApprovalsDecide) }
}

/// How a conversation turn is titled in the index: its role and time.
pub(crate) fn turn_title(turn: &domain::memory::ConversationTurn) -> String {
    format!("{} · {}", turn.role.as_str(), turn.at.to_rfc3339())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_keep_paragraphs_and_bound_length() {
        assert_eq!(chunks("one.\n\ntwo."), ["one.\n\ntwo."]);
        let long = "A sentence that goes on for a while. ".repeat(200);
        let c = chunks(&long);
        assert!(c.len() > 5);
        assert!(c.iter().all(|x| x.chars().count() <= CHUNK_CHARS));
        assert_eq!(c.join(" ").split_whitespace().count(), long.split_whitespace().count());
    }

    #[test]
    fn pole_o_rules() {
        let e = extract(
            "Dr Ada Lovelace of Acme Labs met jane@example.com in Berlin on 2026-03-14 for the Apollo launch; see PROJ-142.",
        );
        let has = |c: &str, t: &str| e.iter().any(|x| x.class == c && x.text == t);
        assert!(has("person", "Ada Lovelace"), "{e:?}");
        assert!(has("person", "jane@example.com"));
        assert!(has("organization", "Acme Labs"));
        assert!(has("location", "Berlin"));
        assert!(has("event", "2026-03-14"));
        assert!(has("event", "Apollo launch"));
        assert!(has("object", "proj-142"));
    }

    #[test]
    fn synthetic_queries_are_valid_queries() {
        let q = synthetic_query("T", &format!("{}.", "word ".repeat(500)));
        assert!(check_query(&q).is_ok());
        assert_eq!(synthetic_query("Title", "Hi."), "Title Hi.");
    }
}
