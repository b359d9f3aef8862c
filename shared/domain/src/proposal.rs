//! Proposals (SPEC §6): what an agent wants to become organisational truth.

use serde::{Deserialize, Serialize};

use crate::ids::{Id, TenantId, Timestamp};
use crate::tenant::string_enum;

string_enum! {
    /// Lifecycle: `pending → scored → auto_approved | awaiting_approval | rejected → approved → written | failed`;
    /// `expired` when nobody decided within the tenant's approval timeout (escalated,
    /// never auto-approved; a new proposal can be made).
    ProposalState, "state" {
        Pending = "pending",
        Scored = "scored",
        AutoApproved = "auto_approved",
        AwaitingApproval = "awaiting_approval",
        Approved = "approved",
        Rejected = "rejected",
        Written = "written",
        Failed = "failed",
        Expired = "expired",
    }
}

impl ProposalState {
    /// Whether `self → to` is a legal lifecycle step.
    pub fn can_move_to(self, to: Self) -> bool {
        use ProposalState::*;
        matches!(
            (self, to),
            (Pending, Scored)
                | (Pending, Failed)
                | (Scored, AutoApproved | AwaitingApproval | Rejected | Failed)
                | (AutoApproved, Written | Failed)
                | (AwaitingApproval, Approved | Rejected | Expired | Failed)
                | (Approved, Written | Failed)
        )
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Written | Self::Rejected | Self::Failed | Self::Expired)
    }
}

/// A proposal's wait for a person (SPEC §6.3): the workflow's task token and when the
/// wait times out. Stored with the proposal so a restart keeps it; never shown to
/// anyone ([`Proposal::redacted`]).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    /// The token the decision is sent with (`SendTaskSuccess`/`SendTaskFailure`, or the
    /// embedded runner's).
    pub token: String,
    /// When the wait escalates if nobody decided.
    pub deadline: Timestamp,
}

impl std::fmt::Debug for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wait").field("token", &"[redacted]").field("deadline", &self.deadline).finish()
    }
}

/// Triage factors in [0, 1] (SPEC §6.2) with their reasons.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriageScore {
    pub confidence: f64,
    pub relevance: f64,
    pub risk: f64,
    pub conflict: f64,
    pub quality: f64,
    pub total: f64,
    /// The reasons, naming the active entries a proposal conflicts with and counting
    /// the words it shares with org memory: for callers who may read org memory.
    pub reasons: Vec<String>,
    /// The same reasons without entry ids, titles or counts: what a caller who may not
    /// read org memory (`memory:read`) is shown, so triage is no oracle for it.
    #[serde(default)]
    pub public_reasons: Vec<String>,
}

/// A secret found in a proposal when it was made. The value itself is never stored: the
/// text holds `[redacted: {kind} #{fingerprint}]` in its place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detected {
    /// `an AWS secret access key`.
    pub kind: String,
    /// The detector's rule (`aws-secret-access-key`).
    pub rule: String,
    /// `title` or `body`.
    pub field: String,
    /// Where it began in that field as proposed, in characters.
    pub at: usize,
    /// The first 12 hex digits of SHA-256 of `{tenant}\n{value}`: enough to recognise a
    /// known credential, not to recover it.
    pub fingerprint: String,
    /// Only suspected (a random-looking token, no other evidence): redacted like a secret,
    /// but a person decides instead of the proposal being rejected.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspected: bool,
}

/// A Spine entity a `spine.entity.create` proposal would create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityDraft {
    pub entity_type: crate::ids::EntityType,
    pub id: Id,
    pub attributes: crate::value::Attributes,
}

/// A governed change proposal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    pub tenant: TenantId,
    pub id: Id,
    /// `memory:{kind}` (an org memory entry), `action` (with or without a connector
    /// operation), `entity:{type}` (a Spine entity to create) or `book:{project}` (a
    /// book-of-projects entry).
    pub kind: String,
    pub title: String,
    pub body: String,
    /// The org entry this proposal would supersede.
    pub supersedes: Option<Id>,
    /// An active entry triage found this proposal contradicts: approving it supersedes
    /// that entry (SPEC §6.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_supersede: Option<Id>,
    pub state: ProposalState,
    pub score: Option<TriageScore>,
    pub decision_reason: Option<String>,
    pub proposed_by: Id,
    /// Which client proposed it ([`crate::principal::CallerContext::via`]), for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_via: Option<String>,
    pub source_session: Option<String>,
    /// What the proposal came from when not an agent's own words: `adr:{project}/{id}`
    /// for an engineering ADR whose acceptance governance decides (written: the ADR is
    /// accepted, pointing at the org decision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Set while the proposal awaits a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
    /// For an `action` proposal, the connector operation approval carries out, and how
    /// carrying it out went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<crate::action::Action>,
    /// For an `entity:{type}` proposal, the entity approval creates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<EntityDraft>,
    /// Secrets found (and redacted) when the proposal was made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub detected: Vec<Detected>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
}

impl Proposal {
    /// The proposal as shown to people and clients: the wait's token removed (its
    /// deadline kept).
    #[must_use]
    pub fn redacted(mut self) -> Self {
        if let Some(w) = &mut self.wait {
            w.token.clear();
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::ProposalState::*;

    #[test]
    fn lifecycle_is_enforced() {
        assert!(Pending.can_move_to(Scored));
        assert!(Scored.can_move_to(AwaitingApproval));
        assert!(AwaitingApproval.can_move_to(Approved));
        assert!(Approved.can_move_to(Written));
        assert!(!Pending.can_move_to(Written));
        assert!(!Rejected.can_move_to(Approved));
        assert!(!Written.can_move_to(Pending));
    }
}
