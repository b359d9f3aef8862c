//! What the gateway's test files share: the router on a fresh embedded backend, and one
//! MCP JSON-RPC call through it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use axum::body::Body;
use gateway::App;
use gateway::auth::AuthMode;
use gateway::{AppState, GatewaySettings};
use http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use services::Services;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// Services on a fresh embedded backend in `dir`.
pub fn services(dir: &std::path::Path) -> Services {
    Services::new(store_embedded::open_backend(dir, Arc::new(ports::SystemClock)).unwrap())
}

/// The router as `continuity serve` builds it (verifying credentials, stateless MCP),
/// with `public_url` as its base URL.
pub fn app(services: &Services, public_url: &str) -> App {
    let settings = GatewaySettings {
        public_url: public_url.into(),
        allowed_origins: vec![],
        allowed_hosts: vec![],
        auth_mode: AuthMode::Verify,
        sessions: false,
        shutdown: CancellationToken::new(),
    };
    gateway::router(AppState { services: services.clone(), settings: Arc::new(settings) })
}

/// One JSON-RPC message POSTed to `/mcp` with `key`; the HTTP status and the body as JSON.
pub async fn post_mcp(app: &App, key: &str, message: &Value) -> (u16, Value) {
    let req = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", "localhost")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(Body::from(message.to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or_else(|_| json!({"raw": String::from_utf8_lossy(&bytes)})))
}

/// A JSON-RPC request that must answer 200; its whole response message.
pub async fn rpc(app: &App, key: &str, method: &str, params: Value) -> Value {
    let (status, v) = post_mcp(app, key, &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})).await;
    assert_eq!(status, 200, "{v}");
    v
}

/// A new API key of tenant `t` with `scopes` (a fresh service principal); its token.
pub async fn key(s: &Services, t: &domain::TenantId, scopes: &str) -> String {
    let req = services::admin::KeyRequest {
        tenant: t.clone(),
        scopes: domain::principal::Scopes::parse(scopes).unwrap(),
        principal: None,
        teams: vec![],
        projects: vec![],
    };
    s.admin.create_key(req).await.unwrap().token
}
