//! Conversation context: a turn said next to another turn the question matches is
//! more likely to be the answer. In a chat the question's words are often in one
//! message and the answer in the reply ("Where did you go?" — "Lisbon, with Ana"), so
//! a turn's score is raised by the score of its nearest neighbours among the
//! candidates.
//!
//! Neighbours are candidates of kind [`DocKind::Turn`] in the same scope (a session)
//! whose times ([`SearchHit::occurred_at`]) are the nearest before and after the turn's,
//! within [`Context::window_ms`] of it — the index keeps no sequence numbers, and a
//! turn's time is when it was written, so the nearest in time among the candidates is
//! the nearest in the conversation among them. Memories, documents and records are
//! left as they are.
//!
//! Measured on the `tune` splits of the two real sets first, on the legs' lists written
//! out by the recall bench, then in the bench itself (docs/benchmarks.md, "Conversation
//! context").

use super::{DocKind, SearchHit};

/// How a turn's neighbours raise its score (see [`CONTEXT`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Context {
    /// How far apart in time two turns may be and still be neighbours.
    pub window_ms: i64,
    /// `α`: a turn's score `s` becomes `s + α · n · (1 − s)`, `n` the better score of its
    /// two neighbours. It stays within 0 to 1, never falls, and grows with both. For
    /// hits in the fused order (an embedder without token states).
    pub weight: f64,
    /// `α` for hits late interaction ordered ([`super::Late::rerank`]).
    pub weight_after_late: f64,
}

/// An hour: in REALTALK's conversations half the replies come within 29 seconds and
/// nine in ten within 15 minutes, while its sessions are days apart. The weights were
/// chosen for each order on the real sets' `tune` splits (docs/benchmarks.md): 0.5 on
/// the fused order; none after late interaction, where every weight lowered REALTALK's
/// R@5 once question words were weighted.
pub const CONTEXT: Context = Context { window_ms: 3_600_000, weight: 0.5, weight_after_late: 0.0 };

impl Context {
    /// `hits` (best first, in the fused order) with each turn's score raised by its
    /// neighbours' with [`Context::weight`] and ordered again: exact identifiers first,
    /// then by score, ties in the order given.
    pub fn apply(&self, hits: Vec<SearchHit>) -> Vec<SearchHit> {
        self.apply_weight(hits, self.weight)
    }

    /// [`Context::apply`] to hits late interaction ordered, with
    /// [`Context::weight_after_late`].
    pub fn apply_after_late(&self, hits: Vec<SearchHit>) -> Vec<SearchHit> {
        self.apply_weight(hits, self.weight_after_late)
    }

