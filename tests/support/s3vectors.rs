//! An Amazon S3 Vectors stand-in: the five operations the `small` profile's index calls
//! (`CreateIndex`, `PutVectors`, `GetVectors`, `DeleteVectors`, `QueryVectors`), with
//! the request shapes, limits and error statuses of the service's API reference.
//!
//! moto has every operation but `QueryVectors`, so the tests use this instead, in
//! process: it records each request (for tests that assert the exact requests) and
//! answers queries by an **exact** cosine scan with the metadata filter applied first.
//! The real service searches approximately; what that changes is for a first deploy to
//! confirm (docs/aws.md).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};

/// A request as it arrived.
#[derive(Debug, Clone)]
pub struct Seen {
    pub op: String,
    pub body: Value,
    pub authorization: String,
}

struct Index {
    dim: usize,
    vectors: BTreeMap<String, (Vec<f32>, Value)>,
}

/// The stand-in's state: indexes by `(bucket, index)`, and every request seen.
#[derive(Default)]
pub struct S3Vectors {
    indexes: Mutex<HashMap<(String, String), Index>>,
    pub seen: Mutex<Vec<Seen>>,
}

fn error(status: StatusCode, kind: &str, message: &str) -> (StatusCode, HeaderMap, String) {
    let mut headers = HeaderMap::new();
    headers.insert("x-amzn-errortype", kind.parse().unwrap());
    (status, headers, json!({"message": message}).to_string())
}

/// Whether `metadata` passes `filter` (the operators the index uses, and `$or`/`$ne`).
fn admits(filter: &Value, metadata: &Value) -> bool {
    let Some(obj) = filter.as_object() else { return false };
    obj.iter().all(|(k, cond)| match k.as_str() {
        "$and" => cond.as_array().is_some_and(|a| a.iter().all(|f| admits(f, metadata))),
        "$or" => cond.as_array().is_some_and(|a| a.iter().any(|f| admits(f, metadata))),
        field => {
            let v = &metadata[field];
            match cond.as_object() {
                None => v == cond,
                Some(ops) => ops.iter().all(|(op, arg)| match op.as_str() {
                    "$eq" => v == arg,
                    "$ne" => v != arg,
                    "$in" => arg.as_array().is_some_and(|a| a.contains(v)),
                    "$gte" => v.as_f64().zip(arg.as_f64()).is_some_and(|(a, b)| a >= b),
                    "$gt" => v.as_f64().zip(arg.as_f64()).is_some_and(|(a, b)| a > b),
                    "$lt" => v.as_f64().zip(arg.as_f64()).is_some_and(|(a, b)| a < b),
                    "$lte" => v.as_f64().zip(arg.as_f64()).is_some_and(|(a, b)| a <= b),
                    _ => false,
                }),
            }
        }
    })
}

fn floats(v: &Value) -> Option<Vec<f32>> {
    #[allow(clippy::cast_possible_truncation)]
    v["float32"].as_array().map(|a| a.iter().filter_map(Value::as_f64).map(|x| x as f32).collect())
}

fn cosine_distance(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 { 1.0 } else { 1.0 - dot / (na * nb) }
}

