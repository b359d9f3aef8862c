//! The dashboard in a real headless Chromium against `continuity serve`: a browser at `/`
//! lands on the sign-in page, signs in with the owner key, sees the overview's figures,
//! searches memory, opens an org entry and sees its lineage (the proposal that made it)
//! and verification, and forgets a personal memory; screenshots are kept under
//! `$CONTINUITY_TEST_ARTIFACTS`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::browser::{Driver, keep};
use common::{call_tool, spawn};
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
