//! The ingest API (SPEC §2.1 write path, §4.5): connectors and record batches.
//!
//! - `POST /v1/connectors/{source}` (`tenant:write`) registers a source → `oauth_complete`.
//! - `GET /v1/connectors` (`tenant:read`) lists statuses and the supported sources.
//! - `POST /v1/ingest/{source}` (`tenant:write`) takes `{"records": [...], "final": bool}`
//!   or one webhook payload and answers **202** with the batch id, how many records were
//!   queued and a per-record error for each one refused.
//! - `GET /v1/ingest/failures` (`tenant:read`) lists records the pipeline could not
//!   write, with reasons (`?cursor=`).
//! - `POST /v1/kb/documents` (`tenant:write`) stores a knowledge-base document in org,
//!   a team or a project, indexes it and answers 201 with its readback verification.
//! - `GET /v1/kb/review` (`approvals:decide` or `admin`) lists the review queue: records whose
//!   readback failed; `POST /v1/kb/review/{kind}/{doc}/retry` indexes one again now
//!   (200 with its new verification); `DELETE /v1/kb/review/{kind}/{doc}` takes one off
//!   the queue (204; an orphan's leftover index entries go too).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use domain::principal::CallerContext;
use serde_json::{Value, json};

use crate::body::{Cursor, StrictJson};
use crate::error::ApiError;
use crate::router::AppState;

pub async fn register(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(source): Path<String>,
) -> Result<Response, ApiError> {
    let connector = state.services.ingest.register(&caller, &source).await?;
    Ok((StatusCode::CREATED, Json(json!({ "connector": connector }))).into_response())
}

pub async fn connectors(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
) -> Result<Response, ApiError> {
    Ok(Json(state.services.ingest.connectors(&caller).await?).into_response())
}

pub async fn failures(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Query(q): Query<Cursor>,
) -> Result<Response, ApiError> {
    let p = state.services.ingest.failures(&caller, &q.page(100)).await?;
    Ok(Json(json!({ "failures": p.items, "next_cursor": p.next_cursor })).into_response())
}

pub async fn accept(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(source): Path<String>,
    StrictJson(body): StrictJson<Value>,
) -> Result<Response, ApiError> {
    let a = state.services.ingest.accept(&caller, &source, body).await?;
    Ok((StatusCode::ACCEPTED, Json(json!(a))).into_response())
}

/// `POST /v1/kb/documents`: store and index a knowledge-base document (`tenant:write`);
/// 201 with the document and its readback verification.
pub async fn put_kb(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    StrictJson(body): StrictJson<services::search::KbInput>,
) -> Result<Response, ApiError> {
    let (doc, v) = state.services.search.put_kb_document(&caller, body).await?;
    Ok((StatusCode::CREATED, Json(json!({"document": doc, "verification": v}))).into_response())
}

/// `GET /v1/kb/review`: records whose readback failed (`approvals:decide` or `admin`).
pub async fn review(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Query(q): Query<Cursor>,
) -> Result<Response, ApiError> {
    let p = state.services.search.review_queue(&caller, &q.page(100)).await?;
    Ok(Json(json!({ "review": p.items, "next_cursor": p.next_cursor })).into_response())
}

/// `POST /v1/kb/review/{kind}/{doc}/retry`: index a queued record again, with readback
/// (`approvals:decide` or `admin`); 200 with its new verification.
pub async fn retry_review(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path((kind, doc)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let v = state.services.search.retry_review(&caller, &kind, &domain::Id::new(doc)?).await?;
    Ok(Json(json!({ "verification": v })).into_response())
}

/// `DELETE /v1/kb/review/{kind}/{doc}`: take a record off the review queue
/// (`approvals:decide` or `admin`); 204.
pub async fn forget_review(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path((kind, doc)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    state.services.search.forget_review(&caller, &kind, &domain::Id::new(doc)?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
