//! The `graph` toolset through MCP: the reference memory server's tools and semantics,
//! offered only to credentials that enable the toolset, over the caller's personal scope
//! or one of its projects — never another user's, never org.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use domain::TenantId;
use domain::principal::{Scopes, Toolsets};
use domain::tenant::{Department, Industry, PlanTier};
use gateway::App;
use serde_json::{Value, json};
use services::Services;
use services::admin::KeyRequest;

/// How many canonical tools an enterprise key with every scope lists.
fn canonical_tools() -> usize {
    mcp::tools::all().filter(|t| t.toolset() == domain::principal::Toolset::Canonical).count()
}

const ALL: &str = "mcp:tools mcp:resources tenant:read tenant:write memory:read memory:write";

struct F {
    app: App,
    services: Services,
    _dir: tempfile::TempDir,
}

async fn fixture() -> F {
    let dir = tempfile::tempdir().unwrap();
    let services = common::services(dir.path());
    services
        .admin
        .create_tenant(TenantId::new("acme").unwrap(), PlanTier::Pro, Department::CustomerSuccess, Industry::Saas)
        .await
        .unwrap();
    let app = common::app(&services, "http://localhost");
    F { app, services, _dir: dir }
}

impl F {
    async fn key(&self, toolsets: &str, projects: &[&str]) -> String {
        let req = KeyRequest {
            tenant: TenantId::new("acme").unwrap(),
            scopes: Scopes::parse(ALL).unwrap(),
            principal: None,
            teams: vec![],
            projects: projects.iter().map(|p| (*p).to_owned()).collect(),
        };
        self.services.admin.create_key_with_toolsets(req, Toolsets::parse(toolsets).unwrap()).await.unwrap().token
    }

    async fn rpc(&self, key: &str, method: &str, params: Value) -> Value {
        common::rpc(&self.app, key, method, params).await
    }

    async fn call(&self, key: &str, name: &str, args: Value) -> Value {
        self.rpc(key, "tools/call", json!({"name": name, "arguments": args})).await["result"].clone()
    }
}

