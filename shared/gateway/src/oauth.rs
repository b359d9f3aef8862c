//! The authorization server's HTTP edge (SPEC §3.3): discovery documents, registration,
//! the login and consent pages, the token and revocation endpoints. The decisions are
//! made by [`services::oauth::OAuthService`]; this module parses and renders.
//!
//! Pages are plain server-rendered HTML with every interpolated value escaped, a CSRF
//! token held both in a `SameSite=Strict` cookie and in the form (and stored hashed with
//! the pending login), `X-Frame-Options: DENY` and a restrictive CSP.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderValue, StatusCode, header};
use maud::{Markup, html};
use serde_json::Value;
use services::oauth::{AuthorizeError, ClientCredentials, LoginOutcome, OAuthError, Params, PendingView};
use subtle::ConstantTimeEq;

use crate::router::AppState;
use crate::web::{BaseUrl, document, locked_down_page, no_store};

/// The CSRF cookie's name is per sign-in (`continuity_csrf_{request id}`), so two
/// sign-ins in one browser do not overwrite each other's token.
const CSRF_COOKIE: &str = "continuity_csrf_";

fn cacheable(mut resp: Response) -> Response {
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    resp
}

/// An RFC 6749 error as JSON.
fn oauth_error(e: &OAuthError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    let mut resp = no_store((status, Json(e.body())).into_response());
    if e.status == 401 {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"continuity\""));
    }
    if let Some(s) = e.retry_after {
        resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    resp
}

fn content_type_is(headers: &HeaderMap, want: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(want))
}

fn require_form(headers: &HeaderMap, body: &[u8]) -> Result<Params, OAuthError> {
    if !content_type_is(headers, "application/x-www-form-urlencoded") {
        return Err(OAuthError::new("invalid_request", "the body must be application/x-www-form-urlencoded"));
    }
    if std::str::from_utf8(body).is_err() {
        return Err(OAuthError::new("invalid_request", "the body is not UTF-8"));
    }
    Params::parse(body)
}

/// `Authorization: Basic` client credentials (RFC 6749 §2.3.1: both parts form-encoded).
fn basic_credentials(headers: &HeaderMap) -> Result<ClientCredentials, OAuthError> {
    let Some(v) = headers.get(header::AUTHORIZATION) else { return Ok(ClientCredentials::default()) };
    let bad = || OAuthError::new("invalid_client", "malformed Basic credentials");
    let v = v.to_str().map_err(|_| bad())?;
    let (scheme, b64) = v.split_once(' ').ok_or_else(bad)?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(OAuthError::new("invalid_client", "the token endpoint takes client credentials as Basic, not Bearer"));
    }
    let raw = STANDARD.decode(b64.trim()).map_err(|_| bad())?;
    let raw = String::from_utf8(raw).map_err(|_| bad())?;
    let (id, secret) = raw.split_once(':').ok_or_else(bad)?;
    Ok(ClientCredentials { basic: Some((form_decode(id).ok_or_else(bad)?, form_decode(secret).ok_or_else(bad)?)) })
}

/// `application/x-www-form-urlencoded` decoding of one value (`+` is a space, `%XX` a
/// byte); `None` for a malformed escape or non-UTF-8.
fn form_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

// ---- discovery ----------------------------------------------------------------------

pub async fn authorization_server_metadata(State(state): State<AppState>, BaseUrl(base): BaseUrl) -> Response {
    cacheable(Json(state.services.oauth.metadata(&base)).into_response())
}

pub async fn protected_resource_metadata(State(state): State<AppState>, BaseUrl(base): BaseUrl) -> Response {
    cacheable(Json(state.services.oauth.resource_metadata(&base)).into_response())
}

pub async fn jwks(State(state): State<AppState>) -> Response {
    match state.services.oauth.tokens.jwks().await {
        Ok(v) => cacheable(Json(v).into_response()),
        Err(e) => oauth_error(&e.into()),
    }
}

// ---- registration -------------------------------------------------------------------

pub async fn register(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    if !content_type_is(&headers, "application/json") {
        return oauth_error(&OAuthError::new(
            "invalid_client_metadata",
            "the body must be JSON (Content-Type: application/json)",
        ));
    }
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return oauth_error(&OAuthError::new("invalid_client_metadata", "the body is not valid JSON"));
    };
    match state.services.oauth.register(&v).await {
        Ok(out) => no_store((StatusCode::CREATED, Json(out)).into_response()),
        Err(e) => oauth_error(&e),
    }
}

// ---- token and revocation -----------------------------------------------------------

pub async fn token(State(state): State<AppState>, BaseUrl(base): BaseUrl, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, crate::body::MAX_BODY_BYTES).await else {
        return oauth_error(&OAuthError::new("invalid_request", "the body could not be read"));
    };
    let result = async {
        let params = require_form(&parts.headers, &body)?;
        let creds = basic_credentials(&parts.headers)?;
        state.services.oauth.token(&base, &params, &creds).await
    }
    .await;
    match result {
        Ok(t) => no_store(Json(t).into_response()),
        Err(e) => oauth_error(&e),
    }
}

