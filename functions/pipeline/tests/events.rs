//! The pipeline Lambda driven with `events/pipeline-sqs-ingest.json` (an SQS event of two
//! messages), over an embedded backend: the batch is written, the poison record is
//! reported as a partial batch failure so SQS retries only it. A batch's messages run at
//! once: two webhook deliveries whose receiver answers only when both have arrived.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use aws_lambda_events::event::sqs::SqsEvent;
use domain::{EntityType, TenantId};
use ports::records::{EntityStore, Expect, IngestFailureStore, TaskStore};

#[tokio::test]
async fn a_batch_commits_and_the_poison_record_alone_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let demo = TenantId::new("demo").unwrap();
    let event: SqsEvent = serde_json::from_value(continuity_tests::event("pipeline-sqs-ingest.json")).unwrap();
    let poison_id = event.records[1].message_id.clone().unwrap();

    let resp = continuity_pipeline::handle(&s, event.clone()).await;
    assert_eq!(resp.batch_item_failures.len(), 1, "{resp:?}");
    assert_eq!(resp.batch_item_failures[0].item_identifier, poison_id);
    let accounts = s
        .backend
        .records
        .list_entities(&demo, Some(&EntityType::new("account").unwrap()), &domain::PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(accounts.items.len(), 1, "the good batch committed");
    assert_eq!(accounts.items[0].attributes["name"], "Acme Corp".into());

    // SQS redelivers the same event: the batch has no second effect.
    let resp = continuity_pipeline::handle(&s, event).await;
    assert_eq!(resp.batch_item_failures.len(), 1);
    let again = s
        .backend
        .records
        .list_entities(&demo, Some(&EntityType::new("account").unwrap()), &domain::PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(again.items, accounts.items, "a redelivered message has exactly one effect");
    let failures = s.backend.records.list_ingest_failures(&demo, &domain::PageRequest::first(10)).await.unwrap();
    assert_eq!(failures.items.len(), 1);
    assert!(failures.items[0].reason.contains("name"), "{:?}", failures.items[0]);

    // A body that is not ours fails alone, for the DLQ.
    let foreign: SqsEvent =
        serde_json::from_value(serde_json::json!({"Records": [{"messageId": "m-1", "body": "hello"}]})).unwrap();
    assert_eq!(continuity_pipeline::handle(&s, foreign).await.batch_item_failures.len(), 1);
}

/// `events/pipeline-sqs-task.json`: a dispatched task reaches its assignee (`open →
/// dispatched`); the same message again changes nothing.
#[tokio::test]
async fn a_dispatched_task_is_delivered_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let demo = TenantId::new("demo").unwrap();
    let now = s.backend.clock.now();
    let task = domain::spine::Task {
        tenant: demo.clone(),
        id: domain::Id::new("task-demo-1").unwrap(),
        title: "Send Acme the renewal quote".into(),
        body: String::new(),
        status: domain::spine::TaskStatus::Open,
        assignee: domain::Id::new("alice").unwrap(),
        related: Vec::new(),
        created_by: domain::Id::new("bob").unwrap(),
        note: None,
        created_at: now,
        updated_at: now,
        version: 0,
    };
    s.backend.records.put_task(&task, Expect::Absent).await.unwrap();
    let event: SqsEvent = serde_json::from_value(continuity_tests::event("pipeline-sqs-task.json")).unwrap();
    let resp = continuity_pipeline::handle(&s, event.clone()).await;
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    let delivered = s.backend.records.get_task(&demo, &task.id).await.unwrap().unwrap();
    assert_eq!(delivered.status, domain::spine::TaskStatus::Dispatched);
    let resp = continuity_pipeline::handle(&s, event).await;
    assert!(resp.batch_item_failures.is_empty());
    assert_eq!(s.backend.records.get_task(&demo, &task.id).await.unwrap().unwrap().version, delivered.version, "delivered once");
}

/// `events/pipeline-sqs-sync.json`: a connector's pull, run by the pipeline function —
/// HubSpot's companies read in pages from the in-process stand-in
/// (`continuity_tests::sources`; HubSpot itself is not called) and into the pipeline,
/// then the connector completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_pull_runs_in_the_pipeline_function() {
    use continuity_tests::source::FakeSource;
    use continuity_tests::sources::{DAY, World, now_ms, query};
    use domain::connector::{ConnectorSource, ConnectorState};
    use ports::records::ConnectorStore;
    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let demo = TenantId::new("demo").unwrap();
    let fake = FakeSource::start().await;
    let world = World::default();
    world.set(|st| st.base = fake.base_url.clone());
    world.add("companies", 230, now_ms() - 5 * DAY);
    let w = world.clone();
    fake.handle(std::sync::Arc::new(move |seen| w.answer(seen)));
    let app = domain::source::SourceApp {
        client_id: "c".into(),
        client_secret: "s".into(),
        base_url: Some(fake.base_url.clone()),
        webhook_secret: None,
    };
    s.sources.set_app("hubspot", app).await.unwrap();
    let link = s.sources.start_connect(&demo, "hubspot", "https://continuity.example").await.unwrap();
    s.sources.callback(&query(&link)["state"], Some("good-code"), None).await.unwrap();
    // The connect queued a pull of its own; this test runs the event's instead.
    let queued = s.backend.queue.receive(10, std::time::Duration::from_secs(60)).await.unwrap();
    assert!(queued.iter().any(|d| d.message.kind == services::sources::KIND_SYNC));
    fake.take();
    let event: SqsEvent = serde_json::from_value(continuity_tests::event("pipeline-sqs-sync.json")).unwrap();
    let resp = continuity_pipeline::handle(&s, event).await;
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    let searches = fake.take().into_iter().filter(|r| r.path == "/crm/v3/objects/companies/search").count();
    assert_eq!(searches, 3, "230 companies in pages of 100");
    let src = ConnectorSource::new("hubspot").unwrap();
    assert_eq!(s.backend.records.get_connector(&demo, &src).await.unwrap().unwrap().state, ConnectorState::SyncingInitial);
    continuity_tests::drain(&s).await;
    assert_eq!(s.backend.records.get_connector(&demo, &src).await.unwrap().unwrap().state, ConnectorState::SyncComplete);
}

