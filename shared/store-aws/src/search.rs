//! [`OpenSearchIndex`]: the search index on OpenSearch (a Serverless vector-search
//! collection, SigV4 service `aoss`; a managed domain works with service `es`).
//!
//! One index holds every tenant's chunks. Each chunk carries a `partition` keyword,
//! `{tenant}/{scope}` (`/global` for the shared scope), and **every** query filters on
//! the caller's partitions inside the query itself — a `bool` filter for BM25 and the
//! k-NN query's own `filter` (applied while the graph is searched) for vectors — so no
//! other tenant's or project's chunk can be scored. Hits are checked against the
//! requested partitions again before they are returned.
//!
//! Hybrid search is two requests (a BM25 `multi_match` and a `knn` query) fused here by
//! [`ports::search::fuse`], the same fusion the embedded index uses, so both backends
//! rank alike and no search pipeline has to be provisioned. The text fields use the
//! `english` analyser (stemming, as the embedded index's Snowball stemmer) and the query
//! is sent without question words ([`ports::search::query_text`]); a date it names is
//! searched as a `term` on the chunk's `day` (its [`ports::search::doc_days`]) beside
//! the words, as the other indexes count it. One difference:
//! OpenSearch does not return a query's idf sum, so keyword scores are scaled by the
//! list's best rather than by the query's full coverage. An index created before the
//! analyser was set keeps the standard one until it is recreated and reindexed; one
//! created before the `day` field gets the field added to its mapping on first use (its
//! older chunks have no days until they are reindexed).
//!
//! There is no local OpenSearch: the tests assert the exact requests against an
//! in-process HTTP server answering recorded OpenSearch responses.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use domain::memory::MemoryScope;
use domain::{Error, Id, Result, TenantId, Timestamp};
use ports::search::{
    Candidate, DocKind, Fusion, SearchDoc, SearchHit, SearchIndex, SearchMode, SearchQuery, check_query, doc_days, fuse,
    has_identifiers, identifiers, query_dates, query_text,
};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::signed::SignedHttp;

/// How deep each retriever's list goes before fusion (as on embedded).
const DEPTH: usize = 50;
/// Chunks per page when listing a partition's documents.
const DOC_ID_PAGE: usize = 1000;
const SOURCE: [&str; 8] = ["partition", "chunk", "doc", "kind", "title", "text", "updated_at", "occurred_at"];
/// Most chunks one record's key lookup returns: [`MAX_CHUNKS`] and as many twins.
const DOC_CHUNKS: usize = 1000;

/// The OpenSearch adapter of the search port.
#[derive(Debug, Clone)]
pub struct OpenSearchIndex {
    http: SignedHttp,
    index: String,
    embedder: String,
    dim: usize,
    visible_after: Duration,
    ready: std::sync::Arc<OnceCell<()>>,
}

/// `{tenant}/{scope}`; the shared `global` scope has no tenant.
pub fn partition(tenant: &TenantId, scope: &MemoryScope) -> String {
    match scope {
        MemoryScope::Global => "/global".to_owned(),
        _ => format!("{}/{}", tenant.as_str(), scope.storage_key()),
    }
}

/// A vector as JSON numbers in their shortest form: an `f32` widened to `f64` would
/// print 17 digits (0.6 → 0.6000000238418579) and triple the bytes on the wire.
fn wire(v: &[f32]) -> Vec<f64> {
    v.iter().map(|x| x.to_string().parse::<f64>().unwrap_or(f64::from(*x))).collect()
}

impl OpenSearchIndex {
    /// The adapter for index `index` behind `http`, holding `dim`-dimension vectors of
    /// `embedder`.
    pub fn new(http: SignedHttp, index: &str, embedder: &str, dim: usize) -> Self {
        Self {
            http,
            index: index.to_owned(),
            embedder: embedder.to_owned(),
            dim,
            visible_after: crate::settings::DEFAULT_VISIBLE_AFTER,
            ready: std::sync::Arc::default(),
        }
    }

