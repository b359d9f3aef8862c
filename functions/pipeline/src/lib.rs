//! The pipeline consumer's SQS handler: each record of the event is one queue message
//! (`ingest.batch` or `ingest.record`), handed to the service its kind names by `services::consumer::Consumer`. Failures
//! are answered as **partial batch failures** (`ReportBatchItemFailures`): SQS retries
//! only those messages and, after the redrive policy's `maxReceiveCount`, moves them to
//! the dead-letter queue; the rest of the batch is deleted. The messages of a batch are
//! processed concurrently.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use ports::queue::Delivery;
use services::Services;

/// Processes an SQS event; returns the messages to retry. The messages run at once,
/// each on its own task (a batch of 10 takes as long as its slowest message, not the
/// sum), and a message whose task panics is retried like one that failed.
pub async fn handle(services: &Services, event: SqsEvent) -> SqsBatchResponse {
    let mut failures = Vec::new();
    let mut running = Vec::new();
    for record in event.records {
        let id = record.message_id.clone().unwrap_or_default();
        let receive_count = record.attributes.get("ApproximateReceiveCount").and_then(|c| c.parse().ok()).unwrap_or(1);
        let message = match store_aws::sqs::decode(record.body.as_deref().unwrap_or("")) {
            Ok(m) => m,
            Err(reason) => {
                // Not ours: retrying cannot help, but dropping it silently would lose it.
                // Fail it so the redrive policy parks it in the DLQ for a person to read.
                tracing::error!(message_id = %id, %reason, "a message that is not a Continuity envelope");
                failures.push(id);
                continue;
            }
        };
        let kind = message.kind.clone();
        if !services::consumer::Consumer::handles(&kind) {
            tracing::error!(message_id = %id, %kind, "a message kind this consumer does not handle");
            failures.push(id);
            continue;
        }
        let delivery = Delivery { message, receipt: id.clone(), receive_count };
        let services = services.clone();
        running.push((id, tokio::spawn(async move { process(&services, &delivery).await })));
    }
    for (id, task) in running {
        match task.await {
            Ok(true) => {}
            Ok(false) => failures.push(id),
            Err(e) => {
                tracing::error!(message_id = %id, error = %e, "the message's task failed; SQS will retry it");
                failures.push(id);
            }
        }
    }
    lambda_support::batch_response(failures)
}

/// One message: whether it was processed (else SQS retries it).
async fn process(services: &Services, delivery: &Delivery) -> bool {
    let (id, kind) = (&delivery.receipt, &delivery.message.kind);
    match services.consumer.process(delivery).await {
        Ok(()) => {
            tracing::info!(message_id = %id, %kind, "processed");
            true
        }
        Err(e) => {
            if matches!(e.code, domain::ErrorCode::Unavailable | domain::ErrorCode::Internal) {
                services.consumer.failed(delivery, &e).await;
            }
            tracing::warn!(message_id = %id, code = e.code.as_str(), error = %e.message, "failed; SQS will retry it");
            false
        }
    }
}
