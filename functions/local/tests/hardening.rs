//! Attacks on a release-like `continuity serve`: the real binary on port 0, driven only
//! through what a client or an operator can touch (TCP, HTTP, MCP, the home folder).
//!
//! Each test is one attack — what a hostile client does, or what goes wrong on the
//! operator's machine — and asserts what must not happen:
//!
//! - thousands of slow clients (half-sent heads, half-sent bodies) do not lock out a
//!   client that sends a whole request, nor blow up the server's memory;
//! - a leaked `Mcp-Session-Id` reads, streams and deletes nothing for any other
//!   credential, and confirms nothing either (the same 404 as an unknown id);
//! - `RUST_LOG=trace` puts no turn, proposal, document, query or key in the logs;
//! - a lost or replaced `keys/vault.key` stops the start with a message naming the file,
//!   instead of starting on a key that cannot open the sealed data;
//! - the database files are the owner's only;
//! - a damaged database stops the start, naming the file and `continuity restore`;
//! - a full disk makes `/healthz` say 503 and writes fail cleanly, and both recover when
//!   space is freed (needs root for a small tmpfs; `tests/run.sh` runs as root);
//! - the search partition a stop saves is the owner's only, read once by the next start,
//!   and a damaged one is dropped for the database's rows.
//!
//! No assertion is about wall-clock speed: timeouts here only detect hangs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, Server, call_tool, cli, client, rpc, spawn};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

/// How long anything may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(30);

// ------------------------------------------------------------------ helpers

/// Starts `continuity serve` on `home` like [`common::spawn`], with `extra` arguments,
/// `RUST_LOG=rust_log`, and its stderr (the logs) written to `stderr_to` (else discarded).
fn start(home: &Path, extra: &[&str], rust_log: &str, stderr_to: Option<&Path>) -> Server {
    let stderr = match stderr_to {
        Some(p) => Stdio::from(std::fs::File::create(p).expect("create the log file")),
        None => Stdio::null(),
    };
    let mut child = Command::new(BIN)
        .args(["serve", "--embedder", "hashing", "--addr", "127.0.0.1:0", "--home"])
        .arg(home)
        .args(extra)
        .env("RUST_LOG", rust_log)
        .stdout(Stdio::piped())
        .stderr(stderr)
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
    let key = std::fs::read_to_string(key_path.expect("key path")).expect("read key").trim().to_owned();
    Server { child, base: url.expect("url"), key, home: home.to_owned() }
}

/// Waits for `child` to exit, at most `within`.
async fn wait_exit(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Stops the server with SIGTERM (graceful: logs written, the WAL checkpointed) and
/// waits for it to exit.
async fn stop(s: &mut Server) -> ExitStatus {
    let sent = Command::new("kill").args(["-TERM", &s.child.id().to_string()]).status().expect("kill");
    assert!(sent.success(), "SIGTERM was delivered");
    // In-flight requests get up to 30 s (SHUTDOWN_GRACE); twice that means it hung.
    wait_exit(&mut s.child, 2 * HANG).await.expect("the server stops after SIGTERM")
}

/// Runs `continuity serve` on a home it must refuse: its exit status, stdout and stderr.
/// Panics if it is still running after [`HANG`] (it started on a home it should not).
async fn start_refused(home: &Path) -> (ExitStatus, String, String) {
    let mut child = Command::new(BIN)
        .args(["serve", "--embedder", "hashing", "--addr", "127.0.0.1:0", "--home"])
        .arg(home)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start continuity serve");
    let read_all = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read_all(Box::new(child.stdout.take().expect("stdout")));
    let err = read_all(Box::new(child.stderr.take().expect("stderr")));
    let Some(status) = wait_exit(&mut child, HANG).await else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("continuity serve kept running on a home it must refuse; stdout: {}", out.join().unwrap());
    };
    (status, out.join().unwrap(), err.join().unwrap())
}

