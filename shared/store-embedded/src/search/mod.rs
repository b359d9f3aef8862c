//! [`SqliteSearch`]: the embedded search index. Chunks are stored durably in the
//! `search_docs` table; each `(tenant, scope)` partition is loaded on first use into an
//! in-process BM25 index ([`bm25`]; the rows read and decoded by `rows`) and a vector index — an exact scan while the
//! partition holds at most [`EXACT_MAX`] vectors, an HNSW graph ([`hnsw`]) above that.
//! Vectors are held in int8 (`vectors`). A partition loaded from the table is
//! searchable as soon as its rows are read: its graph is built in the background, and
//! until it is ready queries scan exactly. One saved when the process stopped
//! (`saved`) comes back whole, graph included, without reading the rows.
//!
//! Isolation is structural: a query only ever opens the partitions of the tenant and
//! scopes it names, so another tenant's or project's postings and graph nodes are never
//! traversed. `global` documents live in one tenant-less partition.

pub mod bm25;
mod codec;
pub mod hnsw;
mod rows;
mod saved;
mod vectors;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use domain::memory::MemoryScope;
use domain::{Error, Id, Result, TenantId, Timestamp};
use ports::search::{
    Candidate, DocKind, Fusion, SearchDoc, SearchHit, SearchIndex, SearchMode, SearchQuery, check_query, doc_terms, fuse,
    has_identifiers, identifiers, query_terms,
};
use rusqlite::params;
use tokio::sync::{OnceCell, RwLock};

use crate::db::{Db, sql_err};
use bm25::Bm25;
use hnsw::Hnsw;
use rows::{doc_rows, load, vector_bytes};
use vectors::Vectors;

/// Largest partition searched by an exact scan; above it the HNSW graph is built.
pub const EXACT_MAX: usize = 2_000;
/// How deep each retriever's list goes before fusion.
const DEPTH: usize = 50;

struct Slot {
    id: Id,
    doc: Id,
    kind: DocKind,
    title: String,
    text: String,
    occurred_at: Option<Timestamp>,
    /// When it happened (`occurred_at`, else when it was indexed): what time windows test.
    at: Timestamp,
    /// Whether `vectors` holds this slot's vector (same embedder as the index).
    has_vector: bool,
    alive: bool,
}

struct Partition {
    scope: MemoryScope,
    dim: usize,
    slots: Vec<Slot>,
    by_id: HashMap<String, u32, foldhash::fast::RandomState>,
    /// The live slots of each record (its chunks), so a removal does not scan them all.
    by_doc: HashMap<String, Vec<u32>, foldhash::fast::RandomState>,
    bm25: Bm25,
    /// Slot-indexed, quantized (zeros for slots without a vector). Append-only; shared
    /// with a graph build in progress (a write during it copies the array once).
    vectors: Arc<Vectors>,
    live_vectors: usize,
    graph: Option<Hnsw>,
    /// A graph is being built in the background: writes do not build one themselves.
    building: bool,
}

impl Partition {
    fn new(scope: MemoryScope, dim: usize) -> Self {
        Self {
            scope,
            dim,
            slots: Vec::new(),
            by_id: HashMap::default(),
            by_doc: HashMap::default(),
            bm25: Bm25::default(),
            vectors: Arc::new(Vectors::new(dim)),
            live_vectors: 0,
            graph: None,
            building: false,
        }
    }

    fn remove_slot(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        if !s.alive {
            return;
        }
        s.alive = false;
        if s.has_vector {
            self.live_vectors -= 1;
        }
        let t = doc_terms(&s.title, &s.text, s.at);
        // A retired slot stays as a graph waypoint; its words go (forgotten text is
        // not kept in memory, nor in a saved partition).
        s.title = String::new();
        s.text = String::new();
        self.bm25.remove(slot, &t);
        self.by_id.remove(s.id.as_str());
        if let Some(chunks) = self.by_doc.get_mut(s.doc.as_str()) {
            chunks.retain(|&c| c != slot);
            if chunks.is_empty() {
                self.by_doc.remove(s.doc.as_str());
            }
        }
    }

