//! Connecting a source through `continuity serve`, as an operator and a person do it:
//! `source-app set`, `connector connect` (prints the link), the source's redirect to the
//! serve's callback page, the pull run by serve's own consumer until `sync_complete`,
//! the status on the CLI and over HTTP, and disconnecting over HTTP.
//!
//! HubSpot is the in-process stand-in of `continuity_tests::sources` (a stateful HTTP
//! server answering its documented OAuth and CRM search endpoints); HubSpot itself was
//! not called.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::{BIN, cli, client, spawn};
use continuity_tests::source::FakeSource;
use continuity_tests::sources::{DAY, World, now_ms, query, sign};
use serde_json::Value;

fn run_with_env(home: &std::path::Path, args: &[&str], env: (&str, &str)) -> (bool, String, String) {
    let out = Command::new(BIN).arg("--home").arg(home).args(args).env(env.0, env.1).env("RUST_LOG", "warn").output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_connects_hubspot_and_its_companies_arrive() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let fake = FakeSource::start().await;
    let world = World::default();
    world.set(|st| st.base = fake.base_url.clone());
    world.add("companies", 250, now_ms() - 10 * DAY);
    let w = world.clone();
    fake.handle(Arc::new(move |seen| w.answer(seen)));
    let server = spawn(&home);

    // Before an app is registered, connect says what the operator must do.
    let (ok, _, err) = common::run(&home, &["connector", "connect", "hubspot", "--tenant", "local"]);
    assert!(!ok && err.contains("source-app set hubspot"), "{err}");
    // The secret comes from the environment, never the command line.
    let (ok, out, err) = run_with_env(
        &home,
        &[
            "source-app",
            "set",
            "hubspot",
            "--client-id",
            "hs-app",
            "--client-secret-env",
            "HS_SECRET",
            "--webhook-secret-env",
            "HS_SECRET",
            "--base-url",
            &fake.base_url,
        ],
        ("HS_SECRET", "hs-secret-value"),
    );
    assert!(ok, "{err}");
    assert!(out.contains("registered the hubspot app"), "{out}");
    assert_eq!(cli(&home, &["source-app", "list"]).trim(), "hubspot");

    // The link names serve's callback; the person signs in and HubSpot sends them back.
    let out = cli(&home, &["connector", "connect", "hubspot", "--tenant", "local"]);
    let link = out.lines().map(str::trim).find(|l| l.starts_with("http")).unwrap_or_else(|| panic!("no link: {out}"));
    let q = query(link);
    assert_eq!(q["redirect_uri"], format!("{}/v1/connectors/oauth/callback", server.base));
    assert_eq!(q["client_id"], "hs-app");
    let back = format!("{}/v1/connectors/oauth/callback?code=good-code&state={}", server.base, q["state"]);
    let page = client().get(&back).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("default-src 'none'"));
    assert!(page.text().await.unwrap().contains("hubspot is connected"));
    let again = client().get(&back).send().await.unwrap();
    assert_eq!(again.status(), 400, "the link works once");
    assert!(again.text().await.unwrap().contains("used already"));

    // serve's consumer pulls it: sync_complete, every company in the Spine.
    let pulls = format!("{}/v1/connectors/pulls", server.base);
    let mut status = Value::Null;
    for _ in 0..300 {
        status = client().get(&pulls).bearer_auth(&server.key).send().await.unwrap().json().await.unwrap();
        if status["connectors"][0]["status"]["state"] == "sync_complete" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status["connectors"][0]["status"]["state"], "sync_complete", "{status}");
    assert!(status["connectors"][0]["pull"]["last_synced_at"].is_string(), "{status}");
    assert_eq!(status["connectable"].as_array().unwrap().len(), 5);
    let searches = fake.take().into_iter().filter(|s| s.path == "/crm/v3/objects/companies/search").count();
    assert_eq!(searches, 3, "250 companies in pages of 100");
    // Its interval over HTTP (the local tenant's plan allows 1 minute) and the CLI.
    let interval = format!("{}/v1/connectors/hubspot/interval", server.base);
    let r = client().put(&interval).bearer_auth(&server.key).json(&serde_json::json!({"minutes": 10})).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["interval_secs"], 600);
    let r = client().put(&interval).bearer_auth(&server.key).json(&serde_json::json!({"minutes": 0})).send().await.unwrap();
    assert_eq!(r.status(), 400, "below the plan's shortest");
    let r = client().put(&interval).bearer_auth(&server.key).json(&serde_json::json!({"every": 5})).send().await.unwrap();
    assert_eq!(r.status(), 400, "unknown fields refused");
    let out = cli(&home, &["connector", "interval", "hubspot", "--tenant", "local", "--minutes", "15"]);
    assert!(out.contains("pulled every 15 minutes"), "{out}");
    let out = cli(&home, &["connector", "status", "--tenant", "local"]);
    assert!(out.contains("hubspot") && out.contains("sync_complete") && out.contains("last pull"), "{out}");
    assert!(out.contains("(every 15 min)"), "{out}");
    let e = common::call_tool(
        &server.base,
        &server.key,
        "spine.entity.get",
        serde_json::json!({"type": "account", "id": canonical("7")}),
    )
    .await;
    assert!(e.to_string().contains("companies 6"), "a company pulled from HubSpot is in the Spine: {e}");

    // HubSpot's signed webhook through serve's route: a deleted company marked, once.
    let hook = format!("{}/v1/webhooks/local/hubspot", server.base);
    let body = serde_json::json!([{"subscriptionType": "company.deletion", "objectId": 9, "occurredAt": now_ms()}]).to_string();
    let send = |headers: Vec<(String, String)>| {
        let mut req = client().post(&hook).header("content-type", "application/json").body(body.clone());
        for (k, v) in headers {
            req = req.header(k, v);
        }
        req.send()
    };
    let r = send(sign::hubspot("hs-secret-value", &hook, &body, now_ms())).await.unwrap();
    assert_eq!(r.status(), 200);
    let got: Value = r.json().await.unwrap();
    assert_eq!((got["deleted"].as_u64(), got["duplicate"].as_bool()), (Some(1), Some(false)), "{got}");
    let r = send(sign::hubspot("not-the-secret", &hook, &body, now_ms())).await.unwrap();
    assert_eq!(r.status(), 401, "a forged delivery");
    let e = common::call_tool(
        &server.base,
        &server.key,
        "spine.entity.get",
        serde_json::json!({"type": "account", "id": canonical("9")}),
    )
    .await;
    assert!(e.to_string().contains("deleted_at"), "{e}");

    // Sync now over HTTP, then disconnect: revoked at HubSpot, the pull forgotten.
    let r = client().post(format!("{}/v1/connectors/hubspot/sync", server.base)).bearer_auth(&server.key).send().await.unwrap();
    assert_eq!(r.status(), 202);
    // The pull just asked for may still hold the connector: disconnect waits for it (409 meanwhile).
    let mut r = client().delete(format!("{}/v1/connectors/hubspot", server.base)).bearer_auth(&server.key).send().await.unwrap();
    for _ in 0..300 {
        if r.status() != 409 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        r = client().delete(format!("{}/v1/connectors/hubspot", server.base)).bearer_auth(&server.key).send().await.unwrap();
    }
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["revocation"], "revoked at HubSpot");
    let out = cli(&home, &["connector", "status", "--tenant", "local"]);
    assert!(out.contains("not_connected"), "{out}");
}

