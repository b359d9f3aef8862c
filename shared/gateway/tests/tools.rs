//! The 24 canonical MCP tools through the real router, on an embedded backend with real
//! data: every tool called with valid arguments (its structured result checked against
//! its own output schema), the governance walls (nothing a tool does makes org memory
//! active), session privacy, and a snapshot of `tools/list` per plan tier.
//!
//! Snapshots live in `shared/gateway/tests/snapshots/`; after an intended change to a
//! tool's name, description or schema, regenerate them with
//! `CONTINUITY_UPDATE_SNAPSHOTS=1 cargo nextest run -p gateway -E 'test(/^tools::/)'` and review the diff.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use domain::memory::{GovernanceState, MemoryEntry, MemoryScope};
use domain::principal::Scopes;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{Id, TenantId, Timestamp};
use gateway::App;
use ports::records::{MemoryStore, ProposalStore};
use serde_json::{Value, json};
use services::Services;
use services::admin::KeyRequest;

const ALL: &str = "mcp:tools mcp:resources tenant:read tenant:write memory:read memory:write";

struct Fixture {
    app: App,
    services: Services,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let services = common::services(dir.path());
    let app = common::app(&services, "http://localhost");
    Fixture { app, services, _dir: dir }
}

impl Fixture {
    async fn tenant(&self, slug: &str, plan: PlanTier, scopes: &str, principal: Option<&str>) -> String {
        let t = TenantId::new(slug).unwrap();
        self.services.admin.create_tenant(t.clone(), plan, Department::CustomerSuccess, Industry::Saas).await.unwrap();
        if let Some(p) = principal {
            self.principal(&t, p).await;
        }
        let req = KeyRequest {
            tenant: t,
            scopes: Scopes::parse(scopes).unwrap(),
            principal: principal.map(|p| Id::new(p).unwrap()),
            teams: vec![],
            projects: vec![],
        };
        self.services.admin.create_key(req).await.unwrap().token
    }

    async fn principal(&self, t: &TenantId, id: &str) {
        use ports::records::PrincipalStore;
        let p = domain::principal::Principal {
            tenant: t.clone(),
            id: Id::new(id).unwrap(),
            kind: domain::principal::PrincipalKind::User,
            role: domain::principal::Role::Member,
            display_name: id.into(),
            created_at: Timestamp(1),
            teams: Vec::new(),
            projects: Vec::new(),
            disabled: false,
        };
        self.services.backend.records.create_principal(&p).await.unwrap();
    }

    async fn rpc(&self, key: &str, method: &str, params: Value) -> Value {
        common::rpc(&self.app, key, method, params).await
    }

    async fn tools(&self, key: &str) -> Vec<Value> {
        self.rpc(key, "tools/list", json!({})).await["result"]["tools"].as_array().unwrap().clone()
    }

    async fn call(&self, key: &str, name: &str, args: Value) -> Value {
        self.rpc(key, "tools/call", json!({"name": name, "arguments": args})).await["result"].clone()
    }
}

/// Whether `v` is valid under `schema`, by a maintained JSON Schema validator (draft
/// 2020-12, as the schemas declare): every violation, with where it is.
fn conforms(schema: &Value, v: &Value, path: &str) -> Result<(), String> {
    let validator = jsonschema::validator_for(schema).map_err(|e| format!("{path}: the schema does not compile: {e}"))?;
    let errors: Vec<String> = validator.iter_errors(v).map(|e| format!("{path}{}: {e}", e.instance_path())).collect();
    if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
}

use continuity_tests::demo::seed;

