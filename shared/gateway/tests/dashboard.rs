//! The dashboard through the router: a browser's `GET /` is sent to it (an API client's
//! is not); sign-in with a key (CSRF-checked) — refused for a key without `tenant:read`
//! or `admin`; the overview and `GET /api/stats` give the figures the store holds
//! (counted independently here, part by part); the memory browser, an entry with its
//! lineage, forgetting a personal memory and proposing a change to an org entry (forms
//! without the session's CSRF token change nothing); the graph drawn; the audit log
//! filtered; an approvals-console session does not open the dashboard.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use axum::body::Body;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{Id, TenantId};
use http::Request;
use http_body_util::BodyExt;
use ports::records::MemoryStore as _;
use serde_json::{Value, json};
use tower::ServiceExt;

struct Resp {
    status: u16,
    headers: http::HeaderMap,
    body: String,
}

async fn send(app: &gateway::App, req: Request<Body>) -> Resp {
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    Resp { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
}

fn get(uri: &str, cookie: Option<&str>) -> Request<Body> {
    let mut b = Request::builder().uri(uri).header("host", "localhost").header("accept", "text/html");
    if let Some(c) = cookie {
        b = b.header("cookie", c);
    }
    b.body(Body::empty()).unwrap()
}

fn post(uri: &str, cookie: &str, form: &[(&str, &str)]) -> Request<Body> {
    let body: String = form
        .iter()
        .map(|(k, v)| {
            format!("{k}={}", v.replace('%', "%25").replace('&', "%26").replace('+', "%2B").replace(' ', "+").replace('=', "%3D"))
        })
        .collect::<Vec<_>>()
        .join("&");
    Request::builder()
        .method("POST")
        .uri(uri)
        .header("host", "localhost")
        .header("cookie", cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(body))
        .unwrap()
}

fn set_cookie(r: &Resp, name: &str) -> String {
    r.headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| c.strip_prefix(&format!("{name}=")).map(|v| v.split(';').next().unwrap().to_owned()))
        .unwrap_or_else(|| panic!("no {name} cookie"))
}

fn csrf_of(html: &str) -> String {
    html.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_owned()
}

/// Signs in with `key`; the session cookie and its CSRF secret.
async fn sign_in(app: &gateway::App, key: &str) -> Result<(String, String), Resp> {
    let login = send(app, get("/dashboard", None)).await;
    let csrf = csrf_of(&login.body);
    let login_cookie = format!("ctn_dashboard_login={}", set_cookie(&login, "ctn_dashboard_login"));
    let r = send(app, post("/dashboard/login", &login_cookie, &[("csrf", &csrf), ("key", key)])).await;
    if r.status != 303 {
        return Err(r);
    }
    let cookie = format!("ctn_dashboard={}", set_cookie(&r, "ctn_dashboard"));
    let page = send(app, get("/dashboard", Some(&cookie))).await;
    Ok((cookie, csrf_of(&page.body)))
}

