//! The memory channel: org memory (searched fresh, never cached; read with lineage;
//! proposed, never written — governance decides), a session's turns (the caller's own),
//! the caller's personal patterns, and governance decisions.

use domain::memory::Verification;
use domain::memory::{ConversationTurn, GovernanceState, MemoryEntry, MemoryScope, MemoryType, OrgKind, PersonalKind};
use domain::principal::CallerContext;
use domain::proposal::ProposalState;
use domain::{Error, ErrorCode, Id, Result};
use ports::records::{MemoryStore, ProposalStore, ReviewStore};
use ports::search::{DocKind, SearchMode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    IdArgs, MAX_SCAN, MemoryView, OrgKindSchema, PersonalKindSchema, ProposalStateSchema, ProposalView, QueryWords, SessionArg,
    Tools, TurnRoleSchema, TurnView, WhyView, not_blank, own_session, page_of, rank, terms,
};
use crate::capabilities::policy::*;
use crate::capabilities::typed::{Capability, Context, Required};

impl Tools<'_> {
    /// Active org entries matching `query`, best first: hybrid search over the index,
    /// each hit re-read from the store (org memory is never served stale), or — where no
    /// index is configured — a keyword scan of the store. Returns the entries, whether
    /// the result was cut short, and which way it was found.
    pub(crate) async fn org_matches(
        &self,
        caller: &CallerContext,
        query: &str,
        kind: Option<&str>,
        max: usize,
    ) -> Result<(Vec<(MemoryEntry, WhyView)>, bool, &'static str)> {
        ports::search::check_query(query)?;
        let search = self.search;
        if search.enabled() {
            let hits = search
                .search(caller, vec![MemoryScope::Org], Some(DocKind::Memory), query, (max * 2).min(100), SearchMode::Hybrid)
                .await?;
            let mut out = Vec::new();
            let words = QueryWords::of(query);
            for h in &hits {
                let Some(m) = self.backend.records.get_memory(&caller.tenant, &h.doc).await? else { continue };
                if m.scope == MemoryScope::Org && m.state == GovernanceState::Active && kind.is_none_or(|k| m.kind == k) {
                    out.push((m, WhyView::of_hit(h, &words)));
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
        let words = QueryWords::of(query);
        let found = hits
            .into_iter()
            .take(max)
            .map(|(_, m)| {
                let why = WhyView::of_scan(&words, &[m.id.as_str(), &m.title, &m.body]);
                (m, why)
            })
            .collect();
        Ok((found, truncated, "keyword-scan"))
    }
}

// ---- memory.search_org ----------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchOrgArgs {
    #[schemars(
        length(min = 1, max = super::MAX_QUERY_LEN),
        description = "What you are looking for, in words or as an exact identifier (ticket key, function name); hybrid keyword + semantic search, exact identifiers first."
    )]
    pub query: String,
    #[schemars(with = "Option<OrgKindSchema>")]
    pub kind: Option<OrgKind>,
    #[serde(default = "super::default_limit::<10>")]
    #[schemars(range(min = 1, max = 50))]
    pub limit: u32,
}

/// An org memory entry found, and why.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["id", "kind", "title", "body", "scope", "state", "lineage", "why"]))]
pub struct OrgHitView {
    #[serde(flatten)]
    pub entry: MemoryView,
    pub why: WhyView,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["entries", "count", "truncated"]))]
pub struct SearchOrgOutput {
    pub entries: Vec<OrgHitView>,
    pub count: usize,
    pub truncated: bool,
    #[schemars(description = "hybrid, or keyword-scan when no search index is configured")]
    pub search: String,
}

pub struct SearchOrg;

impl Capability for SearchOrg {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "memory.search_org",
        Channel::Memory,
        PlanTier::Pro,
        &[Scope::MemoryRead],
        RouteKind::VectorIndex,
        "search.org_memory",
    );
    const TITLE: &'static str = "Search org memory";
    const DESCRIPTION: &'static str = "Search the organisation's approved memory (decisions, patterns, commitments, learnings) with hybrid keyword + semantic search; exact identifiers rank first. Only active entries are returned, always fresh. Use this before answering questions about how the organisation does things or what was decided.";
    type Args = SearchOrgArgs;
    type Output = SearchOrgOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: SearchOrgArgs) -> Result<SearchOrgOutput> {
        let max = a.limit as usize;
        let (hits, truncated, via) = cx.tools.org_matches(cx.caller, &a.query, a.kind.map(OrgKind::as_str), max).await?;
        let entries: Vec<OrgHitView> = hits.into_iter().map(|(m, why)| OrgHitView { entry: MemoryView::from(&m), why }).collect();
        Ok(SearchOrgOutput { count: entries.len(), entries, truncated, search: via.to_owned() })
    }
}

