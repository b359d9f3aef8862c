//! `GET /metrics`: the process's counters ([`metrics`]) in the Prometheus text format,
//! for a scraper on the same machine (a loopback client needs no credential) or any
//! caller holding the `admin` scope. Counters carry route names, never tenant data.

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use domain::principal::Scope;

use crate::error::ApiError;
use crate::router::AppState;
use crate::server::ClientAddr;

pub async fn metrics_text(State(state): State<AppState>, req: Request) -> Response {
    let loopback = req.extensions().get::<ClientAddr>().is_some_and(|a| a.0.is_loopback());
    if !loopback {
        let crate::web::BaseUrl(base) = crate::web::BaseUrl::of(&state, req.extensions());
        let header = req.headers().get(http::header::AUTHORIZATION).map(|v| v.to_str().unwrap_or(""));
        let allowed = match state.services.auth.authenticate_header(header, &base).await {
            Ok(caller) => caller.scopes.require(Scope::Admin),
            Err(e) => Err(e),
        };
        if let Err(error) = allowed {
            let resource_metadata = Some(format!("{base}/.well-known/oauth-protected-resource/mcp"));
            return ApiError { error, resource_metadata }.into_response();
        }
    }
    (
        [(http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8"), (http::header::CACHE_CONTROL, "no-store")],
        format!("{}{}", metrics::prometheus(), embedder_info(state.services.embedder_name())),
    )
        .into_response()
}

/// Which embedder the search index uses, as an info gauge.
fn embedder_info(name: &str) -> String {
    let label = name.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', " ");
    format!(
        "# HELP continuity_embedder_info The embedder of the search index (hashing is lexical only).\n\
         # TYPE continuity_embedder_info gauge\ncontinuity_embedder_info{{embedder=\"{label}\"}} 1\n"
    )
}
