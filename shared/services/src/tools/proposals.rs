//! Proposals: what every proposing tool shares (checks, the redaction of secrets before
//! anything is stored, triage at once), proposing an action, and a proposal's state.

use domain::principal::{CallerContext, Scope};
use domain::proposal::{Proposal, ProposalState};
use domain::{Error, ErrorCode, Id, Result};
use ports::records::ProposalStore;
use schemars::JsonSchema;
use serde::Deserialize;

use super::memory::ProposalOutput;
use super::{EntityArg, IdArgs, MAX_BODY_BYTES, MAX_TITLE_LEN, ProposalView, Tools, reads_memory, text_field};
use crate::capabilities::typed::{Capability, Context};

impl Tools<'_> {
    /// A new `pending` proposal of `kind`, its title and body checked.
    pub(crate) fn proposal(&self, caller: &CallerContext, kind: &str, title: String, body: String) -> Result<Proposal> {
        text_field("title", &title, MAX_TITLE_LEN)?;
        if body.len() > MAX_BODY_BYTES {
            // A proposal over the size limit is refused as such (SPEC §10), not as a typo.
            let mut e = Error::new(ErrorCode::PayloadTooLarge, format!("body: a proposal is at most {MAX_BODY_BYTES} bytes"));
            e.payload
                .field_errors
                .push(domain::FieldError { field: "body".into(), message: format!("at most {MAX_BODY_BYTES} bytes") });
            return Err(e);
        }
        text_field("body", &body, MAX_BODY_BYTES)?;
        let now = self.now();
        Ok(Proposal {
            tenant: caller.tenant.clone(),
            id: self.new_id(),
            kind: kind.into(),
            title,
            body,
            supersedes: None,
            suggested_supersede: None,
            state: ProposalState::Pending,
            score: None,
            decision_reason: None,
            proposed_by: caller.principal.clone(),
            source_session: None,
            origin: None,
            wait: None,
            detected: Vec::new(),
            created_at: now,
            updated_at: now,
            version: 1,
        })
    }

    /// Stores a proposal — its secrets redacted first — and runs triage at once: the
    /// answer says where it went.
    pub(crate) async fn new_proposal(&self, caller: &CallerContext, mut p: Proposal) -> Result<ProposalOutput> {
        // A secret never reaches the store or the answer: only its kind, place and
        // fingerprint (triage then rejects the proposal).
        crate::governance::redaction::redact_secrets(&mut p);
        self.backend.records.create_proposal(&p).await?;
        // The embedded runner of the triage states runs now; on Step Functions the
        // execution is under way. A proposal waiting for a person waits in the store.
        let p = crate::governance::GovernanceService::new(self.backend.clone()).triage(&p.tenant, &p.id).await?;
        Ok(ProposalOutput { proposal: ProposalView::of(&p, caller) })
    }
}

// ---- proposal.create ------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposalCreateArgs {
    #[schemars(length(min = 1, max = 200))]
    pub title: String,
    #[schemars(length(min = 1, max = 16384), description = "What should be done and why.")]
    pub body: String,
    pub entity: Option<EntityArg>,
}

pub struct ProposalCreate;

impl Capability for ProposalCreate {
    const NAME: &'static str = "proposal.create";
    const TITLE: &'static str = "Propose an action";
    const DESCRIPTION: &'static str = "Propose an action for the organisation to take (governed): it is stored as pending and decided outside the chat. Never assume it will be approved.";
    type Args = ProposalCreateArgs;
    type Output = ProposalOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: ProposalCreateArgs) -> Result<ProposalOutput> {
        let mut body = a.body;
        if let Some(e) = &a.entity {
            body.push_str(&format!("\n\nConcerns: {}", e.to_ref()?));
        }
        let p = cx.tools.proposal(cx.caller, "action", a.title, body)?;
        cx.tools.new_proposal(cx.caller, p).await
    }
}

// ---- proposal.status ------------------------------------------------------------------

pub struct ProposalStatus;

impl Capability for ProposalStatus {
    const NAME: &'static str = "proposal.status";
    const TITLE: &'static str = "Get a proposal's status";
    const DESCRIPTION: &'static str =
        "Read a proposal's governance state, its triage score and reasons once scored, and the decision's reason.";
    type Args = IdArgs;
    type Output = ProposalOutput;

    /// Any proposal for a caller who may read memory, else only the caller's own (others'
    /// are memory it may not read: `FORBIDDEN`, naming the scope).
    async fn run<'a>(cx: &'a Context<'a>, a: IdArgs) -> Result<ProposalOutput> {
        let id = Id::new(a.id)?;
        let p = cx
            .tools
            .backend
            .records
            .get_proposal(&cx.caller.tenant, &id)
            .await?
            .ok_or_else(|| Error::not_found(format!("proposal {id}")))?;
        if !reads_memory(cx.caller) && p.proposed_by != cx.caller.principal {
            return Err(Error::missing_scope(Scope::MemoryRead.as_str()));
        }
        Ok(ProposalOutput { proposal: ProposalView::of(&p, cx.caller) })
    }
}
