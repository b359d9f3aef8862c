//! The capability API (SPEC §7.2): `GET /v1/capabilities` lists what the caller's tenant
//! and scopes allow, with the tier that unlocks the rest; `POST /v1/capabilities/{name}`
//! resolves through the ADK and executes with a JSON body.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use domain::principal::CallerContext;
use serde_json::{Value, json};

use crate::body::StrictJson;
use crate::error::ApiError;
use crate::router::AppState;

pub async fn list(State(state): State<AppState>, Extension(caller): Extension<CallerContext>) -> Result<Response, ApiError> {
    let (tenant, listed) = state.services.capabilities.list(&caller).await?;
    let items: Vec<Value> = listed
        .iter()
        .map(|l| {
            json!({
                "name": l.spec.name,
                "channel": l.spec.channel.as_str(),
                "toolset": l.spec.toolset.as_str(),
                "description": services::capabilities::typed::find(l.spec.name).map(|e| e.description),
                "min_tier": l.min_tier.as_str(),
                "scopes": l.spec.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                "route": l.spec.route.as_str(),
                "allowed": l.allowed,
                "unlock_tier": l.unlock_tier.map(|t| t.as_str()),
                "missing_scopes": l.missing_scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(Json(json!({
        "tenant": tenant.id.as_str(),
        "plan": tenant.plan.as_str(),
        "department": tenant.department.as_str(),
        "industry": tenant.industry.as_str(),
        "capabilities": items,
    }))
    .into_response())
}

pub async fn execute(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(name): Path<String>,
    StrictJson(body): StrictJson<Value>,
) -> Result<Response, ApiError> {
    // Resolved, run and audited by the use case.
    let o = state.services.capabilities.execute(&caller, &name, body).await?;
    Ok(Json(json!({
        "capability": o.resolution.spec.name,
        "route": o.resolution.route.as_str(),
        "target": o.resolution.target,
        "cache_ttl_secs": o.resolution.cache_ttl_secs,
        "data": o.data,
    }))
    .into_response())
}