// ---- memory.read_org ------------------------------------------------------------------

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["entry"]))]
pub struct ReadOrgOutput {
    pub entry: MemoryView,
    #[schemars(
        with = "Option<Map<String, Value>>",
        description = "The entry's readback verification: verified, confidence, fresh_at, the POLE+O entities extracted from it and the similar entries it is linked to (related)."
    )]
    pub verification: Option<Verification>,
}

pub struct ReadOrg;

impl Capability for ReadOrg {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "memory.read_org",
        Channel::Memory,
        PlanTier::Pro,
        &[Scope::MemoryRead],
        RouteKind::StoreIndex,
        "store.memory",
    );
    const TITLE: &'static str = "Read an org memory entry";
    const DESCRIPTION: &'static str = "Read one org memory entry with its lineage: the proposal that produced it, what it superseded, and — if it was superseded — its successor. Use after memory_search_org.";
    type Args = IdArgs;
    type Output = ReadOrgOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: IdArgs) -> Result<ReadOrgOutput> {
        let id = Id::new(a.id)?;
        let records = &cx.tools.backend.records;
        let m = records
            .get_memory(&cx.caller.tenant, &id)
            .await?
            .filter(|m| m.scope == MemoryScope::Org)
            .ok_or_else(|| Error::not_found(format!("org memory entry {id}")))?;
        // Its readback verification, with the extracted entities and linked entries.
        let verification = records.get_verification(&cx.caller.tenant, "memory", &m.id).await?;
        Ok(ReadOrgOutput { entry: (&m).into(), verification })
    }
}

// ---- memory.propose -------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposeArgs {
    #[schemars(length(min = 1, max = super::MAX_TITLE_LEN))]
    pub title: String,
    #[schemars(
        length(min = 1, max = super::MAX_BODY_CHARS),
        description = "The knowledge itself, specific and self-contained, with its evidence."
    )]
    pub body: String,
    #[schemars(with = "OrgKindSchema")]
    pub kind: OrgKind,
    #[schemars(description = "Id of the active org entry this one replaces, if any.")]
    pub supersedes: Option<String>,
    pub session: Option<SessionArg>,
}

/// A proposal just made, or read.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["proposal"]))]
pub struct ProposalOutput {
    pub proposal: ProposalView,
}

pub struct Propose;

impl Capability for Propose {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "memory.propose",
        Channel::Memory,
        PlanTier::Pro,
        &[Scope::MemoryWrite],
        RouteKind::RemoteFunction,
        "function.triage",
    )
    .writes();
    const TITLE: &'static str = "Propose org memory";
    const DESCRIPTION: &'static str = "Propose a new piece of organisational memory, or a replacement for an active entry (supersedes). The proposal is stored as pending: governance scores it and a person decides uncertain cases. Nothing becomes organisational truth through this call. Check the outcome with proposal_status.";
    type Args = ProposeArgs;
    type Output = ProposalOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: ProposeArgs) -> Result<ProposalOutput> {
        let (tools, caller) = (&cx.tools, cx.caller);
        let mut p = tools.proposal(caller, &format!("memory:{}", a.kind.as_str()), a.title, a.body)?;
        if let Some(s) = a.supersedes {
            let id = Id::new(s)?;
            let target = tools.backend.records.get_memory(&caller.tenant, &id).await?;
            if !target.is_some_and(|m| m.scope == MemoryScope::Org && m.state == GovernanceState::Active) {
                return Err(Error::invalid_field("supersedes", format!("{id} is not an active org memory entry")));
            }
            p.supersedes = Some(id);
        }
        p.source_session = a.session.map(|s| own_session(caller, &s.0)).transpose()?;
        tools.new_proposal(caller, p).await
    }
}

// ---- memory.read_conversational -------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadConversationalArgs {
    pub session: SessionArg,
    pub after_seq: Option<u64>,
    #[serde(default = "super::default_limit::<50>")]
    #[schemars(range(min = 1, max = 500))]
    pub limit: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadConversationalOutput {
    pub session: String,
    pub turns: Vec<TurnView>,
    pub more: bool,
}

