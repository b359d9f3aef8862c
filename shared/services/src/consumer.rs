//! The work-queue consumer: every message goes, by its kind, to the service that owns
//! it — a batch or record of the ingest pipeline to [`IngestService`], an operator's
//! Spine write queued while the store was down to [`EntityService`], a dispatched task
//! to [`TaskService`], a tenant's governance upkeep to [`MaintenanceService`], a
//! connector's pull run to [`SourceService`] (a Lambda's run reads less per message
//! than `continuity serve`'s: [`crate::sources::Budget`]), a deferred readback (after
//! the search index's refresh window) to [`crate::search::SearchService`]. No
//! service reaches another through the queue; this is the one place that knows them all.
//! `continuity serve` drains the queue in a loop ([`Consumer::drain_once`]); the pipeline
//! Lambda hands it each SQS record ([`Consumer::process`]).

use domain::Result;
use ports::Backend;
use ports::queue::Delivery;

use crate::entities::EntityService;
use crate::ingest::IngestService;
use crate::maintenance::MaintenanceService;
use crate::sources::{Budget, SourceService};
use crate::work::TaskService;

/// The services messages go to.
pub(crate) struct Handlers {
    pub ingest: IngestService,
    pub entities: EntityService,
    pub work: TaskService,
    pub maintenance: MaintenanceService,
    pub sources: SourceService,
    pub notify: crate::notify::NotifyService,
    pub search: crate::search::SearchService,
}

#[derive(Clone)]
pub struct Consumer {
    backend: Backend,
    ingest: IngestService,
    entities: EntityService,
    work: TaskService,
    maintenance: MaintenanceService,
    sources: SourceService,
    notify: crate::notify::NotifyService,
    search: crate::search::SearchService,
    pull_budget: Budget,
}

impl Consumer {
    pub(crate) fn new(backend: Backend, h: Handlers) -> Self {
        let in_lambda = std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some();
        Self {
            backend,
            ingest: h.ingest,
            entities: h.entities,
            work: h.work,
            maintenance: h.maintenance,
            sources: h.sources,
            notify: h.notify,
            search: h.search,
            pull_budget: if in_lambda { Budget::LAMBDA } else { Budget::SERVE },
        }
    }

    /// Whether a message of `kind` has a service here to handle it.
    pub fn handles(kind: &str) -> bool {
        kind == crate::ingest::KIND_BATCH
            || kind == crate::ingest::KIND_RECORD
            || kind == crate::entities::KIND_SPINE_WRITE
            || kind == crate::maintenance::KIND_RESUME
            || kind == crate::maintenance::KIND_DAILY
            || kind == crate::work::KIND_TASK
            || kind == crate::sources::KIND_SYNC
            || kind == crate::notify::KIND_DELIVER
            || kind == crate::search::KIND_READBACK
    }

    /// Processes one delivery with the service its kind names.
    ///
    /// # Errors
    /// The service's: [`IngestService::process`], [`EntityService::apply_queued`],
    /// [`TaskService::deliver`] or [`MaintenanceService::resume_from_queue`].
    pub async fn process(&self, delivery: &Delivery) -> Result<()> {
        match delivery.message.kind.as_str() {
            crate::entities::KIND_SPINE_WRITE => self.entities.apply_queued(&delivery.message).await,
            crate::work::KIND_TASK => self.work.deliver(delivery).await,
            crate::notify::KIND_DELIVER => self.notify.deliver(delivery).await,
            crate::sources::KIND_SYNC => self.sources.run_message(&delivery.message, self.pull_budget).await.map(|_| ()),
            crate::maintenance::KIND_RESUME => self.maintenance.resume_from_queue(&delivery.message).await.map(|_| ()),
            crate::maintenance::KIND_DAILY => self.maintenance.daily_from_queue(&delivery.message).await.map(|_| ()),
            crate::search::KIND_READBACK => self.search.readback_from_queue(&delivery.message).await,
            _ => self.ingest.process(delivery).await.map(|_| ()),
        }
    }

    /// A delivery that failed: an ingest batch puts its connector in `sync_error` with
    /// the failing stage ([`IngestService::record_stage_error`]); other kinds are retried
    /// as they are.
    pub async fn failed(&self, delivery: &Delivery, e: &domain::Error) {
        let kind = delivery.message.kind.as_str();
        if kind == crate::ingest::KIND_BATCH || kind == crate::ingest::KIND_RECORD {
            self.ingest.record_stage_error(delivery, e).await;
        }
    }

    /// Drains the queue once: receives up to 10 messages and processes each, acking the
    /// successes and releasing the failures for a later retry. Returns how many messages
    /// were received. `continuity serve` runs this in a loop; tests call it directly.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the queue cannot be reached.
    pub async fn drain_once(&self, visibility: std::time::Duration, retry_after: std::time::Duration) -> Result<usize> {
        let deliveries = self.backend.queue.receive(10, visibility).await?;
        let n = deliveries.len();
        // The messages of one receive are processed concurrently: their blob writes and
        // reads overlap, and the store's versioned writes keep racing records correct.
        let mut tasks = tokio::task::JoinSet::new();
        for d in deliveries {
            if !Self::handles(&d.message.kind) {
                tracing::warn!(kind = %d.message.kind, "a message this consumer does not handle is left to expire");
                continue;
            }
            let this = self.clone();
            tasks.spawn(async move { this.handle(d, retry_after).await });
        }
        while let Some(joined) = tasks.join_next().await {
            if let Err(e) = joined {
                tracing::error!(error = %e, "a consumer task failed; its message is redelivered after its visibility timeout");
            }
        }
        Ok(n)
    }

    /// Processes one delivery, then acknowledges it, or releases it for a retry.
    async fn handle(&self, d: Delivery, retry_after: std::time::Duration) {
        match self.process(&d).await {
            Ok(()) => {
                if let Err(e) = self.backend.queue.ack(&d.receipt).await {
                    tracing::warn!(error = %e, "ack failed; the message will be redelivered (idempotent)");
                }
            }
            Err(e) => {
                if !crate::ingest::is_permanent(&e) {
                    self.failed(&d, &e).await;
                }
                if let Err(e) = self.backend.queue.release(&d.receipt, retry_after).await {
                    tracing::warn!(error = %e, "release failed; the message reappears after its visibility timeout");
                }
            }
        }
    }
}
