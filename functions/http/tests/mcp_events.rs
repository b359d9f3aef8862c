//! The MCP Lambda driven with the API Gateway events in `events/`, exactly as Lambda
//! would deliver them, over an embedded backend (the backend is not what is under test
//! here; the contract suites cover it on both).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use domain::spine::PoleClass;
use domain::tenant::{Department, Industry, PlanTier};
use domain::value::Attributes;
use domain::{EntityType, Id, TenantId};
use http_body_util::BodyExt;
use ports::records::Expect;
use serde_json::Value;
use services::Services;
use tower::ServiceExt;

fn event(name: &str) -> Value {
    continuity_tests::event(name)
}

async fn services(dir: &std::path::Path) -> Services {
    let backend = store_embedded::open_backend(dir, Arc::new(ports::SystemClock)).expect("backend");
    let s = Services::new(backend);
    let demo = TenantId::new("demo").unwrap();
    s.admin.create_tenant(demo.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let op = s.admin.operator(&demo).await.unwrap();
    let mut attrs = Attributes::new();
    attrs.insert("name".into(), "Acme Corp".into());
    s.entities
        .put(&op, EntityType::new("account").unwrap(), Id::new("acme-1").unwrap(), PoleClass::Organization, attrs, Expect::Any)
        .await
        .unwrap();
    s
}

async fn invoke(s: &Services, ev: Value) -> (u16, Value) {
    let req = lambda_http::request::from_str(&ev.to_string()).expect("API Gateway event");
    let app = gateway::lambda::app(s.clone(), "https://abcdef1234.execute-api.eu-west-1.amazonaws.com/prod".into());
    let resp = app.oneshot(req).await.expect("infallible");
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn initialize_tools_list_and_call_from_events() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;

    let (status, v) = invoke(&s, event("mcp-initialize.json")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["serverInfo"]["name"], "continuity");

    let (status, v) = invoke(&s, event("mcp-tools-list.json")).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = v["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    // The event's key has `mcp:tools tenant:read`: the read tools of the tenant channel.
    assert_eq!(
        names,
        [
            "session.get_context",
            "session.list_recent",
            "spine.entity.get",
            "spine.entity.search",
            "spine.relationship.list",
            "signal.list",
            "signal.get",
            "proposal.status",
            "book.list",
            "kb.search"
        ]
    );

    let (status, v) = invoke(&s, event("mcp-tools-call-entity-get.json")).await;
    assert_eq!(status, 200);
    assert_eq!(v["result"]["structuredContent"]["entity"]["attributes"]["name"], "Acme Corp");

    let (status, v) = invoke(&s, event("healthz.json")).await;
    assert_eq!((status, v["status"].as_str()), (200, Some("ok")));
}

#[tokio::test]
async fn the_authorizer_context_decides_tenant_and_scopes() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;

    // Without the authorizer's context the router refuses, with WWW-Authenticate.
    let mut ev = event("mcp-tools-list.json");
    ev["requestContext"].as_object_mut().unwrap().remove("authorizer");
    let (status, v) = invoke(&s, ev).await;
    assert_eq!(status, 401);
    assert_eq!(v["error"]["code"], "UNAUTHENTICATED");

    // A context for another (existing) tenant sees nothing of demo's.
    s.admin
        .create_tenant(TenantId::new("other").unwrap(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas)
        .await
        .unwrap();
    let mut ev = event("mcp-tools-call-entity-get.json");
    ev["requestContext"]["authorizer"]["tenant"] = "other".into();
    let (_, v) = invoke(&s, ev).await;
    assert_eq!(v["result"]["structuredContent"]["code"], "NOT_FOUND");

    // Scopes come from the context: without tenant:read the tool is refused.
    let mut ev = event("mcp-tools-call-entity-get.json");
    ev["requestContext"]["authorizer"]["scopes"] = "mcp:tools".into();
    let (_, v) = invoke(&s, ev).await;
    assert_eq!(v["result"]["structuredContent"]["code"], "FORBIDDEN");

    // A malformed context fails closed.
    let mut ev = event("mcp-tools-list.json");
    ev["requestContext"]["authorizer"]["scopes"] = "root:everything".into();
    assert_eq!(invoke(&s, ev).await.0, 401);
}

/// With `CONTINUITY_ALLOWED_HOSTS` set, `/mcp` checks `Host` against the API's domains.
#[tokio::test]
async fn configured_hosts_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;
    let call = |hosts: Vec<String>| {
        let s = s.clone();
        async move {
            let req = lambda_http::request::from_str(&event("mcp-tools-list.json").to_string()).unwrap();
            let app = gateway::lambda::app_with_hosts(s, String::new(), hosts);
            app.oneshot(req).await.unwrap().status().as_u16()
        }
    };
    assert_eq!(call(vec!["abcdef1234.execute-api.eu-west-1.amazonaws.com".into()]).await, 200);
    assert_eq!(call(vec!["mcp.example.com".into()]).await, 403, "a Host outside the list is refused");
}
