//! Complete backups on both backends: a tenant with every kind of record — the Spine,
//! org memory written by governance (with lineage), proposals waiting and decided,
//! personal memory, users (password hashes), API keys (digests), an OAuth service
//! client, a trusted IdP, connectors and a sealed credential, graph and engineering
//! records, a gate, a task, the book and KB, the audit ledger — is backed up, then
//! restored into an empty store that shares only the blob space and the vault's master
//! key. Every record type's hash (computed from each store independently) is equal, the
//! restore's own check agrees, what was restored reads back through the services, and a
//! second restore writes nothing.
//!
//! Imports in bounded batches on both backends: a `memory.jsonl` read one line at a
//! time and written a batch at a time (an entity met again in a later batch is
//! extended, a relation met twice written once) reads back whole, a second run writes
//! nothing, and the read-back notices an item the store does not hold.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use continuity_tests::{caller, caller_in};
use domain::principal::{Role, Scopes};
use domain::tenant::{Department, Industry, PlanTier};
use domain::{EntityType, Id, PageRequest, TenantId};
use ports::records::{AuditLog, CredentialStore, EntityStore, ProposalStore, TaskStore};
use ports::{Backend, SystemClock};
use serde_json::json;
use services::Services;

async fn seed(s: &Services, t: &TenantId) {
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    continuity_tests::demo::seed(s, t, "owner").await;
    let agent = caller_in(s, t, "mcp:tools tenant:read tenant:write memory:read memory:write", &[], &["apollo"]).await;
    let approver = caller(s, t, "approvals:decide tenant:read").await;
    s.admin
        .add_user(services::admin::NewUser {
            tenant: t.clone(),
            email: "ada@example.com".into(),
            role: Role::Member,
            password: "a long enough password 42".into(),
            teams: vec!["core".into()],
            projects: vec!["apollo".into()],
        })
        .await
        .unwrap();
    s.admin
        .create_service_client(services::admin::NewServiceClient {
            tenant: t.clone(),
            name: "nightly-sync".into(),
            scopes: Scopes::parse("tenant:read").unwrap(),
            jwt_bearer: false,
            toolsets: domain::principal::Toolsets::default(),
        })
        .await
        .unwrap();
    let idp = domain::oauth::TrustedIdp {
        issuer: "https://idp.example.com".into(),
        jwks_uri: None,
        jwks: Some(json!({"keys": []})),
        group_teams: [("engineers".to_owned(), "core".to_owned())].into(),
    };
    s.admin.trust_idp(t, idp).await.unwrap();
    let credential = domain::action::Credential { base_url: None, token: "pat-na1-secret".into(), email: None };
    s.admin.set_credential(t, "hubspot", credential).await.unwrap();
    // Governance: one written by triage (lineage to its proposal), one waiting.
    let written = s
        .capabilities
        .execute(
            &agent,
            "memory.propose",
            json!({"title": "Health score review cadence", "kind": "decision",
                   "body": "Customer success reviews every account health score weekly on Monday; accounts under 40 get an owner call within 2 days."}),
        )
        .await
        .unwrap();
    assert!(written.data["proposal"]["state"].is_string());
    s.capabilities
        .execute(
            &agent,
            "proposal.create",
            json!({"title": "Offer Acme a pilot", "body": "Maybe offer Acme a pilot of the new tier."}),
        )
        .await
        .unwrap();
    s.capabilities
        .execute(&agent, "memory.remember", json!({"text": "I prefer renewal summaries as bullet points."}))
        .await
        .unwrap();
    s.capabilities
        .execute(
            &agent,
            "memory.graph_create_entities",
            json!({"entities": [{"name": "Acme", "entityType": "company", "observations": ["renewal in March"]}], "scope": "project:apollo"}),
        )
        .await
        .unwrap();
    s.capabilities
        .execute(
            &agent,
            "engineering.save",
            json!({"project": "apollo", "record": {"kind": "note", "text": "Deploy on Tuesdays only."}}),
        )
        .await
        .unwrap();
    s.gates
        .set(
            &approver,
            services::gates::GateSet {
                namespace: "repo:acme/web".into(),
                action: "push".into(),
                status: domain::gate::GateStatus::Authorized,
                reason: Some("release week".into()),
                expires_in: Some(3600),
                consume_once: false,
            },
        )
        .await
        .unwrap();
    s.capabilities
        .execute(&agent, "task.dispatch", json!({"title": "Call Acme", "assignee": approver.principal.as_str()}))
        .await
        .unwrap();
}

