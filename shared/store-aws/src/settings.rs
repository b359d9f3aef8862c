//! Typed configuration of the AWS backend, and the SDK configuration built from it.
//!
//! One [`AwsSettings`] names every resource the adapters touch. The binaries fill it from
//! their environment (the SAM template passes table, queue, bucket and cache endpoints
//! as Lambda environment variables); tests fill it with a moto endpoint and a local Redis.

use std::time::Duration;

use aws_config::environment::EnvironmentVariableCredentialsProvider;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_async::rt::sleep::{SharedAsyncSleep, TokioSleep};
use aws_smithy_async::time::{SharedTimeSource, SystemTimeSource};

use crate::cache::RedisSettings;

/// Every AWS resource the backend uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsSettings {
    /// `eu-west-1`, …
    pub region: String,
    /// A non-AWS endpoint (moto, LocalStack) for tests and local development. When set,
    /// static test credentials are used and S3 is addressed path-style.
    pub endpoint_url: Option<String>,
    /// The single DynamoDB table of the item port.
    pub table: String,
    /// The fortress table of promoted tenants (point-in-time recovery, replica region,
    /// dedicated KMS key), when the stack has one.
    pub fortress_table: Option<String>,
    /// The work queue.
    pub queue_url: String,
    /// The dead-letter queue named by the work queue's `RedrivePolicy`.
    pub dead_letter_queue_url: String,
    /// The blob bucket.
    pub bucket: String,
    /// The hot cache (and the shared rate-limit buckets).
    pub redis: RedisSettings,
    /// KMS keys (ids, ARNs or `alias/…`) that sign access tokens, the signing key first;
    /// empty where this function issues no tokens and verifies through the JWKS.
    pub jwt_kms_keys: Vec<String>,
    /// The symmetric KMS key wrapping the Spine vault's per-tenant data keys; `None`
    /// stores entity payloads unencrypted (local experiments only — the stack sets it).
    pub vault_kms_key: Option<String>,
    /// The search index and the embedder.
    pub search: SearchSettings,
    /// The triage state machine (`statemachines/triage.asl.json`) proposals run on;
    /// `None` runs the embedded runner in process over the table (tests, local runs).
    pub triage_state_machine: Option<String>,
    /// The sender of notification e-mail (an identity verified in SES); `None` sends none.
    pub mail_from: Option<String>,
}

/// Where hybrid search lives on AWS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchSettings {
    /// The OpenSearch endpoint (`https://{id}.{region}.aoss.amazonaws.com`); `None`
    /// leaves the stack without an index: memory and KB searches fall back to a keyword
    /// scan of the store and say so.
    pub endpoint: Option<String>,
    /// The SigV4 service of the endpoint: `aoss` (Serverless) or `es` (a managed domain).
    pub service: String,
    /// The index name.
    pub index: String,
    /// `hashing` (the lexical fallback, 384 dimensions) or
    /// `bedrock:{model}:{dimensions}`, e.g. `bedrock:amazon.titan-embed-text-v2:0:512`.
    pub embedder: String,
    /// A Bedrock runtime endpoint other than AWS's (a local stand-in in tests).
    pub bedrock_endpoint: Option<String>,
    /// How long after a write every search sees it (the collection's refresh window):
    /// writes are verified, and removals swept again, this long after they return.
    pub visible_after: std::time::Duration,
    /// The S3 vector bucket of the `small` profile's index ([`crate::S3VectorsIndex`]);
    /// when set, it is the index (with [`SearchSettings::keyword_table`]) and the
    /// OpenSearch endpoint is not used.
    pub vector_bucket: Option<String>,
    /// The DynamoDB table of that index's chunks and keyword postings.
    pub keyword_table: Option<String>,
    /// An S3 Vectors endpoint other than AWS's (a local stand-in in tests).
    pub s3vectors_endpoint: Option<String>,
}

/// The refresh window assumed for a Serverless collection when none is configured
/// (`CONTINUITY_OPENSEARCH_VISIBLE_SECONDS`, the stack's `SearchVisibleSeconds`).
pub const DEFAULT_VISIBLE_AFTER: std::time::Duration = std::time::Duration::from_secs(10);
/// The longest refresh window accepted: the deferred readback waits it out inside the
/// pipeline function's 60 s.
pub const MAX_VISIBLE_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

impl Default for SearchSettings {
    fn default() -> Self {
        Self {
            endpoint: None,
            service: "aoss".into(),
            index: "continuity".into(),
            embedder: "hashing".into(),
            bedrock_endpoint: None,
            visible_after: DEFAULT_VISIBLE_AFTER,
            vector_bucket: None,
            keyword_table: None,
            s3vectors_endpoint: None,
        }
    }
}

impl AwsSettings {
    /// The SDK configuration for these settings on an operator's machine: credentials
    /// from the default chain (profiles, SSO, …; see [`aws_config_for`]).
    pub async fn sdk_config(&self) -> SdkConfig {
        aws_config_for(self.endpoint_url.as_deref(), &self.region).await
    }

    /// The SDK configuration inside a Lambda function: the credentials of its execution
    /// role from the variables the Lambda runtime sets (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` — the first link of the default chain,
    /// and the one that answers there), or static test credentials with an endpoint,
    /// as [`aws_config_for`]. Built by hand rather than by `aws_config`'s loader, so the
    /// functions do not link the rest of the chain (profile files, SSO, STS web identity,
    /// IMDS, ECS): 0.1 MB of each zip (docs/benchmarks.md). Same region, endpoint,
    /// timeouts, HTTP client and standard retries as [`aws_config_for`]; makes no call.
    pub fn function_sdk_config(&self) -> SdkConfig {
        let credentials = match self.endpoint_url {
            Some(_) => SharedCredentialsProvider::new(Credentials::new("test", "test", None, None, "static")),
            None => SharedCredentialsProvider::new(EnvironmentVariableCredentialsProvider::new()),
        };
        let mut config = SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(self.region.clone()))
            .credentials_provider(credentials)
            .timeout_config(timeouts())
            .retry_config(RetryConfig::standard())
            .sleep_impl(SharedAsyncSleep::new(TokioSleep::new()))
            .time_source(SharedTimeSource::new(SystemTimeSource::new()))
            .http_client(crate::sdk_http::client());
        if let Some(url) = &self.endpoint_url {
            config = config.endpoint_url(url);
        }
        config.build()
    }
}

