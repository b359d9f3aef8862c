//! The admin HTTP API (`/v1/admin/…`, scope `admin`), the same on `continuity serve`
//! and the `AdminFunction` Lambda. Who may do what is the use case's
//! ([`services::admin::AdminApi`]): an `admin` key administers its own tenant; an
//! `admin` key of the operator's tenant administers every tenant. Every change is
//! audited there. Secrets (a new key's token, a new client's secret) are in the answer
//! once and nowhere else; a user's password is taken in the body and never echoed.
//!
//! | route | does |
//! |---|---|
//! | `GET /v1/admin/tenants`, `POST /v1/admin/tenants` | list, create (operator) |
//! | `GET`/`PATCH /v1/admin/tenants/{tenant}` | show, change (`storage_tier: promoted` runs the fortress promotion, 202 until done) |
//! | `GET /v1/admin/tenants/{tenant}/usage` | entities, reads and writes a day, whether promotion is suggested |
//! | `GET`/`POST /v1/admin/tenants/{tenant}/keys`, `DELETE …/keys/{key}` | API keys |
//! | `GET`/`POST …/users`, `PATCH …/users/{email}` | list users, add one (with a password, teams, projects), set role / memberships / disable |
//! | `POST …/clients`, `PUT …/clients/{client}/toolsets` | service clients |
//! | `POST …/idps`, `DELETE …/idps?issuer=…` | trusted identity providers |
//! | `PUT …/book/{project}/{id}` | an entry of the book of projects |
//! | `PUT`/`DELETE …/connectors/{source}/credential`, `GET …/connectors/credentials` | a connector's credential for governed actions (sealed; never shown) |
//! | `GET`/`POST …/notify/channels`, `DELETE …/notify/channels/{id}`, `GET …/notify/failures` | notification channels (a webhook's secret shown once) and deliveries that kept failing |
//! | `PUT /v1/admin/entities/{type}/{id}` | seed one entity (the caller's tenant) |

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use domain::principal::{CallerContext, Role, Scopes, Toolsets};
use domain::tenant::{Department, Industry, PlanTier, StorageTier};
use domain::{Id, TenantId};
use serde::Deserialize;
use serde_json::{Value, json};
use services::admin::{AdminApi, KeyRequest, NewServiceClient, NewTenant, NewUser, TenantChanges, UserChanges};

use crate::body::StrictJson;
use crate::error::ApiError;
use crate::router::AppState;

async fn api(state: &AppState, caller: &CallerContext) -> Result<AdminApi, ApiError> {
    Ok(state.services.admin.for_caller(caller).await?)
}

fn tenant_id(raw: &str) -> Result<TenantId, ApiError> {
    Ok(TenantId::new(raw)?)
}

