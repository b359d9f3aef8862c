//! The capability-API Lambda driven with `events/adk-*.json`, as API Gateway delivers
//! them after the authorizer, over an embedded backend.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

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
    let backend = store_embedded::open_backend(dir, Arc::new(ports::SystemClock)).unwrap();
    let s = Services::new(backend);
    let demo = TenantId::new("demo").unwrap();
    s.admin.create_tenant(demo.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let op = s.admin.operator(&demo).await.unwrap();
    let mut attrs = Attributes::new();
    attrs.insert("name".into(), "Acme Corp".into());
    attrs.insert("internal_notes".into(), "never shown to agents".into());
    s.entities
        .put(&op, EntityType::new("account").unwrap(), Id::new("acme-1").unwrap(), PoleClass::Organization, attrs, Expect::Any)
        .await
        .unwrap();
    s
}

async fn invoke(s: &Services, ev: Value) -> (u16, Option<String>, Value) {
    let (status, headers, body) = common::invoke_with(s, &ev, common::PUBLIC_URL).await;
    (status, headers.get("retry-after").map(|v| v.to_str().unwrap().to_owned()), body)
}

#[tokio::test]
async fn list_and_execute_from_events() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;
    let (status, _, v) = invoke(&s, event("adk-list-capabilities.json")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["tenant"], "demo");
    let caps = v["capabilities"].as_array().unwrap();
    let get = caps.iter().find(|c| c["name"] == "spine.entity.get").unwrap();
    assert_eq!(get["allowed"], true);
    // The sample caller has tenant:read but not memory:read.
    let org = caps.iter().find(|c| c["name"] == "memory.search_org").unwrap();
    assert_eq!(org["allowed"], false);
    assert_eq!(org["missing_scopes"][0], "memory:read");

    let (status, _, v) = invoke(&s, event("adk-execute-entity-get.json")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["route"], "STORE_INDEX");
    assert_eq!(v["data"]["entity"]["attributes"]["name"], "Acme Corp");
    assert!(v["data"]["entity"]["attributes"].get("internal_notes").is_none(), "non-priority fields are stripped");
}

/// `task.dispatch` through the capability API: stored open and queued; the work queue's
/// consumer delivers it to its assignee.
#[tokio::test]
async fn a_task_is_dispatched_from_the_event() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;
    let demo = TenantId::new("demo").unwrap();
    let alice = domain::principal::Principal {
        tenant: demo.clone(),
        id: Id::new("alice").unwrap(),
        kind: domain::principal::PrincipalKind::User,
        role: domain::principal::Role::Member,
        display_name: "Alice".into(),
        created_at: s.backend.clock.now(),
        teams: Vec::new(),
        projects: Vec::new(),
        disabled: false,
    };
    ports::records::PrincipalStore::create_principal(&s.backend.records, &alice).await.unwrap();
    let (status, _, v) = invoke(&s, event("adk-execute-task-dispatch.json")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["route"], "REMOTE_FUNCTION");
    assert_eq!((v["data"]["task"]["status"].as_str(), v["data"]["task"]["assignee"].as_str()), (Some("open"), Some("alice")));
    assert_eq!(s.consumer.drain_once(std::time::Duration::from_secs(30), std::time::Duration::ZERO).await.unwrap(), 1);
    let id = Id::new(v["data"]["task"]["id"].as_str().unwrap()).unwrap();
    let task = ports::records::TaskStore::get_task(&s.backend.records, &demo, &id).await.unwrap().unwrap();
    assert_eq!(task.status, domain::spine::TaskStatus::Dispatched);
}

#[tokio::test]
async fn a_tenant_whose_config_cannot_be_loaded_gets_resolver_degraded() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;
    // The authorizer vouched for a tenant whose configuration is not in this store.
    let mut ev = event("adk-execute-entity-get.json");
    ev["requestContext"]["authorizer"]["tenant"] = "ghost".into();
    let (status, retry, v) = invoke(&s, ev).await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["error"]["code"], "RESOLVER_DEGRADED");
    assert_eq!(retry.as_deref(), Some("5"));

    let mut ev = event("mcp-tools-call-entity-get.json");
    ev["requestContext"]["authorizer"]["tenant"] = "ghost".into();
    let (status, _, v) = invoke(&s, ev).await;
    assert_eq!(status, 200);
    assert_eq!(v["result"]["isError"], true);
    assert_eq!(v["result"]["structuredContent"]["code"], "RESOLVER_DEGRADED");
    assert_eq!(v["result"]["structuredContent"]["retry_after"], 5);
}

