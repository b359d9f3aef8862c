//! Lambda `continuity-maintenance`: an EventBridge schedule (hourly, `infra/template.yaml`)
//! invokes it with a scheduled event; it prunes the audit ledger beyond its retention,
//! expires session-scope memory and deletes expired OAuth records. Environment as for
//! `continuity-http`.
//!
//! Locally: `cargo lambda watch` then
//! `cargo lambda invoke continuity-maintenance --data-file events/maintenance-schedule.json`.

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
    lambda_runtime::run(service_fn(|event: LambdaEvent<serde_json::Value>| {
        let services = services.clone();
        async move {
            let answer = continuity_maintenance::handle(&services, &event.payload).await;
            metrics::flush_emf();
            answer.map_err(|e| lambda_runtime::Error::from(format!("{}: {}", e.code.as_str(), e.message)))
        }
    }))
    .await
}
