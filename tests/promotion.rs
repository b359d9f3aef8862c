//! Promotion to the fortress on both backends: a promotion bounded to a few records
//! stops half-way (its cursor saved), the tenant is written meanwhile (and the fortress
//! holds a stray record), the next run resumes, reconciles (copies what changed, removes
//! the stray) and ends with a fortress equal to the main store type by type, by hash;
//! the tenant is then `promoted`, its later writes are mirrored (a sealed entity opens
//! in the fortress), and the usage report reads entities, reads and writes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use continuity_tests::caller;
use domain::spine::PoleClass;
use domain::tenant::{Department, Industry, PlanTier, StorageTier};
use domain::value::{Attributes, Value};
use domain::{EntityType, Id};
use ports::fortress::PromotionState;
use ports::items::{Condition, Item, Write};
use ports::records::{EntityStore, Expect};
use ports::{Backend, Clock as _, SystemClock};
use serde_json::json;
use services::Services;
use services::backup_records::partition_digests;

/// A clock the test moves: the promotion's wait for every process to mirror
/// (`MIRROR_REFRESH`, 10 s) moves it on instead of sleeping, and the mirror's refresh is
/// timed by the same clock.
fn clock() -> Arc<dyn ports::Clock> {
    Arc::new(ports::clock::ManualClock::new(SystemClock.now().0))
}

async fn promotion(backend: Backend) {
    let s = Services::new(backend.clone());
    let t = contract::fresh_tenant("promo");
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    continuity_tests::demo::seed(&s, &t, "owner").await;
    let agent = caller(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
    s.capabilities.execute(&agent, "spine.entity.get", json!({"type": "account", "id": "acme-1"})).await.unwrap();
    let op = s.admin.operator(&t).await.unwrap();
    let put = |id: &str, name: &str| {
        let (s, op) = (s.clone(), op.clone());
        let (id, name) = (id.to_owned(), name.to_owned());
        async move {
            let mut a = Attributes::new();
            a.insert("name".into(), Value::Text(name));
            s.entities
                .put(&op, EntityType::new("account").unwrap(), Id::new(id).unwrap(), PoleClass::Organization, a, Expect::Any)
                .await
                .unwrap();
        }
    };
    for n in 0..12 {
        put(&format!("acct-{n:02}"), &format!("Account {n}")).await;
    }
    // What the services see of the fortress refuses writes; the mirror path's store
    // (the test plays a stray writer with it below) does not.
    let read_only = backend.fortress.as_ref().unwrap().items().clone();
    let probe =
        Item { tenant: t.to_string(), part: "entity".into(), sk: "account#probe".into(), version: 1, body: b"{}".to_vec() };
    let refused = read_only.write(vec![Write::Put { item: probe, condition: Condition::None }]).await.unwrap_err();
    assert_eq!(refused.code, domain::ErrorCode::Internal, "{refused:?}");
    assert!(read_only.get(t.as_str(), "entity", "account#probe").await.unwrap().is_none());
    let fortress = backend.fortress_writer.clone().unwrap();
    let main = backend.records.items().clone();

    // Run 1, bounded: stops with its cursor saved.
    let first = s.admin.promote_tenant(&t, Some(10), &|_| {}).await.unwrap();
    // (A DynamoDB scan's page is "about" its limit: it counts what it evaluated.)
    assert_eq!((first.state, first.verified), (PromotionState::Backfilling, false), "{first:?}");
    assert!((10..20).contains(&first.copied), "{first:?}");
    assert!(first.parts.is_empty());
    assert_eq!(s.admin.show_tenant(&t).await.unwrap().storage_tier, StorageTier::Edge, "not promoted half-way");
    // Meanwhile: writes (a change, a new record), and a record only the fortress holds.
    put("acct-03", "Account 3, renamed").await;
    put("acct-99", "A new account").await;
    let stray =
        Item { tenant: t.to_string(), part: "entity".into(), sk: "account#ghost".into(), version: 1, body: b"{}".to_vec() };
    fortress.write(vec![Write::Put { item: stray, condition: Condition::None }]).await.unwrap();

    // Run 2 resumes, reconciles and verifies.
    let seen = std::sync::atomic::AtomicU64::new(0);
    let done = s.admin.promote_tenant(&t, None, &|n| seen.store(n, std::sync::atomic::Ordering::Relaxed)).await.unwrap();
    assert_eq!((done.state, done.verified), (PromotionState::Promoted, true), "{done:?}");
    assert!(done.copied > 10 && seen.load(std::sync::atomic::Ordering::Relaxed) == done.copied, "{done:?}");
    assert!(done.removed >= 1, "the stray record is gone: {done:?}");
    assert!(!done.parts.is_empty() && done.parts.iter().all(|p| p.matches), "{:?}", done.parts);
    let (ours, theirs) =
        (partition_digests(main.as_ref(), &t).await.unwrap(), partition_digests(fortress.as_ref(), &t).await.unwrap());
    assert_eq!(ours, theirs, "an identical fortress, type by type");
    assert!(
        ours.contains_key("entity") && ours.contains_key("memory") && ours.keys().any(|k| k.starts_with("audit")),
        "{:?}",
        ours.keys()
    );
    assert_eq!(s.admin.show_tenant(&t).await.unwrap().storage_tier, StorageTier::Promoted);

    // Promoted: later writes are mirrored (every process re-reads the promoted tenants
    // within ports::fortress::MIRROR_REFRESH, which the promotion waited out).
    put("acct-100", "Mirrored").await;
    let f = backend.fortress.as_ref().unwrap();
    let mirrored = f.get_entity(&t, &EntityType::new("account").unwrap(), &Id::new("acct-100").unwrap()).await.unwrap().unwrap();
    assert_eq!(mirrored.attributes["name"], Value::Text("Mirrored".into()), "sealed in the fortress and it opens there");
    // Again: nothing to copy, still equal.
    let again = s.admin.promote_tenant(&t, None, &|_| {}).await.unwrap();
    assert_eq!((again.state, again.verified, again.written, again.removed), (PromotionState::Promoted, true, 0, 0), "{again:?}");

    // A fortress holding many records the main store lacks says the main store lost
    // them: the run removes nothing and says to restore first.
    let strays: Vec<Write> = (0..101)
        .map(|n| Write::Put {
            item: Item {
                tenant: t.to_string(),
                part: "memory".into(),
                sk: format!("lost-{n:03}"),
                version: 1,
                body: b"{}".to_vec(),
            },
            condition: Condition::None,
        })
        .collect();
    for chunk in strays.chunks(25) {
        fortress.write(chunk.to_vec()).await.unwrap();
    }
    let guarded = s.admin.promote_tenant(&t, None, &|_| {}).await.unwrap();
    assert!(!guarded.verified && guarded.removed == 0, "{guarded:?}");
    assert!(guarded.note.as_deref().is_some_and(|n| n.contains("restore")), "{guarded:?}");
    assert!(fortress.get(t.as_str(), "memory", "lost-000").await.unwrap().is_some(), "nothing removed");

    // The usage report.
    let usage = s.admin.usage(&t).await.unwrap();
    assert_eq!(usage.entities, 15, "{usage:?}");
    assert!(usage.reads_last_day >= 1, "{usage:?}");
    assert!(!usage.suggest_promotion && usage.reason.contains("promoted"), "{usage:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promotion_embedded() {
    let dir = tempfile::tempdir().unwrap();
    promotion(store_embedded::open_backend(dir.path(), clock()).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promotion_aws() {
    promotion(continuity_tests::aws::backend_with_own_fortress("promo", clock()).await).await;
}
