//! `fn router(state) -> App`: the one application both hosts serve.

use std::sync::Arc;

use axum::extract::Request;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{delete, get, patch, post, put};
use axum::{Extension, Json, Router, middleware};
use domain::principal::CallerContext;
use domain::spine::PoleClass;
use domain::value::Attributes;
use domain::{EntityType, Id};
use mcp::ContinuityMcp;
use ports::records::Expect;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Deserialize;
use serde_json::json;
use services::Services;
use tokio_util::sync::CancellationToken;

use crate::auth::{AuthMode, authenticate};
use crate::body::{MAX_BODY_BYTES, StrictJson, mcp_json_guard};
use crate::error::ApiError;

#[derive(Debug, Clone)]
pub struct GatewaySettings {
    /// The externally visible base URL, without a trailing slash (`http://127.0.0.1:8787`).
    pub public_url: String,
    /// Browser origins allowed to call `/mcp` (a foreign `Origin` gets 403) and, with
    /// CORS, the OAuth endpoints and discovery documents ([`crate::cors`]); `host:*`
    /// allows any port.
    pub allowed_origins: Vec<String>,
    /// `Host` values accepted on `/mcp` (DNS-rebinding protection); empty disables the
    /// check, for API Gateway, which routes only its own hosts.
    pub allowed_hosts: Vec<String>,
    pub auth_mode: AuthMode,
    /// Offer MCP sessions (`Mcp-Session-Id`, an SSE GET stream with change
    /// notifications, `DELETE`) beside stateless requests: `continuity serve` does;
    /// Lambda cannot keep a session between invocations.
    pub sessions: bool,
    /// Cancelled on shutdown so open MCP streams end.
    pub shutdown: CancellationToken,
}

#[derive(Clone)]
pub struct AppState {
    pub services: Services,
    pub settings: Arc<GatewaySettings>,
}

fn mcp_config(s: &GatewaySettings) -> StreamableHttpServerConfig {
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(s.shutdown.child_token())
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_allowed_origins(s.allowed_origins.clone())
        .enforce_origin_validation();
    if s.allowed_hosts.is_empty() { config.disable_allowed_hosts() } else { config.with_allowed_hosts(s.allowed_hosts.clone()) }
}

fn mcp_service(state: &AppState) -> StreamableHttpService<ContinuityMcp, NeverSessionManager> {
    let services = state.services.clone();
    let config = mcp_config(&state.settings).with_legacy_session_mode(false).with_json_response(true);
    StreamableHttpService::new(move || Ok(ContinuityMcp::new(services.clone())), Arc::new(NeverSessionManager::default()), config)
}

fn mcp_session_service(
    state: &AppState,
    manager: Arc<LocalSessionManager>,
) -> StreamableHttpService<ContinuityMcp, LocalSessionManager> {
    let services = state.services.clone();
    let config = mcp_config(&state.settings).with_legacy_session_mode(true);
    StreamableHttpService::new(move || Ok(ContinuityMcp::for_session(services.clone())), manager, config)
}

/// Whether a request belongs to a session: it names one (`Mcp-Session-Id`), opens or
/// ends one (`GET`, `DELETE`), or starts one (`initialize`, as `mcp_json_guard` read it).
/// Everything else — a client that never initialises, or ignores the session id — is
/// served statelessly.
fn wants_session(req: &Request) -> bool {
    req.method() != http::Method::POST
        || req.headers().contains_key("mcp-session-id")
        || req.extensions().get::<crate::body::JsonRpcMethod>().is_some_and(|m| m.0.as_deref() == Some("initialize"))
}

/// Which credential opened each MCP session (SPEC §10): a session belongs to the
/// credential that opened it — the same API key, or the same OAuth client for the same
/// user — and any other caller naming its id gets the same 404 as for an unknown one, so
/// a leaked session id reads nothing, deletes nothing and confirms nothing.
#[derive(Default)]
struct SessionOwners {
    owners: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

/// Owners kept before the ones whose session has ended are dropped.
const MAX_SESSION_OWNERS: usize = 100_000;

impl SessionOwners {
    fn owner_of(&self, session: &str) -> Option<String> {
        self.owners.lock().ok().and_then(|o| o.get(session).cloned())
    }

    async fn insert(&self, session: String, owner: String, live: &LocalSessionManager) {
        let full = self.owners.lock().is_ok_and(|o| o.len() >= MAX_SESSION_OWNERS);
        if full {
            let alive: std::collections::HashSet<String> = live.sessions.read().await.keys().map(ToString::to_string).collect();
            if let Ok(mut o) = self.owners.lock() {
                o.retain(|s, _| alive.contains(s));
            }
        }
        if let Ok(mut o) = self.owners.lock() {
            o.insert(session, owner);
        }
    }