/// `GET /healthz` on a fresh client (so a fresh connection): status and JSON body.
async fn healthz(base: &str) -> (u16, Value) {
    let fresh = reqwest::Client::new();
    let r = tokio::time::timeout(HANG, fresh.get(format!("{base}/healthz")).send())
        .await
        .expect("/healthz answers (it hung)")
        .expect("/healthz");
    let status = r.status().as_u16();
    let body = tokio::time::timeout(HANG, r.json::<Value>()).await.expect("/healthz body (it hung)").expect("JSON");
    (status, body)
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

/// One `/mcp` request as a session client sends it: `method` with `key`, naming
/// `session` (if any), with a JSON-RPC `body` (for a POST).
async fn mcp(base: &str, key: &str, method: reqwest::Method, session: Option<&str>, body: Option<Value>) -> reqwest::Response {
    let accept = if method == reqwest::Method::GET { "text/event-stream" } else { "application/json, text/event-stream" };
    let mut req = client()
        .request(method, format!("{base}/mcp"))
        .bearer_auth(key)
        .header("accept", accept)
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(sid) = session {
        req = req.header("mcp-session-id", sid);
    }
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b.to_string());
    }
    tokio::time::timeout(HANG, req.send()).await.expect("/mcp answers (it hung)").expect("send")
}

/// Status and body of a response; a body still streaming after 10 s (an SSE stream the
/// request should not have opened) reads as `<stream left open>`.
async fn answer(r: reqwest::Response) -> (u16, String) {
    let status = r.status().as_u16();
    let body = tokio::time::timeout(Duration::from_secs(10), r.text())
        .await
        .map_or_else(|_| "<stream left open>".to_owned(), |b| b.unwrap_or_default());
    (status, body)
}

/// Opens an MCP session with `key` (`initialize`, then `notifications/initialized`).
async fn open_session(base: &str, key: &str) -> String {
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hardening","version":"1"}}});
    let r = mcp(base, key, reqwest::Method::POST, None, Some(init)).await;
    assert_eq!(r.status(), 200);
    let sid = r.headers().get("mcp-session-id").expect("initialize names a session").to_str().unwrap().to_owned();
    let v = sse_message(&r.text().await.unwrap());
    assert_eq!(v["result"]["serverInfo"]["name"], "continuity", "{v}");
    let r =
        mcp(base, key, reqwest::Method::POST, Some(&sid), Some(json!({"jsonrpc":"2.0","method":"notifications/initialized"})))
            .await;
    assert_eq!(r.status(), 202);
    sid
}

/// An operator write of an entity (`admin` scope).
async fn put_entity(base: &str, key: &str, ty: &str, id: &str, name: &str) -> u16 {
    let r = client()
        .put(format!("{base}/v1/admin/entities/{ty}/{id}"))
        .bearer_auth(key)
        .json(&json!({"attributes": {"name": name}, "pole_class": "organization"}))
        .send();
    tokio::time::timeout(HANG, r).await.expect("PUT answers (it hung)").expect("send").status().as_u16()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

// ------------------------------------------------------------------ 1. slow clients

/// A head cut off mid-header, never finished.
const PARTIAL_HEAD: &[u8] = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le";
/// A whole head announcing 100 000 body bytes, followed by only 10 of them.
const HALF_BODY: &[u8] =
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"jsonrpc\"";
/// Connects attempted at once; each gets [`CONNECT_TIMEOUT`].
const CONNECT_BATCH: usize = 100;
/// A connect the kernel's full backlog leaves waiting is given up (and counted) after this.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// One slow client: connects, sends `bytes`, and is kept open by the caller. `None` when
/// the connect failed or timed out.
async fn attacker(addr: SocketAddr, bytes: &'static [u8]) -> Option<tokio::net::TcpStream> {
    let mut stream = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await.ok()?.ok()?;
    // The server may already have closed this connection to make room: the write then
    // fails, and the socket is held all the same.
    let _ = tokio::time::timeout(CONNECT_TIMEOUT, stream.write_all(bytes)).await;
    Some(stream)
}

/// Opens `n` slow clients sending `bytes`, [`CONNECT_BATCH`] at a time: the open
/// sockets and how many connects failed.
async fn open_attackers(addr: SocketAddr, n: usize, bytes: &'static [u8]) -> (Vec<tokio::net::TcpStream>, usize) {
    let (mut held, mut failed) = (Vec::with_capacity(n), 0);
    let mut left = n;
    while left > 0 {
        let batch = left.min(CONNECT_BATCH);
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..batch {
            set.spawn(attacker(addr, bytes));
        }
        while let Some(r) = set.join_next().await {
            match r.expect("attacker task") {
                Some(s) => held.push(s),
                None => failed += 1,
            }
        }
        left -= batch;
    }
    (held, failed)
}

/// The resident memory of process `pid`, in KiB (`VmRSS` of `/proc/<pid>/status`).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/<pid>/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("a VmRSS line")
}

