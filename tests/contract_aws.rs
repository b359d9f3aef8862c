//! The contract suites against the AWS backend: DynamoDB, SQS and S3 on a local
//! `moto_server`, and the cache on Redis — one plain node and a three-node TLS cluster
//! (ElastiCache Serverless is cluster mode + TLS). Plus a few AWS-specific checks.
//!
//! It needs the services `tests/run.sh` starts and exports:
//!
//! - `CONTINUITY_TEST_MOTO_URL`: a moto server, e.g. `http://127.0.0.1:5000`
//! - `CONTINUITY_TEST_REDIS_URL`: a plain Redis, e.g. `redis://127.0.0.1:6379`
//! - `CONTINUITY_TEST_REDIS_CLUSTER_URLS`: comma-separated `rediss://` seeds of a TLS
//!   cluster (`tests/redis-tls-cluster.sh start DIR`)
//! - `CONTINUITY_TEST_REDIS_CA`: the PEM file of that cluster's CA
//!
//! A missing variable fails the test: the runner always sets them, so a skip would only
//! hide a broken runner.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use contract::queue::{MAX_RECEIVES, QueueFixture};
use contract::signer::SignerFixture;
use ports::Records;
use ports::blob::BlobStore;
use ports::cache::Cache;
use ports::items::ItemStore;
use ports::ratelimit::RateLimiter;
use ports::signer::TokenSigner;
use store_aws::settings::{dynamo_client, kms_client, s3_client, sqs_client};
use store_aws::{DynamoItems, KmsSigner, RedisCache, RedisSettings, S3Blobs, SqsQueue, aws_config_for};
use tokio::sync::OnceCell;

const REGION: &str = "eu-west-1";
const TABLE: &str = "continuity-contract";
const BUCKET: &str = "continuity-contract";

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run tests/run.sh, or start moto and Redis and export the CONTINUITY_TEST_* variables")
    })
}

async fn sdk() -> aws_config::SdkConfig {
    aws_config_for(Some(&env("CONTINUITY_TEST_MOTO_URL")), REGION).await
}

async fn items() -> Arc<dyn ItemStore> {
    static READY: OnceCell<()> = OnceCell::const_new();
    let store = DynamoItems::new(dynamo_client(&sdk().await), TABLE);
    READY.get_or_init(|| async { store.create_table_if_missing().await.unwrap() }).await;
    Arc::new(store)
}

async fn records() -> Records {
    Records::new(items().await)
}

async fn queue() -> QueueFixture {
    // A fresh tenant slug is also a valid, unique SQS queue name.
    let name = contract::fresh_tenant("smoke");
    let queue = SqsQueue::create_with_dlq(sqs_client(&sdk().await), name.as_str(), MAX_RECEIVES).await.unwrap();
    QueueFixture { queue: Arc::new(queue), records: records().await }
}

async fn blobs() -> Arc<dyn BlobStore> {
    static READY: OnceCell<()> = OnceCell::const_new();
    let store = S3Blobs::new(s3_client(&sdk().await), BUCKET);
    READY.get_or_init(|| async { store.create_bucket_if_missing().await.unwrap() }).await;
    Arc::new(store)
}

/// The plain Redis node, as a cache or a rate limiter.
fn redis_single() -> Arc<RedisCache> {
    Arc::new(RedisCache::new(&RedisSettings::single(env("CONTINUITY_TEST_REDIS_URL"))).unwrap())
}

/// The three-node TLS cluster (ElastiCache Serverless is cluster mode + TLS).
fn redis_cluster() -> Arc<RedisCache> {
    let seeds = env("CONTINUITY_TEST_REDIS_CLUSTER_URLS").split(',').map(str::to_owned).collect();
    let ca = std::fs::read(env("CONTINUITY_TEST_REDIS_CA")).unwrap();
    Arc::new(RedisCache::new(&RedisSettings::cluster(seeds).with_ca_pem(ca)).unwrap())
}

async fn cache_single() -> Arc<dyn Cache> {
    redis_single()
}

async fn cache_cluster() -> Arc<dyn Cache> {
    redis_cluster()
}

async fn kms_key(label: &str) -> String {
    store_aws::KmsSigner::create_key(&kms_client(&sdk().await), label).await.unwrap()
}

