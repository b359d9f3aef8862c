//! Pages that sign their own users in (the approvals console, the dashboard): their
//! cookies, sign-in and sign-out, and [`SignedForm`], the extractor every signed-in form
//! goes through.
//!
//! A session is a signed `HttpOnly; SameSite=Strict` cookie (`__Host-` and `Secure` over
//! https). The sign-in form carries a double-submit CSRF token (a cookie of its own); every
//! other form carries the session's CSRF secret. Both are compared in constant time.

use std::future::Future;
use std::marker::PhantomData;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use domain::principal::CallerContext;
use domain::{Error, ErrorCode};
use http::{HeaderValue, StatusCode, header};
use maud::{Markup, html};
use services::auth::{Page, PageSessions};
use services::oauth::Params;
use subtle::ConstantTimeEq;

use super::BaseUrl;
use super::page::{alert, error_page, message_of, page, redirect, status_of, user_fields};
use crate::router::AppState;

/// A page that signs its own users in: where it lives, its cookies, its sign-in form,
/// and how it shows a refused form.
pub trait SignedPage: Send + Sync + 'static {
    /// Which page's session this is.
    const PAGE: Page;
    /// Where a signed-in (or signed-out) browser goes: `/approvals`, `/dashboard`.
    const HOME: &'static str;
    /// The double-submit cookie of the sign-in form.
    const LOGIN_COOKIE: &'static str;
    /// The title of the page's error pages.
    const TITLE: &'static str;
    /// What a key without the needed scope is told.
    const KEY_REFUSED: &'static str;
    /// The title of the sign-in page.
    const LOGIN_TITLE: &'static str;
    /// The label of the sign-in page's key field.
    const KEY_LABEL: &'static str;

    /// The sign-in page's heading and who may sign in.
    fn login_intro() -> Markup;

    /// The signed-in caller and the session's CSRF secret, from the session cookie.
    fn session(
        state: &AppState,
        base: &str,
        headers: &HeaderMap,
    ) -> impl Future<Output = Result<(CallerContext, String), Error>> + Send;

    /// The signed-in page again, saying why a form was refused (nothing was done).
    fn refused(
        state: &AppState,
        base: &str,
        caller: &CallerContext,
        csrf: &str,
        why: Refusal,
    ) -> impl Future<Output = Response> + Send;
}

/// Why a signed-in form was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The body is not a form.
    Malformed,
    /// The form does not carry the session's CSRF secret (stale, or from another site).
    Expired,
}

/// A form posted by a signed-in browser: its caller, the session's CSRF secret (for the
/// page shown next) and its fields, the CSRF field checked. Otherwise the page to show
/// instead: the sign-in form (401) when the session has ended, an error page when it
/// could not be read, or the page's own refusal of a malformed (400) or forged (403) form.
pub struct SignedForm<P> {
    pub caller: CallerContext,
    pub csrf: String,
    pub fields: Params,
    page: PhantomData<fn() -> P>,
}

impl<P: SignedPage> FromRequest<AppState> for SignedForm<P> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let BaseUrl(base) = BaseUrl::of(state, req.extensions());
        let headers = req.headers().clone();
        let body = Bytes::from_request(req, state).await.map_err(IntoResponse::into_response)?;
        let (caller, csrf) = match P::session(state, &base, &headers).await {
            Ok(s) => s,
            Err(e) if e.code == ErrorCode::Unauthenticated => {
                return Err(login_page::<P>(&base, StatusCode::UNAUTHORIZED, Some("Your session has ended; sign in again.")));
            }
            Err(e) => return Err(error_page(P::TITLE, &e)),
        };
        let Some(fields) = form(&body) else { return Err(P::refused(state, &base, &caller, &csrf, Refusal::Malformed).await) };
        if !same(fields.get("csrf").unwrap_or_default(), &csrf) {
            return Err(P::refused(state, &base, &caller, &csrf, Refusal::Expired).await);
        }
        Ok(Self { caller, csrf, fields, page: PhantomData })
    }
}

/// The sign-in page of `P`: a user's form and a key's form, each carrying a fresh
/// double-submit CSRF token that is also set as the page's login cookie.
pub fn login_page<P: SignedPage>(base: &str, status: StatusCode, message: Option<&str>) -> Response {
    login_page_next::<P>(base, status, message, None)
}

/// The sign-in page of `P` that returns to `next` (a path on this site: a decision
/// link) once signed in.
pub fn login_page_next<P: SignedPage>(base: &str, status: StatusCode, message: Option<&str>, next: Option<&str>) -> Response {
    let csrf = services::random_token(16);
    let action = format!("{base}{}/login", P::HOME);
    let body = html! {
        (P::login_intro())
        @if let Some(m) = message { (alert(m)) }
        div class="forms" {
            form method="post" action=(action) {
                input type="hidden" name="csrf" value=(csrf);
                @if let Some(n) = next { input type="hidden" name="next" value=(n); }
                (user_fields())
                button type="submit" id="sign-in-user" { "Sign in" }
            }
            form method="post" action=(action) {
                input type="hidden" name="csrf" value=(csrf);
                @if let Some(n) = next { input type="hidden" name="next" value=(n); }
                label for="key" { (P::KEY_LABEL) }
                input id="key" name="key" type="password" required autocomplete="off";
                button type="submit" id="sign-in" { "Sign in with the key" }
            }
        }
    };
    let mut resp = page(status, P::LOGIN_TITLE, body);
    set_cookie(&mut resp, base, P::LOGIN_COOKIE, &csrf, 1800);
    resp
}

