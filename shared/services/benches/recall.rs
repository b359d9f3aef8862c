//! Memory speed with the real sentence model (all-MiniLM-L6-v2 on the CPU) on the
//! embedded backend: ingest through the knowledge-base path (embed, link to similar
//! records, index, read back, record the verification) and `memory.search`'s service
//! call (the query's embedding included) at a partition of `RECALL_MEMORIES` memories
//! (default 10 000), then a restart (the first query, and queries while the vector graph
//! is rebuilt in the background), then queries during a burst of writes.
//!
//! `CONTINUITY_TEST_MODEL_DIR=… cargo bench -p services --bench recall`
//! (`RECALL_MEMORIES=100000` for the large run; `CONCURRENCY` writers, default 16).
//!
//! Texts: the 2 494 turns of `tests/corpus/conversations.json`, "speaker: text", repeated
//! with a day number when more are needed (synthetic, and says so). Above 10 000, all but
//! the last 10 000 are preloaded straight through the index port (embedded in bursts of
//! 256 by the same model, no KB records) — the measured ingest is the last 10 000,
//! written through the service into the full partition. Queries: the corpus's questions.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::cast_precision_loss, clippy::cast_possible_truncation)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::memory::MemoryScope;
use domain::principal::{CallerContext, Scopes};
use domain::tenant::{Department, Industry, PlanTier};
use domain::{Id, TenantId, Timestamp};
use ports::Embedder;
use ports::search::{DocKind, SearchDoc, SearchMode};
use services::Services;
use services::admin::KeyRequest;
use services::search::KbInput;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MEASURED: usize = 10_000;

fn corpus() -> (Vec<String>, Vec<String>) {
    let raw = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/corpus/conversations.json")).unwrap();
    let c: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    let mut turns = Vec::new();
    for conv in c["conversations"].as_array().unwrap() {
        for s in conv["sessions"].as_array().unwrap() {
            for t in s["turns"].as_array().unwrap() {
                turns.push(format!("{}: {}", t["speaker"].as_str().unwrap(), t["text"].as_str().unwrap()));
            }
        }
    }
    let questions = c["questions"].as_array().unwrap().iter().map(|q| q["question"].as_str().unwrap().to_owned()).collect();
    (turns, questions)
}

fn text(turns: &[String], i: usize) -> String {
    let base = &turns[i % turns.len()];
    if i < turns.len() { base.clone() } else { format!("{base} (day {})", i / turns.len()) }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    format!("p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms ({} queries)", pct(&ms, 0.5), pct(&ms, 0.95), pct(&ms, 0.99), ms.len())
}

async fn open(home: &std::path::Path, model: &embed::SentenceModel) -> Services {
    Services::new(
        store_embedded::open_backend_with(home, Arc::new(ports::SystemClock), Arc::new(model.clone())).expect("backend"),
    )
}

async fn caller(s: &Services, t: &TenantId) -> CallerContext {
    let key = s
        .admin
        .create_key(KeyRequest {
            tenant: t.clone(),
            scopes: Scopes::parse("tenant:read tenant:write memory:read").expect("scopes"),
            principal: None,
            teams: vec![],
            projects: vec![],
        })
        .await
        .expect("key");
    s.auth.authenticate_token(&key.token, "http://localhost").await.expect("caller")
}

async fn queries(s: &Services, c: &CallerContext, questions: &[String]) -> Vec<f64> {
    let mut ms = Vec::with_capacity(questions.len());
    for q in questions {
        let t = Instant::now();
        let hits = s.search.search(c, vec![MemoryScope::Org], None, q, 10, SearchMode::Hybrid).await.expect("search");
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(!hits.is_empty());
    }
    ms
}

/// Writes memories `range` through the KB path with `concurrency` writers; how many
/// were verified by their readback.
async fn ingest(
    s: &Services,
    c: &CallerContext,
    turns: &Arc<Vec<String>>,
    range: std::ops::Range<usize>,
    concurrency: usize,
) -> usize {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(range.start));
    let mut writers = Vec::new();
    for _ in 0..concurrency {
        let (s, c, turns, next, end) = (s.clone(), c.clone(), turns.clone(), next.clone(), range.end);
        writers.push(tokio::spawn(async move {
            let mut verified = 0;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= end {
                    return verified;
                }
                let input = KbInput {
                    id: Some(format!("m{i}")),
                    scope: None,
                    title: format!("turn {i}"),
                    body: text(&turns, i),
                    source: None,
                };
                let (_, v) = s.search.put_kb_document(&c, input).await.expect("write");
                verified += usize::from(v.is_some_and(|v| v.verified));
                if i > 0 && i.is_multiple_of(2_000) {
                    eprintln!("  written {i}");
                }
            }
        }));
    }
    let mut verified = 0;
    for w in writers {
        verified += w.await.expect("writer");
    }
    verified
}

