//! The MCP surface (SPEC §7.1), built on the official Rust SDK `rmcp`.
//!
//! - [`tools`]: every MCP tool, from the one typed registration of each capability in
//!   `services` (`services::for_each_capability!`): name, title, description written for
//!   a model, input and output schemas derived from its types, and its handler.
//! - [`server`]: [`server::ContinuityMcp`], the rmcp `ServerHandler`: lists only the tools
//!   the caller's scopes and plan allow, and enforces the same rule on `tools/call`.
//! - [`render`]: taxonomy errors as `isError` tool results; each result type's text
//!   rendering for a model ([`render::Render`]) beside its structured content.
//!
//! The handler reads the caller from the HTTP request parts rmcp attaches to each
//! request; the gateway put it there after verifying the credential. Tools call
//! application services, never a store.

pub mod render;
pub mod server;
pub mod tools;

pub use server::{ContinuityMcp, IDEMPOTENCY_META};
