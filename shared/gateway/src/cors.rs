//! CORS for browser-based MCP clients (SPEC §7.1): `/mcp`, `/`, the OAuth endpoints and
//! the discovery documents answer a configured list of origins (`--allowed-origin` on
//! serve, the `AllowedOrigins` parameter on AWS). A preflight from an allowed origin is
//! answered here, before authentication (browsers send no credential with it); an actual
//! request gets `Access-Control-Allow-Origin` naming that origin and the headers a client
//! must read (`Mcp-Session-Id`, `WWW-Authenticate`). Any other origin gets no CORS
//! headers, so the browser keeps the answer from the page; `/mcp` itself refuses a
//! foreign `Origin` with 403 (DNS-rebinding protection).

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};

use crate::router::AppState;

const ALLOW_METHODS: &str = "GET, POST, DELETE, OPTIONS";
const ALLOW_HEADERS: &str = "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id";
const EXPOSE_HEADERS: &str = "mcp-session-id, mcp-protocol-version, www-authenticate, retry-after";

/// Whether `origin` is in `allowed`: exactly, or by a pattern ending in `:*` (any port).
pub fn origin_allowed(allowed: &[String], origin: &str) -> bool {
    allowed.iter().any(|a| match a.strip_suffix(":*") {
        Some(prefix) => origin
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix(':'))
            .is_some_and(|port| !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())),
        None => a == origin,
    })
}

/// Paths browsers may call cross-origin.
fn cors_path(path: &str) -> bool {
    path == "/" || path == "/mcp" || path.starts_with("/oauth/") || path.starts_with("/.well-known/")
}

/// What the CORS step decided for a request.
pub enum Cors {
    /// Go on; the answer echoes this allowed origin ([`expose`]), or adds nothing.
    Pass(Option<HeaderValue>),
    /// An allowed origin's preflight, answered here (204): the request ends.
    Preflight(Response),
}

/// The CORS step of the edge, before the request goes on.
pub fn admit(state: &AppState, req: &Request) -> Cors {
    let allow = match req.headers().get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        Some(o) if cors_path(req.uri().path()) && origin_allowed(&state.settings.allowed_origins, o) => {
            HeaderValue::from_str(o).ok()
        }
        _ => None,
    };
    let Some(allow) = allow else { return Cors::Pass(None) };
    if req.method() == Method::OPTIONS && req.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD) {
        let mut r = StatusCode::NO_CONTENT.into_response();
        let h = r.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
        h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(ALLOW_METHODS));
        h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOW_HEADERS));
        h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
        h.insert(header::VARY, HeaderValue::from_static("Origin"));
        return Cors::Preflight(r);
    }
    Cors::Pass(Some(allow))
}

/// The CORS headers of an answer to an allowed origin ([`Cors::Pass`]'s origin).
pub fn expose(allow: Option<HeaderValue>, mut r: Response) -> Response {
    if let Some(allow) = allow {
        let h = r.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
        h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSE_HEADERS));
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::origin_allowed;

    #[test]
    fn origins_match_exactly_or_by_port_wildcard() {
        let allowed = vec!["https://app.example.com".to_owned(), "http://localhost:*".to_owned()];
        assert!(origin_allowed(&allowed, "https://app.example.com"));
        assert!(origin_allowed(&allowed, "http://localhost:6274"));
        for foreign in [
            "https://app.example.com.evil.test",
            "https://evil.test",
            "http://localhost",
            "http://localhost:",
            "http://localhost:80a",
            "http://localhost.evil.test:80",
            "http://localhost:123456",
            "null",
        ] {
            assert!(!origin_allowed(&allowed, foreign), "{foreign}");
        }
        assert!(!origin_allowed(&[], "https://app.example.com"));
    }
}
