//! The dashboard (seed 002): a web page for a workspace's owners and admins — and keys
//! holding `admin` or `tenant:read` — to see what Continuity holds and does.
//!
//! - `GET /dashboard`: the overview — entities, relationships, signals, memories by scope
//!   and state, proposals waiting (a link to the approvals console), connectors and their
//!   state, the work queue, cache hit ratio, search and tool latency; it refreshes itself
//!   every 30 s (a `<meta>` refresh, no script).
//! - `GET /dashboard/memory?q=&scope=&type=&since=`: the memory browser — hybrid search
//!   through `memory.search`, or the newest entries of a scope; `GET
//!   /dashboard/memory/{id}`: one entry with its lineage (the proposal that made it, what
//!   it superseded) and readback verification; `POST …/{id}/forget` forgets a personal
//!   memory of one's own (`memory.forget`); `POST …/{id}/propose` proposes a change to an
//!   org entry (`memory.propose` superseding it — governance decides).
//! - `GET /dashboard/graph?scope=&page=`: a knowledge graph laid out and drawn as SVG on
//!   the server, 40 entities a page (most connected first), with a legend of entity types.
//! - `GET /dashboard/connectors`: each source's state and pull, Connect (the sign-in
//!   link, or Stripe's key), Sync now and Disconnect (`tenant:write`).
//! - `GET /dashboard/review`: the review queue — records whose readback failed, with why;
//!   `POST …/review/{kind}/{doc}/retry` indexes one again, `…/forget` takes it off the
//!   queue (`approvals:decide` or `admin`).
//! - `GET /dashboard/notifications`: the workspace's notification channels, the form
//!   that adds one (`POST …/notifications/add`; a webhook's secret shown once on its
//!   answer), `POST …/notifications/{id}/remove`, and the deliveries that kept failing
//!   (`admin`).
//! - `GET /dashboard/audit?principal=&action=&outcome=`: the audit ledger, filtered.
//! - `GET /api/stats`: the overview's figures as JSON (a bearer credential with
//!   `tenant:read` or `admin`, or the dashboard's session).
//! - `POST /dashboard/login`, `POST /dashboard/logout`; `GET /` from a browser (HTML
//!   accepted, no credential) is sent here.
//!
//! Sign-in, sessions and CSRF work like the approvals console's (both are a
//! [`crate::web::SignedPage`], every form a [`crate::web::SignedForm`]):
//! a signed `HttpOnly; SameSite=Strict` cookie of its own, every form carrying the
//! session's CSRF secret, pages with no script under a CSP that forbids scripts and
//! framing, and everything shown escaped. Actions run the typed capabilities through the
//! capability service, so the ADK's gating and the audit ledger apply as for any client.
//!
//! One file per page (`overview.rs`, `memory.rs`, `graph.rs`, `connectors.rs`, `review.rs`,
//! `notifications.rs`, `audit.rs`); this module holds the
//! sign-in, the shell every signed-in page is drawn in, and what the pages share.

use axum::http::HeaderMap;
use axum::response::Response;
use domain::principal::CallerContext;
use domain::{Error, ErrorCode};
use http::StatusCode;
use maud::{Markup, PreEscaped, html};
use serde_json::Value;

use crate::router::AppState;
use crate::web::{BaseUrl, Refusal, SignedPage, alert, cookie, error_page, login_page, message_of, page, redirect, status_of};

mod audit;
mod connectors;
mod graph;
mod memory;
mod notifications;
mod overview;
mod review;

pub use audit::{AuditQuery, audit};
pub use connectors::{
    ConnectorsQuery, connect as connect_source, connectors, disconnect as disconnect_source, sync as sync_source,
};
pub use graph::{GraphQuery, graph, graph_svg};
pub use memory::{MemoryQuery, entry, forget, memory, propose};
pub use notifications::{NotificationsQuery, add as add_channel, notifications, remove as remove_channel};
pub use overview::{overview, stats_json};
pub use review::{ReviewQuery, forget as forget_review, retry as retry_review, review};

pub(crate) const SESSION_COOKIE: &str = "ctn_dashboard";
const LOGIN_COOKIE: &str = "ctn_dashboard_login";

/// The signed-in pages' own style, beside the console's style sheet.
const STYLE: &str = "nav a{margin-right:.8rem}nav a.on{font-weight:700}\
    .grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(11rem,1fr));gap:.6rem}\
    .fig{border:1px solid #ddd;border-radius:6px;padding:.5rem .8rem}.fig b{display:block;font-size:1.5rem}\
    .muted{color:#666}svg{border:1px solid #ddd;border-radius:6px;max-width:100%;height:auto}\
    svg text{paint-order:stroke;stroke:#fff;stroke-width:3px;font-family:system-ui,sans-serif}\
    .legend{list-style:none;display:flex;flex-wrap:wrap;gap:.2rem 1rem;padding:0;margin:.4rem 0}\
    .swatch{display:inline-block;width:.7rem;height:.7rem;border-radius:50%;margin-right:.3rem}.pager{margin:.5rem 0}\
    fieldset{border:1px solid #ddd;border-radius:6px;margin:.5rem 0}label.check{display:inline-block;margin:.1rem .8rem .1rem 0}label.check input{width:auto;display:inline;margin:0 .3rem 0 0}";

