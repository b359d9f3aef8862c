//! The AWS backend of Continuity's ports (SPEC §2.2).
//!
//! - [`settings`]: [`AwsSettings`], the typed configuration of every AWS resource, and
//!   the SDK configuration: [`AwsSettings::function_sdk_config`] inside a Lambda function (the
//!   execution role's credentials from the environment), [`aws_config_for`] elsewhere (the
//!   default credential chain); either on real AWS or a local moto.
//! - [`dynamo`]: [`DynamoItems`], the item port over one DynamoDB table
//!   (`PK = "{tenant}#{part}"`, `SK = sk`); the typed stores of `ports::records` run on it.
//! - [`sqs`]: [`SqsQueue`], the work queue over an SQS queue whose `RedrivePolicy` sends
//!   poison messages to a dead-letter queue.
//! - [`s3`]: [`S3Blobs`], the blob store over one S3 bucket, keyed `{tenant}/{path}`.
//! - [`sfn`]: [`StepFunctionsWorkflow`], the triage workflow on Step Functions.
//! - [`cache`]: [`RedisCache`], the hot cache over Redis: a single node, or a cluster with
//!   TLS such as ElastiCache Serverless; [`cache_iam`]: signing in to ElastiCache as an
//!   IAM user ([`IamAuth`], the SigV4-presigned token).
//!
//! - [`kms`]: [`KmsSigner`] (RS256 through KMS `Sign`) and the vault's `KmsKeyWrapper`.
//! - [`search`]: `OpenSearchIndex`, hybrid search on an OpenSearch Serverless collection
//!   (the `production` profile); [`s3vectors`]: `S3VectorsIndex`, hybrid search on S3
//!   Vectors and a DynamoDB keyword table (the `small` profile, nothing running at rest);
//!   [`bedrock`]: `BedrockEmbedder` (Titan Text Embeddings V2); [`signed`]: `SignedHttp`,
//!   SigV4-signed JSON over reqwest for those two and for [`ses`]: `SesMailer`, e-mail
//!   through SES v2 `SendEmail`.
//!
//! [`sdk_http`]: the HTTP client every SDK client above uses — hyper over the process's
//! shared TLS configuration (`tls`), so no trusted root is read before the first handshake.
//!
//! [`backend`] wires them all into a `ports::Backend` from one [`AwsSettings`];
//! `stack` (feature `stack`, the CLI only) reads a deployed stack's outputs into them.
//!
//! Every backend failure is mapped to a `domain::Error` here, once: conditions that do not
//! hold become `CONFLICT`, bad input `INVALID_REQUEST`, and anything the network or the
//! service did wrong `UNAVAILABLE`, with the SDK's detail kept for logs only.
//!
//! Production resources (table, queues, bucket, cache) come from the SAM template; the
//! `create_*` helpers on each adapter exist for tests and local development against moto.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod backend;
pub mod bedrock;
pub mod cache;
pub mod cache_iam;
pub mod dynamo;
pub mod kms;
pub mod s3;
pub mod s3vectors;
pub mod sdk_http;
pub mod search;
pub mod ses;
pub mod settings;
pub mod sfn;
pub mod signed;
pub mod sqs;
#[cfg(feature = "stack")]
pub mod stack;

pub use backend::LambdaEnv;
pub use bedrock::BedrockEmbedder;
pub use cache::{RedisCache, RedisMode, RedisSettings};
pub use cache_iam::{IamAuth, IamUser};
pub use dynamo::DynamoItems;
pub use kms::KmsSigner;
pub use s3::S3Blobs;
pub use s3vectors::S3VectorsIndex;
pub use search::OpenSearchIndex;
pub use ses::SesMailer;
pub use settings::{AwsSettings, SearchSettings, aws_config_for};
pub use sfn::StepFunctionsWorkflow;
pub use signed::SignedHttp;
pub use sqs::SqsQueue;

use std::fmt;
use std::sync::Arc;

use aws_config::SdkConfig;
use ports::{Backend, Clock, Records};