    fn apply_weight(&self, hits: Vec<SearchHit>, weight: f64) -> Vec<SearchHit> {
        if weight <= 0.0 || hits.len() < 2 {
            return hits;
        }
        // Turns by (scope, time), so each one's neighbours are beside it.
        let mut turns: Vec<usize> =
            (0..hits.len()).filter(|&i| hits[i].kind == DocKind::Turn && hits[i].occurred_at.is_some()).collect();
        let scopes: Vec<String> = hits.iter().map(|h| h.scope.storage_key()).collect();
        turns.sort_by(|&a, &b| (&scopes[a], hits[a].occurred_at, a).cmp(&(&scopes[b], hits[b].occurred_at, b)));
        let near = |a: usize, b: usize| {
            hits[a].scope == hits[b].scope
                && match (hits[a].occurred_at, hits[b].occurred_at) {
                    (Some(x), Some(y)) => (x.0 - y.0).abs() <= self.window_ms,
                    _ => false,
                }
        };
        let mut raised: Vec<f64> = hits.iter().map(|h| h.score).collect();
        for (k, &i) in turns.iter().enumerate() {
            let before = k.checked_sub(1).map(|j| turns[j]).filter(|&j| near(i, j));
            let after = turns.get(k + 1).copied().filter(|&j| near(i, j));
            let n = before.into_iter().chain(after).map(|j| hits[j].score.clamp(0.0, 1.0)).fold(0.0, f64::max);
            let s = hits[i].score.clamp(0.0, 1.0);
            raised[i] = s + weight * n * (1.0 - s);
        }
        let mut order: Vec<(usize, SearchHit)> = hits
            .into_iter()
            .enumerate()
            .map(|(i, mut h)| {
                h.score = raised[i];
                (i, h)
            })
            .collect();
        order.sort_by(|(i, a), (j, b)| b.exact.cmp(&a.exact).then_with(|| b.score.total_cmp(&a.score)).then_with(|| i.cmp(j)));
        order.into_iter().map(|(_, h)| h).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::memory::MemoryScope;
    use domain::{Id, Timestamp};

    fn hit(id: &str, session: &str, kind: DocKind, at: Option<i64>, score: f64) -> SearchHit {
        SearchHit {
            scope: MemoryScope::Session(session.into()),
            id: Id::new(id).unwrap(),
            doc: Id::new(id).unwrap(),
            kind,
            title: String::new(),
            text: String::new(),
            score,
            similarity: None,
            keyword_rank: None,
            vector_rank: None,
            exact: false,
            occurred_at: at.map(Timestamp),
        }
    }

    fn ids(hits: &[SearchHit]) -> Vec<&str> {
        hits.iter().map(|h| h.doc.as_str()).collect()
    }

    #[test]
    fn a_reply_to_a_matching_turn_rises_above_an_isolated_turn() {
        let m = 60_000;
        let hits = vec![
            hit("question", "s", DocKind::Turn, Some(0), 0.9),
            hit("isolated", "s", DocKind::Turn, Some(500 * m), 0.5),
            hit("reply", "s", DocKind::Turn, Some(m), 0.45),
        ];
        let out = CONTEXT.apply(hits);
        assert_eq!(ids(&out), ["question", "reply", "isolated"]);
        // 0.45 + α · 0.9 · 0.55, and the question is raised by its reply in turn.
        let a = CONTEXT.weight;
        assert!((out[1].score - (0.45 + a * 0.9 * 0.55)).abs() < 1e-9);
        assert!((out[0].score - (0.9 + a * 0.45 * 0.1)).abs() < 1e-9);
        assert!((out[2].score - 0.5).abs() < 1e-9, "no neighbour within the hour: unchanged");
    }

    #[test]
    fn only_the_nearest_turn_on_each_side_of_the_same_session_counts() {
        let hits = vec![
            hit("far", "s", DocKind::Turn, Some(0), 1.0),
            hit("near", "s", DocKind::Turn, Some(10), 0.1),
            hit("me", "s", DocKind::Turn, Some(20), 0.2),
            hit("other-session", "t", DocKind::Turn, Some(21), 1.0),
            hit("a-memory", "s", DocKind::Memory, Some(19), 1.0),
        ];
        let out = CONTEXT.apply(hits);
        let me = out.iter().find(|h| h.doc.as_str() == "me").unwrap();
        // Raised by "near" (0.1), not by "far" behind it, the other session or the memory.
        assert!((me.score - (0.2 + CONTEXT.weight * 0.1 * 0.8)).abs() < 1e-9);
        let memory = out.iter().find(|h| h.doc.as_str() == "a-memory").unwrap();
        assert!((memory.score - 1.0).abs() < 1e-9);
    }

    #[test]
    fn scores_stay_within_bounds_exact_hits_stay_first_and_ties_keep_their_order() {
        let mut exact = hit("exact", "s", DocKind::Turn, Some(0), 0.0);
        exact.exact = true;
        let hits = vec![
            hit("a", "s", DocKind::Turn, Some(1), 1.0),
            hit("b", "s", DocKind::Turn, Some(2), 1.0),
            exact,
            hit("c", "x", DocKind::Turn, None, 0.3),
            hit("d", "y", DocKind::Turn, None, 0.3),
        ];
        let out = CONTEXT.apply(hits);
        assert_eq!(ids(&out), ["exact", "a", "b", "c", "d"]);
        assert!(out.iter().all(|h| (0.0..=1.0).contains(&h.score)));
        let off = Context { weight: 0.0, ..CONTEXT };
        let hits = vec![hit("a", "s", DocKind::Turn, Some(1), 0.2), hit("b", "s", DocKind::Turn, Some(2), 0.9)];
        assert_eq!(ids(&off.apply(hits)), ["a", "b"], "weight 0 leaves the order as given");
        // As served, hits late interaction ordered are left as they are; a weight
        // after it raises them as on the fused order.
        let pair = || vec![hit("a", "s", DocKind::Turn, Some(1), 0.2), hit("b", "s", DocKind::Turn, Some(2), 0.1)];
        let late = CONTEXT.apply_after_late(pair());
        assert_eq!((ids(&late), late[1].score), (vec!["a", "b"], 0.1));
        let raised = Context { weight_after_late: 0.5, ..CONTEXT }.apply_after_late(pair());
        assert!((raised[1].score - (0.1 + 0.5 * 0.2 * 0.9)).abs() < 1e-9, "{raised:?}");
    }
}
