//! What a capability's policy constant (`Capability::SPEC`) is written with, in one
//! import: `use crate::capabilities::policy::*;` beside a capability's handler.

pub use adk::policy::{CapabilitySpec, Channel, ConnectorNeed, RouteKind, SchemaUse};
pub use domain::principal::{Scope, Toolset};
pub use domain::tenant::PlanTier;
