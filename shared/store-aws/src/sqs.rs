//! The work-queue port over SQS: a standard queue plus a dead-letter queue.
//!
//! - A message travels as a JSON envelope in the SQS body (see [`Envelope`]); the body
//!   bytes are base64, because SQS bodies must be XML-safe text and the port's bodies
//!   are arbitrary bytes.
//! - Redelivery is SQS's visibility timeout; the receipt is the SQS receipt handle.
//! - Dead-lettering is the queue's `RedrivePolicy`: SQS itself moves a message whose
//!   receive count reached `maxReceiveCount` to the dead-letter queue on the next receive,
//!   so this adapter never counts deliveries itself.
//!
//! Queues must allow messages of at least `4/3 ×` [`MAX_MESSAGE_BYTES`] plus the envelope
//! (about 330 KB): SQS's current default `MaximumMessageSize` (1 MiB) does; a queue
//! created with the old 256 KiB limit does not.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use domain::{Error, Result, TenantId};
use ports::clock::{Clock, SystemClock};
use ports::queue::{DeadLetter, Delivery, MAX_MESSAGE_BYTES, Queue, QueueMessage};
use serde::{Deserialize, Serialize};

use crate::unavailable;

/// SQS's limits on one ReceiveMessage and on a visibility timeout (12 hours).
const MAX_BATCH: u32 = 10;
const MAX_VISIBILITY_SECS: u64 = 43_200;
/// SQS's largest allowed message, set explicitly on queues the helper creates.
const MAX_SQS_MESSAGE_BYTES: u32 = 1_048_576;

/// The SQS body of one message.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Envelope {
    tenant: String,
    kind: String,
    idempotency_key: String,
    body_b64: String,
}

/// The SQS body of `message` (sample events and tests build them with it).
///
/// # Errors
/// `INTERNAL` if it cannot be serialised.
pub fn encode(message: &QueueMessage) -> Result<String> {
    let envelope = Envelope {
        tenant: message.tenant.as_str().to_owned(),
        kind: message.kind.clone(),
        idempotency_key: message.idempotency_key.clone(),
        body_b64: B64.encode(&message.body),
    };
    serde_json::to_string(&envelope).map_err(|e| Error::internal(format!("queue envelope: {e}")))
}

/// Decodes an SQS body (also what the pipeline Lambda's SQS event carries). Failing
/// means someone else wrote to our queue (or a bug did).
///
/// # Errors
/// A description of what is wrong with the body.
pub fn decode(body: &str) -> std::result::Result<QueueMessage, String> {
    let e: Envelope = serde_json::from_str(body).map_err(|e| format!("not a queue envelope: {e}"))?;
    let tenant = TenantId::new(e.tenant).map_err(|e| format!("bad tenant: {e}"))?;
    let body = B64.decode(e.body_b64).map_err(|e| format!("bad base64 body: {e}"))?;
    Ok(QueueMessage { tenant, kind: e.kind, idempotency_key: e.idempotency_key, body })
}

/// A duration as whole seconds for SQS, rounded up so a consumer never gets less time
/// than it asked for, and capped at SQS's maximum.
fn whole_secs(d: Duration) -> i32 {
    let secs = d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0)).min(MAX_VISIBILITY_SECS);
    i32::try_from(secs).unwrap_or(i32::MAX)
}

/// The work queue over one SQS queue and its dead-letter queue.
#[derive(Clone)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
    dead_letter_queue_url: String,
    clock: std::sync::Arc<dyn Clock>,
}

impl std::fmt::Debug for SqsQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsQueue")
            .field("queue_url", &self.queue_url)
            .field("dead_letter_queue_url", &self.dead_letter_queue_url)
            .finish_non_exhaustive()
    }
}