    /// Adds or replaces one chunk. A replaced chunk's slot is retired (the graph keeps it
    /// as a waypoint; searches skip it) and the chunk gets a new slot.
    fn put(&mut self, d: SearchDoc, embedder: &str) {
        if let Some(&old) = self.by_id.get(d.id.as_str()) {
            self.remove_slot(old);
        }
        let slot = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
        let has_vector = d.embedder == embedder && d.vector.len() == self.dim;
        Arc::make_mut(&mut self.vectors).push(has_vector.then_some(d.vector.as_slice()));
        if has_vector {
            self.live_vectors += 1;
        }
        self.bm25.add(slot, &doc_terms(&d.title, &d.text, d.happened_at()));
        self.by_id.insert(d.id.as_str().to_owned(), slot);
        self.by_doc.entry(d.doc.as_str().to_owned()).or_default().push(slot);
        let at = d.happened_at();
        self.slots.push(Slot {
            id: d.id,
            doc: d.doc,
            kind: d.kind,
            title: d.title,
            text: d.text,
            occurred_at: d.occurred_at,
            at,
            has_vector,
            alive: true,
        });
        if let Some(g) = &mut self.graph {
            if has_vector {
                g.insert(&self.vectors, slot);
            }
        } else if self.live_vectors > EXACT_MAX && !self.building {
            let mut g = Hnsw::new();
            for slot in self.graph_slots(0) {
                g.insert(&self.vectors, slot);
            }
            self.graph = Some(g);
        }
    }

    /// Replaces the chunks of record `doc` with `rows` (none: the record is gone).
    fn replace_doc(&mut self, doc: &str, rows: Vec<SearchDoc>, embedder: &str) {
        let old: Vec<u32> = self.by_doc.get(doc).cloned().unwrap_or_default();
        for slot in old {
            self.remove_slot(slot);
        }
        for d in rows {
            self.put(d, embedder);
        }
    }

    /// Slots from `from` on that belong in the graph (alive, with a vector).
    fn graph_slots(&self, from: usize) -> Vec<u32> {
        (from..self.slots.len())
            .filter(|&i| self.slots[i].alive && self.slots[i].has_vector)
            .filter_map(|i| u32::try_from(i).ok())
            .collect()
    }

    fn hit(&self, slot: u32, ids: &[String]) -> SearchHit {
        let s = &self.slots[slot as usize];
        SearchHit {
            scope: self.scope.clone(),
            id: s.id.clone(),
            doc: s.doc.clone(),
            kind: s.kind,
            title: s.title.clone(),
            text: s.text.clone(),
            score: 0.0,
            similarity: None,
            keyword_rank: None,
            vector_rank: None,
            exact: has_identifiers(ids, s.doc.as_str(), &s.title, &s.text),
            occurred_at: s.occurred_at,
        }
    }

    fn keep(&self, slot: u32, q: &SearchQuery) -> bool {
        let s = &self.slots[slot as usize];
        s.alive && q.kind.is_none_or(|k| s.kind == k) && q.in_window(s.at)
    }

    fn keyword(&self, q: &SearchQuery, ids: &[String]) -> Vec<Candidate> {
        let terms = query_terms(&q.text);
        // Over-fetch when filtering by kind, since postings hold every kind; a time window
        // may keep few of the best, so then every match is ranked.
        let n = if q.since.is_some() || q.until.is_some() {
            self.slots.len()
        } else if q.kind.is_some() {
            DEPTH * 4
        } else {
            DEPTH
        };
        let (found, idf_sum) = self.bm25.search(&terms, n);
        found
            .into_iter()
            .filter(|(slot, _)| self.keep(*slot, q))
            .take(DEPTH)
            .map(|(slot, score)| Candidate {
                hit: self.hit(slot, ids),
                raw: score,
                coverage: (idf_sum > 0.0).then(|| score / idf_sum),
            })
            .collect()
    }

