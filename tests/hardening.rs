//! Governance and isolation under attack (SPEC §3, §6, §10, wall 5), on both backends,
//! through the same services every edge calls. Each test is an attack: what a hostile
//! caller sends, and what must not happen.
//!
//! - a write-only agent cannot retire org truth: any supersession or contradiction waits
//!   for a person, whatever the tenant's weights;
//! - personal data never auto-approves, and the tenant may reject it outright;
//! - secrets in any form are rejected, and never stored or echoed — only their kind,
//!   place and fingerprint;
//! - every path that returns memory needs `memory:read` (the scope walk, against a table);
//! - triage tells a write-only caller nothing about org memory;
//! - sign-in limits count failures per source and never lock a user out from elsewhere;
//! - the vault's key is checked by readiness;
//! - a property test over random proposals with random secrets, personal data and
//!   supersessions: none is ever written without a recorded human decision, and no
//!   stored or returned proposal holds a detected secret.
//!
//! The HTTP-level attacks (slow clients, session binding, logs, a lost vault key or a
//! damaged database at start, a full disk) are in `functions/local/tests/hardening.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use domain::memory::{GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType};
use domain::principal::{CallerContext, Role, Scopes};
use domain::proposal::ProposalState;
use domain::tenant::{Department, Industry, PersonalDataRule, PlanTier, TriagePolicy};
use domain::{ErrorCode, Id, TenantId};
use ports::records::{AuditLog, EngineeringStore, Expect, MemoryStore, ProposalStore};
use ports::{Backend, SystemClock};
use serde_json::{Value, json};
use services::Services;

use continuity_tests::caller;

async fn embedded() -> (tempfile::TempDir, Backend) {
    let dir = tempfile::tempdir().unwrap();
    let b = store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap();
    (dir, b)
}

async fn tenant(s: &Services, label: &str) -> TenantId {
    let t = contract::fresh_tenant(label);
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    t
}

/// An active org entry, indexed as the writer indexes what it activates.
async fn active_entry(s: &Services, t: &TenantId, id: &str, title: &str, body: &str) -> MemoryEntry {
    let backend = &s.backend;
    let now = backend.clock.now();
    let m = MemoryEntry {
        tenant: t.clone(),
        id: Id::new(id).unwrap(),
        memory_type: MemoryType::Org,
        scope: MemoryScope::Org,
        kind: "decision".into(),
        title: title.into(),
        body: body.into(),
        state: GovernanceState::Active,
        lineage: Lineage::default(),
        created_by: Id::new("cfo").unwrap(),
        created_at: now,
        updated_at: now,
        version: 0,
        occurred_at: None,
        expires_at: None,
        metadata: None,
    };
    backend.records.put_memory(&m, Expect::Absent).await.unwrap();
    s.search
        .index(services::search::IndexRequest {
            tenant: t,
            scope: &m.scope,
            kind: ports::search::DocKind::Memory,
            doc: &m.id,
            title: &m.title,
            body: &m.body,
            at: now,
            occurred: None,
        })
        .await
        .unwrap();
    m
}

/// A tool call as MCP makes it: the structured result and the text a model reads.
async fn tool(s: &Services, c: &CallerContext, capability: &str, args: Value) -> domain::Result<(Value, String)> {
    let t = mcp::tools::all().find(|t| t.capability == capability).unwrap_or_else(|| panic!("no tool {capability}"));
    let answer = t.call(s, c, args).await?;
    Ok((answer.to_value()?, answer.text))
}

async fn propose(s: &Services, c: &CallerContext, args: Value) -> Value {
    s.capabilities.execute(c, "memory.propose", args).await.unwrap().data["proposal"].clone()
}

/// A tenant policy that would approve anything if the rules did not stop it: conflict
/// and risk weigh nothing, and the bar is on the floor.
fn reckless() -> TriagePolicy {
    TriagePolicy { weights: [0.5, 0.5, 0.0, 0.0, 0.0], auto_approve: 0.01, reject_below: 0.0, ..TriagePolicy::default() }
}

async fn set_policy(s: &Services, t: &TenantId, policy: TriagePolicy) {
    s.admin.set_tenant(t, services::admin::TenantChanges { triage: Some(policy), ..Default::default() }).await.unwrap();
}

const LEAD_TIME: &str = "Enterprise renewals are negotiated 60 days before the contract end date by the account owner.";

// ---- 1. supersession and contradiction --------------------------------------------

