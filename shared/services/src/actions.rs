//! Connector adapters for governed actions: what an approved action proposal asks a
//! source to do, as the source's own write API takes it, sent with the tenant's sealed
//! credential, retried, and read back into a Spine change.
//!
//! Each [`Operation`] builds the exact request the source documents (method, path,
//! body) and reads the source's answer into the Spine fields it changed:
//!
//! | source | operation | request | Spine |
//! |---|---|---|---|
//! | `hubspot` | `deal.update_stage` `{stage}` | `PATCH /crm/v3/objects/deals/{id}` `{"properties":{"dealstage":…}}` | opportunity `stage` (`stage_changed`) |
//! | `hubspot` | `company.update_lifecycle_stage` `{stage}` | `PATCH /crm/v3/objects/companies/{id}` `{"properties":{"lifecyclestage":…}}` | account `lifecycle_stage` |
//! | `salesforce` | `opportunity.update_stage` `{stage}` | `PATCH /services/data/v62.0/sobjects/Opportunity/{id}` `{"StageName":…}` | opportunity `stage` |
//! | `salesforce` | `case.update_status` `{status}` | `PATCH /services/data/v62.0/sobjects/Case/{id}` `{"Status":…}` | ticket `status` (`status_changed`) |
//! | `zendesk` | `ticket.add_comment` `{body, public?}` | `PUT /api/v2/tickets/{id}.json` `{"ticket":{"comment":{"body":…,"public":false}}}` | ticket `status` as answered |
//! | `zendesk` | `ticket.update_status` `{status}` | `PUT /api/v2/tickets/{id}.json` `{"ticket":{"status":…}}` | ticket `status` |
//! | `jira` | `issue.add_comment` `{body}` | `POST /rest/api/3/issue/{key}/comment` (an Atlassian document) | — |
//! | `stripe` | `subscription.cancel` | `DELETE /v1/subscriptions/{id}` | subscription `status` |
//!
//! Every request carries `Authorization` (Bearer, or Basic e-mail:token for Jira),
//! `Idempotency-Key` (the action's own — a source that supports idempotent requests for
//! that call takes it; most here ignore it) and `Accept: application/json`; redirects
//! are not followed, so a credential never leaves for another host, and a base URL is
//! one of the source's own hosts ([`check_base_url`]). [`perform`] retries a 429 after
//! its `Retry-After` (at most [`Retry::max_wait`]) and a 5xx or an unreachable source
//! with exponential backoff, [`Retry::attempts`] requests in all; any other 4xx fails at
//! once with the source's answer. An operation that is not [`Operation::repeatable`] (a
//! comment, a cancellation) is not sent again once a request may have reached the source
//! unanswered (a timeout): the action fails as "outcome unknown".

use std::time::Duration;

use domain::action::{ActionRequest, Credential};
use domain::spine::EntityRef;
use domain::value::Value;
use domain::{EntityType, Error, Result};
use serde_json::{Value as Json, json};

/// A request to a source, before authentication.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub method: &'static str,
    /// Path and query, percent-encoded, from the base URL.
    pub path: String,
    pub body: Option<Json>,
}

/// A Spine field an action changed, as the source answered it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub field: String,
    pub value: Value,
    /// The signal the change emits when the value moved.
    pub signal: Option<&'static str>,
}

/// What an operation changed in the Spine.
#[derive(Debug, Clone, PartialEq)]
pub struct Effect {
    pub entity: EntityRef,
    pub changes: Vec<Change>,
    /// When the source says it changed the record (its answer's modification time).
    pub at: Option<domain::Timestamp>,
}

type Prepare = fn(&ActionRequest) -> Result<Prepared>;
type Read = fn(&ActionRequest, Option<&Json>) -> Option<Effect>;

/// One connector operation.
pub struct Operation {
    pub source: &'static str,
    pub name: &'static str,
    pub description: &'static str,
    /// Whether sending it twice does what sending it once does (it sets a value). One
    /// that is not (a comment, a cancellation) is never sent again when its first
    /// request's outcome is unknown: the action fails saying so.
    pub repeatable: bool,
    prepare: Prepare,
    read: Read,
}

impl Operation {
    /// The request this action sends.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for missing or malformed parameters.
    pub fn prepare(&self, request: &ActionRequest) -> Result<Prepared> {
        (self.prepare)(request)
    }

