//! Contract of the queue port: durability, visibility timeout, redelivery,
//! dead-lettering and idempotent consumption.
//!
//! Queue checks need a fresh, empty queue with a known `max_receives`, and the
//! idempotency check needs the same backend's records, so they take a [`QueueFixture`].

use std::sync::Arc;
use std::time::Duration;

use domain::{ErrorCode, Timestamp};
use ports::Records;
use ports::queue::{MAX_MESSAGE_BYTES, Queue, QueueMessage};
use ports::records::IdempotencyStore;

use crate::fresh_tenant;

/// A fresh queue that dead-letters after `MAX_RECEIVES` deliveries, plus records.
pub struct QueueFixture {
    pub queue: Arc<dyn Queue>,
    pub records: Records,
}

/// The `max_receives` every fixture queue must be created with.
pub const MAX_RECEIVES: u32 = 2;

fn message(tenant: &domain::TenantId, key: &str, body: &[u8]) -> QueueMessage {
    QueueMessage { tenant: tenant.clone(), kind: "test.kind".into(), idempotency_key: key.into(), body: body.to_vec() }
}

/// Receives until something arrives or ~5 s pass (SQS receives are not instantaneous).
async fn receive_some(q: &dyn Queue, visibility: Duration) -> Vec<ports::queue::Delivery> {
    for _ in 0..25 {
        let got = q.receive(10, visibility).await.unwrap();
        if !got.is_empty() {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Vec::new()
}

pub async fn send_receive_ack(f: QueueFixture) {
    let t = fresh_tenant("q");
    let body: Vec<u8> = (0..=255u8).collect();
    f.queue.send(&message(&t, "k-1", &body)).await.unwrap();
    let got = receive_some(f.queue.as_ref(), Duration::from_secs(30)).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].message, message(&t, "k-1", &body), "tenant, kind, key and bytes survive");
    assert_eq!(got[0].receive_count, 1);
    f.queue.ack(&got[0].receipt).await.unwrap();
    assert!(f.queue.receive(10, Duration::from_secs(30)).await.unwrap().is_empty());
    let big = vec![b'x'; MAX_MESSAGE_BYTES + 1];
    assert_eq!(f.queue.send(&message(&t, "k-2", &big)).await.unwrap_err().code, ErrorCode::InvalidRequest);
}

pub async fn visibility_timeout_and_redelivery(f: QueueFixture) {
    let t = fresh_tenant("vis");
    f.queue.send(&message(&t, "k-vis", b"payload")).await.unwrap();
    // Long enough that the next receive is sure to come inside it on a loaded machine.
    let visibility = Duration::from_secs(4);
    let first = receive_some(f.queue.as_ref(), visibility).await;
    let received = std::time::Instant::now();
    assert_eq!(first.len(), 1);
    assert!(f.queue.receive(10, visibility).await.unwrap().is_empty(), "in flight means invisible");
    tokio::time::sleep((visibility + Duration::from_millis(500)).saturating_sub(received.elapsed())).await;
    let again = receive_some(f.queue.as_ref(), Duration::from_secs(30)).await;
    assert_eq!(again.len(), 1, "an unacknowledged message comes back after its visibility timeout");
    assert_eq!(again[0].receive_count, 2);
    assert_eq!(again[0].message.idempotency_key, "k-vis");
    f.queue.ack(&again[0].receipt).await.unwrap();
}

pub async fn release_makes_visible(f: QueueFixture) {
    let t = fresh_tenant("rel");
    f.queue.send(&message(&t, "k-rel", b"p")).await.unwrap();
    let d = receive_some(f.queue.as_ref(), Duration::from_secs(60)).await;
    assert_eq!(d.len(), 1);
    f.queue.release(&d[0].receipt, Duration::ZERO).await.unwrap();
    let again = receive_some(f.queue.as_ref(), Duration::from_secs(60)).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].receive_count, 2);
}

pub async fn poison_messages_are_dead_lettered(f: QueueFixture) {
    let t = fresh_tenant("dlq");
    f.queue.send(&message(&t, "k-poison", b"poison")).await.unwrap();
    f.queue.send(&message(&t, "k-good", b"good")).await.unwrap();
    let mut good_done = false;
    // Fail the poison message every time; acknowledge the good one.
    for _ in 0..(MAX_RECEIVES + 2) {
        for d in receive_some(f.queue.as_ref(), Duration::from_secs(60)).await {
            if d.message.idempotency_key == "k-good" {
                f.queue.ack(&d.receipt).await.unwrap();
                good_done = true;
            } else {
                assert!(d.receive_count <= MAX_RECEIVES, "never delivered more than max_receives times");
                f.queue.release(&d.receipt, Duration::ZERO).await.unwrap();
            }
        }
    }
    assert!(good_done);
    let mut dead = Vec::new();
    for _ in 0..25 {
        dead = f.queue.dead_letters(10).await.unwrap();
        if !dead.is_empty() {
            break;
        }
        // SQS moves a message to the DLQ on the receive after its last allowed delivery.
        let _ = f.queue.receive(10, Duration::from_secs(60)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(dead.len(), 1, "exactly the poison message is dead-lettered");
    assert_eq!(dead[0].message.idempotency_key, "k-poison");
    assert_eq!(dead[0].message.body, b"poison");
    assert!(!dead[0].reason.is_empty());
    assert!(f.queue.receive(10, Duration::from_secs(60)).await.unwrap().is_empty());
}

/// A consumer that claims the idempotency key before its effect has exactly one effect,
/// even when it crashes after the effect and the message is redelivered.
pub async fn consumption_is_idempotent(f: QueueFixture) {
    let t = fresh_tenant("idem");
    f.queue.send(&message(&t, "batch-42", b"+1")).await.unwrap();
    let mut effects = 0;
    let mut deliveries = 0;
    for attempt in 0..2 {
        let got = receive_some(f.queue.as_ref(), Duration::from_secs(1)).await;
        assert_eq!(got.len(), 1, "attempt {attempt} gets the message");
        deliveries += 1;
        let d = &got[0];
        if f.records.claim(&d.message.tenant, &d.message.idempotency_key, Timestamp(1)).await.unwrap() {
            effects += 1;
        }
        if attempt == 0 {
            // Crash before acknowledging: wait out the visibility timeout.
            tokio::time::sleep(Duration::from_millis(1500)).await;
        } else {
            f.queue.ack(&d.receipt).await.unwrap();
        }
    }
    assert_eq!((deliveries, effects), (2, 1));
    let other = fresh_tenant("idem-other");
    assert!(f.records.claim(&other, "batch-42", Timestamp(1)).await.unwrap(), "keys are per tenant");
}
