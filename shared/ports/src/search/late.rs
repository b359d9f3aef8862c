//! Late interaction: hybrid search's candidates ordered again by how well each of the
//! question's words is matched by some word of the candidate, in the sentence model's
//! own contextual token vectors (the states its last layer gives each token before they
//! are pooled into the sentence vector) — the `MaxSim` of ColBERT (Khattab and Zaharia
//! 2020), with a model not trained for it.
//!
//! Why: the two legs want opposite things on real and generated conversations. Real
//! questions reuse their evidence's words (keywords lead), generated ones paraphrase
//! it (vectors lead), and no fusion of the two legs' scores held on both kinds and on
//! a second real set (docs/benchmarks.md). Token matching is both: a word matches
//! itself, in context, and its near-synonyms a little. Measured on the `tune` splits it
//! is above the better leg on all three sets once each question word is weighted by
//! how much it tells the candidates apart.
//!
//! Only an embedder that runs the model in this process has token states
//! ([`super::Embedder::token_states`]): a remote one (Bedrock) and the lexical hashing
//! fallback return `None`, and their searches keep the fused order.

use super::SearchHit;

/// A text's contextual token vectors, each of unit length, without the model's
/// `[CLS]` and `[SEP]`; `tokens[i]` is the word piece `vectors[i]` is of, given for a
/// question (whose stop words are left out) and empty for a candidate, whose words late
/// interaction does not read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TokenStates {
    pub tokens: Vec<String>,
    pub vectors: Vec<Vec<f32>>,
}

/// Words of a question that say nothing of what it asks about: left out of its side of
/// the match (every word of a candidate stays). Unlike BM25's list this one drops `no`
/// and `not` too: a negation's vector matches any negation, which ranks nothing.
const QUESTION_STOP_WORDS: &[&str] = &[
    "a", "about", "also", "an", "and", "are", "as", "at", "be", "been", "being", "but", "by", "can", "could", "d", "did", "do",
    "does", "for", "from", "had", "has", "have", "he", "her", "here", "him", "his", "how", "i", "if", "in", "into", "is", "it",
    "its", "just", "ll", "m", "may", "me", "might", "must", "my", "no", "not", "of", "on", "or", "our", "out", "re", "s",
    "shall", "she", "should", "so", "t", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this",
    "those", "to", "too", "up", "ve", "very", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "whose",
    "why", "will", "with", "would", "you", "your",
];

/// How late interaction orders hybrid search's candidates (see [`LATE`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Late {
    /// How many of hybrid search's best candidates are ordered again.
    pub pool: usize,
    /// The match that counts as no relevance at all (scores are `0` to `1` above it).
    pub floor: f64,
    /// `β`: how much a question word's weight in the match follows how much its
    /// matches differ among the candidates ([`word_weights`]); 0 weighs words equally.
    pub word_weighting: f64,
}

/// Late interaction for a semantic embedder run in this process.
///
/// A candidate's match `T` is the weighted mean, over the question's words (not its
/// [`QUESTION_STOP_WORDS`]), of the best cosine between that word's token state and any
/// of the candidate's, each word weighted by how much its best cosines differ among the
/// candidates ([`word_weights`], `β` = 0.75): a word every candidate holds (the name
/// of one of the people talking, said throughout their conversation) tells none of
/// them apart. `score = clamp((T − floor) / (1 − floor), 0, 1)` — an absolute scale,
/// the same for every query, so `min_score` keeps its meaning.
///
/// Chosen on the `tune` splits of REALTALK, FriendsQA and the generated set as the
/// setting whose worst margin over the better leg of the three was largest, then the
/// mean (docs/benchmarks.md, with the held-out figures). Until this round the match
/// was an unweighted mean, blended with the sentence similarity (leaning on it when no
/// candidate's words matched the question: a paraphrase) and the fused score; once
/// words were weighted, the blend's best weights for both were 0 on all three sets,
/// the generated set's paraphrases included.
pub const LATE: Late = Late { pool: 60, floor: 0.25, word_weighting: 0.75 };

/// The question's side of the match: the vectors of its words, or of every token when
/// it has only stop words.
pub fn question_vectors(q: &TokenStates) -> Vec<&[f32]> {
    let words: Vec<&[f32]> = q
        .tokens
        .iter()
        .zip(&q.vectors)
        // A word piece that continues a word (`##s`) is never a stop word.
        .filter(|(t, _)| t.chars().any(char::is_alphanumeric) && !QUESTION_STOP_WORDS.contains(&t.to_lowercase().as_str()))
        .map(|(_, v)| v.as_slice())
        .collect();
    if words.is_empty() { q.vectors.iter().map(Vec::as_slice).collect() } else { words }
}