async fn supersession_needs_a_person(backend: Backend) {
    let s = Services::new(backend.clone());
    for policy in [TriagePolicy::default(), reckless()] {
        let t = tenant(&s, "sup").await;
        set_policy(&s, &t, policy).await;
        let old = active_entry(&s, &t, "dec-lead", "Renewal lead time", LEAD_TIME).await;
        // The attacker: a key that may only write memory.
        let agent = caller(&s, &t, "mcp:tools memory:write").await;
        let approver = caller(&s, &t, "approvals:decide tenant:read").await;
        s.capabilities
            .execute(&agent, "memory.write_conversational", json!({"session": "s", "role": "user", "content": "notes"}))
            .await
            .unwrap();
        // Declared: "this replaces dec-lead".
        let declared = propose(
            &s,
            &agent,
            json!({"title": "Renewal lead time", "kind": "decision", "session": "s", "supersedes": "dec-lead",
                   "body": "Enterprise renewals are negotiated 30 days before the contract end date by the account owner."}),
        )
        .await;
        assert_eq!(declared["state"], "awaiting_approval", "{declared}");
        // Not declared: a contradiction triage finds.
        let found = propose(
            &s,
            &agent,
            json!({"title": "Renewal lead time", "kind": "decision", "session": "s",
                   "body": "Enterprise renewals are not negotiated before the contract end date by the account owner."}),
        )
        .await;
        assert_eq!(found["state"], "awaiting_approval", "{found}");
        let still = backend.records.get_memory(&t, &old.id).await.unwrap().unwrap();
        assert_eq!(still.state, GovernanceState::Active, "no agent retired org truth");

        // A person decides: only then is the old entry superseded, with the decision in the ledger.
        let id = Id::new(declared["id"].as_str().unwrap()).unwrap();
        let written = s.governance.decide(&approver, &id, true, Some("confirmed with the CFO".into())).await.unwrap();
        assert_eq!(written.state, ProposalState::Written);
        let after = backend.records.get_memory(&t, &old.id).await.unwrap().unwrap();
        assert!(matches!(after.state, GovernanceState::Superseded { .. }), "{after:?}");
        let ledger = backend.records.list_audit(&t, &domain::PageRequest::first(500)).await.unwrap().items;
        assert!(ledger.iter().any(|a| a.action == "proposal.approved"
            && a.target.as_deref() == Some(id.as_str())
            && a.actor.starts_with("approver:")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supersession_needs_a_person_embedded() {
    let (_dir, b) = embedded().await;
    supersession_needs_a_person(b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supersession_needs_a_person_aws() {
    supersession_needs_a_person(continuity_tests::aws::backend_in_own_table("hard").await).await;
}

// ---- 2. personal data ---------------------------------------------------------------

const PERSONAL: [(&str, &str); 3] =
    [("4111 1111 1111 1111", "payment card"), ("078-05-1120", "social security"), ("jane.doe.renewals@gmail.com", "e-mail")];

async fn personal_data_never_auto_approves(backend: Backend) {
    let s = Services::new(backend.clone());
    for rule in [PersonalDataRule::Human, PersonalDataRule::Reject] {
        let t = tenant(&s, "pii").await;
        set_policy(&s, &t, TriagePolicy { personal_data: rule, ..reckless() }).await;
        let agent = caller(&s, &t, "mcp:tools memory:write memory:read").await;
        let approver = caller(&s, &t, "approvals:decide tenant:read").await;
        for (value, kind) in PERSONAL {
            let p = propose(
                &s,
                &agent,
                json!({"title": "Refund contact for Globex", "kind": "learning",
                       "body": format!("Refunds for the Globex account go to {value} within 5 days of the request.")}),
            )
            .await;
            let id = Id::new(p["id"].as_str().unwrap()).unwrap();
            let stored = backend.records.get_proposal(&t, &id).await.unwrap().unwrap();
            // Never echoed, whatever happens to it.
            assert!(!p.to_string().contains(value), "{p}");
            match rule {
                PersonalDataRule::Human => {
                    assert_eq!(p["state"], "awaiting_approval", "{p}");
                    // The approver decides on the redacted view.
                    let queue = s.governance.waiting(&approver, &domain::PageRequest::first(50)).await.unwrap().items;
                    let w = queue.iter().find(|w| w.proposal.id == id).unwrap();
                    assert!(!w.proposal.body.contains(value), "{}", w.proposal.body);
                    assert!(w.proposal.body.contains("[personal data:"), "{}", w.proposal.body);
                    let reasons = stored.score.unwrap().reasons.join("; ").to_lowercase();
                    assert!(reasons.contains(kind), "the reason names the kind: {reasons}");
                }
                PersonalDataRule::Reject => {
                    assert_eq!(p["state"], "rejected", "{p}");
                    assert!(p["decision_reason"].as_str().unwrap().to_lowercase().contains(kind), "{p}");
                    assert!(!stored.body.contains(value), "a rejected proposal is kept without it: {}", stored.body);
                }
            }
            assert_ne!(stored.state, ProposalState::Written);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personal_data_never_auto_approves_embedded() {
    let (_dir, b) = embedded().await;
    personal_data_never_auto_approves(b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personal_data_never_auto_approves_aws() {
    personal_data_never_auto_approves(continuity_tests::aws::backend_in_own_table("hard").await).await;
}

// ---- 3, 4. secrets: found in any form, never stored or echoed ------------------------

/// (text, the secret value inside it, a word its kind must contain).
const SECRETS: [(&str, &str, &str); 8] = [
    ("Deploy with aws_access_key_id=AKIAIOSFODNN7EXAMPLE for the Globex bucket.", "AKIAIOSFODNN7EXAMPLE", "AWS"),
    (
        "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY before the nightly job.",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AWS",
    ),
    (
        "The service key body is MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvuNMoSfm76oqFvAp8Gy0iz5sxjZmSnXyCdPEovGhLa0VzMaQ8s+CLOyS56YyCFGeJZqgtzJ6GR3eqoYSW9b9UMvkBpZODSctWSNGj3P7jRFDO5VoTwCQAWbFnOjDfH5Ulgp2PKSQnSJP3AJLQNFNe7br1XbrhV//eO+t51mIpGSDCUv3E0DDFcWDTH9cXDTTlRZVEiR2BwpZOOkE/Z0/BVnhZYL71oZV34bKfWjQIt6V/isSMahdsAASACp4ZTGtwiVuNd9tybAgMBAAECggEBAKTmjaS6tkK8BlPXClTQ2vpz/N6uxDeS35mXpqasqskVlaAidgg/sWqpjXDbXr93otIMLlWsM+X0CqMDgSXKejLS2jx4GDjI1ZTXg++0AMJ8sJ74pWzVDOfmCEQ/7wXs3+cbnXhKriO8Z036q92Qc1+N87SI38nkGa0ABH9CN83HmQqt4fB7UdHzuIRe/me2PGhIq5ZBzj6h3BpoPGzEP+x3l9YmK8t/1cN0pqI+dQwYdgfGjackLu/2qH80MCF7IyQaseZUOJyKrCLtSD/Iixv/hzDEUPfOCjFDgTpzf3cwta8+oE4wHCo1iI1/4TlPkwmXx4qSXtmw4aQPz7IDQvECgYEA8KNThCO2gsC2I9PQDM/8Cw0O983WCDY+oi+7JPiNAJwv5DYBqEZB1QYdj06YD16XlC/HAZMsMku1na2TN0driwenQQWzoev3g2S7gRDoS/FCJSI3jJ+kjgtaA7Qmzlgk1TxODN+G1H91HW7t0l7VnL27IWyYo2qRRK3jzxqUiPUCgYEAx0oQs2reBQGMVZnApD1jeq7n4MvNLcPvt8b/eU9iUv6Y4Mj0Suo/AU8lYZXm8ubbqAlwz2VSVunD2tOplHyMUrtCtObAfVDUAhCndKaA9gApgfb3xw1IKbuQ1u4IF1FJl3VtumfQn//LiH1B3rXhcdyo3/vIttEk48RakUKClU8CgYEAzV7W3COOlDDcQd935DdtKBFRAPRPAlspQUnzMi5eSHMD/ISLDY5IiQHbIH83D4bvXq0X7qQoSBSNP7Dvv3HYuqMhf0DaegrlBuJllFVVq9qPVRnKxt1Il2HgxOBvbhOT+9in1BzA+YJ99UzC85O0Qz06A+CmtHEy4aZ2kj5hHjECgYEAmNS4+A8Fkss8Js1RieK2LniBxMgmYml3pfVLKGnzmng7H2+cwPLhPIzIuwytXywh2bzbsYEfYx3EoEVgMEpPhoarQnYPukrJO4gwE2o5Te6T5mJSZGlQJQj9q4ZB2Dfzet6INsK0oG8XVGXSpQvQh3RUYekCZQkBBFcpqWpbIEsCgYAnM3DQf3FJoSnXaMhrVBIovic5l0xFkEHskAjFTevO86Fsz1C2aSeRKSqGFoOQ0tmJzBEs1R6KqnHInicDTQrKhArgLXX4v3CddjfTRJkFWDbE/CkvKZNOrcf1nhaGCPspRJj2KUkj1Fhl9Cncdn/RsYEONbwQSjIfMPkvxF+8HQ== for the job.",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKjMzEfYyjiWA4R4",
        "private key",
    ),
    ("For the Globex demo the admin password is Tr0ub4dor&3, change it after.", "Tr0ub4dor&3", "password"),
    ("Reports read from postgres://reporter:s3cretPassw0rd@db.internal:5432/analytics nightly.", "s3cretPassw0rd", ""),
    ("Server=tcp:db.example.net;Database=crm;User Id=app;Password=Xk9#mQ2$vL7p;", "Xk9#mQ2$vL7p", ""),
    ("The Globex webhook signs with whsec_4bVx9LmQ2rT8yZ1cN6pD3fH7jK0sW5eA", "whsec_4bVx9LmQ2rT8yZ1cN6pD3fH7jK0sW5eA", ""),
    ("CI pushes with ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 to the mirror.", "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", ""),
];

async fn secrets_are_rejected_and_never_kept(backend: Backend) {
    let s = Services::new(backend.clone());
    let t = tenant(&s, "sec").await;
    set_policy(&s, &t, reckless()).await;
    let agent = caller(&s, &t, "mcp:tools memory:write").await;
    let reader = caller(&s, &t, "mcp:tools tenant:read memory:read").await;
    for (text, value, kind) in SECRETS {
        let (data, text_shown) =
            tool(&s, &agent, "memory.propose", json!({"title": "Globex ops note", "kind": "learning", "body": text}))
                .await
                .unwrap();
        let p = &data["proposal"];
        assert_eq!(p["state"], "rejected", "{text}: {p}");
        let reason = p["decision_reason"].as_str().unwrap();
        assert!(reason.contains("secret") && reason.contains(kind) && reason.contains("body, character"), "{reason}");
        let id = p["id"].as_str().unwrap();
        // Nowhere: the answer, its text, the stored proposal, proposal.status, the decision list.
        let status = tool(&s, &reader, "proposal.status", json!({"id": id})).await.unwrap();
        let decisions = tool(&s, &reader, "memory.list_decisions", json!({"limit": 100})).await.unwrap();
        let stored = backend.records.get_proposal(&t, &Id::new(id).unwrap()).await.unwrap().unwrap();
        for shown in [
            data.to_string(),
            text_shown.clone(),
            status.0.to_string(),
            status.1.clone(),
            decisions.0.to_string(),
            decisions.1.clone(),
            format!("{stored:?}"),
        ] {
            assert!(!shown.contains(value), "{text}: the secret is shown in {shown}");
        }
        assert!(sensitive::secrets(&stored.body).is_empty(), "{}", stored.body);
        assert_eq!(stored.detected.len(), 1, "{:?}", stored.detected);
        assert_eq!(status.0["proposal"]["redacted"][0]["field"], "body");
        let ledger = backend.records.list_audit(&t, &domain::PageRequest::first(500)).await.unwrap().items;
        assert!(ledger.iter().all(|a| !a.outcome.contains(value)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_rejected_and_never_kept_embedded() {
    let (_dir, b) = embedded().await;
    secrets_are_rejected_and_never_kept(b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_rejected_and_never_kept_aws() {
    secrets_are_rejected_and_never_kept(continuity_tests::aws::backend_in_own_table("hard").await).await;
}

/// Secrets in disguise (issue #33 §1): a base64-wrapped AWS key pair, tokens hidden with
/// zero-width characters, fullwidth letters, inserted spaces, hex or reversal, a PGP block,
/// an age key, `curl -u`, a password in French — each rejected or held for a person, its
/// value never stored, echoed or shown, even under a policy that would approve anything.
async fn disguised_secrets_never_pass(backend: Backend) {
    use base64::Engine as _;
    let s = Services::new(backend.clone());
    let t = tenant(&s, "disguise").await;
    set_policy(&s, &t, reckless()).await;
    let agent = caller(&s, &t, "mcp:tools memory:write").await;
    let reader = caller(&s, &t, "mcp:tools tenant:read memory:read").await;
    let pair = "aws_access_key_id=AKIAQYLPMN5HFIQR7XYZ\naws_secret_access_key=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";
    let b64 = base64::engine::general_purpose::STANDARD.encode(pair);
    let ghp = "ghp_Rk2Vb9LpXz4Nd6Hc1Jf3Gy5Ke0Ta8Ur2WqZm";
    let zero_width: String = ghp.chars().flat_map(|c| [c, '\u{200b}']).collect();
    let fullwidth: String = "AKIAQYLPMN5HFIQR7XYZ".chars().map(|c| char::from_u32(c as u32 + 0xFEE0).unwrap_or(c)).collect();
    let spaced = "AKIA QYLP MN5H FIQR 7XYZ";
    let hex: String =
        "aws_secret_access_key=tS8mWq7Rk2Vb9LpXz4Nd6Hc1Jf3Gy5Ke0Ta8Ur2W".bytes().map(|b| format!("{b:02x}")).collect();
    let reversed: String = ghp.chars().rev().collect();
    let random = "Zq8XkL2mVb7RtY4pWn9sHc3JdF6gTe1u";
    let cases: Vec<(String, String)> = vec![
        (
            format!("We rotated the production credential for account acct-3; the new value is {b64} and it lives in the vault."),
            b64.clone(),
        ),
        (format!("CI token: {zero_width} for the mirror."), zero_width.chars().skip(8).take(16).collect()),
        (format!("aws key {fullwidth} for the uploader"), fullwidth.clone()),
        (format!("the key is {spaced} for staging"), spaced.to_owned()),
        (format!("dump: {hex}"), hex.clone()),
        (format!("read it backwards: {reversed}"), reversed.clone()),
        (
            "age identity for restores: AGE-SECRET-KEY-1QZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6".to_owned(),
            "AGE-SECRET-KEY-1QZRY9X8GF2TVDW0".to_owned(),
        ),
        ("Trigger it with curl -u deploy:Xk29!mqLwP https://ci.example.com/job/build".to_owned(), "Xk29!mqLwP".to_owned()),
        ("Le mot de passe du serveur de prod est Vb7#kq2Lzx".to_owned(), "Vb7#kq2Lzx".to_owned()),
        (format!("the new value is {random} and it lives in the vault"), random.to_owned()),
    ];
    for (text, value) in cases {
        let (data, shown_text) =
            tool(&s, &agent, "memory.propose", json!({"title": "Globex ops note", "kind": "learning", "body": text}))
                .await
                .unwrap();
        let p = &data["proposal"];
        let state = p["state"].as_str().unwrap();
        assert!(state == "rejected" || state == "pending" || state == "awaiting_approval", "{text}: {p}");
        assert_ne!(state, "written", "{text}");
        let id = p["id"].as_str().unwrap();
        let status = tool(&s, &reader, "proposal.status", json!({"id": id})).await.unwrap();
        let stored = backend.records.get_proposal(&t, &Id::new(id).unwrap()).await.unwrap().unwrap();
        assert!(!stored.detected.is_empty(), "{text}: nothing was found");
        assert!(
            !matches!(stored.state, domain::proposal::ProposalState::Written | domain::proposal::ProposalState::AutoApproved),
            "{text}"
        );
        for shown in [data.to_string(), shown_text.clone(), status.0.to_string(), status.1.clone(), format!("{stored:?}")] {
            assert!(!shown.contains(&value), "{text}: the value is shown in {shown}");
        }
    }
    // Nothing of it reached org memory.
    let org = backend.records.list_memory(&t, &domain::memory::MemoryScope::Org, &domain::PageRequest::first(100)).await.unwrap();
    assert!(org.items.is_empty(), "{:?}", org.items);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disguised_secrets_never_pass_embedded() {
    let (_dir, b) = embedded().await;
    disguised_secrets_never_pass(b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disguised_secrets_never_pass_aws() {
    disguised_secrets_never_pass(continuity_tests::aws::backend_in_own_table("disg").await).await;
}

/// Every governed write path with one marker secret (issue #33 §3): a proposal's body, an
/// action's target and parameters, a proposed entity's attributes, an ADR saved as
/// accepted, a session summarised into a proposal. The marker is never stored, echoed or
/// shown for approval — only its redaction.
async fn no_write_path_keeps_a_secret(backend: Backend) {
    const MARKER: &str = "ghp_Wq8XkL2mVb7RtY4pWn9sHc3JdF6gTe1uZa0K";
    let s = Services::new(backend.clone());
    let t = tenant(&s, "paths").await;
    set_policy(&s, &t, reckless()).await;
    let mut agent = caller(&s, &t, "mcp:tools tenant:read tenant:write memory:read memory:write").await;
    agent.projects = vec!["web".into()];
    // A connected source, so the action proposal is made (and governed).
    let credential = domain::action::Credential { base_url: None, token: "pat-na1-0000".into(), email: None };
    s.admin.set_credential(&t, "hubspot", credential).await.unwrap();
    let calls: Vec<(&str, Value)> = vec![
        ("memory.propose", json!({"title": "CI note", "kind": "learning", "body": format!("the mirror pushes with {MARKER}")})),
        (
            "proposal.create",
            json!({"title": "Move the deal", "body": "Close it", "action": {"connector": "hubspot", "operation": "deal.update_stage",
                   "target": MARKER, "params": {"stage": "closedwon", "note": format!("token {MARKER}")}}}),
        ),
        (
            "spine.entity.create",
            json!({"type": "account", "id": "globex-9", "attributes": {"name": "Globex", "internal_notes": format!("api token {MARKER}")}, "reason": "new customer"}),
        ),
        (
            "engineering.save",
            json!({"project": "web", "record": {"kind": "adr", "title": "Use the mirror", "status": "accepted",
                   "context": format!("the mirror token is {MARKER}"), "decision": "push through the mirror", "consequences": "none"}}),
        ),
        (
            "memory.write_conversational",
            json!({"session": "ops", "role": "user", "content": "we decided to push through the mirror"}),
        ),
        (
            "memory.write_conversational",
            json!({"session": "ops", "role": "assistant", "content": format!("noted; it uses {MARKER}")}),
        ),
        ("session.summarize", json!({"session": "ops"})),
    ];
    let mut echoed = Vec::new();
    for (capability, args) in calls {
        let answered = if mcp::tools::all().any(|t| t.capability == capability) {
            tool(&s, &agent, capability, args).await
        } else {
            // The capability API's own (spine.entity.create has no MCP tool).
            s.capabilities.execute(&agent, capability, args).await.map(|o| (o.data, String::new()))
        };
        match answered {
            Ok((data, text)) => echoed.push((capability, data.to_string(), text)),
            Err(e) => echoed.push((capability, e.message.clone(), String::new())),
        }
    }
    for (capability, data, text) in &echoed {
        if *capability == "memory.write_conversational" {
            continue; // a session's own turns are the caller's record, not governed memory
        }
        assert!(!data.contains(MARKER) && !text.contains(MARKER), "{capability} echoed the secret: {data} {text}");
    }
    // What is stored, and what an approver sees.
    let proposals = backend.records.list_proposals(&t, None, &domain::PageRequest::first(100)).await.unwrap().items;
    assert!(proposals.len() >= 4, "{proposals:?}");
    for p in &proposals {
        assert!(!format!("{p:?}").contains(MARKER), "stored proposal keeps the secret: {p:?}");
        assert!(!p.detected.is_empty(), "{}: the secret was not recorded as found", p.kind);
    }
    let approver = caller(&s, &t, "approvals:decide tenant:read memory:read").await;
    let queue = s.governance.waiting(&approver, &domain::PageRequest::first(100)).await.unwrap();
    assert!(!format!("{queue:?}").contains(MARKER));
    let adrs = backend.records.list_eng_records(&t, "web", None, &domain::PageRequest::first(100)).await.unwrap().items;
    assert!(!adrs.is_empty() && !format!("{adrs:?}").contains(MARKER), "{adrs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_write_path_keeps_a_secret_embedded() {
    let (_dir, b) = embedded().await;
    no_write_path_keeps_a_secret(b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_write_path_keeps_a_secret_aws() {
    no_write_path_keeps_a_secret(continuity_tests::aws::backend_in_own_table("paths").await).await;
}

/// A quiet contradiction (issue #33 §2): "acct-7 is on the gold support tier", written,
/// then "acct-7 is on the silver support tier" — naming nothing it replaces — waits for a
/// person under the default policy and one that would approve anything; and naming a
/// session whose turns do not support a proposal earns it no grounding.
async fn quiet_contradictions_wait(backend: Backend) {
    let s = Services::new(backend.clone());
    let t = tenant(&s, "quiet").await;
    let agent = caller(&s, &t, "mcp:tools memory:read memory:write").await;
    active_entry(&s, &t, "tier-1", "acct-7 support tier", "acct-7 is on the gold support tier").await;
    for policy in [TriagePolicy::default(), reckless()] {
        set_policy(&s, &t, policy).await;
        for wording in [
            "acct-7 is on the silver support tier",
            "The support tier of acct-7 is platinum",
            "acct-7 moved to the bronze support tier",
        ] {
            let p = propose(&s, &agent, json!({"title": "acct-7 support tier", "kind": "learning", "body": wording})).await;
            assert_eq!(p["state"], "awaiting_approval", "{wording}: {p}");
        }
    }
    let active = backend.records.get_memory(&t, &Id::new("tier-1").unwrap()).await.unwrap().unwrap();
    assert_eq!(active.state, domain::memory::GovernanceState::Active, "nothing replaced it without a person");

    // Grounding comes from what a session says, not from its name.
    set_policy(&s, &t, TriagePolicy::default()).await;
    let empty = propose(
        &s,
        &agent,
        json!({"title": "Renewal calls", "kind": "learning", "session": "nothing-said",
        "body": "Renewal calls for Initech happen in the first week of each quarter."}),
    )
    .await;
    let reasons = empty["score"]["reasons"].to_string();
    assert!(!reasons.contains("grounded in a recorded session"), "{reasons}");
    tool(
        &s,
        &agent,
        "memory.write_conversational",
        json!({"session": "calls", "role": "user",
        "content": "Initech wants renewal calls in the first week of each quarter."}),
    )
    .await
    .unwrap();
    let said = propose(
        &s,
        &agent,
        json!({"title": "Renewal calls", "kind": "learning", "session": "calls",
        "body": "Renewal calls for Initech happen in the first week of each quarter."}),
    )
    .await;
    assert!(said["score"]["reasons"].to_string().contains("grounded in a recorded session"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_contradictions_wait_embedded() {
    let (_dir, b) = embedded().await;
    quiet_contradictions_wait(b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_contradictions_wait_aws() {
    quiet_contradictions_wait(continuity_tests::aws::backend_in_own_table("quiet").await).await;
}

// ---- 5. the scope walk -----------------------------------------------------------------

/// Marks memory in the walk's tenant: an org entry, a turn, another principal's
/// proposal, a knowledge-graph observation.
const CANARY: &str = "ZQXCANARY";

const SCOPES: [&str; 6] = ["tenant:read", "tenant:write", "memory:read", "memory:write", "approvals:decide", "admin"];

/// What each single-scope key may see: the (tool, scope) pairs whose answer holds memory.
/// Everything else answers without it (or refuses).
const SEES_MEMORY: [(&str, &str); 12] = [
    ("memory.search_org", "memory:read"),
    ("memory.search", "memory:read"),
    ("memory.read_org", "memory:read"),
    ("memory.read_conversational", "memory:read"),
    ("memory.list_decisions", "memory:read"),
    ("memory.graph_read_graph", "memory:read"),
    ("memory.graph_search_nodes", "memory:read"),
    ("memory.graph_open_nodes", "memory:read"),
    ("engineering.list", "memory:read"),
    ("engineering.get", "memory:read"),
    ("engineering.find_fix", "memory:read"),
    ("engineering.restore_workspace", "memory:read"),
];

async fn key_for(s: &Services, t: &TenantId, principal: &Id, scopes: &str) -> CallerContext {
    let key = s
        .admin
        .create_key(services::admin::KeyRequest {
            tenant: t.clone(),
            scopes: Scopes::parse(scopes).unwrap(),
            principal: Some(principal.clone()),
            teams: Vec::new(),
            projects: vec!["web".into()],
        })
        .await
        .unwrap();
    s.auth.authenticate_token(&key.token, "http://localhost").await.unwrap()
}

async fn scope_walk(backend: Backend) {
    let s = Services::new(backend.clone());
    let t = tenant(&s, "walk").await;
    let operator = s.admin.operator(&t).await.unwrap();
    let mut attrs = domain::value::Attributes::new();
    attrs.insert("name".into(), domain::value::Value::Text("Globex".into()));
    s.entities
        .put(
            &operator,
            domain::EntityType::new("account").unwrap(),
            Id::new("acct-1").unwrap(),
            domain::spine::PoleClass::Organization,
            attrs,
            Expect::Any,
        )
        .await
        .unwrap();
    let org =
        active_entry(&s, &t, "dec-globex", "Globex renewal owner", &format!("Globex renewals are run by the CSM {CANARY}."))
            .await;
    // One principal holds every walking key, and owns the session and graph with canaries.
    let me = caller(&s, &t, "mcp:tools memory:write").await;
    let principal = me.principal.clone();
    s.capabilities
        .execute(
            &me,
            "memory.write_conversational",
            json!({"session": "walk", "role": "user", "content": format!("{CANARY} Globex call notes")}),
        )
        .await
        .unwrap();
    s.capabilities
        .execute(
            &me,
            "memory.graph_create_entities",
            json!({"entities": [{"name": "Globex", "entityType": "account", "observations": [format!("{CANARY} prefers quarterly reviews")]}]}),
        )
        .await
        .unwrap();
    // Another principal's proposal, waiting for a person.
    let other = caller(&s, &t, "mcp:tools memory:write").await;
    let theirs = propose(
        &s,
        &other,
        json!({"title": format!("Globex escalations {CANARY}"), "kind": "pattern",
               "body": format!("Globex escalations should go to the CSM first {CANARY}.")}),
    )
    .await;
    assert_eq!(theirs["state"], "awaiting_approval", "{theirs}");
    let theirs_id = theirs["id"].as_str().unwrap().to_owned();

    // Two personal memories of the walker's (no canary: what the walker wrote itself).
    let mut ids = Vec::new();
    for text in ["Walker prefers short answers", "Walker works from Lisbon"] {
        let r = s.capabilities.execute(&me, "memory.remember", json!({"text": text})).await.unwrap();
        ids.push(r.data["memory"]["id"].as_str().unwrap().to_owned());
    }
    // Another project member's engineering records: a fix holding the canary, and a
    // workspace naming it.
    let member = continuity_tests::caller_in(&s, &t, "mcp:tools memory:write", &[], &["web"]).await;
    let fix = domain::engineering::Body::ErrorFix {
        signature: format!("Globex sync: connection refused {CANARY}"),
        cause: "the sync worker is down".into(),
        fix: "restart it".into(),
        files: vec![],
    };
    let fix = s.engineering.save(&member, None, None, fix, None).await.unwrap();
    let ws = domain::engineering::Body::Workspace { name: "Globex sync".into(), description: None, items: vec![fix.id.clone()] };
    let ws = s.engineering.save(&member, None, None, ws, None).await.unwrap();
    let entity = json!({"type": "account", "id": "acct-1"});
    let calls: Vec<(&str, Value)> = vec![
        ("memory.search", json!({"query": "Globex"})),
        ("memory.remember", json!({"text": "Walker likes tables"})),
        ("memory.update_personal", json!({"id": ids[0], "text": "Walker prefers very short answers"})),
        ("memory.forget", json!({"id": ids[1]})),
        ("memory.search_org", json!({"query": "Globex"})),
        ("memory.read_org", json!({"id": org.id.as_str()})),
        (
            "memory.propose",
            json!({"title": "Walk note", "kind": "learning", "body": "Globex renewals need a deck 30 days ahead."}),
        ),
        ("memory.read_conversational", json!({"session": "walk"})),
        ("memory.write_conversational", json!({"session": "walk-2", "role": "user", "content": "hello"})),
        ("memory.read_personal", json!({})),
        ("memory.list_decisions", json!({})),
        ("session.get_context", json!({"entity": entity})),
        ("session.get_context", json!({"query": "Globex"})),
        ("session.get_context", json!({"session": "walk"})),
        ("session.summarize", json!({"session": "walk"})),
        ("session.list_recent", json!({})),
        ("spine.entity.get", entity.clone()),
        ("spine.entity.search", json!({"query": "Globex"})),
        ("spine.relationship.list", entity.clone()),
        ("signal.list", json!({})),
        ("signal.get", json!({"id": "sig-1"})),
        ("proposal.create", json!({"title": "Send the deck", "body": "Send the renewal deck to Globex.", "entity": entity})),
        ("proposal.status", json!({"id": theirs_id})),
        ("book.list", json!({})),
        ("kb.search", json!({"query": "Globex"})),
        ("playbook.handoff", json!({"goal": "Renew Globex", "entity": entity})),
        (
            "memory.graph_create_entities",
            json!({"entities": [{"name": "Initech", "entityType": "account", "observations": ["new"]}]}),
        ),
        ("memory.graph_add_observations", json!({"observations": [{"entityName": "Globex", "contents": ["met on Monday"]}]})),
        (
            "memory.graph_create_relations",
            json!({"relations": [{"from": "Globex", "to": "Initech", "relationType": "partners"}]}),
        ),
        (
            "memory.graph_delete_relations",
            json!({"relations": [{"from": "Globex", "to": "Initech", "relationType": "partners"}]}),
        ),
        ("memory.graph_delete_observations", json!({"deletions": [{"entityName": "Globex", "observations": ["met on Monday"]}]})),
        ("memory.graph_merge_entities", json!({"sourceNames": ["Initech"], "targetName": "Initech Corp"})),
        ("memory.graph_delete_entities", json!({"entityNames": ["Initech"]})),
        ("memory.graph_read_graph", json!({})),
        ("memory.graph_search_nodes", json!({"query": "Globex"})),
        ("memory.graph_open_nodes", json!({"names": ["Globex"]})),
        ("engineering.gate_status", json!({})),
        ("engineering.gate_request", json!({"namespace": "repo:walk", "action": "push"})),
        ("engineering.save", json!({"record": {"kind": "task", "title": "Walk task", "status": "todo", "priority": "low"}})),
        ("engineering.list", json!({})),
        ("engineering.get", json!({"id": fix.id.as_str()})),
        ("engineering.find_fix", json!({"error": "Globex sync connection refused"})),
        ("engineering.restore_workspace", json!({"id": ws.id.as_str()})),
    ];
    // Every canonical, graph and engineering tool is walked.
    for spec in services::capabilities::typed::specs().filter(|c| c.channel != adk::Channel::Api) {
        assert!(calls.iter().any(|(n, _)| *n == spec.name), "the walk misses {}", spec.name);
    }
    // Every call is a valid one: with every scope it is served (signals need a connector
    // this tenant does not have), so a refusal below is the scope's doing, not a typo's.
    let all = key_for(&s, &t, &principal, "mcp:tools tenant:read tenant:write memory:read memory:write").await;
    for (name, args) in &calls {
        match tool(&s, &all, name, args.clone()).await {
            Ok(_) => {}
            Err(e) if name.starts_with("signal.") && e.code == ErrorCode::ConnectorNotAvailable => {}
            Err(e) => panic!("{name} {args}: {e:?}"),
        }
    }
    let mut mismatches = Vec::new();
    for scope in SCOPES {
        let c = key_for(&s, &t, &principal, &format!("mcp:tools mcp:resources {scope}")).await;
        for (name, args) in &calls {
            let shown = match tool(&s, &c, name, args.clone()).await {
                Ok((data, text)) => format!("{data} {text}"),
                Err(e) => format!("{e:?}"),
            };
            let sees = shown.contains(CANARY);
            if sees != SEES_MEMORY.contains(&(*name, scope)) {
                mismatches.push(format!("{name} {args} with {scope}: sees memory = {sees}: {shown}"));
            }
        }
        for (prompt, args) in [("project_handoff_summary", json!({"project": "Globex"})), ("morning_brief", json!({}))] {
            let shown = match s.capabilities.prompt(&c, prompt, args.as_object().unwrap()).await {
                Ok(text) => text,
                Err(e) => {
                    assert_ne!(scope, "tenant:read", "prompt {prompt} is served with tenant:read: {e:?}");
                    format!("{e:?}")
                }
            };
            if shown.contains(CANARY) {
                mismatches.push(format!("prompt {prompt} with {scope} shows memory: {shown}"));
            }
        }
    }
    assert!(mismatches.is_empty(), "{} mismatches:\n{}", mismatches.len(), mismatches.join("\n"));
    // The walk can see: a key that reads both does find the memory in context and prompts.
    let both = key_for(&s, &t, &principal, "mcp:tools tenant:read memory:read").await;
    let ctx = s.capabilities.execute(&both, "session.get_context", json!({"query": "Globex", "session": "walk"})).await.unwrap();
    assert!(ctx.data.to_string().contains(CANARY), "{}", ctx.data);
    let brief = s.capabilities.prompt(&both, "project_handoff_summary", json!({"project": "Globex"}).as_object().unwrap()).await;
    assert!(brief.unwrap().contains(CANARY));
    let status = s.capabilities.execute(&both, "proposal.status", json!({"id": theirs["id"]})).await.unwrap();
    assert!(status.data.to_string().contains(CANARY));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scope_walk_embedded() {
    let (_dir, b) = embedded().await;
    scope_walk(b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scope_walk_aws() {
    scope_walk(continuity_tests::aws::backend_in_own_table("hard").await).await;
}

// ---- 6. triage is no oracle for write-only callers ----------------------------------

async fn triage_tells_writers_nothing(backend: Backend) {
    let s = Services::new(backend.clone());
    let t = tenant(&s, "oracle").await;
    active_entry(&s, &t, "dec-secretive-id", "Zanzibar pricing floor", LEAD_TIME).await;
    // Writes memory, reads the tenant's Spine — but not its memory.
    let writer = caller(&s, &t, "mcp:tools tenant:read memory:write").await;
    let reader = caller(&s, &t, "mcp:tools tenant:read memory:read").await;
    // A probe for whether org memory mentions the words: a near-duplicate, then a contradiction.
    for body in [LEAD_TIME, "Enterprise renewals are not negotiated before the contract end date by the account owner."] {
        let (data, text) =
            tool(&s, &writer, "memory.propose", json!({"title": "Zanzibar pricing floor", "kind": "decision", "body": body}))
                .await
                .unwrap();
        let p = &data["proposal"];
        let shown = format!("{data} {text}");
        assert!(!shown.contains("dec-secretive-id"), "{shown}");
        assert!(
            p["score"].get("relevance").is_none() && p["score"].get("conflict").is_none() && p["score"].get("total").is_none()
        );
        assert!(p["body"].is_null(), "no body without memory:read");
        for r in p["score"]["reasons"].as_array().unwrap() {
            let r = r.as_str().unwrap();
            assert!(r.starts_with("quality") || !r.chars().any(|c| c.is_ascii_digit()), "a count in {r}");
        }
        if let Some(reason) = p["decision_reason"].as_str() {
            assert!(!reason.contains("dec-secretive-id"), "{reason}");
        }
        // Their own proposal's status says the same; a reader sees the full reasons.
        let status = s.capabilities.execute(&writer, "proposal.status", json!({"id": p["id"]})).await.unwrap();
        assert!(!status.data.to_string().contains("dec-secretive-id"), "{}", status.data);
        let full = s.capabilities.execute(&reader, "proposal.status", json!({"id": p["id"]})).await.unwrap();
        assert!(full.data.to_string().contains("dec-secretive-id"), "{}", full.data);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triage_tells_writers_nothing_embedded() {
    let (_dir, b) = embedded().await;
    triage_tells_writers_nothing(b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triage_tells_writers_nothing_aws() {
    triage_tells_writers_nothing(continuity_tests::aws::backend_in_own_table("hard").await).await;
}

// ---- 9. sign-in cannot lock a user out ----------------------------------------------

async fn sign_in_limits(backend: Backend) {
    use services::admin::NewUser;
    use services::oauth::PasswordCheck;
    let s = Services::new(backend);
    let t = tenant(&s, "signin").await;
    let password = "correct horse battery staple 42";
    for email in ["ada@example.com", "bob@example.com"] {
        s.admin
            .add_user(NewUser {
                tenant: t.clone(),
                email: email.into(),
                role: Role::Member,
                password: password.into(),
                teams: vec![],
                projects: vec![],
            })
            .await
            .unwrap();
    }
    let attacker: std::net::IpAddr = format!("10.{}.{}.9", rand::random::<u8>(), rand::random::<u8>()).parse().unwrap();
    let ada: std::net::IpAddr = format!("10.{}.{}.7", rand::random::<u8>(), rand::random::<u8>()).parse().unwrap();
    let check = |email: &'static str, pw: &'static str, from: std::net::IpAddr| {
        let s = s.clone();
        let t = t.clone();
        async move { s.oauth.check_password(t.as_str(), email, pw, Some(from)).await.unwrap() }
    };
    // Successful sign-ins are not counted.
    for _ in 0..12 {
        assert!(matches!(check("ada@example.com", password, ada).await, PasswordCheck::Ok(_)));
    }
    // The attacker fails against Ada until refused — its own failures lock it, even with the right password.
    let mut refused = false;
    for _ in 0..6 {
        if let PasswordCheck::Limited(secs) = check("ada@example.com", "guess", attacker).await {
            assert!(secs >= 1);
            refused = true;
        }
    }
    assert!(refused, "five failures from one source lock that source out for that e-mail");
    assert!(matches!(check("ada@example.com", password, attacker).await, PasswordCheck::Limited(_)));
    // Failures from many other sources against Ada: she still signs in (after a short back-off at most).
    for i in 0..12u8 {
        let from: std::net::IpAddr = format!("172.16.{}.{i}", rand::random::<u8>()).parse().unwrap();
        assert!(matches!(check("ada@example.com", "guess", from).await, PasswordCheck::Wrong));
    }
    assert!(matches!(check("ada@example.com", password, ada).await, PasswordCheck::Ok(_)), "never locked out from elsewhere");
    // Spraying: one source failing across many e-mails is refused for a new one too.
    let sprayer: std::net::IpAddr = format!("10.{}.{}.5", rand::random::<u8>(), rand::random::<u8>()).parse().unwrap();
    let mut limited = false;
    for i in 0..40 {
        let email: &'static str = Box::leak(format!("user{i}@example.com").into_boxed_str());
        if matches!(check(email, "guess", sprayer).await, PasswordCheck::Limited(_)) {
            limited = true;
            break;
        }
    }
    assert!(limited, "spraying many e-mails from one source is limited");
    assert!(matches!(check("bob@example.com", password, sprayer).await, PasswordCheck::Limited(_)));
    assert!(matches!(check("bob@example.com", password, ada).await, PasswordCheck::Ok(_)), "other sources are unaffected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_limits_embedded() {
    let (_dir, b) = embedded().await;
    sign_in_limits(b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_limits_aws() {
    sign_in_limits(continuity_tests::aws::backend_in_own_table("hard").await).await;
}

// ---- 10. readiness sees a vault key that does not match ------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_is_real_embedded() {
    let (_dir, b) = embedded().await;
    let s = Services::new(b);
    let checks = s.readiness().await;
    assert!(checks.iter().all(|c| c.ok), "{checks:?}");
    let names: Vec<&str> = checks.iter().map(|c| c.name).collect();
    for n in ["disk", "database", "store", "vault"] {
        assert!(names.contains(&n), "{names:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_sees_a_foreign_vault_key_aws() {
    use continuity_tests::aws;
    let (table, _) = aws::fresh_table("vault").await;
    let sealed_with = |key: String| {
        let table = table.clone();
        async move { Services::new(Backend { records: aws::sealed_records(&table, &key).await, ..aws::backend().await }) }
    };
    let s = sealed_with(aws::new_vault_key("vault a").await).await;
    let t = tenant(&s, "vault").await;
    let operator = s.admin.operator(&t).await.unwrap();
    let mut attrs = domain::value::Attributes::new();
    attrs.insert("name".into(), domain::value::Value::Text("Globex".into()));
    let account = domain::EntityType::new("account").unwrap();
    s.entities
        .put(&operator, account, Id::new("a1").unwrap(), domain::spine::PoleClass::Organization, attrs, Expect::Any)
        .await
        .unwrap();
    let checks = s.readiness().await;
    assert!(checks.iter().all(|c| c.ok), "{checks:?}");
    // The same table read with another KMS key: the vault check fails.
    let wrong = sealed_with(aws::new_vault_key("vault b").await).await;
    let checks = wrong.readiness().await;
    let vault = checks.iter().find(|c| c.name == "vault").unwrap();
    assert!(!vault.ok, "{checks:?}");
    assert!(checks.iter().any(|c| c.name == "cache" && c.ok), "{checks:?}");
}

// ---- the property: nothing sensitive is written without a person ---------------------

/// What a step of the property test does.
#[derive(Debug, Clone)]
enum Step {
    /// A proposal: a clean text, with perhaps a secret, perhaps personal data, perhaps
    /// declaring it supersedes the seeded entry, perhaps contradicting it.
    Propose { text: usize, secret: Option<usize>, personal: Option<usize>, supersedes: bool, contradicts: bool },
    /// An approver decides the n-th proposal made so far (if it still waits).
    Decide(usize, bool),
}

const CLEAN: [&str; 3] = [
    "Customer success reviews every account health score weekly on Monday; accounts under 40 get an owner call within 2 days.",
    "Quarterly business reviews for enterprise accounts include the product roadmap and 3 adoption metrics.",
    "Support tickets tagged outage page the on-call engineer within 5 minutes, day or night.",
];

fn steps() -> impl proptest::strategy::Strategy<Value = Vec<Step>> {
    use proptest::prelude::*;
    let propose = (
        0..CLEAN.len(),
        proptest::option::of(0..SECRETS.len()),
        proptest::option::of(0..PERSONAL.len()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(text, secret, personal, supersedes, contradicts)| Step::Propose {
            text,
            secret,
            personal,
            supersedes,
            contradicts,
        });
    prop::collection::vec(
        prop_oneof![3 => propose, 1 => (0..10usize, any::<bool>()).prop_map(|(i, a)| Step::Decide(i, a))],
        1..12,
    )
}

async fn nothing_sensitive_without_a_person(backend: Backend, seq: Vec<Step>, reckless_policy: bool) {
    let s = Services::new(backend.clone());
    let t = tenant(&s, "prop").await;
    if reckless_policy {
        set_policy(&s, &t, reckless()).await;
    }
    let seeded = active_entry(&s, &t, "dec-lead", "Renewal lead time", LEAD_TIME).await;
    let agent = caller(&s, &t, "mcp:tools memory:write memory:read tenant:read").await;
    let approver = caller(&s, &t, "approvals:decide tenant:read").await;
    s.capabilities
        .execute(&agent, "memory.write_conversational", json!({"session": "s", "role": "user", "content": "x"}))
        .await
        .unwrap();
    let mut made: Vec<Id> = Vec::new();
    let mut shown: Vec<String> = Vec::new();
    for step in seq {
        match step {
            Step::Propose { text, secret, personal, supersedes, contradicts } => {
                let mut body = if contradicts { LEAD_TIME.replace("60 days", "45 days") } else { CLEAN[text].to_owned() };
                if let Some(i) = secret {
                    body.push(' ');
                    body.push_str(SECRETS[i].0);
                }
                if let Some(i) = personal {
                    body.push_str(&format!(" Contact: {}.", PERSONAL[i].0));
                }
                let title = if contradicts { "Renewal lead time" } else { "Team practice" };
                let mut args = json!({"title": title, "body": body, "kind": "decision", "session": "s"});
                // Only an active entry can be named.
                let active =
                    backend.records.get_memory(&t, &seeded.id).await.unwrap().is_some_and(|m| m.state == GovernanceState::Active);
                if supersedes && active {
                    args["supersedes"] = json!(seeded.id.as_str());
                }
                let (data, text) = tool(&s, &agent, "memory.propose", args).await.unwrap();
                shown.push(format!("{data} {text}"));
                made.push(Id::new(data["proposal"]["id"].as_str().unwrap()).unwrap());
            }
            Step::Decide(n, approve) => {
                if let Some(id) = made.get(n) {
                    let before = backend.records.get_proposal(&t, id).await.unwrap().unwrap();
                    let r = s.governance.decide(&approver, id, approve, Some("reviewed".into())).await;
                    match before.state {
                        ProposalState::AwaitingApproval => {
                            shown.push(format!("{:?}", r.unwrap()));
                        }
                        _ => assert_eq!(r.unwrap_err().code, ErrorCode::Conflict),
                    }
                }
            }
        }
    }
    let ledger = backend.records.list_audit(&t, &domain::PageRequest::first(1000)).await.unwrap().items;
    let decided_by_a_person = |id: &Id| {
        ledger.iter().any(|a| {
            a.action == "proposal.approved" && a.target.as_deref() == Some(id.as_str()) && a.actor.starts_with("approver:")
        })
    };
    for id in &made {
        let p = backend.records.get_proposal(&t, id).await.unwrap().unwrap();
        assert!(sensitive::secrets(&p.title).is_empty() && sensitive::secrets(&p.body).is_empty(), "stored: {}", p.body);
        for (_, value, _) in SECRETS {
            assert!(!p.body.contains(value), "stored secret: {}", p.body);
        }
        if !p.detected.is_empty() {
            assert_eq!(p.state, ProposalState::Rejected, "a secret is always rejected: {p:?}");
        }
        let sensitive_change =
            p.supersedes.is_some() || p.suggested_supersede.is_some() || PERSONAL.iter().any(|(v, _)| p.body.contains(v));
        if p.state == ProposalState::Written && sensitive_change {
            assert!(decided_by_a_person(id), "written without a person: {p:?}");
        }
    }
    for text in &shown {
        for (_, value, _) in SECRETS {
            assert!(!text.contains(value), "a returned proposal holds a secret: {text}");
        }
    }
    // And the seeded entry was only ever superseded by a person's approval.
    let now = backend.records.get_memory(&t, &seeded.id).await.unwrap().unwrap();
    if let GovernanceState::Superseded { by } = &now.state {
        assert!(decided_by_a_person(by), "superseded without a person");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 32, ..proptest::test_runner::Config::default() })]

    #[test]
    fn nothing_sensitive_is_written_without_a_person_embedded(seq in steps(), reckless_policy in proptest::bool::ANY) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let (_dir, b) = embedded().await;
            nothing_sensitive_without_a_person(b, seq, reckless_policy).await;
        });
    }
}

proptest::proptest! {
    // Moto is slower; fewer cases, the same property.
    #![proptest_config(proptest::test_runner::Config { cases: 6, ..proptest::test_runner::Config::default() })]

    #[test]
    fn nothing_sensitive_is_written_without_a_person_aws(seq in steps(), reckless_policy in proptest::bool::ANY) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            nothing_sensitive_without_a_person(continuity_tests::aws::backend_in_own_table("hard").await, seq, reckless_policy).await;
        });
    }
}

// ---- 11. the smaller ones ------------------------------------------------------------

async fn smaller_holes(backend: Backend) {
    let s = Services::new(backend.clone());
    let t = tenant(&s, "small").await;
    // A KB id in a scope the caller cannot read: "taken", and nothing about where.
    let insider = continuity_tests::caller_in(&s, &t, "tenant:read tenant:write", &[], &["skunkworks"]).await;
    let outsider = caller(&s, &t, "tenant:read tenant:write").await;
    let doc = |id: &str, scope: &str| services::search::KbInput {
        id: Some(id.into()),
        scope: Some(scope.into()),
        title: "Launch plan".into(),
        body: "The launch is planned for the spring.".into(),
        source: None,
    };
    s.search.put_kb_document(&insider, doc("kb-plan", "project:skunkworks")).await.unwrap();
    let e = s.search.put_kb_document(&outsider, doc("kb-plan", "org")).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
    assert!(e.message.contains("taken") && !e.message.contains("skunkworks"), "{}", e.message);
    let e = s.search.put_kb_document(&insider, doc("kb-plan", "org")).await.unwrap_err();
    assert!(e.message.contains("project:skunkworks"), "the insider may know where: {}", e.message);

    // spine.entity.list pages with the cursor it returns.
    let operator = s.admin.operator(&t).await.unwrap();
    for (id, name) in [("a1", "Globex Holdings"), ("a2", "Globex"), ("a3", "Big Globex Co"), ("a4", "Initech"), ("a5", "Hooli")] {
        let mut attrs = domain::value::Attributes::new();
        attrs.insert("name".into(), domain::value::Value::Text(name.into()));
        s.entities
            .put(
                &operator,
                domain::EntityType::new("account").unwrap(),
                Id::new(id).unwrap(),
                domain::spine::PoleClass::Organization,
                attrs,
                Expect::Any,
            )
            .await
            .unwrap();
    }
    let reader = caller(&s, &t, "tenant:read").await;
    let mut seen = Vec::new();
    let mut args = json!({"type": "account", "limit": 2});
    loop {
        let out = s.capabilities.execute(&reader, "spine.entity.list", args.clone()).await.unwrap();
        seen.extend(out.data["entities"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_owned()));
        match out.data["next_cursor"].as_str() {
            Some(c) => args["cursor"] = json!(c),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, ["a1", "a2", "a3", "a4", "a5"]);
    let e = s.capabilities.execute(&reader, "spine.entity.list", json!({"cursor": "not-a-cursor"})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest);

    // spine.entity.search ranks the entity named exactly first.
    let out = s.capabilities.execute(&reader, "spine.entity.search", json!({"query": "globex"})).await.unwrap();
    let names: Vec<&str> =
        out.data["entities"].as_array().unwrap().iter().map(|e| e["attributes"]["name"].as_str().unwrap()).collect();
    assert_eq!(names.first(), Some(&"Globex"), "{names:?}");
    assert_eq!(names.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smaller_holes_embedded() {
    let (_dir, b) = embedded().await;
    smaller_holes(b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smaller_holes_aws() {
    smaller_holes(continuity_tests::aws::backend_in_own_table("hard").await).await;
}
