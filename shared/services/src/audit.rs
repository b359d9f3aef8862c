//! The audit ledger helper: one call per tool call, decision or admin action.
//! A failure to audit is logged loudly but does not fail the caller's read.
//!
//! Group commit: concurrent callers hand their records to one writer task, which writes
//! whatever has queued up (at most 25) in one atomic batch — one transaction, one fsync
//! on SQLite. [`AuditService::record`] returns once the record is durable (writes and
//! decisions use it); [`AuditService::record_read`] returns at once and the record is
//! written with the next group, milliseconds later — reads use it, so a crash can lose
//! the audit records of the last few milliseconds of reads, never of a write.

use std::sync::{Arc, OnceLock};

use domain::Result;
use domain::audit::AuditRecord;
use ports::Backend;
use ports::records::AuditLog;
use tokio::sync::{mpsc, oneshot};

/// Records waiting for the writer before callers wait for room.
const QUEUE: usize = 4096;
/// Most records one write carries (one atomic batch).
const GROUP: usize = ports::items::MAX_WRITES_PER_BATCH;

struct Pending {
    record: AuditRecord,
    done: oneshot::Sender<Result<()>>,
}

#[derive(Clone)]
pub struct AuditService {
    backend: Backend,
    writer: Arc<OnceLock<mpsc::Sender<Pending>>>,
}

impl AuditService {
    pub fn new(backend: Backend) -> Self {
        Self { backend, writer: Arc::default() }
    }

    /// The writer task, started on first use (inside the caller's runtime).
    fn writer(&self) -> mpsc::Sender<Pending> {
        self.writer
            .get_or_init(|| {
                let (tx, mut rx) = mpsc::channel::<Pending>(QUEUE);
                let backend = self.backend.clone();
                tokio::spawn(async move {
                    while let Some(first) = rx.recv().await {
                        let mut group = vec![first];
                        while group.len() < GROUP {
                            match rx.try_recv() {
                                Ok(p) => group.push(p),
                                Err(_) => break,
                            }
                        }
                        let records: Vec<AuditRecord> = group.iter().map(|p| p.record.clone()).collect();
                        let result = backend.records.append_audits(&records).await;
                        for p in group {
                            let _ = p.done.send(result.clone());
                        }
                    }
                });
                tx
            })
            .clone()
    }

    fn make(&self, tenant: &domain::TenantId, actor: &str, action: &str, target: Option<String>, outcome: &str) -> AuditRecord {
        AuditRecord {
            tenant: tenant.clone(),
            id: crate::new_id(&self.backend),
            at: self.backend.clock.now(),
            actor: actor.to_owned(),
            action: action.to_owned(),
            target,
            outcome: outcome.to_owned(),
            request_id: None,
        }
    }

    /// Records the audit record of a read: queued for the next group write, without
    /// waiting for it (see the module notes).
    pub async fn record_read(&self, tenant: &domain::TenantId, actor: &str, action: &str, target: Option<String>, outcome: &str) {
        let record = self.make(tenant, actor, action, target, outcome);
        let (done, _answer) = oneshot::channel();
        match self.writer().try_send(Pending { record, done }) {
            Ok(()) => {}
            // A full queue or a stopped writer: write this one now.
            Err(mpsc::error::TrySendError::Full(p) | mpsc::error::TrySendError::Closed(p)) => {
                if let Err(e) = self.backend.records.append_audit(&p.record).await {
                    tracing::error!(tenant = %tenant, action, error = %e, "audit record lost");
                }
            }
        }
    }

    /// Records `action` by `actor` in `tenant` with `outcome` (`ok` or a taxonomy code);
    /// returns once the record is durable (or its loss is logged).
    pub async fn record(&self, tenant: &domain::TenantId, actor: &str, action: &str, target: Option<String>, outcome: &str) {
        let record = self.make(tenant, actor, action, target, outcome);
        let (done, answer) = oneshot::channel();
        let result = match self.writer().send(Pending { record, done }).await {
            Ok(()) => answer.await.unwrap_or_else(|_| Err(domain::Error::internal("the audit writer stopped"))),
            // The writer's runtime is gone (a test that outlived it): write directly.
            Err(mpsc::error::SendError(p)) => self.backend.records.append_audit(&p.record).await,
        };
        if let Err(e) = result {
            tracing::error!(tenant = %tenant, action, error = %e, "audit record lost");
        }
    }
}