/// 2 000 clients that never finish their request head and 300 that never finish their
/// body, against a cap of 256 connections: a client sending a whole request is still
/// served (the most stalled connection is closed to make room), memory stays bounded,
/// and the server lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_cannot_exhaust_the_server() {
    // 2 300 sockets on this side too.
    rlimit::increase_nofile_limit(u64::MAX).expect("raise the open-files limit");
    let dir = tempfile::tempdir().unwrap();
    // A header timeout longer than the test: only the connection cap's eviction frees
    // the slots the slow clients hold.
    let mut s = start(&dir.path().join("home"), &["--max-connections", "256", "--header-timeout", "600"], "warn", None);
    let addr: SocketAddr = s.base.trim_start_matches("http://").parse().expect("a socket address in the URL");
    let (status, _) = healthz(&s.base).await;
    assert_eq!(status, 200, "healthy before the attack");

    let (mut held, failed_heads) = open_attackers(addr, 2000, PARTIAL_HEAD).await;
    let (bodies, failed_bodies) = open_attackers(addr, 300, HALF_BODY).await;
    held.extend(bodies);
    eprintln!(
        "slow clients held: {} (connects failed or timed out: {failed_heads} half heads, {failed_bodies} half bodies)",
        held.len()
    );
    assert!(held.len() >= 1000, "the attack really ran: only {} of 2 300 connects succeeded", held.len());

    // While every slow client is held: whole requests are served.
    for i in 0..5 {
        let (status, v) = healthz(&s.base).await;
        assert_eq!(status, 200, "/healthz #{i} under attack: {v}");
        assert_eq!(v["status"], "ok", "{v}");
    }
    let r = tokio::time::timeout(HANG, rpc(&s.base, Some(&s.key), json!({"jsonrpc":"2.0","id":1,"method":"tools/list"})))
        .await
        .expect("an authenticated MCP call under attack (it hung)");
    assert_eq!(r.status(), 200, "an MCP client is not locked out");
    let rss = rss_kib(s.child.id());
    eprintln!("server resident memory under attack: {} MiB", rss / 1024);
    assert!(rss < 512 * 1024, "resident memory under attack is {rss} KiB (limit 512 MiB)");
    assert!(s.child.try_wait().unwrap().is_none(), "the server is alive under attack");

    // The attackers go away; the server is as before.
    drop(held);
    let (status, v) = healthz(&s.base).await;
    assert_eq!(status, 200, "{v}");
    assert!(s.child.try_wait().unwrap().is_none(), "the server is alive after the attack");
}

// ------------------------------------------------------------------ 2. session ownership

/// rmcp's answer for a session it does not know, which is also the answer for someone
/// else's session.
const UNKNOWN_SESSION: &str = "Not Found: Session not found";

