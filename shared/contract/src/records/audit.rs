//! Contract of the audit ledger (newest first across its shards, counted, archived and
//! pruned with the legacy partition) and of the idempotency and replayable-call records.

use domain::audit::AuditRecord;
use domain::{ErrorCode, Id, PageRequest, Timestamp};
use ports::Records;
use ports::records::{AuditLog, IdempotencyStore, RetentionStore};

use crate::fresh_tenant;

fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

pub async fn audit_newest_first_and_idempotency(r: Records) {
    let t = fresh_tenant("aud");
    for i in 0..5 {
        r.append_audit(&AuditRecord {
            tenant: t.clone(),
            id: id(&format!("a{i}")),
            at: Timestamp(1000 + i),
            actor: "u1".into(),
            action: "tool:spine_entity_get".into(),
            target: None,
            outcome: "ok".into(),
            request_id: None,
            via: None,
        })
        .await
        .unwrap();
    }
    let p = r.list_audit(&t, &PageRequest::first(3)).await.unwrap();
    assert_eq!(p.items.iter().map(|a| a.id.to_string()).collect::<Vec<_>>(), ["a4", "a3", "a2"]);
    let p2 = r.list_audit(&t, &PageRequest::after(3, p.next_cursor.unwrap())).await.unwrap();
    assert_eq!(p2.items.iter().map(|a| a.id.to_string()).collect::<Vec<_>>(), ["a1", "a0"]);
    // Counting (the dashboard's figures), bounded, over every audit partition.
    assert_eq!(r.count_audit(t.as_str(), 100).await.unwrap(), 5);
    assert_eq!(r.count_audit(t.as_str(), 3).await.unwrap(), 3);
    assert_eq!(r.count(t.as_str(), "entity", "9", 100).await.unwrap(), 0);
    // Many records of two tenants at once, across several atomic groups.
    let (t1, t2) = (fresh_tenant("aud"), fresh_tenant("aud"));
    let many: Vec<AuditRecord> = (0..60)
        .map(|i| AuditRecord {
            tenant: if i % 2 == 0 { t1.clone() } else { t2.clone() },
            id: id(&format!("m{i:02}")),
            at: Timestamp(2000 + i),
            actor: "u1".into(),
            action: "tool:kb_search".into(),
            target: None,
            outcome: "ok".into(),
            request_id: None,
            via: None,
        })
        .collect();
    r.append_audits(&many).await.unwrap();
    assert_eq!(r.list_audit(&t1, &PageRequest::first(100)).await.unwrap().items.len(), 30);
    assert_eq!(r.list_audit(&t2, &PageRequest::first(100)).await.unwrap().items[0].id.as_str(), "m59");
    // Spread over the shards (no single hot partition), and still listed newest first
    // across them, page after page.
    let mut used = 0;
    for part in ports::records::audit_parts() {
        used += usize::from(r.count(t1.as_str(), &part, "", 100).await.unwrap() > 0);
    }
    assert!(used >= 4, "30 records over {} audit partitions landed in {used}", ports::records::AUDIT_SHARDS);
    let mut listed = Vec::new();
    let mut page = PageRequest::first(7);
    loop {
        let p = r.list_audit(&t1, &page).await.unwrap();
        listed.extend(p.items.iter().map(|a| a.id.to_string()));
        match p.next_cursor {
            Some(c) => page = PageRequest::after(7, c),
            None => break,
        }
    }
    let expected: Vec<String> = (0..60).rev().filter(|i| i % 2 == 0).map(|i| format!("m{i:02}")).collect();
    assert_eq!(listed, expected);
    // A record of the single partition earlier versions wrote is listed in its place,
    // archived and pruned with the others.
    let legacy = AuditRecord { tenant: t1.clone(), id: id("legacy"), at: Timestamp(2059), ..many[0].clone() };
    let body = serde_json::to_vec(&legacy).unwrap();
    let item = ports::items::Item {
        tenant: t1.as_str().to_owned(),
        part: ports::records::AUDIT_LEGACY.to_owned(),
        sk: format!("{:020}#legacy", 2059),
        version: 1,
        body,
    };
    r.items().write(vec![ports::items::Write::Put { item, condition: ports::items::Condition::Absent }]).await.unwrap();
    let top: Vec<String> =
        r.list_audit(&t1, &PageRequest::first(3)).await.unwrap().items.iter().map(|a| a.id.to_string()).collect();
    assert_eq!(top, ["legacy", "m58", "m56"]);
    assert_eq!(r.count_audit(t1.as_str(), 100).await.unwrap(), 31);
    let old = r.old_audit(&t1, Timestamp(2006), 100).await.unwrap();
    assert_eq!(old.iter().map(|a| a.id.to_string()).collect::<Vec<_>>(), ["m00", "m02", "m04"], "oldest first, over the shards");
    assert_eq!(r.prune_audit(&t1, Timestamp(2040), 100).await.unwrap(), 20, "the 20 before 2040");
    assert_eq!(r.count_audit(t1.as_str(), 100).await.unwrap(), 11);
    assert_eq!(r.prune_audit(&t1, Timestamp(2060), 100).await.unwrap(), 11, "the rest, the legacy one too");
    assert_eq!(r.count_audit(t1.as_str(), 100).await.unwrap(), 0);

    assert!(r.claim(&t, "ingest:batch-1:rec-7", Timestamp(1)).await.unwrap());
    assert!(!r.claim(&t, "ingest:batch-1:rec-7", Timestamp(2)).await.unwrap());
    assert_eq!(r.claim(&t, "", Timestamp(2)).await.unwrap_err().code, ErrorCode::InvalidRequest);

    // A replayable call: the first start runs it, later ones see it running, then its outcome.
    let key = "owner/bridge-0001";
    assert_eq!(r.begin_call(&t, key, Timestamp(5)).await.unwrap(), None);
    let running = r.begin_call(&t, key, Timestamp(6)).await.unwrap().unwrap();
    assert_eq!((running.started_at, running.outcome), (Timestamp(5), None));
    let done = ports::records::CallRecord {
        started_at: Timestamp(5),
        fingerprint: "f1".into(),
        outcome: Some(serde_json::json!({"content": []})),
    };
    r.finish_call(&t, key, &done).await.unwrap();
    assert_eq!(r.begin_call(&t, key, Timestamp(7)).await.unwrap(), Some(done));
    assert_eq!(r.begin_call(&t2, key, Timestamp(7)).await.unwrap(), None, "call keys are per tenant");
    assert_eq!(r.begin_call(&t, "bad key", Timestamp(7)).await.unwrap_err().code, ErrorCode::InvalidRequest);
    // A failed run worth retrying is dropped: the next start runs it again.
    r.abandon_call(&t, key).await.unwrap();
    assert_eq!(r.begin_call(&t, key, Timestamp(8)).await.unwrap(), None);
    // Records started before a time are pruned (the maintenance job, a week on).
    assert_eq!(r.prune_calls(&t, Timestamp(8), 100).await.unwrap(), 0, "started at 8: kept");
    assert_eq!(r.prune_calls(&t, Timestamp(9), 100).await.unwrap(), 1);
    assert_eq!(r.begin_call(&t, key, Timestamp(10)).await.unwrap(), None, "pruned");
}
