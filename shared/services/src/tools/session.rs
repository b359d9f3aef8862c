//! The session channel: Entity 360 / session continuity in one call, a session turned
//! into a proposal, and the caller's recent sessions.

use domain::Result;
use domain::principal::Scope;
use domain::{Error, PageRequest};
use ports::records::{Direction, MemoryStore, RelationshipStore, SignalStore};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::memory::ProposalOutput;
use super::{
    EntityArg, EntityView, MAX_BODY_CHARS, MAX_SCAN, MemoryView, RelationshipView, SessionArg, SessionView, SignalView, TurnView,
    own_session, reads_memory,
};
use crate::capabilities::policy::*;
use crate::capabilities::typed::{Capability, Context, Required};

// ---- session.get_context --------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetContextArgs {
    pub entity: Option<EntityArg>,
    pub session: Option<SessionArg>,
    #[schemars(length(max = super::MAX_QUERY_LEN), description = "Words to find relevant org memory.")]
    pub query: Option<String>,
    #[schemars(
        length(min = 1, max = 128),
        description = "One of your projects: its latest handoff and session summary and its open tasks (engineering records)."
    )]
    pub project: Option<String>,
}

/// A project's working state, in a context: what the last session left.
#[derive(Debug, Serialize)]
pub struct ContextProject {
    pub project: String,
    pub latest_handoff: Option<crate::tools::engineering::RecordView>,
    pub latest_summary: Option<crate::tools::engineering::RecordView>,
    /// Tasks not done (todo, in progress, blocked), newest change first, at most 10.
    pub open_tasks: Vec<crate::tools::engineering::RecordView>,
}

/// A session's recent turns, in a context.
#[derive(Debug, Serialize)]
pub struct ContextSession {
    pub session: String,
    /// How many turns the session has.
    pub turns: usize,
    /// The last 20 of them, in order; one a later turn says otherwise of is marked
    /// `superseded_by_turn` (newest fact wins).
    pub recent_turns: Vec<TurnView>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["memory"]))]
pub struct GetContextOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "EntityView")]
    pub entity: Option<EntityView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<RelationshipView>")]
    pub relationships: Option<Vec<RelationshipView>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<SignalView>")]
    pub signals: Option<Vec<SignalView>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Map<String, Value>")]
    pub session: Option<ContextSession>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Map<String, Value>")]
    pub project: Option<ContextProject>,
    #[schemars(description = "Null without the memory:read scope.")]
    pub memory: Option<Vec<MemoryView>>,
}

pub struct GetContext;

impl Capability for GetContext {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "session.get_context",
        Channel::Session,
        PlanTier::Starter,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.entity360",
    )
    .cached(60);
    const TITLE: &'static str = "Get context (Entity 360)";
    const DESCRIPTION: &'static str = "Assemble context in one call: an entity with its relationships and recent signals, the recent turns of a session, a project's latest handoff, session summary and open tasks, and the org memory relevant to the entity or a query. Give at least one of entity, session, project or query.";
    type Args = GetContextArgs;
    type Output = GetContextOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: GetContextArgs) -> Result<GetContextOutput> {
        let (tools, caller) = (&cx.tools, cx.caller);
        if a.entity.is_none() && a.session.is_none() && a.query.is_none() && a.project.is_none() {
            return Err(Error::invalid("give an entity, a session, a project or a query"));
        }
        // Turns and org memory are memory: they need `memory:read` like every other path
        // that returns memory; the entity part needs only what the tool needs.
        let reader = reads_memory(caller);
        if !reader && (a.session.is_some() || a.project.is_some() || a.entity.is_none()) {
            return Err(Error::missing_scope(Scope::MemoryRead.as_str()));
        }
        let mut out =
            GetContextOutput { entity: None, relationships: None, signals: None, session: None, project: None, memory: None };
        let mut memory_query = a.query.clone().unwrap_or_default();
        if let Some(e) = &a.entity {
            let r = e.to_ref()?;
            let entity = tools.entities.get(caller, &r.entity_type, &r.id).await?;
            let visible =
                EntityView::of(&entity, tools.schema).ok_or_else(|| Error::not_found(format!("{} {}", r.entity_type, r.id)))?;
            let records = &tools.backend.records;
            let mut rels =
                records.list_relationships(&caller.tenant, &r, Direction::Outgoing, &PageRequest::first(50)).await?.items;
            rels.extend(
                records.list_relationships(&caller.tenant, &r, Direction::Incoming, &PageRequest::first(50)).await?.items,
            );
            let signals = records.list_signals(&caller.tenant, Some(&r), &PageRequest::first(20)).await?.items;
            if memory_query.is_empty() {
                memory_query = entity.label().to_owned();
            }
            out.entity = Some(visible);
            out.relationships = Some(rels.iter().map(RelationshipView::from).collect());
            out.signals = Some(signals.iter().map(SignalView::from).collect());
        }
        if let Some(s) = &a.session {
            let session = own_session(caller, &s.0)?;
            let mut turns = tools.backend.records.list_turns(&caller.tenant, &session, &PageRequest::first(500)).await?.items;
            turns.retain(|t| t.live_at(tools.now()));
            let mut recent: Vec<TurnView> = turns.iter().rev().take(20).rev().map(TurnView::from).collect();
            TurnView::mark_superseded(&mut recent);
            out.session = Some(ContextSession { session, turns: turns.len(), recent_turns: recent });
        }
        if let Some(p) = &a.project {
            use crate::tools::engineering::RecordView;
            use domain::engineering::{Body, RecordKind, TaskStatus};
            let eng = tools.engineering;
            let latest = |kind| async move {
                let (_, records) = eng.list(caller, Some(p), Some(kind)).await?;
                Ok::<_, Error>(records.first().map(RecordView::of))
            };
            let latest_handoff = latest(RecordKind::Handoff).await?;
            let latest_summary = latest(RecordKind::Summary).await?;
            let (project, tasks) = eng.list(caller, Some(p), Some(RecordKind::Task)).await?;
            let open_tasks = tasks
                .iter()
                .filter(|r| matches!(r.body, Body::Task { status, .. } if status != TaskStatus::Done))
                .take(10)
                .map(RecordView::of)
                .collect();
            out.project = Some(ContextProject { project, latest_handoff, latest_summary, open_tasks });
        }
        if reader {
            let memory = if memory_query.split_whitespace().next().is_some() {
                tools.org_matches(caller, &memory_query, None, 5).await?.0.into_iter().map(|(m, _)| m).collect()
            } else {
                Vec::new()
            };
            out.memory = Some(memory.iter().map(MemoryView::from).collect());
        }
        Ok(out)
    }
}