fn canonical(native: &str) -> String {
    services::ingest::mapping::canonical_id("hubspot", "account", native).to_string()
}

/// `kill -9` of `serve` in the middle of an initial pull of 2,500 companies; the next
/// `serve` resumes from the last committed page, and every company is written once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_killed_mid_way_resumes_without_duplicates() {
    use ports::records::EntityStore as _;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let fake = FakeSource::start().await;
    let world = World::default();
    world.set(|st| {
        st.base = fake.base_url.clone();
        st.delay = Duration::from_millis(150);
    });
    world.add("companies", 2500, now_ms() - 10 * DAY);
    let w = world.clone();
    fake.handle(Arc::new(move |seen| w.answer(seen)));
    let mut server = spawn(&home);
    let (ok, _, err) = run_with_env(
        &home,
        &["source-app", "set", "hubspot", "--client-id", "hs-app", "--client-secret-env", "S", "--base-url", &fake.base_url],
        ("S", "secret"),
    );
    assert!(ok, "{err}");
    let out = cli(&home, &["connector", "connect", "hubspot", "--tenant", "local"]);
    let link = out.lines().map(str::trim).find(|l| l.starts_with("http")).unwrap();
    let back = format!("{}/v1/connectors/oauth/callback?code=good-code&state={}", server.base, query(link)["state"]);
    assert_eq!(client().get(&back).send().await.unwrap().status(), 200);

    // Kill it once a few pages are committed.
    let pulls = |base: String, key: String| async move {
        let v: Value =
            client().get(format!("{base}/v1/connectors/pulls")).bearer_auth(key).send().await.unwrap().json().await.unwrap();
        v["connectors"][0].clone()
    };
    let mut fetched = 0;
    // Polled every 50 ms so the kill lands before the pull ends; up to a minute to get there.
    for _ in 0..1200 {
        fetched = pulls(server.base.clone(), server.key.clone()).await["pull"]["fetched"].as_u64().unwrap_or(0);
        if fetched >= 500 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!((500..2500).contains(&fetched), "killed mid-way: {fetched}");
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let before = fake.take().into_iter().filter(|s| s.path.ends_with("/search")).count();
    world.set(|st| st.delay = Duration::ZERO);

    let server = spawn(&home);
    let mut c = Value::Null;
    for _ in 0..600 {
        c = pulls(server.base.clone(), server.key.clone()).await;
        if c["status"]["state"] == "sync_complete" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(c["status"]["state"], "sync_complete", "{c}");
    let seen = fake.take();
    let first = seen.iter().find(|s| s.path.ends_with("/search")).unwrap().json();
    let after: u64 = first["after"].as_str().unwrap().parse().unwrap();
    assert!(after >= 500 && after <= fetched, "resumed at the last committed page ({after}), not from the start");
    let resumed = seen.iter().filter(|s| s.path.ends_with("/search")).count();
    assert!(before + resumed <= 25 + 2 + 2, "at most one page read twice: {before} + {resumed}");
    drop(server);
    let backend = store_embedded::open_backend(&home, Arc::new(ports::SystemClock)).unwrap();
    let tenant = domain::TenantId::new("local").unwrap();
    let ty = domain::EntityType::new("account").unwrap();
    let mut all = Vec::new();
    let mut page = domain::PageRequest::first(500);
    loop {
        let p = backend.records.list_entities(&tenant, Some(&ty), &page).await.unwrap();
        all.extend(p.items);
        match p.next_cursor {
            Some(c) => page = domain::PageRequest::after(500, c),
            None => break,
        }
    }
    let pulled: Vec<_> = all.iter().filter(|e| e.source_updated_at.is_some()).collect();
    assert_eq!(pulled.len(), 2500, "every company once");
    assert!(pulled.iter().all(|e| e.version == 1), "none written twice");
}
