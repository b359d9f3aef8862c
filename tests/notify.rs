//! Notifications on both backends: a signed JSON webhook and a Slack-compatible channel
//! receive the events they subscribe to — a proposal waiting for a person, a gate
//! requested, a task assigned — redacted (personal data masked, secrets replaced) and,
//! for the webhook, signed with its secret; a receiver that keeps failing is retried,
//! then the delivery is kept as a failure the admins can list.
//!
//! E-mail channels on both backends: through SMTP with STARTTLS to a server the test
//! runs (embedded) and through SES on moto (AWS), redacted the same way; a message the
//! mail server refuses for good is kept as a failure at once, one it cannot take now is
//! retried and then kept.
//!
//! The receivers are an in-process HTTP server (`continuity_tests::source`) that records
//! every request; no Slack workspace was called.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use continuity_tests::source::{Answer, FakeSource, Seen};
use continuity_tests::{caller, drain};
use domain::notify::{ChannelKind, EventKind};
use domain::tenant::{Department, Industry, PlanTier};
use domain::{ErrorCode, PageRequest};
use ports::{Backend, SystemClock};
use serde_json::{Value, json};
use services::Services;

fn by_path<'a>(seen: &'a [Seen], path: &str) -> Vec<&'a Seen> {
    seen.iter().filter(|s| s.path == path).collect()
}

