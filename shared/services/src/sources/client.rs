//! Calls to a source's API and token endpoint, with the retries every source documents:
//! a 429 waits its `Retry-After` (up to [`MAX_WAIT`]; longer stops the pull until then),
//! a 5xx or an unreachable source backs off exponentially ([`ATTEMPTS`] requests in
//! all), a 401 is reported for one refresh, any other 4xx fails with the source's answer.
//! Redirects are not followed, so a token never leaves for another host.
//!
//! Before a 429 comes, each source's own limits are kept per account (per access token,
//! in this process): HubSpot's search [`HUBSPOT_SEARCH_SPACING`] after the last answer
//! (its documented 4 a second; the search answers carry no limit headers), and what an answer
//! says is spent waits for its window — HubSpot's `X-HubSpot-RateLimit-Remaining: 0`
//! for `X-HubSpot-RateLimit-Interval-Milliseconds`, Zendesk's `ratelimit-remaining: 0`
//! or its incremental exports' `remaining=0` for the `resets` seconds, Jira's
//! `X-RateLimit-NearLimit` a second; Salesforce's `Sforce-Limit-Info` past
//! [`SALESFORCE_DAILY_SHARE`] of the org's daily allocation stops the pull for an hour
//! (the org's other integrations need the rest). Stripe documents no headers: its 429s
//! are waited as above.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use serde_json::Value as Json;

use super::catalog::Source;

/// Requests per call before a 5xx or an unreachable source fails the page.
pub const ATTEMPTS: u32 = 4;
/// The longest `Retry-After` waited in place; longer ends the run, due again then.
pub const MAX_WAIT: Duration = Duration::from_secs(30);
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// HubSpot's CRM search: at most 4 requests a second per token.
pub const HUBSPOT_SEARCH_SPACING: Duration = Duration::from_millis(250);
/// Salesforce: the share of the org's daily API allocation a pull may use (percent).
pub const SALESFORCE_DAILY_SHARE: u64 = 90;
/// How long a pull stops once that share is used.
const SALESFORCE_PAUSE: Duration = Duration::from_secs(3600);
const TIMEOUT: Duration = crate::actions::REQUEST_TIMEOUT;

/// Why a call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// 401: the access token is no longer good (refresh it once).
    Unauthorized(String),
    /// The grant itself was refused (revoked, expired refresh token): a person must reconnect.
    Revoked(String),
    /// Rate limited for longer than [`MAX_WAIT`].
    Throttled { wait: Duration, why: String },
    /// Anything else, after the retries.
    Failed(String),
}

impl Failure {
    pub fn message(&self) -> String {
        match self {
            Self::Unauthorized(m) | Self::Revoked(m) | Self::Failed(m) => m.clone(),
            Self::Throttled { why, .. } => why.clone(),
        }
    }
}

/// What an answer says about the account's limits: wait before the next call, or
/// stop the pull for a while (why).
#[derive(Debug, Clone, PartialEq)]
pub enum Limit {
    Wait(Duration),
    Stop { wait: Duration, why: String },
}

fn header<'h>(h: &'h reqwest::header::HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::trim)
}

fn number(v: Option<&str>) -> Option<u64> {
    v.and_then(|v| v.parse().ok())
}

/// `key=value; key=value` (Zendesk's endpoint limit headers).
fn field(v: &str, key: &str) -> Option<u64> {
    v.split(';').filter_map(|p| p.trim().split_once('=')).find(|(k, _)| *k == key).and_then(|(_, v)| v.trim().parse().ok())
}