/// The embedder named by `settings.embedder`.
///
/// # Errors
/// `INVALID_REQUEST` for an unknown embedder or a malformed `bedrock:` spec.
pub fn embedder(settings: &SearchSettings, sdk: &SdkConfig) -> domain::Result<Arc<dyn ports::Embedder>> {
    if settings.embedder == "hashing" {
        return Ok(Arc::new(ports::search::HashingEmbedder::new(384)));
    }
    let spec = settings
        .embedder
        .strip_prefix("bedrock:")
        .ok_or_else(|| domain::Error::invalid_field("CONTINUITY_EMBEDDER", "expected hashing or bedrock:{model}:{dimensions}"))?;
    let (model, dim) = spec
        .rsplit_once(':')
        .and_then(|(m, d)| Some((m, d.parse::<usize>().ok()?)))
        .ok_or_else(|| domain::Error::invalid_field("CONTINUITY_EMBEDDER", "expected bedrock:{model}:{dimensions}"))?;
    let endpoint = settings
        .bedrock_endpoint
        .clone()
        .unwrap_or_else(|| format!("https://bedrock-runtime.{}.amazonaws.com", sdk.region().map_or("us-east-1", |r| r.as_ref())));
    Ok(Arc::new(BedrockEmbedder::new(SignedHttp::new(sdk, &endpoint, "bedrock")?, model, dim)?))
}

/// Wires every AWS adapter into a [`Backend`], once, in a binary's `main`, on `sdk`:
/// [`AwsSettings::function_sdk_config`] in a Lambda function, [`AwsSettings::sdk_config`]
/// (the default credential chain) on an operator's machine.
///
/// Makes no network call: the SDK clients connect on first use and the cache connects
/// lazily, so a cold start does not wait on (or fail for) a dependency it may not need.
///
/// # Errors
/// `INVALID_REQUEST` when the cache settings are unusable (see [`RedisCache::new`]).
pub fn backend(settings: &AwsSettings, sdk: &SdkConfig, clock: Arc<dyn Clock>) -> domain::Result<Backend> {
    let core = Core::new(settings, sdk, &clock)?;
    let queue =
        SqsQueue::new(settings::sqs_client(sdk), &settings.queue_url, &settings.dead_letter_queue_url).with_clock(clock.clone());
    let embedder = embedder(&settings.search, sdk)?;
    let search: Arc<dyn ports::SearchIndex> = match (&settings.search.vector_bucket, &settings.search.endpoint) {
        (Some(bucket), _) => {
            let table = settings.search.keyword_table.as_deref().ok_or_else(|| {
                domain::Error::invalid_field("CONTINUITY_SEARCH_TABLE", "the S3 Vectors index needs its keyword table too")
            })?;
            let endpoint = settings
                .search
                .s3vectors_endpoint
                .clone()
                .unwrap_or_else(|| format!("https://s3vectors.{}.api.aws", settings.region));
            Arc::new(S3VectorsIndex::new(
                s3vectors::Keywords::new(settings::dynamo_client(sdk), table),
                s3vectors::VectorStore::new(SignedHttp::new(sdk, &endpoint, "s3vectors")?, bucket, embedder.dim()),
                embedder.name(),
            ))
        }
        (None, Some(url)) => {
            let service = if settings.search.service == "es" { "es" } else { "aoss" };
            Arc::new(
                OpenSearchIndex::new(
                    SignedHttp::new(sdk, url, service)?,
                    &settings.search.index,
                    embedder.name(),
                    embedder.dim(),
                )
                .with_visible_after(settings.search.visible_after),
            )
        }
        (None, None) => Arc::new(ports::search::NoIndex),
    };
    Ok(core.into_backend(
        clock,
        Rest {
            search,
            embedder,
            queue: Arc::new(queue),
            blobs: Arc::new(S3Blobs::new(settings::s3_client(sdk), &settings.bucket)),
            mailer: match &settings.mail_from {
                Some(from) => {
                    ports::mail::check_address("CONTINUITY_MAIL_FROM", from)?;
                    let endpoint = settings
                        .endpoint_url
                        .clone()
                        .unwrap_or_else(|| format!("https://email.{}.amazonaws.com", settings.region));
                    Some(Arc::new(ses::SesMailer::new(SignedHttp::new(sdk, &endpoint, "ses")?, from))
                        as Arc<dyn ports::mail::Mailer>)
                }
                None => None,
            },
            workflow: settings
                .triage_state_machine
                .as_ref()
                .map(|arn| Arc::new(StepFunctionsWorkflow::new(settings::sfn_client(sdk), arn)) as Arc<dyn ports::Workflow>),
        },
    ))
}

/// The authorizer's backend: what checking an API key or a token reaches — the table
/// (with the vault and the fortress), the cache, the limiter and the signing keys —
/// and nothing else. The queue, the blobs, search, e-mail and the workflow are
/// [`ports::absent`] adapters that refuse with `UNAVAILABLE`, so the function links
/// neither their SDK clients nor their code (30.4 → 20.1 MB unoptimised for size;
/// docs/benchmarks.md). The topology test runs the authorizer on exactly this.
///
/// # Errors
/// As [`backend`].
pub fn authorizer_backend(settings: &AwsSettings, sdk: &SdkConfig, clock: Arc<dyn Clock>) -> domain::Result<Backend> {
    let absent = Arc::new(ports::absent::Absent("the authorizer"));
    let rest = Rest {
        search: Arc::new(ports::search::NoIndex),
        embedder: Arc::new(ports::search::HashingEmbedder::new(384)),
        queue: absent.clone(),
        blobs: absent,
        mailer: None,
        workflow: None,
    };
    Ok(Core::new(settings, sdk, &clock)?.into_backend(clock, rest))
}

