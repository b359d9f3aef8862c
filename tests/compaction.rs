//! Backup compaction (SPEC §9) on both backends: many per-write backup files become a
//! few, holding the newest copy of each entity; a file with an unreadable line is kept;
//! files are only deleted after the merged ones are written; a restore from the
//! compacted backups into an empty store gives the newest state.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use domain::spine::PoleClass;
use domain::tenant::{Department, Industry, PlanTier};
use domain::value::{Attributes, Value};
use domain::{EntityType, Id, TenantId};
use ports::blob::BlobKey;
use ports::records::{EntityStore, Expect};
use ports::{Backend, SystemClock};
use services::Services;

async fn paths(b: &Backend, t: &TenantId) -> Vec<String> {
    b.blobs.list(t, "spine-backup/", None, 1_000).await.unwrap().iter().map(|k| k.path().to_owned()).collect()
}

async fn compaction(backend: Backend, empty: ports::Records) {
    let s = Services::new(backend.clone());
    let t = contract::fresh_tenant("compact");
    s.admin.create_tenant(t.clone(), PlanTier::Pro, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let op = s.admin.operator(&t).await.unwrap();
    let ty = EntityType::new("account").unwrap();
    for (id, tiers) in [("acme", ["bronze", "silver", "gold"]), ("globex", ["trial", "paid", "churned"])] {
        for tier in tiers {
            let mut a = Attributes::new();
            a.insert("name".into(), id.into());
            a.insert("tier".into(), tier.into());
            s.entities.put(&op, ty.clone(), Id::new(id).unwrap(), PoleClass::Organization, a, Expect::Any).await.unwrap();
        }
    }
    let garbage = BlobKey::new(&t, "spine-backup/2026-01-01/hand-edited.jsonl").unwrap();
    backend.blobs.put(&garbage, b"{not json\n").await.unwrap();
    let before = paths(&backend, &t).await;
    assert_eq!(before.len(), 7, "{before:?}");

    let r = s.backup.compact(&t, 2).await.unwrap();
    assert_eq!((r.merged, r.written, r.lines, r.kept_unreadable), (6, 1, 2, 1), "{r:?}");
    let after = paths(&backend, &t).await;
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(after.contains(&garbage.path().to_owned()), "an unreadable file is kept");
    assert!(after.iter().any(|p| p.starts_with("spine-backup/compacted-")), "{after:?}");
    // Nothing more to merge: a second run changes nothing.
    assert_eq!(s.backup.compact(&t, 2).await.unwrap().merged, 0);

    // Restore into an empty store: the newest copy of each entity.
    let restored = Services::new(Backend { records: empty.clone(), ..backend });
    let report = restored.backup.restore(&t, &|_| {}).await.unwrap();
    assert_eq!(report.entities, 2, "{report:?}");
    for (id, tier) in [("acme", "gold"), ("globex", "churned")] {
        let e = empty.get_entity(&t, &ty, &Id::new(id).unwrap()).await.unwrap().unwrap();
        assert_eq!(e.attributes.get("tier"), Some(&Value::Text(tier.into())), "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded() {
    let dir = tempfile::tempdir().unwrap();
    let empty = store_embedded::open_backend(&dir.path().join("empty"), Arc::new(SystemClock)).unwrap().records;
    compaction(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap(), empty).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws() {
    let (_, empty) = continuity_tests::aws::fresh_table("compact").await;
    compaction(continuity_tests::aws::backend().await, empty).await;
}
