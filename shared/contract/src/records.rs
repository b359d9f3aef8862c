//! Contract of the typed record stores (over any item backend).

use std::collections::BTreeSet;

use domain::audit::AuditRecord;
use domain::connector::{ConnectorSource, ConnectorState, ConnectorStatus};
use domain::memory::{
    ConversationTurn, GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType, TurnForgotten, TurnRole, Verification,
};
use domain::principal::{ApiKeyRecord, Principal, PrincipalKind, Role, Scopes};
use domain::proposal::{Proposal, ProposalState};
use domain::spine::{BookEntry, Entity, EntityRef, KbDocument, PoleClass, Relationship, Signal};
use domain::tenant::{Department, Industry, PlanTier, Tenant};
use domain::value::{Attributes, Value};
use domain::{EntityType, ErrorCode, Id, PageRequest, TenantId, Timestamp};
use ports::Records;
use ports::records::{
    AuditLog, ConnectorStore, Direction, EntityStore, Expect, LibraryStore, MemoryStore, PrincipalStore, ProposalStore,
    RelationshipStore, RetentionStore, ReviewStore, SignalStore, TenantStore,
};

use crate::fresh_tenant;

mod audit;
mod work;
pub use audit::audit_newest_first_and_idempotency;
pub use work::{engineering_records_per_project, gates_are_versioned_and_spent_once};

fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

fn ty(s: &str) -> EntityType {
    EntityType::new(s).unwrap()
}

pub fn entity(t: &TenantId, kind: &str, eid: &str, name: &str) -> Entity {
    let mut attributes = Attributes::new();
    attributes.insert("name".into(), Value::Text(name.into()));
    Entity {
        tenant: t.clone(),
        entity_type: ty(kind),
        id: id(eid),
        pole_class: PoleClass::Organization,
        attributes,
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
        version: 0,
        source_updated_at: None,
    }
}

fn memory(t: &TenantId, mid: &str, scope: MemoryScope) -> MemoryEntry {
    MemoryEntry {
        tenant: t.clone(),
        id: id(mid),
        memory_type: MemoryType::Org,
        scope,
        kind: "decision".into(),
        title: format!("title {mid}"),
        body: "body".into(),
        state: GovernanceState::Active,
        lineage: Lineage::default(),
        created_by: id("u1"),
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
        version: 0,
        occurred_at: None,
        expires_at: None,
        metadata: None,
    }
}

fn proposal(t: &TenantId, pid: &str) -> Proposal {
    Proposal {
        tenant: t.clone(),
        id: id(pid),
        kind: "memory".into(),
        title: "We ship on Tuesdays".into(),
        body: "Decided in the weekly".into(),
        supersedes: None,
        suggested_supersede: None,
        state: ProposalState::Pending,
        score: None,
        decision_reason: None,
        proposed_by: id("u1"),
        proposed_via: None,
        source_session: None,
        origin: None,
        wait: None,
        action: None,
        entity: None,
        detected: Vec::new(),
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
        version: 1,
    }
}

pub async fn tenants_crud_and_versioning(r: Records) {
    let slug = fresh_tenant("ten");
    let t = Tenant::new(slug.clone(), PlanTier::Starter, Department::CustomerSuccess, Industry::Healthcare, Timestamp(5));
    r.create_tenant(&t).await.unwrap();
    assert_eq!(r.create_tenant(&t).await.unwrap_err().code, ErrorCode::Conflict);
    let got = r.get_tenant(&slug).await.unwrap().unwrap();
    assert_eq!(got, t);

    let mut up = got.clone();
    up.plan = PlanTier::Pro;
    let stored = r.update_tenant(&up).await.unwrap();
    assert_eq!(stored.version, 2);
    // A writer holding version 1 loses.
    let mut stale = got.clone();
    stale.plan = PlanTier::Free;
    assert_eq!(r.update_tenant(&stale).await.unwrap_err().code, ErrorCode::Conflict);
    assert_eq!(r.get_tenant(&slug).await.unwrap().unwrap().plan, PlanTier::Pro);

    // The registry lists it, through pages.
    let mut found = false;
    let mut page = PageRequest::first(100);
    for _ in 0..10_000 {
        let p = r.list_tenants(&page).await.unwrap();
        found |= p.items.contains(&slug);
        match p.next_cursor {
            Some(c) => page = PageRequest::after(100, c),
            None => break,
        }
    }
    assert!(found);
    assert_eq!(r.get_tenant(&fresh_tenant("absent")).await.unwrap(), None);
}