/// A signed-in page: `head` (e.g. a refresh), the navigation with `active` marked, then
/// `body`.
fn shell(base: &str, caller: &CallerContext, csrf: &str, title: &str, active: &str, head: Markup, body: Markup) -> Response {
    let pages = [
        ("/dashboard", "Overview"),
        ("/dashboard/memory", "Memory"),
        ("/dashboard/graph", "Graph"),
        ("/dashboard/connectors", "Connectors"),
        ("/dashboard/review", "Review"),
        ("/dashboard/notifications", "Notifications"),
        ("/dashboard/audit", "Audit"),
    ];
    let html = html! {
        (head)
        // Our constant (see `web::document`).
        style { (PreEscaped(STYLE)) }
        header {
            h1 { (title) }
            form method="post" action={ (base) "/dashboard/logout" } {
                input type="hidden" name="csrf" value=(csrf);
                small { (caller.tenant.as_str()) " · " (caller.principal.as_str()) }
                " "
                button type="submit" id="sign-out" { "Sign out" }
            }
        }
        nav {
            @for (href, name) in pages {
                a class=[(name == active).then_some("on")] href={ (base) (href) } { (name) }
                " "
            }
            a href={ (base) "/approvals" } { "Approvals ↗" }
        }
        (body)
    };
    page(StatusCode::OK, title, html)
}

fn refused(base: &str, caller: &CallerContext, csrf: &str, title: &str, active: &str, e: &Error) -> Response {
    let mut r = shell(base, caller, csrf, title, active, html! {}, alert(&message_of(e)));
    *r.status_mut() = status_of(e);
    r
}

/// The dashboard as a page with its own sign-in.
pub struct Dashboard;

impl SignedPage for Dashboard {
    const PAGE: services::auth::Page = services::auth::Page::Dashboard;
    const HOME: &'static str = "/dashboard";
    const LOGIN_COOKIE: &'static str = LOGIN_COOKIE;
    const TITLE: &'static str = "Dashboard";
    const KEY_REFUSED: &'static str = "The dashboard needs a key with the tenant:read or admin scope.";

    const LOGIN_TITLE: &'static str = "Dashboard — sign in";
    const KEY_LABEL: &'static str = "API key";

    fn login_intro() -> Markup {
        html! {
            h1 { "Continuity" }
            p {
                "Sign in as an owner or admin of the workspace, or with an API key holding "
                code { "tenant:read" } " or " code { "admin" } " (the home's " code { "owner.key" } " is one)."
            }
        }
    }

    async fn session(state: &AppState, base: &str, headers: &HeaderMap) -> Result<(CallerContext, String), Error> {
        let token = cookie(headers, base, SESSION_COOKIE).ok_or_else(|| Error::unauthenticated("sign in"))?;
        state.services.auth.dashboard_session(&token, base).await
    }

    async fn refused(_: &AppState, base: &str, caller: &CallerContext, csrf: &str, why: Refusal) -> Response {
        let e = match why {
            Refusal::Malformed => Error::invalid("The form was malformed."),
            Refusal::Expired => Error::forbidden("The form expired: nothing was changed. Reload the page."),
        };
        refused(base, caller, csrf, "Dashboard", "", &e)
    }
}

/// The signed-in caller, or the page to show instead (the sign-in form, or an error).
async fn signed_in(state: &AppState, base: &str, headers: &HeaderMap) -> Result<(CallerContext, String), Response> {
    match Dashboard::session(state, base, headers).await {
        Ok(s) => Ok(s),
        Err(e) if e.code == ErrorCode::Unauthenticated => Err(login_page::<Dashboard>(base, StatusCode::OK, None)),
        Err(e) => Err(error_page(Dashboard::TITLE, &e)),
    }
}

/// Runs the typed capability `C` as the caller — the ADK's gating and the audit apply as
/// for any client — and returns its typed result or its taxonomy error.
async fn call<C: services::capabilities::typed::Capability>(
    state: &AppState,
    caller: &CallerContext,
    args: Value,
) -> Result<C::Output, Error> {
    state.services.capabilities.call::<C>(caller, args).await.map(|(_, out)| out)
}

/// An instant as people read it — "5 min ago", "in 2 h", a date past two days — with the
/// exact time (UTC) on hover and in `datetime`.
pub(crate) fn when(at: domain::Timestamp, now: domain::Timestamp) -> Markup {
    let exact = at.to_rfc3339();
    let secs = (now.0.saturating_sub(at.0)) / 1000;
    let (past, s) = (secs >= 0, secs.saturating_abs());
    let span = match s {
        0..60 => None,
        60..3600 => Some(format!("{} min", s / 60)),
        3600..172_800 => Some(format!("{} h", s / 3600)),
        _ => Some(exact.get(..10).unwrap_or(&exact).to_owned()),
    };
    let text = match span {
        None => "just now".to_owned(),
        Some(date) if s >= 172_800 => date,
        Some(d) if past => format!("{d} ago"),
        Some(d) => format!("in {d}"),
    };
    html! { time datetime=(exact) title={ (exact) " UTC" } { (text) } }
}

/// A `<select>` of `options` (value, label) with `current` selected.
fn select(name: &str, current: Option<&str>, options: &[(&str, &str)]) -> Markup {
    html! {
        select name=(name) id=(name) {
            @for (v, label) in options {
                option value=(v) selected[current.unwrap_or_default() == *v] { (label) }
            }
        }
    }
}

/// A browser's `GET /` (HTML accepted, no credential) is sent to the dashboard (`Some`:
/// the redirect); anything else goes on to the MCP server's root.
pub fn browser_root(state: &AppState, req: &axum::extract::Request) -> Option<Response> {
    let is_root = req.method() == http::Method::GET && req.uri().path() == "/";
    if !is_root || req.headers().contains_key(http::header::AUTHORIZATION) {
        return None;
    }
    let html = req.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    html.then(|| {
        let BaseUrl(base) = BaseUrl::of(state, req.extensions());
        redirect(&format!("{base}/dashboard"))
    })
}
