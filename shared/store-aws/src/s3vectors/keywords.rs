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
//! A write puts the chunk's postings (`BatchWriteItem`, 25 at a time), then the chunk
//! with a condition on the version it read (the commit: retried on a concurrent
//! change), then adds to the partition's statistics (`UpdateItem … ADD`, atomic) and
//! deletes the postings of terms the chunk no longer holds. No transaction: each costs
//! twice the writes. A posting counts only while its version is the chunk's, so postings
//! left by a write that failed half-way never match a chunk they no longer describe; the
//! next write or removal of the chunk clears them. Statistics are counters: a write that
//! fails between its commit and its count leaves them off by that chunk, which moves
//! BM25's idf and average length by a fraction of a percent.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, KeysAndAttributes, PutRequest, WriteRequest};
use domain::memory::MemoryScope;
use domain::{Error, Id, Result, TenantId, Timestamp};
use ports::items::{Condition, Item, ItemStore, Query, Write};
use ports::search::{DocKind, SearchDoc, SearchQuery, bm25, doc_terms, query_terms};
use serde::{Deserialize, Serialize};

use crate::dynamo::{self, DynamoItems};
use crate::unavailable;

/// Postings read for one term at most: a term in more documents than this is common in
/// any partition a small team has, and is skipped when the query has a rarer one.
pub const MAX_POSTINGS: usize = 20_000;
/// Items per page when reading a part.
const PAGE: u32 = 1000;
/// Attempts at a commit that meets concurrent writers of the same partition.
const COMMIT_ATTEMPTS: usize = 8;
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

/// A partition's statistics: its chunks and their total length in terms.
#[derive(Debug, Clone, Copy, Default)]
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

fn build(e: aws_sdk_dynamodb::error::BuildError) -> Error {
    Error::internal(format!("dynamodb request: {e}"))
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| Error::internal(format!("search item: {e}")))
}

fn decode<T: for<'de> Deserialize<'de>>(item: &Item) -> Result<T> {
    serde_json::from_slice(&item.body).map_err(|e| Error::internal(format!("search item {}/{}: {e}", item.part, item.sk)))
}