#[tokio::test]
async fn the_dashboard_shows_what_the_store_holds() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::services(dir.path());
    let app = common::app(&s, "http://localhost");
    let t = TenantId::new("dash").unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    continuity_tests::demo::seed(&s, &t, "svc-reader").await;
    let owner = common::key(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
    let agent = common::key(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
    for text in ["Prefers dark mode", "Works from Lisbon"] {
        let v = common::rpc(&app, &owner, "tools/call", json!({"name": "memory.remember", "arguments": {"text": text}})).await;
        assert_ne!(v["result"]["isError"], true, "{v}");
    }
    let hedged = "Maybe the onboarding kickoff should be run by the account owner rather than support.";
    let v = common::rpc(
        &app,
        &agent,
        "tools/call",
        json!({"name": "memory.propose", "arguments": {"title": "Kickoff owner", "body": hedged, "kind": "decision"}}),
    )
    .await;
    assert_eq!(v["result"]["structuredContent"]["proposal"]["state"], "awaiting_approval", "{v}");

    // A browser at / is sent to the dashboard; an API client still gets the JSON answer.
    let r = send(&app, get("/", None)).await;
    assert_eq!((r.status, r.headers.get("location").unwrap().to_str().unwrap()), (303, "http://localhost/dashboard"));
    let api = send(&app, Request::builder().uri("/").header("host", "localhost").body(Body::empty()).unwrap()).await;
    assert_eq!(api.status, 401, "{}", api.body);
    let r = send(&app, get("/dashboard", None)).await;
    assert!(r.status == 200 && r.body.contains("Sign in with the key"), "{}", r.body);
    assert!(r.headers.get("content-security-policy").unwrap().to_str().unwrap().contains("default-src 'none'"));

    // A key with neither tenant:read nor admin is refused; a forged form too.
    let writer = common::key(&s, &t, "mcp:tools memory:write").await;
    let refused = sign_in(&app, &writer).await.unwrap_err();
    assert!(refused.status == 403 && refused.body.contains("tenant:read"), "{}", refused.body);
    let login = send(&app, get("/dashboard", None)).await;
    let forged = send(&app, post("/dashboard/login", "ctn_dashboard_login=abc", &[("csrf", "xyz"), ("key", &owner)])).await;
    assert!(forged.status == 403 && !forged.headers.contains_key("location"), "{}", login.status);

    let (cookie, csrf) = sign_in(&app, &owner).await.map_err(|r| r.body).unwrap();

    // The figures, counted here straight from the store, part by part.
    let items = s.backend.records.items();
    let count = |part: &'static str| {
        let items = items.clone();
        async move {
            let (found, _) = items
                .query(ports::items::Query { tenant: "dash", part, prefix: "", after: None, limit: 10_000, descending: false })
                .await
                .unwrap();
            found.len() as u64
        }
    };
    let stats = send(
        &app,
        Request::builder()
            .uri("/api/stats")
            .header("host", "localhost")
            .header("authorization", format!("Bearer {owner}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(stats.status, 200, "{}", stats.body);
    let v: Value = serde_json::from_str(&stats.body).unwrap();
    assert_eq!(v["entities"], count("entity").await);
    assert_eq!(v["relationships"], count("rel_out").await);
    assert_eq!(v["signals"], count("signal").await);
    assert!(
        v["entities"].as_u64().unwrap() > 0 && v["relationships"].as_u64().unwrap() > 0 && v["signals"].as_u64().unwrap() > 0,
        "{v}"
    );
    let waiting = s
        .backend
        .records
        .items()
        .query(ports::items::Query {
            tenant: "dash",
            part: "proposal_by_state",
            prefix: "awaiting_approval#",
            after: None,
            limit: 100,
            descending: false,
        })
        .await
        .unwrap()
        .0
        .len();
    assert_eq!(v["proposals_waiting"], waiting as u64);
    assert_eq!(waiting, 1);
    assert!(v["cache"].is_null() && v["queue_depth"].is_null(), "the deployment's figures are the operator's only: {v}");
    let all = s.backend.records.list_all_memory(&t, &domain::PageRequest::first(1000)).await.unwrap().items;
    let personal_active = all.iter().filter(|m| m.scope.kind() == "personal" && m.state.name() == "active").count();
    assert_eq!(v["memories"]["personal"]["active"], personal_active as u64, "{v}");
    assert_eq!(
        v["memories"]["org"]["active"],
        all.iter().filter(|m| m.scope.kind() == "org" && m.state.name() == "active").count() as u64
    );
    // The same through the session cookie, and the overview shows them.
    let by_cookie: Value = serde_json::from_str(&send(&app, get("/api/stats", Some(&cookie))).await.body).unwrap();
    assert_eq!(by_cookie["entities"], v["entities"]);
    let overview = send(&app, get("/dashboard", Some(&cookie))).await;
    assert!(overview.body.contains(&format!("id=\"stat-entities\">{}</b>", v["entities"])), "{}", overview.body);
    assert!(overview.body.contains("id=\"stat-waiting\"><a href=\"http://localhost/approvals\">1</a>"), "{}", overview.body);
    assert!(!overview.body.contains("<script"), "no script");
    // Without a credential: 401.
    assert_eq!(
        send(&app, Request::builder().uri("/api/stats").header("host", "localhost").body(Body::empty()).unwrap()).await.status,
        401
    );

    // The memory browser: the personal memories, then a search.
    let list = send(&app, get("/dashboard/memory?scope=personal", Some(&cookie))).await;
    assert!(list.body.contains("Prefers dark mode") && list.body.contains("Works from Lisbon"), "{}", list.body);
    let found = send(&app, get("/dashboard/memory?q=Lisbon", Some(&cookie))).await;
    assert!(found.body.contains("Works from Lisbon"), "{}", found.body);
    // Each hit shows its score (0 to 1) and why it matched: the legs and the words.
    assert!(found.body.contains("<th title=") && found.body.contains(">score</th>"), "{}", found.body);
    let why = found.body.split("<td class=\"why\">").nth(1).and_then(|r| r.split("</td>").next()).unwrap_or_default();
    assert!(why.contains("keyword") && why.contains("lisbon"), "{why}");
    let score = found.body.split("<td class=\"score\">").nth(1).and_then(|r| r.split("</td>").next()).unwrap_or_default();
    assert!(score.parse::<f64>().is_ok_and(|v| (0.0..=1.0).contains(&v)), "{score}");
    // An org entry of the demo set: its lineage and verification.
    let org = all.iter().find(|m| m.scope.kind() == "org" && m.state.name() == "active").unwrap();
    let page = send(&app, get(&format!("/dashboard/memory/{}", org.id), Some(&cookie))).await;
    assert!(
        page.body.contains("id=\"lineage\"")
            && page.body.contains("id=\"verification\"")
            && page.body.contains("Propose a change"),
        "{}",
        page.body
    );

    // Proposing a change: without the CSRF token nothing happens; with it, a proposal.
    let path = format!("/dashboard/memory/{}/propose", org.id);
    let bad = send(&app, post(&path, &cookie, &[("csrf", "nope"), ("title", "x"), ("body", "y")])).await;
    assert_eq!(bad.status, 403);
    let body = format!("{} Updated in the 2026 review.", org.body);
    let ok = send(&app, post(&path, &cookie, &[("csrf", &csrf), ("title", &org.title), ("body", &body)])).await;
    assert_eq!(ok.status, 303, "{}", ok.body);
    let props = s
        .backend
        .records
        .items()
        .query(ports::items::Query { tenant: "dash", part: "proposal", prefix: "", after: None, limit: 100, descending: false })
        .await
        .unwrap()
        .0;
    assert!(
        props.iter().any(|p| String::from_utf8_lossy(&p.body).contains(&format!("\"supersedes\":\"{}\"", org.id))),
        "a superseding proposal"
    );

    // Forgetting a personal memory of one's own.
    let mine = s
        .backend
        .records
        .list_all_memory(&t, &domain::PageRequest::first(1000))
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|m| m.body == "Prefers dark mode")
        .unwrap();
    let gone = send(&app, post(&format!("/dashboard/memory/{}/forget", mine.id), &cookie, &[("csrf", &csrf)])).await;
    assert_eq!(gone.status, 303, "{}", gone.body);
    let after = s.backend.records.get_memory(&t, &Id::new(mine.id.to_string()).unwrap()).await.unwrap().unwrap();
    assert_eq!(after.state.name(), "forgotten");

    // The graph and the audit log.
    let me = s.auth.authenticate_token(&owner, "http://localhost").await.unwrap();
    let people = [
        domain::graph::GraphEntity { name: "Ada <admin>".into(), entity_type: "person".into(), observations: vec![] },
        domain::graph::GraphEntity { name: "Acme".into(), entity_type: "company".into(), observations: vec![] },
    ];
    let works =
        [domain::graph::GraphRelation { from: "Ada <admin>".into(), to: "Acme".into(), relation_type: "works_at".into() }];
    s.graph.import(&me, "personal", &people, &works).await.unwrap();
    let g = send(&app, get("/dashboard/graph", Some(&cookie))).await;
    assert!(
        g.body.contains("2 entities, 1 relations") && g.body.contains("Ada &lt;admin&gt;") && !g.body.contains("Ada <admin>"),
        "{}",
        g.body
    );
    assert_eq!(g.body.matches("<circle").count(), 2);
    // The audit ledger names everyone's actions: a tenant:read key is refused, an admin key reads it.
    let audit = send(&app, get("/dashboard/audit", Some(&cookie))).await;
    assert!(audit.status == 403 && audit.body.contains("admin"), "{} {}", audit.status, audit.body);
    let admin = common::key(&s, &t, "admin tenant:read").await;
    let (admin_cookie, _) = sign_in(&app, &admin).await.map_err(|r| r.body).unwrap();
    let audit = send(&app, get("/dashboard/audit?action=memory_forget", Some(&admin_cookie))).await;
    assert!(audit.body.contains("<td>tool:memory_forget</td>") && !audit.body.contains("tool:memory_remember"), "{}", audit.body);
    // Which client acted: the dashboard's own session here.
    assert!(audit.body.contains("<td>dashboard:key:"), "{}", audit.body);

    // An approvals-console session is not a dashboard session.
    let approver = common::key(&s, &t, "approvals:decide tenant:read").await;
    let console = send(&app, get("/approvals", None)).await;
    let ccsrf = csrf_of(&console.body);
    let ccookie = format!("ctn_console_login={}", set_cookie(&console, "ctn_console_login"));
    let signed = send(&app, post("/approvals/login", &ccookie, &[("csrf", &ccsrf), ("key", &approver)])).await;
    let console_session = set_cookie(&signed, "ctn_console");
    let r = send(&app, get("/dashboard", Some(&format!("ctn_dashboard={console_session}")))).await;
    assert!(r.body.contains("Sign in with the key"), "a console token opens no dashboard");
}

/// One sign-in opens both pages a credential may open (each session with its own page's
/// scopes); signing out of either ends both for good: the cookies copied before the
/// sign-out open nothing afterwards.
#[tokio::test]
async fn one_sign_in_for_both_pages_and_a_sign_out_that_ends_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::services(dir.path());
    let app = common::app(&s, "http://localhost");
    let t = TenantId::new("both").unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let owner = common::key(&s, &t, "approvals:decide tenant:read admin").await;
    let login = send(&app, get("/dashboard", None)).await;
    let csrf = csrf_of(&login.body);
    let login_cookie = format!("ctn_dashboard_login={}", set_cookie(&login, "ctn_dashboard_login"));
    let r = send(&app, post("/dashboard/login", &login_cookie, &[("csrf", &csrf), ("key", &owner)])).await;
    assert_eq!(r.status, 303);
    let (dash, console) = (set_cookie(&r, "ctn_dashboard"), set_cookie(&r, "ctn_console"));
    let both = format!("ctn_dashboard={dash}; ctn_console={console}");
    let approvals = send(&app, get("/approvals", Some(&both))).await;
    assert!(!approvals.body.contains("Sign in with"), "the console is open without a second sign-in: {}", approvals.body);
    let page = send(&app, get("/dashboard", Some(&both))).await;
    assert!(!page.body.contains("Sign in with the key"), "{}", page.body);
    // A dashboard-only key gets the dashboard's session alone.
    let reader = common::key(&s, &t, "tenant:read").await;
    let r = send(&app, post("/dashboard/login", &login_cookie, &[("csrf", &csrf), ("key", &reader)])).await;
    assert!(r.headers.get_all("set-cookie").iter().all(|c| !c.to_str().unwrap().starts_with("ctn_console=")));

    // Sign out of the dashboard: both sessions end, and the copied cookies open nothing.
    let out = send(&app, post("/dashboard/logout", &both, &[("csrf", &csrf_of(&page.body))])).await;
    assert_eq!(out.status, 303);
    let after = send(&app, get("/dashboard", Some(&format!("ctn_dashboard={dash}")))).await;
    assert!(after.body.contains("Sign in with the key"), "a copied dashboard cookie works no more");
    let after = send(&app, get("/approvals", Some(&format!("ctn_console={console}")))).await;
    assert!(after.body.contains("Sign in"), "nor the console's");
}

/// The review queue page: an admin sees each record whose readback failed with why,
/// retries one (indexed again and verified: it leaves the queue) and forgets another
/// (off the queue, the record kept); a form without the session's CSRF token changes
/// nothing, and a signed-in reader without `approvals:decide` is refused the page.
#[tokio::test]
async fn the_review_page_retries_and_forgets() {
    use ports::records::{LibraryStore as _, ReviewStore as _};
    let dir = tempfile::tempdir().unwrap();
    let s = common::services(dir.path());
    let app = common::app(&s, "http://localhost");
    let t = TenantId::new("rev").unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let writer = continuity_tests::caller(&s, &t, "tenant:read tenant:write mcp:tools").await;
    for (id, title) in [("kb-pager", "Pager policy"), ("kb-rota", "Holiday rota")] {
        let input = services::search::KbInput {
            id: Some(id.into()),
            scope: Some("org".into()),
            title: title.into(),
            body: "The pager rotates weekly on Monday at nine.".into(),
            source: None,
        };
        let (_, v) = s.search.put_kb_document(&writer, input).await.unwrap();
        // As if the index had lost the write.
        let failed =
            domain::memory::Verification { verified: false, reason: "not retrieved by its readback query".into(), ..v.unwrap() };
        s.backend.records.put_verification(&failed).await.unwrap();
    }
    let admin = common::key(&s, &t, "tenant:read admin").await;
    let (cookie, csrf) = sign_in(&app, &admin).await.map_err(|r| r.body).unwrap();
    let page = send(&app, get("/dashboard/review", Some(&cookie))).await;
    assert_eq!(page.status, 200, "{}", page.body);
    for needle in [
        "Pager policy",
        "Holiday rota",
        "not retrieved by its readback query",
        "id=\"retry-kb-kb-pager\"",
        "id=\"forget-kb-kb-rota\"",
    ] {
        assert!(page.body.contains(needle), "{needle}: {}", page.body);
    }
    // Without the CSRF token: nothing changes.
    let forged = send(&app, post("/dashboard/review/kb/kb-pager/retry", &cookie, &[("csrf", "nope")])).await;
    assert_ne!(forged.status, 303, "{}", forged.body);
    assert_eq!(s.backend.records.list_review(&t, &domain::PageRequest::first(10)).await.unwrap().items.len(), 2);
    // Retry: verified, off the queue.
    let r = send(&app, post("/dashboard/review/kb/kb-pager/retry", &cookie, &[("csrf", &csrf)])).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(r.headers.get("location").unwrap().to_str().unwrap().ends_with("/dashboard/review?done=verified"));
    // Forget: off the queue, the document still there.
    let r = send(&app, post("/dashboard/review/kb/kb-rota/forget", &cookie, &[("csrf", &csrf)])).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let page = send(&app, get("/dashboard/review?done=forgotten", Some(&cookie))).await;
    assert!(page.body.contains("Taken off the queue") && page.body.contains("id=\"review-empty\""), "{}", page.body);
    assert!(s.backend.records.get_kb_document(&t, &Id::new("kb-rota").unwrap()).await.unwrap().is_some());
    // Again: not in the queue any more.
    let r = send(&app, post("/dashboard/review/kb/kb-rota/forget", &cookie, &[("csrf", &csrf)])).await;
    assert!(r.status == 404 && r.body.contains("not in the review queue"), "{} {}", r.status, r.body);
    // A reader without approvals:decide or admin: refused.
    let reader = common::key(&s, &t, "tenant:read").await;
    let (cookie, _) = sign_in(&app, &reader).await.map_err(|r| r.body).unwrap();
    let page = send(&app, get("/dashboard/review", Some(&cookie))).await;
    assert_eq!(page.status, 403, "{}", page.body);
}

/// The Notifications page: an admin adds a webhook (its secret shown once, on that
/// answer only, never listed), sees it listed by host with its events, is refused a
/// channel with no events, and removes it; a `tenant:read` key is refused the page.
#[tokio::test]
async fn the_notifications_page_adds_lists_and_removes_channels() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::services(dir.path());
    let app = common::app(&s, "http://localhost");
    let t = TenantId::new("ntfy").unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let admin = common::key(&s, &t, "tenant:read admin").await;
    let (cookie, csrf) = sign_in(&app, &admin).await.map_err(|r| r.body).unwrap();
    let page = send(&app, get("/dashboard/notifications", Some(&cookie))).await;
    assert!(page.status == 200 && page.body.contains("id=\"channels-empty\""), "{}", page.body);
    assert!(page.body.contains("name=\"event.proposal.expiring\"") && page.body.contains("name=\"event.health.alarm\""));
    let form = [
        ("csrf", csrf.as_str()),
        ("kind", "webhook"),
        ("url", "http://127.0.0.1:9/hooks/continuity"),
        ("event.proposal.waiting", "on"),
        ("event.review.failed", "on"),
    ];
    let added = send(&app, post("/dashboard/notifications/add", &cookie, &form)).await;
    assert_eq!(added.status, 200, "{}", added.body);
    let secret = added.body.split("whsec_").nth(1).map(|r| r.split('<').next().unwrap().to_owned()).expect("the secret, once");
    assert!(added.body.contains("id=\"channels\"") && added.body.contains("proposal.waiting, review.failed"), "{}", added.body);
    let listed = send(&app, get("/dashboard/notifications", Some(&cookie))).await;
    assert!(listed.body.contains("127.0.0.1") && !listed.body.contains("/hooks/continuity"), "the host only: {}", listed.body);
    assert!(!listed.body.contains(&secret), "the secret is shown once");
    // No event checked: refused with the reason, nothing added.
    let none = send(&app, post("/dashboard/notifications/add", &cookie, &form[..3])).await;
    assert!(none.status == 400 && none.body.contains("at least one event kind"), "{} {}", none.status, none.body);
    let channels = s.notify.list(&t).await.unwrap();
    assert_eq!(channels.len(), 1);
    let id = channels[0]["id"].as_str().unwrap().to_owned();
    let r = send(&app, post(&format!("/dashboard/notifications/{id}/remove"), &cookie, &[("csrf", &csrf)])).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(s.notify.list(&t).await.unwrap().is_empty());
    // A reader: refused.
    let reader = common::key(&s, &t, "tenant:read").await;
    let (cookie, _) = sign_in(&app, &reader).await.map_err(|r| r.body).unwrap();
    let page = send(&app, get("/dashboard/notifications", Some(&cookie))).await;
    assert_eq!(page.status, 403, "{}", page.body);
}
