//! Connectors: each source's state, its pull (records so far, of the total where the
//! source says; last and next pull; the last error), and Connect / Sync now /
//! Disconnect (`tenant:write`). Connect shows the link to sign in at the source (a link,
//! not a redirect: the page's CSP allows forms to post only here); Stripe takes its
//! restricted key in a form.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use domain::Error;
use domain::principal::Scope;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;

use super::{Dashboard, refused, shell, signed_in};
use crate::router::AppState;
use crate::web::{BaseUrl, SignedForm, redirect};

#[derive(Deserialize, Default)]
pub struct ConnectorsQuery {
    done: Option<String>,
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// A time the overview gives as RFC 3339, relative with the exact time on hover.
fn when(v: &Value, now: domain::Timestamp) -> Markup {
    match v.as_str().and_then(|t| domain::Timestamp::parse("at", t).ok()) {
        Some(t) => super::when(t, now),
        None => html! { "—" },
    }
}

fn action(base: &str, csrf: &str, source: &str, what: &str, label: &str) -> Markup {
    html! {
        form method="post" action={ (base) "/dashboard/connectors/" (source) "/" (what) } style="display:inline" {
            input type="hidden" name="csrf" value=(csrf);
            button type="submit" id={ (what) "-" (source) } { (label) }
        }
    }
}

/// `GET /dashboard/connectors`.
pub async fn connectors(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Query(q): Query<ConnectorsQuery>,
) -> Response {
    let (caller, csrf) = match signed_in(&state, &base, &headers).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    if let Err(e) = caller.scopes.require(Scope::TenantRead) {
        return refused(&base, &caller, &csrf, "Connectors", "Connectors", &e);
    }
    let v = match state.services.sources.overview(&caller.tenant).await {
        Ok(v) => v,
        Err(e) => return refused(&base, &caller, &csrf, "Connectors", "Connectors", &e),
    };
    let now = state.services.now();
    let empty = Vec::new();
    let rows = v["connectors"].as_array().unwrap_or(&empty);
    let connected: Vec<&str> =
        rows.iter().filter(|c| text(&c["status"], "state") != "not_connected").map(|c| text(&c["status"], "source")).collect();
    let done = match q.done.as_deref() {
        Some("sync") => Some("A pull is queued."),
        Some("disconnected") => Some("Disconnected: the tokens are forgotten; what was pulled stays."),
        Some("connected") => Some("Connected: the records are being pulled."),
        _ => None,
    };
    let body = html! {
        @if let Some(d) = done { p class="ok" id="done" { (d) } }
        table id="connectors" {
            tr { th { "source" } th { "state" } th { "pull" } th { "last pull" } th { "next" } th {} }
            @for c in rows {
                @let st = &c["status"];
                @let pull = &c["pull"];
                @let source = text(st, "source");
                tr id={ "connector-" (source) } {
                    td { (source) }
                    td {
                        (text(st, "state"))
                        @if let Some(p) = st["progress"].as_f64() { " " ((p * 100.0).round()) "%" }
                        @if let Some(e) = st["error_message"].as_str() {
                            br; small class="err" { (text(st, "error_stage")) ": " (e) }
                        }
                    }
                    td {
                        @if pull.is_null() { span class="muted" { "pushed (POST /v1/ingest)" } }
                        @else if text(st, "state").starts_with("syncing") {
                            (pull["fetched"]) " records so far"
                            @if let Some(t) = pull["total"].as_u64() { " of " (t) }
                        } @else {
                            (pull["last_pass"]) " records in the last pass"
                        }
                        @if !pull.is_null() {
                            @if pull["needs_reconnect"] == true { br; b { "needs a reconnect" } }
                        }
                    }
                    td { (when(&pull["last_synced_at"], now)) }
                    td { (when(&pull["next_at"], now)) }
                    td {
                        @if !pull.is_null() && text(st, "state") != "not_connected" {
                            (action(&base, &csrf, source, "sync", "Sync now")) " "
                        }
                        @if text(st, "state") != "not_connected" { (action(&base, &csrf, source, "disconnect", "Disconnect")) }
                    }
                }
            }
            @if rows.is_empty() { tr { td colspan="6" class="muted" { "No source is connected yet: connect one below." } } }
        }
        h2 { "Connect a source" }
        @for s in v["connectable"].as_array().unwrap_or(&empty) {
            @let name = text(s, "source");
            @if !connected.contains(&name) || rows.iter().any(|c| text(&c["status"], "source") == name && matches!(text(&c["status"], "state"), "sync_error" | "oauth_pending")) {
                div class="fig" id={ "source-" (name) } {
                    b { (text(s, "title")) }
                    @if text(s, "connect") == "api_key" {
                        form method="post" action={ (base) "/dashboard/connectors/" (name) "/connect" } {
                            input type="hidden" name="csrf" value=(csrf);
                            label for="api_key" { "Restricted API key (read access to customers, subscriptions and events)" }
                            input type="password" name="api_key" id="api_key" autocomplete="off" placeholder="rk_live_…";
                            button type="submit" id={ "connect-" (name) } { "Connect" }
                        }
                    } @else if s["app_registered"] == true {
                        (action(&base, &csrf, name, "connect", "Connect"))
                    } @else {
                        span class="muted" { "An operator registers the app first: " code { "continuity source-app set " (name) } }
                    }
                }
            }
        }
    };
    shell(&base, &caller, &csrf, "Connectors", "Connectors", html! {}, body)
}

fn writer(caller: &domain::principal::CallerContext) -> Result<(), Error> {
    caller.scopes.require(Scope::TenantWrite)
}

/// `POST /dashboard/connectors/{source}/connect`: the link to sign in at the source, or
/// (Stripe) the key connected at once.
pub async fn connect(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    Path(source): Path<String>,
    SignedForm { caller, csrf, fields, .. }: SignedForm<Dashboard>,
) -> Response {
    if let Err(e) = writer(&caller) {
        return refused(&base, &caller, &csrf, "Connectors", "Connectors", &e);
    }
    let sources = &state.services.sources;
    if let Some(key) = fields.get("api_key").filter(|k| !k.trim().is_empty()) {
        return match sources.connect_with_key(&caller.tenant, &source, key).await {
            Ok(_) => redirect(&format!("{base}/dashboard/connectors?done=connected")),
            Err(e) => refused(&base, &caller, &csrf, "Connectors", "Connectors", &e),
        };
    }
    match sources.start_connect(&caller.tenant, &source, &base).await {
        Ok(url) => shell(
            &base,
            &caller,
            &csrf,
            "Connectors",
            "Connectors",
            html! {},
            html! {
                p { "Sign in at the source and allow access; it sends you back here. The link works once, for 10 minutes." }
                p { a id="sign-in-link" href=(url) rel="noreferrer" { "Sign in at " (source) " ↗" } }
            },
        ),
        Err(e) => refused(&base, &caller, &csrf, "Connectors", "Connectors", &e),
    }
}

/// `POST /dashboard/connectors/{source}/sync`.
pub async fn sync(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    Path(source): Path<String>,
    SignedForm { caller, csrf, .. }: SignedForm<Dashboard>,
) -> Response {
    let result = match writer(&caller) {
        Ok(()) => state.services.sources.sync_now(&caller.tenant, &source).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => redirect(&format!("{base}/dashboard/connectors?done=sync")),
        Err(e) => refused(&base, &caller, &csrf, "Connectors", "Connectors", &e),
    }
}

/// `POST /dashboard/connectors/{source}/disconnect`.
pub async fn disconnect(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    Path(source): Path<String>,
    SignedForm { caller, csrf, .. }: SignedForm<Dashboard>,
) -> Response {
    let result = match writer(&caller) {
        Ok(()) => state.services.sources.disconnect(&caller.tenant, &source).await.map(|_| ()),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => redirect(&format!("{base}/dashboard/connectors?done=disconnected")),
        Err(e) => refused(&base, &caller, &csrf, "Connectors", "Connectors", &e),
    }
}
