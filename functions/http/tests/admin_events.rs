//! The admin-API Lambda (`AdminFunction`) driven with `events/admin-create-tenant.json`
//! and `events/admin-add-user.json`, as API Gateway delivers them after the authorizer:
//! the operator's admin key creates a tenant, then adds a user with teams and projects;
//! the same request from a tenant that is not the operator's is refused and creates
//! nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::invoke;

use std::sync::Arc;

use domain::TenantId;
use domain::tenant::{Department, Industry, PlanTier};
use services::Services;

#[tokio::test]
async fn the_operator_creates_a_tenant_from_the_event() {
    let dir = tempfile::tempdir().unwrap();
    let s = Services::new(store_embedded::open_backend(dir.path(), Arc::new(ports::SystemClock)).unwrap());
    let op = TenantId::new("operator").unwrap();
    s.admin.create_tenant(op.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();

    // Not (yet) the operator's tenant: the same request is refused.
    let (status, v) = invoke(&s, continuity_tests::event("admin-create-tenant.json")).await;
    assert_eq!((status, v["error"]["code"].as_str()), (403, Some("FORBIDDEN")), "{v}");
    assert!(s.admin.show_tenant(&TenantId::new("globex").unwrap()).await.is_err(), "nothing created");

    s.admin.make_operator(&op).await.unwrap();
    let (status, v) = invoke(&s, continuity_tests::event("admin-create-tenant.json")).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!((v["id"].as_str(), v["plan"].as_str()), (Some("globex"), Some("pro")));
    let ledger = ports::records::AuditLog::list_audit(
        &s.backend.records,
        &TenantId::new("globex").unwrap(),
        &domain::PageRequest::first(10),
    )
    .await
    .unwrap()
    .items;
    assert!(ledger.iter().any(|r| r.action == "admin:tenant.create" && r.actor == "admin-api:operator/owner"), "{ledger:?}");

    // A user with memberships: stored on the user's principal (what its tokens carry).
    let (status, v) = invoke(&s, continuity_tests::event("admin-add-user.json")).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["email"], "ada@globex.example");
    let users = s.admin.list_users(&TenantId::new("globex").unwrap()).await.unwrap();
    assert_eq!(users.len(), 1);
    assert_eq!(
        (users[0].teams.clone(), users[0].projects.clone()),
        (vec!["emea".into(), "support".into()], vec!["apollo".into()])
    );
    let (status, v) = invoke(&s, continuity_tests::event("admin-add-user.json")).await;
    assert_eq!((status, v["error"]["code"].as_str()), (409, Some("CONFLICT")), "the e-mail is taken: {v}");

    // A connector credential for governed actions: stored sealed, never shown or logged.
    let globex = TenantId::new("globex").unwrap();
    let (status, v) = invoke(&s, continuity_tests::event("admin-put-credential.json")).await;
    assert_eq!(status, 204, "{v}");
    assert_eq!(s.admin.credential_sources(&globex).await.unwrap(), ["hubspot"]);
    let stored =
        ports::records::CredentialStore::get_credential(&s.backend.records, &globex, &domain::Id::new("hubspot").unwrap())
            .await
            .unwrap()
            .unwrap();
    assert_eq!(stored.token, "placeholder-hubspot-private-app-token");
    let ledger =
        ports::records::AuditLog::list_audit(&s.backend.records, &globex, &domain::PageRequest::first(20)).await.unwrap().items;
    let audited = ledger.iter().find(|r| r.action == "admin:connector.credential").unwrap();
    assert_eq!(audited.outcome, "stored (sealed)");
    assert!(!format!("{ledger:?}").contains("placeholder-hubspot"), "the token is in no audit record");
    let mut ev = continuity_tests::event("admin-put-credential.json");
    ev["path"] = "/v1/admin/tenants/globex/connectors/myspace/credential".into();
    let (status, v) = invoke(&s, ev).await;
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("INVALID_REQUEST")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("hubspot"), "names the connectors that act: {v}");
}