async fn handle(
    State(s): State<Arc<S3Vectors>>,
    Path(op): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap, String) {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "ValidationException", "malformed JSON");
    };
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    s.seen.lock().unwrap().push(Seen { op: op.clone(), body: body.clone(), authorization: authorization.clone() });
    if !authorization.contains("/s3vectors/aws4_request") {
        return error(StatusCode::FORBIDDEN, "AccessDeniedException", "missing or wrong SigV4 signature scope");
    }
    let bucket = body["vectorBucketName"].as_str().unwrap_or_default().to_owned();
    let name = body["indexName"].as_str().unwrap_or_default().to_owned();
    let valid_name = (3..=63).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if bucket.is_empty() || !valid_name {
        return error(StatusCode::BAD_REQUEST, "ValidationException", "vectorBucketName and a valid indexName are required");
    }
    let mut indexes = s.indexes.lock().unwrap();
    let key = (bucket, name);
    if op == "CreateIndex" {
        if indexes.contains_key(&key) {
            return error(StatusCode::CONFLICT, "ConflictException", "an index with this name already exists");
        }
        let dim = body["dimension"].as_u64().unwrap_or(0);
        if body["dataType"] != "float32" || !(1..=4096).contains(&dim) || body["distanceMetric"] != "cosine" {
            return error(StatusCode::BAD_REQUEST, "ValidationException", "dataType, dimension or distanceMetric");
        }
        #[allow(clippy::cast_possible_truncation)]
        indexes.insert(key, Index { dim: dim as usize, vectors: BTreeMap::new() });
        return (StatusCode::OK, HeaderMap::new(), "{}".into());
    }
    let Some(index) = indexes.get_mut(&key) else {
        return error(StatusCode::NOT_FOUND, "NotFoundException", "the specified index could not be found");
    };
    let answer = match op.as_str() {
        "PutVectors" => {
            let list = body["vectors"].as_array().cloned().unwrap_or_default();
            if list.is_empty() || list.len() > 500 {
                return error(StatusCode::BAD_REQUEST, "ValidationException", "1 to 500 vectors per request");
            }
            for v in list {
                let (Some(k), Some(data)) = (v["key"].as_str(), floats(&v["data"])) else {
                    return error(StatusCode::BAD_REQUEST, "ValidationException", "key and data.float32 are required");
                };
                if data.len() != index.dim {
                    return error(StatusCode::BAD_REQUEST, "ValidationException", "vector dimension does not match the index");
                }
                index.vectors.insert(k.to_owned(), (data, v["metadata"].clone()));
            }
            json!({})
        }
        "DeleteVectors" => {
            for k in body["keys"].as_array().cloned().unwrap_or_default() {
                index.vectors.remove(k.as_str().unwrap_or_default());
            }
            json!({})
        }
        "GetVectors" => {
            let found: Vec<Value> = body["keys"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .filter_map(|k| {
                    let k = k.as_str()?;
                    let (data, metadata) = index.vectors.get(k)?;
                    let mut v = json!({"key": k});
                    if body["returnData"] == true {
                        v["data"] = json!({"float32": data});
                    }
                    if body["returnMetadata"] == true {
                        v["metadata"] = metadata.clone();
                    }
                    Some(v)
                })
                .collect();
            json!({"vectors": found})
        }
        "QueryVectors" => {
            let top_k = body["topK"].as_u64().unwrap_or(0);
            let Some(q) = floats(&body["queryVector"]) else {
                return error(StatusCode::BAD_REQUEST, "ValidationException", "queryVector.float32 is required");
            };
            if !(1..=100).contains(&top_k) || q.len() != index.dim {
                return error(
                    StatusCode::BAD_REQUEST,
                    "ValidationException",
                    "topK 1..100 and a vector of the index's dimension",
                );
            }
            let filter = body.get("filter").cloned();
            let mut hits: Vec<(f64, &String, &Value)> = index
                .vectors
                .iter()
                .filter(|(_, (_, m))| filter.as_ref().is_none_or(|f| admits(f, m)))
                .map(|(k, (v, m))| (cosine_distance(&q, v), k, m))
                .collect();
            hits.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
            #[allow(clippy::cast_possible_truncation)]
            hits.truncate(top_k as usize);
            let list: Vec<Value> = hits
                .into_iter()
                .map(|(d, k, m)| {
                    let mut v = json!({"key": k});
                    if body["returnDistance"] == true {
                        v["distance"] = json!(d);
                    }
                    if body["returnMetadata"] == true {
                        v["metadata"] = m.clone();
                    }
                    v
                })
                .collect();
            json!({"vectors": list, "distanceMetric": "cosine"})
        }
        _ => return error(StatusCode::NOT_FOUND, "UnknownOperationException", "no such operation"),
    };
    (StatusCode::OK, HeaderMap::new(), answer.to_string())
}

impl S3Vectors {
    /// Starts a stand-in on a free loopback port; its state and base URL.
    pub async fn start() -> (Arc<Self>, String) {
        let state = Arc::new(Self::default());
        let app = Router::new().route("/{op}", post(handle)).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (state, url)
    }

    /// The requests seen so far, and forget them.
    pub fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    /// The names of the indexes of `bucket`.
    pub fn indexes(&self, bucket: &str) -> Vec<String> {
        let mut names: Vec<String> =
            self.indexes.lock().unwrap().keys().filter(|(b, _)| b == bucket).map(|(_, n)| n.clone()).collect();
        names.sort();
        names
    }

    /// How many vectors `index` of `bucket` holds.
    pub fn count(&self, bucket: &str, index: &str) -> usize {
        self.indexes.lock().unwrap().get(&(bucket.to_owned(), index.to_owned())).map_or(0, |i| i.vectors.len())
    }
}