/// Each word of `question`'s (from [`question_vectors`]) best cosine with a token of
/// `doc`; all 0 when `doc` has no tokens.
pub fn word_matches(question: &[&[f32]], doc: &TokenStates) -> Vec<f64> {
    if doc.vectors.is_empty() {
        return vec![0.0; question.len()];
    }
    question.iter().map(|q| doc.vectors.iter().map(|d| f64::from(super::dot(q, d))).fold(f64::NEG_INFINITY, f64::max)).collect()
}

/// `matches` averaged with `weights` (equal weights when `weights` is empty or sums to
/// nothing); 0 when there are no matches.
fn weighted_match(matches: &[f64], weights: &[f64]) -> f64 {
    let total: f64 = weights.iter().sum();
    if weights.len() == matches.len() && total > 0.0 {
        matches.iter().zip(weights).map(|(m, w)| m * w).sum::<f64>() / total
    } else if matches.is_empty() {
        0.0
    } else {
        #[allow(clippy::cast_precision_loss)]
        let n = matches.len() as f64;
        matches.iter().sum::<f64>() / n
    }
}

/// Each question word's weight among `matches` (a row per candidate, a column per
/// word): `1 − β + β · spread / mean spread`, a word's spread being its best match in
/// the pool less its mean match — so a word every candidate holds about as well (a name
/// said throughout the conversation, a common verb) weighs less than one only some
/// hold. Empty (equal weights) when no word's matches differ or `β` is 0.
pub fn word_weights(matches: &[Vec<f64>], beta: f64) -> Vec<f64> {
    let Some(words) = matches.first().map(Vec::len) else { return Vec::new() };
    if beta <= 0.0 || words == 0 {
        return Vec::new();
    }
    #[allow(clippy::cast_precision_loss)]
    let n = matches.len() as f64;
    let spreads: Vec<f64> = (0..words)
        .map(|i| {
            let column = matches.iter().map(|m| m.get(i).copied().unwrap_or(0.0));
            let best = column.clone().fold(f64::NEG_INFINITY, f64::max);
            best - column.sum::<f64>() / n
        })
        .collect();
    #[allow(clippy::cast_precision_loss)]
    let mean = spreads.iter().sum::<f64>() / words as f64;
    if mean <= 0.0 {
        return Vec::new();
    }
    spreads.iter().map(|s| 1.0 - beta + beta * s / mean).collect()
}

