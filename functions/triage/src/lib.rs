//! The `continuity-triage` Lambda's handler. Two kinds of event reach it:
//!
//! - a Task state of `statemachines/triage.asl.json` invoking it directly with
//!   `{"task": "score" | "auto_approve" | "write" | "record_rejection" | "escalate" |
//!   "record_failure", "tenant": …, "proposal": …}`: it runs that task
//!   (`services::governance::Tasks::run`) and answers its output. A failure's
//!   `errorType` is the error taxonomy's code (`UNAVAILABLE`, `CONFLICT`, …), which the
//!   state machine's `Retry` (on `UNAVAILABLE`) and `Catch` match;
//! - the approval-waits queue (SQS event source, `ReportBatchItemFailures`): each
//!   message is one `AwaitApproval` wait — `{"tenant", "proposal", "token",
//!   "timeout_seconds"}` — stored with its proposal (`Tasks::register_wait`), which puts
//!   it in the approvers' queue.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::Diagnostic;
use serde_json::Value;
use services::governance::Tasks;
use services::governance::tasks::WaitMessage;

pub use lambda_support::diagnostic;

/// Stores each wait of an SQS batch; the messages that failed are reported for redelivery.
pub async fn waits(tasks: &Tasks, event: SqsEvent) -> SqsBatchResponse {
    let mut failures = Vec::new();
    for record in event.records {
        let id = record.message_id.clone().unwrap_or_default();
        let stored = async {
            let m: WaitMessage = serde_json::from_str(record.body.as_deref().unwrap_or_default())
                .map_err(|e| domain::Error::invalid_field("body", e.to_string()))?;
            let tenant = domain::TenantId::new(m.tenant)?;
            let proposal = domain::Id::new(m.proposal)?;
            tasks.register_wait(&tenant, &proposal, &m.token, m.timeout_seconds).await
        }
        .await;
        match stored {
            Ok(p) => tracing::info!(proposal = %p.id, "wait stored: the proposal is in the approvers' queue"),
            Err(e) => {
                tracing::warn!(code = ?e.code, message_id = %id, "could not store a wait; SQS redelivers it");
                failures.push(id);
            }
        }
    }
    lambda_support::batch_response(failures)
}

/// Dispatches one invocation: an SQS batch (it has `Records`) or a Task state's payload.
///
/// # Errors
/// The task's error, as a [`Diagnostic`] whose type is the taxonomy code.
pub async fn handle(tasks: &Tasks, event: Value) -> Result<Value, Diagnostic> {
    if event.get("Records").is_some() {
        let batch: SqsEvent = serde_json::from_value(event)
            .map_err(|e| Diagnostic { error_type: "INVALID_REQUEST".into(), error_message: e.to_string() })?;
        let response = waits(tasks, batch).await;
        return serde_json::to_value(response)
            .map_err(|e| Diagnostic { error_type: "INTERNAL".into(), error_message: e.to_string() });
    }
    tasks.run(event).await.map_err(|e| diagnostic(&e))
}