    /// The same adapter, assuming writes are seen by every search `after` they return
    /// (the collection's refresh window).
    #[must_use]
    pub fn with_visible_after(mut self, after: Duration) -> Self {
        self.visible_after = after;
        self
    }

    /// The `_id`s (as OpenSearch assigned them) of the chunks of `doc` in `part`
    /// matching the `extra` filter too.
    async fn ids_of(&self, part: &str, doc: &Id, extra: Option<Value>) -> Result<Vec<String>> {
        let mut filter = vec![json!({"term": {"partition": part}}), json!({"term": {"doc": doc.as_str()}})];
        filter.extend(extra);
        let hits = self.query(json!({"size": DOC_CHUNKS, "_source": ["chunk"], "query": {"bool": {"filter": filter}}})).await?;
        Ok(hits.iter().filter_map(|h| h.get("_id")?.as_str().map(str::to_owned)).collect())
    }

    async fn delete_ids(&self, ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.bulk(ids.iter().map(|id| json!({"delete": {"_index": self.index, "_id": id}})).collect()).await
    }

    /// The index mapping: keywords for filters, text for BM25, a `knn_vector` (HNSW,
    /// m 16, ef_construction 64, cosine) for vectors.
    pub fn mapping(&self) -> Value {
        json!({
            "settings": {"index": {"knn": true}},
            "mappings": {"properties": {
                "partition": {"type": "keyword"},
                "chunk": {"type": "keyword"},
                "doc": {"type": "keyword"},
                "kind": {"type": "keyword"},
                "embedder": {"type": "keyword"},
                "title": {"type": "text", "analyzer": "english"},
                "text": {"type": "text", "analyzer": "english"},
                "updated_at": {"type": "date", "format": "epoch_millis"},
                "occurred_at": {"type": "date", "format": "epoch_millis"},
                "day": {"type": "keyword"},
                "vector": {"type": "knn_vector", "dimension": self.dim, "method": {
                    "name": "hnsw", "engine": "faiss", "space_type": "cosinesimil",
                    "parameters": {"m": 16, "ef_construction": 64}
                }}
            }}
        })
    }

    /// Creates the index on first use; an existing one (400 `resource_already_exists`) is fine.
    async fn ensure(&self) -> Result<()> {
        self.ready
            .get_or_try_init(|| async {
                let body = serde_json::to_vec(&self.mapping()).map_err(|e| Error::internal(e.to_string()))?;
                let (status, answer) =
                    self.http.send("PUT", &format!("/{}", self.index), "application/json", body, &[400]).await?;
                if status == 400 {
                    if answer.pointer("/error/type").and_then(Value::as_str) != Some("resource_already_exists_exception") {
                        return Err(Error::internal("opensearch refused the index mapping"));
                    }
                    // An index made by an earlier version: the fields added since are added
                    // to its mapping (the same definition again is accepted as it is).
                    let added = json!({"properties": {"day": self.mapping()["mappings"]["properties"]["day"].clone()}});
                    let body = serde_json::to_vec(&added).map_err(|e| Error::internal(e.to_string()))?;
                    let (status, _) =
                        self.http.send("PUT", &format!("/{}/_mapping", self.index), "application/json", body, &[400]).await?;
                    if status == 400 {
                        return Err(Error::internal(format!(
                            "the search index {} maps `day` otherwise than this version writes it: recreate the index and run `continuity reindex --full` for each tenant",
                            self.index
                        )));
                    }
                }
                Ok(())
            })
            .await
            .map(|_| ())
    }

    async fn bulk(&self, lines: Vec<Value>) -> Result<()> {
        let mut body = Vec::new();
        for l in lines {
            serde_json::to_writer(&mut body, &l).map_err(|e| Error::internal(e.to_string()))?;
            body.push(b'\n');
        }
        let (_, answer) = self.http.send("POST", "/_bulk", "application/x-ndjson", body, &[]).await?;
        if answer.get("errors").and_then(Value::as_bool) != Some(false) {
            let first = answer
                .get("items")
                .and_then(Value::as_array)
                .and_then(|items| items.iter().find_map(|i| i.as_object()?.values().next()?.get("error")?.get("type").cloned()));
            tracing::warn!(error = ?first, "opensearch bulk write had failures");
            return Err(Error::unavailable("the search index refused part of a write"));
        }
        Ok(())
    }

