//! The search index and the embedder (SPEC §5.4): hybrid search over memory and the
//! knowledge base — BM25 keyword results and vector (cosine) results fused by
//! Reciprocal Rank Fusion, exact identifiers first.
//!
//! Isolation (wall 6): a [`SearchQuery`] names the tenant and the exact scopes the caller
//! may read; adapters keep documents in partitions per `(tenant, scope)` (or filter on
//! both before the index is traversed) and never look outside them. `global` is the one
//! scope shared by every tenant: its documents live in one tenant-less partition.
//!
//! The fusion rules live here, once, so both adapters rank alike: [`fuse`] takes the
//! keyword and vector lists (best first) and returns the fused list.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use domain::memory::MemoryScope;
use domain::{Error, Id, Result, TenantId, Timestamp};
use serde::{Deserialize, Serialize};

/// RRF's constant: `score = Σ 1 / (RRF_K + rank)` over the lists a document is in.
pub const RRF_K: f64 = 60.0;
/// Weight of a keyword hit that does not hold the query's identifiers, in hybrid
/// fusion (weighted RRF). Words shared with a question are weaker evidence than meaning
/// for natural-language queries; an exact identifier is decisive and keeps full weight
/// (and is promoted). Measured on the shipped corpus: equal weights 0.857 nDCG@10,
/// half weight 0.913 (vector alone 0.724, BM25 alone 0.733; with the local MiniLM model).
pub const KEYWORD_WEIGHT: f64 = 0.5;
/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 512;
/// Most hits one query returns.
pub const MAX_HITS: usize = 100;

/// What an indexed document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    /// A memory entry (org, personal, team, project…).
    Memory,
    /// A chunk of a knowledge-base document.
    Kb,
}

impl DocKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Kb => "kb",
        }
    }

    /// # Errors
    /// `INVALID_REQUEST` for anything but `memory` or `kb`.
    pub fn parse(raw: &str) -> Result<Self> {
        match raw {
            "memory" => Ok(Self::Memory),
            "kb" => Ok(Self::Kb),
            _ => Err(Error::invalid_field("kind", "expected memory or kb")),
        }
    }
}

/// One indexed chunk. `id` is unique within `(tenant, scope)`; `doc` is the record it
/// was cut from (a memory entry or a KB document), so hits can be folded per record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchDoc {
    pub tenant: TenantId,
    pub scope: MemoryScope,
    pub id: Id,
    pub doc: Id,
    pub kind: DocKind,
    pub title: String,
    pub text: String,
    /// Unit-length embedding of `title` + `text` by [`SearchDoc::embedder`].
    pub vector: Vec<f32>,
    /// The embedder's name: vectors of different embedders are never compared.
    pub embedder: String,
    pub updated_at: Timestamp,
}

/// Which of the two retrievers to use. Hybrid is the product; the single modes exist to
/// measure it (the retrieval-quality test compares all three).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    #[default]
    Hybrid,
    Keyword,
    Vector,
}

/// A query, already confined to what the caller may read.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    pub tenant: TenantId,
    /// The scopes to search: each one readable by the caller (checked by the service).
    pub scopes: Vec<MemoryScope>,
    /// Only documents of this kind, when set.
    pub kind: Option<DocKind>,
    pub text: String,
    /// The query's embedding (same embedder as the documents); `None` for keyword mode.
    pub vector: Option<Vec<f32>>,
    pub embedder: String,
    pub mode: SearchMode,
    pub k: usize,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    pub scope: MemoryScope,
    pub id: Id,
    pub doc: Id,
    pub kind: DocKind,
    pub title: String,
    pub text: String,
    /// The fused RRF score (or the single retriever's, in a single mode).
    pub score: f64,
    /// Cosine similarity of the document to the query, when the vector retriever ran.
    pub similarity: Option<f32>,
    /// 1-based ranks in each retriever's list, when present there.
    pub keyword_rank: Option<u32>,
    pub vector_rank: Option<u32>,
    /// Whether an identifier in the query appears verbatim in the document.
    pub exact: bool,
}

/// The search index port.
#[async_trait]
pub trait SearchIndex: Send + Sync {
    /// `sqlite`, `opensearch`, or `none` ([`NoIndex`]).
    fn name(&self) -> &'static str;

    /// Adds or replaces chunks (by `(tenant, scope, id)`). Durable when it returns.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be written; `INVALID_REQUEST` for a vector
    /// of the wrong dimension.
    async fn upsert(&self, docs: &[SearchDoc]) -> Result<()>;

    /// Removes every chunk of record `doc` in `(tenant, scope)`; removing nothing is fine.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be written.
    async fn remove(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id) -> Result<()>;

    /// Searches only `query.scopes` of `query.tenant`; best first, at most `query.k`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for an unusable query (see [`check_query`]); `UNAVAILABLE`
    /// when the index cannot be read.
    async fn search(&self, query: &SearchQuery) -> Result<Vec<SearchHit>>;

    /// The record ids indexed in `(tenant, scope)` (for the reindex job), at most `max`.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be read.
    async fn doc_ids(&self, tenant: &TenantId, scope: &MemoryScope, max: usize) -> Result<Vec<Id>>;
}