#[tokio::test]
async fn every_canonical_tool_works_on_real_data() {
    let f = fixture().await;
    let key = f.tenant("acme", PlanTier::Enterprise, ALL, Some("ada-user")).await;
    let t = TenantId::new("acme").unwrap();
    seed(&f.services, &t, "ada-user").await;
    let listed = f.tools(&key).await;
    let canonical = mcp::tools::all().filter(|t| t.toolset() == domain::principal::Toolset::Canonical).count();
    assert_eq!(listed.len(), canonical, "the enterprise plan with every scope sees every canonical tool");
    // The first branch of each output schema is the success shape (the second, the error shape).
    let schema_of =
        |name: &str| listed.iter().find(|t| t["name"] == name.replace('.', "_")).unwrap()["outputSchema"]["anyOf"][0].clone();
    for t in &listed {
        assert_eq!(t["outputSchema"]["type"], "object");
        assert_eq!(t["outputSchema"]["anyOf"].as_array().map(Vec::len), Some(2), "{}", t["name"]);
    }

    let calls: Vec<(&str, Value)> = vec![
        (
            "memory.write_conversational",
            json!({"session": "onboarding", "role": "user", "content": "How do Acme renewals work?"}),
        ),
        (
            "memory.write_conversational",
            json!({"session": "onboarding", "role": "assistant", "content": "They need the CFO above 50k."}),
        ),
        ("memory.read_conversational", json!({"session": "onboarding"})),
        ("memory.search_org", json!({"query": "acme renewals"})),
        ("memory.read_org", json!({"id": "dec-0"})),
        (
            "memory.propose",
            json!({"title": "Acme renewals need CFO and CRO", "body": "From 2027 the CRO signs too.", "kind": "decision", "supersedes": "dec-1", "session": "onboarding"}),
        ),
        ("memory.read_personal", json!({})),
        ("memory.list_decisions", json!({})),
        ("memory.remember", json!({"text": "Prefers renewal summaries as bullet points", "kind": "preference"})),
        ("memory.search", json!({"query": "renewals"})),
        ("session.get_context", json!({"entity": {"type": "account", "id": "acme-1"}, "session": "onboarding"})),
        ("session.summarize", json!({"session": "onboarding"})),
        ("session.list_recent", json!({})),
        ("spine.entity.get", json!({"type": "account", "id": "acme-1"})),
        ("spine.entity.search", json!({"query": "acme"})),
        ("spine.relationship.list", json!({"type": "account", "id": "acme-1"})),
        ("signal.list", json!({"entity": {"type": "account", "id": "acme-1"}})),
        ("signal.get", json!({"id": "sig-1"})),
        (
            "proposal.create",
            json!({"title": "Offer Acme a 5% renewal discount", "body": "Health dropped; retain them.", "entity": {"type": "account", "id": "acme-1"}}),
        ),
        ("book.list", json!({"project": "apollo"})),
        ("kb.search", json!({"query": "refund"})),
        ("playbook.handoff", json!({"goal": "Renew Acme", "entity": {"type": "account", "id": "acme-1"}})),
    ];
    let mut results = std::collections::HashMap::new();
    for (name, args) in &calls {
        let r = f.call(&key, name, args.clone()).await;
        assert_ne!(r["isError"], true, "{name} failed: {r}");
        let data = r["structuredContent"].clone();
        conforms(&schema_of(name), &data, name)
            .unwrap_or_else(|e| panic!("{name}: result does not match its output schema: {e}\n{data}"));
        assert!(r["content"][0]["text"].as_str().is_some_and(|s| !s.is_empty()), "{name} has a text rendering");
        results.insert(*name, data);
    }
    // proposal.status on what was proposed.
    let pid = results["memory.propose"]["proposal"]["id"].as_str().unwrap().to_owned();
    let r = f.call(&key, "proposal.status", json!({"id": pid})).await;
    conforms(&schema_of("proposal.status"), &r["structuredContent"], "proposal.status").unwrap();
    let state = r["structuredContent"]["proposal"]["state"].as_str().unwrap().to_owned();
    assert!(["written", "awaiting_approval", "rejected"].contains(&state.as_str()), "triage decided where it goes: {state}");
    assert!(r["structuredContent"]["proposal"]["score"]["total"].is_number());

    // The personal memory just remembered: updated, then forgotten.
    let mid = results["memory.remember"]["memory"]["id"].as_str().unwrap().to_owned();
    for (name, args) in [
        ("memory.update_personal", json!({"id": mid, "text": "Prefers renewal summaries as tables"})),
        ("memory.forget", json!({"id": mid})),
    ] {
        let r = f.call(&key, name, args).await;
        assert_ne!(r["isError"], true, "{name} failed: {r}");
        conforms(&schema_of(name), &r["structuredContent"], name).unwrap();
        assert!(r["content"][0]["text"].as_str().is_some_and(|s| !s.is_empty()), "{name} has a text rendering");
    }
    let found = &results["memory.search"]["results"];
    assert!(
        found.as_array().unwrap().iter().any(|r| r["kind"] == "turn" && r["text"].as_str().unwrap().contains("renewals")),
        "memory.search finds the session's turn: {found}"
    );

    // What each tool found is the seeded truth.
    assert_eq!(results["memory.read_conversational"]["turns"].as_array().unwrap().len(), 2);
    assert_eq!(
        results["memory.read_conversational"]["session"], "ada-user.onboarding",
        "sessions live in the caller's namespace"
    );
    let org_hits = results["memory.search_org"]["entries"].as_array().unwrap();
    assert_eq!(
        org_hits.iter().map(|e| e["id"].as_str().unwrap()).collect::<Vec<_>>(),
        ["dec-1"],
        "superseded entries are not searched"
    );
    // Each hit says why it was returned.
    let why = &org_hits[0]["why"];
    assert!(!why["found_by"].as_array().unwrap().is_empty(), "{why}");
    let matched: Vec<&str> = why["matched_terms"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(matched.contains(&"acme") && matched.contains(&"renewals"), "{why}");
    if results["memory.search_org"]["search"] == "hybrid" {
        assert!(why["keyword_rank"].is_u64() && why["score"].is_f64(), "{why}");
    }
    assert_eq!(results["memory.read_org"]["entry"]["superseded_by"], "dec-1", "lineage both ways");
    let prefs = results["memory.read_personal"]["patterns"].as_array().unwrap();
    assert_eq!(prefs.iter().map(|e| e["id"].as_str().unwrap()).collect::<Vec<_>>(), ["pref-1"], "only the caller's own patterns");
    assert_eq!(results["memory.propose"]["proposal"]["supersedes"], "dec-1");
    let ctx = &results["session.get_context"];
    assert_eq!(ctx["entity"]["attributes"]["name"], "Acme Corp");
    assert_eq!(ctx["relationships"].as_array().unwrap().len(), 1);
    assert_eq!(ctx["signals"][0]["kind"], "health_dropped", "newest first");
    // The proposal superseding dec-1 may have been approved by triage before
    // session.get_context ran: the current decision is then its successor.
    let current = if state == "written" {
        let org =
            f.services.backend.records.list_memory(&t, &MemoryScope::Org, &domain::PageRequest::first(50)).await.unwrap().items;
        let new = org.iter().find(|m| m.lineage.supersedes.as_ref().is_some_and(|s| s.as_str() == "dec-1")).expect("successor");
        assert_eq!(new.state, GovernanceState::Active);
        new.id.to_string()
    } else {
        "dec-1".to_owned()
    };
    let ctx_memory: Vec<&str> = ctx["memory"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    if current == "dec-1" {
        assert_eq!(ctx_memory.first().copied(), Some("dec-1"), "memory matching the entity's name");
    } else {
        assert!(!ctx_memory.contains(&"dec-1"), "a superseded entry is not context: {ctx_memory:?}");
    }
    assert_eq!(ctx["session"]["recent_turns"].as_array().unwrap().len(), 2);
    assert!(results["session.summarize"]["proposal"]["body"].as_str().unwrap().contains("CFO above 50k"));
    assert_eq!(results["session.list_recent"]["sessions"][0]["turns"], 2);
    assert_eq!(results["spine.relationship.list"]["relationships"][0]["kind"], "works_at");
    assert_eq!(results["signal.list"]["signals"].as_array().unwrap().len(), 2);
    assert_eq!(results["signal.get"]["signal"]["kind"], "health_dropped");
    assert_eq!(results["book.list"]["entries"][0]["title"], "Kick-off");
    assert_eq!(results["kb.search"]["documents"][0]["id"], "kb-7");
    let why = &results["kb.search"]["documents"][0]["why"];
    assert_eq!(why["matched_terms"], json!(["refund"]), "{why}");
    let steps = results["playbook.handoff"]["playbook"]["steps"].as_array().unwrap();
    if current == "dec-1" {
        assert!(steps.iter().any(|s| s["action"] == "follow_org_memory" && s["entry"] == "dec-1"), "{steps:?}");
    } else {
        assert!(!steps.iter().any(|s| s["entry"] == "dec-1"), "no step follows a superseded entry: {steps:?}");
    }
    assert!(steps.iter().any(|s| s["action"] == "address_signal"));

    // Walls 4 and 5: every proposal went through triage (scored, with reasons), and an
    // org entry is active only with an approving decision in the ledger — never a tool's.
    let proposals = f.services.backend.records.list_proposals(&t, None, &domain::PageRequest::first(50)).await.unwrap();
    assert_eq!(proposals.items.len(), 3);
    assert!(proposals.items.iter().all(|p| p.score.as_ref().is_some_and(|s| !s.reasons.is_empty())));
    let ledger = ports::records::AuditLog::list_audit(&f.services.backend.records, &t, &domain::PageRequest::first(500))
        .await
        .unwrap()
        .items;
    let active: Vec<MemoryEntry> = f
        .services
        .backend
        .records
        .list_memory(&t, &MemoryScope::Org, &domain::PageRequest::first(50))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|m| m.state == GovernanceState::Active && m.id.as_str() != "dec-1")
        .collect();
    for m in &active {
        let proposal = m.lineage.proposal.as_ref().expect("a governed entry names its proposal");
        assert!(
            ledger.iter().any(|a| a.target.as_deref() == Some(proposal.as_str())
                && (a.action == "proposal.auto_approved" || a.action == "proposal.approved")
                && !a.actor.starts_with("api_key")
                && a.actor != "ada-user"),
            "entry {} has an approving decision by governance or an approver",
            m.id
        );
    }
    let active: Vec<_> = f
        .services
        .backend
        .records
        .list_memory(&t, &MemoryScope::Org, &domain::PageRequest::first(50))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|m| m.state == GovernanceState::Active)
        .map(|m| m.id.to_string())
        .collect();
    assert!(active.len() <= 2, "{active:?}");
}

