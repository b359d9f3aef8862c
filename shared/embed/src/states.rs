//! The token states late interaction reads, kept so that a search does not run the
//! model over its candidates.
//!
//! A written text's states come from the same model run as its sentence vector (the
//! write queue's), and are kept in [`Written`] under a keyed hash of the text — vectors
//! only, one signed byte per dimension with a scale per token (about 400 bytes a token,
//! so 7 to 8 KB a short memory with its title), never its words. The cache is bounded in bytes and
//! drops the least recently used first; a text it no longer holds (or that was written
//! before the process started) is run through the model when a search needs it, and
//! kept then. Every candidate's states go through the same rounding, cached or not, so
//! an answer does not depend on what the cache held.
//!
//! A question's states (with its word pieces: late interaction leaves out its stop
//! words) come from the run that gives its vector ([`super::SentenceModel`]'s
//! `embed_query`), kept for the next few searches in [`Asked`].

use std::hash::BuildHasher;
use std::num::NonZeroUsize;
use std::sync::Arc;

use ports::search::TokenStates;

/// Default bound of the written texts' token states, in bytes (256 MiB: about 32 000
/// turns); `CONTINUITY_TOKEN_CACHE_MB` changes it.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

/// Questions whose states are kept for the search that embedded them.
const ASKED: usize = 64;

/// A text's token vectors rounded to one signed byte per dimension, each token with its
/// own scale.
pub(crate) struct Packed {
    scales: Vec<f32>,
    data: Vec<i8>,
}

impl Packed {
    pub(crate) fn pack(vectors: &[Vec<f32>]) -> Self {
        let mut scales = Vec::with_capacity(vectors.len());
        let mut data = Vec::with_capacity(vectors.iter().map(Vec::len).sum());
        for v in vectors {
            let max = v.iter().fold(0.0_f32, |m, x| m.max(x.abs()));
            let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
            scales.push(scale);
            // Within ±127 by construction: the cast cannot wrap.
            #[allow(clippy::cast_possible_truncation)]
            data.extend(v.iter().map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8));
        }
        Self { scales, data }
    }

    /// The vectors again, each scaled back to unit length.
    pub(crate) fn unpack(&self) -> Vec<Vec<f32>> {
        if self.scales.is_empty() {
            return Vec::new();
        }
        let dim = self.data.len() / self.scales.len();
        self.data
            .chunks(dim.max(1))
            .zip(&self.scales)
            .map(|(row, scale)| {
                let mut v: Vec<f32> = row.iter().map(|&x| f32::from(x) * scale).collect();
                ports::search::normalize(&mut v);
                v
            })
            .collect()
    }

    /// What it takes in memory, with the cache's own bookkeeping.
    fn bytes(&self) -> usize {
        self.data.len() + 4 * self.scales.len() + 96
    }
}

/// The written texts' token states, by keyed hash of the text, bounded in bytes.
pub(crate) struct Written {
    map: lru::LruCache<u64, Arc<Packed>>,
    bytes: usize,
    budget: usize,
}

impl Written {
    pub(crate) fn new(budget: usize) -> Self {
        Self { map: lru::LruCache::unbounded(), bytes: 0, budget }
    }

    pub(crate) fn get(&mut self, key: u64) -> Option<Arc<Packed>> {
        self.map.get(&key).cloned()
    }

    /// Keeps `packed` for `key`, dropping the least recently used beyond the budget
    /// (nothing is kept with a budget of 0, or when one text is over it).
    pub(crate) fn put(&mut self, key: u64, packed: Arc<Packed>) {
        let size = packed.bytes();
        if size > self.budget {
            return;
        }
        if let Some(old) = self.map.put(key, packed) {
            self.bytes -= old.bytes();
        }
        self.bytes += size;
        while self.bytes > self.budget {
            let Some((_, old)) = self.map.pop_lru() else { break };
            self.bytes -= old.bytes();
        }
    }

    pub(crate) fn remove(&mut self, key: u64) {
        if let Some(old) = self.map.pop(&key) {
            self.bytes -= old.bytes();
        }
    }

