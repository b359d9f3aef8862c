//! The search index and the embedder (SPEC §5.4): hybrid search over memory and the
//! knowledge base — BM25 keyword results and vector (cosine) results fused by a convex
//! combination of calibrated scores weighted by each leg's confidence in the query,
//! exact identifiers first.
//!
//! Isolation (wall 6): a [`SearchQuery`] names the tenant and the exact scopes the caller
//! may read; adapters keep documents in partitions per `(tenant, scope)` (or filter on
//! both before the index is traversed) and never look outside them. `global` is the one
//! scope shared by every tenant: its documents live in one tenant-less partition.
//!
//! The analysis ([`index_terms`], [`query_terms`]) and the fusion rules ([`fuse`]) live
//! here, once, so both adapters rank alike.
//!
//! Modules: `context` (conversation context, [`CONTEXT`]: a turn's score raised by its
//! neighbours' among the candidates), `dates` (the days a text names or a question asks
//! about), `hashing` (the lexical fallback embedder and the vector arithmetic) and
//! `late` (late interaction, [`LATE`]: the services order the fused candidates again by
//! the model's token states where the embedder has them).

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use domain::memory::MemoryScope;
use domain::{Error, Id, Result, TenantId, Timestamp};
use serde::{Deserialize, Serialize};

mod context;
mod dates;
mod hashing;
mod late;
pub use context::{CONTEXT, Context};
pub use dates::{day_terms, query_dates, text_days};
pub use hashing::{HashingEmbedder, dot, normalize};
pub use late::{LATE, Late, TokenStates, question_vectors, word_matches};

/// Hybrid fusion for a semantic embedder (all-MiniLM-L6-v2 and the like).
///
/// `score = w · coverage² + (1 − w) · closeness`, where `coverage` is the keyword score
/// over the most a document can score for the query (the sum of its terms' idf, a term
/// no document holds counting as the rarest: 1 when every query term is found once in a
/// document of average length), and `closeness` is the cosine similarity calibrated to
/// `[0, 1]` between [`Fusion::sim_floor`] and [`Fusion::sim_ceiling`] — an absolute
/// scale, so a hit found only by vectors scores what its similarity is worth, and
/// scores of one embedder compare across queries. The keyword weight `w` is per query,
/// from each leg's confidence: `w = b·K / (b·K + V)`, `K` the best coverage of the
/// keyword list and `V` the best closeness of the vector list, each to its power
/// ([`Fusion::keyword_confidence_power`], [`Fusion::vector_confidence_power`]). A question
/// that shares its words with what it asks about leans on keywords; a paraphrase, which
/// no document covers, leans on vectors. Every score is within `[0, 1]`.
///
/// Chosen on the `tune` splits of a real conversation set (REALTALK, human messaging-app
/// conversations) and of the generated set (`tests/corpus/conversations.py`), as the
/// parameters under which hybrid is furthest above the better of its two legs on both;
/// reported on the `heldout` splits it never saw: docs/benchmarks.md. Any fixed weight
/// loses to one leg on one of the two sets: real questions reuse their evidence's words
/// (keywords 0.51 R@5 on `tune` against vectors 0.41), generated ones paraphrase it
/// (0.68 against 0.83).
pub const SEMANTIC: Fusion = Fusion {
    keyword_bias: 3.0,
    coverage_power: 2,
    keyword_confidence_power: 0.5,
    vector_confidence_power: 0.5,
    sim_floor: 0.2,
    sim_ceiling: 0.7,
};
/// Hybrid fusion when the embedder is lexical (the hashing fallback): its vectors only
/// see spellings, which BM25 already scores better, so keywords lead whenever they match
/// and vectors mostly break ties.
pub const LEXICAL: Fusion = Fusion {
    keyword_bias: 2.0,
    coverage_power: 1,
    keyword_confidence_power: 0.5,
    vector_confidence_power: 2.0,
    sim_floor: 0.3,
    sim_ceiling: 0.8,
};

/// How [`fuse`] weighs the two legs (see [`SEMANTIC`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fusion {
    /// `b`: how much a keyword leg's confidence counts against the vector leg's.
    pub keyword_bias: f64,
    /// The power coverage is raised to: 2 makes a partial match (a name and one common
    /// word) weigh little and a full one a lot.
    pub coverage_power: i32,
    /// The powers the keyword leg's best coverage and the vector leg's best closeness are
    /// raised to as their confidence.
    pub keyword_confidence_power: f64,
    pub vector_confidence_power: f64,
    /// The similarity that counts as no closeness at all, and the one that counts as full.
    pub sim_floor: f64,
    pub sim_ceiling: f64,
}

