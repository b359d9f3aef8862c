//! [`BedrockEmbedder`]: Amazon Titan Text Embeddings V2 on Bedrock runtime
//! (`InvokeModel`), one text per request (the model takes no batches), a few in flight;
//! a throttled or unavailable answer is tried again after a backoff, 4 tries in all.

use async_trait::async_trait;
use domain::{Error, Result};
use ports::Embedder;
use serde_json::{Value, json};

use crate::signed::SignedHttp;

/// Requests in flight at once for one `embed` call.
const CONCURRENCY: usize = 8;
/// Titan V2 accepts up to 8 192 tokens; longer texts are cut (by characters) first.
const MAX_CHARS: usize = 20_000;
/// Answers retried: throttling (`ThrottlingException`, 429) and the service or model
/// not ready (5xx).
const RETRIED: [u16; 5] = [429, 500, 502, 503, 504];
/// The waits between tries (then the failure is `UNAVAILABLE`): a daily reindex of a
/// large tenant meets the account's per-minute quota, and a short backoff rides it out.
const BACKOFF: [std::time::Duration; 3] =
    [std::time::Duration::from_millis(250), std::time::Duration::from_millis(1000), std::time::Duration::from_millis(3000)];

/// Embeddings from a Bedrock model (Titan Text Embeddings V2 request shape).
#[derive(Debug, Clone)]
pub struct BedrockEmbedder {
    http: SignedHttp,
    model: String,
    dim: usize,
    name: String,
}

impl BedrockEmbedder {
    /// `model` such as `amazon.titan-embed-text-v2:0`; `dim` one of 256, 512 or 1024.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for another dimension.
    pub fn new(http: SignedHttp, model: &str, dim: usize) -> Result<Self> {
        if ![256, 512, 1024].contains(&dim) {
            return Err(Error::invalid_field("dimensions", "Titan V2 embeds in 256, 512 or 1024 dimensions"));
        }
        Ok(Self { http, model: model.to_owned(), dim, name: format!("bedrock:{model}:{dim}") })
    }

    /// The request body for one text.
    pub fn request(&self, text: &str) -> Value {
        let cut: String = text.chars().take(MAX_CHARS).collect();
        json!({"inputText": cut, "dimensions": self.dim, "normalize": true})
    }

    async fn one(&self, text: &str) -> Result<Vec<f32>> {
        let body = serde_json::to_vec(&self.request(text)).map_err(|e| Error::internal(e.to_string()))?;
        let model: String =
            self.model.bytes().map(|b| if b == b':' { "%3A".to_owned() } else { char::from(b).to_string() }).collect();
        let path = format!("/model/{model}/invoke");
        let mut tries = 0;
        let answer = loop {
            tries += 1;
            let (status, answer) = self.http.send("POST", &path, "application/json", body.clone(), &RETRIED).await?;
            if !RETRIED.contains(&status) {
                break answer;
            }
            let Some(wait) = BACKOFF.get(tries - 1) else {
                return Err(Error::unavailable(format!(
                    "bedrock answered {status} {tries} times ({}); try again later or ask for a higher quota",
                    if status == 429 { "throttled" } else { "unavailable" }
                )));
            };
            tracing::warn!(status, tries, "bedrock throttled or unavailable; retrying");
            tokio::time::sleep(*wait).await;
        };
        #[allow(clippy::cast_possible_truncation)]
        let mut v: Vec<f32> = answer
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::internal("bedrock answered without an embedding"))?
            .iter()
            .map(|x| x.as_f64().unwrap_or(0.0) as f32)
            .collect();
        if v.len() != self.dim {
            return Err(Error::internal(format!("bedrock answered {} dimensions, expected {}", v.len(), self.dim)));
        }
        ports::search::normalize(&mut v);
        Ok(v)
    }
}

#[async_trait]
impl Embedder for BedrockEmbedder {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.dim
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(CONCURRENCY) {
            let mut set = tokio::task::JoinSet::new();
            for (i, t) in chunk.iter().enumerate() {
                let (me, t) = (self.clone(), t.clone());
                set.spawn(async move { (i, me.one(&t).await) });
            }
            let mut got: Vec<(usize, Vec<f32>)> = Vec::with_capacity(chunk.len());
            while let Some(r) = set.join_next().await {
                let (i, v) = r.map_err(|e| Error::internal(format!("bedrock task: {e}")))?;
                got.push((i, v?));
            }
            got.sort_by_key(|g| g.0);
            out.extend(got.into_iter().map(|g| g.1));
        }
        Ok(out)
    }
}
