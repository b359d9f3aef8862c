//! Request logging: one structured line per request with its id, tenant, route, status
//! and latency (SPEC §9). The id comes from a well-formed `x-request-id` header or is
//! generated, and is echoed in the response. Credentials and bodies are never logged —
//! at any level: [`log_filter`] caps the libraries that would log content when asked for
//! debug output.

use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use domain::TenantId;
use http::HeaderValue;

pub const REQUEST_ID: &str = "x-request-id";

pub use lambda_support::log_filter;

fn request_id(req: &Request) -> String {
    req.headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
        .map_or_else(|| format!("{:032x}", rand::random::<u128>()), str::to_owned)
}

pub async fn log_requests(mut req: Request, next: Next) -> Response {
    let id = request_id(&req);
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    if let Ok(v) = HeaderValue::from_str(&id) {
        req.headers_mut().insert(REQUEST_ID, v);
    }
    let started = Instant::now();
    let mut resp = next.run(req).await;
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    let tenant = resp.extensions().get::<TenantId>().map(ToString::to_string).unwrap_or_default();
    let status = resp.status().as_u16();
    if status >= 500 {
        tracing::error!(request_id = %id, tenant, %method, path, status, latency_ms, "request");
    } else {
        tracing::info!(request_id = %id, tenant, %method, path, status, latency_ms, "request");
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert(REQUEST_ID, v);
    }
    resp
}
