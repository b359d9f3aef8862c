//! [`S3VectorsIndex`]: hybrid search with nothing running when nobody searches — the
//! search index of the stack's `small` profile (docs/aws.md, "Deployment profiles").
//!
//! - **Keywords and chunks** in a DynamoDB table (on-demand: no charge at rest but
//!   storage): postings per term and Okapi BM25 scored here ([`keywords`]), with the
//!   embedded index's analysis and formula.
//! - **Vectors** in Amazon S3 Vectors ([`client`]): one vector index per tenant, so a
//!   query traverses its own tenant's vectors only.
//! - **Fusion** here, by `ports::search::fuse`, as on the other two backends.
//!
//! Both stores read their writes at once (DynamoDB reads are strongly consistent, S3
//! Vectors writes are), so [`SearchIndex::visible_after`] is zero and writes are read
//! back on the request path as on the embedded backend.
//!
//! There is no local S3 Vectors with `QueryVectors` (moto has the rest): the tests run
//! the keyword leg on moto's DynamoDB and assert the exact S3 Vectors requests against
//! an in-process stand-in that answers them (`tests/support/s3vectors.rs`).

pub mod client;
pub mod keywords;

use std::collections::HashMap;

use async_trait::async_trait;
use domain::memory::MemoryScope;
use domain::{Error, Id, Result, TenantId, Timestamp};
use ports::search::{
    Candidate, Fusion, SearchDoc, SearchHit, SearchIndex, SearchMode, SearchQuery, check_query, fuse, has_identifiers,
    identifiers,
};
use serde_json::{Value, json};

pub use client::VectorStore;
pub use keywords::Keywords;

use keywords::Chunk;

/// How deep each retriever's list goes before fusion (as on the other backends).
const DEPTH: usize = 50;
/// Chunks written to the keyword table at once.
const PARALLEL_PUTS: usize = 8;

/// A vector as JSON numbers in their shortest form (see the OpenSearch adapter).
fn wire(v: &[f32]) -> Vec<f64> {
    v.iter().map(|x| x.to_string().parse::<f64>().unwrap_or(f64::from(*x))).collect()
}

/// The S3 Vectors + DynamoDB adapter of the search port.
#[derive(Clone)]
pub struct S3VectorsIndex {
    keywords: Keywords,
    vectors: VectorStore,
    embedder: String,
}

/// The vector index of a scope of `tenant`.
fn index_of(tenant: &TenantId, scope: &MemoryScope, dim: usize) -> String {
    client::index_name((scope != &MemoryScope::Global).then_some(tenant), dim)
}

/// A vector's key in its index: the scope and the chunk (`{scope}#{doc}/{id}`; ids hold
/// neither `#` nor `/`).
fn vector_key(scope: &MemoryScope, doc: &Id, id: &Id) -> String {
    format!("{}#{}/{}", scope.storage_key(), doc.as_str(), id.as_str())
}

fn hit(scope: &MemoryScope, c: &Chunk, ids: &[String]) -> SearchHit {
    SearchHit {
        scope: scope.clone(),
        id: c.id.clone(),
        doc: c.doc.clone(),
        kind: c.kind,
        title: c.title.clone(),
        text: c.text.clone(),
        score: 0.0,
        similarity: None,
        keyword_rank: None,
        vector_rank: None,
        exact: has_identifiers(ids, c.doc.as_str(), &c.title, &c.text),
        occurred_at: c.occurred_at,
    }
}

impl S3VectorsIndex {
    /// The index over `keywords` (the search table) and `vectors` (the vector bucket),
    /// holding vectors of `embedder`.
    pub fn new(keywords: Keywords, vectors: VectorStore, embedder: &str) -> Self {
        Self { keywords, vectors, embedder: embedder.to_owned() }
    }

