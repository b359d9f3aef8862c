//! The official MCP Python SDK (`mcp` on PyPI, its `OAuthClientProvider`) against the
//! real `continuity serve`, headlessly: 401 → protected-resource metadata → AS metadata
//! → dynamic registration → our login and consent pages → token with PKCE →
//! `tools/list` → refresh; then `client_credentials`. Afterwards the rotated refresh
//! token is replayed (reuse detection) and the server's whole log is searched for the
//! secrets the flow handled.
//!
//! Needs `CONTINUITY_TEST_PYTHON`, a Python with `mcp` installed (`tests/run.sh` makes
//! one); a missing variable fails the test rather than skipping it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::cli_with_stdin as cli;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use common::BIN;
const PASSWORD: &str = "a long enough password 42";

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_official_python_sdk_signs_in_lists_tools_and_refreshes() {
    let python = std::env::var("CONTINUITY_TEST_PYTHON")
        .unwrap_or_else(|_| panic!("CONTINUITY_TEST_PYTHON is not set: run tests/run.sh (it installs the MCP Python SDK)"));
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let log_path = dir.path().join("serve.log");
    // First use initialises the home; then a user and a service client.
    cli(&home, &["init"], "");
    let out = cli(
        &home,
        &["user", "add", "--tenant", "local", "--email", "ada@example.com", "--role", "member"],
        &format!("{PASSWORD}\n"),
    );
    assert!(out.contains("added user ada@example.com"), "{out}");
    let out = cli(&home, &["client", "create", "--tenant", "local", "--name", "etl", "--scopes", "mcp:tools tenant:read"], "");
    let field = |k: &str| out.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).unwrap().to_owned();
    let (cc_id, cc_secret) = (field("client_id"), field("client_secret"));

    // The server logs at debug level into a file we read afterwards.
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--embedder", "hashing", "--addr", "127.0.0.1:0", "--home"])
        .arg(&home)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("serve exited before printing its URL").unwrap();
        if let Some(u) = line.strip_prefix("MCP URL:") {
            break u.trim().to_owned();
        }
    };
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>().join("\n"));
    let server = Server(child);

    let script = continuity_tests::workspace_root().join("tests/python/oauth_client.py");
    let run = Command::new(&python)
        .arg(&script)
        .args([&url, "local", "ada@example.com", PASSWORD, &cc_id, &cc_secret])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "the SDK run failed:\n{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();

    // The discovery sequence the SDK followed.
    let requests: Vec<&str> = seen["requests"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let position =
        |r: &str| requests.iter().position(|x| *x == r).unwrap_or_else(|| panic!("the SDK never sent {r}: {requests:?}"));
    assert!(position("POST /mcp") < position("GET /.well-known/oauth-protected-resource/mcp"), "401 first");
    assert!(position("GET /.well-known/oauth-protected-resource/mcp") < position("GET /.well-known/oauth-authorization-server"));
    assert!(position("GET /.well-known/oauth-authorization-server") < position("POST /oauth/register"));
    assert!(position("POST /oauth/register") < position("POST /oauth/token"));
    assert_eq!(requests.iter().filter(|r| **r == "POST /oauth/token").count(), 2, "code exchange + one refresh: {requests:?}");
    for key in ["code_flow_tools", "code_flow_tools_after_refresh", "client_credentials_tools"] {
        let tools = seen[key].as_array().unwrap();
        assert!(tools.contains(&Value::from("spine_entity_get")), "{key}: {tools:?}");
    }
    let scope = seen["scope"].as_str().unwrap();
    assert!(!scope.contains("admin") && !scope.contains("approvals:decide"), "{scope}");

    // The refresh token the SDK rotated away is dead, and presenting it revokes the family.
    let base = url.trim_end_matches("/mcp");
    let old = seen["old_refresh_token"].as_str().unwrap();
    let client_id = seen["client_id"].as_str().unwrap();
    let form = [("grant_type", "refresh_token"), ("client_id", client_id), ("refresh_token", old)];
    let answer: Value = tokio::runtime::Runtime::new().unwrap().block_on(async {
        reqwest::Client::new().post(format!("{base}/oauth/token")).form(&form).send().await.unwrap().json().await.unwrap()
    });
    assert_eq!(answer["error"], "invalid_grant", "{answer}");

    drop(server);
    let stdout_log = drain.join().unwrap();
    let logs = format!("{}\n{stdout_log}", std::fs::read_to_string(&log_path).unwrap());
    assert!(logs.contains("tokens issued"), "debug logs were captured");
    for secret in [PASSWORD, cc_secret.as_str(), old] {
        assert!(!logs.contains(secret), "a secret reached the server's logs");
    }
}
