//! The responses a page sends: the locked-down HTML page, the console and dashboard's
//! page, an error for a person, a redirect.

use axum::response::{Html, IntoResponse, Response};
use domain::{Error, ErrorCode};
use http::{HeaderValue, StatusCode, header};
use maud::{DOCTYPE, Markup, PreEscaped, html};

/// Marks a response as never to be stored by a browser or a proxy.
pub(crate) fn no_store(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    resp
}

/// A page for a person: no framing, the given CSP (no scripts), no referrer, no sniffing,
/// never cached.
pub(crate) fn locked_down_page(status: StatusCode, html: Markup, csp: &'static str) -> Response {
    let mut resp = (status, Html(html.into_string())).into_response();
    let h = resp.headers_mut();
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(csp));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    no_store(resp)
}

/// A whole HTML document: `title`, the style sheet `style`, then `body`.
pub(crate) fn document(title: &str, style: &'static str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width,initial-scale=1";
            title { (title) " · Continuity" }
            // A style sheet is raw text (escaping would break a `>` selector); it is
            // always one of our constants, never data.
            style { (PreEscaped(style)) }
            (body)
        }
    }
}

/// The style sheet of the approvals console and the dashboard.
const STYLE: &str = "body{font:15px system-ui,sans-serif;max-width:58rem;margin:2rem auto;padding:0 1rem;color:#222}\
    header{display:flex;justify-content:space-between;align-items:center;border-bottom:1px solid #ddd;margin-bottom:1rem}\
    section.p{border:1px solid #ccc;border-radius:6px;padding:.8rem 1rem;margin:1rem 0}\
    table{border-collapse:collapse;width:100%}td,th{padding:.15rem .6rem;text-align:left;border-bottom:1px solid #eee;\
    vertical-align:top;overflow-wrap:anywhere}time{white-space:nowrap}input,select,textarea,button{max-width:100%}\
    .total{font-size:1.3rem;font-weight:600}.conflict{background:#fff6e0;padding:.4rem .6rem;border-left:3px solid #e0a000}\
    .ok{color:#070}.err{color:#a00}label{display:block;margin:.4rem 0 .1rem}\
    input,textarea{width:100%;padding:.4rem;box-sizing:border-box}textarea{height:3.2rem}\
    .forms{display:grid;grid-template-columns:1fr 1fr;gap:1rem}button{margin-top:.4rem;padding:.45rem 1rem}\
    code{background:#eee;padding:0 .2rem;overflow-wrap:anywhere}small{color:#666}\
    @media(max-width:40rem){body{margin:1rem auto}header{flex-wrap:wrap}.forms{grid-template-columns:1fr!important}\
    tr{display:block;border-bottom:1px solid #ddd;padding:.3rem 0}tr:has(th){display:none}\
    td{display:inline-block;border:0;padding:.1rem .5rem .1rem 0;max-width:100%}}";

/// A page of the approvals console or the dashboard: their style sheet, `body` as given.
pub(crate) fn page(status: StatusCode, title: &str, body: Markup) -> Response {
    locked_down_page(
        status,
        document(title, STYLE, body),
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    )
}

/// A failed request's page: its status and a message for a person.
pub(crate) fn error_page(title: &str, e: &Error) -> Response {
    page(status_of(e), title, alert(&message_of(e)))
}

/// A user's sign-in fields — workspace, e-mail, password — as every sign-in form has them.
pub(crate) fn user_fields() -> Markup {
    html! {
        label for="tenant" { "Workspace" }
        input id="tenant" name="tenant" required autocomplete="organization";
        label for="email" { "E-mail" }
        input id="email" name="email" type="email" required autocomplete="username";
        label for="password" { "Password" }
        input id="password" name="password" type="password" required autocomplete="current-password";
    }
}

/// An error message, announced to a screen reader.
pub(crate) fn alert(message: &str) -> Markup {
    html! { p class="err" role="alert" { (message) } }
}

/// The status of a failed page request; the failure is logged like any request's.
pub(crate) fn status_of(e: &Error) -> StatusCode {
    services::log_failure(e, "console");
    crate::error::status(e)
}

/// A message for a person: ours, never a backend's internals.
pub(crate) fn message_of(e: &Error) -> String {
    match e.code {
        ErrorCode::Unavailable | ErrorCode::Internal => "The service is unavailable; try again in a moment.".to_owned(),
        _ => e.message.clone(),
    }
}

/// `303 See Other` to `to` (never cached).
pub(crate) fn redirect(to: &str) -> Response {
    let mut resp = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    no_store(resp)
}