    /// The vector leg: each index the scopes live in, filtered to them (and to the
    /// query's kind and time window) by the service.
    async fn nearest(&self, q: &SearchQuery, v: &[f32]) -> Result<Vec<(MemoryScope, String, f64)>> {
        let mut by_index: HashMap<String, Vec<&MemoryScope>> = HashMap::new();
        for s in &q.scopes {
            by_index.entry(index_of(&q.tenant, s, self.vectors.dim())).or_default().push(s);
        }
        let mut out = Vec::new();
        for (index, scopes) in by_index {
            let mut all = vec![json!({"p": {"$in": scopes.iter().map(|s| s.storage_key()).collect::<Vec<_>>()}})];
            if let Some(k) = q.kind {
                all.push(json!({"k": {"$eq": k.as_str()}}));
            }
            if let Some(s) = q.since {
                all.push(json!({"at": {"$gte": s.0}}));
            }
            if let Some(u) = q.until {
                all.push(json!({"at": {"$lt": u.0}}));
            }
            let filter = if all.len() == 1 { all.remove(0) } else { json!({"$and": all}) };
            for found in self.vectors.query(&index, v, DEPTH, Some(filter)).await? {
                let (Some(p), Some(c)) = (found.metadata["p"].as_str(), found.metadata["c"].as_str()) else { continue };
                // Only what was asked for, whatever the service returned.
                let Some(scope) = scopes.iter().find(|s| s.storage_key() == p) else { continue };
                out.push(((*scope).clone(), c.to_owned(), 1.0 - found.distance));
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl SearchIndex for S3VectorsIndex {
    fn name(&self) -> &'static str {
        "s3vectors"
    }

    async fn upsert(&self, docs: &[SearchDoc]) -> Result<()> {
        let dim = self.vectors.dim();
        if let Some(d) = docs.iter().find(|d| d.embedder == self.embedder && d.vector.len() != dim) {
            return Err(Error::invalid(format!("vector of {} dimensions for an index of {dim}", d.vector.len())));
        }
        let mut puts: HashMap<String, Vec<Value>> = HashMap::new();
        let mut deletes: HashMap<String, Vec<String>> = HashMap::new();
        // Chunks are committed each on its own (a conditional put, then an atomic add to
        // the partition's counters), so several go at once.
        for group in docs.chunks(PARALLEL_PUTS) {
            let mut puts = tokio::task::JoinSet::new();
            for d in group {
                let (keywords, d) = (self.keywords.clone(), d.clone());
                puts.spawn(async move { keywords.put(&d).await });
            }
            while let Some(done) = puts.join_next().await {
                done.map_err(|e| Error::internal(format!("keyword write: {e}")))??;
            }
        }
        for d in docs {
            let index = index_of(&d.tenant, &d.scope, dim);
            let key = vector_key(&d.scope, &d.doc, &d.id);
            if d.embedder == self.embedder && !d.vector.is_empty() {
                let metadata = json!({
                    "p": d.scope.storage_key(),
                    "k": d.kind.as_str(),
                    "at": d.happened_at().0,
                    "c": format!("{}/{}", d.doc.as_str(), d.id.as_str()),
                });
                puts.entry(index)
                    .or_default()
                    .push(json!({"key": key, "data": {"float32": wire(&d.vector)}, "metadata": metadata}));
            } else {
                // No vector for this version: the last version's must not answer for it.
                deletes.entry(index).or_default().push(key);
            }
        }
        for (index, vectors) in puts {
            self.vectors.put(&index, vectors).await?;
        }
        for (index, keys) in deletes {
            self.vectors.delete(&index, keys).await?;
        }
        Ok(())
    }

    async fn remove(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id) -> Result<()> {
        let removed = self.keywords.remove_where(tenant, scope, doc, |_| true).await?;
        let keys: Vec<String> = removed.iter().map(|c| vector_key(scope, doc, &c.id)).collect();
        if !keys.is_empty() {
            self.vectors.delete(&index_of(tenant, scope, self.vectors.dim()), keys).await?;
        }
        Ok(())
    }

    async fn search(&self, q: &SearchQuery) -> Result<Vec<SearchHit>> {
        check_query(&q.text)?;
        let ids = identifiers(&q.text);
        let k = q.k.clamp(1, ports::search::MAX_HITS);
        // Keyword lists per scope, merged by coverage (raw BM25 of partitions with other
        // statistics do not compare), as on embedded.
        let mut keyword: Vec<(MemoryScope, keywords::Scored)> = Vec::new();
        if q.mode != SearchMode::Vector {
            for scope in &q.scopes {
                keyword.extend(self.keywords.search(q, scope, DEPTH).await?.into_iter().map(|s| (scope.clone(), s)));
            }
            keyword.sort_by(|a, b| b.1.coverage.unwrap_or(0.0).total_cmp(&a.1.coverage.unwrap_or(0.0)));
            keyword.truncate(DEPTH);
        }
        let mut vector: Vec<(MemoryScope, String, f64)> = Vec::new();
        if q.mode != SearchMode::Keyword
            && let Some(v) = q.vector.as_deref().filter(|v| v.len() == self.vectors.dim() && q.embedder == self.embedder)
        {
            vector = self.nearest(q, v).await?;
            vector.sort_by(|a, b| b.2.total_cmp(&a.2));
            vector.truncate(DEPTH);
        }
        // Read each candidate's chunk once (per scope, at once); a keyword candidate whose
        // postings are of another version than its chunk is left out.
        let mut wanted: HashMap<MemoryScope, Vec<(String, Option<u64>)>> = HashMap::new();
        for (scope, s) in &keyword {
            wanted.entry(scope.clone()).or_default().push((s.key.clone(), Some(s.version)));
        }
        for (scope, key, _) in &vector {
            let list = wanted.entry(scope.clone()).or_default();
            if !list.iter().any(|(k, _)| k == key) {
                list.push((key.clone(), None));
            }
        }
        let mut chunks: HashMap<(MemoryScope, String), Chunk> = HashMap::new();
        for (scope, keys) in wanted {
            for c in self.keywords.read(&q.tenant, &scope, keys).await? {
                chunks.insert((scope.clone(), format!("{}/{}", c.doc.as_str(), c.id.as_str())), c);
            }
        }
        let keep = |c: &Chunk| q.kind.is_none_or(|k| c.kind == k) && q.in_window(c.occurred_at.unwrap_or(c.updated_at));
        let keyword: Vec<Candidate> = keyword
            .into_iter()
            .filter_map(|(scope, s)| {
                let c = chunks.get(&(scope.clone(), s.key)).filter(|c| keep(c))?;
                Some(Candidate { hit: hit(&scope, c, &ids), raw: s.score, coverage: s.coverage })
            })
            .collect();
        let vector: Vec<Candidate> = vector
            .into_iter()
            .filter_map(|(scope, key, sim)| {
                let c = chunks.get(&(scope.clone(), key)).filter(|c| keep(c))?;
                let mut h = hit(&scope, c, &ids);
                #[allow(clippy::cast_possible_truncation)]
                let similarity = sim as f32;
                h.similarity = Some(similarity);
                Some(Candidate { hit: h, raw: sim, coverage: None })
            })
            .collect();
        Ok(fuse(q.mode, keyword, vector, k, Fusion::for_embedder(&q.embedder)))
    }

    async fn doc_ids(&self, tenant: &TenantId, scope: &MemoryScope, max: usize) -> Result<Vec<Id>> {
        self.keywords.doc_ids(tenant, scope, max).await
    }

    /// Zero: DynamoDB's strongly consistent reads and S3 Vectors' strongly consistent
    /// writes see a write as soon as it returns.
    fn visible_after(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    async fn chunks(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id) -> Result<Vec<SearchDoc>> {
        let stored = self.keywords.chunks_of(tenant, scope, doc).await?;
        let keys: Vec<String> = stored.iter().map(|(_, c)| vector_key(scope, doc, &c.id)).collect();
        let mut vectors: HashMap<String, Vec<f32>> = if keys.is_empty() {
            HashMap::new()
        } else {
            self.vectors.get(&index_of(tenant, scope, self.vectors.dim()), keys).await?.into_iter().collect()
        };
        Ok(stored
            .into_iter()
            .map(|(_, c)| {
                let vector = vectors.remove(&vector_key(scope, doc, &c.id)).unwrap_or_default();
                SearchDoc {
                    tenant: tenant.clone(),
                    scope: scope.clone(),
                    id: c.id,
                    doc: c.doc,
                    kind: c.kind,
                    title: c.title,
                    text: c.text,
                    embedder: c.embedder,
                    vector,
                    updated_at: c.updated_at,
                    occurred_at: c.occurred_at,
                }
            })
            .collect())
    }

    async fn remove_older(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id, than: Timestamp) -> Result<usize> {
        let removed = self.keywords.remove_where(tenant, scope, doc, |c| c.updated_at < than).await?;
        let keys: Vec<String> = removed.iter().map(|c| vector_key(scope, doc, &c.id)).collect();
        let n = keys.len();
        if n > 0 {
            self.vectors.delete(&index_of(tenant, scope, self.vectors.dim()), keys).await?;
        }
        Ok(n)
    }

    /// Nothing is kept in this process.
    async fn warm_up(&self) -> Result<usize> {
        Ok(0)
    }
}