    async fn query(&self, body: Value) -> Result<Vec<Value>> {
        let body = serde_json::to_vec(&body).map_err(|e| Error::internal(e.to_string()))?;
        let (_, answer) = self.http.send("POST", &format!("/{}/_search", self.index), "application/json", body, &[]).await?;
        Ok(answer.pointer("/hits/hits").and_then(Value::as_array).cloned().unwrap_or_default())
    }

    /// The hits of one retriever as candidates, dropping anything outside `parts`.
    ///
    /// Inside the refresh window a re-indexed record can have twins (the removal before
    /// the write could not see the previous write yet): of the chunks of one record only
    /// those of its newest version (`updated_at`) count, each chunk key once. The
    /// deferred readback then removes the older ones for good.
    fn candidates(&self, hits: Vec<Value>, parts: &[(String, MemoryScope)], ids: &[String], vector: bool) -> Vec<Candidate> {
        let version = |h: &Value| h.pointer("/_source/updated_at").and_then(Value::as_i64).unwrap_or(0);
        let key = |h: &Value, k: &str| h.pointer(&format!("/_source/{k}")).and_then(Value::as_str).unwrap_or_default().to_owned();
        let mut newest: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
        for h in &hits {
            let v = newest.entry(key(h, "doc")).or_insert(i64::MIN);
            *v = (*v).max(version(h));
        }
        let mut chunks_seen = HashSet::new();
        let hits: Vec<Value> = hits
            .into_iter()
            .filter(|h| newest.get(&key(h, "doc")) == Some(&version(h)) && chunks_seen.insert(key(h, "chunk")))
            .collect();
        hits.into_iter()
            .filter_map(|h| {
                let src = h.get("_source")?;
                let part = src.get("partition")?.as_str()?;
                let Some((_, scope)) = parts.iter().find(|(p, _)| p == part) else {
                    tracing::error!("opensearch returned a chunk outside the query's partitions; dropped");
                    return None;
                };
                let s = |k: &str| src.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
                let score = h.get("_score").and_then(Value::as_f64).unwrap_or(0.0);
                let (doc, title, text) = (Id::new(s("doc")).ok()?, s("title"), s("text"));
                #[allow(clippy::cast_possible_truncation)]
                // OpenSearch's cosinesimil score is (1 + cosine) / 2.
                let similarity = vector.then_some((2.0 * score - 1.0) as f32);
                Some(Candidate {
                    hit: SearchHit {
                        scope: scope.clone(),
                        id: Id::new(s("chunk")).ok()?,
                        exact: has_identifiers(ids, doc.as_str(), &title, &text),
                        occurred_at: src.get("occurred_at").and_then(Value::as_i64).map(domain::Timestamp),
                        doc,
                        kind: DocKind::parse(&s("kind")).ok()?,
                        title,
                        text,
                        score: 0.0,
                        similarity,
                        keyword_rank: None,
                        vector_rank: None,
                    },
                    // Fusion reads a vector candidate's raw score as the cosine (its
                    // closeness scale is absolute), not OpenSearch's (1 + cosine) / 2.
                    raw: similarity.map_or(score, f64::from),
                    // OpenSearch does not return the query's idf sum: fusion scales
                    // keyword scores by the list's best instead.
                    coverage: None,
                })
            })
            .collect()
    }

    /// The filter every query carries: the caller's partitions (and the kind, and the
    /// time window on `occurred_at` — a chunk indexed before that field existed has
    /// none and is left out of windowed searches until the reindex job rewrites it).
    fn filter(parts: &[(String, MemoryScope)], q: &SearchQuery) -> Vec<Value> {
        let names: Vec<&str> = parts.iter().map(|(p, _)| p.as_str()).collect();
        let mut f = vec![json!({"terms": {"partition": names}})];
        if let Some(k) = q.kind {
            f.push(json!({"term": {"kind": k.as_str()}}));
        }
        if q.since.is_some() || q.until.is_some() {
            let mut range = serde_json::Map::new();
            if let Some(s) = q.since {
                range.insert("gte".into(), json!(s.0));
            }
            if let Some(u) = q.until {
                range.insert("lt".into(), json!(u.0));
            }
            f.push(json!({"range": {"occurred_at": range}}));
        }
        f
    }
}

