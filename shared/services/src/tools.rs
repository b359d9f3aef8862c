//! The canonical MCP tools beyond `spine.entity.*` (SPEC §7.1), each with the simplest
//! honest behaviour its back-end allows today:
//!
//! - memory: org memory is searched by keywords over the tenant's active org entries
//!   (read fresh from the store, never cached); conversational turns are appended and
//!   read per session; personal patterns are read from the caller's personal scope;
//!   proposals are stored `pending` — triage and approval are the governance issue, and
//!   nothing here ever makes an entry active (walls 4 and 5).
//! - session: Entity 360 (entity + relationships + recent signals + matching org
//!   memory), an extractive summary of a session stored as a `pending` proposal, the
//!   caller's recent sessions.
//! - tool: relationships, signals, proposals, the book of projects, keyword search over
//!   the knowledge base, and a JSON playbook assembled from real context.
//!
//! The ADK has already resolved the capability (plan, scopes, connectors) when these run;
//! each still reads only the caller's tenant and the memory scopes the caller may read.

use domain::memory::{
    ConversationTurn, GovernanceState, MemoryEntry, MemoryScope, MemoryType, OrgKind, SessionSummary, TurnRole,
};
use domain::principal::{CallerContext, Scope};
use domain::proposal::{Proposal, ProposalState};
use domain::spine::{EntityRef, Relationship, Signal};
use domain::{EntityType, Error, ErrorCode, Id, PageRequest, Result, Timestamp};
use ports::Backend;
use ports::records::{Direction, LibraryStore, MemoryStore, ProposalStore, RelationshipStore, SignalStore};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::entities::EntityService;
use crate::search::SearchService;
use ports::search::{DocKind, SearchMode};

pub const MAX_TITLE_LEN: usize = 200;
pub const MAX_BODY_BYTES: usize = 16 * 1024;
pub const MAX_TURN_BYTES: usize = 64 * 1024;
pub const MAX_QUERY_LEN: usize = 512;
/// Most entries a keyword search over memory or the KB examines.
pub const MAX_SCAN: usize = 10_000;

fn parse<T: serde::de::DeserializeOwned>(args: &Value) -> Result<T> {
    serde_json::from_value(args.clone()).map_err(|e| Error::invalid(format!("invalid arguments: {e}")))
}

/// The `{"id": …}` argument of the tools that read one record.
fn id_arg(args: &Value) -> Result<Id> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct A {
        id: String,
    }
    let a: A = parse(args)?;
    Id::new(a.id)
}

/// The first page, or the page after an opaque cursor.
fn page_of(size: u32, cursor: Option<String>) -> PageRequest {
    cursor.map_or_else(|| PageRequest::first(size), |c| PageRequest::after(size, c))
}

fn limit(n: Option<u32>, default: u32, max: u32) -> u32 {
    n.unwrap_or(default).clamp(1, max)
}

fn text_field(name: &str, value: &str, max: usize) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::invalid_field(name, "must not be empty"));
    }
    if value.len() > max {
        return Err(Error::invalid_field(name, format!("at most {max} bytes")));
    }
    Ok(())
}

/// Lower-cased words of a query; every one must appear for a match.
fn terms(query: &str) -> Result<Vec<String>> {
    if query.len() > MAX_QUERY_LEN {
        return Err(Error::invalid_field("query", format!("at most {MAX_QUERY_LEN} characters")));
    }
    Ok(query.split_whitespace().map(str::to_lowercase).collect())
}

/// Rank of a keyword match (lower is better): an exact id, all words in the title, or
/// all words anywhere; `None` when some word is missing.
fn rank(terms: &[String], id: &str, title: &str, body: &str) -> Option<u8> {
    let id = id.to_lowercase();
    let title = title.to_lowercase();
    let all = format!("{id}\n{title}\n{}", body.to_lowercase());
    if !terms.iter().all(|t| all.contains(t.as_str())) {
        return None;
    }
    Some(if terms.len() == 1 && terms[0] == id {
        0
    } else if terms.iter().all(|t| title.contains(t.as_str())) {
        1
    } else {
        2
    })
}

/// A session id as the caller names it: `{principal}.{name}`. A bare name is put in the
/// caller's namespace; a full id must be the caller's own.
fn own_session(caller: &CallerContext, session: &str) -> Result<String> {
    let prefix = format!("{}.", caller.principal);
    let full = if session.starts_with(&prefix) { session.to_owned() } else { format!("{prefix}{session}") };
    Id::new(full.clone()).map_err(|_| Error::invalid_field("session", "1-128 printable characters without spaces, # or /"))?;
    if full.len() <= prefix.len() {
        return Err(Error::invalid_field("session", "must not be empty"));
    }
    Ok(full)
}

fn memory_json(m: &MemoryEntry) -> Value {
    let mut v = json!({
        "id": m.id.as_str(),
        "kind": m.kind,
        "title": m.title,
        "body": m.body,
        "scope": m.scope.storage_key(),
        "state": m.state.name(),
        "created_by": m.created_by.as_str(),
        "created_at": m.created_at.to_rfc3339(),
        "updated_at": m.updated_at.to_rfc3339(),
        "lineage": {
            "proposal": m.lineage.proposal.as_ref().map(Id::as_str),
            "supersedes": m.lineage.supersedes.as_ref().map(Id::as_str),
            "source_turns": m.lineage.source_turns.iter().map(Id::as_str).collect::<Vec<_>>(),
        },
    });
    match &m.state {
        GovernanceState::Superseded { by } => v["superseded_by"] = json!(by.as_str()),
        GovernanceState::Rejected { reason } => v["rejection_reason"] = json!(reason),
        GovernanceState::Active => {}
    }
    v
}

