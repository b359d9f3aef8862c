//! `continuity stdio`: MCP over stdin/stdout on a fresh embedded home — initialise,
//! list, write and read a session turn, a tool error, an unknown method — and nothing but
//! JSON-RPC on stdout.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_continuity");

#[test]
fn stdio_serves_the_same_tools_on_a_fresh_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut child = Command::new(BIN)
        .arg("--home")
        .arg(&home)
        .args(["stdio", "--tenant", "local"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut recv = || -> Value {
        let line = lines.next().expect("stdio closed").unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout carried a non-JSON line {line:?}: {e}"))
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}));
    let init = recv();
    assert_eq!(init["result"]["serverInfo"]["name"], "continuity", "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let tools = recv();
    let names: Vec<&str> = tools["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 24, "the local tenant is on the enterprise plan: {names:?}");
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory.write_conversational",
        "arguments": {"session": "s1", "role": "user", "content": "hello from stdio"}}}));
    let w = recv();
    assert_eq!(w["result"]["structuredContent"]["session"], "owner.s1", "{w}");
    send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "memory.read_conversational", "arguments": {"session": "s1"}}}),
    );
    let r = recv();
    assert_eq!(r["result"]["structuredContent"]["turns"][0]["content"], "hello from stdio");
    send(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "spine.entity.get", "arguments": {"type": "account"}}}),
    );
    let bad = recv();
    assert_eq!(
        (bad["result"]["isError"].as_bool(), bad["result"]["structuredContent"]["code"].as_str()),
        (Some(true), Some("INVALID_REQUEST"))
    );
    send(json!({"jsonrpc": "2.0", "id": 6, "method": "no/such/method"}));
    let unknown = recv();
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "stdio exits cleanly when stdin closes");
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
