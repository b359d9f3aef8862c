//! A small, realistic data set for tests that drive the tools end to end: an account
//! with a contact, two signals, org memory (one active entry and the one it superseded),
//! personal patterns of two users, a book-of-projects entry, a KB document and a
//! connector with data.

use domain::connector::{ConnectorSource, ConnectorState};
use domain::memory::{GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType};
use domain::spine::{BookEntry, EntityRef, KbDocument, PoleClass, Relationship, Signal};
use domain::value::{Attributes, Value as DValue};
use domain::{EntityType, Id, TenantId, Timestamp};
use ports::records::{ConnectorStore, Expect, LibraryStore, MemoryStore, RelationshipStore, SignalStore};
use services::Services;

fn org(t: &TenantId, id: &str, title: &str, body: &str, state: GovernanceState) -> MemoryEntry {
    MemoryEntry {
        tenant: t.clone(),
        id: Id::new(id).unwrap(),
        memory_type: MemoryType::Org,
        scope: MemoryScope::Org,
        kind: "decision".into(),
        title: title.into(),
        body: body.into(),
        state,
        lineage: Lineage::default(),
        created_by: Id::new("writer").unwrap(),
        created_at: Timestamp(1_000),
        updated_at: Timestamp(1_000),
        version: 0,
        occurred_at: None,
        expires_at: None,
        metadata: None,
    }
}

/// Seeds the data set into tenant `t`; `principal` owns the personal pattern `pref-1`.
pub async fn seed(s: &Services, t: &TenantId, principal: &str) {
    let op = s.admin.operator(t).await.unwrap();
    let mut acme = Attributes::new();
    acme.insert("name".into(), DValue::Text("Acme Corp".into()));
    let account = EntityType::new("account").unwrap();
    s.entities.put(&op, account.clone(), Id::new("acme-1").unwrap(), PoleClass::Organization, acme, Expect::Any).await.unwrap();
    let r = &s.backend.records;
    let acme_ref = EntityRef { entity_type: account, id: Id::new("acme-1").unwrap() };
    let ada = EntityRef { entity_type: EntityType::new("contact").unwrap(), id: Id::new("ada").unwrap() };
    r.put_relationship(&Relationship {
        tenant: t.clone(),
        from: ada.clone(),
        to: acme_ref.clone(),
        kind: EntityType::new("works_at").unwrap(),
        valid_from: Timestamp(1),
        valid_to: None,
        attributes: Attributes::new(),
    })
    .await
    .unwrap();
    for (i, kind) in ["stage_changed", "health_dropped"].iter().enumerate() {
        r.append_signal(&Signal {
            tenant: t.clone(),
            id: Id::new(format!("sig-{i}")).unwrap(),
            entity: acme_ref.clone(),
            kind: EntityType::new(*kind).unwrap(),
            at: Timestamp(10 + i64::try_from(i).unwrap()),
            before: Some(DValue::Text("a".into())),
            after: Some(DValue::Text("b".into())),
        })
        .await
        .unwrap();
    }
    r.put_memory(
        &org(
            t,
            "dec-1",
            "Acme renewals need CFO sign-off",
            "Every Acme Corp renewal above 50k needs the CFO.",
            GovernanceState::Active,
        ),
        Expect::Absent,
    )
    .await
    .unwrap();
    r.put_memory(
        &org(t, "dec-0", "Acme renewals by the AE", "Old rule.", GovernanceState::Superseded { by: Id::new("dec-1").unwrap() }),
        Expect::Absent,
    )
    .await
    .unwrap();
    let mut personal = org(t, "pref-1", "Prefers bullet points", "Answer in short bullet lists.", GovernanceState::Active);
    personal.memory_type = MemoryType::Personal;
    personal.scope = MemoryScope::Personal(principal.into());
    personal.kind = "preference".into();
    r.put_memory(&personal, Expect::Absent).await.unwrap();
    let mut other = personal.clone();
    other.id = Id::new("pref-2").unwrap();
    other.scope = MemoryScope::Personal("someone-else".into());
    other.title = "Someone else's secret preference".into();
    r.put_memory(&other, Expect::Absent).await.unwrap();
    r.put_book_entry(&BookEntry {
        tenant: t.clone(),
        id: Id::new("b1").unwrap(),
        project: "apollo".into(),
        title: "Kick-off".into(),
        body: "Scope agreed with Acme.".into(),
        created_at: Timestamp(5),
    })
    .await
    .unwrap();
    r.put_kb_document(&KbDocument {
        tenant: t.clone(),
        id: Id::new("kb-7").unwrap(),
        scope: domain::memory::MemoryScope::Org,
        title: "Refund policy".into(),
        body: "Refunds within 30 days of purchase.".into(),
        source: Some("handbook".into()),
        created_at: Timestamp(5),
    })
    .await
    .unwrap();
    let hub = ConnectorSource::new("hubspot").unwrap();
    for state in [
        ConnectorState::OauthPending,
        ConnectorState::OauthComplete,
        ConnectorState::SyncingInitial,
        ConnectorState::SyncComplete,
    ] {
        r.transition_connector(t, &hub, state, None, None, Timestamp(1)).await.unwrap();
    }
    // Records written straight to the store reach the search index the way a restore
    // does: through the reindex job.
    s.search.reindex(t, false, &|_| {}).await.unwrap();
}
