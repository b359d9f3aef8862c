//! The maintenance job (SPEC §9) on both backends: audit records beyond the retention
//! are pruned (and the pruning itself is audited), stale session-scope memory expires
//! while other scopes stay, expired OAuth codes and `jti`s past their grace go, live ones
//! stay; a second run finds nothing more to do. Each backend gets a store of its own so
//! the job never touches what concurrent tests keep in the shared table.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use domain::audit::AuditRecord;
use domain::memory::{GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType};
use domain::oauth::{AuthCode, Grant};
use domain::principal::Scopes;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{Id, PageRequest, Timestamp};
use ports::oauth::OAuthStore;
use ports::records::{AuditLog, Expect, MemoryStore};
use ports::{Backend, SystemClock};
use services::Services;

const DAY: i64 = 24 * 3600 * 1000;

fn memory(t: &domain::TenantId, id: &str, scope: MemoryScope, updated: Timestamp) -> MemoryEntry {
    MemoryEntry {
        tenant: t.clone(),
        id: Id::new(id).unwrap(),
        memory_type: MemoryType::Personal,
        scope,
        kind: "context".into(),
        title: id.into(),
        body: "b".into(),
        state: GovernanceState::Active,
        lineage: Lineage::default(),
        created_by: Id::new("u1").unwrap(),
        created_at: updated,
        updated_at: updated,
        version: 0,
        occurred_at: None,
        expires_at: None,
        metadata: None,
    }
}

