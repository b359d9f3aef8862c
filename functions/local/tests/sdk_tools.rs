//! The official MCP Python SDK runs a scripted session against the real `continuity
//! serve`: connect with an API key, list, call every one of the 20 tools with valid
//! arguments (the SDK checks each result against the tool's output schema), one invalid
//! call, a prompt and a resource.
//!
//! Needs `CONTINUITY_TEST_PYTHON` (a Python with `mcp`; `tests/run.sh` makes one).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;

use serde_json::Value;

/// How many canonical tools the enterprise plan lists.
fn canonical_tools() -> usize {
    mcp::tools::all().filter(|t| t.toolset() == domain::principal::Toolset::Canonical).count()
}

const BIN: &str = env!("CARGO_BIN_EXE_continuity");

struct Served {
    child: std::process::Child,
    url: String,
    key: String,
    _dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh home with the demo data set, served on port 0.
fn serve_demo() -> Served {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let out = Command::new(BIN).arg("--home").arg(&home).arg("init").output().unwrap();
    assert!(out.status.success());
    let key = std::fs::read_to_string(home.join("owner.key")).unwrap().trim().to_owned();
    // Seed the demo data set into the home before the server opens it.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let backend = store_embedded::open_backend(&home, Arc::new(ports::SystemClock)).unwrap();
        let services = services::Services::new(backend);
        let (tenant, key_id, _) = services::auth::parse_key(&key).unwrap();
        use ports::records::PrincipalStore;
        let principal = services.backend.records.get_api_key(&tenant, &key_id).await.unwrap().unwrap().principal;
        continuity_tests::demo::seed(&services, &tenant, principal.as_str()).await;
    });

    let mut child = Command::new(BIN)
        .args(["serve", "--embedder", "hashing", "--addr", "127.0.0.1:0", "--home"])
        .arg(&home)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("serve exited").unwrap();
        if let Some(u) = line.strip_prefix("MCP URL:") {
            break u.trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Served { child, url, key, _dir: dir }
}

fn script(rel: &str) -> String {
    continuity_tests::workspace_root().join(rel).display().to_string()
}

#[test]
fn the_python_sdk_calls_every_tool() {
    let python = std::env::var("CONTINUITY_TEST_PYTHON")
        .unwrap_or_else(|_| panic!("CONTINUITY_TEST_PYTHON is not set: run tests/run.sh (it installs the MCP Python SDK)"));
    let s = serve_demo();
    let run = Command::new(&python).arg(script("tests/python/tools_session.py")).args([&s.url, &s.key]).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "the SDK session failed:\n{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(seen["tools"].as_array().unwrap().len(), canonical_tools(), "the enterprise plan: every canonical tool");
    assert_eq!(seen["called"].as_array().unwrap().len(), 22, "{seen}");
    assert_eq!(seen["errors"], serde_json::json!([]), "every valid call succeeds: {seen}");
    assert_eq!(seen["invalid_call"]["isError"], true);
    assert_eq!(seen["invalid_call"]["structured"]["code"], "INVALID_REQUEST");
    assert_eq!(seen["status_of_missing"]["code"], "NOT_FOUND");
    assert_eq!(seen["prompts"], serde_json::json!(["project_handoff_summary", "morning_brief"]));
    assert_eq!(seen["brief_mentions_signal"], true);
    assert_eq!(seen["resource_entity_name"], "Acme Corp");
}

/// The official TypeScript SDK (`@modelcontextprotocol/sdk` on npm), which also validates
/// error results against the output schemas: the same session.
#[test]
fn the_typescript_sdk_calls_every_tool() {
    let node = std::env::var("CONTINUITY_TEST_NODE").unwrap_or_else(|_| {
        panic!("CONTINUITY_TEST_NODE is not set: run tests/run.sh (it installs Node 22 and the MCP TypeScript SDK)")
    });
    let modules =
        std::env::var("CONTINUITY_TEST_NODE_MODULES").unwrap_or_else(|_| panic!("CONTINUITY_TEST_NODE_MODULES is not set"));
    let s = serve_demo();
    let run = Command::new(&node)
        .arg(script("tests/typescript/session.mjs"))
        .args([&s.url, &s.key])
        .env("NODE_PATH", &modules)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "the TypeScript SDK session failed:\n{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(seen["tools"].as_array().unwrap().len(), canonical_tools(), "the enterprise plan: every canonical tool");
    assert_eq!(seen["called"].as_array().unwrap().len(), 22, "{seen}");
    assert_eq!(seen["errors"], serde_json::json!([]), "every valid call succeeds: {seen}");
    assert_eq!(seen["invalid_call"], serde_json::json!({"isError": true, "code": "INVALID_REQUEST"}));
    assert_eq!(seen["prompts"], serde_json::json!(["project_handoff_summary", "morning_brief"]));
}
