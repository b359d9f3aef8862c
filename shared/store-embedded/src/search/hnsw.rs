//! A Hierarchical Navigable Small World graph (Malkov & Yashunin, 2016) over unit
//! vectors with cosine distance, written small so that it can read vectors straight from
//! the partition's quantized array (`Vectors`: no second copy) and skip removed slots.
//!
//! Nodes are slot numbers of the owning partition. Neighbours are chosen with the paper's
//! heuristic (a candidate joins only if it is closer to the new node than to every
//! neighbour already chosen), which keeps the graph navigable across clusters.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use std::io::{Read, Write};

use super::codec::{Bad, Reader, Writer};
use super::vectors::{Query, Vectors};

/// Links per node above layer 0 (SPEC §5.4: m 16).
pub const M: usize = 16;
/// Candidate list while building (SPEC §5.4: ef_construction 64).
pub const EF_CONSTRUCTION: usize = 64;
/// Candidate list while searching (at least `k`).
pub const EF_SEARCH: usize = 200;

#[derive(Clone, Copy, PartialEq)]
struct Near(f32, u32);
impl Eq for Near {}
impl PartialOrd for Near {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Near {
    /// By distance, then node, so heaps are deterministic.
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}

pub struct Hnsw {
    /// `links[slot][layer]`; empty for slots not in the graph.
    links: Vec<Vec<Vec<u32>>>,
    entry: Option<u32>,
    top: usize,
    rng: u64,
}

/// A visited set for one traversal.
struct Visited(Vec<u64>);
impl Visited {
    fn new(n: usize) -> Self {
        Self(vec![0; n.div_ceil(64)])
    }
    /// Marks `i`; true when it was not marked before.
    fn insert(&mut self, i: u32) -> bool {
        let (w, b) = ((i / 64) as usize, i % 64);
        let fresh = self.0[w] & (1 << b) == 0;
        self.0[w] |= 1 << b;
        fresh
    }
}

impl Default for Hnsw {
    fn default() -> Self {
        Self::new()
    }
}

impl Hnsw {
    pub fn new() -> Self {
        Self { links: Vec::new(), entry: None, top: 0, rng: 0x9E37_79B9_7F4A_7C15 }
    }

    fn dist(vectors: &Vectors, q: &Query, slot: u32) -> f32 {
        1.0 - vectors.sim(q, slot)
    }