#[tokio::test]
async fn bad_arguments_and_missing_records_are_tool_errors() {
    let f = fixture().await;
    let key = f.tenant("acme", PlanTier::Enterprise, ALL, Some("ada-user")).await;
    seed(&f.services, &TenantId::new("acme").unwrap(), "ada-user").await;
    for (name, args, code) in [
        ("memory.read_org", json!({"id": "nope"}), "NOT_FOUND"),
        ("memory.read_org", json!({"id": "pref-1"}), "NOT_FOUND"),
        ("memory.propose", json!({"title": "", "body": "x", "kind": "decision"}), "INVALID_REQUEST"),
        ("memory.propose", json!({"title": "t", "body": "x", "kind": "gossip"}), "INVALID_REQUEST"),
        ("memory.propose", json!({"title": "t", "body": "x", "kind": "decision", "supersedes": "dec-0"}), "INVALID_REQUEST"),
        ("memory.write_conversational", json!({"session": "s", "role": "robot", "content": "x"}), "INVALID_REQUEST"),
        (
            "memory.write_conversational",
            json!({"session": "s", "role": "user", "content": "x".repeat(70_000)}),
            "INVALID_REQUEST",
        ),
        ("memory.write_conversational", json!({"session": "a/b", "role": "user", "content": "x"}), "INVALID_REQUEST"),
        ("memory.read_conversational", json!({"session": "s", "extra": 1}), "INVALID_REQUEST"),
        ("session.get_context", json!({}), "INVALID_REQUEST"),
        ("session.summarize", json!({"session": "never-used"}), "NOT_FOUND"),
        ("spine.relationship.list", json!({"type": "account", "id": "acme-1", "direction": "sideways"}), "INVALID_REQUEST"),
        ("signal.get", json!({"id": "nope"}), "NOT_FOUND"),
        ("proposal.status", json!({"id": "nope"}), "NOT_FOUND"),
        ("kb.search", json!({"query": "x".repeat(600)}), "INVALID_REQUEST"),
        ("playbook.handoff", json!({"goal": ""}), "INVALID_REQUEST"),
    ] {
        let r = f.call(&key, name, args.clone()).await;
        assert_eq!(r["isError"], true, "{name} {args}: {r}");
        let listed = f.tools(&key).await;
        let error_branch =
            listed.iter().find(|t| t["name"] == name.replace('.', "_")).unwrap()["outputSchema"]["anyOf"][1].clone();
        conforms(&error_branch, &r["structuredContent"], name).unwrap();
        assert_eq!(r["structuredContent"]["code"], code, "{name} {args}: {r}");
    }
}

