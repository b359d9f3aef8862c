//! The ADK: turns a stable capability name plus a tenant's configuration into a route
//! and planning hints, or a taxonomy error with its payload (SPEC §5).
//!
//! - [`capability`]: the grammar, `<domain>.<resource>.<operation>` and two-part names.
//! - [`policy`]: what a capability's policy is — min tier, scopes, channel, toolset,
//!   connector need, route destination. Each capability states its own constant beside
//!   its handler (`services::capabilities::typed`); the ADK keeps no table of them.
//! - [`schema`]: the canonical Spine schema (12 departments × 11 industries) as embedded
//!   data, and `resolve_schema(department, industry)`.
//! - [`resolve`]: the resolution algorithm of SPEC §5.2.
//!
//! Architecture Invariant: the ADK is pure. It performs no I/O, holds no mutable state
//! and no tenant data of its own (wall 3): callers pass the tenant's configuration in.
//! Its only dependencies are `domain`, `serde` and `serde_json`; embedded data is parsed
//! once into immutable statics.

pub mod capability;
pub mod policy;
pub mod resolve;
pub mod schema;

pub use capability::CapabilityName;
pub use policy::{CapabilitySpec, Channel, ConnectorNeed, RouteKind, SchemaUse};
pub use resolve::{Resolution, ResolveRequest, TenantView, resolve};
