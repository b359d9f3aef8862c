//! Proposals: what every proposing tool shares (checks, the redaction of secrets before
//! anything is stored, triage at once), proposing an action, and a proposal's state.

use domain::action::{Action, ActionRequest};
use domain::principal::{CallerContext, Scope};
use domain::proposal::{EntityDraft, Proposal, ProposalState};
use domain::{EntityType, Error, ErrorCode, Id, Result};
use ports::records::{CredentialStore, EntityStore, ProposalStore};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::memory::ProposalOutput;
use super::{EntityArg, IdArgs, MAX_BODY_CHARS, MAX_TITLE_LEN, ProposalView, Tools, not_blank, reads_memory};
use crate::capabilities::policy::*;
use crate::capabilities::typed::{Capability, Context};

impl Tools<'_> {
    /// A new `pending` proposal of `kind`, its title and body checked.
    pub(crate) fn proposal(&self, caller: &CallerContext, kind: &str, title: String, body: String) -> Result<Proposal> {
        // The tools' schemas bound what callers send; this bounds what every path makes
        // (summaries, ADRs, connector actions), in the same characters and with the same
        // answer — a proposal over the size limit is refused as such, not as a typo.
        for (field, text, max) in [("title", &title, MAX_TITLE_LEN), ("body", &body, MAX_BODY_CHARS)] {
            not_blank(field, text)?;
            if text.chars().count() > max {
                let mut e = Error::new(ErrorCode::PayloadTooLarge, format!("a proposal's {field} is at most {max} characters"));
                e.payload
                    .field_errors
                    .push(domain::FieldError { field: field.into(), message: format!("at most {max} characters") });
                return Err(e);
            }
        }
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
            proposed_via: Some(caller.via()),
            source_session: None,
            origin: None,
            wait: None,
            action: None,
            entity: None,
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
        let p = self.governance.triage(&p.tenant, &p.id).await?;
        Ok(ProposalOutput { proposal: ProposalView::of(&p, caller) })
    }
}

// ---- proposal.create ------------------------------------------------------------------

/// A connector operation an action proposal asks for.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionArg {
    #[schemars(description = "The connected system: hubspot, salesforce, zendesk, jira or stripe.")]
    pub connector: String,
    #[schemars(
        description = "The operation, e.g. deal.update_stage (hubspot), opportunity.update_stage or case.update_status (salesforce), ticket.add_comment or ticket.update_status (zendesk), issue.add_comment (jira), subscription.cancel (stripe)."
    )]
    pub operation: String,
    #[schemars(
        description = "The source's id of the record acted on (a HubSpot deal id, a Jira issue key…).",
        length(min = 1, max = 128)
    )]
    pub target: String,
    #[schemars(description = "The operation's parameters, e.g. {\"stage\": \"closedwon\"}.")]
    pub params: Option<Map<String, Value>>,
}

impl ActionArg {
    pub(crate) fn to_request(&self) -> Result<ActionRequest> {
        let params = match &self.params {
            Some(p) => serde_json::from_value(Value::Object(p.clone()))
                .map_err(|e| Error::invalid_field("action.params", e.to_string()))?,
            None => Default::default(),
        };
        let r = ActionRequest {
            connector: self.connector.trim().to_owned(),
            operation: self.operation.trim().to_owned(),
            target: self.target.trim().to_owned(),
            params,
        };
        crate::actions::check(&r)?;
        Ok(r)
    }
}

/// A book-of-projects entry a proposal would write.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BookArg {
    #[schemars(length(min = 1, max = 128))]
    pub project: String,
    #[schemars(
        description = "The entry's id (replaces the entry of that id); default: the proposal's id.",
        length(min = 1, max = 128)
    )]
    pub entry: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposalCreateArgs {
    #[schemars(length(min = 1, max = super::MAX_TITLE_LEN))]
    pub title: String,
    #[schemars(length(min = 1, max = super::MAX_BODY_CHARS), description = "What should be done and why.")]
    pub body: String,
    pub entity: Option<EntityArg>,
    #[schemars(description = "An operation in a connected system that approval carries out (a person always approves these).")]
    pub action: Option<ActionArg>,
    #[schemars(description = "Instead of an action: a book-of-projects entry (title and body) approval writes.")]
    pub book: Option<BookArg>,
}

