//! The approvals loop through `continuity serve` (SPEC §6.3, §6.4): a wait survives a
//! restart and is decided afterwards; a wait nobody decides expires (never approved);
//! the console's sign-in, session and CSRF checks over HTTP; and a real headless
//! Chromium (Debian's `chromium` + `chromedriver`, driven over the W3C WebDriver HTTP
//! protocol) that signs in as an approver user (workspace, e-mail, password), approves
//! one proposal and rejects another with a reason. The browser's screenshot is kept under `$CONTINUITY_TEST_ARTIFACTS`
//! (`tests/run.sh` sets it; default: the system temp folder).
//!
//! Gates (issue #18): `continuity gate` exit statuses on the home and over HTTP, and the
//! git pre-push hook refusing a push until a person authorizes it in the same browser.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Server, call_tool, cli, cli_with_stdin, client, spawn};
use serde_json::{Value, json};

/// Proposals triage sends to a person (hedged, so between the bars).
const WAITING: [(&str, &str); 3] = [
    ("Onboarding kickoff owner", "Maybe the onboarding kickoff should be run by the account owner rather than support."),
    ("Renewal call timing", "Maybe renewal calls should happen a quarter before the contract ends, not a month before."),
    (
        "Business review deck",
        "Perhaps the quarterly business review deck should be prepared by the account owner instead of the CSM.",
    ),
];

async fn propose(s: &Server, (title, body): (&str, &str)) -> String {
    let r = call_tool(&s.base, &s.key, "memory.propose", json!({"title": title, "body": body, "kind": "decision"})).await;
    let p = &r["structuredContent"]["proposal"];
    assert_eq!(p["state"], "awaiting_approval", "{r}");
    p["id"].as_str().unwrap().to_owned()
}

async fn status(s: &Server, id: &str) -> Value {
    call_tool(&s.base, &s.key, "proposal.status", json!({"id": id})).await["structuredContent"]["proposal"].clone()
}

const PASSWORD: &str = "correct horse battery staple";

/// A user who signs in on the console with a password.
fn user(s: &Server, email: &str, role: &str) {
    let out = cli_with_stdin(
        &s.home,
        &["user", "add", "--tenant", "local", "--email", email, "--role", role],
        &format!("{PASSWORD}\n"),
    );
    assert!(out.contains(&format!("added user {email}")), "{out}");
}

fn approver(s: &Server) -> String {
    cli(&s.home, &["key", "create", "--tenant", "local", "--scopes", "approvals:decide tenant:read"]).trim().to_owned()
}

async fn decide(s: &Server, key: &str, id: &str, verb: &str, reason: Option<&str>) -> (u16, Value) {
    let body = match reason {
        Some(r) => json!({"reason": r}),
        None => json!({}),
    };
    let r = client().post(format!("{}/v1/approvals/{id}/{verb}", s.base)).bearer_auth(key).json(&body).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_wait_survives_a_restart_and_one_nobody_decides_expires() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = spawn(&home);
    let key = approver(&s);
    let id = propose(&s, WAITING[0]).await;

    // Killed (no graceful shutdown) and started again on the same home.
    drop(s);
    let s = spawn(&home);
    let listed: Value =
        client().get(format!("{}/v1/approvals", s.base)).bearer_auth(&key).send().await.unwrap().json().await.unwrap();
    let waiting = &listed["approvals"][0]["proposal"];
    assert_eq!(waiting["id"], id.as_str(), "the wait is still there: {listed}");
    assert_eq!(waiting["wait"]["token"], "", "the task token never leaves the server");
    let (code, v) = decide(&s, &key, &id, "approve", Some("Owners know the account")).await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["proposal"]["state"], "written");
    let found = call_tool(&s.base, &s.key, "memory.search_org", json!({"query": "onboarding kickoff owner"})).await;
    assert_eq!(found["structuredContent"]["entries"][0]["title"], "Onboarding kickoff owner", "{found}");

    // A 2-second approval timeout: the embedded runner's timer escalates it.
    cli(&s.home, &["tenant", "set", "local", "--approval-timeout", "2"]);
    let id = propose(&s, WAITING[1]).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let p = loop {
        let p = status(&s, &id).await;
        if p["state"] != "awaiting_approval" || Instant::now() > deadline {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(p["state"], "expired", "{p}");
    assert!(p["decision_reason"].as_str().unwrap().contains("never auto-approved"), "{p}");
    let (code, v) = decide(&s, &key, &id, "approve", None).await;
    assert_eq!(code, 409, "an expired proposal cannot be decided: {v}");
    let found = call_tool(&s.base, &s.key, "memory.search_org", json!({"query": "renewal call timing"})).await;
    assert!(
        found["structuredContent"]["entries"].as_array().unwrap().iter().all(|e| e["title"] != "Renewal call timing"),
        "{found}"
    );
    let decisions = call_tool(&s.base, &s.key, "memory.list_decisions", json!({})).await;
    let expired =
        decisions["structuredContent"]["decisions"].as_array().unwrap().iter().find(|d| d["id"] == id.as_str()).cloned();
    assert_eq!(expired.map(|d| d["state"].clone()), Some(json!("expired")), "listed as expired: {decisions}");
}

/// `name=value` of a `Set-Cookie` header naming `name`.
fn set_cookie(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()).find_map(|c| {
        let first = c.split(';').next()?;
        first.starts_with(&format!("{name}=")).then(|| first.to_owned())
    })
}