/// The bound on one AWS operation, retries included: below the HTTP functions' 25 s
/// timeout (itself below API Gateway's 29 s), so a slow dependency becomes a clear
/// `UNAVAILABLE` answer instead of a function killed mid-request.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(20);

/// Every AWS call fails within these bounds instead of hanging a request (or a Lambda
/// invocation) until its own timeout. An attempt covers one HTTP round trip; the
/// operation bound ([`OPERATION_TIMEOUT`]) covers the SDK's retries too. S3 puts of up
/// to 16 MiB inside a region finish well within one attempt.
fn timeouts() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(3))
        .operation_attempt_timeout(Duration::from_secs(10))
        .operation_timeout(OPERATION_TIMEOUT)
        .build()
}

/// Builds the SDK configuration.
///
/// Without an endpoint this is real AWS: region as given, credentials from the default
/// chain (the Lambda execution role in production). With an endpoint (moto, LocalStack)
/// it uses static `test`/`test` credentials, because a local emulator accepts any
/// signature and the default chain would otherwise go looking for real ones.
pub async fn aws_config_for(endpoint: Option<&str>, region: &str) -> SdkConfig {
    let loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .timeout_config(timeouts())
        .http_client(crate::sdk_http::client());
    let loader = match endpoint {
        Some(url) => loader.endpoint_url(url).credentials_provider(Credentials::new("test", "test", None, None, "static")),
        None => loader,
    };
    loader.load().await
}

/// A DynamoDB client for `config`.
pub fn dynamo_client(config: &SdkConfig) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(config)
}

/// A KMS client for `config`.
pub fn kms_client(config: &SdkConfig) -> aws_sdk_kms::Client {
    aws_sdk_kms::Client::new(config)
}

/// An SQS client for `config`.
pub fn sqs_client(config: &SdkConfig) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(config)
}

/// A Step Functions client for `config`.
pub fn sfn_client(config: &SdkConfig) -> aws_sdk_sfn::Client {
    aws_sdk_sfn::Client::new(config)
}

/// An S3 client for `config`. A local endpoint cannot serve virtual-hosted buckets
/// (`bucket.127.0.0.1` does not resolve), so it is addressed path-style.
pub fn s3_client(config: &SdkConfig) -> aws_sdk_s3::Client {
    let local = config.endpoint_url().is_some();
    let s3 = aws_sdk_s3::config::Builder::from(config).force_path_style(local).build();
    aws_sdk_s3::Client::from_conf(s3)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use aws_credential_types::provider::ProvideCredentials;

    use super::*;

    fn settings(endpoint: Option<&str>) -> AwsSettings {
        AwsSettings {
            region: "eu-west-1".into(),
            endpoint_url: endpoint.map(Into::into),
            table: "t".into(),
            fortress_table: None,
            queue_url: "q".into(),
            dead_letter_queue_url: "dlq".into(),
            bucket: "b".into(),
            redis: RedisSettings::single("redis://127.0.0.1:6379"),
            jwt_kms_keys: Vec::new(),
            vault_kms_key: None,
            search: SearchSettings::default(),
            triage_state_machine: None,
            mail_from: None,
        }
    }

    /// A function's configuration carries what the loader's would for the same settings:
    /// region, endpoint, timeouts, standard retries, a sleep and a clock (without a
    /// sleep the SDK refuses to run with timeouts), and the right credentials.
    #[tokio::test]
    async fn a_functions_sdk_configuration_matches_the_loaders() {
        let local = settings(Some("http://127.0.0.1:5000")).function_sdk_config();
        let loaded = aws_config_for(Some("http://127.0.0.1:5000"), "eu-west-1").await;
        for config in [&local, &loaded] {
            assert_eq!(config.region().map(|r| r.as_ref()), Some("eu-west-1"));
            assert_eq!(config.endpoint_url(), Some("http://127.0.0.1:5000"));
            assert_eq!(config.timeout_config(), Some(&timeouts()));
            assert_eq!(config.retry_config().map(|r| r.max_attempts()), Some(RetryConfig::standard().max_attempts()));
            assert!(config.sleep_impl().is_some() && config.time_source().is_some() && config.http_client().is_some());
            let creds = config.credentials_provider().unwrap().provide_credentials().await.unwrap();
            assert_eq!((creds.access_key_id(), creds.secret_access_key()), ("test", "test"));
        }
        assert_eq!(local.behavior_version(), loaded.behavior_version());

        // On AWS: no endpoint, and the credentials are read from the variables the Lambda
        // runtime sets — whatever this process has (none, here, or a developer's own).
        let aws = settings(None).function_sdk_config();
        assert_eq!(aws.endpoint_url(), None);
        let from_env = EnvironmentVariableCredentialsProvider::new().provide_credentials().await;
        let provided = aws.credentials_provider().unwrap().provide_credentials().await;
        match (from_env, provided) {
            (Ok(want), Ok(got)) => assert_eq!(want.access_key_id(), got.access_key_id()),
            (Err(_), Err(_)) => {}
            (want, got) => panic!("the environment gave {want:?}, the configuration {got:?}"),
        }
    }
}
