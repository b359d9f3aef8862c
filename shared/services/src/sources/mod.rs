//! Connected sources (SPEC §4.5, seed 000 §6): a tenant presses "connect", signs in at
//! the source, and its records arrive and stay current — no pusher to write.
//!
//! - **Apps** ([`SourceService::set_app`]): the operator registers each source's OAuth
//!   app once per deployment (client id and secret, sealed by the vault).
//! - **Connect** ([`SourceService::start_connect`] → the source's sign-in →
//!   [`SourceService::callback`]): an authorization-code flow with a single-use,
//!   10-minute `state` (and PKCE where the source takes it); the tokens are kept sealed.
//!   Stripe takes a restricted API key instead ([`SourceService::connect_with_key`]).
//!   `not_connected → oauth_pending → oauth_complete`, then the initial pull.
//! - **Pull** ([`SourceService::run`], one `connector.sync` queue message): pages read as
//!   each source documents ([`pull`]), each page's records into the ingest pipeline
//!   unchanged and its deletions marked (`deleted_at`), the cursor saved after every
//!   page — a pull cut short resumes from the last committed page, and records are
//!   idempotent, so nothing is written twice. A run reads at most its [`Budget`] and
//!   queues its own continuation. Tokens refresh before they expire and once on a 401;
//!   a refused grant puts the connector in `sync_error` asking for a reconnect, and
//!   nothing retries it until then.
//! - **Schedule** ([`SourceService::queue_due`]): every connector whose next pull is due
//!   gets one `connector.sync` message; `continuity serve` calls it every 30 s, on AWS
//!   the maintenance function every 5 minutes. The pipeline consumer runs the message
//!   on both backends.
//! - **Webhooks** ([`webhooks`]): Stripe, HubSpot, Zendesk and Jira deliveries, signed
//!   with the app's webhook secret, taken once, into the same pipeline.

pub mod catalog;
pub mod client;
mod connect;
pub mod pull;
pub mod webhooks;

use std::time::{Duration, Instant};

use domain::connector::{ConnectorSource, ConnectorState};
use domain::source::{Grant, SourceApp, SyncPhase, SyncState};
use domain::tenant::PlanTier;
use domain::{Error, ErrorCode, PageRequest, Result, TenantId, Timestamp};
use ports::Backend;
use ports::queue::QueueMessage;
use ports::records::{ConnectorStore, Expect, SourceStore, TenantStore};
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use self::catalog::Source;
use self::client::Failure;
use self::pull::{Api, Cursor};
use crate::audit::AuditService;
use crate::ingest::IngestService;

/// Queue message kind of one pull run.
pub const KIND_SYNC: &str = "connector.sync";
/// How long a connect's sign-in may take.
pub const CONNECT_TTL_MS: i64 = 10 * 60 * 1000;
/// A run holds its connector for its budget and this much more (a page started at the
/// end, with its retries); a crashed run's lease then lapses.
const LEASE_MARGIN_MS: i64 = 60 * 1000;
/// A token this close to expiry is refreshed before use.
const REFRESH_MARGIN_MS: i64 = 60 * 1000;

/// The shortest time between a connector's delta pulls a plan allows (seconds).
pub fn min_interval_secs(plan: PlanTier) -> u64 {
    match plan {
        PlanTier::Free => 3600,
        PlanTier::Starter => 900,
        PlanTier::Pro => 300,
        PlanTier::Enterprise => 60,
    }
}

/// Seconds between a connector's delta pulls until someone sets its own: 5 minutes, or
/// the plan's shortest when that is longer.
pub fn default_interval_secs(plan: PlanTier) -> u64 {
    min_interval_secs(plan).max(300)
}

/// The longest interval a connector may be given (a day).
pub const MAX_INTERVAL_SECS: u64 = 86_400;

/// How much one run may read before it queues its continuation.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub pages: u32,
    pub time: Duration,
}

