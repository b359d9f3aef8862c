//! The dashboard in a real headless Chromium against `continuity serve`: a browser at `/`
//! lands on the sign-in page, signs in with the owner key, sees the overview's figures,
//! searches memory, opens an org entry and sees its lineage (the proposal that made it)
//! and verification, and forgets a personal memory; screenshots are kept under
//! `$CONTINUITY_TEST_ARTIFACTS`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::browser::{Driver, keep};
use common::{call_tool, client, spawn};
use serde_json::json;

#[tokio::test]
async fn a_browser_signs_in_searches_and_opens_an_entry_with_its_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    // An org entry through governance (confident: approved without a person) and a personal memory.
    let body = "Renewal discounts for enterprise accounts are capped at 10 percent of the account ARR, approved by the CFO in the 2026 pricing review.";
    let r =
        call_tool(&s.base, &s.key, "memory.propose", json!({"title": "Renewal discount cap", "body": body, "kind": "decision"}))
            .await;
    assert_ne!(r["isError"], true, "{r}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = call_tool(&s.base, &s.key, "memory.search_org", json!({"query": "renewal discount cap"})).await;
        if found.to_string().contains("Renewal discount cap") {
            break;
        }
        assert!(Instant::now() < deadline, "the proposal was never written: {found}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let r = call_tool(&s.base, &s.key, "memory.remember", json!({"text": "Prefers answers with the code first"})).await;
    assert_ne!(r["isError"], true, "{r}");

    let browser = Driver::start().await;
    browser.go(&format!("{}/", s.base)).await;
    browser.wait_for(&["Sign in with the key"]).await;
    browser.type_into("#key", &s.key).await;
    browser.click("#sign-in").await;
    let page = browser.wait_for(&["Overview", "id=\"stat-entities\"", "proposals waiting", "Sign out"]).await;
    assert!(page.contains("mem-org-active") && page.contains("mem-personal-active"), "{page}");
    keep("dashboard-overview.png", &browser.screenshot().await);

    // Search memory and open the org entry: its lineage and verification.
    browser.go(&format!("{}/dashboard/memory", s.base)).await;
    browser.type_into("#q", "renewal discount").await;
    browser.click("#search").await;
    // The results page (the search box keeps the query), not the page before it.
    browser.wait_for(&["value=\"renewal discount\"", "Renewal discount cap", "id=\"results\""]).await;
    browser.click("#results a").await;
    let entry = browser.wait_for(&["Lineage", "made by proposal", "Verification", "Propose a change"]).await;
    assert!(entry.contains("capped at 10 percent"), "{entry}");
    keep("dashboard-entry.png", &browser.screenshot().await);

    // Forget the personal memory from its page.
    browser.go(&format!("{}/dashboard/memory?scope=personal", s.base)).await;
    browser.wait_for(&["Prefers answers with the code first"]).await;
    browser.click("#results a").await;
    browser.wait_for(&["Forget this memory"]).await;
    browser.click("#forget").await;
    browser.wait_for(&["Forgotten:"]).await;
    let after = call_tool(&s.base, &s.key, "memory.read_personal", json!({})).await;
    assert!(!after.to_string().contains("Prefers answers with the code first"), "{after}");
    keep("dashboard-forgotten.png", &browser.screenshot().await);
}

/// The Connectors page: Connect (the sign-in at the source, back to serve's callback),
/// the pull to `sync_complete`, Sync now and Disconnect, in a real browser. HubSpot is
/// the in-process stand-in of `continuity_tests::sources` (its sign-in page answers as a
/// person who allows access); HubSpot itself was not called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_connects_a_source_from_the_connectors_page() {
    use continuity_tests::source::FakeSource;
    use continuity_tests::sources::{DAY, World, now_ms};
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let fake = FakeSource::start().await;
    let world = World::default();
    world.set(|st| st.base = fake.base_url.clone());
    world.add("companies", 120, now_ms() - 10 * DAY);
    let w = world.clone();
    fake.handle(std::sync::Arc::new(move |seen| w.answer(seen)));
    let s = spawn(&home);
    let out = std::process::Command::new(common::BIN)
        .arg("--home")
        .arg(&home)
        .args([
            "source-app",
            "set",
            "hubspot",
            "--client-id",
            "hs-app",
            "--client-secret-env",
            "HS_SECRET",
            "--base-url",
            &fake.base_url,
        ])
        .env("HS_SECRET", "hs-secret")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let browser = Driver::start().await;
    browser.go(&format!("{}/dashboard", s.base)).await;
    browser.wait_for(&["Sign in with the key"]).await;
    browser.type_into("#key", &s.key).await;
    browser.click("#sign-in").await;
    browser.wait_for(&["Sign out"]).await;
    browser.go(&format!("{}/dashboard/connectors", s.base)).await;
    let page = browser.wait_for(&["Connect a source", "No source is connected yet", "id=\"connect-hubspot\""]).await;
    assert!(page.contains("continuity source-app set salesforce"), "a source without an app says what to do: {page}");
    keep("dashboard-connectors-empty.png", &browser.screenshot().await);
    browser.click("#connect-hubspot").await;
    browser.wait_for(&["id=\"sign-in-link\""]).await;
    browser.click("#sign-in-link").await;
    browser.wait_for(&["Connected", "hubspot is connected"]).await;

    let deadline = Instant::now() + Duration::from_secs(30);
    let page = loop {
        browser.go(&format!("{}/dashboard/connectors", s.base)).await;
        let page = browser.source().await;
        if page.contains("sync_complete") {
            break page;
        }
        assert!(Instant::now() < deadline, "never completed: {page}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(page.contains("id=\"sync-hubspot\"") && page.contains("id=\"disconnect-hubspot\""), "{page}");
    assert!(page.contains("120 records in the last pass"), "{page}");
    keep("dashboard-connectors.png", &browser.screenshot().await);
    browser.click("#sync-hubspot").await;
    browser.wait_for(&["A pull is queued."]).await;
    browser.click("#disconnect-hubspot").await;
    let page = browser.wait_for(&["Disconnected: the tokens are forgotten"]).await;
    assert!(page.contains("not_connected"), "{page}");
    assert!(
        fake.take().iter().any(|r| r.method == "DELETE" && r.path.starts_with("/oauth/v1/refresh-tokens/")),
        "revoked at HubSpot"
    );
}

