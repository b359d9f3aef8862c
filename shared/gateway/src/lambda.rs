//! The Lambda adapter: API Gateway (REST) events in, the shared router out. Every HTTP
//! Lambda (`continuity-http`, deployed once per group of routes) serves [`app`] with
//! `lambda_http::run`.
//!
//! [`app`] wraps [`gateway::router`] with one layer that (1) routes on the raw resource
//! path, so `/prod/mcp` and `/mcp` mean the same whatever the stage, and (2) turns the
//! `authorizer` Lambda's context into the [`CallerContext`] the router expects. Only API
//! Gateway can put that context into the event, so the router runs in
//! [`AuthMode::TrustAuthorizer`] and never re-verifies the credential.

use std::sync::Arc;

use crate::auth::AuthMode;
use crate::{AppState, GatewaySettings};
use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use domain::principal::{CallerContext, Scopes, Toolsets};
use domain::tenant::PlanTier;
use domain::{Id, TenantId};
use lambda_http::RequestExt;
use lambda_http::request::RequestContext;
use services::Services;
use tokio_util::sync::CancellationToken;

/// Parses the authorizer's context (all values are strings, as API Gateway passes them).
/// `None` when anything is missing or malformed: the router then answers 401.
pub fn caller_from_authorizer(fields: &std::collections::HashMap<String, serde_json::Value>) -> Option<CallerContext> {
    let s = |k: &str| fields.get(k).and_then(serde_json::Value::as_str);
    let list = |k: &str| -> Vec<String> {
        s(k).map(|v| v.split(',').map(str::trim).filter(|x| !x.is_empty()).map(str::to_owned).collect()).unwrap_or_default()
    };
    Some(CallerContext {
        tenant: TenantId::new(s("tenant")?).ok()?,
        principal: Id::new(s("principal")?).ok()?,
        scopes: Scopes::parse(s("scopes")?).ok()?,
        plan: PlanTier::parse(s("plan")?).ok()?,
        teams: list("teams"),
        projects: list("projects"),
        credential: s("credential").unwrap_or("authorizer").to_owned(),
        client: None,
        toolsets: s("toolsets").and_then(|t| Toolsets::parse(t).ok()).unwrap_or_default(),
    })
}

pub use lambda_support::api_base_url;

async fn from_api_gateway(mut req: Request, next: Next) -> Response {
    let (caller, stage, source) = match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV1(ctx)) => (
            caller_from_authorizer(&ctx.authorizer.fields),
            ctx.stage.clone(),
            ctx.identity.source_ip.as_deref().and_then(|ip| ip.parse::<std::net::IpAddr>().ok()),
        ),
        _ => (None, None, None),
    };
    // The client's address as API Gateway saw it (per-address limits, sign-in limits).
    req.extensions_mut().remove::<crate::server::ClientAddr>();
    if let Some(ip) = source {
        req.extensions_mut().insert(crate::server::ClientAddr(ip));
    }
    // Without a configured public URL, the base is the URL the client used:
    // `https://{Host}/{stage}` (what the authorizer derives too).
    if let Some(host) = req.headers().get(http::header::HOST).and_then(|h| h.to_str().ok()) {
        let base = api_base_url(host, stage.as_deref());
        req.extensions_mut().insert(crate::web::DerivedBaseUrl(base));
    }
    // Never trust a context a client could have smuggled in some other way.
    req.extensions_mut().remove::<CallerContext>();
    if let Some(c) = caller {
        req.extensions_mut().insert(c);
    }
    let raw = req.raw_http_path().to_owned();
    if !raw.is_empty() && raw != req.uri().path() {
        let pq = match req.uri().query() {
            Some(q) => format!("{raw}?{q}"),
            None => raw,
        };
        if let Ok(uri) = pq.parse::<http::Uri>() {
            *req.uri_mut() = uri;
        }
    }
    next.run(req).await
}

/// A Lambda's whole HTTP application.
pub fn app(services: Services, public_url: String) -> Router {
    app_with_hosts(services, public_url, Vec::new(), Vec::new())
}

/// [`app`] that also checks `Host` on `/mcp` against `allowed_hosts` (the API's domains,
/// `CONTINUITY_ALLOWED_HOSTS`; empty leaves it to API Gateway) and lets browser pages of
/// `allowed_origins` call it (`CONTINUITY_ALLOWED_ORIGINS`; empty: no origin may).
/// Every audit record is durable before a handler returns, and the invocation's metrics
/// are printed as EMF lines when it ends: Lambda freezes the process after the response.
pub fn app_with_hosts(
    services: Services,
    public_url: String,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
) -> Router {
    services.audit.make_reads_durable();
    let settings = GatewaySettings {
        public_url: public_url.trim_end_matches('/').to_owned(),
        allowed_origins,
        // API Gateway only routes its own hostnames (and the custom domain) here; a
        // configured list checks them once more (DNS-rebinding protection in depth).
        allowed_hosts,
        auth_mode: AuthMode::TrustAuthorizer,
        // Lambda cannot keep a session between invocations.
        sessions: false,
        shutdown: CancellationToken::new(),
    };
    let inner = crate::router(AppState { services, settings: Arc::new(settings) });
    // `Router::layer` runs after routing, so the path rewrite wraps the inner router from
    // an outer one whose only route is the fallback: the inner router routes afresh.
    Router::new().fallback_service(inner).layer(middleware::from_fn(from_api_gateway)).layer(middleware::from_fn(flush_metrics))
}

/// Prints the invocation's metrics (CloudWatch EMF) once its response is ready.
async fn flush_metrics(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    metrics::flush_emf();
    resp
}

pub use lambda_support::init_logging;