pub struct ReadConversational;

impl Capability for ReadConversational {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "memory.read_conversational",
        Channel::Memory,
        PlanTier::Starter,
        &[Scope::MemoryRead],
        RouteKind::StoreIndex,
        "store.turns",
    );
    const TITLE: &'static str = "Read session turns";
    const DESCRIPTION: &'static str = "Read the turns of one of your sessions in order (optionally only those after a sequence number). Use to continue a conversation where it stopped.";
    type Args = ReadConversationalArgs;
    type Output = ReadConversationalOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: ReadConversationalArgs) -> Result<ReadConversationalOutput> {
        let caller = cx.caller;
        let session = own_session(caller, &a.session.0)?;
        let max = a.limit as usize;
        let records = &cx.tools.backend.records;
        let (turns, _) = crate::all_pages(100_000, |p| {
            let session = session.clone();
            async move { records.list_turns(&caller.tenant, &session, &p).await }
        })
        .await?;
        let after = a.after_seq.unwrap_or(0);
        let now = cx.tools.now();
        let shown = |t: &&ConversationTurn| t.seq > after && t.live_at(now);
        let picked: Vec<TurnView> = turns.iter().filter(shown).take(max).map(TurnView::from).collect();
        let more = turns.iter().filter(shown).count() > picked.len();
        Ok(ReadConversationalOutput { session, turns: picked, more })
    }
}

// ---- memory.write_conversational ------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteConversationalArgs {
    pub session: SessionArg,
    #[schemars(with = "TurnRoleSchema")]
    pub role: domain::memory::TurnRole,
    #[schemars(length(min = 1, max = super::MAX_TURN_CHARS))]
    pub content: String,
    #[schemars(
        range(min = 1, max = super::recall::MAX_TTL_DAYS),
        description = "Days to keep the turn: it is hidden once they have passed and forgotten (its text erased everywhere) by the next maintenance run. Default: kept."
    )]
    pub ttl_days: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct WriteConversationalOutput {
    pub session: String,
    pub seq: u64,
    /// The turn's id (what `memory_forget` takes).
    pub id: String,
    pub at: String,
}

pub struct WriteConversational;

impl Capability for WriteConversational {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "memory.write_conversational",
        Channel::Memory,
        PlanTier::Starter,
        &[Scope::MemoryWrite],
        RouteKind::StoreIndex,
        "store.turns",
    )
    .writes();
    const TITLE: &'static str = "Record a session turn";
    const DESCRIPTION: &'static str = "Append one turn (user, assistant or system) to one of your sessions. Sessions are private to you; the turns are the raw material later sessions and proposals are built from.";
    type Args = WriteConversationalArgs;
    type Output = WriteConversationalOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: WriteConversationalArgs) -> Result<WriteConversationalOutput> {
        let (tools, caller) = (&cx.tools, cx.caller);
        let session = own_session(caller, &a.session.0)?;
        not_blank("content", &a.content)?;
        let records = &tools.backend.records;
        // The next seq is the session's turn count + 1; a racing append takes it first
        // (the turn's key is conditional), so re-read and retry.
        for _ in 0..5 {
            let next = records.get_session(&caller.tenant, &caller.principal, &session).await?.map_or(1, |s| s.turns + 1);
            let turn = ConversationTurn {
                tenant: caller.tenant.clone(),
                session: session.clone(),
                seq: next,
                id: tools.new_id(),
                role: a.role,
                content: a.content.clone(),
                principal: caller.principal.clone(),
                at: tools.now(),
                forgotten: None,
                expires_at: a.ttl_days.map(|d| domain::Timestamp(tools.now().0 + i64::from(d) * 86_400_000)),
            };
            match records.append_turn(&turn).await {
                Ok(()) => {
                    tools.index_turn(&turn).await;
                    return Ok(WriteConversationalOutput {
                        session,
                        seq: turn.seq,
                        id: turn.id.to_string(),
                        at: turn.at.to_rfc3339(),
                    });
                }
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::conflict("the session is being written concurrently; retry"))
    }
}