pub async fn revoke(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let result = async {
        let params = require_form(&headers, &body)?;
        let creds = basic_credentials(&headers)?;
        state.services.oauth.revoke(&params, &creds).await
    }
    .await;
    match result {
        Ok(()) => no_store(StatusCode::OK.into_response()),
        Err(e) => oauth_error(&e),
    }
}

// ---- the pages ----------------------------------------------------------------------

/// The style sheet of the sign-in and consent pages.
const STYLE: &str = "body{font:16px system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;color:#222}\
    label{display:block;margin:.8rem 0 .2rem}input{width:100%;padding:.5rem;box-sizing:border-box}\
    button{margin-top:1rem;padding:.6rem 1.2rem;margin-right:.5rem}.err{color:#a00}code{background:#eee;padding:0 .2rem}\
    ul{padding-left:1.2rem}";

fn page(status: StatusCode, title: &str, body: Markup) -> Response {
    let body = html! { h1 { (title) } (body) };
    locked_down_page(
        status,
        document(title, STYLE, body),
        "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
    )
}

fn error_page(e: &OAuthError) -> Response {
    // A page is for a person: 400 unless the server itself failed.
    let status =
        if e.status >= 500 { StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST) } else { StatusCode::BAD_REQUEST };
    page(
        status,
        "Sign-in cannot continue",
        html! {
            p class="err" { (e.description) }
            p { small { "error: " code { (e.error) } } }
        },
    )
}

/// The hidden fields both forms carry: which sign-in, and its CSRF token.
fn hidden_fields(view: &PendingView, csrf: &str) -> Markup {
    html! {
        input type="hidden" name="request_id" value=(view.pending.id.as_str());
        input type="hidden" name="csrf" value=(csrf);
    }
}

