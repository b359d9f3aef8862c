//! The audit ledger helper: one call per tool call, decision or admin action.
//! A failure to audit is logged loudly but does not fail the caller's read.
//!
//! Group commit: concurrent callers hand their records to one writer task, which writes
//! whatever has queued up (at most 500) in as few atomic batches as the store allows —
//! on SQLite one transaction, one fsync; on DynamoDB transactions of 25. [`AuditService::record`] returns once the record is durable (writes and
//! decisions use it); [`AuditService::record_read`] returns at once and the record is
//! written with the next group, at most [`READ_LINGER`] later — reads use it, so a crash
//! can lose the audit records of the last few milliseconds of reads, never of a write.
//! On Lambda ([`crate::Services::for_lambda`]) reads wait for their record as writes do:
//! the process is frozen once the handler returns, so nothing may be left queued.
//! A group of reads only lingers that long to gather more (under load: one commit for
//! hundreds of reads); a durable record in the group flushes it at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use domain::Result;
use domain::audit::AuditRecord;
use ports::Backend;
use ports::records::AuditLog;
use tokio::sync::{mpsc, oneshot};

/// Records waiting for the writer before callers wait for room.
const QUEUE: usize = 4096;
/// Most records one group carries (the store splits it into its own batch size).
const GROUP: usize = 500;
/// How long a group holding only reads' records waits for more before it is written.
pub const READ_LINGER: std::time::Duration = std::time::Duration::from_millis(10);

struct Pending {
    record: AuditRecord,
    /// `Some` for a caller waiting until its record is durable; `None` for a read.
    done: Option<oneshot::Sender<Result<()>>>,
}

#[derive(Clone)]
pub struct AuditService {
    backend: Backend,
    writer: Arc<OnceLock<mpsc::Sender<Pending>>>,
    /// Reads wait for their record too. Set on Lambda, which freezes the process once
    /// the handler returns: a record still queued would be written minutes later, or
    /// never. Shared by every clone.
    durable_reads: Arc<AtomicBool>,
}

impl AuditService {
    pub(crate) fn new(backend: Backend) -> Self {
        Self { backend, writer: Arc::default(), durable_reads: Arc::default() }
    }

    /// From now on every read's record is durable before [`Self::record_read`] returns
    /// (Lambda: nothing may be left in flight when the handler returns).
    pub fn make_reads_durable(&self) {
        self.durable_reads.store(true, Ordering::Relaxed);
    }

    /// Whether reads wait for their record (see [`Self::make_reads_durable`]).
    pub fn reads_are_durable(&self) -> bool {
        self.durable_reads.load(Ordering::Relaxed)
    }

    /// The writer task, started on first use (inside the caller's runtime).
    fn writer(&self) -> mpsc::Sender<Pending> {
        self.writer
            .get_or_init(|| {
                let (tx, mut rx) = mpsc::channel::<Pending>(QUEUE);
                let backend = self.backend.clone();
                tokio::spawn(async move {
                    while let Some(first) = rx.recv().await {
                        let deadline = tokio::time::Instant::now() + READ_LINGER;
                        let mut waiting = first.done.is_some();
                        let mut group = vec![first];
                        while group.len() < GROUP {
                            let next = match rx.try_recv() {
                                Ok(p) => Some(p),
                                // Nothing queued: a durable record goes now; reads wait a little.
                                Err(mpsc::error::TryRecvError::Empty) if !waiting => {
                                    tokio::time::timeout_at(deadline, rx.recv()).await.ok().flatten()
                                }
                                Err(_) => None,
                            };
                            let Some(p) = next else { break };
                            waiting |= p.done.is_some();
                            group.push(p);
                        }
                        let (records, waiters): (Vec<AuditRecord>, Vec<_>) =
                            group.into_iter().map(|p| (p.record, p.done)).unzip();
                        let result = backend.records.append_audits(&records).await;
                        if let Err(e) = &result
                            && waiters.iter().all(Option::is_none)
                        {
                            tracing::error!(error = %e, records = records.len(), "audit records of reads lost");
                        }
                        for done in waiters.into_iter().flatten() {
                            let _ = done.send(result.clone());
                        }
                    }
                });
                tx
            })
            .clone()
    }

