//! One page of a source, read the way the source documents paging and change filters:
//!
//! | source | initial and delta | deletions (delta) |
//! |---|---|---|
//! | `hubspot` | `POST /crm/v3/objects/{companies,contacts,deals}/search`, `hs_lastmodifieddate GTE` the watermark, ascending, `after` cursors, 100 a page, a new query from the newest change at the 10,000-result window; deals' companies by `POST /crm/v4/associations/deals/companies/batch/read` | `GET /crm/v3/objects/{type}?archived=true` (`archivedAt` since the watermark) |
//! | `salesforce` | `GET /services/data/v62.0/query?q=SELECT … WHERE SystemModstamp > … ORDER BY SystemModstamp` (Account, Contact, Case), then `nextRecordsUrl` | `GET /services/data/v62.0/sobjects/{type}/deleted/?start=…&end=…` |
//! | `zendesk` | `GET /api/v2/incremental/tickets/cursor.json` (`start_time`, then `cursor`, kept between passes), `GET /api/v2/incremental/organizations.json` (`start_time`, `next_page`) | in the same exports: `status: deleted` tickets, `deleted_at` organizations |
//! | `jira` | `GET /rest/api/3/search/jql?jql=updated >= "…" ORDER BY updated ASC` with `nextPageToken` | webhooks only (Jira has no deletion feed) |
//! | `stripe` | initial: `GET /v1/customers`, `GET /v1/subscriptions?status=all` with `starting_after`; delta: `GET /v1/events?type=customer.*&created[gte]=…` | `customer.deleted` events |
//!
//! Records leave here in the shape the source's mapping reads (HubSpot's carry the
//! `objectType` they were read from; Stripe's list objects are wrapped as events).

use domain::Timestamp;
use domain::source::SyncPhase;
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use super::catalog::Source;
use super::client::{Auth, Body, Failure, call};
use crate::ingest::mapping::parse_time;

/// Records asked for per page.
pub const PAGE_SIZE: u32 = 100;

/// HubSpot's search answers at most this many results for one query (an `after` past
/// it is refused with a 400): a longer stage restarts from the newest change seen.
pub const HUBSPOT_SEARCH_WINDOW: u64 = 10_000;

/// Where a pull stands inside one pass (stored as the sync state's cursor).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cursor {
    /// Index into [`stages`].
    pub stage: usize,
    /// The stage's paging token (`after`, `nextRecordsUrl`, `nextPageToken`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// The pass reads what changed from here (ms); `None` reads everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
    /// This stage reads from here instead of `since` (ms): HubSpot's search, restarted
    /// past its window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<i64>,
    /// The newest change seen in this pass (ms): the next pass's `since`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<i64>,
    /// When this pass began (ms).
    #[serde(default)]
    pub started: i64,
    /// Zendesk's ticket export cursor, kept from pass to pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tickets: Option<String>,
}

/// What one stage reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    Changed,
    Deleted,
}

/// The stages of a pass, in order: `(object, what)`.
pub fn stages(source: Source, phase: SyncPhase) -> Vec<(&'static str, Read)> {
    let delta = phase == SyncPhase::Delta;
    let mut out: Vec<(&'static str, Read)> = match source {
        Source::Hubspot => vec![("companies", Read::Changed), ("contacts", Read::Changed), ("deals", Read::Changed)],
        Source::Salesforce => vec![("Account", Read::Changed), ("Contact", Read::Changed), ("Case", Read::Changed)],
        Source::Zendesk => vec![("organizations", Read::Changed), ("tickets", Read::Changed)],
        Source::Jira => vec![("issues", Read::Changed)],
        Source::Stripe if delta => vec![("events", Read::Changed)],
        Source::Stripe => vec![("customers", Read::Changed), ("subscriptions", Read::Changed)],
    };
    if delta {
        match source {
            Source::Hubspot => out.extend([("companies", Read::Deleted), ("contacts", Read::Deleted), ("deals", Read::Deleted)]),
            Source::Salesforce => out.extend([("Account", Read::Deleted), ("Contact", Read::Deleted), ("Case", Read::Deleted)]),
            _ => {}
        }
    }
    out
}

