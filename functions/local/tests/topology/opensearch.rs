//! An OpenSearch stand-in with the request shapes of a Serverless vector collection
//! (there is no local OpenSearch): it keeps what `_bulk` indexes (assigning ids, refusing
//! a client `_id` on index as Serverless does), and answers `_search` with the stored
//! documents that pass every `term`/`terms` filter of the query — `multi_match` keeps
//! those sharing a word with the query, scored by how many; `knn` scores by cosine
//! ((1 + cos) / 2, like `cosinesimil`); `range` filters (`gte`, `lt`) on numbers. No
//! analysers, no BM25: only the shapes and the filtering the adapter relies on. Every
//! request is recorded for the test to check.
//!
//! Like a Serverless collection it is **eventually consistent**: an indexed document is
//! searchable, and a deleted one gone from searches, only [`REFRESH`] after the write —
//! so a removal-by-search right after a write misses it, and a re-index inside the
//! window leaves twins, as on AWS.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use serde_json::{Value, json};

/// How long after a write the stand-in's searches see it.
pub const REFRESH: Duration = Duration::from_millis(800);

/// A stored document: its assigned id, its source, when it was indexed and (once
/// deleted) when it was deleted.
struct Stored {
    id: String,
    source: Value,
    indexed: Instant,
    deleted: Option<Instant>,
}

impl Stored {
    fn visible(&self, now: Instant) -> bool {
        now >= self.indexed + REFRESH && self.deleted.is_none_or(|d| now < d + REFRESH)
    }
}

#[derive(Default)]
pub struct Stand {
    docs: Mutex<Vec<Stored>>,
    next: Mutex<u64>,
    /// `(method, path, body)` of every request.
    pub seen: Mutex<Vec<(String, String, String)>>,
}

impl Stand {
    /// The sources of every document not deleted, searchable yet or not.
    pub fn stored(&self) -> Vec<Value> {
        self.docs.lock().unwrap().iter().filter(|d| d.deleted.is_none()).map(|d| d.source.clone()).collect()
    }
}

pub async fn start() -> (String, Arc<Stand>) {
    let stand = Arc::new(Stand::default());
    let app = Router::new().fallback(handle).with_state(stand.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, stand)
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 1).map(str::to_lowercase).collect()
}

