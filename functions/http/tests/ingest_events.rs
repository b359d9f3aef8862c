//! The ingest Lambda driven with `events/ingest-*.json`, as API Gateway delivers them
//! after the authorizer, over an embedded backend; then the queued batch is processed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::invoke;

use std::time::Duration;

use domain::{EntityType, TenantId};
use ports::records::EntityStore;

#[tokio::test]
async fn register_then_ingest_from_events() {
    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let demo = TenantId::new("demo").unwrap();

    // Before registration the batch is refused with the URL that registers it.
    let (status, v) = invoke(&s, continuity_tests::event("ingest-hubspot.json")).await;
    assert_eq!(status, 403, "{v}");
    assert_eq!(v["error"]["code"], "CONNECTOR_NOT_AVAILABLE");

    let (status, v) = invoke(&s, continuity_tests::event("ingest-register-hubspot.json")).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["connector"]["state"], "oauth_complete");

    let (status, v) = invoke(&s, continuity_tests::event("ingest-hubspot.json")).await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(v["accepted"], 2);
    assert_eq!(v["status"]["state"], "syncing_initial");

    s.consumer.drain_once(Duration::from_secs(30), Duration::ZERO).await.unwrap();
    let accounts = s
        .backend
        .records
        .list_entities(&demo, Some(&EntityType::new("account").unwrap()), &domain::PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(accounts.items.len(), 1);

    // An unknown source: 404 naming the supported ones. Too large a body: 413.
    let mut ev = continuity_tests::event("ingest-hubspot.json");
    ev["path"] = "/v1/ingest/myspace".into();
    ev["pathParameters"]["source"] = "myspace".into();
    ev["requestContext"]["path"] = "/prod/v1/ingest/myspace".into();
    let (status, v) = invoke(&s, ev).await;
    assert_eq!(status, 404, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("salesforce"), "{v}");
    let mut ev = continuity_tests::event("ingest-hubspot.json");
    ev["body"] = format!("{{\"records\": [\"{}\"]}}", "x".repeat(gateway::body::MAX_BODY_BYTES)).into();
    let (status, v) = invoke(&s, ev).await;
    assert_eq!(status, 413, "{v}");
    assert_eq!(v["error"]["code"], "PAYLOAD_TOO_LARGE");
}

#[tokio::test]
async fn a_kb_document_from_its_event_is_stored_indexed_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let (status, v) = invoke(&s, continuity_tests::event("kb-put-document.json")).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["document"]["id"], "runbook-ingest");
    assert_eq!(v["document"]["scope"], serde_json::json!({"scope": "project", "key": "apollo"}));
    assert_eq!(v["verification"]["verified"], true, "{v}");
    let entities = v["verification"]["entities"].as_array().unwrap();
    assert!(entities.iter().any(|e| e["class"] == "object" && e["text"] == "ops-1423"), "{v}");
    // A caller outside the project cannot write there (and the body is unchanged).
    let mut ev = continuity_tests::event("kb-put-document.json");
    ev["requestContext"]["authorizer"]["projects"] = "".into();
    let (status, v) = invoke(&s, ev).await;
    assert_eq!(status, 403, "{v}");
    // Unknown fields are refused.
    let mut ev = continuity_tests::event("kb-put-document.json");
    ev["body"] = r#"{"title": "t", "body": "b", "owner": "x"}"#.into();
    let (status, v) = invoke(&s, ev).await;
    assert_eq!(status, 400, "{v}");
}

#[tokio::test]
async fn a_record_in_the_review_queue_is_retried_from_its_event() {
    use ports::records::ReviewStore;
    let dir = tempfile::tempdir().unwrap();
    let s = continuity_tests::embedded::demo_services(dir.path()).await;
    let (status, _) = invoke(&s, continuity_tests::event("kb-put-document.json")).await;
    assert_eq!(status, 201);
    // Verified at once: not in the queue, so nothing to retry.
    let (status, v) = invoke(&s, continuity_tests::event("kb-review-retry.json")).await;
    assert_eq!(status, 404, "{v}");
    // Its readback failed (an index outage, say): the retry indexes it again and
    // verifies it, which takes it off the queue.
    let demo = TenantId::new("demo").unwrap();
    let doc = domain::Id::new("runbook-ingest").unwrap();
    let mut failed = s.backend.records.get_verification(&demo, "kb", &doc).await.unwrap().unwrap();
    failed.verified = false;
    failed.reason = "the index write failed; the reindex job retries".into();
    s.backend.records.put_verification(&failed).await.unwrap();
    let (status, v) = invoke(&s, continuity_tests::event("kb-review-retry.json")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["verification"]["verified"], true, "{v}");
    assert!(s.backend.records.list_review(&demo, &domain::PageRequest::first(10)).await.unwrap().items.is_empty());
    // Without approvals:decide: refused.
    s.backend.records.put_verification(&failed).await.unwrap();
    let mut ev = continuity_tests::event("kb-review-retry.json");
    ev["requestContext"]["authorizer"]["scopes"] = "tenant:read tenant:write".into();
    let (status, v) = invoke(&s, ev).await;
    assert_eq!(status, 403, "{v}");
}