/// A record the source deleted.
#[derive(Debug, Clone, PartialEq)]
pub struct Deleted {
    pub object: String,
    pub id: String,
    pub at: Timestamp,
}

/// One page.
#[derive(Debug, Default)]
pub struct Page {
    pub records: Vec<Json>,
    pub deleted: Vec<Deleted>,
    /// The stage's next paging token; `None` when the stage is done.
    pub after: Option<String>,
    /// The stage goes on with a new query from this change (ms), not a paging token.
    pub restart: Option<i64>,
    /// The newest change on this page (ms).
    pub high: Option<i64>,
    /// Records the stage has in all, when the source says.
    pub total: Option<u64>,
    /// Zendesk: the ticket export's cursor to keep.
    pub tickets: Option<String>,
}

/// The API a grant reaches.
pub struct Api<'a> {
    pub source: Source,
    pub base: &'a str,
    pub token: &'a str,
}

impl Api<'_> {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base.trim_end_matches('/'))
    }

    async fn get(&self, path: &str) -> Result<Json, Failure> {
        call(self.source, Method::GET, &self.url(path), Auth::Bearer(self.token), Body::Empty).await
    }

    async fn post(&self, path: &str, body: &Json) -> Result<Json, Failure> {
        call(self.source, Method::POST, &self.url(path), Auth::Bearer(self.token), Body::Json(body)).await
    }
}

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A path and query from a URL the source handed back (its host is dropped: the next
/// request goes to the grant's own API address, never where an answer points).
fn path_of(next: &str) -> String {
    match reqwest::Url::parse(next) {
        Ok(u) => match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_owned(),
        },
        Err(_) => next.to_owned(),
    }
}

fn newest(records: &[Json], path: &[&str]) -> Option<i64> {
    records
        .iter()
        .filter_map(|r| {
            let mut v = r;
            for p in path {
                v = v.get(p)?;
            }
            parse_time(v).map(|t| t.0)
        })
        .max()
}

fn array(answer: &Json, key: &str) -> Vec<Json> {
    answer.get(key).and_then(Json::as_array).cloned().unwrap_or_default()
}

