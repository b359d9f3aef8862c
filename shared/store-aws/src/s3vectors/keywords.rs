//! The keyword leg and the chunk store of [`super::S3VectorsIndex`]: Okapi BM25 over
//! postings kept in a DynamoDB table through the item port, scored as the embedded index
//! scores (`ports::search::bm25`, the same analysis), so both rank alike.
//!
//! Layout, per `(tenant, scope)` partition (the shared `global` scope under the tenant
//! `_global`, which no tenant slug can be):
//!
//! | part | sort key | body |
//! |---|---|---|
//! | `{scope}/c` | `{doc}/{id}` | the chunk: title, text, kind, times, its terms |
//! | `{scope}/t/{term}` | `{doc}/{id}` | a posting: term frequency, chunk length, kind, time, the chunk's version |
//! | `{scope}/s` | `-` | the partition's statistics: chunks, total length |
//!
//! A write puts the chunk's postings, then the chunk and the statistics in one
//! conditional transaction (the commit: retried on a concurrent change), then deletes
//! the postings of terms the chunk no longer holds. A posting counts only while its
//! version is the chunk's, so postings left by a write that failed half-way never match
//! a chunk they no longer describe; the next write or removal of the chunk, or the
//! reindex, clears them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use domain::memory::MemoryScope;
use domain::{Error, Id, Result, TenantId, Timestamp};
use ports::items::{Condition, Item, ItemStore, MAX_WRITES_PER_BATCH, Query, Write};
use ports::search::{DocKind, SearchDoc, SearchQuery, bm25, index_terms, query_terms};
use serde::{Deserialize, Serialize};

/// Postings read for one term at most: a term in more documents than this is common in
/// any partition a small team has, and is skipped when the query has a rarer one.
pub const MAX_POSTINGS: usize = 20_000;
/// Items per page when reading a part.
const PAGE: u32 = 1000;
/// Attempts at a commit that meets concurrent writers of the same partition.
const COMMIT_ATTEMPTS: usize = 12;
/// A term longer than this (bytes) is not indexed: DynamoDB's partition key holds 2 KB,
/// and no one searches for a 200-byte word.
const MAX_TERM_BYTES: usize = 200;

/// A chunk as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Chunk {
    pub id: Id,
    pub doc: Id,
    pub kind: DocKind,
    pub title: String,
    pub text: String,
    pub embedder: String,
    pub updated_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<Timestamp>,
    /// Each term with its frequency, as indexed.
    pub terms: Vec<(String, u32)>,
    pub len: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Posting {
    tf: u32,
    len: u32,
    kind: DocKind,
    /// When the chunk happened (what `since`/`until` filter on).
    at: i64,
    /// The version of the chunk item this posting was written for.
    v: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct Stats {
    docs: u64,
    total: u64,
}

/// A keyword candidate before its chunk is read: its key (`{doc}/{id}`), BM25 score
/// and coverage.
#[derive(Debug, Clone)]
pub struct Scored {
    pub key: String,
    pub score: f64,
    pub coverage: Option<f64>,
    /// The chunk version its postings were written for.
    pub version: u64,
}

/// The item tenant and scope key of a partition.
pub fn partition(tenant: &TenantId, scope: &MemoryScope) -> (String, String) {
    match scope {
        MemoryScope::Global => ("_global".to_owned(), scope.storage_key()),
        _ => (tenant.as_str().to_owned(), scope.storage_key()),
    }
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| Error::internal(format!("search item: {e}")))
}

fn decode<T: for<'de> Deserialize<'de>>(item: &Item) -> Result<T> {
    serde_json::from_slice(&item.body).map_err(|e| Error::internal(format!("search item {}/{}: {e}", item.part, item.sk)))
}

/// Term frequencies of a chunk, as the embedded index counts them (title, then text).
fn frequencies(title: &str, text: &str) -> (Vec<(String, u32)>, u32) {
    let mut all = index_terms(title);
    all.extend(index_terms(text));
    let len = u32::try_from(all.len()).unwrap_or(u32::MAX);
    let mut tf: HashMap<String, u32> = HashMap::new();
    for t in all {
        if t.len() <= MAX_TERM_BYTES {
            *tf.entry(t).or_default() += 1;
        }
    }
    let mut terms: Vec<(String, u32)> = tf.into_iter().collect();
    terms.sort();
    (terms, len)
}

/// The chunk store and keyword index over one item store (the stack's search table).
#[derive(Clone)]
pub struct Keywords {
    items: Arc<dyn ItemStore>,
}