    fn make(&self, tenant: &domain::TenantId, actor: &str, action: &str, target: Option<String>, outcome: &str) -> AuditRecord {
        record(&self.backend, tenant, actor, action, target, outcome)
    }

    /// Records what `caller` did, naming the client that acted ([`Self::record`]).
    pub async fn record_by(
        &self,
        caller: &domain::principal::CallerContext,
        action: &str,
        target: Option<String>,
        outcome: &str,
    ) {
        let mut r = self.make(&caller.tenant, caller.principal.as_str(), action, target, outcome);
        r.via = Some(caller.via());
        self.write(r).await;
    }

    /// Records a write `caller` asked for on `target` (cut to 64 characters) with its
    /// outcome — `ok` or the error's taxonomy code — durable before it returns.
    pub async fn outcome<T>(
        &self,
        caller: &domain::principal::CallerContext,
        action: &str,
        target: &str,
        result: &domain::Result<T>,
    ) {
        let code = result.as_ref().map_or_else(|e| e.code.as_str(), |_| "ok");
        self.record_by(caller, action, Some(target.chars().take(64).collect()), code).await;
    }

    /// Records a read by `caller`, naming the client ([`Self::record_read`]).
    pub async fn record_read_by(
        &self,
        caller: &domain::principal::CallerContext,
        action: &str,
        target: Option<String>,
        outcome: &str,
    ) {
        if self.reads_are_durable() {
            return self.record_by(caller, action, target, outcome).await;
        }
        let mut r = self.make(&caller.tenant, caller.principal.as_str(), action, target, outcome);
        r.via = Some(caller.via());
        self.queue(r).await;
    }

    /// Records the audit record of a read: queued for the next group write, without
    /// waiting for it (see the module notes).
    pub async fn record_read(&self, tenant: &domain::TenantId, actor: &str, action: &str, target: Option<String>, outcome: &str) {
        if self.reads_are_durable() {
            return self.record(tenant, actor, action, target, outcome).await;
        }
        self.queue(self.make(tenant, actor, action, target, outcome)).await;
    }

    /// Queues a read's record for the next group write.
    async fn queue(&self, record: AuditRecord) {
        match self.writer().try_send(Pending { record, done: None }) {
            Ok(()) => {}
            // A full queue or a stopped writer: write this one now.
            Err(mpsc::error::TrySendError::Full(p) | mpsc::error::TrySendError::Closed(p)) => {
                if let Err(e) = self.backend.records.append_audit(&p.record).await {
                    tracing::error!(tenant = %p.record.tenant, action = %p.record.action, error = %e, "audit record lost");
                }
            }
        }
    }

    /// Records `action` by `actor` in `tenant` with `outcome` (`ok` or a taxonomy code);
    /// returns once the record is durable (or its loss is logged).
    pub async fn record(&self, tenant: &domain::TenantId, actor: &str, action: &str, target: Option<String>, outcome: &str) {
        self.write(self.make(tenant, actor, action, target, outcome)).await;
    }

    /// Writes a record; returns once it is durable (or its loss is logged).
    async fn write(&self, record: AuditRecord) {
        let (tenant, action) = (record.tenant.clone(), record.action.clone());
        let (done, answer) = oneshot::channel();
        let result = match self.writer().send(Pending { record, done: Some(done) }).await {
            Ok(()) => answer.await.unwrap_or_else(|_| Err(domain::Error::internal("the audit writer stopped"))),
            // The writer's runtime is gone (a test that outlived it): write directly.
            Err(mpsc::error::SendError(p)) => self.backend.records.append_audit(&p.record).await,
        };
        if let Err(e) = result {
            tracing::error!(tenant = %tenant, action = %action, error = %e, "audit record lost");
        }
    }
}

/// A new audit record, stamped now with a fresh id: the one place records are built (the
/// ledger's writer, the governance tasks and the maintenance job all use it).
pub(crate) fn record(
    backend: &ports::Backend,
    tenant: &domain::TenantId,
    actor: &str,
    action: &str,
    target: Option<String>,
    outcome: &str,
) -> AuditRecord {
    AuditRecord {
        tenant: tenant.clone(),
        id: crate::new_id(backend),
        at: backend.clock.now(),
        actor: actor.to_owned(),
        action: action.to_owned(),
        target,
        outcome: outcome.to_owned(),
        request_id: None,
        via: None,
    }
}
