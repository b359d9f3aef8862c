//! Webhooks: where a source pushes its changes (`POST /v1/webhooks/{tenant}/{source}`,
//! no bearer — the source's signature is the credential). Each delivery is checked with
//! the secret the source app registered, refused when its timestamp is more than
//! [`TOLERANCE_MS`] away, and taken once (a replay is answered as a duplicate and does
//! nothing). The delta pull remains the safety net for anything a webhook misses.
//!
//! | source | signature | what a delivery does |
//! |---|---|---|
//! | `stripe` | `Stripe-Signature: t=…,v1=…`, HMAC-SHA256 of `{t}.{body}` with the endpoint's `whsec_…` | the event into the pipeline (`customer.*`); `customer.deleted` marks the account |
//! | `hubspot` | `X-HubSpot-Signature-v3`, base64 HMAC-SHA256 of `POST{url}{body}{timestamp}` with the app secret; `X-HubSpot-Request-Timestamp` (ms) | `*.deletion` marks the entity; other events pull now (they carry ids, not records) |
//! | `zendesk` | `X-Zendesk-Webhook-Signature`, base64 HMAC-SHA256 of `{timestamp}{body}`; `X-Zendesk-Webhook-Signature-Timestamp` | `zen:event-type:ticket.deleted` marks the ticket; other events pull now |
//! | `jira` | `X-Hub-Signature: sha256=…`, hex HMAC-SHA256 of the body (the webhook's secret) | `jira:issue_created/updated`: the issue into the pipeline; `jira:issue_deleted` marks it |

use aws_lc_rs::hmac;
use base64::Engine as _;
use domain::connector::ConnectorState;
use domain::{Error, ErrorCode, Result, TenantId, Timestamp};
use ports::items::{Condition, Item, Write};
use ports::records::{ConnectorStore, SourceStore};
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};

use super::catalog::Source;
use super::{SourceService, connector};

/// How far a delivery's timestamp may be from our clock.
pub const TOLERANCE_MS: i64 = 5 * 60 * 1000;
/// Largest delivery taken.
pub const MAX_BODY: usize = 256 * 1024;
const SEEN: &str = "webhook_seen";
/// The same deliveries by when they arrived (`{ms:013}#{hash}`), for pruning.
const SEEN_AT: &str = "webhook_seen_at";
/// How long a delivery's hash is kept. Signed timestamps older than
/// [`TOLERANCE_MS`] are refused anyway; Jira's deliveries carry none, and a replay of
/// one after this long writes nothing older than what the Spine holds.
pub const SEEN_RETENTION_MS: i64 = 7 * 24 * 3600 * 1000;

/// One delivery as it arrived.
pub struct Delivery<'a> {
    /// The URL the source called, as it signed it (scheme, host, path and query).
    pub url: &'a str,
    /// Header names lower-cased.
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
}

impl Delivery<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

fn unauthenticated(why: &str) -> Error {
    Error::new(ErrorCode::Unauthenticated, format!("webhook refused: {why}"))
}

fn mac(secret: &str, parts: &[&[u8]]) -> Vec<u8> {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let mut ctx = hmac::Context::with_key(&key);
    for p in parts {
        ctx.update(p);
    }
    ctx.sign().as_ref().to_vec()
}

