//! Readback verification (SPEC §5.4): a synthetic query per chunk must bring the record
//! back byte-identical before it counts as verified. Inline on an index consistent at
//! once; on OpenSearch queued as a [`KIND_READBACK`] message and run once the refresh
//! window has passed, where it also sweeps older versions and removals again.

use domain::memory::{MemoryScope, Verification};
use domain::{Error, Id, Result, TenantId, Timestamp};
use ports::records::ReviewStore;
use ports::search::{DocKind, MAX_HITS, SearchDoc, SearchMode, SearchQuery};
use sha2::{Digest, Sha256};

use super::{
    IndexRequest, KIND_READBACK, READBACK_K, REFRESH_RETRIES, SearchService, UNVERIFIED_CONFIDENCE, VERIFIED_CONFIDENCE,
};

/// [`sha`] in lowercase hex (in queue messages).
fn hex_sha(s: &str) -> String {
    sha(s).iter().map(|b| format!("{b:02x}")).collect()
}

fn sha(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// A synthetic query for a chunk: its first sentence (or first 24 words), the way an
/// agent would ask for it.
pub(crate) fn synthetic_query(title: &str, chunk: &str) -> String {
    let first = chunk.split_inclusive(['.', '?', '!', '\n']).next().unwrap_or(chunk);
    let words: Vec<&str> = first.split_whitespace().take(24).collect();
    let q = if words.len() >= 4 { words.join(" ") } else { format!("{title} {}", words.join(" ")) };
    let q: String = q.chars().filter(|c| !c.is_control()).collect();
    q.chars().take(ports::search::MAX_QUERY_CHARS).collect()
}

/// A deferred readback, or (without a kind) a removal's second sweep: the body of a
/// [`KIND_READBACK`] message.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Readback {
    /// The record's kind (`memory`, `kb`, `turn`, `engineering`); none for a sweep.
    pub(super) kind: Option<String>,
    pub(super) doc: Id,
    /// The scope's storage key.
    pub(super) scope: String,
    /// The version written (its chunks' `updated_at`); for a sweep, chunks written
    /// before this are removed.
    pub(super) at: i64,
    /// SHA-256 of each chunk's text, in chunk order (`{doc}~{i}`).
    pub(super) chunks: Vec<String>,
    /// When the write or the removal returned.
    pub(super) written: i64,
}

impl Readback {
    /// Whether `stored` (the version written, by key) holds exactly the chunks written,
    /// byte for byte.
    fn check(&self, stored: &[SearchDoc]) -> std::result::Result<(), String> {
        if stored.len() != self.chunks.len() {
            return Err(format!("{} of {} chunks are stored", stored.len().min(self.chunks.len()), self.chunks.len()));
        }
        for (i, digest) in self.chunks.iter().enumerate() {
            let key = format!("{}~{i}", self.doc);
            match stored.iter().find(|d| d.id.as_str() == key) {
                Some(d) if hex_sha(&d.text) == *digest => {}
                Some(_) => return Err(format!("chunk {key} came back different from what was written")),
                None => return Err(format!("chunk {key} is not stored")),
            }
        }
        Ok(())
    }
}

impl SearchService {
    /// Asks the index for each chunk with a synthetic query — its keyword leg the chunk's
    /// first sentence, its vector leg the vector written (a second model run per chunk
    /// would double the cost of every write and test the model, not the write); verified
    /// when each query retrieves the record within [`READBACK_K`] (or tied with the
    /// last of them) and the chunk that comes back is byte-identical (SHA-256) to the
    /// chunk written. OpenSearch makes
    /// writes searchable after a refresh (about a second), so a miss there is retried a
    /// few times before it counts.
    pub(super) async fn readback(
        &self,
        tenant: &TenantId,
        scope: &MemoryScope,
        kind: DocKind,
        docs: &[SearchDoc],
    ) -> (bool, String) {
        let tries: &[u64] = if self.backend.search.visible_after().is_zero() { &[0] } else { &REFRESH_RETRIES };
        let mut last = String::new();
        for &wait in tries {
            if wait > 0 {
                self.backend.clock.sleep(std::time::Duration::from_millis(wait)).await;
            }
            match self.readback_once(tenant, scope, kind, docs).await {
                Ok(()) => return (true, format!("all {} chunks retrieved by a synthetic query", docs.len())),
                Err(reason) => last = reason,
            }
        }
        (false, last)
    }

    async fn readback_once(
        &self,
        tenant: &TenantId,
        scope: &MemoryScope,
        kind: DocKind,
        docs: &[SearchDoc],
    ) -> std::result::Result<(), String> {
        for d in docs {
            let text = synthetic_query(&d.title, &d.text);
            let vector = (!d.vector.is_empty()).then(|| d.vector.clone());
            let q = SearchQuery {
                tenant: tenant.clone(),
                scopes: vec![scope.clone()],
                kind: Some(kind),
                text,
                vector,
                embedder: d.embedder.clone(),
                mode: SearchMode::Hybrid,
                k: READBACK_K,
                since: None,
                until: None,
            };
            let failed = |e: Error| format!("the readback query failed: {}", e.code);
            let mut hits = self.backend.search.search(&q).await.map_err(failed)?;
            if !hits.iter().any(|h| h.doc == d.doc) && hits.len() == READBACK_K {
                // Near-identical records (turns that differ by a number) can tie with it
                // at the cut, and ties go by keyword rank, not by which was written last:
                // tied with the last one kept, it is as retrievable as that one.
                let cut = (hits[READBACK_K - 1].exact, hits[READBACK_K - 1].score);
                let more = SearchQuery { k: MAX_HITS, ..q };
                hits = self.backend.search.search(&more).await.map_err(failed)?;
                hits.retain(|h| (h.exact, h.score) >= cut);
            }
            // Hits are folded per record, so the record may answer with a sibling chunk:
            // whichever chunk came back must be byte-identical to what was written.
            let Some(hit) = hits.iter().find(|h| h.doc == d.doc) else {
                return Err(format!("chunk {} was not retrieved by its synthetic query", d.id));
            };
            let written = docs.iter().find(|w| w.id == hit.id).map(|w| sha(&w.text));
            if written != Some(sha(&hit.text)) {
                return Err(format!("chunk {} came back different from what was written", hit.id));
            }
        }
        Ok(())
    }

