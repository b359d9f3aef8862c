//! Lambda `continuity-oauth`: triggered by API Gateway (REST) for `/.well-known/{proxy+}`
//! and `/oauth/{proxy+}`, which are public (no authorizer): discovery documents, JWKS,
//! dynamic client registration, the login and consent pages, token and revocation.
//!
//! Environment (set by `infra/template.yaml`): `CONTINUITY_TABLE`, `CONTINUITY_QUEUE_URL`,
//! `CONTINUITY_DLQ_URL`, `CONTINUITY_BUCKET`, `CONTINUITY_REDIS_URLS`,
//! `CONTINUITY_JWT_KMS_KEYS` (the KMS signing key first), `CONTINUITY_PUBLIC_URL`,
//! `AWS_REGION`, `RUST_LOG`.
//!
//! Locally: `cargo lambda watch` then
//! `cargo lambda invoke continuity-oauth --data-file events/oauth-metadata.json`.

use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    gateway::lambda::init_logging();
    let env = store_aws::LambdaEnv::from_env()?;
    let backend = store_aws::backend(&env.aws, Arc::new(ports::SystemClock)).await?;
    lambda_http::run(gateway::lambda::app_with_hosts(services::Services::new(backend), env.public_url, env.allowed_hosts)).await
}
