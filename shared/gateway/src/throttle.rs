//! Per-address limits on the routes anyone may call without a credential (SPEC §10):
//! dynamic client registration, the token and revocation endpoints, and the two sign-in
//! forms. Authenticated routes are limited per tenant instead (`auth::rate_limit`).
//!
//! The address is the request's [`ClientAddr`] (the TCP peer on `continuity serve`, API
//! Gateway's `sourceIp` on Lambda); an IPv6 client is counted by its /64, which one host
//! usually holds whole. A request without an address (an in-process call) is not limited
//! here. The counting is the use case's (`Authenticator::limit_source`): a limiter that
//! cannot be reached lets the request through (logged); the sign-in's own failure limits
//! fail closed.

use std::net::IpAddr;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::router::AppState;
use crate::server::ClientAddr;

/// The limited routes: (path, name, requests a minute per address).
const LIMITS: &[(&str, &str, u32)] = &[
    ("/oauth/register", "register", 20),
    ("/oauth/token", "token", 300),
    ("/oauth/revoke", "revoke", 300),
    ("/oauth/authorize", "sign-in", 60),
    ("/approvals/login", "console-sign-in", 30),
    ("/dashboard/login", "dashboard-sign-in", 30),
];

/// The bucket an address counts in: itself, or its /64 for IPv6.
fn source_key(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

/// A request the per-address limit applies to: a POST to a route of [`LIMITS`] from a
/// known address.
pub struct Limited {
    path: &'static str,
    name: &'static str,
    per_minute: u32,
    addr: IpAddr,
}

/// Whether the per-address limit applies to `req` (decided before anything is awaited,
/// so the request is not held across the count).
pub fn limited(req: &Request) -> Option<Limited> {
    if req.method() != http::Method::POST {
        return None;
    }
    let (path, name, per_minute) = LIMITS.iter().find(|(path, _, _)| *path == req.uri().path())?;
    let addr = req.extensions().get::<ClientAddr>()?.0;
    Some(Limited { path, name, per_minute: *per_minute, addr })
}

/// The edge's per-address limit: the request takes a token from its address's bucket;
/// `Some` is the refusal when it is empty.
pub async fn refuse(state: &AppState, limited: Limited) -> Option<Response> {
    let e = state.services.auth.limit_source(limited.name, limited.per_minute, &source_key(limited.addr)).await.err()?;
    Some(if limited.path.starts_with("/oauth/") {
        // OAuth clients read RFC 6749-style errors.
        let body = serde_json::json!({ "error": "too_many_requests", "error_description": e.message });
        let mut r = (http::StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
        if let Some(v) = e.payload.retry_after_secs.and_then(|s| http::HeaderValue::from_str(&s.to_string()).ok()) {
            r.headers_mut().insert(http::header::RETRY_AFTER, v);
        }
        r
    } else {
        ApiError::from(e).into_response()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_clients_count_by_their_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(source_key(a), source_key(b));
        assert_ne!(source_key(a), source_key(c));
        assert_eq!(source_key("::ffff:10.0.0.1".parse().unwrap()), "10.0.0.1");
        assert_eq!(source_key("10.0.0.1".parse().unwrap()), "10.0.0.1");
    }
}
