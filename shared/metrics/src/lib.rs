//! The process's operational counters (SPEC §9), one registry for both hosts:
//!
//! - `continuity serve` renders them at `GET /metrics` in the Prometheus text format
//!   ([`prometheus`]);
//! - a Lambda prints what changed since its last flush as CloudWatch embedded metric
//!   format (EMF) lines at the end of each invocation ([`flush_emf`]); CloudWatch turns
//!   them into metrics in the `Continuity` namespace with the `Stack` dimension (and
//!   `Route` for request metrics), which the template's alarms and dashboard read.
//!
//! What is counted ([`Counter`]): requests, errors (4xx and 5xx), server errors and
//! latency per route (`mcp:kb.search`, `POST /oauth/token`); authorizer denials; triage
//! outcomes; approval waits near their deadline and heartbeat failures (the resume
//! job); cache hits and misses. Labels never hold tenant data: a route is a fixed name
//! (an MCP tool, or the router's path pattern), never a raw path.
//!
//! The registry is a mutex over small maps: one short lock per request, far below the
//! cost of the request itself.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Map, Value, json};

/// The CloudWatch namespace of every EMF metric.
pub const NAMESPACE: &str = "Continuity";

/// Latency histogram buckets (seconds) for Prometheus.
const BUCKETS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// A stack-level counter (no route).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Counter {
    AuthorizerDenials,
    TriageAutoApproved,
    TriageHuman,
    TriageRejected,
    /// Pending human approvals found by the hourly resume pass with their deadline
    /// within a day (each pass adds its count: any in an hour means act now).
    ApprovalWaitsNearTimeout,
    HeartbeatFailures,
    /// A tenant whose hourly pruning failed (the others' went on; the next run retries).
    MaintenanceFailures,
    /// A Spine write whose blob backup line could not be written (the write stands; a
    /// restore from blobs would miss it until the next full backup).
    BlobBackupFailures,
    CacheHits,
    CacheMisses,
}

impl Counter {
    pub const ALL: [Self; 10] = [
        Self::AuthorizerDenials,
        Self::TriageAutoApproved,
        Self::TriageHuman,
        Self::TriageRejected,
        Self::ApprovalWaitsNearTimeout,
        Self::HeartbeatFailures,
        Self::MaintenanceFailures,
        Self::BlobBackupFailures,
        Self::CacheHits,
        Self::CacheMisses,
    ];

