//! The maintenance job (SPEC §9): for every tenant, prune the audit ledger beyond its
//! retention and expire session-scope memory; for the authorization server, delete
//! expired codes, pending sign-ins and used ID-JAG `jti`s. Bounded per run (a tenant's
//! share is [`MAX_PER_TENANT`] items a kind), idempotent, and it reports what it did —
//! pruning is never silent. `continuity serve` runs it hourly, the `continuity-maintenance`
//! Lambda on an hourly schedule, `continuity maintenance` on demand. The daily jobs
//! ([`MaintenanceService::daily`]: reindex, backup compaction) run beside it.

use std::collections::BTreeSet;
use std::time::Duration;

use domain::notify::EventKind;
use domain::{Error, Result, TenantId, Timestamp};
use ports::Backend;
use ports::oauth::OAuthStore;
use ports::records::{IdempotencyStore as _, RetentionStore, ReviewStore as _, TenantStore};
use serde::Serialize;

/// Audit records are kept this long by default (SPEC §9: 7 days).
pub const AUDIT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// Session-scope memory expires this long after its last update.
pub const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);
/// Expired OAuth records are kept this long past expiry (reuse of a code is still
/// recognised, and revokes what it issued, during this grace).
pub const OAUTH_GRACE: Duration = Duration::from_secs(24 * 3600);
/// Most items of one kind one run deletes for one tenant.
pub const MAX_PER_TENANT: usize = 10_000;

/// A tenant's backups are compacted once it has this many files.
pub const COMPACT_AFTER_FILES: usize = 100;

/// What one daily run did: the reindex (summed over tenants) and the compaction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DailyReport {
    pub tenants: usize,
    pub indexed: usize,
    pub verified: usize,
    pub kept: usize,
    pub removed: usize,
    pub orphaned: usize,
    pub backup_files_merged: usize,
    pub backup_files_written: usize,
    /// Tenants whose reindex or compaction failed (logged; the others' went on).
    pub tenants_failed: usize,
    /// Tenants whose reindex stopped at its time budget and goes on in a next run (a
    /// continuation message on the queue).
    pub unfinished: usize,
}

impl DailyReport {
    /// Adds one tenant's work (not its count) to this sum.
    fn add(&mut self, one: &Self) {
        self.indexed += one.indexed;
        self.verified += one.verified;
        self.kept += one.kept;
        self.removed += one.removed;
        self.orphaned += one.orphaned;
        self.backup_files_merged += one.backup_files_merged;
        self.backup_files_written += one.backup_files_written;
        self.unfinished += one.unfinished;
    }
}

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MaintenanceReport {
    pub tenants: usize,
    pub audit_pruned: usize,
    pub sessions_expired: usize,
    /// Personal memories forgotten because their time to live ran out.
    pub personal_forgotten: usize,
    /// Conversation turns forgotten because their time to live ran out.
    pub turns_forgotten: usize,
    pub oauth_pruned: usize,
    /// Gates whose authorization or request ran out, now stored as blocked.
    pub gates_expired: usize,
    /// Sticky notes deleted 24 h after their last update (unpinned).
    pub notes_expired: usize,
    /// Tenants whose governance upkeep was queued (one `governance.resume` message each;
    /// the pipeline consumer runs it, [`crate::governance::GovernanceService::resume`]).
    pub resume_queued: usize,
    /// Tenants whose message could not be queued (logged; the next run queues it again).
    pub resume_not_queued: usize,
    /// Tenants whose pruning failed this run (logged and counted as
    /// `MaintenanceFailures`; the others' went on, and the next run tries again).
    pub tenants_failed: usize,
    /// Whether the authorization server's pruning failed this run (logged; retried next run).
    pub oauth_failed: bool,
    /// Events the watch emitted: `review.failed` and `health.alarm`, at most one of each
    /// a tenant.
    pub watch_told: usize,
}

/// What one tenant's pruning removed.
#[derive(Debug, Clone, Copy, Default)]
struct Pruned {
    audit: usize,
    sessions: usize,
    forgotten: usize,
    turns: usize,
    gates: usize,
    notes: usize,
}

