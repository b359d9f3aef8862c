//! The AWS SDK's HTTP client: hyper (HTTP/1.1) over the process's shared TLS
//! configuration ([`tls::client_config`]).
//!
//! Why not the SDK's own: it reads and decodes the machine's trusted roots when a client
//! is constructed (`aws_sdk_*::Client::new` validates its HTTP client by building it), so
//! every Lambda function paid that before its first answer, and again for our own HTTPS
//! clients. Here the roots are read once per process, at the first handshake, and shared
//! with every other outbound client; a process that only talks plain HTTP (moto in the
//! tests) never reads them.
//!
//! What it keeps of the SDK's client: one connection pool per timeout setting
//! (idle connections closed after 90 s, `TCP_NODELAY`), the connect and read timeouts of
//! [`HttpConnectorSettings`], and the error classes the SDK's retry policy reads:
//! connection failures, resets and closed connections are I/O errors (retried), a timeout
//! is a timeout, a message cut short is transient, a request the SDK built wrongly is the
//! user's. It offers HTTP/1.1 only (every service we call speaks it) and no proxy (the
//! SDK's default uses none either).

use std::sync::Mutex;
use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::retry::ErrorKind;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector as TcpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

type Pool = Client<hyper_rustls::HttpsConnector<TcpConnector>, SdkBody>;

/// A connector's settings: connect timeout, read timeout.
type Timeouts = (Option<Duration>, Option<Duration>);

/// How long an idle pooled connection is kept (the SDK's default).
const POOL_IDLE: Duration = Duration::from_secs(90);

/// The SDK HTTP client over [`tls::client_config`]; see the module docs.
pub fn client() -> SharedHttpClient {
    client_with(tls::client_config())
}

/// The same over `config` (a test's own CA).
pub fn client_with(config: rustls::ClientConfig) -> SharedHttpClient {
    SharedHttpClient::new(SdkHttp { config, pools: Mutex::default() })
}

#[derive(Debug)]
struct SdkHttp {
    config: rustls::ClientConfig,
    /// One connector per (connect timeout, read timeout): a process uses one or two.
    pools: Mutex<Vec<(Timeouts, SharedHttpConnector)>>,
}

impl HttpClient for SdkHttp {
    fn http_connector(&self, settings: &HttpConnectorSettings, _components: &RuntimeComponents) -> SharedHttpConnector {
        let key: Timeouts = (settings.connect_timeout(), settings.read_timeout());
        let mut pools = self.pools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, c)) = pools.iter().find(|(k, _)| *k == key) {
            return c.clone();
        }
        let mut tcp = TcpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(key.0);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(self.config.clone())
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let pool = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(https);
        let connector = SharedHttpConnector::new(Connector { pool, read_timeout: key.1 });
        pools.push((key, connector.clone()));
        connector
    }
}

#[derive(Debug)]
struct Connector {
    pool: Pool,
    read_timeout: Option<Duration>,
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let request = match request.try_into_http1x() {
            Ok(r) => r,
            Err(e) => return HttpConnectorFuture::ready(Err(ConnectorError::user(e.into()))),
        };
        let response = self.pool.request(request);
        let read_timeout = self.read_timeout;
        HttpConnectorFuture::new(async move {
            let response = match read_timeout {
                Some(limit) => match tokio::time::timeout(limit, response).await {
                    Ok(r) => r,
                    Err(elapsed) => return Err(ConnectorError::timeout(elapsed.into())),
                },
                None => response.await,
            };
            match response {
                Ok(r) => HttpResponse::try_from(r.map(SdkBody::from_body_1_x)).map_err(|e| ConnectorError::other(e.into(), None)),
                Err(e) => Err(classify(e)),
            }
        })
    }
}

