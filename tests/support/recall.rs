//! The conversational recall evaluation (issue #21): the labelled multi-session set of
//! `tests/corpus/conversations.json` (its generator beside it), one memory per turn,
//! each question asked once; a hit is an evidence turn in the top k.
//!
//! Each split goes into a tenant of its own (so a split's questions only see its own
//! turns) as knowledge-base memories — the shape of the public benchmark the issue was
//! measured on; a real set's as turns of one session per conversation — and is
//! searched through [`services::search::SearchService::search`] in the three modes
//! (hybrid also before late interaction, `fused`), beside [`PlainBm25`], the 40-line
//! Okapi BM25 the issue compares
//! with. Turns and questions are embedded in batches and go to the index port directly
//! (the KB write path embeds, links and reads back one record at a time, which would
//! make this a test of ingest speed, not recall); the index documents are the ones that
//! path writes, and the queries the ones the search service builds.
//!
//! The same evaluation runs on a real set, REALTALK ([`realtalk`]), as a benchmark
//! (`tests/benches/recall_real.rs`, run by `benches/recall_real.sh`): each conversation is
//! a group of its own.
//!
//! `CONTINUITY_RECALL_DUMP=FILE` also writes every turn's, question's and KB corpus
//! entry's vector to FILE (JSON), and `CONTINUITY_RECALL_LISTS=FILE` each question's
//! keyword, vector and hybrid top 100 with their scores, and, with the model, what late
//! interaction reads (`tokens`, and `pool`: each candidate's fused score, similarity,
//! time and each question token's best cosine): what the fusion, late interaction and
//! context were studied on outside Rust (docs/benchmarks.md).
//! `CONTINUITY_CONTEXT_SWEEP=0,0.2,0.5` adds a `hybrid@<α>` row for each
//! conversation-context weight, after late interaction too (what `CONTEXT`'s weights
//! were chosen with).

use std::collections::{BTreeMap, HashMap, HashSet};

use domain::memory::MemoryScope;
use domain::principal::CallerContext;
use domain::{Id, Timestamp};
use ports::search::{DocKind, SearchDoc, SearchMode, SearchQuery};
use serde_json::Value;
use services::Services;

/// The corpus, parsed.
pub struct Corpus {
    pub turns: Vec<Turn>,
    pub questions: Vec<Question>,
    /// A real set's turns are a chat's: each group is one session, and its turns are
    /// indexed as `memory.write_conversational` indexes them ([`DocKind::Turn`] in the
    /// scope `session:<group>`), so hybrid search's conversation context
    /// ([`ports::search::CONTEXT`]) applies. The generated set's are knowledge-base
    /// memories in `org`.
    pub conversational: bool,
}

pub struct Turn {
    pub id: String,
    pub split: String,
    /// The partition it is searched in: its split for the generated set, its
    /// conversation for a real one (each question sees only its own conversation).
    pub group: String,
    /// What the memory's title says: on the generated set the speaker and the session's
    /// date, as a client storing knowledge-base memories would; on REALTALK what
    /// `memory.write_conversational` gives a turn (`user · <its time, RFC 3339>`).
    pub title: String,
    pub text: String,
    /// When it was said, where the set says (REALTALK's messages): the memory's
    /// `occurred_at`, as `memory.write_conversational` gives a turn its time.
    pub at: Option<Timestamp>,
}

pub struct Question {
    pub split: String,
    pub group: String,
    pub kind: String,
    pub text: String,
    pub evidence: HashSet<String>,
}

/// Reads `tests/corpus/conversations.json`.
pub fn corpus() -> Corpus {
    let path = crate::workspace_root().join("tests").join("corpus").join("conversations.json");
    let raw: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let s = |v: &Value| v.as_str().unwrap().to_owned();
    let mut turns = Vec::new();
    for c in raw["conversations"].as_array().unwrap() {
        for session in c["sessions"].as_array().unwrap() {
            for t in session["turns"].as_array().unwrap() {
                turns.push(Turn {
                    id: s(&t["id"]),
                    split: s(&c["split"]),
                    group: s(&c["split"]),
                    title: format!("{} ({})", s(&t["speaker"]), s(&session["date"])),
                    text: s(&t["text"]),
                    at: None,
                });
            }
        }
    }
    let questions = raw["questions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| Question {
            split: s(&q["split"]),
            group: s(&q["split"]),
            kind: s(&q["kind"]),
            text: s(&q["question"]),
            evidence: q["evidence"].as_array().unwrap().iter().map(s).collect(),
        })
        .collect();
    Corpus { turns, questions, conversational: false }
}

