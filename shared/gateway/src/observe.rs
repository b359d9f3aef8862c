//! Request logging and metrics: one structured line per request with its id, tenant,
//! route, status and latency (SPEC §9), and the same request counted in the
//! [`metrics`] registry under a fixed route name (an MCP tool or method, or the router's
//! path pattern — never a raw path or a caller-chosen name). The id comes from a well-formed `x-request-id` header or is
//! generated, and is echoed in the response. Credentials and bodies are never logged —
//! at any level: [`log_filter`] caps the libraries that would log content when asked for
//! debug output.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
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

/// The metrics route of a request, when the handler named one (MCP requests do).
#[derive(Debug, Clone)]
pub struct RouteLabel(pub String);

/// MCP methods counted under their own name; any other is `mcp:other`.
const MCP_METHODS: &[&str] = &[
    "initialize",
    "notifications/initialized",
    "ping",
    "tools/list",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "completion/complete",
    "logging/setLevel",
];

/// The route of an MCP message: `mcp:{tool}` for a call of a known tool, `mcp:{method}`
/// for a known method, else `mcp:other` (a caller cannot invent metric names).
pub fn mcp_route(method: Option<&str>, tool: Option<&str>) -> RouteLabel {
    let label = match method {
        Some("tools/call") => match tool.and_then(|t| mcp::tools::all().find(|k| k.answers_to(t))) {
            Some(t) => format!("mcp:{}", t.name()),
            None => "mcp:tools/call".to_owned(),
        },
        Some(m) if MCP_METHODS.contains(&m) => format!("mcp:{m}"),
        Some(_) => "mcp:other".to_owned(),
        None => "mcp:message".to_owned(),
    };
    RouteLabel(label)
}

/// Hands the route's pattern (`/v1/approvals/{id}/approve`) to [`log_requests`], which
/// runs before routing: the one middleware on every route.
pub async fn stamp_route(req: Request, next: Next) -> Response {
    let pattern = req.extensions().get::<MatchedPath>().cloned();
    let mut resp = next.run(req).await;
    if let Some(p) = pattern {
        resp.extensions_mut().insert(p);
    }
    resp
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
    let pattern = resp.extensions().get::<MatchedPath>().map(MatchedPath::as_str);
    let route = match (resp.extensions().get::<RouteLabel>(), pattern) {
        (Some(l), _) => l.0.clone(),
        (None, Some(p)) => format!("{method} {p}"),
        (None, None) => "unrouted".to_owned(),
    };
    metrics::request(&route, status, latency_ms);
    if status >= 500 {
        tracing::error!(request_id = %id, tenant, %method, path, route, status, latency_ms, "request");
    } else {
        tracing::info!(request_id = %id, tenant, %method, path, route, status, latency_ms, "request");
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert(REQUEST_ID, v);
    }
    resp
}
