//! The domain of Continuity: the nouns every other crate talks about.
//!
//! - [`ids`]: validated identifiers (tenant slugs, entity types and ids…), parsed once at the edge.
//! - [`tenant`]: tenants with their plan tier, department, industry and storage tier.
//! - [`principal`]: users, clients and API keys, their roles and OAuth scopes.
//! - [`spine`]: entities, relationships, signals, tasks, book entries, KB documents.
//! - [`memory`]: the three memory types, the six scopes, governance state and lineage.
//! - [`proposal`]: what an agent wants the organisation to remember.
//! - [`action`]: governed actions — a connector operation an approved proposal carries out, and its credential.
//! - [`audit`]: the audit ledger record.
//! - [`connector`]: connector status (SPEC §4.5): the state machine of a tenant's link to a source tool.
//! - [`notify`]: notification channels (signed webhooks, Slack), the events they receive, failed deliveries.
//! - [`source`]: connected sources — the deployment's source apps, a tenant's grant, a pending connect, a pull's state.
//! - [`error`]: the failure taxonomy of SPEC §7.3, mapped once at every edge.
//! - [`page`]: cursor pagination shared by every list.
//! - [`graph`]: the knowledge-graph toolset's entities, relations and observations.
//! - [`engineering`]: a project's engineering records (tasks, notes, ADRs, error fixes…).
//! - [`gate`]: gates — a person's standing authorization or block of an action (a push, a deploy).
//! - [`oauth`]: OAuth clients, grants, codes, refresh tokens, users' logins, trusted IdPs.
//! - [`value`]: the domain's own dynamic value (entity attributes), no wire type.
//!
//! Architecture Invariant: this crate performs no I/O and names no AWS SDK, no SQLite,
//! no HTTP and no JSON wire type. It derives `serde` traits so adapters can store its
//! records, but it never chooses a wire format.

pub mod action;
pub mod audit;
pub mod connector;
pub mod engineering;
pub mod error;
pub mod gate;
pub mod graph;
pub mod ids;
pub mod memory;
pub mod notify;
pub mod oauth;
pub mod page;
pub mod principal;
pub mod proposal;
pub mod source;
pub mod spine;
pub mod tenant;
pub mod value;

pub use error::{Error, ErrorCode, FieldError};
pub use ids::{EntityId, EntityType, Id, TenantId, Timestamp};
pub use page::{Page, PageRequest};

/// The result type of every fallible domain, port and service function.
pub type Result<T, E = Error> = std::result::Result<T, E>;
