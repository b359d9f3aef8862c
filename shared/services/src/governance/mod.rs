//! Governance (SPEC §6): nothing becomes organisational truth without passing it.
//!
//! [`GovernanceService::triage`] runs the triage states for one proposal — Score →
//! Choice → AutoApprove → Write | AwaitApproval | Reject → RecordRejection — with the
//! deterministic scorer of [`triage`]. Each state is a lifecycle step stored on the
//! proposal (a versioned write), so a proposal waiting for a person waits in the store
//! and survives any restart. [`GovernanceService::decide`] is the only way out of
//! `awaiting_approval`, and needs `approvals:decide` — which no MCP client is granted.
//! The single writer ([`GovernanceService::write`]) makes org entries `active`, or
//! supersedes an entry with lineage both ways; nothing is deleted. Every step goes to
//! the audit ledger.

pub mod triage;

use std::collections::BTreeSet;

use domain::memory::{GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType};
use domain::principal::{CallerContext, Scope};
use domain::proposal::{Proposal, ProposalState};
use domain::{Error, ErrorCode, Id, PageRequest, Result, TenantId};
use ports::Backend;
use ports::records::{AuditLog, Expect, MemoryStore, ProposalStore, TenantStore};

/// Most active org entries triage compares a proposal against.
const MAX_COMPARED: usize = 5_000;

/// A proposal in the approvers' queue, with the active entries it conflicts with.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Waiting {
    pub proposal: Proposal,
    pub conflicts: Vec<MemoryEntry>,
}

#[derive(Clone)]
pub struct GovernanceService {
    backend: Backend,
}

impl GovernanceService {
    pub fn new(backend: Backend) -> Self {
        Self { backend }
    }

    async fn audit(&self, tenant: &TenantId, actor: &str, action: &str, target: &Id, outcome: &str) -> Result<()> {
        let record = domain::audit::AuditRecord {
            tenant: tenant.clone(),
            id: crate::new_id(&self.backend),
            at: self.backend.clock.now(),
            actor: actor.to_owned(),
            action: action.to_owned(),
            target: Some(target.to_string()),
            outcome: outcome.to_owned(),
            request_id: None,
        };
        self.backend.records.append_audit(&record).await
    }

    /// Moves `p` to `to` (a legal lifecycle step), stored with a versioned write.
    async fn step(&self, mut p: Proposal, to: ProposalState, actor: &str, outcome: &str) -> Result<Proposal> {
        if !p.state.can_move_to(to) {
            return Err(Error::conflict(format!("proposal {} cannot move from {} to {}", p.id, p.state, to)));
        }
        p.state = to;
        p.updated_at = self.backend.clock.now();
        let stored = self.backend.records.update_proposal(&p).await?;
        self.audit(&stored.tenant, actor, &format!("proposal.{}", to.as_str()), &stored.id, outcome).await?;
        Ok(stored)
    }

    async fn active_org(&self, tenant: &TenantId) -> Result<Vec<MemoryEntry>> {
        let mut out = Vec::new();
        let mut page = PageRequest::first(500);
        loop {
            let p = self.backend.records.list_memory(tenant, &MemoryScope::Org, &page).await?;
            out.extend(p.items.into_iter().filter(|m| m.state == GovernanceState::Active));
            match p.next_cursor {
                Some(c) if out.len() < MAX_COMPARED => page = PageRequest::after(500, c),
                _ => break,
            }
        }
        Ok(out)
    }

    /// Runs triage for a `pending` proposal and returns it in the state it reached:
    /// `written` (auto-approved), `awaiting_approval` or `rejected` (with the reason).
    ///
    /// # Errors
    /// `NOT_FOUND`; `CONFLICT` when the proposal is not pending; `UNAVAILABLE`.
    pub async fn triage(&self, tenant: &TenantId, id: &Id) -> Result<Proposal> {
        let records = &self.backend.records;
        let p = records.get_proposal(tenant, id).await?.ok_or_else(|| Error::not_found(format!("proposal {id}")))?;
        let t = records.get_tenant(tenant).await?.ok_or_else(|| Error::not_found(format!("tenant {tenant}")))?;
        let schema = adk::resolve::schema_for(t.department, t.industry);
        let vocabulary: BTreeSet<String> = schema
            .entity_types
            .values()
            .flat_map(|s| std::iter::once(s.name.clone()).chain(s.fields.keys().cloned()))
            .flat_map(|n| n.split('_').map(str::to_owned).collect::<Vec<_>>())
            .filter(|w| w.len() > 2)
            .collect();
        let active = self.active_org(tenant).await?;
        let input = triage::Input {
            title: &p.title,
            body: &p.body,
            has_source_session: p.source_session.is_some(),
            supersedes: p.supersedes.as_ref(),
            active: &active,
            vocabulary: &vocabulary,
        };
        // The tenant's own weights and thresholds, else the defaults (SPEC §6.2).
        let policy = t.triage.as_ref().map_or_else(triage::Policy::default, triage::Policy::from);
        let (score, route) = triage::score(&input, &policy);
        let mut scored = p;
        scored.score = Some(score.clone());
        let scored = self.step(scored, ProposalState::Scored, "governance", &format!("score {:.2}", score.total)).await?;
        match route {
            triage::Route::AutoApprove => {
                let approved = self.step(scored, ProposalState::AutoApproved, "governance", "auto-approved").await?;
                self.write(approved, "governance").await
            }
            triage::Route::Human { supersede } => {
                let mut waiting = scored;
                waiting.suggested_supersede = supersede;
                self.step(waiting, ProposalState::AwaitingApproval, "governance", "awaiting a person").await
            }
            triage::Route::Reject { reason } => {
                let mut rejected = scored;
                rejected.decision_reason = Some(reason.clone());
                self.step(rejected, ProposalState::Rejected, "governance", &reason).await
            }
        }
    }