impl Budget {
    /// `continuity serve`: long runs, in process.
    pub const SERVE: Self = Self { pages: 200, time: Duration::from_secs(120) };
    /// A Lambda invocation: inside the pipeline function's 60 s timeout (a page that
    /// started before the budget ran out may take up to the client's 10 s timeout).
    pub const LAMBDA: Self = Self { pages: 10, time: Duration::from_secs(8) };
}

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RunReport {
    pub pages: u32,
    pub records: u64,
    pub deleted: u64,
    /// The pass finished (the connector completes when the pipeline has written it).
    pub finished: bool,
    /// Another run holds the connector, or it is not connected: nothing was read.
    pub skipped: Option<String>,
    /// A continuation was queued (the budget ran out first).
    pub continued: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct SyncMessage {
    source: String,
}

#[derive(Clone)]
pub struct SourceService {
    backend: Backend,
    ingest: IngestService,
    audit: AuditService,
    notify: crate::notify::NotifyService,
}

fn connector(source: Source) -> ConnectorSource {
    ConnectorSource::new(source.name()).unwrap_or_else(|_| unreachable!("source names are valid slugs"))
}

fn pkce_pair() -> (String, String) {
    use base64::Engine as _;
    use sha2::Digest as _;
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes[..]);
    let verifier = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

fn random_state() -> String {
    use base64::Engine as _;
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes[..]);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn query(pairs: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

/// The stage name the connector's state gives a failure.
fn stage_of(phase: SyncPhase) -> ConnectorState {
    match phase {
        SyncPhase::Initial => ConnectorState::SyncingInitial,
        SyncPhase::Delta => ConnectorState::SyncingDelta,
    }
}

impl SourceService {
    pub(crate) fn new(
        backend: Backend,
        ingest: IngestService,
        audit: AuditService,
        notify: crate::notify::NotifyService,
    ) -> Self {
        Self { backend, ingest, audit, notify }
    }

    fn now(&self) -> Timestamp {
        self.backend.clock.now()
    }

    // ---- apps ------------------------------------------------------------------------

    /// Registers (or replaces) the deployment's app at `source`, sealed.
    ///
    /// # Errors
    /// `NOT_FOUND` for a source that cannot be connected; `INVALID_REQUEST` for a
    /// malformed app, a base URL that is not the source's, Stripe (it takes a key per
    /// tenant, no app) or a store without a vault; `UNAVAILABLE`.
    pub async fn set_app(&self, source: &str, mut app: SourceApp) -> Result<()> {
        let s = Source::parse(source)?;
        if !s.uses_oauth() && app.webhook_secret.is_none() {
            return Err(Error::invalid_field(
                "source",
                "Stripe is connected with each tenant's restricted API key (continuity connector connect stripe --api-key-stdin); register an app for it only to give its webhook secret (--webhook-secret)",
            ));
        }
        app.base_url = app.base_url.map(|u| u.trim().trim_end_matches('/').to_owned()).filter(|u| !u.is_empty());
        if let Some(url) = &app.base_url {
            s.check_base_url(url)?;
        }
        s.endpoints(Some(&app))?;
        self.backend.records.put_source_app(&connector(s), &app).await?;
        tracing::info!(source = s.name(), "source app registered");
        Ok(())
    }

    /// # Errors
    /// `NOT_FOUND` when none is registered; `UNAVAILABLE`.
    pub async fn remove_app(&self, source: &str) -> Result<()> {
        let s = Source::parse(source)?;
        if !self.backend.records.delete_source_app(&connector(s)).await? {
            return Err(Error::not_found(format!("a {} app", s.title())));
        }
        Ok(())
    }

    /// The sources with an app registered (never the secrets).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn apps(&self) -> Result<Vec<String>> {
        self.backend.records.source_app_names().await
    }

    async fn app(&self, s: Source) -> Result<SourceApp> {
        self.backend.records.get_source_app(&connector(s)).await?.ok_or_else(|| {
            let mut e = Error::new(
                ErrorCode::ConnectorNotAvailable,
                format!(
                    "no {} app is registered on this deployment; an operator registers it once: continuity source-app set {} --client-id … --client-secret-stdin",
                    s.title(),
                    s.name()
                ),
            );
            e.payload.connect_url = None;
            e
        })
    }

    // ---- schedule --------------------------------------------------------------------

    pub(super) async fn queue(&self, tenant: &TenantId, s: Source) -> Result<()> {
        let body = serde_json::to_vec(&SyncMessage { source: s.name().to_owned() }).map_err(Error::internal)?;
        self.backend
            .queue
            .send(&QueueMessage {
                tenant: tenant.clone(),
                kind: KIND_SYNC.into(),
                idempotency_key: format!("sync:{}:{}", s.name(), crate::new_id(&self.backend)),
                body,
            })
            .await
    }

    /// Pulls now ("Sync now"): due at once, a run queued.
    ///
    /// # Errors
    /// `NOT_FOUND` when the source is not connected by sign-in or key; `CONFLICT` when it
    /// needs a reconnect; `UNAVAILABLE`.
    pub async fn sync_now(&self, tenant: &TenantId, source: &str) -> Result<()> {
        let s = Source::parse(source)?;
        let src = connector(s);
        let Some(mut state) = self.backend.records.get_sync(tenant, &src).await? else {
            return Err(Error::not_found(format!("a {} connection of tenant {tenant} (connect it first)", s.title())));
        };
        if state.needs_reconnect {
            return Err(Error::conflict(format!(
                "{} refused the grant: reconnect (continuity connector connect {})",
                s.title(),
                s.name()
            )));
        }
        let expect = Expect::Version(state.version);
        state.next_at = self.now();
        self.backend.records.put_sync(&state, expect).await?;
        self.queue(tenant, s).await
    }

    /// Sets how often `source`'s delta pull runs for `tenant` (`minutes`, from the plan's
    /// shortest to a day); the next pull moves to the new interval after the last one.
    /// Returns the interval in seconds.
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming `minutes` outside the plan's range; `NOT_FOUND` when the
    /// source is not connected; `CONFLICT` when the pull state kept changing;
    /// `UNAVAILABLE`.
    pub async fn set_interval(&self, tenant: &TenantId, source: &str, minutes: u64) -> Result<u64> {
        let s = Source::parse(source)?;
        let src = connector(s);
        let plan = self.backend.records.get_tenant(tenant).await?.map_or(PlanTier::Pro, |t| t.plan);
        let (min, secs) = (min_interval_secs(plan), minutes.saturating_mul(60));
        if secs < min || secs > MAX_INTERVAL_SECS {
            return Err(Error::invalid_field(
                "minutes",
                format!("{} to {} on the {} plan", min / 60, MAX_INTERVAL_SECS / 60, plan.as_str()),
            ));
        }
        for _ in 0..3 {
            let Some(mut state) = self.backend.records.get_sync(tenant, &src).await? else {
                return Err(Error::not_found(format!("a {} connection of tenant {tenant} (connect it first)", s.title())));
            };
            let expect = Expect::Version(state.version);
            state.interval_secs = secs;
            if let Some(last) = state.last_synced_at {
                let due = last.plus_millis(i64::try_from(secs).unwrap_or(300).saturating_mul(1000));
                state.next_at = if due.0 < self.now().0 { self.now() } else { due };
            }
            match self.backend.records.put_sync(&state, expect).await {
                Ok(_) => return Ok(secs),
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::conflict(format!("{}'s pull kept changing; try again", s.title())))
    }

    /// Queues a run for every connector whose pull is due; how many were queued.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the tenants cannot be listed (a tenant that fails is skipped
    /// and logged).
    pub async fn queue_due(&self) -> Result<usize> {
        let now = self.now();
        let tenants = crate::all_pages(1_000_000, |p| {
            let r = self.backend.records.clone();
            async move { r.list_tenants(&p).await }
        })
        .await?
        .0;
        let mut queued = 0;
        for t in tenants {
            for s in Source::ALL {
                let state = match self.backend.records.get_sync(&t, &connector(s)).await {
                    Ok(Some(st)) => st,
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!(tenant = %t, source = s.name(), error = %e, "pull state not read; skipped this round");
                        continue;
                    }
                };
                let leased = state.lease_until.is_some_and(|l| l > now);
                if state.needs_reconnect || leased || state.next_at > now {
                    continue;
                }
                match self.queue(&t, s).await {
                    Ok(()) => queued += 1,
                    Err(e) => tracing::warn!(tenant = %t, source = s.name(), error = %e, "pull not queued; due again next round"),
                }
            }
        }
        Ok(queued)
    }

    /// Releases every pull lease (`continuity serve` at start: it owns its home alone, so a
    /// lease found then is a run the last process did not finish, which may resume now
    /// rather than when its lease lapses). How many were released.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the tenants cannot be listed.
    pub async fn release_leases(&self) -> Result<usize> {
        let tenants = crate::all_pages(1_000_000, |p| {
            let r = self.backend.records.clone();
            async move { r.list_tenants(&p).await }
        })
        .await?
        .0;
        let mut released = 0;
        for t in tenants {
            for s in Source::ALL {
                if let Ok(Some(mut state)) = self.backend.records.get_sync(&t, &connector(s)).await
                    && state.lease_until.is_some()
                {
                    state.next_at = self.now();
                    if self.release(&mut state).await.is_ok() {
                        released += 1;
                    }
                }
            }
        }
        Ok(released)
    }

    /// Runs one queued `connector.sync` message.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed message; as [`Self::run`].
    pub async fn run_message(&self, message: &QueueMessage, budget: Budget) -> Result<RunReport> {
        let m: SyncMessage =
            serde_json::from_slice(&message.body).map_err(|e| Error::invalid(format!("not a sync message: {e}")))?;
        self.run(&message.tenant, &m.source, budget).await
    }

    // ---- pull ------------------------------------------------------------------------

    /// Pulls `source` for `tenant`, at most `budget`, from where the last run committed.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the store or queue failed (the message is retried; the cursor
    /// holds the last committed page). A source's own failures are not errors: they put
    /// the connector in `sync_error` (and the report says so).
    pub async fn run(&self, tenant: &TenantId, source: &str, budget: Budget) -> Result<RunReport> {
        let s = Source::parse(source)?;
        let src = connector(s);
        let mut report = RunReport::default();
        let Some(status) = self.backend.records.get_connector(tenant, &src).await? else {
            report.skipped = Some("not connected".into());
            return Ok(report);
        };
        let (Some(mut grant), Some(state)) =
            (self.backend.records.get_grant(tenant, &src).await?, self.backend.records.get_sync(tenant, &src).await?)
        else {
            report.skipped = Some("not connected by sign-in or key (records are pushed)".into());
            return Ok(report);
        };
        let now = self.now();
        if state.needs_reconnect {
            report.skipped = Some("needs a reconnect".into());
            return Ok(report);
        }
        if state.lease_until.is_some_and(|l| l > now) {
            report.skipped = Some("another run holds it".into());
            return Ok(report);
        }
        let lease = i64::try_from(budget.time.as_millis()).unwrap_or(i64::MAX / 4).saturating_add(LEASE_MARGIN_MS);
        let leased = SyncState { lease_until: Some(now.plus_millis(lease)), ..state.clone() };
        let mut state = match self.backend.records.put_sync(&leased, Expect::Version(state.version)).await {
            Ok(s) => s,
            Err(e) if e.code == ErrorCode::Conflict => {
                report.skipped = Some("another run took it".into());
                return Ok(report);
            }
            Err(e) => return Err(e),
        };
        // The connector's state for this pass.
        let want = stage_of(state.phase);
        let moved = match status.state {
            ConnectorState::OauthComplete | ConnectorState::SyncComplete | ConnectorState::SyncError => {
                let to = if status.state == ConnectorState::SyncComplete && state.phase == SyncPhase::Initial {
                    // A finished initial pass whose state was not yet advanced.
                    ConnectorState::SyncingDelta
                } else {
                    want
                };
                let to = if status.state == ConnectorState::OauthComplete { ConnectorState::SyncingInitial } else { to };
                self.move_to(tenant, s, to, None).await.map(|_| ())
            }
            ConnectorState::SyncingInitial | ConnectorState::SyncingDelta => Ok(()),
            ConnectorState::NotConnected | ConnectorState::OauthPending => {
                report.skipped = Some(format!("connector is {}", status.state));
                self.release(&mut state).await?;
                return Ok(report);
            }
        };
        if let Err(e) = moved {
            self.release(&mut state).await?;
            return Err(e);
        }
        let started = Instant::now();
        let mut cursor: Cursor = serde_json::from_value(state.cursor.clone()).unwrap_or_default();
        if state.cursor.is_null() {
            cursor.started = now.0;
        }
        let mut refreshed = false;
        loop {
            if report.pages >= budget.pages || started.elapsed() >= budget.time {
                self.release(&mut state).await?;
                self.queue(tenant, s).await?;
                report.continued = true;
                return Ok(report);
            }
            let stages = pull::stages(s, state.phase);
            let Some(&stage) = stages.get(cursor.stage) else {
                // The pass is done.
                self.finish(tenant, s, &mut state, &cursor).await?;
                report.finished = true;
                return Ok(report);
            };
            if let Err(f) = self.fresh_token(s, tenant, &mut grant, false).await {
                return self.failed(tenant, s, &mut state, f, report).await;
            }
            let read = {
                let api = Api { source: s, base: &grant.api_base, token: &grant.access_token };
                pull::page(&api, stage, &cursor, self.now()).await
            };
            let page = match read {
                Ok(p) => p,
                Err(Failure::Unauthorized(_)) if !refreshed && grant.refresh_token.is_some() => {
                    refreshed = true;
                    if let Err(f) = self.fresh_token(s, tenant, &mut grant, true).await {
                        return self.failed(tenant, s, &mut state, f, report).await;
                    }
                    continue;
                }
                Err(Failure::Unauthorized(m)) => return self.failed(tenant, s, &mut state, Failure::Revoked(m), report).await,
                Err(f) => return self.failed(tenant, s, &mut state, f, report).await,
            };
            report.pages += 1;
            let n = page.records.len() as u64;
            // The stage's next position, and the pass's last page?
            let mut next = cursor.clone();
            next.high = match (cursor.high, page.high) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            if page.tickets.is_some() {
                next.tickets = page.tickets.clone();
            }
            match (page.after, page.restart) {
                (_, Some(from)) => {
                    next.from = Some(from);
                    next.after = None;
                }
                (Some(after), None) => next.after = Some(after),
                (None, None) => {
                    next.stage += 1;
                    next.after = None;
                    next.from = None;
                }
            }
            let last = next.stage >= stages.len();
            if n > 0 || last {
                self.ingest.accept_pulled(tenant, s.name(), page.records, last).await?;
            }
            for d in &page.deleted {
                if let Some(t) = s.entity_type(&d.object) {
                    match self.ingest.mark_deleted(tenant, s.name(), t, &d.id, d.at).await {
                        Ok(true) => report.deleted += 1,
                        Ok(false) => {}
                        Err(e) if e.code == ErrorCode::Unavailable => return Err(e),
                        Err(e) => tracing::warn!(tenant = %tenant, source = s.name(), error = %e, "a deletion was not applied"),
                    }
                }
            }
            report.records += n;
            // Commit the page: the cursor moves only after its records are queued.
            let expect = Expect::Version(state.version);
            state.fetched += n;
            if let Some(t) = page.total.filter(|_| cursor.after.is_none() && cursor.from.is_none()) {
                state.total = Some(state.total.unwrap_or(0) + t);
            }
            state.cursor = serde_json::to_value(&next).map_err(Error::internal)?;
            state = self.backend.records.put_sync(&state, expect).await?;
            cursor = next;
            if state.phase == SyncPhase::Initial && !last {
                let progress = match state.total {
                    Some(t) if t > 0 => (state.fetched as f64 / t as f64).min(0.99),
                    _ => (cursor.stage as f64 / stages.len() as f64).min(0.99),
                };
                let _ = self
                    .backend
                    .records
                    .transition_connector(tenant, &src, ConnectorState::SyncingInitial, Some(progress), None, self.now())
                    .await;
            }
        }
    }

    /// Ends a pass: the next one reads what changed since the newest change seen.
    async fn finish(&self, _tenant: &TenantId, _s: Source, state: &mut SyncState, cursor: &Cursor) -> Result<()> {
        let now = self.now();
        let next = Cursor {
            since: cursor.high.or(Some(cursor.started)),
            started: now.0,
            tickets: cursor.tickets.clone(),
            ..Cursor::default()
        };
        let expect = Expect::Version(state.version);
        state.phase = SyncPhase::Delta;
        state.cursor = serde_json::to_value(&next).map_err(Error::internal)?;
        state.last_pass = state.fetched;
        state.fetched = 0;
        state.total = None;
        state.last_synced_at = Some(now);
        state.next_at = now.plus_millis(i64::try_from(state.interval_secs).unwrap_or(300).saturating_mul(1000));
        state.lease_until = None;
        *state = self.backend.records.put_sync(state, expect).await?;
        Ok(())
    }

    async fn release(&self, state: &mut SyncState) -> Result<()> {
        let expect = Expect::Version(state.version);
        state.lease_until = None;
        *state = self.backend.records.put_sync(state, expect).await?;
        Ok(())
    }

    /// A source's failure: `sync_error` with the stage; a refused grant waits for a
    /// person, a rate limit for its `Retry-After`, anything else for the next interval.
    async fn failed(
        &self,
        tenant: &TenantId,
        s: Source,
        state: &mut SyncState,
        f: Failure,
        mut report: RunReport,
    ) -> Result<RunReport> {
        let now = self.now();
        let (message, next_at) = match &f {
            Failure::Revoked(m) => {
                state.needs_reconnect = true;
                (format!("{m}; reconnect: continuity connector connect {}", s.name()), now)
            }
            Failure::Throttled { wait, why } => {
                // Not an error: the pull resumes when the source allows.
                // A source asking for more than a day is taken to mean a day.
                let wait = (*wait).min(Duration::from_secs(86_400));
                state.next_at = now.plus_millis(i64::try_from(wait.as_millis()).unwrap_or(86_400_000));
                tracing::info!(tenant = %tenant, source = s.name(), reason = %why, "pull paused by the source's rate limit");
                self.release(state).await?;
                report.skipped = Some(why.clone());
                return Ok(report);
            }
            Failure::Unauthorized(m) | Failure::Failed(m) => {
                (m.clone(), now.plus_millis(i64::try_from(state.interval_secs.min(300)).unwrap_or(300) * 1000))
            }
        };
        state.next_at = next_at;
        self.release(state).await?;
        let stage = stage_of(state.phase).as_str().to_owned();
        let message: String = message.chars().take(domain::connector::MAX_ERROR_MESSAGE_LEN).collect();
        tracing::warn!(tenant = %tenant, source = s.name(), reason = %message, "pull failed");
        if let Err(e) = self.move_to(tenant, s, ConnectorState::SyncError, Some((stage, message.clone()))).await
            && e.code != ErrorCode::Conflict
        {
            return Err(e);
        }
        let title = if state.needs_reconnect {
            format!("{} needs a reconnect", s.title())
        } else {
            format!("{}'s pull failed", s.title())
        };
        self.notify
            .emit(
                tenant,
                domain::notify::EventKind::ConnectorError,
                &format!("connector {}", s.name()),
                &title,
                &message,
                Some("/dashboard/connectors"),
            )
            .await;
        report.skipped = Some(message);
        Ok(report)
    }

    /// Refreshes the access token when it is about to expire, or when `force`d (a 401);
    /// a rotated refresh token replaces the old one.
    async fn fresh_token(
        &self,
        s: Source,
        tenant: &TenantId,
        grant: &mut Grant,
        force: bool,
    ) -> std::result::Result<(), Failure> {
        let now = self.now();
        let expiring = grant.expires_at.is_some_and(|e| e.0 - REFRESH_MARGIN_MS <= now.0);
        if !(force || expiring) {
            return Ok(());
        }
        let Some(refresh) = grant.refresh_token.clone() else {
            return if force || expiring {
                Err(Failure::Revoked(format!("{}'s access token expired and there is no refresh token", s.title())))
            } else {
                Ok(())
            };
        };
        let app = self.app(s).await.map_err(|e| Failure::Failed(e.message))?;
        let ends = s.endpoints(Some(&app)).map_err(|e| Failure::Failed(e.message))?;
        let fields = [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh.as_str()),
            ("client_id", app.client_id.as_str()),
            ("client_secret", app.client_secret.as_str()),
        ];
        let t = client::token(s, &ends.token, &fields).await?;
        grant.access_token = t.access_token;
        if t.refresh_token.is_some() {
            grant.refresh_token = t.refresh_token;
        }
        grant.expires_at = t.expires_in.map(|sec| now.plus_millis(sec.saturating_mul(1000)));
        if let Some(url) = t.instance_url.filter(|u| s.check_base_url(u).is_ok()) {
            grant.api_base = url;
        }
        grant.obtained_at = now;
        self.backend.records.put_grant(tenant, &connector(s), grant).await.map_err(|e| Failure::Failed(e.message))?;
        tracing::info!(tenant = %tenant, source = s.name(), "access token refreshed");
        Ok(())
    }

    // ---- status ----------------------------------------------------------------------

    /// Each connector's status with its pull: phase, records so far (of the total where
    /// the source says), last and next pull, whether it needs a reconnect; and which
    /// sources can be connected here.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn overview(&self, tenant: &TenantId) -> Result<Json> {
        let page = self.backend.records.list_connectors(tenant, &PageRequest::first(500)).await?;
        let apps = self.apps().await?;
        let mut connectors = Vec::new();
        for c in page.items {
            let pull = match Source::parse(c.source.as_str()) {
                Ok(_) => self.backend.records.get_sync(tenant, &c.source).await?,
                Err(_) => None,
            };
            connectors.push(json!({
                "status": c,
                "pull": pull.map(|p| json!({
                    "phase": p.phase,
                    "fetched": p.fetched,
                    "total": p.total,
                    "last_pass": p.last_pass,
                    "last_synced_at": p.last_synced_at.map(Timestamp::to_rfc3339),
                    "next_at": p.next_at.to_rfc3339(),
                    "interval_secs": p.interval_secs,
                    "needs_reconnect": p.needs_reconnect,
                })),
            }));
        }
        let connectable: Vec<Json> = Source::ALL
            .iter()
            .map(|s| {
                json!({
                    "source": s.name(),
                    "title": s.title(),
                    "connect": if s.uses_oauth() { "oauth" } else { "api_key" },
                    "app_registered": !s.uses_oauth() || apps.iter().any(|a| a == s.name()),
                })
            })
            .collect();
        Ok(json!({ "connectors": connectors, "connectable": connectable }))
    }
}