/// The limit a successful answer of `source` announces, if any.
pub fn limit_of(source: Source, h: &reqwest::header::HeaderMap) -> Option<Limit> {
    let secs = Duration::from_secs;
    match source {
        Source::Hubspot => (number(header(h, "x-hubspot-ratelimit-remaining")) == Some(0)).then(|| {
            let ms = number(header(h, "x-hubspot-ratelimit-interval-milliseconds")).unwrap_or(10_000);
            Limit::Wait(Duration::from_millis(ms))
        }),
        Source::Zendesk => {
            let export = header(h, "zendesk-ratelimit-incremental-exports")
                .filter(|v| field(v, "remaining") == Some(0))
                .map(|v| secs(field(v, "resets").unwrap_or(60)));
            let account = (number(header(h, "ratelimit-remaining").or_else(|| header(h, "x-rate-limit-remaining"))) == Some(0))
                .then(|| secs(number(header(h, "ratelimit-reset")).unwrap_or(60)));
            export.max(account).map(Limit::Wait)
        }
        Source::Jira => {
            header(h, "x-ratelimit-nearlimit").filter(|v| v.eq_ignore_ascii_case("true")).map(|_| Limit::Wait(secs(1)))
        }
        Source::Salesforce => {
            let usage = header(h, "sforce-limit-info")?.split(',').find_map(|p| p.trim().strip_prefix("api-usage="))?;
            let (used, total) = usage.split_once('/')?;
            let (used, total): (u64, u64) = (used.trim().parse().ok()?, total.trim().parse().ok()?);
            (total > 0 && used.saturating_mul(100) >= total.saturating_mul(SALESFORCE_DAILY_SHARE)).then(|| Limit::Stop {
                wait: SALESFORCE_PAUSE,
                why: format!(
                    "Salesforce's daily API allocation is {}% used ({used} of {total}); pulling again in an hour",
                    used.saturating_mul(100) / total
                ),
            })
        }
        Source::Stripe => None,
    }
}

/// Each account (a hash of source and token): when it may be called again, and why
/// not before when that is a stop.
type Paused = Mutex<HashMap<[u8; 32], (Instant, Option<String>)>>;

fn paused() -> &'static Paused {
    static PAUSED: std::sync::OnceLock<Paused> = std::sync::OnceLock::new();
    PAUSED.get_or_init(Mutex::default)
}

fn account(source: Source, token: &str) -> [u8; 32] {
    Sha256::digest([source.name().as_bytes(), b"\0", token.as_bytes()].concat()).into()
}

/// Holds the next call to this account until `until`.
fn pause(key: [u8; 32], until: Instant, why: Option<String>) {
    let mut map = paused().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let now = Instant::now();
    map.retain(|_, (t, _)| *t > now);
    let entry = map.entry(key).or_insert((until, None));
    if until >= entry.0 {
        *entry = (until, why);
    }
}

/// Waits until the account may be called (up to [`MAX_WAIT`]); longer is a
/// [`Failure::Throttled`].
async fn wait_turn(key: [u8; 32]) -> Result<(), Failure> {
    let held = paused().lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key).cloned();
    let Some((until, why)) = held else { return Ok(()) };
    let wait = until.saturating_duration_since(Instant::now());
    if wait.is_zero() {
        return Ok(());
    }
    if wait > MAX_WAIT || why.is_some() {
        return Err(Failure::Throttled { wait, why: why.unwrap_or_else(|| "the source's rate limit is spent".into()) });
    }
    tokio::time::sleep(wait).await;
    Ok(())
}

fn client() -> Result<&'static reqwest::Client, Failure> {
    crate::actions::client().map_err(|e| Failure::Failed(e.message))
}

/// At most 300 characters of an answer, on one line.
pub fn excerpt(body: &str) -> String {
    let line: String = body.chars().map(|c| if c.is_control() { ' ' } else { c }).take(300).collect();
    line.trim().to_owned()
}

/// How a request authenticates.
#[derive(Clone, Copy)]
pub enum Auth<'a> {
    Bearer(&'a str),
    None,
}

