//! `continuity stdio`: MCP over stdin/stdout on a fresh embedded home — initialise,
//! list, write and read a session turn, a tool error, an unknown method — and nothing but
//! JSON-RPC on stdout.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_continuity");

/// `continuity --home HOME stdio ARGS…`, logging at info to stderr (so anything but
/// JSON-RPC on stdout shows).
struct Session {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Session {
    fn start(home: &std::path::Path, args: &[&str]) -> Self {
        Self::start_with(home, args, &[])
    }

    fn start_with(home: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(BIN)
            .arg("--home")
            .arg(home)
            .arg("stdio")
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self { child, stdin, lines }
    }

    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn recv(&mut self) -> Value {
        let line = self.lines.next().expect("stdio closed").unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout carried a non-JSON line {line:?}: {e}"))
    }

    /// Closes stdin and checks the server exits cleanly.
    fn close(self) {
        let Self { mut child, stdin, .. } = self;
        drop(stdin);
        assert!(child.wait().unwrap().success(), "stdio exits cleanly when stdin closes");
    }
}

#[test]
fn stdio_serves_the_same_tools_on_a_fresh_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut session = Session::start(&home, &["--tenant", "local"]);
    session.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}));
    let init = session.recv();
    assert_eq!(init["result"]["serverInfo"]["name"], "continuity", "{init}");
    session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let tools = session.recv();
    let names: Vec<&str> = tools["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    let canonical: Vec<&str> =
        mcp::tools::all().filter(|t| t.toolset() == domain::principal::Toolset::Canonical).map(|t| t.name()).collect();
    assert_eq!(names, canonical, "the local tenant is on the enterprise plan: every canonical tool");
    session.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory.write_conversational",
        "arguments": {"session": "s1", "role": "user", "content": "hello from stdio"}}}));
    let w = session.recv();
    assert_eq!(w["result"]["structuredContent"]["session"], "owner.s1", "{w}");
    session.send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "memory.read_conversational", "arguments": {"session": "s1"}}}),
    );
    let r = session.recv();
    assert_eq!(r["result"]["structuredContent"]["turns"][0]["content"], "hello from stdio");
    session.send(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "spine.entity.get", "arguments": {"type": "account"}}}),
    );
    let bad = session.recv();
    assert_eq!(
        (bad["result"]["isError"].as_bool(), bad["result"]["structuredContent"]["code"].as_str()),
        (Some(true), Some("INVALID_REQUEST"))
    );
    session.send(json!({"jsonrpc": "2.0", "id": 6, "method": "no/such/method"}));
    let unknown = session.recv();
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    session.close();
    // The home was initialised as `serve` does.
    assert!(home.join("owner.key").exists());
}

#[test]
fn stdio_refuses_an_unknown_toolset_or_tenant() {
    let dir = tempfile::tempdir().unwrap();
    for args in [vec!["stdio", "--toolsets", "canonical,bogus"], vec!["stdio", "--tenant", "nope"]] {
        let out = Command::new(BIN).arg("--home").arg(dir.path()).args(&args).stdin(Stdio::null()).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert!(out.stdout.is_empty(), "nothing on stdout for a refused start");
        assert!(!out.stderr.is_empty());
    }
}

/// The graph toolset's graph as the reference server offers it: the resource
/// `memory://knowledge-graph`, readable and subscribable, with `resources/updated` after a
/// write to it.
#[test]
fn stdio_offers_the_knowledge_graph_resource_with_the_graph_toolset() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut session = Session::start(&home, &["--tenant", "local", "--toolsets", "canonical,graph"]);
    session.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}));
    assert_eq!(session.recv()["result"]["capabilities"]["resources"]["subscribe"], true);
    session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "resources/list"}));
    let listed = session.recv();
    let uris: Vec<&str> = listed["result"]["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert!(uris.contains(&"memory://knowledge-graph"), "{listed}");
    session
        .send(json!({"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": "memory://knowledge-graph"}}));
    assert!(session.recv()["result"].is_object());
    session.send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "create_entities", "arguments": {"entities": [
        {"name": "Ada", "entityType": "person", "observations": ["Likes tea"]}]}}}),
    );
    // The answer and the notice, in either order.
    let (mut answered, mut notified) = (false, false);
    while !(answered && notified) {
        let m = session.recv();
        if m["id"] == 4 {
            assert_eq!(m["result"]["isError"], false, "{m}");
            answered = true;
        } else if m["method"] == "notifications/resources/updated" {
            assert_eq!(m["params"]["uri"], "memory://knowledge-graph");
            notified = true;
        }
    }
    session.send(json!({"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": "memory://knowledge-graph"}}));
    let read = session.recv();
    let content = &read["result"]["contents"][0];
    assert_eq!(content["mimeType"], "application/json", "{read}");
    let graph: Value = serde_json::from_str(content["text"].as_str().unwrap()).unwrap();
    assert_eq!(graph["entities"], json!([{"name": "Ada", "entityType": "person", "observations": ["Likes tea"]}]));
    assert_eq!(graph["relations"], json!([]));
    session.close();

    // Without the graph toolset there is no such resource.
    let mut session = Session::start(&home, &["--tenant", "local"]);
    session.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}));
    session.recv();
    session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "memory://knowledge-graph"}}));
    let read = session.recv();
    assert!(read["error"].is_object(), "{read}");
    session.close();
}

