//! End-to-end tests of `continuity serve`: the real binary on port 0, driven over HTTP
//! with only its public interfaces (HTTP, MCP JSON-RPC, the admin CLI).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Command;

use common::{Server, call_tool, cli, client, rpc, spawn};

use serde_json::{Value, json};

/// The canonical MCP tools (SPEC §7.1 and recall), in registration order.
fn adk_names() -> Vec<&'static str> {
    mcp::tools::all().filter(|t| t.toolset() == domain::principal::Toolset::Canonical).map(|t| t.name()).collect()
}

/// The first JSON-RPC message of an SSE body (`data: {...}` lines).
fn sse_message(body: &str) -> Value {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| d.starts_with('{'))
        .map(|d| serde_json::from_str(d).unwrap())
        .unwrap_or_else(|| panic!("no JSON-RPC message in {body:?}"))
}

/// The status of a `tools/list` POST carrying one extra (hostile) header.
async fn tools_list_with(s: &Server, header: &str, value: &str) -> u16 {
    client()
        .post(format!("{}/mcp", s.base))
        .bearer_auth(&s.key)
        .header(header, value)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(json!({"jsonrpc":"2.0","id":5,"method":"tools/list"}).to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn try_seed(base: &str, key: &str, ty: &str, id: &str, name: &str) -> reqwest::Result<reqwest::Response> {
    client()
        .put(format!("{base}/v1/admin/entities/{ty}/{id}"))
        .bearer_auth(key)
        .json(&json!({"attributes": {"name": name}, "pole_class": "organization"}))
        .send()
        .await
}

async fn seed(base: &str, key: &str, ty: &str, id: &str, name: &str) -> reqwest::Response {
    try_seed(base, key, ty, id, name).await.expect("send")
}

#[tokio::test]
async fn serve_prints_url_key_and_is_healthy() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    let r = client().get(format!("{}/healthz", s.base)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["status"], "ok");
    let info: Value = client().get(format!("{}/", s.base)).bearer_auth(&s.key).send().await.unwrap().json().await.unwrap();
    assert_eq!(info["mcp_url"], format!("{}/mcp", s.base));
    // The home was initialised with the local enterprise tenant.
    let shown = cli(&s.home, &["tenant", "show", "local"]);
    assert!(shown.contains("enterprise"), "{shown}");
    cli(
        &s.home,
        &["tenant", "create", "clinic", "--plan", "pro", "--department", "customer_success", "--industry", "healthcare"],
    );
    let schema: Value = serde_json::from_str(&cli(&s.home, &["tenant", "show", "clinic", "--schema"])).unwrap();
    assert_eq!(schema["industry"], "healthcare");
    let names: Vec<&str> = schema["entity_types"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"patient") && !names.contains(&"subscription"), "{names:?}");
}

