//! What an operator and a browser client meet: `GET /metrics` (loopback, or the `admin`
//! scope), its counters after real requests, and CORS for configured origins.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use axum::body::Body;
use domain::TenantId;
use domain::tenant::{Department, Industry, PlanTier};
use gateway::App;
use gateway::auth::AuthMode;
use gateway::server::ClientAddr;
use gateway::{AppState, GatewaySettings};
use http::Request;
use http_body_util::BodyExt;
use serde_json::json;
use services::Services;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use common::key;

async fn get(app: &App, path: &str, from: IpAddr, bearer: Option<&str>) -> (u16, String) {
    let mut req = Request::builder().uri(path).header("host", "localhost");
    if let Some(b) = bearer {
        req = req.header("authorization", format!("Bearer {b}"));
    }
    let mut req = req.body(Body::empty()).unwrap();
    req.extensions_mut().insert(ClientAddr(from));
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    (status, String::from_utf8_lossy(&resp.into_body().collect().await.unwrap().to_bytes()).into_owned())
}

#[tokio::test]
async fn metrics_count_real_requests_for_loopback_or_admin_only() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::services(dir.path());
    let t = TenantId::new("acme").unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Pro, Department::Finance, Industry::Retail).await.unwrap();
    let app = common::app(&s, "http://localhost:8787");
    let reader = key(&s, &t, "mcp:tools tenant:read").await;
    common::rpc(&app, &reader, "tools/call", json!({"name": "spine.entity.search", "arguments": {"query": "acme"}})).await;
    common::rpc(&app, &reader, "tools/list", json!({})).await;
    // A body naming an unknown tool cannot create a metric name of its own.
    common::post_mcp(
        &app,
        &reader,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x\"} 1\nevil", "arguments": {}}}),
    )
    .await;
    // Refused before its message is read: counted by the method on `/mcp`, and a method a
    // caller made up is not a name either.
    common::post_mcp(&app, "not-a-key", &json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})).await;
    let odd = Request::builder().method("BREW").uri("/mcp").header("host", "localhost").body(Body::empty()).unwrap();
    app.clone().oneshot(odd).await.unwrap();

    let (status, text) = get(&app, "/metrics", IpAddr::V4(Ipv4Addr::LOCALHOST), None).await;
    assert_eq!(status, 200);
    assert!(text.contains("continuity_requests_total{route=\"POST /mcp\"} 1"), "{text}");
    assert!(text.contains("continuity_requests_total{route=\"other /mcp\"} 1") && !text.contains("BREW"), "{text}");
    assert!(text.contains("continuity_requests_total{route=\"mcp:spine_entity_search\"} 1"), "{text}");
    assert!(text.contains("continuity_requests_total{route=\"mcp:tools/list\"} 1"), "{text}");
    assert!(text.contains("continuity_requests_total{route=\"mcp:tools/call\"} 1"), "{text}");
    assert!(text.contains("continuity_embedder_info{embedder=\"hashing-384 (lexical)\"} 1"), "which embedder: {text}");
    assert!(!text.contains("evil") && !text.contains("acme"), "no caller-chosen names, no tenant: {text}");
    assert!(text.contains("# TYPE continuity_request_duration_seconds histogram"));
    assert!(text.contains("continuity_cache_misses_total"));

    // From another address: the admin scope, not just any key.
    let remote = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7));
    assert_eq!(get(&app, "/metrics", remote, None).await.0, 401);
    assert_eq!(get(&app, "/metrics", remote, Some(&reader)).await.0, 403);
    let admin = key(&s, &t, "admin").await;
    let (status, text) = get(&app, "/metrics", remote, Some(&admin)).await;
    assert_eq!(status, 200);
    assert!(text.contains("continuity_requests_total{route=\"GET /metrics\"}"), "the scrapes count too: {text}");
}

fn app_with_origins(s: &Services, origins: Vec<String>) -> App {
    let settings = GatewaySettings {
        public_url: "https://mcp.example.com".into(),
        allowed_origins: origins,
        allowed_hosts: vec![],
        auth_mode: AuthMode::Verify,
        sessions: false,
        shutdown: CancellationToken::new(),
    };
    gateway::router(AppState { services: s.clone(), settings: Arc::new(settings) })
}

#[tokio::test]
async fn configured_origins_get_cors_and_others_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::services(dir.path());
    let app = app_with_origins(&s, vec!["https://app.example.com".into()]);
    let preflight = |path: &str, origin: &str| {
        Request::builder()
            .method("OPTIONS")
            .uri(path)
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "authorization, content-type")
            .body(Body::empty())
            .unwrap()
    };
    for path in ["/mcp", "/oauth/token", "/oauth/register", "/.well-known/oauth-protected-resource/mcp"] {
        let resp = app.clone().oneshot(preflight(path, "https://app.example.com")).await.unwrap();
        assert_eq!(resp.status(), 204, "{path}");
        let h = resp.headers();
        assert_eq!(h["access-control-allow-origin"], "https://app.example.com");
        assert!(h["access-control-allow-headers"].to_str().unwrap().contains("authorization"));
        assert!(h["access-control-allow-methods"].to_str().unwrap().contains("POST"));
        // A foreign origin: no CORS headers (the browser blocks), never a 204 with them.
        let resp = app.clone().oneshot(preflight(path, "https://evil.test")).await.unwrap();
        assert!(!resp.headers().contains_key("access-control-allow-origin"), "{path}");
    }
    // The approver API and the console are not for cross-origin pages.
    let resp = app.clone().oneshot(preflight("/v1/approvals", "https://app.example.com")).await.unwrap();
    assert!(!resp.headers().contains_key("access-control-allow-origin"));
    // An actual request: the 401 a browser client must read to start OAuth.
    let req = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", "localhost")
        .header("origin", "https://app.example.com")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Body::from(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 401);
    let h = resp.headers();
    assert_eq!(h["access-control-allow-origin"], "https://app.example.com");
    assert!(h["access-control-expose-headers"].to_str().unwrap().contains("www-authenticate"));
    assert!(h["www-authenticate"].to_str().unwrap().contains("resource_metadata="));
    // Discovery documents, as a browser reads them.
    let req = Request::builder()
        .uri("/.well-known/oauth-authorization-server")
        .header("origin", "https://app.example.com")
        .body(Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["access-control-allow-origin"], "https://app.example.com");
    // With no origins configured (the default on AWS), nobody gets CORS headers.
    let closed = app_with_origins(&s, vec![]);
    let resp = closed.oneshot(preflight("/mcp", "https://app.example.com")).await.unwrap();
    assert!(!resp.headers().contains_key("access-control-allow-origin"));
}
