//! The MCP Lambda driven with the API Gateway events in `events/`, exactly as Lambda
//! would deliver them, over an embedded backend (the backend is not what is under test
//! here; the contract suites cover it on both).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::invoke;

use std::sync::Arc;

use domain::spine::PoleClass;
use domain::tenant::{Department, Industry, PlanTier};
use domain::value::Attributes;
use domain::{EntityType, Id, TenantId};
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
            "session_get_context",
            "session_list_recent",
            "spine_entity_get",
            "spine_entity_search",
            "spine_relationship_list",
            "signal_list",
            "signal_get",
            "proposal_status",
            "book_list",
            "kb_search"
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
            let app = gateway::lambda::app_with_hosts(s, String::new(), hosts, Vec::new());
            app.oneshot(req).await.unwrap().status().as_u16()
        }
    };
    assert_eq!(call(vec!["abcdef1234.execute-api.eu-west-1.amazonaws.com".into()]).await, 200);
    assert_eq!(call(vec!["mcp.example.com".into()]).await, 403, "a Host outside the list is refused");
}

/// Lambda freezes the process once the handler returns: a read's audit record must be in
/// the store by then, not queued for a group write that may never run. (On `serve` reads
/// are group-committed up to 10 ms later; this test fails there.)
#[tokio::test]
async fn read_audit_records_are_durable_when_the_handler_returns() {
    use ports::records::AuditLog as _;
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;
    let demo = TenantId::new("demo").unwrap();
    let reads = |s: Services| {
        let demo = demo.clone();
        async move {
            let page = s.backend.records.list_audit(&demo, &domain::PageRequest::first(500)).await.unwrap();
            page.items.iter().filter(|r| r.action == "tool:spine_entity_get").count()
        }
    };
    assert_eq!(reads(s.clone()).await, 0);
    for n in 1..=3 {
        let (status, _) = invoke(&s, event("mcp-tools-call-entity-get.json")).await;
        assert_eq!(status, 200);
        // Read at once — no sleep, no yield to the writer task.
        assert_eq!(reads(s.clone()).await, n, "the read's record is durable when the handler returns");
    }
    assert!(s.audit.reads_are_durable());
    // The same services outside Lambda keep group-committing reads.
    let dir2 = tempfile::tempdir().unwrap();
    assert!(!services(dir2.path()).await.audit.reads_are_durable());
}

/// Every invocation prints its metrics as CloudWatch embedded-metric-format lines: the
/// request's route (the MCP tool, never a raw path or tenant data), counts and latency.
#[tokio::test]
async fn each_invocation_prints_emf_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;
    metrics::keep_printed(true);
    let (status, _) = invoke(&s, event("mcp-tools-call-entity-get.json")).await;
    assert_eq!(status, 200);
    let lines: Vec<Value> = metrics::printed().iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let line = lines.iter().find(|l| l["Route"] == "mcp:spine_entity_get").unwrap_or_else(|| panic!("{lines:?}"));
    let cw = &line["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(cw["Namespace"], "Continuity");
    assert_eq!(cw["Dimensions"], serde_json::json!([["Stack"], ["Stack", "Route"]]));
    assert_eq!((line["Requests"].as_u64(), line["Errors"].as_u64()), (Some(1), Some(0)));
    assert!(line["Latency"].as_f64().unwrap() > 0.0);
    assert!(line["_aws"]["Timestamp"].as_i64().unwrap() > 1_700_000_000_000);
    assert!(!line.to_string().contains("demo"), "no tenant in metrics: {line}");
    // A refused call counts as an error, under the router's route (an unauthenticated
    // caller's body never names a metric).
    let mut ev = event("mcp-tools-call-entity-get.json");
    ev["requestContext"]["authorizer"] = serde_json::json!({});
    let (status, _) = invoke(&s, ev).await;
    assert_eq!(status, 401);
    let last: Value = serde_json::from_str(metrics::printed().last().unwrap()).unwrap();
    assert_eq!((last["Route"].as_str(), last["Errors"].as_u64()), (Some("POST /mcp"), Some(1)), "{last}");
}

/// The engineering toolset on the MCP function, from `events/mcp-tools-call-engineering-save.json`:
/// the toolsets come from the authorizer's context; the record is stored in the caller's
/// project and found by the error-fix lookup; without the toolset the tool is not there.
#[tokio::test]
async fn an_engineering_record_from_an_event() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;
    let (status, v) = invoke(&s, event("mcp-tools-call-engineering-save.json")).await;
    assert_eq!(status, 200, "{v}");
    let r = &v["result"]["structuredContent"]["record"];
    assert_eq!((r["project"].as_str(), r["record"]["kind"].as_str()), (Some("apollo"), Some("error_fix")), "{v}");
    let demo = TenantId::new("demo").unwrap();
    let mut alice = continuity_tests::caller_in(&s, &demo, "mcp:tools memory:read", &[], &["apollo"]).await;
    alice.toolsets = domain::principal::Toolsets::parse("engineering").unwrap();
    let found = s.engineering.find_fixes(&alice, None, "connect ECONNREFUSED 127.0.0.1:5432 (postgres)", 5).await.unwrap();
    assert_eq!(found.first().map(|f| f.record.id.to_string()), r["id"].as_str().map(str::to_owned));
    let mut ev = event("mcp-tools-call-engineering-save.json");
    ev["requestContext"]["authorizer"]["toolsets"] = "canonical".into();
    let (status, v) = invoke(&s, ev).await;
    assert_eq!(status, 200);
    assert_eq!(v["result"]["structuredContent"]["code"], "CAPABILITY_NOT_FOUND", "{v}");
}

/// A replayed write from `events/mcp-tools-call-idempotent.json` (the stdio bridge's
/// buffer): delivered twice, the turn is appended once and the second answer is the first,
/// marked replayed.
#[tokio::test]
async fn a_write_delivered_twice_with_its_idempotency_key_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;
    let (status, first) = invoke(&s, event("mcp-tools-call-idempotent.json")).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["result"]["structuredContent"]["seq"], 1, "{first}");
    let (_, again) = invoke(&s, event("mcp-tools-call-idempotent.json")).await;
    assert_eq!(again["result"]["structuredContent"], first["result"]["structuredContent"]);
    assert_eq!(again["result"]["_meta"]["continuity.dev/replayed"], true, "{again}");
    let mut other = event("mcp-tools-call-idempotent.json");
    other["body"] = other["body"].as_str().unwrap().replace("9b2f6c1e", "0000aaaa").into();
    let (_, third) = invoke(&s, other).await;
    assert_eq!(third["result"]["structuredContent"]["seq"], 2, "another key runs: {third}");
}