/// A body.
pub enum Body<'a> {
    Empty,
    Json(&'a Json),
    Form(&'a [(&'a str, &'a str)]),
}

/// Sends one request with the retries above; the answer's JSON (`Null` when empty).
///
/// # Errors
/// A [`Failure`].
pub async fn call(source: Source, method: reqwest::Method, url: &str, auth: Auth<'_>, body: Body<'_>) -> Result<Json, Failure> {
    let name = source.title();
    let mut backoff = FIRST_BACKOFF;
    let mut attempts = 0;
    let mut throttled = 0;
    let key = match auth {
        Auth::Bearer(token) => Some(account(source, token)),
        Auth::None => None,
    };
    let search = source == Source::Hubspot && url.ends_with("/search");
    loop {
        if let Some(key) = key {
            wait_turn(key).await?;
        }
        attempts += 1;
        let mut req = client()?.request(method.clone(), url).header("Accept", "application/json");
        if let Auth::Bearer(token) = auth {
            req = req.bearer_auth(token);
        }
        req = match body {
            Body::Empty => req,
            Body::Json(j) => req.json(j),
            Body::Form(f) => req.form(f),
        };
        let why = match req.send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let retry_after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                if let (Some(key), true) = (key, search) {
                    // Counted from the answer, so the source sees them apart too.
                    pause(key, Instant::now() + HUBSPOT_SEARCH_SPACING, None);
                }
                if let (Some(key), true) = (key, resp.status().is_success()) {
                    match limit_of(source, resp.headers()) {
                        Some(Limit::Wait(d)) => pause(key, Instant::now() + d, None),
                        Some(Limit::Stop { wait, why }) => pause(key, Instant::now() + wait, Some(why)),
                        None => {}
                    }
                }
                let text = resp.text().await.unwrap_or_default();
                if (200..300).contains(&status) {
                    if text.trim().is_empty() {
                        return Ok(Json::Null);
                    }
                    return serde_json::from_str(&text)
                        .map_err(|e| Failure::Failed(format!("{name} answered {status} with something that is not JSON: {e}")));
                }
                if status == 429 {
                    let wait = retry_after.unwrap_or(backoff);
                    let why = format!("{name} is rate limiting (429): {}", excerpt(&text));
                    throttled += 1;
                    if wait > MAX_WAIT || throttled > 5 {
                        return Err(Failure::Throttled { wait, why });
                    }
                    tracing::info!(source = name, wait_secs = wait.as_secs(), "rate limited; waiting as asked");
                    tokio::time::sleep(wait).await;
                    attempts -= 1;
                    continue;
                }
                if status == 401 {
                    return Err(Failure::Unauthorized(format!("{name} refused the token (401): {}", excerpt(&text))));
                }
                if status < 500 {
                    return Err(Failure::Failed(format!("{name} refused the request ({status}): {}", excerpt(&text))));
                }
                format!("{name} answered {status}: {}", excerpt(&text))
            }
            Err(e) if e.is_timeout() => format!("{name} did not answer in {} s", TIMEOUT.as_secs()),
            Err(_) => format!("{name} could not be reached"),
        };
        if attempts >= ATTEMPTS {
            return Err(Failure::Failed(format!("{why} (after {attempts} attempts)")));
        }
        tokio::time::sleep(backoff).await;
        backoff *= 2;
    }
}

/// What a token endpoint answered.
#[derive(Debug, Clone)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub expires_in: Option<i64>,
    /// Salesforce: the API address of the org signed in to.
    pub instance_url: Option<String>,
}