impl Late {
    /// Orders `hits` (hybrid search's, best first) by late interaction, with `docs[i]`
    /// the token states of `hits[i].text` and `question` those of the query. Exact
    /// identifiers stay first; each hit's `score` becomes its late-interaction score.
    /// Hits without token states (`docs` shorter than `hits`) keep their place after the
    /// others, their scores capped so the order stays monotone.
    pub fn rerank(&self, hits: Vec<SearchHit>, question: &TokenStates, docs: &[TokenStates]) -> Vec<SearchHit> {
        let q = question_vectors(question);
        let n = docs.len().min(hits.len());
        let words: Vec<Vec<f64>> = docs[..n].iter().map(|d| word_matches(&q, d)).collect();
        let weights = word_weights(&words, self.word_weighting);
        let matches: Vec<f64> = words.iter().map(|w| weighted_match(w, &weights)).collect();
        let mut scored: Vec<(usize, SearchHit)> = Vec::with_capacity(hits.len());
        let mut rest = Vec::new();
        for (i, mut h) in hits.into_iter().enumerate() {
            if i < n {
                h.score = ((matches[i] - self.floor) / (1.0 - self.floor)).clamp(0.0, 1.0);
                scored.push((i, h));
            } else {
                rest.push(h);
            }
        }
        // Ties (two scores of 0) keep the fused order.
        scored.sort_by(|(i, a), (j, b)| b.exact.cmp(&a.exact).then_with(|| b.score.total_cmp(&a.score)).then_with(|| i.cmp(j)));
        let mut out: Vec<SearchHit> = scored.into_iter().map(|(_, h)| h).collect();
        let last = out.last().map_or(1.0, |h| h.score);
        for mut h in rest {
            h.score = h.score.min(last);
            out.push(h);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::DocKind;
    use domain::Id;
    use domain::memory::MemoryScope;

    fn states(pairs: &[(&str, [f32; 2])]) -> TokenStates {
        TokenStates {
            tokens: pairs.iter().map(|(t, _)| (*t).to_owned()).collect(),
            vectors: pairs.iter().map(|(_, v)| v.to_vec()).collect(),
        }
    }

    fn hit(id: &str, similarity: f32, exact: bool) -> SearchHit {
        SearchHit {
            scope: MemoryScope::Org,
            id: Id::new(id).unwrap(),
            doc: Id::new(id).unwrap(),
            kind: DocKind::Turn,
            title: String::new(),
            text: String::new(),
            score: 0.5,
            similarity: Some(similarity),
            keyword_rank: None,
            vector_rank: Some(1),
            exact,
            occurred_at: None,
        }
    }

    #[test]
    fn question_words_leave_out_stop_words_and_punctuation_unless_nothing_is_left() {
        let q =
            states(&[("what", [1.0, 0.0]), ("did", [1.0, 0.0]), ("kate", [0.0, 1.0]), ("##s", [0.6, 0.8]), ("?", [1.0, 0.0])]);
        assert_eq!(question_vectors(&q), vec![&[0.0f32, 1.0][..], &[0.6f32, 0.8][..]]);
        let only = states(&[("what", [1.0, 0.0]), ("?", [0.0, 1.0])]);
        assert_eq!(question_vectors(&only).len(), 2);
    }

    #[test]
    fn the_match_is_each_question_words_best_cosine_averaged() {
        let doc = states(&[("a", [1.0, 0.0]), ("b", [0.6, 0.8])]);
        let q: Vec<&[f32]> = vec![&[0.0, 1.0], &[1.0, 0.0]];
        // Best for [0, 1] is 0.8 (b), for [1, 0] is 1.0 (a).
        let best = word_matches(&q, &doc);
        assert!((best[0] - 0.8).abs() < 1e-6 && (best[1] - 1.0).abs() < 1e-6, "{best:?}");
        assert!((weighted_match(&best, &[]) - 0.9).abs() < 1e-6);
        assert_eq!(word_matches(&q, &TokenStates::default()), [0.0, 0.0]);
        assert!(weighted_match(&word_matches(&[], &doc), &[]).abs() < f64::EPSILON);
    }

    /// A word every candidate matches alike weighs nothing; the word that tells them
    /// apart carries the match.
    #[test]
    fn a_word_the_candidates_all_match_alike_weighs_less() {
        // Columns: `kate` (said throughout), `pottery` (held by the first only).
        let pool = vec![vec![0.9, 1.0], vec![0.9, 0.2], vec![0.9, 0.2]];
        let w = word_weights(&pool, 1.0);
        assert!(w[0].abs() < 1e-12 && (w[1] - 2.0).abs() < 1e-12, "{w:?}");
        let half = word_weights(&pool, 0.5);
        assert!((half[0] - 0.5).abs() < 1e-12 && (half[1] - 1.5).abs() < 1e-12, "{half:?}");
        assert!((weighted_match(&pool[0], &w) - 1.0).abs() < 1e-12);
        assert!((weighted_match(&pool[1], &w) - 0.2).abs() < 1e-12);
        // Equal weights: the mean. None when β is 0, when nothing differs, or no words.
        assert!(word_weights(&pool, 0.0).is_empty());
        assert!(word_weights(&[vec![0.4, 0.7]], 1.0).is_empty());
        assert!(word_weights(&[], 1.0).is_empty() && word_weights(&[vec![]], 1.0).is_empty());
        assert!((weighted_match(&[0.4, 0.8], &[]) - 0.6).abs() < 1e-12);
        assert!(weighted_match(&[], &[]).abs() < f64::EPSILON);
    }

    #[test]
    fn a_candidate_holding_the_questions_words_goes_first_and_scores_stay_monotone() {
        let question = states(&[("kate", [0.0, 1.0])]);
        // The fused order put `near` (a higher similarity) first; `words` holds the word.
        let hits = vec![hit("near", 0.55, false), hit("words", 0.45, false), hit("far", 0.05, false)];
        let docs = vec![states(&[("x", [0.8, 0.6])]), states(&[("kate", [0.0, 1.0])]), states(&[("y", [1.0, 0.0])])];
        let out = LATE.rerank(hits, &question, &docs);
        let ids: Vec<&str> = out.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["words", "near", "far"]);
        assert!(out.windows(2).all(|w| w[0].score >= w[1].score));
        assert!(out.iter().all(|h| (0.0..=1.0).contains(&h.score)));
        // Unrelated (match 0, similarity 0.05, under the floor): scores 0.
        assert!(out[2].score.abs() < f64::EPSILON, "{}", out[2].score);
    }

    #[test]
    fn exact_identifiers_stay_first_and_hits_past_the_states_keep_their_place() {
        let question = states(&[("kate", [0.0, 1.0])]);
        let hits = vec![hit("words", 0.5, false), hit("ident", 0.1, true), hit("tail", 0.9, false)];
        let docs = vec![states(&[("kate", [0.0, 1.0])]), states(&[("y", [1.0, 0.0])])];
        let out = LATE.rerank(hits, &question, &docs);
        let ids: Vec<&str> = out.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["ident", "words", "tail"]);
        assert!(out[2].score <= out[1].score);
    }
}
