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
    let listed: Vec<&str> = mcp::tools::all().filter(|t| agent.toolsets.contains(t.toolset())).map(|t| t.name()).collect();
    assert!(listed.contains(&"engineering_gate_status") && listed.contains(&"engineering_gate_request"), "{listed:?}");
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

    // An agent's request never overturns a person's block: it gets the block and its reason.
    s.gates
        .set(&approver, GateSet { reason: Some("code freeze".into()), ..set(ns, "hotfix", GateStatus::Blocked, false, None) })
        .await
        .unwrap();
    let (err, out) =
        mcp(&s, &agent, "engineering.gate_request", json!({"namespace": ns, "action": "hotfix", "reason": "urgent"})).await;
    assert!(!err, "{out}");
    assert_eq!(out["gate"]["status"], "blocked");
    assert!(out["note"].as_str().unwrap().contains("code freeze"), "{out}");

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

// ---- engineering records ------------------------------------------------------------

/// A record of each kind, each with a word of its own to search for.
fn examples() -> Vec<Value> {
    vec![
        json!({"kind": "task", "title": "Fix the quokka login redirect", "status": "todo", "priority": "high", "assignee": "ada"}),
        json!({"kind": "note", "text": "The narwhal staging box reboots at noon"}),
        json!({"kind": "summary", "text": "Session: moved the pangolin importer to streaming"}),
        json!({"kind": "handoff", "text": "Next: finish the axolotl migration, tests in db/", "to": "bob"}),
        json!({"kind": "adr", "title": "Use okapi queues for jobs", "status": "proposed", "context": "Cron is flaky",
               "decision": "Jobs go through a queue", "consequences": "One more service"}),
        json!({"kind": "snippet", "title": "Retry with ibex backoff", "language": "rust", "code": "for i in 0..5 { sleep(1 << i) }"}),
        json!({"kind": "error_fix", "signature": "tapir: connection refused on port 5432", "cause": "the database is not running",
               "fix": "start it with docker compose up db", "files": ["docker-compose.yml"]}),
        json!({"kind": "tech_debt", "area": "billing", "description": "The wombat invoice code is copy-pasted three times",
               "severity": "medium", "effort": "small", "status": "open"}),
        json!({"kind": "checklist", "pr": "482", "items": ["[ ] lemur docs updated"]}),
        json!({"kind": "change", "summary": "Renamed the gecko module", "files": ["src/gecko.rs"], "commit": "a1b2c3d"}),
        json!({"kind": "pinned_file", "path": "src/marmot/auth.rs", "why": "Every login path goes through it"}),
        json!({"kind": "environment", "name": "ci-linux", "fingerprint": {"os": "debian 12", "rust": "1.95"}, "notes": "the jackal runner"}),
        json!({"kind": "milestone", "title": "Beta of the heron app", "due": "2026-03-01", "status": "planned"}),
        json!({"kind": "workspace", "name": "Login work with the ocelot flag", "items": []}),
    ]
}

/// The word each example holds for the search.
fn word(v: &Value) -> &'static str {
    [
        "quokka", "narwhal", "pangolin", "axolotl", "okapi", "ibex", "tapir", "wombat", "lemur", "gecko", "marmot", "jackal",
        "heron", "ocelot",
    ][examples().iter().position(|e| e == v).unwrap()]
}

async fn tool(s: &Services, c: &CallerContext, name: &str, args: Value) -> Value {
    let (err, out) = mcp(s, c, name, args.clone()).await;
    assert!(!err, "{name} {args}: {out}");
    out
}

