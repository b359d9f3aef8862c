//! `continuity stdio --url URL`: a stdio MCP server that forwards to a remote Continuity
//! over HTTP, for clients that only start local commands — and that keeps working when
//! the remote does not answer.
//!
//! Each JSON-RPC message from the client is sent as one stateless Streamable HTTP
//! request (no MCP session to lose when the remote restarts). Then:
//! - **Reads** (listing and reading tools, resources and prompts; tools whose
//!   `readOnlyHint` is true) are kept in an **offline archive** ([`store`]); when the
//!   remote is unreachable, the archived answer comes back marked stale with its age
//!   (`_meta["continuity.dev/stale"]` and a first line of text).
//! - **Writes** (every other tool call) carry an idempotency key
//!   (`_meta["continuity.dev/idempotency-key"]`). When the remote is unreachable — or
//!   while older writes still wait — the call is **buffered** on disk in order and the
//!   client told so; the buffer is **replayed** in order once the remote answers (before
//!   the next request, and every 5 s), each replayed call's answer recorded. The server
//!   keeps each key's result, so a write sent twice (a replay after a lost answer) runs
//!   once. A write the server refuses on replay is recorded as refused and reported to
//!   the client (`notifications/message`), never dropped; `--status` lists the buffer.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;

pub mod store;

use store::Store;

/// Methods answered from the archive when the remote is unreachable.
const READS: &[&str] = &[
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
];

/// The JSON-RPC error code of an answer the remote's HTTP layer gave instead of MCP (an
/// unexpected status, a body that is not JSON-RPC): not the server refusing the call.
const TRANSPORT_ERROR: i64 = -32099;
/// The JSON-RPC error code when the remote refused the key (HTTP 401/403).
const KEY_REFUSED: i64 = -32001;

/// The largest answer the bridge reads from the remote: a bigger one is refused, not
/// held in memory.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// Where a 2026-07-28 request names its protocol version (there is no `initialize`).
const PROTOCOL_META: &str = "io.modelcontextprotocol/protocolVersion";

/// The `MCP-Protocol-Version` header a message travels with: none on `initialize` (it is
/// the negotiation, and the official SDKs send none), the version a 2026-07-28 request
/// names in its `_meta`, else the version `initialize` negotiated (none before that: the
/// server then assumes its default).
fn protocol_header(msg: &Value, negotiated: Option<&str>) -> Option<String> {
    if msg.get("method").and_then(Value::as_str) == Some("initialize") {
        return None;
    }
    msg.pointer("/params/_meta").and_then(|m| m.get(PROTOCOL_META)).and_then(Value::as_str).or(negotiated).map(str::to_owned)
}

/// How often the buffer is retried while the client is idle.
const REPLAY_EVERY: Duration = Duration::from_secs(5);

/// What came back from the remote.
enum Reply {
    /// A JSON-RPC response (or `Null` for an accepted notification).
    Answer(Value),
    /// Unreachable, restarting, overloaded: try again later.
    Down(String),
}

pub struct Bridge {
    url: String,
    key: String,
    http: reqwest::Client,
    store: Store,
    /// The version `initialize` negotiated (none before it).
    protocol: std::sync::Mutex<Option<String>>,
    read_only: std::sync::Mutex<HashMap<String, bool>>,
    out: mpsc::UnboundedSender<Value>,
    /// Held while the buffer replays or a write is forwarded: writes stay in order.
    writes: tokio::sync::Mutex<()>,
    /// Locked (advisory, across processes) while the buffer replays: two bridges sharing
    /// one store (two clients with the same key) never send it at once.
    replay_lock: std::fs::File,
}

/// The store of `url` and `key` under `home`.
///
/// # Errors
/// When it cannot be opened.
pub fn open_store(home: &Path, url: &str, key: &str) -> anyhow::Result<Store> {
    Store::open(&store::path_for(home, url, key))
}

