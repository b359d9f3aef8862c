//! ElastiCache IAM authentication. The cache user (`AuthenticationMode: iam`) signs in
//! with `AUTH {user} {token}`, where the token is a SigV4-presigned
//! `GET http://{cache}/?Action=connect&User={user}[&ResourceType=ServerlessCache]` for the
//! service `elasticache` (the payload hash is the empty body's, as botocore and the Java
//! SDK presign it), without its scheme, valid for 15 minutes. ElastiCache checks
//! the token when a connection authenticates and closes IAM connections after 12 hours,
//! so [`crate::RedisCache`] replaces its connection (with a fresh token) every
//! [`MAX_CONNECTION_AGE`] — a reconnect never presents an expired token.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign};
use aws_sigv4::sign::v4;
use domain::{Error, Result};

/// How long a token is valid (ElastiCache's maximum).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(900);

/// A connection older than this is replaced, with a fresh token, before its next call:
/// inside the token's 15 minutes, so the client's own reconnects (which reuse the token
/// they were built with) stay valid, and far inside ElastiCache's 12-hour limit.
pub const MAX_CONNECTION_AGE: Duration = Duration::from_secs(600);

/// The cache user and the cache, as the template names them
/// (`CONTINUITY_REDIS_IAM_USER`, `CONTINUITY_REDIS_CACHE_NAME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IamUser {
    /// The user id (for IAM users, ElastiCache requires the name to equal the id).
    pub user: String,
    /// The serverless cache's name (or a replication group's id).
    pub cache_name: String,
    /// Whether the cache is serverless (`ResourceType=ServerlessCache` in the token).
    pub serverless: bool,
}

/// What a connection needs to sign in as an IAM user: the user, the region, the
/// function's credentials and a clock.
#[derive(Clone)]
pub struct IamAuth {
    pub user: IamUser,
    region: String,
    credentials: SharedCredentialsProvider,
    clock: Arc<dyn Fn() -> SystemTime + Send + Sync>,
}

impl fmt::Debug for IamAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IamAuth").field("user", &self.user).field("region", &self.region).finish_non_exhaustive()
    }
}

impl IamAuth {
    pub fn new(user: IamUser, region: impl Into<String>, credentials: SharedCredentialsProvider) -> Self {
        Self { user, region: region.into(), credentials, clock: Arc::new(SystemTime::now) }
    }

    /// This auth on another clock (tests).
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Fn() -> SystemTime + Send + Sync>) -> Self {
        self.clock = clock;
        self
    }

    /// The time now, on this auth's clock.
    pub fn now(&self) -> SystemTime {
        (self.clock)()
    }

    /// A fresh token for `AUTH`.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the credentials cannot be had.
    pub async fn token(&self) -> Result<String> {
        let credentials = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|e| Error::unavailable(format!("elasticache credentials: {e}")))?;
        token_at(&credentials, &self.user, &self.region, self.now())
    }
}

/// The token for `user` signed with `credentials` at `time`.
///
/// # Errors
/// `INTERNAL` when signing fails (a malformed user or cache name).
pub fn token_at(credentials: &Credentials, user: &IamUser, region: &str, time: SystemTime) -> Result<String> {
    let internal = |e: &dyn fmt::Display| Error::internal(format!("elasticache token: {e}"));
    let mut url = url_with_query(&user.cache_name, &[("Action", "connect"), ("User", &user.user)]);
    if user.serverless {
        url.push_str("&ResourceType=ServerlessCache");
    }
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(TOKEN_LIFETIME);
    let identity = credentials.clone().into();
    let params =
        v4::SigningParams::builder().identity(&identity).region(region).name("elasticache").time(time).settings(settings).build();
    let params = params.map_err(|e| internal(&e))?.into();
    let signable = SignableRequest::new("GET", &url, std::iter::empty(), SignableBody::Bytes(&[])).map_err(|e| internal(&e))?;
    let (instructions, _) = sign(signable, &params).map_err(|e| internal(&e))?.into_parts();
    let mut request = http::Request::builder().method("GET").uri(&url).body(()).map_err(|e| internal(&e))?;
    instructions.apply_to_request_http1x(&mut request);
    let signed = request.uri().to_string();
    Ok(signed.strip_prefix("http://").unwrap_or(&signed).to_owned())
}

fn url_with_query(host: &str, pairs: &[(&str, &str)]) -> String {
    let query: String = form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish();
    format!("http://{host}/?{query}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_a_presigned_connect_request_without_its_scheme() {
        let creds = Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, None, "test");
        let user = IamUser { user: "cty-app".into(), cache_name: "continuity-0a1b2c3d".into(), serverless: true };
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_140_800);
        let token = token_at(&creds, &user, "eu-west-1", t).unwrap();
        assert!(token.starts_with("continuity-0a1b2c3d/?"), "{token}");
        for part in [
            "Action=connect",
            "User=cty-app",
            "ResourceType=ServerlessCache",
            "X-Amz-Algorithm=AWS4-HMAC-SHA256",
            "X-Amz-Expires=900",
            "X-Amz-SignedHeaders=host",
            "X-Amz-Credential=AKIDEXAMPLE%2F20261201%2Feu-west-1%2Felasticache%2Faws4_request",
        ] {
            assert!(token.contains(part), "{part} missing from {token}");
        }
        assert_eq!(token, token_at(&creds, &user, "eu-west-1", t).unwrap(), "deterministic for one instant");
        assert_ne!(token, token_at(&creds, &user, "eu-west-1", t + Duration::from_secs(1)).unwrap());
    }
}