    /// The Spine change the source's answer (`None` for an empty one) reports.
    pub fn effect(&self, request: &ActionRequest, answer: Option<&Json>) -> Option<Effect> {
        (self.read)(request, answer)
    }
}

/// A path segment, percent-encoded (ids are checked to hold no `/`, `?` or `#`).
fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The Spine entity a source's record is: the pipeline's id for it (the same record
/// synced and acted on is one entity).
fn entity(source: &str, entity_type: &str, native: &str) -> Option<EntityRef> {
    Some(EntityRef {
        entity_type: EntityType::new(entity_type).ok()?,
        id: crate::ingest::mapping::canonical_id(source, entity_type, native),
    })
}

fn text_at<'a>(answer: Option<&'a Json>, path: &[&str]) -> Option<&'a str> {
    let mut v = answer?;
    for p in path {
        v = v.get(p)?;
    }
    v.as_str()
}

/// Where an operation's change lands in the Spine: the answer's value at `answer`
/// (else the parameter `param` asked) is `field` of the source's `entity_type` record.
struct Lands {
    source: &'static str,
    entity_type: &'static str,
    /// Where the answer holds the record's modification time, if it does.
    updated: &'static [&'static str],
    answer: &'static [&'static str],
    param: &'static str,
    field: &'static str,
    signal: &'static str,
}

/// The one field an operation changed.
fn one(l: &Lands, r: &ActionRequest, answer: Option<&Json>) -> Option<Effect> {
    let asked = match r.params.get(l.param) {
        Some(Value::Text(s)) => Some(s.trim()),
        _ => None,
    };
    let value = text_at(answer, l.answer).or(asked)?;
    let at = (!l.updated.is_empty())
        .then(|| text_at(answer, l.updated))
        .flatten()
        .and_then(|t| crate::ingest::mapping::parse_time(&Json::String(t.to_owned())));
    Some(Effect {
        entity: entity(l.source, l.entity_type, &r.target)?,
        changes: vec![Change { field: l.field.into(), value: Value::Text(value.to_owned()), signal: Some(l.signal) }],
        at,
    })
}

const SALESFORCE_API: &str = "/services/data/v62.0";