/// Serves the client on stdin/stdout until stdin closes.
///
/// # Errors
/// When the store cannot be opened or stdout is gone.
pub async fn run(home: &Path, url: &str, key: &str) -> anyhow::Result<()> {
    let store = open_store(home, url, key)?;
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let http = reqwest::Client::builder()
        .use_preconfigured_tls(tls::client_config())
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("building the HTTP client")?;
    let bridge = Arc::new(Bridge {
        url: url.to_owned(),
        key: key.to_owned(),
        http,
        store,
        protocol: std::sync::Mutex::new(None),
        read_only: std::sync::Mutex::new(HashMap::new()),
        out: tx,
        writes: tokio::sync::Mutex::new(()),
        replay_lock: std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(store::path_for(home, url, key).with_extension("lock"))
            .context("opening the bridge's replay lock")?,
    });
    bridge.load_tool_kinds();
    tracing::info!(url, store = %bridge.store.path.display(), "bridging stdio to a remote Continuity");
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(msg) = rx.recv().await {
            let mut line = msg.to_string();
            line.push('\n');
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let ticker = {
        let b = bridge.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REPLAY_EVERY).await;
                if b.store.queued().is_ok_and(|q| !q.is_empty()) {
                    let _guard = b.writes.lock().await;
                    b.replay().await;
                }
            }
        })
    };
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await.context("reading stdin")? {
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(msg) if msg.is_object() => bridge.handle(msg).await,
            Ok(_) => Some(rpc_error(&Value::Null, -32600, "one JSON-RPC message per line (batches are not supported)")),
            Err(e) => Some(rpc_error(&Value::Null, -32700, &format!("not JSON: {e}"))),
        };
        if let Some(r) = reply {
            bridge.send(r);
        }
    }
    ticker.abort();
    drop(bridge);
    let _ = writer.await;
    Ok(())
}

enum Capped {
    TooLarge,
    Cut(String),
}