/// Another caller's sessions are out of reach, even by their full id.
#[tokio::test]
async fn sessions_are_private_to_their_owner() {
    let f = fixture().await;
    let ada = f.tenant("acme", PlanTier::Enterprise, ALL, Some("ada-user")).await;
    f.principal(&TenantId::new("acme").unwrap(), "bob-user").await;
    let bob = f
        .services
        .admin
        .create_key(KeyRequest {
            tenant: TenantId::new("acme").unwrap(),
            scopes: Scopes::parse(ALL).unwrap(),
            principal: Some(Id::new("bob-user").unwrap()),
            teams: vec![],
            projects: vec![],
        })
        .await
        .unwrap()
        .token;
    f.call(&ada, "memory.write_conversational", json!({"session": "private", "role": "user", "content": "my salary is 100"}))
        .await;
    // Bob naming Ada's full session id reads his own namespace, which is empty.
    let r = f.call(&bob, "memory.read_conversational", json!({"session": "ada-user.private"})).await;
    assert_eq!(r["structuredContent"]["session"], "bob-user.ada-user.private");
    assert!(r["structuredContent"]["turns"].as_array().unwrap().is_empty());
    let r = f.call(&bob, "session.list_recent", json!({})).await;
    assert!(r["structuredContent"]["sessions"].as_array().unwrap().is_empty());
    let r = f.call(&bob, "session.summarize", json!({"session": "ada-user.private"})).await;
    assert_eq!(r["structuredContent"]["code"], "NOT_FOUND");
}