/// The index of a deployment that has none (an AWS stack without an OpenSearch
/// endpoint, as in the moto tests): writes are skipped, searches answer `UNAVAILABLE`,
/// and the services fall back to a keyword scan of the store, saying so.
pub struct NoIndex;

#[async_trait]
impl SearchIndex for NoIndex {
    fn name(&self) -> &'static str {
        "none"
    }
    async fn upsert(&self, _: &[SearchDoc]) -> Result<()> {
        Ok(())
    }
    async fn remove(&self, _: &TenantId, _: &MemoryScope, _: &Id) -> Result<()> {
        Ok(())
    }
    async fn search(&self, _: &SearchQuery) -> Result<Vec<SearchHit>> {
        Err(Error::unavailable("no search index is configured"))
    }
    async fn doc_ids(&self, _: &TenantId, _: &MemoryScope, _: usize) -> Result<Vec<Id>> {
        Ok(Vec::new())
    }
}

/// Turns text into unit-length vectors.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// Names the model (and whether it is semantic), e.g. `all-MiniLM-L6-v2` or
    /// `hashing-384 (lexical)`; stored beside each vector.
    fn name(&self) -> &str;
    fn dim(&self) -> usize;

    /// One unit-length vector of [`Embedder::dim`] numbers per text, in order.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the model cannot run (a remote model unreachable).
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>>;
}

/// Refuses queries no retriever can answer sensibly: empty, over
/// [`MAX_QUERY_BYTES`], or carrying control characters. Everything else (quotes,
/// operators, brackets) is plain text to both retrievers.
///
/// # Errors
/// `INVALID_REQUEST` naming the field `query`.
pub fn check_query(text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::invalid_field("query", "must not be empty"));
    }
    if text.len() > MAX_QUERY_BYTES {
        return Err(Error::invalid_field("query", format!("at most {MAX_QUERY_BYTES} bytes")));
    }
    if text.chars().any(|c| c.is_control() && c != '\t' && c != '\n') {
        return Err(Error::invalid_field("query", "must not contain control characters"));
    }
    Ok(())
}

/// The words of a text as both retrievers' keyword side sees them: lower-cased runs of
/// letters and digits, plus each compound identifier whole (`proj-142`,
/// `get_user_by_id`, `v2.3`) so an exact identifier is one token.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))) {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        if word.is_empty() {
            continue;
        }
        let lower = word.to_lowercase();
        let parts: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).filter(|p| !p.is_empty()).collect();
        if parts.len() > 1 {
            out.push(lower.clone());
        }
        out.extend(parts.into_iter().map(str::to_owned));
    }
    out
}

/// The identifiers of a query: words with a digit, an underscore, an inner `-`, `.` or
/// `:`, or an inner capital (`getUser`), lower-cased.
pub fn identifiers(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| w.len() >= 3)
        .filter(|w| {
            w.chars().any(|c| c.is_ascii_digit() || matches!(c, '_' | '-' | '.' | ':'))
                || w.chars().skip(1).any(char::is_uppercase) && w.chars().any(char::is_lowercase)
        })
        .map(str::to_lowercase)
        .collect()
}

/// Whether every identifier appears as a whole token of `title`, `text` or the id.
pub fn has_identifiers(ids: &[String], id: &str, title: &str, text: &str) -> bool {
    if ids.is_empty() {
        return false;
    }
    let mut have: HashSet<String> = tokens(title).into_iter().chain(tokens(text)).collect();
    have.insert(id.to_lowercase());
    ids.iter().all(|i| have.contains(i))
}

/// One candidate of a retriever's list: the chunk, its raw score, and whether it holds
/// the query's identifiers verbatim.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub hit: SearchHit,
    pub raw: f64,
}

/// Fuses the keyword and vector lists (each best first) with weighted Reciprocal Rank
/// Fusion (see [`KEYWORD_WEIGHT`]).
/// Chunks holding every identifier of the query come first (exact identifiers must rank
/// first, SPEC §5.4), then the rest by fused score; ties by id so results are stable.
/// Keeps the best chunk of each record and at most `k` records.
pub fn fuse(mode: SearchMode, keyword: Vec<Candidate>, vector: Vec<Candidate>, k: usize) -> Vec<SearchHit> {
    let mut merged: HashMap<(String, String), SearchHit> = HashMap::new();
    let lists = match mode {
        SearchMode::Hybrid => vec![(true, keyword), (false, vector)],
        SearchMode::Keyword => vec![(true, keyword)],
        SearchMode::Vector => vec![(false, vector)],
    };
    for (is_keyword, list) in lists {
        for (i, c) in list.into_iter().enumerate() {
            let rank = u32::try_from(i + 1).unwrap_or(u32::MAX);
            let w = if is_keyword && mode == SearchMode::Hybrid && !c.hit.exact { KEYWORD_WEIGHT } else { 1.0 };
            let contribution = w / (RRF_K + f64::from(rank));
            let key = (c.hit.scope.storage_key(), c.hit.id.as_str().to_owned());
            let entry = merged.entry(key).or_insert_with(|| SearchHit { score: 0.0, ..c.hit.clone() });
            entry.score += contribution;
            entry.exact |= c.hit.exact;
            if is_keyword {
                entry.keyword_rank = Some(rank);
            } else {
                entry.vector_rank = Some(rank);
                entry.similarity = c.hit.similarity;
            }
        }
    }
    let mut hits: Vec<SearchHit> = merged.into_values().collect();
    // Exact identifiers are promoted in hybrid search only: the single modes exist to
    // measure one retriever alone.
    let promote = mode == SearchMode::Hybrid;
    hits.sort_by(|a, b| {
        (promote && b.exact)
            .cmp(&(promote && a.exact))
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| a.scope.cmp(&b.scope))
            .then_with(|| a.id.as_str().cmp(b.id.as_str()))
    });
    let mut seen = HashSet::new();
    hits.retain(|h| seen.insert((h.scope.storage_key(), h.doc.as_str().to_owned())));
    hits.truncate(k);
    hits
}