    fn remove(&self, session: &str) {
        if let Ok(mut o) = self.owners.lock() {
            o.remove(session);
        }
    }
}

/// rmcp's own answer for a session it does not know, byte for byte.
fn unknown_session() -> Response {
    let mut r = Response::new(axum::body::Body::from("Not Found: Session not found"));
    *r.status_mut() = http::StatusCode::NOT_FOUND;
    r
}

/// Serves a request that belongs to a session, checking it is the caller's session.
async fn session_request(
    session: Arc<StreamableHttpService<ContinuityMcp, LocalSessionManager>>,
    manager: Arc<LocalSessionManager>,
    owners: Arc<SessionOwners>,
    req: Request,
) -> Response {
    let Some(owner) = req.extensions().get::<CallerContext>().map(CallerContext::session_owner) else {
        return unknown_session();
    };
    let named = req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    if let Some(id) = &named
        && owners.owner_of(id).as_deref() != Some(owner.as_str())
    {
        return unknown_session();
    }
    let deleting = req.method() == http::Method::DELETE;
    let mut response = session.handle(req).await.map(axum::body::Body::new);
    if deleting && response.status() == http::StatusCode::ACCEPTED {
        // rmcp answers 202; the Python SDK counts only 200 and 204 as a session ended
        // ("Session termination failed: 202" on every close), the TypeScript SDK any 2xx.
        *response.status_mut() = http::StatusCode::OK;
    }
    match named {
        Some(id) if deleting && response.status().is_success() => owners.remove(&id),
        Some(_) => {}
        // A new session: remember who opened it.
        None => {
            if let Some(id) = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
                owners.insert(id.to_owned(), owner, &manager).await;
            }
        }
    }
    response
}

/// The MCP endpoint: sessions when the request belongs to one, else the fast path for a
/// plain tool call, else rmcp's stateless service. Behind `Arc`s: axum clones the
/// handler (and what it holds) for every request.
#[derive(Clone)]
struct McpEndpoint {
    stateless: Arc<StreamableHttpService<ContinuityMcp, NeverSessionManager>>,
    session: Option<SessionParts>,
    fast: Arc<crate::fast_call::FastCall>,
}

type SessionParts =
    (Arc<StreamableHttpService<ContinuityMcp, LocalSessionManager>>, Arc<LocalSessionManager>, Arc<SessionOwners>);

impl McpEndpoint {
    fn new(state: &AppState) -> Self {
        let session = state.settings.sessions.then(|| {
            let manager = Arc::new(LocalSessionManager::default());
            (Arc::new(mcp_session_service(state, manager.clone())), manager, Arc::new(SessionOwners::default()))
        });
        let fast = crate::fast_call::FastCall::new(ContinuityMcp::new(state.services.clone()), &state.settings.allowed_hosts);
        Self { stateless: Arc::new(mcp_service(state)), session, fast: Arc::new(fast) }
    }

    /// A request past authentication and the JSON-RPC guard.
    async fn answer(&self, req: Request) -> Response {
        match &self.session {
            Some((session, manager, owners)) if wants_session(&req) => {
                session_request(session.clone(), manager.clone(), owners.clone(), req).await
            }
            _ => match self.fast.answer(req).await {
                Ok(answered) => answered,
                Err(req) => self.stateless.handle(req).await.map(axum::body::Body::new),
            },
        }
    }

    /// `/mcp`, the hot path: what `authenticate` and `mcp_json_guard` do as a middleware
    /// each on the other routes, run in sequence here — a layer costs a boxed service
    /// clone and a boxed future per request. Same order, same answers: the caller is
    /// authenticated and rate-limited before the body is parsed. Its metrics route is
    /// the message's (`mcp:{tool}`), or the method's on `/mcp` when refused before it.
    async fn hot(&self, state: &AppState, mut req: Request) -> Response {
        let route = mcp_path_route(req.method());
        let mut resp = match crate::auth::admit(state, &mut req).await {
            Err(refused) => refused,
            Ok(tenant) => {
                let mut resp = match crate::body::guard_mcp_json(req).await {
                    Err(refused) => refused,
                    Ok((req, label)) => {
                        let mut resp = self.answer(req).await;
                        if let Some(label) = label {
                            resp.extensions_mut().insert(label);
                        }
                        resp
                    }
                };
                resp.extensions_mut().insert(tenant);
                resp
            }
        };
        if resp.extensions().get::<crate::observe::RouteLabel>().is_none() {
            resp.extensions_mut().insert(route);
        }
        resp
    }
}

