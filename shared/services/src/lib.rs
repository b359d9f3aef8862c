//! Application services: the use cases every edge (HTTP, MCP, CLI, Lambda) calls.
//!
//! - [`auth`]: API-key issuance and verification into a [`domain::principal::CallerContext`].
//! - [`capabilities`]: every capability call resolved through the ADK, then executed.
//! - [`entities`]: reading Spine entities through the Spine Cache, keyword search.
//! - [`admin`]: tenants, keys, users, service clients and trusted IdPs — every change
//!   audited with who made it.
//! - [`audit`]: the audit ledger, group-committed.
//! - [`oauth`]: the authorization server (discovery, registration, sign-in and consent,
//!   the grants, revocation), its one token library and the ID-JAG verifier.
//! - [`tools`]: the canonical MCP tools beyond `spine.entity.*`, and the prompts.
//! - [`graph`]: the `graph` toolset (knowledge graphs in personal and project scopes).
//! - [`engineering`]: a project's engineering records for coding agents (tasks, notes,
//!   ADRs, error fixes…), indexed in the project's scope.
//! - [`gates`]: gates — a person authorizes or blocks an action (a push, a deploy);
//!   scripts and agents verify them, agents may only request them.
//! - [`governance`]: triage, the workflow's task code, decisions, redaction of secrets
//!   and personal data, the single writer of org memory, carrying out approved actions.
//! - [`actions`]: the connector adapters approved actions use (HubSpot, Salesforce,
//!   Zendesk, Jira, Stripe write requests, retries, the answer read into the Spine).
//! - [`work`]: tasks dispatched to people and agents through the queue.
//! - [`notify`]: notification channels (signed webhooks, Slack) and event deliveries.
//! - [`sources`]: connected sources — apps, OAuth connects, pulls (initial and delta), their
//!   schedule, and signed webhooks.
//! - [`search`]: hybrid search confined to the caller's scopes, verified indexing, KB
//!   documents, the reindex.
//! - [`ingest`]: connectors, the ingest API's checks and the pipeline (loader,
//!   normalizer, writer).
//! - [`backup`]: blob backups of the Spine, restore and compaction;
//!   [`backup_records`]: complete backups of every record of a tenant, restored and
//!   checked by hash per record type.
//! - [`maintenance`]: retention (ledger, session memory, expired OAuth records) and the
//!   scheduled jobs; [`changes`]: in-process change notices for MCP sessions.
//! - [`consumer`]: the work-queue consumer, handing each message to the service its
//!   kind names.
//! - [`calls`]: tool calls with an idempotency key run once per principal and key.
//! - [`stats`]: the dashboard's figures of a tenant (store counts, this process's cache
//!   and latency).
//! - [`migrate`]: import (the reference `memory.jsonl`, mem0 and generic JSONL exports,
//!   Markdown notes, our bundle) checked whole before writing and read back by hash;
//!   export (our bundle, `memory.jsonl`).
//!
//! Services receive a [`ports::Backend`] and never know which backend it is.
//! [`Services::new`] builds each service once and hands each the others it uses (their
//! constructors are crate-private, and `tests/layering.rs` holds that no other place in
//! the crate builds one): one change bus, one embedded runner, one audit writer. They own
//! their policy — audit, limits, error logging ([`log_failure`]) — so no edge can forget
//! it. Architecture Invariant: no service names a backend; the transports they know are
//! outbound HTTP calls: the ID-JAG verifier's (an IdP's JWKS) and the connector
//! adapters' (a source's write API).

pub mod actions;
pub mod admin;
pub mod audit;
pub mod auth;
pub mod backup;
pub mod backup_records;
pub mod calls;
pub mod capabilities;
pub mod changes;
pub mod consumer;
pub mod engineering;
pub mod entities;
pub mod gates;
pub mod governance;
pub mod graph;
pub mod ingest;
pub mod maintenance;
pub mod migrate;
pub mod notify;
pub mod oauth;
pub mod search;
pub mod sources;
pub mod stats;
pub mod tools;
pub mod work;

use ports::Backend;

/// Every service, built once per process from one backend. A cheap handle: clones share
/// one [`ServiceSet`] (every request and MCP handler takes a clone, so a clone is one
/// reference count, not one per port).
#[derive(Clone)]
pub struct Services(std::sync::Arc<ServiceSet>);

impl std::ops::Deref for Services {
    type Target = ServiceSet;
    fn deref(&self) -> &ServiceSet {
        &self.0
    }
}