/// `tools/list` per plan tier (every scope): names, titles, descriptions and schemas,
/// compared with the committed snapshots.
#[tokio::test]
async fn tools_list_snapshot_per_plan_tier() {
    let f = fixture().await;
    let dir = continuity_tests::manifest_dir().join("tests/snapshots").display().to_string();
    let update = std::env::var("CONTINUITY_UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1");
    let mut counts = Vec::new();
    for plan in [PlanTier::Free, PlanTier::Starter, PlanTier::Pro, PlanTier::Enterprise] {
        let key = f.tenant(&format!("snap-{plan}"), plan, ALL, None).await;
        let tools = f.tools(&key).await;
        counts.push(tools.len());
        let got = serde_json::to_string_pretty(&tools).unwrap() + "\n";
        let path = format!("{dir}/tools-list-{plan}.json");
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("missing snapshot {path}: run with CONTINUITY_UPDATE_SNAPSHOTS=1"));
        assert!(
            got == want,
            "tools/list for the {plan} plan differs from {path}; if intended, regenerate with CONTINUITY_UPDATE_SNAPSHOTS=1"
        );
    }
    // SPEC §5.3: each plan lists the canonical tools its tier reaches, each tier more than
    // the one below (free: the entity tools), enterprise all of them.
    let reach = |plan: PlanTier| {
        mcp::tools::all()
            .filter(|t| t.toolset() == domain::principal::Toolset::Canonical)
            .filter(|t| services::capabilities::typed::find(t.capability).is_some_and(|e| e.spec.min_tier <= plan))
            .count()
    };
    let expected: Vec<usize> = [PlanTier::Free, PlanTier::Starter, PlanTier::Pro, PlanTier::Enterprise].map(reach).to_vec();
    assert_eq!(counts, expected);
    assert!(counts.windows(2).take(2).all(|w| w[0] < w[1]), "each tier adds tools: {counts:?}");
    // The graph toolset, on a key that is offered both toolsets.
    // The graph and engineering toolsets, each on a key offered it beside the canonical tools.
    let mut listed: Vec<String> = Vec::new();
    for toolset in ["graph", "engineering"] {
        let t = TenantId::new(format!("snap-{toolset}")).unwrap();
        f.services
            .admin
            .create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas)
            .await
            .unwrap();
        let req = KeyRequest { tenant: t, scopes: Scopes::parse(ALL).unwrap(), principal: None, teams: vec![], projects: vec![] };
        let toolsets = domain::principal::Toolsets::parse(&format!("canonical,{toolset}")).unwrap();
        let key = f.services.admin.create_key_with_toolsets(req, toolsets).await.unwrap().token;
        let tools = f.tools(&key).await;
        let got = serde_json::to_string_pretty(&tools).unwrap() + "\n";
        let path = format!("{dir}/tools-list-{toolset}.json");
        if update {
            std::fs::write(&path, &got).unwrap();
        } else {
            let want = std::fs::read_to_string(&path)
                .unwrap_or_else(|_| panic!("missing snapshot {path}: run with CONTINUITY_UPDATE_SNAPSHOTS=1"));
            assert!(got == want, "tools/list with the {toolset} toolset differs from {path}");
        }
        listed.extend(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)));
    }
    // Every registered tool has a snapshot: a new one cannot ship unreviewed.
    for t in mcp::tools::all() {
        assert!(listed.iter().any(|n| n == t.name()), "the tool {} has no snapshot", t.name());
    }
}

