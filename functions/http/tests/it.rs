//! The continuity-http crate's one integration-test binary: each file beside this one is a module
//! of it (`cargo nextest run -p continuity-http -E 'test(/^adk_events::/)'` runs one file's tests).
//! One binary links the dependency tree once instead of once per file. A file added
//! here must be declared below: `tests/docs.rs` fails until it is.

#[path = "adk_events.rs"]
mod adk_events;
#[path = "admin_events.rs"]
mod admin_events;
/// What the modules share (servers, clients, keys).
mod common;
#[path = "ingest_events.rs"]
mod ingest_events;
#[path = "mcp_events.rs"]
mod mcp_events;
#[path = "oauth_events.rs"]
mod oauth_events;
