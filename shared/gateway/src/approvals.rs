//! The approver API (SPEC §6.4), for a principal with `approvals:decide` — never an MCP
//! client, which is never granted that scope:
//!
//! - `GET /v1/approvals` lists proposals awaiting a person, oldest first, with their
//!   triage factors, reasons and the active entries they conflict with (`?cursor=`),
//!   and beside them the gate requests waiting for a person (`gates`; decided with
//!   `POST /v1/gates`).
//! - `POST /v1/approvals/{id}/approve` (`{"reason": "…"}` optional) writes the entry
//!   (superseding what it replaces, with lineage).
//! - `POST /v1/approvals/{id}/reject` (`{"reason": "…"}` required) records the rejection.
//!
//! A decision on a proposal that is not waiting (decided already, rejected, written,
//! expired) is `409 CONFLICT` and changes nothing; a rejection without a reason is `400`.
//! A decision sends the wait's task token to the workflow (`GovernanceService::decide`).

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use domain::Id;
use domain::principal::CallerContext;
use serde::Deserialize;
use serde_json::json;

use crate::body::{Cursor, StrictJson};
use crate::error::ApiError;
use crate::router::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    reason: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Query(q): Query<Cursor>,
) -> Result<Response, ApiError> {
    let p = state.services.governance.waiting(&caller, &q.page(50)).await?;
    let gates = state.services.gates.waiting(&caller, 100).await?;
    Ok(Json(json!({ "approvals": p.items, "next_cursor": p.next_cursor, "gates": gates })).into_response())
}

pub async fn approve(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(id): Path<String>,
    StrictJson(d): StrictJson<Decision>,
) -> Result<Response, ApiError> {
    decide(&state, &caller, &id, true, d.reason).await
}

pub async fn reject(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(id): Path<String>,
    StrictJson(d): StrictJson<Decision>,
) -> Result<Response, ApiError> {
    decide(&state, &caller, &id, false, d.reason).await
}

async fn decide(
    state: &AppState,
    caller: &CallerContext,
    id: &str,
    approve: bool,
    reason: Option<String>,
) -> Result<Response, ApiError> {
    let id = Id::new(id)?;
    let p = state.services.governance.decide(caller, &id, approve, reason).await?;
    Ok(Json(json!({ "proposal": p })).into_response())
}
