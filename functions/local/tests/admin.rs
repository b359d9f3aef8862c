//! The admin commands as an operator runs them: every change lands in the audit ledger
//! with who made it, and a start or a command that cannot work says why, precisely.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Command;
use std::sync::Arc;

use common::{BIN, cli};
use ports::records::AuditLog;

/// Tenant, key, user, client, IdP and entity changes made with the CLI are in the
/// tenant's audit ledger, each naming the operator (`cli:<user>`) and its target.
#[tokio::test]
async fn cli_admin_actions_are_audited() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let run = |args: &[&str]| {
        let out =
            Command::new(BIN).arg("--home").arg(&home).args(args).env("USER", "alice").env("RUST_LOG", "warn").output().unwrap();
        assert!(out.status.success(), "continuity {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    run(&["init"]);
    run(&["tenant", "create", "acme", "--plan", "pro"]);
    run(&["tenant", "set", "acme", "--rate-limit-per-minute", "600"]);
    let key = run(&["key", "create", "--tenant", "acme", "--scopes", "mcp:tools tenant:read"]).trim().to_owned();
    let key_id = key.split('.').nth(1).unwrap().to_owned();
    run(&["key", "revoke", "--tenant", "acme", &key_id]);
    run(&[
        "entity",
        "put",
        "--tenant",
        "acme",
        "--type",
        "account",
        "--id",
        "a1",
        "--attributes",
        r#"{"name":"Acme"}"#,
        "--pole-class",
        "organization",
    ]);
    let out = Command::new(BIN)
        .arg("--home")
        .arg(&home)
        .args(["user", "add", "--tenant", "acme", "--email", "ada@acme.example", "--role", "approver"])
        .env("USER", "alice")
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin.take().unwrap().write_all(b"a long enough password 42\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "user add: {}", String::from_utf8_lossy(&out.stderr));

    let backend = store_embedded::open_backend(&home, Arc::new(ports::SystemClock)).unwrap();
    let t = domain::TenantId::new("acme").unwrap();
    let ledger = backend.records.list_audit(&t, &domain::PageRequest::first(100)).await.unwrap().items;
    let find =
        |action: &str| ledger.iter().find(|a| a.action == action).unwrap_or_else(|| panic!("{action} not audited: {ledger:#?}"));
    for action in ["admin:tenant.create", "admin:tenant.set", "admin:key.create", "admin:key.revoke", "admin:user.add"] {
        assert_eq!(find(action).actor, "cli:alice", "{action}");
    }
    assert_eq!(find("admin:key.revoke").target.as_deref(), Some(key_id.as_str()));
    assert_eq!(find("admin:entity.put").target.as_deref(), Some("account:a1"));
    assert!(ledger.iter().all(|a| !a.outcome.contains("password")), "no secret in the ledger");
}

/// A home written by a newer version: the start says so (not "retry shortly").
#[test]
fn a_home_from_a_newer_version_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    cli(&home, &["init"]);
    let db = home.join("continuity.db");
    // SQLite's own tool for a header field: Python's sqlite3 (tests/run.sh runs on Python).
    let py = format!("import sqlite3; c = sqlite3.connect({:?}); c.execute('PRAGMA user_version = 99'); c.commit()", db);
    let status = Command::new("python3").args(["-c", &py]).status().unwrap();
    assert!(status.success());
    let out = Command::new(BIN).arg("--home").arg(&home).args(["tenant", "list"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("cannot read it") && err.contains("Install the newer release"), "{err}");
    assert!(err.contains("database schema 99"), "the detail for the operator: {err}");
    assert!(!err.contains("retry shortly"), "{err}");
}

/// `--backend aws` without its configuration names the missing variable.
#[test]
fn backend_aws_names_a_missing_variable() {
    let out =
        Command::new(BIN).args(["--backend", "aws", "maintenance"]).env_clear().env("PATH", "/usr/bin:/bin").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("CONTINUITY_"), "the variable is named: {err}");
    assert!(!err.contains("retry shortly"), "{err}");
}

/// Each subcommand's help lists the global options only where they do something (they
/// are still accepted anywhere, so scripts that put them first keep working).
#[test]
fn help_shows_options_only_where_they_apply() {
    let help = |args: &[&str]| {
        let out = Command::new(BIN).args(args).arg("--help").output().unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let key = help(&["key", "create"]);
    assert!(!key.contains("--embedder") && key.contains("--stack") && key.contains("--backend"), "{key}");
    let serve = help(&["serve"]);
    assert!(serve.contains("--embedder") && !serve.contains("--stack") && !serve.contains("--region"), "{serve}");
    let setup = help(&["setup"]);
    assert!(!setup.contains("--embedder") && !setup.contains("--backend"), "{setup}");
    let import = help(&["import"]);
    assert!(import.contains("--embedder") && import.contains("--stack"), "{import}");
    // Still accepted where hidden.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN).arg("--home").arg(dir.path()).args(["--embedder", "hashing", "init"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
