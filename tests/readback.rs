//! Readback verification of conversation turns on `serve` (the write path's vector
//! worker, `services::search::readback`): every turn written, by any number of writers at
//! once, ends with its vector and a verified readback — including a turn whose synthetic
//! query ties at the cut with near-identical turns written before it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use continuity_tests::caller;
use domain::PageRequest;
use domain::TenantId;
use domain::memory::MemoryScope;
use domain::tenant::{Department, Industry, PlanTier};
use ports::SystemClock;
use ports::clock::ManualClock;
use ports::records::{MemoryStore, ReviewStore};
use ports::search::{DocKind, SearchMode};
use serde_json::json;
use services::Services;

async fn tenant(s: &Services, name: &str) -> TenantId {
    let t = TenantId::new(name).unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Engineering, Industry::Saas).await.unwrap();
    t
}

/// A conversation turn on `serve` answers once found by its words; its vector follows
/// (batched with others' in the background), then it is found by meaning alone and its
/// readback verification is recorded. Many writers at once: every turn gets its vector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_is_found_by_its_words_at_once_and_by_its_meaning_once_its_vector_is_in() {
    let home = tempfile::tempdir().unwrap();
    let s = Services::new(store_embedded::open_backend(home.path(), Arc::new(SystemClock)).unwrap());
    let t = tenant(&s, "turns").await;
    let ana = caller(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
    let text = "the zebracorn offsite moved to Porto in March";
    let wrote = s
        .capabilities
        .execute(&ana, "memory.write_conversational", json!({"session": "plans", "role": "user", "content": text}))
        .await
        .unwrap()
        .data;
    let session = MemoryScope::Session(wrote["session"].as_str().unwrap().to_owned());
    let by = |mode: SearchMode| {
        let (s, ana, session) = (&s, &ana, session.clone());
        async move { s.search.search(ana, vec![session], Some(DocKind::Turn), "zebracorn offsite Porto", 5, mode).await.unwrap() }
    };
    // Read-your-writes by keyword, with no wait.
    assert_eq!(by(SearchMode::Keyword).await.len(), 1, "found by its words as soon as it is acknowledged");
    s.search.settle().await;
    let by_meaning = by(SearchMode::Vector).await;
    assert_eq!(by_meaning.len(), 1, "found by its vector once it is in");
    assert!(by_meaning[0].similarity.is_some_and(|x| x > 0.2), "{by_meaning:?}");
    let v = s.backend.records.get_verification(&t, "turn", &by_meaning[0].doc).await.unwrap().unwrap();
    assert!(v.verified && v.title.is_empty(), "read back once the vector is in, private: {v:?}");

    // Eight writers at once, 25 turns each: every one ends with its vector.
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..8 {
        let (s, ana) = (s.clone(), ana.clone());
        writers.spawn(async move {
            for i in 0..25 {
                let args = json!({"session": format!("w{w}"), "role": "user", "content": format!("writer {w} says line {i} about quokkas")});
                s.capabilities.execute(&ana, "memory.write_conversational", args).await.unwrap();
            }
        });
    }
    while let Some(r) = writers.join_next().await {
        r.unwrap();
    }
    s.search.settle().await;
    let embedder = s.backend.embedder.name().to_owned();
    for w in 0..8 {
        let session = format!("{}.w{w}", ana.principal);
        let turns = s.backend.records.list_turns(&t, &session, &PageRequest::first(100)).await.unwrap().items;
        assert_eq!(turns.len(), 25);
        for turn in turns {
            let scope = MemoryScope::Session(session.clone());
            let chunks = s.backend.search.chunks(&t, &scope, &turn.id).await.unwrap();
            assert!(
                chunks.len() == 1 && chunks[0].embedder == embedder && !chunks[0].vector.is_empty(),
                "writer {w}: {chunks:?}"
            );
            let v = s.backend.records.get_verification(&t, "turn", &turn.id).await.unwrap().unwrap();
            assert!(v.verified, "{v:?}");
        }
    }
}

/// 2025-03-04T12:00:19.300Z: the turns written in the next 700 ms carry "19" in their
/// titles' time, as line 19's text does.
const AT_19_SECONDS: i64 = 1_741_089_619_300;

/// Near-identical turns ("writer 3 says line {i} about …", the same 17 words but the
/// number), one every 40 ms: with the hashing embedder their vectors are as close to line
/// 19's as its own is (the closeness is capped) and the "19" of the earlier turns'
/// titles (their time) matches its words, so the 18 before it tie with it at the readback
/// query's cut of 10. A tie with the last one
/// kept counts as retrieved: every turn is verified. (Before, the turn written last lost
/// every tie, and this failed on line 19 every time; with a real clock the same thing
/// happened now and then, in the test above.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_tied_at_the_readback_cut_with_near_identical_turns_is_verified() {
    let home = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(AT_19_SECONDS));
    let s = Services::new(store_embedded::open_backend(home.path(), clock.clone()).unwrap());
    let t = tenant(&s, "ties").await;
    let ana = caller(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
    let mut ids = Vec::new();
    for i in 0..25 {
        let args = json!({"session": "w3", "role": "user", "content": format!("writer 3 says line {i} about quokkas, wallabies, wombats and the other marsupials of the island park")});
        let wrote = s.capabilities.execute(&ana, "memory.write_conversational", args).await.unwrap().data;
        ids.push(domain::Id::new(wrote["id"].as_str().unwrap()).unwrap());
        s.search.settle().await;
        clock.advance(40);
    }
    for (i, id) in ids.iter().enumerate() {
        let v = s.backend.records.get_verification(&t, "turn", id).await.unwrap().unwrap();
        assert!(v.verified, "line {i}: {v:?}");
    }
}