/// The metrics route of a request to `/mcp` not counted under its message: its method
/// (one of a fixed set: a caller cannot invent metric names).
fn mcp_path_route(method: &http::Method) -> crate::observe::RouteLabel {
    crate::observe::RouteLabel(match *method {
        http::Method::POST => "POST /mcp",
        http::Method::GET => "GET /mcp",
        http::Method::DELETE => "DELETE /mcp",
        http::Method::OPTIONS => "OPTIONS /mcp",
        _ => "other /mcp",
    })
}

/// The application both hosts serve: every request passes the edge's steps in order
/// (request log and metrics, CORS, the per-address limit, the body cap, the browser
/// root) in one future, then `/mcp` goes to [`McpEndpoint::hot`] and every other path to
/// the router. Written by hand rather than as five `from_fn` layers and a route: each
/// layer cloned the stack under it and boxed a future for every request, and the
/// router's own dispatch cloned its boxed route — on the hot path, a fifth of the CPU.
#[derive(Clone)]
pub struct App(Arc<AppParts>);

struct AppParts {
    state: AppState,
    mcp: McpEndpoint,
    routes: Router,
}

impl App {
    async fn handle(self, mut req: Request) -> Response {
        let log = crate::observe::RequestLog::begin(&mut req);
        let resp = match crate::cors::admit(&self.0.state, &req) {
            crate::cors::Cors::Preflight(answer) => answer,
            crate::cors::Cors::Pass(allow) => crate::cors::expose(allow, self.admitted(req).await),
        };
        log.end(resp)
    }

    async fn admitted(&self, req: Request) -> Response {
        let AppParts { state, mcp, routes } = &*self.0;
        if let Some(limited) = crate::throttle::limited(&req)
            && let Some(refused) = crate::throttle::refuse(state, limited).await
        {
            return refused;
        }
        let req = match crate::body::buffer(req).await {
            Ok(req) => req,
            Err(refused) => return refused,
        };
        if let Some(redirect) = crate::dashboard::browser_root(state, &req) {
            return redirect;
        }
        if req.uri().path() == "/mcp" {
            return mcp.hot(state, req).await;
        }
        match tower::ServiceExt::oneshot(routes.clone(), req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        }
    }
}

impl tower::Service<Request> for App {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let app = self.clone();
        Box::pin(async move { Ok(app.handle(req).await) })
    }
}

