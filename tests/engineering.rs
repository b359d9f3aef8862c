//! The `engineering` toolset and the gate system (issue #18) on both backends, through
//! the services every edge calls and through the MCP tools: a gate unknown, requested
//! by an agent (pending, listed for approvers), refused to the agent and to the person
//! who requested it, authorized once and spent by exactly one of many racing verifies,
//! expired by the clock (and stored as blocked by the maintenance job), blocked with a
//! reason, and invisible to another tenant.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use continuity_tests::caller;
use domain::gate::GateStatus;
use domain::principal::{CallerContext, Toolsets};
use domain::tenant::{Department, Industry, PlanTier};
use domain::{ErrorCode, PageRequest, TenantId};
use ports::Backend;
use ports::clock::ManualClock;
use serde_json::{Value, json};
use services::Services;
use services::gates::{GateSet, Verdict};

/// 2026-01-01T00:00:00Z.
const START: i64 = 1_767_225_600_000;
const AGENT: &str = "mcp:tools tenant:read memory:read memory:write";
const APPROVER: &str = "approvals:decide tenant:read";

async fn tenant(s: &Services, label: &str) -> TenantId {
    let t = contract::fresh_tenant(label);
    s.admin.create_tenant(t.clone(), PlanTier::Starter, Department::Engineering, Industry::Saas).await.unwrap();
    t
}

fn set(namespace: &str, action: &str, status: GateStatus, once: bool, expires_in: Option<u64>) -> GateSet {
    GateSet {
        namespace: namespace.into(),
        action: action.into(),
        status,
        reason: Some("tests pass".into()),
        expires_in,
        consume_once: once,
    }
}

async fn mcp(s: &Services, c: &CallerContext, tool: &str, args: Value) -> (bool, Value) {
    let r = mcp::ContinuityMcp::new(s.clone()).call(c, tool, args.as_object().cloned()).await;
    (r.is_error == Some(true), r.structured_content.unwrap_or(Value::Null))
}