#[tokio::test]
async fn the_reference_memory_tools_with_their_semantics() {
    let f = fixture().await;
    let key = f.key("canonical,graph", &["apollo"]).await;
    let tools: Vec<String> = f.rpc(&key, "tools/list", json!({})).await["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    for t in services::graph::TOOLS {
        assert!(tools.iter().any(|x| x == t), "{t} listed: {tools:?}");
    }
    assert_eq!(tools.len(), canonical_tools() + services::graph::TOOLS.len(), "every canonical and graph tool");

    let created = f
        .call(
            &key,
            "create_entities",
            json!({"entities": [
                {"name": "Ada", "entityType": "person", "observations": ["Speaks French"]},
                {"name": "Acme", "entityType": "organization", "observations": []},
                {"name": "Ada", "entityType": "person", "observations": ["duplicate in the call"]}
            ]}),
        )
        .await;
    assert_eq!(created["structuredContent"]["result"].as_array().unwrap().len(), 2, "{created}");
    // Existing names are skipped, as the reference does.
    let again =
        f.call(&key, "create_entities", json!({"entities": [{"name": "Ada", "entityType": "person", "observations": []}]})).await;
    assert_eq!(again["structuredContent"]["result"], json!([]));
    let rel =
        f.call(&key, "create_relations", json!({"relations": [{"from": "Ada", "to": "Acme", "relationType": "works_at"}]})).await;
    assert_eq!(rel["structuredContent"]["result"].as_array().unwrap().len(), 1);
    let obs = f
        .call(
            &key,
            "add_observations",
            json!({"observations": [{"entityName": "Ada", "contents": ["Likes tea", "Speaks French"]}]}),
        )
        .await;
    assert_eq!(obs["structuredContent"]["result"][0]["addedObservations"], json!(["Likes tea"]), "only new observations");
    let missing = f.call(&key, "add_observations", json!({"observations": [{"entityName": "Nobody", "contents": ["x"]}]})).await;
    assert_eq!((missing["isError"].as_bool(), missing["structuredContent"]["code"].as_str()), (Some(true), Some("NOT_FOUND")));
    let found = f.call(&key, "search_nodes", json!({"query": "TEA"})).await;
    assert_eq!(found["structuredContent"]["entities"][0]["name"], "Ada", "case-insensitive, observations searched");
    assert_eq!(
        found["structuredContent"]["relations"][0]["relationType"], "works_at",
        "relations touching a found entity (the 2026 reference), here to Acme, which was not found"
    );
    let opened = f.call(&key, "open_nodes", json!({"names": ["Ada", "Acme", "Nobody"]})).await;
    assert_eq!(opened["structuredContent"]["entities"].as_array().unwrap().len(), 2);
    assert_eq!(opened["structuredContent"]["relations"][0]["relationType"], "works_at");
    f.call(&key, "delete_observations", json!({"deletions": [{"entityName": "Ada", "observations": ["Speaks French"]}]})).await;
    f.call(&key, "delete_entities", json!({"entityNames": ["Acme"]})).await;
    let graph = f.call(&key, "read_graph", json!({})).await;
    assert_eq!(
        graph["structuredContent"]["entities"],
        json!([{"name": "Ada", "entityType": "person", "observations": ["Likes tea"]}])
    );
    assert_eq!(graph["structuredContent"]["relations"], json!([]), "deleting an entity deletes its relations");
    let text: Value = serde_json::from_str(graph["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["entities"], graph["structuredContent"]["entities"], "the text is the structured content as JSON");

    // A project graph is separate; only projects of the key are reachable; org never.
    f.call(
        &key,
        "create_entities",
        json!({"scope": "project:apollo", "entities": [{"name": "Launch", "entityType": "event", "observations": []}]}),
    )
    .await;
    assert_eq!(
        f.call(&key, "read_graph", json!({"scope": "project:apollo"})).await["structuredContent"]["entities"][0]["name"],
        "Launch"
    );
    assert_eq!(f.call(&key, "read_graph", json!({})).await["structuredContent"]["entities"].as_array().unwrap().len(), 1);
    for (scope, code) in
        [("project:zephyr", "FORBIDDEN"), ("org", "INVALID_REQUEST"), ("personal:someone-else", "INVALID_REQUEST")]
    {
        let r = f.call(&key, "read_graph", json!({"scope": scope})).await;
        assert_eq!(r["structuredContent"]["code"], code, "{scope}: {r}");
    }
    // Another user's personal graph is theirs alone.
    let other = f.key("graph", &[]).await;
    assert_eq!(f.call(&other, "read_graph", json!({})).await["structuredContent"]["entities"], json!([]));
}

#[tokio::test]
async fn the_graph_toolset_is_offered_only_where_enabled() {
    let f = fixture().await;
    let canonical = f.key("canonical", &[]).await;
    let tools = f.rpc(&canonical, "tools/list", json!({})).await["result"]["tools"].as_array().unwrap().len();
    assert_eq!(tools, canonical_tools());
    let r = f.call(&canonical, "read_graph", json!({})).await;
    assert_eq!(r["structuredContent"]["code"], "CAPABILITY_NOT_FOUND");
    let graph_only = f.key("graph", &[]).await;
    let names: Vec<String> = f.rpc(&graph_only, "tools/list", json!({})).await["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.len(), services::graph::TOOLS.len(), "{names:?}");
    assert_eq!(
        f.call(&graph_only, "spine.entity.get", json!({"type": "account", "id": "x"})).await["structuredContent"]["code"],
        "CAPABILITY_NOT_FOUND"
    );
    // Bad input is a tool error, never a crash.
    for args in
        [json!({"entities": "nope"}), json!({"entities": [{"name": "", "entityType": "x", "observations": []}]}), json!({})]
    {
        let r = f.call(&graph_only, "create_entities", args.clone()).await;
        assert_eq!(r["structuredContent"]["code"], "INVALID_REQUEST", "{args}: {r}");
    }
}

/// `read_graph`, `search_nodes` and `open_nodes` page on request (`limit`, `maxTokens`,
/// `cursor` → `nextCursor`); without them the whole answer, as the reference gives it.
#[tokio::test]
async fn graph_reads_page_and_keep_to_a_token_budget() {
    let f = fixture().await;
    let key = f.key("canonical,graph", &[]).await;
    let entities: Vec<Value> = (0..30)
        .map(|i| json!({"name": format!("node-{i:02}"), "entityType": "service", "observations": [format!("owned by team {}", i % 3)]}))
        .collect();
    f.call(&key, "create_entities", json!({"entities": entities})).await;
    let relations: Vec<Value> = (0..29)
        .map(|i| json!({"from": format!("node-{i:02}"), "to": format!("node-{:02}", i + 1), "relationType": "calls"}))
        .collect();
    f.call(&key, "create_relations", json!({"relations": relations})).await;

    let whole = f.call(&key, "read_graph", json!({})).await["structuredContent"].clone();
    assert_eq!((whole["entities"].as_array().unwrap().len(), whole["relations"].as_array().unwrap().len()), (30, 29));
    assert!(whole.get("nextCursor").is_none(), "the reference's answer, whole: {whole}");

    // Pages of 8: every entity and every relation exactly once.
    let (mut names, mut edges, mut pages, mut cursor) = (Vec::new(), Vec::new(), 0, Value::Null);
    loop {
        let page = f.call(&key, "read_graph", json!({"limit": 8, "cursor": cursor})).await["structuredContent"].clone();
        let got = page["entities"].as_array().unwrap();
        assert!(got.len() <= 8 && !got.is_empty(), "{page}");
        names.extend(got.iter().map(|e| e["name"].as_str().unwrap().to_owned()));
        edges.extend(page["relations"].as_array().unwrap().iter().map(|r| r["from"].as_str().unwrap().to_owned()));
        pages += 1;
        match page.get("nextCursor") {
            Some(c) => cursor = c.clone(),
            None => break,
        }
    }
    assert_eq!(pages, 4);
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 30);
    assert_eq!(edges.len(), 29, "each relation on one page");

    // A token budget: a small answer, and a cursor to go on.
    let small = f.call(&key, "read_graph", json!({"maxTokens": 120})).await["structuredContent"].clone();
    let n = small["entities"].as_array().unwrap().len();
    assert!((1..30).contains(&n), "{small}");
    assert!(serde_json::to_string(&small["entities"]).unwrap().len() <= 4 * 120 + 200, "{small}");
    assert_eq!(small["nextCursor"], format!("graph:{n}"));

    // search_nodes and open_nodes page the same way.
    let found = f.call(&key, "search_nodes", json!({"query": "team 1", "limit": 3})).await["structuredContent"].clone();
    assert_eq!(found["entities"].as_array().unwrap().len(), 3);
    assert!(found["nextCursor"].is_string(), "10 match: {found}");
    // Paged, a found node's relations to nodes outside the answer come too, each once.
    let whole = f.call(&key, "search_nodes", json!({"query": "team 1"})).await["structuredContent"].clone();
    let mut all: Vec<String> = whole["relations"].as_array().unwrap().iter().map(|r| r.to_string()).collect();
    assert_eq!(all.len(), 20, "nodes 1, 4, … 28 each call the next and are called by the one before: {whole}");
    let (mut paged, mut cursor) = (Vec::new(), Value::Null);
    loop {
        let page =
            f.call(&key, "search_nodes", json!({"query": "team 1", "limit": 3, "cursor": cursor})).await["structuredContent"]
                .clone();
        paged.extend(page["relations"].as_array().unwrap().iter().map(|r| r.to_string()));
        match page.get("nextCursor") {
            Some(c) => cursor = c.clone(),
            None => break,
        }
    }
    all.sort();
    paged.sort();
    assert_eq!(paged, all, "every relation of the answer on exactly one page");
    let opened = f.call(&key, "open_nodes", json!({"names": ["node-01", "node-02", "node-03"], "limit": 2})).await;
    assert_eq!(opened["structuredContent"]["entities"].as_array().unwrap().len(), 2);

    // A cursor it did not give, or a limit out of range: refused.
    let bad = f.call(&key, "read_graph", json!({"cursor": "page-2"})).await;
    assert_eq!((bad["isError"].as_bool(), bad["structuredContent"]["code"].as_str()), (Some(true), Some("INVALID_REQUEST")));
    let bad = f.call(&key, "read_graph", json!({"limit": 0})).await;
    assert_eq!(bad["isError"], true, "{bad}");
}

/// An empty query on an empty graph answers (every entity matches the empty string, as in
/// the reference server) — before, it never answered.
#[tokio::test]
async fn an_empty_query_on_an_empty_graph_answers() {
    let f = fixture().await;
    let key = f.key("canonical,graph", &[]).await;
    let r = f.call(&key, "search_nodes", json!({"query": ""})).await;
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["entities"], json!([]), "{r}");
    f.call(&key, "create_entities", json!({"entities": [{"name": "Ada", "entityType": "person", "observations": []}]})).await;
    let r = f.call(&key, "search_nodes", json!({"query": ""})).await;
    assert_eq!(r["structuredContent"]["entities"].as_array().map(Vec::len), Some(1), "{r}");
}