/// The owner opens a session; another key of the same principal, a key of another
/// principal of the same tenant and a key of another tenant, each holding the session
/// id, can neither use it (POST), stream it (GET) nor end it (DELETE) — and each gets
/// exactly the answer for a made-up id, so the id is not even confirmed. The owner's
/// session is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_belongs_to_the_credential_that_opened_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    let sid = open_session(&s.base, &s.key).await;

    // The owner key's principal, from `key list` (`<key id>  active  principal=<p>  …`).
    let owner_key_id = s.key.split('.').nth(1).expect("ctn_<tenant>.<id>.<secret>");
    let listed = cli(&s.home, &["key", "list", "--tenant", "local"]);
    let owner_principal = listed
        .lines()
        .find(|l| l.starts_with(owner_key_id))
        .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("principal=")))
        .unwrap_or_else(|| panic!("the owner key in {listed}"))
        .to_owned();
    let scopes = "mcp:tools tenant:read";
    let same_principal =
        cli(&s.home, &["key", "create", "--tenant", "local", "--scopes", scopes, "--principal", &owner_principal])
            .trim()
            .to_owned();
    let same_tenant = cli(&s.home, &["key", "create", "--tenant", "local", "--scopes", scopes]).trim().to_owned();
    cli(&s.home, &["tenant", "create", "rival", "--plan", "pro"]);
    let other_tenant = cli(&s.home, &["key", "create", "--tenant", "rival", "--scopes", scopes]).trim().to_owned();

    let made_up = "5b0c7e1a-2f4d-4c8e-9a61-000000000000";
    let list = json!({"jsonrpc":"2.0","id":2,"method":"tools/list"});
    for (who, key) in [("same principal", &same_principal), ("same tenant", &same_tenant), ("other tenant", &other_tenant)] {
        // The key itself works: it is refused the session, not the server.
        let r = rpc(&s.base, Some(key), list.clone()).await;
        assert_eq!(r.status(), 200, "{who}: the key works statelessly");
        for method in [reqwest::Method::POST, reqwest::Method::GET, reqwest::Method::DELETE] {
            let body = (method == reqwest::Method::POST).then(|| list.clone());
            let unknown = answer(mcp(&s.base, key, method.clone(), Some(made_up), body.clone()).await).await;
            assert_eq!(unknown, (404, UNKNOWN_SESSION.to_owned()), "{who} {method} with a made-up session id");
            let stolen = answer(mcp(&s.base, key, method.clone(), Some(&sid), body).await).await;
            assert_eq!(stolen, unknown, "{who} {method} with the owner's session id: the same answer as a made-up id");
        }
    }
    // The owner's answer for a made-up id is the same too.
    let unknown = answer(mcp(&s.base, &s.key, reqwest::Method::POST, Some(made_up), Some(list.clone())).await).await;
    assert_eq!(unknown, (404, UNKNOWN_SESSION.to_owned()));

    // The session is untouched: the owner still uses it, then ends it.
    let r = mcp(&s.base, &s.key, reqwest::Method::POST, Some(&sid), Some(list.clone())).await;
    assert_eq!(r.status(), 200, "the owner's session survived the foreign DELETEs");
    let v = sse_message(&r.text().await.unwrap());
    assert!(!v["result"]["tools"].as_array().expect("tools").is_empty(), "{v}");
    let r = mcp(&s.base, &s.key, reqwest::Method::DELETE, Some(&sid), None).await;
    assert!(r.status().is_success(), "the owner ends the session: {}", r.status());
    let gone = answer(mcp(&s.base, &s.key, reqwest::Method::POST, Some(&sid), Some(list)).await).await;
    assert_eq!(gone.0, 404, "the ended session is gone: {gone:?}");
}

// ------------------------------------------------------------------ 3. logs

/// Strings that travel only inside content: none may reach a log line.
const CANARIES: &[&str] =
    &["CANARYTURN7731", "CANARYSESSION7731", "CANARYPROP7731", "CANARYDOC7731", "CANARYQUERY7731", "CANARYENTITY7731"];