/// The body of `resp` as text, read a chunk at a time and refused past `max` bytes.
async fn read_capped(mut resp: reqwest::Response, max: usize) -> Result<String, Capped> {
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(Capped::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| Capped::Cut(e.to_string()))? {
        if body.len() + chunk.len() > max {
            return Err(Capped::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The archive's key of a read: the method and its params without `_meta`.
fn archive_key(method: &str, params: Option<&Value>) -> String {
    let mut p = params.cloned().unwrap_or(Value::Null);
    if let Some(o) = p.as_object_mut() {
        o.remove("_meta");
    }
    format!("{method}\n{p}")
}

fn age_text(ms: i64) -> String {
    let s = ms / 1000;
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        _ => format!("{} h", s / 3600),
    }
}

impl Bridge {
    fn send(&self, msg: Value) {
        let _ = self.out.send(msg);
    }

    fn notify(&self, level: &str, data: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": level, "logger": "continuity-bridge", "data": data}}));
    }

    /// Read-only flags of the tools, from the last archived `tools/list`.
    fn load_tool_kinds(&self) {
        if let Ok(Some(list)) = self.store.meta("tools") {
            self.learn_tools(&list);
        }
    }

    fn learn_tools(&self, list: &Value) {
        let Some(tools) = list.get("tools").and_then(Value::as_array) else { return };
        if let Ok(mut m) = self.read_only.lock() {
            for t in tools {
                if let Some(name) = t.get("name").and_then(Value::as_str) {
                    let ro = t.pointer("/annotations/readOnlyHint").and_then(Value::as_bool).unwrap_or(false);
                    m.insert(name.to_owned(), ro);
                }
            }
        }
    }

    /// Whether a tool only reads: as the remote's last tool list says, else as this
    /// version's own tools say (a read is never buffered as a write because the remote
    /// was down before its tools were learned), else it is taken to write.
    fn is_read_only(&self, tool: &str) -> bool {
        let learned = self.read_only.lock().ok().and_then(|m| m.get(tool).copied());
        learned.or_else(|| mcp::tools::all().find(|t| t.answers_to(tool)).map(mcp::tools::McpTool::read_only)).unwrap_or(false)
    }

    /// Sends one message to the remote.
    async fn post(&self, msg: &Value) -> (Reply, Option<String>) {
        let negotiated = self.protocol.lock().ok().and_then(|p| p.clone());
        let mut req = self.http.post(&self.url).bearer_auth(&self.key).header("accept", "application/json, text/event-stream");
        if let Some(v) = protocol_header(msg, negotiated.as_deref()) {
            req = req.header("mcp-protocol-version", v);
        }
        // The 2026-07-28 transport routes by these; earlier versions ignore them.
        if let Some(m) = msg.get("method").and_then(Value::as_str) {
            req = req.header("mcp-method", m);
            let name = msg.pointer("/params/name").or_else(|| msg.pointer("/params/uri")).and_then(Value::as_str);
            if let Some(n) = name.filter(|n| n.len() <= 512 && n.bytes().all(|b| b.is_ascii_graphic())) {
                req = req.header("mcp-name", n);
            }
        }
        let sent = req.json(msg).send().await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) => return (Reply::Down(format!("unreachable ({})", short(&e.to_string()))), None),
        };
        let status = resp.status();
        let session = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        if matches!(status.as_u16(), 429 | 502 | 503 | 504) {
            return (Reply::Down(format!("answered HTTP {status}")), session);
        }
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            let m = format!(
                "{} refused the key (HTTP {status}): set CONTINUITY_KEY to a working key of it (continuity setup --url … --key-file …)",
                self.url
            );
            return (Reply::Answer(rpc_error(&id, KEY_REFUSED, &m)), session);
        }
        if status == reqwest::StatusCode::ACCEPTED {
            return (Reply::Answer(Value::Null), session);
        }
        let sse =
            resp.headers().get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("text/event-stream"));
        let body = match read_capped(resp, MAX_ANSWER_BYTES).await {
            Ok(b) => b,
            Err(Capped::TooLarge) => {
                let m = format!("the remote's answer is larger than {} MB; the bridge does not read it", MAX_ANSWER_BYTES >> 20);
                return (Reply::Answer(rpc_error(&id, TRANSPORT_ERROR, &m)), session);
            }
            Err(Capped::Cut(e)) => return (Reply::Down(format!("the answer was cut off ({})", short(&e))), session),
        };
        let parsed = if sse {
            body.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|v| v.get("id").is_some())
        } else {
            serde_json::from_str::<Value>(&body).ok()
        };
        match parsed {
            Some(v) if v.get("result").is_some() || v.get("error").is_some() => (Reply::Answer(v), session),
            _ => {
                let text: String = body.chars().take(200).collect();
                (Reply::Answer(rpc_error(&id, TRANSPORT_ERROR, &format!("the remote answered HTTP {status}: {text}"))), session)
            }
        }
    }

    /// Answers one message from the client (`None` for notifications).
    async fn handle(&self, msg: Value) -> Option<Value> {
        let id = msg.get("id").cloned()?;
        let method = msg.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        match method.as_str() {
            "initialize" => Some(self.initialize(&id, &msg).await),
            "ping" | "logging/setLevel" => Some(rpc_result(&id, json!({}))),
            "resources/subscribe" | "resources/unsubscribe" => Some(rpc_error(
                &id,
                -32601,
                "subscriptions need a session; the bridge sends each call on its own (connect over HTTP to subscribe)",
            )),
            "tools/call" => {
                let tool = msg.pointer("/params/name").and_then(Value::as_str).unwrap_or_default().to_owned();
                if self.is_read_only(&tool) {
                    Some(self.read(&id, &method, &msg).await)
                } else {
                    Some(self.write(&id, &msg).await)
                }
            }
            m if READS.contains(&m) => Some(self.read(&id, &method, &msg).await),
            _ => Some(match self.post(&msg).await.0 {
                Reply::Answer(v) => v,
                Reply::Down(why) => rpc_error(&id, -32603, &format!("{} is {why}; try again later", self.url)),
            }),
        }
    }

    async fn initialize(&self, id: &Value, msg: &Value) -> Value {
        let (reply, session) = self.post(msg).await;
        if let Some(s) = session {
            // The remote opened a session for the handshake; the bridge does not use it.
            let (http, url, key) = (self.http.clone(), self.url.clone(), self.key.clone());
            tokio::spawn(async move {
                let _ = http.delete(&url).bearer_auth(key).header("mcp-session-id", s).send().await;
            });
        }
        match reply {
            Reply::Answer(v) => {
                if let Some(result) = v.get("result") {
                    if let Some(p) = result.get("protocolVersion").and_then(Value::as_str)
                        && let Ok(mut proto) = self.protocol.lock()
                    {
                        *proto = Some(p.to_owned());
                    }
                    let _ = self.store.set_meta("initialize", result);
                    // Learn which tools only read before the first call.
                    let list = json!({"jsonrpc": "2.0", "id": "bridge-tools", "method": "tools/list", "params": {}});
                    if let Reply::Answer(l) = self.post(&list).await.0
                        && let Some(r) = l.get("result")
                    {
                        self.learn_tools(r);
                        let _ = self.store.set_meta("tools", r);
                        let _ = self.store.archive(&archive_key("tools/list", Some(&json!({}))), r);
                    }
                }
                v
            }
            Reply::Down(why) => {
                let mut result = self.store.meta("initialize").ok().flatten().unwrap_or_else(|| {
                    json!({
                        "protocolVersion": "2025-06-18",
                        "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
                        "serverInfo": {"name": "continuity-bridge", "version": env!("CARGO_PKG_VERSION")},
                    })
                });
                // Offline, the client's own version is answered when this version speaks it.
                let asked = msg.pointer("/params/protocolVersion").and_then(Value::as_str);
                if let Some(v) = asked.filter(|v| mcp::server::PROTOCOL_VERSIONS.iter().any(|p| p.as_str() == *v)) {
                    result["protocolVersion"] = json!(v);
                }
                if let Some(p) = result.get("protocolVersion").and_then(Value::as_str)
                    && let Ok(mut proto) = self.protocol.lock()
                {
                    *proto = Some(p.to_owned());
                }
                let note = format!(
                    "Continuity at {} is {why}: reads come from the offline archive (marked stale), writes are saved and sent when it is back.",
                    self.url
                );
                let instructions = match result.get("instructions").and_then(Value::as_str) {
                    Some(i) => format!("{note}\n\n{i}"),
                    None => note,
                };
                result["instructions"] = json!(instructions);
                rpc_result(id, result)
            }
        }
    }

    async fn read(&self, id: &Value, method: &str, msg: &Value) -> Value {
        // Writes still waiting go first, so a read sees them once the remote is back; if
        // they cannot go, the remote is down and the archive answers at once.
        let mut down = None;
        if self.store.queued().is_ok_and(|q| !q.is_empty()) {
            let _guard = self.writes.lock().await;
            if !self.replay().await {
                down = Some(Reply::Down("unreachable (buffered writes could not be sent)".into()));
            }
        }
        let key = archive_key(method, msg.get("params"));
        let reply = match down {
            Some(d) => d,
            None => self.post(msg).await.0,
        };
        match reply {
            Reply::Answer(v) => {
                if let Some(result) = v.get("result") {
                    let failed = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
                    if !failed {
                        let _ = self.store.archive(&key, result);
                    }
                    if method == "tools/list" {
                        self.learn_tools(result);
                        let _ = self.store.set_meta("tools", result);
                    }
                }
                v
            }
            Reply::Down(why) => match self.store.archived(&key) {
                Ok(Some((mut result, at))) => {
                    let age = store::age_ms(at);
                    let stale = json!({"age_seconds": age / 1000, "archived_at_ms": at, "reason": why});
                    if method == "tools/call"
                        && let Some(content) = result.get_mut("content").and_then(Value::as_array_mut)
                    {
                        let line = format!(
                            "[stale: Continuity at {} is {why}; this answer was archived {} ago]",
                            self.url,
                            age_text(age)
                        );
                        content.insert(0, json!({"type": "text", "text": line}));
                    }
                    if let Some(o) = result.as_object_mut() {
                        let meta = o.entry("_meta").or_insert_with(|| json!({}));
                        meta["continuity.dev/stale"] = stale;
                    }
                    rpc_result(id, result)
                }
                _ => {
                    let m = format!("Continuity at {} is {why}, and no archived answer to this read exists yet", self.url);
                    if method == "tools/call" {
                        rpc_result(id, json!({"content": [{"type": "text", "text": m}], "isError": true}))
                    } else {
                        rpc_error(id, -32603, &m)
                    }
                }
            },
        }
    }

    async fn write(&self, id: &Value, msg: &Value) -> Value {
        let _guard = self.writes.lock().await;
        let key = uuid::Uuid::new_v4().to_string();
        let mut params = msg.get("params").cloned().unwrap_or_else(|| json!({}));
        if let Some(o) = params.as_object_mut() {
            let meta = o.entry("_meta").or_insert_with(|| json!({}));
            if meta.is_object() {
                meta[mcp::IDEMPOTENCY_META] = json!(key);
            }
        }
        if self.replay().await {
            let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
            match self.post(&call).await.0 {
                Reply::Answer(v) => {
                    self.forgotten(&params, v.get("result"));
                    return v;
                }
                // Sent or not — the key makes a second send safe.
                Reply::Down(why) => tracing::info!(reason = %why, "remote unreachable: buffering a write"),
            }
        }
        match self.store.enqueue(&key, &params) {
            Ok(seq) => {
                let text = format!(
                    "Saved, not yet sent: Continuity at {} cannot be reached, so this call waits as #{seq} in the bridge's \
                     buffer and will be sent, in order, when it is back (`continuity stdio --url {} --status` lists the buffer).",
                    self.url, self.url
                );
                rpc_result(
                    id,
                    json!({"content": [{"type": "text", "text": text}],
                           "_meta": {"continuity.dev/buffered": {"seq": seq, "idempotency_key": key}}}),
                )
            }
            Err(e) => rpc_result(
                id,
                json!({"content": [{"type": "text", "text": format!("The remote is unreachable and this call could not be saved: {e:#}")}],
                       "isError": true}),
            ),
        }
    }

    /// After a `memory.forget` the remote carried out (`result` without `isError`): the
    /// offline archive and the sent writes' records forget the memory too, so the bridge
    /// never answers it again from its own file.
    fn forgotten(&self, params: &Value, result: Option<&Value>) {
        let tool = params.get("name").and_then(Value::as_str).unwrap_or_default();
        let is_forget = mcp::tools::all().find(|t| t.answers_to(tool)).is_some_and(|t| t.capability == "memory.forget");
        let ok = result.is_some_and(|r| !r.get("isError").and_then(Value::as_bool).unwrap_or(false));
        let Some(id) = params.pointer("/arguments/id").and_then(Value::as_str).filter(|_| is_forget && ok) else { return };
        match self.store.forget(id) {
            Ok((reads, writes)) => tracing::info!(reads, writes, "a forgotten memory left the offline archive"),
            Err(e) => tracing::warn!(error = %e, "the offline archive could not forget a memory"),
        }
    }

    /// Sends the buffered writes in order (the caller holds `writes`). `true` when none
    /// is left; `false` when the remote is still unreachable (the rest waits).
    async fn replay(&self) -> bool {
        if self.store.queued().is_ok_and(|q| q.is_empty()) {
            return true;
        }
        // Another bridge on this store is replaying: it sends them, in order.
        if self.replay_lock.try_lock().is_err() {
            return false;
        }
        let done = self.replay_locked().await;
        let _ = self.replay_lock.unlock();
        done
    }

    async fn replay_locked(&self) -> bool {
        let Ok(queued) = self.store.queued() else { return false };
        for b in queued {
            let call = json!({"jsonrpc": "2.0", "id": format!("replay-{}", b.seq), "method": "tools/call", "params": b.params});
            let answer = match self.post(&call).await.0 {
                Reply::Down(_) => return false,
                Reply::Answer(v) => v,
            };
            let (state, detail) = if let Some(err) = answer.get("error") {
                // The key refused or the HTTP layer answering instead of MCP: not this
                // write's fault — it waits, with the rest, for the next try.
                if matches!(err.get("code").and_then(Value::as_i64), Some(TRANSPORT_ERROR | KEY_REFUSED)) {
                    tracing::warn!(seq = b.seq, error = %err, "replay paused: the remote did not take the call");
                    return false;
                }
                ("refused", err.clone())
            } else {
                let result = answer.get("result").cloned().unwrap_or(Value::Null);
                if result.get("isError").and_then(Value::as_bool).unwrap_or(false) {
                    let code = result.pointer("/structuredContent/code").and_then(Value::as_str).unwrap_or_default();
                    if matches!(code, "UNAVAILABLE" | "RATE_LIMITED") {
                        return false;
                    }
                    ("refused", result)
                } else {
                    ("sent", result)
                }
            };
            if state == "sent" {
                self.forgotten(&b.params, Some(&detail));
            }
            if let Err(e) = self.store.settle(b.seq, state, &detail) {
                tracing::warn!(error = %e, seq = b.seq, "a replayed write's outcome was not recorded");
                return false;
            }
            let level = if state == "sent" { "info" } else { "warning" };
            self.notify(level, json!({"replayed": b.seq, "tool": b.tool(), "outcome": state, "answer": detail}));
        }
        true
    }
}