// ---- memory.read_personal -------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadPersonalArgs {
    #[schemars(with = "Option<PersonalKindSchema>")]
    pub kind: Option<PersonalKind>,
    #[serde(default = "super::default_limit::<50>")]
    #[schemars(range(min = 1, max = 500))]
    pub limit: u32,
    #[schemars(length(min = 1, max = 1024), description = "From an earlier answer's next_cursor: the next, older page.")]
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadPersonalOutput {
    /// Newest first.
    pub patterns: Vec<MemoryView>,
    pub count: usize,
    /// Pass it back as `cursor` for older ones (absent: there are no more).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

pub struct ReadPersonal;

impl Capability for ReadPersonal {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "memory.read_personal",
        Channel::Memory,
        PlanTier::Starter,
        &[Scope::MemoryRead],
        RouteKind::StoreIndex,
        "store.memory",
    );
    const TITLE: &'static str = "Read personal patterns";
    const DESCRIPTION: &'static str =
        "Read your own personal patterns: preferences, behaviours, context and decisions recorded for you. Never anyone else's.";
    type Args = ReadPersonalArgs;
    type Output = ReadPersonalOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: ReadPersonalArgs) -> Result<ReadPersonalOutput> {
        let caller = cx.caller;
        let max = a.limit as usize;
        let scope = MemoryScope::Personal(caller.principal.to_string());
        // Checked before any index is read (wall 6); always true for one's own scope.
        if !scope.readable_by(caller) {
            return Err(Error::forbidden("this personal scope belongs to someone else"));
        }
        let records = &cx.tools.backend.records;
        let now = cx.tools.now();
        // Newest first, a page at a time, until `max` are kept; the cursor continues after
        // the last one kept, so nothing is skipped and the newest are always reachable.
        let mut kept: Vec<MemoryEntry> = Vec::new();
        let mut page = page_of(u32::try_from(max).unwrap_or(500).max(50), a.cursor);
        let mut scanned = 0;
        let more = loop {
            let got = records.list_memory_newest(&caller.tenant, &scope, &page).await?;
            scanned += got.items.len();
            let mut left_over = false;
            for m in got.items {
                if m.memory_type == MemoryType::Personal && m.live_at(now) && a.kind.is_none_or(|k| m.kind == k.as_str()) {
                    if kept.len() == max {
                        left_over = true;
                        break;
                    }
                    kept.push(m);
                }
            }
            match got.next_cursor {
                _ if left_over => break true,
                Some(_) if kept.len() == max => break true,
                Some(c) if scanned < MAX_SCAN => page = domain::PageRequest::after(page.size(), c),
                Some(_) => break true,
                None => break false,
            }
        };
        let next_cursor = if more { kept.last().map(|m| ports::records::memory_cursor(&scope, &m.id)) } else { None };
        let patterns: Vec<MemoryView> = kept.iter().map(MemoryView::from).collect();
        Ok(ReadPersonalOutput { count: patterns.len(), patterns, next_cursor })
    }
}

// ---- memory.list_decisions ------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDecisionsArgs {
    #[schemars(with = "Option<ProposalStateSchema>")]
    pub state: Option<ProposalState>,
    #[serde(default = "super::default_limit::<20>")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: u32,
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["decisions", "next_cursor"]))]
pub struct ListDecisionsOutput {
    pub decisions: Vec<ProposalView>,
    #[schemars(description = "Pass as `cursor` to get the next page; null at the end.")]
    pub next_cursor: Option<String>,
}

pub struct ListDecisions;

impl Capability for ListDecisions {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "memory.list_decisions",
        Channel::Memory,
        PlanTier::Pro,
        &[Scope::MemoryRead],
        RouteKind::StoreIndex,
        "store.proposals",
    );
    const TITLE: &'static str = "List governance decisions";
    const DESCRIPTION: &'static str = "List proposals and their governance state (pending, approved, rejected with a reason, written…), newest state groups first. Use to see what the organisation accepted or refused and why.";
    type Args = ListDecisionsArgs;
    type Output = ListDecisionsOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: ListDecisionsArgs) -> Result<ListDecisionsOutput> {
        let page = page_of(a.limit, a.cursor);
        let p = cx.tools.backend.records.list_proposals(&cx.caller.tenant, a.state, &page).await?;
        Ok(ListDecisionsOutput {
            decisions: p.items.iter().map(|x| ProposalView::of(x, cx.caller)).collect(),
            next_cursor: p.next_cursor,
        })
    }
}