pub struct ProposalCreate;

impl Capability for ProposalCreate {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "proposal.create",
        Channel::Tool,
        PlanTier::Pro,
        &[Scope::TenantWrite],
        RouteKind::RemoteFunction,
        "function.triage",
    )
    .writes();
    const TITLE: &'static str = "Propose an action";
    const DESCRIPTION: &'static str = "Propose an action for the organisation to take (governed): it is stored as pending and decided outside the chat. With `action`, approval carries it out in the connected system (a person always approves those); with `book`, approval writes a book-of-projects entry. Never assume it will be approved.";
    type Args = ProposalCreateArgs;
    type Output = ProposalOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: ProposalCreateArgs) -> Result<ProposalOutput> {
        let mut body = a.body;
        if let Some(e) = &a.entity {
            body.push_str(&format!("\n\nConcerns: {}", e.to_ref()?));
        }
        match (a.action, a.book) {
            (Some(_), Some(_)) => Err(Error::invalid("a proposal is an action or a book entry, not both")),
            (Some(action), None) => {
                let request = action.to_request()?;
                cx.tools.action_proposal(cx.caller, a.title, body, request).await
            }
            (None, Some(book)) => {
                let p = cx.tools.proposal(cx.caller, "action", a.title, body)?;
                let entry = book.entry.unwrap_or_else(|| p.id.to_string());
                let (project, entry) = crate::admin::book::check_entry(&book.project, &entry, &p.title, &p.body)?;
                let p = Proposal { kind: format!("book:{project}/{entry}"), ..p };
                cx.tools.new_proposal(cx.caller, p).await
            }
            (None, None) => {
                let p = cx.tools.proposal(cx.caller, "action", a.title, body)?;
                cx.tools.new_proposal(cx.caller, p).await
            }
        }
    }
}

impl Tools<'_> {
    /// A governed action naming a connector operation (checked now: a proposal that could
    /// never be carried out is refused before anyone reviews it).
    pub(crate) async fn action_proposal(
        &self,
        caller: &CallerContext,
        title: String,
        body: String,
        request: ActionRequest,
    ) -> Result<ProposalOutput> {
        let mut p = self.proposal(caller, "action", title, body)?;
        let source = Id::new(request.connector.clone())?;
        if self.backend.records.get_credential(&caller.tenant, &source).await?.is_none() {
            return Err(Error::new(
                ErrorCode::ConnectorNotAvailable,
                format!("{} is not connected for actions: an operator stores its credential first", request.connector),
            ));
        }
        p.action = Some(Action { request, run: None });
        self.new_proposal(caller, p).await
    }
}

// ---- connector.write -----------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectorWriteArgs {
    #[schemars(
        description = "The connected system (its connector must be connected): hubspot, salesforce, zendesk, jira or stripe."
    )]
    pub source: String,
    #[schemars(description = "The operation, e.g. deal.update_stage; see proposal_create.")]
    pub operation: String,
    #[schemars(description = "The source's id of the record acted on.", length(min = 1, max = 128))]
    pub target: String,
    pub params: Option<Map<String, Value>>,
    #[schemars(description = "Why: what the approver reads.", length(min = 1, max = super::MAX_BODY_CHARS))]
    pub reason: String,
    #[schemars(description = "A one-line title; default: the operation and its target.", length(min = 1, max = super::MAX_TITLE_LEN))]
    pub title: Option<String>,
}

pub struct ConnectorWrite;