/// The services themselves, reached through [`Services`].
pub struct ServiceSet {
    pub backend: Backend,
    pub auth: auth::Authenticator,
    pub entities: entities::EntityService,
    pub admin: admin::AdminService,
    pub audit: audit::AuditService,
    pub capabilities: capabilities::CapabilityService,
    pub oauth: oauth::OAuthService,
    /// In-process change notices for MCP sessions.
    pub changes: changes::Changes,
    /// The `graph` toolset (knowledge graphs in personal and project scopes).
    pub graph: graph::GraphService,
    /// The Spine write path: connectors, the ingest API and the pipeline consumer.
    pub ingest: ingest::IngestService,
    /// Blob backups of the Spine and their replay.
    pub backup: backup::BackupService,
    /// Retention: the audit ledger, session memory, expired OAuth records.
    pub maintenance: maintenance::MaintenanceService,
    /// Triage, decisions and the single writer of org memory.
    pub governance: governance::GovernanceService,
    /// Gates: set by people, verified by scripts, requested by agents.
    pub gates: gates::GateService,
    /// A project's engineering records.
    pub engineering: engineering::EngineeringService,
    /// Hybrid search, verified indexing and the review queue.
    pub search: search::SearchService,
    /// Tasks dispatched to people and agents.
    pub work: work::TaskService,
    /// Connected sources: apps, connects, pulls and their schedule.
    pub sources: sources::SourceService,
    /// Notification channels and the deliveries of events to them.
    pub notify: notify::NotifyService,
    /// The work-queue consumer (pipeline, pulls, queued Spine writes, tasks, upkeep).
    pub consumer: consumer::Consumer,
}

impl Services {
    /// The services of a Lambda function: as [`Services::new`], with every audit record
    /// durable before the call that made it returns (a frozen function writes nothing).
    pub fn for_lambda(backend: Backend) -> Self {
        let s = Self::new(backend);
        s.audit.make_reads_durable();
        s
    }

    /// The authorizer's one service, alone: API keys and tokens checked into a caller.
    /// Nothing else is built, so the function links only what authentication reaches
    /// (the store, the cache, the limiter, the signing keys) — not the tools, search or
    /// the workflow (`store_aws::authorizer_backend`).
    pub fn authenticator(backend: Backend) -> auth::Authenticator {
        let tokens = oauth::tokens::TokenService::new(backend.clone());
        auth::Authenticator::new(backend, tokens)
    }

    pub fn new(backend: Backend) -> Self {
        let b = || backend.clone();
        let tokens = oauth::tokens::TokenService::new(b());
        let auth = auth::Authenticator::new(b(), tokens.clone());
        let changes = changes::Changes::new();
        let audit = audit::AuditService::new(b());
        let search = search::SearchService::new(b(), audit.clone());
        let notify = notify::NotifyService::new(b(), tokens.clone());
        let work = work::TaskService::new(b(), notify.clone());
        let backup = backup::BackupService::new(b());
        let entities = entities::EntityService::new(b(), auth.clone(), changes.clone());
        let graph = graph::GraphService::new(b(), changes.clone());
        let gates = gates::GateService::new(b(), audit.clone(), notify.clone());
        let engineering = engineering::EngineeringService::new(b(), audit.clone(), search.clone());
        let ingest = ingest::IngestService::new(b(), entities.clone(), audit.clone());
        let governance = governance::GovernanceService::new(
            b(),
            governance::tasks::Writers {
                entities: entities.clone(),
                ingest: ingest.clone(),
                engineering: engineering.clone(),
                search: search.clone(),
                notify: notify.clone(),
            },
        );
        let maintenance = maintenance::MaintenanceService::new(
            b(),
            maintenance::Upkept {
                gates: gates.clone(),
                engineering: engineering.clone(),
                search: search.clone(),
                backup: backup.clone(),
                governance: governance.clone(),
                notify: notify.clone(),
            },
        );
        let capabilities = capabilities::CapabilityService::new(
            b(),
            capabilities::Reach {
                auth: auth.clone(),
                entities: entities.clone(),
                graph: graph.clone(),
                audit: audit.clone(),
                gates: gates.clone(),
                engineering: engineering.clone(),
                search: search.clone(),
                governance: governance.clone(),
                work: work.clone(),
            },
        );
        let sources = sources::SourceService::new(b(), ingest.clone(), audit.clone(), notify.clone());
        let consumer = consumer::Consumer::new(
            b(),
            consumer::Handlers {
                ingest: ingest.clone(),
                entities: entities.clone(),
                work: work.clone(),
                maintenance: maintenance.clone(),
                sources: sources.clone(),
                notify: notify.clone(),
                search: search.clone(),
            },
        );
        Self(std::sync::Arc::new(ServiceSet {
            capabilities,
            oauth: oauth::OAuthService::new(b(), auth.clone(), tokens),
            admin: admin::AdminService::new(b()),
            consumer,
            sources,
            notify,
            ingest,
            auth,
            entities,
            audit,
            backup,
            maintenance,
            gates,
            engineering,
            governance,
            search,
            work,
            changes,
            graph,
            backend,
        }))
    }
}