async fn gates(s: Services, clock: Arc<ManualClock>) {
    let t = tenant(&s, "gates").await;
    let mut agent = caller(&s, &t, AGENT).await;
    agent.toolsets = Toolsets::parse("canonical,engineering").unwrap();
    let approver = caller(&s, &t, APPROVER).await;
    let ns = "repo:acme/web";

    // Unknown until someone asks or sets it.
    let c = s.gates.verify(&agent, ns, "push", false).await.unwrap();
    assert_eq!((c.verdict, c.consumed), (Verdict::Unknown, false));

    // The agent sees the gate tools, and none that authorizes.
    let listed: Vec<&str> = mcp::tools::all().filter(|t| agent.toolsets.contains(t.toolset())).map(|t| t.name).collect();
    assert!(listed.contains(&"engineering.gate_status") && listed.contains(&"engineering.gate_request"), "{listed:?}");
    assert!(!listed.iter().any(|n| n.contains("authorize") || n.contains("gate_set")), "{listed:?}");

    // The agent asks through MCP: pending, and verifies are refused meanwhile.
    let (err, out) = mcp(
        &s,
        &agent,
        "engineering.gate_request",
        json!({"namespace": ns, "action": "push", "reason": "fix login; 212 tests pass"}),
    )
    .await;
    assert!(!err, "{out}");
    assert_eq!(out["gate"]["status"], "pending");
    assert!(out["note"].as_str().unwrap().contains("approvals console"));
    let c = s.gates.verify(&agent, ns, "push", true).await.unwrap();
    assert_eq!((c.verdict, c.consumed), (Verdict::Pending, false));
    let waiting = s.gates.waiting(&approver, 10).await.unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].requested_by.as_deref(), Some(agent.principal.as_str()));
    let (err, out) = mcp(&s, &agent, "engineering.gate_status", json!({"namespace": ns})).await;
    assert!(!err, "{out}");
    assert_eq!(out["gates"][0]["status"], "pending");

    // The agent cannot authorize: not with its own credential …
    let e = s.gates.set(&agent, set(ns, "push", GateStatus::Authorized, true, None)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    // … nor a person the gate was requested by, holding approvals:decide.
    let both = caller(&s, &t, "approvals:decide tenant:read memory:write").await;
    s.gates.request(&both, ns, "deploy", None, None).await.unwrap();
    let e = s.gates.set(&both, set(ns, "deploy", GateStatus::Authorized, false, None)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    assert!(e.message.contains("another person"), "{}", e.message);
    assert_eq!(s.gates.verify(&agent, ns, "deploy", false).await.unwrap().verdict, Verdict::Pending);

    // A person authorizes once: the next verify is told yes and spends it; then no.
    let g = s.gates.set(&approver, set(ns, "push", GateStatus::Authorized, true, Some(3600))).await.unwrap();
    assert_eq!((g.status, g.consume_once), (GateStatus::Authorized, true));
    assert!(s.gates.waiting(&approver, 10).await.unwrap().iter().all(|g| g.action != "push"));
    let c = s.gates.verify(&agent, ns, "push", false).await.unwrap();
    assert_eq!((c.verdict, c.consumed), (Verdict::Authorized, true), "a consume-once gate is spent without asking");
    let c = s.gates.verify(&agent, ns, "push", false).await.unwrap();
    assert_eq!(c.verdict, Verdict::Blocked);
    assert!(c.reason.contains("spent"), "{}", c.reason);

    // Racing verifies of one authorization: exactly one winner.
    s.gates.set(&approver, set(ns, "push", GateStatus::Authorized, false, None)).await.unwrap();
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let (s, agent) = (s.clone(), agent.clone());
            tokio::spawn(async move { s.gates.verify(&agent, ns, "push", true).await.unwrap() })
        })
        .collect();
    let mut verdicts = Vec::new();
    for r in racers {
        verdicts.push(r.await.unwrap());
    }
    let winners = verdicts.iter().filter(|c| c.verdict == Verdict::Authorized).count();
    assert_eq!(winners, 1, "{verdicts:?}");
    assert!(verdicts.iter().filter(|c| c.verdict != Verdict::Authorized).all(|c| c.verdict == Verdict::Blocked));

    // An authorization that lasts a minute: verified as often as asked, then expired.
    s.gates.set(&approver, set("env:prod", "deploy", GateStatus::Authorized, false, Some(60))).await.unwrap();
    for _ in 0..2 {
        let c = s.gates.verify(&agent, "env:prod", "deploy", false).await.unwrap();
        assert_eq!((c.verdict, c.consumed), (Verdict::Authorized, false));
    }
    clock.advance(61_000);
    let c = s.gates.verify(&agent, "env:prod", "deploy", false).await.unwrap();
    assert_eq!(c.verdict, Verdict::Blocked);
    assert!(c.reason.contains("expired"), "{}", c.reason);
    let listed = s.gates.list(&agent, Some(GateStatus::Blocked), &PageRequest::first(100)).await.unwrap();
    assert!(listed.items.iter().any(|g| g.namespace == "env:prod"), "an expired authorization lists as blocked");
    let expired = s.gates.expire(&t, 1_000).await.unwrap();
    assert_eq!(expired, 1, "the maintenance job stores it blocked");
    assert_eq!(s.gates.expire(&t, 1_000).await.unwrap(), 0, "once");
    let stored = ports::records::GateStore::get_gate(&s.backend.records, &t, "env:prod", "deploy").await.unwrap().unwrap();
    assert_eq!((stored.status, stored.set_by.as_str()), (GateStatus::Blocked, "maintenance"));

    // A request waits a week by default, then expires unanswered.
    clock.advance(8 * 86_400_000);
    assert_eq!(s.gates.verify(&agent, ns, "deploy", false).await.unwrap().verdict, Verdict::Blocked);
    assert!(s.gates.waiting(&approver, 10).await.unwrap().is_empty());

    // Blocked with a reason: verifies say why.
    s.gates
        .set(&approver, GateSet { reason: Some("release freeze".into()), ..set(ns, "tag", GateStatus::Blocked, false, None) })
        .await
        .unwrap();
    let c = s.gates.verify(&agent, ns, "tag", true).await.unwrap();
    assert_eq!((c.verdict, c.reason.as_str()), (Verdict::Blocked, "release freeze"));

    // Bad names are refused before the store.
    let e = s.gates.verify(&agent, "repo x", "push", false).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest);
    let (err, out) = mcp(&s, &agent, "engineering.gate_request", json!({"namespace": "a#b", "action": "push"})).await;
    assert!(err, "{out}");

    // Another tenant sees none of it.
    let other = tenant(&s, "gatesb").await;
    let stranger = caller(&s, &other, AGENT).await;
    assert_eq!(s.gates.verify(&stranger, ns, "push", false).await.unwrap().verdict, Verdict::Unknown);
    assert!(s.gates.list(&stranger, None, &PageRequest::first(100)).await.unwrap().items.is_empty());

    // Every verify and decision is in the audit ledger.
    let ledger = ports::records::AuditLog::list_audit(&s.backend.records, &t, &PageRequest::first(500)).await.unwrap().items;
    for action in ["gate.verify", "gate.set", "gate.request", "gate.expire"] {
        assert!(ledger.iter().any(|a| a.action == action), "{action} audited");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gates_on_the_embedded_backend() {
    let clock = Arc::new(ManualClock::new(START));
    let home = tempfile::tempdir().unwrap();
    let backend =
        store_embedded::open_backend_with(home.path(), clock.clone(), Arc::new(ports::search::HashingEmbedder::new(384)))
            .unwrap();
    gates(Services::new(backend), clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gates_on_the_aws_backend() {
    let clock = Arc::new(ManualClock::new(START));
    let backend = continuity_tests::aws::backend().await;
    gates(Services::new(Backend { clock: clock.clone(), ..backend }), clock).await;
}
