//! Vectors after the answer. A conversation turn written through a long-lived process
//! (`continuity serve`) on an index consistent at once is acknowledged as soon as it is
//! stored and indexed by its words: a search finds it by keywords at once. Its vector
//! is computed by a background worker in micro-batches (the first waits [`LINGER`] for
//! company, at most [`MAX_BATCH`] chunks), then written, read back and verified. Batches
//! are filled round-robin over tenants, so one tenant's burst never holds another's
//! turn back by more than one batch. At most [`MAX_PENDING`] records wait; past it a
//! write waits for room before answering (backpressure: the writers then go at the
//! batches' pace), which bounds the delay before a turn is found by meaning. A Lambda (no work after the answer) and OpenSearch
//! (already verified off the request path) embed before answering, as every other
//! record does.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use domain::TenantId;
use domain::memory::MemoryScope;
use ports::search::{DocKind, SearchDoc};

use super::SearchService;

/// How long the first record of a batch waits for others.
pub const LINGER: Duration = Duration::from_millis(2);
/// Most chunks embedded in one model run.
pub const MAX_BATCH: usize = 32;
/// Most records waiting for their vector; past it a write waits for room.
pub const MAX_PENDING: usize = 256;
/// Longest a write waits for room before it embeds its own.
pub const MAX_ROOM_WAIT: Duration = Duration::from_secs(10);
/// A worker idle this long stops; the next write starts another.
const IDLE: Duration = Duration::from_millis(500);
/// The embedder name a chunk carries until its vector is written: no embedder's, so the
/// vector leg passes it by and the keyword leg finds it.
pub const NO_VECTOR_YET: &str = "";

/// One record waiting for its vector: its chunks, indexed without one.
pub(crate) struct Job {
    pub tenant: TenantId,
    pub scope: MemoryScope,
    pub kind: DocKind,
    pub docs: Vec<SearchDoc>,
}

/// The records waiting, per tenant in arrival order, and the tenants' turn.
#[derive(Default)]
pub(crate) struct Backlog {
    queues: HashMap<TenantId, VecDeque<Job>>,
    turn: VecDeque<TenantId>,
    /// Records queued or being embedded (a record leaves once its vector is written).
    pending: usize,
    running: bool,
}

impl Backlog {
    /// Queues `job`; `false` (not queued) when [`MAX_PENDING`] records already wait.
    fn push(&mut self, job: Job) -> Result<(), Job> {
        if self.pending >= MAX_PENDING {
            return Err(job);
        }
        let q = self.queues.entry(job.tenant.clone()).or_default();
        if q.is_empty() && !self.turn.contains(&job.tenant) {
            self.turn.push_back(job.tenant.clone());
        }
        q.push_back(job);
        self.pending += 1;
        Ok(())
    }

    /// The next batch: one record of each waiting tenant in turn, again and again, until
    /// [`MAX_BATCH`] chunks (a record is never split; the first is always taken).
    fn next_batch(&mut self) -> Vec<Job> {
        let mut batch: Vec<Job> = Vec::new();
        let mut chunks = 0;
        while let Some(tenant) = self.turn.pop_front() {
            let Some(q) = self.queues.get_mut(&tenant) else { continue };
            let Some(size) = q.front().map(|j| j.docs.len()) else {
                self.queues.remove(&tenant);
                continue;
            };
            if !batch.is_empty() && chunks + size > MAX_BATCH {
                self.turn.push_front(tenant);
                break;
            }
            if let Some(job) = q.pop_front() {
                chunks += job.docs.len();
                batch.push(job);
            }
            if q.is_empty() {
                self.queues.remove(&tenant);
            } else {
                self.turn.push_back(tenant);
            }
        }
        batch
    }
}

/// The backlog and the signal that wakes its worker.
#[derive(Default)]
pub(crate) struct Filler {
    backlog: Mutex<Backlog>,
    wake: tokio::sync::Notify,
}

