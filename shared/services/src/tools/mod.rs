//! The canonical MCP tools (SPEC §7.1) and the `graph` toolset, one typed capability
//! each ([`crate::capabilities::typed::Capability`]), by area:
//!
//! - [`memory`]: org memory (hybrid search, one entry with lineage, proposals), a
//!   session's turns, the caller's personal patterns, governance decisions;
//! - [`recall`]: one search over everything the caller can read (turns, personal,
//!   team/project/org memory, KB) with time windows and `as_of`, and personal memory
//!   remembered, updated and forgotten without governance;
//! - [`session`]: Entity 360 / session continuity, a session summarized into a proposal,
//!   recent sessions;
//! - [`spine`]: entities, relationships and signals;
//! - [`proposals`]: proposing an action, a proposal's state;
//! - [`library`]: the book of projects, the knowledge base, playbooks;
//! - [`graph`]: the reference memory server's knowledge-graph tools, in the caller's
//!   personal or project scope;
//! - [`engineering`]: the `engineering` toolset — gates an agent reads and requests
//!   (a person authorizes them elsewhere);
//! - [`prompts`]: the MCP prompts, assembled from the same stores.
//!
//! The ADK has resolved a call (plan, scopes, connectors) before a handler runs; each
//! still reads only the caller's tenant and the memory scopes the caller may read, and
//! every path that returns memory asks for `memory:read` ([`reads_memory`]). Results are
//! typed views of the records ([`MemoryView`], [`ProposalView`]…); the MCP surface
//! renders them as text for a model.

pub mod engineering;
pub mod graph;
pub mod library;
pub mod memory;
pub mod prompts;
pub mod proposals;
pub mod recall;
pub mod session;
pub mod spine;
pub mod tasks;

use domain::memory::{ConversationTurn, GovernanceState, MemoryEntry, SessionSummary, TurnRole};
use domain::principal::{CallerContext, Scope};
use domain::proposal::{Proposal, ProposalState};
use domain::spine::{EntityRef, PoleClass, Relationship, Signal};
use domain::{EntityType, Error, Id, PageRequest, Result, Timestamp};
use ports::Backend;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::capabilities::typed::Required;
use crate::entities::EntityService;

/// The longest title, in characters (the schemas of the arguments say it too: they are
/// generated from these constants).
pub const MAX_TITLE_LEN: usize = 200;
/// The longest proposal or memory body, in characters.
pub const MAX_BODY_CHARS: usize = 16 * 1024;
/// The longest conversation turn, in characters.
pub const MAX_TURN_CHARS: usize = 64 * 1024;
pub const MAX_QUERY_LEN: usize = ports::search::MAX_QUERY_CHARS;
/// Most entries a keyword search over memory or the KB examines.
pub const MAX_SCAN: usize = 10_000;

/// What the handlers run on: the backend, the entity service (the Spine Cache), the
/// tenant's resolved schema and the other services a tool reaches — each the one
/// [`crate::Services`] built.
pub struct Tools<'a> {
    pub backend: &'a Backend,
    pub entities: &'a EntityService,
    /// The visible-entity rendering of the tenant's schema.
    pub schema: &'a adk::schema::TenantSchema,
    pub graph: &'a crate::graph::GraphService,
    pub gates: &'a crate::gates::GateService,
    pub engineering: &'a crate::engineering::EngineeringService,
    pub search: &'a crate::search::SearchService,
    /// Proposals are triaged where they are stored.
    pub governance: &'a crate::governance::GovernanceService,
    /// Tasks dispatched to agents and people.
    pub work: &'a crate::work::TaskService,
}

impl Tools<'_> {
    fn now(&self) -> Timestamp {
        self.backend.clock.now()
    }

    fn new_id(&self) -> Id {
        crate::new_id(self.backend)
    }
}

/// Whether the caller may read memory (`memory:read`): every path that returns memory —
/// org entries, turns, proposals' bodies, triage's comparisons with org memory — asks this.
pub fn reads_memory(caller: &CallerContext) -> bool {
    caller.scopes.contains(Scope::MemoryRead)
}

