//! Okapi BM25 (k1 = 1.2, b = 0.75) over one partition's chunks: an inverted index of
//! token → postings `(slot, term frequency)` kept sorted by slot.

use std::collections::HashMap;

use foldhash::fast::RandomState;

use std::io::{Read, Write};

use ports::search::bm25;

use super::codec::{Bad, Reader, Writer};

#[derive(Default)]
pub struct Bm25 {
    /// Hashed with foldhash: a load looks up tens of millions of short words, where
    /// the standard SipHash cost more than the rest of filing them.
    postings: HashMap<String, Vec<(u32, u32)>, RandomState>,
    lengths: Vec<u32>,
    total: u64,
    docs: usize,
}

impl Bm25 {
    /// Indexes `slot` with its tokens (the slot must not be indexed already).
    pub fn add(&mut self, slot: u32, tokens: &[String]) {
        let mut tf: HashMap<&str, u32, RandomState> = HashMap::with_capacity_and_hasher(tokens.len(), RandomState::default());
        for t in tokens {
            *tf.entry(t.as_str()).or_default() += 1;
        }
        for (t, n) in tf {
            // The term's own `String` only for a term new to the partition (a load files
            // each of ~20 terms of a million chunks here).
            let list = match self.postings.get_mut(t) {
                Some(list) => list,
                None => self.postings.entry(t.to_owned()).or_default(),
            };
            // Slots mostly arrive in order: appended, else inserted in place.
            if list.last().is_none_or(|p| p.0 < slot) {
                list.push((slot, n));
            } else {
                let at = list.partition_point(|p| p.0 < slot);
                list.insert(at, (slot, n));
            }
        }
        let s = slot as usize;
        if self.lengths.len() <= s {
            self.lengths.resize(s + 1, 0);
        }
        let len = u32::try_from(tokens.len()).unwrap_or(u32::MAX);
        self.lengths[s] = len;
        self.total += u64::from(len);
        self.docs += 1;
    }

    /// Removes `slot`, indexed with `tokens`.
    pub fn remove(&mut self, slot: u32, tokens: &[String]) {
        for t in tokens {
            if let Some(list) = self.postings.get_mut(t.as_str()) {
                if let Ok(at) = list.binary_search_by_key(&slot, |p| p.0) {
                    list.remove(at);
                }
                if list.is_empty() {
                    self.postings.remove(t.as_str());
                }
            }
        }
        if let Some(len) = self.lengths.get_mut(slot as usize) {
            self.total -= u64::from(*len);
            *len = 0;
            self.docs = self.docs.saturating_sub(1);
        }
    }

    /// Writes the index for [`Self::read`].
    pub(super) fn save<W: Write>(&self, w: &mut Writer<W>) -> std::io::Result<()> {
        w.len(self.postings.len())?;
        for (term, list) in &self.postings {
            w.str(term)?;
            let flat: Vec<u32> = list.iter().flat_map(|&(slot, tf)| [slot, tf]).collect();
            w.u32s(&flat)?;
        }
        w.u32s(&self.lengths)?;
        w.u64(self.total)?;
        w.u64(self.docs as u64)
    }

    /// An index written by [`Self::save`] over a partition of `slots` slots, checked so
    /// that no posting names a slot outside it.
    pub(super) fn read<R: Read>(r: &mut Reader<R>, slots: usize) -> Result<Self, Bad> {
        let terms = r.len()?;
        let mut postings = HashMap::with_capacity_and_hasher(terms.min(1 << 20), RandomState::default());
        let mut flat = Vec::new();
        for _ in 0..terms {
            let term = r.str()?;
            flat.clear();
            flat.extend(r.u32s()?);
            if flat.len() % 2 != 0 {
                return Err("a posting list cut in half".into());
            }
            let list: Vec<(u32, u32)> = flat.chunks_exact(2).map(|p| (p[0], p[1])).collect();
            if list.windows(2).any(|w| w[0].0 >= w[1].0) {
                return Err("a posting list out of order".into());
            }
            postings.insert(term, list);
        }
        let lengths = r.u32s()?;
        let total = r.u64()?;
        let docs = usize::try_from(r.u64()?).map_err(|_| "a document count beyond this machine's addresses")?;
        if lengths.len() > slots || docs > lengths.len() {
            return Err("keyword statistics larger than the partition".into());
        }
        if postings.values().flatten().any(|&(slot, _)| slot as usize >= lengths.len()) {
            return Err("a posting names a slot outside the partition".into());
        }
        if lengths.iter().map(|&l| u64::from(l)).sum::<u64>() != total {
            return Err("document lengths that do not add up".into());
        }
        Ok(Self { postings, lengths, total, docs })
    }