/// Whether the caller may read memory (`memory:read`): every path that returns memory —
/// org entries, turns, proposals' bodies, triage's comparisons with org memory — asks this.
fn reads_memory(caller: &CallerContext) -> bool {
    caller.scopes.contains(Scope::MemoryRead)
}

/// A proposal as `caller` may see it: personal data masked for everyone (secrets were
/// never stored). A caller without `memory:read` sees no body and only the reasons and
/// factors that say nothing about org memory (no entry ids or titles, no counts, no
/// relevance, conflict or total from which they could be worked out).
fn proposal_json(p: &Proposal, caller: &CallerContext) -> Value {
    let p = crate::governance::redaction::view(p.clone());
    let reader = reads_memory(caller);
    let redacted: Vec<Value> =
        p.detected.iter().map(|d| json!({"kind": d.kind, "field": d.field, "at": d.at, "fingerprint": d.fingerprint})).collect();
    let score = p.score.as_ref().map(|s| {
        if reader {
            json!({
                "total": s.total, "confidence": s.confidence, "relevance": s.relevance, "risk": s.risk,
                "conflict": s.conflict, "quality": s.quality, "reasons": s.reasons,
            })
        } else {
            json!({"confidence": s.confidence, "risk": s.risk, "quality": s.quality, "reasons": s.public_reasons})
        }
    });
    json!({
        "id": p.id.as_str(),
        "kind": p.kind,
        "title": p.title,
        "body": if reader { json!(p.body) } else { Value::Null },
        "state": p.state.as_str(),
        "supersedes": p.supersedes.as_ref().map(Id::as_str),
        "score": score,
        "redacted": redacted,
        "decision_reason": p.decision_reason,
        "proposed_by": p.proposed_by.as_str(),
        "source_session": p.source_session,
        "created_at": p.created_at.to_rfc3339(),
        "updated_at": p.updated_at.to_rfc3339(),
    })
}

fn turn_json(t: &ConversationTurn) -> Value {
    json!({"seq": t.seq, "role": t.role.as_str(), "content": t.content, "at": t.at.to_rfc3339()})
}

/// A session in a listing; its title is the first words of a turn, so memory: only for
/// a caller with `memory:read`.
fn session_json(s: &SessionSummary, reader: bool) -> Value {
    json!({
        "session": s.session, "turns": s.turns, "title": if reader { json!(s.title) } else { Value::Null },
        "first_at": s.first_at.to_rfc3339(), "last_at": s.last_at.to_rfc3339(),
    })
}

fn relationship_json(r: &Relationship) -> Value {
    json!({
        "from": {"type": r.from.entity_type.as_str(), "id": r.from.id.as_str()},
        "to": {"type": r.to.entity_type.as_str(), "id": r.to.id.as_str()},
        "kind": r.kind.as_str(),
        "valid_from": r.valid_from.to_rfc3339(),
        "valid_to": r.valid_to.map(Timestamp::to_rfc3339),
    })
}

