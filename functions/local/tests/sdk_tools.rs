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

const BIN: &str = env!("CARGO_BIN_EXE_continuity");

#[test]
fn the_python_sdk_calls_every_tool() {
    let python = std::env::var("CONTINUITY_TEST_PYTHON")
        .unwrap_or_else(|_| panic!("CONTINUITY_TEST_PYTHON is not set: run tests/run.sh (it installs the MCP Python SDK)"));
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let out = Command::new(BIN).arg("--home").arg(&home).args(["tenant", "list"]).output().unwrap();
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
        .args(["serve", "--addr", "127.0.0.1:0", "--home"])
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
    let script = format!(
        "{}/../../tests/python/tools_session.py",
        std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into())
    );
    let run = Command::new(&python).arg(&script).args([&url, &key]).output().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "the SDK session failed:\n{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(seen["tools"].as_array().unwrap().len(), 20);
    assert_eq!(seen["called"].as_array().unwrap().len(), 20, "{seen}");
    assert_eq!(seen["errors"], serde_json::json!([]), "every valid call succeeds: {seen}");
    assert_eq!(seen["invalid_call"]["isError"], true);
    assert_eq!(seen["invalid_call"]["structured"]["code"], "INVALID_REQUEST");
    assert_eq!(seen["status_of_missing"]["code"], "NOT_FOUND");
    assert_eq!(seen["prompts"], serde_json::json!(["project_handoff_summary", "morning_brief"]));
    assert_eq!(seen["brief_mentions_signal"], true);
    assert_eq!(seen["resource_entity_name"], "Acme Corp");
}
