//! The Spine Cache while the record store is unreachable (SPEC §4.4), on the AWS backend
//! with the table really unreachable (DynamoDB pointed at a closed port) while the cache
//! (Redis) and the queue (SQS on moto) keep working: reads through the capability
//! service (the MCP tools' executor) are served from the cache's last good copy, an
//! operator write is queued, and the queue applies it once the store is back.
//!
//! The embedded backend keeps its record store and its queue in one SQLite file, so an
//! unreachable store there means an unreachable queue: writes fail with `UNAVAILABLE`
//! (503 + Retry-After) instead of queueing. The README says so.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use domain::spine::PoleClass;
use domain::tenant::{Department, Industry, PlanTier};
use domain::value::Attributes;
use domain::{EntityType, ErrorCode, Id};
use ports::Backend;
use ports::records::{Expect, TenantStore};
use serde_json::json;
use services::Services;
use services::entities::Put;

fn attrs(name: &str, tier: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("name".into(), name.into());
    a.insert("tier".into(), tier.into());
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_come_from_the_cache_and_writes_queue_while_the_store_is_down() {
    let up_backend = continuity_tests::aws::backend().await;
    let up = Services::new(up_backend.clone());
    let t = contract::fresh_tenant("outage");
    up.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let op = up.admin.operator(&t).await.unwrap();
    let reader = continuity_tests::caller(&up, &t, "mcp:tools tenant:read").await;
    let (ty, id) = (EntityType::new("account").unwrap(), Id::new("acme-1").unwrap());
    up.entities.put(&op, ty.clone(), id.clone(), PoleClass::Organization, attrs("Acme", "silver"), Expect::Any).await.unwrap();
    let read = |s: Services| {
        let reader = reader.clone();
        async move { s.capabilities.execute(&reader, "spine.entity.get", json!({"type": "account", "id": "acme-1"})).await }
    };
    assert_eq!(read(up.clone()).await.unwrap().data["entity"]["attributes"]["tier"], "silver");
    // An update: the hot copy is evicted, the written entity kept as the last good one.
    up.entities.put(&op, ty.clone(), id.clone(), PoleClass::Organization, attrs("Acme", "gold"), Expect::Any).await.unwrap();

    // The table becomes unreachable; cache, queue and blobs stay.
    let sdk = store_aws::aws_config_for(Some("http://127.0.0.1:9"), continuity_tests::aws::REGION).await;
    let dead = store_aws::DynamoItems::new(store_aws::settings::dynamo_client(&sdk), continuity_tests::aws::TABLE);
    let down = Services::new(Backend { records: ports::Records::new(Arc::new(dead)), ..up_backend.clone() });
    let e = down.backend.records.get_tenant(&t).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable, "the store really is unreachable");

    let got = read(down.clone()).await.unwrap();
    assert_eq!(got.data["entity"]["attributes"]["tier"], "gold", "served from the last good copy");
    // Something never read has no last good copy: a clear UNAVAILABLE, not a 404.
    let e =
        down.capabilities.execute(&reader, "spine.entity.get", json!({"type": "account", "id": "never-read"})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable);

    // A write queues instead of failing; a conditional one cannot be queued.
    let queued = down
        .entities
        .put_or_queue(&op, ty.clone(), id.clone(), PoleClass::Organization, attrs("Acme", "platinum"), Expect::Any)
        .await
        .unwrap();
    assert!(matches!(queued, Put::Queued(_)), "{queued:?}");
    let e = down
        .entities
        .put_or_queue(&op, ty.clone(), id.clone(), PoleClass::Organization, attrs("Acme", "x"), Expect::Version(1))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable);
    // The consumer cannot apply it while the store is down: it stays queued.
    assert_eq!(down.consumer.drain_once(Duration::from_secs(30), Duration::ZERO).await.unwrap(), 1);

    // The store is back: the queued write lands, and the next read sees it.
    let mut applied = false;
    for _ in 0..20 {
        up.consumer.drain_once(Duration::from_secs(30), Duration::ZERO).await.unwrap();
        let now = read(up.clone()).await.unwrap();
        if now.data["entity"]["attributes"]["tier"] == "platinum" {
            applied = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(applied, "the queued write was applied once the store returned");
    assert_eq!(up.consumer.drain_once(Duration::from_secs(30), Duration::ZERO).await.unwrap(), 0, "nothing left queued");
}