/// Dead letters the watch peeks at each run (all tenants').
const WATCHED_DEAD_LETTERS: u32 = 100;
/// Dead-letter keys the watch remembers a tenant as told.
const WATCH_MEMORY: usize = 1000;
/// Review-queue entries the watch reads a tenant at most.
const WATCHED_REVIEW: usize = 10_000;

/// The queue message kind of one tenant's governance upkeep.
pub const KIND_RESUME: &str = "governance.resume";
/// The work-queue message of one tenant's daily jobs (reindex, compaction).
pub const KIND_DAILY: &str = "maintenance.daily";
/// How long one queued daily run reindexes before it hands the rest to a continuation
/// message: the pipeline function stops at 60 s, and the run also loads the tenant's
/// records and, when done, compacts its backups.
pub const DAILY_BUDGET: Duration = Duration::from_secs(40);
/// Most continuations of one tenant's daily run (40 s each: over 5 hours of indexing);
/// past it the run fails, is retried, then dead-lettered, which alarms.
pub const MAX_DAILY_PARTS: u64 = 500;

/// A proposal idle this long on its way through triage is moved along by the hourly
/// run (a crash or an outage stopped it).
pub const WORKFLOW_IDLE: Duration = Duration::from_secs(300);

fn before(now: Timestamp, d: Duration) -> Timestamp {
    Timestamp(now.0.saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
}

#[derive(Clone)]
pub struct MaintenanceService {
    backend: Backend,
    gates: crate::gates::GateService,
    engineering: crate::engineering::EngineeringService,
    search: crate::search::SearchService,
    backup: crate::backup::BackupService,
    governance: crate::governance::GovernanceService,
    notify: crate::notify::NotifyService,
    /// Days audit records are kept before they are archived and pruned.
    audit_retention_days: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

/// The audit retention a deployment chose (`CONTINUITY_AUDIT_RETENTION_DAYS`; the stack's
/// `AuditRetentionDays`): whole days, 1 to 3 650.
///
/// # Errors
/// `INVALID_REQUEST` naming the variable for anything else.
pub fn parse_audit_retention_days(text: &str) -> Result<u32> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|d| (1..=3650).contains(d))
        .ok_or_else(|| domain::Error::invalid_field("CONTINUITY_AUDIT_RETENTION_DAYS", "whole days, 1 to 3650"))
}

/// What the jobs work through, built once by [`crate::Services`].
pub struct Upkept {
    pub gates: crate::gates::GateService,
    pub engineering: crate::engineering::EngineeringService,
    pub search: crate::search::SearchService,
    pub backup: crate::backup::BackupService,
    pub governance: crate::governance::GovernanceService,
    pub notify: crate::notify::NotifyService,
}

impl MaintenanceService {
    pub(crate) fn new(backend: Backend, u: Upkept) -> Self {
        Self {
            backend,
            gates: u.gates,
            engineering: u.engineering,
            search: u.search,
            backup: u.backup,
            governance: u.governance,
            notify: u.notify,
            audit_retention_days: std::sync::Arc::new(std::sync::atomic::AtomicU32::new(retention_from_env())),
        }
    }

    /// How long audit records are kept before they are archived and pruned.
    pub fn audit_retention(&self) -> Duration {
        Duration::from_secs(u64::from(self.audit_retention_days.load(std::sync::atomic::Ordering::Relaxed)) * 86_400)
    }

