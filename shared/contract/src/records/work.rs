//! Contract of the work records: gates (set, spent once) and engineering records
//! (versioned per project and kind).

use domain::gate::{Gate, GateStatus};
use domain::{ErrorCode, Id, PageRequest, TenantId, Timestamp};
use ports::Records;
use ports::records::{EngineeringStore, Expect, GateStore};

use crate::fresh_tenant;

fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

fn gate(t: &TenantId, namespace: &str, action: &str, status: GateStatus) -> Gate {
    Gate {
        tenant: t.clone(),
        namespace: namespace.into(),
        action: action.into(),
        status,
        set_by: "ada".into(),
        reason: None,
        expires_at: None,
        consume_once: true,
        requested_by: None,
        updated_at: Timestamp(1),
        version: 0,
        last_verified: None,
        decided: true,
    }
}

/// Gates: created once, updated under their version (so of two writers holding the same
/// version exactly one wins — how a consume-once authorization is spent once), listed in
/// order, deleted only unchanged, and invisible to another tenant.
pub async fn gates_are_versioned_and_spent_once(r: Records) {
    let t = fresh_tenant("gate");
    let other = fresh_tenant("gateb");
    assert_eq!(r.get_gate(&t, "repo:acme/web", "push").await.unwrap(), None);
    let g = r.put_gate(&gate(&t, "repo:acme/web", "push", GateStatus::Authorized), Expect::Absent).await.unwrap();
    assert_eq!(g.version, 1);
    assert_eq!(
        r.put_gate(&gate(&t, "repo:acme/web", "push", GateStatus::Pending), Expect::Absent).await.unwrap_err().code,
        ErrorCode::Conflict,
        "created once"
    );
    assert_eq!(r.get_gate(&t, "repo:acme/web", "push").await.unwrap(), Some(g.clone()));

    // Two verifies race to spend it, both holding version 1: one write wins.
    let spent = Gate { status: GateStatus::Blocked, reason: Some("used".into()), ..g.clone() };
    let (a, b) = tokio::join!(r.put_gate(&spent, Expect::Version(1)), r.put_gate(&spent, Expect::Version(1)));
    assert_eq!(u8::from(a.is_ok()) + u8::from(b.is_ok()), 1, "exactly one winner: {a:?} {b:?}");
    let loser = if a.is_ok() { b } else { a };
    assert_eq!(loser.unwrap_err().code, ErrorCode::Conflict);
    let now = r.get_gate(&t, "repo:acme/web", "push").await.unwrap().unwrap();
    assert_eq!((now.status, now.version), (GateStatus::Blocked, 2));

    // Any: replaces whatever is there, bumping the version.
    let any = r.put_gate(&gate(&t, "repo:acme/web", "push", GateStatus::Pending), Expect::Any).await.unwrap();
    assert_eq!(any.version, 3);
    r.put_gate(&gate(&t, "env:prod", "deploy", GateStatus::Blocked), Expect::Any).await.unwrap();
    r.put_gate(&gate(&t, "repo:acme/web", "force-push", GateStatus::Blocked), Expect::Any).await.unwrap();
    let listed = r.list_gates(&t, &PageRequest::first(2)).await.unwrap();
    let names: Vec<(String, String)> = listed.items.iter().map(|g| (g.namespace.clone(), g.action.clone())).collect();
    assert_eq!(names, [("env:prod".to_owned(), "deploy".to_owned()), ("repo:acme/web".to_owned(), "force-push".to_owned())]);
    let rest = r.list_gates(&t, &PageRequest { limit: Some(2), cursor: listed.next_cursor }).await.unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.items[0].action, "push");

    // Malformed names never reach the store.
    assert_eq!(r.get_gate(&t, "repo#x", "push").await.unwrap_err().code, ErrorCode::InvalidRequest);
    assert_eq!(
        r.put_gate(&gate(&t, "repo x", "push", GateStatus::Pending), Expect::Any).await.unwrap_err().code,
        ErrorCode::InvalidRequest
    );

    // Another tenant sees none of it.
    assert_eq!(r.get_gate(&other, "repo:acme/web", "push").await.unwrap(), None);
    assert!(r.list_gates(&other, &PageRequest::first(100)).await.unwrap().items.is_empty());

    // Delete: only the version read.
    assert_eq!(r.delete_gate(&g).await.unwrap_err().code, ErrorCode::Conflict, "changed since version 1");
    r.delete_gate(&any).await.unwrap();
    assert_eq!(r.get_gate(&t, "repo:acme/web", "push").await.unwrap(), None);
}