#[tokio::test]
async fn mcp_needs_a_key_and_lists_every_tool() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}});

    let r = rpc(&s.base, None, init.clone()).await;
    assert_eq!(r.status(), 401);
    let www = r.headers().get("www-authenticate").expect("WWW-Authenticate").to_str().unwrap().to_owned();
    assert!(www.starts_with("Bearer ") && www.contains("resource_metadata="), "{www}");
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "UNAUTHENTICATED");
    assert_eq!(rpc(&s.base, Some("ctn_local.nope.0000000000000000000000000000000000000000"), init.clone()).await.status(), 401);

    // `initialize` starts a session: the answer is an SSE event and names the session.
    let r = rpc(&s.base, Some(&s.key), init).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("mcp-session-id"));
    let v = sse_message(&r.text().await.unwrap());
    assert_eq!(v["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(v["result"]["serverInfo"]["name"], "continuity");
    assert_eq!(v["result"]["capabilities"]["tools"]["listChanged"], true, "sessions advertise list_changed");

    let v: Value = rpc(&s.base, Some(&s.key), json!({"jsonrpc":"2.0","id":2,"method":"tools/list"})).await.json().await.unwrap();
    let names: Vec<&str> = v["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    // The owner key on the enterprise plan sees every canonical tool.
    let canonical: Vec<&str> = adk_names();
    assert_eq!(names, canonical);
    for t in v["result"]["tools"].as_array().unwrap() {
        assert_eq!(t["inputSchema"]["type"], "object");
        assert!(t["outputSchema"].is_object());
        assert!(t["description"].as_str().unwrap().len() > 40);
    }

    // A key without tenant:read sees no tools and is refused server-side too.
    let narrow = cli(&s.home, &["key", "create", "--tenant", "local", "--scopes", "mcp:tools"]).trim().to_owned();
    let v: Value = rpc(&s.base, Some(&narrow), json!({"jsonrpc":"2.0","id":3,"method":"tools/list"})).await.json().await.unwrap();
    assert!(v["result"]["tools"].as_array().unwrap().is_empty());
    let res = call_tool(&s.base, &narrow, "spine.entity.get", json!({"type":"account","id":"x"})).await;
    assert_eq!(res["isError"], true);
    assert_eq!(res["structuredContent"]["code"], "FORBIDDEN");
    assert_eq!(res["structuredContent"]["required_scope"], "tenant:read");

    // A foreign browser Origin is refused (DNS rebinding / CSRF protection), so is a Host
    // the server does not answer to, and an unsupported protocol version is a 400.
    assert_eq!(tools_list_with(&s, "origin", "https://evil.example").await, 403);
    assert_eq!(tools_list_with(&s, "host", "evil.example").await, 403);
    assert_eq!(tools_list_with(&s, "mcp-protocol-version", "1999-01-01").await, 400);

    // A revoked key stops working at once.
    let key_id = narrow.split('.').nth(1).unwrap().to_owned();
    cli(&s.home, &["key", "revoke", "--tenant", "local", &key_id]);
    assert_eq!(rpc(&s.base, Some(&narrow), json!({"jsonrpc":"2.0","id":4,"method":"tools/list"})).await.status(), 401);
}

#[tokio::test]
async fn entities_are_readable_and_tenants_never_see_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    assert_eq!(seed(&s.base, &s.key, "account", "acme-1", "Acme Corp").await.status(), 200);
    assert_eq!(seed(&s.base, &s.key, "account", "globex-2", "Globex").await.status(), 200);

    let got = call_tool(&s.base, &s.key, "spine.entity.get", json!({"type":"account","id":"acme-1"})).await;
    assert_eq!(got["isError"], false);
    assert_eq!(got["structuredContent"]["entity"]["attributes"]["name"], "Acme Corp");
    assert!(got["content"][0]["text"].as_str().unwrap().contains("Acme Corp"));

    let found = call_tool(&s.base, &s.key, "spine.entity.search", json!({"query":"acme"})).await;
    assert_eq!(found["structuredContent"]["count"], 1);
    assert_eq!(found["structuredContent"]["entities"][0]["id"], "acme-1");

    let missing = call_tool(&s.base, &s.key, "spine.entity.get", json!({"type":"account","id":"nope"})).await;
    assert_eq!(missing["isError"], true);
    assert_eq!(missing["structuredContent"]["code"], "NOT_FOUND");

    // A second tenant, with its own key, on the same server.
    cli(&s.home, &["tenant", "create", "beta", "--plan", "pro"]);
    let beta = cli(&s.home, &["key", "create", "--tenant", "beta", "--scopes", "mcp:tools tenant:read admin"]).trim().to_owned();
    let other = call_tool(&s.base, &beta, "spine.entity.get", json!({"type":"account","id":"acme-1"})).await;
    assert_eq!(other["structuredContent"]["code"], "NOT_FOUND", "beta must not see local's entity");
    let none = call_tool(&s.base, &beta, "spine.entity.search", json!({"query":"acme"})).await;
    assert_eq!(none["structuredContent"]["count"], 0);
    // Beta's own entity with the same id is beta's alone.
    assert_eq!(seed(&s.base, &beta, "account", "acme-1", "Beta's Acme").await.status(), 200);
    let own = call_tool(&s.base, &beta, "spine.entity.get", json!({"type":"account","id":"acme-1"})).await;
    assert_eq!(own["structuredContent"]["entity"]["attributes"]["name"], "Beta's Acme");
    let local = call_tool(&s.base, &s.key, "spine.entity.get", json!({"type":"account","id":"acme-1"})).await;
    assert_eq!(local["structuredContent"]["entity"]["attributes"]["name"], "Acme Corp");
}

#[tokio::test]
async fn bad_input_gets_a_clear_400_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    let put = |body: String| {
        client()
            .put(format!("{}/v1/admin/entities/account/bad-1", s.base))
            .bearer_auth(&s.key)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let r = put("{not json".into()).await.unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "INVALID_REQUEST");
    assert!(v["error"]["message"].as_str().unwrap().contains("invalid JSON"), "{v}");

    let r = put(json!({"attributes": {}, "colour": "red"}).to_string()).await.unwrap();
    assert_eq!(r.status(), 400);
    let msg = r.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("unknown field `colour`"), "{msg}");

    let huge = json!({"attributes": {"name": "x".repeat(2 * 1024 * 1024)}}).to_string();
    let r = put(huge).await.unwrap();
    assert_eq!(r.status(), 413);
    let v = r.json::<Value>().await.unwrap();
    assert_eq!(v["error"]["code"], "PAYLOAD_TOO_LARGE");
    assert!(v["error"]["message"].as_str().unwrap().contains("exceeds the limit"));

    let r = put(json!({"attributes": {"bad name!": 1}}).to_string()).await.unwrap();
    assert_eq!(r.status(), 400);
    let r = client()
        .put(format!("{}/v1/admin/entities/Not-A-Type/x", s.base))
        .bearer_auth(&s.key)
        .json(&json!({"attributes":{}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // Nothing above was written.
    let got = call_tool(&s.base, &s.key, "spine.entity.get", json!({"type":"account","id":"bad-1"})).await;
    assert_eq!(got["structuredContent"]["code"], "NOT_FOUND");

    // MCP: malformed JSON, batches and bad tool arguments.
    let r = client()
        .post(format!("{}/mcp", s.base))
        .bearer_auth(&s.key)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{\"jsonrpc\":")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], -32700);
    let r = rpc(&s.base, Some(&s.key), json!([{"jsonrpc":"2.0","id":1,"method":"tools/list"}])).await;
    assert_eq!(r.status(), 400);
    let res = call_tool(&s.base, &s.key, "spine.entity.get", json!({"type":"account","id":"a","extra":1})).await;
    assert_eq!(res["structuredContent"]["code"], "INVALID_REQUEST");
    let res = call_tool(&s.base, &s.key, "spine.entity.get", json!({"type":"account","id":"a#b"})).await;
    assert_eq!(res["structuredContent"]["code"], "INVALID_REQUEST");
    // An unknown tool is the taxonomy's CAPABILITY_NOT_FOUND, as for the capability API.
    let res = call_tool(&s.base, &s.key, "no.such.tool", json!({})).await;
    assert_eq!(res["isError"], true);
    assert_eq!(res["structuredContent"]["code"], "CAPABILITY_NOT_FOUND");
    // The server is still alive after all of it.
    assert_eq!(client().get(format!("{}/healthz", s.base)).send().await.unwrap().status(), 200);
}