fn form(body: &Bytes) -> Option<Params> {
    Params::parse(body).ok()
}

/// Whether a posted token is the expected one: non-empty, compared in constant time.
fn same(a: &str, b: &str) -> bool {
    !a.is_empty() && a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

fn cookie_name(base: &str, name: &str) -> String {
    if base.starts_with("https://") { format!("__Host-{name}") } else { name.to_owned() }
}

/// The value of the cookie `name` (`__Host-name` over https).
pub fn cookie(headers: &HeaderMap, base: &str, name: &str) -> Option<String> {
    let name = cookie_name(base, name);
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then(|| v.to_owned())
    })
}

/// Sets (or, with `max_age` 0, clears) the cookie `name`: `HttpOnly; SameSite=Strict`,
/// `__Host-` and `Secure` over https.
pub fn set_cookie(resp: &mut Response, base: &str, name: &str, value: &str, max_age: i64) {
    let secure = base.starts_with("https://");
    let c = format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
        cookie_name(base, name),
        if secure { "; Secure" } else { "" }
    );
    if let Ok(v) = HeaderValue::from_str(&c) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// The session cookie of each page: one sign-in sets every page's the credential may
/// open; a sign-out clears (and ends) both.
pub fn session_cookie(page: Page) -> &'static str {
    match page {
        Page::Console => crate::console::SESSION_COOKIE,
        Page::Dashboard => crate::dashboard::SESSION_COOKIE,
    }
}

/// Signs a browser in from the posted form — a key, or a workspace, e-mail and password
/// (the client's address counts toward the sign-in limits) — after the double-submit
/// CSRF check; sets the session cookie of every page the credential opens and goes home.
/// The `POST {home}/login` route of each page.
pub async fn sign_in<P: SignedPage>(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    addr: Option<Extension<crate::server::ClientAddr>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (state, base, headers, body) = (&state, base.as_str(), &headers, &body);
    let source = addr.map(|a| a.0.0);
    let Some(f) = form(body) else { return login_page::<P>(base, StatusCode::BAD_REQUEST, Some("The form was malformed.")) };
    // Back to a decision link when the form came from one (kept through a refusal).
    let next = f.get("next").and_then(|n| n.strip_prefix("/approvals/link/")).and_then(crate::console::link_path);
    let again = |status: StatusCode, message: &str| login_page_next::<P>(base, status, Some(message), next.as_deref());
    let expected = cookie(headers, base, P::LOGIN_COOKIE).unwrap_or_default();
    if !same(f.get("csrf").unwrap_or_default(), &expected) {
        return again(StatusCode::FORBIDDEN, "The sign-in form expired. Please try again.");
    }
    let signed_in: Result<PageSessions, Error> = match f.get("key") {
        Some(key) => state.services.auth.page_login_key(P::PAGE, key, base).await,
        None => {
            let user =
                (f.get("tenant").unwrap_or_default(), f.get("email").unwrap_or_default(), f.get("password").unwrap_or_default());
            state.services.oauth.page_login_user(P::PAGE, base, user, source).await
        }
    };
    match signed_in {
        Ok(sessions) => {
            let home = next.clone().unwrap_or_else(|| P::HOME.to_owned());
            let mut resp = redirect(&format!("{base}{home}"));
            for (page, token) in [(Page::Console, sessions.console), (Page::Dashboard, sessions.dashboard)] {
                if let Some(token) = token {
                    set_cookie(&mut resp, base, session_cookie(page), &token, services::oauth::tokens::CONSOLE_SESSION_SECS);
                }
            }
            set_cookie(&mut resp, base, P::LOGIN_COOKIE, "", 0);
            resp
        }
        Err(e) if e.code == ErrorCode::Forbidden && f.get("key").is_some() => again(StatusCode::FORBIDDEN, P::KEY_REFUSED),
        Err(e) if e.code == ErrorCode::Unauthenticated && f.get("key").is_some() => {
            again(StatusCode::UNAUTHORIZED, "That key is not valid (unknown, revoked or mistyped).")
        }
        Err(e) if matches!(e.code, ErrorCode::Unauthenticated | ErrorCode::Forbidden | ErrorCode::RateLimited) => {
            again(status_of(&e), &e.message)
        }
        Err(e) => again(status_of(&e), &message_of(&e)),
    }
}

/// Signs a browser out of every page: the session's CSRF token must come with the form
/// (when there is a session to end); both pages' sessions end for good (a copied cookie
/// opens nothing afterwards) and their cookies are cleared.
/// The `POST {home}/logout` route of each page.
pub async fn sign_out<P: SignedPage>(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (state, base, headers, body) = (&state, base.as_str(), &headers, &body);
    let session_csrf = P::session(state, base, headers).await.ok().map(|(_, c)| c);
    if let Some(csrf) = session_csrf
        && !form(body).is_some_and(|f| same(f.get("csrf").unwrap_or_default(), &csrf))
    {
        return page(StatusCode::FORBIDDEN, P::TITLE, alert("The form expired. Reload the page."));
    }
    let pages = [Page::Console, Page::Dashboard];
    let tokens: Vec<String> = pages.iter().filter_map(|pg| cookie(headers, base, session_cookie(*pg))).collect();
    if let Err(e) = state.services.auth.end_page_sessions(&tokens, base).await {
        return error_page(P::TITLE, &e);
    }
    let mut resp = redirect(&format!("{base}{}", P::HOME));
    for pg in pages {
        set_cookie(&mut resp, base, session_cookie(pg), "", 0);
    }
    resp
}