    /// The `n` best slots for the query tokens, best first, with their scores; and the
    /// sum of the idf of the terms used (the score of a document holding each of them
    /// once at average length: what fusion scales scores by), a term no document holds
    /// counting as the rarest possible — so a document that explains a part of the query
    /// is not taken for one that explains all of it.
    pub fn search(&self, query: &[String], n: usize) -> (Vec<(u32, f64)>, f64) {
        if self.docs == 0 {
            return (Vec::new(), 0.0);
        }
        #[allow(clippy::cast_precision_loss)]
        let (docs, avg) = (self.docs as f64, self.total as f64 / self.docs as f64);
        let mut terms: Vec<&str> = query.iter().map(String::as_str).collect();
        terms.sort_unstable();
        terms.dedup();
        // Terms in more than half the documents (the, for, accounts…) weigh little —
        // idf < ln 2 — and cost the most (they touch most slots): when the query has a
        // rarer term they are skipped, and the rarer terms decide the ranking.
        let df = |t: &str| self.postings.get(t).map_or(0, Vec::len);
        let common = |t: &str| bm25::common(df(t), self.docs);
        if terms.iter().any(|t| df(t) > 0 && !common(t)) {
            terms.retain(|t| !common(t));
        }
        // Dense accumulators (a map costs ~10x on common terms that touch most slots).
        let mut scores = vec![0.0f64; self.lengths.len()];
        let mut touched: Vec<u32> = Vec::new();
        let mut idf_sum = 0.0;
        for t in terms {
            let Some(list) = self.postings.get(t) else {
                idf_sum += bm25::idf(docs, 0.0);
                continue;
            };
            #[allow(clippy::cast_precision_loss)]
            let idf = bm25::idf(docs, list.len() as f64);
            idf_sum += idf;
            for &(slot, tf) in list {
                let len = f64::from(self.lengths[slot as usize]);
                let s = &mut scores[slot as usize];
                if *s == 0.0 {
                    touched.push(slot);
                }
                *s += bm25::term(idf, f64::from(tf), len, avg);
            }
        }
        let mut out: Vec<(u32, f64)> = touched.into_iter().map(|slot| (slot, scores[slot as usize])).collect();
        let by_score = |a: &(u32, f64), b: &(u32, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if out.len() > n && n > 0 {
            out.select_nth_unstable_by(n - 1, by_score);
            out.truncate(n);
        }
        out.sort_by(by_score);
        out.truncate(n);
        (out, idf_sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ports::search::tokens;

    fn search(b: &Bm25, q: &str, n: usize) -> Vec<(u32, f64)> {
        b.search(&tokens(q), n).0
    }

    #[test]
    fn rarer_terms_weigh_more_and_removal_forgets() {
        let mut b = Bm25::default();
        let docs = ["the refund policy is thirty days", "the office is closed", "the team ships on fridays"];
        for (i, d) in docs.iter().enumerate() {
            b.add(u32::try_from(i).unwrap(), &tokens(d));
        }
        let hits = search(&b, "the", 3);
        assert_eq!(hits.len(), 3, "a query of common terms alone still matches");
        let hits = search(&b, "refund the", 3);
        assert_eq!(hits[0].0, 0);
        // "the" is in every document: with a rarer term beside it, it is skipped, and the
        // idf sum is the rarer term's alone.
        let (hits, idf) = b.search(&tokens("refund the"), 3);
        assert_eq!(hits.len(), 1);
        assert!((idf - (1.0f64 + 2.5 / 1.5).ln()).abs() < 1e-12, "{idf}");
        // A term no document holds still counts in the sum, as the rarest possible.
        let (_, with_absent) = b.search(&tokens("refund zebra"), 3);
        assert!((with_absent - idf - 8.0f64.ln()).abs() < 1e-12, "{with_absent}");
        b.remove(0, &tokens(docs[0]));
        assert!(search(&b, "refund", 3).is_empty());
        assert_eq!(search(&b, "fridays", 3)[0].0, 2);
    }
}
