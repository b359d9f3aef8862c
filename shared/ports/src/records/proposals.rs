//! Proposals and their decisions (the governance loop's records).

use async_trait::async_trait;
use domain::audit::AuditRecord;
use domain::memory::MemoryEntry;
use domain::proposal::{Proposal, ProposalState};
use domain::{Error, Id, Page, PageRequest, Result, TenantId};

use super::{Expect, Records, encode, put, versioned};
use crate::items::{Condition, Write};

#[async_trait]
pub trait ProposalStore: Send + Sync {
    /// # Errors
    /// `CONFLICT` when the id exists; `UNAVAILABLE`.
    async fn create_proposal(&self, proposal: &Proposal) -> Result<()>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_proposal(&self, tenant: &TenantId, id: &Id) -> Result<Option<Proposal>>;
    /// Writes `proposal` if the stored version is `proposal.version` and the state move is legal.
    ///
    /// # Errors
    /// `CONFLICT` on a version mismatch or an illegal state move; `NOT_FOUND`; `UNAVAILABLE`.
    async fn update_proposal(&self, proposal: &Proposal) -> Result<Proposal>;
    /// [`Self::update_proposal`] and `audit` appended, in one atomic write (one commit:
    /// every triage step is one).
    ///
    /// # Errors
    /// As [`Self::update_proposal`]; `INVALID_REQUEST` for an audit record of another tenant.
    async fn update_proposal_audited(&self, proposal: &Proposal, audit: &AuditRecord) -> Result<Proposal>;
    /// The single writer's one atomic commit (SPEC §6.1 step 5): `proposal` moves to
    /// `written` (from its stored version), `entry` is created, and `superseded` — the
    /// active entry it replaces, already marked `superseded` by the caller — is written
    /// over its stored version, with the audit records of it. All of it, or nothing.
    ///
    /// # Errors
    /// `CONFLICT` when any version does not match or `entry` exists; `UNAVAILABLE`.
    async fn commit_governed_write(
        &self,
        proposal: &Proposal,
        entry: &MemoryEntry,
        superseded: Option<&MemoryEntry>,
        audit: &[AuditRecord],
    ) -> Result<Proposal>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_proposals(&self, tenant: &TenantId, state: Option<ProposalState>, page: &PageRequest)
    -> Result<Page<Proposal>>;
}

impl Records {
    /// A proposal's versioned update (and its state index), with `extra` writes in the
    /// same atomic write.
    async fn write_proposal(&self, p: &Proposal, extra: Vec<Write>) -> Result<Proposal> {
        let t = p.tenant.as_str();
        let current: Proposal =
            self.get_proposal(&p.tenant, &p.id).await?.ok_or_else(|| Error::not_found(format!("proposal {}", p.id)))?;
        if current.state != p.state && !current.state.can_move_to(p.state) {
            return Err(Error::conflict(format!("a proposal cannot move from {} to {}", current.state, p.state)));
        }
        let mut next = p.clone();
        next.version = p.version + 1;
        let body = encode(&next)?;
        let mut writes = vec![put(t, "proposal", p.id.to_string(), next.version, body.clone(), Condition::Version(p.version))];
        if current.state != p.state {
            writes.push(Write::Delete {
                tenant: t.to_owned(),
                part: "proposal_by_state".into(),
                sk: format!("{}#{}", current.state, p.id),
                condition: Condition::None,
            });
        }
        writes.push(put(t, "proposal_by_state", format!("{}#{}", p.state, p.id), next.version, body, Condition::None));
        writes.extend(extra);
        self.items.write(writes).await?;
        Ok(next)
    }
}

#[async_trait]
impl ProposalStore for Records {
    async fn create_proposal(&self, p: &Proposal) -> Result<()> {
        let t = p.tenant.as_str();
        let mut stored = p.clone();
        stored.version = 1;
        let body = encode(&stored)?;
        self.items
            .write(vec![
                put(t, "proposal", p.id.to_string(), 1, body.clone(), Condition::Absent),
                put(t, "proposal_by_state", format!("{}#{}", p.state, p.id), 1, body, Condition::None),
            ])
            .await
    }

    async fn get_proposal(&self, tenant: &TenantId, id: &Id) -> Result<Option<Proposal>> {
        self.get_one(tenant.as_str(), "proposal", id.as_str()).await
    }

    async fn update_proposal(&self, p: &Proposal) -> Result<Proposal> {
        self.write_proposal(p, Vec::new()).await
    }

    async fn update_proposal_audited(&self, p: &Proposal, audit: &AuditRecord) -> Result<Proposal> {
        if audit.tenant != p.tenant {
            return Err(Error::invalid_field("tenant", "an audit record stays inside its tenant"));
        }
        self.write_proposal(p, vec![super::audit_put(audit)?]).await
    }

    async fn commit_governed_write(
        &self,
        p: &Proposal,
        entry: &MemoryEntry,
        superseded: Option<&MemoryEntry>,
        audit: &[AuditRecord],
    ) -> Result<Proposal> {
        let t = p.tenant.as_str();
        if p.state != ProposalState::Written {
            return Err(Error::conflict(format!("proposal {} must be committed as written, not {}", p.id, p.state)));
        }
        let current: Proposal =
            self.get_proposal(&p.tenant, &p.id).await?.ok_or_else(|| Error::not_found(format!("proposal {}", p.id)))?;
        if !current.state.can_move_to(p.state) {
            return Err(Error::conflict(format!("a proposal cannot move from {} to {}", current.state, p.state)));
        }
        let mut next = p.clone();
        next.version = p.version + 1;
        let body = encode(&next)?;
        let mut writes = vec![
            put(t, "proposal", p.id.to_string(), next.version, body.clone(), Condition::Version(p.version)),
            Write::Delete {
                tenant: t.to_owned(),
                part: "proposal_by_state".into(),
                sk: format!("{}#{}", current.state, p.id),
                condition: Condition::None,
            },
            put(t, "proposal_by_state", format!("{}#{}", next.state, p.id), next.version, body, Condition::None),
        ];
        for (m, expect) in std::iter::once((entry, Expect::Absent)).chain(superseded.map(|o| (o, Expect::Version(o.version)))) {
            if m.tenant != p.tenant {
                return Err(Error::invalid_field("tenant", "a governed write stays inside one tenant"));
            }
            let (version, condition) = versioned(expect);
            let mut stored = m.clone();
            stored.version = version;
            let body = encode(&stored)?;
            writes.push(put(t, "memory", m.id.to_string(), version, body.clone(), condition));
            writes.push(put(t, "memory_by_scope", format!("{}#{}", m.scope.storage_key(), m.id), version, body, Condition::None));
        }
        for r in audit {
            if r.tenant != p.tenant {
                return Err(Error::invalid_field("tenant", "a governed write stays inside one tenant"));
            }
            writes.push(super::audit_put(r)?);
        }
        self.items.write(writes).await?;
        Ok(next)
    }

    async fn list_proposals(
        &self,
        tenant: &TenantId,
        state: Option<ProposalState>,
        page: &PageRequest,
    ) -> Result<Page<Proposal>> {
        match state {
            Some(s) => self.page(tenant.as_str(), "proposal_by_state", &format!("{s}#"), page, false).await,
            None => self.page(tenant.as_str(), "proposal", "", page, false).await,
        }
    }
}