/// The first page, or the page after an opaque cursor.
fn page_of(size: u32, cursor: Option<String>) -> PageRequest {
    cursor.map_or_else(|| PageRequest::first(size), |c| PageRequest::after(size, c))
}

/// A `limit` argument's default, declared on the field (`#[serde(default =
/// "super::default_limit::<20>")]`) so the schema shows it and nothing re-states it; the
/// field's `range` in the schema is its only bound (checked before the handler runs).
const fn default_limit<const N: u32>() -> u32 {
    N
}

/// A text argument with something in it: its schema bounds its length (checked before
/// the handler runs) but cannot say "not only spaces".
fn not_blank(name: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::invalid_field(name, "must not be empty"));
    }
    Ok(())
}

/// Lower-cased words of a query; every one must appear for a match.
fn terms(query: &str) -> Result<Vec<String>> {
    if query.chars().count() > MAX_QUERY_LEN {
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

// ---- argument types shared by several tools ------------------------------------------

crate::enum_schema!(OrgKindSchema, domain::memory::OrgKind);
crate::enum_schema!(PersonalKindSchema, domain::memory::PersonalKind);
crate::enum_schema!(TurnRoleSchema, TurnRole);
crate::enum_schema!(ProposalStateSchema, ProposalState);
crate::enum_schema!(PoleClassSchema, PoleClass);

/// A session name of the caller's choosing.
#[derive(Debug, Clone, Deserialize)]
#[serde(transparent)]
pub struct SessionArg(pub String);

impl JsonSchema for SessionArg {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SessionArg".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string", "minLength": 1, "maxLength": 100,
            "description": "A session name of your choosing (e.g. \"2026-11-29-onboarding\"); sessions are private to the caller."
        })
    }
}

/// One entity by canonical type and id.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntityArg {
    #[serde(rename = "type")]
    #[schemars(regex(pattern = r"^[a-z][a-z0-9_]{0,63}$"), description = "Canonical entity type, e.g. \"account\".")]
    pub entity_type: String,
    #[schemars(length(min = 1, max = 128))]
    pub id: String,
}

impl EntityArg {
    pub(crate) fn to_ref(&self) -> Result<EntityRef> {
        Ok(EntityRef { entity_type: EntityType::new(self.entity_type.clone())?, id: Id::new(self.id.clone())? })
    }
}

/// `{"id": …}`: the tools that read one record.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdArgs {
    #[schemars(length(min = 1, max = 128))]
    pub id: String,
}

// ---- result views ---------------------------------------------------------------------

/// The state of a memory entry as shown.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    Active,
    Superseded,
    Rejected,
    Forgotten,
}

/// A memory entry's lineage: where it came from and what it replaced.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(transform = Required(&["proposal", "supersedes", "source_turns"]))]
pub struct LineageView {
    pub proposal: Option<String>,
    pub supersedes: Option<String>,
    pub source_turns: Vec<String>,
}

/// Why a search result was returned: which retrievers found it and where, its fused
/// score and the query's words it contains — so a person or an agent can trust or
/// discard it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(transform = Required(&["found_by", "matched_terms"]))]
pub struct WhyView {
    #[schemars(
        description = "keyword (BM25), vector (semantic), exact (an identifier of the query appears verbatim); keyword-scan when no search index is configured; newer_fact when it is a newer memory or turn of yours that replaces a result (see superseded_by_time)."
    )]
    pub found_by: Vec<String>,
    /// 1-based rank in the keyword list, when it was there.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "integer"))]
    pub keyword_rank: Option<u32>,
    /// 1-based rank in the vector list, when it was there.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "integer"))]
    pub vector_rank: Option<u32>,
    /// The fused score (keyword coverage and vector closeness combined, 0 to 1; higher first).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "number"))]
    pub score: Option<f64>,
    /// Cosine similarity of the passage to the query, when the vector retriever ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "number"))]
    pub similarity: Option<f32>,
    /// The query's words found in the title or the passage (lower case).
    pub matched_terms: Vec<String>,
}

