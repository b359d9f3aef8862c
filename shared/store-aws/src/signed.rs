//! JSON over HTTPS to AWS services the SDK crates are not used for (OpenSearch,
//! Bedrock runtime), signed with SigV4 from the SDK's credential chain.

use std::time::{Duration, SystemTime};

use aws_config::SdkConfig;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use domain::{Error, Result};

/// A client for one AWS service (`aoss`, `es`, `bedrock`) at one endpoint.
#[derive(Clone)]
pub struct SignedHttp {
    http: reqwest::Client,
    endpoint: String,
    region: String,
    service: &'static str,
    credentials: Option<SharedCredentialsProvider>,
}

impl std::fmt::Debug for SignedHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedHttp").field("endpoint", &self.endpoint).field("service", &self.service).finish_non_exhaustive()
    }
}

impl SignedHttp {
    /// `endpoint` is the service's base URL (`https://…aoss.amazonaws.com`); requests are
    /// signed for `service` in the SDK configuration's region with its credentials.
    ///
    /// # Errors
    /// `INVALID_REQUEST` when the HTTP client cannot be built.
    pub fn new(sdk: &SdkConfig, endpoint: &str, service: &'static str) -> Result<Self> {
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls::client_config())
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Error::invalid(format!("{service} client: {e}")))?;
        Ok(Self {
            http,
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            region: sdk.region().map_or_else(|| "us-east-1".to_owned(), ToString::to_string),
            service,
            credentials: sdk.credentials_provider(),
        })
    }

    /// The same client with a whole-request timeout of `timeout` instead of 10 s (for
    /// slow control-plane calls, e.g. a local emulator's first IAM request, which loads
    /// every managed policy).
    ///
    /// # Errors
    /// `INVALID_REQUEST` when the HTTP client cannot be built.
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self> {
        self.http = reqwest::Client::builder()
            .use_preconfigured_tls(tls::client_config())
            .connect_timeout(Duration::from_secs(3))
            .timeout(timeout)
            .build()
            .map_err(|e| Error::invalid(format!("{} client: {e}", self.service)))?;
        Ok(self)
    }

    /// Sends `body` (JSON or NDJSON) with `method` to `path`; the parsed JSON answer, or
    /// the taxonomy error for a failure (`UNAVAILABLE` for 5xx, throttling and transport
    /// errors, `INTERNAL` for an answer we do not understand).
    ///
    /// # Errors
    /// As above; `status` of a 4xx is returned to the caller as `Ok` only when listed in
    /// `accept`.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
        accept: &[u16],
    ) -> Result<(u16, serde_json::Value)> {
        let url = format!("{}{path}", self.endpoint);
        let mut req = http::Request::builder()
            .method(method)
            .uri(&url)
            .header("content-type", content_type)
            .body(body)
            .map_err(|e| Error::internal(format!("{} request: {e}", self.service)))?;
        if let Some(provider) = &self.credentials {
            let creds = provider
                .provide_credentials()
                .await
                .map_err(|e| Error::unavailable(format!("{} credentials: {e}", self.service)))?;
            let identity = creds.into();
            let mut settings = SigningSettings::default();
            // OpenSearch Serverless requires the payload hash header; it does no harm elsewhere.
            settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
            let params = v4::SigningParams::builder()
                .identity(&identity)
                .region(&self.region)
                .name(self.service)
                .time(SystemTime::now())
                .settings(settings)
                .build()
                .map_err(|e| Error::internal(format!("signing: {e}")))?
                .into();
            let headers = req.headers().iter().filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)));
            let signable = SignableRequest::new(method, url.as_str(), headers, SignableBody::Bytes(req.body().as_slice()))
                .map_err(|e| Error::internal(format!("signing: {e}")))?;
            let (instructions, _) = sign(signable, &params).map_err(|e| Error::internal(format!("signing: {e}")))?.into_parts();
            instructions.apply_to_request_http1x(&mut req);
        }
        let req = reqwest::Request::try_from(req).map_err(|e| Error::internal(format!("{} request: {e}", self.service)))?;
        let res = self.http.execute(req).await.map_err(|e| Error::unavailable(format!("{}: {e}", self.service)))?;
        let status = res.status().as_u16();
        let bytes = res.bytes().await.map_err(|e| Error::unavailable(format!("{}: {e}", self.service)))?;
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        if (200..300).contains(&status) || accept.contains(&status) {
            return Ok((status, json));
        }
        // Log the service's own reason (never the request body, which holds tenant data).
        let reason = json.pointer("/error/reason").or_else(|| json.get("message")).map(ToString::to_string);
        tracing::warn!(service = self.service, status, reason = reason.as_deref().unwrap_or(""), "request refused");
        if status == 429 || status >= 500 {
            Err(Error::unavailable(format!("{} answered {status}", self.service)))
        } else {
            Err(Error::internal(format!("{} answered {status}", self.service)))
        }
    }
}
