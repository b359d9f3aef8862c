//! Lambda `continuity-pipeline`: the SQS event source on the work queue invokes it with
//! up to 10 messages (`FunctionResponseTypes: ReportBatchItemFailures`). Environment as
//! for `continuity-http` (table, queue, bucket, cache).
//!
//! Locally: `cargo lambda watch` then
//! `cargo lambda invoke continuity-pipeline --data-file events/pipeline-sqs-ingest.json`.

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{LambdaEvent, service_fn};
use ports::SystemClock;
use services::Services;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_support::init_logging();
    let settings = store_aws::LambdaEnv::from_env()?;
    let backend = store_aws::backend(&settings.aws, &settings.aws.function_sdk_config(), Arc::new(SystemClock))?;
    let services = Services::for_lambda(backend);
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        let services = services.clone();
        async move {
            let answer = continuity_pipeline::handle(&services, event.payload).await;
            metrics::flush_emf();
            Ok::<_, lambda_runtime::Error>(answer)
        }
    }))
    .await
}
