//! Conversation context (issue #35 §1): the services' hybrid search raises a turn's
//! score by its neighbours' in the conversation (`ports::search::CONTEXT`), above the
//! index port, so the same on the embedded backend and on the AWS `small` profile's
//! (turns in DynamoDB on moto, vectors in the S3 Vectors stand-in). With the hashing
//! embedder there are no token states, so context is the only change to the fused
//! order. What it buys is measured by `benches/recall_real.sh`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use domain::TenantId;
use domain::memory::MemoryScope;
use domain::tenant::{Department, Industry, PlanTier};
use ports::Backend;
use ports::search::{CONTEXT, DocKind, SearchMode};
use serde_json::json;
use services::Services;

/// A session in which the answer to the question is the reply to a turn that holds its
/// words, not a turn that holds them.
const TURNS: [(&str, &str); 6] = [
    ("user", "Where did you go on holiday last summer?"),
    ("assistant", "Lisbon, with Ana and the kids: two weeks of summer sun."),
    ("user", "Remind me to order printer ink for the office."),
    ("assistant", "Noted: printer ink for the office."),
    ("user", "What time is the standup tomorrow?"),
    ("assistant", "Nine thirty, in the small meeting room."),
];

async fn the_reply_is_raised_by_the_turn_it_answers(backend: Backend, label: &str) {
    let s = Services::new(backend);
    let t = TenantId::new(format!("context-{label}")).unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Engineering, Industry::Saas).await.unwrap();
    let c = continuity_tests::caller(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
    let mut session = String::new();
    for (role, content) in TURNS {
        let out = s
            .capabilities
            .execute(&c, "memory.write_conversational", json!({"session": "trip", "role": role, "content": content}))
            .await
            .unwrap()
            .data;
        session = out["session"].as_str().unwrap().to_owned();
    }
    s.search.settle().await;
    let question = "where did you go on holiday last summer";
    let scopes = vec![MemoryScope::Session(session)];
    let served = s.search.search(&c, scopes.clone(), Some(DocKind::Turn), question, 10, SearchMode::Hybrid).await.unwrap();
    let fused = continuity_tests::fused_pool(&s, t, scopes, DocKind::Turn, question).await;
    let by_hand = CONTEXT.apply(fused.clone());
    let doc = |h: &ports::search::SearchHit| h.doc.to_string();
    assert_eq!(served.iter().map(doc).collect::<Vec<_>>(), by_hand.iter().take(served.len()).map(doc).collect::<Vec<_>>());
    for (a, b) in served.iter().zip(&by_hand) {
        assert!((a.score - b.score).abs() < 1e-9, "{} scored {} served, {} by hand", a.doc, a.score, b.score);
        assert!((0.0..=1.0).contains(&a.score));
    }
    assert!(served[0].text.contains("holiday"), "{served:#?}");
    let reply = |hits: &[ports::search::SearchHit]| hits.iter().find(|h| h.text.contains("Lisbon")).map(|h| h.score);
    let (before, after) = (reply(&fused).expect("the reply is a candidate"), reply(&served).expect("the reply is served"));
    assert!(after > before, "the reply's score {before} was not raised by the turn it answers ({after}): {served:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_is_raised_by_the_turn_it_answers_embedded() {
    let home = tempfile::tempdir().unwrap();
    let embedder = Arc::new(ports::search::HashingEmbedder::new(384));
    let backend = store_embedded::open_backend_with(home.path(), Arc::new(ports::SystemClock), embedder).unwrap();
    the_reply_is_raised_by_the_turn_it_answers(backend, "embedded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_is_raised_by_the_turn_it_answers_s3vectors() {
    let embedder: Arc<dyn ports::Embedder> = Arc::new(ports::search::HashingEmbedder::new(384));
    let (backend, _standin) = continuity_tests::aws::backend_with_s3vectors("context-s3v", Some(embedder)).await;
    the_reply_is_raised_by_the_turn_it_answers(backend, "s3vectors").await;
}