impl Fusion {
    /// The fusion for a query embedded by `embedder` ([`LEXICAL`] when its name says it
    /// is lexical, else [`SEMANTIC`]).
    pub fn for_embedder(embedder: &str) -> Self {
        if is_lexical(embedder) { LEXICAL } else { SEMANTIC }
    }

    /// A cosine similarity on the `[0, 1]` closeness scale.
    pub fn closeness(&self, similarity: f64) -> f64 {
        ((similarity - self.sim_floor) / (self.sim_ceiling - self.sim_floor)).clamp(0.0, 1.0)
    }

    /// The keyword leg's weight for a query whose keyword list's best coverage is
    /// `coverage` and vector list's best similarity is `similarity`.
    pub fn keyword_weight(&self, coverage: f64, similarity: Option<f64>) -> f64 {
        let k = self.keyword_bias * coverage.clamp(0.0, 1.0).powf(self.keyword_confidence_power);
        let v = similarity.map_or(0.0, |s| self.closeness(s).powf(self.vector_confidence_power));
        if k + v > 0.0 { k / (k + v) } else { 0.5 }
    }
}

/// The default of `memory.search`'s `min_score`: hits scoring less are left out. It
/// drops hits that only a faint similarity found (under 0.225 with all-MiniLM-L6-v2
/// and no keyword match) and cost no recall on any split (docs/benchmarks.md; 0.1 cost
/// none on the `tune` splits but 0.011 R@5 on REALTALK's held-out one).
pub const DEFAULT_MIN_SCORE: f64 = 0.05;
/// Longest query accepted, in characters (the tools' schemas say the same: they are
/// generated from this constant).
pub const MAX_QUERY_CHARS: usize = 512;
/// Most hits one query returns.
pub const MAX_HITS: usize = 100;

/// What an indexed document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    /// A memory entry (org, personal, team, project…).
    Memory,
    /// A chunk of a knowledge-base document.
    Kb,
    /// A conversation turn (in its session's scope).
    Turn,
    /// An engineering record (in its project's scope).
    Engineering,
}

impl DocKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Kb => "kb",
            Self::Turn => "turn",
            Self::Engineering => "engineering",
        }
    }

    /// # Errors
    /// `INVALID_REQUEST` for anything but `memory`, `kb`, `turn` or `engineering`.
    pub fn parse(raw: &str) -> Result<Self> {
        match raw {
            "memory" => Ok(Self::Memory),
            "kb" => Ok(Self::Kb),
            "turn" => Ok(Self::Turn),
            "engineering" => Ok(Self::Engineering),
            _ => Err(Error::invalid_field("kind", "expected memory, kb, turn or engineering")),
        }
    }
}

/// One indexed chunk. `id` is unique within `(tenant, scope)`; `doc` is the record it
/// was cut from (a memory entry or a KB document), so hits can be folded per record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchDoc {
    pub tenant: TenantId,
    pub scope: MemoryScope,
    pub id: Id,
    pub doc: Id,
    pub kind: DocKind,
    pub title: String,
    pub text: String,
    /// Unit-length embedding of `title` + `text` by [`SearchDoc::embedder`].
    pub vector: Vec<f32>,
    /// The embedder's name: vectors of different embedders are never compared.
    pub embedder: String,
    pub updated_at: Timestamp,
    /// When what it records happened, when that is not `updated_at` (a turn's time, a
    /// memory's event time): what `since`/`until` filter on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<Timestamp>,
}

impl SearchDoc {
    /// The time `since`/`until` filter on.
    pub fn happened_at(&self) -> Timestamp {
        self.occurred_at.unwrap_or(self.updated_at)
    }
}

/// Which of the two retrievers to use. Hybrid is the product; the single modes exist to
/// measure it (the retrieval-quality test compares all three).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    #[default]
    Hybrid,
    Keyword,
    Vector,
}

/// A query, already confined to what the caller may read.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    pub tenant: TenantId,
    /// The scopes to search: each one readable by the caller (checked by the service).
    pub scopes: Vec<MemoryScope>,
    /// Only documents of this kind, when set.
    pub kind: Option<DocKind>,
    pub text: String,
    /// The query's embedding (same embedder as the documents); `None` for keyword mode.
    pub vector: Option<Vec<f32>>,
    pub embedder: String,
    pub mode: SearchMode,
    pub k: usize,
    /// Only documents that happened at or after / before this time, when set.
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
}

impl SearchQuery {
    /// Whether a document that happened at `at` is within the query's time window.
    pub fn in_window(&self, at: Timestamp) -> bool {
        self.since.is_none_or(|s| at >= s) && self.until.is_none_or(|u| at < u)
    }

    /// Whether the query filters (kind or time), so a retriever should over-fetch.
    pub fn filters(&self) -> bool {
        self.kind.is_some() || self.since.is_some() || self.until.is_some()
    }
}

