//! The maintenance Lambda driven with its sample events over an embedded backend: the
//! hourly job prunes an audit record beyond the retention and keeps a recent one; the
//! heartbeat schedule queues every tenant's governance upkeep and prunes nothing; the
//! daily schedule queues one run per tenant, whose reindex and compaction the pipeline
//! consumer runs (a failing one is retried and dead-lettered on its own).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use domain::audit::AuditRecord;
use domain::{Id, PageRequest, TenantId, Timestamp};
use ports::records::AuditLog;

#[tokio::test]
async fn the_scheduled_event_runs_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let demo = TenantId::new("demo").unwrap();
    let now = s.backend.clock.now().0;
    s.backend.records.append_audits(&[audit(&demo, "old", now - 10 * 86_400_000), audit(&demo, "recent", now)]).await.unwrap();
    let report = continuity_maintenance::handle(&s, &continuity_tests::event("maintenance-schedule.json")).await.unwrap();
    assert_eq!(report["audit_pruned"], 1, "{report}");
    let ledger = s.backend.records.list_audit(&demo, &PageRequest::first(10)).await.unwrap().items;
    assert!(ledger.iter().all(|a| a.id.as_str() != "old"));
    assert!(ledger.iter().any(|a| a.id.as_str() == "recent"));
}

#[tokio::test]
async fn the_daily_schedule_queues_each_tenants_reindex_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let demo = TenantId::new("demo").unwrap();
    // A KB document written straight to the store (as a restore does) is not indexed…
    ports::records::LibraryStore::put_kb_document(
        &s.backend.records,
        &domain::spine::KbDocument {
            tenant: demo.clone(),
            id: Id::new("kb-restored").unwrap(),
            scope: domain::memory::MemoryScope::Org,
            title: "Escalation matrix".into(),
            body: "Page the duty manager after 30 minutes.".into(),
            source: None,
            created_at: Timestamp(1),
        },
    )
    .await
    .unwrap();
    let acme = second_tenant(&s).await;
    // The schedule queues one run per tenant; the pipeline consumer runs each.
    let report = continuity_maintenance::handle(&s, &continuity_tests::event("maintenance-daily.json")).await.unwrap();
    assert_eq!(report, serde_json::json!({"daily_queued": 2}));
    let runs = daily_runs(&s).await;
    assert_eq!(
        runs.iter().map(|d| d.message.tenant.clone()).collect::<std::collections::BTreeSet<_>>(),
        [demo.clone(), acme].into()
    );
    let mut indexed = Vec::new();
    for d in &runs {
        indexed.push(s.maintenance.daily_from_queue(&d.message).await.unwrap().indexed);
        s.backend.queue.ack(&d.receipt).await.unwrap();
    }
    indexed.sort_unstable();
    assert_eq!(indexed, [0, 1], "demo's unindexed document indexed, acme had nothing to do");
    // …and the next run finds it in place.
    let again = s.maintenance.daily_one(&demo).await.unwrap();
    assert_eq!((again.indexed, again.kept), (0, 1), "{again:?}");
    // The same day's schedule again (a retry) queues the same runs: one per tenant and day.
    continuity_maintenance::handle(&s, &continuity_tests::event("maintenance-daily.json")).await.unwrap();
    for d in daily_runs(&s).await {
        let day = s.backend.clock.now().0.div_euclid(86_400_000);
        assert_eq!(d.message.idempotency_key, format!("maintenance.daily/{}/{day}", d.message.tenant));
    }
}

/// The `maintenance.daily` messages on the queue.
async fn daily_runs(s: &services::Services) -> Vec<ports::queue::Delivery> {
    let all = s.backend.queue.receive(10, std::time::Duration::from_secs(60)).await.unwrap();
    all.into_iter().filter(|d| d.message.kind == services::maintenance::KIND_DAILY).collect()
}

fn audit(tenant: &TenantId, id: &str, at: i64) -> AuditRecord {
    AuditRecord {
        tenant: tenant.clone(),
        id: Id::new(id).unwrap(),
        at: Timestamp(at),
        actor: "a".into(),
        action: "tool:x".into(),
        target: None,
        outcome: "ok".into(),
        request_id: None,
        via: None,
    }
}

async fn second_tenant(s: &services::Services) -> TenantId {
    let acme = TenantId::new("acme").unwrap();
    s.admin
        .create_tenant(
            acme.clone(),
            domain::tenant::PlanTier::Starter,
            domain::tenant::Department::CustomerSuccess,
            domain::tenant::Industry::Saas,
        )
        .await
        .unwrap();
    acme
}

#[tokio::test]
async fn the_heartbeat_schedule_queues_every_tenants_upkeep_and_prunes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let (demo, acme) = (TenantId::new("demo").unwrap(), second_tenant(&s).await);
    let now = s.backend.clock.now().0;
    s.backend.records.append_audits(&[audit(&demo, "old", now - 10 * 86_400_000)]).await.unwrap();
    let report = continuity_maintenance::handle(&s, &continuity_tests::event("maintenance-heartbeat.json")).await.unwrap();
    assert_eq!(report["resume_queued"], 2, "{report}");
    let queued = s.backend.queue.receive(10, std::time::Duration::from_secs(1)).await.unwrap();
    let tenants: std::collections::BTreeSet<TenantId> = queued
        .iter()
        .filter(|d| d.message.kind == services::maintenance::KIND_RESUME)
        .map(|d| d.message.tenant.clone())
        .collect();
    assert_eq!(tenants, [acme, demo.clone()].into_iter().collect());
    let ledger = s.backend.records.list_audit(&demo, &PageRequest::first(10)).await.unwrap().items;
    assert!(ledger.iter().any(|a| a.id.as_str() == "old"), "the heartbeat prunes nothing");
}

#[tokio::test]
async fn the_pulls_schedule_queues_one_run_per_due_connector() {
    use domain::connector::ConnectorSource;
    use domain::source::SyncState;
    use ports::records::{Expect, SourceStore};
    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let (demo, acme) = (TenantId::new("demo").unwrap(), second_tenant(&s).await);
    let now = s.backend.clock.now();
    let due = SyncState::fresh(demo.clone(), ConnectorSource::new("hubspot").unwrap(), 300, now);
    s.backend.records.put_sync(&due, Expect::Absent).await.unwrap();
    let later = SyncState::fresh(acme.clone(), ConnectorSource::new("jira").unwrap(), 300, now.plus_millis(60_000));
    s.backend.records.put_sync(&later, Expect::Absent).await.unwrap();
    let reconnect =
        SyncState { needs_reconnect: true, ..SyncState::fresh(acme, ConnectorSource::new("zendesk").unwrap(), 300, now) };
    s.backend.records.put_sync(&reconnect, Expect::Absent).await.unwrap();
    let report = continuity_maintenance::handle(&s, &continuity_tests::event("maintenance-pulls.json")).await.unwrap();
    assert_eq!(report["pulls_queued"], 1, "only the due one; not one waiting, nor one needing a reconnect: {report}");
    let queued = s.backend.queue.receive(10, std::time::Duration::from_secs(1)).await.unwrap();
    let pulls: Vec<_> = queued.iter().filter(|d| d.message.kind == services::sources::KIND_SYNC).collect();
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0].message.tenant, demo);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&pulls[0].message.body).unwrap(),
        serde_json::json!({"source": "hubspot"})
    );
}
