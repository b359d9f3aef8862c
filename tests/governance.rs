//! The governed memory loop's bands (SPEC §6) on both backends, through the MCP tools'
//! executor and the governance service: auto-approve and write, wait for a person and
//! be approved or rejected with a reason, reject below the bar, always reject a secret,
//! and send a contradiction to a person with a supersede suggestion whose approval
//! supersedes the old entry with lineage both ways.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use domain::memory::{GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType};
use domain::principal::CallerContext;
use domain::proposal::ProposalState;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{ErrorCode, Id, Timestamp};
use ports::records::{Expect, MemoryStore, ProposalStore};
use ports::{Backend, SystemClock};
use serde_json::{Value, json};
use services::Services;

use continuity_tests::caller;

async fn propose(s: &Services, c: &CallerContext, args: Value) -> Value {
    s.capabilities.execute(c, "memory.propose", args).await.unwrap().data["proposal"].clone()
}

async fn bands(backend: Backend) {
    let s = Services::new(backend.clone());
    let t = contract::fresh_tenant("gov");
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let agent = caller(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
    let approver = caller(&s, &t, "approvals:decide tenant:read").await;
    // An active org decision to contradict.
    let now = backend.clock.now();
    let old = MemoryEntry {
        tenant: t.clone(),
        id: Id::new("dec-renewal").unwrap(),
        memory_type: MemoryType::Org,
        scope: MemoryScope::Org,
        kind: "decision".into(),
        title: "Renewal discounts".into(),
        body: "Renewal discounts for enterprise accounts are capped at 10 percent of the account ARR.".into(),
        state: GovernanceState::Active,
        lineage: Lineage::default(),
        created_by: Id::new("cfo").unwrap(),
        created_at: Timestamp(now.0 - 1000),
        updated_at: Timestamp(now.0 - 1000),
        version: 0,
        occurred_at: None,
        expires_at: None,
        metadata: None,
    };
    backend.records.put_memory(&old, Expect::Absent).await.unwrap();
    // Indexed as the writer indexes every entry it activates: triage finds the entries
    // to compare with through the search index (a scan where there is none).
    s.search
        .index(services::search::IndexRequest {
            tenant: &t,
            scope: &old.scope,
            kind: ports::search::DocKind::Memory,
            doc: &old.id,
            title: &old.title,
            body: &old.body,
            at: now,
            occurred: None,
        })
        .await
        .unwrap();
    s.capabilities
        .execute(&agent, "memory.write_conversational", json!({"session": "qbr", "role": "user", "content": "notes"}))
        .await
        .unwrap();

    // ≥ 0.85: approved by triage, written, found by memory.search_org.
    let auto = propose(
        &s,
        &agent,
        json!({"title": "Health score review cadence", "kind": "decision", "session": "qbr",
               "body": "Customer success reviews every account health score weekly on Monday; accounts under 40 get an owner call within 2 days."}),
    )
    .await;
    assert_eq!(auto["state"], "written", "{auto}");
    assert!(auto["score"]["total"].as_f64().unwrap() >= 0.85, "{auto}");
    let found = s.capabilities.execute(&agent, "memory.search_org", json!({"query": "health score cadence"})).await.unwrap();
    assert_eq!(found.data["entries"][0]["title"], "Health score review cadence", "{}", found.data);

    // 0.60–0.84: waits for a person; approved → active.
    let wait = propose(
        &s,
        &agent,
        json!({"title": "Onboarding kickoff owner", "kind": "pattern",
               "body": "Maybe the onboarding kickoff should be run by the account owner rather than support."}),
    )
    .await;
    assert_eq!(wait["state"], "awaiting_approval", "{wait}");
    let total = wait["score"]["total"].as_f64().unwrap();
    assert!((0.60..0.85).contains(&total), "{total}");
    let id = Id::new(wait["id"].as_str().unwrap()).unwrap();
    // An agent can never decide: the scope is not grantable to it, and the tools have no way to.
    assert_eq!(s.governance.decide(&agent, &id, true, None).await.unwrap_err().code, ErrorCode::Forbidden);
    let decided = s.governance.decide(&approver, &id, true, Some("Owners know the account".into())).await.unwrap();
    assert_eq!(decided.state, ProposalState::Written);
    let org = backend.records.list_memory(&t, &MemoryScope::Org, &domain::PageRequest::first(50)).await.unwrap().items;
    assert!(org.iter().any(|m| m.title == "Onboarding kickoff owner" && m.state == GovernanceState::Active));
    assert_eq!(s.governance.decide(&approver, &id, true, None).await.unwrap_err().code, ErrorCode::Conflict, "decided once");

    // 0.60–0.84, rejected by the approver: kept with the reason.
    let wait2 = propose(
        &s,
        &agent,
        json!({"title": "Escalation channel", "kind": "pattern", "body": "Perhaps escalations should go to the shared support channel first."}),
    )
    .await;
    assert_eq!(wait2["state"], "awaiting_approval", "{wait2}");
    let id2 = Id::new(wait2["id"].as_str().unwrap()).unwrap();
    assert_eq!(
        s.governance.decide(&approver, &id2, false, None).await.unwrap_err().code,
        ErrorCode::InvalidRequest,
        "a rejection needs a reason"
    );
    let rejected = s.governance.decide(&approver, &id2, false, Some("Escalations go to the account owner".into())).await.unwrap();
    assert_eq!(rejected.state, ProposalState::Rejected);
    assert_eq!(rejected.decision_reason.as_deref(), Some("Escalations go to the account owner"));

    // < 0.60: rejected by triage with a reason.
    let low = propose(&s, &agent, json!({"title": "Stuff", "kind": "learning", "body": "maybe things, not sure"})).await;
    assert_eq!(low["state"], "rejected", "{low}");
    assert!(low["decision_reason"].as_str().unwrap().contains("below 0.60"), "{low}");

    // A secret: always rejected, whatever else it scores.
    let secret = propose(
        &s,
        &agent,
        json!({"title": "Billing export credentials", "kind": "decision", "session": "qbr",
               "body": "The weekly billing export to the account health score job uses AKIAIOSFODNN7EXAMPLE on Monday."}),
    )
    .await;
    assert_eq!(secret["state"], "rejected", "{secret}");
    assert!(secret["decision_reason"].as_str().unwrap().contains("AWS access key"), "{secret}");
    assert!(!secret["decision_reason"].as_str().unwrap().contains("AKIA"), "the secret is not echoed");

    // A contradiction of an active entry: a person decides, with a supersede suggestion;
    // approving supersedes the old entry with a link both ways.
    let contra = propose(
        &s,
        &agent,
        json!({"title": "Renewal discounts", "kind": "decision", "session": "qbr",
               "body": "Renewal discounts for enterprise accounts are capped at 15 percent of the account ARR."}),
    )
    .await;
    assert_eq!(contra["state"], "awaiting_approval", "{contra}");
    let cid = Id::new(contra["id"].as_str().unwrap()).unwrap();
    let stored = backend.records.get_proposal(&t, &cid).await.unwrap().unwrap();
    assert_eq!(stored.suggested_supersede.as_ref().map(Id::as_str), Some("dec-renewal"));
    assert!(stored.score.unwrap().reasons.iter().any(|r| r.contains("contradicts active entry dec-renewal")));
    s.governance.decide(&approver, &cid, true, Some("CFO approved 15%".into())).await.unwrap();
    let old_now = backend.records.get_memory(&t, &old.id).await.unwrap().unwrap();
    let GovernanceState::Superseded { by } = &old_now.state else { panic!("old entry not superseded: {old_now:?}") };
    let new = backend.records.get_memory(&t, by).await.unwrap().unwrap();
    assert_eq!(new.state, GovernanceState::Active);
    assert_eq!(new.lineage.supersedes.as_ref(), Some(&old.id), "lineage both ways");
    assert_eq!(new.lineage.proposal.as_ref(), Some(&cid));
}

/// Per-tenant weights and thresholds (SPEC §6.2): the same proposal that another tenant
/// auto-approves waits for a person under a stricter bar; an inconsistent policy is
/// refused and nothing changes.
async fn tenant_policy(backend: Backend) {
    let s = Services::new(backend);
    let body = json!({"title": "Health score review cadence", "kind": "decision",
        "body": "Customer success reviews every account health score weekly on Monday; accounts under 40 get an owner call within 2 days."});
    let mut states = Vec::new();
    for strict in [false, true] {
        let t = contract::fresh_tenant("policy");
        s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
        if strict {
            let bad = domain::tenant::TriagePolicy { weights: [0.5, 0.5, 0.5, 0.0, 0.0], ..Default::default() };
            let e = s
                .admin
                .set_tenant(&t, services::admin::TenantChanges { triage: Some(bad), ..Default::default() })
                .await
                .unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidRequest);
            assert!(s.admin.show_tenant(&t).await.unwrap().triage.is_none(), "nothing changed");
            let policy = domain::tenant::TriagePolicy { auto_approve: 0.99, reject_below: 0.5, ..Default::default() };
            s.admin.set_tenant(&t, services::admin::TenantChanges { triage: Some(policy), ..Default::default() }).await.unwrap();
        }
        let agent = caller(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
        s.capabilities
            .execute(&agent, "memory.write_conversational", json!({"session": "qbr", "role": "user", "content": "notes"}))
            .await
            .unwrap();
        let mut args = body.clone();
        args["session"] = json!("qbr");
        let p = propose(&s, &agent, args).await;
        states.push(p["state"].as_str().unwrap().to_owned());
    }
    assert_eq!(states, ["written", "awaiting_approval"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_policy_embedded() {
    let dir = tempfile::tempdir().unwrap();
    tenant_policy(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_policy_aws() {
    tenant_policy(continuity_tests::aws::backend().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded() {
    let dir = tempfile::tempdir().unwrap();
    bands(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws() {
    bands(continuity_tests::aws::backend().await).await;
}

/// What a step of the property test does.
#[derive(Debug, Clone)]
enum Step {
    Propose(usize),
    /// An approver decides the n-th proposal made so far (if it still waits).
    Decide(usize, bool),
    /// The agent tries to decide the n-th proposal.
    AgentDecides(usize),
}

const TEXTS: [(&str, &str, bool); 6] = [
    (
        "Health score review cadence",
        "Customer success reviews every account health score weekly on Monday; accounts under 40 get an owner call within 2 days.",
        true,
    ),
    ("Onboarding kickoff owner", "Maybe the onboarding kickoff should be run by the account owner rather than support.", false),
    ("Stuff", "maybe things, not sure", false),
    ("Billing export credentials", "The export uses AKIAIOSFODNN7EXAMPLE on Monday for the account health score job.", true),
    ("Renewal discounts", "Renewal discounts for enterprise accounts are capped at 15 percent of the account ARR.", true),
    ("Escalation channel", "Perhaps escalations should go to the shared support channel first.", false),
];

fn steps() -> impl proptest::strategy::Strategy<Value = Vec<Step>> {
    use proptest::prelude::*;
    prop::collection::vec(
        prop_oneof![
            (0..TEXTS.len()).prop_map(Step::Propose),
            (0..8usize, any::<bool>()).prop_map(|(i, a)| Step::Decide(i, a)),
            (0..8usize).prop_map(Step::AgentDecides),
        ],
        1..14,
    )
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 24, ..proptest::test_runner::Config::default() })]

    /// Over random sequences of proposals and decisions: every active org entry has an
    /// approving decision (by triage or an approver) in the ledger, and no agent call
    /// ever changes a decision.
    #[test]
    fn every_active_entry_has_an_approving_decision(seq in steps()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let dir = tempfile::tempdir().unwrap();
            let backend = store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap();
            let s = Services::new(backend.clone());
            let t = contract::fresh_tenant("prop");
            s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
            let agent = caller(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
            let approver = caller(&s, &t, "approvals:decide tenant:read").await;
            s.capabilities.execute(&agent, "memory.write_conversational", json!({"session": "s", "role": "user", "content": "x"})).await.unwrap();
            let mut made: Vec<Id> = Vec::new();
            for step in seq {
                match step {
                    Step::Propose(i) => {
                        let (title, body, with_session) = TEXTS[i];
                        let mut args = json!({"title": title, "body": body, "kind": "decision"});
                        if with_session {
                            args["session"] = "s".into();
                        }
                        let p = propose(&s, &agent, args).await;
                        made.push(Id::new(p["id"].as_str().unwrap()).unwrap());
                    }
                    Step::Decide(n, approve) => {
                        if let Some(id) = made.get(n) {
                            let before = backend.records.get_proposal(&t, id).await.unwrap().unwrap();
                            let r = s.governance.decide(&approver, id, approve, Some("reviewed".into())).await;
                            match before.state {
                                ProposalState::AwaitingApproval => assert!(r.is_ok(), "{r:?}"),
                                _ => assert_eq!(r.unwrap_err().code, ErrorCode::Conflict, "a decision is final"),
                            }
                        }
                    }
                    Step::AgentDecides(n) => {
                        if let Some(id) = made.get(n) {
                            let before = backend.records.get_proposal(&t, id).await.unwrap().unwrap();
                            assert_eq!(s.governance.decide(&agent, id, true, None).await.unwrap_err().code, ErrorCode::Forbidden);
                            let after = backend.records.get_proposal(&t, id).await.unwrap().unwrap();
                            assert_eq!(before, after, "an agent call changed a decision");
                        }
                    }
                }
            }
            let ledger = ports::records::AuditLog::list_audit(&backend.records, &t, &domain::PageRequest::first(500)).await.unwrap().items;
            let org = backend.records.list_memory(&t, &MemoryScope::Org, &domain::PageRequest::first(500)).await.unwrap().items;
            for m in org.iter().filter(|m| m.state == GovernanceState::Active) {
                let p = m.lineage.proposal.as_ref().expect("every org entry here came through governance");
                assert!(
                    ledger.iter().any(|a| a.target.as_deref() == Some(p.as_str())
                        && (a.action == "proposal.auto_approved" || a.action == "proposal.approved")),
                    "active entry {} has no approving decision", m.id
                );
            }
        });
    }
}