impl Keywords {
    pub fn new(items: Arc<dyn ItemStore>) -> Self {
        Self { items }
    }

    /// Every item of a part, in pages, up to `max`; and whether more were left.
    async fn all(&self, tenant: &str, part: &str, prefix: &str, max: usize) -> Result<(Vec<Item>, bool)> {
        let mut out: Vec<Item> = Vec::new();
        loop {
            let after = out.last().map(|i| i.sk.clone());
            let (page, more) =
                self.items.query(Query { tenant, part, prefix, after: after.as_deref(), limit: PAGE, descending: false }).await?;
            out.extend(page);
            if !more {
                return Ok((out, false));
            }
            if out.len() >= max {
                out.truncate(max);
                return Ok((out, true));
            }
        }
    }

    async fn writes(&self, writes: Vec<Write>) -> Result<()> {
        let mut rest = writes;
        while !rest.is_empty() {
            let tail = rest.split_off(rest.len().min(MAX_WRITES_PER_BATCH));
            self.items.write(rest).await?;
            rest = tail;
        }
        Ok(())
    }

    /// The stored chunks of record `doc` (with their item versions).
    pub async fn chunks_of(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id) -> Result<Vec<(u64, Chunk)>> {
        let (t, s) = partition(tenant, scope);
        let (items, _) = self.all(&t, &format!("{s}/c"), &format!("{}/", doc.as_str()), usize::MAX).await?;
        items.iter().map(|i| Ok((i.version, decode::<Chunk>(i)?))).collect()
    }

    /// One chunk by its key (`{doc}/{id}`), with its item version.
    async fn chunk(&self, t: &str, s: &str, key: &str) -> Result<Option<(u64, Chunk)>> {
        match self.items.get(t, &format!("{s}/c"), key).await? {
            Some(i) => Ok(Some((i.version, decode(&i)?))),
            None => Ok(None),
        }
    }

