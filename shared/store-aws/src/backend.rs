//! A Lambda's typed environment, read once at cold start; [`crate::backend`] turns its
//! settings into a [`ports::Backend`].

use domain::{Error, Result};

use crate::cache::RedisSettings;
use crate::cache_iam::IamUser;
use crate::settings::AwsSettings;

/// A Lambda's configuration, from the variables `infra/template.yaml` sets.
#[derive(Debug, Clone)]
pub struct LambdaEnv {
    pub aws: AwsSettings,
    /// `CONTINUITY_PUBLIC_URL`; empty when the stack has no custom domain, in which case
    /// handlers derive the base URL from the request.
    pub public_url: String,
    /// `CONTINUITY_ALLOWED_HOSTS` (comma-separated): the `Host` values `/mcp` accepts;
    /// empty leaves the check to API Gateway, which only routes its own hostnames.
    pub allowed_hosts: Vec<String>,
    /// `CONTINUITY_ALLOWED_ORIGINS` (comma-separated): browser origins that may call
    /// `/mcp` and the OAuth endpoints (CORS); empty: none.
    pub allowed_origins: Vec<String>,
}

/// Where the variables come from: the process environment, or (tests) a map.
struct Vars<'a>(&'a dyn Fn(&str) -> Option<String>);

impl Vars<'_> {
    fn list(&self, name: &str) -> Vec<String> {
        self.optional(name)
            .map(|v| v.split(',').map(|h| h.trim().to_owned()).filter(|h| !h.is_empty()).collect())
            .unwrap_or_default()
    }

    fn var(&self, name: &str) -> Result<String> {
        match (self.0)(name) {
            Some(v) if !v.trim().is_empty() => Ok(v.trim().to_owned()),
            // A configuration error, not an outage: retrying cannot help, so say which variable.
            _ => Err(Error::invalid_field(
                name,
                "this environment variable is not set (infra/template.yaml sets every one a function reads)",
            )),
        }
    }

    fn optional(&self, name: &str) -> Option<String> {
        (self.0)(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }
}

/// `CONTINUITY_OPENSEARCH_VISIBLE_SECONDS`: whole seconds, 0 to 30; unset: 10.
fn visible_after(raw: Option<String>) -> Result<std::time::Duration> {
    let Some(raw) = raw.filter(|r| !r.trim().is_empty()) else { return Ok(crate::settings::DEFAULT_VISIBLE_AFTER) };
    let max = crate::settings::MAX_VISIBLE_AFTER.as_secs();
    match raw.trim().parse::<u64>() {
        Ok(n) if n <= max => Ok(std::time::Duration::from_secs(n)),
        _ => Err(Error::invalid_field("CONTINUITY_OPENSEARCH_VISIBLE_SECONDS", format!("whole seconds from 0 to {max}"))),
    }
}

