//! The template and the router agree, both ways: every API route in
//! `infra/template.yaml` reaches a handler of the router its function serves (not the
//! fallback 404, not a 405), and every route of the router is in the template unless it
//! is `serve`'s alone. A route added to one and not the other fails here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;

use axum::body::Body;
use continuity_tests::template::{Template, route_for};
use gateway::auth::AuthMode;
use gateway::{AppState, GatewaySettings};
use http::Request;
use http_body_util::BodyExt;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// Routes only `continuity serve` has (no Lambda serves them), and why.
const SERVE_ONLY: &[(&str, &str)] = &[("/metrics", "Prometheus scraping of one process; on AWS the functions print EMF")];

/// A concrete path for a template path: parameters and greedy proxies filled in with a
/// value the router has a route for.
fn concrete(method: &str, path: &str) -> String {
    let fill = |segment: &str| -> String {
        match segment {
            "{proxy+}" if path.starts_with("/.well-known/") => "oauth-authorization-server".into(),
            "{proxy+}" if path.starts_with("/oauth/") && method == "GET" => "authorize".into(),
            "{proxy+}" if path.starts_with("/oauth/") => "token".into(),
            "{proxy+}" if path.starts_with("/v1/admin/") => "tenants".into(),
            "{action+}" if path.starts_with("/approvals/") => "login".into(),
            "{action}" if path.starts_with("/dashboard/memory/") => "forget".into(),
            "{action}" if path.starts_with("/dashboard/connectors/") => "sync".into(),
            "{action}" if path.starts_with("/dashboard/") => "login".into(),
            "{capability}" => "kb.search".into(),
            "{source}" => "hubspot".into(),
            s if s.starts_with('{') => "p-1".into(),
            s => s.into(),
        }
    };
    let filled: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(fill).collect();
    format!("/{}", filled.join("/"))
}

#[tokio::test]
async fn every_template_route_reaches_a_handler_and_every_handler_is_deployed() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::services(dir.path());
    let settings = GatewaySettings {
        public_url: "https://mcp.example.com".into(),
        allowed_origins: vec!["https://app.example.com".into()],
        allowed_hosts: vec![],
        auth_mode: AuthMode::Verify,
        sessions: false,
        shutdown: CancellationToken::new(),
    };
    let app = gateway::router(AppState { services: s, settings: Arc::new(settings) });
    let routes = Template::load().routes();
    assert!(routes.len() >= 20, "{routes:?}");

    // 1. Template → router.
    for r in &routes {
        let method = if r.method == "ANY" { "GET" } else { r.method.as_str() };
        let path = concrete(method, &r.path);
        let mut req = Request::builder().method(method).uri(&path).header("host", "localhost");
        if method == "OPTIONS" {
            req = req.header("origin", "https://app.example.com").header("access-control-request-method", "POST");
        }
        let resp = app.clone().oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
        let status = resp.status().as_u16();
        let body = String::from_utf8_lossy(&resp.into_body().collect().await.unwrap().to_bytes()).into_owned();
        let fallback = status == 404 && body.contains("route");
        assert!(
            !fallback && status != 405,
            "{method} {path} ({} in the template) reaches no handler: {status} {body}",
            r.function
        );
    }

    // 2. Router → template: every `.route(…)` of the router, by its source.
    let source = std::fs::read_to_string(continuity_tests::manifest_dir().join("src/router.rs")).unwrap();
    let mut checked = 0;
    for line in source.lines().map(str::trim).filter(|l| l.starts_with(".route(\"")) {
        let path = line.trim_start_matches(".route(\"").split('"').next().unwrap();
        if SERVE_ONLY.iter().any(|(p, _)| *p == path) {
            continue;
        }
        let rest = &line[line.find("\",").unwrap() + 2..];
        let methods: Vec<&str> = ["get", "post", "put", "patch", "delete"]
            .into_iter()
            .filter(|m| rest.contains(&format!("{m}(")) || rest.contains(&format!(".{m}(")))
            .collect();
        // `any(…)` handlers (the MCP endpoint) are deployed for their MCP methods.
        let methods = if methods.is_empty() { vec!["post"] } else { methods };
        for m in methods {
            let concrete_path = concrete(&m.to_uppercase(), &path.replace("{entity_type}", "account"));
            assert!(
                route_for(&routes, &m.to_uppercase(), &concrete_path).is_some(),
                "{} {path} is served by the router but not routed in infra/template.yaml",
                m.to_uppercase()
            );
            checked += 1;
        }
    }
    assert!(checked >= 30, "the router's routes were read: {checked}");
}