/// Every operation, by source.
pub static OPERATIONS: &[Operation] = &[
    Operation {
        source: "hubspot",
        name: "deal.update_stage",
        description: "Move a deal to another pipeline stage (params: stage, the stage's internal id such as closedwon).",
        repeatable: true,
        prepare: |r| {
            let stage = r.text("stage", 100)?;
            Ok(Prepared {
                method: "PATCH",
                path: format!("/crm/v3/objects/deals/{}", seg(&r.target)),
                body: Some(json!({"properties": {"dealstage": stage}})),
            })
        },
        read: |r, a| {
            one(
                &Lands {
                    source: "hubspot",
                    entity_type: "opportunity",
                    updated: &["updatedAt"],
                    answer: &["properties", "dealstage"],
                    param: "stage",
                    field: "stage",
                    signal: "stage_changed",
                },
                r,
                a,
            )
        },
    },
    Operation {
        source: "hubspot",
        name: "company.update_lifecycle_stage",
        description: "Set a company's lifecycle stage (params: stage, such as customer).",
        repeatable: true,
        prepare: |r| {
            let stage = r.text("stage", 100)?;
            Ok(Prepared {
                method: "PATCH",
                path: format!("/crm/v3/objects/companies/{}", seg(&r.target)),
                body: Some(json!({"properties": {"lifecyclestage": stage}})),
            })
        },
        read: |r, a| {
            one(
                &Lands {
                    source: "hubspot",
                    entity_type: "account",
                    updated: &["updatedAt"],
                    answer: &["properties", "lifecyclestage"],
                    param: "stage",
                    field: "lifecycle_stage",
                    signal: "stage_changed",
                },
                r,
                a,
            )
        },
    },
    Operation {
        source: "salesforce",
        name: "opportunity.update_stage",
        description: "Move an opportunity to another stage (params: stage, the StageName).",
        repeatable: true,
        prepare: |r| {
            let stage = r.text("stage", 100)?;
            Ok(Prepared {
                method: "PATCH",
                path: format!("{SALESFORCE_API}/sobjects/Opportunity/{}", seg(&r.target)),
                body: Some(json!({"StageName": stage})),
            })
        },
        // Salesforce answers 204 No Content: the stage asked is the stage set.
        read: |r, a| {
            one(
                &Lands {
                    source: "salesforce",
                    entity_type: "opportunity",
                    updated: &["LastModifiedDate"],
                    answer: &["StageName"],
                    param: "stage",
                    field: "stage",
                    signal: "stage_changed",
                },
                r,
                a,
            )
        },
    },
    Operation {
        source: "salesforce",
        name: "case.update_status",
        description: "Set a case's status (params: status).",
        repeatable: true,
        prepare: |r| {
            let status = r.text("status", 100)?;
            Ok(Prepared {
                method: "PATCH",
                path: format!("{SALESFORCE_API}/sobjects/Case/{}", seg(&r.target)),
                body: Some(json!({"Status": status})),
            })
        },
        read: |r, a| {
            one(
                &Lands {
                    source: "salesforce",
                    entity_type: "ticket",
                    updated: &["LastModifiedDate"],
                    answer: &["Status"],
                    param: "status",
                    field: "status",
                    signal: "status_changed",
                },
                r,
                a,
            )
        },
    },
    Operation {
        source: "zendesk",
        name: "ticket.add_comment",
        description: "Add a comment to a ticket (params: body; public, default false: an internal note).",
        repeatable: false,
        prepare: |r| {
            let body = r.text("body", 65_536)?;
            let public = match r.params.get("public") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(Error::invalid_field("action.params.public", "true or false")),
            };
            Ok(Prepared {
                method: "PUT",
                path: format!("/api/v2/tickets/{}.json", seg(&r.target)),
                body: Some(json!({"ticket": {"comment": {"body": body, "public": public}}})),
            })
        },
        read: |r, a| {
            one(
                &Lands {
                    source: "zendesk",
                    entity_type: "ticket",
                    updated: &["ticket", "updated_at"],
                    answer: &["ticket", "status"],
                    param: "status",
                    field: "status",
                    signal: "status_changed",
                },
                r,
                a,
            )
        },
    },
    Operation {
        source: "zendesk",
        name: "ticket.update_status",
        description: "Set a ticket's status (params: status: new, open, pending, hold, solved or closed).",
        repeatable: true,
        prepare: |r| {
            let status = r.text("status", 20)?;
            if !["new", "open", "pending", "hold", "solved", "closed"].contains(&status) {
                return Err(Error::invalid_field("action.params.status", "one of new, open, pending, hold, solved, closed"));
            }
            Ok(Prepared {
                method: "PUT",
                path: format!("/api/v2/tickets/{}.json", seg(&r.target)),
                body: Some(json!({"ticket": {"status": status}})),
            })
        },
        read: |r, a| {
            one(
                &Lands {
                    source: "zendesk",
                    entity_type: "ticket",
                    updated: &["ticket", "updated_at"],
                    answer: &["ticket", "status"],
                    param: "status",
                    field: "status",
                    signal: "status_changed",
                },
                r,
                a,
            )
        },
    },
    Operation {
        source: "jira",
        name: "issue.add_comment",
        description: "Comment on an issue (params: body, plain text).",
        repeatable: false,
        prepare: |r| {
            let body = r.text("body", 32_000)?;
            let paragraphs: Vec<Json> = body
                .split("\n\n")
                .filter(|p| !p.trim().is_empty())
                .map(|p| json!({"type": "paragraph", "content": [{"type": "text", "text": p.trim()}]}))
                .collect();
            Ok(Prepared {
                method: "POST",
                path: format!("/rest/api/3/issue/{}/comment", seg(&r.target)),
                body: Some(json!({"body": {"type": "doc", "version": 1, "content": paragraphs}})),
            })
        },
        read: |_, _| None,
    },
    Operation {
        source: "stripe",
        name: "subscription.cancel",
        description: "Cancel a subscription now (no params).",
        repeatable: false,
        prepare: |r| Ok(Prepared { method: "DELETE", path: format!("/v1/subscriptions/{}", seg(&r.target)), body: None }),
        read: |r, a| {
            let status = text_at(a, &["status"])?;
            Some(Effect {
                entity: entity("stripe", "subscription", &r.target)?,
                changes: vec![Change {
                    field: "status".into(),
                    value: Value::Text(status.to_owned()),
                    signal: Some("status_changed"),
                }],
                at: None,
            })
        },
    },
];

