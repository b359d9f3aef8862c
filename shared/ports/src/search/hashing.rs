//! The dependency-free lexical embedder, and the vector arithmetic every embedder's
//! vectors share.

use async_trait::async_trait;
use domain::Result;

use super::{Embedder, tokens};

/// The dependency-free fallback embedder: feature hashing of words, identifier parts
/// and character trigrams into `dim` signed buckets. It is **lexical** — it finds shared
/// words and spellings, not meaning — and says so in its name.
pub struct HashingEmbedder {
    dim: usize,
    name: String,
}

impl HashingEmbedder {
    pub fn new(dim: usize) -> Self {
        Self { dim: dim.max(8), name: format!("hashing-{} (lexical)", dim.max(8)) }
    }

    /// The vector of one text.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dim];
        let mut add = |feature: &str, weight: f32| {
            // FNV-1a: stable across runs and platforms.
            let h = feature.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
            #[allow(clippy::cast_possible_truncation)]
            let i = (h % self.dim as u64) as usize;
            v[i] += if h >> 63 == 0 { weight } else { -weight };
        };
        for t in tokens(text) {
            add(&t, 1.0);
            let padded: Vec<char> = format!(" {t} ").chars().collect();
            for w in padded.windows(3) {
                add(&w.iter().collect::<String>(), 0.25);
            }
        }
        normalize(&mut v);
        v
    }
}

#[async_trait]
impl Embedder for HashingEmbedder {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.dim
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }
}

/// Dot product of two equal-length vectors (cosine for unit vectors).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent sums, so the compiler can keep them in one SIMD register.
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 {
        for x in v.iter_mut() {
            *x /= norm;
        }
    }
}
