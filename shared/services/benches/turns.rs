//! Conversation turns at conversation speed (#36 §2): `memory.write_conversational`
//! through the capability executor on the embedded backend, as `continuity serve` runs
//! it, into a tenant that already holds `TURNS_EXISTING` indexed memories (10 000 by
//! default; those are seeded straight into the index with the embedder's vectors of
//! short generated texts, the write path itself being what is measured).
//!
//! For each embedder (the hashing fallback, and all-MiniLM-L6-v2 when
//! `CONTINUITY_TEST_MODEL_DIR` names it): one client writing turns one after another,
//! then 8 clients at once; prints the acknowledged turns/s, the time until every vector
//! was written (the turns are found by their words at once, by their meaning after
//! that), and each turn's delay from its answer to its vector's readback (p50/p95/max).
//! Run: `cargo bench -p services --bench turns` (`TURNS=500`, `TURNS_EXISTING=100000`).

#![allow(clippy::expect_used, clippy::cast_precision_loss, clippy::cast_possible_truncation)]

use std::sync::Arc;
use std::time::Instant;

use domain::TenantId;
use domain::memory::MemoryScope;
use domain::principal::{CallerContext, Scopes};
use domain::tenant::{Department, Industry, PlanTier};
use ports::search::{DocKind, SearchDoc};
use serde_json::json;
use services::Services;
use services::admin::KeyRequest;

// On the allocator `continuity` itself uses, as `serve` runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SENTENCES: [&str; 8] = [
    "I moved to Lisbon last spring and the light there is unreal",
    "Can you remind me what we decided about the renewal call?",
    "My sister is allergic to peanuts so the cake has to be nut free",
    "The deploy failed again because the migration locked the table",
    "We should book the venue before the price goes up in March",
    "Running every morning before work has really helped my sleep",
    "The customer asked for a refund on the annual plan yesterday",
    "Let's try the new pasta place near the office on Friday",
];

fn sentence(i: usize) -> String {
    format!("{} ({i})", SENTENCES[i % SENTENCES.len()])
}

async fn seed(s: &Services, tenant: &TenantId, n: usize) {
    let embedder = s.backend.embedder.clone();
    for start in (0..n).step_by(256) {
        let texts: Vec<String> = (start..(start + 256).min(n)).map(sentence).collect();
        let vectors = embedder.embed(&texts).await.expect("embed");
        let docs: Vec<SearchDoc> = texts
            .into_iter()
            .zip(vectors)
            .enumerate()
            .map(|(k, (text, vector))| SearchDoc {
                tenant: tenant.clone(),
                scope: MemoryScope::Org,
                id: domain::Id::new(format!("seed-{}~0", start + k)).expect("id"),
                doc: domain::Id::new(format!("seed-{}", start + k)).expect("id"),
                kind: DocKind::Memory,
                title: "Seeded".into(),
                text,
                vector,
                embedder: embedder.name().to_owned(),
                updated_at: domain::Timestamp(0),
                occurred_at: None,
            })
            .collect();
        s.backend.search.upsert(&docs).await.expect("seed");
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted.get(((sorted.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0)
}

/// `clients` writers, `per_client` turns each, in their own sessions; returns the
/// acknowledged rate and the seconds until every vector was in.
async fn write(s: &Services, callers: &[CallerContext], per_client: usize, round: &str) -> (f64, f64) {
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (c, caller) in callers.iter().enumerate() {
        let (s, caller, round) = (s.clone(), caller.clone(), round.to_owned());
        tasks.spawn(async move {
            for i in 0..per_client {
                let args = json!({"session": format!("{round}-{c}"), "role": "user", "content": sentence(i * 7 + c)});
                s.capabilities.execute(&caller, "memory.write_conversational", args).await.expect("write");
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.expect("writer");
    }
    let acked = t0.elapsed().as_secs_f64();
    s.search.settle().await;
    let all = t0.elapsed().as_secs_f64();
    ((callers.len() * per_client) as f64 / acked, all)
}

async fn run(s: Services, label: &str, existing: usize, turns: usize) {
    let tenant = TenantId::new("bench").expect("tenant");
    s.admin
        .create_tenant(tenant.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas)
        .await
        .expect("tenant");
    let t0 = Instant::now();
    seed(&s, &tenant, existing).await;
    println!("{label}: seeded {existing} memories in {:.1} s", t0.elapsed().as_secs_f64());
    let mut callers = Vec::new();
    for _ in 0..8 {
        let key = s
            .admin
            .create_key(KeyRequest {
                tenant: tenant.clone(),
                scopes: Scopes::parse("tenant:read tenant:write mcp:tools memory:read memory:write").expect("scopes"),
                principal: None,
                teams: vec![],
                projects: vec![],
            })
            .await
            .expect("key");
        callers.push(s.auth.authenticate_token(&key.token, "http://localhost").await.expect("caller"));
    }
    // One turn found by its words the moment it is acknowledged (read-your-writes).
    let probe = json!({"session": "probe", "role": "user", "content": "the zebracorn quarterly offsite is in Porto"});
    s.capabilities.execute(&callers[0], "memory.write_conversational", probe).await.expect("probe");
    let found = s
        .capabilities
        .execute(&callers[0], "memory.search", json!({"query": "zebracorn offsite", "scope": "session:probe"}))
        .await
        .expect("search");
    let by_words = found.data.to_string().contains("zebracorn");
    s.search.settle().await;
    let (rate, all) = write(&s, &callers[..1], turns, "seq").await;
    println!(
        "{label}, {existing} existing, 1 client sequential: {rate:.0} turns/s acknowledged, {:.0} turns/s with their vectors \
         (every vector in after {all:.2} s; {turns} turns; found by words at once: {by_words})",
        turns as f64 / all
    );
    let per = (turns / 8).max(1);
    let (rate, all) = write(&s, &callers, per, "par").await;
    println!(
        "{label}, {existing} existing, 8 clients concurrent: {rate:.0} turns/s acknowledged, {:.0} turns/s with their vectors \
         (every vector in after {all:.2} s; {} turns)",
        (per * 8) as f64 / all,
        per * 8
    );
    // The delay from an answer to its vector, turn by turn, with one client writing at
    // its own pace.
    let mut delays = Vec::new();
    for i in 0..50 {
        let args = json!({"session": "delay", "role": "user", "content": sentence(10_000 + i)});
        s.capabilities.execute(&callers[0], "memory.write_conversational", args).await.expect("write");
        let t = Instant::now();
        s.search.settle().await;
        delays.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    delays.sort_by(f64::total_cmp);
    println!(
        "{label}: answer → vector written and read back: p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms",
        quantile(&delays, 0.5),
        quantile(&delays, 0.95),
        quantile(&delays, 1.0)
    );
}

fn main() {
    let turns: usize = std::env::var("TURNS").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let existing: usize = std::env::var("TURNS_EXISTING").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() else { return };
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let hashing = store_embedded::open_backend(&dir.path().join("hashing"), Arc::new(ports::SystemClock)).expect("backend");
        run(Services::new(hashing), "hashing", existing, turns).await;
        match embed::test_model_dir() {
            Some(model_dir) => {
                let model = embed::SentenceModel::load(&model_dir).expect("model");
                let backend =
                    store_embedded::open_backend_with(&dir.path().join("minilm"), Arc::new(ports::SystemClock), Arc::new(model))
                        .expect("backend");
                run(Services::new(backend), "all-MiniLM-L6-v2", existing, turns / 4).await;
            }
            None => println!("all-MiniLM-L6-v2: skipped (set CONTINUITY_TEST_MODEL_DIR to the model folder)"),
        }
    });
}