// ---- session.summarize ----------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummarizeArgs {
    pub session: SessionArg,
    #[schemars(length(min = 1, max = super::MAX_TITLE_LEN))]
    pub title: Option<String>,
}

pub struct Summarize;

impl Capability for Summarize {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "session.summarize",
        Channel::Session,
        PlanTier::Starter,
        &[Scope::MemoryWrite],
        RouteKind::RemoteFunction,
        "function.triage",
    )
    .writes();
    const TITLE: &'static str = "Summarize a session into a proposal";
    const DESCRIPTION: &'static str = "Turn one of your sessions into a proposal for org memory: an extractive summary of its turns, stored as pending for governance. Nothing becomes organisational truth through this call.";
    type Args = SummarizeArgs;
    type Output = ProposalOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: SummarizeArgs) -> Result<ProposalOutput> {
        let (tools, caller) = (&cx.tools, cx.caller);
        let session = own_session(caller, &a.session.0)?;
        let mut turns = tools.backend.records.list_turns(&caller.tenant, &session, &PageRequest::first(500)).await?.items;
        turns.retain(|t| t.live_at(tools.now()));
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
            if body.chars().count() + line.chars().count() > MAX_BODY_CHARS - 64 {
                body.push_str("\n- …");
                break;
            }
            body.push_str(&line);
        }
        let title =
            a.title.unwrap_or_else(|| format!("Session {}", session.split_once('.').map_or(session.as_str(), |(_, n)| n)));
        let mut p = tools.proposal(caller, "memory:learning", title, body)?;
        p.source_session = Some(session);
        tools.new_proposal(caller, p).await
    }
}

// ---- session.list_recent --------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRecentArgs {
    #[serde(default = "super::default_limit::<10>")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListRecentOutput {
    pub sessions: Vec<SessionView>,
}

pub struct ListRecent;

impl Capability for ListRecent {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "session.list_recent",
        Channel::Session,
        PlanTier::Starter,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.turns",
    );
    const TITLE: &'static str = "List recent sessions";
    const DESCRIPTION: &'static str =
        "List your most recent sessions with their turn counts and when they were last used, newest first.";
    type Args = ListRecentArgs;
    type Output = ListRecentOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: ListRecentArgs) -> Result<ListRecentOutput> {
        let caller = cx.caller;
        let max = a.limit as usize;
        let records = &cx.tools.backend.records;
        let (mut all, _) =
            crate::all_pages(MAX_SCAN, |p| async move { records.list_sessions(&caller.tenant, &caller.principal, &p).await })
                .await?;
        all.sort_by_key(|s| std::cmp::Reverse(s.last_at));
        all.truncate(max);
        let reader = reads_memory(caller);
        Ok(ListRecentOutput { sessions: all.iter().map(|s| SessionView::of(s, reader)).collect() })
    }
}