fn text(v: Option<&Json>) -> Option<String> {
    match v? {
        Json::String(s) if !s.is_empty() => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn iso(ms: i64) -> String {
    Timestamp(ms).to_rfc3339()
}

/// Reads the page of `stage` at `cursor`.
///
/// # Errors
/// The call's [`Failure`]; a stage this source does not have is `Failed`.
pub async fn page(api: &Api<'_>, stage: (&str, Read), cursor: &Cursor, now: Timestamp) -> Result<Page, Failure> {
    match (api.source, stage.1) {
        (Source::Hubspot, Read::Changed) => hubspot(api, stage.0, cursor).await,
        (Source::Hubspot, Read::Deleted) => hubspot_archived(api, stage.0, cursor).await,
        (Source::Salesforce, Read::Changed) => salesforce(api, stage.0, cursor).await,
        (Source::Salesforce, Read::Deleted) => salesforce_deleted(api, stage.0, cursor, now).await,
        (Source::Zendesk, _) if stage.0 == "tickets" => zendesk_tickets(api, cursor).await,
        (Source::Zendesk, _) => zendesk_organizations(api, cursor).await,
        (Source::Jira, _) => jira(api, cursor).await,
        (Source::Stripe, _) if stage.0 == "events" => stripe_events(api, cursor).await,
        (Source::Stripe, _) => stripe_list(api, stage.0, cursor).await,
    }
}

fn hubspot_properties(object: &str) -> &'static [&'static str] {
    match object {
        "companies" => &["name", "domain", "lifecyclestage", "numberofemployees", "annualrevenue", "hs_lastmodifieddate"],
        "contacts" => &["firstname", "lastname", "email", "phone", "jobtitle", "associatedcompanyid", "hs_lastmodifieddate"],
        _ => &["dealname", "dealstage", "amount", "closedate", "hs_lastmodifieddate"],
    }
}

async fn hubspot(api: &Api<'_>, object: &str, cursor: &Cursor) -> Result<Page, Failure> {
    let mut body = json!({
        "sorts": [{"propertyName": "hs_lastmodifieddate", "direction": "ASCENDING"}],
        "properties": hubspot_properties(object),
        "limit": PAGE_SIZE,
    });
    if let Some(since) = cursor.from.or(cursor.since) {
        body["filterGroups"] =
            json!([{"filters": [{"propertyName": "hs_lastmodifieddate", "operator": "GTE", "value": since.to_string()}]}]);
    }
    if let Some(after) = &cursor.after {
        body["after"] = json!(after);
    }
    let answer = api.post(&format!("/crm/v3/objects/{object}/search"), &body).await?;
    let mut records = array(&answer, "results");
    for r in &mut records {
        r["objectType"] = json!(object);
    }
    if object == "deals" && !records.is_empty() {
        let inputs: Vec<Json> = records.iter().filter_map(|r| text(r.get("id"))).map(|id| json!({"id": id})).collect();
        let links = api.post("/crm/v4/associations/deals/companies/batch/read", &json!({"inputs": inputs})).await?;
        for link in array(&links, "results") {
            let (Some(from), Some(to)) =
                (text(link.pointer("/from/id")), link.pointer("/to/0/toObjectId").and_then(|v| text(Some(v))))
            else {
                continue;
            };
            if let Some(r) = records.iter_mut().find(|r| text(r.get("id")).as_deref() == Some(from.as_str())) {
                r["associations"] = json!({"companies": {"results": [{"id": to}]}});
            }
        }
    }
    let high = newest(&records, &["updatedAt"]);
    let mut after = text(answer.pointer("/paging/next/after"));
    let mut restart = None;
    if after.as_deref().and_then(|a| a.parse::<u64>().ok()).is_some_and(|n| n >= HUBSPOT_SEARCH_WINDOW) {
        // Past the window the search answers 400: ask again from the newest change on
        // this page (ascending, so nothing older is left). The records changed in that
        // same millisecond are read twice; the second write finds them unchanged.
        match high {
            Some(h) if cursor.from.or(cursor.since).is_none_or(|s| h > s) => {
                restart = Some(h);
                after = None;
            }
            _ => {
                return Err(Failure::Failed(format!(
                    "more than {HUBSPOT_SEARCH_WINDOW} HubSpot {object} share one modification time; the search cannot page past them"
                )));
            }
        }
    }
    Ok(Page { high, after, restart, total: answer.get("total").and_then(Json::as_u64), records, ..Page::default() })
}

async fn hubspot_archived(api: &Api<'_>, object: &str, cursor: &Cursor) -> Result<Page, Failure> {
    let mut path = format!("/crm/v3/objects/{object}?archived=true&limit={PAGE_SIZE}");
    if let Some(after) = &cursor.after {
        path.push_str(&format!("&after={}", enc(after)));
    }
    let answer = api.get(&path).await?;
    let since = cursor.since.unwrap_or(i64::MIN);
    let deleted = array(&answer, "results")
        .iter()
        .filter_map(|r| {
            let at = parse_time(r.get("archivedAt")?)?;
            let id = text(r.get("id"))?;
            (at.0 >= since).then(|| Deleted { object: object.to_owned(), id, at })
        })
        .collect();
    Ok(Page { deleted, after: text(answer.pointer("/paging/next/after")), ..Page::default() })
}

fn soql(object: &str) -> &'static str {
    match object {
        "Account" => "Id, Name, Website, Industry, NumberOfEmployees, AnnualRevenue, Rating, LastModifiedDate, SystemModstamp",
        "Contact" => "Id, FirstName, LastName, Email, Phone, Title, AccountId, LastModifiedDate, SystemModstamp",
        _ => {
            "Id, CaseNumber, Subject, Status, Priority, Origin, CreatedDate, AccountId, ContactId, LastModifiedDate, SystemModstamp"
        }
    }
}

