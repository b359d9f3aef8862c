//! Calls to a source's API and token endpoint, with the retries every source documents:
//! a 429 waits its `Retry-After` (up to [`MAX_WAIT`]; longer stops the pull until then),
//! a 5xx or an unreachable source backs off exponentially ([`ATTEMPTS`] requests in
//! all), a 401 is reported for one refresh, any other 4xx fails with the source's answer.
//! Redirects are not followed, so a token never leaves for another host.

use std::time::Duration;

use serde_json::Value as Json;

use super::catalog::Source;

/// Requests per call before a 5xx or an unreachable source fails the page.
pub const ATTEMPTS: u32 = 4;
/// The longest `Retry-After` waited in place; longer ends the run, due again then.
pub const MAX_WAIT: Duration = Duration::from_secs(30);
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
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
    loop {
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
