//! Search benchmark (SPEC §5.4): 100 000 memories at 384 dimensions in one partition
//! of the embedded index — build time, hybrid query latency (p50/p95), HNSW recall@10
//! against an exact scan, and two restarts in new processes (from the rows, and from the
//! partition saved at the stop): time to the first answer, queries after it, resident
//! memory.
//!
//! `cargo bench -p store-embedded --bench search` (`SEARCH_DOCS=20000` for a smaller run).
//!
//! The data is synthetic, and says so: texts of 12-40 words drawn (Zipf) from a
//! 5 000-word vocabulary (letters only), and vectors around 2 000 topic centres (unit Gaussian
//! noise), so both retrievers face realistic structure — real sentence embeddings
//! cluster by topic — without embedding 100 000 texts first. Query vectors are fresh
//! points near a random centre; query texts 2-5 words.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::cast_precision_loss, clippy::cast_possible_truncation)]

use std::time::Instant;

use domain::memory::MemoryScope;
use domain::{Id, TenantId, Timestamp};
use ports::search::{DocKind, SearchDoc, SearchIndex, SearchMode, SearchQuery, dot, normalize};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use store_embedded::{Db, SqliteSearch};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DIM: usize = 384;
const CENTRES: usize = 2_000;
const VOCAB: usize = 5_000;
const EMBEDDER: &str = "bench-384";

fn gaussian(rng: &mut StdRng) -> f32 {
    // Box-Muller.
    let (u, v): (f32, f32) = (rng.random_range(1e-7..1.0), rng.random());
    (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
}

fn near(rng: &mut StdRng, centre: &[f32], spread: f32) -> Vec<f32> {
    let mut v: Vec<f32> = centre.iter().map(|c| c + spread * gaussian(rng)).collect();
    normalize(&mut v);
    v
}

fn zipf_word(rng: &mut StdRng) -> String {
    // Rank ~ 1/u, capped: a few words are everywhere, most are rare.
    let u: f64 = rng.random_range(0.0002..1.0);
    let mut rank = ((1.0 / u) as usize).min(VOCAB) - 1;
    // Letters only, so no word looks like an identifier (those are promoted).
    let mut w = String::from("w");
    loop {
        w.push(char::from(b'a' + (rank % 26) as u8));
        rank /= 26;
        if rank == 0 {
            break;
        }
    }
    w
}

/// A figure of this process's `/proc/self/status` (`VmRSS:`, `RssAnon:`…) in MiB.
fn status_mib(name: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()).unwrap_or(0)
        / 1024
}

/// The top ten of the bench's partition for `text` and `v`.
fn query(tenant: &TenantId, text: &str, v: &[f32], mode: SearchMode) -> SearchQuery {
    SearchQuery {
        tenant: tenant.clone(),
        scopes: vec![MemoryScope::Org],
        kind: None,
        text: text.to_owned(),
        vector: Some(v.to_vec()),
        embedder: EMBEDDER.into(),
        mode,
        k: 10,
        since: None,
        until: None,
    }
}

/// Spread such that a point is closer to its own centre than to others, but its
/// neighbours are not trivially separable (cosine to centre ≈ 0.7).
const SPREAD: f32 = 0.052;

/// The topic centres (the same for the same generator state).
fn centres(rng: &mut StdRng) -> Vec<Vec<f32>> {
    (0..CENTRES)
        .map(|_| {
            let mut c: Vec<f32> = (0..DIM).map(|_| gaussian(rng)).collect();
            normalize(&mut c);
            c
        })
        .collect()
}