/// SIGKILL during a stream of acknowledged writes loses none of them.
#[tokio::test]
async fn kill_9_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut s = spawn(&home);
    let base = s.base.clone();
    let key = s.key.clone();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    let writer = tokio::spawn(async move {
        let mut acked = Vec::new();
        for i in 0..100_000u32 {
            // Only a 200 is an acknowledgement; a connection error ends the stream.
            match try_seed(&base, &key, "account", &format!("w-{i:06}"), &format!("write {i}")).await {
                Ok(r) if r.status() == 200 => {
                    acked.push(i);
                    seen.store(acked.len(), std::sync::atomic::Ordering::Relaxed);
                }
                _ => break,
            }
        }
        acked
    });
    // Let a few dozen writes through (however slow the machine is), then kill without warning.
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while count.load(std::sync::atomic::Ordering::Relaxed) < 30 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("30 writes acknowledged within a minute");
    s.child.kill().expect("SIGKILL");
    s.child.wait().expect("reap");
    let acked = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        // Requests in flight fail once the process is gone.
        loop {
            if writer.is_finished() {
                return writer.await.expect("writer");
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("writer ends after the kill");
    assert!(acked.len() >= 30, "the stream ran before the kill ({} writes)", acked.len());

    let s2 = spawn(&home);
    for i in &acked {
        let got = call_tool(&s2.base, &s2.key, "spine.entity.get", json!({"type":"account","id":format!("w-{i:06}")})).await;
        assert_eq!(got["isError"], false, "acknowledged write {i} was lost");
        assert_eq!(got["structuredContent"]["entity"]["attributes"]["name"], format!("write {i}"));
    }
}

/// SIGTERM stops the server cleanly (exit status 0) and the home reopens intact.
#[tokio::test]
async fn sigterm_shuts_down_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut s = spawn(&home);
    assert_eq!(seed(&s.base, &s.key, "account", "before-term", "x").await.status(), 200);
    let status = Command::new("kill").args(["-TERM", &s.child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let exit = s.child.wait().expect("wait");
    assert!(exit.success(), "graceful shutdown exits 0, got {exit:?}");
    let s2 = spawn(&home);
    let got = call_tool(&s2.base, &s2.key, "spine.entity.get", json!({"type":"account","id":"before-term"})).await;
    assert_eq!(got["isError"], false);
}

/// Sessions on `continuity serve`: `initialize` opens one (`Mcp-Session-Id`), requests
/// carrying it are served in it, the GET stream carries `resources/updated` for a
/// subscribed entity written through the API and `tools/list_changed` when the plan is
/// changed by the CLI (another process), and `DELETE` ends it (then 404). Clients that
/// never send the header keep being served statelessly.
#[tokio::test]
async fn sessions_stream_change_notifications_and_end_on_delete() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    let c = client();
    let post = |sid: Option<String>, body: Value| {
        let mut r = c
            .post(format!("{}/mcp", s.base))
            .bearer_auth(&s.key)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body);
        if let Some(sid) = sid {
            r = r.header("mcp-session-id", sid);
        }
        r.send()
    };
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}});
    let r = post(None, init).await.unwrap();
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert_eq!(sse_message(&r.text().await.unwrap())["result"]["capabilities"]["resources"]["subscribe"], true);
    assert_eq!(
        post(Some(sid.clone()), json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await.unwrap().status(),
        202
    );
    let r = post(
        Some(sid.clone()),
        json!({"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"continuity://entities/account/acme-1"}}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    assert!(sse_message(&r.text().await.unwrap())["error"].is_null());
    // The standalone SSE stream of the session.
    let mut stream = c
        .get(format!("{}/mcp", s.base))
        .bearer_auth(&s.key)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    // A write of the subscribed entity through the operator path.
    let r = c
        .put(format!("{}/v1/admin/entities/account/acme-1", s.base))
        .bearer_auth(&s.key)
        .json(&json!({"attributes": {"name": "Acme Corp"}, "pole_class": "organization"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut expect = vec!["notifications/resources/updated"];
    let mut plan_changed = false;
    while let Some(needle) = expect.first().copied() {
        assert!(std::time::Instant::now() < deadline, "no {needle} on the session stream; saw: {seen}");
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(5), stream.chunk()).await;
        if let Ok(Ok(Some(bytes))) = chunk {
            seen.push_str(&String::from_utf8_lossy(&bytes));
        }
        if seen.contains(needle) {
            expect.remove(0);
            if !plan_changed {
                assert!(seen.contains("continuity://entities/account/acme-1"), "{seen}");
                // The CLI, another process, moves the tenant to the free plan.
                cli(&s.home, &["tenant", "set", "local", "--plan", "free"]);
                plan_changed = true;
                expect.push("notifications/tools/list_changed");
            }
        }
    }
    // The session now lists only what the free plan allows.
    let r = post(Some(sid.clone()), json!({"jsonrpc":"2.0","id":3,"method":"tools/list"})).await.unwrap();
    let names: Vec<String> = sse_message(&r.text().await.unwrap())["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["spine_entity_get", "spine_entity_search"]);
    // DELETE ends the session; it is gone afterwards.
    let r = c
        .delete(format!("{}/mcp", s.base))
        .bearer_auth(&s.key)
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    // 200, which the Python SDK counts as ended (it warns on 202), as the TypeScript SDK does.
    assert_eq!(r.status(), 200);
    let r = post(Some(sid), json!({"jsonrpc":"2.0","id":4,"method":"tools/list"})).await.unwrap();
    assert_eq!(r.status(), 404);
    // A client without a session id is served statelessly, with plain JSON.
    let v: Value = post(None, json!({"jsonrpc":"2.0","id":5,"method":"tools/list"})).await.unwrap().json().await.unwrap();
    assert_eq!(v["result"]["tools"].as_array().unwrap().len(), 2);
}

/// The write path on `continuity serve`: register a source, push a batch over HTTP, and
/// the in-process pipeline consumer makes it readable through MCP with canonical fields.
#[tokio::test]
async fn ingested_records_become_readable_through_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    let post = |path: &str, body: Option<Value>| {
        let mut req = client().post(format!("{}{path}", s.base)).header("authorization", format!("Bearer {}", s.key));
        if let Some(b) = body {
            req = req.json(&b);
        }
        req.send()
    };
    let r = post("/v1/ingest/hubspot", Some(json!({"records": []}))).await.unwrap();
    assert_eq!(r.status(), 403, "not registered yet");
    let r = post("/v1/connectors/hubspot", None).await.unwrap();
    assert_eq!(r.status(), 201);
    let batch = json!({"records": [
        {"objectType": "companies", "id": "77", "updatedAt": "2026-11-01T09:00:00Z", "properties": {"name": "Wayne Enterprises", "lifecyclestage": "customer"}},
        "not a record"
    ], "final": true});
    let r = post("/v1/ingest/hubspot", Some(batch)).await.unwrap();
    assert_eq!(r.status(), 202);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["accepted"], 1);
    assert_eq!(v["rejected"][0]["index"], 1);
    let id = services::ingest::mapping::canonical_id("hubspot", "account", "77");
    let mut got = Value::Null;
    // Up to 30 s: the in-process consumer maps and writes the batch, however loaded the machine.
    for _ in 0..600 {
        got = call_tool(&s.base, &s.key, "spine.entity.get", json!({"type": "account", "id": id.as_str()})).await;
        if got["isError"] == false {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(got["structuredContent"]["entity"]["attributes"]["name"], "Wayne Enterprises", "{got}");
    assert_eq!(got["structuredContent"]["entity"]["attributes"]["lifecycle_stage"], "customer");
    let status: Value = client()
        .get(format!("{}/v1/connectors", s.base))
        .header("authorization", format!("Bearer {}", s.key))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["connectors"][0]["state"], "sync_complete", "{status}");
}
