//! Promotion to the fortress (`continuity tenant set --storage-tier promoted`, `continuity
//! tenant promote`, the admin API's `PATCH … {"storage_tier": "promoted"}`), and the
//! usage report that suggests it (`continuity tenant usage`, `GET …/usage`).
//!
//! A promotion (see `ports::fortress`):
//! 1. stores the tenant's [`Promotion`] record (`backfilling`): from then on every
//!    process mirrors the tenant's writes into the fortress (within
//!    [`MIRROR_REFRESH`]);
//! 2. **backfills**: scans the main store's partition of the tenant a page at a time,
//!    copying every record the fortress lacks or holds differently (the main store
//!    wins), and saves the scan's cursor after each page — an interrupted promotion (a
//!    crash, a run bounded by `max_records`) resumes where it stopped;
//! 3. once every process mirrors, **reconciles**: copies again what changed meanwhile
//!    and deletes from the fortress what the main store no longer holds;
//! 4. **verifies**: the SHA-256 of each record type in the fortress equals the main
//!    store's; only then is the tenant `promoted` (its storage tier and the record).
//!
//! Running it again on a promoted tenant reconciles and verifies again (after a mirrored
//! write failed, say). Reads fall back to the fortress as the chain says
//! (`EntityService::lookup`).

use domain::tenant::StorageTier;
use domain::{Error, ErrorCode, PageRequest, Result, TenantId};
use ports::fortress::{MIRROR_REFRESH, PART, Promotion, PromotionState};
use ports::items::{Condition, Item, ItemStore, REGISTRY_TENANT, Write};
use ports::records::{AuditLog, EntityStore};
use serde::Serialize;

use super::AdminService;
use crate::backup_records::PartCheck;

/// Records a promotion scans per page (and between two saves of its cursor).
const PAGE: u32 = 500;
/// The reconcile removes fortress records the main store lacks only when they are few:
/// more suggests the main store lost them (restore it first), not that they were deleted.
const MAX_PRUNE: u64 = 100;
/// Reconcile-and-compare rounds a run tries before saying the stores still differ (a
/// busy tenant writes during the comparison).
const VERIFY_ROUNDS: u32 = 3;

/// What a promotion run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromotionReport {
    /// `backfilling` (run again to go on) or `promoted`.
    pub state: PromotionState,
    /// Whether this run compared the fortress with the main store and found every record
    /// type equal (false while backfilling, or when they differ: run again).
    pub verified: bool,
    /// Why the run stopped short of verifying, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Records scanned so far (copied or found equal), over every run.
    pub copied: u64,
    /// Records this run wrote to the fortress.
    pub written: u64,
    /// Records the reconcile deleted from the fortress (gone from the main store).
    pub removed: u64,
    /// Each record type's hash in the fortress against the main store's (after the
    /// reconcile; empty while backfilling).
    pub parts: Vec<PartCheck>,
}

/// How a tenant uses its store, and whether promotion is suggested.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsageReport {
    pub tenant: String,
    pub storage_tier: StorageTier,
    pub entities: u64,
    /// Audited reads (tool and capability calls that read) in the last 24 hours.
    pub reads_last_day: u64,
    /// Audited writes in the last 24 hours.
    pub writes_last_day: u64,
    pub suggest_promotion: bool,
    pub reason: String,
}

/// Promotion is suggested from this many entities…
pub const SUGGEST_ENTITIES: u64 = 10_000;
/// …or this many reads a day.
pub const SUGGEST_READS_PER_DAY: u64 = 5_000;
/// The most audit records the usage report reads (a day's worth on a busy tenant).
const USAGE_SCAN: u64 = 200_000;