pub fn router(state: AppState) -> App {
    let endpoint = McpEndpoint::new(&state);
    let mcp = endpoint.clone();
    let mcp_routes = Router::new()
        .route(
            "/",
            get(server_info).post(move |req: Request| {
                let endpoint = endpoint.clone();
                async move { endpoint.answer(req).await }
            }),
        )
        .route_layer(middleware::from_fn(mcp_json_guard));
    let protected = Router::new()
        .merge(mcp_routes)
        .route("/v1/admin/entities/{entity_type}/{id}", put(put_entity))
        .route("/v1/admin/tenants", get(crate::admin::list_tenants).post(crate::admin::create_tenant))
        .route("/v1/admin/tenants/{tenant}", get(crate::admin::show_tenant).patch(crate::admin::set_tenant))
        .route("/v1/admin/tenants/{tenant}/usage", get(crate::admin::usage))
        .route("/v1/admin/tenants/{tenant}/keys", get(crate::admin::list_keys).post(crate::admin::create_key))
        .route("/v1/admin/tenants/{tenant}/keys/{key}", delete(crate::admin::revoke_key))
        .route("/v1/admin/tenants/{tenant}/users", get(crate::admin::list_users).post(crate::admin::add_user))
        .route("/v1/admin/tenants/{tenant}/book/{project}/{id}", put(crate::admin::put_book_entry))
        .route(
            "/v1/admin/tenants/{tenant}/connectors/{source}/credential",
            put(crate::admin::put_credential).delete(crate::admin::delete_credential),
        )
        .route("/v1/admin/tenants/{tenant}/connectors/credentials", get(crate::admin::list_credentials))
        .route("/v1/admin/tenants/{tenant}/notify/channels", get(crate::admin::list_channels).post(crate::admin::add_channel))
        .route("/v1/admin/tenants/{tenant}/notify/channels/{id}", delete(crate::admin::remove_channel))
        .route("/v1/admin/tenants/{tenant}/notify/failures", get(crate::admin::notify_failures))
        .route("/v1/admin/tenants/{tenant}/users/{email}", patch(crate::admin::set_user))
        .route("/v1/admin/tenants/{tenant}/clients", post(crate::admin::create_client))
        .route("/v1/admin/tenants/{tenant}/clients/{client}/toolsets", put(crate::admin::set_client_toolsets))
        .route("/v1/admin/tenants/{tenant}/idps", post(crate::admin::add_idp).delete(crate::admin::remove_idp))
        .route("/v1/capabilities", get(crate::capabilities::list))
        .route("/v1/capabilities/{capability}", post(crate::capabilities::execute))
        .route("/v1/connectors", get(crate::ingest::connectors))
        .route("/v1/connectors/pulls", get(crate::sources::pulls))
        .route("/v1/connectors/{source}", post(crate::ingest::register).delete(crate::sources::disconnect))
        .route("/v1/connectors/{source}/connect", post(crate::sources::connect))
        .route("/v1/connectors/{source}/sync", post(crate::sources::sync_now))
        .route("/v1/connectors/{source}/interval", put(crate::sources::set_interval))
        .route("/v1/admin/source-apps", get(crate::sources::list_apps))
        .route("/v1/admin/source-apps/{source}", put(crate::sources::put_app).delete(crate::sources::delete_app))
        .route("/v1/ingest/failures", get(crate::ingest::failures))
        .route("/v1/ingest/{source}", post(crate::ingest::accept))
        .route("/v1/kb/documents", post(crate::ingest::put_kb))
        .route("/v1/kb/review", get(crate::ingest::review))
        .route("/v1/kb/review/{kind}/{doc}", delete(crate::ingest::forget_review))
        .route("/v1/kb/review/{kind}/{doc}/retry", post(crate::ingest::retry_review))
        .route("/v1/approvals", get(crate::approvals::list))
        .route("/v1/approvals/{id}/approve", post(crate::approvals::approve))
        .route("/v1/approvals/{id}/reject", post(crate::approvals::reject))
        .route("/v1/gates", get(crate::gates::list).post(crate::gates::set))
        .route("/v1/gates/verify", get(crate::gates::verify))
        .route("/v1/gates/request", post(crate::gates::request))
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    let oauth = Router::new()
        .route("/.well-known/oauth-authorization-server", get(crate::oauth::authorization_server_metadata))
        .route("/.well-known/openid-configuration", get(crate::oauth::authorization_server_metadata))
        .route("/.well-known/oauth-protected-resource", get(crate::oauth::protected_resource_metadata))
        .route("/.well-known/oauth-protected-resource/mcp", get(crate::oauth::protected_resource_metadata))
        .route("/.well-known/jwks.json", get(crate::oauth::jwks))
        .route("/oauth/register", post(crate::oauth::register))
        .route("/oauth/authorize", get(crate::oauth::authorize_get).post(crate::oauth::authorize_post))
        .route("/oauth/token", post(crate::oauth::token))
        .route("/oauth/revoke", post(crate::oauth::revoke))
        // A source sends the person back here; the single-use state is the credential.
        .route("/v1/connectors/oauth/callback", get(crate::sources::callback))
        // A source's signed deliveries; the signature is the credential.
        .route("/v1/webhooks/{tenant}/{source}", post(crate::sources::webhook));
    // The approvals console signs its own users in (an approver key, then a session).
    let console = Router::new()
        .route("/approvals", get(crate::console::show))
        .route("/approvals/login", post(crate::web::sign_in::<crate::console::Console>))
        .route("/approvals/logout", post(crate::web::sign_out::<crate::console::Console>))
        .route("/approvals/{id}/decide", post(crate::console::decide))
        .route("/approvals/gates/decide", post(crate::console::decide_gate))
        .route("/approvals/link/{token}", get(crate::console::link_show).post(crate::console::link_decide))
        // The dashboard signs its users in the same way; /api/stats also takes a bearer.
        .route("/dashboard", get(crate::dashboard::overview))
        .route("/dashboard/login", post(crate::web::sign_in::<crate::dashboard::Dashboard>))
        .route("/dashboard/logout", post(crate::web::sign_out::<crate::dashboard::Dashboard>))
        .route("/dashboard/memory", get(crate::dashboard::memory))
        .route("/dashboard/memory/{id}", get(crate::dashboard::entry))
        .route("/dashboard/memory/{id}/forget", post(crate::dashboard::forget))
        .route("/dashboard/memory/{id}/propose", post(crate::dashboard::propose))
        .route("/dashboard/graph", get(crate::dashboard::graph))
        .route("/dashboard/connectors", get(crate::dashboard::connectors))
        .route("/dashboard/connectors/{source}/connect", post(crate::dashboard::connect_source))
        .route("/dashboard/connectors/{source}/sync", post(crate::dashboard::sync_source))
        .route("/dashboard/connectors/{source}/disconnect", post(crate::dashboard::disconnect_source))
        .route("/dashboard/review", get(crate::dashboard::review))
        .route("/dashboard/review/{kind}/{doc}/retry", post(crate::dashboard::retry_review))
        .route("/dashboard/review/{kind}/{doc}/forget", post(crate::dashboard::forget_review))
        .route("/dashboard/notifications", get(crate::dashboard::notifications))
        .route("/dashboard/notifications/add", post(crate::dashboard::add_channel))
        .route("/dashboard/notifications/{id}/remove", post(crate::dashboard::remove_channel))
        .route("/dashboard/audit", get(crate::dashboard::audit))
        .route("/api/stats", get(crate::dashboard::stats_json));
    let routes = Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(crate::prometheus::metrics_text))
        .merge(oauth)
        .merge(console)
        .merge(protected)
        .fallback(not_found)
        .layer(middleware::from_fn(crate::observe::stamp_route))
        .with_state(state.clone());
    App(Arc::new(AppParts { state, mcp, routes }))
}

