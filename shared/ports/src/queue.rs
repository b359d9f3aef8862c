//! The work-queue port: at-least-once delivery with a visibility timeout, redelivery and
//! dead-lettering. Consumers make effects exactly-once with idempotency keys
//! ([`crate::records::IdempotencyStore`]).

use std::time::Duration;

use async_trait::async_trait;
use domain::{Result, TenantId, Timestamp};

/// Upper bound on one message body (SQS allows 256 KiB).
pub const MAX_MESSAGE_BYTES: usize = 240 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMessage {
    pub tenant: TenantId,
    /// What the consumer should do (`ingest.batch`, …).
    pub kind: String,
    /// Unique per logical message; a consumer claims it before acting.
    pub idempotency_key: String,
    pub body: Vec<u8>,
}

/// One delivery of a message. Acknowledge it with its receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub message: QueueMessage,
    pub receipt: String,
    /// 1 on first delivery, +1 on each redelivery.
    pub receive_count: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub message: QueueMessage,
    pub receive_count: u32,
    pub reason: String,
    pub dead_at: Timestamp,
}

#[async_trait]
pub trait Queue: Send + Sync {
    /// Enqueues a message; it is durable when this returns.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for bodies over [`MAX_MESSAGE_BYTES`]; `UNAVAILABLE` when the
    /// queue cannot be reached.
    async fn send(&self, message: &QueueMessage) -> Result<()>;

    /// Receives up to `max` visible messages (at most 10) and hides each for `visibility`.
    /// A message already delivered `max_receives` times is moved to the dead-letter queue
    /// instead of being delivered again.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the queue cannot be reached.
    async fn receive(&self, max: u32, visibility: Duration) -> Result<Vec<Delivery>>;

    /// Deletes a delivered message for good.
    ///
    /// # Errors
    /// `NOT_FOUND` when the receipt is unknown or stale (the message was redelivered to
    /// someone else; SQS tolerates this, so adapters may also succeed); `UNAVAILABLE`.
    async fn ack(&self, receipt: &str) -> Result<()>;

    /// Makes a delivered message visible again after `delay` (a failed attempt).
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown receipt; `UNAVAILABLE`.
    async fn release(&self, receipt: &str, delay: Duration) -> Result<()>;

    /// Reads (without consuming) up to `max` dead letters.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the queue cannot be reached.
    async fn dead_letters(&self, max: u32) -> Result<Vec<DeadLetter>>;

    /// How many messages wait (visible or in flight), for metrics.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the queue cannot be reached.
    async fn depth(&self) -> Result<u64>;
}