fn csrf_of(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a csrf field") + "name=\"csrf\" value=\"".len();
    html[at..].split('"').next().unwrap().to_owned()
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

#[tokio::test]
async fn console_sign_in_sessions_and_csrf() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    let key = approver(&s);
    let agent = cli(&s.home, &["key", "create", "--tenant", "local", "--scopes", "mcp:tools memory:write"]).trim().to_owned();
    let id = propose(&s, WAITING[0]).await;
    let http = no_redirects();
    let url = format!("{}/approvals", s.base);

    let page = http.get(&url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("default-src 'none'"));
    let login_cookie = set_cookie(&page, "ctn_console_login").unwrap();
    let html = page.text().await.unwrap();
    assert!(html.contains("Approver key"));
    let csrf = csrf_of(&html);
    let login = |cookie: Option<String>, csrf: String, key: String| {
        let mut req = http.post(format!("{url}/login")).form(&[("csrf", csrf), ("key", key)]);
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        req.send()
    };
    // Forged: no cookie, or a csrf that does not match it.
    assert_eq!(login(None, csrf.clone(), key.clone()).await.unwrap().status(), 403);
    assert_eq!(login(Some(login_cookie.clone()), "0".repeat(32), key.clone()).await.unwrap().status(), 403);
    // A key without approvals:decide, and a wrong key.
    let r = login(Some(login_cookie.clone()), csrf.clone(), agent).await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.text().await.unwrap().contains("needs the approvals:decide scope"));
    assert_eq!(login(Some(login_cookie.clone()), csrf.clone(), "ctn_local.nope.nope".into()).await.unwrap().status(), 401);
    // The approver signs in: a session cookie, HttpOnly and SameSite=Strict.
    let r = login(Some(login_cookie.clone()), csrf.clone(), key.clone()).await.unwrap();
    assert_eq!(r.status(), 303);
    let raw = r.headers().get_all("set-cookie").iter().map(|v| v.to_str().unwrap().to_owned()).collect::<Vec<_>>().join("\n");
    assert!(raw.contains("HttpOnly") && raw.contains("SameSite=Strict"), "{raw}");
    let session = set_cookie(&r, "ctn_console").unwrap();
    assert!(!session.contains(&key), "the key is not in the cookie");

    let page = http.get(&url).header("cookie", &session).send().await.unwrap().text().await.unwrap();
    assert!(page.contains(&format!("id=\"p-{id}\"")) && page.contains("confidence") && page.contains("hedged"), "{page}");
    let token = csrf_of(&page);
    let post = |form: Vec<(&'static str, String)>| {
        http.post(format!("{url}/{id}/decide")).header("cookie", session.clone()).form(&form).send()
    };
    // No csrf, a wrong one, or a rejection without a reason: refused, nothing decided.
    let r = post(vec![("decision", "reject".into()), ("reason", "no".into())]).await.unwrap();
    assert_eq!(r.status(), 403);
    let r = post(vec![("csrf", "x".repeat(48)), ("decision", "reject".into()), ("reason", "no".into())]).await.unwrap();
    assert_eq!(r.status(), 403);
    let r = post(vec![("csrf", token.clone()), ("decision", "reject".into()), ("reason", " ".into())]).await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("a rejection needs a reason"));
    assert_eq!(status(&s, &id).await["state"], "awaiting_approval", "nothing was decided");
    // Without the session the decision form is refused too.
    let r = http
        .post(format!("{url}/{id}/decide"))
        .form(&[("csrf", token.clone()), ("decision", "approve".into())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // A user signs in with a password: an approver may, a member may not, a wrong
    // password is the one generic refusal.
    let out = cli_with_stdin(
        &s.home,
        &["user", "add", "--tenant", "local", "--email", "ada@example.com", "--role", "approver", "--teams", "support,emea"],
        &format!("{PASSWORD}\n"),
    );
    assert!(out.contains("added user ada@example.com (approver, teams emea,support)"), "{out}");
    user(&s, "bob@example.com", "member");
    let out = cli(&s.home, &["user", "set", "--tenant", "local", "--email", "bob@example.com", "--projects", "apollo"]);
    assert!(out.contains("changed user bob@example.com"), "{out}");
    let listed = cli(&s.home, &["user", "list", "--tenant", "local"]);
    assert!(listed.contains("ada@example.com  approver  active") && listed.contains("teams emea,support"), "{listed}");
    assert!(listed.contains("bob@example.com  member  active") && listed.contains("projects apollo"), "{listed}");
    // The operator writes the book of projects; agents read it.
    let out = cli(
        &s.home,
        &[
            "book",
            "put",
            "--tenant",
            "local",
            "--project",
            "apollo",
            "--id",
            "overview",
            "--title",
            "Apollo",
            "--body",
            "The billing rewrite.",
        ],
    );
    assert!(out.contains("stored apollo/overview"), "{out}");
    let book = call_tool(&s.base, &s.key, "book.list", json!({"project": "apollo"})).await;
    assert_eq!(book["structuredContent"]["entries"][0]["body"], "The billing rewrite.", "{book}");
    let user_login = |email: &'static str, password: &'static str| {
        http.post(format!("{url}/login"))
            .header("cookie", login_cookie.clone())
            .form(&[("csrf", csrf.as_str()), ("tenant", "local"), ("email", email), ("password", password)])
            .send()
    };
    let r = user_login("bob@example.com", PASSWORD).await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.text().await.unwrap().contains("Your role cannot decide approvals"));
    let r = user_login("ada@example.com", "not the password").await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.text().await.unwrap().contains("Unknown workspace, e-mail or password."));
    let r = user_login("ada@example.com", PASSWORD).await.unwrap();
    assert_eq!(r.status(), 303);
    let ada = set_cookie(&r, "ctn_console").unwrap();
    let page = http.get(&url).header("cookie", &ada).send().await.unwrap().text().await.unwrap();
    assert!(page.contains(&format!("id=\"p-{id}\"")), "the approver user sees the queue");
    assert!(page.contains("teams <span id=\"teams\">emea, support</span>"), "the console shows the user's teams: {page}");
    assert!(!page.contains(PASSWORD));

    // Revoking the approver key ends its console sessions at once.
    let key_id = key.split('.').nth(1).unwrap();
    cli(&s.home, &["key", "revoke", "--tenant", "local", key_id]);
    let page = http.get(&url).header("cookie", &session).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("Approver key"), "back to the sign-in page");
    assert_eq!(status(&s, &id).await["state"], "awaiting_approval");
}

