//! The MCP surface (SPEC §7.1), built on the official Rust SDK `rmcp`.
//!
//! - [`catalogue`]: every tool as data — name, description written for a model, input
//!   schema, minimum plan tier, required scope.
//! - [`server`]: [`server::ContinuityMcp`], the rmcp `ServerHandler`: lists only the tools
//!   the caller's scopes and plan allow, and enforces the same rule on `tools/call`.
//! - [`render`]: taxonomy errors as `isError` tool results, records as structured content
//!   plus a text rendering.
//!
//! The handler reads the caller from the HTTP request parts rmcp attaches to each
//! request; the gateway put it there after verifying the credential. Tools call
//! application services, never a store.

pub mod catalogue;
pub mod render;
pub mod server;

pub use server::ContinuityMcp;
