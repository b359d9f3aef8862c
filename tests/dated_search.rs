//! A question that names a day finds what happened that day (`ports::search::query_dates`,
//! `day_terms`), on the embedded index and on the `small` profile's (keyword postings in
//! DynamoDB on moto, vectors in the S3 Vectors stand-in), and through `memory.search`
//! on `serve`'s services. The OpenSearch index's request for it (a `term` on `day` beside
//! the words) is asserted in `store-aws::opensearch`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use continuity_tests::caller_in;
use domain::memory::MemoryScope;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{Id, TenantId, Timestamp};
use ports::clock::{Clock, ManualClock};
use ports::search::{DocKind, SearchDoc, SearchMode, SearchQuery};
use serde_json::json;
use services::Services;

const DAY: i64 = 86_400_000;
/// 2024-01-01T12:00:00Z.
const NEW_YEAR: i64 = 1_704_110_400_000;

/// Ten purchases on ten days, told in the same words (only the thing bought differs, in
/// words no question uses), each on its day among other talk of that day; then
/// questions naming a day.
async fn purchases_by_day(backend: ports::Backend) {
    let index = backend.search.clone();
    let t = TenantId::new(format!("dated-{}", index.name())).unwrap();
    let things = ["lamp", "kettle", "rug", "chair", "mirror", "vase", "clock", "shelf", "stool", "fan"];
    let talk = ["Elise: the weather is lovely", "Elise: my sister called me", "Elise: work ran late again"];
    let mut said = Vec::new();
    for (day, thing) in (0..).zip(things) {
        said.push((format!("turn-{day}"), day, format!("Elise: I bought a new {thing} at the store today")));
        said.extend(talk.iter().enumerate().map(|(i, t)| (format!("talk-{day}-{i}"), day, (*t).to_owned())));
    }
    // Said on the first day, about a later one.
    said.push(("exam".to_owned(), 0, "Elise: my exam is on 21.01.2024, wish me luck".to_owned()));
    let mut docs = Vec::new();
    for (id, day, text) in said {
        let vector = backend.embedder.embed(std::slice::from_ref(&text)).await.unwrap().remove(0);
        docs.push(SearchDoc {
            tenant: t.clone(),
            scope: MemoryScope::Org,
            id: Id::new(format!("{id}~0")).unwrap(),
            doc: Id::new(id).unwrap(),
            kind: DocKind::Turn,
            title: "user".into(),
            text,
            vector,
            embedder: backend.embedder.name().to_owned(),
            updated_at: Timestamp(NEW_YEAR + day * DAY),
            occurred_at: Some(Timestamp(NEW_YEAR + day * DAY)),
        });
    }
    index.upsert(&docs).await.unwrap();
    let ask = |text: &str, mode: SearchMode| {
        let q = SearchQuery {
            tenant: t.clone(),
            scopes: vec![MemoryScope::Org],
            kind: None,
            text: text.to_owned(),
            vector: None,
            embedder: backend.embedder.name().to_owned(),
            mode,
            k: 20,
            since: None,
            until: None,
        };
        let (index, embedder) = (index.clone(), backend.embedder.clone());
        async move {
            let q = SearchQuery { vector: Some(embedder.embed(std::slice::from_ref(&q.text)).await.unwrap().remove(0)), ..q };
            index.search(&q).await.unwrap().into_iter().map(|h| h.doc.as_str().to_owned()).collect::<Vec<_>>()
        }
    };
    // Each way of writing 7 January 2024 (day 6 after New Year) puts that day's turn
    // first, in both modes; the other nine are still found by the words.
    for question in [
        "What did Elise get at the store on 7 Jan 2024?",
        "what did elise get at the store on January 7th, 2024",
        "What did Elise get at the store on 07.01.2024?",
        "Elise got what at the store on 2024-01-07?",
        "What did Elise get at the store on the 7th of January?",
    ] {
        for mode in [SearchMode::Keyword, SearchMode::Hybrid] {
            let found = ask(question, mode).await;
            assert_eq!(found.first().map(String::as_str), Some("turn-6"), "{} {question:?} ({mode:?}): {found:?}", index.name());
            let stores = found.iter().filter(|d| d.starts_with("turn-")).count();
            assert!(stores >= 9, "the words still find the other days' purchases: {found:?}");
        }
    }
    // Another day, another first; a day with nothing on it changes nothing but the
    // question's reach (the purchases still match the words, nothing the day).
    assert_eq!(ask("What did Elise get at the store on 3 January 2024?", SearchMode::Keyword).await[0], "turn-2");
    let none = ask("What did Elise get at the store on 3 March 2025?", SearchMode::Keyword).await;
    assert_eq!(none.len(), 10, "{none:?}");
    assert!(none.iter().all(|d| d.starts_with("turn-")), "{none:?}");
    // A date a turn names is a day of it too, however either writes it.
    for question in ["What is happening on January 21st, 2024?", "what is on 21.01.2024"] {
        assert_eq!(ask(question, SearchMode::Keyword).await.first().map(String::as_str), Some("exam"), "{question}");
    }
}

/// The embedded index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_naming_a_day_finds_that_days_turns_embedded() {
    let home = tempfile::tempdir().unwrap();
    purchases_by_day(store_embedded::open_backend(home.path(), Arc::new(ports::SystemClock)).unwrap()).await;
}

/// The `small` profile's index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_naming_a_day_finds_that_days_turns_s3vectors() {
    let (backend, _) = continuity_tests::aws::backend_with_s3vectors("s3v-dated", None).await;
    purchases_by_day(backend).await;
}

/// Through `memory.search` as an MCP client calls it: turns written on three days, each
/// timed by the clock; a question naming one of the days answers that day's turn first,
/// even though a newer turn replaces it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_search_answers_the_day_a_question_names() {
    let home = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(NEW_YEAR));
    let embedder = Arc::new(ports::search::HashingEmbedder::new(384));
    let s = Services::new(store_embedded::open_backend_with(home.path(), clock.clone(), embedder).unwrap());
    let t = contract::fresh_tenant("dated");
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Engineering, Industry::Saas).await.unwrap();
    let ana = caller_in(&s, &t, "mcp:tools tenant:read memory:read memory:write", &[], &[]).await;
    let mut ids = Vec::new();
    for meal in ["ramen", "tacos", "curry"] {
        let content = format!("Dinner tonight was {meal} with the team");
        let turn = json!({"session": "week", "role": "user", "content": content});
        let written = s.capabilities.execute(&ana, "memory.write_conversational", turn).await.unwrap().data;
        ids.push((written["id"].as_str().unwrap().to_owned(), clock.now()));
        clock.advance(DAY);
    }
    // 2 January 2024 is the second turn's day.
    let found =
        s.capabilities.execute(&ana, "memory.search", json!({"query": "What was dinner on 2 January 2024?"})).await.unwrap().data;
    let first = &found["results"][0];
    assert_eq!(first["id"], ids[1].0.as_str(), "{found}");
    assert!(first["text"].as_str().unwrap().contains("tacos"), "{found}");
    assert_eq!(first["why"]["matched_terms"], json!(["dinner", "2024-01-02"]), "the day carried weight: {found}");
    // It still says a newer dinner replaced it (newest fact wins, issue #35 §3), but the
    // question asked about that day, so the newer one does not go first.
    assert_eq!(first["superseded_by_time"], ids[2].0.as_str(), "{found}");
    // Without the date, the newest dinner comes first.
    let now = s.capabilities.execute(&ana, "memory.search", json!({"query": "What was dinner?"})).await.unwrap().data;
    assert_eq!(now["results"][0]["id"], ids[2].0.as_str(), "{now}");
}