fn login_page(view: &PendingView, csrf: &str, message: Option<&str>) -> Response {
    page(
        StatusCode::OK,
        "Sign in",
        html! {
            p { (client_line(view)) " wants to use Continuity on your behalf." }
            @if let Some(m) = message { p class="err" role="alert" { (m) } }
            form method="post" action="authorize" {
                (hidden_fields(view, csrf))
                input type="hidden" name="action" value="login";
                (crate::web::user_fields())
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// Who asks, for the sign-in and consent pages: the name the client gives itself (as
/// plain text), and for a metadata-document client the host that serves its document.
fn client_line(view: &PendingView) -> Markup {
    html! {
        strong { (view.client_name) }
        @if let Some(host) = &view.client_host {
            " " small { "(described by " code { (host) } "; the name is the client's own, unverified)" }
        }
    }
}

/// The host a code would be sent to, shown plainly (MCP: the redirect URI's host must be
/// clear), with a warning when it is this machine.
fn redirect_line(uri: &str) -> Markup {
    let host = reqwest_free_host(uri);
    let local = matches!(host.as_deref(), Some("localhost" | "127.0.0.1" | "[::1]"));
    html! {
        p {
            "It will be sent back to " code { (uri) }
            @if local { " " small { "(a program on this computer: allow only if you just started it yourself)" } }
            "."
        }
    }
}

/// The host of a URI (`scheme://host[:port]/…`), without a URL parser.
fn reqwest_free_host(uri: &str) -> Option<String> {
    let rest = uri.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host =
        if host.starts_with('[') { host.split(']').next().map(|h| format!("{h}]"))? } else { host.split(':').next()?.to_owned() };
    Some(host.to_ascii_lowercase())
}

fn consent_page(view: &PendingView, csrf: &str) -> Response {
    let (tenant, _) = view.pending.user.clone().unzip();
    let names = |v: &[String]| {
        html! { @for (i, n) in v.iter().enumerate() { @if i > 0 { ", " } code { (n) } } }
    };
    page(
        StatusCode::OK,
        "Allow access?",
        html! {
            p {
                (client_line(view)) " asks for access to the workspace "
                code { (tenant.as_ref().map_or("", |t| t.as_str())) } ":"
            }
            ul { @for s in &view.pending.scopes.0 { li { code { (s.as_str()) } } } }
            @if !view.teams.is_empty() || !view.projects.is_empty() {
                p { "As you, it will reach:" }
                ul {
                    @if !view.teams.is_empty() { li { "the memory of your teams: " (names(&view.teams)) } }
                    @if !view.projects.is_empty() { li { "the memory and records of your projects: " (names(&view.projects)) } }
                }
            }
            (redirect_line(&view.pending.redirect_uri))
            form method="post" action="authorize" {
                (hidden_fields(view, csrf))
                button type="submit" name="action" value="approve" { "Allow" }
                button type="submit" name="action" value="deny" { "Deny" }
            }
        },
    )
}

fn redirect(to: &str) -> Response {
    match HeaderValue::from_str(to) {
        Ok(v) => {
            let mut resp = StatusCode::SEE_OTHER.into_response();
            resp.headers_mut().insert(header::LOCATION, v);
            no_store(resp)
        }
        Err(_) => error_page(&OAuthError::new("invalid_request", "the redirect URI cannot be used")),
    }
}

fn authorize_failure(e: AuthorizeError) -> Response {
    match e {
        AuthorizeError::Page(e) => error_page(&e),
        AuthorizeError::Redirect(to) => redirect(&to),
    }
}

/// `GET /oauth/authorize`: validate, then the login page.
pub async fn authorize_get(State(state): State<AppState>, BaseUrl(base): BaseUrl, req: Request) -> Response {
    let secure = base.starts_with("https://");
    let params = match Params::parse(req.uri().query().unwrap_or("").as_bytes()) {
        Ok(p) => p,
        Err(e) => return error_page(&e),
    };
    match state.services.oauth.begin_authorize(&base, &params).await {
        Ok(view) => {
            let csrf = view.csrf.clone().unwrap_or_default();
            let mut resp = login_page(&view, &csrf, None);
            // `__Host-` (https only) pins the cookie to this host: no sibling subdomain can plant one.
            let cookie = format!(
                "{}{CSRF_COOKIE}{}={csrf}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
                if secure { "__Host-" } else { "" },
                view.pending.id,
                domain::oauth::PENDING_AUTHORIZATION_TTL_SECS,
                if secure { "; Secure" } else { "" }
            );
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                resp.headers_mut().append(header::SET_COOKIE, v);
            }
            resp
        }
        Err(e) => authorize_failure(e),
    }
}

fn cookie_csrf(headers: &HeaderMap, request_id: &str) -> Option<String> {
    let names = [format!("{CSRF_COOKIE}{request_id}"), format!("__Host-{CSRF_COOKIE}{request_id}")];
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        names.iter().any(|n| n == k).then(|| v.to_owned())
    })
}

/// `POST /oauth/authorize`: the login form, then the consent form.
pub async fn authorize_post(State(state): State<AppState>, BaseUrl(base): BaseUrl, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, crate::body::MAX_BODY_BYTES).await else {
        return error_page(&OAuthError::new("invalid_request", "the form could not be read"));
    };
    let form = match require_form(&parts.headers, &body) {
        Ok(f) => f,
        Err(e) => return error_page(&e),
    };
    let (Some(id), Some(csrf)) = (form.get("request_id"), form.get("csrf")) else {
        return error_page(&OAuthError::new("invalid_request", "the form is incomplete; start again from your app"));
    };
    // Double submit: the form's token must be the cookie's (a cross-site page can post
    // the form but cannot read or set our SameSite=Strict cookie).
    let cookie_ok = cookie_csrf(&parts.headers, id).is_some_and(|c| bool::from(c.as_bytes().ct_eq(csrf.as_bytes())));
    if !cookie_ok {
        return error_page(&OAuthError::new(
            "invalid_request",
            "the form is stale or forged (CSRF check failed); start again from your app",
        ));
    }
    let oauth = &state.services.oauth;
    match form.get("action") {
        Some("login") => {
            let res = oauth
                .login(
                    id,
                    csrf,
                    form.get("tenant").unwrap_or(""),
                    form.get("email").unwrap_or(""),
                    form.get("password").unwrap_or(""),
                    parts.extensions.get::<crate::server::ClientAddr>().map(|a| a.0),
                )
                .await;
            match res {
                Ok(LoginOutcome::Consent(view)) => consent_page(&view, csrf),
                Ok(LoginOutcome::Retry(view, message)) => login_page(&view, csrf, Some(&message)),
                Err(e) => authorize_failure(e),
            }
        }
        Some(action @ ("approve" | "deny")) => match oauth.consent(&base, id, csrf, action == "approve").await {
            Ok(to) => redirect(&to),
            Err(e) => authorize_failure(e),
        },
        _ => error_page(&OAuthError::new("invalid_request", "unknown form action")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pages_escape_what_they_show() {
        let html = document("<t>", STYLE, html! { p { ("<script>\"x\"&'y'") } }).into_string();
        assert!(html.contains("<title>&lt;t&gt; · Continuity</title>"), "{html}");
        assert!(html.contains("<p>&lt;script&gt;&quot;x&quot;&amp;'y'</p>"), "{html}");
    }

    #[test]
    fn basic_credentials_are_form_decoded() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(&format!("Basic {}", STANDARD.encode("my%3Aid:s%20t"))).unwrap());
        assert_eq!(basic_credentials(&h).unwrap().basic, Some(("my:id".into(), "s t".into())));
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(&format!("BASIC {}", STANDARD.encode("a&b:c%26d"))).unwrap());
        assert_eq!(basic_credentials(&h).unwrap().basic, Some(("a&b".into(), "c&d".into())));
        assert_eq!(form_decode("%zz"), None);
        assert_eq!(form_decode("%4"), None);
        assert_eq!(form_decode("é%C3%A9"), Some("éé".into()));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic !!!"));
        assert_eq!(basic_credentials(&h).unwrap_err().error, "invalid_client");
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert_eq!(basic_credentials(&h).unwrap_err().error, "invalid_client");
    }
}