impl WhyView {
    /// The explanation of an index hit for the query whose words are `words`.
    pub fn of_hit(hit: &ports::search::SearchHit, words: &QueryWords) -> Self {
        let mut found_by = Vec::new();
        if hit.keyword_rank.is_some() {
            found_by.push("keyword".to_owned());
        }
        if hit.vector_rank.is_some() {
            found_by.push("vector".to_owned());
        }
        if hit.exact {
            found_by.push("exact".to_owned());
        }
        Self {
            found_by,
            keyword_rank: hit.keyword_rank,
            vector_rank: hit.vector_rank,
            score: Some(hit.score),
            similarity: hit.similarity,
            matched_terms: matched_terms(words, &[&hit.title, &hit.text], hit.occurred_at),
        }
    }

    /// The explanation of a keyword-scan match (no index configured).
    pub fn of_scan(words: &QueryWords, texts: &[&str]) -> Self {
        Self {
            found_by: vec!["keyword-scan".to_owned()],
            keyword_rank: None,
            vector_rank: None,
            score: None,
            similarity: None,
            matched_terms: matched_terms(words, texts, None),
        }
    }
}

/// A query's words that carry weight, each with the term it is searched as
/// ([`ports::search::weighted_words`]): read once per search, not once per hit.
pub struct QueryWords(Vec<(String, String)>);

impl QueryWords {
    pub fn of(query: &str) -> Self {
        Self(ports::search::weighted_words(query))
    }
}

/// The query's words that carried weight and matched (lower case, in query order, once
/// each): those the keyword side searched for ([`ports::search::query_terms`]: question
/// words, articles and pronouns left out) whose stem is a term of `texts`
/// (`painting` matches `painted`), and a date the query names that is the day the hit
/// happened on (`at`), as that day (`2024-01-07`).
pub fn matched_terms(words: &QueryWords, texts: &[&str], at: Option<domain::Timestamp>) -> Vec<String> {
    let present: std::collections::HashSet<String> = texts
        .iter()
        .flat_map(|t| ports::search::index_terms(t))
        .chain(at.into_iter().flat_map(ports::search::day_terms))
        .collect();
    let mut out: Vec<String> = Vec::new();
    for (word, term) in &words.0 {
        if present.contains(term) && !out.contains(word) {
            out.push(word.clone());
        }
    }
    out
}

/// An org or personal memory entry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(transform = Required(&["id", "kind", "title", "body", "scope", "state", "lineage"]))]
pub struct MemoryView {
    pub id: String,
    pub kind: String,
    pub title: String,
    pub body: String,
    pub scope: String,
    pub state: EntryState,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "string"))]
    pub superseded_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "string"))]
    pub rejection_reason: Option<String>,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "string"), description = "When what it records happened, if not when it was stored (RFC 3339).")]
    pub occurred_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "string"), description = "When this personal entry will be forgotten (RFC 3339).")]
    pub expires_at: Option<String>,
    pub lineage: LineageView,
}

impl From<&MemoryEntry> for MemoryView {
    fn from(m: &MemoryEntry) -> Self {
        let (state, superseded_by, rejection_reason) = match &m.state {
            GovernanceState::Active => (EntryState::Active, None, None),
            GovernanceState::Superseded { by } => (EntryState::Superseded, Some(by.to_string()), None),
            GovernanceState::Rejected { reason } => (EntryState::Rejected, None, Some(reason.clone())),
            GovernanceState::Forgotten { .. } => (EntryState::Forgotten, None, None),
        };
        Self {
            id: m.id.to_string(),
            kind: m.kind.clone(),
            title: m.title.clone(),
            body: m.body.clone(),
            scope: m.scope.storage_key(),
            state,
            superseded_by,
            rejection_reason,
            created_by: m.created_by.to_string(),
            created_at: m.created_at.to_rfc3339(),
            updated_at: m.updated_at.to_rfc3339(),
            occurred_at: m.occurred_at.map(|t| t.to_rfc3339()),
            expires_at: m.expires_at.map(|t| t.to_rfc3339()),
            lineage: LineageView {
                proposal: m.lineage.proposal.as_ref().map(ToString::to_string),
                supersedes: m.lineage.supersedes.as_ref().map(ToString::to_string),
                source_turns: m.lineage.source_turns.iter().map(ToString::to_string).collect(),
            },
        }
    }
}