#[tokio::test]
async fn approvers_list_and_reject_from_events() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;
    let demo = TenantId::new("demo").unwrap();
    let agent = continuity_tests::caller(&s, &demo, "mcp:tools tenant:read memory:read memory:write").await;
    let out = s
        .capabilities
        .execute(
            &agent,
            "memory.propose",
            serde_json::json!({"title": "Support hours", "kind": "pattern", "body": "Maybe support could answer on weekends too, perhaps from a rota."}),
        )
        .await
        .unwrap();
    let id = out.data["proposal"]["id"].as_str().unwrap().to_owned();
    assert_eq!(out.data["proposal"]["state"], "awaiting_approval", "{}", out.data);

    let (status, _, v) = invoke(&s, event("approvals-list.json")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["approvals"][0]["proposal"]["id"], id.as_str());

    let text = event("approvals-reject.json").to_string().replace("PROPOSAL_ID", &id);
    let (status, _, v) = invoke(&s, serde_json::from_str(&text).unwrap()).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["proposal"]["state"], "rejected");
    assert_eq!(v["proposal"]["decision_reason"], "No weekend staffing budget this quarter.");
    // The same event again: the proposal is no longer waiting.
    let (status, _, v) = invoke(&s, serde_json::from_str(&text).unwrap()).await;
    assert_eq!(status, 409, "{v}");

    // The console (the approvals function runs the same binary and router): a browser without a
    // session gets the sign-in page, with its CSRF cookie, and no authorizer involved.
    let req = lambda_http::request::from_str(&event("approvals-console.json").to_string()).unwrap();
    let app = gateway::lambda::app(s.clone(), String::new());
    let resp = app.oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let cookie = resp.headers().get("set-cookie").unwrap().to_str().unwrap().to_owned();
    assert!(
        cookie.starts_with("__Host-ctn_console_login=") && cookie.contains("Secure") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    let html = String::from_utf8(resp.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    assert!(html.contains("Approver key"), "{html}");
    assert!(
        html.contains("action=\"https://abcdef1234.execute-api.eu-west-1.amazonaws.com/prod/approvals/login\""),
        "forms post to the stage's URL: {html}"
    );
}

/// The gate API on the approvals function, from `events/gates-*.json`: an approver
/// authorizes a push once; a CI key's verify gets 200 and spends it, the same verify
/// again 403; an unknown gate is 404; the agent's key (no `approvals:decide`) cannot set.
#[tokio::test]
async fn gates_from_events() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;
    let (status, _, v) = invoke(&s, event("gates-verify.json")).await;
    assert_eq!((status, v["verdict"].as_str()), (404, Some("unknown")), "{v}");
    let (status, _, v) = invoke(&s, event("gates-set.json")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!((v["gate"]["status"].as_str(), v["gate"]["set_by"].as_str()), (Some("authorized"), Some("bob")));
    let (status, _, v) = invoke(&s, event("gates-verify.json")).await;
    assert_eq!((status, v["verdict"].as_str(), v["consumed"].as_bool()), (200, Some("authorized"), Some(true)), "{v}");
    let (status, _, v) = invoke(&s, event("gates-verify.json")).await;
    assert_eq!((status, v["verdict"].as_str()), (403, Some("blocked")), "{v}");
    // The same set by a caller without approvals:decide.
    let mut ev = event("gates-set.json");
    ev["requestContext"]["authorizer"]["scopes"] = "mcp:tools tenant:read memory:read memory:write".into();
    let (status, _, v) = invoke(&s, ev).await;
    assert_eq!(status, 403, "{v}");
    assert_eq!(v["error"]["code"], "FORBIDDEN");
}

/// The dashboard on the approvals function, from `events/dashboard.json` and
/// `events/dashboard-stats.json`: a browser gets the sign-in page with forms posting to
/// the stage's URL; `/api/stats` with a tenant's key gives the tenant's figures, and
/// without a working key a 401.
#[tokio::test]
async fn the_dashboard_from_events() {
    let dir = tempfile::tempdir().unwrap();
    let s = services(dir.path()).await;
    let app = gateway::lambda::app(s.clone(), String::new());
    let req = lambda_http::request::from_str(&event("dashboard.json").to_string()).unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let cookie = resp.headers().get("set-cookie").unwrap().to_str().unwrap().to_owned();
    assert!(cookie.starts_with("__Host-ctn_dashboard_login=") && cookie.contains("Secure"), "{cookie}");
    let html = String::from_utf8(resp.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    assert!(html.contains("action=\"https://abcdef1234.execute-api.eu-west-1.amazonaws.com/prod/dashboard/login\""), "{html}");

    let demo = TenantId::new("demo").unwrap();
    let key = s
        .admin
        .create_key(services::admin::KeyRequest {
            tenant: demo,
            scopes: domain::principal::Scopes::parse("tenant:read").unwrap(),
            principal: None,
            teams: vec![],
            projects: vec![],
        })
        .await
        .unwrap()
        .token;
    let text = event("dashboard-stats.json").to_string().replace("Bearer KEY", &format!("Bearer {key}"));
    let resp = app.clone().oneshot(lambda_http::request::from_str(&text).unwrap()).await.unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!((v["tenant"].as_str(), v["entities"].as_u64()), (Some("demo"), Some(1)), "{v}");
    let resp = app.oneshot(lambda_http::request::from_str(&event("dashboard-stats.json").to_string()).unwrap()).await.unwrap();
    assert_eq!(resp.status(), 401);
}
