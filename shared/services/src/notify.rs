//! Notifications: people in the loop are told when something waits for them.
//!
//! A tenant's admins configure channels (`continuity notify add`, the admin API): a
//! **webhook** (our JSON event, signed — `X-Continuity-Signature: t={secs},v1={hex
//! HMAC-SHA256 of "{t}.{body}"}` with the channel's secret, shown once at creation) or a
//! **Slack-compatible incoming webhook** (a message with the title, the text and, for a
//! proposal or a gate, a link to decide) or an **e-mail address** (plain text through
//! the deployment's mailer: SMTP on `serve`, SES on AWS; the subject is the title, the
//! link in the text). Each channel subscribes to event kinds ([`EventKind`]).
//!
//! **Digest**: a channel is told of the first [`DIGEST_AFTER`] waiting proposals of a
//! [`DIGEST_WINDOW`] one by one; more in the same window are held and sent together as
//! one digest ("5 proposals wait for you: …") by [`NotifyService::flush_digests`]
//! (`serve`: every 30 s for a digest a minute old; AWS: the 5-minute schedule).
//!
//! [`NotifyService::emit`] never fails its caller: it queues one `notify.deliver` message
//! per subscribed channel, and the work-queue consumer delivers it
//! ([`NotifyService::deliver`]) — three attempts with backoff (0.5 s, 1 s) per receive,
//! then the queue's own redelivery; after [`ATTEMPTS_BEFORE_GIVING_UP`] receives the
//! delivery is kept as a failure (`continuity notify failures`, `GET
//! /v1/admin/tenants/{t}/notify/failures`) and given up. Texts are redacted before they
//! leave: personal data masked, secrets replaced — the approvals console's redaction.
//!
//! **Decision links**: a waiting proposal's link is minted per channel when it is
//! delivered — a signed, single-use decision link ([`LinkClaims`]) to a one-page
//! decision screen, bound to the proposal and, for an e-mail channel whose address is a
//! user of the tenant, to that user (a webhook or Slack channel is shared by the
//! tenant's approvers: its link names none). Opening it still needs the approver's
//! sign-in; [`NotifyService::open_link`] and [`NotifyService::use_link`] refuse a link
//! that is expired, forged, used, for another workspace or for another person.

use std::time::Duration;

use aws_lc_rs::hmac;
use domain::notify::{Channel, ChannelKind, Event, EventKind, Failure};
use domain::{Error, ErrorCode, Id, Page, PageRequest, Result, TenantId};
use ports::Backend;
use ports::items::{Condition, Item, Write};
use ports::oauth::OAuthStore;
use ports::queue::{Delivery, QueueMessage};
use ports::records::{MAX_CHANNELS, NotifyStore, ProposalStore, TenantStore};
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

/// Where spent decision links are remembered (`jti` claims).
const LINK_ISSUER: &str = "continuity:decision-link";
const INVALID_LINK: &str =
    "This link is expired or not valid (links last 8 hours at most). Open the approvals console to decide.";

fn used() -> Error {
    Error::forbidden("This link was used already: a decision link decides once. Open the approvals console to see the outcome.")
}

/// Queue message kind of one delivery.
pub const KIND_DELIVER: &str = "notify.deliver";
/// Receives of a delivery message before it is kept as a failure and given up.
pub const ATTEMPTS_BEFORE_GIVING_UP: u32 = 3;
const TRIES_PER_RECEIVE: u32 = 3;
/// Waiting proposals told one by one per channel and window before the digest holds them.
pub const DIGEST_AFTER: u32 = 3;
/// The digest's window.
pub const DIGEST_WINDOW: Duration = Duration::from_secs(10 * 60);
/// Proposals a digest names (more are counted).
const DIGEST_NAMES: usize = 20;
const DIGEST: &str = "notify_digest";
/// Markers of what was told once (`{event}#{subject}`) and the watch's watermarks.
const TOLD: &str = "notify_told";

/// Per channel: how many waiting proposals were told one by one in the current window,
/// and those held for the digest.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Digest {
    window_start: i64,
    sent: u32,
    held: Vec<Event>,
    /// Held beyond the names kept.
    more: u32,
}
const TIMEOUT: Duration = crate::actions::REQUEST_TIMEOUT;

