//! Lambda `continuity-ingest`: triggered by API Gateway (REST) for `/v1/connectors`, `/v1/connectors/{source}`,
//! `/v1/ingest/{source}` and `/v1/ingest/failures`, after the `continuity-authorizer` Lambda allowed the request.
//!
//! Environment (set by `infra/template.yaml`): `CONTINUITY_TABLE`, `CONTINUITY_QUEUE_URL`,
//! `CONTINUITY_DLQ_URL`, `CONTINUITY_BUCKET`, `CONTINUITY_REDIS_URLS`,
//! `CONTINUITY_PUBLIC_URL`, `CONTINUITY_ALLOWED_HOSTS` (optional), `AWS_REGION`, `RUST_LOG`.
//!
//! Locally: `cargo lambda watch` then
//! `cargo lambda invoke continuity-ingest --data-file events/ingest-hubspot.json`.

use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    gateway::lambda::init_logging();
    let env = store_aws::LambdaEnv::from_env()?;
    let backend = store_aws::backend(&env.aws, Arc::new(ports::SystemClock)).await?;
    lambda_http::run(gateway::lambda::app_with_hosts(services::Services::new(backend), env.public_url, env.allowed_hosts)).await
}
