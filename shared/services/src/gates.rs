//! Gates (seed 002 §8, issue #18): a person authorizes or blocks an action — a push to a
//! repository, a deploy — and scripts and agents verify the gate before acting.
//!
//! - [`GateService::set`] needs `approvals:decide` (never granted to an MCP client), and
//!   the principal who *requested* a gate may not authorize it: an agent cannot open its
//!   own gate, even with a person's key.
//! - [`GateService::verify`] answers authorized / blocked / pending / unknown. A
//!   consume-once authorization (or `consume=true`) is spent by the verify that finds it:
//!   a conditional write on the gate's version, so of two racing verifies exactly one
//!   is told "authorized".
//! - [`GateService::request`] is what an agent may do: ask for a gate, which waits as
//!   `pending` in the approvals console and API until a person decides.
//! - [`GateService::expire`] (the maintenance job) turns authorizations and requests
//!   past their expiry into `blocked`, so what scripts see matches what people read.
//!
//! Every set, request and verify is audited with who did it.

use domain::gate::{Gate, GateStatus, MAX_GATE_REASON, check_gate_name};
use domain::principal::{CallerContext, Scope};
use domain::{Error, ErrorCode, Page, PageRequest, Result, TenantId};
use ports::Backend;
use ports::records::{Expect, GateStore};
use serde::{Deserialize, Serialize};

use crate::audit::AuditService;

/// Longest time a status may be set to last, in seconds (a year).
pub const MAX_EXPIRY_SECS: u64 = 365 * 86_400;
/// How long a request waits for a person unless it says otherwise (seven days).
pub const DEFAULT_REQUEST_SECS: u64 = 7 * 86_400;
/// Attempts of a read-modify-write that lost a race before giving up.
const ATTEMPTS: usize = 8;

/// What a person sets (`POST /v1/gates`, `continuity gate set`, the console).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSet {
    pub namespace: String,
    pub action: String,
    pub status: GateStatus,
    pub reason: Option<String>,
    /// The status lasts this many seconds (an authorization then no longer holds).
    pub expires_in: Option<u64>,
    /// The next verify that finds the authorization spends it.
    #[serde(default)]
    pub consume_once: bool,
}

/// What a verify found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Authorized,
    Blocked,
    Pending,
    Unknown,
}

impl Verdict {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Authorized => "authorized",
            Self::Blocked => "blocked",
            Self::Pending => "pending",
            Self::Unknown => "unknown",
        }
    }
}

/// A verify's answer: the verdict, why, whether this verify spent the authorization,
/// and the gate as it now stands.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub verdict: Verdict,
    pub reason: String,
    pub consumed: bool,
    pub gate: Option<Gate>,
}

#[derive(Clone)]
pub struct GateService {
    backend: Backend,
    audit: AuditService,
    notify: crate::notify::NotifyService,
}

fn clean_reason(reason: Option<String>) -> Result<Option<String>> {
    let reason = reason.map(|r| r.trim().to_owned()).filter(|r| !r.is_empty());
    if let Some(r) = &reason {
        if r.chars().count() > MAX_GATE_REASON {
            return Err(Error::invalid_field("reason", format!("at most {MAX_GATE_REASON} characters")));
        }
        if r.chars().any(|c| c.is_control() && c != '\n') {
            return Err(Error::invalid_field("reason", "no control characters"));
        }
    }
    Ok(reason)
}

fn expiry(secs: Option<u64>) -> Result<Option<i64>> {
    match secs {
        None => Ok(None),
        Some(0) => Err(Error::invalid_field("expires_in", "at least 1 second")),
        Some(s) if s > MAX_EXPIRY_SECS => Err(Error::invalid_field("expires_in", format!("at most {MAX_EXPIRY_SECS} seconds"))),
        Some(s) => Ok(Some(i64::try_from(s).unwrap_or(i64::MAX).saturating_mul(1000))),
    }
}

fn target(namespace: &str, action: &str) -> Option<String> {
    Some(format!("gate:{namespace}:{action}"))
}

impl GateService {
    pub(crate) fn new(backend: Backend, audit: AuditService, notify: crate::notify::NotifyService) -> Self {
        Self { backend, audit, notify }
    }

