//! The HTTP server of `continuity serve`: the router on a TCP listener, hardened against
//! slow and hostile clients (SPEC §10).
//!
//! `axum::serve` has no knobs for this, so the accept loop is ours (hyper's HTTP/1
//! connection under it):
//!
//! - **Header read timeout**: a client that has not sent a whole request head within
//!   [`Limits::header_read_timeout`] is disconnected — also between keep-alive requests.
//! - **Body read timeout**: [`crate::body::buffer`] gives a body
//!   [`crate::body::BODY_READ_TIMEOUT`] to arrive.
//! - **A connection cap with back-pressure**: at most [`Limits::max_connections`] are
//!   open. When a new one arrives at the cap, the connection that has been stalled the
//!   longest *without a request being handled* (still sending its head or body, or idle
//!   between requests) is closed to make room, so thousands of half-open connections
//!   cannot lock out a client that sends a whole request — `/healthz` keeps answering.
//!   When every connection is busy with a request being handled, the loop stops
//!   accepting until one finishes: new connections wait in the kernel's backlog.
//! - **Bounded buffers**: a request head over [`MAX_HEAD_BYTES`] is refused by hyper.
//! - **Graceful shutdown**: on cancellation the listener closes, open connections finish
//!   their in-flight request (at most [`SHUTDOWN_GRACE`]) and are closed.
//!
//! Each request carries the peer's address as [`ClientAddr`] (the per-address limits of
//! the unauthenticated routes use it) and the connection's [`ConnPhase`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use http_body_util::BodyExt as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::router::App;
use tower::ServiceExt as _;

/// The largest request head (request line and headers) a client may send.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// How long in-flight requests get to finish after shutdown starts.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Connection limits of the server.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most connections open at once.
    pub max_connections: usize,
    /// Time a client has to send a whole request head (from connecting, or from the end
    /// of its previous response).
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_connections: 4096, header_read_timeout: Duration::from_secs(10) }
    }
}

/// The address of the client that sent a request: the TCP peer on `continuity serve`,
/// API Gateway's `sourceIp` on Lambda.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

const WAITING: u8 = 0;
const RECEIVING_BODY: u8 = 1;
const HANDLING: u8 = 2;

/// Where a connection's current request stands; [`crate::body::buffer`] moves it from
/// receiving the body to handling once the body is in.
#[derive(Debug)]
pub struct ConnState {
    phase: AtomicU8,
    /// When the current phase began, in milliseconds since the server started.
    since_ms: AtomicU64,
    epoch: Instant,
}

impl ConnState {
    fn new(epoch: Instant) -> Self {
        let s = Self { phase: AtomicU8::new(WAITING), since_ms: AtomicU64::new(0), epoch };
        s.set(WAITING);
        s
    }

    fn set(&self, phase: u8) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.since_ms.store(ms, Ordering::Relaxed);
        self.phase.store(phase, Ordering::Relaxed);
    }

    /// A stalled connection (not handling a request) and since when.
    fn stalled_since(&self) -> Option<u64> {
        (self.phase.load(Ordering::Relaxed) != HANDLING).then(|| self.since_ms.load(Ordering::Relaxed))
    }
}

/// A request's handle on its connection's state (in the request's extensions).
#[derive(Debug, Clone)]
pub struct ConnPhase(Arc<ConnState>);

impl ConnPhase {
    /// The whole body has arrived: the request is being handled and the connection is no
    /// longer a candidate for eviction.
    pub fn body_received(&self) {
        self.0.set(HANDLING);
    }
}

struct Conn {
    state: Arc<ConnState>,
    kill: CancellationToken,
}

#[derive(Default)]
struct Registry {
    conns: Mutex<HashMap<u64, Conn>>,
    freed: Notify,
}

impl Registry {
    fn len(&self) -> usize {
        self.conns.lock().map_or(0, |c| c.len())
    }