async fn records(s: Services, clock: Arc<ManualClock>) {
    let t = tenant(&s, "eng").await;
    let mut ada = continuity_tests::caller_in(&s, &t, AGENT, &[], &["web"]).await;
    ada.toolsets = Toolsets::parse("canonical,engineering").unwrap();
    let mut other_project = continuity_tests::caller_in(&s, &t, AGENT, &[], &["api"]).await;
    other_project.toolsets = ada.toolsets.clone();

    let mut ids = Vec::new();
    for example in examples() {
        let kind = example["kind"].as_str().unwrap().to_owned();
        // Create.
        let out = tool(&s, &ada, "engineering.save", json!({"record": example})).await;
        let r = &out["record"];
        let id = r["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with(&format!("{kind}.")), "{id}");
        assert_eq!((r["project"].as_str(), r["version"].as_u64()), (Some("web"), Some(1)));
        assert_eq!(r["created_by"], ada.principal.as_str());
        assert_eq!(r["record"]["kind"], kind.as_str());
        // Listed under its kind.
        let listed = tool(&s, &ada, "engineering.list", json!({"kind": kind})).await;
        assert_eq!(listed["records"][0]["id"], id.as_str(), "{kind}: {listed}");
        // Found by search, in the project's scope.
        let found = tool(&s, &ada, "memory.search", json!({"query": word(&example), "scope": "project:web"})).await;
        let hit = found["results"].as_array().unwrap().iter().find(|h| h["id"] == id.as_str());
        assert!(hit.is_some(), "{kind}: memory.search found {found}");
        assert_eq!(hit.unwrap()["kind"], "engineering");
        // Updated under its version: the new text is what is found.
        let mut changed = example.clone();
        let text_field = ["title", "text", "summary", "why", "name", "description", "signature"]
            .into_iter()
            .find(|f| changed.get(*f).is_some_and(Value::is_string))
            .unwrap_or("pr");
        changed[text_field] = json!(format!("{} and the capybara", changed[text_field].as_str().unwrap()));
        let out = tool(&s, &ada, "engineering.save", json!({"id": id, "expected_version": 1, "record": changed})).await;
        assert_eq!(out["record"]["version"], 2, "{kind}");
        let (err, stale) = mcp(&s, &ada, "engineering.save", json!({"id": id, "expected_version": 1, "record": changed})).await;
        assert!(err && stale["code"] == "CONFLICT", "{kind}: a stale update is refused: {stale}");
        let got = tool(&s, &ada, "engineering.get", json!({"id": id})).await;
        assert_eq!(got["record"]["record"][text_field], changed[text_field], "{kind}");
        // Another project's member sees none of it.
        let (err, denied) = mcp(&s, &other_project, "engineering.get", json!({"id": id, "project": "web"})).await;
        assert!(err && denied["code"] == "FORBIDDEN", "{kind}: {denied}");
        let theirs = tool(&s, &other_project, "memory.search", json!({"query": word(&example)})).await;
        assert!(theirs["results"].as_array().unwrap().iter().all(|h| h["id"] != id.as_str()), "{kind}: {theirs}");
        ids.push(id);
    }
    let found = tool(&s, &ada, "memory.search", json!({"query": "capybara", "type": "engineering"})).await;
    assert!(found["results"].as_array().unwrap().len() >= 10, "updated text is searchable: {found}");

    // An id of another kind, an unknown one, and a body that does not parse are refused.
    let (err, out) = mcp(&s, &ada, "engineering.save", json!({"id": ids[0], "record": examples()[1]})).await;
    assert!(err && out["code"] == "INVALID_REQUEST", "{out}");
    let (err, out) = mcp(&s, &ada, "engineering.get", json!({"id": "task.nope"})).await;
    assert!(err && out["code"] == "NOT_FOUND", "{out}");
    let (err, out) = mcp(
        &s,
        &ada,
        "engineering.save",
        json!({"record": {"kind": "task", "title": "x", "status": "later", "priority": "high"}}),
    )
    .await;
    assert!(err && out["code"] == "INVALID_REQUEST", "{out}");

    // Open tasks only.
    tool(
        &s,
        &ada,
        "engineering.save",
        json!({"record": {"kind": "task", "title": "Done already", "status": "done", "priority": "low"}}),
    )
    .await;
    let open = tool(&s, &ada, "engineering.list", json!({"kind": "task", "status": "todo"})).await;
    assert_eq!(open["count"], 1, "{open}");

    // session.get_context for the project: the latest handoff and summary, the open tasks.
    clock.advance(1_000);
    let handoff = tool(
        &s,
        &ada,
        "engineering.save",
        json!({"record": {"kind": "handoff", "text": "Newest: ship the login fix", "to": "bob"}}),
    )
    .await;
    let ctx = tool(&s, &ada, "session.get_context", json!({"project": "web"})).await;
    assert_eq!(ctx["project"]["latest_handoff"]["id"], handoff["record"]["id"], "{ctx}");
    assert_eq!(ctx["project"]["latest_summary"]["id"], ids[2].as_str());
    let open_tasks: Vec<&str> =
        ctx["project"]["open_tasks"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(open_tasks, [ids[0].as_str()], "the done task is left out");
    let (err, out) = mcp(&s, &other_project, "session.get_context", json!({"project": "web"})).await;
    assert!(err && out["code"] == "FORBIDDEN", "{out}");

    // Sticky notes: an unpinned one is gone 24 h after its last update; a pinned one stays.
    let pinned = tool(
        &s,
        &ada,
        "engineering.save",
        json!({"record": {"kind": "note", "text": "Pinned: deploys need the VPN", "pinned": true}}),
    )
    .await;
    clock.advance(23 * 3_600_000);
    let notes = tool(&s, &ada, "engineering.list", json!({"kind": "note"})).await;
    assert_eq!(notes["count"], 2, "both alive at 23 h: {notes}");
    clock.advance(2 * 3_600_000);
    let notes = tool(&s, &ada, "engineering.list", json!({"kind": "note"})).await;
    assert_eq!(notes["count"], 1, "the unpinned note is gone at 25 h: {notes}");
    assert_eq!(notes["records"][0]["id"], pinned["record"]["id"]);
    let report = s.maintenance.run().await.unwrap();
    assert!(report.notes_expired >= 1, "{report:?}");
    let narwhal = tool(&s, &ada, "memory.search", json!({"query": "narwhal", "scope": "project:web"})).await;
    assert!(
        narwhal["results"].as_array().unwrap().iter().all(|h| h["id"] != ids[1].as_str()),
        "an expired note is not found: {narwhal}"
    );

    // ADRs: an agent's acceptance goes to governance as an org decision; once written, the
    // ADR is accepted and points at it. One that supersedes another supersedes its org
    // decision too (a person decides), and the lineage shows both ways.
    let adr_id = &ids[4];
    let mut person =
        continuity_tests::caller_in(&s, &t, "mcp:tools tenant:read memory:read memory:write approvals:decide", &[], &["web"])
            .await;
    person.toolsets = ada.toolsets.clone();
    let accept = |title: &str, decision: &str, supersedes: Option<&str>| {
        let mut v = json!({"kind": "adr", "title": title, "status": "accepted",
            "context": "Nightly cron jobs failed silently three times this quarter and nobody noticed until customers did.",
            "decision": decision,
            "consequences": "Every background job is retried, visible on the dashboard and alerts the on-call engineer on failure."});
        if let Some(old) = supersedes {
            v["supersedes"] = json!(old);
        }
        v
    };
    let decided = |out: Value| {
        let (s, person) = (s.clone(), person.clone());
        async move {
            let p = &out["proposal"];
            let id = domain::Id::new(p["id"].as_str().unwrap()).unwrap();
            if p["state"] == "awaiting_approval" {
                s.governance.decide(&person, &id, true, Some("Agreed in the design review".into())).await.unwrap();
            } else {
                assert_eq!(p["state"], "written", "triage wrote it or a person must: {out}");
            }
            id
        }
    };
    let out = tool(
        &s,
        &ada,
        "engineering.save",
        json!({"id": adr_id, "record": accept("Use okapi queues for jobs",
        "All background jobs run through the okapi work queue instead of cron, with retries and alerts.", None)}),
    )
    .await;
    assert!(out["proposal"]["id"].is_string(), "an agent's acceptance is a proposal: {out}");
    let first = decided(out).await;
    let old = tool(&s, &ada, "engineering.get", json!({"id": adr_id})).await;
    assert_eq!(old["record"]["record"]["status"], "accepted", "{old}");
    assert_eq!(old["record"]["record"]["accepted_as"], first.as_str());
    let entry = ports::records::MemoryStore::get_memory(&s.backend.records, &t, &first).await.unwrap().unwrap();
    assert_eq!((entry.state.clone(), entry.kind.as_str()), (domain::memory::GovernanceState::Active, "decision"));
    let newer = tool(
        &s,
        &ada,
        "engineering.save",
        json!({"record": accept("Use the managed okapi service",
        "All background jobs run through the managed okapi queue service instead of our own queue cluster.", Some(adr_id))}),
    )
    .await;
    assert_eq!(newer["proposal"]["state"], "awaiting_approval", "replacing a decision always waits for a person: {newer}");
    let newer_id = newer["record"]["id"].as_str().unwrap().to_owned();
    let second = decided(newer).await;
    let old = tool(&s, &ada, "engineering.get", json!({"id": adr_id})).await;
    assert_eq!(old["record"]["record"]["status"], "superseded");
    assert_eq!(old["record"]["record"]["superseded_by"], newer_id.as_str());
    let new = tool(&s, &ada, "engineering.get", json!({"id": newer_id})).await;
    assert_eq!(new["record"]["record"]["status"], "accepted");
    assert_eq!(new["record"]["record"]["supersedes"], adr_id.as_str());
    let entry = ports::records::MemoryStore::get_memory(&s.backend.records, &t, &second).await.unwrap().unwrap();
    assert_eq!(entry.lineage.supersedes.as_ref(), Some(&first), "the org decisions' lineage");
    let gone = ports::records::MemoryStore::get_memory(&s.backend.records, &t, &first).await.unwrap().unwrap();
    assert_eq!(gone.state, domain::memory::GovernanceState::Superseded { by: second.clone() });
    // What governance approved is what gets accepted: an ADR edited after its proposal
    // stays proposed (the approved org decision stands).
    let third = tool(
        &s,
        &ada,
        "engineering.save",
        json!({"record": accept("Use okapi for cron too",
        "Scheduled jobs also run through the managed okapi queue service, retiring the cron hosts.", Some(&newer_id))}),
    )
    .await;
    assert_eq!(third["proposal"]["state"], "awaiting_approval", "{third}");
    let third_id = third["record"]["id"].as_str().unwrap().to_owned();
    let mut edited = third["record"]["record"].clone();
    edited["decision"] = json!("Turn off authentication on /admin.");
    tool(&s, &ada, "engineering.save", json!({"id": third_id, "record": edited})).await;
    decided(third).await;
    let third = tool(&s, &ada, "engineering.get", json!({"id": third_id})).await;
    assert_eq!(third["record"]["record"]["status"], "proposed", "an edited ADR is not accepted: {third}");
    assert_eq!(tool(&s, &ada, "engineering.get", json!({"id": newer_id})).await["record"]["record"]["status"], "accepted");
    // An accepted ADR is history for an agent: a new ADR supersedes it. None supersedes itself.
    let (err, out) = mcp(&s, &ada, "engineering.save", json!({"id": newer_id, "record": new["record"]["record"]})).await;
    assert!(err && out["code"] == "FORBIDDEN", "{out}");
    let mut own = third["record"]["record"].clone();
    own["supersedes"] = json!(third_id);
    let (err, out) = mcp(&s, &ada, "engineering.save", json!({"id": third_id, "record": own})).await;
    assert!(err && out["code"] == "INVALID_REQUEST", "{out}");

    // A person may also accept directly; an agent may not supersede by hand.
    let direct = tool(
        &s,
        &ada,
        "engineering.save",
        json!({"record": {"kind": "adr", "title": "Tabs", "status": "proposed",
        "context": "c", "decision": "d", "consequences": "e"}}),
    )
    .await;
    let mut accepted = direct["record"]["record"].clone();
    accepted["status"] = json!("accepted");
    let out = tool(&s, &person, "engineering.save", json!({"id": direct["record"]["id"], "record": accepted})).await;
    assert_eq!((out["record"]["record"]["status"].as_str(), out.get("proposal")), (Some("accepted"), None));
    accepted["status"] = json!("superseded");
    let (err, out) = mcp(&s, &ada, "engineering.save", json!({"id": direct["record"]["id"], "record": accepted})).await;
    assert!(err && out["code"] == "FORBIDDEN", "{out}");

    // An error fix found from a differently worded error.
    let fixes =
        tool(&s, &ada, "engineering.find_fix", json!({"error": "psql: could not connect: Connection refused (port 5432)"})).await;
    assert_eq!(fixes["fixes"][0]["id"], ids[6].as_str(), "{fixes}");
    let none = tool(&s, &other_project, "engineering.find_fix", json!({"error": "connection refused 5432"})).await;
    assert!(none["fixes"].as_array().unwrap().is_empty(), "another project's fixes stay there: {none}");

    // A workspace restores what it names, in order.
    let ws = tool(
        &s,
        &ada,
        "engineering.save",
        json!({"record": {"kind": "workspace", "name": "login", "items": [ids[0], ids[10], pinned["record"]["id"]]}}),
    )
    .await;
    let restored = tool(&s, &ada, "engineering.restore_workspace", json!({"id": ws["record"]["id"]})).await;
    let got: Vec<&str> = restored["records"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(got, [ids[0].as_str(), ids[10].as_str(), pinned["record"]["id"].as_str().unwrap()]);

    // merge_entities (graph toolset): duplicates folded into one, relations re-pointed.
    let mut grapher = ada.clone();
    grapher.toolsets = Toolsets::parse("canonical,graph,engineering").unwrap();
    let g = json!({"scope": "project:web"});
    let with = |extra: Value| {
        let mut v = g.clone();
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    };
    tool(
        &s,
        &grapher,
        "create_entities",
        with(json!({"entities": [
        {"name": "Bob", "entityType": "person", "observations": ["likes tea"]},
        {"name": "Robert Smith", "entityType": "person", "observations": ["CTO", "likes tea"]},
        {"name": "Acme", "entityType": "company", "observations": []}]})),
    )
    .await;
    tool(
        &s,
        &grapher,
        "create_relations",
        with(json!({"relations": [
        {"from": "Bob", "to": "Acme", "relationType": "works_at"},
        {"from": "Robert Smith", "to": "Acme", "relationType": "works_at"},
        {"from": "Bob", "to": "Robert Smith", "relationType": "same_as"}]})),
    )
    .await;
    let merged = tool(&s, &grapher, "merge_entities", with(json!({"sourceNames": ["Bob"], "targetName": "Robert Smith"}))).await;
    assert_eq!(merged["result"]["entity"]["observations"], json!(["CTO", "likes tea"]), "{merged}");
    let graph = tool(&s, &grapher, "read_graph", g.clone()).await;
    let names: Vec<&str> = graph["entities"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 2, "{graph}");
    assert!(!names.contains(&"Bob"));
    assert_eq!(
        graph["relations"],
        json!([{"from": "Robert Smith", "to": "Acme", "relationType": "works_at"}]),
        "re-pointed once, the self-loop dropped"
    );
    let (err, out) = mcp(&s, &grapher, "merge_entities", with(json!({"sourceNames": ["Nobody"], "targetName": "Acme"}))).await;
    assert!(err && out["code"] == "NOT_FOUND", "{out}");

    // Another tenant's caller with the same project name sees nothing.
    let other = tenant(&s, "engb").await;
    let mut stranger = continuity_tests::caller_in(&s, &other, AGENT, &[], &["web"]).await;
    stranger.toolsets = ada.toolsets.clone();
    let theirs = tool(&s, &stranger, "engineering.list", json!({})).await;
    assert_eq!(theirs["count"], 0, "{theirs}");
    let (err, out) = mcp(&s, &stranger, "engineering.get", json!({"id": ids[0]})).await;
    assert!(err && out["code"] == "NOT_FOUND", "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engineering_records_on_the_embedded_backend() {
    let clock = Arc::new(ManualClock::new(START));
    let home = tempfile::tempdir().unwrap();
    let backend =
        store_embedded::open_backend_with(home.path(), clock.clone(), Arc::new(ports::search::HashingEmbedder::new(384)))
            .unwrap();
    records(Services::new(backend), clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engineering_records_on_the_aws_backend() {
    let clock = Arc::new(ManualClock::new(START));
    let backend = continuity_tests::aws::backend_in_own_table("eng").await;
    records(Services::new(Backend { clock: clock.clone(), ..backend }), clock).await;
}