#[derive(Debug, Serialize, Deserialize)]
struct DeliverMessage {
    channel: Id,
    event: Event,
}

#[derive(Clone)]
pub struct NotifyService {
    backend: Backend,
    tokens: crate::oauth::tokens::TokenService,
    /// The deployment's public URL, for links (`CONTINUITY_PUBLIC_URL`, or serve's).
    base: std::sync::Arc<std::sync::RwLock<Option<String>>>,
    first_backoff: Duration,
}

/// Checks a channel's URL: https, or a loopback address outside AWS Lambda.
fn check_url(raw: &str) -> Result<()> {
    let bad = |why: &str| Error::invalid_field("url", why.to_owned());
    let url = reqwest::Url::parse(raw).map_err(|e| bad(&format!("not a URL: {e}")))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("a URL without a user name or password"));
    }
    let host = url.host_str().unwrap_or_default();
    let loopback = matches!(host, "127.0.0.1" | "localhost" | "[::1]");
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback && std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_none() => Ok(()),
        _ => Err(bad("an https:// URL (http only to a loopback address, in development)")),
    }
}

/// The signature header of a webhook body sent at `t` (seconds).
pub fn signature(secret: &str, t: i64, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(t.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    format!("t={t},v1={}", hex::encode(ctx.sign().as_ref()))
}

/// A text as it may leave: secrets replaced, personal data masked, at most `max` characters.
fn clean(tenant: &TenantId, text: &str, max: usize) -> String {
    let text = crate::governance::redaction::mask_personal(&crate::governance::redaction::redacted(tenant, text));
    let mut out: String = text.chars().take(max).collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

impl NotifyService {
    pub(crate) fn new(backend: Backend, tokens: crate::oauth::tokens::TokenService) -> Self {
        let base = std::env::var("CONTINUITY_PUBLIC_URL").ok().filter(|u| !u.is_empty());
        Self {
            backend,
            tokens,
            base: std::sync::Arc::new(std::sync::RwLock::new(base)),
            first_backoff: Duration::from_millis(500),
        }
    }

    /// Sets the public URL links are made from (`continuity serve` at start).
    pub fn set_public_url(&self, url: &str) {
        *self.base.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(url.trim_end_matches('/').to_owned());
    }

    /// What sends e-mail channels (`smtp`, `ses`), or `None` where e-mail is off.
    pub fn mail_transport(&self) -> Option<&'static str> {
        self.backend.mailer.as_ref().map(|m| m.name())
    }

    fn link(&self, path: &str) -> Option<String> {
        self.base.read().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref().map(|b| format!("{b}{path}"))
    }

    // ---- channels --------------------------------------------------------------------

    /// Adds a channel; for a webhook, its signing secret (shown once).
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a bad URL, no events, or more than [`MAX_CHANNELS`];
    /// `NOT_FOUND` for an unknown tenant; `UNAVAILABLE`.
    pub async fn add(&self, tenant: &TenantId, kind: ChannelKind, url: &str, events: Vec<EventKind>) -> Result<Channel> {
        self.backend.records.get_tenant(tenant).await?.ok_or_else(|| Error::not_found(format!("tenant {tenant}")))?;
        let url = url.trim();
        let owned;
        let url = if kind == ChannelKind::Email {
            let address = url.strip_prefix("mailto:").unwrap_or(url);
            ports::mail::check_address("url", address)?;
            if self.backend.mailer.is_none() {
                return Err(Error::invalid_field(
                    "kind",
                    "e-mail is not configured on this deployment: set CONTINUITY_SMTP_URL and CONTINUITY_MAIL_FROM \
                     (continuity serve), or the stack's MailFrom parameter (AWS)",
                ));
            }
            owned = format!("mailto:{address}");
            owned.as_str()
        } else {
            check_url(url)?;
            url
        };
        if self.backend.records.list_channels(tenant).await?.len() >= MAX_CHANNELS {
            return Err(Error::invalid_field("channel", format!("at most {MAX_CHANNELS} channels per tenant")));
        }
        let mut events = events;
        events.sort();
        events.dedup();
        let secret = (kind == ChannelKind::Webhook).then(|| {
            let mut bytes = [0u8; 32];
            rand::fill(&mut bytes[..]);
            format!("whsec_{}", hex::encode(bytes))
        });
        let channel = Channel {
            tenant: tenant.clone(),
            id: crate::new_id(&self.backend),
            kind,
            url: url.to_owned(),
            secret,
            events,
            created_at: self.backend.clock.now(),
        };
        self.backend.records.put_channel(&channel).await?;
        Ok(channel)
    }

    /// The tenant's channels, without their secrets (the URL's host alone).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn list(&self, tenant: &TenantId) -> Result<Vec<Json>> {
        let channels = self.backend.records.list_channels(tenant).await?;
        Ok(channels
            .into_iter()
            .map(|c| {
                let host = match c.url.strip_prefix("mailto:") {
                    // The address is personal data: its domain alone.
                    Some(address) => address.rsplit_once('@').map(|(_, d)| d.to_owned()).unwrap_or_default(),
                    None => reqwest::Url::parse(&c.url).ok().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_default(),
                };
                json!({"id": c.id, "kind": c.kind, "host": host, "events": c.events, "created_at": c.created_at.to_rfc3339()})
            })
            .collect())
    }

    /// # Errors
    /// `NOT_FOUND` when there is none; `UNAVAILABLE`.
    pub async fn remove(&self, tenant: &TenantId, id: &Id) -> Result<()> {
        if !self.backend.records.delete_channel(tenant, id).await? {
            return Err(Error::not_found(format!("notification channel {id}")));
        }
        Ok(())
    }

    /// Deliveries that kept failing, newest first.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn failures(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<Failure>> {
        self.backend.records.list_notify_failures(tenant, page).await
    }

    // ---- events ----------------------------------------------------------------------

    /// Tells every channel of `tenant` subscribed to `kind`. Never fails: a channel that
    /// cannot be told now is logged (the event is not lost for the others).
    pub async fn emit(&self, tenant: &TenantId, kind: EventKind, subject: &str, title: &str, text: &str, link: Option<&str>) {
        let channels = match self.backend.records.list_channels(tenant).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(tenant = %tenant, event = kind.as_str(), error = %e, "notification channels not read; not notified");
                return;
            }
        };
        let subscribed: Vec<&Channel> = channels.iter().filter(|c| c.events.contains(&kind)).collect();
        if subscribed.is_empty() {
            return;
        }
        let event = Event {
            id: crate::new_id(&self.backend),
            kind,
            tenant: tenant.clone(),
            at: self.backend.clock.now(),
            title: clean(tenant, title, 200),
            text: clean(tenant, text, 1000),
            subject: subject.to_owned(),
            link: link.and_then(|p| self.link(p)),
        };
        for c in subscribed {
            if kind == EventKind::ProposalWaiting {
                match self.hold_for_digest(tenant, &c.id, &event).await {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(e) => tracing::warn!(tenant = %tenant, channel = %c.id, error = %e, "digest not read; told at once"),
                }
            }
            let msg = DeliverMessage { channel: c.id.clone(), event: event.clone() };
            let Ok(body) = serde_json::to_vec(&msg) else { continue };
            let queued = self
                .backend
                .queue
                .send(&QueueMessage {
                    tenant: tenant.clone(),
                    kind: KIND_DELIVER.into(),
                    idempotency_key: format!("notify:{}:{}", event.id, c.id),
                    body,
                })
                .await;
            if let Err(e) = queued {
                tracing::warn!(tenant = %tenant, channel = %c.id, error = %e, "notification not queued");
            }
        }
    }

    /// [`Self::emit`], once per `subject` of `kind` (a proposal near its deadline): a
    /// marker records that it was told, so later passes stay quiet. `true` when told now.
    pub async fn emit_once(
        &self,
        tenant: &TenantId,
        kind: EventKind,
        subject: &str,
        title: &str,
        text: &str,
        link: &str,
    ) -> bool {
        let now = self.backend.clock.now().0;
        let item = Item {
            tenant: tenant.to_string(),
            part: TOLD.into(),
            sk: format!("{}#{subject}", kind.as_str()),
            version: 1,
            body: now.to_string().into_bytes(),
        };
        match self.backend.records.items().write(vec![Write::Put { item, condition: Condition::Absent }]).await {
            Ok(()) => {
                self.emit(tenant, kind, subject, title, text, Some(link)).await;
                true
            }
            Err(e) if e.code == ErrorCode::Conflict => false,
            Err(e) => {
                tracing::warn!(tenant = %tenant, event = kind.as_str(), error = %e, "not told (the marker was not written); the next pass tries again");
                false
            }
        }
    }

    /// Drops the once-markers of `kind` whose subject is not in `current` (proposals
    /// decided since), so they stay as few as what is current; how many were dropped.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn forget_told(
        &self,
        tenant: &TenantId,
        kind: EventKind,
        current: &std::collections::BTreeSet<String>,
    ) -> Result<usize> {
        let items = self.backend.records.items();
        let prefix = format!("{}#", kind.as_str());
        let (found, _) = items
            .query(ports::items::Query {
                tenant: tenant.as_str(),
                part: TOLD,
                prefix: &prefix,
                after: None,
                limit: 1000,
                descending: false,
            })
            .await?;
        let gone: Vec<Write> = found
            .into_iter()
            .filter(|i| !i.sk.strip_prefix(&prefix).is_some_and(|subject| current.contains(subject)))
            .map(|i| Write::Delete { tenant: i.tenant, part: i.part, sk: i.sk, condition: Condition::None })
            .collect();
        let n = gone.len();
        for batch in gone.chunks(ports::items::MAX_WRITES_PER_BATCH) {
            items.write(batch.to_vec()).await?;
        }
        Ok(n)
    }

    /// What the watch `name` saw at its last look (empty when never).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn seen(&self, tenant: &TenantId, name: &str) -> Result<Vec<String>> {
        let item = self.backend.records.items().get(tenant.as_str(), TOLD, &format!("watch#{name}")).await?;
        Ok(item.and_then(|i| serde_json::from_slice(&i.body).ok()).unwrap_or_default())
    }

    /// Records what the watch `name` saw now.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn set_seen(&self, tenant: &TenantId, name: &str, seen: &[String]) -> Result<()> {
        let body = serde_json::to_vec(seen).map_err(Error::internal)?;
        let item = Item { tenant: tenant.to_string(), part: TOLD.into(), sk: format!("watch#{name}"), version: 1, body };
        self.backend.records.items().write(vec![Write::Put { item, condition: Condition::None }]).await
    }

    /// Counts a waiting proposal against the channel's window; `true` when it is held for
    /// the digest rather than told now.
    async fn hold_for_digest(&self, tenant: &TenantId, channel: &Id, event: &Event) -> Result<bool> {
        let items = self.backend.records.items();
        let window = i64::try_from(DIGEST_WINDOW.as_millis()).unwrap_or(i64::MAX);
        for _ in 0..5 {
            let item = items.get(tenant.as_str(), DIGEST, channel.as_str()).await?;
            let (mut d, condition, version) = match &item {
                Some(i) => {
                    (serde_json::from_slice::<Digest>(&i.body).unwrap_or_default(), Condition::Version(i.version), i.version + 1)
                }
                None => (Digest::default(), Condition::Absent, 1),
            };
            let now = event.at.0;
            if now - d.window_start >= window && d.held.is_empty() && d.more == 0 {
                d = Digest { window_start: now, ..Digest::default() };
            }
            let held = d.sent >= DIGEST_AFTER || !d.held.is_empty() || d.more > 0;
            if held {
                if d.held.len() < DIGEST_NAMES {
                    d.held.push(event.clone());
                } else {
                    d.more += 1;
                }
            } else {
                d.sent += 1;
            }
            let body = serde_json::to_vec(&d).map_err(Error::internal)?;
            let item = Item { tenant: tenant.to_string(), part: DIGEST.into(), sk: channel.to_string(), version, body };
            match items.write(vec![Write::Put { item, condition }]).await {
                Ok(()) => return Ok(held),
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::unavailable("the digest kept changing"))
    }

    /// Sends every held digest whose oldest proposal waits at least `min_age`; how many
    /// digests were queued.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the tenants cannot be listed (a tenant that fails is skipped).
    pub async fn flush_digests(&self, min_age: Duration) -> Result<usize> {
        let tenants = crate::all_pages(1_000_000, |p| {
            let r = self.backend.records.clone();
            async move { r.list_tenants(&p).await }
        })
        .await?
        .0;
        let now = self.backend.clock.now();
        let min_age = i64::try_from(min_age.as_millis()).unwrap_or(i64::MAX);
        let mut sent = 0;
        for tenant in tenants {
            let Ok(channels) = self.backend.records.list_channels(&tenant).await else { continue };
            for c in channels.iter().filter(|c| c.events.contains(&EventKind::ProposalWaiting)) {
                match self.flush_one(&tenant, c, now, min_age).await {
                    Ok(true) => sent += 1,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(tenant = %tenant, channel = %c.id, error = %e, "digest not sent; the next round retries")
                    }
                }
            }
        }
        Ok(sent)
    }

    async fn flush_one(&self, tenant: &TenantId, c: &Channel, now: domain::Timestamp, min_age: i64) -> Result<bool> {
        let items = self.backend.records.items();
        let Some(item) = items.get(tenant.as_str(), DIGEST, c.id.as_str()).await? else { return Ok(false) };
        let d: Digest = serde_json::from_slice(&item.body).unwrap_or_default();
        let Some(oldest) = d.held.first() else { return Ok(false) };
        if now.0 - oldest.at.0 < min_age {
            return Ok(false);
        }
        let count = d.held.len() + usize::try_from(d.more).unwrap_or(0);
        let mut text: Vec<String> =
            d.held.iter().map(|e| format!("• {}", e.title.trim_start_matches("Waiting for you: "))).collect();
        if d.more > 0 {
            text.push(format!("• and {} more", d.more));
        }
        let event = Event {
            id: crate::new_id(&self.backend),
            kind: EventKind::ProposalWaiting,
            tenant: tenant.clone(),
            at: now,
            title: format!("{count} proposals wait for you"),
            text: text.join("\n"),
            subject: "proposals".into(),
            link: self.link("/approvals"),
        };
        // Emptied first (conditionally): a digest is sent once even if two flushes race.
        let emptied = Digest { window_start: d.window_start, sent: d.sent, held: Vec::new(), more: 0 };
        let body = serde_json::to_vec(&emptied).map_err(Error::internal)?;
        let next =
            Item { tenant: tenant.to_string(), part: DIGEST.into(), sk: c.id.to_string(), version: item.version + 1, body };
        match items.write(vec![Write::Put { item: next, condition: Condition::Version(item.version) }]).await {
            Ok(()) => {}
            Err(e) if e.code == ErrorCode::Conflict => return Ok(false),
            Err(e) => return Err(e),
        }
        let msg = DeliverMessage { channel: c.id.clone(), event: event.clone() };
        let body = serde_json::to_vec(&msg).map_err(Error::internal)?;
        self.backend
            .queue
            .send(&QueueMessage {
                tenant: tenant.clone(),
                kind: KIND_DELIVER.into(),
                idempotency_key: format!("notify:{}:{}", event.id, c.id),
                body,
            })
            .await?;
        Ok(true)
    }

    /// The e-mail of an event: the title as the subject, the text, the link to act on.
    fn mail(address: &str, e: &Event) -> Result<ports::mail::Mail> {
        let mut text = e.text.clone();
        if let Some(link) = &e.link {
            let label = match e.kind {
                EventKind::ProposalWaiting | EventKind::ProposalExpiring | EventKind::GateRequested => "Approve or reject",
                EventKind::ConnectorError => "Open Connectors",
                EventKind::ReviewFailed => "Open the review queue",
                _ => "Open",
            };
            text.push_str(&format!("\n\n{label}: {link}"));
        }
        text.push_str(&format!(
            "\n\n--\nContinuity notifications for {} ({}, {}). An admin changes them with `continuity notify`.",
            e.tenant,
            e.kind.as_str(),
            e.at.to_rfc3339()
        ));
        ports::mail::Mail::new(address, &e.title, &text)
    }

    fn payload(c: &Channel, e: &Event) -> Json {
        match c.kind {
            ChannelKind::Webhook | ChannelKind::Email => json!(e),
            ChannelKind::Slack => {
                let mut blocks =
                    vec![json!({"type": "section", "text": {"type": "mrkdwn", "text": format!("*{}*\n{}", e.title, e.text)}})];
                if let Some(link) = &e.link {
                    let label = match e.kind {
                        EventKind::ProposalWaiting | EventKind::ProposalExpiring | EventKind::GateRequested => {
                            "Approve or reject"
                        }
                        EventKind::ConnectorError => "Open Connectors",
                        EventKind::ReviewFailed => "Open the review queue",
                        _ => "Open",
                    };
                    blocks.push(json!({"type": "actions", "elements": [
                        {"type": "button", "text": {"type": "plain_text", "text": label}, "url": link}
                    ]}));
                }
                json!({"text": format!("{}: {}", e.title, e.text), "blocks": blocks})
            }
        }
    }

    /// Delivers one queued notification.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the receiver failed and the queue should try again later.
    pub async fn deliver(&self, d: &Delivery) -> Result<()> {
        let m: DeliverMessage =
            serde_json::from_slice(&d.message.body).map_err(|e| Error::invalid(format!("not a notification: {e}")))?;
        let tenant = &d.message.tenant;
        let Some(c) = self.backend.records.list_channels(tenant).await?.into_iter().find(|c| c.id == m.channel) else {
            return Ok(()); // the channel was removed since
        };
        let mut m = m;
        if let Some(link) = self.decision_link(tenant, &c, &m.event).await {
            m.event.link = Some(link);
        }
        let body = serde_json::to_vec(&Self::payload(&c, &m.event)).map_err(Error::internal)?;
        let mut backoff = self.first_backoff;
        let mut why = String::new();
        for attempt in 1..=TRIES_PER_RECEIVE {
            if let Some(address) = c.url.strip_prefix("mailto:") {
                let sent = match &self.backend.mailer {
                    Some(mailer) => mailer.send(&Self::mail(address, &m.event)?).await,
                    None => Err(Error::invalid("e-mail is no longer configured on this deployment")),
                };
                match sent {
                    Ok(()) => return Ok(()),
                    // Refused for good (an unverified sender, a rejected address): kept at once.
                    Err(e) if e.code == ErrorCode::InvalidRequest => {
                        return self.give_up(tenant, c, m.event, d.receive_count.max(1) * attempt, e.message).await;
                    }
                    // The mail server's own words (kept for the admins' failure list).
                    Err(e) => why = e.internal.unwrap_or(e.message),
                }
                if attempt < TRIES_PER_RECEIVE {
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
                continue;
            }
            let mut req = crate::actions::client()?
                .post(&c.url)
                .header("content-type", "application/json")
                .header("user-agent", "Continuity-Notifications/1")
                .header("x-continuity-event", m.event.kind.as_str())
                .header("x-continuity-delivery", m.event.id.as_str())
                .body(body.clone());
            if let Some(secret) = &c.secret {
                let t = self.backend.clock.now().0 / 1000;
                req = req.header("x-continuity-signature", signature(secret, t, &body));
            }
            match req.send().await {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) => why = format!("the receiver answered {}", r.status().as_u16()),
                Err(e) if e.is_timeout() => why = format!("the receiver did not answer in {} s", TIMEOUT.as_secs()),
                Err(_) => why = "the receiver could not be reached".into(),
            }
            if attempt < TRIES_PER_RECEIVE {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
        }
        let attempts = d.receive_count.saturating_mul(TRIES_PER_RECEIVE);
        if d.receive_count >= ATTEMPTS_BEFORE_GIVING_UP {
            return self.give_up(tenant, c, m.event, attempts, why).await;
        }
        Err(Error::unavailable(format!("notification not delivered ({why}); the queue tries again")))
    }

    // ---- decision links -----------------------------------------------------------

    /// The decision link of a waiting proposal for channel `c`, if it still waits and the
    /// deployment's public URL is known; `None` keeps the console's link.
    async fn decision_link(&self, tenant: &TenantId, c: &Channel, e: &Event) -> Option<String> {
        if !matches!(e.kind, EventKind::ProposalWaiting | EventKind::ProposalExpiring) {
            return None;
        }
        let id = Id::new(e.subject.strip_prefix("proposal ")?).ok()?;
        let base = self.base.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()?;
        let proposal = self.backend.records.get_proposal(tenant, &id).await.ok()??;
        let deadline =
            proposal.wait.as_ref().filter(|_| proposal.state == domain::proposal::ProposalState::AwaitingApproval)?.deadline;
        // An e-mail goes to one person: bound to them when they are a user of the
        // tenant; an address that is not stays with the console's link.
        let approver = match c.url.strip_prefix("mailto:") {
            Some(address) => {
                let login = self.backend.records.get_login(tenant, &address.to_lowercase()).await.ok()??;
                (!login.disabled).then_some(login.principal)?.into()
            }
            None => None,
        };
        match self.tokens.issue_link(&base, tenant, &id, approver.as_ref(), deadline.0 / 1000).await {
            Ok(token) => Some(format!("{base}/approvals/link/{token}")),
            Err(err) => {
                tracing::warn!(tenant = %tenant, error = %err, "decision link not signed; the console's link is sent");
                None
            }
        }
    }

    /// The proposal a decision link opens for the signed-in `caller`.
    ///
    /// # Errors
    /// `FORBIDDEN` with a reason a person can act on: the link is expired or not valid,
    /// was used already, is for another workspace, or was sent to another person;
    /// `UNAVAILABLE`.
    pub async fn open_link(&self, caller: &domain::principal::CallerContext, token: &str, base: &str) -> Result<Id> {
        let claims = self.check_link(caller, token, base).await?;
        if self.backend.records.jti_claimed(LINK_ISSUER, &claims.jti).await? {
            return Err(used());
        }
        Id::new(claims.pid).map_err(|_| Error::forbidden(INVALID_LINK))
    }

    /// Spends a decision link for `caller` (once: a second use is refused) and returns
    /// its proposal, for the decision to go through the console's path.
    ///
    /// # Errors
    /// As [`Self::open_link`].
    pub async fn use_link(&self, caller: &domain::principal::CallerContext, token: &str, base: &str) -> Result<Id> {
        let claims = self.check_link(caller, token, base).await?;
        let id = Id::new(claims.pid.clone()).map_err(|_| Error::forbidden(INVALID_LINK))?;
        let expires = domain::Timestamp(claims.exp.saturating_mul(1000));
        if !self.backend.records.claim_jti(LINK_ISSUER, &claims.jti, expires).await? {
            return Err(used());
        }
        Ok(id)
    }

    async fn check_link(
        &self,
        caller: &domain::principal::CallerContext,
        token: &str,
        base: &str,
    ) -> Result<crate::oauth::tokens::LinkClaims> {
        let claims = self
            .tokens
            .verify_link(token, base)
            .await
            .map_err(|e| if e.code == ErrorCode::Unauthenticated { Error::forbidden(INVALID_LINK) } else { e })?;
        if claims.tid != caller.tenant.as_str() {
            return Err(Error::forbidden(
                "This link is for another workspace. Sign out and sign in to the workspace it was sent from.",
            ));
        }
        if claims.sub != "*" && claims.sub != caller.principal.as_str() {
            return Err(Error::forbidden(
                "This link was sent to another person: only they can decide with it. Open the approvals console to decide as yourself.",
            ));
        }
        Ok(claims)
    }

    /// Keeps a delivery that will not succeed as a failure, and stops trying.
    async fn give_up(&self, tenant: &TenantId, c: Channel, event: Event, attempts: u32, why: String) -> Result<()> {
        tracing::warn!(tenant = %tenant, channel = %c.id, reason = %why, attempts, "notification given up; kept as a failure");
        let failure = Failure { channel: c.id, event, attempts, reason: why, at: self.backend.clock.now() };
        self.backend.records.put_notify_failure(tenant, &failure).await?;
        Ok(())
    }
}
