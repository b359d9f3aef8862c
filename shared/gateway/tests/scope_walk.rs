//! The scope walk over MCP itself (SPEC §3.2, wall 6): with a key holding each single
//! scope (plus `mcp:tools mcp:resources`), every resource and resource template, and
//! every prompt, is listed and read through the router; none shows memory — an org
//! entry, a turn, a waiting proposal, all marked with a canary — because none of those
//! keys holds `memory:read` together with what the prompt needs. The tools are walked the
//! same way, against a table, in `tests/hardening.rs` (`scope_walk_*`) on both backends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use domain::memory::{GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType};
use domain::principal::Scopes;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{Id, TenantId};
use ports::records::{Expect, MemoryStore};
use serde_json::{Value, json};

const CANARY: &str = "QWCANARY";

#[tokio::test]
async fn no_resource_or_prompt_shows_memory_without_memory_read() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::services(dir.path());
    let app = common::app(&s, "http://localhost");
    let t = TenantId::new("walk").unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let key = |scopes: &str| {
        let s = s.clone();
        let t = t.clone();
        let scopes = scopes.to_owned();
        async move {
            s.admin
                .create_key(services::admin::KeyRequest {
                    tenant: t,
                    scopes: Scopes::parse(&scopes).unwrap(),
                    principal: None,
                    teams: vec![],
                    projects: vec![],
                })
                .await
                .unwrap()
                .token
        }
    };
    // Memory with canaries: an org entry, a turn, a proposal waiting for a person.
    let now = s.backend.clock.now();
    s.backend
        .records
        .put_memory(
            &MemoryEntry {
                tenant: t.clone(),
                id: Id::new("dec-1").unwrap(),
                memory_type: MemoryType::Org,
                scope: MemoryScope::Org,
                kind: "decision".into(),
                title: format!("Globex owner {CANARY}"),
                body: format!("Globex is run by the CSM {CANARY}."),
                state: GovernanceState::Active,
                lineage: Lineage::default(),
                created_by: Id::new("cfo").unwrap(),
                created_at: now,
                updated_at: now,
                version: 0,
                occurred_at: None,
                expires_at: None,
                metadata: None,
            },
            Expect::Absent,
        )
        .await
        .unwrap();
    // Indexed, as the writer indexes what it activates.
    s.search
        .index(services::search::IndexRequest {
            tenant: &t,
            scope: &MemoryScope::Org,
            kind: ports::search::DocKind::Memory,
            doc: &Id::new("dec-1").unwrap(),
            title: &format!("Globex owner {CANARY}"),
            body: &format!("Globex is run by the CSM {CANARY}."),
            at: now,
            occurred: None,
        })
        .await
        .unwrap();
    let writer = s.auth.authenticate_token(&key("mcp:tools memory:write").await, "http://localhost").await.unwrap();
    s.capabilities
        .execute(&writer, "memory.write_conversational", json!({"session": "s", "role": "user", "content": CANARY}))
        .await
        .unwrap();
    let waiting = s
        .capabilities
        .execute(
            &writer,
            "memory.propose",
            json!({"title": format!("Globex escalations {CANARY}"), "kind": "pattern",
                   "body": format!("Maybe Globex escalations should go to the CSM first {CANARY}.")}),
        )
        .await
        .unwrap();
    assert_eq!(waiting.data["proposal"]["state"], "awaiting_approval", "{}", waiting.data);
    let mut attrs = domain::value::Attributes::new();
    attrs.insert("name".into(), domain::value::Value::Text("Globex".into()));
    let operator = s.admin.operator(&t).await.unwrap();
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

    let mut walked = 0;
    for scope in ["tenant:read", "tenant:write", "memory:read", "memory:write", "approvals:decide", "admin"] {
        let k = key(&format!("mcp:tools mcp:resources {scope}")).await;
        let mut seen = Vec::new();
        let call = |method: &'static str, params: Value| {
            let (app, k) = (app.clone(), k.clone());
            async move { common::post_mcp(&app, &k, &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})).await.1 }
        };
        let listed = call("resources/list", json!({})).await;
        let mut uris: Vec<String> =
            listed["result"]["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap().to_owned()).collect();
        assert!(!uris.is_empty(), "{scope}: resources are listed with mcp:resources: {listed}");
        let templates = call("resources/templates/list", json!({})).await;
        assert_eq!(templates["result"]["resourceTemplates"].as_array().unwrap().len(), 2, "{templates}");
        uris.extend(["continuity://entities/account/acct-1".to_owned(), "continuity://projects/globex/schema".to_owned()]);
        for uri in &uris {
            seen.push(call("resources/read", json!({"uri": uri})).await.to_string());
            walked += 1;
        }
        let prompts = call("prompts/list", json!({})).await;
        seen.push(prompts.to_string());
        for (name, args) in [("project_handoff_summary", json!({"project": "Globex"})), ("morning_brief", json!({}))] {
            seen.push(call("prompts/get", json!({"name": name, "arguments": args})).await.to_string());
            walked += 1;
        }
        for shown in seen {
            assert!(!shown.contains(CANARY), "{scope} sees memory: {shown}");
        }
    }
    assert_eq!(walked, 6 * 6, "every resource and prompt, for every scope");
    // The walk can see memory: a key holding tenant:read and memory:read gets it in a prompt.
    let both = key("mcp:tools mcp:resources tenant:read memory:read").await;
    let got =
        common::rpc(&app, &both, "prompts/get", json!({"name": "project_handoff_summary", "arguments": {"project": "Globex"}}))
            .await;
    assert!(got.to_string().contains(CANARY), "{got}");
}