    pub(crate) fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
        while self.bytes > self.budget {
            let Some((_, old)) = self.map.pop_lru() else { break };
            self.bytes -= old.bytes();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The last few questions' states, with their word pieces.
pub(crate) struct Asked(lru::LruCache<u64, TokenStates>);

impl Default for Asked {
    fn default() -> Self {
        Self(lru::LruCache::new(NonZeroUsize::new(ASKED).unwrap_or(NonZeroUsize::MIN)))
    }
}

impl Asked {
    pub(crate) fn put(&mut self, key: u64, states: TokenStates) {
        self.0.put(key, states);
    }
    pub(crate) fn get(&mut self, key: u64) -> Option<TokenStates> {
        self.0.get(&key).cloned()
    }
}

/// The cache key of a text: a hash keyed at random per process, so that no text can
/// be made to collide with another's.
pub(crate) struct Keys(std::hash::RandomState);

impl Default for Keys {
    fn default() -> Self {
        Self(std::hash::RandomState::new())
    }
}

impl Keys {
    pub(crate) fn of(&self, text: &str) -> u64 {
        self.0.hash_one(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ports::search::dot;

    fn unit(seed: u32, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim).map(|i| (((i as u32 + 1) * (seed + 7)) % 97) as f32 / 97.0 - 0.5).collect();
        ports::search::normalize(&mut v);
        v
    }

    /// Rounding to a byte per dimension keeps each token's direction (cosine with the
    /// original above 0.999) and its unit length.
    #[test]
    fn packing_keeps_each_vector_within_rounding() {
        let vectors: Vec<Vec<f32>> = (0..5).map(|s| unit(s, 384)).collect();
        let back = Packed::pack(&vectors).unpack();
        assert_eq!(back.len(), 5);
        for (a, b) in vectors.iter().zip(&back) {
            assert!(dot(a, b) > 0.999, "{}", dot(a, b));
            assert!((dot(b, b) - 1.0).abs() < 1e-4);
        }
        assert!(Packed::pack(&[]).unpack().is_empty());
        let zero = Packed::pack(&[vec![0.0; 4]]).unpack();
        assert_eq!(zero, [vec![0.0; 4]]);
    }

    /// The cache holds at most its budget, drops the least recently used first, keeps
    /// nothing over budget and forgets what a smaller budget cannot hold.
    #[test]
    fn the_written_cache_stays_within_its_budget() {
        let one = Arc::new(Packed::pack(&[unit(1, 384), unit(2, 384)]));
        let size = one.bytes();
        let mut c = Written::new(3 * size);
        for key in 0..3 {
            c.put(key, one.clone());
        }
        assert_eq!((c.len(), c.bytes()), (3, 3 * size));
        assert!(c.get(0).is_some()); // 0 is now the most recently used
        c.put(3, one.clone());
        assert_eq!(c.len(), 3);
        assert!(c.get(1).is_none(), "the least recently used goes first");
        assert!(c.get(0).is_some() && c.get(3).is_some());
        c.put(3, one.clone());
        assert_eq!(c.bytes(), 3 * size, "a text kept again is counted once");
        c.remove(3);
        c.remove(3);
        assert_eq!((c.len(), c.bytes()), (2, 2 * size));
        assert!(c.get(3).is_none());
        c.put(3, one.clone());
        c.set_budget(size);
        assert_eq!((c.len(), c.bytes()), (1, size));
        c.put(9, Arc::new(Packed::pack(&vec![unit(3, 384); 3])));
        assert!(c.get(9).is_none(), "a text over the whole budget is not kept");
        c.set_budget(0);
        assert_eq!((c.len(), c.bytes()), (0, 0));
    }

    #[test]
    fn keys_tell_texts_apart() {
        let k = Keys::default();
        assert_eq!(k.of("Kate took up pottery."), k.of("Kate took up pottery."));
        assert_ne!(k.of("Kate took up pottery."), k.of("Kate took up pottery"));
    }
}