impl Filler {
    fn lock(&self) -> std::sync::MutexGuard<'_, Backlog> {
        self.backlog.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records waiting for their vector (queued or being embedded).
    pub fn pending(&self) -> usize {
        self.lock().pending
    }
}

impl SearchService {
    /// Whether this process may answer before a record's vector is written.
    pub(super) fn vectors_later(&self) -> bool {
        self.backend.search.visible_after().is_zero()
            && self.backend.search.name() != "none"
            && std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_none()
    }

    /// Queues `job` for its vector, starting a worker if none runs; gives it back when
    /// the backlog is full.
    pub(super) fn queue_vector(&self, job: Job) -> Result<(), Job> {
        let start = {
            let mut b = self.filler.lock();
            b.push(job)?;
            !std::mem::replace(&mut b.running, true)
        };
        if start {
            let this = self.clone();
            tokio::spawn(async move { this.fill().await });
        }
        self.filler.wake.notify_one();
        Ok(())
    }

    /// Waits until no record waits for its vector (benchmarks and tests).
    pub async fn settle(&self) {
        while self.filler.pending() > 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// The worker: batches, embeds, writes the vectors, reads back; stops when idle.
    async fn fill(self) {
        loop {
            let mut batch = self.filler.lock().next_batch();
            if batch.is_empty() {
                let woken = tokio::time::timeout(IDLE, self.filler.wake.notified()).await.is_ok();
                let mut b = self.filler.lock();
                if !woken && b.pending == 0 {
                    b.running = false;
                    return;
                }
                continue;
            }
            if batch.iter().map(|j| j.docs.len()).sum::<usize>() < MAX_BATCH {
                tokio::time::sleep(LINGER).await;
                batch.extend(self.filler.lock().next_batch());
            }
            let done = batch.len();
            self.embed_batch(batch).await;
            let mut b = self.filler.lock();
            b.pending = b.pending.saturating_sub(done);
        }
    }

    /// One model run for the batch's chunks, one index write for all their vectors,
    /// each record read back, and one write of all their verifications: a batch pays
    /// one commit of each kind, not one per record. A failed run or index write leaves
    /// the records found by their words, in the review queue with why (a retry there
    /// indexes them again).
    async fn embed_batch(&self, batch: Vec<Job>) {
        let texts: Vec<String> = batch.iter().flat_map(|j| j.docs.iter().map(|d| format!("{}\n{}", d.title, d.text))).collect();
        let vectors = match self.backend.embedder.embed(&texts).await {
            Ok(v) if v.len() == texts.len() => v,
            Ok(_) | Err(_) => {
                tracing::warn!(records = batch.len(), "embedding a batch of turns failed; they go to review");
                let reason = "the embedder failed; found by its words only until it is indexed again";
                let failed: Vec<_> = batch.iter().filter_map(|job| self.verification(job, false, reason.to_owned())).collect();
                self.record_verifications(&failed).await;
                return;
            }
        };
        let mut vectors = vectors.into_iter();
        let name = self.backend.embedder.name().to_owned();
        let mut batch = batch;
        for job in &mut batch {
            for d in &mut job.docs {
                d.vector = vectors.next().unwrap_or_default();
                d.embedder.clone_from(&name);
            }
        }
        let all: Vec<SearchDoc> = batch.iter().flat_map(|j| j.docs.iter().cloned()).collect();
        let written = self.backend.search.upsert(&all).await;
        let mut verifications = Vec::with_capacity(batch.len());
        for job in &batch {
            let (verified, reason) = match &written {
                Ok(()) => self.readback(&job.tenant, &job.scope, job.kind, &job.docs).await,
                Err(e) => (false, format!("the index write of its vector failed ({})", e.code)),
            };
            verifications.extend(self.verification(job, verified, reason));
        }
        self.record_verifications(&verifications).await;
    }

    /// A record's verification (none for a record without chunks).
    fn verification(&self, job: &Job, verified: bool, reason: String) -> Option<domain::memory::Verification> {
        let first = job.docs.first()?;
        let now = self.backend.clock.now();
        // A turn is its owner's alone: the review queue shows it by id and scope only.
        Some(domain::memory::Verification {
            tenant: job.tenant.clone(),
            kind: job.kind.as_str().to_owned(),
            doc: first.doc.clone(),
            scope: job.scope.clone(),
            title: String::new(),
            verified,
            pending: false,
            confidence: if verified { super::VERIFIED_CONFIDENCE } else { super::UNVERIFIED_CONFIDENCE },
            fresh_at: verified.then_some(now),
            reason,
            entities: Vec::new(),
            related: Vec::new(),
            at: now,
        })
    }

    async fn record_verifications(&self, vs: &[domain::memory::Verification]) {
        if let Err(e) = ports::records::ReviewStore::put_verifications(&self.backend.records, vs).await {
            tracing::warn!(code = ?e.code, records = vs.len(), "turns' verifications were not recorded");
        }
    }
}

#[cfg(test)]
mod tests {
    use domain::{Id, Timestamp};