    /// The approvers' queue: proposals awaiting a person, oldest first, each with its
    /// score (factors and reasons) and the active entries it conflicts with (the one it
    /// names to supersede, and the one triage found it contradicts).
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
            items.push(Waiting { proposal, conflicts });
        }
        Ok(domain::Page { items, next_cursor: p.next_cursor })
    }

    /// An approver's decision on a proposal awaiting approval. Approving writes it (and,
    /// when triage found a contradiction, supersedes that entry); rejecting keeps the
    /// reason.
    ///
    /// # Errors
    /// `FORBIDDEN` without `approvals:decide`; `INVALID_REQUEST` for a rejection without
    /// a reason; `NOT_FOUND`; `CONFLICT` when it is not awaiting approval; `UNAVAILABLE`.
    pub async fn decide(&self, caller: &CallerContext, id: &Id, approve: bool, reason: Option<String>) -> Result<Proposal> {
        caller.scopes.require(Scope::ApprovalsDecide)?;
        let reason = reason.map(|r| r.trim().to_owned()).filter(|r| !r.is_empty());
        if !approve && reason.is_none() {
            return Err(Error::invalid_field("reason", "a rejection needs a reason"));
        }
        if reason.as_ref().is_some_and(|r| r.chars().count() > 2000) {
            return Err(Error::invalid_field("reason", "at most 2000 characters"));
        }
        let mut p = self
            .backend
            .records
            .get_proposal(&caller.tenant, id)
            .await?
            .ok_or_else(|| Error::not_found(format!("proposal {id}")))?;
        if p.state != ProposalState::AwaitingApproval {
            return Err(Error::conflict(format!("proposal {id} is {}, not awaiting approval", p.state)));
        }
        let actor = format!("approver:{}", caller.principal);
        p.decision_reason = reason;
        if approve {
            let approved = self.step(p, ProposalState::Approved, &actor, "approved").await?;
            self.write(approved, &actor).await
        } else {
            let outcome = p.decision_reason.clone().unwrap_or_default();
            self.step(p, ProposalState::Rejected, &actor, &outcome).await
        }
    }

    /// The single writer: an approved (or auto-approved) memory proposal becomes an
    /// active org entry; an entry it supersedes becomes `superseded` with a link to it,
    /// and the new entry's lineage names both the proposal and the entry it replaces.
    /// Nothing is deleted. Other proposal kinds are recorded as written.
    async fn write(&self, p: Proposal, actor: &str) -> Result<Proposal> {
        let records = &self.backend.records;
        let kind = p.kind.strip_prefix("memory:").map(str::to_owned);
        if let Some(kind) = kind {
            let now = self.backend.clock.now();
            let replaces = p.supersedes.clone().or_else(|| p.suggested_supersede.clone());
            let entry = MemoryEntry {
                tenant: p.tenant.clone(),
                id: crate::new_id(&self.backend),
                memory_type: MemoryType::Org,
                scope: MemoryScope::Org,
                kind,
                title: p.title.clone(),
                body: p.body.clone(),
                state: GovernanceState::Active,
                lineage: Lineage { proposal: Some(p.id.clone()), supersedes: replaces.clone(), source_turns: Vec::new() },
                created_by: p.proposed_by.clone(),
                created_at: now,
                updated_at: now,
                version: 0,
            };
            let stored = records.put_memory(&entry, Expect::Absent).await?;
            self.audit(&p.tenant, actor, "memory.write", &stored.id, "active").await?;
            // Into the search index, proven retrievable (or into the review queue).
            let search = crate::search::SearchService::new(self.backend.clone());
            let indexed = search
                .index(crate::search::IndexRequest {
                    tenant: &stored.tenant,
                    scope: &stored.scope,
                    kind: ports::search::DocKind::Memory,
                    doc: &stored.id,
                    title: &stored.title,
                    body: &stored.body,
                    at: now,
                })
                .await;
            match indexed {
                Ok(Some(v)) => {
                    let outcome = if v.verified { "verified".to_owned() } else { format!("review: {}", v.reason) };
                    self.audit(&p.tenant, actor, "memory.index", &stored.id, &outcome).await?;
                }
                Ok(None) => {}
                // The entry is written; the daily reindex indexes and verifies it.
                Err(e) => tracing::warn!(code = ?e.code, "could not record the index verification; the reindex job retries"),
            }
            if let Some(old_id) = replaces {
                for attempt in 0..3 {
                    let Some(mut old) = records.get_memory(&p.tenant, &old_id).await? else { break };
                    if old.state != GovernanceState::Active {
                        break;
                    }
                    old.state = GovernanceState::Superseded { by: stored.id.clone() };
                    old.updated_at = now;
                    match records.put_memory(&old, Expect::Version(old.version)).await {
                        Ok(_) => {
                            self.audit(&p.tenant, actor, "memory.supersede", &old_id, &format!("superseded by {}", stored.id))
                                .await?;
                            // Superseded entries stay readable by id, not in search.
                            if let Err(e) = search.unindex(&p.tenant, &MemoryScope::Org, &old_id).await {
                                tracing::warn!(code = ?e.code, "could not take a superseded entry out of the index");
                            }
                            break;
                        }
                        Err(e) if e.code == ErrorCode::Conflict && attempt < 2 => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        self.step(p, ProposalState::Written, actor, "written").await
    }
}
