//! The audit ledger, filtered by principal, action and outcome.

use std::fmt::Write as _;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;

use super::{refused, shell, signed_in};
use crate::oauth::esc;
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
    let mut body = format!(
        "<form method=get action=\"{b}/dashboard/audit\" class=forms style=\"grid-template-columns:1fr 1fr 1fr auto\">\
         <input name=principal id=principal placeholder=principal value=\"{p}\"><input name=action id=action placeholder=\"action (tool:kb.search)\" value=\"{a}\">\
         <input name=outcome id=outcome placeholder=\"outcome (ok, denied)\" value=\"{o}\"><button type=submit id=filter>Filter</button></form>\
         <table id=audit><tr><th>when</th><th>principal</th><th>client</th><th>action</th><th>target</th><th>outcome</th></tr>",
        b = esc(&base),
        p = esc(principal.as_deref().unwrap_or_default()),
        a = esc(action.as_deref().unwrap_or_default()),
        o = esc(outcome.as_deref().unwrap_or_default()),
    );
    for a in &rows {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&a.at.to_rfc3339()),
            esc(&a.actor),
            esc(a.via.as_deref().unwrap_or_default()),
            esc(&a.action),
            esc(a.target.as_deref().unwrap_or_default()),
            esc(&a.outcome)
        );
    }
    if rows.is_empty() {
        body.push_str("<tr><td colspan=6 class=muted>No audit record matches.</td></tr>");
    }
    let _ = write!(body, "</table><p class=muted>The newest {} matches among the last {read} records.</p>", rows.len());
    shell(&base, &caller, &csrf, "Audit", "Audit", "", &body)
}