/// One result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    pub scope: MemoryScope,
    pub id: Id,
    pub doc: Id,
    pub kind: DocKind,
    pub title: String,
    pub text: String,
    /// The fused score, 0 to 1 (see [`SEMANTIC`]), or the single retriever's in a single mode.
    pub score: f64,
    /// Cosine similarity of the document to the query, when the vector retriever ran.
    pub similarity: Option<f32>,
    /// 1-based ranks in each retriever's list, when present there.
    pub keyword_rank: Option<u32>,
    pub vector_rank: Option<u32>,
    /// Whether an identifier in the query appears verbatim in the document.
    pub exact: bool,
    /// When what it records happened (see [`SearchDoc::happened_at`]).
    pub occurred_at: Option<Timestamp>,
}

/// The search index port.
#[async_trait]
pub trait SearchIndex: Send + Sync {
    /// `sqlite`, `opensearch`, or `none` ([`NoIndex`]).
    fn name(&self) -> &'static str;

    /// Adds or replaces chunks (by `(tenant, scope, id)`). Durable when it returns.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be written; `INVALID_REQUEST` for a vector
    /// of the wrong dimension.
    async fn upsert(&self, docs: &[SearchDoc]) -> Result<()>;

    /// Removes every chunk of record `doc` in `(tenant, scope)`; removing nothing is fine.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be written.
    async fn remove(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id) -> Result<()>;

    /// Searches only `query.scopes` of `query.tenant`; best first, at most `query.k`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for an unusable query (see [`check_query`]); `UNAVAILABLE`
    /// when the index cannot be read.
    async fn search(&self, query: &SearchQuery) -> Result<Vec<SearchHit>>;

    /// The record ids indexed in `(tenant, scope)` (for the reindex job), at most `max`.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be read.
    async fn doc_ids(&self, tenant: &TenantId, scope: &MemoryScope, max: usize) -> Result<Vec<Id>>;

    /// How long after a write returns until every search sees it: zero for an index
    /// that is consistent at once (embedded), the refresh window for OpenSearch. The
    /// services verify writes off the request path after this long, and sweep again
    /// what a removal inside the window could not see.
    fn visible_after(&self) -> std::time::Duration;

    /// The stored chunks of record `doc` in `(tenant, scope)`, with their vectors, by
    /// their keys (no ranking): what the deferred readback compares with what was written.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be read.
    async fn chunks(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id) -> Result<Vec<SearchDoc>>;

    /// Removes the chunks of record `doc` written before `than` (their `updated_at`):
    /// the twins a re-index inside the refresh window could not see to remove, or what a
    /// removal inside it missed. Returns how many it removed.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be written.
    async fn remove_older(&self, tenant: &TenantId, scope: &MemoryScope, doc: &Id, than: Timestamp) -> Result<usize>;

    /// Loads what the index keeps in memory ahead of the first search after a start, so
    /// no query waits for it; returns how many partitions it loaded. An index that keeps
    /// nothing in this process (OpenSearch, none) has nothing to load.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be read.
    async fn warm_up(&self) -> Result<usize>;

    /// Saves what the index keeps in this process's memory, for the next start to read
    /// instead of rebuilding it; for a process that stops. Returns how many partitions it
    /// saved. An index kept outside the process (OpenSearch, S3 Vectors, none) is already
    /// durable and saves nothing.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the index cannot be read.
    async fn save(&self) -> Result<usize> {
        Ok(0)
    }
}

/// The index of a deployment that has none (an AWS stack without an OpenSearch
/// endpoint, as in the moto tests): writes are skipped, searches answer `UNAVAILABLE`,
/// and the services fall back to a keyword scan of the store, saying so.
pub struct NoIndex;

#[async_trait]
impl SearchIndex for NoIndex {
    fn name(&self) -> &'static str {
        "none"
    }
    async fn upsert(&self, _: &[SearchDoc]) -> Result<()> {
        Ok(())
    }
    async fn remove(&self, _: &TenantId, _: &MemoryScope, _: &Id) -> Result<()> {
        Ok(())
    }
    async fn search(&self, _: &SearchQuery) -> Result<Vec<SearchHit>> {
        Err(Error::unavailable("no search index is configured"))
    }
    async fn doc_ids(&self, _: &TenantId, _: &MemoryScope, _: usize) -> Result<Vec<Id>> {
        Ok(Vec::new())
    }
    fn visible_after(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
    async fn chunks(&self, _: &TenantId, _: &MemoryScope, _: &Id) -> Result<Vec<SearchDoc>> {
        Ok(Vec::new())
    }
    async fn remove_older(&self, _: &TenantId, _: &MemoryScope, _: &Id, _: Timestamp) -> Result<usize> {
        Ok(0)
    }
    async fn warm_up(&self) -> Result<usize> {
        Ok(0)
    }
}

