//! Connected sources over HTTP (`services::sources`):
//!
//! - `POST /v1/connectors/{source}/connect` (`tenant:write`): `{"authorize_url": …}` to
//!   open (OAuth sources), or, for Stripe, `{"api_key": "rk_…"}` in the body connects at
//!   once and answers the connector.
//! - `GET /v1/connectors/oauth/callback?code&state` (public: the single-use `state` is
//!   the credential): where the source sends the person back; a page says what happened.
//! - `POST /v1/connectors/{source}/sync` (`tenant:write`): pull now (202).
//! - `DELETE /v1/connectors/{source}` (`tenant:write`): revoke where the source can,
//!   forget the tokens, `not_connected`.
//! - `GET /v1/connectors/pulls` (`tenant:read`): each connector with its pull.
//! - `POST /v1/webhooks/{tenant}/{source}` (public: the source's signature, checked
//!   with the source app's webhook secret, is the credential): a pushed change.
//! - `GET /v1/admin/source-apps`, `PUT`/`DELETE /v1/admin/source-apps/{source}`
//!   (operator `admin`): the deployment's source apps (sealed; never shown).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use domain::principal::{CallerContext, Scope};
use domain::source::SourceApp;
use maud::html;
use serde::Deserialize;
use serde_json::json;

use crate::body::StrictJson;
use crate::error::ApiError;
use crate::router::AppState;
use crate::web::{BaseUrl, document, locked_down_page};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ConnectBody {
    #[serde(default)]
    api_key: Option<String>,
}

pub async fn connect(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    BaseUrl(base): BaseUrl,
    Path(source): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    caller.scopes.require(Scope::TenantWrite)?;
    let sources = &state.services.sources;
    let body: ConnectBody = if body.iter().all(u8::is_ascii_whitespace) {
        ConnectBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| domain::Error::invalid(format!("the body is {{\"api_key\": …}} (Stripe) or empty: {e}")))?
    };
    match body.api_key {
        Some(key) => {
            let connector = sources.connect_with_key(&caller.tenant, &source, &key).await?;
            Ok((StatusCode::CREATED, Json(json!({ "connector": connector }))).into_response())
        }
        None => {
            let url = sources.start_connect(&caller.tenant, &source, &base).await?;
            Ok(Json(json!({ "authorize_url": url, "expires_in": services::sources::CONNECT_TTL_MS / 1000 })).into_response())
        }
    }
}

#[derive(Deserialize)]
pub struct Callback {
    state: Option<String>,
    code: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

const STYLE: &str =
    "body{font:16px system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color:#222}.err{color:#a00}";

pub async fn callback(State(state): State<AppState>, Query(q): Query<Callback>) -> Response {
    let page = |status: StatusCode, title: &str, text: String| {
        let body = html! { h1 { (title) } p class=(if status.is_success() { "" } else { "err" }) { (text) } };
        locked_down_page(
            status,
            document(title, STYLE, body),
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
        )
    };
    let Some(s) = q.state.filter(|s| !s.is_empty() && s.len() <= 256) else {
        return page(StatusCode::BAD_REQUEST, "Connect cannot continue", "This link has no sign-in state.".into());
    };
    let refused = q.error.map(|e| match q.error_description {
        Some(d) => format!("{e}: {d}"),
        None => e,
    });
    match state.services.sources.callback(&s, q.code.as_deref(), refused.as_deref()).await {
        Ok(c) if c.state == domain::connector::ConnectorState::OauthComplete => page(
            StatusCode::OK,
            "Connected",
            format!("{} is connected; its records are arriving. You can close this window.", c.source),
        ),
        Ok(c) => page(
            StatusCode::BAD_REQUEST,
            "Not connected",
            c.error_message.unwrap_or_else(|| format!("{} was not connected; connect again.", c.source)),
        ),
        Err(e) => page(StatusCode::BAD_REQUEST, "Connect cannot continue", e.message),
    }
}

pub async fn sync_now(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(source): Path<String>,
) -> Result<Response, ApiError> {
    caller.scopes.require(Scope::TenantWrite)?;
    state.services.sources.sync_now(&caller.tenant, &source).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "queued": true }))).into_response())
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntervalBody {
    minutes: u64,
}

/// `PUT /v1/connectors/{source}/interval` (`{"minutes": N}`): how often the delta pull runs.
pub async fn set_interval(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(source): Path<String>,
    crate::body::StrictJson(body): crate::body::StrictJson<IntervalBody>,
) -> Result<Response, ApiError> {
    caller.scopes.require(Scope::TenantWrite)?;
    let secs = state.services.sources.set_interval(&caller.tenant, &source, body.minutes).await?;
    Ok(Json(json!({ "source": source, "interval_secs": secs })).into_response())
}

pub async fn disconnect(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(source): Path<String>,
) -> Result<Response, ApiError> {
    caller.scopes.require(Scope::TenantWrite)?;
    let revocation = state.services.sources.disconnect(&caller.tenant, &source).await?;
    Ok(Json(json!({ "disconnected": source, "revocation": revocation })).into_response())
}

pub async fn pulls(State(state): State<AppState>, Extension(caller): Extension<CallerContext>) -> Result<Response, ApiError> {
    caller.scopes.require(Scope::TenantRead)?;
    Ok(Json(state.services.sources.overview(&caller.tenant).await?).into_response())
}

async fn operator(state: &AppState, caller: &CallerContext) -> Result<(), ApiError> {
    if state.services.admin.for_caller(caller).await?.is_operator() {
        Ok(())
    } else {
        Err(domain::Error::forbidden("source apps are for the operator (an admin key of the operator's tenant)").into())
    }
}

pub async fn list_apps(State(state): State<AppState>, Extension(caller): Extension<CallerContext>) -> Result<Response, ApiError> {
    operator(&state, &caller).await?;
    Ok(Json(json!({ "source_apps": state.services.sources.apps().await? })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutApp {
    client_id: String,
    client_secret: String,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    webhook_secret: Option<String>,
}

pub async fn put_app(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(source): Path<String>,
    StrictJson(b): StrictJson<PutApp>,
) -> Result<Response, ApiError> {
    operator(&state, &caller).await?;
    let app = SourceApp {
        client_id: b.client_id,
        client_secret: b.client_secret,
        base_url: b.base_url,
        webhook_secret: b.webhook_secret,
    };
    state.services.sources.set_app(&source, app).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn delete_app(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(source): Path<String>,
) -> Result<Response, ApiError> {
    operator(&state, &caller).await?;
    state.services.sources.remove_app(&source).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /v1/webhooks/{tenant}/{source}`: a source's signed delivery (no bearer; the
/// signature is checked against the source app's webhook secret). 200 with what it did
/// (`duplicate: true` for a delivery taken before); 401 for a bad signature or a stale
/// timestamp.
pub async fn webhook(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    Path((tenant, source)): Path<(String, String)>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let tenant = domain::TenantId::new(tenant)?;
    let url = format!("{}{}", base.trim_end_matches('/'), uri.path_and_query().map_or("", |p| p.as_str()));
    let headers: Vec<(String, String)> =
        headers.iter().filter_map(|(k, v)| Some((k.as_str().to_ascii_lowercase(), v.to_str().ok()?.to_owned()))).collect();
    let delivery = services::sources::webhooks::Delivery { url: &url, headers: &headers, body: &body };
    let received = state.services.sources.webhook(&tenant, &source, &delivery).await?;
    Ok(Json(json!(received)).into_response())
}