const SALESFORCE_API: &str = "/services/data/v62.0";

async fn salesforce(api: &Api<'_>, object: &str, cursor: &Cursor) -> Result<Page, Failure> {
    let path = match &cursor.after {
        Some(next) => path_of(next),
        None => {
            let filter = cursor.since.map(|s| format!(" WHERE SystemModstamp >= {}", iso(s))).unwrap_or_default();
            let q = format!("SELECT {} FROM {object}{filter} ORDER BY SystemModstamp ASC", soql(object));
            format!("{SALESFORCE_API}/query?q={}", enc(&q))
        }
    };
    let answer = api.get(&path).await?;
    let records = array(&answer, "records");
    let done = answer.get("done").and_then(Json::as_bool).unwrap_or(true);
    Ok(Page {
        high: newest(&records, &["SystemModstamp"]),
        after: if done { None } else { text(answer.get("nextRecordsUrl")) },
        total: answer.get("totalSize").and_then(Json::as_u64),
        records,
        ..Page::default()
    })
}

async fn salesforce_deleted(api: &Api<'_>, object: &str, cursor: &Cursor, now: Timestamp) -> Result<Page, Failure> {
    // The window must be at least a minute and within the last 30 days.
    let floor = now.0 - 29 * 86_400_000;
    let start = cursor.since.unwrap_or(floor).clamp(floor, now.0 - 60_000);
    let path = format!("{SALESFORCE_API}/sobjects/{object}/deleted/?start={}&end={}", enc(&iso(start)), enc(&iso(now.0)));
    let answer = api.get(&path).await?;
    let deleted = array(&answer, "deletedRecords")
        .iter()
        .filter_map(|r| {
            Some(Deleted { object: object.to_owned(), id: text(r.get("id"))?, at: parse_time(r.get("deletedDate")?)? })
        })
        .collect();
    Ok(Page { deleted, ..Page::default() })
}

async fn zendesk_tickets(api: &Api<'_>, cursor: &Cursor) -> Result<Page, Failure> {
    let path = match cursor.after.as_ref().or(cursor.tickets.as_ref()) {
        Some(c) => format!("/api/v2/incremental/tickets/cursor.json?per_page={PAGE_SIZE}&cursor={}", enc(c)),
        None => format!("/api/v2/incremental/tickets/cursor.json?per_page={PAGE_SIZE}&start_time=0"),
    };
    let answer = api.get(&path).await?;
    let end = answer.get("end_of_stream").and_then(Json::as_bool).unwrap_or(true);
    let next = text(answer.get("after_cursor"));
    let (deleted, records): (Vec<Json>, Vec<Json>) =
        array(&answer, "tickets").into_iter().partition(|t| t.get("status").and_then(Json::as_str) == Some("deleted"));
    let deleted = deleted
        .iter()
        .filter_map(|t| Some(Deleted { object: "tickets".into(), id: text(t.get("id"))?, at: parse_time(t.get("updated_at")?)? }))
        .collect();
    Ok(Page { records, deleted, after: if end { None } else { next.clone() }, tickets: next, ..Page::default() })
}

async fn zendesk_organizations(api: &Api<'_>, cursor: &Cursor) -> Result<Page, Failure> {
    let path = match &cursor.after {
        Some(next) => path_of(next),
        None => format!(
            "/api/v2/incremental/organizations.json?per_page={PAGE_SIZE}&start_time={}",
            cursor.since.map_or(0, |s| s / 1000)
        ),
    };
    let answer = api.get(&path).await?;
    let end = answer.get("end_of_stream").and_then(Json::as_bool).unwrap_or(true);
    let (deleted, records): (Vec<Json>, Vec<Json>) =
        array(&answer, "organizations").into_iter().partition(|o| o.get("deleted_at").is_some_and(|d| !d.is_null()));
    let deleted = deleted
        .iter()
        .filter_map(|o| {
            Some(Deleted { object: "organizations".into(), id: text(o.get("id"))?, at: parse_time(o.get("deleted_at")?)? })
        })
        .collect();
    Ok(Page {
        high: newest(&records, &["updated_at"]),
        records,
        deleted,
        after: if end { None } else { text(answer.get("next_page")) },
        ..Page::default()
    })
}