/// Every `term` / `terms` filter anywhere in the query, as (field, accepted values).
fn filters(v: &Value, out: &mut Vec<(String, Vec<Value>)>) {
    match v {
        Value::Object(map) => {
            for (k, inner) in map {
                match (k.as_str(), inner.as_object()) {
                    ("term", Some(t)) => out.extend(t.iter().map(|(f, x)| (f.clone(), vec![x.clone()]))),
                    ("terms", Some(t)) => {
                        out.extend(t.iter().map(|(f, x)| (f.clone(), x.as_array().cloned().unwrap_or_default())));
                    }
                    _ => filters(inner, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| filters(i, out)),
        _ => {}
    }
}

/// Every `range` filter anywhere in the query, as (field, gte, lt).
fn ranges(v: &Value, out: &mut Vec<(String, Option<f64>, Option<f64>)>) {
    match v {
        Value::Object(map) => {
            for (k, inner) in map {
                match (k.as_str(), inner.as_object()) {
                    ("range", Some(r)) => {
                        out.extend(r.iter().map(|(f, b)| (f.clone(), b["gte"].as_f64(), b["lt"].as_f64())));
                    }
                    _ => ranges(inner, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| ranges(i, out)),
        _ => {}
    }
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let n = norm(a) * norm(b);
    if n == 0.0 { 0.0 } else { dot / n }
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_f64).collect()).unwrap_or_default()
}

async fn handle(State(s): State<Arc<Stand>>, method: Method, uri: Uri, body: Bytes) -> (StatusCode, String) {
    let path = uri.path().to_owned();
    let text = String::from_utf8_lossy(&body).into_owned();
    s.seen.lock().unwrap().push((method.to_string(), path.clone(), text.clone()));
    if method == Method::PUT && path.matches('/').count() == 1 {
        return (StatusCode::OK, json!({"acknowledged": true, "index": &path[1..]}).to_string());
    }
    if method == Method::POST && path == "/_bulk" {
        let lines: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let mut items = Vec::new();
        let mut i = 0;
        let mut docs = s.docs.lock().unwrap();
        while i < lines.len() {
            if let Some(meta) = lines[i].get("index") {
                if meta.get("_id").is_some() {
                    // What a Serverless vector collection answers.
                    items.push(json!({"index": {"status": 400, "error": {"type": "illegal_argument_exception",
                        "reason": "Document ID is not supported in create/index operation request"}}}));
                } else {
                    let mut next = s.next.lock().unwrap();
                    *next += 1;
                    let id = format!("1%3A0%3A{:08}", *next);
                    let source = lines.get(i + 1).cloned().unwrap_or(Value::Null);
                    docs.push(Stored { id: id.clone(), source, indexed: Instant::now(), deleted: None });
                    items.push(json!({"index": {"_index": meta["_index"], "_id": id, "result": "created", "status": 201}}));
                }
                i += 2;
            } else if let Some(meta) = lines[i].get("delete") {
                let id = meta["_id"].as_str().unwrap_or_default();
                for d in docs.iter_mut().filter(|d| d.id == id && d.deleted.is_none()) {
                    d.deleted = Some(Instant::now());
                }
                items.push(json!({"delete": {"_index": meta["_index"], "_id": id, "result": "deleted", "status": 200}}));
                i += 1;
            } else {
                return (StatusCode::BAD_REQUEST, json!({"error": {"type": "parse_exception"}}).to_string());
            }
        }
        let errors =
            items.iter().any(|i| i.as_object().and_then(|o| o.values().next()).is_some_and(|v| v.get("error").is_some()));
        return (StatusCode::OK, json!({"took": 3, "errors": errors, "items": items}).to_string());
    }
    if method == Method::POST && path.ends_with("/_search") {
        let q: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let (mut constraints, mut bounds) = (Vec::new(), Vec::new());
        filters(&q["query"], &mut constraints);
        ranges(&q["query"], &mut bounds);
        let size = q["size"].as_u64().unwrap_or(10) as usize;
        let matching = |doc: &Value| {
            constraints.iter().all(|(field, accepted)| accepted.contains(&doc[field]))
                && bounds.iter().all(|(field, gte, lt)| {
                    doc[field].as_f64().is_some_and(|x| gte.is_none_or(|g| x >= g) && lt.is_none_or(|l| x < l))
                })
        };
        let now = Instant::now();
        let query_words = q.pointer("/query/bool/must/0/multi_match/query").and_then(Value::as_str).map(words);
        let knn = q.pointer("/query/knn/vector/vector").map(floats);
        let docs = s.docs.lock().unwrap();
        let mut hits: Vec<(f64, &String, &Value)> = docs
            .iter()
            .filter(|d| d.visible(now) && matching(&d.source))
            .map(|d| (&d.id, &d.source))
            .filter_map(|(id, d)| {
                let score = match (&query_words, &knn) {
                    (Some(qw), _) => {
                        let have = words(&format!("{} {}", d["title"].as_str().unwrap_or(""), d["text"].as_str().unwrap_or("")));
                        let n = qw.iter().filter(|w| have.contains(w)).count();
                        if n == 0 {
                            return None;
                        }
                        n as f64
                    }
                    (None, Some(v)) => f64::midpoint(1.0, cosine(v, &floats(&d["vector"]))),
                    (None, None) => 1.0,
                };
                Some((score, id, d))
            })
            .collect();
        hits.sort_by(|a, b| b.0.total_cmp(&a.0));
        let hits: Vec<Value> = hits
            .into_iter()
            .take(size)
            .map(|(score, id, d)| json!({"_index": "continuity", "_id": id, "_score": score, "_source": d}))
            .collect();
        return (
            StatusCode::OK,
            json!({"took": 2, "timed_out": false, "hits": {"total": {"value": hits.len(), "relation": "eq"}, "hits": hits}})
                .to_string(),
        );
    }
    (
        StatusCode::BAD_REQUEST,
        json!({"error": {"type": "unsupported_by_the_stand_in", "reason": format!("{method} {path}")}}).to_string(),
    )
}