/// The operation a request names.
///
/// # Errors
/// `INVALID_REQUEST` naming what exists.
pub fn find(connector: &str, operation: &str) -> Result<&'static Operation> {
    if let Some(op) = OPERATIONS.iter().find(|o| o.source == connector && o.name == operation) {
        return Ok(op);
    }
    let of_source: Vec<&str> = OPERATIONS.iter().filter(|o| o.source == connector).map(|o| o.name).collect();
    if of_source.is_empty() {
        let mut sources: Vec<&str> = OPERATIONS.iter().map(|o| o.source).collect();
        sources.dedup();
        return Err(Error::invalid_field(
            "action.connector",
            format!("no actions for {connector:?}; connectors that act: {}", sources.join(", ")),
        ));
    }
    Err(Error::invalid_field(
        "action.operation",
        format!("{connector} has no operation {operation:?}; it has: {}", of_source.join(", ")),
    ))
}

/// Checks a request fully: its shape, its operation and the operation's parameters.
///
/// # Errors
/// `INVALID_REQUEST` naming the field.
pub fn check(request: &ActionRequest) -> Result<&'static Operation> {
    request.check()?;
    let op = find(&request.connector, &request.operation)?;
    op.prepare(request)?;
    Ok(op)
}

/// Whether this process runs in AWS Lambda, where a loopback address is the Lambda
/// runtime's own API, never a source.
fn in_lambda() -> bool {
    std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some()
}

/// Whether `host` is where `source`'s API lives.
fn source_host(source: &str, host: &str) -> bool {
    match source {
        "hubspot" => matches!(host, "api.hubapi.com" | "api-eu1.hubapi.com"),
        "stripe" => host == "api.stripe.com",
        "salesforce" => host.ends_with(".salesforce.com"),
        "zendesk" => host.ends_with(".zendesk.com"),
        "jira" => host.ends_with(".atlassian.net"),
        _ => false,
    }
}

/// Checks a credential's base URL for `source`: `https` to the source's own hosts
/// (`*.salesforce.com`, `*.zendesk.com`, `*.atlassian.net`, HubSpot's and Stripe's API
/// hosts), no user name, query, fragment or path; a loopback address (for local
/// development and tests, `http` allowed) only outside AWS Lambda. A credential can so
/// never send its token, or a tenant's request, anywhere else.
///
/// # Errors
/// `INVALID_REQUEST` naming what is wrong.
pub fn check_base_url(source: &str, raw: &str) -> Result<()> {
    let bad = |why: String| Error::invalid_field("base_url", why);
    let url = reqwest::Url::parse(raw).map_err(|e| bad(format!("not a URL: {e}")))?;
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
        return Err(bad("a base URL has no user name, password, query or fragment".into()));
    }
    if !matches!(url.path(), "" | "/") {
        return Err(bad("a base URL is the API's address alone (no path)".into()));
    }
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    if matches!(host.as_str(), "127.0.0.1" | "localhost" | "[::1]") {
        if in_lambda() {
            return Err(bad("a loopback address is only for local development, not on AWS".into()));
        }
        return if matches!(url.scheme(), "http" | "https") { Ok(()) } else { Err(bad("http or https".into())) };
    }
    if url.scheme() != "https" {
        return Err(bad("an https:// URL".into()));
    }
    if !source_host(source, &host) {
        let hosts = match source {
            "hubspot" => "api.hubapi.com or api-eu1.hubapi.com",
            "stripe" => "api.stripe.com",
            "salesforce" => "your instance, *.salesforce.com",
            "zendesk" => "your subdomain, *.zendesk.com",
            "jira" => "your site, *.atlassian.net",
            _ => "none",
        };
        return Err(bad(format!("{host} is not {source}'s API ({hosts})")));
    }
    Ok(())
}

/// Whether `source`'s API address is per account (the credential must name it).
pub fn needs_base_url(source: &str) -> bool {
    default_base(source).is_none()
}

/// The public API of a source whose API is not per tenant.
fn default_base(source: &str) -> Option<&'static str> {
    match source {
        "hubspot" => Some("https://api.hubapi.com"),
        "stripe" => Some("https://api.stripe.com"),
        _ => None,
    }
}