// ------------------------------------------------------------------ the browser test

use common::browser::Driver;

#[tokio::test]
async fn a_browser_approves_one_proposal_and_rejects_another() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    let approve_id = propose(&s, WAITING[0]).await;
    let reject_id = propose(&s, WAITING[2]).await;

    user(&s, "ada@example.com", "approver");
    let browser = Driver::start().await;
    browser.go(&format!("{}/approvals", s.base)).await;
    browser.type_into("#tenant", "local").await;
    browser.type_into("#email", "ada@example.com").await;
    browser.type_into("#password", PASSWORD).await;
    browser.click("#sign-in-user").await;
    // Signed in: both proposals, with their factors and triage's reasons.
    browser.wait_for(&["Onboarding kickoff owner", "Business review deck", "confidence", "hedged", "Sign out"]).await;
    let artifacts = std::env::var("CONTINUITY_TEST_ARTIFACTS").map_or_else(|_| std::env::temp_dir(), std::path::PathBuf::from);
    std::fs::create_dir_all(&artifacts).unwrap();
    let keep = |name: &str, png: &[u8]| {
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let path = artifacts.join(name);
        std::fs::write(&path, png).unwrap();
        eprintln!("screenshot: {}", path.display());
    };
    keep("approvals-console.png", &browser.screenshot().await);

    browser.type_into(&format!("#ar-{approve_id}"), "Owners know the account best").await;
    browser.click(&format!("#p-{approve_id} button.approve")).await;
    let page = browser.wait_for(&["Approved:"]).await;
    assert!(!page.contains(&format!("p-{approve_id}")), "no longer waiting");
    browser.type_into(&format!("#rr-{reject_id}"), "The CSM owns the deck this year").await;
    browser.click(&format!("#p-{reject_id} button.reject")).await;
    browser.wait_for(&["Rejected:", "Nothing is waiting"]).await;

    keep("approvals-console-decided.png", &browser.screenshot().await);

    // What the browser did, seen through the API.
    let approved = status(&s, &approve_id).await;
    assert_eq!(approved["state"], "written", "{approved}");
    assert_eq!(approved["decision_reason"], "Owners know the account best");
    let rejected = status(&s, &reject_id).await;
    assert_eq!(rejected["state"], "rejected");
    assert_eq!(rejected["decision_reason"], "The CSM owns the deck this year");
    let read = call_tool(&s.base, &s.key, "memory.read_org", json!({"id": approve_id})).await;
    assert_eq!(read["structuredContent"]["entry"]["state"], "active", "{read}");
}