    /// The EMF metric name.
    pub fn name(self) -> &'static str {
        match self {
            Self::AuthorizerDenials => "AuthorizerDenials",
            Self::TriageAutoApproved => "TriageAutoApproved",
            Self::TriageHuman => "TriageHuman",
            Self::TriageRejected => "TriageRejected",
            Self::ApprovalWaitsNearTimeout => "ApprovalWaitsNearTimeout",
            Self::HeartbeatFailures => "HeartbeatFailures",
            Self::MaintenanceFailures => "MaintenanceFailures",
            Self::BlobBackupFailures => "BlobBackupFailures",
            Self::CacheHits => "CacheHits",
            Self::CacheMisses => "CacheMisses",
        }
    }

    /// The Prometheus metric name.
    fn prometheus(self) -> &'static str {
        match self {
            Self::AuthorizerDenials => "continuity_authorizer_denials_total",
            Self::TriageAutoApproved => "continuity_triage_auto_approved_total",
            Self::TriageHuman => "continuity_triage_human_total",
            Self::TriageRejected => "continuity_triage_rejected_total",
            Self::ApprovalWaitsNearTimeout => "continuity_approval_waits_near_timeout_total",
            Self::HeartbeatFailures => "continuity_heartbeat_failures_total",
            Self::MaintenanceFailures => "continuity_maintenance_failures_total",
            Self::BlobBackupFailures => "continuity_blob_backup_failures_total",
            Self::CacheHits => "continuity_cache_hits_total",
            Self::CacheMisses => "continuity_cache_misses_total",
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Route {
    requests: u64,
    errors: u64,
    server_errors: u64,
    /// Prometheus: count per bucket (cumulative at render), the sum of seconds.
    buckets: [u64; BUCKETS.len()],
    seconds: f64,
    /// EMF: latencies (ms) since the last flush.
    pending_ms: Vec<f64>,
    pending: (u64, u64, u64),
}

#[derive(Debug, Default)]
struct Registry {
    routes: BTreeMap<String, Route>,
    /// Total, and what was added since the last EMF flush.
    counters: BTreeMap<Counter, (u64, u64)>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn registry() -> MutexGuard<'static, Option<Registry>> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    let mut g = registry();
    f(g.get_or_insert_with(Registry::default))
}

/// Most latency samples one route keeps between two EMF flushes (a flush happens at
/// the end of every invocation, so this only bounds a misbehaving caller).
const MAX_PENDING: usize = 10_000;

/// One served request: its route, HTTP status and latency.
pub fn request(route: &str, status: u16, latency_ms: f64) {
    with(|r| {
        // A known route (all but the first request of each) is found without allocating.
        if !r.routes.contains_key(route) {
            r.routes.insert(route.to_owned(), Route::default());
        }
        let Some(e) = r.routes.get_mut(route) else { return };
        e.requests += 1;
        e.pending.0 += 1;
        if status >= 400 {
            e.errors += 1;
            e.pending.1 += 1;
        }
        if status >= 500 {
            e.server_errors += 1;
            e.pending.2 += 1;
        }
        let secs = latency_ms / 1000.0;
        if let Some(i) = BUCKETS.iter().position(|b| secs <= *b) {
            e.buckets[i] += 1;
        }
        e.seconds += secs;
        if e.pending_ms.len() < MAX_PENDING {
            e.pending_ms.push(latency_ms);
        }
    });
}

/// Adds `n` to a stack-level counter.
pub fn add(counter: Counter, n: u64) {
    with(|r| {
        let e = r.counters.entry(counter).or_default();
        e.0 += n;
        e.1 += n;
    });
}

/// One cache lookup: a hit or a miss (both cache adapters call it).
pub fn cache_lookup(hit: bool) {
    add(if hit { Counter::CacheHits } else { Counter::CacheMisses }, 1);
}

/// One route's totals in this process.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteTotals {
    pub route: String,
    pub requests: u64,
    pub errors: u64,
    /// Summed latency, seconds.
    pub seconds: f64,
}

/// This process's totals: every route's, and cache hits and misses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub routes: Vec<RouteTotals>,
    pub cache_hits: u64,
    pub cache_misses: u64,
}

/// The totals so far (for the dashboard's figures).
pub fn snapshot() -> Snapshot {
    let g = registry();
    let Some(r) = g.as_ref() else { return Snapshot::default() };
    Snapshot {
        routes: r
            .routes
            .iter()
            .map(|(k, v)| RouteTotals { route: k.clone(), requests: v.requests, errors: v.errors, seconds: v.seconds })
            .collect(),
        cache_hits: r.counters.get(&Counter::CacheHits).map_or(0, |v| v.0),
        cache_misses: r.counters.get(&Counter::CacheMisses).map_or(0, |v| v.0),
    }
}

