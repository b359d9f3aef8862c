//! Driving the HTTP Lambda's router with an API Gateway event, as `lambda_http` does.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use http_body_util::BodyExt;
use serde_json::Value;
use services::Services;
use tower::ServiceExt;

/// The stack's URL the events were recorded against.
pub const PUBLIC_URL: &str = "https://abcdef1234.execute-api.eu-west-1.amazonaws.com/prod";

/// The event through the router with `public_url` (empty: derived from the request);
/// the status, the headers and the body as JSON (`Null` if it is not).
pub async fn invoke_with(s: &Services, ev: &Value, public_url: &str) -> (u16, lambda_http::http::HeaderMap, Value) {
    let req = lambda_http::request::from_str(&ev.to_string()).expect("API Gateway event");
    let resp = gateway::lambda::app(s.clone(), public_url.to_owned()).oneshot(req).await.expect("infallible");
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, headers, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// [`invoke_with`] the stack's URL; the status and the body.
pub async fn invoke(s: &Services, ev: Value) -> (u16, Value) {
    let (status, _, body) = invoke_with(s, &ev, PUBLIC_URL).await;
    (status, body)
}