/// The real set: REALTALK (Lee et al., 2025, arXiv:2502.13270), ten 21-day messaging-app
/// conversations between real people (8 944 messages) with evidence-labelled memory
/// questions, read from `dir` (the `data/` folder of github.com/danny911kr/REALTALK; the
/// repository states no licence, so it is read from where it was fetched and never
/// copied into this one — `benches/recall_real.sh` fetches it). Only its own
/// conversations (`data/Chat_*.json`) are read: its `data/locomo/` copy of LoCoMo is left
/// alone. Odd-numbered chats are the `tune` split, even-numbered ones `heldout`; each
/// chat is a group of its own. Evidence ids are read leniently (`D 2:18`, `D20:17.`,
/// `23:29`, two ids in one string); an id naming no message is dropped, and a question
/// left with no evidence is not asked (`skipped` counts them).
pub fn realtalk(dir: &std::path::Path) -> (Corpus, usize) {
    let mut files: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?.to_owned();
            let n = name.strip_prefix("Chat_")?.split('_').next()?.parse().ok()?;
            name.ends_with(".json").then_some((n, path))
        })
        .collect();
    files.sort();
    assert_eq!(files.len(), 10, "{} should hold REALTALK's ten Chat_*.json files", dir.display());
    let (mut turns, mut questions, mut skipped) = (Vec::new(), Vec::new(), 0);
    for (n, path) in files {
        let raw: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let split = if n % 2 == 1 { "tune" } else { "heldout" };
        let group = format!("chat{n}");
        let mut ids = HashSet::new();
        for session in 1.. {
            let Some(messages) = raw.get(format!("session_{session}")).and_then(Value::as_array) else { break };
            for m in messages {
                let id = format!("{group}:{}", m["dia_id"].as_str().unwrap());
                ids.insert(id.clone());
                // As a client writes a chat between people: one turn per message, the
                // speaker's name in the content, the message's time as the turn's.
                let speaker = m["speaker"].as_str().unwrap();
                let time = rfc3339(m["date_time"].as_str().unwrap());
                turns.push(Turn {
                    id,
                    split: split.to_owned(),
                    group: group.clone(),
                    at: Some(Timestamp::parse("date_time", &time).unwrap()),
                    title: format!("user · {time}"),
                    text: format!("{speaker}: {}", m["clean_text"].as_str().unwrap()),
                });
            }
        }
        for q in raw["qa"].as_array().unwrap() {
            let evidence: HashSet<String> = q["evidence"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|e| evidence_ids(e.as_str().unwrap_or_default()))
                .map(|e| format!("{group}:{e}"))
                .filter(|e| ids.contains(e))
                .collect();
            if evidence.is_empty() {
                skipped += 1;
                continue;
            }
            questions.push(Question {
                split: split.to_owned(),
                group: group.clone(),
                kind: format!("category-{}", q["category"]),
                text: q["question"].as_str().unwrap().to_owned(),
                evidence,
            });
        }
    }
    (Corpus { turns, questions, conversational: true }, skipped)
}