/// Copies a scanned record into the fortress unless the fortress holds it already — or
/// holds a newer version (a mirrored write that came after the scan read it).
async fn copy_if_different(fortress: &dyn ItemStore, item: &Item) -> Result<bool> {
    for _ in 0..3 {
        let existing = fortress.get(&item.tenant, &item.part, &item.sk).await?;
        let condition = match &existing {
            None => Condition::Absent,
            Some(e) if e.version > item.version => return Ok(false),
            Some(e) if e.version == item.version && e.body == item.body => return Ok(false),
            Some(e) => Condition::Version(e.version),
        };
        match fortress.write(vec![Write::Put { item: item.clone(), condition }]).await {
            Ok(()) => return Ok(true),
            // A mirrored write moved it meanwhile: look again.
            Err(e) if e.code == ErrorCode::Conflict => {}
            Err(e) => return Err(e),
        }
    }
    Err(Error::unavailable(format!("{} {} kept changing in the fortress; run the promotion again", item.part, item.sk)))
}

impl AdminService {
    async fn promotion(&self, tenant: &TenantId) -> Result<Option<Promotion>> {
        match self.backend.records.items().get(REGISTRY_TENANT, PART, tenant.as_str()).await? {
            Some(i) => {
                let mut p: Promotion = serde_json::from_slice(&i.body).map_err(Error::internal)?;
                p.version = i.version;
                Ok(Some(p))
            }
            None => Ok(None),
        }
    }

    async fn save_promotion(&self, p: &Promotion) -> Result<Promotion> {
        let (version, condition) =
            if p.version == 0 { (1, Condition::Absent) } else { (p.version + 1, Condition::Version(p.version)) };
        let mut stored = p.clone();
        stored.version = version;
        let body = serde_json::to_vec(&stored).map_err(Error::internal)?;
        let item = Item { tenant: REGISTRY_TENANT.into(), part: PART.into(), sk: p.tenant.clone(), version, body };
        self.backend.records.items().write(vec![Write::Put { item, condition }]).await.map_err(|e| {
            if e.code == ErrorCode::Conflict {
                Error::conflict(format!("tenant {}: another promotion run is under way; wait for it", p.tenant))
            } else {
                e
            }
        })?;
        Ok(stored)
    }