    /// Writes `gate` in place of `current` (or as new): the stored gate, or `None` when
    /// another writer changed it first (read again and retry).
    async fn replace(&self, current: Option<&Gate>, gate: &Gate) -> Result<Option<Gate>> {
        let expect = current.map_or(Expect::Absent, |g| Expect::Version(g.version));
        match self.backend.records.put_gate(gate, expect).await {
            Ok(stored) => Ok(Some(stored)),
            Err(e) if e.code == ErrorCode::Conflict => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sets a gate's status (a person's decision).
    ///
    /// # Errors
    /// `FORBIDDEN` without `approvals:decide`, or when the caller requested this gate and
    /// tries to authorize it; `INVALID_REQUEST` for bad names, reason or expiry;
    /// `UNAVAILABLE`.
    pub async fn set(&self, caller: &CallerContext, set: GateSet) -> Result<Gate> {
        caller.scopes.require(Scope::ApprovalsDecide)?;
        check_gate_name("namespace", &set.namespace)?;
        check_gate_name("action", &set.action)?;
        let reason = clean_reason(set.reason)?;
        let lasts = expiry(set.expires_in)?;
        let records = &self.backend.records;
        for _ in 0..ATTEMPTS {
            let now = self.backend.clock.now();
            let current = records.get_gate(&caller.tenant, &set.namespace, &set.action).await?;
            let requested_by = current.as_ref().and_then(|g| g.requested_by.clone());
            if set.status == GateStatus::Authorized && requested_by.as_deref() == Some(caller.principal.as_str()) {
                self.audit
                    .record(
                        &caller.tenant,
                        caller.principal.as_str(),
                        "gate.set",
                        target(&set.namespace, &set.action),
                        "refused: own request",
                    )
                    .await;
                return Err(Error::forbidden(
                    "you requested this gate: another person must authorize it (in the approvals console or API)",
                ));
            }
            let gate = Gate {
                tenant: caller.tenant.clone(),
                namespace: set.namespace.clone(),
                action: set.action.clone(),
                status: set.status,
                set_by: caller.principal.to_string(),
                reason: reason.clone(),
                expires_at: lasts.map(|ms| now.plus_millis(ms)),
                consume_once: set.consume_once && set.status == GateStatus::Authorized,
                // A decision answers the request; the requester stays on record until the
                // gate is asked for again.
                requested_by,
                updated_at: now,
                version: 0,
                last_verified: current.as_ref().and_then(|g| g.last_verified),
                decided: true,
            };
            if let Some(stored) = self.replace(current.as_ref(), &gate).await? {
                let (ns, action) = (&gate.namespace, &gate.action);
                self.audit
                    .record(&caller.tenant, caller.principal.as_str(), "gate.set", target(ns, action), set.status.as_str())
                    .await;
                return Ok(stored);
            }
        }
        Err(Error::conflict("the gate keeps changing; try again"))
    }

    /// Verifies a gate, spending a consume-once authorization (or any, with `consume`).
    ///
    /// # Errors
    /// `FORBIDDEN` without `tenant:read`; `INVALID_REQUEST` for bad names; `UNAVAILABLE`.
    pub async fn verify(&self, caller: &CallerContext, namespace: &str, action: &str, consume: bool) -> Result<Check> {
        caller.scopes.require(Scope::TenantRead)?;
        check_gate_name("namespace", namespace)?;
        check_gate_name("action", action)?;
        let records = &self.backend.records;
        let actor = caller.principal.as_str();
        for _ in 0..ATTEMPTS {
            let now = self.backend.clock.now();
            let Some(gate) = records.get_gate(&caller.tenant, namespace, action).await? else {
                self.audit.record(&caller.tenant, actor, "gate.verify", target(namespace, action), "unknown").await;
                return Ok(Check {
                    verdict: Verdict::Unknown,
                    reason: format!(
                        "no gate for {action} in {namespace}: a person sets one with `continuity gate set` or the approvals API"
                    ),
                    consumed: false,
                    gate: None,
                });
            };
            if gate.authorizes(now) {
                let reason = gate.reason.clone().unwrap_or_else(|| format!("authorized by {}", gate.set_by));
                if !(consume || gate.consume_once) {
                    self.audit.record(&caller.tenant, actor, "gate.verify", target(namespace, action), "authorized").await;
                    return Ok(Check { verdict: Verdict::Authorized, reason, consumed: false, gate: Some(gate) });
                }
                let spent = Gate {
                    status: GateStatus::Blocked,
                    reason: Some(format!("spent by {actor} at {}; authorize again for the next one", now.to_rfc3339())),
                    set_by: actor.to_owned(),
                    consume_once: false,
                    expires_at: None,
                    updated_at: now,
                    last_verified: Some(now),
                    decided: false,
                    ..gate.clone()
                };
                match records.put_gate(&spent, Expect::Version(gate.version)).await {
                    Ok(stored) => {
                        self.audit
                            .record(&caller.tenant, actor, "gate.verify", target(namespace, action), "authorized (spent)")
                            .await;
                        return Ok(Check { verdict: Verdict::Authorized, reason, consumed: true, gate: Some(stored) });
                    }
                    // Another verify spent it first: read again (it is blocked now).
                    Err(e) if e.code == ErrorCode::Conflict => continue,
                    Err(e) => return Err(e),
                }
            }
            let (verdict, reason) = match gate.status {
                GateStatus::Authorized => (Verdict::Blocked, format!("the authorization expired at {}", expired_at(&gate))),
                GateStatus::Pending if gate.expired(now) => {
                    (Verdict::Blocked, format!("the request expired at {} without a decision", expired_at(&gate)))
                }
                GateStatus::Pending => (
                    Verdict::Pending,
                    format!("waiting for a person (requested by {})", gate.requested_by.as_deref().unwrap_or(&gate.set_by)),
                ),
                GateStatus::Blocked => {
                    (Verdict::Blocked, gate.reason.clone().unwrap_or_else(|| format!("blocked by {}", gate.set_by)))
                }
            };
            self.audit.record(&caller.tenant, actor, "gate.verify", target(namespace, action), verdict.as_str()).await;
            return Ok(Check { verdict, reason, consumed: false, gate: Some(gate) });
        }
        Err(Error::conflict("the gate keeps changing; try again"))
    }

    /// Asks a person for a gate: it waits as `pending` (for `expires_in` seconds, default
    /// seven days) unless it already authorizes the action or is already pending.
    ///
    /// # Errors
    /// `FORBIDDEN` without `memory:write`; `INVALID_REQUEST` for bad names or reason;
    /// `UNAVAILABLE`.
    pub async fn request(
        &self,
        caller: &CallerContext,
        namespace: &str,
        action: &str,
        reason: Option<String>,
        expires_in: Option<u64>,
    ) -> Result<Gate> {
        caller.scopes.require(Scope::MemoryWrite)?;
        check_gate_name("namespace", namespace)?;
        check_gate_name("action", action)?;
        let reason = clean_reason(reason)?;
        let lasts = expiry(Some(expires_in.unwrap_or(DEFAULT_REQUEST_SECS)))?;
        let records = &self.backend.records;
        for _ in 0..ATTEMPTS {
            let now = self.backend.clock.now();
            let current = records.get_gate(&caller.tenant, namespace, action).await?;
            // Already authorized, already waiting, or blocked by a person: unchanged (the
            // caller sees why); a spent or expired gate may be asked for again.
            if let Some(g) = &current
                && (g.authorizes(now)
                    || (g.status == GateStatus::Pending && !g.expired(now))
                    || (g.status == GateStatus::Blocked && g.decided && !g.expired(now)))
            {
                return Ok(g.clone());
            }
            let gate = Gate {
                tenant: caller.tenant.clone(),
                namespace: namespace.to_owned(),
                action: action.to_owned(),
                status: GateStatus::Pending,
                set_by: caller.principal.to_string(),
                reason: reason.clone(),
                expires_at: lasts.map(|ms| now.plus_millis(ms)),
                consume_once: false,
                requested_by: Some(caller.principal.to_string()),
                updated_at: now,
                version: 0,
                last_verified: current.as_ref().and_then(|g| g.last_verified),
                decided: false,
            };
            if let Some(stored) = self.replace(current.as_ref(), &gate).await? {
                self.audit
                    .record(&caller.tenant, caller.principal.as_str(), "gate.request", target(namespace, action), "pending")
                    .await;
                let text = format!(
                    "{} asks to {action} on {namespace}: {}",
                    caller.principal,
                    stored.reason.as_deref().unwrap_or("no reason given")
                );
                let subject = format!("gate {namespace}/{action}");
                self.notify
                    .emit(
                        &caller.tenant,
                        domain::notify::EventKind::GateRequested,
                        &subject,
                        "A gate waits for you",
                        &text,
                        Some("/approvals"),
                    )
                    .await;
                return Ok(stored);
            }
        }
        Err(Error::conflict("the gate keeps changing; try again"))
    }

    /// The tenant's gates (only those with `status`, when given), ordered by namespace
    /// then action. Expired authorizations and requests read as `blocked`.
    ///
    /// # Errors
    /// `FORBIDDEN` without `tenant:read`; `INVALID_REQUEST` for a malformed cursor;
    /// `UNAVAILABLE`.
    pub async fn list(&self, caller: &CallerContext, status: Option<GateStatus>, page: &PageRequest) -> Result<Page<Gate>> {
        caller.scopes.require(Scope::TenantRead)?;
        let now = self.backend.clock.now();
        let mut p = self.backend.records.list_gates(&caller.tenant, page).await?;
        for g in &mut p.items {
            if g.status != GateStatus::Blocked && g.expired(now) {
                g.reason = Some(format!("expired at {}", expired_at(g)));
                g.status = GateStatus::Blocked;
            }
        }
        if let Some(s) = status {
            p.items.retain(|g| g.status == s);
        }
        Ok(p)
    }

    /// Requests waiting for a person (`pending`, not expired), for the approvals console
    /// and API.
    ///
    /// # Errors
    /// `FORBIDDEN` without `approvals:decide`; `UNAVAILABLE`.
    pub async fn waiting(&self, caller: &CallerContext, limit: usize) -> Result<Vec<Gate>> {
        caller.scopes.require(Scope::ApprovalsDecide)?;
        let now = self.backend.clock.now();
        let records = &self.backend.records;
        let tenant = &caller.tenant;
        let (gates, _) = crate::all_pages(10_000, |p| async move { records.list_gates(tenant, &p).await }).await?;
        Ok(gates.into_iter().filter(|g| g.status == GateStatus::Pending && !g.expired(now)).take(limit).collect())
    }

    /// The maintenance job's part: every gate of `tenant` whose authorization or request
    /// is past its expiry is stored as `blocked` (bounded: at most `limit` gates looked
    /// at). Returns how many were expired.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn expire(&self, tenant: &TenantId, limit: usize) -> Result<usize> {
        let records = &self.backend.records;
        let now = self.backend.clock.now();
        let (gates, _) = crate::all_pages(limit, |p| async move { records.list_gates(tenant, &p).await }).await?;
        let mut expired = 0;
        for g in gates.into_iter().filter(|g| g.status != GateStatus::Blocked && g.expired(now)) {
            let what = if g.status == GateStatus::Pending { "request" } else { "authorization" };
            let next = Gate {
                status: GateStatus::Blocked,
                reason: Some(format!("the {what} expired at {}", expired_at(&g))),
                set_by: "maintenance".into(),
                consume_once: false,
                decided: false,
                updated_at: now,
                ..g.clone()
            };
            match records.put_gate(&next, Expect::Version(g.version)).await {
                Ok(_) => {
                    expired += 1;
                    self.audit.record(tenant, "maintenance", "gate.expire", target(&g.namespace, &g.action), "blocked").await;
                }
                // Changed meanwhile (someone decided it): theirs stands.
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Ok(expired)
    }
}

fn expired_at(g: &Gate) -> String {
    g.expires_at.map_or_else(|| "?".to_owned(), domain::Timestamp::to_rfc3339)
}