/// The second real set: FriendsQA (Yang and Choi, 2019, SIGDIAL; github.com/emorynlp/FriendsQA,
/// Apache-2.0), questions people wrote about scenes of the first four seasons of
/// *Friends*, each answer a span of an utterance, read from `dir` (its `dat/` folder:
/// `friendsqa_dev.json` and `friendsqa_tst.json`; `benches/recall_real.sh` fetches it).
/// Each episode is a conversation, one session (a group of its own), its scenes one
/// after another, so a question is asked of the whole episode (200 to 520 utterances),
/// not of its scene. Each utterance is a turn as a client writes a chat between people
/// (content `<speaker>: <text>`, title `user`; the set has no times, so a turn's time is
/// the one a client writing the script line by line would give it, ten seconds apart),
/// its tokens joined back into text (`I 'm` → `I'm`, `gon na` → `gonna`). Stage
/// directions (`#NOTE#`: `[ Scene : Central Perk … ]`) are not said by anyone and are left out, as is a question all of
/// whose answers are in one (`skipped` counts them). The evidence is every utterance an
/// answer is in. The `dev` file is the `tune` split (late interaction's setting and
/// conversation context's weight were chosen on it with the other sets') and `tst` the
/// `heldout` one, never tuned on.
pub fn friendsqa(dir: &std::path::Path) -> (Corpus, usize) {
    // The set has no times; a client writing the script as a chat, line by line, would
    // give each turn the time it was written: here ten seconds apart, in script order.
    const SCRIPT_START: i64 = 1_704_067_200_000; // 2024-01-01
    let (mut turns, mut questions, mut skipped) = (Vec::new(), Vec::new(), 0);
    for (file, split) in [("friendsqa_dev.json", "tune"), ("friendsqa_tst.json", "heldout")] {
        let path = dir.join(file);
        let raw: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display())))
                .unwrap();
        let mut scenes: Vec<&Value> = raw["data"].as_array().unwrap().iter().collect();
        // `s01_e23_c06`: episode `s01_e23`, scene 6 — in episode then scene order.
        scenes.sort_by_key(|d| d["title"].as_str().unwrap().to_owned());
        for scene in scenes {
            let title = scene["title"].as_str().unwrap();
            // A tenant id has no `_`: the group is `s01-e23`.
            let group = title.rsplit_once('_').map_or(title, |(episode, _)| episode).replace('_', "-");
            let paragraph = &scene["paragraphs"][0];
            let mut said = HashSet::new();
            for u in paragraph["utterances:"].as_array().unwrap() {
                let speaker = u["speakers"].as_array().and_then(|s| s.first()).and_then(Value::as_str).unwrap_or("#NOTE#");
                if speaker == "#NOTE#" {
                    continue;
                }
                let id = format!("{title}:u{}", u["uid"]);
                said.insert(id.clone());
                turns.push(Turn {
                    id,
                    split: split.to_owned(),
                    group: group.clone(),
                    title: "user".to_owned(),
                    text: format!(
                        "{}: {}",
                        if speaker == "#ALL#" { "All" } else { speaker },
                        detokenize(u["utterance"].as_str().unwrap())
                    ),
                    at: Some(Timestamp(SCRIPT_START + 10_000 * i64::try_from(turns.len()).unwrap())),
                });
            }
            for q in paragraph["qas"].as_array().unwrap() {
                let evidence: HashSet<String> = q["answers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| format!("{title}:u{}", a["utterance_id"]))
                    .filter(|e| said.contains(e))
                    .collect();
                if evidence.is_empty() {
                    skipped += 1;
                    continue;
                }
                // The question's id ends in its form: `…_What`, `…_Who`, `…_Paraphrased`.
                let form = q["id"].as_str().unwrap_or_default().rsplit('_').next().unwrap_or_default().to_lowercase();
                questions.push(Question {
                    split: split.to_owned(),
                    group: group.clone(),
                    kind: form,
                    text: detokenize(q["question"].as_str().unwrap()),
                    evidence,
                });
            }
        }
    }
    (Corpus { turns, questions, conversational: true }, skipped)
}

/// Text from a tokenizer's tokens: no space before punctuation or a clitic (`I 'm`,
/// `do n't`), `gon na` and `wan na` as said.
fn detokenize(tokens: &str) -> String {
    let mut out = String::new();
    for t in tokens.split_whitespace() {
        let glued =
            matches!(t, "." | "," | "!" | "?" | ";" | ":" | "%" | ")" | "..." | "na") || t.starts_with('\'') || t == "n't";
        if !out.is_empty() && !glued && !out.ends_with('(') {
            out.push(' ');
        }
        out.push_str(t);
    }
    out
}

