//! Helpers shared by the end-to-end tests of `continuity serve`: start the real binary
//! on port 0, run the admin CLI against its home, speak MCP over HTTP.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

pub mod browser;

pub const BIN: &str = env!("CARGO_BIN_EXE_continuity");

pub struct Server {
    pub child: Child,
    pub base: String,
    pub key: String,
    pub home: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn spawn(home: &Path) -> Server {
    spawn_with_env(home, &[])
}

/// [`spawn`] with more environment (e-mail settings).
pub fn spawn_with_env(home: &Path, env: &[(&str, &str)]) -> Server {
    let mut child = Command::new(BIN)
        .args(["serve", "--embedder", "hashing", "--addr", "127.0.0.1:0", "--home"])
        .arg(home)
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start continuity serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let (mut url, mut key_path) = (None, None);
    while url.is_none() || key_path.is_none() {
        let line = lines.next().expect("serve exited before printing its URL").expect("read stdout");
        if let Some(u) = line.strip_prefix("MCP URL:") {
            url = Some(u.trim().trim_end_matches("/mcp").to_owned());
        }
        if let Some(k) = line.strip_prefix("Owner key:") {
            key_path = Some(k.trim().split(' ').next().expect("key path").to_owned());
        }
    }
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    let key_path = key_path.expect("key path");
    let meta = std::fs::metadata(&key_path).expect("key file exists");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "the owner key file is private");
    let key = std::fs::read_to_string(&key_path).expect("read key").trim().to_owned();
    Server { child, base: url.expect("url"), key, home: home.to_owned() }
}

/// [`cli`] with `stdin` written to the command (a password for `user add`).
pub fn cli_with_stdin(home: &Path, args: &[&str], stdin: &str) -> String {
    use std::io::Write as _;
    let mut child = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cli");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    let out = child.wait_with_output().expect("cli output");
    assert!(out.status.success(), "continuity {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf8")
}

/// `continuity --home HOME --embedder hashing ARGS…`: whether it succeeded, stdout, stderr.
pub fn run(home: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(["--embedder", "hashing"])
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

pub fn cli(home: &Path, args: &[&str]) -> String {
    cli_with_env(home, args, &[])
}

/// [`cli`] with more environment.
pub fn cli_with_env(home: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .output()
        .expect("run cli");
    assert!(out.status.success(), "continuity {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf8")
}

pub fn client() -> reqwest::Client {
    reqwest::Client::new()
}

pub async fn rpc(base: &str, key: Option<&str>, body: Value) -> reqwest::Response {
    let mut req = client()
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&body);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    req.send().await.expect("send")
}

pub async fn call_tool(base: &str, key: &str, name: &str, args: Value) -> Value {
    let resp =
        rpc(base, Some(key), json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":name,"arguments":args}})).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.expect("json");
    v["result"].clone()
}
