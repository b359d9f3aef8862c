//! The calls [`super::S3VectorsIndex`] makes to Amazon S3 Vectors (REST-JSON, SigV4
//! service `s3vectors`, `https://s3vectors.{region}.api.aws`): `CreateIndex`,
//! `PutVectors`, `GetVectors`, `DeleteVectors` and `QueryVectors` on one vector bucket.
//!
//! One vector index per tenant (`t-{tenant}-{dimensions}`; `h-{hash}-{dimensions}` for a
//! slug too long for an index name) and one for the shared `global` scope
//! (`g-{dimensions}`): a query is sent to its tenant's index only, so no other tenant's
//! vector is ever traversed. Within it the scope, kind and time are filterable metadata
//! (`p`, `k`, `at`), applied by the service while it searches; `c` names the chunk
//! (`{doc}/{id}`). Indexes are created on first write.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use domain::{Error, Result, TenantId};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::signed::SignedHttp;

/// Vectors per `PutVectors`/`DeleteVectors`/`GetVectors` request (the service's limit).
pub const MAX_BATCH: usize = 500;

/// One nearest neighbour: its key, its cosine distance and its metadata.
#[derive(Debug, Clone)]
pub struct Found {
    pub key: String,
    pub distance: f64,
    pub metadata: Value,
}

/// A vector bucket's indexes, through signed HTTP.
#[derive(Clone)]
pub struct VectorStore {
    http: SignedHttp,
    bucket: String,
    dim: usize,
    /// Indexes known to exist (created or written by this process).
    known: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for VectorStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorStore").field("bucket", &self.bucket).field("dim", &self.dim).finish_non_exhaustive()
    }
}

/// The vector index of a tenant (`None`: the shared `global` scope) for `dim`-dimension
/// vectors. Index names are 3–63 lower-case letters, digits, hyphens and dots.
pub fn index_name(tenant: Option<&TenantId>, dim: usize) -> String {
    match tenant {
        None => format!("g-{dim}"),
        Some(t) => {
            let plain = format!("t-{}-{dim}", t.as_str());
            if plain.len() <= 63 {
                plain
            } else {
                let digest = Sha256::digest(t.as_str().as_bytes());
                format!("h-{}-{dim}", hex::encode(&digest[..16]))
            }
        }
    }
}

impl VectorStore {
    pub fn new(http: SignedHttp, bucket: &str, dim: usize) -> Self {
        Self { http, bucket: bucket.to_owned(), dim, known: Arc::default() }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    async fn call(&self, op: &str, mut body: Value) -> Result<(u16, Value)> {
        body["vectorBucketName"] = json!(self.bucket);
        let bytes = serde_json::to_vec(&body).map_err(|e| Error::internal(format!("s3vectors {op}: {e}")))?;
        // 404: no such index (nothing written to it yet); 409: it exists already.
        self.http.send("POST", &format!("/{op}"), "application/json", bytes, &[404, 409]).await
    }

    /// Creates `index` (float32, cosine) unless it exists.
    ///
    /// # Errors
    /// `UNAVAILABLE` when S3 Vectors refuses or cannot be reached.
    pub async fn ensure_index(&self, index: &str) -> Result<()> {
        if self.known.lock().map_err(|_| Error::internal("index cache poisoned"))?.contains(index) {
            return Ok(());
        }
        let body = json!({"indexName": index, "dataType": "float32", "dimension": self.dim, "distanceMetric": "cosine"});
        match self.call("CreateIndex", body).await? {
            (404, _) => Err(Error::unavailable(format!("s3vectors: the vector bucket {} does not exist", self.bucket))),
            _ => {
                self.known.lock().map_err(|_| Error::internal("index cache poisoned"))?.insert(index.to_owned());
                Ok(())
            }
        }
    }

    /// Writes (adds or replaces by key) `vectors`: `{key, data: {float32}, metadata}`.
    ///
    /// # Errors
    /// `UNAVAILABLE` when S3 Vectors refuses or cannot be reached.
    pub async fn put(&self, index: &str, vectors: Vec<Value>) -> Result<()> {
        for batch in vectors.chunks(MAX_BATCH) {
            let body = json!({"indexName": index, "vectors": batch});
            if self.call("PutVectors", body.clone()).await?.0 == 404 {
                self.known.lock().map_err(|_| Error::internal("index cache poisoned"))?.remove(index);
                self.ensure_index(index).await?;
                if self.call("PutVectors", body).await?.0 == 404 {
                    return Err(Error::unavailable(format!("s3vectors: index {index} not found after creating it")));
                }
            }
        }
        Ok(())
    }

    /// Deletes the vectors with these keys; an index that does not exist has none.
    ///
    /// # Errors
    /// `UNAVAILABLE` when S3 Vectors refuses or cannot be reached.
    pub async fn delete(&self, index: &str, keys: Vec<String>) -> Result<()> {
        for batch in keys.chunks(MAX_BATCH) {
            self.call("DeleteVectors", json!({"indexName": index, "keys": batch})).await?;
        }
        Ok(())
    }

    /// The stored vectors with these keys (those that exist).
    ///
    /// # Errors
    /// `UNAVAILABLE` when S3 Vectors refuses or cannot be reached.
    pub async fn get(&self, index: &str, keys: Vec<String>) -> Result<Vec<(String, Vec<f32>)>> {
        let mut out = Vec::new();
        for batch in keys.chunks(MAX_BATCH) {
            let body = json!({"indexName": index, "keys": batch, "returnData": true, "returnMetadata": false});
            let (status, answer) = self.call("GetVectors", body).await?;
            if status == 404 {
                return Ok(Vec::new());
            }
            for v in answer["vectors"].as_array().ok_or_else(|| Error::internal("s3vectors GetVectors: no vectors list"))? {
                let key = v["key"].as_str().ok_or_else(|| Error::internal("s3vectors GetVectors: a vector without a key"))?;
                #[allow(clippy::cast_possible_truncation)]
                let data: Vec<f32> = v["data"]["float32"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_f64).map(|x| x as f32).collect())
                    .unwrap_or_default();
                out.push((key.to_owned(), data));
            }
        }
        Ok(out)
    }

    /// The `top_k` nearest vectors to `vector` among those `filter` admits.
    ///
    /// # Errors
    /// `UNAVAILABLE` when S3 Vectors refuses or cannot be reached.
    pub async fn query(&self, index: &str, vector: &[f32], top_k: usize, filter: Option<Value>) -> Result<Vec<Found>> {
        let mut body = json!({
            "indexName": index,
            "queryVector": {"float32": super::wire(vector)},
            "topK": top_k,
            "returnMetadata": true,
            "returnDistance": true,
        });
        if let Some(f) = filter {
            body["filter"] = f;
        }
        let (status, answer) = self.call("QueryVectors", body).await?;
        if status == 404 {
            return Ok(Vec::new());
        }
        let list = answer["vectors"].as_array().ok_or_else(|| Error::internal("s3vectors QueryVectors: no vectors list"))?;
        list.iter()
            .map(|v| {
                Ok(Found {
                    key: v["key"]
                        .as_str()
                        .ok_or_else(|| Error::internal("s3vectors QueryVectors: a vector without a key"))?
                        .to_owned(),
                    distance: v["distance"].as_f64().ok_or_else(|| Error::internal("s3vectors QueryVectors: no distance"))?,
                    metadata: v["metadata"].clone(),
                })
            })
            .collect()
    }
}