/// `29.12.2023, 22:42:04` as `2023-12-29T22:42:04Z`.
fn rfc3339(raw: &str) -> String {
    let (date, time) = raw.split_once(", ").unwrap_or((raw, "00:00:00"));
    let mut d = date.split('.');
    let (day, month, year) = (d.next().unwrap_or("01"), d.next().unwrap_or("01"), d.next().unwrap_or("1970"));
    format!("{year}-{month}-{day}T{time}Z")
}

/// `D12:32` ids in one evidence string, however it was typed (`D 2:18`, `D20:17.`,
/// `23:29`, `D16:82. D19:2`).
fn evidence_ids(raw: &str) -> Vec<String> {
    let compact: String = raw.chars().filter(|c| !c.is_whitespace()).collect();
    compact
        .split(|c: char| !(c.is_ascii_digit() || c == ':'))
        .filter_map(|part| {
            let (session, turn) = part.split_once(':')?;
            let ok = |x: &str| !x.is_empty() && x.chars().all(|c| c.is_ascii_digit());
            (ok(session) && ok(turn)).then(|| format!("D{session}:{turn}"))
        })
        .collect()
}

/// Recall at 5 and 10 and MRR at 10, summed over questions.
#[derive(Debug, Default, Clone, Copy)]
pub struct Scores {
    pub r5: f64,
    pub r10: f64,
    pub mrr: f64,
    pub n: u32,
}

impl Scores {
    fn add(&mut self, ranked: &[String], evidence: &HashSet<String>) {
        let first = ranked.iter().take(10).position(|d| evidence.contains(d));
        self.r5 += f64::from(u8::from(first.is_some_and(|i| i < 5)));
        self.r10 += f64::from(u8::from(first.is_some()));
        self.mrr += first.map_or(0.0, |i| 1.0 / f64::from(u32::try_from(i + 1).unwrap()));
        self.n += 1;
    }

    /// The means: (R@5, R@10, MRR@10).
    pub fn mean(&self) -> (f64, f64, f64) {
        let n = f64::from(self.n.max(1));
        (self.r5 / n, self.r10 / n, self.mrr / n)
    }
}

/// The retrievers compared: BM25 alone, each leg, the two legs `fused` by the index,
/// and `hybrid` as the services search it (the fused pool ordered again by late
/// interaction, [`services::search::reorder`], when the embedder has token states, then
/// conversation context).
pub const SYSTEMS: [&str; 5] = ["plain-bm25", "keyword", "vector", "fused", "hybrid"];

/// The results: per (split, question kind or `all`, system).
pub type Report = BTreeMap<(String, String, String), Scores>;