async fn round_trip(a: Backend, b: Backend) {
    let (sa, sb) = (Services::new(a.clone()), Services::new(b.clone()));
    let t = contract::fresh_tenant("bk");
    seed(&sa, &t).await;
    let before = services::backup_records::digests(&a, &t).await.unwrap();
    for part in [
        "tenant",
        "principal",
        "apikey",
        "login",
        "entity",
        "memory",
        "proposal",
        "gate",
        "task",
        "connector_cred",
        "vault",
        "registry:tenants",
        "registry:oauth_client",
    ] {
        assert!(before.contains_key(part), "the seed holds {part} records: {:?}", before.keys());
    }
    assert!(before.keys().any(|k| k.starts_with("eng")), "{:?}", before.keys());
    assert!(before.keys().any(|k| k.starts_with("audit.")), "audit records, in their shards: {:?}", before.keys());
    assert!(before.keys().any(|k| k.starts_with("graph")), "{:?}", before.keys());

    let progress = std::sync::atomic::AtomicUsize::new(0);
    let report = sa.backup.backup_records(&t, &|n| progress.store(n, std::sync::atomic::Ordering::Relaxed)).await.unwrap();
    assert_eq!(report.manifest.parts, before, "the manifest is the store's");
    assert_eq!(progress.load(std::sync::atomic::Ordering::Relaxed), report.records);
    // A refused record type would make the backup say nothing about it: every record is in.
    assert_eq!(report.records, before.values().map(|d| d.records).sum::<usize>());

    // The store is lost: an empty one (same blob space, same vault master key).
    assert!(services::backup_records::digests(&b, &t).await.unwrap().is_empty());
    let restored = sb.backup.restore(&t, &|_| {}).await.unwrap();
    let rec = &restored.records;
    assert_eq!((rec.records, rec.written, rec.unchanged), (report.records, report.records, 0));
    assert!(rec.parts.iter().all(|p| p.matches), "{:?}", rec.parts);
    assert_eq!(services::backup_records::digests(&b, &t).await.unwrap(), before, "every record type, by hash");

    // What came back reads back through the services.
    let acme = b.records.get_entity(&t, &EntityType::new("account").unwrap(), &Id::new("acme-1").unwrap()).await.unwrap();
    assert_eq!(acme.unwrap().attributes["name"], domain::value::Value::Text("Acme Corp".into()), "sealed entities open");
    let cred = b.records.get_credential(&t, &Id::new("hubspot").unwrap()).await.unwrap().unwrap();
    assert_eq!(cred.token, "pat-na1-secret", "the sealed credential opens");
    let users = |v: Vec<services::admin::UserView>| format!("{v:?}");
    assert_eq!(users(sb.admin.list_users(&t).await.unwrap()), users(sa.admin.list_users(&t).await.unwrap()));
    assert_eq!(sb.admin.show_tenant(&t).await.unwrap(), sa.admin.show_tenant(&t).await.unwrap());
    let page = PageRequest::first(100);
    assert_eq!(
        b.records.list_proposals(&t, None, &page).await.unwrap(),
        a.records.list_proposals(&t, None, &page).await.unwrap()
    );
    assert_eq!(b.records.list_audit(&t, &page).await.unwrap(), a.records.list_audit(&t, &page).await.unwrap());
    assert_eq!(b.records.list_tasks(&t, None, &page).await.unwrap(), a.records.list_tasks(&t, None, &page).await.unwrap());
    // The user signs in with the same password (the hash came back).
    let login = sb.admin.list_users(&t).await.unwrap();
    assert_eq!(login[0].email, "ada@example.com");

    // Again, into a store that now holds the tenant: not without asking (it would bring
    // back what was deleted since); merged: nothing written, everything still matches.
    let refused = sb.backup.restore(&t, &|_| {}).await.unwrap().records;
    assert!(refused.skipped.as_deref().is_some_and(|s| s.contains("--merge")), "{refused:?}");
    assert_eq!(refused.written, 0);
    let again = sb.backup.restore_with(&t, true, &|_| {}).await.unwrap().records;
    assert_eq!((again.written, again.unchanged), (0, report.records));
    assert!(again.parts.iter().all(|p| p.matches));

    // A backup altered after it was taken (a record's body changed) is refused whole.
    let folder = report.folder.clone();
    let key = ports::BlobKey::new(&t, &format!("{folder}/records-00000.jsonl")).unwrap();
    let text = String::from_utf8(b.blobs.get(&key).await.unwrap().unwrap()).unwrap();
    let altered = text.replacen("Acme", "Acne", 1);
    assert_ne!(altered, text);
    b.blobs.put(&key, altered.as_bytes()).await.unwrap();
    let e = sb.backup.restore_with(&t, true, &|_| {}).await.unwrap_err();
    assert!(e.message.contains("does not match its manifest"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complete_backup_round_trip_embedded() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = store_embedded::open_backend(da.path(), Arc::new(SystemClock)).unwrap();
    // The new home keeps the old one's keys (the vault's master key): a backup never holds it.
    std::fs::create_dir_all(db.path().join("keys")).unwrap();
    for f in std::fs::read_dir(da.path().join("keys")).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), db.path().join("keys").join(f.file_name())).unwrap();
    }
    let b = store_embedded::open_backend(db.path(), Arc::new(SystemClock)).unwrap();
    let b = Backend { blobs: a.blobs.clone(), ..b };
    round_trip(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complete_backup_round_trip_aws() {
    let a = continuity_tests::aws::backend_in_own_table("bka").await;
    let (table, _) = continuity_tests::aws::fresh_table("bkb").await;
    let records = continuity_tests::aws::sealed_records(&table, &continuity_tests::aws::vault_key().await).await;
    let b = Backend { records, fortress: None, fortress_writer: None, ..a.clone() };
    round_trip(a, b).await;
}

async fn import_in_batches(backend: Backend) {
    use services::migrate::{Format, ReadBack};
    let s = Services::new(backend);
    let t = contract::fresh_tenant("imp");
    s.admin.create_tenant(t.clone(), PlanTier::Pro, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let agent = caller(&s, &t, "mcp:tools memory:read memory:write").await;
    let mut lines = Vec::new();
    for i in 0..60 {
        lines.push(json!({"type": "entity", "name": format!("e{i}"), "entityType": "service", "observations": [format!("runs job {i}")]}).to_string());
    }
    lines.push(String::new());
    for i in 0..60 {
        lines.push(
            json!({"type": "relation", "from": format!("e{i}"), "to": format!("e{}", (i + 1) % 60), "relationType": "calls"})
                .to_string(),
        );
    }
    // Met again later: e0 with one more observation, a relation already written.
    lines.push(
        json!({"type": "entity", "name": "e0", "entityType": "service", "observations": ["runs job 0", "pages on call"]})
            .to_string(),
    );
    lines.push(json!({"type": "relation", "from": "e0", "to": "e1", "relationType": "calls"}).to_string());
    let items = 122;

    let text = lines.join("\n");
    let run = |s: Services, agent: domain::principal::CallerContext, text: String| async move {
        let done = std::sync::Mutex::new(Vec::new());
        let report = services::migrate::import_lines(
            &s,
            &agent,
            || Ok(std::io::Cursor::new(text.as_bytes())),
            Format::MemoryJsonl,
            "personal",
            25,
            &|n| done.lock().unwrap().push(n),
        )
        .await
        .unwrap();
        (report, done.into_inner().unwrap())
    };
    let (report, done) = run(s.clone(), agent.clone(), text.clone()).await;
    // Five batches of at most 25 items, each told once it is written.
    assert_eq!(done, [25, 50, 75, 100, 122]);
    assert_eq!(report.items, items);
    assert_eq!((report.entities_created, report.entities_extended, report.relations_created), (60, 1, 60), "{report:?}");
    // Every item of the source was read back from the store.
    assert_eq!(report.verified, items);
    let (entities, relations) = s.graph.stored(&agent, "personal").await.unwrap();
    assert_eq!((entities.len(), relations.len()), (60, 60));
    let e0 = entities.iter().find(|e| e.name == "e0").unwrap();
    assert_eq!(e0.observations, ["runs job 0", "pages on call"]);

    // What the store does not hold is not verified.
    let back = ReadBack::load(&s, &agent, &["personal".to_owned()]).await.unwrap();
    let missing = domain::graph::GraphRelation { from: "e0".into(), to: "e2".into(), relation_type: "calls".into() };
    assert_eq!(back.relation("personal", &missing).unwrap_err().code, domain::ErrorCode::Internal);
    let extra =
        domain::graph::GraphEntity { name: "e1".into(), entity_type: "service".into(), observations: vec!["never said".into()] };
    assert!(back.entity("personal", &extra).is_err());

    // Running it again writes nothing.
    let (again, _) = run(s.clone(), agent.clone(), text).await;
    assert_eq!((again.entities_created, again.entities_extended, again.relations_created), (0, 0, 0), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_in_batches_reads_back_whole_on_the_embedded_backend() {
    let dir = tempfile::tempdir().unwrap();
    import_in_batches(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_in_batches_reads_back_whole_on_the_aws_backend() {
    import_in_batches(continuity_tests::aws::backend().await).await;
}

/// A Spine write whose backup file cannot be written (on AWS: a bucket the role may not
/// write, here one that does not exist on moto) still stands, and the failure is counted
/// (`BlobBackupFailures`, which alarms) instead of being lost in a log line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spine_write_whose_backup_fails_stands_and_is_counted() {
    use store_aws::settings::s3_client;
    let sdk =
        store_aws::aws_config_for(Some(&continuity_tests::aws::env("CONTINUITY_TEST_MOTO_URL")), continuity_tests::aws::REGION)
            .await;
    let unwritable = Arc::new(store_aws::S3Blobs::new(s3_client(&sdk), "continuity-no-such-bucket"));
    let backend = Backend { blobs: unwritable, ..continuity_tests::aws::backend_in_own_table("blobfail").await };
    let s = Services::new(backend);
    let t = contract::fresh_tenant("blobfail");
    s.admin.create_tenant(t.clone(), PlanTier::Starter, Department::Sales, Industry::Saas).await.unwrap();
    let op = caller(&s, &t, "admin tenant:read tenant:write").await;
    let failures = || {
        let text = metrics::prometheus();
        let line = text.lines().find(|l| l.starts_with("continuity_blob_backup_failures_total ")).unwrap().to_owned();
        line.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
    };
    let before = failures();
    let mut a = domain::value::Attributes::new();
    a.insert("name".into(), domain::value::Value::Text("Acme".into()));
    let id = Id::new("acme-1").unwrap();
    let ty = EntityType::new("account").unwrap();
    let stored = s
        .entities
        .put(&op, ty.clone(), id.clone(), domain::spine::PoleClass::Organization, a, ports::records::Expect::Any)
        .await
        .expect("the write stands without its backup file");
    assert!(s.backend.records.get_entity(&t, &ty, &id).await.unwrap().is_some_and(|e| e.version == stored.version));
    assert_eq!(failures(), before + 1, "the failed backup is counted");
}
