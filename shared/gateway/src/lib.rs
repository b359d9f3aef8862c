//! The HTTP edge, identical on `continuity serve` and behind API Gateway.
//!
//! - [`router`]: `fn router(state) -> axum::Router` with `/healthz`, `/mcp` (and the `/`
//!   alias), and every other route.
//! - [`admin`]: the admin HTTP API (`/v1/admin/…`: tenants, keys, users, clients, IdPs,
//!   entities).
//! - [`auth`]: the gateway middleware — authenticates (API key or OAuth access token),
//!   resolves the tenant, injects the [`domain::principal::CallerContext`] and enforces the
//!   tenant's rate limit; or, behind the Lambda authorizer, trusts the context API Gateway
//!   passed along.
//! - [`oauth`]: the authorization server's endpoints: discovery, registration, the login
//!   and consent pages, token and revocation.
//! - [`error`]: [`error::ApiError`], the one place a taxonomy error becomes an HTTP response.
//! - [`fast_call`]: the plain stateless `tools/call` answered without rmcp's per-request
//!   machinery (a strict subset of what rmcp serves; everything else goes to rmcp).
//! - [`body`]: body-size limits and strict JSON parsing (unknown fields are rejected);
//!   `envelope`: what `/mcp`'s guard reads of a message (one object? its method, its
//!   params' shape, the tool's name) in one pass, without building a JSON tree.
//! - [`lambda`]: the API Gateway adapter every HTTP Lambda serves.
//! - [`observe`]: one structured log line per request, with request id, tenant and
//!   route, and the request counted in the [`metrics`] registry under a fixed route name.
//! - [`prometheus`]: `GET /metrics` (Prometheus text; loopback or the `admin` scope).
//! - [`cors`]: CORS for configured browser origins on `/mcp`, OAuth and discovery.
//! - [`sources`]: connecting sources over HTTP — connect, the OAuth callback, sync now,
//!   disconnect, pulls, source apps, and the sources' signed webhooks.
//! - [`server`]: the hardened HTTP server of `continuity serve` (header and body read
//!   timeouts, a connection cap that sheds stalled connections first, graceful shutdown).
//! - [`throttle`]: per-address limits on the routes callable without a credential.
//! - [`capabilities`]: the capability API (`GET /v1/capabilities`, `POST
//!   /v1/capabilities/{name}`); [`ingest`]: the ingest API, connectors, the KB documents
//!   and the review queue; [`approvals`]: the approver API; [`gates`]: the gate API
//!   (set, verify with 200/403/404, request, list); [`console`]: the approvals console
//!   (its own sign-in, signed session, CSRF on every form; proposals and gate requests);
//!   [`dashboard`]: the dashboard (`/dashboard…`: overview, memory browser, graph,
//!   connectors, review queue, notifications, audit;
//!   `GET /api/stats`), signed in like the console, and a browser's `GET /` sent to it.
//! - [`web`]: what those pages share: the request's [`web::BaseUrl`] as an extractor, the
//!   sign-in, sign-out and signed form ([`web::SignedForm`]) of the console and the
//!   dashboard, and the locked-down page responses (HTML built with `maud`, which escapes
//!   every interpolated value).

pub mod admin;
pub mod approvals;
pub mod auth;
pub mod body;
pub mod capabilities;
pub mod console;
pub mod cors;
pub mod dashboard;
mod envelope;
pub mod error;
pub mod fast_call;
pub mod gates;
pub mod ingest;
pub mod lambda;
pub mod oauth;
pub mod observe;
pub mod prometheus;
pub mod router;
pub mod server;
pub mod sources;
pub mod throttle;
pub mod web;

pub use router::{App, AppState, GatewaySettings, router};