    /// A level drawn from the paper's exponential distribution (mL = 1 / ln M), from a
    /// fixed-seed generator so a rebuild gives the same graph.
    fn random_level(&mut self) -> usize {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        #[allow(clippy::cast_precision_loss)]
        let u = ((self.rng >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let level = (-u.ln() / (M as f64).ln()).floor() as usize;
        level.min(16)
    }

    fn max_links(layer: usize) -> usize {
        if layer == 0 { 2 * M } else { M }
    }

    /// Best-first search of one layer from `entries`; the `ef` closest, nearest first.
    fn search_layer(&self, vectors: &Vectors, q: &Query, entries: &[Near], ef: usize, layer: usize) -> Vec<Near> {
        let mut visited = Visited::new(self.links.len());
        let mut candidates: BinaryHeap<std::cmp::Reverse<Near>> = BinaryHeap::new();
        let mut best: BinaryHeap<Near> = BinaryHeap::new();
        for &e in entries {
            if visited.insert(e.1) {
                candidates.push(std::cmp::Reverse(e));
                best.push(e);
            }
        }
        while best.len() > ef {
            best.pop();
        }
        while let Some(std::cmp::Reverse(c)) = candidates.pop() {
            if best.len() >= ef && best.peek().is_some_and(|w| c.0 > w.0) {
                break;
            }
            for &n in &self.links[c.1 as usize][layer] {
                if !visited.insert(n) {
                    continue;
                }
                let d = Self::dist(vectors, q, n);
                if best.len() < ef || best.peek().is_some_and(|w| d < w.0) {
                    candidates.push(std::cmp::Reverse(Near(d, n)));
                    best.push(Near(d, n));
                    if best.len() > ef {
                        best.pop();
                    }
                }
            }
        }
        best.into_sorted_vec()
    }

    /// The paper's neighbour heuristic over `candidates` (nearest first).
    fn select(vectors: &Vectors, candidates: &[Near], max: usize) -> Vec<u32> {
        let mut chosen: Vec<u32> = Vec::with_capacity(max);
        for c in candidates {
            if chosen.len() >= max {
                break;
            }
            if chosen.iter().all(|&s| 1.0 - vectors.sim_slots(c.1, s) > c.0) {
                chosen.push(c.1);
            }
        }
        chosen
    }

    /// Adds `slot` (its vector already in `vectors`) to the graph.
    pub fn insert(&mut self, vectors: &Vectors, slot: u32) {
        let s = slot as usize;
        if self.links.len() <= s {
            self.links.resize_with(s + 1, Vec::new);
        }
        let level = self.random_level();
        self.links[s] = vec![Vec::new(); level + 1];
        let Some(entry) = self.entry else {
            self.entry = Some(slot);
            self.top = level;
            return;
        };
        let q = vectors.query_of(slot);
        let mut eps = vec![Near(Self::dist(vectors, &q, entry), entry)];
        for layer in (level + 1..=self.top).rev() {
            eps = self.search_layer(vectors, &q, &eps, 1, layer);
        }
        for layer in (0..=level.min(self.top)).rev() {
            let found = self.search_layer(vectors, &q, &eps, EF_CONSTRUCTION, layer);
            let max = Self::max_links(layer);
            let chosen = Self::select(vectors, &found, max);
            for &n in &chosen {
                let list = &mut self.links[n as usize][layer];
                list.push(slot);
                if list.len() > max {
                    // An overfull list keeps its closest links (the heuristic already
                    // chose the new node's own links; re-running it here costs
                    // max² distances per overflow and dominated the build).
                    let mut near: Vec<Near> =
                        self.links[n as usize][layer].iter().map(|&x| Near(1.0 - vectors.sim_slots(n, x), x)).collect();
                    near.select_nth_unstable(max - 1);
                    near.truncate(max);
                    self.links[n as usize][layer] = near.into_iter().map(|x| x.1).collect();
                }
            }
            self.links[s][layer] = chosen;
            eps = found;
        }
        if level > self.top {
            self.top = level;
            self.entry = Some(slot);
        }
    }

    /// Writes the graph for [`Self::read`].
    pub(super) fn save<W: Write>(&self, w: &mut Writer<W>) -> std::io::Result<()> {
        w.len(self.links.len())?;
        for layers in &self.links {
            // At most 17 layers (`random_level` caps the level at 16).
            w.u8(u8::try_from(layers.len()).unwrap_or(u8::MAX))?;
            for list in layers {
                w.u32s(list)?;
            }
        }
        match self.entry {
            Some(e) => {
                w.u8(1)?;
                w.u32(e)?;
            }
            None => w.u8(0)?,
        }
        w.len(self.top)?;
        w.u64(self.rng)
    }

    /// A graph written by [`Self::save`] over a partition of `slots` slots, checked so
    /// that a search can follow every link: each names a node of the graph that has the
    /// link's layer, and the entry point has the top layer.
    pub(super) fn read<R: Read>(r: &mut Reader<R>, slots: usize) -> Result<Self, Bad> {
        let n = r.len()?;
        if n > slots {
            return Err("a graph larger than the partition".into());
        }
        let mut links = Vec::with_capacity(n);
        for _ in 0..n {
            let count = usize::from(r.u8()?);
            if count > 17 {
                return Err("a graph node with too many layers".into());
            }
            let mut layers = Vec::with_capacity(count);
            for layer in 0..count {
                let list = r.u32s()?;
                if list.len() > Self::max_links(layer) {
                    return Err("a graph node with too many links".into());
                }
                layers.push(list);
            }
            links.push(layers);
        }
        let entry = match r.u8()? {
            0 => None,
            1 => Some(r.u32()?),
            _ => return Err("a graph entry marker that is neither 0 nor 1".into()),
        };
        let top = r.len()?;
        let rng = r.u64()?;
        let layers_of = |node: u32| links.get(node as usize).map_or(0, Vec::len);
        for layers in &links {
            for (layer, list) in layers.iter().enumerate() {
                if list.iter().any(|&nb| layers_of(nb) <= layer) {
                    return Err("a graph link to a node without that layer".into());
                }
            }
        }
        match entry {
            Some(e) if layers_of(e) != top + 1 => return Err("a graph entry point without the top layer".into()),
            None if top != 0 || links.iter().any(|l| !l.is_empty()) => return Err("a graph with nodes but no entry point".into()),
            _ => {}
        }
        Ok(Self { links, entry, top, rng })
    }

    /// The `k` nearest slots to `q` for which `keep` holds, nearest first, with their
    /// cosine similarity.
    pub fn search(&self, vectors: &Vectors, q: &Query, k: usize, keep: impl Fn(u32) -> bool) -> Vec<(u32, f32)> {
        let Some(entry) = self.entry else { return Vec::new() };
        let mut eps = vec![Near(Self::dist(vectors, q, entry), entry)];
        for layer in (1..=self.top).rev() {
            eps = self.search_layer(vectors, q, &eps, 1, layer);
        }
        let found = self.search_layer(vectors, q, &eps, EF_SEARCH.max(2 * k), 0);
        found.into_iter().filter(|n| keep(n.1)).take(k).map(|n| (n.1, 1.0 - n.0)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ports::search::{dot, normalize};

    fn stored(flat: &[f32], dim: usize) -> Vectors {
        let mut v = Vectors::new(dim);
        for x in flat.chunks(dim) {
            v.push(Some(x));
        }
        v
    }

    fn random_vectors(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut x = seed;
        let mut out = Vec::with_capacity(n * dim);
        for _ in 0..n {
            let mut v: Vec<f32> = (0..dim)
                .map(|_| {
                    x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    #[allow(clippy::cast_precision_loss)]
                    let f = (x >> 40) as f32 / (1u64 << 24) as f32;
                    f - 0.5
                })
                .collect();
            normalize(&mut v);
            out.extend(v);
        }
        out
    }

    #[test]
    fn recall_at_10_against_exact_is_high() {
        let (n, dim) = (3_000, 32);
        let flat = random_vectors(n, dim, 7);
        let vectors = stored(&flat, dim);
        let mut h = Hnsw::new();
        for s in 0..n {
            h.insert(&vectors, u32::try_from(s).unwrap());
        }
        let queries = random_vectors(50, dim, 99);
        let mut found = 0;
        for q in queries.chunks(dim) {
            let mut exact: Vec<(f32, u32)> =
                (0..n).map(|s| (dot(q, &flat[s * dim..(s + 1) * dim]), u32::try_from(s).unwrap())).collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0));
            let truth: Vec<u32> = exact.iter().take(10).map(|e| e.1).collect();
            let got = h.search(&vectors, &vectors.query(q), 10, |_| true);
            found += got.iter().filter(|g| truth.contains(&g.0)).count();
        }
        let recall = f64::from(u32::try_from(found).unwrap()) / 500.0;
        assert!(recall >= 0.95, "recall@10 {recall}");
    }

    #[test]
    fn removed_slots_are_skipped() {
        let dim = 8;
        let flat = random_vectors(200, dim, 3);
        let vectors = stored(&flat, dim);
        let mut h = Hnsw::new();
        for s in 0..200 {
            h.insert(&vectors, s);
        }
        let q = vectors.query(&flat[0..dim]);
        assert_eq!(h.search(&vectors, &q, 1, |_| true)[0].0, 0);
        assert!(h.search(&vectors, &q, 5, |s| s != 0).iter().all(|(s, _)| *s != 0));
    }
}