/// A secret found and redacted when a proposal was made: never the value.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(transform = Required(&["kind", "field", "at"]))]
pub struct RedactedView {
    pub kind: String,
    pub field: String,
    pub at: usize,
    pub fingerprint: String,
}

/// A proposal's triage score as the caller may see it (see [`ProposalView`]).
#[derive(Debug, Clone, Serialize)]
pub struct ScoreView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    pub confidence: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relevance: Option<f64>,
    pub risk: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflict: Option<f64>,
    pub quality: f64,
    pub reasons: Vec<String>,
}

/// A proposal as the caller may see it: personal data masked for everyone (secrets were
/// never stored). A caller without `memory:read` sees no body and only the reasons and
/// factors that say nothing about org memory (no entry ids or titles, no counts, no
/// relevance, conflict or total from which they could be worked out).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(transform = Required(&["id", "kind", "title", "state"]))]
pub struct ProposalView {
    pub id: String,
    pub kind: String,
    pub title: String,
    #[schemars(description = "Null without the memory:read scope. Personal data is masked; secrets were never stored.")]
    pub body: Option<String>,
    #[schemars(with = "ProposalStateSchema")]
    pub state: ProposalState,
    pub supersedes: Option<String>,
    #[schemars(with = "Option<Map<String, Value>>")]
    pub score: Option<ScoreView>,
    #[schemars(
        description = "Secrets found and redacted when it was proposed: kind, field, character position, fingerprint (never the value)."
    )]
    pub redacted: Vec<RedactedView>,
    pub decision_reason: Option<String>,
    #[schemars(
        with = "Option<Map<String, Value>>",
        description = "For an action naming a connector operation: connector, operation, target, and once carried out its state (performing, done, failed), attempts, the source's HTTP status and any error."
    )]
    pub action: Option<ActionView>,
    pub proposed_by: String,
    /// Which client proposed it (its key's name), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposed_via: Option<String>,
    pub source_session: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// An action proposal's operation and how carrying it out went.
#[derive(Debug, Clone, Serialize)]
pub struct ActionView {
    pub connector: String,
    pub operation: String,
    pub target: String,
    pub params: domain::value::Attributes,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<&'static str>,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
}

impl ActionView {
    /// A caller who may not read memory sees no parameters (like no body).
    fn of(a: &domain::action::Action, reader: bool) -> Self {
        let run = a.run.as_ref();
        Self {
            connector: a.request.connector.clone(),
            operation: a.request.operation.clone(),
            target: a.request.target.clone(),
            params: if reader { a.request.params.clone() } else { domain::value::Attributes::new() },
            state: run.map(|r| r.state.as_str()),
            attempts: run.map_or(0, |r| r.attempts),
            status: run.and_then(|r| r.status),
            error: run.and_then(|r| r.error.clone()),
            entity: run.and_then(|r| r.entity.as_ref().map(ToString::to_string)),
        }
    }
}

impl ProposalView {
    pub fn of(p: &Proposal, caller: &CallerContext) -> Self {
        let p = crate::governance::redaction::view(p.clone());
        let reader = reads_memory(caller);
        let score = p.score.as_ref().map(|s| ScoreView {
            total: reader.then_some(s.total),
            confidence: s.confidence,
            relevance: reader.then_some(s.relevance),
            risk: s.risk,
            conflict: reader.then_some(s.conflict),
            quality: s.quality,
            reasons: if reader { s.reasons.clone() } else { s.public_reasons.clone() },
        });
        Self {
            id: p.id.to_string(),
            kind: p.kind.clone(),
            title: p.title.clone(),
            body: reader.then(|| p.body.clone()),
            state: p.state,
            supersedes: p.supersedes.as_ref().map(ToString::to_string),
            score,
            redacted: p
                .detected
                .iter()
                .map(|d| RedactedView {
                    kind: d.kind.clone(),
                    field: d.field.clone(),
                    at: d.at,
                    fingerprint: d.fingerprint.clone(),
                })
                .collect(),
            decision_reason: p.decision_reason.clone(),
            action: p.action.as_ref().map(|a| ActionView::of(a, reader)),
            proposed_by: p.proposed_by.to_string(),
            proposed_via: p.proposed_via.clone(),
            source_session: p.source_session.clone(),
            created_at: p.created_at.to_rfc3339(),
            updated_at: p.updated_at.to_rfc3339(),
        }
    }
}

