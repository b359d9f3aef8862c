//! Contract of the item port: conditions, atomic batches, ordered queries, isolation.

use std::sync::Arc;

use domain::ErrorCode;
use ports::items::{Condition, Item, ItemStore, MAX_WRITES_PER_BATCH, Query, Write};

use crate::fresh_tenant;

fn item(tenant: &str, part: &str, sk: &str, version: u64, body: &str) -> Item {
    Item { tenant: tenant.into(), part: part.into(), sk: sk.into(), version, body: body.as_bytes().to_vec() }
}

fn put(i: Item, condition: Condition) -> Write {
    Write::Put { item: i, condition }
}

pub async fn conditions_guard_writes(store: Arc<dyn ItemStore>) {
    let t = fresh_tenant("items");
    let t = t.as_str();
    assert_eq!(store.get(t, "p", "a").await.unwrap(), None);
    store.write(vec![put(item(t, "p", "a", 1, "one"), Condition::Absent)]).await.unwrap();
    let e = store.write(vec![put(item(t, "p", "a", 1, "again"), Condition::Absent)]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
    assert_eq!(store.get(t, "p", "a").await.unwrap().unwrap().body, b"one");

    // Optimistic versioning: the right version wins once, a stale one loses.
    store.write(vec![put(item(t, "p", "a", 2, "two"), Condition::Version(1))]).await.unwrap();
    let e = store.write(vec![put(item(t, "p", "a", 2, "stale"), Condition::Version(1))]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
    let got = store.get(t, "p", "a").await.unwrap().unwrap();
    assert_eq!((got.version, got.body.as_slice()), (2, b"two".as_slice()));

    // Exists on a missing item fails; None always writes.
    let e = store.write(vec![put(item(t, "p", "zz", 1, "x"), Condition::Exists)]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
    store.write(vec![put(item(t, "p", "a", 9, "forced"), Condition::None)]).await.unwrap();
    assert_eq!(store.get(t, "p", "a").await.unwrap().unwrap().version, 9);

    store
        .write(vec![Write::Delete { tenant: t.into(), part: "p".into(), sk: "a".into(), condition: Condition::Version(9) }])
        .await
        .unwrap();
    assert_eq!(store.get(t, "p", "a").await.unwrap(), None);
}

pub async fn batches_are_atomic(store: Arc<dyn ItemStore>) {
    let t = fresh_tenant("atomic");
    let t = t.as_str();
    store.write(vec![put(item(t, "p", "exists", 1, "x"), Condition::None)]).await.unwrap();
    let e = store
        .write(vec![
            put(item(t, "p", "new-1", 1, "a"), Condition::Absent),
            put(item(t, "q", "new-2", 1, "b"), Condition::Absent),
            put(item(t, "p", "exists", 1, "y"), Condition::Absent),
        ])
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
    assert_eq!(store.get(t, "p", "new-1").await.unwrap(), None, "a failed batch must write nothing");
    assert_eq!(store.get(t, "q", "new-2").await.unwrap(), None);
    assert_eq!(store.get(t, "p", "exists").await.unwrap().unwrap().body, b"x");

    assert!(store.max_batch() >= MAX_WRITES_PER_BATCH);
    let most: Vec<Write> =
        (0..store.max_batch()).map(|i| put(item(t, "most", &format!("k{i:04}"), 1, "v"), Condition::Absent)).collect();
    store.write(most).await.expect("a batch of max_batch() writes lands");
    let (landed, _) =
        store.query(Query { tenant: t, part: "most", prefix: "", after: None, limit: 1000, descending: false }).await.unwrap();
    assert_eq!(landed.len(), store.max_batch());
    let too_many = (0..=store.max_batch()).map(|i| put(item(t, "p", &format!("k{i}"), 1, "v"), Condition::None)).collect();
    assert_eq!(store.write(too_many).await.unwrap_err().code, ErrorCode::InvalidRequest);
}

pub async fn queries_are_ordered_and_paged(store: Arc<dyn ItemStore>) {
    let t = fresh_tenant("query");
    let t = t.as_str();
    let mut writes = Vec::new();
    for i in 0..12 {
        writes.push(put(item(t, "p", &format!("a#{i:02}"), 1, "a"), Condition::None));
    }
    writes.push(put(item(t, "p", "b#00", 1, "b"), Condition::None));
    writes.push(put(item(t, "other", "a#99", 1, "o"), Condition::None));
    store.write(writes).await.unwrap();

    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let (page, more) = store
            .query(Query { tenant: t, part: "p", prefix: "a#", after: after.as_deref(), limit: 5, descending: false })
            .await
            .unwrap();
        assert!(page.len() <= 5);
        seen.extend(page.iter().map(|i| i.sk.clone()));
        if !more {
            break;
        }
        after = page.last().map(|i| i.sk.clone());
        assert!(seen.len() <= 12, "pagination must terminate");
    }
    let expected: Vec<String> = (0..12).map(|i| format!("a#{i:02}")).collect();
    assert_eq!(seen, expected);

    let (desc, _) =
        store.query(Query { tenant: t, part: "p", prefix: "", after: None, limit: 3, descending: true }).await.unwrap();
    let sks: Vec<_> = desc.iter().map(|i| i.sk.as_str()).collect();
    assert_eq!(sks, ["b#00", "a#11", "a#10"]);
    let (desc2, _) =
        store.query(Query { tenant: t, part: "p", prefix: "", after: Some("a#10"), limit: 2, descending: true }).await.unwrap();
    let sks: Vec<_> = desc2.iter().map(|i| i.sk.as_str()).collect();
    assert_eq!(sks, ["a#09", "a#08"]);

    // A cursor before, inside or beyond a prefix's range, either way.
    let sks = |after: &'static str, descending: bool| {
        let store = store.clone();
        async move {
            let q = Query { tenant: t, part: "p", prefix: "a#", after: Some(after), limit: 3, descending };
            store.query(q).await.unwrap().0.into_iter().map(|i| i.sk).collect::<Vec<_>>()
        }
    };
    assert_eq!(sks("0", false).await, ["a#00", "a#01", "a#02"], "a cursor before the prefix: from its start");
    assert_eq!(sks("a#05", false).await, ["a#06", "a#07", "a#08"]);
    assert_eq!(sks("a#11", false).await, Vec::<String>::new());
    assert_eq!(sks("b", false).await, Vec::<String>::new(), "a cursor beyond the prefix: nothing");
    assert_eq!(sks("z", true).await, ["a#11", "a#10", "a#09"], "descending from beyond: from its end");
    assert_eq!(sks("a#05", true).await, ["a#04", "a#03", "a#02"]);
    assert_eq!(sks("a#00", true).await, Vec::<String>::new());
    assert_eq!(sks("0", true).await, Vec::<String>::new());
}

/// An export reads every part of one tenant, page by page, and nothing of another
/// tenant — not even one whose name starts with the first's.
pub async fn a_tenant_scan_reads_all_of_it_and_nothing_else(store: Arc<dyn ItemStore>) {
    let a = fresh_tenant("scan");
    let longer = format!("{a}x");
    let mut expected = std::collections::BTreeSet::new();
    for part in ["alpha", "beta", "gamma"] {
        for n in 0..7 {
            let sk = format!("k{n:02}");
            store.write(vec![put(item(a.as_str(), part, &sk, 1, "v"), Condition::None)]).await.unwrap();
            expected.insert((part.to_owned(), sk));
        }
    }
    store.write(vec![put(item(&longer, "alpha", "k00", 1, "other"), Condition::None)]).await.unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let (items, next) = store.scan_tenant(a.as_str(), cursor.as_deref(), 4).await.unwrap();
        for i in items {
            assert_eq!(i.tenant, a.as_str());
            assert_eq!(i.body, b"v", "another tenant's item: {i:?}");
            assert!(seen.insert((i.part.clone(), i.sk.clone())), "returned twice: {i:?}");
        }
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, expected);
    assert!(store.scan_tenant(a.as_str(), Some("no cursor here"), 4).await.is_err());
}