impl Capability for ConnectorWrite {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "connector.write",
        Channel::Api,
        PlanTier::Pro,
        &[Scope::TenantWrite],
        RouteKind::ConnectorProxy,
        "connector.proxy",
    )
    .writes()
    .connector(ConnectorNeed::Named);
    const TITLE: &'static str = "Write to a connected system (governed)";
    const DESCRIPTION: &'static str = "Ask for a write in a connected system (HubSpot, Salesforce, Zendesk, Jira, Stripe) whose connector is connected. It becomes an action proposal a person approves; approval carries it out once. The answer is the proposal.";
    type Args = ConnectorWriteArgs;
    type Output = ProposalOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: ConnectorWriteArgs) -> Result<ProposalOutput> {
        let action = ActionArg { connector: a.source, operation: a.operation, target: a.target, params: a.params };
        let request = action.to_request()?;
        let title = a.title.unwrap_or_else(|| format!("{} {} {}", request.connector, request.operation, request.target));
        let title: String = title.chars().take(200).collect();
        cx.tools.action_proposal(cx.caller, title, a.reason, request).await
    }
}

// ---- spine.entity.create -------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntityCreateArgs {
    #[serde(rename = "type")]
    #[schemars(regex(pattern = r"^[a-z][a-z0-9_]{0,63}$"), description = "Canonical entity type, e.g. \"account\".")]
    pub entity_type: String,
    #[schemars(length(min = 1, max = 128))]
    pub id: String,
    #[schemars(description = "The entity's fields, as the tenant's schema names them.")]
    pub attributes: Map<String, Value>,
    #[schemars(description = "Why it should exist: what the approver reads.", length(max = 4000))]
    pub reason: Option<String>,
}

pub struct EntityCreate;

impl Capability for EntityCreate {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "spine.entity.create",
        Channel::Api,
        PlanTier::Starter,
        &[Scope::TenantWrite],
        RouteKind::RemoteFunction,
        "function.pipeline",
    )
    .writes()
    .schema(SchemaUse::Write);
    const TITLE: &'static str = "Propose a new Spine entity";
    const DESCRIPTION: &'static str = "Propose creating a Spine entity (governed: a person approves it, then it is written through the operator path's schema checks). The answer is the proposal.";
    type Args = EntityCreateArgs;
    type Output = ProposalOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: EntityCreateArgs) -> Result<ProposalOutput> {
        let entity_type = EntityType::new(a.entity_type)?;
        let id = Id::new(a.id)?;
        let attributes: domain::value::Attributes =
            serde_json::from_value(Value::Object(a.attributes)).map_err(|e| Error::invalid_field("attributes", e.to_string()))?;
        domain::spine::Entity::validate_attributes(&attributes)?;
        cx.tools.schema.check_write(entity_type.as_str(), &attributes)?;
        if cx.tools.backend.records.get_entity(&cx.caller.tenant, &entity_type, &id).await?.is_some() {
            return Err(Error::conflict(format!("{entity_type}:{id} exists already")));
        }
        let mut body = a.reason.map(|r| r.trim().to_owned()).filter(|r| !r.is_empty()).unwrap_or_default();
        if !body.is_empty() {
            body.push_str("\n\n");
        }
        body.push_str(&format!("Create {entity_type}:{id} with:"));
        for (k, v) in &attributes {
            let mut shown = String::new();
            v.search_text(&mut shown);
            body.push_str(&format!("\n- {k}: {}", shown.trim()));
        }
        let title: String = format!("Create {entity_type} {id}").chars().take(200).collect();
        let mut p = cx.tools.proposal(cx.caller, &format!("entity:{entity_type}"), title, body)?;
        p.entity = Some(EntityDraft { entity_type, id, attributes });
        cx.tools.new_proposal(cx.caller, p).await
    }
}

// ---- proposal.status ------------------------------------------------------------------

pub struct ProposalStatus;

impl Capability for ProposalStatus {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "proposal.status",
        Channel::Tool,
        PlanTier::Pro,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.proposals",
    );
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
