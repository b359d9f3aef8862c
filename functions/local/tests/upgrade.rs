//! Upgrades that keep the home: every committed fixture home (one per release, made by
//! `scripts/fixture-home.sh`) opens with this build and still holds its data; an older
//! home is copied, migrated, checked and recorded; a home written by a newer release is
//! refused with both versions named and left untouched. And `--version` names the
//! version and the commit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_continuity");

fn fixtures() -> PathBuf {
    continuity_tests::manifest_dir().join("tests/fixtures/homes")
}

/// A copy of a fixture home with a real home's permissions (git keeps none).
fn copy_home(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700)).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_home(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
}

use common::run;

fn recorded(home: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(home.join("format.json")).unwrap()).unwrap()
}

fn upgrades(home: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(home.join("upgrades")) {
        Ok(dir) => dir.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

fn schema(db: &Path) -> usize {
    store_embedded::db::schema_of(db).unwrap().unwrap()
}

/// Every file of the home but SQLite's transient `-wal`/`-shm` files, by name, with a
/// digest of its bytes.
fn contents(home: &Path) -> Vec<(PathBuf, u64)> {
    use std::hash::{Hash as _, Hasher as _};
    let mut out = Vec::new();
    let mut stack = vec![home.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let p = entry.unwrap().path();
            let name = p.to_string_lossy();
            if p.is_dir() {
                stack.push(p);
            } else if !name.ends_with("-wal") && !name.ends_with("-shm") {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                std::fs::read(&p).unwrap().hash(&mut h);
                out.push((p, h.finish()));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn every_committed_fixture_home_opens_with_this_build_and_keeps_its_data() {
    let mut seen = 0;
    for fixture in std::fs::read_dir(fixtures()).unwrap() {
        let fixture = fixture.unwrap().path();
        let release = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        copy_home(&fixture, &home);
        let before: serde_json::Value = recorded(&home);
        let server = common::spawn(&home);
        assert_eq!(server.key, std::fs::read_to_string(fixture.join("owner.key")).unwrap().trim(), "{release}: its owner key");
        let entity =
            common::call_tool(&server.base, &server.key, "spine_entity_get", json!({"type": "account", "id": "acme"})).await;
        assert!(entity.to_string().contains("Acme Corp"), "{release}: the Spine entity: {entity}");
        let found =
            common::call_tool(&server.base, &server.key, "memory_search", json!({"query": "quarterly review Thursdays"})).await;
        assert!(found.to_string().contains("moved to Thursdays"), "{release}: the imported memory: {found}");
        drop(server);
        let (ok, users, err) = run(&home, &["user", "list", "--tenant", "local"]);
        assert!(ok && users.contains("dana@example.com"), "{release}: its user: {users}{err}");
        // An older release's home was copied and upgraded; this release's opened as it was.
        let now = recorded(&home);
        assert_eq!(now["format"], json!(continuity::home::format::FORMAT), "{release}");
        assert_eq!(now["schema"], json!(store_embedded::db::SCHEMA), "{release}");
        let was_older = before["format"] != now["format"] || before["schema"] != now["schema"];
        assert_eq!(upgrades(&home).len(), usize::from(was_older), "{release}: a copy exactly when it was upgraded");
        seen += 1;
    }
    assert!(seen >= 1, "no fixture home in {}", fixtures().display());
}

#[test]
fn a_home_from_before_format_records_is_copied_recorded_and_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    copy_home(&fixtures().join("0.1.0"), &home);
    std::fs::remove_file(home.join("format.json")).unwrap();
    let (ok, out, err) = run(&home, &["tenant", "list"]);
    assert!(ok && out.contains("local"), "{out}{err}");
    assert!(err.contains("upgraded the home") && err.contains("home format 0 (no format.json)"), "{err}");
    let copies = upgrades(&home);
    assert_eq!(copies.len(), 1);
    assert!(err.contains(&copies[0].display().to_string()), "names where the copy is: {err}");
    // The copy is a whole, readable database of the old home.
    assert_eq!(schema(&copies[0].join("continuity.db")), store_embedded::db::SCHEMA);
    store_embedded::db::verify(&copies[0].join("continuity.db")).unwrap();
    assert_eq!(recorded(&home)["format"], json!(continuity::home::format::FORMAT));
    assert_eq!(recorded(&home)["written_by"], json!(format!("continuity {}", continuity::VERSION)));
    // Opened again: nothing more to do.
    let (ok, _, err) = run(&home, &["tenant", "list"]);
    assert!(ok && !err.contains("upgraded"), "{err}");
    assert_eq!(upgrades(&home).len(), 1);
}

#[test]
fn an_older_database_schema_is_copied_then_migrated_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    continuity::home::create_folder(&home).unwrap();
    let older = store_embedded::db::SCHEMA - 1;
    store_embedded::db::create_at_schema(&home.join("continuity.db"), older).unwrap();
    let (ok, out, err) = run(&home, &["tenant", "list"]);
    assert!(ok && out.contains("local"), "{out}{err}");
    assert!(err.contains(&format!("database schema {older} to continuity")), "{err}");
    let copies = upgrades(&home);
    assert_eq!(copies.len(), 1);
    assert_eq!(schema(&copies[0].join("continuity.db")), older, "the copy is the home as it was");
    assert_eq!(schema(&home.join("continuity.db")), store_embedded::db::SCHEMA, "the home is migrated");
    assert_eq!(recorded(&home)["schema"], json!(store_embedded::db::SCHEMA));
}

#[test]
fn a_home_written_by_a_newer_release_is_refused_with_both_versions_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    // A newer home format.
    let home = dir.path().join("newer-format");
    copy_home(&fixtures().join("0.1.0"), &home);
    let mut record = recorded(&home);
    record["format"] = json!(99);
    record["written_by"] = json!("continuity 9.0.0 (abcdef123456)");
    std::fs::write(home.join("format.json"), record.to_string()).unwrap();
    let before = contents(&home);
    for args in [&["tenant", "list"][..], &["serve", "--addr", "127.0.0.1:0"][..], &["stdio"][..]] {
        let (ok, _, err) = run(&home, args);
        assert!(!ok, "{args:?} must refuse");
        assert!(
            err.contains("written by continuity 9.0.0 (abcdef123456) (home format 99")
                && err.contains(&format!("this is continuity {}", continuity::VERSION)),
            "{args:?}: {err}"
        );
        assert!(err.contains("nothing in this one was changed"), "{err}");
        assert!(err.contains("next:  install the release that wrote the home"), "the next step: {err}");
    }
    assert_eq!(contents(&home), before, "not one byte of the home changed");

    // A newer database schema, whatever format.json says.
    let home = dir.path().join("newer-schema");
    copy_home(&fixtures().join("0.1.0"), &home);
    let conn = rusqlite::Connection::open(home.join("continuity.db")).unwrap();
    let newer = store_embedded::db::SCHEMA + 3;
    conn.pragma_update(None, "user_version", newer).unwrap();
    drop(conn);
    let before = contents(&home);
    let (ok, _, err) = run(&home, &["tenant", "list"]);
    assert!(!ok && err.contains(&format!("database schema {newer})")), "{err}");
    assert!(err.contains(&format!("database schema {})", store_embedded::db::SCHEMA)), "names this build's: {err}");
    assert_eq!(contents(&home), before);
}

#[test]
fn version_names_the_release_and_the_commit() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let prefix = format!("continuity {} (", env!("CARGO_PKG_VERSION"));
    assert!(out.status.success() && text.starts_with(&prefix) && text.trim_end().ends_with(')'), "{text}");
    let commit = &text.trim_end()[prefix.len()..text.trim_end().len() - 1];
    let git =
        Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).current_dir(continuity_tests::manifest_dir()).output();
    match git {
        Ok(g) if g.status.success() && std::env::var_os("CONTINUITY_COMMIT").is_none() => {
            assert_eq!(commit, String::from_utf8_lossy(&g.stdout).trim(), "the commit it was built from");
        }
        _ => assert!(!commit.is_empty()),
    }
}
