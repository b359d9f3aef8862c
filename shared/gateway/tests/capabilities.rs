//! Every taxonomy answer of the capability resolver, table-driven, through BOTH edges:
//! the capability API (`/v1/capabilities`) and MCP `tools/call` — same router, in
//! process, on an embedded backend.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use axum::body::Body;
use domain::connector::{ConnectorSource, ConnectorState};
use domain::principal::Scopes;
use domain::spine::PoleClass;
use domain::tenant::{Department, Industry, PlanTier};
use domain::value::Attributes;
use domain::{EntityType, Id, TenantId};
use gateway::App;
use http::Request;
use http_body_util::BodyExt;
use ports::records::{ConnectorStore, Expect};
use serde_json::{Value, json};
use services::Services;
use services::admin::KeyRequest;
use tower::ServiceExt;

struct Fixture {
    app: App,
    services: Services,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let services = common::services(dir.path());
    let app = common::app(&services, "http://test");
    Fixture { app, services, _dir: dir }
}

impl Fixture {
    async fn tenant(&self, slug: &str, plan: PlanTier, d: Department, i: Industry, scopes: &str) -> String {
        let t = TenantId::new(slug).unwrap();
        self.services.admin.create_tenant(t.clone(), plan, d, i).await.unwrap();
        let req =
            KeyRequest { tenant: t, scopes: Scopes::parse(scopes).unwrap(), principal: None, teams: vec![], projects: vec![] };
        self.services.admin.create_key(req).await.unwrap().token
    }

    async fn connector(&self, slug: &str, source: &str, path: &[(ConnectorState, Option<f64>)]) {
        let t = TenantId::new(slug).unwrap();
        let s = ConnectorSource::new(source).unwrap();
        for (state, progress) in path {
            self.services
                .backend
                .records
                .transition_connector(&t, &s, *state, *progress, None, domain::Timestamp(1))
                .await
                .unwrap();
        }
    }

