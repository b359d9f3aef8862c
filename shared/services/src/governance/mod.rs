//! Governance (SPEC §6): nothing becomes organisational truth without passing it.
//!
//! A proposal runs the triage workflow (SPEC §6.3) — Score → Route → AutoApprove →
//! Write | AwaitApproval | Reject → RecordRejection, with retries and a recorded
//! failure — on Step Functions (`statemachines/triage.asl.json`, AWS) or the embedded
//! runner ([`EmbeddedRunner`], `continuity serve`), both running the task code of
//! [`tasks`] with the deterministic scorer of [`triage`]. Each step is a versioned write
//! of the proposal and an audit record; a proposal waiting for a person waits in the
//! store (its task token and deadline with it), so it survives any restart.
//! [`GovernanceService::decide`] is the only way out of `awaiting_approval`: it needs
//! `approvals:decide` — which no MCP client is granted — and sends the wait's token.
//! The single writer ([`tasks::Tasks::write`]) makes org entries `active`, or supersedes
//! an entry with lineage both ways, in one atomic commit; nothing is deleted.

pub mod redaction;
pub mod runner;
pub mod tasks;
pub mod triage;

use std::sync::Arc;

use domain::memory::MemoryEntry;
use domain::principal::{CallerContext, Scope};
use domain::proposal::{Proposal, ProposalState};
use domain::{Error, ErrorCode, Id, PageRequest, Result, TenantId, Timestamp};
use ports::Backend;
use ports::records::{MemoryStore, ProposalStore};
use ports::workflow::{REJECTED, Workflow};
use serde_json::json;

pub use runner::EmbeddedRunner;
pub use tasks::Tasks;

/// A proposal in the approvers' queue, with the active entries it conflicts with.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Waiting {
    pub proposal: Proposal,
    pub conflicts: Vec<MemoryEntry>,
}

/// What one [`GovernanceService::resume`] pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Resumed {
    /// Proposals whose workflow was (re)started: pending or scored and idle.
    pub restarted: usize,
    /// Approved proposals whose decision was sent again (or written).
    pub resent: usize,
    /// Waits told they are still held (Step Functions heartbeats).
    pub heartbeats: usize,
    /// Waits past their deadline, escalated (embedded runner).
    pub escalated: usize,
    /// Waits for a person whose deadline is less than [`NEAR_TIMEOUT`] away.
    pub near_timeout: usize,
}

/// A wait this close to its deadline is reported (the `ApprovalWaitsNearTimeout` metric
/// and its alarm): somebody should decide it today.
pub const NEAR_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

impl std::ops::AddAssign for Resumed {
    fn add_assign(&mut self, r: Self) {
        self.restarted += r.restarted;
        self.resent += r.resent;
        self.heartbeats += r.heartbeats;
        self.escalated += r.escalated;
        self.near_timeout += r.near_timeout;
    }
}

#[derive(Clone)]
pub struct GovernanceService {
    backend: Backend,
    tasks: Tasks,
    workflow: Arc<dyn Workflow>,
    runner: Option<EmbeddedRunner>,
}

impl GovernanceService {
    /// Runs proposals on `backend.workflow` (Step Functions), or on the embedded runner
    /// when the backend has none.
    pub(crate) fn new(backend: Backend, writers: tasks::Writers) -> Self {
        let tasks = Tasks::new(backend.clone(), writers);
        let (workflow, runner): (Arc<dyn Workflow>, _) = match &backend.workflow {
            Some(w) => (w.clone(), None),
            None => {
                let r = EmbeddedRunner::new(tasks.clone());
                (Arc::new(r.clone()), Some(r))
            }
        };
        Self { backend, tasks, workflow, runner }
    }