/// Readiness (SPEC §9): 200 when every check passes, else 503; each check is `ok` or
/// `failed` — what failed and what to do is logged for the operator (this route is
/// public, so it names no path, tenant or cause).
async fn healthz(State(state): State<AppState>) -> Response {
    let checks = state.services.readiness().await;
    let ready = checks.iter().all(|c| c.ok);
    for c in checks.iter().filter(|c| !c.ok) {
        tracing::warn!(check = c.name, detail = %c.detail, "not ready");
    }
    let body = json!({
        "status": if ready { "ok" } else { "unavailable" },
        "backend": state.services.backend_name(),
        "version": env!("CARGO_PKG_VERSION"),
        "checks": checks
            .iter()
            .map(|c| (c.name.to_owned(), json!(if c.ok { "ok" } else { "failed" })))
            .collect::<serde_json::Map<_, _>>(),
    });
    let status = if ready { http::StatusCode::OK } else { http::StatusCode::SERVICE_UNAVAILABLE };
    let mut r = (status, Json(body)).into_response();
    r.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    r
}

async fn not_found() -> ApiError {
    domain::Error::not_found("route").into()
}

/// `GET /`: server info as JSON, or a small page for a browser.
async fn server_info(
    State(state): State<AppState>,
    crate::web::BaseUrl(base): crate::web::BaseUrl,
    headers: HeaderMap,
) -> Response {
    let mcp_url = format!("{base}/mcp");
    let wants_html = headers.get(http::header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    if wants_html {
        let page = maud::html! {
            (maud::DOCTYPE) meta charset="utf-8"; title { "Continuity" } h1 { "Continuity" } p { "MCP endpoint: " code { (mcp_url) } }
        };
        return Html(page.into_string()).into_response();
    }
    Json(json!({
        "name": "continuity",
        "version": env!("CARGO_PKG_VERSION"),
        "mcp_url": mcp_url,
        "backend": state.services.backend_name(),
        "protocol_versions": mcp::server::PROTOCOL_VERSIONS.iter().map(ToString::to_string).collect::<Vec<_>>(),
    }))
    .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PutEntityBody {
    attributes: Attributes,
    #[serde(default = "default_pole")]
    pole_class: PoleClass,
    /// Optimistic concurrency: the version the caller last read; absent = create or replace.
    expected_version: Option<u64>,
}

fn default_pole() -> PoleClass {
    PoleClass::Object
}

/// Operator seeding path (needs `admin`): creates or replaces one entity.
async fn put_entity(
    State(state): State<AppState>,
    Extension(caller): Extension<CallerContext>,
    Path((entity_type, id)): Path<(String, String)>,
    StrictJson(body): StrictJson<PutEntityBody>,
) -> Result<Response, ApiError> {
    let entity_type = EntityType::new(entity_type)?;
    let id = Id::new(id)?;
    let expect = body.expected_version.map_or(Expect::Any, Expect::Version);
    let put = state.services.entities.put_or_queue(&caller, entity_type, id, body.pole_class, body.attributes, expect).await?;
    Ok(match put {
        services::entities::Put::Stored(e) => {
            Json(json!({ "type": e.entity_type.as_str(), "id": e.id.as_str(), "version": e.version })).into_response()
        }
        // The store is unreachable: the write waits in the queue (SPEC §4.4).
        services::entities::Put::Queued(e) => {
            (http::StatusCode::ACCEPTED, Json(json!({ "type": e.entity_type.as_str(), "id": e.id.as_str(), "queued": true })))
                .into_response()
        }
    })
}
