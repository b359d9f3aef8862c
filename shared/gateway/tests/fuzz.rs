//! Property tests of the MCP endpoint: random JSON-RPC bodies, random methods and random
//! tool arguments (well-formed and not) against the real router with real data. Every
//! answer must be a well-formed HTTP response below 500, within a generous bound (a
//! hang, not a speed, is what the bound catches), and the server must still answer a
//! normal request afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use axum::body::Body;
use domain::TenantId;
use domain::principal::Scopes;
use domain::tenant::{Department, Industry, PlanTier};
use gateway::App;
use http::Request;
use http_body_util::BodyExt;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use services::admin::KeyRequest;
use tower::ServiceExt;

struct Fixture {
    app: App,
    key: String,
    _dir: tempfile::TempDir,
}

fn fixture(rt: &tokio::runtime::Runtime) -> Fixture {
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let services = common::services(dir.path());
        let t = TenantId::new("fuzz").unwrap();
        services.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
        let scopes = Scopes::parse("mcp:tools mcp:resources tenant:read tenant:write memory:read memory:write").unwrap();
        let key = services
            .admin
            .create_key(KeyRequest { tenant: t, scopes, principal: None, teams: vec![], projects: vec![] })
            .await
            .unwrap()
            .token;
        let app = common::app(&services, "http://localhost");
        Fixture { app, key, _dir: dir }
    })
}

async fn post(app: &App, key: &str, body: Vec<u8>, version: &str) -> (u16, Vec<u8>) {
    let req = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", "localhost")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
        .body(Body::from(body))
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(20), app.clone().oneshot(req)).await.expect("the server hung").unwrap();
    let status = resp.status().as_u16();
    let bytes = tokio::time::timeout(Duration::from_secs(20), resp.into_body().collect()).await.expect("the body hung").unwrap();
    (status, bytes.to_bytes().to_vec())
}

/// Arbitrary JSON, including deep nesting, huge numbers and odd strings.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        "\\PC{0,40}".prop_map(Value::String),
        prop_oneof![Just("acme-1"), Just("account"), Just("../../etc"), Just("a#b"), Just(""), Just("ctn_x.y.z")]
            .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{1,12}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("initialize".to_owned()),
        Just("tools/list".to_owned()),
        Just("tools/call".to_owned()),
        Just("resources/list".to_owned()),
        Just("resources/read".to_owned()),
        Just("resources/templates/list".to_owned()),
        Just("prompts/list".to_owned()),
        Just("prompts/get".to_owned()),
        Just("ping".to_owned()),
        Just("server/discover".to_owned()),
        Just("notifications/initialized".to_owned()),
        "[a-z/_]{0,30}",
    ]
}

fn tool_name() -> impl Strategy<Value = String> {
    let names: Vec<String> = mcp::tools::all().map(|t| t.name().to_owned()).collect();
    prop_oneof![prop::sample::select(names), "[a-z._]{0,40}"]
}

fn version() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["2025-06-18", "2025-11-25", "2026-07-28"])
}

fn check(status: u16, body: &[u8], what: &str) {
    assert!(status < 500, "{what} → {status}: {}", String::from_utf8_lossy(body));
    if status == 200 && !body.is_empty() && !body.starts_with(b"data:") && !body.starts_with(b"event:") && !body.starts_with(b":")
    {
        assert!(
            serde_json::from_slice::<Value>(body).is_ok(),
            "{what}: a 200 with a non-JSON body: {}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn random_json_rpc_never_breaks_the_server() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let f = fixture(&rt);
    let config = ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |(m in method(), id in prop_oneof![Just(json!(1)), json_value()], params in json_value(), v in version(), drop_jsonrpc in any::<bool>())| {
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": m, "params": params});
        if drop_jsonrpc {
            msg.as_object_mut().unwrap().remove("jsonrpc");
        }
        let (status, body) = rt.block_on(post(&f.app, &f.key, msg.to_string().into_bytes(), v));
        check(status, &body, &msg.to_string());
    });
    // Raw bytes: not JSON, truncated JSON, batches, huge nesting.
    proptest!(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() }, |(raw in prop::collection::vec(any::<u8>(), 0..512))| {
        let (status, body) = rt.block_on(post(&f.app, &f.key, raw.clone(), "2025-06-18"));
        check(status, &body, &String::from_utf8_lossy(&raw));
    });
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let (status, body) = rt.block_on(post(&f.app, &f.key, deep.into_bytes(), "2025-06-18"));
    check(status, &body, "100 000 nested arrays");
    let (status, _) = rt.block_on(post(
        &f.app,
        &f.key,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string().into_bytes(),
        "2025-06-18",
    ));
    assert_eq!(status, 200, "the server still answers");
}

#[test]
fn random_tool_arguments_never_break_the_server() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let f = fixture(&rt);
    let config = ProptestConfig { cases: 600, failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |(name in tool_name(), args in json_value(), v in version())| {
        let msg = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": args}});
        let (status, body) = rt.block_on(post(&f.app, &f.key, msg.to_string().into_bytes(), v));
        check(status, &body, &msg.to_string());
        if status == 200 {
            let v: Value = serde_json::from_slice(&body).unwrap();
            // A tool error is a result with isError and a taxonomy code, never a crash.
            if v["result"]["isError"] == true {
                prop_assert!(v["result"]["structuredContent"]["code"].is_string(), "{v}");
            }
        }
    });
}

/// MCP parameters are objects: by-position arrays get a JSON-RPC invalid-params error.
#[test]
fn array_params_are_invalid_params() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let f = fixture(&rt);
    let msg = json!({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": [""]});
    let (status, body) = rt.block_on(post(&f.app, &f.key, msg.to_string().into_bytes(), "2025-06-18"));
    assert_eq!(status, 400);
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["error"]["code"], -32602);
}
