//! The gateway middleware (SPEC §3.5): authenticate, resolve the tenant, inject the
//! caller. The same [`services::auth::Authenticator`] backs the Lambda authorizer.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use domain::Error;
use domain::principal::CallerContext;

use crate::error::ApiError;
use crate::router::AppState;

/// Where the caller's identity comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Verify the bearer credential here (`continuity serve`).
    Verify,
    /// Behind API Gateway: the `authorizer` Lambda verified the credential and the MCP
    /// Lambda's adapter put its context into the request extensions. Clients cannot set
    /// extensions, so a missing context means the request did not pass the authorizer.
    TrustAuthorizer,
}

pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    match admit(&state, &mut req).await {
        Ok(tenant) => {
            let mut resp = next.run(req).await;
            // For the request log line (`observe`), which runs outside this middleware.
            resp.extensions_mut().insert(tenant);
            resp
        }
        Err(refused) => refused,
    }
}

/// [`authenticate`]'s work without the middleware around it, for a route that runs its
/// steps in one handler (`/mcp`, the hot path): verifies the caller, applies the rate
/// limit and puts the caller into `req`'s extensions; the caller's tenant (for the
/// request log), or the refusal to answer with.
pub async fn admit(state: &AppState, req: &mut Request) -> Result<domain::TenantId, Response> {
    let crate::web::BaseUrl(base) = crate::web::BaseUrl::of(state, req.extensions());
    let result = match state.settings.auth_mode {
        AuthMode::TrustAuthorizer => {
            req.extensions().get::<CallerContext>().cloned().ok_or_else(|| Error::unauthenticated("missing authorizer context"))
        }
        AuthMode::Verify => {
            let header = req.headers().get(http::header::AUTHORIZATION).map(|v| v.to_str().unwrap_or(""));
            state.services.auth.authenticate_header(header, &base).await
        }
    };
    match result {
        Ok(caller) => {
            if let Err(error) = state.services.auth.rate_limit(&caller).await {
                return Err(ApiError { error, resource_metadata: None }.into_response());
            }
            let tenant = caller.tenant.clone();
            req.extensions_mut().insert(caller);
            Ok(tenant)
        }
        // Where to find the authorization server: formatted only for a refusal.
        Err(error) => {
            let resource_metadata = Some(format!("{base}/.well-known/oauth-protected-resource/mcp"));
            Err(ApiError { error, resource_metadata }.into_response())
        }
    }
}