fn equal(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

fn fresh(at_ms: i64, now: Timestamp) -> Result<()> {
    if now.0.saturating_sub(at_ms).saturating_abs() > TOLERANCE_MS {
        return Err(unauthenticated("its timestamp is more than 5 minutes away (a replay, or a clock far off)"));
    }
    Ok(())
}

/// Checks the delivery's signature for `source`; the instant it was signed (ms), when
/// the source signs one.
///
/// # Errors
/// `UNAUTHENTICATED` naming what is missing or wrong.
pub fn verify(source: Source, secret: &str, d: &Delivery<'_>, now: Timestamp) -> Result<()> {
    let b64 = base64::engine::general_purpose::STANDARD;
    match source {
        Source::Stripe => {
            let header = d.header("stripe-signature").ok_or_else(|| unauthenticated("no Stripe-Signature header"))?;
            let mut t = None;
            let mut sigs = Vec::new();
            for part in header.split(',') {
                match part.trim().split_once('=') {
                    Some(("t", v)) => t = v.parse::<i64>().ok(),
                    Some(("v1", v)) => sigs.push(hex::decode(v).unwrap_or_default()),
                    _ => {}
                }
            }
            let t = t.ok_or_else(|| unauthenticated("Stripe-Signature has no timestamp"))?;
            let expected = mac(secret, &[t.to_string().as_bytes(), b".", d.body]);
            if !sigs.iter().any(|s| equal(s, &expected)) {
                return Err(unauthenticated("the Stripe signature does not match"));
            }
            fresh(t.saturating_mul(1000), now)
        }
        Source::Hubspot => {
            let sig = d.header("x-hubspot-signature-v3").ok_or_else(|| unauthenticated("no X-HubSpot-Signature-v3 header"))?;
            let ts = d.header("x-hubspot-request-timestamp").ok_or_else(|| unauthenticated("no X-HubSpot-Request-Timestamp"))?;
            let expected = mac(secret, &[b"POST", d.url.as_bytes(), d.body, ts.as_bytes()]);
            if !equal(&b64.decode(sig).unwrap_or_default(), &expected) {
                return Err(unauthenticated("the HubSpot signature does not match"));
            }
            fresh(ts.parse().map_err(|_| unauthenticated("a malformed timestamp"))?, now)
        }
        Source::Zendesk => {
            let sig = d.header("x-zendesk-webhook-signature").ok_or_else(|| unauthenticated("no X-Zendesk-Webhook-Signature"))?;
            let ts = d
                .header("x-zendesk-webhook-signature-timestamp")
                .ok_or_else(|| unauthenticated("no X-Zendesk-Webhook-Signature-Timestamp"))?;
            let expected = mac(secret, &[ts.as_bytes(), d.body]);
            if !equal(&b64.decode(sig).unwrap_or_default(), &expected) {
                return Err(unauthenticated("the Zendesk signature does not match"));
            }
            let at = crate::ingest::mapping::parse_time(&json!(ts)).ok_or_else(|| unauthenticated("a malformed timestamp"))?;
            fresh(at.0, now)
        }
        Source::Jira => {
            let sig = d.header("x-hub-signature").ok_or_else(|| unauthenticated("no X-Hub-Signature header"))?;
            let hexed = sig.strip_prefix("sha256=").ok_or_else(|| unauthenticated("X-Hub-Signature is not sha256=…"))?;
            if !equal(&hex::decode(hexed).unwrap_or_default(), &mac(secret, &[d.body])) {
                return Err(unauthenticated("the Jira signature does not match"));
            }
            // Jira signs no timestamp header; the body's `timestamp` (ms) is signed with it.
            let body: Json = serde_json::from_slice(d.body).map_err(|_| Error::invalid("the body is not JSON"))?;
            let at = body.get("timestamp").and_then(Json::as_i64).ok_or_else(|| unauthenticated("the body has no timestamp"))?;
            fresh(at, now)
        }
        Source::Salesforce => Err(Error::invalid_field(
            "source",
            "Salesforce pushes through Change Data Capture (a streaming API), not webhooks: its changes arrive by the delta pull",
        )),
    }
}

/// What a delivery did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Received {
    /// Seen before: nothing was done again.
    pub duplicate: bool,
    pub records: usize,
    pub deleted: usize,
    pub pull_queued: bool,
}

