//! Connected sources on both backends: connect (OAuth, or Stripe's key) → initial pull
//! in pages → a change and a deletion at the source → the delta pull picks up exactly
//! those → a pull cut short resumes without duplicates; tokens expiring mid-pull, 429
//! with `Retry-After`, a revoked grant and disconnecting.
//!
//! The five sources are one in-process HTTP server (`continuity_tests::source`) that
//! keeps their records and answers their documented OAuth endpoints, paging and change
//! filters, recording every request: HubSpot, Salesforce, Zendesk, Jira and Stripe
//! themselves were not called.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use continuity_tests::drain;
use continuity_tests::source::{FakeSource, Seen};
use continuity_tests::sources::{DAY, World, now_ms, query, sign};
use domain::connector::{ConnectorSource, ConnectorState};
use domain::source::SourceApp;
use domain::tenant::{Department, Industry, PlanTier};
use domain::value::Value as V;
use domain::{EntityType, ErrorCode, PageRequest, TenantId};
use ports::records::{ConnectorStore, EntityStore, SourceStore};
use ports::{Backend, SystemClock};
use serde_json::{Value, json};
use services::Services;
use services::ingest::mapping::canonical_id;
use services::sources::Budget;
use services::sources::webhooks::Delivery;

struct Rig {
    s: Services,
    t: TenantId,
    world: World,
    fake: FakeSource,
}

async fn rig(backend: Backend, label: &str, department: Department) -> Rig {
    let s = Services::new(backend);
    let t = contract::fresh_tenant(label);
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, department, Industry::Saas).await.unwrap();
    let fake = FakeSource::start().await;
    let world = World::default();
    world.set(|st| st.base = fake.base_url.clone());
    let w = world.clone();
    fake.handle(Arc::new(move |seen| w.answer(seen)));
    for name in ["hubspot", "salesforce", "zendesk", "jira"] {
        let app = SourceApp {
            client_id: format!("{name}-client"),
            client_secret: format!("{name}-secret"),
            base_url: Some(fake.base_url.clone()),
            webhook_secret: Some(format!("{name}-hook-secret")),
        };
        s.sources.set_app(name, app).await.unwrap();
    }
    // Stripe takes each tenant's key; its app only says where it is and signs webhooks.
    let stripe = SourceApp {
        client_id: "-".into(),
        client_secret: "-".into(),
        base_url: Some(fake.base_url.clone()),
        webhook_secret: Some("whsec_test".into()),
    };
    s.sources.set_app("stripe", stripe).await.unwrap();
    Rig { s, t, world, fake }
}

impl Rig {
    async fn state(&self, source: &str) -> domain::connector::ConnectorStatus {
        self.s.backend.records.get_connector(&self.t, &ConnectorSource::new(source).unwrap()).await.unwrap().unwrap()
    }