fn main() {
    let n: usize = std::env::var("RECALL_MEMORIES").ok().and_then(|v| v.parse().ok()).unwrap_or(MEASURED).max(MEASURED);
    let concurrency: usize = std::env::var("CONCURRENCY").ok().and_then(|v| v.parse().ok()).unwrap_or(16).max(1);
    let dir = embed::test_model_dir().expect("set CONTINUITY_TEST_MODEL_DIR to the model folder (tests/run.sh installs it)");
    let model = embed::SentenceModel::load(&dir).expect("model");
    let (turns, questions) = corpus();
    let turns = Arc::new(turns);
    let questions: Vec<String> = questions.into_iter().take(300).collect();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        let home = tempfile::tempdir().expect("tempdir");
        let t = TenantId::new("bench").expect("tenant");
        // As `serve` does: the token states are kept in the home too.
        model.keep_states_in(&home.path().join("token-states.sqlite"), embed::DEFAULT_DISK_BYTES).expect("token states file");
        let s = open(home.path(), &model).await;
        s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.expect("tenant");
        let c = caller(&s, &t).await;
        println!("recall speed: {n} memories, {} (2 cores), {concurrency} writers", model.name());

        let preload = n - MEASURED;
        if preload > 0 {
            let t0 = Instant::now();
            for start in (0..preload).step_by(256) {
                let texts: Vec<String> = (start..(start + 256).min(preload)).map(|i| text(&turns, i)).collect();
                // As the KB path embeds a chunk: its title, then its text.
                let titled: Vec<String> = texts.iter().enumerate().map(|(j, t)| format!("turn {}\n{t}", start + j)).collect();
                let vectors = model.embed(&titled).await.expect("embed");
                let docs: Vec<SearchDoc> = texts
                    .into_iter()
                    .zip(vectors)
                    .enumerate()
                    .map(|(j, (text, vector))| SearchDoc {
                        tenant: t.clone(),
                        scope: MemoryScope::Org,
                        id: Id::new(format!("p{}~0", start + j)).unwrap(),
                        doc: Id::new(format!("p{}", start + j)).unwrap(),
                        kind: DocKind::Kb,
                        title: format!("turn {}", start + j),
                        text,
                        vector,
                        embedder: model.name().to_owned(),
                        updated_at: Timestamp(0),
                        occurred_at: None,
                    })
                    .collect();
                s.backend.search.upsert(&docs).await.expect("upsert");
                if (start / 256).is_multiple_of(40) {
                    eprintln!("  preloaded {start} ({:.0} s)", t0.elapsed().as_secs_f64());
                }
            }
            let secs = t0.elapsed().as_secs_f64();
            println!("  preload {preload} through the index port (embedding in bursts of 256 + upsert): {:.0} memories/s ({secs:.0} s)", preload as f64 / secs);
        }

        let t0 = Instant::now();
        let verified = ingest(&s, &c, &turns, preload..n, concurrency).await;
        let secs = t0.elapsed().as_secs_f64();
        println!(
            "  ingest {MEASURED} through the KB path (embed + link + index + readback + verification record): {:.0} memories/s ({secs:.1} s; {verified} verified)",
            MEASURED as f64 / secs
        );

        let mut embed_ms: Vec<f64> = Vec::new();
        for q in questions.iter().take(100) {
            let t = Instant::now();
            model.embed_query(q).await.expect("embed");
            embed_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        println!("  the query's embedding alone: {}", summary(embed_ms));
        println!("  memory search (hybrid, k 10, embedding included): {}", summary(queries(&s, &c, &questions).await));
        let (kept, bytes, misses) = model.token_cache();
        let on_disk: u64 = ["token-states.sqlite", "token-states.sqlite-wal"]
            .iter()
            .filter_map(|f| std::fs::metadata(home.path().join(f)).ok())
            .map(|m| m.len())
            .sum();
        println!(
            "  token states kept: {kept} texts, {:.0} MiB in memory, {:.0} MiB on disk; texts run again by searches so far: {misses}",
            bytes as f64 / (1 << 20) as f64,
            on_disk as f64 / (1 << 20) as f64
        );

        // A burst of writes while searching.
        let writes = {
            let (s, c, turns) = (s.clone(), c.clone(), turns.clone());
            tokio::spawn(async move { ingest(&s, &c, &turns, n..n + 1_000, concurrency).await })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let during = queries(&s, &c, &questions[..100]).await;
        let burst_done = writes.is_finished();
        writes.await.expect("burst");
        println!(
            "  memory search during a burst of 1 000 writes: {}{}",
            summary(during),
            if burst_done { " (the burst ended before the queries did)" } else { "" }
        );

        // A restart: the partition is loaded from SQLite on first use, its graph built
        // in the background.
        drop(s);
        tokio::time::sleep(Duration::from_millis(500)).await;
        // A new process has no token states in memory: they are read from the file.
        model.set_token_cache(0);
        model.set_token_cache(embed::DEFAULT_CACHE_BYTES);
        let s = open(home.path(), &model).await;
        let t0 = Instant::now();
        s.search.search(&c, vec![MemoryScope::Org], None, &questions[0], 10, SearchMode::Hybrid).await.expect("first");
        println!("  first query after a restart (loads the partition): {:.2} s", t0.elapsed().as_secs_f64());
        println!("  the next queries (exact scan while the graph builds, then the graph): {}", summary(queries(&s, &c, &questions[1..101]).await));
    });
}