/// The registry in the Prometheus text exposition format (version 0.0.4).
pub fn prometheus() -> String {
    let g = registry();
    let empty = Registry::default();
    let r = g.as_ref().unwrap_or(&empty);
    let mut out = String::new();
    type Family = (&'static str, &'static str, fn(&Route) -> u64);
    let families: [Family; 3] = [
        ("continuity_requests_total", "Requests served, by route.", |r| r.requests),
        ("continuity_errors_total", "Requests answered 4xx or 5xx, by route.", |r| r.errors),
        ("continuity_server_errors_total", "Requests answered 5xx, by route.", |r| r.server_errors),
    ];
    for (name, help, get) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (route, v) in &r.routes {
            let _ = writeln!(out, "{name}{{route=\"{}\"}} {}", escape(route), get(v));
        }
    }
    let name = "continuity_request_duration_seconds";
    let _ = writeln!(out, "# HELP {name} Request latency, by route.\n# TYPE {name} histogram");
    for (route, v) in &r.routes {
        let route = escape(route);
        let mut cumulative = 0;
        for (b, n) in BUCKETS.iter().zip(v.buckets) {
            cumulative += n;
            let _ = writeln!(out, "{name}_bucket{{route=\"{route}\",le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{route=\"{route}\",le=\"+Inf\"}} {}", v.requests);
        let _ = writeln!(out, "{name}_sum{{route=\"{route}\"}} {}", v.seconds);
        let _ = writeln!(out, "{name}_count{{route=\"{route}\"}} {}", v.requests);
    }
    for c in Counter::ALL {
        let value = r.counters.get(&c).map_or(0, |v| v.0);
        let _ = writeln!(out, "# TYPE {} counter\n{} {value}", c.prometheus(), c.prometheus());
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// What changed since the last flush as EMF lines (one JSON object per line: one per
/// route with requests, one for the stack counters), and resets the pending values.
/// `stack` is the `Stack` dimension; `now_ms` the timestamp.
pub fn take_emf(stack: &str, now_ms: i64) -> Vec<String> {
    let mut lines = Vec::new();
    with(|r| {
        for (route, v) in &mut r.routes {
            if v.pending.0 == 0 {
                continue;
            }
            let (requests, errors, server_errors) = std::mem::take(&mut v.pending);
            let latency = std::mem::take(&mut v.pending_ms);
            let mut root = envelope(
                now_ms,
                json!([["Stack"], ["Stack", "Route"]]),
                json!([
                    {"Name": "Requests", "Unit": "Count"},
                    {"Name": "Errors", "Unit": "Count"},
                    {"Name": "ServerErrors", "Unit": "Count"},
                    {"Name": "Latency", "Unit": "Milliseconds"}
                ]),
            );
            root.insert("Stack".into(), json!(stack));
            root.insert("Route".into(), json!(route));
            root.insert("Requests".into(), json!(requests));
            root.insert("Errors".into(), json!(errors));
            root.insert("ServerErrors".into(), json!(server_errors));
            root.insert("Latency".into(), if latency.len() == 1 { json!(latency[0]) } else { json!(latency) });
            lines.push(Value::Object(root).to_string());
        }
        let changed: Vec<(Counter, u64)> =
            r.counters.iter_mut().filter(|(_, v)| v.1 > 0).map(|(c, v)| (*c, std::mem::take(&mut v.1))).collect();
        if !changed.is_empty() {
            let metrics: Vec<Value> = changed.iter().map(|(c, _)| json!({"Name": c.name(), "Unit": "Count"})).collect();
            let mut root = envelope(now_ms, json!([["Stack"]]), Value::Array(metrics));
            root.insert("Stack".into(), json!(stack));
            for (c, n) in changed {
                root.insert(c.name().into(), json!(n));
            }
            lines.push(Value::Object(root).to_string());
        }
    });
    lines
}

fn envelope(now_ms: i64, dimensions: Value, metrics: Value) -> Map<String, Value> {
    let mut root = Map::new();
    root.insert(
        "_aws".into(),
        json!({"Timestamp": now_ms, "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": dimensions, "Metrics": metrics}]}),
    );
    root
}

/// Prints [`take_emf`]'s lines on standard output, where the Lambda runtime sends them
/// to CloudWatch Logs (which extracts the metrics). `CONTINUITY_STACK` names the stack.
pub fn flush_emf() {
    let stack = std::env::var("CONTINUITY_STACK").unwrap_or_else(|_| "continuity".to_owned());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let lines = take_emf(&stack, i64::try_from(now).unwrap_or(i64::MAX));
    for line in &lines {
        println!("{line}");
    }
    let mut kept = PRINTED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(kept) = kept.as_mut() {
        kept.extend(lines);
        let over = kept.len().saturating_sub(MAX_PRINTED);
        kept.drain(..over);
    }
}