/// The dependency-free fallback embedder: feature hashing of words, identifier parts
/// and character trigrams into `dim` signed buckets. It is **lexical** — it finds shared
/// words and spellings, not meaning — and says so in its name.
pub struct HashingEmbedder {
    dim: usize,
    name: String,
}

impl HashingEmbedder {
    pub fn new(dim: usize) -> Self {
        Self { dim: dim.max(8), name: format!("hashing-{} (lexical)", dim.max(8)) }
    }

    /// The vector of one text.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dim];
        let mut add = |feature: &str, weight: f32| {
            // FNV-1a: stable across runs and platforms.
            let h = feature.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
            #[allow(clippy::cast_possible_truncation)]
            let i = (h % self.dim as u64) as usize;
            v[i] += if h >> 63 == 0 { weight } else { -weight };
        };
        for t in tokens(text) {
            add(&t, 1.0);
            let padded: Vec<char> = format!(" {t} ").chars().collect();
            for w in padded.windows(3) {
                add(&w.iter().collect::<String>(), 0.25);
            }
        }
        normalize(&mut v);
        v
    }
}

#[async_trait]
impl Embedder for HashingEmbedder {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.dim
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }
}

/// Dot product of two equal-length vectors (cosine for unit vectors).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent sums, so the compiler can keep them in one SIMD register.
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 {
        for x in v.iter_mut() {
            *x /= norm;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: &str, exact: bool) -> Candidate {
        Candidate {
            hit: SearchHit {
                scope: MemoryScope::Org,
                id: Id::new(id).unwrap(),
                doc: Id::new(id).unwrap(),
                kind: DocKind::Memory,
                title: id.into(),
                text: String::new(),
                score: 0.0,
                similarity: Some(0.5),
                keyword_rank: None,
                vector_rank: None,
                exact,
            },
            raw: 1.0,
        }
    }

    #[test]
    fn tokens_keep_identifiers_whole_and_split() {
        assert_eq!(
            tokens("Fix PROJ-142 in get_user_by_id, v2.3!"),
            ["fix", "proj-142", "proj", "142", "in", "get_user_by_id", "get", "user", "by", "id", "v2.3", "v2", "3"]
        );
        assert!(tokens("\"((*))\" AND OR NOT:").iter().all(|t| t.chars().all(char::is_alphanumeric)));
        assert_eq!(identifiers("where is PROJ-142 and getUserById or plain words"), ["proj-142", "getuserbyid"]);
    }

    #[test]
    fn rrf_sums_ranks_and_exact_identifiers_come_first() {
        // b is first in both lists; a holds the identifier and is only third by keywords.
        let kw = vec![hit("b", false), hit("c", false), hit("a", true)];
        let vec = vec![hit("b", false), hit("c", false)];
        let fused = fuse(SearchMode::Hybrid, kw, vec, 10);
        let ids: Vec<&str> = fused.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert!((fused[1].score - (KEYWORD_WEIGHT + 1.0) / 61.0).abs() < 1e-12);
        assert_eq!((fused[1].keyword_rank, fused[1].vector_rank), (Some(1), Some(1)));
        assert_eq!(fuse(SearchMode::Vector, vec![hit("x", false)], vec![hit("y", false)], 10)[0].id.as_str(), "y");
    }

    #[test]
    fn hashing_embedder_is_unit_length_and_lexical() {
        let e = HashingEmbedder::new(384);
        let a = e.vector("refund policy for enterprise customers");
        let b = e.vector("enterprise refund policy");
        let c = e.vector("kubernetes cluster autoscaling");
        assert!((dot(&a, &a) - 1.0).abs() < 1e-5);
        assert!(dot(&a, &b) > dot(&a, &c) + 0.3);
        assert!(e.name().contains("lexical"));
    }

    #[test]
    fn hostile_queries_are_refused_or_plain_text() {
        assert!(check_query("   ").is_err());
        assert!(check_query(&"a".repeat(MAX_QUERY_BYTES + 1)).is_err());
        assert!(check_query("bell\u{7}").is_err());
        assert!(check_query("\"unbalanced (quote* NEAR/3 -x").is_ok());
    }
}