/// Everything at `RUST_LOG=trace`: turns (stateless and in a session), a proposal, a
/// knowledge-base document, search queries and an entity carry canaries; the logs have
/// request lines but no canary and no part of the owner key's secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_hold_no_content_at_any_level() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let mut s = start(&dir.path().join("home"), &[], "trace", Some(&log));

    let ok = |what: &str, r: &Value| assert_eq!(r["isError"], false, "{what}: {r}");
    let r = call_tool(
        &s.base,
        &s.key,
        "memory.write_conversational",
        json!({"session": "canary", "role": "user", "content": "The renewal is at risk, CANARYTURN7731, call them."}),
    )
    .await;
    ok("write_conversational", &r);
    let r = call_tool(
        &s.base,
        &s.key,
        "memory.propose",
        json!({"title": "Renewal calls", "body": "Renewal calls happen a quarter ahead. CANARYPROP7731", "kind": "decision"}),
    )
    .await;
    ok("propose", &r);
    let r = tokio::time::timeout(
        HANG,
        client()
            .post(format!("{}/v1/kb/documents", s.base))
            .bearer_auth(&s.key)
            .json(&json!({"title": "Runbook", "body": "Restart the sync job first. CANARYDOC7731"}))
            .send(),
    )
    .await
    .expect("POST /v1/kb/documents (it hung)")
    .expect("send");
    let status = r.status();
    let body = r.text().await.unwrap_or_default();
    assert_eq!(status, 201, "{body}");
    ok("kb.search", &call_tool(&s.base, &s.key, "kb.search", json!({"query": "CANARYQUERY7731 CANARYDOC7731"})).await);
    ok("memory.search_org", &call_tool(&s.base, &s.key, "memory.search_org", json!({"query": "CANARYQUERY7731"})).await);
    assert_eq!(put_entity(&s.base, &s.key, "account", "canary-1", "CANARYENTITY7731 Corp").await, 200);
    ok("entity.search", &call_tool(&s.base, &s.key, "spine.entity.search", json!({"query": "CANARYENTITY7731"})).await);
    // The same through a session (rmcp's session transport).
    let sid = open_session(&s.base, &s.key).await;
    let call = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory.write_conversational",
        "arguments":{"session":"canary-2","role":"assistant","content":"Noted: CANARYSESSION7731."}}});
    let r = mcp(&s.base, &s.key, reqwest::Method::POST, Some(&sid), Some(call)).await;
    assert_eq!(r.status(), 200);
    let v = sse_message(&r.text().await.unwrap());
    assert_eq!(v["result"]["isError"], false, "{v}");

    // Background work (indexing, triage, the audit ledger) gets a moment to log whatever
    // it would; then a graceful stop writes out the rest.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let exit = stop(&mut s).await;
    assert!(exit.success(), "graceful stop: {exit:?}");

    let text = String::from_utf8_lossy(&std::fs::read(&log).expect("read the log")).into_owned();
    assert!(text.contains("\"request\""), "request lines were logged (logging was on): {} bytes", text.len());
    assert!(text.contains("listening"), "the start was logged");
    eprintln!("{} log lines at RUST_LOG=trace", text.lines().count());
    for canary in CANARIES {
        let line = text.lines().find(|l| l.contains(canary));
        assert!(line.is_none(), "content ({canary}) reached the logs: {}", line.unwrap_or_default());
    }
    let secret = s.key.rsplit('.').next().expect("the key's secret");
    assert!(secret.len() >= 16, "a real secret: {secret:?}");
    let line = text.lines().find(|l| l.contains(secret));
    assert!(line.is_none(), "the owner key's secret reached the logs: {}", line.unwrap_or_default());
}

// ------------------------------------------------------------------ 4. vault key

/// The home's data is sealed under `keys/vault.key`. Without it, or with another key in
/// its place, the server refuses to start, names the file and the way back, and creates
/// or overwrites nothing; with the original back, it starts and the data reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_or_replaced_vault_key_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let vault_key = home.join("keys").join("vault.key");
    let mut s = spawn(&home);
    assert_eq!(put_entity(&s.base, &s.key, "account", "sealed-1", "Sealed Corp").await, 200);
    assert!(stop(&mut s).await.success());
    drop(s);
    assert!(vault_key.exists(), "the first start created {}", vault_key.display());

    // (a) The key is lost.
    let saved = dir.path().join("vault.key.saved");
    std::fs::rename(&vault_key, &saved).unwrap();
    let (status, out, err) = start_refused(&home).await;
    eprintln!("without the key: {err}");
    assert!(!status.success(), "a start without the vault key fails: {status:?}");
    assert!(!out.contains("MCP URL:"), "it never listened: {out}");
    assert!(err.contains("vault.key"), "the message names the file: {err}");
    assert!(err.contains("backup") || err.contains("continuity restore"), "the message says how to recover: {err}");
    assert!(!err.contains("retry shortly"), "retrying cannot help: {err}");
    assert!(!vault_key.exists(), "no new key was made up in its place");

    // (b) Another key in its place.
    let mut random = [0u8; 32];
    std::fs::File::open("/dev/urandom").unwrap().read_exact(&mut random).unwrap();
    std::fs::write(&vault_key, random).unwrap();
    std::fs::set_permissions(&vault_key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (status, out, err) = start_refused(&home).await;
    eprintln!("with another key: {err}");
    assert!(!status.success(), "a start with another vault key fails: {status:?}");
    assert!(!out.contains("MCP URL:"), "it never listened: {out}");
    assert!(err.contains("vault.key"), "the message names the file: {err}");
    assert!(!err.contains("retry shortly"), "retrying cannot help: {err}");
    assert_eq!(std::fs::read(&vault_key).unwrap(), random, "the wrong key was left as it was");

    // (c) The original key back: the sealed entity reads back.
    std::fs::rename(&saved, &vault_key).unwrap();
    let s = spawn(&home);
    let got = call_tool(&s.base, &s.key, "spine.entity.get", json!({"type": "account", "id": "sealed-1"})).await;
    assert_eq!(got["isError"], false, "{got}");
    assert_eq!(got["structuredContent"]["entity"]["attributes"]["name"], "Sealed Corp");
    let (status, v) = healthz(&s.base).await;
    assert_eq!(status, 200, "{v}");
}