/// Indexes each split into its own tenant of `s` (callers from `callers`, by split) and
/// asks every question with every system.
pub async fn evaluate(s: &Services, callers: &HashMap<String, CallerContext>, corpus: &Corpus) -> Report {
    let embedder = s.backend.embedder.clone();
    // Where a group's turns are indexed and searched, and as what.
    let placed = |group: &str| {
        if corpus.conversational {
            (DocKind::Turn, MemoryScope::Session(group.to_owned()))
        } else {
            (DocKind::Kb, MemoryScope::Org)
        }
    };
    for batch in corpus.turns.chunks(64) {
        let texts: Vec<String> = batch.iter().map(|t| format!("{}\n{}", t.title, t.text)).collect();
        let vectors = embedder.embed(&texts).await.unwrap();
        let docs: Vec<SearchDoc> = batch
            .iter()
            .zip(vectors)
            .map(|(t, vector)| SearchDoc {
                tenant: callers[&t.group].tenant.clone(),
                scope: placed(&t.group).1,
                id: Id::new(format!("{}~0", t.id)).unwrap(),
                doc: Id::new(t.id.clone()).unwrap(),
                kind: placed(&t.group).0,
                title: t.title.clone(),
                text: t.text.clone(),
                vector,
                embedder: embedder.name().to_owned(),
                updated_at: Timestamp(0),
                occurred_at: t.at,
            })
            .collect();
        s.backend.search.upsert(&docs).await.unwrap();
    }
    if let Some(path) = std::env::var_os("CONTINUITY_RECALL_DUMP") {
        // For studying fusion outside Rust: every turn's and question's vector.
        let mut all = serde_json::Map::new();
        for batch in corpus.turns.chunks(64) {
            let texts: Vec<String> = batch.iter().map(|t| format!("{}\n{}", t.title, t.text)).collect();
            for (t, v) in batch.iter().zip(embedder.embed(&texts).await.unwrap()) {
                all.insert(t.id.clone(), serde_json::json!(v));
            }
        }
        for q in &corpus.questions {
            all.insert(q.text.clone(), serde_json::json!(embedder.embed(std::slice::from_ref(&q.text)).await.unwrap()[0]));
        }
        // And the knowledge-base corpus beside it (`kb:ID`, `kbq:QUERY`).
        let kb_path = crate::workspace_root().join("tests").join("corpus").join("kb.json");
        let kb: Value = serde_json::from_str(&std::fs::read_to_string(kb_path).unwrap()).unwrap();
        for d in kb["documents"].as_array().unwrap() {
            let text = format!("{}\n{}", d["title"].as_str().unwrap(), d["body"].as_str().unwrap());
            all.insert(format!("kb:{}", d["id"].as_str().unwrap()), serde_json::json!(embedder.embed(&[text]).await.unwrap()[0]));
        }
        for q in kb["queries"].as_array().unwrap() {
            let text = q["query"].as_str().unwrap().to_owned();
            all.insert(format!("kbq:{text}"), serde_json::json!(embedder.embed(&[text]).await.unwrap()[0]));
        }
        std::fs::write(path, serde_json::to_vec(&all).unwrap()).unwrap();
    }
    let mut plain: HashMap<&str, PlainBm25> = HashMap::new();
    for t in &corpus.turns {
        plain.entry(t.group.as_str()).or_default().add(&t.id, &format!("{} {}", t.title, t.text));
    }
    // Questions are embedded together, once, and asked of the index port directly with
    // each mode (the service's search embeds the question again for every call).
    let mut vectors = Vec::new();
    for batch in corpus.questions.chunks(64) {
        let texts: Vec<String> = batch.iter().map(|q| q.text.clone()).collect();
        vectors.extend(embedder.embed(&texts).await.unwrap());
    }
    // A question asked of its group's partition, as `memory.search` builds the query.
    let ask = |q: &Question, vector: &[f32], mode: SearchMode, k: usize| {
        let query = SearchQuery {
            tenant: callers[&q.group].tenant.clone(),
            scopes: vec![placed(&q.group).1],
            kind: Some(placed(&q.group).0),
            text: q.text.clone(),
            vector: Some(vector.to_vec()),
            embedder: embedder.name().to_owned(),
            mode,
            k,
            since: None,
            until: None,
        };
        async move { s.backend.search.search(&query).await.unwrap() }
    };
    let mut report = Report::new();
    let mut lists = std::env::var_os("CONTINUITY_RECALL_LISTS").map(|_| Vec::new());
    let sweep: Vec<f64> = std::env::var("CONTINUITY_CONTEXT_SWEEP")
        .map(|v| v.split(',').map(|w| w.trim().parse().expect("CONTINUITY_CONTEXT_SWEEP: weights like 0,0.2,0.5")).collect())
        .unwrap_or_default();
    for (q, vector) in corpus.questions.iter().zip(vectors) {
        if let Some(lists) = lists.as_mut() {
            // For studying fusion outside Rust: each leg's own top 100 with its score.
            let mut legs = serde_json::Map::new();
            for (name, mode) in [("keyword", SearchMode::Keyword), ("vector", SearchMode::Vector), ("hybrid", SearchMode::Hybrid)]
            {
                let hits = ask(q, &vector, mode, 100).await;
                legs.insert(name.to_owned(), hits.iter().map(|h| serde_json::json!([h.doc.to_string(), h.score])).collect());
            }
            // What late interaction reads: the question's tokens and, per candidate of
            // the fused pool, its fused score, similarity, time and each question
            // token's best cosine with one of its tokens (for studying late interaction
            // outside Rust).
            let pool = ask(q, &vector, SearchMode::Hybrid, ports::search::LATE.pool).await;
            let texts: Vec<String> = pool.iter().map(|h| format!("{}\n{}", h.title, h.text)).collect();
            if let Some((question, docs)) = embedder.token_states(&q.text, &texts).await.unwrap() {
                let every: Vec<&[f32]> = question.vectors.iter().map(Vec::as_slice).collect();
                let rows = pool.iter().zip(&docs).map(|(h, d)| {
                    let best = ports::search::word_matches(&every, d);
                    serde_json::json!([h.doc.to_string(), h.score, h.similarity, h.occurred_at.map(|t| t.0), h.exact, best])
                });
                legs.insert("tokens".to_owned(), serde_json::json!(question.tokens));
                legs.insert("pool".to_owned(), rows.collect());
            }
            // And the pool as late interaction leaves it, before conversation context,
            // with each candidate's time (for studying context).
            let no_context = ports::search::Context { weight: 0.0, weight_after_late: 0.0, ..ports::search::CONTEXT };
            let late = services::search::reorder_with(embedder.as_ref(), &q.text, pool, &no_context).await.unwrap();
            let late = late.iter().map(|h| serde_json::json!([h.doc.to_string(), h.score, h.occurred_at.map(|t| t.0)]));
            legs.insert("late".to_owned(), late.collect());
            legs.insert("bm25".to_owned(), serde_json::json!(plain[q.group.as_str()].search(&q.text, 100)));
            legs.insert("question".to_owned(), serde_json::json!(q.text));
            legs.insert("split".to_owned(), serde_json::json!(q.split));
            legs.insert("group".to_owned(), serde_json::json!(q.group));
            legs.insert("kind".to_owned(), serde_json::json!(q.kind));
            legs.insert("evidence".to_owned(), serde_json::json!(q.evidence));
            lists.push(Value::Object(legs));
        }
        for system in SYSTEMS {
            let ranked: Vec<String> = if system == "plain-bm25" {
                plain[q.group.as_str()].search(&q.text, 10)
            } else {
                let mode = match system {
                    "keyword" => SearchMode::Keyword,
                    "vector" => SearchMode::Vector,
                    _ => SearchMode::Hybrid,
                };
                let hits = if system == "hybrid" {
                    // As the services search: the fused pool ordered again by late interaction.
                    let pool = ask(q, &vector, mode, ports::search::LATE.pool).await;
                    services::search::reorder(embedder.as_ref(), &q.text, pool).await.unwrap()
                } else {
                    ask(q, &vector, mode, 10).await
                };
                hits.into_iter().take(10).map(|h| h.doc.to_string()).collect()
            };
            for kind in [q.kind.as_str(), "all"] {
                report.entry((q.split.clone(), kind.to_owned(), system.to_owned())).or_default().add(&ranked, &q.evidence);
            }
        }
        // `CONTINUITY_CONTEXT_SWEEP=0,0.2,0.5`: hybrid again with each conversation-context
        // weight (`hybrid@0.2`…), for choosing it on the `tune` splits.
        for weight in &sweep {
            let pool = ask(q, &vector, SearchMode::Hybrid, ports::search::LATE.pool).await;
            let context = ports::search::Context { weight: *weight, weight_after_late: *weight, ..ports::search::CONTEXT };
            let hits = services::search::reorder_with(embedder.as_ref(), &q.text, pool, &context).await.unwrap();
            let ranked: Vec<String> = hits.into_iter().take(10).map(|h| h.doc.to_string()).collect();
            for kind in [q.kind.as_str(), "all"] {
                report
                    .entry((q.split.clone(), kind.to_owned(), format!("hybrid@{weight}")))
                    .or_default()
                    .add(&ranked, &q.evidence);
            }
        }
    }
    if let (Some(lists), Some(path)) = (lists, std::env::var_os("CONTINUITY_RECALL_LISTS")) {
        std::fs::write(path, serde_json::to_vec(&lists).unwrap()).unwrap();
    }
    report
}

