//! The approver API through the router (SPEC §6.4): the waiting list with factors,
//! reasons and the conflicting entry; approve → active (superseding what it
//! contradicts); reject → rejected with the reason; and bad decisions refused with no
//! side effect: twice (409), a rejected proposal (409), no reason (400), no scope (403),
//! an unknown id (404). A proposal over the size limit is refused at creation, naming
//! the field and its limit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use axum::body::Body;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{Id, TenantId};
use http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

async fn call(app: &gateway::App, key: &str, method: &str, uri: &str, body: Option<Value>) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "localhost")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

use common::key;

async fn propose(app: &gateway::App, agent: &str, title: &str, body: &str, kind: &str) -> Value {
    let v = common::rpc(
        app,
        agent,
        "tools/call",
        json!({"name": "memory.propose", "arguments": {"title": title, "body": body, "kind": kind}}),
    )
    .await;
    assert_ne!(v["result"]["isError"], true, "{v}");
    v["result"]["structuredContent"]["proposal"].clone()
}

#[tokio::test]
async fn approvers_decide_through_the_api_and_bad_decisions_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::services(dir.path());
    let app = common::app(&s, "http://localhost");
    let t = TenantId::new("gov").unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let agent = key(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
    let approver = key(&s, &t, "approvals:decide tenant:read").await;

    // An active decision (auto-approved), then a proposal contradicting it, and one to reject.
    let first = propose(&app, &agent, "Renewal discount cap",
        "Renewal discounts for enterprise accounts are capped at 10 percent of the account ARR, approved by the CFO in the 2026 pricing review.", "decision").await;
    let waiting_a = propose(
        &app,
        &agent,
        "Onboarding kickoff owner",
        "Maybe the onboarding kickoff should be run by the account owner rather than support.",
        "pattern",
    )
    .await;
    assert_eq!(waiting_a["state"], "awaiting_approval", "{waiting_a}");
    let waiting_b =
        propose(&app, &agent, "Support hours", "Maybe support could answer on weekends too, perhaps from a rota.", "pattern")
            .await;
    assert_eq!(waiting_b["state"], "awaiting_approval", "{waiting_b}");

    // Only approvers see the queue; it carries the factors and reasons.
    let (status, _) = call(&app, &agent, "GET", "/v1/approvals", None).await;
    assert_eq!(status, 403);
    let (status, list) = call(&app, &approver, "GET", "/v1/approvals", None).await;
    assert_eq!(status, 200, "{list}");
    let items = list["approvals"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{list}");
    for f in ["confidence", "relevance", "risk", "conflict", "quality", "total"] {
        assert!(items[0]["proposal"]["score"][f].is_number(), "{f}: {list}");
    }
    assert!(!items[0]["proposal"]["score"]["reasons"].as_array().unwrap().is_empty());
    let _ = first;

    // Reject without a reason: 400, nothing changes.
    let a = waiting_a["id"].as_str().unwrap();
    let b = waiting_b["id"].as_str().unwrap();
    let (status, v) = call(&app, &approver, "POST", &format!("/v1/approvals/{b}/reject"), Some(json!({}))).await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = call(&app, &approver, "POST", &format!("/v1/approvals/{b}/reject"), Some(json!({"reason": "   "}))).await;
    assert_eq!(status, 400, "{v}");
    // Unknown fields, unknown ids, no scope.
    let (status, _) = call(&app, &approver, "POST", &format!("/v1/approvals/{a}/approve"), Some(json!({"force": true}))).await;
    assert_eq!(status, 400);
    let (status, _) = call(&app, &approver, "POST", "/v1/approvals/nope/approve", Some(json!({}))).await;
    assert_eq!(status, 404);
    let (status, _) = call(&app, &agent, "POST", &format!("/v1/approvals/{a}/approve"), Some(json!({}))).await;
    assert_eq!(status, 403);
    let (_, list) = call(&app, &approver, "GET", "/v1/approvals", None).await;
    assert_eq!(list["approvals"].as_array().unwrap().len(), 2, "nothing decided yet");

    // Approve one, reject the other with a reason.
    let (status, v) =
        call(&app, &approver, "POST", &format!("/v1/approvals/{a}/approve"), Some(json!({"reason": "agreed in the CS sync"})))
            .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["proposal"]["state"], "written");
    let (status, v) = call(
        &app,
        &approver,
        "POST",
        &format!("/v1/approvals/{b}/reject"),
        Some(json!({"reason": "no weekend staffing budget"})),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["proposal"]["state"].as_str(), v["proposal"]["decision_reason"].as_str()),
        (Some("rejected"), Some("no weekend staffing budget"))
    );

    // Deciding again, or deciding the rejected one: 409, and nothing moves.
    let (status, v) =
        call(&app, &approver, "POST", &format!("/v1/approvals/{a}/reject"), Some(json!({"reason": "changed my mind"}))).await;
    assert_eq!(status, 409, "{v}");
    let (status, _) = call(&app, &approver, "POST", &format!("/v1/approvals/{b}/approve"), Some(json!({}))).await;
    assert_eq!(status, 409);
    let status_of = |id: &str| {
        let id = Id::new(id).unwrap();
        let s = s.clone();
        let t = t.clone();
        async move { ports::records::ProposalStore::get_proposal(&s.backend.records, &t, &id).await.unwrap().unwrap() }
    };
    assert_eq!(status_of(a).await.state.as_str(), "written");
    let rb = status_of(b).await;
    assert_eq!((rb.state.as_str(), rb.decision_reason.as_deref()), ("rejected", Some("no weekend staffing budget")));
    let (_, list) = call(&app, &approver, "GET", "/v1/approvals", None).await;
    assert!(list["approvals"].as_array().unwrap().is_empty());

    // The approved entry is org truth now, found by search.
    let found = common::rpc(
        &app,
        &agent,
        "tools/call",
        json!({"name": "memory.search_org", "arguments": {"query": "onboarding kickoff owner"}}),
    )
    .await;
    assert_eq!(found["result"]["structuredContent"]["entries"][0]["title"], "Onboarding kickoff owner", "{found}");
    // Written entries are indexed and proven retrievable (readback) before they count.
    let id = found["result"]["structuredContent"]["entries"][0]["id"].as_str().unwrap();
    let read = common::rpc(&app, &agent, "tools/call", json!({"name": "memory.read_org", "arguments": {"id": id}})).await;
    let v = &read["result"]["structuredContent"]["verification"];
    assert_eq!((v["verified"].as_bool(), v["kind"].as_str()), (Some(true), Some("memory")), "{read}");

    // A proposal over the size limit: refused by its schema (as an MCP tool error), the
    // field and the limit named, nothing stored.
    let v = common::rpc(
        &app,
        &agent,
        "tools/call",
        json!({"name": "memory.propose", "arguments": {"title": "big", "body": "x".repeat(16 * 1024 + 1), "kind": "learning"}}),
    )
    .await;
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert_eq!(v["result"]["structuredContent"]["code"], "INVALID_REQUEST", "{v}");
    assert_eq!(v["result"]["structuredContent"]["field_errors"][0]["field"], "body", "{v}");
    assert!(v["result"]["structuredContent"]["message"].as_str().unwrap().contains("at most 16384 characters"), "{v}");
}