/// A notification's decision link in a real browser (issue #40 §2): `serve` e-mails a
/// waiting proposal to its approver through SMTP (STARTTLS, to the test's server); the
/// link asks for the sign-in, comes back to a one-page decision screen, and decides
/// once. Used again, opened by another approver, or forged: a page says why, and
/// nothing is decided.
#[tokio::test]
async fn a_decision_link_from_an_email_decides_once_for_its_approver() {
    let smtp = continuity_tests::smtp::SmtpServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("smtp-ca.pem");
    std::fs::write(&ca, &smtp.ca_pem).unwrap();
    let url = smtp.url("continuity", "pw");
    let env = [
        ("CONTINUITY_SMTP_URL", url.as_str()),
        ("CONTINUITY_MAIL_FROM", "notify@continuity.example"),
        ("CONTINUITY_SMTP_CA_FILE", ca.to_str().unwrap()),
    ];
    let s = common::spawn_with_env(&dir.path().join("home"), &env);
    user(&s, "ada@example.com", "approver");
    user(&s, "bob@example.com", "approver");
    let added = common::cli_with_env(
        &s.home,
        &["notify", "add", "--tenant", "local", "--kind", "email", "--url", "ada@example.com", "--events", "proposal.waiting"],
        &env,
    );
    assert!(added.contains("(email) added"), "{added}");
    let first = propose(&s, WAITING[0]).await;
    let second = propose(&s, WAITING[1]).await;

    // Both reach Ada, each with its own link.
    let started = Instant::now();
    let mut mails = Vec::new();
    while mails.len() < 2 && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        mails = smtp.arrived();
    }
    assert_eq!(mails.len(), 2, "{mails:?}");
    let link_of = |title: &str| {
        let m = mails.iter().find(|m| m.subject.contains(title)).unwrap_or_else(|| panic!("no mail about {title}: {mails:?}"));
        assert_eq!(m.to, ["ada@example.com"]);
        assert!(m.subject.starts_with("Waiting for you: "), "{m:?}");
        let line = m.text.lines().find_map(|l| l.strip_prefix("Approve or reject: ")).expect("a decision link");
        assert!(line.starts_with(&format!("{}/approvals/link/", s.base)), "{line}");
        line.trim().to_owned()
    };
    let (link1, link2) = (link_of(WAITING[0].0), link_of(WAITING[1].0));

    let browser = Driver::start().await;
    browser.go(&link1).await;
    browser.wait_for(&["Sign in to decide on the proposal this link names."]).await;
    browser.type_into("#tenant", "local").await;
    browser.type_into("#email", "ada@example.com").await;
    browser.type_into("#password", PASSWORD).await;
    browser.click("#sign-in-user").await;
    let page = browser.wait_for(&["Decide", WAITING[0].0, "this link decides once", "confidence"]).await;
    assert!(!page.contains(WAITING[1].0), "one proposal only");
    common::browser::keep("decision-link.png", &browser.screenshot().await);
    browser.type_into(&format!("#ar-{first}"), "Agreed with the account team").await;
    browser.click(&format!("#p-{first} button.approve")).await;
    browser.wait_for(&["Approved:"]).await;

    // The same link again: used.
    browser.go(&link1).await;
    let page = browser.wait_for(&["used already"]).await;
    assert!(page.contains("Nothing was decided"), "{page}");
    // Forged: the signature changed.
    let mut forged = link2.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    browser.go(&forged).await;
    browser.wait_for(&["expired or not valid"]).await;
    // Bob opens Ada's link: refused.
    browser.go(&format!("{}/approvals", s.base)).await;
    browser.click("header form button").await;
    // Signed out (the sign-in page), before the next navigation: else the sign-out's
    // answer can land after it and replace the link's page.
    browser.wait_for(&["Sign in as a user whose role may decide approvals"]).await;
    browser.go(&link2).await;
    browser.wait_for(&["Sign in to decide"]).await;
    browser.type_into("#tenant", "local").await;
    browser.type_into("#email", "bob@example.com").await;
    browser.type_into("#password", PASSWORD).await;
    browser.click("#sign-in-user").await;
    browser.wait_for(&["sent to another person"]).await;
    common::browser::keep("decision-link-refused.png", &browser.screenshot().await);

    assert_eq!(status(&s, &first).await["decision_reason"], "Agreed with the account team");
    assert_eq!(status(&s, &second).await["state"], "awaiting_approval", "nothing decided through the refused links");
}