    fn vector(&self, q: &SearchQuery, v: &[f32], ids: &[String]) -> Vec<Candidate> {
        let keep = |slot: u32| self.slots[slot as usize].has_vector && self.keep(slot, q);
        let v = self.vectors.query(v);
        let near: Vec<(u32, f32)> = match &self.graph {
            Some(g) => g.search(&self.vectors, &v, DEPTH, keep),
            None => {
                let mut all: Vec<(u32, f32)> = (0..self.slots.len())
                    .filter_map(|i| u32::try_from(i).ok())
                    .filter(|&s| keep(s))
                    .map(|s| (s, self.vectors.sim(&v, s)))
                    .collect();
                let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
                if all.len() > DEPTH {
                    all.select_nth_unstable_by(DEPTH, order);
                    all.truncate(DEPTH);
                }
                all.sort_by(order);
                all
            }
        };
        near.into_iter()
            .map(|(slot, sim)| {
                let mut hit = self.hit(slot, ids);
                hit.similarity = Some(sim);
                Candidate { hit, raw: f64::from(sim), coverage: None }
            })
            .collect()
    }
}

type Key = (String, String);

/// One loaded partition. Writers take `writer` for the whole write (table, then memory,
/// so both see writes in the same order) and `index` for writing only while applying it
/// in memory; searches take `index` for reading, so they never wait for a commit.
struct Loaded {
    index: Arc<RwLock<Partition>>,
    writer: tokio::sync::Mutex<()>,
}
type Shared = Arc<Loaded>;

/// The embedded search index. Cheap to clone.
#[derive(Clone)]
pub struct SqliteSearch {
    db: Db,
    embedder: Arc<str>,
    dim: usize,
    partitions: Arc<Mutex<HashMap<Key, Arc<OnceCell<Shared>>>>>,
    /// This process's name in `search_changes`.
    writer: Arc<str>,
    /// The last change of another process applied to the loaded partitions (`-1`: none
    /// read yet).
    seen: Arc<std::sync::atomic::AtomicI64>,
    /// Where [`Self::save_partitions`] writes the loaded partitions (beside the database).
    saved: Arc<std::path::PathBuf>,
}

/// Changes another process made, applied per call of [`SqliteSearch::sync_external`].
const SYNC_BATCH: i64 = 5_000;
/// How long the change log keeps a row: a process that has not looked for longer
/// reloads its partitions instead.
const CHANGE_LOG_MS: i64 = 24 * 3600 * 1000;

/// A row of `SELECT id, doc, kind, title, text, embedder, vector, updated_at,
/// occurred_at FROM search_docs` as a document of `tenant`'s `scope`.
fn key(tenant: &TenantId, scope: &MemoryScope) -> Key {
    match scope {
        MemoryScope::Global => (String::new(), scope.storage_key()),
        _ => (tenant.as_str().to_owned(), scope.storage_key()),
    }
}

impl SqliteSearch {
    /// The index in `db`, for vectors of `embedder` with `dim` numbers. Chunks stored by
    /// another embedder stay keyword-searchable until `continuity reindex` re-embeds them.
    pub fn new(db: Db, embedder: &str, dim: usize) -> Self {
        Self {
            embedder: Arc::from(embedder),
            dim,
            partitions: Arc::default(),
            writer: Arc::from(uuid::Uuid::new_v4().to_string()),
            seen: Arc::new(std::sync::atomic::AtomicI64::new(-1)),
            saved: Arc::new(saved::dir(db.path())),
            db,
        }
    }