    /// Drains the queue until `source`'s pull completed (a slow queue can look empty
    /// for a moment while a message is in flight).
    async fn settled(&self, source: &str) {
        for _ in 0..100 {
            drain(&self.s).await;
            if self.state(source).await.state == ConnectorState::SyncComplete {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("{source} never completed: {:?}", self.state(source).await);
    }

    async fn entities(&self, ty: &str) -> Vec<domain::spine::Entity> {
        let ty = EntityType::new(ty).unwrap();
        let mut out = Vec::new();
        let mut page = PageRequest::first(500);
        loop {
            let p = self.s.backend.records.list_entities(&self.t, Some(&ty), &page).await.unwrap();
            out.extend(p.items);
            match p.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => return out,
            }
        }
    }

    async fn entity(&self, source: &str, ty: &str, native: &str) -> domain::spine::Entity {
        let id = canonical_id(source, ty, native);
        self.s.backend.records.get_entity(&self.t, &EntityType::new(ty).unwrap(), &id).await.unwrap().unwrap()
    }

    /// Signs in: the authorize URL, then the source's redirect with `good-code`.
    async fn connect(&self, source: &str) -> (String, Vec<Seen>) {
        let url = self.s.sources.start_connect(&self.t, source, "https://continuity.example").await.unwrap();
        assert_eq!(self.state(source).await.state, ConnectorState::OauthPending);
        let q = query(&url);
        let state = q["state"].clone();
        let done = self.s.sources.callback(&state, Some("good-code"), None).await.unwrap();
        assert_eq!(done.state, ConnectorState::OauthComplete);
        let again = self.s.sources.callback(&state, Some("good-code"), None).await.unwrap_err();
        assert!(again.message.contains("used already"), "a state is single-use: {}", again.message);
        (url, self.fake.take())
    }
}

fn name_of(e: &domain::spine::Entity) -> String {
    match e.attributes.get("name").or_else(|| e.attributes.get("subject")) {
        Some(V::Text(t)) => t.clone(),
        other => panic!("no name: {other:?}"),
    }
}

async fn hubspot(backend: Backend) {
    let r = rig(backend, "hs", Department::Sales).await;
    let base = now_ms() - 20 * DAY;
    r.world.add("companies", 2500, base);
    r.world.add("contacts", 3, base);
    r.world.add("deals", 2, base);

    let (url, seen) = r.connect("hubspot").await;
    let q = query(&url);
    assert!(url.starts_with(&format!("{}/oauth/authorize?", r.fake.base_url)), "{url}");
    assert_eq!(q["client_id"], "hubspot-client");
    assert_eq!(q["redirect_uri"], "https://continuity.example/v1/connectors/oauth/callback");
    assert_eq!(q["scope"], "oauth crm.objects.companies.read crm.objects.contacts.read crm.objects.deals.read");
    assert!(!q.contains_key("code_challenge"), "HubSpot takes no PKCE");
    assert_eq!(seen.len(), 1, "one token request: {seen:?}");
    assert_eq!((seen[0].method.as_str(), seen[0].path.as_str()), ("POST", "/oauth/v1/token"));
    let form: BTreeMap<String, String> = form_urlencoded::parse(seen[0].body.as_bytes()).into_owned().collect();
    assert_eq!(form["grant_type"], "authorization_code");
    assert_eq!(form["code"], "good-code");
    assert_eq!(form["client_secret"], "hubspot-secret");
    assert_eq!(form["redirect_uri"], "https://continuity.example/v1/connectors/oauth/callback");
    let grant = r.s.backend.records.get_grant(&r.t, &ConnectorSource::new("hubspot").unwrap()).await.unwrap().unwrap();
    assert_eq!(grant.access_token, "access-1");
    assert!(!format!("{grant:?}").contains("access-1"), "a grant never prints its tokens");

    // A run cut short: 7 pages, its continuation queued; a source failing from page 13.
    let cut = r.s.sources.run(&r.t, "hubspot", Budget { pages: 7, time: Duration::from_secs(60) }).await.unwrap();
    assert_eq!((cut.pages, cut.records, cut.continued), (7, 700, true));
    assert_eq!(r.state("hubspot").await.progress, Some(0.28), "700 of 2,500 (HubSpot's total)");
    r.world.set(|st| st.fail_from_page = Some(13));
    let broke = r.s.sources.run(&r.t, "hubspot", Budget::SERVE).await.unwrap();
    assert_eq!(broke.records, 500, "pages 8-12 committed before the source failed");
    let st = r.state("hubspot").await;
    assert_eq!((st.state, st.error_stage.as_deref()), (ConnectorState::SyncError, Some("syncing_initial")));
    assert!(st.error_message.as_deref().unwrap().contains("503"), "{st:?}");
    let seen = r.fake.take();
    assert!(seen.len() >= 12 + 3, "each page, then retries with backoff: {}", seen.len());
    let first = seen[0].json();
    assert_eq!(first["limit"], 100);
    assert_eq!(first["sorts"], json!([{"propertyName": "hs_lastmodifieddate", "direction": "ASCENDING"}]));
    assert!(first.get("filterGroups").is_none() && first.get("after").is_none(), "the initial pass reads everything: {first}");
    assert_eq!(seen[1].json()["after"], "100");
    // Back up, with a 429 and a token that expires mid-pull: it resumes from page 13.
    r.world.set(|st| {
        st.fail_from_page = None;
        st.throttle = 1;
        st.access.clear();
    });
    drain(&r.s).await;
    let seen = r.fake.take();
    let api: Vec<&Seen> = seen.iter().filter(|s| s.path.contains("/search")).collect();
    assert_eq!(api[0].json()["after"], "1200", "resumed from the last committed page, not from the start");
    let refresh = seen.iter().find(|s| s.path == "/oauth/v1/token").expect("refreshed after the 401");
    let form: BTreeMap<String, String> = form_urlencoded::parse(refresh.body.as_bytes()).into_owned().collect();
    assert_eq!((form["grant_type"].as_str(), form["refresh_token"].as_str()), ("refresh_token", "refresh-1"));
    let grant = r.s.backend.records.get_grant(&r.t, &ConnectorSource::new("hubspot").unwrap()).await.unwrap().unwrap();
    assert_eq!(
        (grant.access_token.as_str(), grant.refresh_token.as_deref()),
        ("access-2", Some("refresh-2")),
        "the refreshed token kept, and the rotated refresh token with it"
    );
    assert!(seen.iter().any(|s| s.path.ends_with("/batch/read")), "deals' companies read");
    let st = r.state("hubspot").await;
    assert_eq!(st.state, ConnectorState::SyncComplete, "{st:?}");
    let accounts = r.entities("account").await;
    assert_eq!(accounts.len(), 2500, "every company once");
    assert!(accounts.iter().all(|e| e.version == 1), "nothing written twice");
    let deal = r.entity("hubspot", "opportunity", "1").await;
    assert_eq!(deal.attributes.get("account_id"), Some(&V::Text(canonical_id("hubspot", "account", "1").to_string())));

    // A change and a deletion at the source; the delta pull reads exactly those.
    r.world.change("companies", "17", "Renamed Co");
    r.world.delete("companies", "18");
    r.s.sources.sync_now(&r.t, "hubspot").await.unwrap();
    drain(&r.s).await;
    let seen = r.fake.take();
    let searches: Vec<Value> = seen.iter().filter(|s| s.path.ends_with("/search")).map(Seen::json).collect();
    assert_eq!(searches.len(), 3, "one page per object type");
    let gte = searches[0].pointer("/filterGroups/0/filters/0").unwrap();
    assert_eq!((gte["propertyName"].as_str(), gte["operator"].as_str()), (Some("hs_lastmodifieddate"), Some("GTE")));
    assert!(seen.iter().any(|s| s.path.starts_with("/crm/v3/objects/companies?archived=true&limit=100")));
    let renamed = r.entity("hubspot", "account", "17").await;
    assert_eq!((name_of(&renamed).as_str(), renamed.version), ("Renamed Co", 2));
    let gone = r.entity("hubspot", "account", "18").await;
    assert!(gone.attributes.contains_key("deleted_at"), "the deletion reached the Spine: {gone:?}");
    let untouched = r.entities("account").await.iter().filter(|e| e.version > 1).count();
    assert_eq!(untouched, 2, "exactly the changed and the deleted company");
    assert_eq!(r.state("hubspot").await.state, ConnectorState::SyncComplete);

    // Not due yet: the schedule queues nothing; due: one run.
    assert_eq!(r.s.sources.queue_due().await.unwrap(), 0);

    // The grant revoked at HubSpot: sync_error asking for a reconnect, and no retry loop;
    // the tenant's channel is told.
    let receiver = FakeSource::start().await;
    receiver.always(continuity_tests::source::Answer::empty(204));
    r.s.notify
        .add(
            &r.t,
            domain::notify::ChannelKind::Webhook,
            &format!("{}/ops", receiver.base_url),
            vec![domain::notify::EventKind::ConnectorError],
        )
        .await
        .unwrap();
    r.world.set(|st| st.revoked = true);
    r.s.sources.sync_now(&r.t, "hubspot").await.unwrap();
    drain(&r.s).await;
    let told = receiver.take();
    assert_eq!(told.len(), 1, "{told:?}");
    let event = told[0].json();
    assert_eq!((event["kind"].as_str(), event["title"].as_str()), (Some("connector.error"), Some("HubSpot needs a reconnect")));
    assert!(event["text"].as_str().unwrap().contains("reconnect"), "{event}");
    let st = r.state("hubspot").await;
    assert_eq!(st.state, ConnectorState::SyncError);
    assert!(st.error_message.as_deref().unwrap().contains("reconnect"), "{st:?}");
    r.fake.take();
    assert_eq!(r.s.sources.queue_due().await.unwrap(), 0, "a refused grant is not retried");
    let e = r.s.sources.sync_now(&r.t, "hubspot").await.unwrap_err();
    assert!(e.message.contains("reconnect"), "{}", e.message);
    let report = r.s.sources.run(&r.t, "hubspot", Budget::SERVE).await.unwrap();
    assert_eq!(report.skipped.as_deref(), Some("needs a reconnect"));
    assert!(r.fake.take().is_empty(), "nothing sent for a revoked grant");

    // Disconnect: revoked at HubSpot, tokens forgotten, records kept.
    let said = r.s.sources.disconnect(&r.t, "hubspot").await.unwrap();
    assert_eq!(said, "revoked at HubSpot");
    let seen = r.fake.take();
    assert_eq!(seen[0].method, "DELETE");
    assert!(seen[0].path.starts_with("/oauth/v1/refresh-tokens/refresh-"), "{}", seen[0].path);
    assert_eq!(r.state("hubspot").await.state, ConnectorState::NotConnected);
    assert!(r.s.backend.records.get_grant(&r.t, &ConnectorSource::new("hubspot").unwrap()).await.unwrap().is_none());
    assert_eq!(r.entities("account").await.len(), 2500);
}

async fn others(backend: Backend) {
    let r = rig(backend, "src", Department::CustomerSuccess).await;
    let base = now_ms() - 20 * DAY;
    r.world.add("Account", 150, base);
    r.world.add("tickets", 120, base);
    r.world.add("organizations", 2, base);
    r.world.add("issues", 130, base);
    r.world.add("customers", 150, base);

    // Salesforce: PKCE, the instance from the token answer, SOQL paging by nextRecordsUrl.
    let (url, seen) = r.connect("salesforce").await;
    let q = query(&url);
    assert_eq!(q["code_challenge_method"], "S256");
    let form: BTreeMap<String, String> = form_urlencoded::parse(seen[0].body.as_bytes()).into_owned().collect();
    assert!(form["code_verifier"].len() >= 43, "the PKCE verifier is sent with the code");
    drain(&r.s).await;
    let seen = r.fake.take();
    let first = query(&seen[0].path);
    assert_eq!(
        first["q"],
        "SELECT Id, Name, Website, Industry, NumberOfEmployees, AnnualRevenue, Rating, LastModifiedDate, SystemModstamp FROM Account ORDER BY SystemModstamp ASC"
    );
    assert!(seen[1].path.starts_with("/services/data/v62.0/query/next-Account-100-"), "{}", seen[1].path);
    assert_eq!(r.entities("account").await.len(), 150);
    assert_eq!(r.state("salesforce").await.state, ConnectorState::SyncComplete);
    r.world.change("Account", "001000000000000005", "Changed Account");
    r.world.delete("Account", "001000000000000006");
    r.s.sources.sync_now(&r.t, "salesforce").await.unwrap();
    drain(&r.s).await;
    let seen = r.fake.take();
    assert!(query(&seen[0].path)["q"].contains("WHERE SystemModstamp >= "), "{}", seen[0].path);
    assert!(seen.iter().any(|s| s.path.starts_with("/services/data/v62.0/sobjects/Account/deleted/?start=")));
    assert_eq!(name_of(&r.entity("salesforce", "account", "001000000000000005").await), "Changed Account");
    assert!(r.entity("salesforce", "account", "001000000000000006").await.attributes.contains_key("deleted_at"));

    // Zendesk: the cursor export, kept from pass to pass; deleted tickets marked.
    r.connect("zendesk").await;
    drain(&r.s).await;
    let seen = r.fake.take();
    assert!(seen.iter().any(|s| s.path == "/api/v2/incremental/tickets/cursor.json?per_page=100&start_time=0"));
    assert!(seen.iter().any(|s| s.path == "/api/v2/incremental/tickets/cursor.json?per_page=100&cursor=c100"));
    assert_eq!(r.entities("ticket").await.len(), 120);
    r.world.change("tickets", "3", "Changed ticket");
    r.world.delete("tickets", "4");
    r.s.sources.sync_now(&r.t, "zendesk").await.unwrap();
    drain(&r.s).await;
    let seen = r.fake.take();
    let tickets: Vec<&Seen> = seen.iter().filter(|s| s.path.contains("tickets/cursor")).collect();
    assert_eq!(tickets.len(), 1, "the delta starts from the kept cursor: {tickets:?}");
    assert!(tickets[0].path.ends_with("cursor=c120"), "{}", tickets[0].path);
    assert_eq!(name_of(&r.entity("zendesk", "ticket", "3").await), "Changed ticket");
    assert!(r.entity("zendesk", "ticket", "4").await.attributes.contains_key("deleted_at"));

    // Jira: the site from accessible-resources, bounded JQL, nextPageToken.
    let (url, seen) = r.connect("jira").await;
    let q = query(&url);
    assert_eq!((q["audience"].as_str(), q["prompt"].as_str()), ("api.atlassian.com", "consent"));
    assert!(seen[0].json().get("code_verifier").is_some(), "Atlassian's token request is JSON with the verifier");
    assert_eq!(seen[1].path, "/oauth/token/accessible-resources");
    drain(&r.s).await;
    let seen = r.fake.take();
    assert!(seen[0].path.starts_with("/ex/jira/cloud-7/rest/api/3/search/jql?jql="), "{}", seen[0].path);
    assert_eq!(query(&seen[0].path)["jql"], "updated >= \"1970/01/01 00:00\" ORDER BY updated ASC");
    assert!(seen[1].path.contains("nextPageToken=p100"), "{}", seen[1].path);
    assert_eq!(r.entities("ticket").await.len(), 120 + 130);

    // Stripe: a restricted key, lists wrapped as events, then the events API.
    let bad = r.s.sources.connect_with_key(&r.t, "stripe", "pk_live_nope").await.unwrap_err();
    assert!(bad.message.contains("restricted key"), "{}", bad.message);
    let refused = r.s.sources.connect_with_key(&r.t, "stripe", "rk_test_wrong").await.unwrap_err();
    assert!(refused.message.contains("401"), "{}", refused.message);
    let st = r.s.sources.connect_with_key(&r.t, "stripe", "rk_test_good").await.unwrap();
    assert_eq!(st.state, ConnectorState::OauthComplete);
    drain(&r.s).await;
    let seen = r.fake.take();
    assert!(seen.iter().any(|s| s.path == "/v1/customers?limit=100&starting_after=cus_99"), "{seen:?}");
    assert_eq!(r.entities("account").await.len(), 150 + 2 + 150, "Salesforce accounts, Zendesk organizations, Stripe customers");
    r.world.change("customers", "cus_7", "Changed Customer");
    r.world.delete("customers", "cus_8");
    r.s.sources.sync_now(&r.t, "stripe").await.unwrap();
    drain(&r.s).await;
    let seen = r.fake.take();
    assert!(seen.iter().any(|s| s.path.starts_with("/v1/events?limit=100&type=customer.*&created%5Bgte%5D=")), "{seen:?}");
    assert_eq!(name_of(&r.entity("stripe", "account", "cus_7").await), "Changed Customer");
    assert!(r.entity("stripe", "account", "cus_8").await.attributes.contains_key("deleted_at"));
    for s in ["salesforce", "zendesk", "jira", "stripe"] {
        assert_eq!(r.state(s).await.state, ConnectorState::SyncComplete, "{s}");
    }
    let overview = r.s.sources.overview(&r.t).await.unwrap();
    assert_eq!(overview["connectors"].as_array().unwrap().len(), 4);
    assert!(overview["connectors"][0]["pull"]["last_synced_at"].is_string(), "{overview}");
}

/// What a deployment cannot be made to do: connect without an app, a base URL that is
/// not the source's, a forged or expired state, a refused sign-in.
async fn refusals(backend: Backend) {
    let s = Services::new(backend);
    let t = contract::fresh_tenant("srcno");
    s.admin.create_tenant(t.clone(), PlanTier::Pro, Department::Sales, Industry::Saas).await.unwrap();
    let app = |base: &str| SourceApp {
        client_id: "id".into(),
        client_secret: "secret".into(),
        base_url: Some(base.into()),
        webhook_secret: None,
    };
    let e = s.sources.set_app("salesforce", app("https://evil.example")).await.unwrap_err();
    assert!(e.message.contains("not salesforce's API"), "{}", e.message);
    let e = s.sources.set_app("notion", app("https://x.example")).await.unwrap_err();
    assert!(e.message.contains("hubspot, salesforce, zendesk, jira, stripe"), "{}", e.message);
    let e = s.sources.set_app("zendesk", SourceApp { base_url: None, ..app("") }).await.unwrap_err();
    assert!(e.message.contains("subdomain"), "{}", e.message);
    if s.sources.apps().await.unwrap().iter().all(|a| a != "hubspot") {
        let e = s.sources.start_connect(&t, "hubspot", "https://c.example").await.unwrap_err();
        assert!(e.message.contains("source-app set hubspot"), "{}", e.message);
    }
    let e = s.sources.callback("forged-state", Some("good-code"), None).await.unwrap_err();
    assert!(e.message.contains("unknown, used already or expired"), "{}", e.message);
    // A refused sign-in at the source: sync_error at oauth_pending, reconnectable.
    let fake = FakeSource::start().await;
    s.sources.set_app("jira", app(&fake.base_url)).await.unwrap();
    let url = s.sources.start_connect(&t, "jira", "https://c.example").await.unwrap();
    let state = query(&url)["state"].clone();
    let st = s.sources.callback(&state, None, Some("access_denied: the user said no")).await.unwrap();
    assert_eq!((st.state, st.error_stage.as_deref()), (ConnectorState::SyncError, Some("oauth_pending")));
    assert!(s.sources.start_connect(&t, "jira", "https://c.example").await.is_ok(), "connect again from sync_error");
    assert!(fake.take().is_empty(), "nothing reached the source");
}

fn delivery<'a>(url: &'a str, headers: &'a [(String, String)], body: &'a str) -> Delivery<'a> {
    Delivery { url, headers, body: body.as_bytes() }
}