async fn signer() -> SignerFixture {
    let (old, new) = (kms_key("contract old").await, kms_key("contract new").await);
    let client = kms_client(&sdk().await);
    SignerFixture {
        before: Arc::new(KmsSigner::new(client.clone(), vec![old.clone()])),
        // A rotation: the new key signs, the old one stays listed.
        after: Arc::new(KmsSigner::new(client, vec![new, old])),
    }
}

async fn limiter_single() -> Arc<dyn RateLimiter> {
    redis_single()
}

async fn limiter_cluster() -> Arc<dyn RateLimiter> {
    redis_cluster()
}

mod items {
    contract::contract_suite!(items, super::items);
}

mod oauth {
    contract::contract_suite!(oauth, super::records);
}

mod signer {
    contract::contract_suite!(signer, super::signer);
}

/// The vault on KMS (a symmetric key on moto) over the DynamoDB table.
async fn vault() -> contract::vault::VaultFixture {
    let key = continuity_tests::aws::vault_key().await;
    // A table of its own: the deployment's sealed records (source apps) open only with the
    // KMS key that sealed them, and each run of this binary makes a new key — a rerun
    // against the same moto would find the last run's records on the shared table.
    let (table, _) = continuity_tests::aws::fresh_table("vault").await;
    contract::vault::VaultFixture {
        wrapper: Arc::new(store_aws::kms::KmsKeyWrapper::new(kms_client(&sdk().await), key)),
        items: Arc::new(DynamoItems::new(dynamo_client(&sdk().await), &table)),
    }
}

mod vault {
    contract::contract_suite!(vault, super::vault);
}

mod limiter_single {
    contract::contract_suite!(limiter, super::limiter_single);
}

mod limiter_cluster {
    contract::contract_suite!(limiter, super::limiter_cluster);
}

/// The signer reports a missing key configuration as `UNAVAILABLE`, not a panic.
#[tokio::test]
async fn a_signer_without_keys_is_unavailable() {
    let s = KmsSigner::new(kms_client(&sdk().await), vec![]);
    assert_eq!(s.sign(b"x").await.unwrap_err().code, domain::ErrorCode::Unavailable);
    let s = KmsSigner::new(kms_client(&sdk().await), vec!["alias/does-not-exist".into()]);
    assert_eq!(s.public_keys().await.unwrap_err().code, domain::ErrorCode::Unavailable);
}

mod records {
    contract::contract_suite!(records, super::records);
}

mod queue {
    contract::contract_suite!(queue, super::queue);
}

mod blobs {
    contract::contract_suite!(blobs, super::blobs);
}

mod cache_single {
    contract::contract_suite!(cache, super::cache_single);
}

mod cache_cluster {
    contract::contract_suite!(cache, super::cache_cluster);
}

/// A cache nobody answers for fails fast with `UNAVAILABLE` instead of hanging.
#[tokio::test]
async fn a_dead_cache_fails_fast() {
    let dead = RedisCache::new(&RedisSettings::single("redis://127.0.0.1:1").with_timeout(Duration::from_millis(500))).unwrap();
    let key = ports::cache::CacheKey::global("t", "k");
    let started = std::time::Instant::now();
    assert_eq!(dead.get(&key).await.unwrap_err().code, domain::ErrorCode::Unavailable);
    // Within the backoff the second call does not even try.
    assert_eq!(dead.get(&key).await.unwrap_err().code, domain::ErrorCode::Unavailable);
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
}

/// The queue reports its depth and an oversized body never reaches SQS.
#[tokio::test]
async fn queue_depth_counts_waiting_and_in_flight() {
    use ports::queue::QueueMessage;
    let f = queue().await;
    let t = contract::fresh_tenant("depth");
    let m = QueueMessage { tenant: t, kind: "k".into(), idempotency_key: "d-1".into(), body: b"x".to_vec() };
    f.queue.send(&m).await.unwrap();
    f.queue.send(&QueueMessage { idempotency_key: "d-2".into(), ..m }).await.unwrap();
    assert_eq!(f.queue.depth().await.unwrap(), 2);
    let got = f.queue.receive(1, Duration::from_secs(30)).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(f.queue.depth().await.unwrap(), 2, "in flight still counts");
    f.queue.ack(&got[0].receipt).await.unwrap();
    assert_eq!(f.queue.depth().await.unwrap(), 1);
}