/// Turns text into unit-length vectors.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// Names the model (and whether it is semantic), e.g. `all-MiniLM-L6-v2` or
    /// `hashing-384 (lexical)`; stored beside each vector.
    fn name(&self) -> &str;
    fn dim(&self) -> usize;

    /// One unit-length vector of [`Embedder::dim`] numbers per text, in order.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the model cannot run (a remote model unreachable).
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>>;

    /// The vector of one search query. A local model answers it at once instead of
    /// queueing it behind writes; by default the same as [`Embedder::embed`].
    ///
    /// # Errors
    /// As [`Embedder::embed`].
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.embed(&[text.to_owned()]).await?.pop().ok_or_else(|| Error::internal("the embedder returned no vector"))
    }

    /// The contextual token vectors of `question` (with its word pieces) and of each of
    /// `texts` (vectors only: `tokens` is empty), for late interaction ([`LATE`]), or
    /// `None` when the embedder has none (a remote model, the lexical fallback): the
    /// default. Answered at once, like [`Embedder::embed_query`].
    ///
    /// # Errors
    /// As [`Embedder::embed`].
    async fn token_states(&self, _question: &str, _texts: &[String]) -> Result<Option<(TokenStates, Vec<TokenStates>)>> {
        Ok(None)
    }

    /// Lets go of whatever the embedder keeps of `texts` (the token states of a local
    /// model), as the index lets go of a forgotten record's chunks. Nothing by default.
    fn forget(&self, _texts: &[String]) {}

    /// Whether [`Embedder::forget`] has anything to let go of: when it has not, a
    /// removal does not read the chunks it would name. `false` by default.
    fn keeps_states(&self) -> bool {
        false
    }
}

/// Refuses queries no retriever can answer sensibly: empty, over
/// [`MAX_QUERY_CHARS`], or carrying control characters. Everything else (quotes,
/// operators, brackets) is plain text to both retrievers.
///
/// # Errors
/// `INVALID_REQUEST` naming the field `query`.
pub fn check_query(text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::invalid_field("query", "must not be empty"));
    }
    if text.chars().count() > MAX_QUERY_CHARS {
        return Err(Error::invalid_field("query", format!("at most {MAX_QUERY_CHARS} characters")));
    }
    if text.chars().any(|c| c.is_control() && c != '\t' && c != '\n') {
        return Err(Error::invalid_field("query", "must not contain control characters"));
    }
    Ok(())
}

/// The words of a text as both retrievers' keyword side sees them: lower-cased runs of
/// letters and digits, plus each compound identifier whole (`proj-142`,
/// `get_user_by_id`, `v2.3`) so an exact identifier is one token.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))) {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        if word.is_empty() {
            continue;
        }
        // Most words: ASCII letters and digits alone, one part (the rest below).
        if word.bytes().all(|b| b.is_ascii_alphanumeric()) {
            out.push(word.to_ascii_lowercase());
            continue;
        }
        let lower = word.to_lowercase();
        let parts: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).filter(|p| !p.is_empty()).collect();
        if parts.len() > 1 {
            out.push(lower.clone());
        }
        out.extend(parts.into_iter().map(str::to_owned));
    }
    out
}

/// Words that say nothing about what a query is after ("what did Maria…"): question
/// words, articles, pronouns, prepositions and the commonest auxiliaries — left out of a
/// query's keyword terms when it has others. Documents keep them (they count in a
/// document's length, as BM25 expects). No negations: "not" can matter. (A longer,
/// NLTK-like list that also drops had/has/have/can/after… cost 0.03 R@5 on the
/// conversational set's held-out split: docs/benchmarks.md.)
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "has", "have", "how", "i",
    "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "s", "that", "the", "their", "them", "they", "this", "to",
    "was", "we", "were", "what", "when", "where", "which", "who", "whom", "whose", "why", "will", "with", "would", "you", "your",
];

thread_local! {
    static STEMMER: rust_stemmers::Stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
    /// Stems this thread made already: a partition's load files tens of millions of
    /// words drawn from a vocabulary of thousands, and Snowball costs several lookups.
    /// Emptied whenever it reaches [`STEM_CACHE`] words, so it stays under 1 MiB.
    /// `None`: the word is its own stem.
    static STEMS: std::cell::RefCell<HashMap<String, Option<String>>> = std::cell::RefCell::new(HashMap::new());
}

/// Most words a thread keeps stems of.
const STEM_CACHE: usize = 8_192;

