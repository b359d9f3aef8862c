//! The overview: what the workspace holds and how the server is doing; its figures as JSON.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Json, Response};
use maud::{Markup, html};

use super::{Dashboard, refused, shell, signed_in};
use crate::router::AppState;
use crate::web::{BaseUrl, SignedPage};

/// One figure: its value (with an id the tests and scripts read) above its label.
fn fig(label: &str, value: impl maud::Render, id: &str) -> Markup {
    html! { div class="fig" { b id=(id) { (value) } (label) } }
}

fn overview_html(base: &str, s: &services::stats::Stats) -> Markup {
    let ms = |m: Option<f64>| m.map_or_else(|| "—".to_owned(), |m| format!("{m:.1} ms"));
    html! {
        h2 { "The store" }
        div class="grid" {
            (fig("entities", s.entities, "stat-entities"))
            (fig("relationships", s.relationships, "stat-relationships"))
            (fig("signals", s.signals, "stat-signals"))
            div class="fig" {
                b id="stat-waiting" { a href={ (base) "/approvals" } { (s.proposals_waiting) } }
                "proposals waiting for a person"
            }
            @if let Some(d) = s.queue_depth { (fig("work queue depth", d, "stat-queue")) }
        }
        h2 { "Memories" }
        table {
            tr { th { "scope" } th { "state" } th { "entries" } }
            @for (scope, states) in &s.memories {
                @for (st, n) in states {
                    tr { td { (scope) } td { (st) } td id={ "mem-" (scope) "-" (st) } { (n) } }
                }
            }
            @if s.memories.is_empty() { tr { td colspan="3" class="muted" { "No memory yet." } } }
        }
        h2 { "Connectors" }
        table {
            tr { th { "source" } th { "state" } th { "progress" } th { "updated" } th { "error" } }
            @for c in &s.connectors {
                tr {
                    td { (c.source) }
                    td { (c.state) }
                    td { @if let Some(p) = c.progress { (format!("{:.0}%", p * 100.0)) } }
                    td { (c.updated_at) }
                    td class="err" { (c.error.as_deref().unwrap_or_default()) }
                }
            }
            @if s.connectors.is_empty() { tr { td colspan="5" class="muted" { "No connector yet." } } }
        }
        // The deployment's own figures: shown to the operator's tenant only.
        @if let (Some(cache), Some(lat)) = (&s.cache, &s.latency) {
            h2 { "This server" }
            div class="grid" {
                (fig(
                    "cache hit ratio",
                    cache.hit_ratio.map_or_else(|| "—".to_owned(), |r| format!("{:.0}%", r * 100.0)),
                    "stat-cache",
                ))
                (fig(&format!("mean tool latency ({} calls)", lat.tools.calls), ms(lat.tools.mean_ms), "stat-tools"))
                (fig(&format!("mean search latency ({} calls)", lat.search.calls), ms(lat.search.mean_ms), "stat-search"))
            }
        }
        p class="muted" {
            "As of " (s.generated_at) " · refreshes every 30 s · " a href={ (base) "/api/stats" } { "as JSON" }
        }
    }
}

/// `GET /dashboard`.
pub async fn overview(State(state): State<AppState>, BaseUrl(base): BaseUrl, headers: HeaderMap) -> Response {
    let (caller, csrf) = match signed_in(&state, &base, &headers).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    match services::stats::for_caller(&state.services, &caller).await {
        Ok(s) => shell(
            &base,
            &caller,
            &csrf,
            "Overview",
            "Overview",
            html! { meta http-equiv="refresh" content="30"; },
            overview_html(&base, &s),
        ),
        Err(e) => refused(&base, &caller, &csrf, "Overview", "Overview", &e),
    }
}

/// `GET /api/stats`: a bearer credential, else the dashboard's session.
pub async fn stats_json(State(state): State<AppState>, BaseUrl(base): BaseUrl, headers: HeaderMap) -> Response {
    let caller = match headers.get(http::header::AUTHORIZATION) {
        Some(h) => state.services.auth.authenticate_header(h.to_str().ok(), &base).await,
        None => Dashboard::session(&state, &base, &headers).await.map(|(c, _)| c),
    };
    let result = match caller {
        Ok(c) => services::stats::for_caller(&state.services, &c).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(s) => {
            let mut r = Json(s).into_response();
            r.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
            r
        }
        Err(error) => {
            let resource_metadata = Some(format!("{base}/.well-known/oauth-protected-resource/mcp"));
            crate::error::ApiError { error, resource_metadata }.into_response()
        }
    }
}