    /// Applies to the loaded partitions what other processes wrote into the index (a CLI
    /// import while `serve` runs): each record they changed is read again from the table.
    /// Cheap when nothing changed (one indexed query). A process that fell behind the
    /// change log's window reloads its partitions on their next use.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the database cannot be read.
    pub async fn sync_external(&self) -> Result<()> {
        use std::sync::atomic::Ordering;
        loop {
            let seen = self.seen.load(Ordering::Acquire);
            if seen < 0 {
                // The first look: what the table holds now is what partitions load.
                let last: i64 = self
                    .db
                    .read(|c| c.query_row("SELECT COALESCE(MAX(seq), 0) FROM search_changes", [], |r| r.get(0)).map_err(sql_err))
                    .await?;
                self.seen.store(last, Ordering::Release);
                return Ok(());
            }
            let writer = self.writer.to_string();
            let batch = self
                .db
                .read(move |c| {
                    let oldest: Option<i64> =
                        c.query_row("SELECT MIN(seq) FROM search_changes", [], |r| r.get(0)).map_err(sql_err)?;
                    let mut st = c
                        .prepare_cached(
                            "SELECT seq, writer, tenant, scope, doc FROM search_changes WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                        )
                        .map_err(sql_err)?;
                    let rows = st
                        .query_map(params![seen, SYNC_BATCH], |r| {
                            Ok((
                                r.get::<_, i64>(0)?,
                                r.get::<_, String>(1)?,
                                (r.get::<_, String>(2)?, r.get::<_, String>(3)?, r.get::<_, String>(4)?),
                            ))
                        })
                        .map_err(sql_err)?;
                    let rows = rows.collect::<std::result::Result<Vec<_>, _>>().map_err(sql_err)?;
                    let full = rows.len() == usize::try_from(SYNC_BATCH).unwrap_or(usize::MAX);
                    let last = rows.last().map(|r| r.0);
                    let mut foreign: Vec<(String, String, String)> =
                        rows.into_iter().filter(|r| r.1 != writer).map(|r| r.2).collect();
                    foreign.sort();
                    foreign.dedup();
                    Ok((oldest, last, foreign, full))
                })
                .await?;
            let (oldest, last, foreign, full) = batch;
            if oldest.is_some_and(|o| o > seen + 1) {
                // Pruned past what this process saw: start over from the table.
                tracing::info!("the search change log moved past this process: reloading search partitions");
                self.partitions.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
                self.seen.store(-1, Ordering::Release);
                continue;
            }
            for (t, sc, doc) in foreign {
                self.reload_doc(t, sc, doc).await?;
            }
            if let Some(last) = last {
                self.seen.fetch_max(last, Ordering::AcqRel);
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Reads one record's chunks again into its partition, when that partition is loaded.
    async fn reload_doc(&self, t: String, sc: String, doc: String) -> Result<()> {
        let cell =
            self.partitions.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&(t.clone(), sc.clone())).cloned();
        let Some(part) = cell.as_ref().and_then(|c| c.get()).cloned() else { return Ok(()) };
        let _writing = part.writer.lock().await;
        let scope = part.index.read().await.scope.clone();
        // The global partition's rows carry no tenant.
        let tenant = TenantId::new(if t.is_empty() { "global" } else { t.as_str() })?;
        let d = doc.clone();
        let rows = self.db.read(move |c| doc_rows(c, (&t, &sc), &d, &tenant, &scope)).await?;
        part.index.write().await.replace_doc(&doc, rows, &self.embedder);
        Ok(())
    }

    async fn partition(&self, tenant: &TenantId, scope: &MemoryScope) -> Result<Shared> {
        let k = key(tenant, scope);
        let cell = {
            let mut map = self.partitions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            map.entry(k.clone()).or_default().clone()
        };
        let part = cell
            .get_or_try_init(|| async {
                let (t, s) = k.clone();
                let p = match self.read_saved(&t, &s, scope).await? {
                    Some(p) => p,
                    None => self.load_rows(t, s, tenant, scope).await?,
                };
                let building = p.building;
                let shared = Arc::new(Loaded { index: Arc::new(RwLock::new(p)), writer: tokio::sync::Mutex::new(()) });
                if building {
                    tokio::spawn(build_graph(shared.clone()));
                }
                Ok::<_, Error>(shared)
            })
            .await?;
        Ok(part.clone())
    }

    /// A partition from its rows in the table.
    async fn load_rows(&self, t: String, s: String, tenant: &TenantId, scope: &MemoryScope) -> Result<Partition> {
        let (tenant, scope, dim, embedder) = (tenant.clone(), scope.clone(), self.dim, self.embedder.clone());
        // Built row by row on the blocking pool: no copy of the whole partition
        // is held in between (100 000 chunks are ~200 MB of rows).
        self.db
            .read(move |c| {
                let mut st = c
                    .prepare_cached(
                        "SELECT id, doc, kind, title, text, embedder, vector, updated_at, occurred_at FROM search_docs
                                 WHERE tenant = ?1 AND scope = ?2",
                    )
                    .map_err(sql_err)?;
                let mut rows = st.query(params![t, s]).map_err(sql_err)?;
                load(&mut rows, &tenant, &scope, dim, &embedder)
            })
            .await
    }

    /// Whether the partition is loaded and its vector search runs on a graph (false
    /// while an exact scan serves it: small, not loaded, or its graph still building).
    pub async fn graph_ready(&self, tenant: &TenantId, scope: &MemoryScope) -> bool {
        let cell = self.partitions.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key(tenant, scope)).cloned();
        match cell.as_ref().and_then(|c| c.get()) {
            Some(part) => part.index.read().await.graph.is_some(),
            None => false,
        }
    }
}

/// Records in `search_changes` that `writer` changed these records of one partition, and
/// now and then drops rows older than the log's window.
fn log_changes(tx: &rusqlite::Transaction<'_>, writer: &str, tenant: &str, scope: &str, docs: &[String]) -> Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut st = tx
        .prepare_cached("INSERT INTO search_changes (writer, tenant, scope, doc, at) VALUES (?1, ?2, ?3, ?4, ?5)")
        .map_err(sql_err)?;
    let mut last = 0;
    for d in docs {
        st.execute(params![writer, tenant, scope, d, now]).map_err(sql_err)?;
        last = tx.last_insert_rowid();
    }
    let first = last - i64::try_from(docs.len()).unwrap_or(0);
    if last / 1_000 != first / 1_000 {
        tx.execute("DELETE FROM search_changes WHERE at < ?1", params![now - CHANGE_LOG_MS]).map_err(sql_err)?;
    }
    Ok(())
}

/// Builds a loaded partition's HNSW graph off the partition's lock — over a snapshot of
/// its vectors (searches meanwhile scan exactly) — then adds what was written during the
/// build and installs it.
async fn build_graph(part: Shared) {
    let (vectors, slots, seen) = {
        let p = part.index.read().await;
        (p.vectors.clone(), p.graph_slots(0), p.slots.len())
    };
    let started = std::time::Instant::now();
    let built = tokio::task::spawn_blocking(move || {
        let mut g = Hnsw::new();
        for slot in slots {
            g.insert(&vectors, slot);
        }
        g
    })
    .await;
    let mut p = part.index.write().await;
    p.building = false;
    match built {
        Ok(mut g) => {
            for slot in p.graph_slots(seen) {
                g.insert(&p.vectors, slot);
            }
            tracing::info!(
                vectors = p.live_vectors,
                scope = %p.scope.storage_key(),
                seconds = started.elapsed().as_secs_f64(),
                "search partition graph built"
            );
            p.graph = Some(g);
        }
        Err(e) => tracing::error!(error = %e, "building a search partition's graph failed; it stays on exact scans"),
    }
}

#[async_trait]
impl SearchIndex for SqliteSearch {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    async fn upsert(&self, docs: &[SearchDoc]) -> Result<()> {
        // One transaction per partition, applied in memory under the partition's write
        // lock, so the table and the in-process index never disagree.
        let mut groups: Vec<(Key, Vec<SearchDoc>)> = Vec::new();
        for d in docs {
            if d.embedder == *self.embedder && d.vector.len() != self.dim {
                return Err(Error::invalid(format!("vector has {} dimensions, the index {}", d.vector.len(), self.dim)));
            }
            let k = key(&d.tenant, &d.scope);
            match groups.iter_mut().find(|g| g.0 == k) {
                Some(g) => g.1.push(d.clone()),
                None => groups.push((k, vec![d.clone()])),
            }
        }
        for ((t, s), group) in groups {
            let part = self.partition(&group[0].tenant, &group[0].scope).await?;
            let _writing = part.writer.lock().await;
            let rows: Vec<_> = group
                .iter()
                .map(|d| {
                    (
                        d.id.as_str().to_owned(),
                        d.doc.as_str().to_owned(),
                        d.kind.as_str(),
                        d.title.clone(),
                        d.text.clone(),
                        d.embedder.clone(),
                        vector_bytes(&d.vector),
                        d.updated_at.0,
                        d.occurred_at.map(|t| t.0),
                    )
                })
                .collect();
            let writer = self.writer.clone();
            self.db
                .run(move |c| {
                    let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(sql_err)?;
                    {
                        let mut st = tx
                            .prepare_cached(
                                "INSERT OR REPLACE INTO search_docs
                                 (tenant, scope, id, doc, kind, title, text, embedder, vector, updated_at, occurred_at)
                                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                            )
                            .map_err(sql_err)?;
                        let mut changed = Vec::new();
                        for (id, doc, kind, title, text, emb, vec, at, occurred) in rows {
                            st.execute(params![t, s, id, doc, kind, title, text, emb, vec, at, occurred]).map_err(sql_err)?;
                            if !changed.contains(&doc) {
                                changed.push(doc);
                            }
                        }
                        log_changes(&tx, &writer, &t, &s, &changed)?;
                    }
                    tx.commit().map_err(sql_err)
                })
                .await?;
            let mut p = part.index.write().await;
            for d in group {
                p.put(d, &self.embedder);
            }
        }
        Ok(())
    }

    async fn remove(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id) -> Result<()> {
        let part = self.partition(tenant, scope).await?;
        let _writing = part.writer.lock().await;
        let slots: Vec<u32> = {
            let p = part.index.read().await;
            p.by_doc.get(doc.as_str()).cloned().unwrap_or_default()
        };
        if slots.is_empty() {
            // Memory and table agree (both change under `writer`): nothing to delete.
            return Ok(());
        }
        let (t, s) = key(tenant, scope);
        let d = doc.as_str().to_owned();
        let writer = self.writer.clone();
        self.db
            .run(move |c| {
                let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(sql_err)?;
                tx.execute("DELETE FROM search_docs WHERE tenant = ?1 AND scope = ?2 AND doc = ?3", params![t, s, d])
                    .map_err(sql_err)?;
                log_changes(&tx, &writer, &t, &s, std::slice::from_ref(&d))?;
                tx.commit().map_err(sql_err)
            })
            .await?;
        let mut p = part.index.write().await;
        for slot in slots {
            p.remove_slot(slot);
        }
        Ok(())
    }

    async fn search(&self, q: &SearchQuery) -> Result<Vec<SearchHit>> {
        check_query(&q.text)?;
        // What another process (a CLI import) wrote is found by the next search.
        self.sync_external().await?;
        let ids = identifiers(&q.text);
        let k = q.k.clamp(1, ports::search::MAX_HITS);
        let mut keyword = Vec::new();
        let mut vector = Vec::new();
        for scope in &q.scopes {
            let part = self.partition(&q.tenant, scope).await?;
            let p = part.index.read().await;
            if q.mode != SearchMode::Vector {
                keyword.extend(p.keyword(q, &ids));
            }
            if q.mode != SearchMode::Keyword
                && let Some(v) = q.vector.as_deref().filter(|v| v.len() == self.dim && q.embedder == *self.embedder)
            {
                vector.extend(p.vector(q, v, &ids));
            }
        }
        // Lists from several partitions merge before ranks are taken: keywords by coverage
        // (raw BM25 scores of partitions with other statistics do not compare), vectors by
        // similarity.
        keyword.sort_by(|a, b| b.coverage.unwrap_or(0.0).total_cmp(&a.coverage.unwrap_or(0.0)));
        vector.sort_by(|a, b| b.raw.total_cmp(&a.raw));
        keyword.truncate(DEPTH);
        vector.truncate(DEPTH);
        Ok(fuse(q.mode, keyword, vector, k, Fusion::for_embedder(&q.embedder)))
    }

    async fn doc_ids(&self, tenant: &TenantId, scope: &MemoryScope, max: usize) -> Result<Vec<Id>> {
        let (t, s) = key(tenant, scope);
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        let raw = self
            .db
            .read(move |c| {
                let mut st = c
                    .prepare_cached("SELECT DISTINCT doc FROM search_docs WHERE tenant = ?1 AND scope = ?2 ORDER BY doc LIMIT ?3")
                    .map_err(sql_err)?;
                let rows = st.query_map(params![t, s, max], |r| r.get::<_, String>(0)).map_err(sql_err)?;
                rows.collect::<std::result::Result<Vec<_>, _>>().map_err(sql_err)
            })
            .await?;
        raw.into_iter().map(Id::new).collect()
    }

    /// Consistent at once: a search after `upsert` returns sees it.
    fn visible_after(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    async fn chunks(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id) -> Result<Vec<SearchDoc>> {
        let (t, s) = key(tenant, scope);
        let (tenant, scope, d) = (tenant.clone(), scope.clone(), doc.as_str().to_owned());
        self.db.read(move |c| doc_rows(c, (&t, &s), &d, &tenant, &scope)).await
    }

    async fn remove_older(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id, than: Timestamp) -> Result<usize> {
        let part = self.partition(tenant, scope).await?;
        let _writing = part.writer.lock().await;
        let (t, s) = key(tenant, scope);
        let d = doc.as_str().to_owned();
        let writer = self.writer.clone();
        let gone: Vec<String> = self
            .db
            .run(move |c| {
                let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(sql_err)?;
                let ids = {
                    let mut st = tx
                        .prepare_cached(
                            "SELECT id FROM search_docs WHERE tenant = ?1 AND scope = ?2 AND doc = ?3 AND updated_at < ?4",
                        )
                        .map_err(sql_err)?;
                    let rows = st.query_map(params![t, s, d, than.0], |r| r.get::<_, String>(0)).map_err(sql_err)?;
                    rows.collect::<std::result::Result<Vec<_>, _>>().map_err(sql_err)?
                };
                if !ids.is_empty() {
                    tx.execute(
                        "DELETE FROM search_docs WHERE tenant = ?1 AND scope = ?2 AND doc = ?3 AND updated_at < ?4",
                        params![t, s, d, than.0],
                    )
                    .map_err(sql_err)?;
                    log_changes(&tx, &writer, &t, &s, std::slice::from_ref(&d))?;
                }
                tx.commit().map_err(sql_err)?;
                Ok(ids)
            })
            .await?;
        let mut p = part.index.write().await;
        for id in &gone {
            if let Some(&slot) = p.by_id.get(id.as_str()) {
                p.remove_slot(slot);
            }
        }
        Ok(gone.len())
    }

    async fn save(&self) -> Result<usize> {
        self.save_partitions().await
    }

    async fn warm_up(&self) -> Result<usize> {
        let keys = self
            .db
            .read(|c| {
                let mut st = c.prepare_cached("SELECT DISTINCT tenant, scope FROM search_docs").map_err(sql_err)?;
                let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).map_err(sql_err)?;
                rows.collect::<std::result::Result<Vec<_>, _>>().map_err(sql_err)
            })
            .await?;
        let mut loaded = 0;
        for (t, s) in keys {
            // The global scope's rows carry no tenant: any tenant names its partition.
            let tenant = if t.is_empty() { TenantId::new("global") } else { TenantId::new(t) };
            let (Ok(tenant), Ok(scope)) = (tenant, MemoryScope::parse(&s)) else { continue };
            self.partition(&tenant, &scope).await?;
            loaded += 1;
        }
        Ok(loaded)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use ports::search::normalize;

    pub const DIM: usize = 16;

    pub fn vector(seed: u64) -> Vec<f32> {
        unit(seed, DIM)
    }

    /// A pseudo-random unit vector of `dim` numbers, the same for the same seed.
    pub fn unit(seed: u64, dim: usize) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut v: Vec<f32> = (0..dim)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                #[allow(clippy::cast_precision_loss)]
                let u = (x >> 40) as f32 / (1u64 << 24) as f32;
                u - 0.5
            })
            .collect();
        normalize(&mut v);
        v
    }

