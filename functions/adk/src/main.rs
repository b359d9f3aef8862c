//! Lambda `continuity-adk`: triggered by API Gateway (REST) for `/v1/capabilities` and
//! `/v1/capabilities/{capability}`, after the `continuity-authorizer` Lambda allowed the request.
//!
//! Environment (set by `infra/template.yaml`): `CONTINUITY_TABLE`, `CONTINUITY_QUEUE_URL`,
//! `CONTINUITY_DLQ_URL`, `CONTINUITY_BUCKET`, `CONTINUITY_REDIS_URLS`,
//! `CONTINUITY_PUBLIC_URL`, `AWS_REGION`, `RUST_LOG`.
//!
//! Locally: `cargo lambda watch` then
//! `cargo lambda invoke continuity-adk --data-file events/adk-list-capabilities.json`.

use std::sync::Arc;

use ports::SystemClock;
use services::Services;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tracing_subscriber::fmt()
        .json()
        .without_time()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,rmcp=warn".into()))
        .init();
    let settings = store_aws::LambdaEnv::from_env()?;
    let backend = store_aws::backend(&settings.aws, Arc::new(SystemClock)).await?;
    let app = gateway::lambda::app(Services::new(backend), settings.public_url);
    lambda_http::run(app).await
}