#[tokio::test]
async fn resources_and_templates_read_real_data_through_the_adk() {
    let f = fixture().await;
    let key = f.tenant("acme", PlanTier::Enterprise, ALL, Some("ada-user")).await;
    seed(&f.services, &TenantId::new("acme").unwrap(), "ada-user").await;
    let list = f.rpc(&key, "resources/list", json!({})).await;
    let uris: Vec<&str> = list["result"]["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert_eq!(uris, ["continuity://schema", "continuity://capabilities"]);
    let templates = f.rpc(&key, "resources/templates/list", json!({})).await;
    let t: Vec<&str> =
        templates["result"]["resourceTemplates"].as_array().unwrap().iter().map(|r| r["uriTemplate"].as_str().unwrap()).collect();
    assert_eq!(t, ["continuity://entities/{type}/{id}", "continuity://projects/{project}/schema"]);
    let read = |uri: &'static str| {
        let (f, key) = (&f, key.clone());
        async move {
            let v = f.rpc(&key, "resources/read", json!({"uri": uri})).await;
            v["result"]["contents"][0]["text"].as_str().map(|t| serde_json::from_str::<Value>(t).unwrap()).unwrap_or(v)
        }
    };
    assert_eq!(read("continuity://entities/account/acme-1").await["attributes"]["name"], "Acme Corp");
    let caps = read("continuity://capabilities").await;
    assert!(
        caps.as_array()
            .unwrap()
            .iter()
            .any(|c| c["tool"] == "memory_search_org" && c["capability"] == "memory.search_org" && c["allowed"] == true)
    );
    assert!(caps.as_array().unwrap().iter().any(|c| c["tool"].is_null() && c["capability"] == "task.dispatch"));
    let project = read("continuity://projects/apollo/schema").await;
    assert_eq!((project["project"].as_str(), project["department"].as_str()), (Some("apollo"), Some("customer_success")));
    for bad in ["continuity://entities/account/nope", "continuity://nothing", "continuity://projects/a#b/schema"] {
        let v = read(bad).await;
        assert!(v["error"]["code"].is_i64(), "{bad}: {v}");
    }
    // Without mcp:resources there is nothing to list or read.
    let narrow = f.services.admin.create_key(KeyRequest {
        tenant: TenantId::new("acme").unwrap(),
        scopes: Scopes::parse("mcp:tools tenant:read").unwrap(),
        principal: None,
        teams: vec![],
        projects: vec![],
    });
    let narrow = narrow.await.unwrap().token;
    assert!(f.rpc(&narrow, "resources/list", json!({})).await["result"]["resources"].as_array().unwrap().is_empty());
    assert!(f.rpc(&narrow, "resources/read", json!({"uri": "continuity://schema"})).await["error"].is_object());
}