/// Signed deliveries of Stripe, HubSpot, Zendesk and Jira: each feeds the pipeline or
/// marks a deletion, once; a bad signature, a stale timestamp or an unconnected source
/// is refused with nothing done.
async fn webhooks(backend: Backend) {
    let r = rig(backend, "hook", Department::CustomerSuccess).await;
    let base = now_ms() - 20 * DAY;
    r.world.add("customers", 5, base);
    r.world.add("tickets", 5, base);
    r.world.add("issues", 5, base);
    r.s.sources.connect_with_key(&r.t, "stripe", "rk_test_good").await.unwrap();
    r.connect("zendesk").await;
    r.connect("jira").await;
    for source in ["stripe", "zendesk", "jira"] {
        r.settled(source).await;
    }
    r.fake.take();
    let url = format!("https://continuity.example/v1/webhooks/{}/stripe", r.t);
    let now = now_ms();

    // Stripe: an updated customer into the pipeline, once.
    let event = json!({"id": "evt_1", "object": "event", "type": "customer.updated", "created": now / 1000,
        "data": {"object": {"id": "cus_2", "object": "customer", "name": "Pushed Name", "metadata": {}}}})
    .to_string();
    let signed = sign::stripe("whsec_test", &event, now / 1000);
    let got = r.s.sources.webhook(&r.t, "stripe", &delivery(&url, &signed, &event)).await.unwrap();
    assert_eq!((got.records, got.duplicate), (1, false));
    drain(&r.s).await;
    assert_eq!(name_of(&r.entity("stripe", "account", "cus_2").await), "Pushed Name");
    let again = r.s.sources.webhook(&r.t, "stripe", &delivery(&url, &signed, &event)).await.unwrap();
    assert!(again.duplicate && again.records == 0, "a replay does nothing: {again:?}");
    let forged = sign::stripe("whsec_other", &event.replace("Pushed", "Forged"), now / 1000);
    let e = r.s.sources.webhook(&r.t, "stripe", &delivery(&url, &forged, &event.replace("Pushed", "Forged"))).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthenticated, "{e}");
    let stale_body = event.replace("evt_1", "evt_old");
    let stale = sign::stripe("whsec_test", &stale_body, now / 1000 - 600);
    let e = r.s.sources.webhook(&r.t, "stripe", &delivery(&url, &stale, &stale_body)).await.unwrap_err();
    assert!(e.message.contains("5 minutes"), "{e}");
    let e = r.s.sources.webhook(&r.t, "stripe", &delivery(&url, &[], &event)).await.unwrap_err();
    assert!(e.message.contains("Stripe-Signature"), "{e}");
    let deleted = json!({"id": "evt_2", "type": "customer.deleted", "created": now / 1000, "data": {"object": {"id": "cus_3", "object": "customer"}}}).to_string();
    let got =
        r.s.sources
            .webhook(&r.t, "stripe", &delivery(&url, &sign::stripe("whsec_test", &deleted, now / 1000), &deleted))
            .await
            .unwrap();
    let cus3 = r.entity("stripe", "account", "cus_3").await;
    assert_eq!(got.deleted, 1, "{cus3:?} at {now}");
    assert!(r.entity("stripe", "account", "cus_3").await.attributes.contains_key("deleted_at"));

    // Jira: an updated issue into the pipeline; a deleted one marked.
    let issue = json!({"webhookEvent": "jira:issue_updated", "timestamp": now, "issue": {"id": "2", "key": "OPS-2",
        "fields": {"summary": "Pushed issue", "status": {"name": "Done"}, "priority": {"name": "High"}, "issuetype": {"name": "Bug"},
                   "created": "2026-11-01T10:00:00.000+0000", "updated": domain::Timestamp(now).to_rfc3339()}}})
    .to_string();
    let got = r.s.sources.webhook(&r.t, "jira", &delivery(&url, &sign::jira("jira-hook-secret", &issue), &issue)).await.unwrap();
    assert_eq!(got.records, 1);
    drain(&r.s).await;
    assert_eq!(name_of(&r.entity("jira", "ticket", "2").await), "Pushed issue");
    let gone = json!({"webhookEvent": "jira:issue_deleted", "timestamp": now, "issue": {"id": "3"}}).to_string();
    let got = r.s.sources.webhook(&r.t, "jira", &delivery(&url, &sign::jira("jira-hook-secret", &gone), &gone)).await.unwrap();
    assert_eq!(got.deleted, 1);
    let e = r.s.sources.webhook(&r.t, "jira", &delivery(&url, &sign::jira("wrong", &gone), &gone)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthenticated);

    // Zendesk: a deleted ticket marked; any other event pulls now.
    let ts = domain::Timestamp(now).to_rfc3339();
    let z = json!({"type": "zen:event-type:ticket.deleted", "detail": {"id": "4"}}).to_string();
    let got =
        r.s.sources.webhook(&r.t, "zendesk", &delivery(&url, &sign::zendesk("zendesk-hook-secret", &z, &ts), &z)).await.unwrap();
    assert_eq!(got.deleted, 1);
    let z2 = json!({"type": "zen:event-type:ticket.comment_added", "detail": {"id": "1"}}).to_string();
    let got =
        r.s.sources
            .webhook(&r.t, "zendesk", &delivery(&url, &sign::zendesk("zendesk-hook-secret", &z2, &ts), &z2))
            .await
            .unwrap();
    assert!(got.pull_queued, "{got:?}");

    // HubSpot is not connected here: refused after the signature, nothing done.
    let h = json!([{"subscriptionType": "company.deletion", "objectId": 5, "occurredAt": now}]).to_string();
    let hs_url = format!("https://continuity.example/v1/webhooks/{}/hubspot", r.t);
    let e =
        r.s.sources
            .webhook(&r.t, "hubspot", &delivery(&hs_url, &sign::hubspot("hubspot-hook-secret", &hs_url, &h, now), &h))
            .await
            .unwrap_err();
    assert_eq!(e.code, ErrorCode::ConnectorNotAvailable, "{e}");
    let e =
        r.s.sources
            .webhook(
                &r.t,
                "hubspot",
                &delivery("https://elsewhere.example/x", &sign::hubspot("hubspot-hook-secret", &hs_url, &h, now), &h),
            )
            .await
            .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthenticated, "the URL is signed: {e}");
    let e = r.s.sources.webhook(&r.t, "salesforce", &delivery(&url, &[], "{}")).await.unwrap_err();
    assert!(e.message.contains("Change Data Capture"), "{e}");

    // Deliveries are remembered a week: nothing younger is pruned; past it, each one's
    // replay key and index entry go (the Stripe event is then new again).
    let week = services::sources::webhooks::SEEN_RETENTION_MS;
    assert_eq!(services::sources::webhooks::prune_seen(&r.s.backend, &r.t, now_ms() - week, 100).await.unwrap(), 0);
    assert_eq!(services::sources::webhooks::prune_seen(&r.s.backend, &r.t, now_ms() + 1000, 2).await.unwrap(), 2, "at most max");
    assert_eq!(services::sources::webhooks::prune_seen(&r.s.backend, &r.t, now_ms() + 1000, 100).await.unwrap(), 4);
    let after = r.s.sources.webhook(&r.t, "stripe", &delivery(&url, &signed, &event)).await.unwrap();
    assert!(!after.duplicate, "its key was pruned: {after:?}");
}

