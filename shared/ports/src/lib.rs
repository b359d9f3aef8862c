//! Ports: the traits behind which every external dependency sits (SPEC §2.2).
//!
//! - [`items`]: the narrow item port a record-of-truth backend implements (SQLite, DynamoDB):
//!   ordered items under a tenant-led partition, atomic multi-item writes with conditions.
//! - [`records`]: the typed stores (tenants, principals and API keys, entities,
//!   relationships, signals, memory, proposals, audit, idempotency keys), declared as
//!   traits and implemented **once** by [`records::Records`] over any [`items::ItemStore`],
//!   so both backends share one key layout and cannot drift apart.
//! - [`cache`], [`queue`], [`blob`]: the hot cache, the work queue and the blob store.
//! - [`clock`]: time as a port, so tests can move it.
//! - [`durability`]: a use case's writes made durable together, with one flush.
//! - [`fortress`]: storage tiers — the item store that mirrors promoted tenants' writes
//!   into the fortress, and their promotion records.
//! - [`health`]: the backend's own readiness checks (disk, cache) for `/healthz`.
//! - [`absent`]: a port a process was built without (the authorizer's queue and blobs):
//!   every call refuses with `UNAVAILABLE`.
//! - [`ratelimit`], [`signer`], [`vault`], [`search`], [`workflow`], [`graph`],
//!   [`oauth`], [`mail`]: rate limits, token signing, the Spine vault, hybrid search, the
//!   triage workflow, knowledge graphs, the authorization server's records and e-mail.
//!
//! Every method documents its `# Errors`; all errors are [`domain::Error`] taxonomy values.
//! Architecture Invariant: this crate names no backend technology.

pub mod absent;
pub mod blob;
pub mod cache;
pub mod clock;
pub mod durability;
pub mod fortress;
pub mod graph;
pub mod health;
pub mod items;
pub mod mail;
pub mod oauth;
pub mod queue;
pub mod ratelimit;
pub mod records;
pub mod search;
pub mod signer;
pub mod vault;
pub mod workflow;

use std::sync::Arc;

pub use blob::{BlobKey, BlobStore};
pub use cache::{Cache, CacheKey};
pub use clock::{Clock, SystemClock};
pub use items::ItemStore;
pub use queue::{Delivery, Queue, QueueMessage};
pub use ratelimit::{Rate, RateDecision, RateLimiter};
pub use records::Records;
pub use search::{Embedder, SearchIndex};
pub use signer::{PublicJwk, Signature, TokenSigner};
pub use workflow::Workflow;

/// Everything a service needs from a backend, wired once in each binary's `main`.
#[derive(Clone)]
pub struct Backend {
    pub records: Records,
    pub cache: Arc<dyn Cache>,
    pub queue: Arc<dyn Queue>,
    pub blobs: Arc<dyn BlobStore>,
    /// The durable second copy of promoted tenants (SPEC §3.4), read by the fallback
    /// chain as its last step; read-only ([`fortress::ReadOnly`]). `None` where no
    /// fortress is configured.
    pub fortress: Option<Records>,
    /// The fortress's writable store, for the mirror path alone: the dual-write holds
    /// its own, and a promotion's backfill and reconcile take this one
    /// (`services::admin::promotion` only; `tests/layering.rs` checks).
    pub fortress_writer: Option<Arc<dyn ItemStore>>,
    /// The token-signing key store (a key file on embedded, KMS on AWS).
    pub signer: Arc<dyn TokenSigner>,
    /// Per-tenant request buckets (in process on embedded, Redis on AWS).
    pub limiter: Arc<dyn RateLimiter>,
    /// Hybrid search over memory and the knowledge base (SQLite + in-process indexes on
    /// embedded, OpenSearch on AWS).
    pub search: Arc<dyn SearchIndex>,
    /// The embedder whose vectors `search` holds.
    pub embedder: Arc<dyn Embedder>,
    /// The triage workflow engine: Step Functions on AWS; `None` runs the embedded
    /// runner (`services::governance::EmbeddedRunner`) in process over `records`.
    pub workflow: Option<Arc<dyn Workflow>>,
    /// E-mail for notification channels (SMTP on embedded, SES on AWS); `None` where
    /// the deployment configured none.
    pub mailer: Option<Arc<dyn mail::Mailer>>,
    pub clock: Arc<dyn Clock>,
    /// The backend's own readiness checks (`/healthz`).
    pub readiness: Arc<dyn health::Readiness>,
    /// `embedded` or `aws`, for start-up messages and `/healthz`.
    pub name: &'static str,
}