    /// Keeps audit records `days` days (1 to 3 650) from the next run on.
    ///
    /// # Errors
    /// `INVALID_REQUEST` outside that range.
    pub fn set_audit_retention_days(&self, days: u32) -> Result<()> {
        let days = parse_audit_retention_days(&days.to_string())?;
        self.audit_retention_days.store(days, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Writes audit records about to be pruned to the tenant's blobs as one JSON-lines
    /// file, `audit-archive/{first}-{last}.jsonl` (epoch milliseconds of the first and
    /// last record): written again with the same name and content if a run is cut
    /// between the archive and the prune. Returns its path.
    async fn archive_audit(&self, tenant: &TenantId, old: &[domain::audit::AuditRecord]) -> Result<String> {
        let (Some(first), Some(last)) = (old.first(), old.last()) else { return Ok(String::new()) };
        let mut lines = Vec::new();
        for r in old {
            serde_json::to_writer(&mut lines, r).map_err(|e| domain::Error::internal(e.to_string()))?;
            lines.push(b'\n');
        }
        let path = format!("audit-archive/{}-{}.jsonl", first.at.0, last.at.0);
        self.backend.blobs.put(&ports::blob::BlobKey::new(tenant, &path)?, &lines).await?;
        Ok(path)
    }

    /// Runs the job once. The governance upkeep (the approval waits' heartbeats) is
    /// queued first, then each tenant is pruned on its own: one tenant's failure — an
    /// outage, a damaged record, a throttle — or a run cut short by its time limit never
    /// costs another tenant its pruning, nor anyone their heartbeat.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the tenant registry cannot be read (nothing else stops a run).
    pub async fn run(&self) -> Result<MaintenanceReport> {
        let now = self.backend.clock.now();
        let records = &self.backend.records;
        let mut report = MaintenanceReport::default();
        let (queued, not_queued) = self.queue_resume(WORKFLOW_IDLE).await?;
        report.resume_queued = queued;
        report.resume_not_queued = not_queued;
        // Work that failed for good, peeked once for every tenant's watch.
        let dead = self.backend.queue.dead_letters(WATCHED_DEAD_LETTERS).await.unwrap_or_else(|e| {
            tracing::warn!(code = %e.code, "the dead-letter queue was not read; the next run looks again");
            Vec::new()
        });
        for tenant in self.tenants().await? {
            report.tenants += 1;
            match self.watch(&tenant, &dead).await {
                Ok(told) => report.watch_told += told,
                Err(e) => tenant_failed(&tenant, &e, "watching"),
            }
            match self.prune(&tenant, now).await {
                Ok(p) => {
                    report.audit_pruned += p.audit;
                    report.sessions_expired += p.sessions;
                    report.personal_forgotten += p.forgotten;
                    report.turns_forgotten += p.turns;
                    report.gates_expired += p.gates;
                    report.notes_expired += p.notes;
                }
                Err(e) => {
                    report.tenants_failed += 1;
                    tenant_failed(&tenant, &e, "pruning");
                }
            }
        }
        match records.prune_expired(before(now, OAUTH_GRACE), MAX_PER_TENANT).await {
            Ok(n) => report.oauth_pruned = n,
            Err(e) => {
                report.oauth_failed = true;
                metrics::add(metrics::Counter::MaintenanceFailures, 1);
                tracing::warn!(code = %e.code, cause = ?e.internal, "the authorization server's pruning failed");
            }
        }
        tracing::info!(
            tenants = report.tenants,
            audit_pruned = report.audit_pruned,
            sessions_expired = report.sessions_expired,
            personal_forgotten = report.personal_forgotten,
            turns_forgotten = report.turns_forgotten,
            oauth_pruned = report.oauth_pruned,
            gates_expired = report.gates_expired,
            notes_expired = report.notes_expired,
            resume_queued = report.resume_queued,
            resume_not_queued = report.resume_not_queued,
            tenants_failed = report.tenants_failed,
            oauth_failed = report.oauth_failed,
            watch_told = report.watch_told,
            "maintenance run"
        );
        Ok(report)
    }

    /// The daily jobs (SPEC §9) over every tenant: the reindex
    /// ([`crate::search::SearchService::reindex`]) and the compaction of its backups
    /// ([`crate::backup::BackupService::compact`], once a tenant has
    /// [`COMPACT_AFTER_FILES`] files). Returns the summed reports. Each tenant runs on
    /// its own: one whose reindex or compaction fails is logged, counted
    /// (`tenants_failed`, `MaintenanceFailures`) and retried the next day, and the
    /// others still run.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the tenant registry cannot be read.
    pub async fn daily(&self) -> Result<DailyReport> {
        let mut total = DailyReport::default();
        for tenant in self.tenants().await? {
            total.tenants += 1;
            match self.daily_one(&tenant).await {
                Ok(one) => total.add(&one),
                Err(e) => {
                    total.tenants_failed += 1;
                    tenant_failed(&tenant, &e, "daily jobs");
                }
            }
        }
        tracing::info!(
            tenants = total.tenants,
            indexed = total.indexed,
            orphaned = total.orphaned,
            backup_files_merged = total.backup_files_merged,
            tenants_failed = total.tenants_failed,
            "daily run"
        );
        Ok(total)
    }

    /// One tenant's daily jobs: its reindex, then the compaction of its backups.
    ///
    /// # Errors
    /// The reindex's or the compaction's (`UNAVAILABLE`).
    pub async fn daily_one(&self, tenant: &TenantId) -> Result<DailyReport> {
        self.daily_one_within(tenant, None).await
    }

    /// [`Self::daily_one`] whose reindex stops once `budget` has passed; the compaction
    /// then waits for the run that finishes it.
    async fn daily_one_within(&self, tenant: &TenantId, budget: Option<Duration>) -> Result<DailyReport> {
        let r = self.search.reindex_within(tenant, false, &|_| {}, budget).await?;
        let mut report = DailyReport {
            tenants: 1,
            indexed: r.indexed,
            verified: r.verified,
            kept: r.kept,
            removed: r.removed,
            orphaned: r.orphaned,
            unfinished: usize::from(r.unfinished),
            ..DailyReport::default()
        };
        if !r.unfinished {
            let c = self.backup.compact(tenant, COMPACT_AFTER_FILES).await?;
            (report.backup_files_merged, report.backup_files_written) = (c.merged, c.written);
        }
        Ok(report)
    }

    /// The daily jobs fanned out (AWS): one [`KIND_DAILY`] message per tenant on the
    /// work queue, so each tenant's reindex and compaction run in an invocation of their
    /// own, are retried on their own and dead-lettered on their own — no invocation
    /// walks the region, and one large or failing tenant delays nobody. Returns
    /// (queued, not queued).
    ///
    /// # Errors
    /// `UNAVAILABLE` when the tenant registry cannot be read.
    pub async fn queue_daily(&self) -> Result<(usize, usize)> {
        let now = self.backend.clock.now();
        let day = now.0.div_euclid(86_400_000);
        let (mut queued, mut failed) = (0, 0);
        for tenant in self.tenants().await? {
            let message = ports::QueueMessage {
                tenant: tenant.clone(),
                kind: KIND_DAILY.to_owned(),
                // One run per tenant and day, however often the schedule fires.
                idempotency_key: format!("{KIND_DAILY}/{tenant}/{day}"),
                body: b"{}".to_vec(),
            };
            match self.backend.queue.send(&message).await {
                Ok(()) => queued += 1,
                Err(e) => {
                    failed += 1;
                    metrics::add(metrics::Counter::MaintenanceFailures, 1);
                    tracing::warn!(tenant = %tenant, code = %e.code, "daily jobs not queued; the schedule's retry queues them");
                }
            }
        }
        Ok((queued, failed))
    }

    /// Runs one tenant's queued daily jobs ([`KIND_DAILY`]).
    ///
    /// # Errors
    /// The jobs' (`UNAVAILABLE`: the message is retried, then dead-lettered, which
    /// alarms); a failure is also counted (`MaintenanceFailures`).
    pub async fn daily_from_queue(&self, message: &ports::QueueMessage) -> Result<DailyReport> {
        self.daily_from_queue_within(message, DAILY_BUDGET).await
    }

    /// [`Self::daily_from_queue`] with another budget than [`DAILY_BUDGET`]. A run that
    /// stops at it queues its continuation (`{"part": n}`, keyed `…/part-{n}`), which
    /// goes on where it stopped; the backups are compacted by the run that finishes.
    ///
    /// # Errors
    /// As [`Self::daily_from_queue`]; `UNAVAILABLE` when the continuation cannot be
    /// queued (the message is retried) or past [`MAX_DAILY_PARTS`].
    pub async fn daily_from_queue_within(&self, message: &ports::QueueMessage, budget: Duration) -> Result<DailyReport> {
        let part = serde_json::from_slice::<serde_json::Value>(&message.body)
            .ok()
            .and_then(|b| b.get("part").and_then(serde_json::Value::as_u64))
            .unwrap_or(1);
        let report = self
            .daily_one_within(&message.tenant, Some(budget))
            .await
            .inspect_err(|e| tenant_failed(&message.tenant, e, "daily jobs"))?;
        tracing::info!(
            tenant = %message.tenant,
            part,
            indexed = report.indexed,
            orphaned = report.orphaned,
            unfinished = report.unfinished > 0,
            "daily jobs"
        );
        if report.unfinished > 0 {
            if part >= MAX_DAILY_PARTS {
                let e = Error::unavailable(format!("the daily reindex did not finish in {MAX_DAILY_PARTS} runs"));
                tenant_failed(&message.tenant, &e, "daily jobs");
                return Err(e);
            }
            let base = message.idempotency_key.split("/part-").next().unwrap_or(&message.idempotency_key);
            let next = ports::QueueMessage {
                tenant: message.tenant.clone(),
                kind: KIND_DAILY.to_owned(),
                idempotency_key: format!("{base}/part-{}", part + 1),
                body: serde_json::json!({"part": part + 1}).to_string().into_bytes(),
            };
            self.backend.queue.send(&next).await?;
        }
        Ok(report)
    }

    /// The governance workflow's upkeep over every tenant
    /// ([`crate::governance::GovernanceService::resume`]): proposals idle for `idle` on
    /// their way are moved along, waits get their heartbeat (Step Functions) or, past
    /// their deadline, are escalated (embedded runner). Hourly with [`Self::run`];
    /// `continuity serve` also runs it every few seconds, which is the embedded runner's
    /// timer.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    ///
    /// One tenant's failure (logged, counted as a heartbeat failure) never stops the
    /// others'.
    pub async fn workflow(&self, idle: Duration) -> Result<crate::governance::Resumed> {
        let governance = &self.governance;
        let idle_before = before(self.backend.clock.now(), idle);
        let mut total = crate::governance::Resumed::default();
        for tenant in self.tenants().await? {
            match governance.resume(&tenant, idle_before).await {
                Ok(r) => total += r,
                Err(e) => {
                    metrics::add(metrics::Counter::HeartbeatFailures, 1);
                    tracing::warn!(tenant = %tenant, code = %e.code, cause = ?e.internal, "governance upkeep failed for a tenant");
                }
            }
        }
        if total != crate::governance::Resumed::default() {
            tracing::info!(?total, "governance workflow resumed");
        }
        Ok(total)
    }

    /// The hourly upkeep of the governance workflow, fanned out: one `governance.resume`
    /// message per tenant on the work queue, so each tenant's upkeep (restarts, resent
    /// decisions, Step Functions heartbeats) runs and retries on its own — one tenant's
    /// failure or a slow tenant never stops another's heartbeats, and no single
    /// invocation has to walk the whole region. Returns (queued, not queued).
    ///
    /// # Errors
    /// `UNAVAILABLE` when the tenant registry cannot be read.
    pub async fn queue_resume(&self, idle: Duration) -> Result<(usize, usize)> {
        let now = self.backend.clock.now();
        let body = serde_json::to_vec(&serde_json::json!({ "idle_before": before(now, idle).0 }))
            .map_err(|e| domain::Error::internal(e.to_string()))?;
        let (mut queued, mut failed) = (0, 0);
        for tenant in self.tenants().await? {
            let message = ports::QueueMessage {
                tenant: tenant.clone(),
                kind: KIND_RESUME.to_owned(),
                idempotency_key: format!("{KIND_RESUME}/{tenant}/{}", now.0),
                body: body.clone(),
            };
            match self.backend.queue.send(&message).await {
                Ok(()) => queued += 1,
                Err(e) => {
                    failed += 1;
                    metrics::add(metrics::Counter::HeartbeatFailures, 1);
                    tracing::warn!(tenant = %tenant, code = %e.code, "governance upkeep not queued; the next run queues it");
                }
            }
        }
        Ok((queued, failed))
    }

    /// Runs one tenant's queued upkeep ([`KIND_RESUME`]), counting the waits near their
    /// deadline for the `ApprovalWaitsNearTimeout` metric.
    ///
    /// # Errors
    /// The upkeep's (`UNAVAILABLE`: the message is retried, then dead-lettered).
    pub async fn resume_from_queue(&self, message: &ports::QueueMessage) -> Result<crate::governance::Resumed> {
        let idle_before = serde_json::from_slice::<serde_json::Value>(&message.body)
            .ok()
            .and_then(|v| v.get("idle_before")?.as_i64())
            .ok_or_else(|| domain::Error::invalid("a governance.resume message without idle_before"))?;
        let r = self.governance.resume(&message.tenant, Timestamp(idle_before)).await.inspect_err(|_| {
            metrics::add(metrics::Counter::HeartbeatFailures, 1);
        })?;
        metrics::add(metrics::Counter::ApprovalWaitsNearTimeout, r.near_timeout as u64);
        tracing::info!(tenant = %message.tenant, ?r, "governance upkeep");
        Ok(r)
    }

    /// Tells the tenant's channels what needs a person besides proposals: records newly
    /// in the review queue (`review.failed`) and its work newly dead-lettered
    /// (`health.alarm`) since the last run — each at most once a run, and nothing when
    /// nothing is new. How many events were emitted.
    async fn watch(&self, tenant: &TenantId, dead: &[ports::queue::DeadLetter]) -> Result<usize> {
        let mut told = 0;
        // The review queue: what is newer than the newest seen at the last run.
        let (queue, _) =
            crate::all_pages(WATCHED_REVIEW, |p| async move { self.backend.records.list_review(tenant, &p).await }).await?;
        let seen = self.notify.seen(tenant, "review").await?;
        let since = seen.first().and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
        let new: Vec<&domain::memory::Verification> = queue.iter().filter(|v| v.at.0 > since).collect();
        if let Some(newest) = new.iter().max_by_key(|v| v.at.0) {
            let text = format!(
                "{} wait in the review queue: stored, but search may miss them until they are retried or forgotten. \
                 The newest: {}.",
                queue.len(),
                newest.reason
            );
            let title = format!("{} record{} failed readback", new.len(), if new.len() == 1 { "" } else { "s" });
            self.notify.emit(tenant, EventKind::ReviewFailed, "review queue", &title, &text, Some("/dashboard/review")).await;
            self.notify.set_seen(tenant, "review", &[newest.at.0.to_string()]).await?;
            told += 1;
        }
        // Dead letters: by their message's idempotency key, as SQS keeps no time of death
        // (and shows a sample of at most 10 a peek).
        let mine: Vec<&ports::queue::DeadLetter> = dead.iter().filter(|d| d.message.tenant == *tenant).collect();
        let keys: Vec<String> = mine.iter().map(|d| d.message.idempotency_key.clone()).collect();
        let seen: BTreeSet<String> = self.notify.seen(tenant, "dead").await?.into_iter().collect();
        let new: Vec<&&ports::queue::DeadLetter> = mine.iter().filter(|d| !seen.contains(&d.message.idempotency_key)).collect();
        if !new.is_empty() {
            let mut kinds: Vec<&str> = new.iter().map(|d| d.message.kind.as_str()).collect();
            kinds.sort_unstable();
            kinds.dedup();
            let title = format!("{} background job{} failed for good", new.len(), if new.len() == 1 { "" } else { "s" });
            let text = format!(
                "Work of kind {} kept failing ({}) and was set aside in the dead-letter queue. Nothing else is retried \
                 until an operator looks: see the overview's work queue and the logs.",
                kinds.join(", "),
                new[0].reason
            );
            self.notify.emit(tenant, EventKind::HealthAlarm, "work queue", &title, &text, Some("/dashboard")).await;
            told += 1;
        }
        if !new.is_empty() {
            // Kept as a union (SQS shows a sample of at most 10 a peek): what was told
            // stays told, the newest first, at most [`WATCH_MEMORY`] keys.
            let mut remembered = keys;
            remembered.extend(seen.into_iter().filter(|k| !remembered.contains(k)).collect::<Vec<_>>());
            remembered.truncate(WATCH_MEMORY);
            self.notify.set_seen(tenant, "dead", &remembered).await?;
        }
        Ok(told)
    }

    /// Every tenant's id, from the tenant registry.
    async fn tenants(&self) -> Result<Vec<TenantId>> {
        let records = &self.backend.records;
        Ok(crate::all_pages(usize::MAX, |p| async move { records.list_tenants(&p).await }).await?.0)
    }

    /// One tenant's pruning: its ledger and stored call outcomes, expired session and
    /// personal memory, gates and sticky notes.
    async fn prune(&self, tenant: &TenantId, now: Timestamp) -> Result<Pruned> {
        let records = &self.backend.records;
        // The ledger past its retention: archived to the tenant's blobs, then pruned (the
        // same records: the oldest first, as many as were archived).
        let cutoff = before(now, self.audit_retention());
        let old = records.old_audit(tenant, cutoff, MAX_PER_TENANT).await?;
        let (audit, archive) = if old.is_empty() {
            (0, String::new())
        } else {
            let archive = self.archive_audit(tenant, &old).await?;
            (records.prune_audit(tenant, cutoff, old.len()).await?, archive)
        };
        // Kept outcomes of idempotent tool calls (the stdio bridge's replays) last a week.
        records.prune_calls(tenant, Timestamp(now.0 - crate::calls::RETENTION_MS), MAX_PER_TENANT).await?;
        // Session-scope memory past its time is deleted, and leaves the index with it.
        let expired_sessions = records.expire_session_memory(tenant, before(now, SESSION_TTL), MAX_PER_TENANT).await?;
        let sessions = expired_sessions.len();
        for m in &expired_sessions {
            self.search.unindex(tenant, &m.scope, &m.id).await?;
        }
        // Personal memory whose time to live ran out is forgotten: a tombstone, the text
        // erased, out of the index.
        let expired = records.expired_personal_memory(tenant, now, MAX_PER_TENANT).await?;
        let forgotten = expired.len();
        for m in expired {
            crate::tools::recall::forget(&self.backend, &self.search, m, domain::Id::new("maintenance")?).await?;
        }
        // So are conversation turns (found by their expiry, not by a scan of every turn).
        let expired_turns = records.expired_turns(tenant, now, MAX_PER_TENANT).await?;
        let turns = expired_turns.len();
        for t in &expired_turns {
            crate::tools::recall::forget_turn(&self.backend, &self.search, t, domain::Id::new("maintenance")?).await?;
        }
        if audit > 0 {
            // Pruning is recorded in the ledger it prunes (SPEC §9: never silently).
            let days = self.audit_retention().as_secs() / 86_400;
            let target = format!("{audit} records older than {days} days, archived to {archive}");
            let record = crate::audit::record(&self.backend, tenant, "maintenance", "audit.prune", Some(target), "ok");
            ports::records::AuditLog::append_audit(records, &record).await?;
        }
        let gates = self.gates.expire(tenant, MAX_PER_TENANT).await?;
        let notes = self.engineering.expire_notes(tenant, MAX_PER_TENANT).await?;
        // Sources' webhook deliveries are remembered a week (replays inside it refused).
        crate::sources::webhooks::prune_seen(
            &self.backend,
            tenant,
            now.0 - crate::sources::webhooks::SEEN_RETENTION_MS,
            MAX_PER_TENANT,
        )
        .await?;
        Ok(Pruned { audit, sessions, forgotten, turns, gates, notes })
    }
}

/// `CONTINUITY_AUDIT_RETENTION_DAYS`, or the default ([`AUDIT_RETENTION`]) when unset; a
/// value out of range is logged as an error and the default kept.
fn retention_from_env() -> u32 {
    let default = u32::try_from(AUDIT_RETENTION.as_secs() / 86_400).unwrap_or(7);
    match std::env::var("CONTINUITY_AUDIT_RETENTION_DAYS") {
        Ok(v) if !v.trim().is_empty() => parse_audit_retention_days(&v).unwrap_or_else(|e| {
            tracing::error!(value = %v, error = %e, "CONTINUITY_AUDIT_RETENTION_DAYS ignored; audit records are kept {default} days");
            default
        }),
        _ => default,
    }
}

/// One tenant's maintenance `job` failed: counted (`MaintenanceFailures`, which alarms)
/// and logged with the tenant; the other tenants' go on.
fn tenant_failed(tenant: &TenantId, e: &domain::Error, job: &str) {
    metrics::add(metrics::Counter::MaintenanceFailures, 1);
    tracing::warn!(tenant = %tenant, code = %e.code, cause = ?e.internal, job, "a tenant's maintenance failed; the others go on");
}