/// A token as the keyword side indexes it: words of letters stemmed (Snowball English:
/// `painting`, `painted` → `paint`); identifiers and numbers as they are.
fn stem(token: String) -> String {
    if !token.chars().all(char::is_alphabetic) {
        return token;
    }
    STEMS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(stem) = cache.get(&token) {
            return stem.clone().unwrap_or(token);
        }
        let stem = STEMMER.with(|s| s.stem(&token).into_owned());
        if cache.len() >= STEM_CACHE {
            cache.clear();
        }
        let changed = (stem != token).then(|| stem.clone());
        cache.insert(token, changed);
        stem
    })
}

/// The keyword terms of a text: its [`tokens`], stemmed.
pub fn index_terms(text: &str) -> Vec<String> {
    tokens(text).into_iter().map(stem).collect()
}

/// The keyword terms of a chunk, as every keyword index without an analyser of its own
/// counts them: its title's [`index_terms`], its text's, then its [`doc_days`].
pub fn doc_terms(title: &str, text: &str, at: Timestamp) -> Vec<String> {
    let mut t = index_terms(title);
    t.extend(index_terms(text));
    t.extend(doc_days(title, text, at));
    t
}

/// The days a chunk is about: the [`day_terms`] of when it happened
/// ([`SearchDoc::happened_at`]), then those of the dates its title and text name
/// ([`text_days`]).
pub fn doc_days(title: &str, text: &str, at: Timestamp) -> Vec<String> {
    let mut days: Vec<String> = day_terms(at).into();
    days.extend(text_days(title));
    days.extend(text_days(text));
    days
}

/// The keyword terms of a query: its [`tokens`] without [`STOP_WORDS`] (all of them when
/// it has nothing else), stemmed.
pub fn query_terms(text: &str) -> Vec<String> {
    weighted_words(text).into_iter().map(|(_, term)| term).collect()
}

/// The words of a query the keyword side searches for, each beside its term: the
/// [`query_terms`] with the word they came from. A date the query names is its day's
/// term ([`query_dates`]), not its words.
pub fn weighted_words(text: &str) -> Vec<(String, String)> {
    let (days, rest) = query_dates(text);
    let all = tokens(&rest);
    let content: Vec<String> = all.iter().filter(|t| !STOP_WORDS.contains(&t.as_str())).cloned().collect();
    let chosen = if content.is_empty() && days.is_empty() { all } else { content };
    chosen.into_iter().map(|w| (w.clone(), stem(w))).chain(days.into_iter().map(|d| (d.clone(), d))).collect()
}

/// A query's text with its dates ([`query_dates`]) and [`STOP_WORDS`] left out (the
/// whole text when nothing else is left; nothing when the query is a date and stop
/// words): what an index with its own analyser is asked (with the dates' day terms
/// beside it), so both adapters weigh a question's words alike.
pub fn query_text(text: &str) -> String {
    let (days, rest) = query_dates(text);
    let text = if days.is_empty() {
        text
    } else if tokens(&rest).iter().all(|t| STOP_WORDS.contains(&t.as_str())) {
        // Only the date's day is searched when no other word carries weight.
        return String::new();
    } else {
        rest.as_str()
    };
    let kept: Vec<&str> = text
        .split_whitespace()
        .filter(|w| {
            let t = tokens(w);
            t.is_empty() || !t.iter().all(|t| STOP_WORDS.contains(&t.as_str()))
        })
        .collect();
    if kept.is_empty() { text.to_owned() } else { kept.join(" ") }
}

/// The identifiers of a query, lower-cased: words with a digit and a letter or a mark
/// (`proj-142`, `v2.3`, `10.01.2024`), an underscore, an inner `.` or `:`, or an inner
/// capital (`getUser`), and numbers of five digits or more (an order or account
/// number). Not identifiers: a shorter number alone (a year, a quantity: `2017`, `500`),
/// an ordinal (`10th`), and words joined by hyphens alone (`full-time`, `follow-up`):
/// promoting every passage that holds them above better matches is not what a question
/// about a year or a part-time job asks for.
pub fn identifiers(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| w.len() >= 3 && is_identifier(w))
        .map(str::to_lowercase)
        .collect()
}

fn is_identifier(w: &str) -> bool {
    let digits = w.chars().filter(char::is_ascii_digit).count();
    let marks = w.chars().any(|c| matches!(c, '_' | '.' | ':'));
    let inner_capital = w.chars().skip(1).any(char::is_uppercase) && w.chars().any(char::is_lowercase);
    if digits == w.chars().count() {
        return digits >= 5;
    }
    let lower = w.to_lowercase();
    let ordinal = ["st", "nd", "rd", "th"]
        .iter()
        .any(|s| lower.strip_suffix(s).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())));
    !ordinal && (digits > 0 || marks || inner_capital)
}