async fn jira(api: &Api<'_>, cursor: &Cursor) -> Result<Page, Failure> {
    // The enhanced search takes only bounded JQL: the initial pass is bounded by 1970.
    let since = cursor.since.map_or_else(
        || "1970/01/01 00:00".to_owned(),
        |s| {
            let t = time::OffsetDateTime::from_unix_timestamp(s / 1000).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
            format!("{:04}/{:02}/{:02} {:02}:{:02}", t.year(), u8::from(t.month()), t.day(), t.hour(), t.minute())
        },
    );
    let jql = format!("updated >= \"{since}\" ORDER BY updated ASC");
    let mut path = format!(
        "/rest/api/3/search/jql?jql={}&maxResults={PAGE_SIZE}&fields=summary,status,priority,issuetype,created,updated,resolutiondate",
        enc(&jql)
    );
    if let Some(token) = &cursor.after {
        path.push_str(&format!("&nextPageToken={}", enc(token)));
    }
    let answer = api.get(&path).await?;
    let records = array(&answer, "issues");
    let last = answer.get("isLast").and_then(Json::as_bool).unwrap_or(true);
    Ok(Page {
        high: newest(&records, &["fields", "updated"]),
        after: if last { None } else { text(answer.get("nextPageToken")) },
        records,
        ..Page::default()
    })
}

async fn stripe_list(api: &Api<'_>, object: &str, cursor: &Cursor) -> Result<Page, Failure> {
    let mut path = format!("/v1/{object}?limit={PAGE_SIZE}");
    if object == "subscriptions" {
        path.push_str("&status=all");
    }
    if let Some(after) = &cursor.after {
        path.push_str(&format!("&starting_after={}", enc(after)));
    }
    let answer = api.get(&path).await?;
    let data = array(&answer, "data");
    let more = answer.get("has_more").and_then(Json::as_bool).unwrap_or(false);
    let last_id = data.last().and_then(|o| text(o.get("id")));
    // A listed object as the event the mapping reads, dated a second before the pass
    // began (Stripe's times are seconds): every event from the pass's start on is newer
    // and wins, so a change pushed while the listing runs is never taken for stale.
    let created = cursor.started / 1000 - 1;
    let records = data
        .into_iter()
        .map(|o| json!({"id": format!("sync_{}", text(o.get("id")).unwrap_or_default()), "object": "event", "type": "sync", "created": created, "data": {"object": o}}))
        .collect();
    Ok(Page { records, after: if more { last_id } else { None }, ..Page::default() })
}

async fn stripe_events(api: &Api<'_>, cursor: &Cursor) -> Result<Page, Failure> {
    let since = cursor.since.unwrap_or(cursor.started) / 1000;
    let mut path = format!("/v1/events?limit={PAGE_SIZE}&type={}&created%5Bgte%5D={since}", enc("customer.*"));
    if let Some(after) = &cursor.after {
        path.push_str(&format!("&starting_after={}", enc(after)));
    }
    let answer = api.get(&path).await?;
    let data = array(&answer, "data");
    let more = answer.get("has_more").and_then(Json::as_bool).unwrap_or(false);
    let last_id = data.last().and_then(|o| text(o.get("id")));
    let high = newest(&data, &["created"]);
    let (deleted, records): (Vec<Json>, Vec<Json>) =
        data.into_iter().partition(|e| e.get("type").and_then(Json::as_str) == Some("customer.deleted"));
    let deleted = deleted
        .iter()
        .filter_map(|e| {
            Some(Deleted {
                object: "customers".into(),
                id: text(e.pointer("/data/object/id"))?,
                at: parse_time(e.get("created")?)?,
            })
        })
        .collect();
    Ok(Page { records, deleted, high, after: if more { last_id } else { None }, ..Page::default() })
}