/// The SDK's error class for a failed exchange (see the module docs).
fn classify(e: hyper_util::client::legacy::Error) -> ConnectorError {
    let connect = e.is_connect();
    let mut timeout = false;
    let mut io = connect;
    let mut user = false;
    let mut incomplete = false;
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(err) = next {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            timeout |= h.is_timeout();
            user |= h.is_user();
            io |= h.is_closed() || h.is_canceled();
            incomplete |= h.is_incomplete_message();
        }
        if let Some(i) = err.downcast_ref::<std::io::Error>() {
            timeout |= i.kind() == std::io::ErrorKind::TimedOut;
            io = true;
        }
        next = err.source();
    }
    let e: aws_smithy_runtime_api::box_error::BoxError = e.into();
    if timeout {
        ConnectorError::timeout(e)
    } else if io {
        ConnectorError::io(e)
    } else if incomplete {
        ConnectorError::other(e, Some(ErrorKind::TransientError))
    } else if user {
        ConnectorError::user(e)
    } else {
        ConnectorError::other(e, None)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    async fn dynamo(endpoint: &str, http: SharedHttpClient) -> aws_sdk_dynamodb::Client {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("eu-west-1"))
            .endpoint_url(endpoint)
            .credentials_provider(aws_credential_types::Credentials::new("test", "test", None, None, "static"))
            .http_client(http)
            .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::standard().with_max_attempts(2))
            .timeout_config(
                aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(2))
                    // Long enough for the retry's answer on a loaded machine.
                    .read_timeout(Duration::from_secs(2))
                    .build(),
            )
            .build();
        aws_sdk_dynamodb::Client::from_conf(config)
    }

    /// A stand-in DynamoDB answering `ListTables`, counting requests; `stall` answers
    /// nothing for that many requests first.
    async fn stand_in(stall: usize) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::Ordering;
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = seen.clone();
        let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
            let counter = counter.clone();
            async move {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                if n < stall {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                let target = headers.get("x-amz-target").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
                assert_eq!(target, "DynamoDB_20120810.ListTables");
                ([("content-type", "application/x-amz-json-1.0")], r#"{"TableNames":["one","two"]}"#)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (url, seen)
    }

    #[tokio::test]
    async fn the_sdk_calls_through_it_reads_no_roots_over_plain_http_and_retries_a_stalled_attempt() {
        let (url, seen) = stand_in(1).await;
        let client = dynamo(&url, client()).await;
        // The first attempt gets no answer within the read timeout: a timeout, retried.
        let tables = client.list_tables().send().await.unwrap();
        assert_eq!(tables.table_names(), ["one", "two"]);
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 2);
        // Constructing and calling over HTTP never needed a certificate.
        assert_eq!(tls::native_root_loads(), 0);
    }

    #[tokio::test]
    async fn a_refused_connection_is_an_io_error_the_sdk_retries_then_reports() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let client = dynamo(&format!("http://127.0.0.1:{port}"), client()).await;
        let err = client.list_tables().send().await.unwrap_err();
        let aws_sdk_dynamodb::error::SdkError::DispatchFailure(dispatch) = &err else {
            panic!("not a dispatch failure: {err:?}")
        };
        assert!(dispatch.is_io(), "{err:?}");
    }

    #[tokio::test]
    async fn https_is_verified_with_the_configured_roots() {
        let ca = continuity_tests::tls::TestCa::new();
        let app = axum::Router::new()
            .fallback(|| async { ([("content-type", "application/x-amz-json-1.0")], r#"{"TableNames":["secure"]}"#) });
        let url = ca.serve(app).await;

        let trusting = tls::client_config_trusting(&[ca.pem.clone().into_bytes()]).unwrap();
        let tables = dynamo(&url, client_with(trusting)).await.list_tables().send().await.unwrap();
        assert_eq!(tables.table_names(), ["secure"]);
        // Neither the built-in roots nor the machine's know this CA: refused after reading
        // the machine's once, not retried into success.
        let err = dynamo(&url, client()).await.list_tables().send().await.unwrap_err();
        assert!(matches!(err, aws_sdk_dynamodb::error::SdkError::DispatchFailure(_)), "{err:?}");
        assert_eq!(tls::native_root_loads(), 1);
    }
}
