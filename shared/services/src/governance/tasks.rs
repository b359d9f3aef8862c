//! The triage workflow's task code (SPEC §6.3), one function per Task state of
//! `statemachines/triage.asl.json`. Step Functions runs them in the `continuity-triage`
//! Lambda ([`Tasks::run`] takes the state's payload); the embedded runner
//! ([`super::EmbeddedRunner`]) calls the same functions in process.
//!
//! Every task is idempotent — a retried task, or a redelivered wait, finds its work done
//! and answers the same — and refuses (`CONFLICT`) a proposal in a state it cannot move.

use std::collections::BTreeSet;

use domain::action::ActionState;
use domain::audit::AuditRecord;
use domain::memory::{GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType};
use domain::proposal::{Proposal, ProposalState, Wait};
use domain::{Error, ErrorCode, Id, PageRequest, Result, TenantId, Timestamp};
use ports::Backend;
use ports::records::{AuditLog, EntityStore, Expect, MemoryStore, ProposalStore, TenantStore};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::triage;

mod act;
pub use act::ACTION_LEASE_MS;

/// Most active org entries triage compares a proposal against when the tenant has no
/// search index to find the closest ones.
const MAX_SCANNED: usize = 5_000;
/// Active entries (closest first, from the search index) triage compares against: a
/// near-duplicate or a contradiction shares most of its words with the proposal, so it
/// ranks at the top of a keyword search.
const CANDIDATES: usize = 12;

/// Where the `Score` task sends a proposal: the `Route` Choice state reads `route`, the
/// `AwaitApproval` state its timeout and heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scored {
    /// `auto_approve`, `human` or `reject`.
    pub route: String,
    pub timeout_seconds: u64,
    pub heartbeat_seconds: u64,
    /// What approval leads to, read by the `Apply` Choice state: `act` for an action
    /// proposal naming a connector operation (the `Act` state carries it out), `write`
    /// for everything else (the single writer).
    #[serde(default = "write_step")]
    pub apply: String,
}

fn write_step() -> String {
    "write".to_owned()
}

/// A Task state's payload (`{"task": "score", "tenant": "…", "proposal": "…"}`;
/// `RecordFailure` adds the caught `error`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskInput {
    pub task: String,
    pub tenant: String,
    pub proposal: String,
    #[serde(default)]
    pub error: Option<Value>,
}

/// The message `AwaitApproval` sends to the approval-waits queue
/// (`sqs:sendMessage.waitForTaskToken`), which [`Tasks::register_wait`] stores.
#[derive(Debug, Deserialize)]
pub struct WaitMessage {
    pub tenant: String,
    pub proposal: String,
    pub token: String,
    pub timeout_seconds: u64,
}

#[derive(Clone)]
pub struct Tasks {
    backend: Backend,
    /// Writes approved entities (their change notices reach subscribed sessions).
    entities: crate::entities::EntityService,
    /// Applies a performed action's effect to the Spine.
    ingest: crate::ingest::IngestService,
    /// Accepts the ADR an org decision came from.
    engineering: crate::engineering::EngineeringService,
    /// Indexes written org memory.
    search: crate::search::SearchService,
    /// Tells approvers a proposal waits, and admins it escalated.
    notify: crate::notify::NotifyService,
}

/// What the governance tasks write through, built once by [`crate::Services`].
pub struct Writers {
    pub entities: crate::entities::EntityService,
    pub ingest: crate::ingest::IngestService,
    pub engineering: crate::engineering::EngineeringService,
    pub search: crate::search::SearchService,
    /// Tells approvers a proposal waits, and admins it escalated.
    pub notify: crate::notify::NotifyService,
}