fn short(s: &str) -> String {
    s.chars().take(160).collect()
}

/// `continuity stdio --url URL --status`: the buffer of this remote and key.
///
/// # Errors
/// When the store cannot be read.
pub fn status(home: &Path, url: &str, key: &str) -> anyhow::Result<()> {
    let path = store::path_for(home, url, key);
    if !path.exists() {
        println!("no bridge to {url} has run with this key from {} (nothing buffered)", home.display());
        return Ok(());
    }
    let s = Store::open(&path)?;
    let all = s.all()?;
    let count = |state: &str| all.iter().filter(|b| b.state == state).count();
    println!(
        "bridge to {url} ({}): {} queued, {} sent, {} refused",
        path.display(),
        count("queued"),
        count("sent"),
        count("refused")
    );
    for b in &all {
        let when = age_text(store::age_ms(b.queued_at_ms));
        let detail = match (&b.state[..], &b.answer) {
            ("refused", Some(a)) => {
                let m = a
                    .get("message")
                    .or_else(|| a.pointer("/structuredContent/message"))
                    .or_else(|| a.pointer("/content/0/text"))
                    .and_then(Value::as_str)
                    .unwrap_or("refused");
                format!(" — {m}")
            }
            _ => String::new(),
        };
        println!("#{:<5} {:<8} {:<34} saved {when} ago{detail}", b.seq, b.state, b.tool());
    }
    Ok(())
}

/// The MCP URL of a `--url` value.
///
/// # Errors
/// When it is not an http(s) URL.
pub fn mcp_url(base: &str) -> anyhow::Result<String> {
    let u = base.trim().trim_end_matches('/');
    if !(u.starts_with("https://") || u.starts_with("http://")) || u.contains(char::is_whitespace) {
        return Err(anyhow!("{base:?} is not an http(s) URL"));
    }
    Ok(if u.ends_with("/mcp") { u.to_owned() } else { format!("{u}/mcp") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_archived_by_method_and_params_without_meta() {
        let a = archive_key("tools/call", Some(&json!({"name": "x", "arguments": {"q": 1}, "_meta": {"progressToken": 3}})));
        let b = archive_key("tools/call", Some(&json!({"arguments": {"q": 1}, "name": "x"})));
        assert_eq!(a, b);
        assert_ne!(a, archive_key("tools/call", Some(&json!({"name": "x", "arguments": {"q": 2}}))));
        assert_eq!(age_text(5_000), "5 s");
        assert_eq!(age_text(600_000), "10 min");
    }
}