    /// Promotes `tenant` to the fortress, or goes on with a promotion under way (see the
    /// module notes). A run copies at most `max_records` (all when `None`) and then
    /// answers `backfilling`; `progress` gets the records scanned so far after each page.
    ///
    /// # Errors
    /// `INVALID_REQUEST` when this deployment has no fortress; `NOT_FOUND` for an unknown
    /// tenant; `CONFLICT` when another run is under way; `UNAVAILABLE`.
    pub async fn promote_tenant(
        &self,
        tenant: &TenantId,
        max_records: Option<u64>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<PromotionReport> {
        let Some(fortress) = self.backend.fortress_writer.as_ref() else {
            return Err(Error::invalid_field(
                "storage_tier",
                "this deployment has no fortress (on AWS: the stack's FortressTable, CONTINUITY_FORTRESS_TABLE)",
            ));
        };
        let fortress = fortress.clone();
        self.show_tenant(tenant).await?;
        let now = self.backend.clock.now();
        let mut p = match self.promotion(tenant).await? {
            Some(p) => p,
            None => {
                let p = Promotion {
                    tenant: tenant.to_string(),
                    state: PromotionState::Backfilling,
                    cursor: None,
                    copied: 0,
                    backfilled: false,
                    started_at: now,
                    finished_at: None,
                    version: 0,
                };
                let p = self.save_promotion(&p).await?;
                self.audited(tenant, "admin:tenant.promote", tenant.as_str(), "backfilling: writes mirrored to the fortress")
                    .await;
                p
            }
        };
        let main = self.backend.records.items().clone();
        let mut report = PromotionReport {
            state: p.state,
            verified: false,
            note: None,
            copied: p.copied,
            written: 0,
            removed: 0,
            parts: Vec::new(),
        };
        // Backfill, resumable.
        if p.state == PromotionState::Backfilling && !p.backfilled {
            let mut done_this_run = 0u64;
            loop {
                let budget = max_records.map_or(u64::from(PAGE), |m| m.saturating_sub(done_this_run).min(u64::from(PAGE)));
                if budget == 0 {
                    report.copied = p.copied;
                    return Ok(report);
                }
                let size = u32::try_from(budget).unwrap_or(PAGE);
                let (page, next) = main.scan_tenant(tenant.as_str(), p.cursor.as_deref(), size).await?;
                for item in &page {
                    if copy_if_different(fortress.as_ref(), item).await? {
                        report.written += 1;
                    }
                }
                let n = page.len() as u64;
                done_this_run += n;
                p.copied += n;
                p.cursor = next.clone();
                p.backfilled = next.is_none();
                p = self.save_promotion(&p).await?;
                progress(p.copied);
                if next.is_none() {
                    break;
                }
            }
            if max_records.is_some() {
                // A bounded run (the admin API's) stops here: the reconcile and the
                // comparison read the whole tenant, the next run does them.
                report.copied = p.copied;
                report.note = Some("backfilled; the next run reconciles and verifies".into());
                return Ok(report);
            }
        }
        // Every process mirrors once it has re-read the promotion records.
        let since = std::time::Duration::from_millis(u64::try_from(self.backend.clock.now().0 - p.started_at.0).unwrap_or(0));
        if since < MIRROR_REFRESH + std::time::Duration::from_secs(1) {
            self.backend.clock.sleep(MIRROR_REFRESH + std::time::Duration::from_secs(1) - since).await;
        }
        for round in 1..=VERIFY_ROUNDS {
            // Reconcile: what changed during the backfill, both ways.
            report.written += self.copy_all(main.as_ref(), fortress.as_ref(), tenant).await?;
            match self.prune(main.as_ref(), fortress.as_ref(), tenant).await? {
                Ok(n) => report.removed += n,
                Err(why) => {
                    report.copied = p.copied;
                    report.note = Some(why);
                    return Ok(report);
                }
            }
            // Verify by hash, type by type.
            let ours = crate::backup_records::partition_digests(main.as_ref(), tenant).await?;
            let theirs = crate::backup_records::partition_digests(fortress.as_ref(), tenant).await?;
            let types: std::collections::BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
            report.parts = types
                .into_iter()
                .map(|t| PartCheck {
                    part: t.clone(),
                    records: ours.get(t).map_or(0, |d| d.records),
                    matches: ours.get(t) == theirs.get(t),
                })
                .collect();
            if report.parts.iter().all(|c| c.matches) {
                report.verified = true;
                break;
            }
            tracing::info!(tenant = %tenant, round, "fortress: the stores differ after a reconcile (writes go on); again");
        }
        report.copied = p.copied;
        if !report.verified {
            // Writes went on while it ran: the next run catches up.
            self.audited(tenant, "admin:tenant.promote", tenant.as_str(), "verification: the fortress differs; run again").await;
            report.note = Some("the fortress still differs (the tenant kept writing): run again".into());
            return Ok(report);
        }
        if p.state != PromotionState::Promoted {
            p.state = PromotionState::Promoted;
            p.finished_at = Some(self.backend.clock.now());
            self.save_promotion(&p).await?;
        }
        if self.show_tenant(tenant).await?.storage_tier != StorageTier::Promoted {
            self.modify_tenant(tenant, "admin:tenant.promote", tenant.as_str(), |t| {
                t.storage_tier = StorageTier::Promoted;
                Ok(())
            })
            .await?;
        }
        report.state = PromotionState::Promoted;
        Ok(report)
    }

    /// Copies every record of the tenant the fortress lacks or holds older; how many.
    async fn copy_all(&self, main: &dyn ItemStore, fortress: &dyn ItemStore, tenant: &TenantId) -> Result<u64> {
        let mut written = 0;
        let mut cursor: Option<String> = None;
        loop {
            let (page, next) = main.scan_tenant(tenant.as_str(), cursor.as_deref(), PAGE).await?;
            for item in &page {
                if copy_if_different(fortress, item).await? {
                    written += 1;
                }
            }
            match next {
                Some(c) => cursor = Some(c),
                None => return Ok(written),
            }
        }
    }

    /// Removes from the fortress the tenant's records the main store no longer holds —
    /// unless they are many ([`MAX_PRUNE`]), which says the main store lost them: then
    /// nothing is removed and the reason is returned (restore the main store first).
    async fn prune(
        &self,
        main: &dyn ItemStore,
        fortress: &dyn ItemStore,
        tenant: &TenantId,
    ) -> Result<std::result::Result<u64, String>> {
        let mut gone = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let (page, next) = fortress.scan_tenant(tenant.as_str(), cursor.as_deref(), PAGE).await?;
            for item in page {
                if main.get(&item.tenant, &item.part, &item.sk).await?.is_none() {
                    gone.push(item);
                    if gone.len() as u64 > MAX_PRUNE {
                        return Ok(Err(format!(
                            "the fortress holds more than {MAX_PRUNE} records of {tenant} the main store lacks: restore the main store (`continuity restore`) before promoting again; nothing was removed"
                        )));
                    }
                }
            }
            match next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        let mut removed = 0;
        for item in gone {
            let w =
                Write::Delete { tenant: item.tenant, part: item.part, sk: item.sk, condition: Condition::Version(item.version) };
            match fortress.write(vec![w]).await {
                Ok(()) => removed += 1,
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Ok(removed))
    }

    /// How `tenant` uses its store (entities, audited reads and writes in the last 24
    /// hours) and whether promotion to the fortress is suggested: from
    /// [`SUGGEST_ENTITIES`] entities or [`SUGGEST_READS_PER_DAY`] reads a day.
    ///
    /// # Errors
    /// `NOT_FOUND`; `UNAVAILABLE`.
    pub async fn usage(&self, tenant: &TenantId) -> Result<UsageReport> {
        let t = self.show_tenant(tenant).await?;
        let records = &self.backend.records;
        let mut entities = 0u64;
        let mut page = PageRequest::first(500);
        loop {
            let p = records.list_entities(tenant, None, &page).await?;
            entities += p.items.len() as u64;
            match p.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => break,
            }
        }
        let day_ago = self.backend.clock.now().0 - 24 * 3600 * 1000;
        let (mut reads, mut writes, mut seen) = (0u64, 0u64, 0u64);
        let mut page = PageRequest::first(500);
        'ledger: loop {
            let p = records.list_audit(tenant, &page).await?;
            for r in &p.items {
                seen += 1;
                if r.at.0 < day_ago || seen > USAGE_SCAN {
                    break 'ledger;
                }
                let called = r.action.strip_prefix("tool:").or_else(|| r.action.strip_prefix("capability:"));
                if let Some(name) = called {
                    let capability = crate::capabilities::typed::find_any(name).map(|e| &e.spec);
                    match capability {
                        Some(c) if !c.read_only => writes += 1,
                        _ => reads += 1,
                    }
                }
            }
            match p.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => break,
            }
        }
        let (suggest, reason) = if t.storage_tier == StorageTier::Promoted {
            (false, "promoted already".to_owned())
        } else if entities >= SUGGEST_ENTITIES {
            (true, format!("{entities} entities (promotion is suggested from {SUGGEST_ENTITIES})"))
        } else if reads >= SUGGEST_READS_PER_DAY {
            (true, format!("{reads} reads in the last day (promotion is suggested from {SUGGEST_READS_PER_DAY})"))
        } else {
            (
                false,
                format!(
                    "{entities} entities and {reads} reads a day are below the thresholds ({SUGGEST_ENTITIES} entities, {SUGGEST_READS_PER_DAY} reads a day)"
                ),
            )
        };
        Ok(UsageReport {
            tenant: tenant.to_string(),
            storage_tier: t.storage_tier,
            entities,
            reads_last_day: reads,
            writes_last_day: writes,
            suggest_promotion: suggest,
            reason,
        })
    }
}
