//! The gateway crate's one integration-test binary: each file beside this one is a module
//! of it (`cargo nextest run -p gateway -E 'test(/^admin_api::/)'` runs one file's tests).
//! One binary links the dependency tree once instead of once per file. A file added
//! here must be declared below: `tests/docs.rs` fails until it is.

#[path = "admin_api.rs"]
mod admin_api;
#[path = "approvals.rs"]
mod approvals;
#[path = "capabilities.rs"]
mod capabilities;
/// What the modules share (servers, clients, keys).
mod common;
#[path = "dashboard.rs"]
mod dashboard;
#[path = "fast_call.rs"]
mod fast_call;
#[path = "fuzz.rs"]
mod fuzz;
#[path = "graph.rs"]
mod graph;
#[path = "oauth.rs"]
mod oauth;
#[path = "operability.rs"]
mod operability;
#[path = "scope_walk.rs"]
mod scope_walk;
#[path = "template_routes.rs"]
mod template_routes;
#[path = "tools.rs"]
mod tools;