/// The entry `continuity setup` writes for Claude Desktop — `continuity stdio --home H`
/// with `CONTINUITY_KEY` — attaches to the running `serve` and carries whatever protocol
/// version the client negotiates: every version `initialize` can name, a 2026-07-28
/// client's `server/discover` (no `initialize`, its version in `_meta`), and the official
/// Python and TypeScript SDKs' stdio clients with their defaults.
#[test]
fn the_bridge_to_a_running_serve_speaks_every_protocol_version() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let server = common::spawn(&home);
    let key = server.key.clone();
    for version in ["2025-06-18", "2025-11-25"] {
        let mut s = Session::start_with(&home, &[], &[("CONTINUITY_KEY", &key)]);
        s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "desktop", "version": "1"}}}));
        let init = s.recv();
        assert_eq!(init["result"]["protocolVersion"], version, "{init}");
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
        let list = s.recv();
        let names: Vec<&str> = list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert!(names.contains(&"memory_search") && names.iter().all(|n| !n.contains('.')), "{version}: {names:?}");
        s.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "memory_remember", "arguments": {"text": format!("Speaks MCP {version}")}}}));
        let call = s.recv();
        assert_eq!(call["result"]["isError"], false, "{version}: {call}");
        s.close();
    }
    // A 2026-07-28 client starts with server/discover, its version in _meta.
    let mut s = Session::start_with(&home, &[], &[("CONTINUITY_KEY", &key)]);
    s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}));
    let discovered = s.recv();
    assert!(discovered.get("result").is_some() || discovered["error"]["code"].is_i64(), "{discovered}");
    assert!(!discovered.to_string().contains("does not match"), "{discovered}");
    s.close();

    // The official Python SDK's stdio client, with its defaults, through the same entry.
    let python = std::env::var("CONTINUITY_TEST_PYTHON")
        .unwrap_or_else(|_| panic!("CONTINUITY_TEST_PYTHON is not set: run tests/run.sh (it installs the MCP Python SDK)"));
    let script = continuity_tests::workspace_root().join("tests/python/stdio_session.py");
    let out = Command::new(python).arg(script).arg(BIN).arg(&home).env("CONTINUITY_KEY", &key).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let seen: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(seen["protocol_version"], "2025-11-25", "{seen}");
    assert!(seen["tools"].as_array().unwrap().iter().any(|t| t == "memory_search"), "{seen}");

    // The official TypeScript SDK's stdio client, with its defaults.
    let node = std::env::var("CONTINUITY_TEST_NODE").unwrap_or_else(|_| {
        panic!("CONTINUITY_TEST_NODE is not set: run tests/run.sh (it installs Node 22 and the MCP TypeScript SDK)")
    });
    let modules =
        std::env::var("CONTINUITY_TEST_NODE_MODULES").unwrap_or_else(|_| panic!("CONTINUITY_TEST_NODE_MODULES is not set"));
    let script = continuity_tests::workspace_root().join("tests/typescript/stdio.mjs");
    let out = Command::new(node)
        .arg(script)
        .arg(BIN)
        .arg(&home)
        .env("CONTINUITY_KEY", &key)
        .env("NODE_PATH", modules)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let seen: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(seen["server"], "continuity", "{seen}");
    assert!(seen["tools"].as_array().unwrap().iter().any(|t| t == "memory_search"), "{seen}");
    drop(server);
}
