//! The gate API (seed 002 §8, issue #18), behind the auth middleware:
//!
//! - `POST /v1/gates` (`approvals:decide`): set a gate —
//!   `{"namespace","action","status":"authorized|blocked|pending","reason"?,"expires_in"?,"consume_once"?}`.
//!   The principal who requested a gate cannot authorize it (403).
//! - `GET /v1/gates/verify?namespace=&action=&consume=` (`tenant:read`): **200**
//!   authorized, **403** blocked or pending, **404** unknown, each with
//!   `{"verdict","reason","consumed","gate"}`; `consume=true` (or a consume-once gate)
//!   spends the authorization — of two racing verifies, one gets the 200.
//! - `POST /v1/gates/request` (`memory:write`): ask a person for a gate (`pending`).
//! - `GET /v1/gates?status=&cursor=` (`tenant:read`): the tenant's gates.
//!
//! On AWS these routes are served by the approvals function.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use domain::Error;
use domain::gate::GateStatus;
use domain::principal::CallerContext;
use http::StatusCode;
use serde::Deserialize;
use serde_json::json;
use services::gates::{GateSet, Verdict};

use crate::body::StrictJson;
use crate::error::ApiError;
use crate::router::AppState;

pub async fn set(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    StrictJson(body): StrictJson<GateSet>,
) -> Result<Response, ApiError> {
    let gate = state.services.gates.set(&caller, body).await?;
    Ok(Json(json!({ "gate": gate })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyQuery {
    namespace: String,
    action: String,
    consume: Option<String>,
}

/// `true`, `1` or `yes` (any case); `false`, `0`, `no` or absent.
fn flag(name: &str, v: Option<&str>) -> Result<bool, Error> {
    match v.map(str::to_ascii_lowercase).as_deref() {
        None | Some("false" | "0" | "no") => Ok(false),
        Some("true" | "1" | "yes" | "") => Ok(true),
        Some(_) => Err(Error::invalid_field(name, "true or false")),
    }
}

pub async fn verify(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Query(q): Query<VerifyQuery>,
) -> Result<Response, ApiError> {
    let consume = flag("consume", q.consume.as_deref())?;
    let check = state.services.gates.verify(&caller, &q.namespace, &q.action, consume).await?;
    let status = match check.verdict {
        Verdict::Authorized => StatusCode::OK,
        Verdict::Blocked | Verdict::Pending => StatusCode::FORBIDDEN,
        Verdict::Unknown => StatusCode::NOT_FOUND,
    };
    let mut r = (status, Json(json!(check))).into_response();
    r.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    Ok(r)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestBody {
    namespace: String,
    action: String,
    reason: Option<String>,
    expires_in: Option<u64>,
}

pub async fn request(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    StrictJson(b): StrictJson<RequestBody>,
) -> Result<Response, ApiError> {
    let gate = state.services.gates.request(&caller, &b.namespace, &b.action, b.reason, b.expires_in).await?;
    Ok(Json(json!({ "gate": gate })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    status: Option<String>,
    cursor: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Query(q): Query<ListQuery>,
) -> Result<Response, ApiError> {
    let status = q.status.as_deref().map(GateStatus::parse).transpose()?;
    let page = q.cursor.map_or_else(|| domain::PageRequest::first(100), |c| domain::PageRequest::after(100, c));
    let p = state.services.gates.list(&caller, status, &page).await?;
    Ok(Json(json!({ "gates": p.items, "next_cursor": p.next_cursor })).into_response())
}
