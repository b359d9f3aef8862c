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
    cli(&home, &["init"]);
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
    assert!(out.contains("the Spine snapshot: 2 records"), "{out}");
    assert!(out.contains("wrote the complete backup"), "{out}");
}

/// `continuity --backend aws restore` and `reindex`, configured like a Lambda, against
/// moto and Redis: backups written through the services on one table are replayed into
/// a fresh, empty table; the reindex runs on the same stack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_and_reindex_run_against_the_aws_backend() {
    use continuity_tests::aws;
    let source = aws::backend().await;
    let s = services::Services::new(source.clone());
    let t = contract::fresh_tenant("awsrestore");
    s.admin
        .create_tenant(
            t.clone(),
            domain::tenant::PlanTier::Pro,
            domain::tenant::Department::CustomerSuccess,
            domain::tenant::Industry::Saas,
        )
        .await
        .unwrap();
    let op = s.admin.operator(&t).await.unwrap();
    let mut attrs = domain::value::Attributes::new();
    attrs.insert("name".into(), "Initech".into());
    s.entities
        .put(
            &op,
            domain::EntityType::new("account").unwrap(),
            domain::Id::new("initech").unwrap(),
            domain::spine::PoleClass::Organization,
            attrs,
            ports::records::Expect::Any,
        )
        .await
        .unwrap();

    // An empty table of its own is the store being restored into.
    let (table, empty) = aws::fresh_table("restore").await;
    let moto = aws::env("CONTINUITY_TEST_MOTO_URL");
    let run = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(["--backend", "aws"])
            .args(args)
            .env("RUST_LOG", "warn")
            .env("AWS_REGION", aws::REGION)
            .env("CONTINUITY_AWS_ENDPOINT_URL", &moto)
            .env("CONTINUITY_TABLE", &table)
            .env("CONTINUITY_BUCKET", aws::BUCKET)
            .env("CONTINUITY_QUEUE_URL", "http://unused.invalid/queue")
            .env("CONTINUITY_DLQ_URL", "http://unused.invalid/dlq")
            .env("CONTINUITY_REDIS_URLS", aws::env("CONTINUITY_TEST_REDIS_URL"))
            .output()
            .expect("run cli");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) = run(&["restore", "--tenant", t.as_str()]);
    assert!(ok, "restore failed: {err}");
    assert!(out.contains("1 entities written"), "{out}");
    let e =
        empty.get_entity(&t, &domain::EntityType::new("account").unwrap(), &domain::Id::new("initech").unwrap()).await.unwrap();
    assert_eq!(e.unwrap().attributes.get("name"), Some(&domain::value::Value::Text("Initech".into())));
    // Without OpenSearch configured there is no index to reconcile: said, not faked.
    let (ok, out, err) = run(&["reindex", "--tenant", t.as_str()]);
    assert!(ok, "reindex failed: {err}");
    assert!(out.contains("0 indexed"), "{out}");
    // The admin commands run against the stack too; the ones that need a home are refused.
    // (The restore brought back the Spine, not the tenant registry: the list is empty.)
    let (ok, out, err) = run(&["tenant", "list"]);
    assert!(ok && out.trim().is_empty(), "{out}{err}");
    let (ok, _, err) = run(&["signing-key", "list"]);
    assert!(!ok && err.contains("embedded home"), "{err}");
}

#[test]
fn tenant_set_changes_the_triage_policy_and_refuses_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    cli(&home, &["init"]);
    cli(&home, &["tenant", "create", "strict", "--plan", "pro", "--department", "customer_success", "--industry", "saas"]);
    assert!(
        cli(&home, &["tenant", "show", "strict"])
            .contains("auto-approve ≥ 0.85, reject < 0.6, approval timeout 604800 s, personal data: human (defaults)")
    );
    cli(&home, &["tenant", "set", "strict", "--auto-approve", "0.95", "--triage-weights", "0.4,0.2,0.1,0.1,0.2"]);
    let shown = cli(&home, &["tenant", "show", "strict"]);
    assert!(shown.contains("weights [0.4, 0.2, 0.1, 0.1, 0.2], auto-approve ≥ 0.95, reject < 0.6"), "{shown}");
    cli(&home, &["tenant", "set", "strict", "--approval-timeout", "3600"]);
    assert!(cli(&home, &["tenant", "show", "strict"]).contains("approval timeout 3600 s"));
    cli(&home, &["tenant", "set", "strict", "--personal-data", "reject"]);
    assert!(cli(&home, &["tenant", "show", "strict"]).contains("personal data: reject"));
    let out = Command::new(BIN)
        .arg("--home")
        .arg(&home)
        .args(["tenant", "set", "strict", "--personal-data", "maybe"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "only human or reject");
    let out =
        Command::new(BIN).arg("--home").arg(&home).args(["tenant", "set", "strict", "--approval-timeout", "1"]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("approval_timeout_secs"));
    let out =
        Command::new(BIN).arg("--home").arg(&home).args(["tenant", "set", "strict", "--reject-below", "0.97"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("reject_below < auto_approve"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A graceful stop leaves every write in the database file (the write-ahead log emptied);
/// a home whose log was then lost — or whose database was replaced — is refused, never
/// silently made a new home with its owner key moved aside.
#[test]
fn a_stopped_home_keeps_its_writes_and_a_home_that_lost_them_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut child = std::process::Command::new(BIN)
        .args(["--embedder", "hashing", "serve", "--addr", "127.0.0.1:0", "--home"])
        .arg(&home)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    while let Some(Ok(line)) = lines.next() {
        if line.starts_with("Owner key:") {
            break;
        }
    }
    cli(&home, &["tenant", "create", "kept", "--plan", "pro"]);
    // SIGTERM: a graceful stop.
    let status = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success());
    let wal = home.join("continuity.db-wal");
    assert!(std::fs::metadata(&wal).map_or(true, |m| m.len() == 0), "the write-ahead log is empty after a graceful stop");
    let _ = std::fs::remove_file(&wal);
    assert!(cli(&home, &["tenant", "list"]).contains("kept"), "the write is in the database file itself");

    // The database replaced by an empty one beside the owner key: refused, nothing moved.
    for f in ["continuity.db", "continuity.db-wal", "continuity.db-shm"] {
        let _ = std::fs::remove_file(home.join(f));
    }
    std::fs::write(home.join("continuity.db"), b"").unwrap();
    let out = std::process::Command::new(BIN)
        .arg("--home")
        .arg(&home)
        .args(["--embedder", "hashing", "tenant", "list"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("its data is missing") && err.contains("continuity restore"), "{err}");
    assert!(home.join("owner.key").exists(), "the owner key is where it was");
    assert!(!std::fs::read_dir(&home).unwrap().any(|e| e.unwrap().file_name().to_string_lossy().contains("replaced")));
}