async fn notifications(backend: Backend) {
    let s = Services::new(backend);
    let t = contract::fresh_tenant("ntf");
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Sales, Industry::Saas).await.unwrap();
    s.notify.set_public_url("https://continuity.example/");
    let receiver = FakeSource::start().await;
    receiver.handle(Arc::new(|seen: &Seen| if seen.path == "/down" { Answer::empty(503) } else { Answer::empty(204) }));
    let hook = s
        .notify
        .add(
            &t,
            ChannelKind::Webhook,
            &format!("{}/hook", receiver.base_url),
            vec![EventKind::ProposalWaiting, EventKind::GateRequested, EventKind::TaskAssigned],
        )
        .await
        .unwrap();
    let secret = hook.secret.clone().expect("a webhook has a signing secret");
    assert!(secret.starts_with("whsec_") && !format!("{hook:?}").contains(&secret), "Debug hides it");
    s.notify
        .add(&t, ChannelKind::Slack, &format!("{}/slack", receiver.base_url), vec![EventKind::ProposalWaiting])
        .await
        .unwrap();
    let listed = s.notify.list(&t).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(!Value::Array(listed.clone()).to_string().contains("/hook"), "only the host is listed: {listed:?}");
    // Refused: plain http to a remote host, no events.
    let e = s.notify.add(&t, ChannelKind::Webhook, "http://hooks.example/x", vec![EventKind::GateRequested]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest);
    let e = s.notify.add(&t, ChannelKind::Slack, "https://hooks.example/x", vec![]).await.unwrap_err();
    assert!(e.message.contains("at least one event"), "{e}");

    // A proposal that waits for a person (it names a person's e-mail: never auto-approved).
    let agent = caller(&s, &t, "mcp:tools tenant:read tenant:write memory:read memory:write").await;
    let body = "Escalations for Acme go to jane.doe@acme-corp.example first, then to the account owner; agreed with support on 2 December.";
    let p = s
        .capabilities
        .execute(&agent, "memory.propose", json!({"title": "Acme escalation path", "body": body, "kind": "decision"}))
        .await
        .unwrap()
        .data;
    let mut waiting = false;
    for _ in 0..200 {
        drain(&s).await;
        let seen = receiver.take();
        let hooks = by_path(&seen, "/hook");
        if let Some(h) = hooks.first() {
            assert_eq!(h.header("x-continuity-event"), Some("proposal.waiting"), "{p}");
            let sig = h.header("x-continuity-signature").unwrap();
            let ts: i64 = sig.split(',').next().unwrap().trim_start_matches("t=").parse().unwrap();
            assert_eq!(sig, services::notify::signature(&secret, ts, h.body.as_bytes()), "signed with the channel's secret");
            let event = h.json();
            assert_eq!(event["kind"], "proposal.waiting");
            assert!(event["title"].as_str().unwrap().contains("Acme escalation path"), "{event}");
            assert!(!h.body.contains("jane.doe@acme-corp.example"), "personal data masked: {}", h.body);
            // The decision link of this proposal (not bound to one person: a channel).
            let link = event["link"].as_str().unwrap();
            assert!(link.starts_with("https://continuity.example/approvals/link/"), "{event}");
            let slack = by_path(&seen, "/slack");
            assert_eq!(slack.len(), 1, "{seen:?}");
            let msg = slack[0].json();
            assert!(msg["text"].as_str().unwrap().contains("Waiting for you"), "{msg}");
            let button = msg["blocks"][1]["elements"][0]["url"].as_str().unwrap();
            assert!(button.starts_with("https://continuity.example/approvals/link/"), "{msg}");
            assert!(slack[0].header("x-continuity-signature").is_none(), "Slack has no secret of ours");
            waiting = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(waiting, "the webhook never heard of the waiting proposal: {p}");

    // A gate requested (its reason carries a secret) and a task assigned: the webhook
    // hears both, the Slack channel (proposals only) neither.
    let reason = "release 1.4; deploy with token ghp_R7cQ2vXk9LmN4pZs8TbW1yHd6JfA3eUo5Gqi if asked";
    s.gates.request(&agent, "repo:web", "push", Some(reason.into()), None).await.unwrap();
    let worker = caller(&s, &t, "mcp:tools tenant:read memory:read").await;
    s.capabilities
        .execute(&agent, "task.dispatch", json!({"title": "Send the renewal quote", "assignee": worker.principal.as_str()}))
        .await
        .unwrap();
    drain(&s).await;
    let seen = receiver.take();
    let kinds: BTreeMap<String, Value> =
        by_path(&seen, "/hook").iter().map(|h| (h.header("x-continuity-event").unwrap().to_owned(), h.json())).collect();
    assert_eq!(kinds.keys().cloned().collect::<Vec<_>>(), ["gate.requested", "task.assigned"], "{seen:?}");
    assert!(!kinds["gate.requested"].to_string().contains("ghp_R7cQ2vXk9LmN4pZs8TbW1yHd6JfA3eUo5Gqi"), "the secret never leaves");
    assert!(kinds["task.assigned"]["text"].as_str().unwrap().contains("Send the renewal quote"));
    assert!(by_path(&seen, "/slack").is_empty(), "the Slack channel did not subscribe to those");

    // Many proposals waiting: the Slack channel is told of the first three one by one
    // (the first above), then holds the rest for one digest.
    for i in 1..=5 {
        let body = format!(
            "Renewal contact for region {i} is jane.doe{i}@acme-corp.example; agreed with the account team on 2 December."
        );
        s.capabilities
            .execute(
                &agent,
                "memory.propose",
                json!({"title": format!("Region {i} renewal contact"), "body": body, "kind": "decision"}),
            )
            .await
            .unwrap();
    }
    drain(&s).await;
    let seen = receiver.take();
    let told: Vec<String> = by_path(&seen, "/slack").iter().map(|m| m.json()["text"].as_str().unwrap().to_owned()).collect();
    assert_eq!(told.len(), 2, "the 2nd and 3rd waiting proposals one by one: {told:?}");
    assert_eq!(by_path(&seen, "/hook").len(), 2, "the webhook's own window holds the same way");
    assert_eq!(s.notify.flush_digests(std::time::Duration::from_secs(3600)).await.unwrap(), 0, "not a minute old yet");
    assert_eq!(s.notify.flush_digests(std::time::Duration::ZERO).await.unwrap(), 2, "one digest per channel");
    assert_eq!(s.notify.flush_digests(std::time::Duration::ZERO).await.unwrap(), 0, "sent once");
    drain(&s).await;
    let seen = receiver.take();
    let digest = by_path(&seen, "/slack")[0].json();
    let text = digest["text"].as_str().unwrap();
    assert!(text.starts_with("3 proposals wait for you"), "{text}");
    assert!(text.contains("Region 5 renewal contact") && !text.contains("jane.doe5@"), "{text}");

    // A receiver that keeps failing: tried three times per receive, three receives, then
    // kept as a failure.
    let down = s
        .notify
        .add(&t, ChannelKind::Webhook, &format!("{}/down", receiver.base_url), vec![EventKind::GateRequested])
        .await
        .unwrap();
    s.gates.request(&agent, "env:prod", "deploy", Some("hotfix 1.4.1".into()), None).await.unwrap();
    drain(&s).await;
    let seen = receiver.take();
    assert_eq!(by_path(&seen, "/down").len(), 9, "3 tries × 3 receives");
    let failures = s.notify.failures(&t, &PageRequest::first(10)).await.unwrap().items;
    assert_eq!(failures.len(), 1);
    assert_eq!((failures[0].channel.clone(), failures[0].attempts), (down.id.clone(), 9));
    assert!(failures[0].reason.contains("503"), "{:?}", failures[0]);
    s.notify.remove(&t, &down.id).await.unwrap();
    assert_eq!(s.notify.remove(&t, &down.id).await.unwrap_err().code, ErrorCode::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_embedded() {
    let dir = tempfile::tempdir().unwrap();
    notifications(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_aws() {
    notifications(continuity_tests::aws::backend_in_own_table("ntf").await).await;
}

/// E-mail channels: refused where the deployment has no mailer; with one, a gate
/// request reaches the address with the title as the subject, the text redacted and the
/// link; a recipient the server refuses for good is kept as a failure at once.
async fn email(backend: Backend, inbox: contract::mail::Inbox, refused_to: Option<&str>) {
    let without = Services::new(Backend { mailer: None, ..backend.clone() });
    let t = contract::fresh_tenant("mail");
    without.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Sales, Industry::Saas).await.unwrap();
    let e = without.notify.add(&t, ChannelKind::Email, "ops@example.com", vec![EventKind::GateRequested]).await.unwrap_err();
    assert!(e.message.contains("e-mail is not configured") && e.message.contains("CONTINUITY_SMTP_URL"), "{e}");

    let s = Services::new(backend);
    s.notify.set_public_url("https://continuity.example");
    let n: u64 = rand::random();
    let to = format!("ops-{n:016x}@example.com");
    let e = s.notify.add(&t, ChannelKind::Email, "Ops <ops@example.com>", vec![EventKind::GateRequested]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest, "{e}");
    let channel = s.notify.add(&t, ChannelKind::Email, &to, vec![EventKind::GateRequested]).await.unwrap();
    assert_eq!(channel.url, format!("mailto:{to}"));
    assert!(channel.secret.is_none(), "e-mail is not signed by us");
    let listed = Value::Array(s.notify.list(&t).await.unwrap()).to_string();
    assert!(listed.contains("\"host\":\"example.com\"") && !listed.contains(&to), "the domain alone is listed: {listed}");

    let agent = caller(&s, &t, "mcp:tools tenant:read tenant:write memory:read memory:write").await;
    let reason = "hotfix for jane.doe@acme-corp.example; token ghp_R7cQ2vXk9LmN4pZs8TbW1yHd6JfA3eUo5Gqi";
    s.gates.request(&agent, "env:prod", "deploy", Some(reason.into()), None).await.unwrap();
    drain(&s).await;
    let arrived: Vec<contract::mail::Arrived> = inbox().await.into_iter().filter(|m| m.to.contains(&to)).collect();
    assert_eq!(arrived.len(), 1, "{arrived:?}");
    let m = &arrived[0];
    assert_eq!(m.subject, "A gate waits for you", "{m:?}");
    assert!(m.text.contains("asks to deploy on env:prod"), "{m:?}");
    assert!(m.text.contains("Approve or reject: https://continuity.example/"), "{m:?}");
    assert!(
        !m.text.contains("ghp_R7cQ2vXk9LmN4pZs8TbW1yHd6JfA3eUo5Gqi") && !m.text.contains("jane.doe@acme-corp.example"),
        "{m:?}"
    );
    assert!(m.text.contains("continuity notify"), "says how to change it: {m:?}");

    // Every kind reaches an e-mail channel subscribed to it, one message each.
    let every = format!("all-{n:016x}@example.com");
    s.notify.add(&t, ChannelKind::Email, &every, EventKind::ALL.to_vec()).await.unwrap();
    for kind in EventKind::ALL {
        s.notify
            .emit(&t, *kind, &format!("subject-{}", kind.as_str()), &format!("About {}", kind.as_str()), "Details.", None)
            .await;
    }
    drain(&s).await;
    let arrived: Vec<contract::mail::Arrived> = inbox().await.into_iter().filter(|m| m.to.contains(&every)).collect();
    assert_eq!(arrived.len(), EventKind::ALL.len(), "{arrived:?}");
    for kind in EventKind::ALL {
        let m = arrived.iter().find(|m| m.subject == format!("About {}", kind.as_str()));
        let m = m.unwrap_or_else(|| panic!("no mail for {kind:?}: {arrived:?}"));
        assert!(m.text.contains(&format!("({}, ", kind.as_str())), "the footer names the kind: {m:?}");
    }

    if let Some(refused_to) = refused_to {
        let bad = s.notify.add(&t, ChannelKind::Email, refused_to, vec![EventKind::GateRequested]).await.unwrap();
        s.gates.request(&agent, "env:prod", "rollback", None, None).await.unwrap();
        drain(&s).await;
        let failures = s.notify.failures(&t, &PageRequest::first(10)).await.unwrap().items;
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert_eq!((failures[0].channel.clone(), failures[0].attempts), (bad.id.clone(), 1), "kept at once, not retried");
        assert!(failures[0].reason.contains("refused"), "{:?}", failures[0]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_embedded() {
    let dir = tempfile::tempdir().unwrap();
    let server = Arc::new(continuity_tests::smtp::SmtpServer::start().await);
    let mailer = store_embedded::SmtpMailer::new(
        &server.url("continuity", "pw"),
        "notify@continuity.example",
        Some(server.ca_pem.as_bytes()),
    )
    .unwrap();
    let backend =
        Backend { mailer: Some(Arc::new(mailer)), ..store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap() };
    let s = server.clone();
    let inbox: contract::mail::Inbox = Arc::new(move || {
        let s = s.clone();
        Box::pin(async move { s.arrived() })
    });
    email(backend.clone(), inbox, Some("reject-me@example.com")).await;

    // A server that cannot take mail now (451): retried, then kept as a failure.
    let s = Services::new(backend);
    let t = contract::fresh_tenant("mailbusy");
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Sales, Industry::Saas).await.unwrap();
    s.notify.add(&t, ChannelKind::Email, "ops@example.com", vec![EventKind::GateRequested]).await.unwrap();
    server.set_busy(true);
    let agent = caller(&s, &t, "mcp:tools tenant:read tenant:write memory:read memory:write").await;
    s.gates.request(&agent, "env:prod", "deploy", None, None).await.unwrap();
    drain(&s).await;
    let failures = s.notify.failures(&t, &PageRequest::first(10)).await.unwrap().items;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].attempts, 9, "3 tries × 3 receives");
    assert!(failures[0].reason.contains("did not take"), "{:?}", failures[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_aws() {
    let n: u64 = rand::random();
    let domain = format!("n{n:016x}.continuity.example");
    continuity_tests::aws::verify_mail_domain(&domain).await;
    let backend = Backend {
        mailer: Some(continuity_tests::aws::ses_mailer(&format!("notify@{domain}")).await),
        ..continuity_tests::aws::backend_in_own_table("mail").await
    };
    email(backend, Arc::new(|| Box::pin(continuity_tests::aws::sent_mail())), None).await;
}

/// Decision links, as a webhook receives them: a waiting proposal's link is signed and
/// opens the proposal for an approver of the tenant; it decides once (through the
/// console's path), and is refused when used again, forged, for another workspace, or
/// expired (8 hours; the clock moved).
async fn links(backend: Backend, clock: Arc<ports::clock::ManualClock>) {
    let s = Services::new(Backend { clock: clock.clone(), ..backend });
    let base = "https://continuity.example";
    s.notify.set_public_url(base);
    let t = contract::fresh_tenant("link");
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Sales, Industry::Saas).await.unwrap();
    let receiver = FakeSource::start().await;
    receiver.always(Answer::empty(204));
    s.notify
        .add(&t, ChannelKind::Webhook, &format!("{}/hook", receiver.base_url), vec![EventKind::ProposalWaiting])
        .await
        .unwrap();
    let agent = caller(&s, &t, "mcp:tools tenant:read tenant:write memory:read memory:write").await;
    let approver = caller(&s, &t, "approvals:decide tenant:read").await;
    let mut tokens = Vec::new();
    for (title, who) in [("Acme escalation path", "jane.doe"), ("Globex escalation path", "john.roe")] {
        let body = format!("Escalations go to {who}@acme-corp.example first, then to the account owner; agreed on 2 December.");
        s.capabilities
            .execute(&agent, "memory.propose", json!({"title": title, "body": body, "kind": "decision"}))
            .await
            .unwrap();
    }
    for _ in 0..200 {
        drain(&s).await;
        for h in receiver.take() {
            let link = h.json()["link"].as_str().unwrap().to_owned();
            let token =
                link.strip_prefix(&format!("{base}/approvals/link/")).unwrap_or_else(|| panic!("not a decision link: {link}"));
            tokens.push(token.to_owned());
        }
        if tokens.len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(tokens.len(), 2, "one link per waiting proposal");
    // The deliveries may arrive in either order: Acme's link first (opening one uses nothing).
    let mut titled = Vec::new();
    for token in tokens {
        let id = s.notify.open_link(&approver, &token, base).await.unwrap();
        titled.push((s.governance.waiting_one(&approver, &id).await.unwrap().proposal.title, token));
    }
    titled.sort();
    let tokens: Vec<String> = titled.into_iter().map(|(_, token)| token).collect();
    let id = s.notify.open_link(&approver, &tokens[0], base).await.unwrap();
    let shown = s.governance.waiting_one(&approver, &id).await.unwrap();
    assert_eq!(shown.proposal.title, "Acme escalation path");
    assert!(!shown.proposal.body.contains("jane.doe@"), "the approver sees the redacted view");
    // Forged: one character of the signature changed.
    let mut forged = tokens[0].clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    let e = s.notify.open_link(&approver, &forged, base).await.unwrap_err();
    assert!(e.message.contains("expired or not valid"), "{e}");
    // Another workspace's approver.
    let other = contract::fresh_tenant("link2");
    s.admin.create_tenant(other.clone(), PlanTier::Enterprise, Department::Sales, Industry::Saas).await.unwrap();
    let stranger = caller(&s, &other, "approvals:decide tenant:read").await;
    let e = s.notify.use_link(&stranger, &tokens[0], base).await.unwrap_err();
    assert!(e.message.contains("another workspace"), "{e}");
    // Used: decides once, through the console's path.
    let id = s.notify.use_link(&approver, &tokens[0], base).await.unwrap();
    let decided = s.governance.decide(&approver, &id, true, Some("agreed".into())).await.unwrap();
    assert_ne!(decided.state, domain::proposal::ProposalState::AwaitingApproval);
    for e in [
        s.notify.use_link(&approver, &tokens[0], base).await.unwrap_err(),
        s.notify.open_link(&approver, &tokens[0], base).await.unwrap_err(),
    ] {
        assert!(e.message.contains("used already"), "{e}");
        assert_eq!(e.code, ErrorCode::Forbidden);
    }
    // Expired: past 8 hours the second link opens nothing.
    clock.advance(8 * 3600 * 1000 + 120_000);
    let e = s.notify.open_link(&approver, &tokens[1], base).await.unwrap_err();
    assert!(e.message.contains("expired or not valid"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_links_embedded() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ports::clock::ManualClock::new(continuity_tests::sources::now_ms()));
    let backend =
        store_embedded::open_backend_with(dir.path(), clock.clone(), Arc::new(ports::search::HashingEmbedder::new(384))).unwrap();
    links(backend, clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_links_aws() {
    let clock = Arc::new(ports::clock::ManualClock::new(continuity_tests::sources::now_ms()));
    links(continuity_tests::aws::backend_in_own_table("link").await, clock).await;
}

/// What else needs a person: a proposal less than a day from its deadline is told once
/// (`proposal.expiring`, with a decision link); records newly in the review queue
/// (`review.failed`) and work newly dead-lettered (`health.alarm`) are told by the
/// hourly maintenance run, once each, and nothing when nothing is new.
async fn watched(backend: Backend, clock: Arc<ports::clock::ManualClock>) {
    use ports::Clock as _;
    use ports::records::{ProposalStore, ReviewStore};
    let s = Services::new(Backend { clock: clock.clone(), ..backend });
    let base = "https://continuity.example";
    s.notify.set_public_url(base);
    let t = contract::fresh_tenant("watch");
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Sales, Industry::Saas).await.unwrap();
    let receiver = FakeSource::start().await;
    receiver.always(Answer::empty(204));
    let kinds = vec![EventKind::ProposalExpiring, EventKind::ReviewFailed, EventKind::HealthAlarm];
    s.notify.add(&t, ChannelKind::Webhook, &format!("{}/hook", receiver.base_url), kinds).await.unwrap();
    let told = |receiver: &FakeSource| -> Vec<Value> { by_path(&receiver.take(), "/hook").iter().map(|h| h.json()).collect() };

    // A proposal waits (it names a person: never auto-approved); nothing is told yet.
    let agent = caller(&s, &t, "mcp:tools tenant:read tenant:write memory:read memory:write").await;
    let body = "Escalations for Acme go to jane.doe@acme-corp.example first, then to the account owner; agreed on 2 December.";
    s.capabilities
        .execute(&agent, "memory.propose", json!({"title": "Acme escalation path", "body": body, "kind": "decision"}))
        .await
        .unwrap();
    let mut deadline = None;
    for _ in 0..200 {
        drain(&s).await;
        let waiting = s.backend.records.list_proposals(&t, None, &PageRequest::first(10)).await.unwrap().items;
        deadline = waiting.iter().find_map(|p| p.wait.as_ref().map(|w| w.deadline.0));
        if deadline.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let deadline = deadline.expect("the proposal waits for a person");
    s.maintenance.workflow(std::time::Duration::from_secs(300)).await.unwrap();
    drain(&s).await;
    assert!(told(&receiver).is_empty(), "days from its deadline: nothing to tell");
    // Twenty hours before its deadline: told once, with a decision link and the time left.
    clock.advance(deadline - clock.now().0 - 20 * 3600 * 1000);
    s.maintenance.workflow(std::time::Duration::from_secs(300)).await.unwrap();
    s.maintenance.workflow(std::time::Duration::from_secs(300)).await.unwrap();
    drain(&s).await;
    let events = told(&receiver);
    assert_eq!(events.len(), 1, "told once: {events:?}");
    assert_eq!(events[0]["kind"], "proposal.expiring");
    assert!(events[0]["title"].as_str().unwrap().contains("Expires soon: Acme escalation path"), "{}", events[0]);
    assert!(events[0]["text"].as_str().unwrap().contains("in 20 h 0 min"), "{}", events[0]);
    assert!(events[0]["link"].as_str().unwrap().starts_with(&format!("{base}/approvals/link/")), "{}", events[0]);

    // A record fails its readback: the next run tells, the one after does not.
    let failed = domain::memory::Verification {
        tenant: t.clone(),
        kind: "kb".into(),
        doc: domain::Id::new("kb-pager").unwrap(),
        scope: domain::memory::MemoryScope::Org,
        title: "Pager policy".into(),
        verified: false,
        pending: false,
        confidence: 0.3,
        fresh_at: None,
        reason: "the index write failed; the reindex job retries".into(),
        entities: Vec::new(),
        related: Vec::new(),
        at: clock.now(),
    };
    s.backend.records.put_verification(&failed).await.unwrap();
    // Work that fails for good: a message no handler takes, received until dead-lettered.
    s.backend
        .queue
        .send(&ports::queue::QueueMessage {
            tenant: t.clone(),
            kind: "bogus.kind".into(),
            idempotency_key: "watch-dead-1".into(),
            body: b"{}".to_vec(),
        })
        .await
        .unwrap();
    for _ in 0..20 {
        for d in s.backend.queue.receive(10, std::time::Duration::from_secs(60)).await.unwrap() {
            s.backend.queue.release(&d.receipt, std::time::Duration::ZERO).await.unwrap();
        }
        if !s.backend.queue.dead_letters(10).await.unwrap().is_empty() {
            break;
        }
    }
    let report = s.maintenance.run().await.unwrap();
    assert_eq!(report.watch_told, 2, "{report:?}");
    drain(&s).await;
    let events: BTreeMap<String, Value> =
        told(&receiver).into_iter().map(|e| (e["kind"].as_str().unwrap().to_owned(), e)).collect();
    assert_eq!(events.keys().cloned().collect::<Vec<_>>(), ["health.alarm", "review.failed"], "{events:?}");
    assert_eq!(events["review.failed"]["title"], "1 record failed readback");
    assert_eq!(events["review.failed"]["link"], format!("{base}/dashboard/review"));
    assert!(events["health.alarm"]["text"].as_str().unwrap().contains("bogus.kind"), "{}", events["health.alarm"]);
    assert_eq!(s.maintenance.run().await.unwrap().watch_told, 0, "nothing new");
    drain(&s).await;
    assert!(told(&receiver).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_events_embedded() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ports::clock::ManualClock::new(continuity_tests::sources::now_ms()));
    let backend =
        store_embedded::open_backend_with(dir.path(), clock.clone(), Arc::new(ports::search::HashingEmbedder::new(384))).unwrap();
    watched(backend, clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_events_aws() {
    let clock = Arc::new(ports::clock::ManualClock::new(continuity_tests::sources::now_ms()));
    watched(continuity_tests::aws::backend_in_own_table("watch").await, clock).await;
}
