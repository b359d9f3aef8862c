//! The overview: what the workspace holds and how the server is doing; its figures as JSON.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Json, Response};

use super::{Dashboard, refused, shell, signed_in};
use crate::oauth::esc;
use crate::router::AppState;
use crate::web::{BaseUrl, SignedPage};

fn fig(label: &str, value: impl std::fmt::Display, id: &str) -> String {
    format!("<div class=fig><b id=\"{}\">{}</b>{}</div>", esc(id), esc(&value.to_string()), esc(label))
}

fn overview_html(base: &str, s: &services::stats::Stats) -> String {
    let mut out = String::from("<h2>The store</h2><div class=grid>");
    out.push_str(&fig("entities", s.entities, "stat-entities"));
    out.push_str(&fig("relationships", s.relationships, "stat-relationships"));
    out.push_str(&fig("signals", s.signals, "stat-signals"));
    out.push_str(&format!(
        "<div class=fig><b id=stat-waiting><a href=\"{}/approvals\">{}</a></b>proposals waiting for a person</div>",
        esc(base),
        s.proposals_waiting
    ));
    if let Some(d) = s.queue_depth {
        out.push_str(&fig("work queue depth", d, "stat-queue"));
    }
    out.push_str("</div><h2>Memories</h2><table><tr><th>scope</th><th>state</th><th>entries</th></tr>");
    for (scope, states) in &s.memories {
        for (st, n) in states {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td id=\"mem-{}-{}\">{n}</td></tr>",
                esc(scope),
                esc(st),
                esc(scope),
                esc(st)
            );
        }
    }
    if s.memories.is_empty() {
        out.push_str("<tr><td colspan=3 class=muted>No memory yet.</td></tr>");
    }
    out.push_str(
        "</table><h2>Connectors</h2><table><tr><th>source</th><th>state</th><th>progress</th><th>updated</th><th>error</th></tr>",
    );
    for c in &s.connectors {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=err>{}</td></tr>",
            esc(&c.source),
            esc(&c.state),
            c.progress.map_or_else(String::new, |p| format!("{:.0}%", p * 100.0)),
            esc(&c.updated_at),
            esc(c.error.as_deref().unwrap_or_default())
        );
    }
    if s.connectors.is_empty() {
        out.push_str("<tr><td colspan=5 class=muted>No connector yet.</td></tr>");
    }
    let ms = |m: Option<f64>| m.map_or_else(|| "—".to_owned(), |m| format!("{m:.1} ms"));
    out.push_str("</table>");
    // The deployment's own figures: shown to the operator's tenant only.
    if let (Some(cache), Some(lat)) = (&s.cache, &s.latency) {
        out.push_str("<h2>This server</h2><div class=grid>");
        out.push_str(&fig(
            "cache hit ratio",
            cache.hit_ratio.map_or_else(|| "—".to_owned(), |r| format!("{:.0}%", r * 100.0)),
            "stat-cache",
        ));
        out.push_str(&fig(&format!("mean tool latency ({} calls)", lat.tools.calls), ms(lat.tools.mean_ms), "stat-tools"));
        out.push_str(&fig(&format!("mean search latency ({} calls)", lat.search.calls), ms(lat.search.mean_ms), "stat-search"));
        out.push_str("</div>");
    }
    let _ = write!(
        out,
        "<p class=muted>As of {} · refreshes every 30 s · <a href=\"{}/api/stats\">as JSON</a></p>",
        esc(&s.generated_at),
        esc(base)
    );
    out
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
            "<meta http-equiv=refresh content=30>",
            &overview_html(&base, &s),
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
