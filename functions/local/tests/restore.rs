//! `continuity backup` / `continuity restore` on a home: every operator write is backed
//! up as JSONL; after the record store is deleted, restore brings the same entities back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use ports::records::EntityStore;

const BIN: &str = env!("CARGO_BIN_EXE_continuity");

fn cli(home: &Path, args: &[&str]) -> String {
    let out = Command::new(BIN).arg("--home").arg(home).args(args).env("RUST_LOG", "warn").output().expect("run cli");
    assert!(out.status.success(), "continuity {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf8")
}

async fn entities(home: &Path) -> Vec<(String, String, String)> {
    let b = store_embedded::open_backend(home, Arc::new(ports::SystemClock)).unwrap();
    let t = domain::TenantId::new("local").unwrap();
    let mut v: Vec<_> = b
        .records
        .list_entities(&t, None, &domain::PageRequest::first(100))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| (e.entity_type.to_string(), e.id.to_string(), serde_json::to_string(&e.attributes).unwrap()))
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn restore_replays_the_backups_into_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let put = |id: &str, attrs: &str| {
        cli(
            &home,
            &[
                "entity",
                "put",
                "--tenant",
                "local",
                "--type",
                "account",
                "--id",
                id,
                "--attributes",
                attrs,
                "--pole-class",
                "organization",
            ],
        )
    };
    put("acme:1", r#"{"name":"Acme","tier":"silver"}"#);
    put("acme:1", r#"{"name":"Acme","tier":"gold"}"#);
    put("globex-2", r#"{"name":"Globex"}"#);
    let before = entities(&home).await;
    assert_eq!(before.len(), 2);
    assert!(before[0].2.contains("gold"));

    for f in ["continuity.db", "continuity.db-wal", "continuity.db-shm"] {
        let _ = std::fs::remove_file(home.join(f));
    }
    assert!(entities(&home).await.is_empty(), "the record store is gone");
    let out = cli(&home, &["restore", "--tenant", "local"]);
    assert!(out.contains("2 entities written"), "{out}");
    assert_eq!(entities(&home).await, before, "the newest copy of each entity is back");
    let out = cli(&home, &["restore", "--tenant", "local"]);
    assert!(out.contains("0 entities written (2 already as new)"), "{out}");
    let out = cli(&home, &["backup", "--tenant", "local"]);
    assert!(out.contains("wrote 2 records"), "{out}");
}