/// 1 000 queries: 2-5 words, and a vector near a random centre.
fn queries(rng: &mut StdRng, centres: &[Vec<f32>], spread: f32) -> Vec<(String, Vec<f32>)> {
    (0..1_000)
        .map(|_| {
            let c = &centres[rng.random_range(0..CENTRES)];
            let words: Vec<String> = (0..rng.random_range(2..6)).map(|_| zipf_word(rng)).collect();
            (words.join(" "), near(rng, c, spread))
        })
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if let Some(db) = std::env::var_os("SEARCH_BENCH_REOPEN") {
        reopen(std::path::Path::new(&db)).await;
        // Not waiting for a graph still building in the background.
        std::process::exit(0);
    }
    let n: usize = std::env::var("SEARCH_DOCS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let mut rng = StdRng::seed_from_u64(42);
    let centres = centres(&mut rng);
    let tenant = TenantId::new("bench").unwrap();
    let docs: Vec<SearchDoc> = (0..n)
        .map(|i| {
            let c = &centres[rng.random_range(0..CENTRES)];
            let words: Vec<String> = (0..rng.random_range(12..40)).map(|_| zipf_word(&mut rng)).collect();
            SearchDoc {
                tenant: tenant.clone(),
                scope: MemoryScope::Org,
                id: Id::new(format!("m{i}~0")).unwrap(),
                doc: Id::new(format!("m{i}")).unwrap(),
                kind: DocKind::Memory,
                title: format!("memory {i}"),
                text: words.join(" "),
                vector: near(&mut rng, c, SPREAD),
                embedder: EMBEDDER.into(),
                updated_at: Timestamp(i as i64),
                occurred_at: None,
            }
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&dir.path().join("bench.db")).unwrap();
    let rss0 = status_mib("VmRSS:");

    eprintln!("indexing {n} memories at {DIM} dimensions…");
    let t = Instant::now();
    let index = SqliteSearch::new(db.clone(), EMBEDDER, DIM);
    for (i, batch) in docs.chunks(1_000).enumerate() {
        index.upsert(batch).await.unwrap();
        if (i + 1) % 20 == 0 {
            eprintln!("  {} / {n} ({:.0} s)", (i + 1) * 1_000, t.elapsed().as_secs_f64());
        }
    }
    let build = t.elapsed().as_secs_f64();

    // Exact neighbours for the recall check, and the query set.
    let queries = queries(&mut rng, &centres, SPREAD);
    let query = |text: &str, v: &[f32], mode| query(&tenant, text, v, mode);
    let mut found = 0usize;
    let recall_queries = 200;
    for (text, v) in queries.iter().take(recall_queries) {
        let mut exact: Vec<(f32, usize)> = docs.iter().enumerate().map(|(i, d)| (dot(v, &d.vector), i)).collect();
        exact.select_nth_unstable_by(10, |a, b| b.0.total_cmp(&a.0));
        let truth: std::collections::HashSet<String> = exact[..10].iter().map(|(_, i)| format!("m{i}")).collect();
        let got = index.search(&query(text, v, SearchMode::Vector)).await.unwrap();
        found += got.iter().filter(|h| truth.contains(h.doc.as_str())).count();
    }
    let recall = found as f64 / (recall_queries * 10) as f64;

    let mut lat = Vec::with_capacity(queries.len());
    for (text, v) in &queries {
        let t = Instant::now();
        let hits = index.search(&query(text, v, SearchMode::Hybrid)).await.unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(!hits.is_empty());
    }
    lat.sort_by(f64::total_cmp);
    let hwm = status_mib("VmHWM:");

    // Restarts, each in a fresh process (so its resident memory is the index's, not
    // this process's leftovers): first from the rows, as after a crash; then from the
    // partition saved as `serve` saves it when it stops.
    let db_path = db.path().to_path_buf();
    drop(docs);
    let from_rows = restart(&db_path);
    let t = Instant::now();
    let saved = index.save_partitions().await.unwrap();
    let save_secs = t.elapsed().as_secs_f64();
    let saved_bytes: u64 = std::fs::read_dir(db_path.with_file_name("bench.db.search"))
        .map(|d| d.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0);
    drop(index);
    let from_saved = restart(&db_path);
    println!("search benchmark: {n} memories, {DIM} dimensions, one partition (synthetic data)");
    println!("  index build (SQLite + BM25 + HNSW m 16, ef_construction 64): {build:.1} s ({:.0} memories/s)", n as f64 / build);
    println!(
        "  hybrid query latency over {} queries: p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms",
        lat.len(),
        percentile(&lat, 0.50),
        percentile(&lat, 0.95),
        percentile(&lat, 0.99)
    );
    println!(
        "  HNSW recall@10 against exact ({recall_queries} queries, ef_search {}): {recall:.3}",
        store_embedded::search::hnsw::EF_SEARCH
    );
    println!(
        "  peak resident memory of the building process (it also held the generated data): {hwm} MiB ({rss0} MiB before indexing)"
    );
    println!("  restart from the rows (a new process; as after a crash):");
    print!("{from_rows}");
    println!(
        "  saved at the stop: {saved} partition(s), {:.0} MiB, in {save_secs:.2} s",
        saved_bytes as f64 / (1u64 << 20) as f64
    );
    println!("  restart from the saved partition (a new process):");
    print!("{from_saved}");
}

/// Runs this bench again as a new process that opens the database and answers queries
/// (see [`reopen`]); returns what it printed.
fn restart(db: &std::path::Path) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap()).env("SEARCH_BENCH_REOPEN", db).output().unwrap();
    assert!(out.status.success(), "the restarted process failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The restarted process: the first query's time (what it loads: the saved partition,
/// or the rows), queries until the graph is ready (from the rows it is built in the
/// background: 100 queries are timed, not the whole build), and resident memory.
async fn reopen(db: &std::path::Path) {
    let mut rng = StdRng::seed_from_u64(42);
    let centres = centres(&mut rng);
    let queries = queries(&mut StdRng::seed_from_u64(7), &centres, SPREAD);
    let tenant = TenantId::new("bench").unwrap();
    let query = |text: &str, v: &[f32]| query(&tenant, text, v, SearchMode::Hybrid);
    let t = Instant::now();
    let index = SqliteSearch::new(Db::open(db).unwrap(), EMBEDDER, DIM);
    index.search(&query(&queries[0].0, &queries[0].1)).await.unwrap();
    let first = t.elapsed().as_secs_f64();
    let graph_at_first = index.graph_ready(&tenant, &MemoryScope::Org).await;
    let mut lat = Vec::new();
    for (text, v) in queries.iter().take(if graph_at_first { 1_000 } else { 100 }) {
        let t = Instant::now();
        index.search(&query(text, v)).await.unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    lat.sort_by(f64::total_cmp);
    println!("    first query answered after {first:.2} s (opening the database, loading the partition)");
    println!(
        "    then {} hybrid queries {}: p50 {:.2} ms, p95 {:.2} ms",
        lat.len(),
        if graph_at_first { "on the graph" } else { "by exact scan while the graph is rebuilt in the background" },
        percentile(&lat, 0.50),
        percentile(&lat, 0.95)
    );
    println!(
        "    resident memory: {} MiB (anonymous {} MiB, mapped database pages {} MiB; peak {} MiB)",
        status_mib("VmRSS:"),
        status_mib("RssAnon:"),
        status_mib("RssFile:") + status_mib("RssShmem:"),
        status_mib("VmHWM:")
    );
}