    use super::*;

    fn job(tenant: &str, n: usize, chunks: usize) -> Job {
        let t = TenantId::new(tenant).unwrap();
        let docs = (0..chunks)
            .map(|i| SearchDoc {
                tenant: t.clone(),
                scope: MemoryScope::Session("u.s".into()),
                id: Id::new(format!("{tenant}-{n}~{i}")).unwrap(),
                doc: Id::new(format!("{tenant}-{n}")).unwrap(),
                kind: DocKind::Turn,
                title: String::new(),
                text: "hello".into(),
                vector: Vec::new(),
                embedder: NO_VECTOR_YET.into(),
                updated_at: Timestamp(0),
                occurred_at: None,
            })
            .collect();
        Job { tenant: t, scope: MemoryScope::Session("u.s".into()), kind: DocKind::Turn, docs }
    }

    fn names(batch: &[Job]) -> Vec<String> {
        batch.iter().map(|j| j.docs[0].doc.to_string()).collect()
    }

    #[test]
    fn a_burst_of_one_tenant_does_not_hold_another_back() {
        let mut b = Backlog::default();
        for n in 0..200 {
            assert!(b.push(job("busy", n, 1)).is_ok());
        }
        assert!(b.push(job("quiet", 0, 1)).is_ok());
        let first = names(&b.next_batch());
        assert_eq!(first.len(), MAX_BATCH);
        assert!(first.contains(&"quiet-0".to_owned()), "the quiet tenant's turn is in the very next batch: {first:?}");
        assert_eq!(first.iter().filter(|n| n.starts_with("busy")).count(), MAX_BATCH - 1);
        // Arrival order within a tenant is kept.
        assert_eq!(first[0], "busy-0");
        let second = names(&b.next_batch());
        assert_eq!(second[0], format!("busy-{}", MAX_BATCH - 1));
    }

    #[test]
    fn a_batch_never_splits_a_record_and_always_takes_the_first() {
        let mut b = Backlog::default();
        assert!(b.push(job("alpha", 0, MAX_BATCH + 5)).is_ok());
        assert!(b.push(job("alpha", 1, 3)).is_ok());
        assert_eq!(names(&b.next_batch()), ["alpha-0"], "an oversized record goes alone");
        assert_eq!(names(&b.next_batch()), ["alpha-1"]);
        assert!(b.next_batch().is_empty());
        assert_eq!(b.pending, 2, "records count as pending until their vector is written");
    }

    #[test]
    fn a_full_backlog_gives_the_record_back() {
        let mut b = Backlog::default();
        for n in 0..MAX_PENDING {
            assert!(b.push(job("tee", n, 1)).is_ok());
        }
        assert!(b.push(job("tee", MAX_PENDING, 1)).is_err(), "the writer embeds it itself");
    }
}