impl LambdaEnv {
    /// Reads `AWS_REGION`, `CONTINUITY_TABLE`, `CONTINUITY_QUEUE_URL`,
    /// `CONTINUITY_DLQ_URL`, `CONTINUITY_BUCKET`, optional `CONTINUITY_FORTRESS_TABLE`, `CONTINUITY_REDIS_URLS` (comma-separated;
    /// one `redis://` URL means a single node, `rediss://` URLs a cluster with TLS),
    /// optional `CONTINUITY_JWT_KMS_KEYS` (comma-separated KMS keys, the signing key first),
    /// optional `CONTINUITY_VAULT_KMS_KEY` (the symmetric key of the Spine vault),
    /// optional `CONTINUITY_OPENSEARCH_ENDPOINT`, `CONTINUITY_OPENSEARCH_SERVICE` (`aoss`),
    /// `CONTINUITY_OPENSEARCH_INDEX` (`continuity`), or instead (the `small` profile)
    /// `CONTINUITY_VECTOR_BUCKET` and `CONTINUITY_SEARCH_TABLE` (optional
    /// `CONTINUITY_S3VECTORS_ENDPOINT`), `CONTINUITY_EMBEDDER` (`hashing` or
    /// `bedrock:{model}:{dimensions}`), `CONTINUITY_BEDROCK_ENDPOINT`, optional
    /// `CONTINUITY_TRIAGE_STATE_MACHINE` (the triage state machine's ARN),
    /// optional `CONTINUITY_REDIS_IAM_USER` and `CONTINUITY_REDIS_CACHE_NAME` (ElastiCache
    /// IAM authentication: the user to sign in as, and the serverless cache's name),
    /// optional `CONTINUITY_AWS_ENDPOINT_URL` (moto, for local runs) and
    /// `CONTINUITY_PUBLIC_URL`, `CONTINUITY_ALLOWED_HOSTS`, `CONTINUITY_ALLOWED_ORIGINS`.
    ///
    /// # Errors
    /// `UNAVAILABLE` naming the first missing variable.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(&|name| std::env::var(name).ok())
    }

    /// [`LambdaEnv::from_env`] over another source of variables: the end-to-end test
    /// gives each function exactly the environment the template declares for it.
    ///
    /// # Errors
    /// As [`LambdaEnv::from_env`].
    pub fn from_vars(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let v = Vars(lookup);
        let (var, optional, list) = (|n: &str| v.var(n), |n: &str| v.optional(n), |n: &str| v.list(n));
        let urls: Vec<String> =
            var("CONTINUITY_REDIS_URLS")?.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
        let mut redis = if urls.len() == 1 && urls[0].starts_with("redis://") {
            RedisSettings::single(urls[0].clone())
        } else {
            RedisSettings::cluster(urls)
        };
        // ElastiCache IAM authentication: both or neither.
        redis.iam = match (optional("CONTINUITY_REDIS_IAM_USER"), optional("CONTINUITY_REDIS_CACHE_NAME")) {
            (Some(user), Some(cache_name)) => Some(IamUser { user, cache_name, serverless: true }),
            (None, None) => None,
            (Some(_), None) => {
                return Err(Error::invalid_field("CONTINUITY_REDIS_CACHE_NAME", "IAM authentication needs the cache's name too"));
            }
            (None, Some(_)) => {
                return Err(Error::invalid_field("CONTINUITY_REDIS_IAM_USER", "the cache's name is set but not the IAM user"));
            }
        };
        Ok(Self {
            aws: AwsSettings {
                region: optional("AWS_REGION").unwrap_or_else(|| "eu-west-1".into()),
                endpoint_url: optional("CONTINUITY_AWS_ENDPOINT_URL"),
                table: var("CONTINUITY_TABLE")?,
                fortress_table: optional("CONTINUITY_FORTRESS_TABLE"),
                queue_url: var("CONTINUITY_QUEUE_URL")?,
                dead_letter_queue_url: var("CONTINUITY_DLQ_URL")?,
                bucket: var("CONTINUITY_BUCKET")?,
                redis,
                jwt_kms_keys: optional("CONTINUITY_JWT_KMS_KEYS")
                    .map(|v| v.split(',').map(|k| k.trim().to_owned()).filter(|k| !k.is_empty()).collect())
                    .unwrap_or_default(),
                vault_kms_key: optional("CONTINUITY_VAULT_KMS_KEY").filter(|k| !k.trim().is_empty()),
                search: crate::settings::SearchSettings {
                    endpoint: optional("CONTINUITY_OPENSEARCH_ENDPOINT"),
                    service: optional("CONTINUITY_OPENSEARCH_SERVICE").unwrap_or_else(|| "aoss".into()),
                    index: optional("CONTINUITY_OPENSEARCH_INDEX").unwrap_or_else(|| "continuity".into()),
                    embedder: optional("CONTINUITY_EMBEDDER").unwrap_or_else(|| "hashing".into()),
                    bedrock_endpoint: optional("CONTINUITY_BEDROCK_ENDPOINT"),
                    visible_after: visible_after(optional("CONTINUITY_OPENSEARCH_VISIBLE_SECONDS"))?,
                    vector_bucket: optional("CONTINUITY_VECTOR_BUCKET"),
                    keyword_table: optional("CONTINUITY_SEARCH_TABLE"),
                    s3vectors_endpoint: optional("CONTINUITY_S3VECTORS_ENDPOINT"),
                },
                triage_state_machine: optional("CONTINUITY_TRIAGE_STATE_MACHINE").filter(|s| !s.trim().is_empty()),
                mail_from: optional("CONTINUITY_MAIL_FROM").filter(|s| !s.trim().is_empty()),
            },
            public_url: optional("CONTINUITY_PUBLIC_URL").unwrap_or_default(),
            allowed_hosts: list("CONTINUITY_ALLOWED_HOSTS"),
            allowed_origins: list("CONTINUITY_ALLOWED_ORIGINS"),
        })
    }
}
