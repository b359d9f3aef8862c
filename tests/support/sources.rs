//! HubSpot, Salesforce, Zendesk, Jira and Stripe as one stateful stand-in for the
//! connected-sources tests: it keeps each source's records and answers their documented
//! OAuth token endpoints (codes, rotating refresh tokens, revocation), paging and change
//! filters, 401 for a token no longer good, 429 with `Retry-After` and 5xx on demand.
//! Serve it with [`crate::source::FakeSource::handle`]; the sources themselves are
//! never called.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::source::{Answer, Seen};

pub const DAY: i64 = 86_400_000;

pub fn iso(ms: i64) -> String {
    domain::Timestamp(ms).to_rfc3339()
}

pub fn now_ms() -> i64 {
    i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

/// One record at a source: its kind (`companies`, `Account`, `tickets`…), id, last
/// change and, once deleted, when.
#[derive(Clone, Debug)]
pub struct Rec {
    pub kind: &'static str,
    pub id: String,
    pub name: String,
    pub updated: i64,
    pub deleted: Option<i64>,
}

#[derive(Default)]
pub struct State {
    pub recs: Vec<Rec>,
    /// Zendesk's ticket export: every version of every ticket, in change order.
    pub ticket_log: Vec<Rec>,
    /// Access and refresh tokens now good (refresh tokens rotate).
    pub access: std::collections::BTreeSet<String>,
    pub refresh: std::collections::BTreeSet<String>,
    pub revoked: bool,
    pub issued: u32,
    /// API calls answered 429 (`Retry-After: 1`) before the next succeeds.
    pub throttle: u32,
    /// API calls answered 500 from this many pages on, while set.
    pub fail_from_page: Option<u32>,
    pub pages: u32,
    pub base: String,
    /// Each API answer waits this long (a slow source, to stop a pull mid-way).
    pub delay: std::time::Duration,
    /// Headers every successful API answer carries (the sources' rate-limit headers).
    pub limit_headers: Vec<(String, String)>,
}

#[derive(Clone, Default)]
pub struct World(Arc<Mutex<State>>);

pub fn query(path: &str) -> BTreeMap<String, String> {
    path.split_once('?').map(|(_, q)| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default()
}

fn form_or_json(s: &Seen) -> BTreeMap<String, String> {
    if s.header("content-type").is_some_and(|c| c.contains("json")) {
        s.json().as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect()
    } else {
        form_urlencoded::parse(s.body.as_bytes()).into_owned().collect()
    }
}

fn page_of(items: Vec<Rec>, offset: usize, size: usize) -> (Vec<Rec>, Option<usize>) {
    let end = (offset + size).min(items.len());
    let next = (end < items.len()).then_some(end);
    (items.get(offset..end).unwrap_or_default().to_vec(), next)
}

impl World {
    pub fn add(&self, kind: &'static str, n: usize, base: i64) {
        let mut st = self.0.lock().unwrap();
        for i in 0..n {
            let id = match kind {
                "Account" => format!("001{i:015}"),
                "customers" => format!("cus_{i}"),
                _ => (i + 1).to_string(),
            };
            let r =
                Rec { kind, id, name: format!("{kind} {i}"), updated: base + i64::try_from(i).unwrap() * 1000, deleted: None };
            if kind == "tickets" {
                st.ticket_log.push(r.clone());
            }
            st.recs.push(r);
        }
    }

    pub fn change(&self, kind: &str, id: &str, name: &str) {
        let mut st = self.0.lock().unwrap();
        let now = now_ms();
        let r = st.recs.iter_mut().find(|r| r.kind == kind && r.id == id).unwrap();
        r.name = name.into();
        r.updated = now;
        let copy = r.clone();
        if kind == "tickets" {
            st.ticket_log.push(copy);
        }
    }

    pub fn delete(&self, kind: &str, id: &str) {
        let mut st = self.0.lock().unwrap();
        let now = now_ms();
        let r = st.recs.iter_mut().find(|r| r.kind == kind && r.id == id).unwrap();
        r.deleted = Some(now);
        r.updated = now;
        let copy = r.clone();
        if kind == "tickets" {
            st.ticket_log.push(copy);
        }
    }

    pub fn live(&self, kind: &str, since: i64) -> Vec<Rec> {
        let st = self.0.lock().unwrap();
        let mut v: Vec<Rec> =
            st.recs.iter().filter(|r| r.kind == kind && r.deleted.is_none() && r.updated >= since).cloned().collect();
        v.sort_by_key(|r| r.updated);
        v
    }

    pub fn gone(&self, kind: &str) -> Vec<Rec> {
        self.0.lock().unwrap().recs.iter().filter(|r| r.kind == kind && r.deleted.is_some()).cloned().collect()
    }

    pub fn set(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.0.lock().unwrap());
    }

    fn tokens(&self, s: &Seen) -> Answer {
        let f = form_or_json(s);
        let mut st = self.0.lock().unwrap();
        let ok = match f.get("grant_type").map(String::as_str) {
            Some("authorization_code") => f.get("code").map(String::as_str) == Some("good-code"),
            Some("refresh_token") => !st.revoked && f.get("refresh_token").is_some_and(|r| st.refresh.remove(r)),
            _ => false,
        };
        if !ok {
            return Answer::json(400, &json!({"error": "invalid_grant", "error_description": "expired or revoked"}));
        }
        st.issued += 1;
        let (access, refresh) = (format!("access-{}", st.issued), format!("refresh-{}", st.issued));
        st.access.insert(access.clone());
        st.refresh.insert(refresh.clone());
        Answer::json(
            200,
            &json!({"access_token": access, "refresh_token": refresh, "expires_in": 1800, "token_type": "bearer", "instance_url": st.base}),
        )
    }

    /// The sources' APIs and token endpoints; their sign-in pages stand for a person
    /// who signs in and allows access (a redirect back with `good-code`).
    pub fn answer(&self, s: &Seen) -> Answer {
        let path = s.path.as_str();
        let route = path.split('?').next().unwrap_or_default();
        if s.method == "GET"
            && ["/oauth/authorize", "/services/oauth2/authorize", "/oauth/authorizations/new", "/authorize"].contains(&route)
        {
            let q = query(path);
            let back = format!("{}?code=good-code&state={}", q["redirect_uri"], q["state"]);
            return Answer::empty(302).with_header("Location", &back);
        }
        if s.method == "POST" && ["/oauth/v1/token", "/services/oauth2/token", "/oauth/tokens", "/oauth/token"].contains(&path) {
            return self.tokens(s);
        }
        if s.method == "DELETE" && path.starts_with("/oauth/v1/refresh-tokens/") || path == "/api/v2/oauth/tokens/current.json" {
            return Answer::empty(204);
        }
        {
            let mut st = self.0.lock().unwrap();
            let bearer = s.header("authorization").and_then(|a| a.strip_prefix("Bearer ")).unwrap_or_default();
            let stripe = path.starts_with("/v1/");
            if st.revoked || (!stripe && !st.access.contains(bearer)) || (stripe && bearer != "rk_test_good") {
                return Answer::json(401, &json!({"message": "authentication credentials are invalid"}));
            }
            if st.throttle > 0 {
                st.throttle -= 1;
                return Answer::json(429, &json!({"message": "rate limited"})).with_header("Retry-After", "1");
            }
            if path.contains("accessible-resources") {
                return Answer::json(200, &json!([{"id": "cloud-7", "url": "https://acme.atlassian.net", "name": "acme"}]));
            }
            st.pages += 1;
            if st.fail_from_page.is_some_and(|p| st.pages >= p) {
                return Answer::json(503, &json!({"message": "down for maintenance"}));
            }
        }
        let (delay, extra) = {
            let st = self.0.lock().unwrap();
            (st.delay, st.limit_headers.clone())
        };
        let mut answer = self.api(s, path);
        answer.delay = delay;
        if (200..300).contains(&answer.status) {
            answer.headers.extend(extra);
        }
        answer
    }

    fn api(&self, s: &Seen, path: &str) -> Answer {
        let q = query(path);
        let route = path.split('?').next().unwrap();
        let base = self.0.lock().unwrap().base.clone();
        let seg: Vec<&str> = route.split('/').collect();
        match route {
            r if r.starts_with("/crm/v3/objects/") && r.ends_with("/search") => {
                let b = s.json();
                let since =
                    b.pointer("/filterGroups/0/filters/0/value").and_then(Value::as_str).map_or(0, |v| v.parse().unwrap());
                let after: usize = b.get("after").and_then(Value::as_str).map_or(0, |v| v.parse().unwrap());
                if after >= 10_000 {
                    // HubSpot's documented cap: one query pages through 10,000 results at most.
                    let message = "Search API pagination limit of 10000 results exceeded";
                    return Answer::json(400, &json!({"status": "error", "category": "VALIDATION_ERROR", "message": message}));
                }
                let kind = seg[4];
                let all = self.live(kind, since);
                let total = all.len();
                let (items, next) = page_of(all, after, b["limit"].as_u64().unwrap() as usize);
                let results: Vec<Value> = items
                    .iter()
                    .map(|r| {
                        let props = match kind {
                            "companies" => json!({"name": r.name, "domain": format!("c{}.example", r.id), "hs_lastmodifieddate": iso(r.updated)}),
                            "contacts" => json!({"firstname": r.name, "lastname": "X", "email": format!("p{}@example.com", r.id), "associatedcompanyid": "1"}),
                            _ => json!({"dealname": r.name, "dealstage": "qualified", "amount": "1000"}),
                        };
                        json!({"id": r.id, "properties": props, "updatedAt": iso(r.updated), "archived": false})
                    })
                    .collect();
                let mut body = json!({"total": total, "results": results});
                if let Some(n) = next {
                    body["paging"] = json!({"next": {"after": n.to_string()}});
                }
                Answer::json(200, &body)
            }
            "/crm/v4/associations/deals/companies/batch/read" => {
                let ins = s.json()["inputs"].as_array().unwrap().clone();
                let results: Vec<Value> = ins
                    .iter()
                    .map(|i| json!({"from": {"id": i["id"]}, "to": [{"toObjectId": 1, "associationTypes": []}]}))
                    .collect();
                Answer::json(200, &json!({"status": "COMPLETE", "results": results}))
            }
            r if r.starts_with("/crm/v3/objects/") => {
                assert_eq!(q.get("archived").map(String::as_str), Some("true"));
                let results: Vec<Value> = self
                    .gone(seg[4])
                    .iter()
                    .map(|r| json!({"id": r.id, "archivedAt": iso(r.deleted.unwrap()), "archived": true}))
                    .collect();
                Answer::json(200, &json!({"results": results}))
            }
            "/services/data/v62.0/query" => {
                let soql = &q["q"];
                let kind = soql.split(" FROM ").nth(1).unwrap().split(' ').next().unwrap();
                let since = soql
                    .split("SystemModstamp >= ")
                    .nth(1)
                    .map_or(0, |t| services::ingest::mapping::parse_time(&json!(t.split(' ').next().unwrap())).unwrap().0);
                self.salesforce_page(kind, since, 0, &base)
            }
            r if r.starts_with("/services/data/v62.0/query/next-") => {
                let parts: Vec<&str> = r.trim_start_matches("/services/data/v62.0/query/next-").split('-').collect();
                let kind = match parts[0] {
                    "Account" => "Account",
                    "Contact" => "Contact",
                    _ => "Case",
                };
                self.salesforce_page(kind, parts[2].parse().unwrap(), parts[1].parse().unwrap(), &base)
            }
            r if r.starts_with("/services/data/v62.0/sobjects/") && r.ends_with("/deleted/") => {
                assert!(q.contains_key("start") && q.contains_key("end"), "{path}");
                let gone: Vec<Value> =
                    self.gone(seg[5]).iter().map(|r| json!({"id": r.id, "deletedDate": iso(r.deleted.unwrap())})).collect();
                Answer::json(
                    200,
                    &json!({"deletedRecords": gone, "earliestDateAvailable": iso(0), "latestDateCovered": q["end"]}),
                )
            }
            "/api/v2/incremental/tickets/cursor.json" => {
                let from: usize = match q.get("cursor") {
                    Some(c) => c.trim_start_matches('c').parse().unwrap(),
                    None => {
                        assert_eq!(q.get("start_time").map(String::as_str), Some("0"));
                        0
                    }
                };
                let log = self.0.lock().unwrap().ticket_log.clone();
                let per: usize = q["per_page"].parse().unwrap();
                let end = (from + per).min(log.len());
                let tickets: Vec<Value> = log[from..end]
                    .iter()
                    .map(|r| {
                        json!({"id": r.id.parse::<u64>().unwrap(), "url": format!("{base}/api/v2/tickets/{}.json", r.id), "subject": r.name,
                               "status": if r.deleted.is_some() { "deleted" } else { "open" }, "priority": "normal", "via": {"channel": "web"},
                               "created_at": iso(r.updated), "updated_at": iso(r.updated), "organization_id": 1})
                    })
                    .collect();
                Answer::json(
                    200,
                    &json!({"tickets": tickets, "after_cursor": format!("c{end}"), "end_of_stream": end >= log.len()}),
                )
            }
            "/api/v2/incremental/organizations.json" => {
                let since = q["start_time"].parse::<i64>().unwrap() * 1000;
                let st = self.0.lock().unwrap();
                let orgs: Vec<Value> = st
                    .recs
                    .iter()
                    .filter(|r| r.kind == "organizations" && r.updated >= since)
                    .map(|r| {
                        json!({"id": r.id.parse::<u64>().unwrap(), "url": format!("{base}/api/v2/organizations/{}.json", r.id), "name": r.name,
                               "domain_names": ["acme.example"], "updated_at": iso(r.updated), "deleted_at": r.deleted.map(iso)})
                    })
                    .collect();
                Answer::json(
                    200,
                    &json!({"organizations": orgs, "next_page": null, "end_of_stream": true, "end_time": now_ms() / 1000}),
                )
            }
            "/ex/jira/cloud-7/rest/api/3/search/jql" => {
                let jql = &q["jql"];
                let at = jql.split('"').nth(1).unwrap();
                let since = if at.starts_with("1970") {
                    0
                } else {
                    let d = at.replace('/', "-").replace(' ', "T") + ":00Z";
                    services::ingest::mapping::parse_time(&json!(d)).unwrap().0
                };
                assert!(jql.ends_with("ORDER BY updated ASC"), "{jql}");
                let offset: usize = q.get("nextPageToken").map_or(0, |t| t.trim_start_matches('p').parse().unwrap());
                let (items, next) = page_of(self.live("issues", since), offset, q["maxResults"].parse().unwrap());
                let issues: Vec<Value> = items
                    .iter()
                    .map(|r| {
                        let updated = iso(r.updated).replace('Z', "+0000");
                        json!({"id": r.id, "key": format!("OPS-{}", r.id), "fields": {"summary": r.name, "status": {"name": "To Do"},
                               "priority": {"name": "Medium"}, "issuetype": {"name": "Task"}, "created": updated, "updated": updated}})
                    })
                    .collect();
                let mut body = json!({"issues": issues, "isLast": next.is_none()});
                if let Some(n) = next {
                    body["nextPageToken"] = json!(format!("p{n}"));
                }
                Answer::json(200, &body)
            }
            "/v1/customers" | "/v1/subscriptions" => {
                let kind = seg[2];
                let all = self.live(kind, 0);
                let offset = q.get("starting_after").map_or(0, |a| all.iter().position(|r| &r.id == a).unwrap() + 1);
                let (items, next) = page_of(all, offset, q["limit"].parse().unwrap());
                let data: Vec<Value> = items
                    .iter()
                    .map(|r| json!({"id": r.id, "object": "customer", "name": r.name, "metadata": {}, "created": r.updated / 1000}))
                    .collect();
                Answer::json(200, &json!({"object": "list", "data": data, "has_more": next.is_some()}))
            }
            "/v1/events" => {
                assert_eq!(q.get("type").map(String::as_str), Some("customer.*"));
                let since = q["created[gte]"].parse::<i64>().unwrap() * 1000;
                let st = self.0.lock().unwrap();
                let mut evs: Vec<Value> = st
                    .recs
                    .iter()
                    .filter(|r| r.kind == "customers" && r.updated >= since)
                    .map(|r| {
                        let kind = if r.deleted.is_some() { "customer.deleted" } else { "customer.updated" };
                        json!({"id": format!("evt_{}", r.id), "object": "event", "type": kind, "created": r.updated / 1000,
                               "data": {"object": {"id": r.id, "object": "customer", "name": r.name, "metadata": {}, "created": 1}}})
                    })
                    .collect();
                evs.reverse();
                Answer::json(200, &json!({"object": "list", "data": evs, "has_more": false}))
            }
            _ => Answer::json(404, &json!({"message": format!("no route {route}")})),
        }
    }

    fn salesforce_page(&self, kind: &str, since: i64, offset: usize, _base: &str) -> Answer {
        let all = self.live(kind, since);
        let total = all.len();
        let (items, next) = page_of(all, offset, 100);
        let records: Vec<Value> = items
            .iter()
            .map(|r| json!({"attributes": {"type": kind}, "Id": r.id, "Name": r.name, "Website": "acme.example",
                            "LastModifiedDate": iso(r.updated).replace('Z', "+0000"), "SystemModstamp": iso(r.updated).replace('Z', "+0000")}))
            .collect();
        let mut body = json!({"totalSize": total, "done": next.is_none(), "records": records});
        if let Some(n) = next {
            body["nextRecordsUrl"] = json!(format!("/services/data/v62.0/query/next-{kind}-{n}-{since}"));
        }
        Answer::json(200, &body)
    }
}

fn hmac_sha256(secret: &str, parts: &[&[u8]]) -> Vec<u8> {
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret.as_bytes());
    let mut ctx = aws_lc_rs::hmac::Context::with_key(&key);
    for p in parts {
        ctx.update(p);
    }
    ctx.sign().as_ref().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The headers each source signs a webhook delivery with, as its docs describe them.
pub mod sign {
    use base64::Engine as _;

    use super::{hex, hmac_sha256};

    /// `Stripe-Signature: t={secs},v1={hex hmac of "{t}.{body}"}`.
    pub fn stripe(secret: &str, body: &str, t_secs: i64) -> Vec<(String, String)> {
        let sig = hex(&hmac_sha256(secret, &[t_secs.to_string().as_bytes(), b".", body.as_bytes()]));
        vec![("stripe-signature".into(), format!("t={t_secs},v1={sig}"))]
    }

    /// HubSpot v3: base64 hmac of `POST{url}{body}{timestamp ms}`.
    pub fn hubspot(secret: &str, url: &str, body: &str, ts_ms: i64) -> Vec<(String, String)> {
        let sig = hmac_sha256(secret, &[b"POST", url.as_bytes(), body.as_bytes(), ts_ms.to_string().as_bytes()]);
        vec![
            ("x-hubspot-signature-v3".into(), base64::engine::general_purpose::STANDARD.encode(sig)),
            ("x-hubspot-request-timestamp".into(), ts_ms.to_string()),
        ]
    }

    /// Zendesk: base64 hmac of `{timestamp}{body}`.
    pub fn zendesk(secret: &str, body: &str, timestamp: &str) -> Vec<(String, String)> {
        let sig = hmac_sha256(secret, &[timestamp.as_bytes(), body.as_bytes()]);
        vec![
            ("x-zendesk-webhook-signature".into(), base64::engine::general_purpose::STANDARD.encode(sig)),
            ("x-zendesk-webhook-signature-timestamp".into(), timestamp.to_owned()),
        ]
    }

    /// Jira: `X-Hub-Signature: sha256={hex hmac of the body}`.
    pub fn jira(secret: &str, body: &str) -> Vec<(String, String)> {
        vec![("x-hub-signature".into(), format!("sha256={}", hex(&hmac_sha256(secret, &[body.as_bytes()]))))]
    }
}
