//! Lambda `continuity-http`: every HTTP function of the stack runs this one binary — the
//! same router `continuity serve` mounts, behind API Gateway (REST). The template deploys
//! it six times, one function per group of routes, each with the IAM role its routes
//! need (least privilege per function; one binary, so one release build and link):
//!
//! - `McpFunction`: `/mcp`, `/` and `/healthz`, after the `continuity-authorizer` Lambda;
//! - `AdkFunction`: `/v1/capabilities` and `/v1/capabilities/{capability}`, authorized;
//! - `OAuthFunction`: `/.well-known/{proxy+}` and `/oauth/{proxy+}`, public (discovery,
//!   JWKS, registration, the sign-in and consent pages, token, revocation);
//! - `IngestFunction`: `/v1/connectors…`, `/v1/ingest…`, `/v1/kb…`, authorized;
//! - `AdminFunction`: the admin API (`/v1/admin/{proxy+}`: tenants, keys, users, clients,
//!   IdPs, entities), authorized;
//! - `ApprovalsFunction`: the approvals console (`/approvals…`, which signs its own users
//!   in) and the approver API (`/v1/approvals…`, authorized) — the only HTTP function
//!   allowed to send Step Functions task tokens.
//!
//! Environment (set by `infra/template.yaml`): `CONTINUITY_TABLE`, `CONTINUITY_QUEUE_URL`,
//! `CONTINUITY_DLQ_URL`, `CONTINUITY_BUCKET`, `CONTINUITY_REDIS_URLS`,
//! `CONTINUITY_PUBLIC_URL`, `CONTINUITY_ALLOWED_HOSTS` and `CONTINUITY_ALLOWED_ORIGINS` (optional), `CONTINUITY_STACK` (the metrics' `Stack` dimension), `AWS_REGION`, `RUST_LOG`,
//! and the optional ones of `store_aws::LambdaEnv`.
//!
//! Locally: `cargo lambda watch` then
//! `cargo lambda invoke continuity-http --data-file events/mcp-tools-list.json` (any of the
//! API Gateway events in `events/`).

use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    gateway::lambda::init_logging();
    let env = store_aws::LambdaEnv::from_env()?;
    let backend = store_aws::backend(&env.aws, &env.aws.function_sdk_config(), Arc::new(ports::SystemClock))?;
    let services = services::Services::for_lambda(backend);
    lambda_http::run(gateway::lambda::app_with_hosts(services, env.public_url, env.allowed_hosts, env.allowed_origins)).await
}
