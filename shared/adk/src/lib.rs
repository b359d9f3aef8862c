//! The ADK: turns a stable capability name plus a tenant's configuration into a route
//! and planning hints, or a taxonomy error with its payload (SPEC §5).
//!
//! - [`capability`]: the grammar, `<domain>.<resource>.<operation>` and two-part names.
//! - [`registry`]: every capability as data — min tier, scopes, channel, connector need,
//!   route destination.
//! - [`schema`]: the canonical Spine schema (12 departments × 11 industries) as embedded
//!   data, and `resolve_schema(department, industry)`.
//! - [`resolve`]: the resolution algorithm of SPEC §5.2.
//!
//! Architecture Invariant: the ADK is pure. It performs no I/O, holds no mutable state
//! and no tenant data of its own (wall 3): callers pass the tenant's configuration in.
//! Its only dependencies are `domain`, `serde` and `serde_json`; embedded data is parsed
//! once into immutable statics.

pub mod capability;
pub mod registry;
pub mod resolve;
pub mod schema;

pub use capability::CapabilityName;
pub use registry::{CapabilitySpec, Channel, ConnectorNeed, RouteKind};
pub use resolve::{Resolution, ResolveRequest, TenantView, resolve};
