//! Contract of the blob port: put/get/overwrite, ordered listing with paging, isolation.

use std::sync::Arc;

use domain::ErrorCode;
use ports::blob::{BlobKey, BlobStore, MAX_BLOB_BYTES};

use crate::fresh_tenant;

pub async fn put_get_overwrite(blobs: Arc<dyn BlobStore>) {
    let t = fresh_tenant("blob");
    let k = BlobKey::new(&t, "raw/2026-11-29/batch-1.json").unwrap();
    assert_eq!(blobs.get(&k).await.unwrap(), None);
    blobs.put(&k, b"{\"a\":1}").await.unwrap();
    assert_eq!(blobs.get(&k).await.unwrap().as_deref(), Some(b"{\"a\":1}".as_slice()));
    let binary: Vec<u8> = (0..=255u8).collect();
    blobs.put(&k, &binary).await.unwrap();
    assert_eq!(blobs.get(&k).await.unwrap(), Some(binary));
    let too_big = vec![1u8; MAX_BLOB_BYTES + 1];
    assert_eq!(blobs.put(&k, &too_big).await.unwrap_err().code, ErrorCode::InvalidRequest);
}

pub async fn deletes_are_idempotent(blobs: Arc<dyn BlobStore>) {
    let t = fresh_tenant("blobdel");
    let (a, b) = (BlobKey::new(&t, "spine-backup/d/a.jsonl").unwrap(), BlobKey::new(&t, "spine-backup/d/b.jsonl").unwrap());
    blobs.put(&a, b"a").await.unwrap();
    blobs.put(&b, b"b").await.unwrap();
    blobs.delete(&a).await.unwrap();
    assert_eq!(blobs.get(&a).await.unwrap(), None);
    blobs.delete(&a).await.unwrap();
    assert_eq!(blobs.get(&b).await.unwrap().as_deref(), Some(b"b".as_slice()), "only the named blob goes");
    let listed: Vec<String> =
        blobs.list(&t, "spine-backup/", None, 10).await.unwrap().iter().map(|k| k.path().to_owned()).collect();
    assert_eq!(listed, ["spine-backup/d/b.jsonl"]);
    // Another tenant's delete of the same path touches nothing here.
    blobs.delete(&BlobKey::new(&fresh_tenant("blobdel"), "spine-backup/d/b.jsonl").unwrap()).await.unwrap();
    assert!(blobs.get(&b).await.unwrap().is_some());
}

pub async fn listing_is_ordered_and_paged(blobs: Arc<dyn BlobStore>) {
    let t = fresh_tenant("bloblist");
    for i in 0..7 {
        blobs.put(&BlobKey::new(&t, &format!("spine-backup/2026-11-29/part-{i:03}.jsonl")).unwrap(), b"x").await.unwrap();
    }
    blobs.put(&BlobKey::new(&t, "raw/other.json").unwrap(), b"y").await.unwrap();
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = blobs.list(&t, "spine-backup/", after.as_deref(), 3).await.unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 3);
        after = page.last().map(|k| k.path().to_owned());
        seen.extend(page.into_iter().map(|k| k.path().to_owned()));
        assert!(seen.len() <= 7);
    }
    let expected: Vec<String> = (0..7).map(|i| format!("spine-backup/2026-11-29/part-{i:03}.jsonl")).collect();
    assert_eq!(seen, expected);
}

pub async fn tenants_are_isolated(blobs: Arc<dyn BlobStore>) {
    let a = fresh_tenant("ba");
    let b = fresh_tenant("bb");
    blobs.put(&BlobKey::new(&a, "raw/secret.json").unwrap(), b"a").await.unwrap();
    assert_eq!(blobs.get(&BlobKey::new(&b, "raw/secret.json").unwrap()).await.unwrap(), None);
    assert!(blobs.list(&b, "", None, 100).await.unwrap().is_empty());
    let listed = blobs.list(&a, "", None, 100).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].tenant(), &a);
}
