//! The maintenance Lambda driven with `events/maintenance-schedule.json` over an
//! embedded backend: an audit record beyond the retention is pruned, a recent one stays.

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
    let rec = |id: &str, at: i64| AuditRecord {
        tenant: demo.clone(),
        id: Id::new(id).unwrap(),
        at: Timestamp(at),
        actor: "a".into(),
        action: "tool:x".into(),
        target: None,
        outcome: "ok".into(),
        request_id: None,
        via: None,
    };
    s.backend.records.append_audits(&[rec("old", now - 10 * 86_400_000), rec("recent", now)]).await.unwrap();
    let report = continuity_maintenance::handle(&s, &continuity_tests::event("maintenance-schedule.json")).await.unwrap();
    assert_eq!(report["audit_pruned"], 1, "{report}");
    let ledger = s.backend.records.list_audit(&demo, &PageRequest::first(10)).await.unwrap().items;
    assert!(ledger.iter().all(|a| a.id.as_str() != "old"));
    assert!(ledger.iter().any(|a| a.id.as_str() == "recent"));
}

#[tokio::test]
async fn the_daily_schedule_runs_the_reindex_and_compaction() {
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
    let report = continuity_maintenance::handle(&s, &continuity_tests::event("maintenance-daily.json")).await.unwrap();
    assert_eq!((report["indexed"].as_u64(), report["verified"].as_u64()), (Some(1), Some(1)), "{report}");
    // …and the next run finds it in place.
    let again = continuity_maintenance::handle(&s, &continuity_tests::event("maintenance-daily.json")).await.unwrap();
    assert_eq!((again["indexed"].as_u64(), again["kept"].as_u64()), (Some(0), Some(1)), "{again}");
}