    pub fn doc(t: &TenantId, i: usize) -> SearchDoc {
        SearchDoc {
            tenant: t.clone(),
            scope: MemoryScope::Org,
            id: Id::new(format!("d{i}~0")).unwrap(),
            doc: Id::new(format!("d{i}")).unwrap(),
            kind: DocKind::Memory,
            title: format!("memory {i}"),
            text: format!("text of memory {i}"),
            vector: vector(i as u64),
            embedder: "e".into(),
            updated_at: Timestamp(0),
            occurred_at: None,
        }
    }

    pub fn nearest(t: &TenantId, v: Vec<f32>) -> SearchQuery {
        SearchQuery {
            tenant: t.clone(),
            scopes: vec![MemoryScope::Org],
            kind: None,
            text: "anything".into(),
            vector: Some(v),
            embedder: "e".into(),
            mode: SearchMode::Vector,
            k: 3,
            since: None,
            until: None,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reloaded_partition_answers_at_once_and_builds_its_graph_in_the_background() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("search.db")).unwrap();
        let t = TenantId::new("t1").unwrap();
        let n = EXACT_MAX + 400;
        let docs: Vec<SearchDoc> = (0..n).map(|i| doc(&t, i)).collect();
        let index = SqliteSearch::new(db.clone(), "e", DIM);
        index.upsert(&docs).await.unwrap();
        assert!(index.graph_ready(&t, &MemoryScope::Org).await, "a partition that grows past the exact limit builds its graph");

        // A restart: nothing loaded; the first query loads the rows and answers (by an
        // exact scan while the graph is built).
        let reopened = SqliteSearch::new(db, "e", DIM);
        assert!(!reopened.graph_ready(&t, &MemoryScope::Org).await);
        let hits = reopened.search(&nearest(&t, docs[7].vector.clone())).await.unwrap();
        assert_eq!(hits[0].doc.as_str(), "d7");
        // Written while the graph may still be building: it must be in the graph too.
        reopened.upsert(&[doc(&t, n)]).await.unwrap();
        reopened.remove(&t, &MemoryScope::Org, &Id::new("d9").unwrap()).await.unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        while !reopened.graph_ready(&t, &MemoryScope::Org).await {
            assert!(std::time::Instant::now() < deadline, "the graph was never built");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        for i in [7, 1_000, n] {
            let hits = reopened.search(&nearest(&t, vector(i as u64))).await.unwrap();
            assert_eq!(hits[0].doc.as_str(), format!("d{i}"), "memory {i} is its own nearest neighbour on the graph");
        }
        let hits = reopened.search(&nearest(&t, vector(9))).await.unwrap();
        assert!(hits.iter().all(|h| h.doc.as_str() != "d9"), "a removed memory stays out");
    }

    /// After a restart, `warm_up` loads every partition (global included) before any
    /// query asks, and their graphs build in the background.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn warm_up_loads_every_partition_ahead_of_the_first_query() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("search.db")).unwrap();
        let (t1, t2) = (TenantId::new("t1").unwrap(), TenantId::new("t2").unwrap());
        let index = SqliteSearch::new(db.clone(), "e", DIM);
        let mut docs: Vec<SearchDoc> = (0..EXACT_MAX + 10).map(|i| doc(&t1, i)).collect();
        docs.push(SearchDoc { tenant: t2.clone(), scope: MemoryScope::Team("core".into()), ..doc(&t2, 1) });
        docs.push(SearchDoc { scope: MemoryScope::Global, ..doc(&t2, 2) });
        index.upsert(&docs).await.unwrap();

        let reopened = SqliteSearch::new(db, "e", DIM);
        assert_eq!(reopened.partitions.lock().unwrap().len(), 0);
        assert_eq!(reopened.warm_up().await.unwrap(), 3);
        let loaded = |tenant: &TenantId, scope: &MemoryScope| {
            reopened.partitions.lock().unwrap().get(&key(tenant, scope)).is_some_and(|c| c.get().is_some())
        };
        assert!(loaded(&t1, &MemoryScope::Org) && loaded(&t2, &MemoryScope::Team("core".into())));
        assert!(loaded(&t1, &MemoryScope::Global), "global is one partition for every tenant");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        while !reopened.graph_ready(&t1, &MemoryScope::Org).await {
            assert!(std::time::Instant::now() < deadline, "the graph was never built");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let hits = reopened.search(&nearest(&t1, docs[5].vector.clone())).await.unwrap();
        assert_eq!(hits[0].doc.as_str(), "d5");
    }
}