/// An embedded home with two tenants, `tenant-a` and `tenant-b`.
async fn two_tenants() -> (tempfile::TempDir, Backend, Services, domain::TenantId, domain::TenantId) {
    let dir = tempfile::tempdir().unwrap();
    let backend = store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap();
    let s = Services::new(backend.clone());
    let (a, b) = (domain::TenantId::new("tenant-a").unwrap(), domain::TenantId::new("tenant-b").unwrap());
    for t in [&a, &b] {
        s.admin.create_tenant(t.clone(), PlanTier::Starter, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    }
    (dir, backend, s, a, b)
}

/// Damages tenant A's records matching `parts` (an SQL condition on `part`) in the
/// home's database, so reading them fails; returns how many.
fn damage(dir: &tempfile::TempDir, parts: &str) -> usize {
    let db = rusqlite::Connection::open(dir.path().join("continuity.db")).unwrap();
    db.execute(&format!("UPDATE items SET body = X'00ff' WHERE tenant = 'tenant-a' AND {parts}"), []).unwrap()
}

async fn run(backend: Backend) {
    let s = Services::new(backend.clone());
    let now = backend.clock.now();
    let t = contract::fresh_tenant("maint");
    s.admin.create_tenant(t.clone(), PlanTier::Starter, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let audit = |id: &str, at: i64| AuditRecord {
        tenant: t.clone(),
        id: Id::new(id).unwrap(),
        at: Timestamp(at),
        actor: "a".into(),
        action: "tool:x".into(),
        target: None,
        outcome: "ok".into(),
        request_id: None,
        via: None,
    };
    let old: Vec<AuditRecord> = (0..30).map(|i| audit(&format!("old{i}"), now.0 - 8 * DAY - i)).collect();
    backend.records.append_audits(&old).await.unwrap();
    backend.records.append_audits(&[audit("new1", now.0 - DAY), audit("new2", now.0)]).await.unwrap();
    let r = &backend.records;
    r.put_memory(&memory(&t, "s-old", MemoryScope::Session("a".into()), Timestamp(now.0 - 2 * DAY)), Expect::Absent)
        .await
        .unwrap();
    r.put_memory(&memory(&t, "s-new", MemoryScope::Session("b".into()), now), Expect::Absent).await.unwrap();
    // The stale session entry is in the index too (where there is one): it must leave it.
    let stale_scope = MemoryScope::Session("a".into());
    let indexed = s
        .search
        .index(services::search::IndexRequest {
            tenant: &t,
            scope: &stale_scope,
            kind: ports::search::DocKind::Memory,
            doc: &Id::new("s-old").unwrap(),
            title: "s-old",
            body: "a stale session note",
            at: Timestamp(now.0 - 2 * DAY),
            occurred: None,
        })
        .await
        .unwrap();
    if indexed.is_some() {
        assert_eq!(backend.search.doc_ids(&t, &stale_scope, 10).await.unwrap().len(), 1);
    }
    r.put_memory(&memory(&t, "p-old", MemoryScope::Personal("u1".into()), Timestamp(now.0 - 30 * DAY)), Expect::Absent)
        .await
        .unwrap();
    let grant = Grant {
        tenant: t.clone(),
        principal: Id::new("u1").unwrap(),
        client_id: Id::new("c1").unwrap(),
        scopes: Scopes::parse("mcp:tools").unwrap(),
        resource: "https://api.example.com/mcp".into(),
        teams: vec![],
        projects: vec![],
    };
    let code = |expires: i64| AuthCode {
        grant: grant.clone(),
        redirect_uri: "http://127.0.0.1/cb".into(),
        code_challenge: "c".into(),
        expires_at: Timestamp(expires),
        redeemed_at: None,
        family: None,
        redirect_uri_explicit: true,
    };
    r.create_code("expired-long-ago", &code(now.0 - 3 * DAY)).await.unwrap();
    r.create_code("expired-just-now", &code(now.0 - 1000)).await.unwrap();
    r.create_code("live", &code(now.0 + 600_000)).await.unwrap();
    assert!(r.claim_jti("https://idp.example", "old-jti", Timestamp(now.0 - 2 * DAY)).await.unwrap());

    let report = s.maintenance.run().await.unwrap();
    assert!(report.tenants >= 1);
    assert_eq!(report.audit_pruned, 30, "{report:?}");
    assert_eq!(report.sessions_expired, 1, "{report:?}");
    assert_eq!(report.oauth_pruned, 2, "{report:?}");

    let ledger = r.list_audit(&t, &PageRequest::first(100)).await.unwrap().items;
    let ids: Vec<&str> = ledger.iter().map(|a| a.id.as_str()).collect();
    // The two recent records, the pruning's own record and the tenant's creation.
    assert_eq!(ledger.len(), 4, "{ids:?}");
    assert!(ids.contains(&"new1") && ids.contains(&"new2"));
    assert!(ledger.iter().any(|a| a.action == "admin:tenant.create"), "{ids:?}");
    assert!(ledger.iter().any(|a| a.action == "audit.prune" && a.target.as_deref().unwrap_or("").starts_with("30 records")));
    // What was pruned was archived first, to the tenant's blobs: the 30 records, oldest first.
    let archives = backend.blobs.list(&t, "audit-archive/", None, 10).await.unwrap();
    assert_eq!(archives.len(), 1, "{archives:?}");
    let lines: Vec<AuditRecord> = String::from_utf8(backend.blobs.get(&archives[0]).await.unwrap().unwrap())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut expected = old.clone();
    expected.sort_by_key(|a| a.at);
    assert_eq!(lines, expected, "exactly the pruned records");
    let prune = ledger.iter().find(|a| a.action == "audit.prune").unwrap();
    assert!(prune.target.as_deref().unwrap().ends_with(&format!("archived to {}", archives[0].path())), "{prune:?}");
    // The retention is the deployment's: whole days, 1 to 3 650.
    assert_eq!(s.maintenance.audit_retention().as_secs(), 7 * 86_400);
    for bad in [0, 3651] {
        assert_eq!(s.maintenance.set_audit_retention_days(bad).unwrap_err().code, domain::ErrorCode::InvalidRequest);
    }
    for bad in ["", "seven", "0", "-1", "1.5"] {
        assert!(services::maintenance::parse_audit_retention_days(bad).is_err(), "{bad:?}");
    }
    assert_eq!(services::maintenance::parse_audit_retention_days(" 90 ").unwrap(), 90);
    assert!(r.get_memory(&t, &Id::new("s-old").unwrap()).await.unwrap().is_none());
    assert!(r.get_memory(&t, &Id::new("s-new").unwrap()).await.unwrap().is_some());
    assert!(r.get_memory(&t, &Id::new("p-old").unwrap()).await.unwrap().is_some(), "only session scope expires");
    let sessions = r.list_memory(&t, &MemoryScope::Session("a".into()), &PageRequest::first(10)).await.unwrap();
    assert!(sessions.items.is_empty(), "the scope index goes with the entry");
    assert!(backend.search.doc_ids(&t, &stale_scope, 10).await.unwrap().is_empty(), "and so does its search index entry");
    assert!(r.get_code("expired-long-ago").await.unwrap().is_none());
    assert!(r.get_code("expired-just-now").await.unwrap().is_some(), "within the grace a reused code is still recognised");
    assert!(r.get_code("live").await.unwrap().is_some());
    assert!(r.claim_jti("https://idp.example", "old-jti", Timestamp(now.0 + DAY)).await.unwrap(), "the pruned jti is gone");

    let again = s.maintenance.run().await.unwrap();
    assert_eq!((again.audit_pruned, again.sessions_expired), (0, 0), "{again:?}");

    // The daily jobs fanned out (as on AWS): one message per tenant, run by the work
    // queue's consumer — a KB document written straight to the store gets indexed.
    let kb = domain::spine::KbDocument {
        tenant: t.clone(),
        id: Id::new("kb-restored").unwrap(),
        scope: MemoryScope::Org,
        title: "Escalation matrix".into(),
        body: "Page the duty manager after 30 minutes.".into(),
        source: None,
        created_at: Timestamp(1),
    };
    ports::records::LibraryStore::put_kb_document(r, &kb).await.unwrap();
    let (queued, not_queued) = s.maintenance.queue_daily().await.unwrap();
    assert!(queued >= 1 && not_queued == 0, "{queued} {not_queued}");
    continuity_tests::drain(&s).await;
    if indexed.is_some() {
        let docs = backend.search.doc_ids(&t, &MemoryScope::Org, 10).await.unwrap();
        assert!(docs.iter().any(|d| d.as_str() == "kb-restored"), "the queued daily run reindexed it: {docs:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded() {
    let dir = tempfile::tempdir().unwrap();
    run(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws() {
    let records = continuity_tests::aws::fresh_records("maint").await;
    run(Backend { records, ..continuity_tests::aws::backend().await }).await;
}

/// The hourly upkeep of the governance workflow is fanned out, one queue message per
/// tenant, so one tenant's failure never stops another's: here tenant A's proposal
/// records are damaged in the database (its upkeep fails and is retried by the queue),
/// while tenant B's stalled proposal is moved along by its own message.
#[tokio::test]
async fn one_tenants_failing_upkeep_does_not_stop_anothers() {
    use domain::proposal::{Proposal, ProposalState};
    use ports::records::ProposalStore;
    let (dir, backend, s, a, b) = two_tenants().await;
    let now = backend.clock.now();
    for t in [&a, &b] {
        // A proposal a crash stopped before triage: `pending`, idle.
        let p = Proposal {
            tenant: t.clone(),
            id: Id::new("stalled-1").unwrap(),
            kind: "memory:decision".into(),
            title: "Escalations go to the account owner".into(),
            body: "Escalations of enterprise accounts go to the account owner first.".into(),
            supersedes: None,
            suggested_supersede: None,
            state: ProposalState::Pending,
            score: None,
            decision_reason: None,
            proposed_by: Id::new("agent-1").unwrap(),
            proposed_via: None,
            source_session: None,
            origin: None,
            wait: None,
            action: None,
            entity: None,
            detected: Vec::new(),
            created_at: Timestamp(now.0 - 3_600_000),
            updated_at: Timestamp(now.0 - 3_600_000),
            version: 1,
        };
        backend.records.create_proposal(&p).await.unwrap();
    }
    // Damage tenant A's proposal records: listing them fails.
    assert!(damage(&dir, "part IN ('proposal', 'proposal_by_state')") >= 2);
    assert!(backend.records.list_proposals(&a, Some(ProposalState::Pending), &PageRequest::first(10)).await.is_err());

    // The hourly run queues one message per tenant instead of walking them itself.
    let report = s.maintenance.run().await.unwrap();
    assert_eq!((report.resume_queued, report.resume_not_queued), (2, 0), "{report:?}");
    let (queued, _) = s.maintenance.queue_resume(std::time::Duration::ZERO).await.unwrap();
    assert_eq!(queued, 2);
    // The consumer: A's messages fail (and stay queued for retry), B's succeed.
    let mut rounds = 0;
    loop {
        rounds += 1;
        s.consumer.drain_once(std::time::Duration::from_millis(50), std::time::Duration::ZERO).await.unwrap();
        let p = backend.records.get_proposal(&b, &Id::new("stalled-1").unwrap()).await.unwrap().unwrap();
        if p.state != ProposalState::Pending {
            assert!(
                matches!(p.state, ProposalState::Written | ProposalState::AwaitingApproval | ProposalState::Rejected),
                "B's proposal went through triage: {:?}",
                p.state
            );
            break;
        }
        assert!(rounds < 50, "tenant B's upkeep never ran");
        tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    }
    // Tenant A's upkeep failed without touching B's, and is still waiting to be retried.
    let a_pending = backend.queue.receive(10, std::time::Duration::from_secs(1)).await.unwrap();
    assert!(
        a_pending.iter().all(|d| d.message.tenant == a && d.message.kind == services::maintenance::KIND_RESUME),
        "only A's messages remain"
    );
    // Serve's own timer walks the tenants in one pass: A's failure is logged and B's still runs.
    assert!(s.maintenance.workflow(std::time::Duration::ZERO).await.is_ok());
}

/// The hourly run queues every tenant's governance upkeep before it prunes anything, and
/// prunes each tenant on its own: here tenant A's memory records are damaged in the
/// database, so A's pruning fails — and still A gets its upkeep message, B is pruned,
/// the run succeeds, and the failure is counted.
#[tokio::test]
async fn a_tenant_whose_pruning_fails_still_gets_its_upkeep_and_the_others_are_pruned() {
    let (dir, backend, s, a, b) = two_tenants().await;
    let now = backend.clock.now();
    for t in [&a, &b] {
        let stale = memory(t, "s-old", MemoryScope::Session("a".into()), Timestamp(now.0 - 2 * DAY));
        backend.records.put_memory(&stale, Expect::Absent).await.unwrap();
    }
    // Damage tenant A's memory index: reading its session memory fails.
    assert!(damage(&dir, "part = 'memory_by_scope'") >= 1);

    let report = s.maintenance.run().await.expect("one tenant's failure does not fail the run");
    assert_eq!((report.tenants, report.tenants_failed), (2, 1), "{report:?}");
    assert_eq!(report.sessions_expired, 1, "B's stale session memory expired: {report:?}");
    assert!(backend.records.get_memory(&b, &Id::new("s-old").unwrap()).await.unwrap().is_none());
    // Both tenants' upkeep was queued, A's included.
    assert_eq!((report.resume_queued, report.resume_not_queued), (2, 0), "{report:?}");
    let queued = backend.queue.receive(10, std::time::Duration::from_secs(1)).await.unwrap();
    let tenants: std::collections::BTreeSet<_> = queued
        .iter()
        .filter(|d| d.message.kind == services::maintenance::KIND_RESUME)
        .map(|d| d.message.tenant.clone())
        .collect();
    assert_eq!(tenants, [a, b].into_iter().collect(), "every tenant's upkeep is on the queue");
}

/// The daily jobs run each tenant on its own: one whose reindex cannot read its memory
/// is counted and the other is still reindexed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_whose_daily_jobs_fail_costs_no_other_tenant_its_reindex() {
    let (dir, backend, s, a, b) = two_tenants().await;
    for t in [&a, &b] {
        // A KB document written straight to the store (as a restore does): not indexed.
        let doc = domain::spine::KbDocument {
            tenant: t.clone(),
            id: Id::new("kb-restored").unwrap(),
            scope: MemoryScope::Org,
            title: "Escalation matrix".into(),
            body: "Page the duty manager after 30 minutes.".into(),
            source: None,
            created_at: Timestamp(1),
        };
        ports::records::LibraryStore::put_kb_document(&backend.records, &doc).await.unwrap();
        backend.records.put_memory(&memory(t, "m1", MemoryScope::Org, Timestamp(1)), Expect::Absent).await.unwrap();
    }
    // Damage tenant A's memory: its reindex cannot read it.
    assert!(damage(&dir, "part LIKE 'memory%'") >= 1);

    let report = s.maintenance.daily().await.expect("one tenant's failure does not fail the run");
    assert_eq!((report.tenants, report.tenants_failed), (2, 1), "{report:?}");
    assert_eq!(report.indexed, 2, "B's KB document and memory were indexed: {report:?}");
}

/// A tenant whose daily reindex does not fit one run (#37: the pipeline function stops
/// at 60 s): each queued run stops at its budget — here none, so one record a run — and
/// queues its continuation, which goes on where it stopped; the run that finishes
/// compacts the backups. Every record ends up indexed, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daily_reindex_too_long_for_one_run_goes_on_in_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let backend = store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap();
    let s = Services::new(backend.clone());
    let t = domain::TenantId::new("large").unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Engineering, Industry::Saas).await.unwrap();
    for i in 0..3 {
        let kb = domain::spine::KbDocument {
            tenant: t.clone(),
            id: Id::new(format!("kb-{i}")).unwrap(),
            scope: MemoryScope::Org,
            title: format!("Runbook {i}"),
            body: format!("Step {i}: page the duty manager."),
            source: None,
            created_at: Timestamp(1),
        };
        ports::records::LibraryStore::put_kb_document(&backend.records, &kb).await.unwrap();
    }
    let kind = services::maintenance::KIND_DAILY;
    let mut message = ports::QueueMessage {
        tenant: t.clone(),
        kind: kind.to_owned(),
        idempotency_key: format!("{kind}/{t}/20000"),
        body: b"{}".to_vec(),
    };
    let mut runs = Vec::new();
    loop {
        let r = s.maintenance.daily_from_queue_within(&message, Duration::ZERO).await.unwrap();
        runs.push((r.indexed, r.kept, r.unfinished, r.backup_files_merged + r.backup_files_written));
        let queued = backend.queue.receive(10, Duration::from_secs(30)).await.unwrap();
        if r.unfinished == 0 {
            assert!(queued.is_empty(), "a finished run queues nothing: {queued:?}");
            break;
        }
        assert_eq!(queued.len(), 1, "one continuation");
        let next = queued.into_iter().next().unwrap();
        backend.queue.ack(&next.receipt).await.unwrap();
        assert_eq!(next.message.kind, kind);
        let part = runs.len() + 1;
        assert_eq!(next.message.idempotency_key, format!("{kind}/{t}/20000/part-{part}"));
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&next.message.body).unwrap(), serde_json::json!({"part": part}));
        message = next.message;
        assert!(runs.len() < 10, "the continuations must end: {runs:?}");
    }
    // One record a run, then a run with nothing left to do, which compacts.
    let done: Vec<(usize, usize, usize)> = runs.iter().map(|r| (r.0, r.1, r.2)).collect();
    assert_eq!(done, [(1, 0, 1), (1, 1, 1), (1, 2, 1), (0, 3, 0)], "{runs:?}");
    let docs = backend.search.doc_ids(&t, &MemoryScope::Org, 10).await.unwrap();
    assert_eq!(docs.iter().map(|d| d.as_str()).collect::<Vec<_>>(), ["kb-0", "kb-1", "kb-2"]);
}