// ------------------------------------------------------------------ 5. file modes

/// The database files (and SQLite's `-wal` and `-shm` beside them) are readable by the
/// owner only, whatever the umask; a file made readable by others (copied back from a
/// backup, say) is narrowed again on the next start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_file_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut s = spawn(&home);
    // A write, so the WAL is in use.
    assert_eq!(put_entity(&s.base, &s.key, "account", "private-1", "Private Corp").await, 200);
    let check = |when: &str| {
        assert!(home.join("continuity.db").exists());
        for db in ["continuity.db", "fortress.db"] {
            for suffix in ["", "-wal", "-shm"] {
                let path = home.join(format!("{db}{suffix}"));
                if path.exists() {
                    assert_eq!(mode(&path), 0o600, "{when}: {} is the owner's only", path.display());
                }
            }
        }
    };
    check("after the first start");
    assert!(stop(&mut s).await.success());
    drop(s);

    std::fs::set_permissions(home.join("continuity.db"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let s = spawn(&home);
    check("after a start on a file readable by others");
    drop(s);
}

// ------------------------------------------------------------------ 6. damaged database

/// The database file's first 4 KiB are overwritten: the server refuses to start, names
/// the file and `continuity restore` (not "retry shortly", which would never help), and
/// leaves the damaged file as it is for the operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_database_is_named_with_the_way_back() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut s = spawn(&home);
    assert_eq!(put_entity(&s.base, &s.key, "account", "doomed-1", "Doomed Corp").await, 200);
    assert!(stop(&mut s).await.success());
    drop(s);

    let db = home.join("continuity.db");
    let garbage = vec![0x5a_u8; 4096];
    {
        let mut f = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
        f.write_all(&garbage).unwrap();
        f.sync_all().unwrap();
    }
    for f in ["continuity.db-wal", "continuity.db-shm"] {
        let _ = std::fs::remove_file(home.join(f));
    }
    let (status, out, err) = start_refused(&home).await;
    eprintln!("on a damaged database: {err}");
    assert!(!status.success(), "a start on a damaged database fails: {status:?}");
    assert!(!out.contains("MCP URL:"), "it never listened: {out}");
    assert!(err.contains("continuity.db"), "the message names the file: {err}");
    assert!(err.contains("continuity restore"), "the message names the way back: {err}");
    assert!(!err.contains("retry shortly"), "retrying cannot help: {err}");
    let now = std::fs::read(&db).unwrap();
    assert_eq!(&now[..4096], &garbage[..], "the damaged file was not replaced by a new, empty database");
}

// ------------------------------------------------------------------ 7. full disk

/// A tmpfs mounted for one test, unmounted (lazily) when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Self {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .unwrap_or_else(|e| panic!("this test needs root to mount a tmpfs (tests/run.sh runs as root): mount: {e}"));
        assert!(
            out.status.success(),
            "this test needs root to mount a tmpfs (tests/run.sh runs as root): mount failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self(dir.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes zeros to `path` until the filesystem is full (down to the last byte it
/// takes); returns the bytes written.
fn fill(path: &Path) -> u64 {
    let mut f = std::fs::File::create(path).expect("create the filler");
    let buf = vec![0u8; 1 << 20];
    let (mut chunk, mut total) = (buf.len(), 0u64);
    loop {
        match f.write(&buf[..chunk]) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull || e.raw_os_error() == Some(28) => {
                if chunk == 1 {
                    break;
                }
                chunk = (chunk / 2).max(1);
            }
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    let _ = f.sync_all();
    total
}

/// A conversational write; the raw answer (status and JSON) so a failure can be judged.
async fn write_turn(s: &Server, content: &str) -> (u16, Value) {
    let call = json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"memory.write_conversational",
        "arguments":{"session":"disk","role":"user","content":content}}});
    let r = tokio::time::timeout(HANG, rpc(&s.base, Some(&s.key), call)).await.expect("the write answers (it hung)");
    let status = r.status().as_u16();
    let text = tokio::time::timeout(HANG, r.text()).await.expect("the write's body (it hung)").unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The home's filesystem fills up: `/healthz` answers 503 with `disk: failed` (it answers,
