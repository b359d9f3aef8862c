//! The fast path of the plain stateless `tools/call` (`gateway::fast_call`) answers
//! exactly as rmcp does: the same calls — a hit, a miss, bad arguments, an unknown tool,
//! a key without the scope, a string id — sent once plainly (the fast path) and once with
//! a weighted `Accept` (rmcp's way) give the same status, content type and JSON (a
//! success's structured content has its members in the output type's order on the fast
//! path, sorted on rmcp's: the same JSON object; everything else byte for byte); requests it must not take (a browser `Origin`, a foreign `Host`, `_meta`, an
//! unsupported protocol version, a session, another method) are left to rmcp.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;

use axum::body::Body;
use domain::principal::Scopes;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{Id, TenantId};
use gateway::App;
use gateway::auth::AuthMode;
use gateway::body::JsonRpcMethod;
use gateway::fast_call::FastCall;
use gateway::{AppState, GatewaySettings};
use http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

fn app(services: &services::Services, allowed_hosts: Vec<String>) -> App {
    let settings = GatewaySettings {
        public_url: "http://localhost".into(),
        allowed_origins: vec![],
        allowed_hosts,
        auth_mode: AuthMode::Verify,
        sessions: true,
        shutdown: CancellationToken::new(),
    };
    gateway::router(AppState { services: services.clone(), settings: Arc::new(settings) })
}

/// POSTs `body` to `/mcp` with `key`, `accept` and extra headers; status, content type and body.
async fn post(app: &App, key: &str, accept: &str, extra: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let mut req = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", "localhost:8787")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .header("accept", accept)
        .header("mcp-protocol-version", "2025-06-18");
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    let resp = app.clone().oneshot(req.body(Body::from(body.to_owned())).unwrap()).await.unwrap();
    let status = resp.status().as_u16();
    let ctype = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, ctype, String::from_utf8(bytes.to_vec()).unwrap())
}

fn caller(t: &TenantId, scopes: &str) -> domain::principal::CallerContext {
    domain::principal::CallerContext {
        tenant: t.clone(),
        principal: Id::new("svc").unwrap(),
        scopes: Scopes::parse(scopes).unwrap(),
        plan: PlanTier::Pro,
        teams: Vec::new(),
        projects: Vec::new(),
        credential: "api_key:test".into(),
        client: None,
        toolsets: domain::principal::Toolsets::default(),
    }
}

const FAST: &str = "application/json, text/event-stream";
/// The same preference with weights: only rmcp takes it.
const RMCP: &str = "application/json;q=1, text/event-stream;q=1";

#[tokio::test]
async fn the_fast_path_answers_as_rmcp() {
    let dir = tempfile::tempdir().unwrap();
    let services = common::services(dir.path());
    let t = TenantId::new("acme").unwrap();
    services.admin.create_tenant(t.clone(), PlanTier::Pro, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    services
        .entities
        .put(
            &caller(&t, "admin tenant:read"),
            domain::EntityType::new("account").unwrap(),
            Id::new("acme-1").unwrap(),
            domain::spine::PoleClass::Organization,
            serde_json::from_value(json!({"name": "Acme Corp", "tier": "gold"})).unwrap(),
            ports::records::Expect::Any,
        )
        .await
        .unwrap();
    let key = common::key(&services, &t, "mcp:tools tenant:read memory:read").await;
    let narrow = common::key(&services, &t, "tenant:read").await;
    let app = app(&services, vec!["localhost".into()]);

    let calls = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "spine_entity_get", "arguments": {"type": "account", "id": "acme-1"}}}),
        json!({"jsonrpc": "2.0", "id": "s-2", "method": "tools/call", "params": {"name": "spine.entity.get", "arguments": {"type": "account", "id": "nope"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "spine_entity_get", "arguments": {"type": 7}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "memory_search"}}),
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "memory_search", "arguments": {"query": "renewal"}}}),
    ];
    for call in &calls {
        for k in [&key, &narrow] {
            let fast = post(&app, k, FAST, &[], &call.to_string()).await;
            let rmcp = post(&app, k, RMCP, &[], &call.to_string()).await;
            assert_eq!((fast.0, &fast.1), (rmcp.0, &rmcp.1), "the same status and type both ways for {call}");
            let (f, r): (Value, Value) = (serde_json::from_str(&fast.2).unwrap(), serde_json::from_str(&rmcp.2).unwrap());
            assert_eq!(f, r, "the same answer both ways for {call}");
            if f["result"]["isError"] == true {
                assert_eq!(fast.2, rmcp.2, "an error is rmcp's own message, byte for byte");
            }
            assert_eq!(fast.0, 200);
            assert_eq!(fast.1, "application/json");
        }
    }
    let (_, _, hit) = post(&app, &key, FAST, &[], &calls[0].to_string()).await;
    assert!(hit.contains("Acme Corp"), "{hit}");
}