/// Whether every identifier appears as a whole token of `title`, `text` or the id.
pub fn has_identifiers(ids: &[String], id: &str, title: &str, text: &str) -> bool {
    if ids.is_empty() {
        return false;
    }
    let mut have: HashSet<String> = tokens(title).into_iter().chain(tokens(text)).collect();
    have.insert(id.to_lowercase());
    ids.iter().all(|i| have.contains(i))
}

/// Okapi BM25 (k1 = 1.2, b = 0.75) as both keyword legs without an analyser of their own
/// score it: the embedded index in memory, and the DynamoDB postings of the S3 Vectors
/// index.
pub mod bm25 {
    pub const K1: f64 = 1.2;
    pub const B: f64 = 0.75;

    /// The idf of a term held by `df` of `docs` documents; a term no document holds
    /// (`df` 0) counts as the rarest possible.
    pub fn idf(docs: f64, df: f64) -> f64 {
        if df <= 0.0 { (1.0 + (docs + 0.5) / 0.5).ln() } else { (1.0 + (docs - df + 0.5) / (df + 0.5)).ln() }
    }

    /// One term's share of a document's score: `tf` occurrences in a document of `len`
    /// terms, `avg` the partition's average length.
    pub fn term(idf: f64, tf: f64, len: f64, avg: f64) -> f64 {
        let per_len = K1 * B / avg.max(1.0);
        idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B) + per_len * len)
    }

    /// Whether a term held by `df` of `docs` documents is common (in more than half):
    /// its idf is under ln 2, so when the query has a rarer term it is skipped and the
    /// rarer terms decide the ranking.
    pub fn common(df: usize, docs: usize) -> bool {
        df * 2 > docs
    }
}

/// One candidate of a retriever's list: the chunk and its raw score (BM25, or cosine
/// similarity), and for a keyword candidate its coverage of the query — the raw score
/// over the sum of the query terms' idf — when the adapter knows it.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub hit: SearchHit,
    pub raw: f64,
    pub coverage: Option<f64>,
}

/// Whether an embedder's vectors are lexical (the hashing fallback names itself so).
pub fn is_lexical(embedder: &str) -> bool {
    embedder.contains("lexical")
}