/// Term frequencies of a chunk, as the embedded index counts them
/// ([`ports::search::doc_terms`]: title, text, the day it happened).
fn frequencies(title: &str, text: &str, at: domain::Timestamp) -> (Vec<(String, u32)>, u32) {
    let all = doc_terms(title, text, at);
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

/// The chunk store and keyword index over the stack's search table (the item layout of
/// [`DynamoItems`], which reads it; postings and counters are written here directly).
#[derive(Clone)]
pub struct Keywords {
    items: DynamoItems,
    client: Client,
    table: String,
}

/// A posting write: put (with its body) or delete.
enum PostingWrite {
    Put(Item),
    Delete { tenant: String, part: String, sk: String },
}

impl Keywords {
    pub fn new(client: Client, table: &str) -> Self {
        Self { items: DynamoItems::new(client.clone(), table), client, table: table.to_owned() }
    }

    /// Creates the table unless it exists (tests and local development; the stack's
    /// template makes `SearchTable`).
    ///
    /// # Errors
    /// `UNAVAILABLE` when DynamoDB cannot be reached or refuses the table.
    pub async fn create_table_if_missing(&self) -> Result<()> {
        self.items.create_table_if_missing().await
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

    /// Postings in batches of 25 (`BatchWriteItem`, no transaction), unprocessed items
    /// retried with a growing pause.
    async fn postings(&self, writes: Vec<PostingWrite>) -> Result<()> {
        for batch in writes.chunks(25) {
            let mut requests: Vec<WriteRequest> = batch
                .iter()
                .map(|w| {
                    Ok(match w {
                        PostingWrite::Put(item) => WriteRequest::builder()
                            .put_request(PutRequest::builder().set_item(Some(dynamo::to_attrs(item))).build().map_err(build)?)
                            .build(),
                        PostingWrite::Delete { tenant, part, sk } => WriteRequest::builder()
                            .delete_request(
                                DeleteRequest::builder().set_key(Some(dynamo::key(tenant, part, sk))).build().map_err(build)?,
                            )
                            .build(),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            for attempt in 0..8u32 {
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, requests)
                    .send()
                    .await
                    .map_err(|e| unavailable("dynamodb BatchWriteItem", &e))?;
                requests = out.unprocessed_items().and_then(|u| u.get(&self.table)).cloned().unwrap_or_default();
                if requests.is_empty() {
                    break;
                }
                if attempt == 7 {
                    return Err(Error::unavailable("dynamodb kept some postings unprocessed (throttled); try again"));
                }
                tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
            }
        }
        Ok(())
    }

    /// Adds to a partition's counters (atomic; no read first).
    async fn count(&self, t: &str, s: &str, docs: i64, total: i64) -> Result<()> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(dynamo::key(t, &format!("{s}/s"), "-")))
            // `total` is a reserved word: names go through placeholders.
            .update_expression("ADD #d :d, #n :n")
            .expression_attribute_names("#d", "docs")
            .expression_attribute_names("#n", "total")
            .expression_attribute_values(":d", AttributeValue::N(docs.to_string()))
            .expression_attribute_values(":n", AttributeValue::N(total.to_string()))
            .send()
            .await
            .map_err(|e| unavailable("dynamodb UpdateItem", &e))?;
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
        let (terms, len) = frequencies(&d.title, &d.text, d.happened_at());
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
                    Ok(PostingWrite::Put(Item {
                        tenant: t.clone(),
                        part: format!("{s}/t/{term}"),
                        sk: key.clone(),
                        version: 1,
                        body: encode(&Posting { tf: *tf, len, kind: d.kind, at, v: version })?,
                    }))
                })
                .collect::<Result<Vec<_>>>()?;
            self.postings(postings).await?;
            let commit = Write::Put {
                item: Item { tenant: t.clone(), part: format!("{s}/c"), sk: key.clone(), version, body: encode(&chunk)? },
                condition: old.as_ref().map_or(Condition::Absent, |(v, _)| Condition::Version(*v)),
            };
            match self.items.write(vec![commit]).await {
                Ok(()) => {}
                // A concurrent writer of this chunk: read again and retry.
                Err(e) if e.code == domain::ErrorCode::Conflict => continue,
                Err(e) => return Err(e),
            }
            let old_len = old.as_ref().map_or(0, |(_, c)| i64::from(c.len));
            self.count(&t, &s, i64::from(old.is_none()), i64::from(len) - old_len).await?;
            // Terms the chunk no longer holds.
            if let Some((_, before)) = old {
                let now: HashSet<&str> = terms.iter().map(|(term, _)| term.as_str()).collect();
                let stale = before
                    .terms
                    .iter()
                    .filter(|(term, _)| !now.contains(term.as_str()))
                    .map(|(term, _)| PostingWrite::Delete { tenant: t.clone(), part: format!("{s}/t/{term}"), sk: key.clone() })
                    .collect();
                self.postings(stale).await?;
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
            let key = format!("{}/{}", doc.as_str(), chunk.id.as_str());
            let delete = Write::Delete {
                tenant: t.clone(),
                part: format!("{s}/c"),
                sk: key.clone(),
                condition: Condition::Version(version),
            };
            match self.items.write(vec![delete]).await {
                Ok(()) => {}
                // Rewritten (or removed) meanwhile: the newer write stands.
                Err(e) if e.code == domain::ErrorCode::Conflict => continue,
                Err(e) => return Err(e),
            }
            self.count(&t, &s, -1, -i64::from(chunk.len)).await?;
            let postings = chunk
                .terms
                .iter()
                .map(|(term, _)| PostingWrite::Delete { tenant: t.clone(), part: format!("{s}/t/{term}"), sk: key.clone() })
                .collect();
            self.postings(postings).await?;
            removed.push(chunk);
        }
        Ok(removed)
    }

    /// A partition's counters (zero when it has none).
    async fn stats(&self, t: &str, s: &str) -> Result<Stats> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(dynamo::key(t, &format!("{s}/s"), "-")))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable("dynamodb GetItem", &e))?;
        let n = |name: &str| -> u64 {
            out.item()
                .and_then(|i| i.get(name))
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse::<i64>().ok())
                .map_or(0, |v| u64::try_from(v).unwrap_or(0))
        };
        Ok(Stats { docs: n("docs"), total: n("total") })
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
        let stats = self.stats(&t, &s).await?;
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

    /// The chunks with these keys (`{doc}/{id}`) in one partition, in order, read 100 at
    /// a time (`BatchGetItem`, strongly consistent); a chunk gone, or of another version
    /// than the one given, is left out.
    pub async fn read(&self, tenant: &TenantId, scope: &MemoryScope, wanted: Vec<(String, Option<u64>)>) -> Result<Vec<Chunk>> {
        let (t, s) = partition(tenant, scope);
        let part = format!("{s}/c");
        let mut found: HashMap<String, (u64, Chunk)> = HashMap::new();
        for batch in wanted.chunks(100) {
            // BatchGetItem refuses a key asked twice.
            let unique: std::collections::BTreeSet<&str> = batch.iter().map(|(k, _)| k.as_str()).collect();
            let mut keys: Vec<HashMap<String, AttributeValue>> = unique.into_iter().map(|k| dynamo::key(&t, &part, k)).collect();
            for attempt in 0..8u32 {
                let request = KeysAndAttributes::builder().set_keys(Some(keys)).consistent_read(true).build().map_err(build)?;
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, request)
                    .send()
                    .await
                    .map_err(|e| unavailable("dynamodb BatchGetItem", &e))?;
                for attrs in out.responses().and_then(|r| r.get(&self.table)).into_iter().flatten() {
                    let item = dynamo::from_attrs(&t, &part, attrs)?;
                    found.insert(item.sk.clone(), (item.version, decode(&item)?));
                }
                keys = out.unprocessed_keys().and_then(|u| u.get(&self.table)).map(|k| k.keys().to_vec()).unwrap_or_default();
                if keys.is_empty() {
                    break;
                }
                if attempt == 7 {
                    return Err(Error::unavailable("dynamodb kept some chunk reads unprocessed (throttled); try again"));
                }
                tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
            }
        }
        Ok(wanted
            .into_iter()
            .filter_map(|(key, version)| {
                let (v, chunk) = found.get(&key)?;
                version.is_none_or(|want| want == *v).then(|| chunk.clone())
            })
            .collect())
    }
}
