//! `continuity stdio --url` in front of a real `continuity serve` that is killed
//! (SIGKILL) and restarted mid-session: reads during the outage come from the offline
//! archive marked stale; writes are acknowledged as saved, survive a restart of the
//! bridge itself, and are replayed in order exactly once; a write the server refuses on
//! replay is reported and listed by `--status`, never dropped. Also: a repeated call
//! with the same idempotency key runs once on the server, and a local `continuity
//! stdio` with a key attaches to the home's running `serve`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_continuity");
const SESSION: &str = "bridge-journal";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `continuity serve` on `home` at `port`, up when this returns.
fn serve(home: &Path, port: u16) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(home.with_extension("log")).unwrap();
    let child = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(["--embedder", "hashing", "serve", "--addr", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "serve did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

fn kill(mut c: Child) {
    c.kill().unwrap();
    c.wait().unwrap();
}

fn cli(home: &Path, args: &[&str], key: Option<&str>) -> String {
    let mut c = Command::new(BIN);
    c.arg("--home").arg(home).args(["--embedder", "hashing"]).args(args).env("RUST_LOG", "warn");
    if let Some(k) = key {
        c.env("CONTINUITY_KEY", k);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A stdio client of the bridge; notifications are kept aside.
struct Client {
    child: Child,
    stdin: std::process::ChildStdin,
    rx: mpsc::Receiver<Value>,
    notes: Vec<Value>,
    next: u64,
}

impl Client {
    fn start(home: &Path, args: &[&str], key: &str) -> Self {
        let mut child = Command::new(BIN)
            .arg("--home")
            .arg(home)
            .args(["--embedder", "hashing", "stdio"])
            .args(args)
            .env("CONTINUITY_KEY", key)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("non-JSON on stdout {line:?}: {e}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut c = Self { child, stdin, rx, notes: Vec::new(), next: 1 };
        let init = c.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bridge-test", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        writeln!(c.stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
        c
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        writeln!(self.stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        self.stdin.flush().unwrap();
        loop {
            let v = self.rx.recv_timeout(Duration::from_secs(60)).expect("an answer");
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
            assert!(v.get("id").is_none(), "an answer to another request: {v}");
            self.notes.push(v);
        }
    }

    fn call(&mut self, tool: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        r.get("result").cloned().unwrap_or_else(|| panic!("{tool}: {r}"))
    }

    fn write(&mut self, content: &str) -> Value {
        self.call("memory.write_conversational", json!({"session": SESSION, "role": "user", "content": content}))
    }

    /// The turns of the session, and the whole result.
    fn turns(&mut self) -> (Vec<String>, Value) {
        let r = self.call("memory.read_conversational", json!({"session": SESSION}));
        let turns = r["structuredContent"]["turns"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|t| t["content"].as_str().unwrap().to_owned())
            .collect();
        (turns, r)
    }

    fn close(self) {
        let Self { mut child, stdin, .. } = self;
        drop(stdin);
        assert!(child.wait().unwrap().success(), "the bridge exits cleanly when stdin closes");
    }
}

struct Rig {
    _dir: tempfile::TempDir,
    server_home: PathBuf,
    client_home: PathBuf,
    port: u16,
    key: String,
}

fn rig() -> (Rig, Child) {
    let dir = tempfile::tempdir().unwrap();
    let server_home = dir.path().join("server");
    let client_home = dir.path().join("laptop");
    let port = free_port();
    let server = serve(&server_home, port);
    let key = cli(
        &server_home,
        &[
            "key",
            "create",
            "--tenant",
            "local",
            "--principal",
            "owner",
            "--scopes",
            "mcp:tools mcp:resources tenant:read memory:read memory:write",
        ],
        None,
    )
    .trim()
    .to_owned();
    (Rig { _dir: dir, server_home, client_home, port, key }, server)
}

#[test]
fn the_bridge_survives_a_killed_and_restarted_server() {
    let (rig, server) = rig();
    let url = format!("http://127.0.0.1:{}", rig.port);
    let mut c = Client::start(&rig.client_home, &["--url", &url], &rig.key);

    // Online: a write goes straight through, a read is answered and archived.
    let w = c.write("first, online");
    assert_ne!(w["isError"], true, "{w}");
    assert_eq!(w["structuredContent"]["seq"], 1);
    let (turns, _) = c.turns();
    assert_eq!(turns, ["first, online"]);

    kill(server);

    // The outage: the read comes from the archive, marked stale with its age.
    let (turns, r) = c.turns();
    assert_eq!(turns, ["first, online"]);
    assert!(r["_meta"]["continuity.dev/stale"]["age_seconds"].is_u64(), "{r}");
    assert!(r["content"][0]["text"].as_str().unwrap().starts_with("[stale:"), "{r}");
    // A read never seen before has nothing to fall back on: a tool error says so.
    let r = c.call("memory.read_conversational", json!({"session": "never-read"}));
    assert_eq!(r["isError"], true, "{r}");

    // Writes are acknowledged as saved, in order — one the server will refuse among them.
    let mut seqs = Vec::new();
    for content in ["second, offline", "third, offline"] {
        let w = c.write(content);
        assert_ne!(w["isError"], true, "{w}");
        seqs.push(w["_meta"]["continuity.dev/buffered"]["seq"].as_i64().unwrap());
    }
    let bad = c.call("memory.write_conversational", json!({"session": SESSION, "role": "robot", "content": "refused"}));
    seqs.push(bad["_meta"]["continuity.dev/buffered"]["seq"].as_i64().unwrap());
    let w = c.write("fourth, offline");
    seqs.push(w["_meta"]["continuity.dev/buffered"]["seq"].as_i64().unwrap());
    assert_eq!(seqs, [1, 2, 3, 4]);

    // The bridge itself restarts (the client quit): the acknowledged writes are on disk.
    c.close();
    let status = cli(&rig.client_home, &["stdio", "--url", &url, "--status"], Some(&rig.key));
    assert!(status.contains("4 queued, 0 sent, 0 refused"), "{status}");
    let mut c = Client::start(&rig.client_home, &["--url", &url], &rig.key);

    // The server comes back: the next read replays the buffer first, each write once.
    let server = serve(&rig.server_home, rig.port);
    let (turns, r) = c.turns();
    assert_eq!(turns, ["first, online", "second, offline", "third, offline", "fourth, offline"]);
    assert!(r.get("_meta").and_then(|m| m.get("continuity.dev/stale")).is_none(), "fresh again: {r}");
    let replayed: Vec<(i64, String)> = c
        .notes
        .iter()
        .filter(|n| n["method"] == "notifications/message")
        .map(|n| (n["params"]["data"]["replayed"].as_i64().unwrap(), n["params"]["data"]["outcome"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(replayed, [(1, "sent".into()), (2, "sent".into()), (3, "refused".into()), (4, "sent".into())]);
    let status = cli(&rig.client_home, &["stdio", "--url", &url, "--status"], Some(&rig.key));
    assert!(status.contains("0 queued, 3 sent, 1 refused"), "{status}");
    assert!(status.lines().any(|l| l.starts_with("#3") && l.contains("refused") && l.contains("role")), "{status}");

    // Waiting longer replays nothing again.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(c.turns().0.len(), 4);
    c.close();
    kill(server);
}

/// `memory_forget` through the bridge, of a personal memory and of a conversation turn:
/// the server forgets them, and so does the bridge's own file — once the server is gone,
/// the searches and reads that showed them are not answered from the offline archive,
/// and no row of the bridge's store holds their text.
#[test]
fn a_memory_forgotten_through_the_bridge_leaves_the_offline_archive() {
    let (rig, server) = rig();
    let url = format!("http://127.0.0.1:{}", rig.port);
    let mut c = Client::start(&rig.client_home, &["--url", &url], &rig.key);
    let marker = "zebra-marker-7781 sleeps in the attic";
    let r = c.call("memory_remember", json!({"text": marker}));
    let id = r["structuredContent"]["memory"]["id"].as_str().unwrap_or_else(|| panic!("{r}")).to_owned();
    let found = c.call("memory_search", json!({"query": "zebra-marker-7781"}));
    assert!(found.to_string().contains(&id), "{found}");
    let other = c.call("memory_read_personal", json!({}));
    assert!(other.to_string().contains(&id), "{other}");
    let gone = c.call("memory_forget", json!({"id": id}));
    assert_ne!(gone["isError"], true, "{gone}");
    // A conversation turn the same way: written, found, read back, forgotten by its id.
    let said = "walrus-marker-5521 hides the spare key";
    let w = c.call("memory_write_conversational", json!({"session": "forget-me", "role": "user", "content": said}));
    let turn = w["structuredContent"]["id"].as_str().unwrap_or_else(|| panic!("{w}")).to_owned();
    let found = c.call("memory_search", json!({"query": "walrus-marker-5521"}));
    assert!(found.to_string().contains(&turn), "{found}");
    let read = c.call("memory_read_conversational", json!({"session": "forget-me"}));
    assert!(read.to_string().contains("walrus-marker"), "{read}");
    let gone = c.call("memory_forget", json!({"id": turn}));
    assert_ne!(gone["isError"], true, "{gone}");

    kill(server);
    let r = c.call("memory_search", json!({"query": "zebra-marker-7781"}));
    assert_eq!(r["isError"], true, "no archived answer may show it: {r}");
    let r = c.call("memory_read_personal", json!({}));
    assert_eq!(r["isError"], true, "the list that showed it is dropped too: {r}");
    let r = c.call("memory_search", json!({"query": "walrus-marker-5521"}));
    assert_eq!(r["isError"], true, "no archived answer may show the turn: {r}");
    let r = c.call("memory_read_conversational", json!({"session": "forget-me"}));
    assert_eq!(r["isError"], true, "the session read that showed it is dropped too: {r}");
    c.close();
    let files: Vec<PathBuf> = std::fs::read_dir(rig.client_home.join("bridge"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "db"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let db = rusqlite::Connection::open(&files[0]).unwrap();
    let mut rows: Vec<String> = Vec::new();
    for q in ["SELECT result FROM archive", "SELECT params || coalesce(answer, '') FROM buffer"] {
        let mut st = db.prepare(q).unwrap();
        rows.extend(st.query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap));
    }
    assert!(rows.iter().all(|r| !r.contains("zebra-marker") && !r.contains("walrus-marker")), "{rows:?}");
}

#[tokio::test]
async fn a_call_sent_twice_with_one_idempotency_key_runs_once() {
    let (rig, server) = rig();
    let http = reqwest::Client::new();
    let call = async |key: &str| -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "memory.write_conversational",
            "arguments": {"session": SESSION, "role": "user", "content": "once"},
            "_meta": {"continuity.dev/idempotency-key": key}}});
        http.post(format!("http://127.0.0.1:{}/mcp", rig.port))
            .bearer_auth(&rig.key)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    };
    let first = call("k-1").await;
    let again = call("k-1").await;
    assert_eq!(first["result"]["structuredContent"], again["result"]["structuredContent"], "the same answer: {again}");
    assert_eq!(again["result"]["_meta"]["continuity.dev/replayed"], true, "{again}");
    let other = call("k-2").await;
    assert_eq!(other["result"]["structuredContent"]["seq"], 2, "a new key runs: {other}");
    // The same key for another call is refused, not answered with the first one's result.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "memory.write_conversational",
        "arguments": {"session": SESSION, "role": "user", "content": "something else"},
        "_meta": {"continuity.dev/idempotency-key": "k-1"}}});
    let reused: Value = http
        .post(format!("http://127.0.0.1:{}/mcp", rig.port))
        .bearer_auth(&rig.key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reused["result"]["structuredContent"]["code"], "CONFLICT", "{reused}");
    kill(server);
}

#[test]
fn a_local_stdio_session_with_a_key_attaches_to_the_running_serve() {
    let (rig, server) = rig();
    // The home's serve announced itself; a stdio session on the same home goes through it.
    assert!(rig.server_home.join("serve.json").exists());
    let mut c = Client::start(&rig.server_home, &[], &rig.key);
    c.write("through the daemon");
    c.close();
    // The write went through serve: its store has a bridge file, and the turn is there.
    assert!(rig.server_home.join("bridge").is_dir(), "the session was bridged, not opened directly");
    kill(server);
    let mut direct = Client::start(&rig.server_home, &[], &rig.key);
    assert_eq!(direct.turns().0, ["through the daemon"], "no serve: the session opens the home itself");
    direct.close();
}

#[test]
fn a_stdio_session_with_spawn_starts_the_homes_serve_and_attaches() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // A home with a key, and no serve running.
    cli(&home, &["init"], None);
    let key = cli(
        &home,
        &["key", "create", "--tenant", "local", "--principal", "owner", "--scopes", "mcp:tools memory:read memory:write"],
        None,
    )
    .trim()
    .to_owned();
    let mut c = Client::start(&home, &["--spawn"], &key);
    c.write("through a spawned serve");
    c.close();
    let announced: Value = serde_json::from_str(&std::fs::read_to_string(home.join("serve.json")).expect("serve.json")).unwrap();
    let pid = announced["pid"].as_u64().unwrap();
    assert!(home.join("bridge").is_dir(), "the session went through the spawned serve");
    // The spawned serve outlives the session; a second session attaches to it.
    let mut again = Client::start(&home, &[], &key);
    assert_eq!(again.turns().0, ["through a spawned serve"]);
    again.close();
    // Stop it (SIGTERM: it finishes in-flight requests and takes serve.json down).
    Command::new("kill").arg(pid.to_string()).status().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while home.join("serve.json").exists() {
        assert!(Instant::now() < deadline, "the spawned serve did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A bridge that starts while its remote is down, before it ever saw the remote's tools,
/// still knows which of its own tools only read: `memory_read_personal` is answered (no
/// archive yet) instead of being buffered as a write and replayed later. And an answer
/// larger than the bridge reads is refused, not held in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_is_never_buffered_and_a_huge_answer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("client");
    let dead = format!("http://127.0.0.1:{}/mcp", free_port());
    let mut c = Client::start(&home, &["--url", &dead], "ctn_x.y.z");
    let r = c.call("memory_read_personal", json!({}));
    let text = r.to_string();
    assert!(!text.contains("Saved, not yet sent") && r["isError"] == true, "a read is not buffered: {r}");
    let status = cli(&home, &["stdio", "--url", &dead, "--status"], Some("ctn_x.y.z"));
    assert!(status.contains("0 queued"), "{status}");
    c.close();

    // A remote answering 20 MB: refused with a message, the bridge still answering.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/mcp", axum::routing::post(|| async { ([("content-type", "application/json")], vec![b' '; 20 * 1024 * 1024]) }));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let home2 = dir.path().join("client2");
    let u = url.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(BIN)
            .arg("--home")
            .arg(&home2)
            .args(["--embedder", "hashing", "stdio", "--url", &u])
            .env("CONTINUITY_KEY", "ctn_x.y.z")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        writeln!(child.stdin.take().unwrap(), "{init}").unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let answer = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(answer.contains("larger than 16 MB"), "{answer}");
}