impl SourceService {
    /// Takes one webhook delivery for `tenant` from `source`.
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown tenant or source; `PAYLOAD_TOO_LARGE`;
    /// `CONNECTOR_NOT_AVAILABLE` when no webhook secret is registered or the tenant has
    /// not connected the source; `UNAUTHENTICATED` for a bad signature or a stale
    /// timestamp (nothing done); `INVALID_REQUEST` for a body that is not JSON;
    /// `UNAVAILABLE`.
    pub async fn webhook(&self, tenant: &TenantId, source: &str, d: &Delivery<'_>) -> Result<Received> {
        let s = Source::parse(source)?;
        if d.body.len() > MAX_BODY {
            return Err(Error::new(ErrorCode::PayloadTooLarge, format!("a webhook delivery of at most {MAX_BODY} bytes")));
        }
        let secret =
            self.backend.records.get_source_app(&connector(s)).await?.and_then(|a| a.webhook_secret).ok_or_else(|| {
                Error::new(
                    ErrorCode::ConnectorNotAvailable,
                    format!(
                        "no {} webhook secret is registered (continuity source-app set {} --webhook-secret-env …)",
                        s.title(),
                        s.name()
                    ),
                )
            })?;
        verify(s, &secret, d, self.now())?;
        let status = self.backend.records.get_connector(tenant, &connector(s)).await?;
        let Some(status) = status.filter(|c| c.state.is_connected()) else {
            return Err(Error::new(
                ErrorCode::ConnectorNotAvailable,
                format!("{} is not connected for this workspace", s.title()),
            ));
        };
        // Between pulls a delivery is a small delta of its own (it completes when
        // written); during a pull it joins it (the pull's last page completes it).
        let own_delta = !matches!(status.state, ConnectorState::SyncingInitial | ConnectorState::SyncingDelta);
        let body: Json = serde_json::from_slice(d.body).map_err(|e| Error::invalid(format!("the body is not JSON: {e}")))?;
        // Taken once: the delivery's hash is kept under the tenant (a replay finds it).
        let key = hex::encode(Sha256::digest([s.name().as_bytes(), b"\0", d.body].concat()));
        let at = format!("{:013}#{key}", self.now().0.max(0));
        let item = Item { tenant: tenant.to_string(), part: SEEN.into(), sk: key, version: 1, body: Vec::new() };
        let index = Item { tenant: tenant.to_string(), part: SEEN_AT.into(), sk: at, version: 1, body: Vec::new() };
        let writes =
            vec![Write::Put { item, condition: Condition::Absent }, Write::Put { item: index, condition: Condition::None }];
        match self.backend.records.items().write(writes).await {
            Ok(()) => {}
            Err(e) if e.code == ErrorCode::Conflict => {
                return Ok(Received { duplicate: true, records: 0, deleted: 0, pull_queued: false });
            }
            Err(e) => return Err(e),
        }
        let mut out = Received { duplicate: false, records: 0, deleted: 0, pull_queued: false };
        let mut deletions: Vec<(&str, String, Timestamp)> = Vec::new();
        let mut records = Vec::new();
        let mut pull = false;
        let now = self.now();
        let text = |v: Option<&Json>| match v {
            Some(Json::String(s)) => Some(s.clone()),
            Some(Json::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        match s {
            Source::Stripe => match body.get("type").and_then(Json::as_str) {
                Some("customer.deleted") => {
                    if let Some(id) = text(body.pointer("/data/object/id")) {
                        let at = body.get("created").and_then(crate::ingest::mapping::parse_time).unwrap_or(now);
                        deletions.push(("account", id, at));
                    }
                }
                Some(t) if t.starts_with("customer.") => records.push(body.clone()),
                _ => {}
            },
            Source::Hubspot => {
                for e in body.as_array().cloned().unwrap_or_default() {
                    let kind = e.get("subscriptionType").and_then(Json::as_str).unwrap_or_default();
                    let at = e.get("occurredAt").and_then(crate::ingest::mapping::parse_time).unwrap_or(now);
                    let ty = match kind.split('.').next() {
                        Some("company") => "account",
                        Some("contact") => "contact",
                        Some("deal") => "opportunity",
                        _ => continue,
                    };
                    match (kind.ends_with(".deletion"), text(e.get("objectId"))) {
                        (true, Some(id)) => deletions.push((ty, id, at)),
                        _ => pull = true,
                    }
                }
            }
            Source::Zendesk => {
                let kind = body.get("type").and_then(Json::as_str).unwrap_or_default();
                match text(body.pointer("/detail/id")) {
                    Some(id) if kind == "zen:event-type:ticket.deleted" => deletions.push(("ticket", id, now)),
                    _ => pull = true,
                }
            }
            Source::Jira => match body.get("webhookEvent").and_then(Json::as_str) {
                Some("jira:issue_deleted") => {
                    if let Some(id) = text(body.pointer("/issue/id")) {
                        let at = body.get("timestamp").and_then(crate::ingest::mapping::parse_time).unwrap_or(now);
                        deletions.push(("ticket", id, at));
                    }
                }
                Some("jira:issue_created" | "jira:issue_updated") => {
                    if let Some(issue) = body.get("issue") {
                        records.push(issue.clone());
                    }
                }
                _ => {}
            },
            Source::Salesforce => {}
        }
        if !records.is_empty() {
            out.records = records.len();
            self.ingest.accept_pulled(tenant, s.name(), records, own_delta).await?;
        }
        for (ty, id, at) in deletions {
            if self.ingest.mark_deleted(tenant, s.name(), ty, &id, at).await? {
                out.deleted += 1;
            }
        }
        if pull && let Ok(()) = self.sync_now(tenant, s.name()).await {
            out.pull_queued = true;
        }
        tracing::info!(tenant = %tenant, source = s.name(), records = out.records, deleted = out.deleted, pull = out.pull_queued, "webhook taken");
        Ok(out)
    }
}

/// Forgets the deliveries of `tenant` that arrived before `before` (ms), at most `max`
/// of them (oldest first): their replay keys and their index entries. Returns how many.
///
/// # Errors
/// `UNAVAILABLE` when the store cannot be reached.
pub async fn prune_seen(backend: &ports::Backend, tenant: &TenantId, before: i64, max: usize) -> Result<usize> {
    let items = backend.records.items();
    let t = tenant.to_string();
    let cut = format!("{:013}", before.max(0));
    let mut pruned = 0;
    while pruned < max {
        let limit = u32::try_from((max - pruned).min(items.max_batch() / 2)).unwrap_or(1).max(1);
        let query = ports::items::Query { tenant: &t, part: SEEN_AT, prefix: "", after: None, limit, descending: false };
        let (old, _) = items.query(query).await?;
        let old: Vec<Item> = old.into_iter().filter(|i| i.sk.as_str() < cut.as_str()).collect();
        if old.is_empty() {
            break;
        }
        let mut writes = Vec::with_capacity(old.len() * 2);
        for i in &old {
            let hash = i.sk.split_once('#').map_or("", |(_, h)| h).to_string();
            writes.push(Write::Delete { tenant: t.clone(), part: SEEN.into(), sk: hash, condition: Condition::None });
            writes.push(Write::Delete { tenant: t.clone(), part: SEEN_AT.into(), sk: i.sk.clone(), condition: Condition::None });
        }
        items.write(writes).await?;
        pruned += old.len();
    }
    Ok(pruned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_timestamps_are_refused_without_a_panic() {
        let now = Timestamp(1_800_000_000_000);
        for t in [i64::MIN, i64::MAX, -1, 0] {
            assert!(fresh(t, now).is_err(), "{t}");
        }
        assert!(fresh(now.0 - 1000, now).is_ok());
        let body = br#"{"id":"evt"}"#;
        for header in ["t=-9223372036854775808,v1=00", "t=9223372036854775807,v1=zz", "v1=,t=", ",,,", "t=1"] {
            let headers = vec![("stripe-signature".to_owned(), header.to_owned())];
            let d = Delivery { url: "https://c.example/x", headers: &headers, body };
            assert_eq!(verify(Source::Stripe, "whsec", &d, now).unwrap_err().code, ErrorCode::Unauthenticated, "{header}");
        }
    }
}