pub async fn tenants_are_isolated(store: Arc<dyn ItemStore>) {
    let a = fresh_tenant("iso-a");
    let b = fresh_tenant("iso-b");
    store.write(vec![put(item(a.as_str(), "p", "secret", 1, "a-data"), Condition::None)]).await.unwrap();
    assert_eq!(store.get(b.as_str(), "p", "secret").await.unwrap(), None);
    let (items, _) = store
        .query(Query { tenant: b.as_str(), part: "p", prefix: "", after: None, limit: 100, descending: false })
        .await
        .unwrap();
    assert!(items.is_empty());
    // B writing the same key creates B's own item; A's is untouched.
    store.write(vec![put(item(b.as_str(), "p", "secret", 1, "b-data"), Condition::Absent)]).await.unwrap();
    assert_eq!(store.get(a.as_str(), "p", "secret").await.unwrap().unwrap().body, b"a-data");
}

/// Writes made inside a batched use case ([`ports::durability::batched`]) are written
/// when the call returns — read back and guarded by conditions at once — and
/// [`ItemStore::sync`] makes them durable (a backend whose writes are durable by
/// themselves has nothing to do); a second sync has nothing left.
pub async fn batched_writes_are_read_at_once_and_synced(store: Arc<dyn ItemStore>) {
    let t = fresh_tenant("batched");
    let t = t.as_str();
    ports::durability::batched(async {
        store.write(vec![put(item(t, "p", "a", 1, "one"), Condition::Absent)]).await.unwrap();
        assert_eq!(store.get(t, "p", "a").await.unwrap().unwrap().body, b"one");
        let e = store.write(vec![put(item(t, "p", "a", 1, "again"), Condition::Absent)]).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::Conflict);
        store.write(vec![put(item(t, "p", "b", 1, "two"), Condition::None)]).await.unwrap();
    })
    .await;
    store.sync().await.unwrap();
    store.sync().await.unwrap();
    let (items, more) =
        store.query(Query { tenant: t, part: "p", prefix: "", after: None, limit: 10, descending: false }).await.unwrap();
    assert_eq!(items.iter().map(|i| i.body.as_slice()).collect::<Vec<_>>(), [b"one".as_slice(), b"two".as_slice()]);
    assert!(!more);
}
