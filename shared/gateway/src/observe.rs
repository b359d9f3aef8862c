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

/// The request's well-formed `x-request-id`, or a new random one.
fn request_id(req: &Request) -> HeaderValue {
    let given = req.headers().get(REQUEST_ID).filter(|v| {
        let v = v.as_bytes();
        !v.is_empty() && v.len() <= 128 && v.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
    });
    match given {
        Some(v) => v.clone(),
        None => {
            let made = format!("{:032x}", rand::random::<u128>());
            HeaderValue::from_str(&made).unwrap_or_else(|_| HeaderValue::from_static("-"))
        }
    }
}

/// The metrics route of a request, when the handler named one (MCP requests do): one
/// of a fixed set of names, made once.
#[derive(Debug, Clone, Copy)]
pub struct RouteLabel(pub &'static str);

/// MCP methods counted under their own name; any other is `mcp:other`.
const MCP_METHODS: &[(&str, &str)] = &[
    ("initialize", "mcp:initialize"),
    ("notifications/initialized", "mcp:notifications/initialized"),
    ("ping", "mcp:ping"),
    ("tools/list", "mcp:tools/list"),
    ("prompts/list", "mcp:prompts/list"),
    ("prompts/get", "mcp:prompts/get"),
    ("resources/list", "mcp:resources/list"),
    ("resources/read", "mcp:resources/read"),
    ("resources/templates/list", "mcp:resources/templates/list"),
    ("completion/complete", "mcp:completion/complete"),
    ("logging/setLevel", "mcp:logging/setLevel"),
];

/// `mcp:{tool}` for every name a tool answers to (its own and its earlier dotted one),
/// made on first use: the set of tools is fixed for the life of the process.
fn tool_labels() -> &'static std::collections::HashMap<&'static str, &'static str> {
    static LABELS: std::sync::OnceLock<std::collections::HashMap<&'static str, &'static str>> = std::sync::OnceLock::new();
    LABELS.get_or_init(|| {
        let mut labels = std::collections::HashMap::new();
        for t in mcp::tools::all() {
            let label: &'static str = Box::leak(format!("mcp:{}", t.name()).into_boxed_str());
            for name in [t.name(), t.capability] {
                labels.insert(name, label);
            }
        }
        labels
    })
}

/// The route of an MCP message: `mcp:{tool}` for a call of a known tool, `mcp:{method}`
/// for a known method, else `mcp:other` (a caller cannot invent metric names).
pub fn mcp_route(method: Option<&str>, tool: Option<&str>) -> RouteLabel {
    let label = match method {
        Some("tools/call") => tool.and_then(|t| tool_labels().get(t).copied()).unwrap_or("mcp:tools/call"),
        Some(m) => MCP_METHODS.iter().find(|(name, _)| *name == m).map_or("mcp:other", |(_, label)| label),
        None => "mcp:message",
    };
    RouteLabel(label)
}

/// Hands the route's pattern (`/v1/approvals/{id}/approve`) to [`RequestLog`], which
/// runs before routing: the one middleware on every route.
pub async fn stamp_route(req: Request, next: Next) -> Response {
    let pattern = req.extensions().get::<MatchedPath>().cloned();
    let mut resp = next.run(req).await;
    if let Some(p) = pattern {
        resp.extensions_mut().insert(p);
    }
    resp
}

/// One request's log line and metrics, begun when it arrives ([`Self::begin`]: its id
/// taken or made, and set on the request) and written when its answer is ready
/// ([`Self::end`]: counted, logged, the id echoed).
pub struct RequestLog {
    id: HeaderValue,
    method: http::Method,
    uri: http::Uri,
    started: Instant,
}

impl RequestLog {
    pub fn begin(req: &mut Request) -> Self {
        let id = request_id(req);
        req.headers_mut().insert(REQUEST_ID, id.clone());
        Self { id, method: req.method().clone(), uri: req.uri().clone(), started: Instant::now() }
    }

    pub fn end(self, mut resp: Response) -> Response {
        let latency_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let status = resp.status().as_u16();
        let pattern = resp.extensions().get::<MatchedPath>().map(MatchedPath::as_str);
        let route: std::borrow::Cow<'static, str> = match (resp.extensions().get::<RouteLabel>(), pattern) {
            (Some(l), _) => l.0.into(),
            (None, Some(p)) => format!("{} {p}", self.method).into(),
            (None, None) => "unrouted".into(),
        };
        metrics::request(&route, status, latency_ms);
        let level = if status >= 500 { tracing::Level::ERROR } else { tracing::Level::INFO };
        // Formatted only when the line is written (a tenant's name, the id as text).
        if tracing::enabled!(tracing::Level::INFO) || level == tracing::Level::ERROR {
            let tenant = resp.extensions().get::<TenantId>().map(ToString::to_string).unwrap_or_default();
            let (id, method, path) = (self.id.to_str().unwrap_or_default(), &self.method, self.uri.path());
            if level == tracing::Level::ERROR {
                tracing::error!(request_id = %id, tenant, %method, path, route = &*route, status, latency_ms, "request");
            } else {
                tracing::info!(request_id = %id, tenant, %method, path, route = &*route, status, latency_ms, "request");
            }
        }
        resp.headers_mut().insert(REQUEST_ID, self.id);
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_routes_are_fixed_names() {
        let tool = mcp::tools::all().next().unwrap();
        let own = format!("mcp:{}", tool.name());
        // A tool by its own name and by the dotted name earlier versions listed.
        assert_eq!(mcp_route(Some("tools/call"), Some(tool.name())).0, own);
        assert_eq!(mcp_route(Some("tools/call"), Some(tool.capability)).0, own);
        assert_eq!(mcp_route(Some("tools/call"), Some("no_such_tool")).0, "mcp:tools/call");
        assert_eq!(mcp_route(Some("tools/call"), None).0, "mcp:tools/call");
        assert_eq!(mcp_route(Some("tools/list"), None).0, "mcp:tools/list");
        assert_eq!(mcp_route(Some("logging/setLevel"), None).0, "mcp:logging/setLevel");
        assert_eq!(mcp_route(Some("made/up"), None).0, "mcp:other");
        assert_eq!(mcp_route(None, None).0, "mcp:message");
        // Every tool has its own label.
        for t in mcp::tools::all() {
            assert_eq!(mcp_route(Some("tools/call"), Some(t.name())).0, format!("mcp:{}", t.name()));
        }
    }
}