    async fn http(&self, method: &str, path: &str, key: &str, body: Option<Value>) -> (u16, http::HeaderMap, Value) {
        let mut b = Request::builder().method(method).uri(path).header("authorization", format!("Bearer {key}"));
        if body.is_some() {
            b = b.header("content-type", "application/json");
        }
        let req = b.body(body.map_or_else(Body::empty, |v| Body::from(v.to_string()))).unwrap();
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, headers, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// One JSON-RPC request to `/mcp`; returns the whole response message.
    async fn rpc(&self, key: &str, method: &str, params: Value) -> Value {
        common::rpc(&self.app, key, method, params).await
    }

    async fn tool(&self, key: &str, name: &str, args: Value) -> Value {
        self.rpc(key, "tools/call", json!({"name": name, "arguments": args})).await["result"].clone()
    }
}

const ALL: &str = "mcp:tools mcp:resources tenant:read tenant:write memory:read memory:write";

#[tokio::test]
async fn every_resolver_answer_through_both_edges() {
    let f = fixture().await;
    let free = f.tenant("free-co", PlanTier::Free, Department::CustomerSuccess, Industry::Saas, ALL).await;
    let pro = f.tenant("pro-co", PlanTier::Pro, Department::CustomerSuccess, Industry::Saas, ALL).await;
    let syncing = f.tenant("sync-co", PlanTier::Pro, Department::CustomerSuccess, Industry::Saas, ALL).await;
    f.connector(
        "sync-co",
        "hubspot",
        &[
            (ConnectorState::OauthPending, None),
            (ConnectorState::OauthComplete, None),
            (ConnectorState::SyncingInitial, Some(0.3)),
        ],
    )
    .await;
    let narrow = f.tenant("narrow-co", PlanTier::Pro, Department::CustomerSuccess, Industry::Saas, "mcp:tools").await;

    // (case, key, HTTP capability + body, HTTP status, MCP tool + args, code)
    let cases = [
        (
            "plan",
            &free,
            "memory.search_org",
            json!({"query": "renewals"}),
            403,
            "memory.search_org",
            json!({"query": "renewals"}),
            "PLAN_INSUFFICIENT",
        ),
        ("unknown", &pro, "weather.today", json!({}), 404, "weather.today", json!({}), "CAPABILITY_NOT_FOUND"),
        (
            "connector absent",
            &pro,
            "connector.write",
            json!({"source": "hubspot"}),
            403,
            "signal.list",
            json!({}),
            "CONNECTOR_NOT_AVAILABLE",
        ),
        (
            "connector syncing",
            &syncing,
            "connector.write",
            json!({"source": "hubspot"}),
            202,
            "signal.list",
            json!({}),
            "CONNECTOR_SYNCING",
        ),
        (
            "scope",
            &narrow,
            "spine.entity.get",
            json!({"type": "account", "id": "a"}),
            403,
            "spine.entity.get",
            json!({"type": "account", "id": "a"}),
            "FORBIDDEN",
        ),
        (
            "schema",
            &pro,
            "spine.entity.get",
            json!({"type": "patient", "id": "p"}),
            400,
            "spine.entity.get",
            json!({"type": "patient", "id": "p"}),
            "INVALID_REQUEST",
        ),
    ];
    for (case, key, cap, body, status, tool, args, code) in cases {
        let (got_status, headers, v) = f.http("POST", &format!("/v1/capabilities/{cap}"), key, Some(body)).await;
        assert_eq!(got_status, status, "{case}: {v}");
        let http_err = &v["error"];
        assert_eq!(http_err["code"], code, "{case}");
        let mcp = f.tool(key, tool, args).await;
        if code == "FORBIDDEN" {
            // A key without tenant:read: HTTP names the scope; MCP refuses the same way.
            let www = headers.get("www-authenticate").unwrap().to_str().unwrap();
            assert!(www.contains("insufficient_scope") && www.contains("tenant:read"), "{www}");
        }
        assert_eq!(mcp["isError"], true, "{case}");
        let mcp_err = &mcp["structuredContent"];
        assert_eq!(mcp_err["code"], code, "{case} over MCP");
        for err in [http_err, mcp_err] {
            match code {
                "PLAN_INSUFFICIENT" => assert!(err["upgrade_url"].as_str().unwrap().contains("plan=pro"), "{case}"),
                "CONNECTOR_NOT_AVAILABLE" => {
                    assert!(err["connect_url"].as_str().unwrap().starts_with("/v1/connectors"), "{case}")
                }
                "CONNECTOR_SYNCING" => {
                    assert_eq!(err["syncing"], true, "{case}");
                    assert_eq!(err["progress"], 0.3, "{case}: the recorded progress, nothing fabricated");
                    assert!(err["data"].is_null(), "{case}: no data while syncing");
                }
                _ => {}
            }
        }
    }
}

#[tokio::test]
async fn listing_shows_what_unlocks_the_rest() {
    let f = fixture().await;
    let key = f.tenant("starter-co", PlanTier::Starter, Department::Finance, Industry::Saas, ALL).await;
    let (status, _, v) = f.http("GET", "/v1/capabilities", &key, None).await;
    assert_eq!(status, 200);
    assert_eq!(v["plan"], "starter");
    let caps = v["capabilities"].as_array().unwrap();
    let find = |n: &str| caps.iter().find(|c| c["name"] == n).unwrap().clone();
    assert_eq!(find("spine.entity.get")["allowed"], true);
    assert_eq!(find("memory.search_org")["allowed"], false);
    assert_eq!(find("memory.search_org")["unlock_tier"], "pro");
    assert_eq!(find("memory.search_org")["route"], "VECTOR_INDEX");
    assert_eq!(caps.len(), services::capabilities::typed::REGISTRY.len(), "every capability, allowed or not");
    assert!(caps.iter().all(|c| c["description"].as_str().is_some_and(|d| !d.is_empty())), "each says what it does");

    // tools/list shows only what the plan (starter) and the key's scopes allow.
    let v = f.rpc(&key, "tools/list", json!({})).await;
    let names: Vec<&str> = v["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "memory_read_conversational",
            "memory_write_conversational",
            "memory_read_personal",
            "memory_search",
            "memory_remember",
            "memory_update_personal",
            "memory_forget",
            "session_get_context",
            "session_summarize",
            "session_list_recent",
            "spine_entity_get",
            "spine_entity_search",
            "spine_relationship_list",
            "signal_list",
            "signal_get",
            "book_list",
            "kb_search"
        ]
    );
}

