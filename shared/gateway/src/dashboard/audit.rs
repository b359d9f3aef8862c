//! The audit ledger, filtered by principal, action and outcome.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use maud::html;
use serde::Deserialize;

use super::{refused, shell, signed_in};
use crate::router::AppState;
use crate::web::BaseUrl;

#[derive(Deserialize, Default)]
pub struct AuditQuery {
    principal: Option<String>,
    action: Option<String>,
    outcome: Option<String>,
}

/// Audit records read to find matches for a filter.
const AUDIT_SCAN: usize = 5_000;

/// `GET /dashboard/audit`.
pub async fn audit(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Query(q): Query<AuditQuery>,
) -> Response {
    let (caller, csrf) = match signed_in(&state, &base, &headers).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let want = |v: &Option<String>| v.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    let (principal, action, outcome) = (want(&q.principal), want(&q.action), want(&q.outcome));
    let (rows, read) = match services::stats::audit(
        &state.services,
        &caller,
        principal.as_deref(),
        action.as_deref(),
        outcome.as_deref(),
        AUDIT_SCAN,
    )
    .await
    {
        Ok(r) => r,
        Err(e) => return refused(&base, &caller, &csrf, "Audit", "Audit", &e),
    };
    let now = state.services.now();
    let body = html! {
        form method="get" action={ (base) "/dashboard/audit" } class="forms" style="grid-template-columns:1fr 1fr 1fr auto" {
            input name="principal" id="principal" placeholder="principal" value=(principal.as_deref().unwrap_or_default());
            input name="action" id="action" placeholder="action (tool:kb.search)" value=(action.as_deref().unwrap_or_default());
            input name="outcome" id="outcome" placeholder="outcome (ok, denied)" value=(outcome.as_deref().unwrap_or_default());
            button type="submit" id="filter" { "Filter" }
        }
        table id="audit" {
            tr { th { "when" } th { "principal" } th { "client" } th { "action" } th { "target" } th { "outcome" } }
            @for a in &rows {
                tr {
                    td { (super::when(a.at, now)) }
                    td { (a.actor) }
                    td { (a.via.as_deref().unwrap_or_default()) }
                    td { (a.action) }
                    td { (a.target.as_deref().unwrap_or_default()) }
                    td { (a.outcome) }
                }
            }
            @if rows.is_empty() { tr { td colspan="6" class="muted" { "No audit record matches." } } }
        }
        p class="muted" { "The newest " (rows.len()) " matches among the last " (read) " records." }
    };
    shell(&base, &caller, &csrf, "Audit", "Audit", html! {}, body)
}
