//! A partition's vectors in memory, quantized to int8: each unit vector is kept as `dim`
//! signed bytes and one scale (its largest component over 127), a quarter of its f32
//! size — 1 000 000 vectors of 384 numbers are 370 MiB instead of 1.5 GiB. A similarity
//! is the integer dot product of two quantized vectors times their scales; against the
//! f32 value it differs by about 0.001 for 384-dimension unit vectors, at most a few
//! thousandths (tested below).
//! The table keeps every vector in f32, so nothing is lost for a re-embed or an export.

/// Slot-indexed quantized vectors; a slot without a vector is zeros with scale 0.
#[derive(Clone, Default)]
pub struct Vectors {
    dim: usize,
    data: Vec<i8>,
    scale: Vec<f32>,
}

/// A quantized vector to compare with the stored ones.
pub struct Query {
    data: Vec<i8>,
    scale: f32,
}

fn quantize(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return (vec![0; v.len()], 0.0);
    }
    let inv = 127.0 / max;
    // Rounded half away from zero by truncating `y ± 0.5` (a cast the compiler keeps in
    // SIMD registers; `f32::round` is a library call per number and was a third of a
    // partition's load). |y| ≤ 127 by construction; the clamp only guards the last ulp.
    #[allow(clippy::cast_possible_truncation)]
    let data = v
        .iter()
        .map(|x| {
            let y = x * inv;
            ((y + 0.5f32.copysign(y)) as i32).clamp(-127, 127) as i8
        })
        .collect();
    (data, max / 127.0)
}

/// The integer dot product with the widest SIMD the CPU offers (picked at run time);
/// the portable loop if none applies.
fn dot_i8(a: &[i8], b: &[i8]) -> f32 {
    use simsimd::SpatialSimilarity as _;
    #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
    i8::dot(a, b).map_or_else(|| a.iter().zip(b).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum::<i32>() as f32, |d| d as f32)
}

impl Vectors {
    pub fn new(dim: usize) -> Self {
        Self { dim, data: Vec::new(), scale: Vec::new() }
    }

    /// From stored parts (a snapshot); `None` when their sizes disagree.
    pub fn from_parts(dim: usize, data: Vec<i8>, scale: Vec<f32>) -> Option<Self> {
        (dim > 0 && data.len() == scale.len() * dim).then_some(Self { dim, data, scale })
    }

    pub fn parts(&self) -> (&[i8], &[f32]) {
        (&self.data, &self.scale)
    }

    /// How many slots it holds.
    pub fn len(&self) -> usize {
        self.scale.len()
    }

    /// Appends the next slot's vector (zeros for a slot without one).
    pub fn push(&mut self, v: Option<&[f32]>) {
        match v {
            Some(v) if v.len() == self.dim => {
                let (q, s) = quantize(v);
                self.data.extend_from_slice(&q);
                self.scale.push(s);
            }
            _ => {
                self.data.resize(self.data.len() + self.dim, 0);
                self.scale.push(0.0);
            }
        }
    }

    fn slice(&self, slot: u32) -> &[i8] {
        let s = slot as usize * self.dim;
        &self.data[s..s + self.dim]
    }

    /// `v` (of this index's dimension) quantized for comparisons.
    pub fn query(&self, v: &[f32]) -> Query {
        let (data, scale) = quantize(v);
        Query { data, scale }
    }

    /// A stored slot's vector as a query.
    pub fn query_of(&self, slot: u32) -> Query {
        Query { data: self.slice(slot).to_vec(), scale: self.scale[slot as usize] }
    }

    /// Cosine similarity of `q` and `slot`'s vector (both unit vectors).
    pub fn sim(&self, q: &Query, slot: u32) -> f32 {
        dot_i8(&q.data, self.slice(slot)) * q.scale * self.scale[slot as usize]
    }

    /// Cosine similarity of two stored slots.
    pub fn sim_slots(&self, a: u32, b: u32) -> f32 {
        dot_i8(self.slice(a), self.slice(b)) * self.scale[a as usize] * self.scale[b as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ports::search::dot;

    fn random(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
        (0..n as u64).map(|i| super::super::tests::unit(seed * 1_000_003 + i, dim)).collect()
    }

    #[test]
    fn quantized_similarity_stays_within_a_few_thousandths_of_the_f32_one() {
        let vs = random(200, 384, 11);
        let mut stored = Vectors::new(384);
        for v in &vs {
            stored.push(Some(v));
        }
        let mut worst = 0.0f32;
        for (i, a) in vs.iter().enumerate().take(20) {
            let q = stored.query(a);
            for (j, b) in vs.iter().enumerate() {
                let j = u32::try_from(j).unwrap();
                worst = worst.max((stored.sim(&q, j) - dot(a, b)).abs());
                worst = worst.max((stored.sim_slots(u32::try_from(i).unwrap(), j) - dot(a, b)).abs());
            }
        }
        assert!(worst < 5e-3, "worst error {worst}");
        assert!((stored.sim(&stored.query(&vs[3]), 3) - 1.0).abs() < 5e-3);
    }

    #[test]
    fn a_slot_without_a_vector_is_similar_to_nothing() {
        let vs = random(1, 8, 5);
        let mut stored = Vectors::new(8);
        stored.push(None);
        stored.push(Some(&[0.0; 8]));
        stored.push(Some(&[1.0; 3])); // wrong dimension: kept as no vector
        stored.push(Some(&vs[0]));
        assert_eq!(stored.len(), 4);
        let q = stored.query(&vs[0]);
        for slot in 0..3 {
            assert!(stored.sim(&q, slot).abs() < f32::EPSILON);
        }
        assert!(stored.sim(&q, 3) > 0.99);
        assert!(Vectors::from_parts(8, vec![0; 15], vec![0.0; 2]).is_none());
    }
}