    /// Adds or replaces one chunk.
    pub async fn put(&self, d: &SearchDoc) -> Result<()> {
        let (t, s) = partition(&d.tenant, &d.scope);
        let (terms, len) = frequencies(&d.title, &d.text);
        let chunk = Chunk {
            id: d.id.clone(),
            doc: d.doc.clone(),
            kind: d.kind,
            title: d.title.clone(),
            text: d.text.clone(),
            embedder: d.embedder.clone(),
            updated_at: d.updated_at,
            occurred_at: d.occurred_at,
            terms: terms.clone(),
            len,
        };
        let at = d.happened_at().0;
        let key = format!("{}/{}", d.doc.as_str(), d.id.as_str());
        for _ in 0..COMMIT_ATTEMPTS {
            let old = self.chunk(&t, &s, &key).await?;
            let version = old.as_ref().map_or(1, |(v, _)| v + 1);
            let postings = terms
                .iter()
                .map(|(term, tf)| {
                    let body = encode(&Posting { tf: *tf, len, kind: d.kind, at, v: version })?;
                    Ok(Write::Put {
                        item: Item { tenant: t.clone(), part: format!("{s}/t/{term}"), sk: key.clone(), version: 1, body },
                        condition: Condition::None,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            self.writes(postings).await?;
            let old_len = old.as_ref().map_or(0, |(_, c)| i64::from(c.len));
            let committed = self
                .commit(&t, &s, i64::from(old.is_none()), i64::from(len) - old_len)
                .with(Write::Put {
                    item: Item { tenant: t.clone(), part: format!("{s}/c"), sk: key.clone(), version, body: encode(&chunk)? },
                    condition: old.as_ref().map_or(Condition::Absent, |(v, _)| Condition::Version(*v)),
                })
                .run()
                .await?;
            if !committed {
                continue;
            }
            // Terms the chunk no longer holds.
            if let Some((_, before)) = old {
                let now: HashSet<&str> = terms.iter().map(|(term, _)| term.as_str()).collect();
                let stale = before
                    .terms
                    .iter()
                    .filter(|(term, _)| !now.contains(term.as_str()))
                    .map(|(term, _)| Write::Delete {
                        tenant: t.clone(),
                        part: format!("{s}/t/{term}"),
                        sk: key.clone(),
                        condition: Condition::None,
                    })
                    .collect();
                self.writes(stale).await?;
            }
            return Ok(());
        }
        Err(Error::unavailable("the search table kept changing under this write; try again"))
    }

    /// Removes the chunks of `doc` that `which` selects; returns them.
    pub async fn remove_where(
        &self,
        tenant: &TenantId,
        scope: &MemoryScope,
        doc: &Id,
        which: impl Fn(&Chunk) -> bool,
    ) -> Result<Vec<Chunk>> {
        let (t, s) = partition(tenant, scope);
        let mut removed = Vec::new();
        for (version, chunk) in self.chunks_of(tenant, scope, doc).await? {
            if !which(&chunk) {
                continue;
            }
            let mut done = false;
            for _ in 0..COMMIT_ATTEMPTS {
                let committed = self
                    .commit(&t, &s, -1, -i64::from(chunk.len))
                    .with(Write::Delete {
                        tenant: t.clone(),
                        part: format!("{s}/c"),
                        sk: format!("{}/{}", doc.as_str(), chunk.id.as_str()),
                        condition: Condition::Version(version),
                    })
                    .run()
                    .await;
                match committed {
                    Ok(true) => {
                        done = true;
                        break;
                    }
                    Ok(false) => {
                        // The chunk itself may have changed or gone: look again.
                        if self
                            .chunk(&t, &s, &format!("{}/{}", doc.as_str(), chunk.id.as_str()))
                            .await?
                            .is_none_or(|(v, _)| v != version)
                        {
                            break;
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            if !done {
                continue;
            }
            let postings = chunk
                .terms
                .iter()
                .map(|(term, _)| Write::Delete {
                    tenant: t.clone(),
                    part: format!("{s}/t/{term}"),
                    sk: format!("{}/{}", doc.as_str(), chunk.id.as_str()),
                    condition: Condition::None,
                })
                .collect();
            self.writes(postings).await?;
            removed.push(chunk);
        }
        Ok(removed)
    }

    /// A commit of the partition's statistics, changed by these chunk and length
    /// deltas, with other writes.
    fn commit<'a>(&'a self, t: &'a str, s: &'a str, docs: i64, total: i64) -> Commit<'a> {
        Commit { keywords: self, t, s, docs, total, with: Vec::new() }
    }

    async fn stats(&self, t: &str, s: &str) -> Result<(Option<u64>, Stats)> {
        match self.items.get(t, &format!("{s}/s"), "-").await? {
            Some(i) => Ok((Some(i.version), decode(&i)?)),
            None => Ok((None, Stats::default())),
        }
    }

    /// The record ids of a partition, at most `max`.
    pub async fn doc_ids(&self, tenant: &TenantId, scope: &MemoryScope, max: usize) -> Result<Vec<Id>> {
        let (t, s) = partition(tenant, scope);
        let mut out: Vec<Id> = Vec::new();
        let mut after: Option<String> = None;
        while out.len() < max {
            let (page, more) = self
                .items
                .query(Query {
                    tenant: &t,
                    part: &format!("{s}/c"),
                    prefix: "",
                    after: after.as_deref(),
                    limit: PAGE,
                    descending: false,
                })
                .await?;
            for item in &page {
                let doc = item.sk.split_once('/').map_or(item.sk.as_str(), |(d, _)| d);
                if out.last().is_none_or(|l| l.as_str() != doc) && out.len() < max {
                    out.push(Id::new(doc)?);
                }
            }
            after = page.last().map(|i| i.sk.clone());
            if !more || after.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// The best `depth` chunks of one partition for the query's words (kind and time
    /// window applied before ranking), with the query's idf sum in their coverage.
    pub async fn search(&self, q: &SearchQuery, scope: &MemoryScope, depth: usize) -> Result<Vec<Scored>> {
        let (t, s) = partition(&q.tenant, scope);
        let (_, stats) = self.stats(&t, &s).await?;
        if stats.docs == 0 {
            return Ok(Vec::new());
        }
        let mut terms = query_terms(&q.text);
        terms.sort_unstable();
        terms.dedup();
        terms.retain(|t| t.len() <= MAX_TERM_BYTES);
        let mut lists: Vec<(String, Vec<Item>, bool)> = Vec::with_capacity(terms.len());
        let mut reads = tokio::task::JoinSet::new();
        for (i, term) in terms.into_iter().enumerate() {
            let (me, t, part) = (self.clone(), t.clone(), format!("{s}/t/{term}"));
            reads.spawn(async move { (i, term, me.all(&t, &part, "", MAX_POSTINGS).await) });
        }
        let mut read = Vec::new();
        while let Some(done) = reads.join_next().await {
            let (i, term, res) = done.map_err(|e| Error::internal(format!("posting read: {e}")))?;
            let (items, truncated) = res?;
            read.push((i, term, items, truncated));
        }
        read.sort_by_key(|r| r.0);
        for (_, term, items, truncated) in read {
            lists.push((term, items, truncated));
        }
        #[allow(clippy::cast_possible_truncation)]
        let docs = stats.docs as usize;
        let df = |items: &Vec<Item>, truncated: bool| if truncated { docs.max(MAX_POSTINGS) } else { items.len() };
        let common = |items: &Vec<Item>, truncated: bool| bm25::common(df(items, truncated), docs);
        if lists.iter().any(|(_, items, tr)| !items.is_empty() && !common(items, *tr)) {
            lists.retain(|(_, items, tr)| !common(items, *tr));
        }
        #[allow(clippy::cast_precision_loss)]
        let (n, avg) = (stats.docs as f64, stats.total as f64 / stats.docs as f64);
        let mut scores: HashMap<String, (f64, u64)> = HashMap::new();
        let mut idf_sum = 0.0;
        for (_, items, truncated) in &lists {
            #[allow(clippy::cast_precision_loss)]
            let idf = bm25::idf(n, if items.is_empty() { 0.0 } else { df(items, *truncated) as f64 });
            idf_sum += idf;
            for item in items {
                let p: Posting = decode(item)?;
                if q.kind.is_some_and(|k| k != p.kind) || !q.in_window(Timestamp(p.at)) {
                    continue;
                }
                let e = scores.entry(item.sk.clone()).or_insert((0.0, p.v));
                e.0 += bm25::term(idf, f64::from(p.tf), f64::from(p.len), avg);
                // A posting of another version than the chunk's makes it a stale list: the
                // chunk read drops it.
                if e.1 != p.v {
                    e.1 = u64::MAX;
                }
            }
        }
        let mut out: Vec<Scored> = scores
            .into_iter()
            .map(|(key, (score, version))| Scored { key, score, coverage: (idf_sum > 0.0).then(|| score / idf_sum), version })
            .collect();
        out.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key.cmp(&b.key)));
        out.truncate(depth);
        Ok(out)
    }

    /// The chunks with these keys (`{doc}/{id}`) in one partition, read at once, in
    /// order; a chunk gone, or of another version than the one given, is left out.
    pub async fn read(&self, tenant: &TenantId, scope: &MemoryScope, wanted: Vec<(String, Option<u64>)>) -> Result<Vec<Chunk>> {
        let (t, s) = partition(tenant, scope);
        let mut reads = tokio::task::JoinSet::new();
        for (i, (key, version)) in wanted.into_iter().enumerate() {
            let (me, t, s) = (self.clone(), t.clone(), s.clone());
            reads.spawn(async move { (i, version, me.chunk(&t, &s, &key).await) });
        }
        let mut found = Vec::new();
        while let Some(done) = reads.join_next().await {
            let (i, version, res) = done.map_err(|e| Error::internal(format!("chunk read: {e}")))?;
            if let Some((v, chunk)) = res?
                && version.is_none_or(|want| want == v)
            {
                found.push((i, chunk));
            }
        }
        found.sort_by_key(|(i, _)| *i);
        Ok(found.into_iter().map(|(_, c)| c).collect())
    }
}

/// A conditional transaction: the partition's statistics (changed by the deltas, on
/// the version read) and the chunk writes beside them.
struct Commit<'a> {
    keywords: &'a Keywords,
    t: &'a str,
    s: &'a str,
    docs: i64,
    total: i64,
    with: Vec<Write>,
}

impl Commit<'_> {
    fn with(mut self, w: Write) -> Self {
        self.with.push(w);
        self
    }

    /// `Ok(false)` when a condition failed (a concurrent writer): read again and retry.
    async fn run(self) -> Result<bool> {
        let (version, stats) = self.keywords.stats(self.t, self.s).await?;
        let next =
            Stats { docs: stats.docs.saturating_add_signed(self.docs), total: stats.total.saturating_add_signed(self.total) };
        let mut writes = self.with;
        writes.push(Write::Put {
            item: Item {
                tenant: self.t.to_owned(),
                part: format!("{}/s", self.s),
                sk: "-".to_owned(),
                version: version.map_or(1, |v| v + 1),
                body: encode(&next)?,
            },
            condition: version.map_or(Condition::Absent, Condition::Version),
        });
        match self.keywords.items.write(writes).await {
            Ok(()) => Ok(true),
            Err(e) if e.code == domain::ErrorCode::Conflict => Ok(false),
            Err(e) => Err(e),
        }
    }
}