/// Indexes `corpus` with `embedder` in a fresh embedded backend (each group in a tenant
/// of its own), asks every question with every system, and prints the table.
pub async fn recall_on(embedder: std::sync::Arc<dyn ports::Embedder>, corpus: &Corpus) -> Report {
    recall_with_index(embedder, corpus, None).await
}

/// [`recall_on`] with another search index than the embedded one (the `small`
/// profile's, in `benches/recall_real.sh s3vectors`): only the index differs.
pub async fn recall_with_index(
    embedder: std::sync::Arc<dyn ports::Embedder>,
    corpus: &Corpus,
    index: Option<std::sync::Arc<dyn ports::SearchIndex>>,
) -> Report {
    let home = tempfile::tempdir().unwrap();
    let name = match &index {
        Some(i) => format!("{}, {} index", embedder.name(), i.name()),
        None => embedder.name().to_owned(),
    };
    let mut backend = store_embedded::open_backend_with(home.path(), std::sync::Arc::new(ports::SystemClock), embedder).unwrap();
    if let Some(i) = index {
        backend.search = i;
    }
    let s = Services::new(backend);
    let mut callers = HashMap::new();
    let groups: std::collections::BTreeSet<&str> = corpus.turns.iter().map(|t| t.group.as_str()).collect();
    for group in groups {
        let t = domain::TenantId::new(format!("recall-{group}")).unwrap();
        let (plan, department, industry) =
            (domain::tenant::PlanTier::Enterprise, domain::tenant::Department::Engineering, domain::tenant::Industry::Saas);
        s.admin.create_tenant(t.clone(), plan, department, industry).await.unwrap();
        callers.insert(group.to_owned(), crate::caller(&s, &t, "tenant:read mcp:tools").await);
    }
    let report = evaluate(&s, &callers, corpus).await;
    println!("{}", table(&report, &name));
    report
}