fn tenant_json(t: &domain::tenant::Tenant) -> Value {
    json!({
        "id": t.id.as_str(),
        "display_name": t.display_name,
        "plan": t.plan.as_str(),
        "department": t.department.as_str(),
        "industry": t.industry.as_str(),
        "storage_tier": t.storage_tier.as_str(),
        "rate_limit_per_minute": t.effective_rate_limit(),
        "operator": t.operator,
        "trusted_idps": t.trusted_idps.iter().map(|i| i.issuer.as_str()).collect::<Vec<_>>(),
        "version": t.version,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTenant {
    id: String,
    plan: String,
    department: String,
    industry: String,
}

pub async fn list_tenants(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
) -> Result<Response, ApiError> {
    let ids = api(&state, &caller).await?.list_tenants().await?;
    Ok(Json(json!({ "tenants": ids.iter().map(TenantId::as_str).collect::<Vec<_>>() })).into_response())
}

pub async fn create_tenant(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    StrictJson(b): StrictJson<CreateTenant>,
) -> Result<Response, ApiError> {
    let api = api(&state, &caller).await?;
    let t = NewTenant {
        id: tenant_id(&b.id)?,
        plan: PlanTier::parse(&b.plan)?,
        department: Department::parse(&b.department)?,
        industry: Industry::parse(&b.industry)?,
    };
    let created = api.create_tenant(t).await?;
    Ok((StatusCode::CREATED, Json(tenant_json(&created))).into_response())
}

pub async fn show_tenant(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
) -> Result<Response, ApiError> {
    let t = api(&state, &caller).await?.show_tenant(&tenant_id(&tenant)?).await?;
    Ok(Json(tenant_json(&t)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetTenant {
    plan: Option<String>,
    department: Option<String>,
    industry: Option<String>,
    storage_tier: Option<String>,
    display_name: Option<String>,
    rate_limit_per_minute: Option<u32>,
}

pub async fn set_tenant(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
    StrictJson(b): StrictJson<SetTenant>,
) -> Result<Response, ApiError> {
    let api = api(&state, &caller).await?;
    let mut storage_tier = b.storage_tier.as_deref().map(StorageTier::parse).transpose()?;
    if storage_tier == Some(StorageTier::Promoted) {
        // Promotion is the fortress backfill: a bounded run per request; 202 with the
        // progress until it is done (send the same request again to go on).
        storage_tier = None;
        let r = api.promote_tenant(&tenant_id(&tenant)?, Some(PROMOTION_RUN)).await?;
        if r.state != ports::fortress::PromotionState::Promoted || !r.verified {
            return Ok((StatusCode::ACCEPTED, Json(json!({ "promotion": r }))).into_response());
        }
    }
    let changes = TenantChanges {
        plan: b.plan.as_deref().map(PlanTier::parse).transpose()?,
        department: b.department.as_deref().map(Department::parse).transpose()?,
        industry: b.industry.as_deref().map(Industry::parse).transpose()?,
        storage_tier,
        display_name: b.display_name,
        rate_limit_per_minute: b.rate_limit_per_minute,
        triage: None,
    };
    let t = api.set_tenant(&tenant_id(&tenant)?, changes).await?;
    Ok(Json(tenant_json(&t)).into_response())
}

/// Records one admin-API request of a promotion copies (it stays within the functions'
/// time limit); the caller repeats the request until the tenant is promoted.
const PROMOTION_RUN: u64 = 5_000;

pub async fn usage(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
) -> Result<Response, ApiError> {
    let u = api(&state, &caller).await?.usage(&tenant_id(&tenant)?).await?;
    Ok(Json(json!(u)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    scopes: String,
    principal: Option<String>,
    #[serde(default)]
    teams: Vec<String>,
    #[serde(default)]
    projects: Vec<String>,
    toolsets: Option<String>,
}

pub async fn create_key(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
    StrictJson(b): StrictJson<CreateKey>,
) -> Result<Response, ApiError> {
    let api = api(&state, &caller).await?;
    let req = KeyRequest {
        tenant: tenant_id(&tenant)?,
        scopes: Scopes::parse(&b.scopes)?,
        principal: b.principal.map(Id::new).transpose()?,
        teams: b.teams,
        projects: b.projects,
    };
    let toolsets = b.toolsets.as_deref().map(Toolsets::parse).transpose()?.unwrap_or_default();
    let k = api.create_key(req, toolsets).await?;
    Ok((StatusCode::CREATED, Json(json!({ "key_id": k.key_id.as_str(), "tenant": k.tenant.as_str(), "token": k.token })))
        .into_response())
}

pub async fn list_keys(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
) -> Result<Response, ApiError> {
    let keys = api(&state, &caller).await?.list_keys(&tenant_id(&tenant)?).await?;
    let keys: Vec<Value> = keys
        .iter()
        .map(|k| {
            json!({
                "key_id": k.key_id.as_str(), "principal": k.principal.as_str(), "scopes": k.scopes.to_oauth_string(),
                "teams": k.teams, "projects": k.projects, "toolsets": k.toolsets.to_list_string(),
                "created_at": k.created_at.0, "revoked_at": k.revoked_at.map(|t| t.0),
            })
        })
        .collect();
    Ok(Json(json!({ "keys": keys })).into_response())
}

pub async fn revoke_key(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path((tenant, key)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    api(&state, &caller).await?.revoke_key(&tenant_id(&tenant)?, &Id::new(key)?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddUser {
    email: String,
    role: String,
    /// Taken like the CLI's stdin: never echoed, logged or stored but as its hash.
    password: String,
    /// Teams and projects the user belongs to (its access tokens carry them).
    #[serde(default)]
    teams: Vec<String>,
    #[serde(default)]
    projects: Vec<String>,
}

pub async fn add_user(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
    StrictJson(b): StrictJson<AddUser>,
) -> Result<Response, ApiError> {
    let api = api(&state, &caller).await?;
    let user = NewUser {
        tenant: tenant_id(&tenant)?,
        email: b.email.clone(),
        role: Role::parse(&b.role)?,
        password: b.password,
        teams: b.teams,
        projects: b.projects,
    };
    let id = api.add_user(user).await?;
    Ok((StatusCode::CREATED, Json(json!({ "principal": id.as_str(), "email": b.email.trim().to_ascii_lowercase() })))
        .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetUser {
    role: Option<String>,
    disabled: Option<bool>,
    /// Replaces the user's teams (`[]` removes every one); absent: unchanged.
    teams: Option<Vec<String>>,
    projects: Option<Vec<String>>,
}

pub async fn list_users(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
) -> Result<Response, ApiError> {
    let users = api(&state, &caller).await?.list_users(&tenant_id(&tenant)?).await?;
    Ok(Json(json!({ "users": users })).into_response())
}

pub async fn set_user(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path((tenant, email)): Path<(String, String)>,
    StrictJson(b): StrictJson<SetUser>,
) -> Result<Response, ApiError> {
    let api = api(&state, &caller).await?;
    let role = b.role.as_deref().map(Role::parse).transpose()?;
    let changes = UserChanges { role, disabled: b.disabled, teams: b.teams, projects: b.projects };
    api.set_user(&tenant_id(&tenant)?, &email, changes).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutBookEntry {
    title: String,
    body: String,
}

pub async fn put_book_entry(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path((tenant, project, id)): Path<(String, String, String)>,
    StrictJson(b): StrictJson<PutBookEntry>,
) -> Result<Response, ApiError> {
    let entry = api(&state, &caller).await?.put_book_entry(&tenant_id(&tenant)?, &project, &id, &b.title, &b.body).await?;
    Ok(Json(json!({
        "project": entry.project, "id": entry.id.as_str(), "title": entry.title, "body": entry.body,
        "created_at": entry.created_at.to_rfc3339(),
    }))
    .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutCredential {
    token: String,
    base_url: Option<String>,
    email: Option<String>,
}

pub async fn put_credential(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path((tenant, source)): Path<(String, String)>,
    StrictJson(b): StrictJson<PutCredential>,
) -> Result<Response, ApiError> {
    let credential = domain::action::Credential { base_url: b.base_url, token: b.token, email: b.email };
    api(&state, &caller).await?.set_credential(&tenant_id(&tenant)?, &source, credential).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn delete_credential(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path((tenant, source)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    api(&state, &caller).await?.remove_credential(&tenant_id(&tenant)?, &source).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn list_credentials(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
) -> Result<Response, ApiError> {
    let sources = api(&state, &caller).await?.credential_sources(&tenant_id(&tenant)?).await?;
    Ok(Json(json!({ "sources": sources })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateClient {
    name: String,
    scopes: String,
    #[serde(default)]
    jwt_bearer: bool,
    toolsets: Option<String>,
}

pub async fn create_client(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
    StrictJson(b): StrictJson<CreateClient>,
) -> Result<Response, ApiError> {
    let api = api(&state, &caller).await?;
    if b.name.trim().is_empty() || b.name.len() > 200 {
        return Err(domain::Error::invalid_field("name", "must be 1-200 characters").into());
    }
    let req = NewServiceClient {
        tenant: tenant_id(&tenant)?,
        name: b.name,
        scopes: Scopes::parse(&b.scopes)?,
        jwt_bearer: b.jwt_bearer,
        toolsets: b.toolsets.as_deref().map(Toolsets::parse).transpose()?.unwrap_or_default(),
    };
    let c = api.create_client(req).await?;
    Ok((StatusCode::CREATED, Json(json!({ "client_id": c.client_id.as_str(), "client_secret": c.client_secret })))
        .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetToolsets {
    toolsets: String,
}

pub async fn set_client_toolsets(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path((tenant, client)): Path<(String, String)>,
    StrictJson(b): StrictJson<SetToolsets>,
) -> Result<Response, ApiError> {
    let api = api(&state, &caller).await?;
    api.set_client_toolsets(&tenant_id(&tenant)?, &Id::new(client)?, Toolsets::parse(&b.toolsets)?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddIdp {
    issuer: String,
    jwks_uri: Option<String>,
    jwks: Option<Value>,
    /// IdP group → team (`{"eng-platform": "platform"}`).
    #[serde(default)]
    group_teams: std::collections::BTreeMap<String, String>,
}

pub async fn add_idp(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
    StrictJson(b): StrictJson<AddIdp>,
) -> Result<Response, ApiError> {
    let api = api(&state, &caller).await?;
    let idp = domain::oauth::TrustedIdp { issuer: b.issuer, jwks_uri: b.jwks_uri, jwks: b.jwks, group_teams: b.group_teams };
    let t = api.trust_idp(&tenant_id(&tenant)?, idp).await?;
    Ok((StatusCode::CREATED, Json(tenant_json(&t))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Issuer {
    issuer: String,
}

pub async fn remove_idp(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
    Query(q): Query<Issuer>,
) -> Result<Response, ApiError> {
    let t = api(&state, &caller).await?.distrust_idp(&tenant_id(&tenant)?, &q.issuer).await?;
    Ok(Json(tenant_json(&t)).into_response())
}

// ---- notification channels ------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddChannel {
    kind: domain::notify::ChannelKind,
    url: String,
    events: Vec<domain::notify::EventKind>,
}

/// `POST /v1/admin/tenants/{tenant}/notify/channels`: 201 with the channel; a webhook's
/// signing secret is in this answer only.
pub async fn add_channel(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
    StrictJson(b): StrictJson<AddChannel>,
) -> Result<Response, ApiError> {
    let tenant = tenant_id(&tenant)?;
    api(&state, &caller).await?.show_tenant(&tenant).await?;
    let c = state.services.notify.add(&tenant, b.kind, &b.url, b.events).await?;
    let body = json!({"id": c.id, "kind": c.kind, "events": c.events, "secret": c.secret});
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `GET /v1/admin/tenants/{tenant}/notify/channels`: the channels (the URL's host only).
pub async fn list_channels(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
) -> Result<Response, ApiError> {
    let tenant = tenant_id(&tenant)?;
    api(&state, &caller).await?.show_tenant(&tenant).await?;
    Ok(Json(json!({"channels": state.services.notify.list(&tenant).await?})).into_response())
}

/// `DELETE /v1/admin/tenants/{tenant}/notify/channels/{id}`.
pub async fn remove_channel(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let tenant = tenant_id(&tenant)?;
    api(&state, &caller).await?.show_tenant(&tenant).await?;
    state.services.notify.remove(&tenant, &Id::new(id)?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /v1/admin/tenants/{tenant}/notify/failures`: deliveries that kept failing.
pub async fn notify_failures(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path(tenant): Path<String>,
    Query(q): Query<crate::body::Cursor>,
) -> Result<Response, ApiError> {
    let tenant = tenant_id(&tenant)?;
    api(&state, &caller).await?.show_tenant(&tenant).await?;
    let p = state.services.notify.failures(&tenant, &q.page(100)).await?;
    Ok(Json(json!({"failures": p.items, "next_cursor": p.next_cursor})).into_response())
}