#[tokio::test]
async fn it_takes_only_the_plain_stateless_tools_call() {
    let dir = tempfile::tempdir().unwrap();
    let services = common::services(dir.path());
    let t = TenantId::new("acme").unwrap();
    services.admin.create_tenant(t.clone(), PlanTier::Pro, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let caller = caller(&t, "mcp:tools tenant:read memory:read");
    let fast = FastCall::new(mcp::ContinuityMcp::new(services.clone()), &["localhost".into(), "127.0.0.1:8787".into()]);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory_search", "arguments": {"query": "x"}}});
    let request = |headers: &[(&str, &str)], body: &Value, method: &str| {
        let mut req = Request::builder().method("POST").uri("/mcp");
        for (k, v) in [
            ("host", "localhost:8787"),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2025-11-25"),
        ] {
            if !headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(k)) {
                req = req.header(k, v);
            }
        }
        for (k, v) in headers.iter().filter(|(_, v)| !v.is_empty()) {
            req = req.header(*k, *v);
        }
        let mut req = req.body(Body::from(body.to_string())).unwrap();
        req.extensions_mut().insert(caller.clone());
        req.extensions_mut().insert(JsonRpcMethod(Some(method.to_owned())));
        req
    };
    // The plain call is answered here.
    let answered = fast.answer(request(&[], &call, "tools/call")).await.expect("the plain call is taken");
    assert_eq!(answered.status(), 200);
    let body = answered.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["id"], 1);
    assert!(v["result"]["content"].is_array(), "{v}");

    // Each of these goes to rmcp, its body intact.
    let meta = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory_search", "arguments": {"query": "x"}, "_meta": {"progressToken": 1}}});
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let cases: Vec<(&str, Request<Body>)> = vec![
        ("a browser Origin", request(&[("origin", "http://localhost:3000")], &call, "tools/call")),
        ("a foreign Host", request(&[("host", "evil.example")], &call, "tools/call")),
        ("an allowed host on another port", request(&[("host", "127.0.0.1:9999")], &call, "tools/call")),
        ("a session", request(&[("mcp-session-id", "abc")], &call, "tools/call")),
        ("another Mcp- header", request(&[("mcp-method", "tools/call")], &call, "tools/call")),
        ("a per-request protocol version", request(&[("mcp-protocol-version", "2026-07-28")], &call, "tools/call")),
        ("an unknown protocol version", request(&[("mcp-protocol-version", "1999-01-01")], &call, "tools/call")),
        ("a weighted Accept", request(&[("accept", "application/json;q=0.9, text/event-stream")], &call, "tools/call")),
        ("JSON only", request(&[("accept", "application/json")], &call, "tools/call")),
        ("another content type", request(&[("content-type", "text/plain")], &call, "tools/call")),
        ("_meta", request(&[], &meta, "tools/call")),
        ("another method", request(&[], &list, "tools/list")),
    ];
    for (what, req) in cases {
        let sent = req.headers().clone();
        let back = fast.answer(req).await.err().unwrap_or_else(|| panic!("{what}: must go to rmcp"));
        assert_eq!(back.headers(), &sent, "{what}: headers intact");
        let body = back.into_body().collect().await.unwrap().to_bytes();
        assert!(!body.is_empty(), "{what}: the body is handed on");
    }
    // Without the authenticated caller (a router wired without `authenticate`): rmcp, which refuses.
    let mut bare = request(&[], &call, "tools/call");
    bare.extensions_mut().remove::<domain::principal::CallerContext>();
    assert!(fast.answer(bare).await.is_err());
}