/// One turn of a session.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TurnView {
    pub seq: u64,
    /// The turn's id (what `memory_forget` takes).
    pub id: String,
    #[schemars(with = "TurnRoleSchema")]
    pub role: TurnRole,
    pub content: String,
    pub at: String,
    /// A later turn of the list (its `seq`) says otherwise: this one is older news
    /// (`session_get_context`; see `memory_search`'s `superseded_by_time`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "integer"))]
    pub superseded_by_turn: Option<u64>,
}

impl From<&ConversationTurn> for TurnView {
    fn from(t: &ConversationTurn) -> Self {
        Self {
            seq: t.seq,
            id: t.id.to_string(),
            role: t.role,
            content: t.content.clone(),
            at: t.at.to_rfc3339(),
            superseded_by_turn: None,
        }
    }
}

impl TurnView {
    /// Marks each turn of `turns` (in order) that a later one replaces
    /// ([`crate::search::facts::replaces`]) with the latest such.
    pub fn mark_superseded(turns: &mut [Self]) {
        for i in 0..turns.len() {
            let later =
                (i + 1..turns.len()).rev().find(|&j| crate::search::facts::replaces(&turns[j].content, &turns[i].content));
            turns[i].superseded_by_turn = later.map(|j| turns[j].seq);
        }
    }
}

/// A session in a listing; its title is the first words of a turn, so memory: only for
/// a caller with `memory:read`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(transform = Required(&["session", "turns", "last_at"]))]
pub struct SessionView {
    pub session: String,
    pub turns: u64,
    #[schemars(description = "Null without the memory:read scope.")]
    pub title: Option<String>,
    pub first_at: String,
    pub last_at: String,
}

impl SessionView {
    fn of(s: &SessionSummary, reader: bool) -> Self {
        Self {
            session: s.session.clone(),
            turns: s.turns,
            title: reader.then(|| s.title.clone()),
            first_at: s.first_at.to_rfc3339(),
            last_at: s.last_at.to_rfc3339(),
        }
    }
}

/// An entity named by type and id, in a result.
#[derive(Debug, Clone, Serialize)]
pub struct EntityRefView {
    #[serde(rename = "type")]
    pub entity_type: String,
    pub id: String,
}

impl From<&EntityRef> for EntityRefView {
    fn from(r: &EntityRef) -> Self {
        Self { entity_type: r.entity_type.to_string(), id: r.id.to_string() }
    }
}

/// A relationship of the Spine's graph.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(transform = Required(&["from", "to", "kind"]))]
pub struct RelationshipView {
    #[schemars(with = "Map<String, Value>")]
    pub from: EntityRefView,
    #[schemars(with = "Map<String, Value>")]
    pub to: EntityRefView,
    pub kind: String,
    pub valid_from: String,
    pub valid_to: Option<String>,
}

impl From<&Relationship> for RelationshipView {
    fn from(r: &Relationship) -> Self {
        Self {
            from: (&r.from).into(),
            to: (&r.to).into(),
            kind: r.kind.to_string(),
            valid_from: r.valid_from.to_rfc3339(),
            valid_to: r.valid_to.map(Timestamp::to_rfc3339),
        }
    }
}

/// A signal: a time-ordered state change of an entity.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(transform = Required(&["id", "entity", "kind", "at"]))]
pub struct SignalView {
    pub id: String,
    #[schemars(with = "Map<String, Value>")]
    pub entity: EntityRefView,
    pub kind: String,
    pub at: String,
    pub before: Value,
    pub after: Value,
}

impl From<&Signal> for SignalView {
    fn from(s: &Signal) -> Self {
        Self {
            id: s.id.to_string(),
            entity: (&s.entity).into(),
            kind: s.kind.to_string(),
            at: s.at.to_rfc3339(),
            before: serde_json::to_value(&s.before).unwrap_or(Value::Null),
            after: serde_json::to_value(&s.after).unwrap_or(Value::Null),
        }
    }
}