fn signal_json(s: &Signal) -> Value {
    json!({
        "id": s.id.as_str(),
        "entity": {"type": s.entity.entity_type.as_str(), "id": s.entity.id.as_str()},
        "kind": s.kind.as_str(),
        "at": s.at.to_rfc3339(),
        "before": serde_json::to_value(&s.before).unwrap_or(Value::Null),
        "after": serde_json::to_value(&s.after).unwrap_or(Value::Null),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntityArg {
    #[serde(rename = "type")]
    entity_type: String,
    id: String,
}

impl EntityArg {
    fn to_ref(&self) -> Result<EntityRef> {
        Ok(EntityRef { entity_type: EntityType::new(self.entity_type.clone())?, id: Id::new(self.id.clone())? })
    }
}

/// The tools' executors, over the same backend and entity service as the capability service.
pub(crate) struct Tools<'a> {
    pub backend: &'a Backend,
    pub entities: &'a EntityService,
    /// The visible-entity rendering of the tenant's schema.
    pub schema: &'a adk::schema::TenantSchema,
}

impl Tools<'_> {
    fn now(&self) -> Timestamp {
        self.backend.clock.now()
    }

    fn new_id(&self) -> Id {
        crate::new_id(self.backend)
    }

    /// Runs one resolved tool.
    pub async fn run(&self, caller: &CallerContext, name: &str, args: &Value) -> Result<(Value, String)> {
        match name {
            "memory.search_org" => self.search_org(caller, args).await,
            "memory.read_org" => self.read_org(caller, args).await,
            "memory.propose" => self.propose_memory(caller, args).await,
            "memory.read_conversational" => self.read_conversational(caller, args).await,
            "memory.write_conversational" => self.write_conversational(caller, args).await,
            "memory.read_personal" => self.read_personal(caller, args).await,
            "memory.list_decisions" => self.list_decisions(caller, args).await,
            "session.get_context" => self.get_context(caller, args).await,
            "session.summarize" => self.summarize(caller, args).await,
            "session.list_recent" => self.list_recent(caller, args).await,
            "spine.relationship.list" => self.relationships(caller, args).await,
            "signal.list" => self.signals(caller, args).await,
            "signal.get" => self.signal(caller, args).await,
            "proposal.create" => self.create_action(caller, args).await,
            "proposal.status" => self.proposal_status(caller, args).await,
            "book.list" => self.book(caller, args).await,
            "kb.search" => self.kb_search(caller, args).await,
            "playbook.handoff" => self.playbook(caller, args).await,
            other => Err(Error::new(
                ErrorCode::CapabilityNotFound,
                format!("{other} is registered but not served by this version of Continuity yet"),
            )),
        }
    }

    // ---- memory ------------------------------------------------------------------

    /// Active org entries matching `query`, best first: hybrid search over the index,
    /// each hit re-read from the store (org memory is never served stale), or — where no
    /// index is configured — a keyword scan of the store. Returns the entries, whether
    /// the result was cut short, and which way it was found.
    async fn org_matches(
        &self,
        caller: &CallerContext,
        query: &str,
        kind: Option<&str>,
        max: usize,
    ) -> Result<(Vec<MemoryEntry>, bool, &'static str)> {
        ports::search::check_query(query)?;
        let search = SearchService::new(self.backend.clone());
        if search.enabled() {
            let hits = search
                .search(caller, vec![MemoryScope::Org], Some(DocKind::Memory), query, (max * 2).min(100), SearchMode::Hybrid)
                .await?;
            let mut out = Vec::new();
            for h in &hits {
                let Some(m) = self.backend.records.get_memory(&caller.tenant, &h.doc).await? else { continue };
                if m.scope == MemoryScope::Org && m.state == GovernanceState::Active && kind.is_none_or(|k| m.kind == k) {
                    out.push(m);
                }
                if out.len() == max {
                    break;
                }
            }
            return Ok((out, hits.len() >= 100, "hybrid"));
        }
        let terms = terms(query)?;
        let records = &self.backend.records;
        let (all, truncated) =
            crate::all_pages(MAX_SCAN, |p| async move { records.list_memory(&caller.tenant, &MemoryScope::Org, &p).await })
                .await?;
        let mut hits: Vec<(u8, MemoryEntry)> = all
            .into_iter()
            .filter(|m| m.state == GovernanceState::Active && kind.is_none_or(|k| m.kind == k))
            .filter_map(|m| rank(&terms, m.id.as_str(), &m.title, &m.body).map(|r| (r, m)))
            .collect();
        hits.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.updated_at.cmp(&a.1.updated_at)));
        Ok((hits.into_iter().take(max).map(|(_, m)| m).collect(), truncated, "keyword-scan"))
    }

    async fn search_org(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            query: String,
            kind: Option<OrgKind>,
            limit: Option<u32>,
        }
        let a: A = parse(args)?;
        let max = limit(a.limit, 10, 50) as usize;
        let (hits, truncated, via) = self.org_matches(caller, &a.query, a.kind.map(OrgKind::as_str), max).await?;
        let mut text = format!("{} active org memory entries match", hits.len());
        if via != "hybrid" {
            text.push_str(" (keyword scan: no search index is configured)");
        }
        for m in &hits {
            text.push_str(&format!("\n- [{}] {} ({}): {}", m.id, m.title, m.kind, m.body.chars().take(200).collect::<String>()));
        }
        let entries: Vec<Value> = hits.iter().map(memory_json).collect();
        Ok((json!({"entries": entries, "count": entries.len(), "truncated": truncated, "search": via}), text))
    }

    async fn read_org(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        let id = id_arg(args)?;
        let m = self
            .backend
            .records
            .get_memory(&caller.tenant, &id)
            .await?
            .filter(|m| m.scope == MemoryScope::Org)
            .ok_or_else(|| Error::not_found(format!("org memory entry {id}")))?;
        let mut text = format!("[{}] {} ({}, {})\n{}", m.id, m.title, m.kind, m.state.name(), m.body);
        if let GovernanceState::Superseded { by } = &m.state {
            text.push_str(&format!("\nSuperseded by {by}: read that entry for the current truth."));
        }
        // Its readback verification, with the extracted entities and linked entries.
        let v = ports::records::ReviewStore::get_verification(&self.backend.records, &caller.tenant, "memory", &m.id).await?;
        if let Some(v) = &v {
            text.push_str(&format!(
                "\nVerification: {} (confidence {:.2})",
                if v.verified { "retrievable, verified" } else { "awaiting review" },
                v.confidence
            ));
            if !v.related.is_empty() {
                let related: Vec<&str> = v.related.iter().map(Id::as_str).collect();
                text.push_str(&format!("\nRelated entries: {}", related.join(", ")));
            }
        }
        Ok((json!({"entry": memory_json(&m), "verification": v}), text))
    }

    async fn new_proposal(&self, caller: &CallerContext, mut p: Proposal) -> Result<(Value, String)> {
        // A secret never reaches the store or the answer: only its kind, place and
        // fingerprint (triage then rejects the proposal).
        crate::governance::redaction::redact_secrets(&mut p);
        self.backend.records.create_proposal(&p).await?;
        // Triage runs now (the embedded runner of the triage states): the answer says
        // where the proposal went. A proposal waiting for a person waits in the store.
        let p = crate::governance::GovernanceService::new(self.backend.clone()).triage(&p.tenant, &p.id).await?;
        let scored = match p.score.as_ref() {
            Some(s) if reads_memory(caller) => format!(" scored {:.2} and", s.total),
            _ => String::new(),
        };
        let text = match p.state {
            ProposalState::Written if p.kind.starts_with("memory:") => {
                format!("Proposal {}{scored} was approved by triage: it is now active org memory.", p.id)
            }
            ProposalState::Written => format!("Proposal {}{scored} was approved by triage.", p.id),
            ProposalState::AwaitingApproval => {
                format!("Proposal {}{scored} waits for a person to decide (never in chat). Check it with proposal.status.", p.id)
            }
            ProposalState::Rejected => format!(
                "Proposal {} was rejected by triage: {}",
                p.id,
                p.decision_reason.as_deref().unwrap_or("no reason recorded")
            ),
            other => format!("Proposal {} is {}. Check it with proposal.status.", p.id, other.as_str()),
        };
        Ok((json!({"proposal": proposal_json(&p, caller)}), text))
    }

    fn proposal(&self, caller: &CallerContext, kind: &str, title: String, body: String) -> Result<Proposal> {
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
            wait: None,
            detected: Vec::new(),
            created_at: now,
            updated_at: now,
            version: 1,
        })
    }

    async fn propose_memory(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            title: String,
            body: String,
            kind: OrgKind,
            supersedes: Option<String>,
            session: Option<String>,
        }
        let a: A = parse(args)?;
        let mut p = self.proposal(caller, &format!("memory:{}", a.kind.as_str()), a.title, a.body)?;
        if let Some(s) = a.supersedes {
            let id = Id::new(s)?;
            let target = self.backend.records.get_memory(&caller.tenant, &id).await?;
            if !target.is_some_and(|m| m.scope == MemoryScope::Org && m.state == GovernanceState::Active) {
                return Err(Error::invalid_field("supersedes", format!("{id} is not an active org memory entry")));
            }
            p.supersedes = Some(id);
        }
        p.source_session = a.session.map(|s| own_session(caller, &s)).transpose()?;
        self.new_proposal(caller, p).await
    }

    async fn read_conversational(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            session: String,
            after_seq: Option<u64>,
            limit: Option<u32>,
        }
        let a: A = parse(args)?;
        let session = own_session(caller, &a.session)?;
        let max = limit(a.limit, 50, 500) as usize;
        let records = &self.backend.records;
        let (turns, _) = crate::all_pages(100_000, |p| {
            let session = session.clone();
            async move { records.list_turns(&caller.tenant, &session, &p).await }
        })
        .await?;
        let after = a.after_seq.unwrap_or(0);
        let picked: Vec<&ConversationTurn> = turns.iter().filter(|t| t.seq > after).take(max).collect();
        let mut text = format!("{} turns of session {session}", picked.len());
        for t in &picked {
            text.push_str(&format!("\n#{} {}: {}", t.seq, t.role, t.content));
        }
        let list: Vec<Value> = picked.iter().map(|t| turn_json(t)).collect();
        let more = turns.iter().filter(|t| t.seq > after).count() > picked.len();
        Ok((json!({"session": session, "turns": list, "more": more}), text))
    }

    async fn write_conversational(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            session: String,
            role: TurnRole,
            content: String,
        }
        let a: A = parse(args)?;
        let session = own_session(caller, &a.session)?;
        text_field("content", &a.content, MAX_TURN_BYTES)?;
        let records = &self.backend.records;
        // The next seq is the session's turn count + 1; a racing append takes it first
        // (the turn's key is conditional), so re-read and retry.
        for _ in 0..5 {
            let next = records.get_session(&caller.tenant, &caller.principal, &session).await?.map_or(1, |s| s.turns + 1);
            let turn = ConversationTurn {
                tenant: caller.tenant.clone(),
                session: session.clone(),
                seq: next,
                id: self.new_id(),
                role: a.role,
                content: a.content.clone(),
                principal: caller.principal.clone(),
                at: self.now(),
            };
            match records.append_turn(&turn).await {
                Ok(()) => {
                    let text = format!("Appended turn #{} to session {session}.", turn.seq);
                    return Ok((json!({"session": session, "seq": turn.seq, "at": turn.at.to_rfc3339()}), text));
                }
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::conflict("the session is being written concurrently; retry"))
    }

    async fn read_personal(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            kind: Option<domain::memory::PersonalKind>,
            limit: Option<u32>,
        }
        let a: A = parse(args)?;
        let max = limit(a.limit, 50, 500) as usize;
        let scope = MemoryScope::Personal(caller.principal.to_string());
        // Checked before any index is read (wall 6); always true for one's own scope.
        if !scope.readable_by(caller) {
            return Err(Error::forbidden("this personal scope belongs to someone else"));
        }
        let records = &self.backend.records;
        let (all, _) = crate::all_pages(MAX_SCAN, |p| {
            let scope = scope.clone();
            async move { records.list_memory(&caller.tenant, &scope, &p).await }
        })
        .await?;
        let picked: Vec<&MemoryEntry> = all
            .iter()
            .filter(|m| m.memory_type == MemoryType::Personal && m.state == GovernanceState::Active)
            .filter(|m| a.kind.is_none_or(|k| m.kind == k.as_str()))
            .take(max)
            .collect();
        let mut text = format!("{} personal patterns", picked.len());
        for m in &picked {
            text.push_str(&format!("\n- ({}) {}: {}", m.kind, m.title, m.body.chars().take(200).collect::<String>()));
        }
        let list: Vec<Value> = picked.iter().map(|m| memory_json(m)).collect();
        Ok((json!({"patterns": list, "count": list.len()}), text))
    }

    async fn list_decisions(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            state: Option<ProposalState>,
            limit: Option<u32>,
            cursor: Option<String>,
        }
        let a: A = parse(args)?;
        let size = limit(a.limit, 20, 100);
        let page = page_of(size, a.cursor);
        let p = self.backend.records.list_proposals(&caller.tenant, a.state, &page).await?;
        let mut text = format!("{} proposals", p.items.len());
        for x in &p.items {
            text.push_str(&format!("\n- [{}] {} — {}", x.id, crate::governance::redaction::mask_personal(&x.title), x.state));
            if let Some(r) = &x.decision_reason {
                text.push_str(&format!(" ({r})"));
            }
        }
        let list: Vec<Value> = p.items.iter().map(|x| proposal_json(x, caller)).collect();
        Ok((json!({"decisions": list, "next_cursor": p.next_cursor}), text))
    }

    // ---- session -----------------------------------------------------------------

    async fn get_context(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            entity: Option<EntityArg>,
            session: Option<String>,
            query: Option<String>,
        }
        let a: A = parse(args)?;
        if a.entity.is_none() && a.session.is_none() && a.query.is_none() {
            return Err(Error::invalid("give an entity, a session or a query"));
        }
        // Turns and org memory are memory: they need `memory:read` like every other path
        // that returns memory; the entity part needs only what the tool needs.
        let reader = reads_memory(caller);
        if !reader && (a.session.is_some() || a.entity.is_none()) {
            return Err(Error::missing_scope(Scope::MemoryRead.as_str()));
        }
        let mut data = json!({});
        let mut text = String::new();
        let mut memory_query = a.query.clone().unwrap_or_default();
        if let Some(e) = &a.entity {
            let r = e.to_ref()?;
            let entity = self.entities.get(caller, &r.entity_type, &r.id).await?;
            let visible = crate::capabilities::visible_entity(&entity, self.schema)
                .ok_or_else(|| Error::not_found(format!("{} {}", r.entity_type, r.id)))?;
            let records = &self.backend.records;
            let mut rels =
                records.list_relationships(&caller.tenant, &r, Direction::Outgoing, &PageRequest::first(50)).await?.items;
            rels.extend(
                records.list_relationships(&caller.tenant, &r, Direction::Incoming, &PageRequest::first(50)).await?.items,
            );
            let signals = records.list_signals(&caller.tenant, Some(&r), &PageRequest::first(20)).await?.items;
            text.push_str(&format!("Entity {} {} ({})", r.entity_type, r.id, entity.label()));
            text.push_str(&format!("\n{} relationships, {} recent signals", rels.len(), signals.len()));
            for s in signals.iter().take(5) {
                text.push_str(&format!("\n- signal {} at {}", s.kind, s.at.to_rfc3339()));
            }
            if memory_query.is_empty() {
                memory_query = entity.label().to_owned();
            }
            data["entity"] = visible;
            data["relationships"] = json!(rels.iter().map(relationship_json).collect::<Vec<_>>());
            data["signals"] = json!(signals.iter().map(signal_json).collect::<Vec<_>>());
        }
        if let Some(s) = &a.session {
            let session = own_session(caller, s)?;
            let turns = self.backend.records.list_turns(&caller.tenant, &session, &PageRequest::first(500)).await?.items;
            let recent: Vec<Value> = turns.iter().rev().take(20).rev().map(turn_json).collect();
            text.push_str(&format!("\nSession {session}: {} turns (showing the last {})", turns.len(), recent.len()));
            data["session"] = json!({"session": session, "recent_turns": recent});
        }
        if !reader {
            text.push_str("\n(Org memory is left out: it needs the memory:read scope.)");
            data["memory"] = Value::Null;
            return Ok((data, text.trim_start().to_owned()));
        }
        let memory = if memory_query.split_whitespace().next().is_some() {
            self.org_matches(caller, &memory_query, None, 5).await?.0
        } else {
            Vec::new()
        };
        if !memory.is_empty() {
            text.push_str("\nRelevant org memory:");
            for m in &memory {
                text.push_str(&format!("\n- [{}] {}", m.id, m.title));
            }
        }
        data["memory"] = json!(memory.iter().map(memory_json).collect::<Vec<_>>());
        Ok((data, text.trim_start().to_owned()))
    }

    async fn summarize(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            session: String,
            title: Option<String>,
        }
        let a: A = parse(args)?;
        let session = own_session(caller, &a.session)?;
        let turns = self.backend.records.list_turns(&caller.tenant, &session, &PageRequest::first(500)).await?.items;
        if turns.is_empty() {
            return Err(Error::not_found(format!("session {session}")));
        }
        // Extractive: the session's turns in order, each shortened, within the body limit.
        // (An abstractive summary needs a model; this keeps every word traceable.)
        let mut body = format!("Summary of session {session} ({} turns):", turns.len());
        for t in &turns {
            let line = format!(
                "\n- {}: {}",
                t.role,
                t.content.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(300).collect::<String>()
            );
            if body.len() + line.len() > MAX_BODY_BYTES - 64 {
                body.push_str("\n- …");
                break;
            }
            body.push_str(&line);
        }
        let title =
            a.title.unwrap_or_else(|| format!("Session {}", session.split_once('.').map_or(session.as_str(), |(_, n)| n)));
        let mut p = self.proposal(caller, "memory:learning", title, body)?;
        p.source_session = Some(session);
        self.new_proposal(caller, p).await
    }

    async fn list_recent(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            limit: Option<u32>,
        }
        let a: A = parse(args)?;
        let max = limit(a.limit, 10, 100) as usize;
        let records = &self.backend.records;
        let (mut all, _) =
            crate::all_pages(MAX_SCAN, |p| async move { records.list_sessions(&caller.tenant, &caller.principal, &p).await })
                .await?;
        all.sort_by_key(|s| std::cmp::Reverse(s.last_at));
        all.truncate(max);
        let reader = reads_memory(caller);
        let mut text = format!("{} recent sessions", all.len());
        for s in &all {
            text.push_str(&format!("\n- {} ({} turns, last {})", s.session, s.turns, s.last_at.to_rfc3339()));
            if reader {
                text.push_str(&format!(": {}", s.title));
            }
        }
        Ok((json!({"sessions": all.iter().map(|s| session_json(s, reader)).collect::<Vec<_>>()}), text))
    }

    // ---- tool channel ------------------------------------------------------------

    async fn relationships(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            #[serde(rename = "type")]
            entity_type: String,
            id: String,
            direction: Option<String>,
            kind: Option<String>,
            limit: Option<u32>,
        }
        let a: A = parse(args)?;
        let r = EntityArg { entity_type: a.entity_type, id: a.id }.to_ref()?;
        let kind = a.kind.map(EntityType::new).transpose()?;
        let size = limit(a.limit, 50, 500);
        let records = &self.backend.records;
        let dirs: &[Direction] = match a.direction.as_deref() {
            None | Some("both") => &[Direction::Outgoing, Direction::Incoming],
            Some("out") => &[Direction::Outgoing],
            Some("in") => &[Direction::Incoming],
            Some(_) => return Err(Error::invalid_field("direction", "out, in or both")),
        };
        let mut rels = Vec::new();
        for d in dirs {
            let r = &r;
            let (all, _) =
                crate::all_pages(MAX_SCAN, |p| async move { records.list_relationships(&caller.tenant, r, *d, &p).await })
                    .await?;
            rels.extend(all.into_iter().filter(|x| kind.as_ref().is_none_or(|k| &x.kind == k)));
        }
        rels.truncate(size as usize);
        let mut text = format!("{} relationships of {} {}", rels.len(), r.entity_type, r.id);
        for x in &rels {
            text.push_str(&format!("\n- {} -{}-> {}", x.from, x.kind, x.to));
        }
        Ok((json!({"relationships": rels.iter().map(relationship_json).collect::<Vec<_>>()}), text))
    }

    async fn signals(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            entity: Option<EntityArg>,
            limit: Option<u32>,
            cursor: Option<String>,
        }
        let a: A = parse(args)?;
        let r = a.entity.as_ref().map(EntityArg::to_ref).transpose()?;
        let size = limit(a.limit, 20, 200);
        let page = page_of(size, a.cursor);
        let p = self.backend.records.list_signals(&caller.tenant, r.as_ref(), &page).await?;
        let mut text = format!("{} signals, newest first", p.items.len());
        for s in &p.items {
            text.push_str(&format!("\n- [{}] {} on {} at {}", s.id, s.kind, s.entity, s.at.to_rfc3339()));
        }
        Ok((json!({"signals": p.items.iter().map(signal_json).collect::<Vec<_>>(), "next_cursor": p.next_cursor}), text))
    }

    async fn signal(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        let id = id_arg(args)?;
        let s = self
            .backend
            .records
            .get_signal(&caller.tenant, &id)
            .await?
            .ok_or_else(|| Error::not_found(format!("signal {id}")))?;
        let text = format!("Signal {} on {} at {}", s.kind, s.entity, s.at.to_rfc3339());
        Ok((json!({"signal": signal_json(&s)}), text))
    }

    async fn create_action(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            title: String,
            body: String,
            entity: Option<EntityArg>,
        }
        let a: A = parse(args)?;
        let mut body = a.body;
        if let Some(e) = &a.entity {
            let r = e.to_ref()?;
            body.push_str(&format!("\n\nConcerns: {r}"));
        }
        let p = self.proposal(caller, "action", a.title, body)?;
        self.new_proposal(caller, p).await
    }

    /// A proposal's state: any proposal for a caller who may read memory, else only the
    /// caller's own (others' are memory it may not read: `FORBIDDEN`, naming the scope).
    async fn proposal_status(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        let id = id_arg(args)?;
        let p = self
            .backend
            .records
            .get_proposal(&caller.tenant, &id)
            .await?
            .ok_or_else(|| Error::not_found(format!("proposal {id}")))?;
        if !reads_memory(caller) && p.proposed_by != caller.principal {
            return Err(Error::missing_scope(Scope::MemoryRead.as_str()));
        }
        let mut text = format!("Proposal {} \"{}\" is {}", p.id, crate::governance::redaction::mask_personal(&p.title), p.state);
        if let Some(r) = &p.decision_reason {
            text.push_str(&format!(": {r}"));
        }
        Ok((json!({"proposal": proposal_json(&p, caller)}), text))
    }

    async fn book(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            project: Option<String>,
            limit: Option<u32>,
            cursor: Option<String>,
        }
        let a: A = parse(args)?;
        let size = limit(a.limit, 20, 200);
        let page = page_of(size, a.cursor);
        let p = self.backend.records.list_book_entries(&caller.tenant, a.project.as_deref(), &page).await?;
        let mut text = format!("{} book-of-projects entries", p.items.len());
        for e in &p.items {
            text.push_str(&format!("\n- [{}] {}: {}", e.project, e.title, e.body.chars().take(200).collect::<String>()));
        }
        let list: Vec<Value> = p
            .items
            .iter()
            .map(|e| json!({"id": e.id.as_str(), "project": e.project, "title": e.title, "body": e.body, "created_at": e.created_at.to_rfc3339()}))
            .collect();
        Ok((json!({"entries": list, "next_cursor": p.next_cursor}), text))
    }

    async fn kb_search(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            query: String,
            scope: Option<String>,
            limit: Option<u32>,
        }
        let a: A = parse(args)?;
        ports::search::check_query(&a.query)?;
        let max = limit(a.limit, 10, 50) as usize;
        let scopes = match &a.scope {
            Some(raw) => {
                let scope = MemoryScope::parse(raw)?;
                if matches!(scope, MemoryScope::Personal(_) | MemoryScope::Session(_)) {
                    return Err(Error::invalid_field(
                        "scope",
                        "knowledge-base documents live in global, org, team or project scopes",
                    ));
                }
                vec![scope]
            }
            None => SearchService::shared_scopes(caller),
        };
        let search = SearchService::new(self.backend.clone());
        let (list, truncated, via) = if search.enabled() {
            let hits = search.search(caller, scopes, Some(DocKind::Kb), &a.query, max, SearchMode::Hybrid).await?;
            let mut list = Vec::new();
            for h in &hits {
                let tenant = if h.scope == MemoryScope::Global { None } else { Some(&caller.tenant) };
                let doc = match tenant {
                    Some(t) => self.backend.records.get_kb_document(t, &h.doc).await?,
                    None => None,
                };
                list.push(json!({
                    "id": h.doc.as_str(), "scope": h.scope.storage_key(), "title": h.title,
                    "body": doc.as_ref().map_or(h.text.as_str(), |d| d.body.as_str()), "passage": h.text,
                    "source": doc.as_ref().and_then(|d| d.source.clone()),
                    "created_at": doc.as_ref().map(|d| d.created_at.to_rfc3339()), "score": h.score,
                }));
            }
            (list, false, "hybrid")
        } else {
            let terms = terms(&a.query)?;
            let records = &self.backend.records;
            let (all, truncated) =
                crate::all_pages(MAX_SCAN, |p| async move { records.list_kb_documents(&caller.tenant, &p).await }).await?;
            let mut hits: Vec<(u8, _)> = all
                .into_iter()
                .filter(|d| scopes.contains(&d.scope) && d.scope.readable_by(caller))
                .filter_map(|d| rank(&terms, d.id.as_str(), &d.title, &d.body).map(|r| (r, d)))
                .collect();
            if let Some(s) = scopes.iter().find(|s| !s.readable_by(caller)) {
                return Err(Error::forbidden(format!("scope {} is not readable with this credential", s.storage_key())));
            }
            hits.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
            hits.truncate(max);
            let list = hits
                .iter()
                .map(|(_, d)| json!({"id": d.id.as_str(), "scope": d.scope.storage_key(), "title": d.title, "body": d.body, "passage": d.body, "source": d.source, "created_at": d.created_at.to_rfc3339()}))
                .collect();
            (list, truncated, "keyword-scan")
        };
        let mut text = format!("{} knowledge-base documents match", list.len());
        if via != "hybrid" {
            text.push_str(" (keyword scan: no search index is configured)");
        }
        for d in &list {
            let passage = d["passage"].as_str().unwrap_or_default().chars().take(200).collect::<String>();
            text.push_str(&format!(
                "\n- [{}] {}: {passage}",
                d["id"].as_str().unwrap_or_default(),
                d["title"].as_str().unwrap_or_default()
            ));
        }
        Ok((json!({"documents": list, "count": list.len(), "truncated": truncated, "search": via}), text))
    }

    /// A playbook the caller runs locally: the goal, the context it rests on, and steps
    /// derived from that context (review the entity, handle each recent signal, respect
    /// each relevant org decision, then report back). Assembled, not invented.
    async fn playbook(&self, caller: &CallerContext, args: &Value) -> Result<(Value, String)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct A {
            goal: String,
            entity: Option<EntityArg>,
            session: Option<String>,
        }
        let a: A = parse(args)?;
        text_field("goal", &a.goal, MAX_TITLE_LEN * 5)?;
        // The context a caller may read: org memory matching the goal needs `memory:read`.
        let mut ctx_args = json!({});
        if reads_memory(caller) {
            ctx_args["query"] = json!(a.goal);
        }
        if let Some(e) = &a.entity {
            ctx_args["entity"] = json!({"type": e.entity_type, "id": e.id});
        }
        if let Some(s) = &a.session {
            ctx_args["session"] = json!(s);
        }
        let context = if ctx_args.as_object().is_some_and(|o| !o.is_empty()) {
            self.get_context(caller, &ctx_args).await?.0
        } else {
            json!({})
        };
        let mut steps = Vec::new();
        if let Some(e) = context.get("entity") {
            steps.push(json!({"action": "review_entity", "entity": {"type": e["type"], "id": e["id"]},
                "why": "the playbook concerns this entity; its traits are in context.entity"}));
        }
        for s in context["signals"].as_array().into_iter().flatten().take(5) {
            steps.push(json!({"action": "address_signal", "signal": s["id"], "kind": s["kind"],
                "why": "a recent state change on the entity"}));
        }
        for m in context["memory"].as_array().into_iter().flatten() {
            steps.push(json!({"action": "follow_org_memory", "entry": m["id"], "title": m["title"],
                "why": "active organisational memory relevant to the goal"}));
        }
        steps.push(json!({"action": "record_outcome", "tool": "memory.write_conversational",
            "why": "so the next session continues from what happened"}));
        let playbook = json!({
            "version": 1,
            "goal": a.goal,
            "tenant": caller.tenant.as_str(),
            "generated_at": self.now().to_rfc3339(),
            "steps": steps,
            "context": context,
        });
        let text = format!("Playbook with {} steps for: {}", steps.len(), a.goal);
        Ok((json!({"playbook": playbook}), text))
    }
}