/// The ports a function wires beside its [`Core`]: the real adapters, or absent ones.
struct Rest {
    search: Arc<dyn ports::SearchIndex>,
    embedder: Arc<dyn ports::Embedder>,
    queue: Arc<dyn ports::Queue>,
    blobs: Arc<dyn ports::BlobStore>,
    mailer: Option<Arc<dyn ports::mail::Mailer>>,
    workflow: Option<Arc<dyn ports::Workflow>>,
}

/// What every function's backend holds: the table (vault, fortress), the cache and
/// limiter (Redis), the signing keys (KMS).
struct Core {
    records: Records,
    fortress: Option<Records>,
    fortress_writer: Option<Arc<dyn ports::ItemStore>>,
    redis: Arc<RedisCache>,
    signer: KmsSigner,
}

impl Core {
    fn new(settings: &AwsSettings, sdk: &SdkConfig, clock: &Arc<dyn Clock>) -> domain::Result<Self> {
        let items = DynamoItems::new(settings::dynamo_client(sdk), &settings.table);
        let mut redis = RedisCache::new(&settings.redis)?;
        if let Some(user) = &settings.redis.iam {
            // ElastiCache IAM authentication, signed with the function's own credentials.
            let credentials = sdk
                .credentials_provider()
                .ok_or_else(|| domain::Error::invalid_field("redis", "IAM authentication needs AWS credentials"))?;
            redis = redis.with_iam(IamAuth::new(user.clone(), &settings.region, credentials));
        }
        // The Spine vault (SPEC §4.2): one vault (data-key cache) per table, one KMS key.
        let vault = |records: Records| match &settings.vault_kms_key {
            Some(key) => records.with_vault(Arc::new(ports::vault::Vault::new(Arc::new(kms::KmsKeyWrapper::new(
                settings::kms_client(sdk),
                key.clone(),
            ))))),
            None => records,
        };
        let main: Arc<dyn ports::ItemStore> = Arc::new(items);
        let fortress_items: Option<Arc<dyn ports::ItemStore>> = settings
            .fortress_table
            .as_ref()
            .map(|t| Arc::new(DynamoItems::new(settings::dynamo_client(sdk), t)) as Arc<dyn ports::ItemStore>);
        // Writes of promoted tenants are mirrored into the fortress table (`ports::fortress`).
        let records = match &fortress_items {
            Some(f) => Records::new(Arc::new(ports::fortress::Mirrored::new(main, f.clone(), clock.clone()))),
            None => Records::new(main),
        };
        Ok(Self {
            records: vault(records),
            fortress: fortress_items.clone().map(|f| vault(Records::new(Arc::new(ports::fortress::ReadOnly::new(f))))),
            fortress_writer: fortress_items,
            redis: Arc::new(redis),
            signer: KmsSigner::new(settings::kms_client(sdk), settings.jwt_kms_keys.clone()),
        })
    }

    /// The backend of these and `rest`.
    fn into_backend(self, clock: Arc<dyn Clock>, rest: Rest) -> Backend {
        let Rest { search, embedder, queue, blobs, mailer, workflow } = rest;
        Backend {
            records: self.records,
            search,
            embedder,
            readiness: Arc::new(cache::CacheReadiness(self.redis.clone())),
            cache: self.redis.clone(),
            limiter: self.redis,
            signer: Arc::new(self.signer),
            queue,
            blobs,
            fortress: self.fortress,
            fortress_writer: self.fortress_writer,
            mailer,
            workflow,
            clock,
            name: "aws",
        }
    }
}

/// `UNAVAILABLE` for an SDK failure, keeping the full error chain for the logs.
///
/// SDK errors print only their outermost layer with `Display`; the cause (a refused
/// connection, a throttling code) sits deeper, so walk the chain.
pub(crate) fn unavailable(what: &str, err: &(dyn std::error::Error + 'static)) -> domain::Error {
    domain::Error::unavailable(ErrorChain { what, err })
}

struct ErrorChain<'a> {
    what: &'a str,
    err: &'a (dyn std::error::Error + 'static),
}

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.err)?;
        let mut source = self.err.source();
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}
