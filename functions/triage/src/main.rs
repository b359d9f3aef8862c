//! Lambda `continuity-triage`: the Task states of the triage state machine invoke it
//! directly, and the approval-waits queue through an SQS event source (see `lib.rs`).
//! Environment as for `continuity-http` (table, cache, search).
//!
//! Locally: `cargo lambda watch` then
//! `cargo lambda invoke continuity-triage --data-file events/triage-score.json` (or
//! `events/triage-wait-sqs.json`).

use std::sync::Arc;

use lambda_runtime::{LambdaEvent, service_fn};
use ports::SystemClock;
use services::Services;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_support::init_logging();
    let settings = store_aws::LambdaEnv::from_env()?;
    let backend = store_aws::backend(&settings.aws, &settings.aws.function_sdk_config(), Arc::new(SystemClock))?;
    let services = Services::for_lambda(backend);
    let tasks = services.governance.tasks().clone();
    lambda_runtime::run(service_fn(|event: LambdaEvent<serde_json::Value>| {
        let tasks = tasks.clone();
        async move {
            let answer = continuity_triage::handle(&tasks, event.payload).await;
            metrics::flush_emf();
            answer
        }
    }))
    .await
}