#[tokio::test]
async fn reads_strip_and_writes_refuse_fields_outside_the_schema() {
    let f = fixture().await;
    let key = f.tenant("cs-co", PlanTier::Pro, Department::CustomerSuccess, Industry::Saas, &format!("{ALL} admin")).await;
    let schema = adk::resolve::schema_for(Department::CustomerSuccess, Industry::Saas);
    let account = schema.entity_type("account").unwrap();
    let hidden = account.fields.keys().find(|k| !account.priority_fields.contains(*k)).unwrap().clone();

    // The operator path stores a non-priority field (it is a known field).
    let op = f.services.admin.operator(&TenantId::new("cs-co").unwrap()).await.unwrap();
    let mut attrs = Attributes::new();
    attrs.insert("name".into(), "Acme".into());
    attrs.insert(hidden.clone(), "secret internal detail".into());
    f.services
        .entities
        .put(&op, EntityType::new("account").unwrap(), Id::new("acme-1").unwrap(), PoleClass::Organization, attrs, Expect::Any)
        .await
        .unwrap();

    let (status, _, v) =
        f.http("POST", "/v1/capabilities/spine.entity.get", &key, Some(json!({"type":"account","id":"acme-1"}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["entity"]["attributes"]["name"], "Acme");
    assert!(v["data"]["entity"]["attributes"].get(&hidden).is_none(), "{hidden} must be stripped: {v}");
    let mcp = f.tool(&key, "spine.entity.get", json!({"type":"account","id":"acme-1"})).await;
    assert!(mcp["structuredContent"]["entity"]["attributes"].get(&hidden).is_none());
    assert!(!mcp["content"][0]["text"].as_str().unwrap().contains("secret internal detail"));
    let mcp = f.tool(&key, "spine.entity.search", json!({"query":"acme"})).await;
    assert_eq!(mcp["structuredContent"]["count"], 1);
    assert!(mcp["structuredContent"]["entities"][0]["attributes"].get(&hidden).is_none());

    // Unknown fields: refused with every field listed, and nothing stored.
    let (status, _, v) = f
        .http(
            "PUT",
            "/v1/admin/entities/account/new-1",
            &key,
            Some(json!({"attributes": {"name": "N", "colour": "red", "mood": "ok"}})),
        )
        .await;
    assert_eq!(status, 400);
    let fields: Vec<String> =
        v["error"]["field_errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap().to_owned()).collect();
    assert!(fields.iter().any(|f| f.ends_with("colour")) && fields.iter().any(|f| f.ends_with("mood")), "{fields:?}");
    let (status, _, _) =
        f.http("POST", "/v1/capabilities/spine.entity.get", &key, Some(json!({"type":"account","id":"new-1"}))).await;
    assert_eq!(status, 404, "nothing was stored");
    let (status, _, v) = f
        .http(
            "POST",
            "/v1/capabilities/spine.entity.create",
            &key,
            Some(json!({"type":"account","attributes":{"name":"N","colour":"red"}})),
        )
        .await;
    assert_eq!(status, 400, "{v}");
}

#[tokio::test]
async fn the_schema_is_a_resource() {
    let f = fixture().await;
    let key = f.tenant("hc-co", PlanTier::Pro, Department::CustomerSuccess, Industry::Healthcare, ALL).await;
    let v = f.rpc(&key, "resources/read", json!({"uri": "continuity://schema"})).await;
    let text = v["result"]["contents"][0]["text"].as_str().unwrap();
    let doc: Value = serde_json::from_str(text).unwrap();
    assert_eq!(doc["industry"], "healthcare");
    let names: Vec<&str> = doc["entity_types"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"patient") && !names.contains(&"subscription"), "{names:?}");
}
