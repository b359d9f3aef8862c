//! `continuity stdio`: MCP over stdin/stdout on a fresh embedded home — initialise,
//! list, write and read a session turn, a tool error, an unknown method — and nothing but
//! JSON-RPC on stdout.

#![allow(clippy::unwrap_used, clippy::expect_used)]

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
        let mut child = Command::new(BIN)
            .arg("--home")
            .arg(home)
            .arg("stdio")
            .args(args)
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
    assert_eq!(names.len(), 24, "the local tenant is on the enterprise plan: {names:?}");
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