fn eng(t: &TenantId, project: &str, id: &str, body: domain::engineering::Body) -> domain::engineering::EngRecord {
    domain::engineering::EngRecord {
        tenant: t.clone(),
        project: project.into(),
        id: Id::new(id).unwrap(),
        body,
        created_by: Id::new("ada").unwrap(),
        created_at: Timestamp(1),
        updated_by: Id::new("ada").unwrap(),
        updated_at: Timestamp(1),
        expires_at: None,
        version: 0,
    }
}

/// Engineering records: versioned, listed per project (and kind), every project's for
/// the reindex, an id must name its kind, deletes only the version read, and another
/// tenant sees nothing.
pub async fn engineering_records_per_project(r: Records) {
    use domain::engineering::{Body, Priority, RecordKind, TaskStatus};
    let t = fresh_tenant("eng");
    let task = |title: &str| Body::Task {
        title: title.into(),
        status: TaskStatus::Todo,
        priority: Priority::High,
        assignee: None,
        details: None,
    };
    let note = Body::Note { text: "n".into(), pinned: false };
    let a = r.put_eng_record(&eng(&t, "web", "task.1", task("one")), Expect::Absent).await.unwrap();
    assert_eq!(a.version, 1);
    assert_eq!(
        r.put_eng_record(&eng(&t, "web", "task.1", task("again")), Expect::Absent).await.unwrap_err().code,
        ErrorCode::Conflict
    );
    let a2 = r.put_eng_record(&eng(&t, "web", "task.1", task("two")), Expect::Version(1)).await.unwrap();
    assert_eq!(a2.version, 2);
    assert_eq!(
        r.put_eng_record(&eng(&t, "web", "task.1", task("three")), Expect::Version(1)).await.unwrap_err().code,
        ErrorCode::Conflict
    );
    r.put_eng_record(&eng(&t, "web", "note.1", note.clone()), Expect::Absent).await.unwrap();
    r.put_eng_record(&eng(&t, "api", "task.2", task("api")), Expect::Absent).await.unwrap();
    assert_eq!(
        r.put_eng_record(&eng(&t, "web", "note.2", task("mislabelled")), Expect::Absent).await.unwrap_err().code,
        ErrorCode::InvalidRequest,
        "an id names its kind"
    );
    let got = r.get_eng_record(&t, "web", &id("task.1")).await.unwrap().unwrap();
    assert_eq!(got, a2);
    assert!(r.get_eng_record(&t, "api", &id("task.1")).await.unwrap().is_none(), "per project");
    let pg = PageRequest::first(10);
    assert_eq!(r.list_eng_records(&t, "web", None, &pg).await.unwrap().items.len(), 2);
    let tasks = r.list_eng_records(&t, "web", Some(RecordKind::Task), &pg).await.unwrap().items;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].id.as_str(), "task.1");
    assert_eq!(r.list_all_eng_records(&t, &pg).await.unwrap().items.len(), 3);
    let other = fresh_tenant("engb");
    assert!(r.list_all_eng_records(&other, &pg).await.unwrap().items.is_empty());
    assert!(r.get_eng_record(&other, "web", &id("task.1")).await.unwrap().is_none());
    assert_eq!(r.delete_eng_record(&a).await.unwrap_err().code, ErrorCode::Conflict, "changed since version 1");
    r.delete_eng_record(&a2).await.unwrap();
    assert!(r.get_eng_record(&t, "web", &id("task.1")).await.unwrap().is_none());
}