/// The longest one request to a source may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How [`perform`] retries.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Requests in all.
    pub attempts: u32,
    /// The first backoff after a 5xx or an unreachable source; doubled each time.
    pub backoff: Duration,
    /// The longest `Retry-After` honoured; a source asking for more fails the action.
    pub max_wait: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self { attempts: 4, backoff: Duration::from_millis(500), max_wait: Duration::from_secs(10) }
    }
}

/// A source's final answer to an action.
#[derive(Debug, Clone, PartialEq)]
pub enum Answered {
    /// 2xx: its status and body (when JSON).
    Done { status: u16, body: Option<Json>, attempts: u32 },
    /// Refused (a 4xx other than 429), or still failing after every retry.
    Failed { status: Option<u16>, reason: String, attempts: u32 },
}

/// The one client for calls leaving the deployment (source actions and pulls, OAuth
/// token endpoints, notification receivers): [`REQUEST_TIMEOUT`], no redirect followed,
/// so a credential never leaves for another host.
pub(crate) fn client() -> Result<&'static reqwest::Client> {
    static CLIENT: std::sync::OnceLock<std::result::Result<reqwest::Client, String>> = std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .use_preconfigured_tls(tls::client_config())
                .timeout(REQUEST_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::internal(format!("HTTP client: {e}")))
}

/// At most 300 characters of a source's answer, on one line.
fn excerpt(body: &str) -> String {
    let one_line: String = body.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let mut out: String = one_line.trim().chars().take(300).collect();
    if one_line.trim().chars().count() > 300 {
        out.push('…');
    }
    out
}