    /// `step-functions` or `embedded`.
    pub fn workflow_name(&self) -> &'static str {
        self.workflow.name()
    }

    /// The task code, for the `continuity-triage` Lambda.
    pub fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    /// The embedded runner, when proposals run in this process (no Step Functions).
    pub fn runner(&self) -> Option<&EmbeddedRunner> {
        self.runner.as_ref()
    }

    /// Starts triage for a stored `pending` proposal and returns it as it stands: on the
    /// embedded runner triage has run (`written`, `awaiting_approval`, `rejected`); on
    /// Step Functions it is usually still `pending`, the execution under way.
    ///
    /// # Errors
    /// `NOT_FOUND`; `UNAVAILABLE`.
    pub async fn triage(&self, tenant: &TenantId, id: &Id) -> Result<Proposal> {
        self.workflow.start(tenant, id).await?;
        Ok(redaction::view(self.tasks.load(tenant, id).await?))
    }

    /// The approvers' queue: proposals awaiting a person, oldest first, each with its
    /// score (factors and reasons) and the active entries it conflicts with (the one it
    /// names to supersede, and the one triage found it contradicts). Personal data is
    /// masked: the approver decides on the redacted view.
    ///
    /// # Errors
    /// `FORBIDDEN` without `approvals:decide`; `INVALID_REQUEST` for a bad cursor;
    /// `UNAVAILABLE`.
    pub async fn waiting(&self, caller: &CallerContext, page: &PageRequest) -> Result<domain::Page<Waiting>> {
        caller.scopes.require(Scope::ApprovalsDecide)?;
        let records = &self.backend.records;
        let p = records.list_proposals(&caller.tenant, Some(ProposalState::AwaitingApproval), page).await?;
        let mut items = Vec::with_capacity(p.items.len());
        for proposal in p.items {
            let mut conflicts = Vec::new();
            for id in proposal.supersedes.iter().chain(proposal.suggested_supersede.iter()) {
                if let Some(m) = records.get_memory(&caller.tenant, id).await?
                    && !conflicts.iter().any(|c: &MemoryEntry| c.id == m.id)
                {
                    conflicts.push(m);
                }
            }
            items.push(Waiting { proposal: redaction::view(proposal), conflicts });
        }
        Ok(domain::Page { items, next_cursor: p.next_cursor })
    }

    /// One proposal as the console shows it (redacted, with its conflicts), for the
    /// decision screen a notification's link opens.
    ///
    /// # Errors
    /// `FORBIDDEN` without `approvals:decide`; `NOT_FOUND`; `UNAVAILABLE`.
    pub async fn waiting_one(&self, caller: &CallerContext, id: &Id) -> Result<Waiting> {
        caller.scopes.require(Scope::ApprovalsDecide)?;
        let records = &self.backend.records;
        let proposal =
            records.get_proposal(&caller.tenant, id).await?.ok_or_else(|| Error::not_found(format!("proposal {id}")))?;
        let mut conflicts = Vec::new();
        for other in proposal.supersedes.iter().chain(proposal.suggested_supersede.iter()) {
            if let Some(m) = records.get_memory(&caller.tenant, other).await?
                && !conflicts.iter().any(|c: &MemoryEntry| c.id == m.id)
            {
                conflicts.push(m);
            }
        }
        Ok(Waiting { proposal: redaction::view(proposal), conflicts })
    }

    /// An approver's decision on a proposal awaiting approval, recorded (a versioned
    /// write: of two concurrent decisions one wins, the other is `CONFLICT`) and sent to
    /// the workflow with the wait's token. Approving writes it (superseding, when triage
    /// found a contradiction, that entry); rejecting keeps the reason. On the embedded
    /// runner the write has happened when this returns; on Step Functions the `Write`
    /// state does it moments later (the proposal is `approved` until then).
    ///
    /// # Errors
    /// `FORBIDDEN` without `approvals:decide`; `INVALID_REQUEST` for a rejection without
    /// a reason; `NOT_FOUND`; `CONFLICT` when it is not awaiting approval or its wait has
    /// timed out; `UNAVAILABLE`.
    pub async fn decide(&self, caller: &CallerContext, id: &Id, approve: bool, reason: Option<String>) -> Result<Proposal> {
        caller.scopes.require(Scope::ApprovalsDecide)?;
        let reason = reason.map(|r| r.trim().to_owned()).filter(|r| !r.is_empty());
        if !approve && reason.is_none() {
            return Err(Error::invalid_field("reason", "a rejection needs a reason"));
        }
        if reason.as_ref().is_some_and(|r| r.chars().count() > 2000) {
            return Err(Error::invalid_field("reason", "at most 2000 characters"));
        }
        let mut p = self.tasks.load(&caller.tenant, id).await?;
        if p.state != ProposalState::AwaitingApproval {
            return Err(Error::conflict(format!("proposal {id} is {}, not awaiting approval", p.state)));
        }
        let Some(wait) = p.wait.clone() else {
            return Err(Error::conflict(format!("proposal {id}: its wait is being registered; try again in a moment")));
        };
        if wait.deadline <= self.backend.clock.now() {
            return Err(Error::conflict(format!("proposal {id}: nobody decided in time; it is expired and escalated")));
        }
        let actor = format!("approver:{}", caller.principal);
        p.decision_reason = reason;
        let decided = if approve {
            self.tasks.step(p, ProposalState::Approved, &actor, "approved").await?
        } else {
            let outcome = p.decision_reason.clone().unwrap_or_default();
            self.tasks.step(p, ProposalState::Rejected, &actor, &outcome).await?
        };
        let sent = if approve {
            self.workflow.send_success(&wait.token, &json!({ "decision": "approved", "by": caller.principal.as_str() })).await
        } else {
            self.workflow.send_failure(&wait.token, REJECTED, decided.decision_reason.as_deref().unwrap_or_default()).await
        };
        match sent {
            Ok(()) => {}
            // The decision is stored; the resume job sends it again, and an execution
            // that timed out meanwhile writes an approved proposal in `Escalate`.
            Err(e) => tracing::warn!(code = ?e.code, proposal = %id, "decision stored; the workflow was not told yet"),
        }
        Ok(redaction::view(self.tasks.load(&caller.tenant, id).await?))
    }

    /// Moves every proposal of `tenant` that stopped on its way (a crash, an outage)
    /// along, and keeps waits alive: pending or scored proposals idle since `idle_before`
    /// are started again (idempotent on both engines); approved ones are sent again;
    /// Step Functions waits get a heartbeat (a wait lost from the store stops getting
    /// them and escalates); embedded waits past their deadline are escalated.
    /// `continuity serve` runs it every few seconds, the maintenance Lambda hourly.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn resume(&self, tenant: &TenantId, idle_before: Timestamp) -> Result<Resumed> {
        let records = &self.backend.records;
        let mut out = Resumed::default();
        for state in [ProposalState::Pending, ProposalState::Scored, ProposalState::AutoApproved, ProposalState::Approved] {
            let stuck =
                crate::all_pages(
                    10_000,
                    |page: PageRequest| async move { records.list_proposals(tenant, Some(state), &page).await },
                )
                .await?
                .0;
            for p in stuck.into_iter().filter(|p| p.updated_at <= idle_before) {
                let done = match (state, &p.wait) {
                    (ProposalState::Approved, Some(w)) => {
                        out.resent += 1;
                        self.workflow.send_success(&w.token, &json!({ "decision": "approved" })).await
                    }
                    // An auto-approval stopped before its write (the embedded runner;
                    // a Step Functions execution carries on by itself).
                    (ProposalState::AutoApproved, _) if self.runner.is_some() => {
                        out.resent += 1;
                        self.tasks.write(tenant, &p.id, "governance").await.map(|_| ())
                    }
                    (ProposalState::Pending | ProposalState::Scored, _) => {
                        out.restarted += 1;
                        self.workflow.start(tenant, &p.id).await
                    }
                    _ => Ok(()),
                };
                match done {
                    Ok(()) => {}
                    // A Step Functions wait that ended: its `Escalate` state handled it.
                    Err(e) if e.code == ErrorCode::Conflict && p.state == ProposalState::Approved => {
                        self.tasks.escalate(tenant, &p.id).await?;
                    }
                    // An action another worker is carrying out (its claim's lease runs):
                    // its outcome will be recorded; the rest of the pass goes on.
                    Err(e) if e.code == ErrorCode::Unavailable && p.action.is_some() => {
                        tracing::info!(proposal = %p.id, "an approved action is being carried out; resumed later if it stops");
                    }
                    Err(e) if e.code == ErrorCode::Unavailable => return Err(e),
                    Err(e) => tracing::warn!(code = ?e.code, proposal = %p.id, "could not resume a proposal"),
                }
            }
        }
        let waiting = crate::all_pages(100_000, |page: PageRequest| async move {
            records.list_proposals(tenant, Some(ProposalState::AwaitingApproval), &page).await
        })
        .await?
        .0;
        let soon = self.backend.clock.now().0.saturating_add(i64::try_from(NEAR_TIMEOUT.as_millis()).unwrap_or(i64::MAX));
        out.near_timeout = waiting.iter().filter_map(|p| p.wait.as_ref()).filter(|w| w.deadline.0 <= soon).count();
        self.tasks.warn_expiring(tenant, &waiting, soon).await;
        match &self.runner {
            Some(r) => out.escalated = r.expire(tenant).await?,
            None => {
                for w in waiting.iter().filter_map(|p| p.wait.as_ref()) {
                    match self.workflow.send_heartbeat(&w.token).await {
                        Ok(()) => out.heartbeats += 1,
                        // Timed out: its execution is escalating it.
                        Err(e) if e.code == ErrorCode::Conflict => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(out)
    }
}
