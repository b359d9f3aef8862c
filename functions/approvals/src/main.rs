//! Lambda `continuity-approvals`: triggered by API Gateway (REST) for the approvals
//! console (`GET /approvals`, `POST /approvals/{login,logout,{id}/decide}`, which sign
//! their own users in and bypass the authorizer) and the approver API
//! (`/v1/approvals…`, after the `continuity-authorizer` Lambda allowed the request).
//! Every decision sends the wait's task token to the triage state machine
//! (`SendTaskSuccess`/`SendTaskFailure`).
//!
//! Environment as for `continuity-adk`, plus `CONTINUITY_TRIAGE_STATE_MACHINE`.
//!
//! Locally: `cargo lambda watch` then
//! `cargo lambda invoke continuity-approvals --data-file events/approvals-list.json`
//! (or `events/approvals-console.json`, `events/approvals-reject.json`).

use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    gateway::lambda::init_logging();
    let env = store_aws::LambdaEnv::from_env()?;
    let backend = store_aws::backend(&env.aws, Arc::new(ports::SystemClock)).await?;
    lambda_http::run(gateway::lambda::app_with_hosts(services::Services::new(backend), env.public_url, env.allowed_hosts)).await
}
