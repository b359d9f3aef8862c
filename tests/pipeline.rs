//! The Spine ingestion pipeline end to end on both backends (SPEC §2.1, §4.5, §9):
//! the sample payloads of five sources in `events/sources/` → ingest API → queue →
//! loader → normalizer → writer → readable and searchable through the capability
//! service (the MCP tools' executor), canonical fields only; connector statuses; signals;
//! redelivery and reordering converge; a poison record is dead-lettered with its reason
//! while the rest of its batch commits; malformed input gets per-record errors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use domain::connector::{ConnectorSource, ConnectorState};
use domain::principal::CallerContext;
use domain::spine::EntityRef;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{EntityType, ErrorCode, PageRequest, TenantId};
use ports::records::{ConnectorStore, Direction, EntityStore, RelationshipStore, SignalStore};
use ports::{Backend, SystemClock};
use serde_json::{Value, json};
use services::Services;
use services::ingest::mapping::canonical_id;

const SOURCES: [&str; 5] = ["hubspot", "salesforce", "stripe", "zendesk", "jira"];

fn sample(name: &str) -> Value {
    let path = continuity_tests::workspace_root().join(format!("events/sources/{name}.json")).display().to_string();
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))).unwrap()
}

async fn caller(s: &Services) -> CallerContext {
    let t = contract::fresh_tenant("pipe");
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    continuity_tests::caller(s, &t, "mcp:tools tenant:read tenant:write memory:read").await
}

async fn state(s: &Services, t: &TenantId, source: &str) -> ConnectorState {
    s.backend.records.get_connector(t, &ConnectorSource::new(source).unwrap()).await.unwrap().unwrap().state
}

/// Everything the Spine holds for the tenant, as JSON text.
async fn spine_dump(b: &Backend, t: &TenantId) -> String {
    let mut out = Vec::new();
    let entities = b.records.list_entities(t, None, &PageRequest::first(500)).await.unwrap();
    for e in &entities.items {
        out.push(serde_json::to_value(e).unwrap());
        let r = EntityRef { entity_type: e.entity_type.clone(), id: e.id.clone() };
        let rels = b.records.list_relationships(t, &r, Direction::Outgoing, &PageRequest::first(100)).await.unwrap();
        out.extend(rels.items.iter().map(|x| serde_json::to_value(x).unwrap()));
    }
    let signals = b.records.list_signals(t, None, &PageRequest::first(500)).await.unwrap();
    out.extend(signals.items.iter().map(|x| serde_json::to_value(x).unwrap()));
    serde_json::to_string(&out).unwrap()
}

async fn get(s: &Services, c: &CallerContext, ty: &str, id: &str) -> Value {
    s.capabilities.execute(c, "spine.entity.get", json!({"type": ty, "id": id})).await.unwrap().data["entity"].clone()
}

/// A stable digest of the tenant's entity set: what restore must reproduce (versions
/// and write times are the new store's own).
async fn entity_set(records: &ports::Records, t: &TenantId) -> (usize, String) {
    let entities = records.list_entities(t, None, &PageRequest::first(500)).await.unwrap().items;
    let mut rows: Vec<String> = entities
        .iter()
        .map(|e| serde_json::to_string(&json!([e.entity_type, e.id, e.pole_class, e.attributes, e.source_updated_at])).unwrap())
        .collect();
    rows.sort();
    (rows.len(), services::sha256_hex(&rows.join("\n")))
}