impl ServiceSet {
    /// `embedded` or `aws`, for banners and `/healthz`.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name
    }

    /// The backend clock's now (pages that say how long ago something happened).
    pub fn now(&self) -> domain::Timestamp {
        self.backend.clock.now()
    }

    /// The embedder the search index holds vectors of (`local:…`, `hashing`, `bedrock:…`).
    pub fn embedder_name(&self) -> &str {
        self.backend.embedder.name()
    }

    /// Whether this process can do its work (`/healthz`): the backend's own checks (disk
    /// and database file on embedded, the cache on AWS), the store answers a read, and
    /// the vault opens a tenant's data key. Each failed check says what is wrong. The
    /// backend's checks and the store's run at once (on AWS: Redis and DynamoDB), so a
    /// probe waits for the slower of the two, not their sum.
    pub async fn readiness(&self) -> Vec<ports::health::Check> {
        use ports::health::Check;
        use ports::records::TenantStore as _;
        let detail = |e: &domain::Error| e.internal.clone().unwrap_or_else(|| e.message.clone());
        let store = async {
            match self.backend.records.list_tenants(&domain::PageRequest::first(1)).await {
                Ok(page) => vec![
                    Check::ok("store"),
                    match page.items.first() {
                        Some(t) => match self.backend.records.check_vault(t).await {
                            Ok(()) => Check::ok("vault"),
                            Err(e) => Check::failed("vault", format!("tenant {t}'s data key does not open: {}", detail(&e))),
                        },
                        None => Check::ok("vault"),
                    },
                ],
                Err(e) => vec![Check::failed("store", detail(&e))],
            }
        };
        let (mut checks, store) = tokio::join!(self.backend.readiness.check(), store);
        checks.extend(store);
        checks
    }
}

/// How every surface (HTTP, console, MCP, Lambda) logs a failed request: an `INTERNAL`
/// error at `error` with its cause, any other error that carries a cause (a dependency's
/// failure) at `warn`, a plain client error not at all. The client only ever sees the
/// taxonomy code and message; the operator reads the cause here.
pub fn log_failure(e: &domain::Error, surface: &'static str) {
    match (&e.internal, e.code) {
        (Some(cause), domain::ErrorCode::Internal) => tracing::error!(surface, code = %e.code, cause = %cause, "request failed"),
        (Some(cause), _) => tracing::warn!(surface, code = %e.code, cause = %cause, "request failed"),
        (None, _) => {}
    }
}

/// Lower-case hex SHA-256: how every secret (API keys, client secrets, codes, refresh
/// tokens, CSRF tokens) is stored and compared.
pub fn sha256_hex(s: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// `bytes` random bytes as lower-case hex: secrets, codes, tokens, opaque ids (and the
/// console's sign-in CSRF secret).
pub fn random_token(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::fill(&mut buf[..]);
    hex::encode(buf)
}

/// A fresh random id for records the system creates.
pub(crate) fn new_id(backend: &Backend) -> domain::Id {
    domain::Id::generate(backend.clock.now(), rand::random())
}

/// Every item of a paged listing (pages of 500), up to `cap` items, and whether it
/// stopped at the cap.
///
/// # Errors
/// The listing's.
pub(crate) async fn all_pages<T, F, Fut>(cap: usize, mut page_fn: F) -> domain::Result<(Vec<T>, bool)>
where
    F: FnMut(domain::PageRequest) -> Fut,
    Fut: std::future::Future<Output = domain::Result<domain::Page<T>>>,
{
    let mut out = Vec::new();
    let mut page = domain::PageRequest::first(500);
    loop {
        let p = page_fn(page).await?;
        out.extend(p.items);
        match p.next_cursor {
            Some(c) if out.len() < cap => page = domain::PageRequest::after(500, c),
            Some(_) => return Ok((out, true)),
            None => return Ok((out, false)),
        }
    }
}