    /// Closes the connection stalled the longest; false when every one is busy.
    fn evict_one(&self) -> bool {
        let Ok(conns) = self.conns.lock() else { return false };
        let victim = conns.iter().filter_map(|(id, c)| c.state.stalled_since().map(|s| (s, *id))).min();
        match victim.and_then(|(_, id)| conns.get(&id)) {
            Some(c) => {
                c.kill.cancel();
                true
            }
            None => false,
        }
    }

    fn remove(&self, id: u64) {
        if let Ok(mut c) = self.conns.lock() {
            c.remove(&id);
        }
        self.freed.notify_waiters();
    }
}

/// Raises this process's soft limit on open files to its hard limit, so the connection
/// cap (not the file-descriptor limit) is what bounds the server. Returns the new soft
/// limit, or `None` if it could not be read.
pub fn raise_open_files_limit() -> Option<u64> {
    rlimit::increase_nofile_limit(u64::MAX).ok()
}

/// Serves `app` on `listener` until `shutdown` is cancelled, within `limits`.
///
/// # Errors
/// Never for a client's misbehaviour; only if the listener itself fails for good.
pub async fn run(listener: TcpListener, app: App, limits: Limits, shutdown: CancellationToken) -> std::io::Result<()> {
    let registry = Arc::new(Registry::default());
    let epoch = Instant::now();
    let tracker = tokio_util::task::TaskTracker::new();
    let mut next_id: u64 = 0;
    let max = limits.max_connections.max(1);
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors, or the peer gave up before we accepted it:
                // keep serving the connections we have, and try again shortly.
                tracing::warn!(error = %e, "accept failed; retrying in 50 ms");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // At the cap: make room by closing the most stalled connection, or wait for one
        // to finish (back-pressure: the listener is not read meanwhile).
        while registry.len() >= max {
            if registry.evict_one() {
                // The evicted connection's task removes it; wait for that.
                let freed = registry.freed.notified();
                let _ = tokio::time::timeout(Duration::from_millis(100), freed).await;
                continue;
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = registry.freed.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        if shutdown.is_cancelled() {
            break;
        }
        let _ = stream.set_nodelay(true);
        next_id += 1;
        let id = next_id;
        let state = Arc::new(ConnState::new(epoch));
        let kill = CancellationToken::new();
        if let Ok(mut c) = registry.conns.lock() {
            c.insert(id, Conn { state: state.clone(), kill: kill.clone() });
        }
        let (app, registry, shutdown) = (app.clone(), registry.clone(), shutdown.clone());
        tracker.spawn(async move {
            serve_connection(stream, ClientAddr(peer.ip()), app, state, limits, kill, shutdown).await;
            registry.remove(id);
        });
    }
    drop(listener);
    tracker.close();
    tracker.wait().await;
    Ok(())
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    addr: ClientAddr,
    app: App,
    state: Arc<ConnState>,
    limits: Limits,
    kill: CancellationToken,
    shutdown: CancellationToken,
) {
    let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let app = app.clone();
        let state = state.clone();
        async move {
            state.set(RECEIVING_BODY);
            let mut req = req.map(Body::new);
            req.extensions_mut().insert(addr);
            req.extensions_mut().insert(ConnPhase(state.clone()));
            let resp = app.oneshot(req).await.unwrap_or_else(|never| match never {});
            // The connection waits for its next request once the response body is done
            // (an SSE stream keeps it handling until the stream ends).
            let done = StreamEnd(state);
            Ok::<_, std::convert::Infallible>(resp.map(|b| {
                Body::new(b.map_frame(move |f| {
                    let _ = &done;
                    f
                }))
            }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout).max_buf_size(MAX_HEAD_BYTES);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        () = kill.cancelled() => {}
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn.as_mut()).await;
        }
    }
}

/// Marks the connection waiting again when a response body is dropped.
struct StreamEnd(Arc<ConnState>);

impl Drop for StreamEnd {
    fn drop(&mut self) {
        self.0.set(WAITING);
    }
}