async fn pipeline(backend: Backend, empty: ports::Records) {
    let s = Services::new(backend.clone());
    let c = caller(&s).await;
    let t = c.tenant.clone();

    // Unregistered and unknown sources.
    let e = s.ingest.accept(&c, "hubspot", sample("hubspot")).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::ConnectorNotAvailable);
    let e = s.ingest.register(&c, "myspace").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    for name in SOURCES {
        assert!(e.message.contains(name), "the 404 lists the supported sources: {}", e.message);
    }

    // Five sources, first batches.
    for source in SOURCES {
        let st = s.ingest.register(&c, source).await.unwrap();
        assert_eq!(st.state, ConnectorState::OauthComplete);
        let a = s.ingest.accept(&c, source, sample(source)).await.unwrap();
        assert!(a.rejected.is_empty(), "{source}: {:?}", a.rejected);
        assert_eq!(a.status.state, ConnectorState::SyncingInitial, "{source}: the first batch starts the initial sync");
    }
    assert_eq!(state(&s, &t, "hubspot").await, ConnectorState::SyncingInitial);
    // Every registration and batch is in the ledger, refused ones with their code: the
    // use case audits, whichever edge called it.
    let ledger = ports::records::AuditLog::list_audit(&s.backend.records, &t, &PageRequest::first(500)).await.unwrap().items;
    let seen = |action: &str, target: &str, outcome: &str| {
        ledger.iter().filter(|r| r.action == action && r.target.as_deref() == Some(target) && r.outcome == outcome).count()
    };
    assert_eq!(seen("ingest.accept", "hubspot", "CONNECTOR_NOT_AVAILABLE"), 1);
    assert_eq!(seen("connector.register", "myspace", "NOT_FOUND"), 1);
    for source in SOURCES {
        assert_eq!((seen("connector.register", source, "ok"), seen("ingest.accept", source, "ok")), (1, 1), "{source}");
    }
    continuity_tests::drain(&s).await;
    // hubspot's first batch was not final; the others were.
    assert_eq!(state(&s, &t, "hubspot").await, ConnectorState::SyncingInitial);
    for source in ["salesforce", "stripe", "zendesk", "jira"] {
        assert_eq!(state(&s, &t, source).await, ConnectorState::SyncComplete, "{source}");
    }

    // Readable through the capability service with canonical fields only.
    let acme = canonical_id("hubspot", "account", "9001");
    let account = get(&s, &c, "account", acme.as_str()).await;
    assert_eq!(account["attributes"]["name"], "Acme Corp");
    assert_eq!(account["attributes"]["lifecycle_stage"], "opportunity");
    assert_eq!(account["attributes"]["employee_count"], 420);
    let ada = get(&s, &c, "contact", canonical_id("hubspot", "contact", "501").as_str()).await;
    assert_eq!(ada["attributes"]["full_name"], "Ada Lovelace");
    assert_eq!(ada["attributes"]["account_id"], acme.as_str());
    let sub = get(&s, &c, "subscription", canonical_id("stripe", "subscription", "sub_1QxInitech").as_str()).await;
    assert_eq!(sub["attributes"]["mrr"], 999.0);
    assert_eq!(sub["attributes"]["plan_name"], "Growth");
    let case = get(&s, &c, "ticket", canonical_id("salesforce", "ticket", "500Dn00000Case1").as_str()).await;
    assert_eq!(case["attributes"]["priority"], "High");
    let jira = get(&s, &c, "ticket", canonical_id("jira", "ticket", "10002").as_str()).await;
    assert_eq!(jira["attributes"]["key"], "ENG-42");
    let found =
        s.capabilities.execute(&c, "spine.entity.search", json!({"query": "SSO login"})).await.unwrap().data["entities"].clone();
    assert_eq!(found.as_array().unwrap().len(), 1, "{found}");
    let rels = backend
        .records
        .list_relationships(
            &t,
            &EntityRef { entity_type: EntityType::new("contact").unwrap(), id: canonical_id("hubspot", "contact", "501") },
            Direction::Outgoing,
            &PageRequest::first(10),
        )
        .await
        .unwrap();
    assert_eq!(rels.items.len(), 1);
    assert_eq!(rels.items[0].to.id, acme);

    // The update moves the stage: a signal; the final batch completes the sync.
    s.ingest.accept(&c, "hubspot", sample("hubspot-update")).await.unwrap();
    continuity_tests::drain(&s).await;
    assert_eq!(state(&s, &t, "hubspot").await, ConnectorState::SyncComplete);
    let account = get(&s, &c, "account", acme.as_str()).await;
    assert_eq!(account["attributes"]["lifecycle_stage"], "customer", "the next read sees the new value (cache evicted)");
    let signals = backend.records.list_signals(&t, None, &PageRequest::first(50)).await.unwrap().items;
    assert_eq!(signals.len(), 1, "{signals:?}");
    assert_eq!(signals[0].kind.as_str(), "stage_changed");
    assert_eq!(signals[0].before, Some("opportunity".into()));
    assert_eq!(signals[0].after, Some("customer".into()));

    // No source tool name and no source field name anywhere in the Spine.
    let dump = spine_dump(&backend, &t).await;
    for word in SOURCES.iter().copied().chain([
        "properties",
        "lifecyclestage",
        "LastModifiedDate",
        "attributes\":{\"type",
        "cus_",
        "sub_1",
        "evt_",
        "001Dn",
    ]) {
        assert!(!dump.contains(word), "the Spine records contain {word:?}: {dump}");
    }

    // The same batches again, three times and out of order: nothing changes.
    let before = spine_dump(&backend, &t).await;
    for batch in ["hubspot-update", "hubspot", "hubspot", "hubspot-update", "hubspot"] {
        let mut body = sample(batch);
        body["final"] = json!(false);
        s.ingest.accept(&c, "hubspot", body).await.unwrap();
    }
    continuity_tests::drain(&s).await;
    assert_eq!(spine_dump(&backend, &t).await, before, "redelivered and reordered records converge to one state");

    // Malformed records: per-record errors, the rest proceeds; too many: 413.
    let a = s
        .ingest
        .accept(
            &c,
            "hubspot",
            json!({"records": [
                42,
                {"objectType": "line_items", "id": "1", "updatedAt": "2026-11-21T00:00:00Z"},
                {"objectType": "companies", "id": "9002", "updatedAt": "yesterday", "properties": {"name": "Bad Time"}},
                {"objectType": "companies", "id": "9003", "updatedAt": "2026-11-21T00:00:00Z", "properties": {"name": "Hooli"}},
                {"objectType": "companies", "id": "9004", "updatedAt": "2026-11-21T00:00:00Z", "properties": {"domain": "nameless.example"}}
            ]}),
        )
        .await
        .unwrap();
    assert_eq!(a.accepted, 2);
    assert_eq!(a.rejected.iter().map(|r| r.index).collect::<Vec<_>>(), vec![0, 1, 2], "{:?}", a.rejected);
    assert!(a.rejected[0].message.contains("JSON object"));
    assert!(a.rejected[2].message.contains("updatedAt"));
    let too_many = json!({"records": vec![json!({}); services::ingest::MAX_RECORDS_PER_BATCH + 1]});
    assert_eq!(s.ingest.accept(&c, "hubspot", too_many).await.unwrap_err().code, ErrorCode::PayloadTooLarge);
    assert_eq!(s.ingest.accept(&c, "hubspot", json!([1])).await.unwrap_err().code, ErrorCode::InvalidRequest);

    // 9004 has no name (required): a poison record. Its batch-mate 9003 commits; 9004 is
    // retried alone and dead-lettered with its reason.
    continuity_tests::drain(&s).await;
    assert_eq!(get(&s, &c, "account", canonical_id("hubspot", "account", "9003").as_str()).await["attributes"]["name"], "Hooli");
    let poison = canonical_id("hubspot", "account", "9004");
    let e = s.capabilities.execute(&c, "spine.entity.get", json!({"type": "account", "id": poison.as_str()})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "nothing half-written");
    let failures = s.ingest.failures(&c, &PageRequest::first(10)).await.unwrap().items;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].dead_lettered, "{failures:?}");
    assert_eq!(failures[0].attempts, services::ingest::POISON_ATTEMPTS);
    assert!(failures[0].reason.contains("name"), "{}", failures[0].reason);
    // The loader kept the split-off record in its own raw blob, beside its batch's.
    let raw_of = |path: String| {
        let (b, t) = (backend.clone(), t.clone());
        async move {
            let bytes = b.blobs.get(&ports::blob::BlobKey::new(&t, &path).unwrap()).await.unwrap().expect("raw blob");
            serde_json::from_slice::<Vec<Value>>(&bytes).unwrap().len()
        }
    };
    assert_eq!(raw_of(failures[0].raw_blob.clone()).await, 1);
    let batch_blob = format!("{}.json", failures[0].raw_blob.rsplit_once("-r").unwrap().0);
    assert_eq!(raw_of(batch_blob).await, 2, "the batch's raw records are intact");
    let dead = backend.queue.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].message.kind, services::ingest::KIND_RECORD);
    assert_eq!(dead[0].message.tenant, t);

    // Real source shapes: HubSpot's singular and numeric object types; Salesforce records
    // without `attributes` (recognised by the id's key prefix) beside ones with it.
    let at = "2026-11-21T00:00:00Z";
    let a = s
        .ingest
        .accept(
            &c,
            "hubspot",
            json!({"records": [
                {"objectType": "company", "id": "9101", "updatedAt": at, "properties": {"name": "Singular Co"}},
                {"objectType": "0-2", "id": "9102", "updatedAt": at, "properties": {"name": "Numeric Co"}},
                {"objectType": "0-1", "id": "601", "updatedAt": at,
                 "properties": {"firstname": "Grace", "lastname": "Hopper", "associatedcompanyid": "9102"}}
            ]}),
        )
        .await
        .unwrap();
    assert!(a.rejected.is_empty(), "{:?}", a.rejected);
    let sf_at = "2026-11-21T00:00:00.000+0000";
    let a = s
        .ingest
        .accept(
            &c,
            "salesforce",
            json!({"records": [
                {"Id": "001Dn00000Bare1", "Name": "Bare Account", "LastModifiedDate": sf_at},
                {"Id": "003Dn00000Bare2", "FirstName": "Bare", "LastName": "Contact", "AccountId": "001Dn00000Bare1", "LastModifiedDate": sf_at},
                {"attributes": {"type": "Account", "url": "/services/data/v62.0/sobjects/Account/001Dn00000Full1"},
                 "Id": "001Dn00000Full1", "Name": "Full Account", "LastModifiedDate": sf_at},
                {"Id": "006Dn00000Opp01", "Name": "An opportunity: not a kind we map", "LastModifiedDate": sf_at}
            ]}),
        )
        .await
        .unwrap();
    assert_eq!(a.rejected.iter().map(|r| r.index).collect::<Vec<_>>(), vec![3], "{:?}", a.rejected);
    continuity_tests::drain(&s).await;
    let name = |ty: &'static str, source: &'static str, id: &'static str| {
        let (s, c) = (&s, &c);
        async move { get(s, c, ty, canonical_id(source, ty, id).as_str()).await["attributes"].clone() }
    };
    assert_eq!(name("account", "hubspot", "9101").await["name"], "Singular Co");
    assert_eq!(name("account", "hubspot", "9102").await["name"], "Numeric Co");
    assert_eq!(name("contact", "hubspot", "601").await["account_id"], canonical_id("hubspot", "account", "9102").as_str());
    assert_eq!(name("account", "salesforce", "001Dn00000Bare1").await["name"], "Bare Account");
    assert_eq!(name("contact", "salesforce", "003Dn00000Bare2").await["full_name"], "Bare Contact");
    assert_eq!(name("account", "salesforce", "001Dn00000Full1").await["name"], "Full Account");

    // A final batch that brings nothing usable ends the sync in error, with the reason —
    // rejected by the shape check (zendesk), or failing in the normalizer (hubspot: a
    // company without its required name) — and the next good batch resumes it.
    assert_eq!(state(&s, &t, "zendesk").await, ConnectorState::SyncComplete);
    let a = s
        .ingest
        .accept(&c, "zendesk", json!({"records": [42, {"url": "https://x.zendesk.com/api/v2/users/1.json"}], "final": true}))
        .await
        .unwrap();
    assert_eq!((a.accepted, a.status.state), (0, ConnectorState::SyncError), "{:?}", a.status);
    let msg = a.status.error_message.clone().unwrap_or_default();
    assert!(msg.contains("every record of the final batch was rejected (2)") && msg.contains("record 0"), "{msg}");
    assert_eq!(a.status.error_stage.as_deref(), Some("syncing_delta"));
    let a = s
        .ingest
        .accept(
            &c,
            "hubspot",
            json!({"records": [{"objectType": "companies", "id": "9201", "updatedAt": at, "properties": {"domain": "nameless.example"}}], "final": true}),
        )
        .await
        .unwrap();
    assert_eq!(a.accepted, 1);
    continuity_tests::drain(&s).await;
    assert_eq!(state(&s, &t, "hubspot").await, ConnectorState::SyncError, "the normalizer refused its only record");
    s.ingest.accept(&c, "zendesk", sample("zendesk")).await.unwrap();
    continuity_tests::drain(&s).await;
    assert_eq!(state(&s, &t, "zendesk").await, ConnectorState::SyncComplete, "a good final batch completes it again");
    // Records of kinds nobody maps are out of scope, not failures: a final batch of only
    // those completes the sync.
    assert_eq!(state(&s, &t, "salesforce").await, ConnectorState::SyncingDelta);
    let a = s
        .ingest
        .accept(&c, "salesforce", json!({"records": [{"Id": "006Dn00000Opp02", "LastModifiedDate": sf_at}], "final": true}))
        .await
        .unwrap();
    assert_eq!((a.rejected.len(), a.status.state), (1, ConnectorState::SyncComplete), "{:?}", a.status);

    // The loader kept the raw payloads, and the writer the JSONL backup.
    let raw = backend.blobs.list(&t, "raw/", None, 100).await.unwrap();
    assert!(raw.iter().any(|k| k.path().starts_with("raw/stripe/")), "{raw:?}");
    let backups = backend.blobs.list(&t, "spine-backup/", None, 100).await.unwrap();
    assert!(!backups.is_empty());
    let connectors = s.ingest.connectors(&c).await.unwrap();
    assert_eq!(connectors["connectors"].as_array().unwrap().len(), 5);

    // Restore: an empty record store beside the same blobs gets the same entity set back
    // from the JSONL backups, with the relationships and signals; a second replay
    // changes nothing.
    let (count, digest) = entity_set(&backend.records, &t).await;
    assert!(count >= 10, "{count}");
    let wiped = Backend { records: empty.clone(), ..backend.clone() };
    assert_eq!(entity_set(&wiped.records, &t).await.0, 0, "the new store starts empty");
    let restored = Services::new(wiped.clone());
    let restored = &restored.backup;
    let report = restored.restore(&t, &|_| {}).await.unwrap();
    assert_eq!(report.entities, count, "{report:?}");
    assert_eq!(report.bad_lines, 0);
    assert_eq!(entity_set(&empty, &t).await, (count, digest.clone()), "the same entity set, compared by hash");
    assert_eq!(empty.list_signals(&t, None, &PageRequest::first(50)).await.unwrap().items.len(), 1);
    let again = restored.restore(&t, &|_| {}).await.unwrap();
    assert_eq!((again.entities, again.unchanged), (0, count));
    // A snapshot backup replays to the same set too.
    let (path, lines) = s.backup.backup(&t).await.unwrap();
    assert!(path.contains("/snapshot-") && lines > count, "{path} {lines}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded() {
    let dir = tempfile::tempdir().unwrap();
    let empty = store_embedded::open_backend(&dir.path().join("wiped"), Arc::new(SystemClock)).unwrap().records;
    pipeline(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap(), empty).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws() {
    pipeline(continuity_tests::aws::backend().await, continuity_tests::aws::fresh_records("wiped").await).await;
}

/// A batch whose processing fails on a dependency (the blob store) puts its connector in
/// `sync_error` with the stage; its successful redelivery resumes the sync and, being
/// the final batch, completes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successful_retry_resumes_a_sync_in_error() {
    let dir = tempfile::tempdir().unwrap();
    let backend = store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap();
    // The same home with its blob folder replaced by a plain file: every blob write fails.
    let broken_root = dir.path().join("broken-blobs");
    let broken_blobs = store_embedded::FileBlobs::new(broken_root.clone()).unwrap();
    std::fs::remove_dir(&broken_root).unwrap();
    std::fs::write(&broken_root, b"not a folder").unwrap();
    let good = Services::new(backend.clone());
    let bad = Services::new(Backend { blobs: Arc::new(broken_blobs), ..backend });
    let c = caller(&good).await;
    good.ingest.register(&c, "hubspot").await.unwrap();
    let mut batch = sample("hubspot");
    batch["final"] = json!(true);
    good.ingest.accept(&c, "hubspot", batch).await.unwrap();
    assert_eq!(state(&good, &c.tenant, "hubspot").await, ConnectorState::SyncingInitial);

    assert_eq!(bad.consumer.drain_once(Duration::from_secs(30), Duration::ZERO).await.unwrap(), 1);
    let status = good.backend.records.get_connector(&c.tenant, &ConnectorSource::new("hubspot").unwrap()).await.unwrap().unwrap();
    assert_eq!(status.state, ConnectorState::SyncError, "{status:?}");
    assert_eq!(status.error_stage.as_deref(), Some("syncing_initial"));

    continuity_tests::drain(&good).await;
    assert_eq!(state(&good, &c.tenant, "hubspot").await, ConnectorState::SyncComplete);
}