/// Two notification deliveries in one batch, to a receiver that answers each only once
/// both have arrived (else 503 after 5 s): processed one after the other, the first
/// would wait for a second that never comes and fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_runs_its_messages_at_once() {
    use axum::http::StatusCode;
    use domain::notify::{ChannelKind, EventKind};

    let both = std::sync::Arc::new(tokio::sync::Barrier::new(2));
    let arrived = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let app = axum::Router::new().route(
        "/hook/{n}",
        axum::routing::post({
            let (both, arrived) = (both.clone(), arrived.clone());
            move || async move {
                arrived.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                match tokio::time::timeout(std::time::Duration::from_secs(30), both.wait()).await {
                    Ok(_) => StatusCode::NO_CONTENT,
                    Err(_) => StatusCode::SERVICE_UNAVAILABLE,
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let demo = TenantId::new("demo").unwrap();
    for n in 1..=2 {
        s.notify.add(&demo, ChannelKind::Webhook, &format!("{base}/hook/{n}"), vec![EventKind::TaskAssigned]).await.unwrap();
    }
    s.notify.emit(&demo, EventKind::TaskAssigned, "task-1", "Call Acme", "A task for you", None).await;
    let deliveries = s.backend.queue.receive(10, std::time::Duration::from_secs(60)).await.unwrap();
    assert_eq!(deliveries.len(), 2, "one delivery per channel");
    let records: Vec<serde_json::Value> = deliveries
        .iter()
        .enumerate()
        .map(|(i, d)| {
            assert_eq!(d.message.kind, services::notify::KIND_DELIVER);
            serde_json::json!({"messageId": format!("m-{i}"), "body": store_aws::sqs::encode(&d.message).unwrap(),
                "attributes": {"ApproximateReceiveCount": "1"}})
        })
        .collect();
    let event: SqsEvent = serde_json::from_value(serde_json::json!({ "Records": records })).unwrap();

    let resp = continuity_pipeline::handle(&s, event).await;
    assert!(resp.batch_item_failures.is_empty(), "both delivered together: {resp:?}");
    assert_eq!(arrived.load(std::sync::atomic::Ordering::SeqCst), 2, "each delivered once");
    assert!(s.notify.failures(&demo, &domain::PageRequest::first(10)).await.unwrap().items.is_empty());
}

/// `events/pipeline-sqs-readback.json`: a removal's second sweep, run by the pipeline
/// function once the refresh window has passed — the record's chunks written before
/// the sweep's time leave the index; again, nothing changes.
#[tokio::test]
async fn a_removals_second_sweep_runs_in_the_pipeline_function() {
    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let demo = TenantId::new("demo").unwrap();
    let doc = domain::Id::new("kb-demo-1").unwrap();
    let org = domain::memory::MemoryScope::Org;
    let v = s
        .search
        .index(services::search::IndexRequest {
            tenant: &demo,
            scope: &org,
            kind: ports::search::DocKind::Kb,
            doc: &doc,
            title: "Escalation runbook",
            body: "Page the on-call lead, then open an incident channel.",
            at: s.backend.clock.now(),
            occurred: None,
        })
        .await
        .unwrap()
        .unwrap();
    assert!(v.verified && !v.pending, "the embedded index is consistent at once: verified inline: {v:?}");
    assert_eq!(s.backend.search.chunks(&demo, &org, &doc).await.unwrap().len(), 1);
    let event: SqsEvent = serde_json::from_value(continuity_tests::event("pipeline-sqs-readback.json")).unwrap();
    let resp = continuity_pipeline::handle(&s, event.clone()).await;
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    assert!(s.backend.search.chunks(&demo, &org, &doc).await.unwrap().is_empty(), "swept");
    let resp = continuity_pipeline::handle(&s, event).await;
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
}

/// `events/pipeline-sqs-daily-part.json`: a continuation of a tenant's daily run (the
/// run before it stopped at its time budget) goes on where it stopped — the demo
/// tenant's unindexed document gets indexed — and, finishing, queues no further part.
#[tokio::test]
async fn a_daily_runs_continuation_goes_on_in_the_pipeline_function() {
    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let demo = TenantId::new("demo").unwrap();
    let kb = domain::spine::KbDocument {
        tenant: demo.clone(),
        id: domain::Id::new("kb-late").unwrap(),
        scope: domain::memory::MemoryScope::Org,
        title: "Late runbook".into(),
        body: "Restart the ingest worker after a failover.".into(),
        source: None,
        created_at: domain::Timestamp(1),
    };
    ports::records::LibraryStore::put_kb_document(&s.backend.records, &kb).await.unwrap();
    let event: SqsEvent = serde_json::from_value(continuity_tests::event("pipeline-sqs-daily-part.json")).unwrap();
    let resp = continuity_pipeline::handle(&s, event).await;
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    let docs = s.backend.search.doc_ids(&demo, &domain::memory::MemoryScope::Org, 1000).await.unwrap();
    assert!(docs.iter().any(|d| d.as_str() == "kb-late"), "{docs:?}");
    let queued = s.backend.queue.receive(10, std::time::Duration::from_secs(30)).await.unwrap();
    assert!(queued.iter().all(|d| d.message.kind != services::maintenance::KIND_DAILY), "finished: no next part");
}
