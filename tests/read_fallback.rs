//! The read fallback chain (SPEC §4.4) on both backends: index lookup → tenant-partition
//! scan → fortress (promoted tenants only) → 404.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use domain::spine::{Entity, PoleClass};
use domain::tenant::{Department, Industry, PlanTier, StorageTier};
use domain::value::Attributes;
use domain::{EntityType, ErrorCode, Id, Timestamp};
use ports::records::{EntityStore, Expect};
use ports::{Backend, SystemClock};
use services::Services;
use services::admin::TenantChanges;
use services::entities::ReadStep;

fn entity(t: &domain::TenantId, id: &str) -> Entity {
    let mut attributes = Attributes::new();
    attributes.insert("name".into(), id.into());
    Entity {
        tenant: t.clone(),
        entity_type: EntityType::new("account").unwrap(),
        id: Id::new(id).unwrap(),
        pole_class: PoleClass::Organization,
        attributes,
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
        version: 0,
        source_updated_at: None,
    }
}

async fn chain(backend: Backend) {
    let s = Services::new(backend.clone());
    let t = contract::fresh_tenant("fallback");
    s.admin.create_tenant(t.clone(), PlanTier::Pro, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let account = EntityType::new("account").unwrap();
    let step = |id: &'static str| {
        let s = s.clone();
        let t = t.clone();
        let account = account.clone();
        async move { s.entities.lookup(&t, &account, &Id::new(id).unwrap()).await.unwrap().map(|(e, step)| (e.id.to_string(), step)) }
    };

    backend.records.put_entity(&entity(&t, "acme-1"), Expect::Absent).await.unwrap();
    assert_eq!(step("acme-1").await, Some(("acme-1".into(), ReadStep::Index)));

    backend.records.put_entity(&entity(&t, "Globex-2"), Expect::Absent).await.unwrap();
    assert_eq!(step("globex-2").await, Some(("Globex-2".into(), ReadStep::Scan)), "the scan finds an id in another case");

    // Written as the mirror path writes it (what the services see of it is read-only).
    let fortress = backend.fortress.clone().expect("this backend has a fortress");
    assert_eq!(fortress.put_entity(&entity(&t, "vault-0"), Expect::Absent).await.unwrap_err().code, ErrorCode::Internal);
    let fortress = fortress.with_items(backend.fortress_writer.clone().expect("and its writable store"));
    fortress.put_entity(&entity(&t, "vault-3"), Expect::Absent).await.unwrap();
    assert_eq!(step("vault-3").await, None, "an edge tenant never reads the fortress");

    s.admin
        .set_tenant(&t, TenantChanges { storage_tier: Some(StorageTier::Promoted), ..TenantChanges::default() })
        .await
        .unwrap();
    assert_eq!(step("vault-3").await, Some(("vault-3".into(), ReadStep::Fortress)));

    assert_eq!(step("nowhere-4").await, None);
    let op = s.admin.operator(&t).await.unwrap();
    let e = s.entities.get(&op, &account, &Id::new("nowhere-4").unwrap()).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);

    // Another tenant's fortress entry is not ours even when we are promoted.
    let other = contract::fresh_tenant("fallback-other");
    fortress.put_entity(&entity(&other, "theirs-5"), Expect::Absent).await.unwrap();
    assert_eq!(step("theirs-5").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded() {
    let dir = tempfile::tempdir().unwrap();
    chain(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws() {
    chain(continuity_tests::aws::backend().await).await;
}
