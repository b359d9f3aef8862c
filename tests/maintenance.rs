//! The maintenance job (SPEC §9) on both backends: audit records beyond the retention
//! are pruned (and the pruning itself is audited), stale session-scope memory expires
//! while other scopes stay, expired OAuth codes and `jti`s past their grace go, live ones
//! stay; a second run finds nothing more to do. Each backend gets a store of its own so
//! the job never touches what concurrent tests keep in the shared table.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

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
    }
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
    };
    let old: Vec<AuditRecord> = (0..30).map(|i| audit(&format!("old{i}"), now.0 - 8 * DAY - i)).collect();
    backend.records.append_audits(&old).await.unwrap();
    backend.records.append_audits(&[audit("new1", now.0 - DAY), audit("new2", now.0)]).await.unwrap();
    let r = &backend.records;
    r.put_memory(&memory(&t, "s-old", MemoryScope::Session("a".into()), Timestamp(now.0 - 2 * DAY)), Expect::Absent)
        .await
        .unwrap();
    r.put_memory(&memory(&t, "s-new", MemoryScope::Session("b".into()), now), Expect::Absent).await.unwrap();
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
    assert!(r.get_memory(&t, &Id::new("s-old").unwrap()).await.unwrap().is_none());
    assert!(r.get_memory(&t, &Id::new("s-new").unwrap()).await.unwrap().is_some());
    assert!(r.get_memory(&t, &Id::new("p-old").unwrap()).await.unwrap().is_some(), "only session scope expires");
    let sessions = r.list_memory(&t, &MemoryScope::Session("a".into()), &PageRequest::first(10)).await.unwrap();
    assert!(sessions.items.is_empty(), "the scope index goes with the entry");
    assert!(r.get_code("expired-long-ago").await.unwrap().is_none());
    assert!(r.get_code("expired-just-now").await.unwrap().is_some(), "within the grace a reused code is still recognised");
    assert!(r.get_code("live").await.unwrap().is_some());
    assert!(r.claim_jti("https://idp.example", "old-jti", Timestamp(now.0 + DAY)).await.unwrap(), "the pruned jti is gone");

    let again = s.maintenance.run().await.unwrap();
    assert_eq!((again.audit_pruned, again.sessions_expired), (0, 0), "{again:?}");
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