#[async_trait]
impl SearchIndex for OpenSearchIndex {
    fn name(&self) -> &'static str {
        "opensearch"
    }

    async fn upsert(&self, docs: &[SearchDoc]) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        self.ensure().await?;
        let mut lines = Vec::with_capacity(docs.len() * 2);
        for d in docs {
            if d.embedder == self.embedder && d.vector.len() != self.dim {
                return Err(Error::invalid(format!("vector has {} dimensions, the index {}", d.vector.len(), self.dim)));
            }
            let part = partition(&d.tenant, &d.scope);
            // No `_id`: vector collections of OpenSearch Serverless refuse a client-supplied
            // document id on index. The service removes a record's old chunks first
            // (`remove`), so a re-index does not leave twins; `remove` deletes by the
            // ids OpenSearch assigned.
            lines.push(json!({"index": {"_index": self.index}}));
            lines.push(json!({
                "partition": part, "chunk": d.id.as_str(), "doc": d.doc.as_str(), "kind": d.kind.as_str(),
                "embedder": d.embedder, "title": d.title, "text": d.text, "updated_at": d.updated_at.0,
                "occurred_at": d.happened_at().0, "day": doc_days(&d.title, &d.text, d.happened_at()), "vector": wire(&d.vector),
            }));
        }
        self.bulk(lines).await
    }

    /// Serverless collections have no delete-by-query: the chunks are found by their
    /// keys (`partition`, `doc`) and deleted by the ids the collection assigned. A chunk
    /// written inside the refresh window is not found yet: the services sweep again with
    /// [`SearchIndex::remove_older`] once [`SearchIndex::visible_after`] has passed.
    async fn remove(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id) -> Result<()> {
        self.ensure().await?;
        let ids = self.ids_of(&partition(tenant, scope), doc, None).await?;
        self.delete_ids(&ids).await
    }

    fn visible_after(&self) -> Duration {
        self.visible_after
    }

    async fn chunks(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id) -> Result<Vec<SearchDoc>> {
        self.ensure().await?;
        let hits = self
            .query(json!({
                "size": DOC_CHUNKS, "sort": [{"chunk": "asc"}],
                "_source": ["chunk", "doc", "kind", "embedder", "title", "text", "updated_at", "occurred_at", "vector"],
                "query": {"bool": {"filter": [{"term": {"partition": partition(tenant, scope)}}, {"term": {"doc": doc.as_str()}}]}}
            }))
            .await?;
        let doc_of = |h: &Value| -> Option<SearchDoc> {
            let src = h.get("_source")?;
            let s = |k: &str| src.get(k).and_then(Value::as_str).map(str::to_owned);
            #[allow(clippy::cast_possible_truncation)]
            let vector = src.get("vector")?.as_array()?.iter().filter_map(Value::as_f64).map(|x| x as f32).collect();
            Some(SearchDoc {
                tenant: tenant.clone(),
                scope: scope.clone(),
                id: Id::new(s("chunk")?).ok()?,
                doc: Id::new(s("doc")?).ok()?,
                kind: DocKind::parse(&s("kind")?).ok()?,
                title: s("title").unwrap_or_default(),
                text: s("text").unwrap_or_default(),
                vector,
                embedder: s("embedder").unwrap_or_default(),
                updated_at: domain::Timestamp(src.get("updated_at")?.as_i64()?),
                occurred_at: src.get("occurred_at").and_then(Value::as_i64).map(domain::Timestamp),
            })
        };
        hits.iter().map(|h| doc_of(h).ok_or_else(|| Error::internal("opensearch answered a chunk without its keys"))).collect()
    }

    async fn remove_older(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id, than: Timestamp) -> Result<usize> {
        self.ensure().await?;
        let older = json!({"range": {"updated_at": {"lt": than.0}}});
        let ids = self.ids_of(&partition(tenant, scope), doc, Some(older)).await?;
        self.delete_ids(&ids).await?;
        Ok(ids.len())
    }

    async fn search(&self, q: &SearchQuery) -> Result<Vec<SearchHit>> {
        check_query(&q.text)?;
        if q.scopes.is_empty() {
            return Ok(Vec::new());
        }
        self.ensure().await?;
        let ids = identifiers(&q.text);
        let parts: Vec<(String, MemoryScope)> = q.scopes.iter().map(|s| (partition(&q.tenant, s), s.clone())).collect();
        let filter = Self::filter(&parts, q);
        let mut keyword = Vec::new();
        if q.mode != SearchMode::Vector {
            let text = query_text(&q.text);
            let words = json!({"multi_match": {"query": text, "fields": ["title^2", "text"]}});
            let (days, _) = query_dates(&q.text);
            // A date the query names is its day's term (`day`: every chunk is indexed with
            // the days it is about), found beside the words: either may match.
            let query = if days.is_empty() {
                json!({"bool": {"filter": filter, "must": [words]}})
            } else {
                let mut should = if text.is_empty() { Vec::new() } else { vec![words] };
                should.extend(days.iter().map(|d| json!({"term": {"day": d}})));
                json!({"bool": {"filter": filter, "should": should, "minimum_should_match": 1}})
            };
            let hits = self.query(json!({"size": DEPTH, "_source": SOURCE, "query": query})).await?;
            keyword = self.candidates(hits, &parts, &ids, false);
        }
        let mut vector = Vec::new();
        if q.mode != SearchMode::Keyword
            && let Some(v) = q.vector.as_ref().filter(|v| v.len() == self.dim && q.embedder == self.embedder)
        {
            let mut f = filter.clone();
            f.push(json!({"term": {"embedder": self.embedder}}));
            let hits = self
                .query(json!({
                    "size": DEPTH, "_source": SOURCE,
                    "query": {"knn": {"vector": {"vector": wire(v), "k": DEPTH, "filter": {"bool": {"filter": f}}}}}
                }))
                .await?;
            vector = self.candidates(hits, &parts, &ids, true);
        }
        Ok(fuse(q.mode, keyword, vector, q.k.clamp(1, ports::search::MAX_HITS), Fusion::for_embedder(&q.embedder)))
    }

    /// Every document of the partition, in pages of [`DOC_ID_PAGE`] chunks sorted by
    /// `(doc, chunk)` and continued with `search_after` (no 10,000-result window).
    async fn doc_ids(&self, tenant: &TenantId, scope: &MemoryScope, max: usize) -> Result<Vec<Id>> {
        self.ensure().await?;
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut after: Option<Value> = None;
        loop {
            let mut body = json!({
                "size": DOC_ID_PAGE, "_source": ["doc", "chunk"], "sort": [{"doc": "asc"}, {"chunk": "asc"}],
                "query": {"bool": {"filter": [{"term": {"partition": partition(tenant, scope)}}]}}
            });
            if let Some(a) = after.take() {
                body["search_after"] = a;
            }
            let hits = self.query(body).await?;
            let field = |h: &Value, k: &str| h.pointer(&format!("/_source/{k}")).and_then(Value::as_str).map(str::to_owned);
            for d in hits.iter().filter_map(|h| field(h, "doc")) {
                if seen.insert(d.clone())
                    && let Ok(id) = Id::new(d)
                {
                    out.push(id);
                    if out.len() >= max {
                        return Ok(out);
                    }
                }
            }
            if hits.len() < DOC_ID_PAGE {
                return Ok(out);
            }
            let last = hits.last().and_then(|h| Some(json!([field(h, "doc")?, field(h, "chunk")?])));
            match last {
                Some(a) => after = Some(a),
                None => return Err(Error::internal("opensearch answered a chunk without its doc or chunk key")),
            }
        }
    }

    /// The collection holds the index: nothing is kept in this process.
    async fn warm_up(&self) -> Result<usize> {
        Ok(0)
    }
}