/// The MCP prompts (SPEC §7.1): instructions plus real context, assembled from the
/// same stores the tools read. Sections the caller's plan does not include are left out.
impl Tools<'_> {
    /// `project_handoff_summary`: the project's book entries, the org memory that
    /// mentions it, open proposals.
    pub async fn prompt_project_handoff(&self, caller: &CallerContext, project: &str) -> Result<String> {
        Id::new(project).map_err(|_| Error::invalid_field("project", "1-128 printable characters without spaces, # or /"))?;
        let records = &self.backend.records;
        let reader = reads_memory(caller);
        let entries = records.list_book_entries(&caller.tenant, Some(project), &PageRequest::first(50)).await?.items;
        let (memory, open) = if reader {
            let (memory, _, _) = self.org_matches(caller, project, None, 10).await?;
            let open = records
                .list_proposals(&caller.tenant, Some(ProposalState::AwaitingApproval), &PageRequest::first(10))
                .await?
                .items;
            (memory, open)
        } else {
            (Vec::new(), Vec::new())
        };
        let mut text = format!(
            "Write a handoff summary of the project \"{project}\" for the person taking it over: where it stands, what was decided, \
             what is open, and what to do first. Use only the facts below and say plainly what is unknown.\n"
        );
        text.push_str("\n## Book of projects\n");
        if entries.is_empty() {
            text.push_str("(no entries)\n");
        }
        for e in &entries {
            text.push_str(&format!("- {} ({}): {}\n", e.title, e.created_at.to_rfc3339(), e.body));
        }
        text.push_str("\n## Organisational memory mentioning the project\n");
        section(&mut text, reader, memory.iter().map(|m| format!("[{}] {}: {}", m.id, m.title, m.body)));
        text.push_str("\n## Open proposals (not decided yet)\n");
        section(
            &mut text,
            reader,
            open.iter().map(|p| format!("[{}] {}", p.id, crate::governance::redaction::mask_personal(&p.title))),
        );
        Ok(text)
    }

    /// `morning_brief`: recent signals, open proposals, the caller's recent sessions and
    /// the newest org memory (the last three need `memory:read`).
    pub async fn prompt_morning_brief(&self, caller: &CallerContext) -> Result<String> {
        let records = &self.backend.records;
        let reader = reads_memory(caller);
        let signals = records.list_signals(&caller.tenant, None, &PageRequest::first(20)).await?.items;
        let (mut open, mut sessions, mut memory) = (Vec::new(), Vec::new(), Vec::new());
        if reader {
            open = records
                .list_proposals(&caller.tenant, Some(ProposalState::AwaitingApproval), &PageRequest::first(10))
                .await?
                .items;
            sessions =
                crate::all_pages(MAX_SCAN, |p| async move { records.list_sessions(&caller.tenant, &caller.principal, &p).await })
                    .await?
                    .0;
            sessions.sort_by_key(|s| std::cmp::Reverse(s.last_at));
            sessions.truncate(5);
            memory =
                crate::all_pages(MAX_SCAN, |p| async move { records.list_memory(&caller.tenant, &MemoryScope::Org, &p).await })
                    .await?
                    .0;
            memory.retain(|m| m.state == GovernanceState::Active);
            memory.sort_by_key(|m| std::cmp::Reverse(m.updated_at));
            memory.truncate(5);
        }
        let mut text = String::from(
            "Write a short morning brief: what changed (signals), what waits for a decision, where I left off, and what the organisation \
             recently decided. Use only the facts below; group and prioritise them.\n",
        );
        text.push_str("\n## Recent signals (newest first)\n");
        section(&mut text, true, signals.iter().map(|s| format!("{} on {} at {}", s.kind, s.entity, s.at.to_rfc3339())));
        text.push_str("\n## Waiting for a decision\n");
        section(
            &mut text,
            reader,
            open.iter().map(|p| format!("[{}] {}", p.id, crate::governance::redaction::mask_personal(&p.title))),
        );
        text.push_str("\n## My recent sessions\n");
        section(
            &mut text,
            reader,
            sessions.iter().map(|s| format!("{} ({} turns, last {}): {}", s.session, s.turns, s.last_at.to_rfc3339(), s.title)),
        );
        text.push_str("\n## Newest organisational memory\n");
        section(&mut text, reader, memory.iter().map(|m| format!("[{}] {}", m.id, m.title)));
        Ok(text)
    }
}

/// One prompt section: its lines, `(none)`, or — for memory the caller may not read — a
/// note saying so.
fn section(text: &mut String, allowed: bool, lines: impl Iterator<Item = String>) {
    if !allowed {
        text.push_str("(left out: reading memory needs the memory:read scope)\n");
        return;
    }
    let mut any = false;
    for l in lines {
        any = true;
        text.push_str(&format!("- {l}\n"));
    }
    if !any {
        text.push_str("(none)\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranking() {
        let t = terms("Refund policy").unwrap();
        assert_eq!(rank(&t, "x", "Refund policy", ""), Some(1));
        assert_eq!(rank(&t, "x", "Policies", "our refund policy is 30 days"), Some(2));
        assert_eq!(rank(&t, "x", "Refunds", "nothing"), None);
        assert_eq!(rank(&terms("kb-7").unwrap(), "KB-7", "t", "b"), Some(0));
        assert!(terms(&"x".repeat(600)).is_err());
    }
}