/// An entity as readers see it: only its type's priority fields (SPEC §5.2 step 4).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EntityView {
    #[serde(rename = "type")]
    #[schemars(description = "Canonical entity type, e.g. account, contact, patient.")]
    pub entity_type: String,
    pub id: String,
    #[schemars(with = "PoleClassSchema")]
    pub pole_class: PoleClass,
    #[schemars(
        with = "Map<String, Value>",
        description = "The entity's traits: only the fields of its type that the tenant's schema makes visible."
    )]
    pub attributes: domain::value::Attributes,
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
    pub version: u64,
}

impl EntityView {
    /// The entity as `schema` lets readers see it; `None` for a type outside the schema.
    pub fn of(e: &domain::spine::Entity, schema: &adk::schema::TenantSchema) -> Option<Self> {
        let attributes = schema.strip_for_read(e.entity_type.as_str(), &e.attributes).ok()?;
        Some(Self {
            entity_type: e.entity_type.to_string(),
            id: e.id.to_string(),
            pole_class: e.pole_class,
            attributes,
            updated_at: e.updated_at.to_rfc3339(),
            version: e.version,
        })
    }

    /// Its name or title, for listings.
    pub fn label(&self) -> &str {
        ["name", "title"]
            .iter()
            .find_map(|k| match self.attributes.get(*k) {
                Some(domain::value::Value::Text(t)) => Some(t.as_str()),
                _ => None,
            })
            .unwrap_or("")
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

#[cfg(test)]
mod why_tests {
    use super::*;

    fn matched_terms(query: &str, texts: &[&str], at: Option<domain::Timestamp>) -> Vec<String> {
        super::matched_terms(&QueryWords::of(query), texts, at)
    }

    #[test]
    fn matched_terms_are_the_query_words_that_carried_weight_once_each() {
        assert_eq!(
            matched_terms("Acme renewals, acme CFO?", &["Acme Corp renewals", "need the CFO"], None),
            ["acme", "renewals", "cfo"]
        );
        assert_eq!(matched_terms("renew", &["renewals"], None), ["renew"], "by stem, as the keyword side matches");
        // The issue's case: question words and pronouns matched nothing worth saying.
        assert_eq!(
            matched_terms(
                "What is my sister's peanut allergy to?",
                &["I told you my sister has a peanut allergy, it's to the"],
                None
            ),
            ["sister", "peanut", "allergy"]
        );
        // A date the question names counts when it is the day the hit happened on.
        let jan7 = Some(domain::Timestamp(1_704_628_800_000)); // 2024-01-07T12:00:00Z
        assert_eq!(matched_terms("What did Elise buy on 7 Jan 2024?", &["Elise: a lamp"], jan7), ["elise", "2024-01-07"]);
        assert_eq!(matched_terms("What did Elise buy on 8 Jan 2024?", &["Elise: a lamp"], jan7), ["elise"]);
        assert_eq!(matched_terms("Elise on January 7th?", &["Elise: a lamp"], jan7), ["elise", "01-07"]);
    }

    #[test]
    fn a_hit_names_the_legs_that_found_it() {
        let hit = ports::search::SearchHit {
            scope: domain::memory::MemoryScope::Org,
            id: Id::new("c1").unwrap(),
            doc: Id::new("d1").unwrap(),
            kind: ports::search::DocKind::Memory,
            title: "Refunds".into(),
            text: "Refunds over 5000 EUR need sign-off".into(),
            score: 0.032,
            similarity: Some(0.71),
            keyword_rank: None,
            vector_rank: Some(2),
            exact: false,
            occurred_at: None,
        };
        let why = WhyView::of_hit(&hit, &QueryWords::of("refunds sign-off EUR"));
        assert_eq!(why.found_by, ["vector"]);
        assert_eq!((why.keyword_rank, why.vector_rank, why.score), (None, Some(2), Some(0.032)));
        assert_eq!(why.matched_terms, ["refunds", "sign-off", "sign", "off", "eur"]);
    }
}