pub async fn principals_and_api_keys(r: Records) {
    let t = fresh_tenant("keys");
    let p = Principal {
        tenant: t.clone(),
        id: id("owner"),
        kind: PrincipalKind::User,
        role: Role::Owner,
        display_name: "Owner".into(),
        created_at: Timestamp(1),
        teams: Vec::new(),
        projects: Vec::new(),
        disabled: false,
    };
    r.create_principal(&p).await.unwrap();
    assert_eq!(r.create_principal(&p).await.unwrap_err().code, ErrorCode::Conflict);
    assert_eq!(r.get_principal(&t, &id("owner")).await.unwrap(), Some(p));
    for n in 0..3 {
        let key = ApiKeyRecord {
            tenant: t.clone(),
            key_id: id(&format!("k{n}")),
            principal: id("owner"),
            scopes: Scopes::parse("mcp:tools tenant:read").unwrap(),
            teams: vec![],
            projects: vec!["apollo".into()],
            secret_sha256: "ab".repeat(32),
            toolsets: domain::principal::Toolsets::default(),
            created_at: Timestamp(1),
            revoked_at: None,
            name: (n == 0).then(|| "Claude Code".to_owned()),
        };
        r.create_api_key(&key).await.unwrap();
    }
    assert_eq!(r.get_api_key(&t, &id("k0")).await.unwrap().unwrap().name.as_deref(), Some("Claude Code"), "a key keeps its name");
    let first = r.list_api_keys(&t, &PageRequest::first(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let rest = r.list_api_keys(&t, &PageRequest::after(2, first.next_cursor.clone().unwrap())).await.unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.next_cursor, None);

    r.revoke_api_key(&t, &id("k1"), Timestamp(9)).await.unwrap();
    assert_eq!(r.get_api_key(&t, &id("k1")).await.unwrap().unwrap().revoked_at, Some(Timestamp(9)));
    r.revoke_api_key(&t, &id("k1"), Timestamp(10)).await.unwrap();
    assert_eq!(r.get_api_key(&t, &id("k1")).await.unwrap().unwrap().revoked_at, Some(Timestamp(9)), "revocation is idempotent");
    assert_eq!(r.revoke_api_key(&t, &id("nope"), Timestamp(9)).await.unwrap_err().code, ErrorCode::NotFound);
}

pub async fn entities_crud_and_pagination(r: Records) {
    let t = fresh_tenant("ent");
    let e = entity(&t, "account", "acme-1", "Acme");
    let stored = r.put_entity(&e, Expect::Absent).await.unwrap();
    assert_eq!(stored.version, 1);
    assert_eq!(r.put_entity(&e, Expect::Absent).await.unwrap_err().code, ErrorCode::Conflict);
    assert_eq!(r.get_entity(&t, &ty("account"), &id("acme-1")).await.unwrap(), Some(stored.clone()));

    let mut renamed = stored.clone();
    renamed.attributes.insert("name".into(), "Acme Corp".into());
    let v2 = r.put_entity(&renamed, Expect::Version(1)).await.unwrap();
    assert_eq!(v2.version, 2);
    assert_eq!(r.put_entity(&renamed, Expect::Version(1)).await.unwrap_err().code, ErrorCode::Conflict, "stale version loses");
    let v3 = r.put_entity(&renamed, Expect::Any).await.unwrap();
    assert_eq!(v3.version, 3, "unconditional writes still bump the version");

    for i in 0..23 {
        r.put_entity(&entity(&t, "contact", &format!("c-{i:03}"), "Person"), Expect::Absent).await.unwrap();
    }
    let mut ids = Vec::new();
    let mut page = PageRequest::first(10);
    loop {
        let p = r.list_entities(&t, Some(&ty("contact")), &page).await.unwrap();
        assert!(p.items.len() <= 10);
        assert!(p.items.iter().all(|e| e.entity_type.as_str() == "contact"));
        ids.extend(p.items.into_iter().map(|e| e.id.to_string()));
        match p.next_cursor {
            Some(c) => page = PageRequest::after(10, c),
            None => break,
        }
        assert!(ids.len() <= 23);
    }
    let expected: Vec<String> = (0..23).map(|i| format!("c-{i:03}")).collect();
    assert_eq!(ids, expected);
    let all = r.list_entities(&t, None, &PageRequest::first(500)).await.unwrap();
    assert_eq!(all.items.len(), 24);

    let bad = r.list_entities(&t, None, &PageRequest::after(10, "not-a-cursor")).await.unwrap_err();
    assert_eq!(bad.code, ErrorCode::InvalidRequest);
}

pub async fn relationships_both_directions(r: Records) {
    let t = fresh_tenant("rel");
    let acct = EntityRef { entity_type: ty("account"), id: id("a1") };
    let c1 = EntityRef { entity_type: ty("contact"), id: id("c1") };
    let c2 = EntityRef { entity_type: ty("contact"), id: id("c2") };
    for c in [&c1, &c2] {
        r.put_relationship(&Relationship {
            tenant: t.clone(),
            from: c.clone(),
            to: acct.clone(),
            kind: ty("works_at"),
            valid_from: Timestamp(1),
            valid_to: None,
            attributes: Attributes::new(),
        })
        .await
        .unwrap();
    }
    let incoming = r.list_relationships(&t, &acct, Direction::Incoming, &PageRequest::first(10)).await.unwrap();
    let froms: BTreeSet<_> = incoming.items.iter().map(|x| x.from.id.to_string()).collect();
    assert_eq!(froms, BTreeSet::from(["c1".to_string(), "c2".to_string()]));
    let out = r.list_relationships(&t, &c1, Direction::Outgoing, &PageRequest::first(10)).await.unwrap();
    assert_eq!(out.items.len(), 1);
    assert_eq!(out.items[0].to, acct);
    assert!(r.list_relationships(&t, &acct, Direction::Outgoing, &PageRequest::first(10)).await.unwrap().items.is_empty());
}

pub async fn signals_newest_first(r: Records) {
    let t = fresh_tenant("sig");
    let acct = EntityRef { entity_type: ty("account"), id: id("a1") };
    let other = EntityRef { entity_type: ty("account"), id: id("a2") };
    for (i, at) in [(1, 100), (2, 300), (3, 200)] {
        r.append_signal(&Signal {
            tenant: t.clone(),
            id: id(&format!("s{i}")),
            entity: if i == 3 { other.clone() } else { acct.clone() },
            kind: ty("health_changed"),
            at: Timestamp(at),
            before: Some(Value::Int(i)),
            after: Some(Value::Int(i + 1)),
        })
        .await
        .unwrap();
    }
    let all = r.list_signals(&t, None, &PageRequest::first(10)).await.unwrap();
    let order: Vec<_> = all.items.iter().map(|s| s.id.to_string()).collect();
    assert_eq!(order, ["s2", "s3", "s1"]);
    let of_acct = r.list_signals(&t, Some(&acct), &PageRequest::first(10)).await.unwrap();
    let order: Vec<_> = of_acct.items.iter().map(|s| s.id.to_string()).collect();
    assert_eq!(order, ["s2", "s1"]);
    assert_eq!(r.get_signal(&t, &id("s3")).await.unwrap().unwrap().entity, other);
    let dup = r.list_signals(&t, None, &PageRequest::first(1)).await.unwrap();
    let s = &dup.items[0];
    assert_eq!(r.append_signal(s).await.unwrap_err().code, ErrorCode::Conflict, "signal ids are unique");
}

pub async fn memory_scopes_and_turns(r: Records) {
    let t = fresh_tenant("mem");
    let scopes = [
        MemoryScope::Org,
        MemoryScope::Team("core".into()),
        MemoryScope::Project("apollo".into()),
        MemoryScope::Personal("u1".into()),
        MemoryScope::Session("u1.s1".into()),
    ];
    for (i, s) in scopes.iter().enumerate() {
        r.put_memory(&memory(&t, &format!("m{i}"), s.clone()), Expect::Absent).await.unwrap();
    }
    for s in &scopes {
        let listed = r.list_memory(&t, s, &PageRequest::first(10)).await.unwrap();
        assert_eq!(listed.items.len(), 1, "exactly one entry in {s:?}");
        assert_eq!(&listed.items[0].scope, s);
    }
    assert!(r.list_memory(&t, &MemoryScope::Team("other".into()), &PageRequest::first(10)).await.unwrap().items.is_empty());
    // Prefix safety: project "apollo" must not list project "apollo2".
    r.put_memory(&memory(&t, "m-ap2", MemoryScope::Project("apollo2".into())), Expect::Absent).await.unwrap();
    assert_eq!(r.list_memory(&t, &MemoryScope::Project("apollo".into()), &PageRequest::first(10)).await.unwrap().items.len(), 1);

    // Supersede: state changes are versioned and visible in the scope listing.
    let m0 = r.get_memory(&t, &id("m0")).await.unwrap().unwrap();
    let mut superseded = m0.clone();
    superseded.state = GovernanceState::Superseded { by: id("m9") };
    r.put_memory(&superseded, Expect::Version(m0.version)).await.unwrap();
    assert_eq!(r.put_memory(&superseded, Expect::Version(m0.version)).await.unwrap_err().code, ErrorCode::Conflict);
    let listed = r.list_memory(&t, &MemoryScope::Org, &PageRequest::first(10)).await.unwrap();
    assert_eq!(listed.items[0].state, GovernanceState::Superseded { by: id("m9") });
    let mut moved = superseded.clone();
    moved.version += 1;
    moved.scope = MemoryScope::Global;
    assert_eq!(r.put_memory(&moved, Expect::Any).await.unwrap_err().code, ErrorCode::InvalidRequest, "scope never changes");

    for seq in 1..=3u64 {
        r.append_turn(&ConversationTurn {
            tenant: t.clone(),
            session: "u1.s1".into(),
            seq,
            id: id(&format!("turn{seq}")),
            role: if seq % 2 == 1 { TurnRole::User } else { TurnRole::Assistant },
            forgotten: None,
            expires_at: None,
            content: format!("turn {seq}"),
            principal: id("u1"),
            at: Timestamp(i64::try_from(seq).unwrap()),
        })
        .await
        .unwrap();
    }
    let turns = r.list_turns(&t, "u1.s1", &PageRequest::first(10)).await.unwrap();
    let seqs: Vec<u64> = turns.items.iter().map(|x| x.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    let dup = turns.items[0].clone();
    assert_eq!(r.append_turn(&dup).await.unwrap_err().code, ErrorCode::Conflict);
    // The session index follows its turns, and a refused turn leaves it unchanged.
    let s1 = r.get_session(&t, &id("u1"), "u1.s1").await.unwrap().unwrap();
    assert_eq!((s1.turns, s1.first_at, s1.last_at, s1.title.as_str()), (3, Timestamp(1), Timestamp(3), "turn 1"));
    assert_eq!(r.get_session(&t, &id("u2"), "u1.s1").await.unwrap(), None, "keyed by owner");
    r.append_turn(&ConversationTurn { session: "u1.s2".into(), seq: 1, at: Timestamp(9), ..dup.clone() }).await.unwrap();
    r.append_turn(&ConversationTurn { session: "u2.s1".into(), seq: 1, principal: id("u2"), ..dup.clone() }).await.unwrap();
    let mine = r.list_sessions(&t, &id("u1"), &PageRequest::first(10)).await.unwrap();
    assert_eq!(mine.items.iter().map(|s| s.session.as_str()).collect::<Vec<_>>(), ["u1.s1", "u1.s2"]);
    assert!(r.list_sessions(&fresh_tenant("other"), &id("u1"), &PageRequest::first(10)).await.unwrap().items.is_empty());

    // Forgetting a turn: its content erased, who and when kept, its place in the session
    // kept, and the session's title (taken from the first turn) with it; only its owner's.
    let by = TurnForgotten { by: id("u1"), at: Timestamp(20) };
    assert_eq!(r.forget_turn(&t, &id("u2"), "u1.s1", 1, by.clone()).await.unwrap(), None, "not the owner's");
    assert_eq!(r.forget_turn(&t, &id("u1"), "u1.s1", 9, by.clone()).await.unwrap(), None, "no such turn");
    let was = r.forget_turn(&t, &id("u1"), "u1.s1", 1, by.clone()).await.unwrap().unwrap();
    assert_eq!(was.content, "turn 1");
    let turns = r.list_turns(&t, "u1.s1", &PageRequest::first(10)).await.unwrap().items;
    assert_eq!((turns[0].content.as_str(), turns[0].forgotten.as_ref()), ("", Some(&by)));
    assert_eq!((turns.len(), turns[1].content.as_str(), turns[1].forgotten.as_ref()), (3, "turn 2", None));
    let s1 = r.get_session(&t, &id("u1"), "u1.s1").await.unwrap().unwrap();
    assert_eq!((s1.turns, s1.title.as_str()), (3, "(forgotten)"));
    // A later turn forgotten leaves the title alone.
    r.forget_turn(&t, &id("u1"), "u1.s1", 3, by.clone()).await.unwrap().unwrap();
    let all_turns = r.list_all_turns(&t, &PageRequest::first(20)).await.unwrap().items;
    assert!(all_turns.iter().filter(|x| x.session == "u1.s1" && x.seq != 2).all(|x| x.content.is_empty()), "{all_turns:?}");

    // Turns with a time to live are found by their expiry, soonest first, once it has
    // passed; forgetting one takes it off the list.
    // (In a tenant of their own: the reindex's listing below counts this one's turns.)
    let tt = fresh_tenant("ttl");
    for (seq, expires) in [(1u64, 50), (2, 40), (3, 70)] {
        let turn = ConversationTurn {
            tenant: tt.clone(),
            session: "u1.ttl".into(),
            seq,
            expires_at: Some(Timestamp(expires)),
            ..dup.clone()
        };
        r.append_turn(&turn).await.unwrap();
    }
    assert!(r.expired_turns(&tt, Timestamp(39), 10).await.unwrap().is_empty());
    let due: Vec<u64> = r.expired_turns(&tt, Timestamp(50), 10).await.unwrap().iter().map(|x| x.seq).collect();
    assert_eq!(due, [2, 1], "soonest first, only those due");
    assert_eq!(r.expired_turns(&tt, Timestamp(100), 1).await.unwrap().len(), 1, "at most max");
    r.forget_turn(&tt, &id("u1"), "u1.ttl", 2, by.clone()).await.unwrap().unwrap();
    let due: Vec<u64> = r.expired_turns(&tt, Timestamp(100), 10).await.unwrap().iter().map(|x| x.seq).collect();
    assert_eq!(due, [1, 3], "a forgotten turn is no longer due");
    assert!(r.expired_turns(&fresh_tenant("other"), Timestamp(100), 10).await.unwrap().is_empty());

    // For the reindex: every entry and every turn of the tenant, paged, and no other's.
    let mut all = Vec::new();
    let mut page = PageRequest::first(4);
    loop {
        let p = r.list_all_memory(&t, &page).await.unwrap();
        all.extend(p.items.into_iter().map(|m| m.id.to_string()));
        match p.next_cursor {
            Some(c) => page = PageRequest::after(4, c),
            None => break,
        }
    }
    all.sort();
    assert_eq!(all, ["m-ap2", "m0", "m1", "m2", "m3", "m4"]);
    let turns = r.list_all_turns(&t, &PageRequest::first(10)).await.unwrap();
    let keys: Vec<(&str, u64)> = turns.items.iter().map(|x| (x.session.as_str(), x.seq)).collect();
    assert_eq!(keys, [("u1.s1", 1), ("u1.s1", 2), ("u1.s1", 3), ("u1.s2", 1), ("u2.s1", 1)]);
    let other = fresh_tenant("other");
    assert!(r.list_all_memory(&other, &PageRequest::first(10)).await.unwrap().items.is_empty());
    assert!(r.list_all_turns(&other, &PageRequest::first(10)).await.unwrap().items.is_empty());
}

pub async fn library_entries_and_documents(r: Records) {
    let t = fresh_tenant("lib");
    let entry = |project: &str, n: &str| BookEntry {
        tenant: t.clone(),
        id: id(n),
        project: project.into(),
        title: format!("{project} {n}"),
        body: "notes".into(),
        created_at: Timestamp(1),
    };
    for (p, n) in [("apollo", "b2"), ("apollo", "b1"), ("apollo2", "b3"), ("zephyr", "b4")] {
        r.put_book_entry(&entry(p, n)).await.unwrap();
    }
    let apollo = r.list_book_entries(&t, Some("apollo"), &PageRequest::first(10)).await.unwrap();
    assert_eq!(apollo.items.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["b1", "b2"], "prefix-safe, ordered");
    assert_eq!(r.list_book_entries(&t, None, &PageRequest::first(10)).await.unwrap().items.len(), 4);
    assert!(r.put_book_entry(&entry("bad#project", "b5")).await.is_err());
    let doc = KbDocument {
        tenant: t.clone(),
        id: id("kb1"),
        scope: MemoryScope::Org,
        title: "Refund policy".into(),
        body: "30 days".into(),
        source: None,
        created_at: Timestamp(1),
    };
    r.put_kb_document(&doc).await.unwrap();
    assert_eq!(r.get_kb_document(&t, &id("kb1")).await.unwrap(), Some(doc.clone()));
    let replaced = KbDocument { body: "60 days".into(), ..doc };
    r.put_kb_document(&replaced).await.unwrap();
    assert_eq!(r.list_kb_documents(&t, &PageRequest::first(10)).await.unwrap().items, vec![replaced]);
    let other = fresh_tenant("lib");
    assert!(r.list_kb_documents(&other, &PageRequest::first(10)).await.unwrap().items.is_empty());
    assert!(r.list_book_entries(&other, None, &PageRequest::first(10)).await.unwrap().items.is_empty());
}

pub async fn verifications_and_review_queue(r: Records) {
    let t = fresh_tenant("rev");
    let failed = Verification {
        tenant: t.clone(),
        kind: "kb".into(),
        doc: id("kb1"),
        scope: MemoryScope::Project("apollo".into()),
        title: "Runbook".into(),
        verified: false,
        pending: false,
        confidence: 0.3,
        fresh_at: None,
        reason: "not retrieved".into(),
        entities: vec![domain::memory::Extracted { class: "object".into(), text: "proj-142".into() }],
        related: vec![id("kb0")],
        at: Timestamp(1),
    };
    r.put_verification(&failed).await.unwrap();
    assert_eq!(r.get_verification(&t, "kb", &id("kb1")).await.unwrap(), Some(failed.clone()));
    assert_eq!(r.list_review(&t, &PageRequest::first(10)).await.unwrap().items, vec![failed.clone()]);
    assert!(r.list_review(&fresh_tenant("rev"), &PageRequest::first(10)).await.unwrap().items.is_empty());
    // A later readback that succeeds takes it off the queue and replaces the record.
    let ok = Verification { verified: true, confidence: 0.96, fresh_at: Some(Timestamp(2)), at: Timestamp(2), ..failed };
    r.put_verification(&ok).await.unwrap();
    assert!(r.list_review(&t, &PageRequest::first(10)).await.unwrap().items.is_empty());
    assert_eq!(r.get_verification(&t, "kb", &id("kb1")).await.unwrap(), Some(ok.clone()));
    assert_eq!(r.get_verification(&t, "memory", &id("kb1")).await.unwrap(), None);
    // A person dismisses a failed one: off the queue, its verification kept as it was;
    // twice is no error.
    let again = Verification { doc: id("kb2"), verified: false, confidence: 0.3, fresh_at: None, ..ok };
    r.put_verification(&again).await.unwrap();
    assert_eq!(r.list_review(&t, &PageRequest::first(10)).await.unwrap().items.len(), 1);
    assert_eq!(r.in_review(&t, "kb", &id("kb2")).await.unwrap(), Some(again.clone()));
    assert_eq!(r.in_review(&t, "kb", &id("kb1")).await.unwrap(), None, "verified: not in the queue");
    r.dismiss_review(&t, "kb", &id("kb2")).await.unwrap();
    r.dismiss_review(&t, "kb", &id("kb2")).await.unwrap();
    assert_eq!(r.in_review(&t, "kb", &id("kb2")).await.unwrap(), None);
    assert!(r.list_review(&t, &PageRequest::first(10)).await.unwrap().items.is_empty());
    assert_eq!(r.get_verification(&t, "kb", &id("kb2")).await.unwrap(), Some(again.clone()));
    // A pending verification (readback deferred past the refresh window) is recorded
    // but neither enters the queue nor takes a record off it.
    let pending = Verification { doc: id("kb3"), pending: true, reason: "readback queued".into(), ..again.clone() };
    r.put_verification(&pending).await.unwrap();
    assert_eq!(r.get_verification(&t, "kb", &id("kb3")).await.unwrap(), Some(pending.clone()));
    assert_eq!(r.in_review(&t, "kb", &id("kb3")).await.unwrap(), None, "pending: not in the queue");
    r.put_verification(&again).await.unwrap();
    r.put_verification(&Verification { pending: true, ..again.clone() }).await.unwrap();
    assert_eq!(r.in_review(&t, "kb", &id("kb2")).await.unwrap(), Some(again.clone()), "pending: a queued record stays queued");
    // Many at once (a batch of turns' vectors): each recorded as one would be, over
    // more writes than one atomic group takes.
    let many: Vec<Verification> = (0..40)
        .map(|i| Verification {
            doc: id(&format!("turn-{i:02}")),
            kind: "turn".into(),
            verified: i % 4 != 0,
            pending: false,
            ..again.clone()
        })
        .collect();
    r.put_verifications(&many).await.unwrap();
    for v in &many {
        assert_eq!(r.get_verification(&t, "turn", &v.doc).await.unwrap().as_ref(), Some(v));
        assert_eq!(r.in_review(&t, "turn", &v.doc).await.unwrap().is_some(), !v.verified, "{}", v.doc);
    }
    let passed: Vec<Verification> = many.iter().map(|v| Verification { verified: true, ..v.clone() }).collect();
    r.put_verifications(&passed).await.unwrap();
    assert!(r.list_review(&t, &PageRequest::first(100)).await.unwrap().items.iter().all(|v| v.kind != "turn"), "all passed now");
    r.put_verifications(&[]).await.unwrap();
}

pub async fn proposals_lifecycle(r: Records) {
    let t = fresh_tenant("prop");
    r.create_proposal(&proposal(&t, "p1")).await.unwrap();
    r.create_proposal(&proposal(&t, "p2")).await.unwrap();
    assert_eq!(r.create_proposal(&proposal(&t, "p1")).await.unwrap_err().code, ErrorCode::Conflict);

    let mut p1 = r.get_proposal(&t, &id("p1")).await.unwrap().unwrap();
    p1.state = ProposalState::Scored;
    let p1 = r.update_proposal(&p1).await.unwrap();
    assert_eq!(p1.version, 2);
    let pending = r.list_proposals(&t, Some(ProposalState::Pending), &PageRequest::first(10)).await.unwrap();
    assert_eq!(pending.items.iter().map(|p| p.id.to_string()).collect::<Vec<_>>(), ["p2"]);
    let scored = r.list_proposals(&t, Some(ProposalState::Scored), &PageRequest::first(10)).await.unwrap();
    assert_eq!(scored.items.len(), 1);

    let mut illegal = p1.clone();
    illegal.state = ProposalState::Written;
    assert_eq!(r.update_proposal(&illegal).await.unwrap_err().code, ErrorCode::Conflict, "scored cannot jump to written");
    let mut stale = p1.clone();
    stale.version = 1;
    stale.state = ProposalState::AwaitingApproval;
    assert_eq!(r.update_proposal(&stale).await.unwrap_err().code, ErrorCode::Conflict);
    assert_eq!(r.list_proposals(&t, None, &PageRequest::first(10)).await.unwrap().items.len(), 2);

    // A wait is stored with the proposal and read back whole.
    let mut waiting = p1.clone();
    waiting.state = ProposalState::AwaitingApproval;
    waiting.wait = Some(domain::proposal::Wait { token: "tok/1".into(), deadline: Timestamp(99) });
    let waiting = r.update_proposal(&waiting).await.unwrap();
    assert_eq!(r.get_proposal(&t, &id("p1")).await.unwrap().unwrap().wait, waiting.wait);
    assert!(!format!("{:?}", waiting.wait).contains("tok/1"), "the token never reaches a log");
    assert_eq!(waiting.clone().redacted().wait.unwrap().token, "", "nor a client");
}

/// The single writer's commit: proposal written, entry created, old entry superseded
/// and the audit records — all or nothing.
pub async fn governed_write_is_atomic(r: Records) {
    let t = fresh_tenant("gov");
    let old = r.put_memory(&memory(&t, "old", MemoryScope::Org), Expect::Absent).await.unwrap();
    let mut p = proposal(&t, "gp");
    p.state = ProposalState::Approved;
    r.create_proposal(&p).await.unwrap();
    let p = r.get_proposal(&t, &id("gp")).await.unwrap().unwrap();
    let audit = |n: &str| AuditRecord {
        tenant: t.clone(),
        id: id(n),
        at: Timestamp(5),
        actor: "governance".into(),
        action: "memory.write".into(),
        target: Some("gp".into()),
        outcome: "active".into(),
        request_id: None,
        via: None,
    };
    let mut written = p.clone();
    written.state = ProposalState::Written;
    let mut entry = memory(&t, "gp", MemoryScope::Org);
    entry.lineage.supersedes = Some(id("old"));
    let mut superseded = old.clone();
    superseded.state = GovernanceState::Superseded { by: id("gp") };

    // A stale version of the superseded entry: nothing at all is written.
    let mut stale = superseded.clone();
    stale.version = old.version + 7;
    let err = r.commit_governed_write(&written, &entry, Some(&stale), &[audit("a1")]).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert_eq!(r.get_proposal(&t, &id("gp")).await.unwrap().unwrap().state, ProposalState::Approved);
    assert_eq!(r.get_memory(&t, &id("gp")).await.unwrap(), None);
    assert_eq!(r.get_memory(&t, &id("old")).await.unwrap().unwrap().state, GovernanceState::Active);
    assert!(r.list_audit(&t, &PageRequest::first(10)).await.unwrap().items.is_empty());

    let stored = r.commit_governed_write(&written, &entry, Some(&superseded), &[audit("a1"), audit("a2")]).await.unwrap();
    assert_eq!(stored.state, ProposalState::Written);
    assert_eq!(r.get_memory(&t, &id("gp")).await.unwrap().unwrap().lineage.supersedes, Some(id("old")));
    assert_eq!(r.get_memory(&t, &id("old")).await.unwrap().unwrap().state, GovernanceState::Superseded { by: id("gp") });
    assert_eq!(r.list_audit(&t, &PageRequest::first(10)).await.unwrap().items.len(), 2);
    let written_list = r.list_proposals(&t, Some(ProposalState::Written), &PageRequest::first(10)).await.unwrap();
    assert_eq!(written_list.items.len(), 1);
    assert!(r.list_proposals(&t, Some(ProposalState::Approved), &PageRequest::first(10)).await.unwrap().items.is_empty());
    // Committing again (a retried write) conflicts and changes nothing.
    let again = r.commit_governed_write(&written, &entry, None, &[audit("a3")]).await.unwrap_err();
    assert_eq!(again.code, ErrorCode::Conflict);
    assert_eq!(r.list_audit(&t, &PageRequest::first(10)).await.unwrap().items.len(), 2);
}

/// Nothing of tenant A is reachable by tenant B through any method.
pub async fn tenant_isolation_everywhere(r: Records) {
    let a = fresh_tenant("iso-a");
    let b = fresh_tenant("iso-b");
    let e = entity(&a, "account", "shared-id", "A's secret account");
    r.put_entity(&e, Expect::Absent).await.unwrap();
    let aref = EntityRef { entity_type: ty("account"), id: id("shared-id") };
    r.put_relationship(&Relationship {
        tenant: a.clone(),
        from: aref.clone(),
        to: EntityRef { entity_type: ty("contact"), id: id("c") },
        kind: ty("has"),
        valid_from: Timestamp(1),
        valid_to: None,
        attributes: Attributes::new(),
    })
    .await
    .unwrap();
    r.append_signal(&Signal {
        tenant: a.clone(),
        id: id("sig-1"),
        entity: aref.clone(),
        kind: ty("x"),
        at: Timestamp(1),
        before: None,
        after: None,
    })
    .await
    .unwrap();
    r.put_memory(&memory(&a, "mem-1", MemoryScope::Org), Expect::Absent).await.unwrap();
    r.create_proposal(&proposal(&a, "prop-1")).await.unwrap();
    let pg = PageRequest::first(100);

    assert_eq!(r.get_entity(&b, &ty("account"), &id("shared-id")).await.unwrap(), None);
    assert!(r.list_entities(&b, None, &pg).await.unwrap().items.is_empty());
    assert!(r.list_relationships(&b, &aref, Direction::Outgoing, &pg).await.unwrap().items.is_empty());
    assert_eq!(r.get_signal(&b, &id("sig-1")).await.unwrap(), None);
    assert!(r.list_signals(&b, None, &pg).await.unwrap().items.is_empty());
    assert!(r.list_signals(&b, Some(&aref), &pg).await.unwrap().items.is_empty());
    assert_eq!(r.get_memory(&b, &id("mem-1")).await.unwrap(), None);
    assert!(r.list_memory(&b, &MemoryScope::Org, &pg).await.unwrap().items.is_empty());
    assert_eq!(r.get_proposal(&b, &id("prop-1")).await.unwrap(), None);
    assert!(r.list_proposals(&b, None, &pg).await.unwrap().items.is_empty());
    assert!(r.list_audit(&b, &pg).await.unwrap().items.is_empty());
    assert!(r.list_api_keys(&b, &pg).await.unwrap().items.is_empty());

    // A cursor taken from A's listing gives B nothing of A's.
    for i in 0..3 {
        r.put_entity(&entity(&a, "account", &format!("more-{i}"), "x"), Expect::Absent).await.unwrap();
    }
    let pa = r.list_entities(&a, None, &PageRequest::first(1)).await.unwrap();
    let stolen = pa.next_cursor.unwrap();
    let pb = r.list_entities(&b, None, &PageRequest::after(10, stolen)).await.unwrap();
    assert!(pb.items.is_empty());

    // B may reuse A's ids for its own records without touching A's.
    r.put_entity(&entity(&b, "account", "shared-id", "B's own"), Expect::Absent).await.unwrap();
    let still = r.get_entity(&a, &ty("account"), &id("shared-id")).await.unwrap().unwrap();
    assert_eq!(still.label(), "A's secret account");
}

fn source(s: &str) -> ConnectorSource {
    ConnectorSource::new(s).unwrap()
}

fn failure(stage: &str, message: &str) -> Option<(String, String)> {
    Some((stage.to_owned(), message.to_owned()))
}

pub async fn connector_status_transitions(r: Records) {
    use ConnectorState::*;
    let t = fresh_tenant("conn");
    let hs = source("hubspot");
    assert_eq!(r.get_connector(&t, &hs).await.unwrap(), None);

    // Register.
    let registered =
        r.put_connector(&ConnectorStatus::not_connected(t.clone(), hs.clone(), Timestamp(1)), Expect::Absent).await.unwrap();
    assert_eq!((registered.state, registered.version), (NotConnected, 1));
    let again = ConnectorStatus::not_connected(t.clone(), hs.clone(), Timestamp(2));
    assert_eq!(r.put_connector(&again, Expect::Absent).await.unwrap_err().code, ErrorCode::Conflict, "registered once");
    assert_eq!(r.get_connector(&t, &hs).await.unwrap(), Some(registered));

    // Walk the happy path, with progress while syncing_initial.
    let step = |to, progress| r.transition_connector(&t, &hs, to, progress, None, Timestamp(10));
    let s = step(OauthPending, None).await.unwrap();
    assert_eq!((s.state, s.version, s.updated_at), (OauthPending, 2, Timestamp(10)));
    assert!(!s.state.is_connected());
    let s = step(OauthComplete, None).await.unwrap();
    assert!(s.state.is_connected() && !s.state.has_data(), "connected is not data-populated");
    let s = step(SyncingInitial, Some(0.0)).await.unwrap();
    assert_eq!(s.progress, Some(0.0));
    let s = step(SyncingInitial, Some(0.25)).await.unwrap();
    assert_eq!((s.state, s.progress, s.version), (SyncingInitial, Some(0.25), 5));
    assert_eq!(r.get_connector(&t, &hs).await.unwrap().unwrap().progress, Some(0.25), "progress is persisted");
    let s = step(SyncComplete, Some(1.0)).await.unwrap();
    assert_eq!((s.state, s.progress), (SyncComplete, None), "progress is kept only while syncing_initial");
    assert!(s.state.has_data());
    for _ in 0..2 {
        assert_eq!(step(SyncingDelta, None).await.unwrap().state, SyncingDelta);
        assert_eq!(step(SyncComplete, None).await.unwrap().state, SyncComplete);
    }
    let before = r.get_connector(&t, &hs).await.unwrap().unwrap();
    assert_eq!((before.state, before.version), (SyncComplete, 10));

    // An illegal move is CONFLICT and leaves the stored state unchanged.
    let e = step(SyncingInitial, Some(0.1)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
    assert!(e.message.contains("sync_complete") && e.message.contains("syncing_initial"), "{}", e.message);
    assert_eq!(step(OauthPending, None).await.unwrap_err().code, ErrorCode::Conflict);
    assert_eq!(step(SyncError, None).await.unwrap_err().code, ErrorCode::InvalidRequest, "sync_error needs a stage");
    assert_eq!(r.get_connector(&t, &hs).await.unwrap(), Some(before.clone()));
    // So does bad input.
    let s = step(SyncingDelta, None).await.unwrap();
    assert_eq!(step(SyncingDelta, Some(1.5)).await.unwrap_err().code, ErrorCode::InvalidRequest);
    assert_eq!(r.get_connector(&t, &hs).await.unwrap(), Some(s));

    // sync_error records the failing stage; recovery clears it.
    let failed = r
        .transition_connector(&t, &hs, SyncError, None, failure("syncing_delta", "HubSpot answered 429"), Timestamp(20))
        .await
        .unwrap();
    let stored = r.get_connector(&t, &hs).await.unwrap().unwrap();
    assert_eq!(stored, failed);
    assert_eq!(stored.state, SyncError);
    assert_eq!(stored.error_stage.as_deref(), Some("syncing_delta"));
    assert_eq!(stored.error_message.as_deref(), Some("HubSpot answered 429"));
    assert_eq!(step(SyncComplete, None).await.unwrap_err().code, ErrorCode::Conflict, "a failure is never papered over");
    let retried = step(SyncingDelta, None).await.unwrap();
    assert_eq!((retried.error_stage, retried.error_message), (None, None));

    // A stale version loses: two writers computed their move from the same read.
    let read = r.get_connector(&t, &hs).await.unwrap().unwrap();
    let done = read.transition(SyncComplete, None, None, Timestamp(30)).unwrap();
    let broke = read.transition(SyncError, None, failure("syncing_delta", "timeout"), Timestamp(31)).unwrap();
    let won = r.put_connector(&done, Expect::Version(read.version)).await.unwrap();
    assert_eq!(won.version, read.version + 1);
    assert_eq!(r.put_connector(&broke, Expect::Version(read.version)).await.unwrap_err().code, ErrorCode::Conflict);
    assert_eq!(r.get_connector(&t, &hs).await.unwrap(), Some(won.clone()));
    // The store refuses a status that breaks the record invariants.
    let mut malformed = won.clone();
    malformed.progress = Some(0.5);
    assert_eq!(r.put_connector(&malformed, Expect::Version(won.version)).await.unwrap_err().code, ErrorCode::InvalidRequest);

    // Concurrent transitions: each one either lands or gets CONFLICT; none is lost.
    let s = step(SyncingDelta, None).await.unwrap();
    let attempts = 6u64;
    let handles: Vec<_> = (0..attempts)
        .map(|_| {
            let (r, t, hs) = (r.clone(), t.clone(), hs.clone());
            tokio::spawn(async move { r.transition_connector(&t, &hs, SyncingDelta, None, None, Timestamp(40)).await })
        })
        .collect();
    let mut landed = 0;
    for h in handles {
        match h.await.unwrap() {
            Ok(_) => landed += 1,
            Err(e) => assert_eq!(e.code, ErrorCode::Conflict, "{e}"),
        }
    }
    assert!(landed >= 1);
    assert_eq!(r.get_connector(&t, &hs).await.unwrap().unwrap().version, s.version + landed, "every success is one version");

    // Disconnection from a populated state; a first transition creates the record.
    let off = step(NotConnected, None).await.unwrap();
    assert!(!off.state.is_connected() && !off.state.has_data());
    assert_eq!(step(NotConnected, None).await.unwrap_err().code, ErrorCode::Conflict, "disconnecting twice");
    let stripe = r.transition_connector(&t, &source("stripe"), OauthPending, None, None, Timestamp(50)).await.unwrap();
    assert_eq!((stripe.state, stripe.version), (OauthPending, 1), "an absent connector is not_connected");
    assert_eq!(
        r.transition_connector(&t, &source("zendesk"), SyncingInitial, Some(0.0), None, Timestamp(50)).await.unwrap_err().code,
        ErrorCode::Conflict,
        "an absent connector cannot skip OAuth"
    );
    assert_eq!(r.get_connector(&t, &source("zendesk")).await.unwrap(), None, "a refused move writes nothing");

    // Listed in source order, through pages.
    for name in ["salesforce", "a-crm", "zendesk", "google_drive", "b2b"] {
        r.transition_connector(&t, &source(name), OauthPending, None, None, Timestamp(60)).await.unwrap();
    }
    let mut names = Vec::new();
    let mut page = PageRequest::first(2);
    loop {
        let p = r.list_connectors(&t, &page).await.unwrap();
        assert!(p.items.len() <= 2);
        assert!(p.items.iter().all(|c| c.tenant == t));
        names.extend(p.items.into_iter().map(|c| c.source.to_string()));
        match p.next_cursor {
            Some(c) => page = PageRequest::after(2, c),
            None => break,
        }
        assert!(names.len() <= 7);
    }
    assert_eq!(names, ["a-crm", "b2b", "google_drive", "hubspot", "salesforce", "stripe", "zendesk"]);
    let bad = r.list_connectors(&t, &PageRequest::after(2, "not-a-cursor")).await.unwrap_err();
    assert_eq!(bad.code, ErrorCode::InvalidRequest);
}

pub async fn connector_status_isolation(r: Records) {
    use ConnectorState::*;
    let a = fresh_tenant("conna");
    let b = fresh_tenant("connb");
    let hs = source("hubspot");
    for to in [OauthPending, OauthComplete, SyncingInitial, SyncComplete] {
        r.transition_connector(&a, &hs, to, None, None, Timestamp(1)).await.unwrap();
    }
    for name in ["salesforce", "stripe", "zendesk"] {
        r.transition_connector(&a, &source(name), OauthPending, None, None, Timestamp(1)).await.unwrap();
    }
    let a_hs = r.get_connector(&a, &hs).await.unwrap().unwrap();
    assert_eq!((a_hs.state, a_hs.version), (SyncComplete, 4));

    // B sees nothing of A's.
    let pg = PageRequest::first(100);
    assert_eq!(r.get_connector(&b, &hs).await.unwrap(), None);
    assert!(r.list_connectors(&b, &pg).await.unwrap().items.is_empty());
    let pa = r.list_connectors(&a, &PageRequest::first(1)).await.unwrap();
    let stolen = pa.next_cursor.unwrap();
    assert!(r.list_connectors(&b, &PageRequest::after(10, stolen)).await.unwrap().items.is_empty(), "A's cursor gives B nothing");

    // B's moves start from B's own (absent) state, never from A's.
    assert_eq!(
        r.transition_connector(&b, &hs, SyncingDelta, None, None, Timestamp(2)).await.unwrap_err().code,
        ErrorCode::Conflict,
        "A's sync_complete does not let B start a delta"
    );
    let b_hs = r.transition_connector(&b, &hs, OauthPending, None, None, Timestamp(2)).await.unwrap();
    assert_eq!((b_hs.tenant.clone(), b_hs.state, b_hs.version), (b.clone(), OauthPending, 1));
    assert_eq!(r.get_connector(&b, &hs).await.unwrap(), Some(b_hs));
    let listed = r.list_connectors(&b, &pg).await.unwrap();
    assert_eq!(
        listed.items.iter().map(|c| (c.tenant.clone(), c.source.to_string())).collect::<Vec<_>>(),
        [(b.clone(), "hubspot".to_string())]
    );

    // A's connector is untouched, and B disconnecting its own leaves A's alone.
    r.transition_connector(&b, &hs, NotConnected, None, None, Timestamp(3)).await.unwrap();
    assert_eq!(r.get_connector(&a, &hs).await.unwrap(), Some(a_hs));
    assert_eq!(r.list_connectors(&a, &pg).await.unwrap().items.len(), 4);
}

pub async fn graphs_are_versioned_per_scope(r: Records) {
    use domain::graph::{GraphEntity, GraphRelation};
    use ports::graph::{GraphChanges, GraphStore};
    let t = fresh_tenant("graph");
    let scope = "personal:u1";
    assert_eq!(r.graph_version(&t, scope).await.unwrap(), 0);
    let e = |n: &str| GraphEntity { name: n.into(), entity_type: "person".into(), observations: vec![format!("{n} likes tea")] };
    let rel = |a: &str, b: &str| GraphRelation { from: a.into(), to: b.into(), relation_type: "knows".into() };
    // 60 entities: three atomic groups, three versions.
    let many: Vec<GraphEntity> = (0..60).map(|i| e(&format!("Person {i}"))).collect();
    let v = r.apply_graph(&t, scope, 0, &GraphChanges { put_entities: many, ..Default::default() }).await.unwrap();
    assert_eq!(v, 3);
    assert_eq!(
        r.apply_graph(&t, scope, 0, &GraphChanges { put_entities: vec![e("x")], ..Default::default() }).await.unwrap_err().code,
        ErrorCode::Conflict,
        "a stale version"
    );
    let v = r
        .apply_graph(
            &t,
            scope,
            v,
            &GraphChanges { put_relations: vec![rel("Person 1", "Person 2"), rel("Person 2", "Person 3")], ..Default::default() },
        )
        .await
        .unwrap();
    let (version, entities, relations) = r.read_graph(&t, scope).await.unwrap();
    assert_eq!((version, entities.len(), relations.len()), (v, 60, 2));
    // Names with any characters; replacing and deleting by name.
    let odd = e("Zoë / #1 \"quoted\"");
    let v = r
        .apply_graph(
            &t,
            scope,
            v,
            &GraphChanges {
                put_entities: vec![odd.clone()],
                delete_entities: vec!["Person 0".into()],
                delete_relations: vec![rel("Person 1", "Person 2")],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let (_, entities, relations) = r.read_graph(&t, scope).await.unwrap();
    assert!(entities.contains(&odd) && !entities.iter().any(|x| x.name == "Person 0"));
    assert_eq!(relations, vec![rel("Person 2", "Person 3")]);
    // Scopes and tenants are separate graphs.
    assert_eq!(r.read_graph(&t, "project:apollo").await.unwrap().1.len(), 0);
    assert_eq!(r.read_graph(&fresh_tenant("graph"), scope).await.unwrap().1.len(), 0);
    assert!(r.graph_version(&t, "bad#scope").await.is_err());
    assert!(v > 3);
}