/// Every dashboard page at 1280 px and at a phone's 390 px: nothing wider than the
/// viewport (no element's right edge past it, no horizontal scroll), times relative with
/// the exact time on hover; no two graph labels overlapping; a screenshot of each kept
/// (`dashboard-{page}-{width}.png`).
#[tokio::test]
async fn every_page_fits_a_desktop_and_a_phone() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    let long = "A very long decision title that goes on and on about renewal discounts for enterprise accounts in every region";
    let body = "Renewal discounts for enterprise accounts are capped at 10 percent of the account ARR, approved by the CFO in the 2026 pricing review; see https://wiki.example.com/pricing/2026/enterprise-renewal-discount-policy-final-version-approved.";
    let r = call_tool(&s.base, &s.key, "memory.propose", json!({"title": long, "body": body, "kind": "decision"})).await;
    assert_ne!(r["isError"], true, "{r}");
    call_tool(&s.base, &s.key, "memory.remember", json!({"text": "Prefers answers with the code first"})).await;
    // A graph of two pages: a key with the graph toolset fills the owner's personal graph
    // with 45 entities of four types, a hub and chains among them.
    let graph_key = client()
        .post(format!("{}/v1/admin/tenants/local/keys", s.base))
        .bearer_auth(&s.key)
        .json(&json!({"scopes": "mcp:tools memory:read memory:write", "principal": "owner", "toolsets": "canonical,graph"}))
        .send()
        .await
        .unwrap();
    assert_eq!(graph_key.status(), 201);
    let graph_key = graph_key.json::<serde_json::Value>().await.unwrap()["token"].as_str().unwrap().to_owned();
    let names: Vec<String> =
        (0..45).map(|i| format!("{} {i}", ["Customer account", "Renewal deal", "Account manager", "Region"][i % 4])).collect();
    let entities: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let kind = ["company", "deal", "person", "place"][i % 4];
            json!({"name": n, "entityType": kind, "observations": []})
        })
        .collect();
    let r = call_tool(&s.base, &graph_key, "create_entities", json!({"entities": entities})).await;
    assert_ne!(r["isError"], true, "{r}");
    let mut relations: Vec<_> = (1..12).map(|i| json!({"from": names[0], "to": names[i], "relationType": "owns"})).collect();
    relations.extend((12..44).map(|i| json!({"from": names[i], "to": names[i + 1], "relationType": "works with"})));
    let r = call_tool(&s.base, &graph_key, "create_relations", json!({"relations": relations})).await;
    assert_ne!(r["isError"], true, "{r}");

    let browser = Driver::start().await;
    browser.go(&format!("{}/dashboard", s.base)).await;
    browser.wait_for(&["Sign in with the key"]).await;
    browser.type_into("#key", &s.key).await;
    browser.click("#sign-in").await;
    browser.wait_for(&["Sign out"]).await;
    let check = "const w = document.documentElement.clientWidth; let worst = null; \
        for (const e of document.querySelectorAll('body *')) { const r = e.getBoundingClientRect(); \
          if (r.width > 0 && r.right > w + 1) { worst = e.tagName + (e.id ? '#' + e.id : '') + ' ends at ' + Math.round(r.right); break; } } \
        return {width: w, scroll: document.documentElement.scrollWidth, worst: worst};";
    for (width, label) in [(1280, "1280"), (390, "390")] {
        browser.resize(width, 1400).await;
        for (page, needle) in [
            ("/dashboard", "Overview"),
            ("/dashboard/memory?scope=org", "id=\"results\""),
            ("/dashboard/memory?q=renewal%20discount", "id=\"results\""),
            ("/dashboard/graph?scope=personal", "id=\"legend\""),
            ("/dashboard/connectors", "Connect a source"),
            ("/dashboard/review", "id=\"review-empty\""),
            ("/dashboard/notifications", "Add a channel"),
            ("/dashboard/audit", "id=\"audit\""),
        ] {
            browser.go(&format!("{}{page}", s.base)).await;
            let html = browser.wait_for(&[needle]).await;
            let fit = browser.eval(check).await;
            assert!(fit["worst"].is_null() && fit["scroll"].as_u64() <= fit["width"].as_u64(), "{page} at {width} px: {fit}");
            if page.starts_with("/dashboard/graph") {
                // Every label drawn, none overlapping another, in either width; a legend of
                // the four types; 40 of the 45 entities on the first page, a link to the next.
                let labels = browser
                    .eval(
                        "const r = [...document.querySelectorAll('#graph text')].map(t => t.getBoundingClientRect()); \
                         let hit = null; for (let i = 0; i < r.length; i++) for (let j = i + 1; j < r.length; j++) \
                           if (r[i].left < r[j].right && r[j].left < r[i].right && r[i].top < r[j].bottom && r[j].top < r[i].bottom) hit = [i, j]; \
                         return {count: r.length, overlap: hit, legend: document.querySelectorAll('#legend li').length};",
                    )
                    .await;
                assert_eq!(labels["count"], 40, "{labels}");
                assert_eq!(labels["legend"], 4, "{labels}");
                assert!(labels["overlap"].is_null(), "overlapping graph labels at {width} px: {labels}");
                assert!(html.contains("page 1 of 2") && html.contains("id=\"next-page\""), "{html}");
            }
            if page == "/dashboard/audit" {
                assert!(
                    html.contains("<time datetime=") && (html.contains("just now") || html.contains(" ago")),
                    "relative times: {html}"
                );
            }
            let name = page.trim_start_matches("/dashboard").split('?').next().unwrap().trim_start_matches('/');
            let name = if name.is_empty() { "overview" } else { name };
            let name = if page.contains("q=") { "search" } else { name };
            keep(&format!("dashboard-{name}-{label}.png"), &browser.screenshot().await);
        }
    }
}
