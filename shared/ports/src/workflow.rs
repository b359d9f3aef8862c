//! The triage workflow (SPEC §6.3): Score → Choice → AutoApprove → Write |
//! AwaitApproval (a task token, a timeout and a heartbeat) | Reject → RecordRejection,
//! with retries and a recorded failure.
//!
//! Two adapters run the same states with the same task code
//! (`services::governance::tasks`): Step Functions executing
//! `statemachines/triage.asl.json` on AWS (`store_aws::StepFunctionsWorkflow`), and the
//! embedded runner in `continuity serve` (`services::governance::EmbeddedRunner`), whose
//! waits live with the proposal in the store so a restart keeps them.

use async_trait::async_trait;
use domain::{Id, Result, TenantId};
use serde_json::Value;

/// The error name a rejection ends a wait with; the state machine catches it and goes
/// to `RecordRejection`.
pub const REJECTED: &str = "Rejected";

#[async_trait]
pub trait Workflow: Send + Sync {
    /// `step-functions` or `embedded`, for start-up messages.
    fn name(&self) -> &'static str;
    /// Starts triage for a stored `pending` proposal. Starting it twice runs it once.
    ///
    /// # Errors
    /// `UNAVAILABLE`; the task code's errors on the embedded runner.
    async fn start(&self, tenant: &TenantId, proposal: &Id) -> Result<()>;
    /// Ends a wait with the person's approval (`SendTaskSuccess`).
    ///
    /// # Errors
    /// `CONFLICT` when the wait has ended (timed out, decided) or the token is unknown;
    /// `UNAVAILABLE`.
    async fn send_success(&self, token: &str, output: &Value) -> Result<()>;
    /// Ends a wait with an error (`SendTaskFailure`): [`REJECTED`] for a rejection.
    ///
    /// # Errors
    /// As [`Self::send_success`].
    async fn send_failure(&self, token: &str, error: &str, cause: &str) -> Result<()>;
    /// Tells the workflow the wait is still held (`SendTaskHeartbeat`).
    ///
    /// # Errors
    /// As [`Self::send_success`].
    async fn send_heartbeat(&self, token: &str) -> Result<()>;
}
