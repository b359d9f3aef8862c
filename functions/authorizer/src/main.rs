//! Lambda `continuity-authorizer`: API Gateway invokes it (REQUEST type) before every
//! protected route. Environment as for `continuity-http` (it reads the table and cache).
//!
//! Locally: `cargo lambda watch` then
//! `cargo lambda invoke continuity-authorizer --data-file events/authorizer-request.json`.

use std::sync::Arc;

use aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest;
use lambda_runtime::{LambdaEvent, service_fn};
use ports::SystemClock;
use services::Services;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_support::init_logging();
    let settings = store_aws::LambdaEnv::from_env()?;
    // Only what authentication reaches is built and linked (the deployment zip's size).
    let backend = store_aws::authorizer_backend(&settings.aws, &settings.aws.function_sdk_config(), Arc::new(SystemClock))?;
    let auth = Arc::new(Services::authenticator(backend));
    let public_url = settings.public_url;
    lambda_runtime::run(service_fn(|event: LambdaEvent<ApiGatewayCustomAuthorizerRequestTypeRequest>| {
        let auth = auth.clone();
        let public_url = public_url.clone();
        async move {
            let decision = continuity_authorizer::decide(&auth, &event.payload, &public_url).await;
            metrics::flush_emf();
            // An outage fails the invocation: API Gateway answers 503
            // (AUTHORIZER_CONFIGURATION_ERROR, set to 503 + Retry-After in the template).
            decision.map_err(|e| lambda_support::diagnostic(&e.0))
        }
    }))
    .await
}