/// Lines [`flush_emf`] printed, kept when [`keep_printed`] asked (tests read them).
static PRINTED: Mutex<Option<Vec<String>>> = Mutex::new(None);
const MAX_PRINTED: usize = 1000;

/// Keeps (or stops keeping) the lines [`flush_emf`] prints, for [`printed`].
pub fn keep_printed(on: bool) {
    *PRINTED.lock().unwrap_or_else(PoisonError::into_inner) = on.then(Vec::new);
}

/// The last lines [`flush_emf`] printed since [`keep_printed`] (at most 1 000).
pub fn printed() -> Vec<String> {
    PRINTED.lock().unwrap_or_else(PoisonError::into_inner).clone().unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// One test owns the process-global registry (the others would race with it).
    #[test]
    fn counts_render_and_flush() {
        request("mcp:kb_search", 200, 12.0);
        request("mcp:kb_search", 503, 40.0);
        request("POST /oauth/token", 401, 3.0);
        add(Counter::TriageHuman, 2);
        add(Counter::ApprovalWaitsNearTimeout, 3);
        let text = prometheus();
        assert!(text.contains("continuity_requests_total{route=\"mcp:kb_search\"} 2"), "{text}");
        assert!(text.contains("continuity_errors_total{route=\"mcp:kb_search\"} 1"), "{text}");
        assert!(text.contains("continuity_server_errors_total{route=\"POST /oauth/token\"} 0"), "{text}");
        assert!(text.contains("continuity_request_duration_seconds_bucket{route=\"mcp:kb_search\",le=\"0.025\"} 1"), "{text}");
        assert!(text.contains("continuity_request_duration_seconds_bucket{route=\"mcp:kb_search\",le=\"0.05\"} 2"), "{text}");
        assert!(text.contains("continuity_request_duration_seconds_count{route=\"mcp:kb_search\"} 2"), "{text}");
        assert!(text.contains(
            "# TYPE continuity_approval_waits_near_timeout_total counter\ncontinuity_approval_waits_near_timeout_total 3"
        ));
        assert!(text.contains("continuity_triage_human_total 2"));

        let lines: Vec<Value> = take_emf("eu", 1_700_000_000_000).iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3, "two routes and the stack counters: {lines:?}");
        let kb = lines.iter().find(|l| l["Route"] == "mcp:kb_search").unwrap();
        assert_eq!(kb["_aws"]["CloudWatchMetrics"][0]["Namespace"], "Continuity");
        assert_eq!(kb["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Stack"], ["Stack", "Route"]]));
        assert_eq!(kb["_aws"]["Timestamp"], 1_700_000_000_000_i64);
        assert_eq!((kb["Requests"].as_u64(), kb["Errors"].as_u64(), kb["ServerErrors"].as_u64()), (Some(2), Some(1), Some(1)));
        assert_eq!(kb["Latency"], json!([12.0, 40.0]));
        assert_eq!(kb["Stack"], "eu");
        let stack = lines.iter().find(|l| l.get("Route").is_none()).unwrap();
        assert_eq!(stack["TriageHuman"], 2);
        assert_eq!(stack["ApprovalWaitsNearTimeout"], 3);
        assert_eq!(stack["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Stack"]]));
        // Every metric value named in the envelope is present at the root.
        for l in &lines {
            for m in l["_aws"]["CloudWatchMetrics"][0]["Metrics"].as_array().unwrap() {
                assert!(l.get(m["Name"].as_str().unwrap()).is_some(), "{l}");
            }
        }
        // Flushed: nothing pending until something happens again; totals stay.
        assert!(take_emf("eu", 0).is_empty());
        assert!(prometheus().contains("continuity_requests_total{route=\"mcp:kb_search\"} 2"));
        add(Counter::CacheHits, 1);
        let again = take_emf("eu", 0);
        assert_eq!(again.len(), 1);
        assert!(again[0].contains("\"CacheHits\":1") && !again[0].contains("TriageHuman"), "{}", again[0]);
    }
}