// ------------------------------------------------------------------ gates (issue #18)

/// `continuity gate …` with its exit status and both outputs.
fn gate(home: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(common::BIN)
        .arg("--home")
        .arg(home)
        .arg("gate")
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .output()
        .expect("run continuity gate");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// The exit statuses scripts rely on — 0 authorized, 1 blocked or pending, 2 unknown or
/// any error — on the home and through the HTTP API (`--url`, a key file), and the API's
/// own 200/403/404; an agent's key can request a gate but not set one.
#[tokio::test]
async fn gate_exit_codes_on_the_home_and_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    let verify = ["verify", "--namespace", "env:prod", "--action", "deploy"];
    let (code, out) = gate(&s.home, &verify, &[]);
    assert_eq!(code, 2, "unknown: {out}");
    assert!(out.contains("unknown"), "{out}");

    // An agent (no approvals:decide) asks; the API answers 403 to its set.
    let agent = cli(&s.home, &["key", "create", "--tenant", "local", "--scopes", "mcp:tools tenant:read memory:write"]);
    let http = client();
    let r = http
        .post(format!("{}/v1/gates/request", s.base))
        .bearer_auth(agent.trim())
        .json(&json!({"namespace": "env:prod", "action": "deploy", "reason": "migration 42 is reviewed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http
        .post(format!("{}/v1/gates", s.base))
        .bearer_auth(agent.trim())
        .json(&json!({"namespace": "env:prod", "action": "deploy", "status": "authorized"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "an agent cannot authorize");
    let (code, out) = gate(&s.home, &verify, &[]);
    assert_eq!(code, 1, "pending: {out}");
    assert!(out.contains("pending"), "{out}");
    // Beside the proposals in the approver API.
    let listed: Value =
        http.get(format!("{}/v1/approvals", s.base)).bearer_auth(approver(&s)).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["gates"][0]["action"], "deploy", "{listed}");

    // The operator authorizes once on the home; verify through HTTP with a key file.
    let (code, out) =
        gate(&s.home, &["set", "--namespace", "env:prod", "--action", "deploy", "--status", "authorized", "--once"], &[]);
    assert_eq!(code, 0, "{out}");
    let ci = cli(&s.home, &["key", "create", "--tenant", "local", "--scopes", "tenant:read"]);
    let key_file = dir.path().join("ci.key");
    std::fs::write(&key_file, ci.trim()).unwrap();
    let remote = ["--url", s.base.as_str(), "--key-file", key_file.to_str().unwrap()];
    let over_http: Vec<&str> = verify.iter().chain(remote.iter()).copied().collect();
    let (code, out) = gate(&s.home, &over_http, &[]);
    assert_eq!(code, 0, "authorized once: {out}");
    assert!(out.contains("(spent)"), "{out}");
    let (code, out) = gate(&s.home, &over_http, &[]);
    assert_eq!(code, 1, "spent: {out}");
    // The raw API: 403 now, 404 for a gate nobody set.
    let q = |action: &str| format!("{}/v1/gates/verify?namespace=env:prod&action={action}", s.base);
    assert_eq!(http.get(q("deploy")).bearer_auth(ci.trim()).send().await.unwrap().status(), 403);
    let r = http.get(q("rollback")).bearer_auth(ci.trim()).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.json::<Value>().await.unwrap()["verdict"], "unknown");

    // Blocked with a reason (on the home), listed; errors are 2.
    let (code, _) = gate(
        &s.home,
        &["set", "--namespace", "env:prod", "--action", "deploy", "--status", "blocked", "--reason", "release freeze"],
        &[],
    );
    assert_eq!(code, 0);
    let (code, out) = gate(&s.home, &verify, &[]);
    assert_eq!(code, 1);
    assert!(out.contains("release freeze"), "{out}");
    let (code, out) = gate(&s.home, &["list"], &[]);
    assert_eq!(code, 0);
    assert!(out.contains("env:prod\tdeploy\tblocked"), "{out}");
    let (code, out) = gate(&s.home, &["verify", "--namespace", "bad name", "--action", "push"], &[]);
    assert_eq!(code, 2, "{out}");
    let (code, out) = gate(&dir.path().join("nowhere"), &verify, &[]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("no Continuity home"), "{out}");
    assert!(!dir.path().join("nowhere").exists(), "a gate command never creates a home");
    let bad_key = dir.path().join("bad.key");
    std::fs::write(&bad_key, "ctn_local.nope.nope").unwrap();
    let (code, out) = gate(&s.home, &[&verify[..], &["--url", &s.base, "--key-file", bad_key.to_str().unwrap()]].concat(), &[]);
    assert_eq!(code, 2, "a refused key is an error, not a 'no': {out}");
}

/// `git` in `dir`, with its status and output.
fn git(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Ada")
        .env("GIT_AUTHOR_EMAIL", "ada@example.com")
        .env("GIT_COMMITTER_NAME", "Ada")
        .env("GIT_COMMITTER_EMAIL", "ada@example.com")
        .output()
        .expect("git");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// The pre-push hook in a real repository: a push is refused while the gate is unknown
/// and while an agent's request waits; a person signs in to the console in a headless
/// Chromium and authorizes it (once); the push goes through; the next push is refused
/// again. Every outcome is in the hook's log.
#[tokio::test]
async fn a_push_waits_until_a_person_authorizes_it_in_the_console() {
    let dir = tempfile::tempdir().unwrap();
    let s = spawn(&dir.path().join("home"));
    let (remote, work) = (dir.path().join("remote.git"), dir.path().join("web"));
    assert!(git(dir.path(), &["init", "-q", "--bare", remote.to_str().unwrap()]).0);
    assert!(git(dir.path(), &["init", "-q", "-b", "main", work.to_str().unwrap()]).0);
    std::fs::write(work.join("README"), "hello\n").unwrap();
    assert!(git(&work, &["add", "README"]).0);
    assert!(git(&work, &["commit", "-q", "-m", "first"]).0);
    assert!(git(&work, &["remote", "add", "origin", remote.to_str().unwrap()]).0);

    let (code, out) = gate(&s.home, &["install-hook", "--repo", work.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("repo:web"), "{out}");
    let (ok, out) = git(&work, &["push", "-q", "origin", "main"]);
    assert!(!ok, "no gate, no push: {out}");
    assert!(out.contains("unknown") && out.contains("push refused"), "{out}");

    // The agent (the owner key here) asks; still refused while it waits.
    let r = client()
        .post(format!("{}/v1/gates/request", s.base))
        .bearer_auth(&s.key)
        .json(&json!({"namespace": "repo:web", "action": "push", "reason": "login fix; 212 tests pass"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (ok, out) = git(&work, &["push", "-q", "origin", "main"]);
    assert!(!ok && out.contains("pending"), "{out}");
    // Whoever requested it cannot authorize it, even holding approvals:decide.
    let r = client()
        .post(format!("{}/v1/gates", s.base))
        .bearer_auth(&s.key)
        .json(&json!({"namespace": "repo:web", "action": "push", "status": "authorized"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // A person authorizes it in the console.
    user(&s, "ada@example.com", "approver");
    let browser = Driver::start().await;
    browser.go(&format!("{}/approvals", s.base)).await;
    browser.type_into("#tenant", "local").await;
    browser.type_into("#email", "ada@example.com").await;
    browser.type_into("#password", PASSWORD).await;
    browser.click("#sign-in-user").await;
    browser.wait_for(&["Gate requests", "repo:web", "login fix; 212 tests pass"]).await;
    browser.type_into("#ga-repo-web-push", "reviewed with Ada").await;
    browser.click("#g-repo-web-push button.authorize").await;
    let page = browser.wait_for(&["Authorized:"]).await;
    assert!(!page.contains("g-repo-web-push"), "no longer waiting");

    let (ok, out) = git(&work, &["push", "-q", "origin", "main"]);
    assert!(ok, "authorized: {out}");
    assert!(git(&remote, &["rev-parse", "--verify", "main"]).0, "the push arrived");
    // Once only: the next push needs a new authorization.
    std::fs::write(work.join("README"), "hello again\n").unwrap();
    assert!(git(&work, &["commit", "-q", "-am", "second"]).0);
    let (ok, out) = git(&work, &["push", "-q", "origin", "main"]);
    assert!(!ok && out.contains("spent"), "{out}");

    let log = std::fs::read_to_string(work.join(".git/continuity-gate.log")).unwrap();
    let statuses: Vec<&str> = log.lines().map(|l| l.split('\t').nth(1).unwrap()).collect();
    assert_eq!(statuses, ["2", "1", "0", "1"], "{log}");

    // The hook comes out again.
    let (code, out) = gate(&s.home, &["install-hook", "--repo", work.to_str().unwrap(), "--remove"], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(git(&work, &["push", "-q", "origin", "main"]).0, "no hook, no gate");
}