/// Sends `prepared` to the source with `credential`, retrying as [`Retry`] says.
///
/// # Errors
/// `INVALID_REQUEST` when the credential has no base URL and the source has no public one.
pub async fn perform(
    source: &str,
    repeatable: bool,
    prepared: &Prepared,
    credential: &Credential,
    idempotency_key: &str,
    retry: Retry,
) -> Result<Answered> {
    let base = credential.base_url.as_deref().or_else(|| default_base(source)).ok_or_else(|| {
        Error::invalid_field("base_url", format!("{source}'s API address is per account: store it with the credential"))
    })?;
    check_base_url(source, base)?;
    let url = format!("{}{}", base.trim_end_matches('/'), prepared.path);
    let method = reqwest::Method::from_bytes(prepared.method.as_bytes()).map_err(Error::internal)?;
    let auth = match (&credential.email, source) {
        (Some(email), "jira") => {
            use base64::Engine as _;
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{email}:{}", credential.token)))
        }
        _ => format!("Bearer {}", credential.token),
    };
    let mut backoff = retry.backoff;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut req = client()?
            .request(method.clone(), &url)
            .header("Authorization", &auth)
            .header("Accept", "application/json")
            .header("Idempotency-Key", idempotency_key);
        if let Some(body) = &prepared.body {
            req = req.json(body);
        }
        let (status, wait, why) = match req.send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let retry_after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                let text = resp.text().await.unwrap_or_default();
                if (200..300).contains(&status) {
                    let body = if text.trim().is_empty() { None } else { serde_json::from_str(&text).ok() };
                    return Ok(Answered::Done { status, body, attempts });
                }
                if status == 429 {
                    let wait = retry_after.unwrap_or(backoff);
                    if wait > retry.max_wait {
                        return Ok(Answered::Failed {
                            status: Some(status),
                            reason: format!(
                                "{source} is rate limiting and asked to wait {} s (more than {} s): {}",
                                wait.as_secs(),
                                retry.max_wait.as_secs(),
                                excerpt(&text)
                            ),
                            attempts,
                        });
                    }
                    (Some(status), wait, format!("{source} answered 429 (rate limited): {}", excerpt(&text)))
                } else if status >= 500 {
                    (Some(status), backoff, format!("{source} answered {status}: {}", excerpt(&text)))
                } else {
                    return Ok(Answered::Failed {
                        status: Some(status),
                        reason: format!("{source} refused the request ({status}): {}", excerpt(&text)),
                        attempts,
                    });
                }
            }
            // Not even connected: nothing was sent, so trying again is safe.
            Err(e) if e.is_connect() => (None, backoff, format!("{source} could not be reached: connection failed")),
            Err(e) if !repeatable => {
                let how = if e.is_timeout() { "timed out" } else { "the connection broke" };
                return Ok(Answered::Failed {
                    status: None,
                    reason: format!(
                        "{source} did not answer ({how}) after the request was sent: its outcome is unknown; check {source} before proposing it again"
                    ),
                    attempts,
                });
            }
            Err(e) => (
                None,
                backoff,
                format!("{source} could not be reached: {}", if e.is_timeout() { "timed out" } else { "connection failed" }),
            ),
        };
        if attempts >= retry.attempts {
            return Ok(Answered::Failed { status, reason: format!("{why} (after {attempts} attempts)"), attempts });
        }
        tracing::info!(source, attempts, wait_ms = wait.as_millis() as u64, "action: retrying the source");
        tokio::time::sleep(wait).await;
        backoff = backoff.saturating_mul(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(connector: &str, operation: &str, target: &str, params: &[(&str, Value)]) -> ActionRequest {
        ActionRequest {
            connector: connector.into(),
            operation: operation.into(),
            target: target.into(),
            params: params.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect(),
        }
    }

    #[test]
    fn operations_build_the_documented_requests() {
        let r = req("hubspot", "deal.update_stage", "1234", &[("stage", Value::Text("closedwon".into()))]);
        let p = check(&r).unwrap_or_else(|e| panic!("{e}")).prepare(&r).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.method, "PATCH");
        assert_eq!(p.path, "/crm/v3/objects/deals/1234");
        assert_eq!(p.body, Some(json!({"properties": {"dealstage": "closedwon"}})));
        // A target is a path segment: anything else is encoded.
        let r = req("jira", "issue.add_comment", "PROJ-1%", &[("body", Value::Text("one\n\ntwo".into()))]);
        let p = check(&r).unwrap_or_else(|e| panic!("{e}")).prepare(&r).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.path, "/rest/api/3/issue/PROJ-1%25/comment");
        assert_eq!(p.body.as_ref().map(|b| b["body"]["content"].as_array().map(Vec::len)), Some(Some(2)));
        // Unknown operations and missing parameters are named.
        let e = check(&req("hubspot", "deal.delete", "1", &[])).err().map(|e| e.message).unwrap_or_default();
        assert!(e.contains("deal.update_stage"), "{e}");
        let e = check(&req("hubspot", "deal.update_stage", "1", &[])).err().map(|e| e.message).unwrap_or_default();
        assert!(e.contains("stage"), "{e}");
        let e = check(&req("slack", "x.y", "1", &[])).err().map(|e| e.message).unwrap_or_default();
        assert!(e.contains("hubspot"), "{e}");
        let bad = req("zendesk", "ticket.update_status", "9", &[("status", Value::Text("archived".into()))]);
        assert!(check(&bad).is_err());
        // The answer decides the Spine value; an empty answer keeps what was asked.
        let r = req("salesforce", "opportunity.update_stage", "006A", &[("stage", Value::Text("Closed Won".into()))]);
        let op = check(&r).unwrap_or_else(|e| panic!("{e}"));
        let e = op.effect(&r, None).unwrap_or_else(|| panic!("an effect"));
        // Base URLs: the source's own hosts over https, or loopback (not in Lambda).
        for ok in [
            ("salesforce", "https://acme.my.salesforce.com"),
            ("jira", "https://acme.atlassian.net/"),
            ("hubspot", "http://127.0.0.1:9"),
        ] {
            assert!(check_base_url(ok.0, ok.1).is_ok(), "{ok:?}");
        }
        for bad in [
            ("salesforce", "http://acme.my.salesforce.com"),
            ("salesforce", "https://evil.example.com"),
            ("salesforce", "https://acme.my.salesforce.com.evil.example"),
            ("zendesk", "https://x@acme.zendesk.com"),
            ("hubspot", "http://localhost:1@evil.example/"),
            ("jira", "https://acme.atlassian.net/some/path"),
            ("jira", "https://acme.atlassian.net/?q=1"),
            ("stripe", "https://api.stripe.com.evil.example"),
            ("stripe", "file:///etc/passwd"),
        ] {
            assert!(check_base_url(bad.0, bad.1).is_err(), "{bad:?}");
        }
        let id = crate::ingest::mapping::canonical_id("salesforce", "opportunity", "006A");
        assert_eq!(
            (e.entity.to_string(), e.changes[0].value.clone()),
            (format!("opportunity:{id}"), Value::Text("Closed Won".into()))
        );
    }
}