/// it does not hang), a write fails cleanly; space freed, both recover without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_reports_a_full_disk() {
    let mnt = tempfile::tempdir().unwrap();
    let _tmpfs = Tmpfs::mount(mnt.path(), "40m");
    let s = spawn(&mnt.path().join("home"));
    let (status, v) = healthz(&s.base).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["checks"]["disk"], "ok", "{v}");
    let (status, v) = write_turn(&s, "before the disk fills").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["isError"], false, "a write with room: {v}");

    let filler = mnt.path().join("filler");
    let written = tokio::task::spawn_blocking({
        let filler = filler.clone();
        move || fill(&filler)
    })
    .await
    .unwrap();
    eprintln!("filled the tmpfs with {} MiB", written / (1024 * 1024));

    let (status, v) = healthz(&s.base).await;
    assert_eq!(status, 503, "a full disk is not ready: {v}");
    assert_eq!(v["status"], "unavailable", "{v}");
    assert_eq!(v["checks"]["disk"], "failed", "{v}");
    let (status, v) = write_turn(&s, "while the disk is full").await;
    eprintln!("a write on a full disk: HTTP {status}: {v}");
    assert!(
        status >= 500 || (status == 200 && v["result"]["isError"] == true),
        "a write on a full disk fails cleanly (an error result or a 5xx), got HTTP {status}: {v}"
    );

    std::fs::remove_file(&filler).unwrap();
    let (status, v) = healthz(&s.base).await;
    assert_eq!(status, 200, "ready again once space is freed: {v}");
    assert_eq!(v["checks"]["disk"], "ok", "{v}");
    // Writes resume (a background writer that backed off may take a moment).
    let deadline = Instant::now() + HANG;
    loop {
        let (status, v) = write_turn(&s, "after space was freed").await;
        if status == 200 && v["result"]["isError"] == false {
            break;
        }
        assert!(Instant::now() < deadline, "writes did not resume once space was freed: HTTP {status}: {v}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A stop saves the search partition (more than 2 000 chunks) for the next start, which
/// reads it instead of the rows and deletes it; cut short on disk, it is dropped and the
/// rows answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_saves_the_search_index_and_a_damaged_save_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let notes = dir.path().join("notes.jsonl");
    let lines: String = (0..2_100).map(|i| format!("{{\"text\":\"note {i}: the quarterly review of ledger{i}\"}}\n")).collect();
    std::fs::write(&notes, lines).unwrap();
    cli(&home, &["init"]);
    let out = cli(&home, &["import", notes.to_str().unwrap()]);
    assert!(out.contains("memories 2100 new"), "{out}");
    let saved = home.join("continuity.db.search");
    let files = || std::fs::read_dir(&saved).map_or_else(|_| Vec::new(), |d| d.map(|e| e.unwrap().path()).collect::<Vec<_>>());
    let finds = |s: &Server, what: &'static str| {
        let (base, key) = (s.base.clone(), s.key.clone());
        async move { call_tool(&base, &key, "memory_search", json!({"query": what})).await.to_string().contains(what) }
    };

    let mut s = spawn(&home);
    assert!(finds(&s, "ledger1234").await, "the imported memories are searchable");
    stop(&mut s).await;
    let file = files();
    assert_eq!(file.len(), 1, "the stop saved the partition: {file:?}");
    assert_eq!(std::fs::metadata(&file[0]).unwrap().permissions().mode() & 0o777, 0o600, "the owner's only");

    let mut s = spawn(&home);
    assert!(finds(&s, "ledger77").await, "answered from the saved partition");
    assert!(files().is_empty(), "read once: the start deleted it");
    stop(&mut s).await;

    let file = files();
    assert_eq!(file.len(), 1);
    let bytes = std::fs::read(&file[0]).unwrap();
    std::fs::write(&file[0], &bytes[..bytes.len() / 3]).unwrap();
    let s = spawn(&home);
    assert!(finds(&s, "ledger2099").await, "a damaged save is dropped and the rows answer");
    assert!(files().is_empty());
}