#[tokio::test]
async fn prompts_assemble_real_context() {
    let f = fixture().await;
    let key = f.tenant("acme", PlanTier::Enterprise, ALL, Some("ada-user")).await;
    seed(&f.services, &TenantId::new("acme").unwrap(), "ada-user").await;
    f.call(
        &key,
        "memory.write_conversational",
        json!({"session": "monday", "role": "user", "content": "Plan the Apollo launch"}),
    )
    .await;
    // Hedged, so triage leaves it to a person: it waits for a decision.
    let proposed = f
        .call(&key, "proposal.create", json!({"title": "Move the Apollo launch", "body": "Maybe move the Apollo launch two weeks later so onboarding can finish first."}))
        .await;
    assert_eq!(proposed["structuredContent"]["proposal"]["state"], "awaiting_approval", "{proposed}");
    let list = f.rpc(&key, "prompts/list", json!({})).await;
    let names: Vec<&str> = list["result"]["prompts"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["project_handoff_summary", "morning_brief"]);
    assert_eq!(list["result"]["prompts"][0]["arguments"][0]["required"], true);
    let get = |name: &'static str, args: Value| {
        let (f, key) = (&f, key.clone());
        async move { f.rpc(&key, "prompts/get", json!({"name": name, "arguments": args})).await }
    };
    let brief = get("morning_brief", json!({})).await;
    let text = brief["result"]["messages"][0]["content"]["text"].as_str().unwrap().to_owned();
    for fact in
        ["health_dropped on account:acme-1", "Move the Apollo launch", "ada-user.monday", "Acme renewals need CFO sign-off"]
    {
        assert!(text.contains(fact), "the brief lacks {fact:?}:\n{text}");
    }
    let handoff = get("project_handoff_summary", json!({"project": "apollo"})).await;
    let text = handoff["result"]["messages"][0]["content"]["text"].as_str().unwrap().to_owned();
    assert!(text.contains("Kick-off") && text.contains("Scope agreed with Acme."), "{text}");
    assert_eq!(get("project_handoff_summary", json!({})).await["error"]["code"], -32602);
    assert_eq!(get("no_such_prompt", json!({})).await["error"]["code"], -32602);
    // The free plan cannot read context, so it gets no prompts.
    let free = f.tenant("free-co", PlanTier::Free, ALL, None).await;
    assert!(f.rpc(&free, "prompts/list", json!({})).await["result"]["prompts"].as_array().unwrap().is_empty());
}

/// Every call is audited: a write before it answers, a read with the next group write.
#[tokio::test]
async fn every_call_reaches_the_audit_ledger() {
    use ports::records::AuditLog;
    let f = fixture().await;
    let key = f.tenant("acme", PlanTier::Enterprise, ALL, Some("ada-user")).await;
    let t = TenantId::new("acme").unwrap();
    f.call(&key, "memory.write_conversational", json!({"session": "a", "role": "user", "content": "x"})).await;
    let ledger = f.services.backend.records.list_audit(&t, &domain::PageRequest::first(50)).await.unwrap();
    assert!(ledger.items.iter().any(|a| a.action == "tool:memory_write_conversational"), "a write is audited before it answers");
    f.call(&key, "spine.entity.search", json!({"query": "x"})).await;
    let mut found = false;
    for _ in 0..500 {
        let ledger = f.services.backend.records.list_audit(&t, &domain::PageRequest::first(50)).await.unwrap();
        if ledger.items.iter().any(|a| a.action == "tool:spine_entity_search") {
            found = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(found, "the read's audit record was written");

    // A read's record waits (≤ READ_LINGER) for company, but a write queued after it
    // flushes the group: once the write answers, the earlier read is in the ledger too.
    f.call(&key, "spine.entity.list", json!({})).await;
    f.call(&key, "memory.write_conversational", json!({"session": "b", "role": "user", "content": "y"})).await;
    let ledger = f.services.backend.records.list_audit(&t, &domain::PageRequest::first(50)).await.unwrap();
    assert!(ledger.items.iter().any(|a| a.action == "tool:spine.entity.list"), "the write flushed the read queued before it");
}

/// `memory_read_personal` answers newest first and pages with a cursor, so every personal
/// memory is reachable however many there are (before: the oldest 500, no cursor).
#[tokio::test]
async fn personal_memory_reads_newest_first_and_pages() {
    let f = fixture().await;
    let key = f.tenant("acme", PlanTier::Enterprise, ALL, Some("ada-user")).await;
    for i in 0..7 {
        let r = f.call(&key, "memory_remember", json!({"text": format!("Preference number {i} of seven")})).await;
        assert_eq!(r["isError"], false, "{r}");
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..5 {
        let mut args = json!({"limit": 3});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let r = f.call(&key, "memory_read_personal", args).await;
        let page = &r["structuredContent"];
        seen.extend(page["patterns"].as_array().unwrap().iter().map(|p| p["body"].as_str().unwrap().to_owned()));
        cursor = page["next_cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    let want: Vec<String> = (0..7).rev().map(|i| format!("Preference number {i} of seven")).collect();
    assert_eq!(seen, want, "newest first, each once, all reachable");
    let bad = f.call(&key, "memory_read_personal", json!({"cursor": "zz"})).await;
    assert_eq!(bad["structuredContent"]["code"], "INVALID_REQUEST", "{bad}");
}
