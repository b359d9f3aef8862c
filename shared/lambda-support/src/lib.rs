//! What every Lambda of the stack shares, kept apart from the HTTP stack (axum, rmcp) so
//! the event-driven functions (`continuity-authorizer`, `-pipeline`, `-maintenance`,
//! `-triage`) do not depend on it:
//!
//! - [`init_logging`] and [`log_filter`]: JSON logs (CloudWatch adds the time) whose
//!   filter keeps message content out at every level;
//! - [`diagnostic`]: a taxonomy error as the Lambda error Step Functions' `Retry`/`Catch`
//!   match on (`errorType` = the code);
//! - [`batch_response`]: an SQS partial-batch answer naming the messages to retry;
//! - [`api_base_url`]: the API's base URL as a client called it.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse};
use lambda_runtime::Diagnostic;

/// Libraries that log what passes through them at debug or trace level — rmcp whole
/// JSON-RPC messages (turns, proposed bodies), the AWS SDK and HTTP stacks headers and
/// bodies, the Lambda runtime its events. Whatever `RUST_LOG` asks for, they log at
/// `warn` at most, so content stays out of logs at every level.
const CONTENT_TARGETS: &[&str] = &[
    "rmcp",
    "lambda_runtime",
    "lambda_runtime_api_client",
    "lambda_http",
    "aws_smithy_runtime",
    "aws_smithy_runtime_api",
    "aws_smithy_http",
    "aws_smithy_http_client",
    "aws_sigv4",
    "aws_config",
    "hyper",
    "hyper_util",
    "h2",
    "reqwest",
    "redis",
    "rustls",
    "tokenizers",
];

/// The log filter of every binary (the Lambdas and `continuity`): `RUST_LOG` (default
/// `info`), with [`CONTENT_TARGETS`] capped at `warn`.
pub fn log_filter() -> tracing_subscriber::EnvFilter {
    capped(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")))
}

/// [`log_filter`] as if `RUST_LOG` were `directives` (tests ask for `trace`).
pub fn log_filter_with(directives: &str) -> tracing_subscriber::EnvFilter {
    capped(tracing_subscriber::EnvFilter::new(directives))
}

fn capped(mut filter: tracing_subscriber::EnvFilter) -> tracing_subscriber::EnvFilter {
    for target in CONTENT_TARGETS {
        if let Ok(d) = format!("{target}=warn").parse() {
            filter = filter.add_directive(d);
        }
    }
    filter
}

/// JSON logs for a Lambda (CloudWatch adds the time), filtered by [`log_filter`].
pub fn init_logging() {
    tracing_subscriber::fmt().json().without_time().with_env_filter(log_filter()).init();
}

/// A taxonomy error as a Lambda error: its code as `errorType` (what Step Functions'
/// `Retry` and `Catch` match), its client-safe message as `errorMessage`.
pub fn diagnostic(e: &domain::Error) -> Diagnostic {
    Diagnostic { error_type: e.code.as_str().to_owned(), error_message: e.message.clone() }
}

/// An SQS partial-batch answer: the messages in `failed` are redelivered (and
/// dead-lettered after the queue's last receive); the rest are deleted.
pub fn batch_response(failed: impl IntoIterator<Item = String>) -> SqsBatchResponse {
    let mut r = SqsBatchResponse::default();
    r.batch_item_failures = failed
        .into_iter()
        .map(|id| {
            let mut f = BatchItemFailure::default();
            f.item_identifier = id;
            f
        })
        .collect();
    r
}

/// The API's base URL as a client called it without a custom domain:
/// `https://{Host}/{stage}` (the authorizer and the HTTP functions derive the same).
pub fn api_base_url(host: &str, stage: Option<&str>) -> String {
    match stage {
        Some(s) if !s.is_empty() => format!("https://{host}/{s}"),
        _ => format!("https://{host}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diagnostic_carries_the_code() {
        let d = diagnostic(&domain::Error::conflict("decided already"));
        assert_eq!((d.error_type.as_str(), d.error_message.as_str()), ("CONFLICT", "decided already"));
    }

    #[test]
    fn a_batch_names_only_the_failed_messages() {
        let r = batch_response(["m2".to_owned()]);
        assert_eq!(r.batch_item_failures.len(), 1);
        assert_eq!(r.batch_item_failures[0].item_identifier, "m2");
        assert!(batch_response(Vec::new()).batch_item_failures.is_empty());
    }

    #[test]
    fn base_urls_keep_the_stage() {
        assert_eq!(api_base_url("x.example", Some("prod")), "https://x.example/prod");
        assert_eq!(api_base_url("x.example", Some("")), "https://x.example");
        assert_eq!(api_base_url("x.example", None), "https://x.example");
    }
}