impl Tasks {
    pub(crate) fn new(backend: Backend, w: Writers) -> Self {
        Self { backend, entities: w.entities, ingest: w.ingest, engineering: w.engineering, search: w.search, notify: w.notify }
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Runs the task a state machine payload names and returns its output.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for an unknown task or a malformed payload; the task's own.
    pub async fn run(&self, payload: Value) -> Result<Value> {
        let input: TaskInput = serde_json::from_value(payload).map_err(|e| Error::invalid_field("task", e.to_string()))?;
        let tenant = TenantId::new(input.tenant)?;
        let id = Id::new(input.proposal)?;
        let state = |p: Proposal| json!({ "proposal": p.id.as_str(), "state": p.state.as_str() });
        Ok(match input.task.as_str() {
            "score" => serde_json::to_value(self.score(&tenant, &id).await?).map_err(|e| Error::internal(e.to_string()))?,
            "auto_approve" => state(self.auto_approve(&tenant, &id).await?),
            "write" => state(self.write(&tenant, &id, "governance").await?),
            "act" => state(self.act(&tenant, &id).await?),
            "record_rejection" => state(self.record_rejection(&tenant, &id).await?),
            "escalate" => state(self.escalate(&tenant, &id).await?),
            "record_failure" => {
                let cause = input.error.as_ref().map_or_else(|| "unknown error".to_owned(), failure_cause);
                state(self.record_failure(&tenant, &id, &cause).await?)
            }
            other => return Err(Error::invalid_field("task", format!("unknown task {other:?}"))),
        })
    }

    pub(crate) async fn audit(&self, tenant: &TenantId, actor: &str, action: &str, target: &Id, outcome: &str) -> Result<()> {
        self.backend.records.append_audit(&self.audit_record(tenant, actor, action, target, outcome)).await
    }

    fn audit_record(&self, tenant: &TenantId, actor: &str, action: &str, target: &Id, outcome: &str) -> AuditRecord {
        crate::audit::record(&self.backend, tenant, actor, action, Some(target.to_string()), outcome)
    }

    pub(crate) async fn load(&self, tenant: &TenantId, id: &Id) -> Result<Proposal> {
        self.backend.records.get_proposal(tenant, id).await?.ok_or_else(|| Error::not_found(format!("proposal {id}")))
    }

    /// Moves `p` to `to` (a legal lifecycle step), stored with a versioned write.
    pub(crate) async fn step(&self, mut p: Proposal, to: ProposalState, actor: &str, outcome: &str) -> Result<Proposal> {
        if !p.state.can_move_to(to) {
            return Err(Error::conflict(format!("proposal {} cannot move from {} to {}", p.id, p.state, to)));
        }
        p.state = to;
        p.updated_at = self.backend.clock.now();
        let audit = self.audit_record(&p.tenant, actor, &format!("proposal.{}", to.as_str()), &p.id, outcome);
        self.backend.records.update_proposal_audited(&p, &audit).await
    }

    fn policy(t: &domain::tenant::Tenant) -> domain::tenant::TriagePolicy {
        t.triage.unwrap_or_default()
    }

    /// The active org entries a proposal is compared against: the closest ones by the
    /// tenant's search index (org partition), else a scan of the org scope.
    async fn compared(&self, tenant: &TenantId, p: &Proposal) -> Result<Vec<MemoryEntry>> {
        let records = &self.backend.records;
        if self.backend.search.name() != "none" {
            // The query port takes at most 512 bytes without control characters.
            let mut query = String::new();
            for c in format!("{} {}", p.title, p.body).chars() {
                if query.len() + c.len_utf8() > 500 {
                    break;
                }
                query.push(if c.is_control() { ' ' } else { c });
            }
            let hits = self
                .backend
                .search
                .search(&ports::search::SearchQuery {
                    tenant: tenant.clone(),
                    scopes: vec![MemoryScope::Org],
                    kind: Some(ports::search::DocKind::Memory),
                    text: query.trim().to_owned(),
                    vector: None,
                    embedder: self.backend.embedder.name().to_owned(),
                    mode: ports::search::SearchMode::Keyword,
                    k: CANDIDATES,
                    since: None,
                    until: None,
                })
                .await;
            match hits {
                Ok(hits) => {
                    let mut out = Vec::with_capacity(hits.len());
                    let mut seen = BTreeSet::new();
                    for h in hits {
                        if seen.insert(h.doc.clone())
                            && let Some(m) = records.get_memory(tenant, &h.doc).await?
                            && m.state == GovernanceState::Active
                        {
                            out.push(m);
                        }
                    }
                    // The entry it names to supersede is compared even if the index missed it.
                    if let Some(id) = &p.supersedes
                        && !seen.contains(id)
                        && let Some(m) = records.get_memory(tenant, id).await?
                        && m.state == GovernanceState::Active
                    {
                        out.push(m);
                    }
                    return Ok(out);
                }
                Err(e) => tracing::warn!(code = ?e.code, "triage: search index unavailable; scanning org memory instead"),
            }
        }
        let mut out = Vec::new();
        let mut page = PageRequest::first(500);
        loop {
            let got = records.list_memory(tenant, &MemoryScope::Org, &page).await?;
            out.extend(got.items.into_iter().filter(|m| m.state == GovernanceState::Active));
            match got.next_cursor {
                Some(c) if out.len() < MAX_SCANNED => page = PageRequest::after(500, c),
                _ => break,
            }
        }
        Ok(out)
    }

    /// Whether the session a proposal cites has turns that support what it says (its first
    /// 500 turns read).
    async fn grounded(&self, tenant: &TenantId, session: &str, p: &Proposal) -> Result<bool> {
        let turns = self.backend.records.list_turns(tenant, session, &PageRequest::first(500)).await?;
        let said: String = turns.items.iter().map(|t| t.content.as_str()).collect::<Vec<_>>().join("\n");
        Ok(triage::supported_by(&format!("{}\n{}", p.title, p.body), &said))
    }

    /// Scores the proposal against the tenant's policy (factors, reasons, a rejection
    /// reason or a supersede suggestion stored with it) and says where it goes.
    ///
    /// # Errors
    /// `NOT_FOUND`; `CONFLICT` unless the proposal is pending (or scored: a retry);
    /// `UNAVAILABLE`.
    pub async fn score(&self, tenant: &TenantId, id: &Id) -> Result<Scored> {
        let records = &self.backend.records;
        let p = self.load(tenant, id).await?;
        if !matches!(p.state, ProposalState::Pending | ProposalState::Scored) {
            return Err(Error::conflict(format!("proposal {id} is {}, not pending", p.state)));
        }
        let t = records.get_tenant(tenant).await?.ok_or_else(|| Error::not_found(format!("tenant {tenant}")))?;
        let vocabulary = vocabulary(t.department, t.industry);
        let active = self.compared(tenant, &p).await?;
        let grounded = match &p.source_session {
            Some(session) => self.grounded(tenant, session, &p).await?,
            None => false,
        };
        let input = triage::Input {
            title: &p.title,
            body: &p.body,
            has_source_session: grounded,
            supersedes: p.supersedes.as_ref(),
            detected: &p.detected,
            active: &active,
            vocabulary: vocabulary.as_ref(),
        };
        let policy = Self::policy(&t);
        let (mut score, mut route) = triage::score(&input, &triage::Policy::from(&policy));
        // What acts in another system or writes the Spine is never approved by a score.
        if route == triage::Route::AutoApprove
            && let Some(why) = super::redaction::always_a_person(&p)
        {
            route = triage::Route::Human { supersede: None };
            score.reasons.push(format!("route: {why}; a person approves it"));
            score.public_reasons.push(format!("route: {why}; a person approves it"));
        }
        let apply = if p.action.is_some() { "act" } else { "write" };
        let out = |route: &str| Scored {
            route: route.to_owned(),
            timeout_seconds: policy.approval_timeout_secs,
            heartbeat_seconds: policy.approval_heartbeat_secs(),
            apply: apply.to_owned(),
        };
        let name = match &route {
            triage::Route::AutoApprove => "auto_approve",
            triage::Route::Human { .. } => "human",
            triage::Route::Reject { .. } => "reject",
        };
        if p.state == ProposalState::Scored {
            // A retried Score: stored already; the route is recomputed, not rewritten.
            return Ok(out(name));
        }
        let mut scored = p;
        match route {
            triage::Route::Human { supersede } => scored.suggested_supersede = supersede,
            triage::Route::Reject { reason } => scored.decision_reason = Some(reason),
            triage::Route::AutoApprove => {}
        }
        let total = score.total;
        scored.score = Some(score);
        self.step(scored, ProposalState::Scored, "governance", &format!("score {total:.2}: {name}")).await?;
        // Counted once per proposal: a retried Score returned above.
        metrics::add(
            match name {
                "auto_approve" => metrics::Counter::TriageAutoApproved,
                "human" => metrics::Counter::TriageHuman,
                _ => metrics::Counter::TriageRejected,
            },
            1,
        );
        Ok(out(name))
    }

    /// `AutoApprove`: scored → auto_approved.
    ///
    /// # Errors
    /// As [`Self::score`].
    pub async fn auto_approve(&self, tenant: &TenantId, id: &Id) -> Result<Proposal> {
        let p = self.load(tenant, id).await?;
        match p.state {
            ProposalState::AutoApproved | ProposalState::Written => Ok(p),
            _ => {
                // The scorer never routes these here; this is the invariant, checked again.
                if let Some(why) = super::redaction::needs_a_person(&p) {
                    return Err(Error::conflict(format!("proposal {id} cannot be approved without a person: {why}")));
                }
                self.step(p, ProposalState::AutoApproved, "governance", "auto-approved").await
            }
        }
    }

    /// `AwaitApproval`'s wait, stored: scored → awaiting_approval with the task token and
    /// its deadline. A redelivered message for the same wait changes nothing.
    ///
    /// # Errors
    /// As [`Self::score`].
    pub async fn register_wait(&self, tenant: &TenantId, id: &Id, token: &str, timeout_secs: u64) -> Result<Proposal> {
        if token.is_empty() || token.len() > 8192 {
            return Err(Error::invalid_field("token", "must be 1-8192 characters"));
        }
        let mut p = self.load(tenant, id).await?;
        if p.wait.as_ref().is_some_and(|w| w.token == token) {
            return Ok(p);
        }
        if !matches!(p.state, ProposalState::Scored | ProposalState::AwaitingApproval) {
            // A late (redelivered) wait for a proposal decided, expired or failed since:
            // nothing to wait for any more.
            tracing::info!(proposal = %id, state = %p.state, "stale wait ignored");
            return Ok(p);
        }
        let deadline = Timestamp(
            self.backend.clock.now().0.saturating_add(i64::try_from(timeout_secs.saturating_mul(1000)).unwrap_or(i64::MAX)),
        );
        p.wait = Some(Wait { token: token.to_owned(), deadline });
        if p.state == ProposalState::AwaitingApproval {
            // A new wait for the same proposal (the execution restarted): the newest token.
            p.updated_at = self.backend.clock.now();
            return self.backend.records.update_proposal(&p).await;
        }
        let waiting = self.step(p, ProposalState::AwaitingApproval, "governance", "awaiting a person").await?;
        let score = waiting.score.as_ref().map_or_else(String::new, |s| format!(" (triage score {:.2})", s.total));
        let why = waiting.score.as_ref().map(|s| s.public_reasons.join("; ")).filter(|r| !r.is_empty()).unwrap_or_default();
        let text = format!("{}{score}. {why}", waiting.body.chars().take(400).collect::<String>());
        self.notify
            .emit(
                &waiting.tenant,
                domain::notify::EventKind::ProposalWaiting,
                &format!("proposal {}", waiting.id),
                &format!("Waiting for you: {}", waiting.title),
                &text,
                Some("/approvals"),
            )
            .await;
        Ok(waiting)
    }

    /// Tells approvers, once per proposal, that a waiting proposal is near its deadline
    /// (`proposal.expiring`), and drops the markers of proposals no longer waiting.
    /// Never fails: a channel not told now is told on a later pass.
    pub(crate) async fn warn_expiring(&self, tenant: &TenantId, waiting: &[Proposal], soon: i64) {
        for p in waiting {
            let Some(w) = p.wait.as_ref().filter(|w| w.deadline.0 <= soon) else { continue };
            let left = (w.deadline.0 - self.backend.clock.now().0).max(0) / 60_000;
            let text = format!(
                "Nobody has decided yet; in {} h {} min it escalates to the workspace's admins (never auto-approved).",
                left / 60,
                left % 60
            );
            self.notify
                .emit_once(
                    tenant,
                    domain::notify::EventKind::ProposalExpiring,
                    &format!("proposal {}", p.id),
                    &format!("Expires soon: {}", p.title),
                    &text,
                    "/approvals",
                )
                .await;
        }
        let current: BTreeSet<String> = waiting.iter().map(|p| format!("proposal {}", p.id)).collect();
        if let Err(e) = self.notify.forget_told(tenant, domain::notify::EventKind::ProposalExpiring, &current).await {
            tracing::warn!(tenant = %tenant, error = %e, "expiry markers not pruned; the next pass tries again");
        }
    }

    /// `Write`: the single writer. An approved (or auto-approved) memory proposal becomes
    /// an active org entry — superseding the entry it names, or the one triage found it
    /// contradicts, with lineage both ways — in one atomic commit with the proposal's
    /// `written` state and the audit records. Nothing is deleted. Then the entry is
    /// indexed (proven retrievable, or queued for review) and the superseded one leaves
    /// the index. Other proposal kinds are recorded as written.
    ///
    /// # Errors
    /// `CONFLICT` unless approved; `NOT_FOUND`; `UNAVAILABLE`.
    pub async fn write(&self, tenant: &TenantId, id: &Id, actor: &str) -> Result<Proposal> {
        let records = &self.backend.records;
        for attempt in 0..4 {
            let p = self.load(tenant, id).await?;
            match p.state {
                ProposalState::Written => {
                    // A retry after a crash between the commit and the ADR's acceptance.
                    self.accept_origin(&p, &p.id).await;
                    return Ok(p);
                }
                ProposalState::Approved | ProposalState::AutoApproved => {}
                other => return Err(Error::conflict(format!("proposal {id} is {other}, not approved"))),
            }
            // Governance's last line: only a person's approval writes a proposal holding a
            // secret or personal data, or one that replaces an entry.
            if let Some(why) = super::redaction::needs_a_person(&p) {
                return Err(Error::conflict(format!("proposal {id} cannot be written without a person's approval: {why}")));
            }
            let actor = if p.state == ProposalState::Approved && actor == "governance" {
                "governance (approved by a person)"
            } else {
                actor
            };
            if p.action.is_some() {
                return self.act(tenant, id).await;
            }
            if let Some(target) = p.kind.strip_prefix("book:").map(str::to_owned) {
                return self.write_book(p, &target, actor).await;
            }
            if p.kind.starts_with("entity:") {
                return self.write_entity(p, actor).await;
            }
            let Some(kind) = p.kind.strip_prefix("memory:").map(str::to_owned) else {
                // An action without a connector operation: approved for people to carry
                // out; recorded as such.
                return self.step(p, ProposalState::Written, actor, "recorded: approved for people to carry out").await;
            };
            let now = self.backend.clock.now();
            let replaces = p.supersedes.clone().or_else(|| p.suggested_supersede.clone());
            let old = match &replaces {
                Some(old_id) => records.get_memory(tenant, old_id).await?.filter(|m| m.state == GovernanceState::Active),
                None => None,
            };
            // The entry's id is the proposal's: a retried write finds it, never a twin.
            let entry = MemoryEntry {
                tenant: p.tenant.clone(),
                id: p.id.clone(),
                memory_type: MemoryType::Org,
                scope: MemoryScope::Org,
                kind,
                title: p.title.clone(),
                body: p.body.clone(),
                state: GovernanceState::Active,
                lineage: Lineage {
                    proposal: Some(p.id.clone()),
                    supersedes: old.as_ref().map(|o| o.id.clone()),
                    source_turns: Vec::new(),
                },
                created_by: p.proposed_by.clone(),
                created_at: now,
                updated_at: now,
                version: 0,
                occurred_at: None,
                expires_at: None,
                metadata: None,
            };
            let superseded = old.map(|mut o| {
                o.state = GovernanceState::Superseded { by: entry.id.clone() };
                o.updated_at = now;
                o
            });
            let mut written = p.clone();
            written.state = ProposalState::Written;
            written.updated_at = now;
            let mut audits = vec![self.audit_record(tenant, actor, "memory.write", &entry.id, "active")];
            if let Some(o) = &superseded {
                audits.push(self.audit_record(tenant, actor, "memory.supersede", &o.id, &format!("superseded by {}", entry.id)));
            }
            audits.push(self.audit_record(tenant, actor, "proposal.written", &p.id, "written"));
            match records.commit_governed_write(&written, &entry, superseded.as_ref(), &audits).await {
                Ok(stored) => {
                    self.index(&entry, superseded.as_ref(), actor).await;
                    self.accept_origin(&stored, &entry.id).await;
                    return Ok(stored);
                }
                // Someone moved first (a concurrent retry, an edit of the superseded
                // entry): read again and redo, or find it done.
                Err(e) if e.code == ErrorCode::Conflict && attempt < 3 => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::conflict(format!("proposal {id}: the write kept conflicting; retry")))
    }

    /// An approved `book:{project}/{entry}` proposal: the entry written (replacing one
    /// of the same id, keeping its creation time), then the proposal `written`.
    async fn write_book(&self, p: Proposal, target: &str, actor: &str) -> Result<Proposal> {
        let (project, entry) = target
            .split_once('/')
            .ok_or_else(|| Error::internal(format!("proposal {}: a book proposal without its entry", p.id)))?;
        let entry = Id::new(entry)?;
        crate::admin::book::write_entry(&self.backend, &p.tenant, project, &entry, &p.title, &p.body, actor).await?;
        self.step(p, ProposalState::Written, actor, &format!("book entry {project}/{entry} written")).await
    }

    /// An approved `entity:{type}` proposal: the entity created through the operator
    /// path's checks (a retry finding the very entity it wrote carries on).
    async fn write_entity(&self, p: Proposal, actor: &str) -> Result<Proposal> {
        let Some(draft) = p.entity.clone() else {
            return Err(Error::internal(format!("proposal {}: an entity proposal without its entity", p.id)));
        };
        let entities = &self.entities;
        let existing = self.backend.records.get_entity(&p.tenant, &draft.entity_type, &draft.id).await?;
        match existing {
            Some(e) if e.attributes == draft.attributes => {}
            Some(_) => {
                let why = format!("{}:{} exists already; propose a change to it instead", draft.entity_type, draft.id);
                return self.record_failure(&p.tenant, &p.id, &why).await;
            }
            None => {
                let created = entities
                    .put_governed(
                        &p.tenant,
                        draft.entity_type.clone(),
                        draft.id.clone(),
                        draft.attributes.clone(),
                        Expect::Absent,
                    )
                    .await;
                match created {
                    Ok(_) => {}
                    Err(e) if e.code == ErrorCode::Unavailable || e.code == ErrorCode::Conflict => return Err(e),
                    Err(e) => return self.record_failure(&p.tenant, &p.id, &e.message).await,
                }
            }
        }
        let what = format!("entity {}:{} created", draft.entity_type, draft.id);
        self.audit(&p.tenant, actor, "entity.create", &p.id, &what).await?;
        self.step(p, ProposalState::Written, actor, &what).await
    }

    /// A written proposal that came from an engineering ADR accepts the ADR (pointing at
    /// the org entry). The entry is written either way; a failure here is logged and the
    /// ADR stays proposed, its org decision active.
    async fn accept_origin(&self, p: &Proposal, entry: &Id) {
        let Some((project, adr)) = p.origin.as_deref().and_then(|o| o.strip_prefix("adr:")).and_then(|o| o.split_once('/'))
        else {
            return;
        };
        let Some((adr, version)) = adr.split_once('@').and_then(|(a, v)| Some((a, v.parse::<u64>().ok()?))) else {
            tracing::warn!(proposal = %p.id, "a proposal's ADR origin has no version; the ADR is left as it is");
            return;
        };
        let accepted = match Id::new(adr) {
            Ok(id) => self.engineering.accept_governed(&p.tenant, project, &id, version, entry).await,
            Err(e) => Err(e),
        };
        if let Err(e) = accepted {
            tracing::warn!(code = ?e.code, proposal = %p.id, "the org decision is written but its ADR could not be marked accepted");
        }
    }

    async fn index(&self, entry: &MemoryEntry, superseded: Option<&MemoryEntry>, actor: &str) {
        let indexed = self
            .search
            .index(crate::search::IndexRequest {
                tenant: &entry.tenant,
                scope: &entry.scope,
                kind: ports::search::DocKind::Memory,
                doc: &entry.id,
                title: &entry.title,
                body: &entry.body,
                at: entry.created_at,
                occurred: None,
            })
            .await;
        match indexed {
            Ok(Some(v)) => {
                let outcome = if v.verified { "verified".to_owned() } else { format!("review: {}", v.reason) };
                if let Err(e) = self.audit(&entry.tenant, actor, "memory.index", &entry.id, &outcome).await {
                    tracing::warn!(code = ?e.code, "could not audit the index verification");
                }
            }
            Ok(None) => {}
            // The entry is written; the daily reindex indexes and verifies it.
            Err(e) => tracing::warn!(code = ?e.code, "could not record the index verification; the reindex job retries"),
        }
        if let Some(old) = superseded
            && let Err(e) = self.search.unindex(&old.tenant, &MemoryScope::Org, &old.id).await
        {
            // Superseded entries stay readable by id, not in search; the reindex retries.
            tracing::warn!(code = ?e.code, "could not take a superseded entry out of the index");
        }
    }

    /// `RecordRejection`: a proposal triage rejected (scored, with the reason) becomes
    /// `rejected`; one a person rejected already is.
    ///
    /// # Errors
    /// As [`Self::score`].
    pub async fn record_rejection(&self, tenant: &TenantId, id: &Id) -> Result<Proposal> {
        let mut p = self.load(tenant, id).await?;
        match p.state {
            ProposalState::Rejected if !super::redaction::has_personal(&p) => Ok(p),
            // A person rejected it: kept, but without the personal data it held.
            ProposalState::Rejected => {
                super::redaction::mask_for_keeping(&mut p);
                p.updated_at = self.backend.clock.now();
                self.backend.records.update_proposal(&p).await
            }
            _ => {
                super::redaction::mask_for_keeping(&mut p);
                let reason = p.decision_reason.clone().unwrap_or_else(|| "rejected by triage".to_owned());
                self.step(p, ProposalState::Rejected, "governance", &reason).await
            }
        }
    }

    /// `Escalate`: nobody decided in time. A proposal still waiting becomes `expired` —
    /// never auto-approved — and the escalation is audited for the tenant's admins. One
    /// a person approved just before the timeout is written; one rejected stays so; one
    /// whose wait was never stored (still `scored`) is recorded as failed.
    ///
    /// # Errors
    /// As [`Self::score`].
    pub async fn escalate(&self, tenant: &TenantId, id: &Id) -> Result<Proposal> {
        let mut p = self.load(tenant, id).await?;
        match p.state {
            ProposalState::AwaitingApproval => {
                let waited = p.wait.as_ref().map_or(0, |w| (w.deadline.0 - p.updated_at.0).max(0) / 1000);
                p.decision_reason =
                    Some(format!("no decision within {waited} s: escalated to the tenant's admins; never auto-approved"));
                super::redaction::mask_for_keeping(&mut p);
                let expired = self.step(p, ProposalState::Expired, "governance", "expired").await?;
                self.audit(tenant, "governance", "proposal.escalated", id, "no approver decided in time").await?;
                self.notify
                    .emit(
                        tenant,
                        domain::notify::EventKind::ProposalEscalated,
                        &format!("proposal {id}"),
                        &format!("Escalated: {}", expired.title),
                        expired.decision_reason.as_deref().unwrap_or("nobody decided in time"),
                        Some("/approvals"),
                    )
                    .await;
                Ok(expired)
            }
            ProposalState::Approved => self.write(tenant, id, "governance").await,
            // The wait message never reached the store (dead-lettered): nobody could
            // decide it. Recorded as failed, so the proposer can make it again.
            ProposalState::Scored => {
                self.record_failure(tenant, id, "the approval wait was never stored, so nobody could decide; propose it again")
                    .await
            }
            _ => Ok(p),
        }
    }

    /// `RecordFailure`: the workflow caught an error it could not retry past; the
    /// proposal becomes `failed` with the cause (a finished one is left as it is).
    ///
    /// # Errors
    /// `NOT_FOUND`; `UNAVAILABLE`.
    pub async fn record_failure(&self, tenant: &TenantId, id: &Id, cause: &str) -> Result<Proposal> {
        let mut p = self.load(tenant, id).await?;
        if p.state.is_terminal() {
            return Ok(p);
        }
        let cause: String = cause.chars().take(500).collect();
        p.decision_reason = Some(format!("workflow failure: {cause}"));
        // An action whose worker stopped mid-request: its outcome is unknown, say so.
        if let Some(run) = p.action.as_mut().and_then(|a| a.run.as_mut())
            && run.state == ActionState::Performing
        {
            run.state = ActionState::Failed;
            run.error = Some(format!(
                "the workflow stopped while it was being carried out ({cause}): its outcome is unknown; check the source"
            ));
            run.finished_at = Some(self.backend.clock.now());
        }
        super::redaction::mask_for_keeping(&mut p);
        self.step(p, ProposalState::Failed, "governance", &cause).await
    }
}

/// The words of a tenant schema's entity types and field names (relevance), built once
/// per (department, industry).
fn vocabulary(department: domain::tenant::Department, industry: domain::tenant::Industry) -> std::sync::Arc<BTreeSet<String>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    type Key = (domain::tenant::Department, domain::tenant::Industry);
    static CACHE: OnceLock<Mutex<HashMap<Key, Arc<BTreeSet<String>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(v) = cache.lock().ok().and_then(|c| c.get(&(department, industry)).cloned()) {
        return v;
    }
    let schema = adk::resolve::schema_for(department, industry);
    let words: BTreeSet<String> = schema
        .entity_types
        .values()
        .flat_map(|s| std::iter::once(s.name.clone()).chain(s.fields.keys().cloned()))
        .flat_map(|n| n.split('_').map(str::to_owned).collect::<Vec<_>>())
        .filter(|w| w.len() > 2)
        .collect();
    let words = Arc::new(words);
    if let Ok(mut c) = cache.lock() {
        c.insert((department, industry), words.clone());
    }
    words
}

/// A readable cause from a Step Functions error object (`{"Error": …, "Cause": …}`).
fn failure_cause(error: &Value) -> String {
    let name = error.get("Error").and_then(Value::as_str).unwrap_or("error");
    let cause = error.get("Cause").and_then(Value::as_str).unwrap_or("");
    // A Lambda's cause is its own JSON error ({"errorMessage": …}); show the message.
    let message = serde_json::from_str::<Value>(cause)
        .ok()
        .and_then(|v| v.get("errorMessage").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| cause.to_owned());
    if message.is_empty() { name.to_owned() } else { format!("{name}: {message}") }
}