    /// Whether this write's readback runs later, off the request path: on an index
    /// that makes writes visible after a refresh window, once a readback message is
    /// queued (when it cannot be, the readback runs here, waiting for the refresh).
    pub(super) async fn defer_readback(&self, r: &IndexRequest<'_>, docs: &[SearchDoc]) -> bool {
        if self.backend.search.visible_after().is_zero() {
            return false;
        }
        let readback = Readback {
            kind: Some(r.kind.as_str().to_owned()),
            doc: r.doc.clone(),
            scope: r.scope.storage_key(),
            at: r.at.0,
            chunks: docs.iter().map(|d| hex_sha(&d.text)).collect(),
            written: self.backend.clock.now().0,
        };
        match self.queue_readback(r.tenant, &readback).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(code = ?e.code, "the deferred readback could not be queued; it runs now");
                false
            }
        }
    }

    pub(super) async fn queue_readback(&self, tenant: &TenantId, r: &Readback) -> Result<()> {
        let body = serde_json::to_vec(r).map_err(|e| Error::internal(e.to_string()))?;
        let key = format!("readback:{}:{}:{}:{}:{}", tenant, r.scope, r.doc, r.at, r.kind.as_deref().unwrap_or("sweep"));
        self.backend
            .queue
            .send(&ports::QueueMessage { tenant: tenant.clone(), kind: KIND_READBACK.to_owned(), idempotency_key: key, body })
            .await
    }

    /// Runs a deferred readback (a [`KIND_READBACK`] message) once the index's refresh
    /// window has passed since the write: the record's chunks of the version written
    /// must be stored byte for byte (by their keys) and each retrieved by its synthetic
    /// query; older versions' chunks (twins of a re-index inside the window) are removed.
    /// Its verification replaces the pending one, entering the review queue when it
    /// failed. A newer version of the record is left to its own readback; a message
    /// without a kind is a removal's second sweep.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed message (dead-lettered); `UNAVAILABLE` when the
    /// index or the store cannot be reached (retried).
    pub async fn readback_from_queue(&self, m: &ports::QueueMessage) -> Result<()> {
        let r: Readback =
            serde_json::from_slice(&m.body).map_err(|e| Error::invalid(format!("a readback message is malformed: {e}")))?;
        let (tenant, scope) = (&m.tenant, MemoryScope::parse(&r.scope)?);
        let window = self.backend.search.visible_after();
        let due = r.written.saturating_add(i64::try_from(window.as_millis()).unwrap_or(i64::MAX));
        let wait = due.saturating_sub(self.backend.clock.now().0).clamp(0, i64::try_from(window.as_millis()).unwrap_or(0));
        if wait > 0 {
            self.backend.clock.sleep(std::time::Duration::from_millis(wait.unsigned_abs())).await;
        }
        let Some(kind) = r.kind.as_deref() else {
            let swept = self.backend.search.remove_older(tenant, &scope, &r.doc, Timestamp(r.at)).await?;
            if swept > 0 {
                tracing::info!(swept, "a removal's second sweep took out chunks written inside the refresh window");
            }
            return Ok(());
        };
        let kind = DocKind::parse(kind)?;
        let Some(pending) = self.backend.records.get_verification(tenant, kind.as_str(), &r.doc).await? else {
            // Forgotten meanwhile: its removal swept the index.
            return Ok(());
        };
        let mut last = String::new();
        for &wait in &REFRESH_RETRIES {
            if wait > 0 {
                self.backend.clock.sleep(std::time::Duration::from_millis(wait)).await;
            }
            let stored = self.backend.search.chunks(tenant, &scope, &r.doc).await?;
            if stored.iter().any(|d| d.updated_at.0 > r.at) {
                // A newer version was written since: its own readback decides.
                return Ok(());
            }
            // Twins of an older version (a re-index inside the refresh window) are seen in
            // what was just read: the sweep's own lookup and delete run only then.
            if stored.iter().any(|d| d.updated_at.0 < r.at) {
                let twins = self.backend.search.remove_older(tenant, &scope, &r.doc, Timestamp(r.at)).await?;
                tracing::info!(twins, "chunks of an older version (a re-index inside the refresh window) removed");
            }
            let current: Vec<SearchDoc> = stored.into_iter().filter(|d| d.updated_at.0 == r.at).collect();
            let outcome = match Readback::check(&r, &current) {
                Ok(()) => self.readback_once(tenant, &scope, kind, &current).await,
                Err(e) => Err(e),
            };
            match outcome {
                Ok(()) => {
                    last.clear();
                    break;
                }
                Err(reason) => last = reason,
            }
        }
        let verified = last.is_empty();
        let now = self.backend.clock.now();
        let v = Verification {
            verified,
            pending: false,
            confidence: if verified { VERIFIED_CONFIDENCE } else { UNVERIFIED_CONFIDENCE },
            fresh_at: verified.then_some(now),
            reason: if verified { format!("all {} chunks retrieved by a synthetic query", r.chunks.len()) } else { last },
            at: now,
            ..pending
        };
        self.backend.records.put_verification(&v).await
    }
}