/// The report as a table, one line per split, kind and system.
pub fn table(report: &Report, embedder: &str) -> String {
    let mut out = format!("conversational recall ({embedder}); a hit is an evidence turn in the top k\n");
    out.push_str(&format!(
        "{:<8} {:<12} {:<11} {:>6} {:>6} {:>7} {:>5}\n",
        "split", "kind", "system", "R@5", "R@10", "MRR@10", "n"
    ));
    for ((split, kind, system), s) in report {
        let (r5, r10, mrr) = s.mean();
        out.push_str(&format!("{split:<8} {kind:<12} {system:<11} {r5:>6.3} {r10:>6.3} {mrr:>7.3} {:>5}\n", s.n));
    }
    out
}

/// The baseline: Okapi BM25 (k1 1.2, b 0.75) over lower-cased words, with an
/// English stop-word list, no stemming.
#[derive(Default)]
pub struct PlainBm25 {
    docs: Vec<(String, HashMap<String, u32>, u32)>,
    df: HashMap<String, u32>,
}

const STOP: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "has", "have", "how", "i",
    "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "s", "that", "the", "their", "them", "they", "this", "to",
    "was", "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect()
}

impl PlainBm25 {
    pub fn add(&mut self, id: &str, text: &str) {
        let mut tf: HashMap<String, u32> = HashMap::new();
        let w = words(text);
        for t in &w {
            *tf.entry(t.clone()).or_default() += 1;
        }
        for t in tf.keys() {
            *self.df.entry(t.clone()).or_default() += 1;
        }
        self.docs.push((id.to_owned(), tf, u32::try_from(w.len()).unwrap()));
    }

    pub fn search(&self, query: &str, k: usize) -> Vec<String> {
        let n = f64::from(u32::try_from(self.docs.len()).unwrap());
        let avg = self.docs.iter().map(|d| f64::from(d.2)).sum::<f64>() / n.max(1.0);
        let q = words(query);
        let mut scored: Vec<(f64, &str)> = self
            .docs
            .iter()
            .map(|(id, tf, len)| {
                let score = q
                    .iter()
                    .filter_map(|t| {
                        let f = f64::from(*tf.get(t)?);
                        let df = f64::from(self.df[t]);
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        Some(idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * f64::from(*len) / avg)))
                    })
                    .sum();
                (score, id.as_str())
            })
            .filter(|(s, _)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        scored.into_iter().take(k).map(|(_, id)| id.to_owned()).collect()
    }
}