/// Dead letters carry the message and how often it was delivered before SQS moved it.
#[tokio::test]
async fn dead_letters_report_their_deliveries() {
    use ports::queue::QueueMessage;
    let f = queue().await;
    let t = contract::fresh_tenant("dl");
    let body: Vec<u8> = (0..=255u8).rev().collect();
    f.queue
        .send(&QueueMessage { tenant: t.clone(), kind: "k".into(), idempotency_key: "p-1".into(), body: body.clone() })
        .await
        .unwrap();
    let mut deliveries = 0;
    for _ in 0..20 {
        for d in f.queue.receive(10, Duration::from_secs(60)).await.unwrap() {
            deliveries += 1;
            f.queue.release(&d.receipt, Duration::ZERO).await.unwrap();
        }
        if !f.queue.dead_letters(10).await.unwrap().is_empty() {
            break;
        }
    }
    assert_eq!(deliveries, MAX_RECEIVES);
    let dead = f.queue.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].message.tenant.clone(), dead[0].message.body.clone()), (t, body));
    assert!(dead[0].receive_count >= MAX_RECEIVES, "{}", dead[0].receive_count);
    // Peeking consumed nothing, and the main queue is empty.
    assert_eq!(f.queue.dead_letters(10).await.unwrap().len(), 1);
    assert!(f.queue.receive(10, Duration::from_secs(60)).await.unwrap().is_empty());
    assert_eq!(f.queue.depth().await.unwrap(), 0);
    // Receipts that are not receipts are refused.
    assert_eq!(f.queue.ack("not-a-receipt").await.map_err(|e| e.code), Err(domain::ErrorCode::NotFound));
}

/// `store_aws::backend` wires every port from one `AwsSettings`.
#[tokio::test]
async fn backend_wires_every_port() {
    use ports::queue::QueueMessage;
    items().await;
    blobs().await;
    let q = contract::fresh_tenant("wired");
    let created = SqsQueue::create_with_dlq(sqs_client(&sdk().await), q.as_str(), 3).await.unwrap();
    let settings = store_aws::AwsSettings {
        region: REGION.into(),
        endpoint_url: Some(env("CONTINUITY_TEST_MOTO_URL")),
        table: TABLE.into(),
        fortress_table: None,
        queue_url: created.queue_url().into(),
        dead_letter_queue_url: created.dead_letter_queue_url().into(),
        bucket: BUCKET.into(),
        redis: RedisSettings::single(env("CONTINUITY_TEST_REDIS_URL")),
        jwt_kms_keys: vec![kms_key("wired").await],
        vault_kms_key: Some(continuity_tests::aws::vault_key().await),
        search: store_aws::SearchSettings::default(),
        triage_state_machine: None,
        mail_from: None,
    };
    // The operator's SDK configuration (the default chain's loader); `aws::backend` and the
    // topology test run the functions' own.
    let b = store_aws::backend(&settings, &settings.sdk_config().await, Arc::new(ports::SystemClock)).unwrap();
    assert_eq!(b.name, "aws");
    let t = contract::fresh_tenant("wired");
    assert_eq!(b.records.items().get(t.as_str(), "p", "missing").await.unwrap(), None);
    let key = ports::cache::CacheKey::tenant(&t, "n", "k");
    b.cache.set(&key, b"v", Duration::from_secs(5)).await.unwrap();
    assert_eq!(b.cache.get(&key).await.unwrap().as_deref(), Some(b"v".as_slice()));
    let blob = ports::blob::BlobKey::new(&t, "raw/x.json").unwrap();
    b.blobs.put(&blob, b"{}").await.unwrap();
    assert_eq!(b.blobs.get(&blob).await.unwrap().as_deref(), Some(b"{}".as_slice()));
    let m = QueueMessage { tenant: t.clone(), kind: "k".into(), idempotency_key: "w-1".into(), body: Vec::new() };
    b.queue.send(&m).await.unwrap();
    assert_eq!(b.queue.depth().await.unwrap(), 1);
    let sig = b.signer.sign(b"m").await.unwrap();
    assert!(b.signer.public_keys().await.unwrap()[0].verify(b"m", &sig.bytes));
    assert!(b.limiter.acquire(t.as_str(), ports::Rate::per_minute(10)).await.unwrap().allowed);
}

mod mail {
    contract::contract_suite!(mail, continuity_tests::aws::mail);
}