/// Fuses the keyword and vector lists (each best first) as `fusion` says
/// ([`Fusion::for_embedder`]). A keyword candidate without a coverage is scaled by the
/// best keyword score of the list instead (so that list's best counts as full
/// coverage). In a single mode the score is that leg's own: the coverage (or scaled
/// score) for keywords, the similarity for vectors; a hybrid hit that scores nothing (no
/// keyword match and a similarity at or under the floor) is dropped. Chunks holding every
/// identifier of the query come first in hybrid search (exact identifiers must rank
/// first, SPEC §5.4), then the rest by score; ties by the keyword leg's rank, the vector
/// leg's, then id, so results are stable. Keeps
/// the best chunk of each record and at most `k` records.
pub fn fuse(mode: SearchMode, keyword: Vec<Candidate>, vector: Vec<Candidate>, k: usize, fusion: Fusion) -> Vec<SearchHit> {
    let mut merged: HashMap<(String, String), SearchHit> = HashMap::new();
    let best_raw = keyword.iter().map(|c| c.raw).fold(0.0f64, f64::max);
    let coverage_of = |c: &Candidate| c.coverage.unwrap_or(if best_raw > 0.0 { c.raw / best_raw } else { 0.0 });
    let best_coverage = keyword.iter().map(coverage_of).fold(0.0f64, f64::max);
    let best_similarity = vector.iter().map(|c| c.raw).reduce(f64::max);
    let weight = fusion.keyword_weight(best_coverage, best_similarity);
    let lists = match mode {
        SearchMode::Hybrid => vec![(true, keyword), (false, vector)],
        SearchMode::Keyword => vec![(true, keyword)],
        SearchMode::Vector => vec![(false, vector)],
    };
    for (is_keyword, list) in lists {
        for (i, c) in list.into_iter().enumerate() {
            let rank = u32::try_from(i + 1).unwrap_or(u32::MAX);
            let contribution = match (is_keyword, mode) {
                (true, SearchMode::Hybrid) => weight * coverage_of(&c).clamp(0.0, 1.0).powi(fusion.coverage_power),
                (true, _) => coverage_of(&c),
                (false, SearchMode::Hybrid) => (1.0 - weight) * fusion.closeness(c.raw),
                (false, _) => c.raw,
            };
            let key = (c.hit.scope.storage_key(), c.hit.id.as_str().to_owned());
            let entry = merged.entry(key).or_insert_with(|| SearchHit { score: 0.0, ..c.hit.clone() });
            entry.score += contribution;
            entry.exact |= c.hit.exact;
            if is_keyword {
                entry.keyword_rank = Some(rank);
            } else {
                entry.vector_rank = Some(rank);
                entry.similarity = c.hit.similarity;
            }
        }
    }
    let mut hits: Vec<SearchHit> = merged.into_values().collect();
    // A hybrid hit neither leg vouches for (no keyword match, a similarity at or under
    // the floor) is noise, not a result.
    if mode == SearchMode::Hybrid {
        hits.retain(|h| h.score > 0.0 || h.exact);
    }
    // Exact identifiers are promoted in hybrid search only: the single modes exist to
    // measure one retriever alone.
    let promote = mode == SearchMode::Hybrid;
    hits.sort_by(|a, b| {
        (promote && b.exact)
            .cmp(&(promote && a.exact))
            .then_with(|| b.score.total_cmp(&a.score))
            // Coverage is capped at 1 in the score: among passages covering the whole
            // query, the keyword leg's own order (raw BM25) decides, then the vectors'.
            .then_with(|| a.keyword_rank.unwrap_or(u32::MAX).cmp(&b.keyword_rank.unwrap_or(u32::MAX)))
            .then_with(|| a.vector_rank.unwrap_or(u32::MAX).cmp(&b.vector_rank.unwrap_or(u32::MAX)))
            .then_with(|| a.scope.cmp(&b.scope))
            .then_with(|| a.id.as_str().cmp(b.id.as_str()))
    });
    let mut seen = HashSet::new();
    hits.retain(|h| seen.insert((h.scope.storage_key(), h.doc.as_str().to_owned())));
    hits.truncate(k);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: &str, exact: bool) -> Candidate {
        Candidate {
            hit: SearchHit {
                scope: MemoryScope::Org,
                id: Id::new(id).unwrap(),
                doc: Id::new(id).unwrap(),
                kind: DocKind::Memory,
                title: id.into(),
                text: String::new(),
                score: 0.0,
                similarity: Some(0.5),
                keyword_rank: None,
                vector_rank: None,
                exact,
                occurred_at: None,
            },
            raw: 1.0,
            coverage: None,
        }
    }

    #[test]
    fn tokens_keep_identifiers_whole_and_split() {
        assert_eq!(
            tokens("Fix PROJ-142 in get_user_by_id, v2.3!"),
            ["fix", "proj-142", "proj", "142", "in", "get_user_by_id", "get", "user", "by", "id", "v2.3", "v2", "3"]
        );
        assert!(tokens("\"((*))\" AND OR NOT:").iter().all(|t| t.chars().all(char::is_alphanumeric)));
        assert_eq!(identifiers("where is PROJ-142 and getUserById or plain words"), ["proj-142", "getuserbyid"]);
        assert_eq!(
            identifiers("full-time since 2017, the 10th, order 1048576, get_user and v2.3 on 10.01.2024"),
            ["1048576", "get_user", "v2.3", "10.01.2024"]
        );
    }

    fn scored(id: &str, raw: f64, coverage: Option<f64>) -> Candidate {
        let mut c = hit(id, false);
        c.raw = raw;
        c.coverage = coverage;
        c
    }

    #[test]
    fn fusion_combines_coverage_and_closeness_and_exact_identifiers_come_first() {
        // b is first in both lists; a holds the identifier and is only third by keywords.
        let kw = vec![hit("b", false), hit("c", false), hit("a", true)];
        let vec = vec![hit("b", false), hit("c", false)];
        let fused = fuse(SearchMode::Hybrid, kw, vec, 10, SEMANTIC);
        let ids: Vec<&str> = fused.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids[0], "a");
        assert_eq!((fused[1].keyword_rank, fused[1].vector_rank), (Some(1), Some(1)));
        assert_eq!(fuse(SearchMode::Vector, vec![hit("x", false)], vec![hit("y", false)], 10, SEMANTIC)[0].id.as_str(), "y");

        // A full keyword match beside a middling vector one beats the best vector match
        // alone, and so does a partial one (coverage 0.5, squared: 0.25) that vectors
        // also found close, when the query's keyword leg is sure of itself.
        let kw = vec![scored("full", 4.0, Some(1.0)), scored("partial", 2.0, Some(0.5))];
        let vec =
            vec![scored("close", 0.8, None), scored("partial", 0.65, None), scored("full", 0.6, None), scored("far", 0.2, None)];
        let fused = fuse(SearchMode::Hybrid, kw.clone(), vec.clone(), 10, SEMANTIC);
        let ids: Vec<&str> = fused.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["full", "partial", "close"], "far: no keyword match and a similarity at the floor, dropped");
        // Both legs are fully confident (coverage 1, similarity 0.8 over the ceiling): the
        // keyword leg weighs b / (b + 1) = 3/4.
        let w = 3.0 / 4.0;
        let full = w + (1.0 - w) * (0.6 - 0.2) / 0.5;
        assert!((fused[0].score - full).abs() < 1e-9, "{}", fused[0].score);
        assert!(fused.iter().all(|h| (0.0..=1.0).contains(&h.score)));
        // A lexical embedder's vectors only break ties.
        let lexical = fuse(SearchMode::Hybrid, kw.clone(), vec, 10, Fusion::for_embedder("hashing-384 (lexical)"));
        assert_eq!(lexical[1].id.as_str(), "partial");
        // Without coverage (an index that cannot tell the query's idf), scores are scaled
        // by the best one; single modes score by their own leg.
        let plain = fuse(SearchMode::Keyword, vec![scored("p", 3.0, None), scored("q", 1.5, None)], Vec::new(), 10, SEMANTIC);
        assert_eq!(plain.iter().map(|h| h.score).collect::<Vec<_>>(), [1.0, 0.5]);
    }

    #[test]
    fn scores_are_absolute_and_each_leg_weighs_by_its_confidence() {
        // Nothing matches by keyword and the nearest vector is far (the case:
        // similarity 0.11 once scored 0.6, the top of its list): nothing is returned.
        let far = fuse(SearchMode::Hybrid, Vec::new(), vec![scored("allergy", 0.11, None)], 10, SEMANTIC);
        assert!(far.is_empty(), "{far:?}");
        // A vector-only hit scores its calibrated similarity, whatever else is in the list.
        let alone = fuse(SearchMode::Hybrid, Vec::new(), vec![scored("a", 0.5, None), scored("b", 0.3, None)], 10, SEMANTIC);
        assert!((alone[0].score - 0.6).abs() < 1e-9 && (alone[1].score - 0.2).abs() < 1e-9, "{alone:?}");
        // Scores are monotone in each leg: more coverage or more similarity, more score.
        let kw = vec![scored("more", 3.0, Some(0.9)), scored("less", 2.0, Some(0.6))];
        let vec = vec![scored("more", 0.5, None), scored("less", 0.5, None)];
        let fused = fuse(SearchMode::Hybrid, kw, vec, 10, SEMANTIC);
        assert_eq!(fused[0].id.as_str(), "more");
        assert!(fused[0].score > fused[1].score);
        // A query the keyword side covers well leans on keywords; one it barely covers
        // (a paraphrase) leans on vectors.
        assert!(SEMANTIC.keyword_weight(1.0, Some(0.5)) > 0.75);
        assert!(SEMANTIC.keyword_weight(0.1, Some(0.7)) < SEMANTIC.keyword_weight(0.5, Some(0.7)));
        assert!(SEMANTIC.keyword_weight(0.01, Some(0.7)) < 0.25);
        assert!(SEMANTIC.keyword_weight(0.5, Some(0.3)) > SEMANTIC.keyword_weight(0.5, Some(0.7)));
        assert!((SEMANTIC.keyword_weight(0.0, None) - 0.5).abs() < 1e-12, "no evidence either way");
        assert!((SEMANTIC.keyword_weight(0.5, None) - 1.0).abs() < 1e-12, "no vectors: keywords alone");
    }

    #[test]
    fn query_terms_drop_question_words_and_stem() {
        assert_eq!(query_terms("When did Maria start painting?"), ["maria", "start", "paint"]);
        assert_eq!(index_terms("She painted PROJ-142 walls"), ["she", "paint", "proj-142", "proj", "142", "wall"]);
        assert_eq!(query_terms("what is it"), ["what", "is", "it"], "a query of stop words alone keeps them");
        assert_eq!(query_text("When did Maria start painting?"), "Maria start painting?");
        assert_eq!(query_text("who is it"), "who is it");
    }

    #[test]
    fn hashing_embedder_is_unit_length_and_lexical() {
        let e = HashingEmbedder::new(384);
        let a = e.vector("refund policy for enterprise customers");
        let b = e.vector("enterprise refund policy");
        let c = e.vector("kubernetes cluster autoscaling");
        assert!((dot(&a, &a) - 1.0).abs() < 1e-5);
        assert!(dot(&a, &b) > dot(&a, &c) + 0.3);
        assert!(e.name().contains("lexical"));
    }

    #[test]
    fn hostile_queries_are_refused_or_plain_text() {
        assert!(check_query("   ").is_err());
        assert!(check_query(&"a".repeat(MAX_QUERY_CHARS + 1)).is_err());
        assert!(check_query(&"é".repeat(MAX_QUERY_CHARS)).is_ok(), "characters, not bytes");
        assert!(check_query("bell\u{7}").is_err());
        assert!(check_query("\"unbalanced (quote* NEAR/3 -x").is_ok());
    }
}