/// Each source's own limits kept before a 429 comes: Zendesk's incremental exports
/// saying their minute is spent hold the next call for the `resets` seconds; HubSpot's
/// searches come at most 4 a second; Salesforce's daily allocation 95 % used stops the
/// pull for an hour — not an error, the records so far kept.
async fn limits(backend: Backend) {
    let r = rig(backend, "lim", Department::CustomerSuccess).await;
    let base = now_ms() - 20 * DAY;
    r.world.add("organizations", 2, base);
    r.world.add("tickets", 3, base);
    r.world.add("companies", 250, base);
    r.world.add("Account", 250, base);

    r.world.set(|st| {
        st.limit_headers = vec![("Zendesk-RateLimit-incremental-exports".into(), "total=10; remaining=0; resets=1".into())]
    });
    r.connect("zendesk").await;
    r.settled("zendesk").await;
    let exports: Vec<Seen> = r.fake.take().into_iter().filter(|s| s.path.starts_with("/api/v2/incremental/")).collect();
    assert!(exports.len() >= 2, "{exports:?}");
    for pair in exports.windows(2) {
        assert!(
            pair[1].at - pair[0].at >= Duration::from_secs(1),
            "the export's spent minute was waited: {:?}",
            pair[1].at - pair[0].at
        );
    }

    // The interval: 5 minutes by default (the enterprise plan allows 1); set per
    // connector within the plan's range, the next pull moved to it.
    let zendesk = ConnectorSource::new("zendesk").unwrap();
    assert_eq!(r.s.backend.records.get_sync(&r.t, &zendesk).await.unwrap().unwrap().interval_secs, 300);
    for bad in [0, 1441] {
        let e = r.s.sources.set_interval(&r.t, "zendesk", bad).await.unwrap_err();
        assert!(e.message.contains("1 to 1440 on the enterprise plan"), "{e}");
    }
    assert_eq!(r.s.sources.set_interval(&r.t, "stripe", 30).await.unwrap_err().code, ErrorCode::NotFound);
    assert_eq!(r.s.sources.set_interval(&r.t, "zendesk", 30).await.unwrap(), 1800);
    let sync = r.s.backend.records.get_sync(&r.t, &zendesk).await.unwrap().unwrap();
    assert_eq!(sync.interval_secs, 1800);
    assert_eq!(sync.next_at.0, sync.last_synced_at.unwrap().0 + 1_800_000, "due 30 minutes after the last pull");

    r.world.set(|st| st.limit_headers.clear());
    r.connect("hubspot").await;
    r.settled("hubspot").await;
    let searches: Vec<Seen> = r.fake.take().into_iter().filter(|s| s.path.ends_with("/search")).collect();
    assert!(searches.len() >= 3, "{searches:?}");
    for pair in searches.windows(2) {
        assert!(pair[1].at - pair[0].at >= Duration::from_millis(250), "4 searches a second at most");
    }

    r.world.set(|st| st.limit_headers = vec![("Sforce-Limit-Info".into(), "api-usage=9500/10000".into())]);
    r.connect("salesforce").await;
    let report = r.s.sources.run(&r.t, "salesforce", Budget::SERVE).await.unwrap();
    let why = report.skipped.as_deref().unwrap_or_default();
    assert!(why.contains("95% used (9500 of 10000)"), "{report:?}");
    assert_eq!(report.pages, 1, "one page, then stopped");
    drain(&r.s).await;
    let st = r.state("salesforce").await;
    assert_ne!(st.state, ConnectorState::SyncError, "a spent allocation is not an error: {st:?}");
    let sync = r.s.backend.records.get_sync(&r.t, &ConnectorSource::new("salesforce").unwrap()).await.unwrap().unwrap();
    assert!(sync.next_at.0 >= now_ms() + 59 * 60 * 1000, "due again in an hour: {sync:?}");
    assert_eq!(
        r.entities("account").await.len(),
        2 + 250 + 100,
        "Zendesk's organizations, HubSpot's companies, Salesforce's first page"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_embedded() {
    let dir = tempfile::tempdir().unwrap();
    limits(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_aws() {
    limits(continuity_tests::aws::backend_in_own_table("srclim").await).await;
}

/// HubSpot's search pages through 10,000 results of one query at most (the stand-in
/// answers 400 past it, as HubSpot does): a longer stage asks again from the newest
/// change it has seen, and every company arrives once. Embedded only: the restart is
/// the pull's own logic, the same on both backends, and 10,000 records through moto
/// would take minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hubspot_search_goes_past_its_window() {
    let dir = tempfile::tempdir().unwrap();
    let r = rig(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap(), "hswin", Department::Sales).await;
    let base = now_ms() - 20 * DAY;
    r.world.add("companies", 10_250, base);
    r.connect("hubspot").await;
    r.settled("hubspot").await;
    let seen = r.fake.take();
    let companies: Vec<Value> = seen.iter().filter(|s| s.path == "/crm/v3/objects/companies/search").map(Seen::json).collect();
    assert!(
        companies.iter().all(|b| b.get("after").is_none_or(|a| a.as_str().unwrap().parse::<u64>().unwrap() < 10_000)),
        "never an after past the window"
    );
    assert_eq!(companies.len(), 100 + 3, "100 pages, then 3 from the restart");
    let restart = &companies[100];
    assert!(restart.get("after").is_none(), "{restart}");
    let gte = restart.pointer("/filterGroups/0/filters/0").unwrap();
    assert_eq!(
        (gte["operator"].as_str(), gte["value"].as_str()),
        (Some("GTE"), Some((base + 9_999 * 1000).to_string().as_str())),
        "from the newest change of the 10,000th company"
    );
    let accounts = r.entities("account").await;
    assert_eq!(accounts.len(), 10_250, "every company");
    assert!(accounts.iter().all(|e| e.version == 1), "the company read twice at the seam is not written twice");
    let st = r.state("hubspot").await;
    assert_eq!(st.state, ConnectorState::SyncComplete, "{st:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_embedded() {
    let dir = tempfile::tempdir().unwrap();
    webhooks(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_aws() {
    webhooks(continuity_tests::aws::backend_in_own_table("srchook").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hubspot_embedded() {
    let dir = tempfile::tempdir().unwrap();
    hubspot(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hubspot_aws() {
    continuity_tests::aws::own_moto();
    hubspot(continuity_tests::aws::backend_in_own_table("srchs").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_sources_embedded() {
    let dir = tempfile::tempdir().unwrap();
    others(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_sources_aws() {
    continuity_tests::aws::own_moto();
    others(continuity_tests::aws::backend_in_own_table("srcall").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_embedded() {
    let dir = tempfile::tempdir().unwrap();
    refusals(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_aws() {
    refusals(continuity_tests::aws::backend_in_own_table("srcno").await).await;
}