/// A token request (authorization code or refresh); a refused grant is [`Failure::Revoked`].
///
/// # Errors
/// A [`Failure`].
pub async fn token(source: Source, url: &str, fields: &[(&str, &str)]) -> Result<Tokens, Failure> {
    let answer = if source.json_token_requests() {
        let body: serde_json::Map<String, Json> =
            fields.iter().map(|(k, v)| ((*k).to_owned(), Json::String((*v).to_owned()))).collect();
        call(source, reqwest::Method::POST, url, Auth::None, Body::Json(&Json::Object(body))).await
    } else {
        call(source, reqwest::Method::POST, url, Auth::None, Body::Form(fields)).await
    };
    let answer = match answer {
        Ok(a) => a,
        // RFC 6749 §5.2: a refused code or refresh token is 400 `invalid_grant` (some answer 401).
        Err(Failure::Unauthorized(m)) => return Err(Failure::Revoked(m)),
        Err(Failure::Failed(m)) if m.contains("invalid_grant") || m.contains("(400)") || m.contains("(403)") => {
            return Err(Failure::Revoked(m));
        }
        Err(e) => return Err(e),
    };
    let text = |k: &str| answer.get(k).and_then(Json::as_str).map(str::to_owned).filter(|s| !s.is_empty());
    let access_token =
        text("access_token").ok_or_else(|| Failure::Failed(format!("{}'s token answer has no access_token", source.title())))?;
    Ok(Tokens {
        access_token,
        refresh_token: text("refresh_token"),
        expires_in: answer.get("expires_in").and_then(|v| v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok()))),
        instance_url: text("instance_url"),
    })
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (HeaderName::from_static(k), HeaderValue::from_str(v).unwrap())).collect()
    }

    #[test]
    fn each_sources_limit_headers_are_read_as_documented() {
        let secs = Duration::from_secs;
        // HubSpot: the window spent waits its interval; any left waits nothing.
        let spent = headers(&[("x-hubspot-ratelimit-remaining", "0"), ("x-hubspot-ratelimit-interval-milliseconds", "10000")]);
        assert_eq!(limit_of(Source::Hubspot, &spent), Some(Limit::Wait(secs(10))));
        assert_eq!(limit_of(Source::Hubspot, &headers(&[("x-hubspot-ratelimit-remaining", "3")])), None);
        // Zendesk: the account's minute, or the incremental exports' own 10 a minute.
        let minute = headers(&[("ratelimit-remaining", "0"), ("ratelimit-reset", "41")]);
        assert_eq!(limit_of(Source::Zendesk, &minute), Some(Limit::Wait(secs(41))));
        let exports = headers(&[("zendesk-ratelimit-incremental-exports", "total=10; remaining=0; resets=48")]);
        assert_eq!(limit_of(Source::Zendesk, &exports), Some(Limit::Wait(secs(48))));
        let left = headers(&[
            ("zendesk-ratelimit-incremental-exports", "total=10; remaining=4; resets=48"),
            ("ratelimit-remaining", "699"),
        ]);
        assert_eq!(limit_of(Source::Zendesk, &left), None);
        // Jira: near its limit, a second between calls.
        assert_eq!(limit_of(Source::Jira, &headers(&[("x-ratelimit-nearlimit", "true")])), Some(Limit::Wait(secs(1))));
        // Salesforce: past 90 % of the day's allocation the pull stops for an hour.
        assert_eq!(limit_of(Source::Salesforce, &headers(&[("sforce-limit-info", "api-usage=8999/10000")])), None);
        let Some(Limit::Stop { wait, why }) =
            limit_of(Source::Salesforce, &headers(&[("sforce-limit-info", "api-usage=9000/10000")]))
        else {
            panic!("not stopped at 90 %");
        };
        assert_eq!(wait, secs(3600));
        assert!(why.contains("90% used (9000 of 10000)"), "{why}");
        assert_eq!(limit_of(Source::Salesforce, &headers(&[("sforce-limit-info", "api-usage=junk")])), None);
        assert_eq!(limit_of(Source::Stripe, &spent), None);
    }

    #[tokio::test]
    async fn a_paused_account_waits_or_stops() {
        let key = account(Source::Zendesk, "token-a");
        let other = account(Source::Zendesk, "token-b");
        let started = Instant::now();
        pause(key, Instant::now() + Duration::from_millis(300), None);
        wait_turn(key).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(250), "waited its window");
        assert!(!paused().lock().unwrap().contains_key(&other), "another account is not held");
        wait_turn(other).await.unwrap();
        pause(key, Instant::now() + Duration::from_secs(120), None);
        let Err(Failure::Throttled { wait, .. }) = wait_turn(key).await else { panic!("a long window is not waited in place") };
        assert!(wait > MAX_WAIT);
        let stop = account(Source::Salesforce, "token-c");
        pause(stop, Instant::now() + Duration::from_secs(5), Some("allocation used".into()));
        let Err(Failure::Throttled { why, .. }) = wait_turn(stop).await else { panic!("a stop is never waited in place") };
        assert_eq!(why, "allocation used");
    }
}