impl SqsQueue {
    /// A queue whose `RedrivePolicy` already names `dead_letter_queue_url` (the SAM
    /// template wires both).
    pub fn new(client: Client, queue_url: impl Into<String>, dead_letter_queue_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
            dead_letter_queue_url: dead_letter_queue_url.into(),
            clock: std::sync::Arc::new(SystemClock),
        }
    }

    /// Uses `clock` for the `dead_at` of dead letters.
    #[must_use]
    pub fn with_clock(mut self, clock: std::sync::Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    pub fn dead_letter_queue_url(&self) -> &str {
        &self.dead_letter_queue_url
    }

    /// Creates (or reuses) the queue `name` and its dead-letter queue `{name}-dlq`, and
    /// sets a `RedrivePolicy` dead-lettering after `max_receives` deliveries.
    ///
    /// For tests and local development only: production queues come from the SAM template.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a zero `max_receives`; `UNAVAILABLE` when SQS cannot be
    /// reached or refuses the queues.
    pub async fn create_with_dlq(client: Client, name: &str, max_receives: u32) -> Result<Self> {
        if max_receives == 0 {
            return Err(Error::invalid_field("max_receives", "must be at least 1"));
        }
        let dlq_url = create_queue(&client, &format!("{name}-dlq"), Vec::new()).await?;
        let dlq_arn = client
            .get_queue_attributes()
            .queue_url(&dlq_url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| unavailable("sqs GetQueueAttributes", &e))?
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
            .ok_or_else(|| Error::unavailable(format!("sqs returned no QueueArn for {dlq_url}")))?;
        let redrive = serde_json::json!({ "deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receives.to_string() });
        let queue_url = create_queue(&client, name, vec![(QueueAttributeName::RedrivePolicy, redrive.to_string())]).await?;
        Ok(Self::new(client, queue_url, dlq_url))
    }

    async fn receive_from(&self, url: &str, max: u32, visibility: i32) -> Result<Vec<(QueueMessage, String, u32)>> {
        let max = max.min(MAX_BATCH);
        if max == 0 {
            return Ok(Vec::new());
        }
        let out = self
            .client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(i32::try_from(max).unwrap_or(10))
            .visibility_timeout(visibility)
            // Short polling: callers (Lambda consumers, the contract tests) poll in their
            // own loops and must not be held for up to 20 s by an empty queue.
            .wait_time_seconds(0)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(|e| unavailable("sqs ReceiveMessage", &e))?;
        let mut got = Vec::new();
        for m in out.messages() {
            let (Some(body), Some(receipt)) = (m.body(), m.receipt_handle()) else {
                tracing::warn!(queue = url, message_id = ?m.message_id(), "sqs message without body or receipt; skipped");
                continue;
            };
            let count = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|c| c.parse::<u32>().ok())
                .unwrap_or(1);
            match decode(body) {
                Ok(message) => got.push((message, receipt.to_owned(), count)),
                // Left alone, an undecodable message becomes visible again and SQS
                // dead-letters it after maxReceiveCount receives, where operators see it.
                Err(why) => {
                    tracing::warn!(queue = url, message_id = ?m.message_id(), %why, "undecodable sqs message; skipped")
                }
            }
        }
        Ok(got)
    }
}

async fn create_queue(client: &Client, name: &str, mut attrs: Vec<(QueueAttributeName, String)>) -> Result<String> {
    attrs.push((QueueAttributeName::MaximumMessageSize, MAX_SQS_MESSAGE_BYTES.to_string()));
    let mut req = client.create_queue().queue_name(name);
    for (k, v) in attrs {
        req = req.attributes(k, v);
    }
    req.send()
        .await
        .map_err(|e| unavailable("sqs CreateQueue", &e))?
        .queue_url()
        .map(str::to_owned)
        .ok_or_else(|| Error::unavailable(format!("sqs returned no QueueUrl for {name}")))
}

#[async_trait]
impl Queue for SqsQueue {
    async fn send(&self, message: &QueueMessage) -> Result<()> {
        if message.body.len() > MAX_MESSAGE_BYTES {
            return Err(Error::invalid_field("body", format!("must be at most {MAX_MESSAGE_BYTES} bytes")));
        }
        let body = encode(message)?;
        self.client.send_message().queue_url(&self.queue_url).message_body(body).send().await.map_err(|e| {
            match e.as_service_error() {
                Some(s) if s.is_invalid_message_contents() => Error::invalid_field("body", "rejected by the queue"),
                _ => unavailable("sqs SendMessage", &e),
            }
        })?;
        Ok(())
    }

    async fn receive(&self, max: u32, visibility: Duration) -> Result<Vec<Delivery>> {
        let got = self.receive_from(&self.queue_url, max, whole_secs(visibility)).await?;
        Ok(got.into_iter().map(|(message, receipt, receive_count)| Delivery { message, receipt, receive_count }).collect())
    }

    /// SQS accepts a stale receipt handle on delete (the message may then be delivered
    /// again, which idempotency keys absorb); only a malformed one is `NOT_FOUND`.
    async fn ack(&self, receipt: &str) -> Result<()> {
        self.client.delete_message().queue_url(&self.queue_url).receipt_handle(receipt).send().await.map_err(|e| {
            match e.as_service_error() {
                Some(s) if s.is_receipt_handle_is_invalid() => Error::not_found("queue receipt"),
                _ => unavailable("sqs DeleteMessage", &e),
            }
        })?;
        Ok(())
    }

    async fn release(&self, receipt: &str, delay: Duration) -> Result<()> {
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            .visibility_timeout(whole_secs(delay))
            .send()
            .await
            .map_err(|e| match e.as_service_error() {
                Some(s) if s.is_receipt_handle_is_invalid() || s.is_message_not_inflight() => Error::not_found("queue receipt"),
                _ => unavailable("sqs ChangeMessageVisibility", &e),
            })?;
        Ok(())
    }

    /// Peeks at the dead-letter queue: a receive with a zero visibility timeout leaves
    /// every message visible, so nothing is consumed.
    async fn dead_letters(&self, max: u32) -> Result<Vec<DeadLetter>> {
        let got = self.receive_from(&self.dead_letter_queue_url, max, 0).await?;
        // SQS records neither when nor why a message was moved; the only reason it moves
        // one is the RedrivePolicy, and the time we report is when we looked.
        let now = self.clock.now();
        Ok(got
            .into_iter()
            .map(|(message, _, count)| DeadLetter {
                message,
                // The count carries over from the source queue, but receives from the
                // dead-letter queue add to it, this peek included: take that one off.
                // Earlier peeks still inflate it, hence "approximate".
                receive_count: count.saturating_sub(1).max(1),
                reason: "exceeded max receives".to_owned(),
                dead_at: now,
            })
            .collect())
    }

    async fn depth(&self) -> Result<u64> {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(&self.queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .map_err(|e| unavailable("sqs GetQueueAttributes", &e))?;
        let attr = |name: &QueueAttributeName| -> u64 {
            out.attributes().and_then(|a| a.get(name)).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        };
        Ok(attr(&QueueAttributeName::ApproximateNumberOfMessages)
            .saturating_add(attr(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: Vec<u8>) -> QueueMessage {
        QueueMessage { tenant: TenantId::new("acme").unwrap(), kind: "ingest.batch".into(), idempotency_key: "k-1".into(), body }
    }

    #[test]
    fn envelopes_carry_arbitrary_bytes() {
        for body in [Vec::new(), b"{\"a\":1}".to_vec(), (0..=255u8).collect(), vec![0xff; 1000]] {
            let m = message(body);
            let encoded = encode(&m).unwrap();
            // SQS accepts only XML-safe text: base64 inside JSON is plain ASCII.
            assert!(encoded.bytes().all(|b| (0x20..0x7f).contains(&b)), "{encoded}");
            assert_eq!(decode(&encoded).unwrap(), m);
        }
    }

    #[test]
    fn foreign_bodies_are_refused() {
        assert!(decode("hello").is_err());
        assert!(decode(r#"{"tenant":"Bad Tenant","kind":"k","idempotency_key":"i","body_b64":""}"#).is_err());
        assert!(decode(r#"{"tenant":"acme","kind":"k","idempotency_key":"i","body_b64":"***"}"#).is_err());
    }

    #[test]
    fn the_largest_body_fits_an_sqs_message() {
        let encoded = encode(&message(vec![0xab; MAX_MESSAGE_BYTES])).unwrap();
        assert!(encoded.len() < MAX_SQS_MESSAGE_BYTES as usize);
    }

    #[test]
    fn visibility_rounds_up_to_whole_seconds() {
        assert_eq!(whole_secs(Duration::ZERO), 0);
        assert_eq!(whole_secs(Duration::from_millis(1)), 1);
        assert_eq!(whole_secs(Duration::from_secs(30)), 30);
        assert_eq!(whole_secs(Duration::from_millis(1500)), 2);
        assert_eq!(whole_secs(Duration::from_secs(u64::MAX)), 43_200);
    }
}
