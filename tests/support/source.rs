//! An in-process HTTP/1.1 server standing in for a source's write API (HubSpot,
//! Salesforce, Zendesk, Jira, Stripe have no local server): it records every request
//! exactly as it arrived — method, path, headers, body — and answers from a script
//! (status, headers, body, an optional delay), the way the source documents it.
//! Tests assert the exact requests the connector adapters send.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: BTreeMap<String, String>,
    pub body: String,
    /// When the request arrived.
    pub at: std::time::Instant,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("{} {}: body is not JSON ({e}): {}", self.method, self.path, self.body))
    }
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub delay: Duration,
}

impl Answer {
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }

    pub fn empty(status: u16) -> Self {
        Self { status, headers: Vec::new(), body: String::new(), delay: Duration::ZERO }
    }

    #[must_use]
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    #[must_use]
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// Answers a request from state (a source's stateful stand-in), after the script.
pub type Handler = Arc<dyn Fn(&Seen) -> Answer + Send + Sync>;

#[derive(Default)]
struct Inner {
    seen: Vec<Seen>,
    script: VecDeque<Answer>,
    /// Answered when the script is empty.
    fallback: Option<Answer>,
    handler: Option<Handler>,
}

/// The fake source. Dropping it stops nothing (the task ends with the test's runtime).
#[derive(Clone)]
pub struct FakeSource {
    pub base_url: String,
    inner: Arc<Mutex<Inner>>,
}

impl FakeSource {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let inner: Arc<Mutex<Inner>> = Arc::default();
        let shared = inner.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let inner = shared.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, inner).await;
                });
            }
        });
        Self { base_url, inner }
    }

    /// Answers the next requests with `answers`, in order.
    pub fn script(&self, answers: impl IntoIterator<Item = Answer>) {
        let mut i = self.inner.lock().unwrap();
        i.script = answers.into_iter().collect();
        i.fallback = None;
    }

    /// Answers every request with `answer` (after the script).
    pub fn always(&self, answer: Answer) {
        let mut i = self.inner.lock().unwrap();
        i.script.clear();
        i.fallback = Some(answer);
    }

    /// Answers every request with `handler` once the script is empty.
    pub fn handle(&self, handler: Handler) {
        self.inner.lock().unwrap().handler = Some(handler);
    }

    /// The requests received since the last call.
    pub fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut self.inner.lock().unwrap().seen)
    }
}

async fn serve(stream: tokio::net::TcpStream, inner: Arc<Mutex<Inner>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or_default().to_owned(), parts.next().unwrap_or_default().to_owned());
        let mut headers = BTreeMap::new();
        loop {
            let mut h = String::new();
            reader.read_line(&mut h).await?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
            }
        }
        let len: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        let mut body = vec![0; len];
        reader.read_exact(&mut body).await?;
        let seen =
            Seen { method, path, headers, body: String::from_utf8_lossy(&body).into_owned(), at: std::time::Instant::now() };
        let (scripted, handler) = {
            let mut i = inner.lock().unwrap();
            i.seen.push(seen.clone());
            (i.script.pop_front().or_else(|| i.fallback.clone()), i.handler.clone())
        };
        let answer = match (scripted, handler) {
            (Some(a), _) => a,
            (None, Some(h)) => h(&seen),
            (None, None) => Answer::empty(500),
        };
        tokio::time::sleep(answer.delay).await;
        let mut out = format!("HTTP/1.1 {} X\r\nContent-Length: {}\r\n", answer.status, answer.body.len());
        for (k, v) in &answer.headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        out.push_str(&answer.body);
        reader.get_mut().write_all(out.as_bytes()).await?;
    }
}
