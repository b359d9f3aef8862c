//! Recall across everything the caller can read (issue #21): `memory.search` over the
//! caller's session turns, personal memory, team/project/org memory, the knowledge base
//! and global knowledge, filtered by when things happened (`since`/`until`) and, for
//! governed memory, answered "as of" a time through lineage; and personal memory the
//! caller writes without governance — `memory.remember` (a near-duplicate updates the
//! existing entry instead of adding a twin), `memory.update_personal`,
//! `memory.forget` (a tombstone: who and when, the text gone) — with an optional time
//! to live.
//!
//! Isolation as everywhere (wall 6): the scopes are fixed from the caller before the
//! index is asked — its own personal scope, its own sessions (namespaced by principal),
//! its teams and projects, org and global — and every memory hit is re-read from the
//! store, so superseded, forgotten or expired entries never come back.

use domain::memory::{GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType, PersonalKind};
use domain::principal::CallerContext;
use domain::{Error, Id, Result, Timestamp};
use ports::records::{EngineeringStore, Expect, MemoryStore};
use ports::search::{DocKind, SearchMode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{MAX_SCAN, MemoryView, PersonalKindSchema, QueryWords, Tools, WhyView, not_blank, own_session, rank, terms};
use crate::capabilities::policy::*;
use crate::capabilities::typed::{Capability, Context, Required};
use crate::search::{IndexRequest, Window};

mod forget;
mod newest;
pub use forget::{Forget, ForgetArgs, ForgetOutput, ForgottenTurnView, forget, forget_turn};
use newest::{NEWER_POOL, newer_why, newest_first};

/// Sessions searched when no scope is named: the caller's most recent ones.
pub const MAX_SESSIONS: usize = 100;
/// Longest personal memory, in bytes.
pub const MAX_PERSONAL_CHARS: usize = 4_096;
/// Cosine similarity at which a new personal memory is the same as an existing one.
pub const NEAR_DUPLICATE: f32 = 0.92;
/// Longest time to live, in days.
pub const MAX_TTL_DAYS: u32 = 3_650;
const DAY_MS: i64 = 86_400_000;

crate::enum_schema!(RecallTypeSchema, RecallType);

/// What `memory.search` may be narrowed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecallType {
    Conversational,
    Personal,
    Org,
    Kb,
    Engineering,
}

impl RecallType {
    pub const ALL: &'static [Self] = &[Self::Conversational, Self::Personal, Self::Org, Self::Kb, Self::Engineering];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Conversational => "conversational",
            Self::Personal => "personal",
            Self::Org => "org",
            Self::Kb => "kb",
            Self::Engineering => "engineering",
        }
    }
}

// ---- memory.search --------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    #[schemars(
        length(min = 1, max = super::MAX_QUERY_LEN),
        description = "What you are looking for, in words or as an exact identifier. Hybrid keyword + semantic search."
    )]
    pub query: String,
    #[schemars(
        description = "Only this scope: org, global, team:<id>, project:<id>, personal (yours), or session:<name> (one of your sessions). Default: everything you can read (your 100 most recent sessions)."
    )]
    pub scope: Option<String>,
    #[serde(rename = "type")]
    #[schemars(
        with = "Option<RecallTypeSchema>",
        description = "Only conversational turns, personal memory, org (governed team/project/org) memory, knowledge-base documents, or your projects' engineering records."
    )]
    pub memory_type: Option<RecallType>,
    #[schemars(description = "Only what happened at or after this time (RFC 3339 or a date, e.g. 2026-03-01).")]
    pub since: Option<String>,
    #[schemars(description = "Only what happened before this time (RFC 3339 or a date).")]
    pub until: Option<String>,
    #[schemars(
        description = "Governed memory as it stood at this time: an entry superseded since is answered by the version then active (RFC 3339 or a date)."
    )]
    pub as_of: Option<String>,
    #[serde(default = "super::default_limit::<10>")]
    #[schemars(range(min = 1, max = 50))]
    pub limit: u32,
    #[serde(default = "default_min_score")]
    #[schemars(
        range(min = 0.0, max = 1.0),
        description = "Leave out hits scoring less than this (why.score, 0 to 1): the default drops what only a faint resemblance found; 0 returns every hit that scored. Exact identifiers are always kept."
    )]
    pub min_score: f64,
}

fn default_min_score() -> f64 {
    ports::search::DEFAULT_MIN_SCORE
}

/// One thing recalled.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(transform = Required(&["kind", "id", "scope", "title", "text", "occurred_at", "why"]))]
pub struct RecallHitView {
    #[schemars(description = "turn, memory or kb")]
    pub kind: String,
    pub id: String,
    pub scope: String,
    #[schemars(description = "conversational, personal or org (for memory and turns)")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "string"))]
    pub memory_type: Option<String>,
    pub title: String,
    pub text: String,
    #[schemars(description = "When it happened (RFC 3339): a turn's time, a memory's event time, else when it was stored.")]
    pub occurred_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "string"), description = "When it was stored, when that differs (RFC 3339).")]
    pub stored_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "string"), description = "The governance state, for memory: active, or superseded for an as_of answer.")]
    pub state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "string"), description = "For an as_of answer: the active entry that superseded this one.")]
    pub superseded_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        extend("type" = "string"),
        description = "For your own personal memory and turns: a newer one (its id, listed before this one) says otherwise — this is older news."
    )]
    pub superseded_by_time: Option<String>,
    pub why: WhyView,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["results", "count", "truncated", "search"]))]
pub struct RecallOutput {
    pub results: Vec<RecallHitView>,
    pub count: usize,
    pub truncated: bool,
    #[schemars(description = "hybrid, or keyword-scan when no search index is configured")]
    pub search: String,
}

pub struct Recall;

impl Capability for Recall {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "memory.search",
        Channel::Memory,
        PlanTier::Starter,
        &[Scope::MemoryRead],
        RouteKind::VectorIndex,
        "search.memory",
    );
    const TITLE: &'static str = "Search all memory";
    const DESCRIPTION: &'static str = "Search everything you can read in one call: your past conversation turns, your personal memory, team/project/org memory and the knowledge base. Narrow with scope, type, since/until (when it happened) or as_of (governed memory as it stood then). Each result says when it happened and why it matched. Example: {\"query\": \"what did we decide about refunds\", \"since\": \"2026-01-01\"}.";
    type Args = RecallArgs;
    type Output = RecallOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: RecallArgs) -> Result<RecallOutput> {
        ports::search::check_query(&a.query)?;
        let days = ports::search::query_dates(&a.query).0;
        let (tools, caller) = (&cx.tools, cx.caller);
        let max = a.limit as usize;
        let window = Window {
            since: a.since.as_deref().map(|s| Timestamp::parse("since", s)).transpose()?,
            until: a.until.as_deref().map(|s| Timestamp::parse("until", s)).transpose()?,
        };
        let as_of = a.as_of.as_deref().map(|s| Timestamp::parse("as_of", s)).transpose()?;
        let scopes = tools.recall_scopes(caller, a.scope.as_deref(), a.memory_type).await?;
        let own: Vec<MemoryScope> =
            scopes.iter().filter(|s| matches!(s, MemoryScope::Personal(_) | MemoryScope::Session(_))).cloned().collect();
        if scopes.is_empty() {
            return Ok(RecallOutput { results: Vec::new(), count: 0, truncated: false, search: "hybrid".into() });
        }
        let kind = a.memory_type.map(|t| match t {
            RecallType::Conversational => DocKind::Turn,
            RecallType::Kb => DocKind::Kb,
            RecallType::Personal | RecallType::Org => DocKind::Memory,
            RecallType::Engineering => DocKind::Engineering,
        });
        let search = tools.search;
        let now = tools.now();
        let mut results = Vec::new();
        if search.enabled() {
            let hits =
                search.search_window(caller, scopes, kind, &a.query, (max * 2).min(100), SearchMode::Hybrid, window).await?;
            let truncated = hits.len() >= 100;
            let words = QueryWords::of(&a.query);
            for h in hits.iter().filter(|h| h.score >= a.min_score || h.exact) {
                let why = WhyView::of_hit(h, &words);
                let found = match h.kind {
                    DocKind::Memory => tools.recalled_memory(caller, &h.doc, as_of, now, why).await?,
                    DocKind::Engineering => tools.recalled_engineering(caller, h, why).await?,
                    DocKind::Turn | DocKind::Kb => Some(indexed_hit(h, why)),
                };
                results.extend(found);
            }
            // Every hit that passed is read (at most twice the limit), and the caller's
            // newer facts about its own top hits are looked up: a newer fact goes before
            // the older one it replaces, found by the query or not.
            let pool = tools.newer_candidates(caller, own, &results, window).await?;
            // A question naming a day its top hits happened on asks about that day:
            // newer facts do not go first.
            let dated = newest::on_the_days(&results, &days);
            newest_first(&mut results, &pool, dated);
            results.truncate(max);
            return Ok(RecallOutput { count: results.len(), results, truncated, search: "hybrid".into() });
        }
        let (mut found, truncated, pool) = tools.recall_scan(caller, &scopes, kind, &a.query, window, as_of, max * 2).await?;
        // The scan matches words, not days: newest fact wins whatever the question says.
        newest_first(&mut found, &pool, false);
        found.truncate(max);
        Ok(RecallOutput { count: found.len(), results: found, truncated, search: "keyword-scan".into() })
    }
}

impl Tools<'_> {
    /// The scopes `memory.search` reads for `caller`: the one named (refused unless
    /// readable), else every readable one — narrowed by `memory_type`.
    async fn recall_scopes(
        &self,
        caller: &CallerContext,
        named: Option<&str>,
        memory_type: Option<RecallType>,
    ) -> Result<Vec<MemoryScope>> {
        let personal = MemoryScope::Personal(caller.principal.to_string());
        let scopes = match named {
            Some("personal") => vec![personal],
            Some(raw) if raw.starts_with("session:") => {
                vec![MemoryScope::Session(own_session(caller, &raw["session:".len()..])?)]
            }
            Some(raw) => {
                let scope = MemoryScope::parse(raw)?;
                if !scope.readable_by(caller) {
                    return Err(Error::forbidden(format!("scope {raw} is not readable with this credential")));
                }
                vec![scope]
            }
            None => {
                let mut all = vec![MemoryScope::Org, MemoryScope::Global, personal];
                all.extend(caller.teams.iter().map(|t| MemoryScope::Team(t.clone())));
                all.extend(caller.projects.iter().map(|p| MemoryScope::Project(p.clone())));
                if memory_type.is_none_or(|t| t == RecallType::Conversational) {
                    let records = &self.backend.records;
                    let (mut sessions, _) = crate::all_pages(10_000, |p| async move {
                        records.list_sessions(&caller.tenant, &caller.principal, &p).await
                    })
                    .await?;
                    sessions.sort_by_key(|s| std::cmp::Reverse(s.last_at));
                    all.extend(sessions.into_iter().take(MAX_SESSIONS).map(|s| MemoryScope::Session(s.session)));
                }
                all
            }
        };
        // Checked before any index is read (wall 6), whatever built the list.
        if let Some(s) = scopes.iter().find(|s| !s.readable_by(caller)) {
            return Err(Error::forbidden(format!("scope {} is not readable with this credential", s.storage_key())));
        }
        Ok(scopes
            .into_iter()
            .filter(|s| match memory_type {
                None => true,
                Some(RecallType::Conversational) => matches!(s, MemoryScope::Session(_)),
                Some(RecallType::Personal) => matches!(s, MemoryScope::Personal(_)),
                Some(RecallType::Org) => matches!(s, MemoryScope::Org | MemoryScope::Team(_) | MemoryScope::Project(_)),
                Some(RecallType::Kb) => {
                    matches!(s, MemoryScope::Org | MemoryScope::Team(_) | MemoryScope::Project(_) | MemoryScope::Global)
                }
                Some(RecallType::Engineering) => matches!(s, MemoryScope::Project(_)),
            })
            .collect())
    }

    /// An engineering record's hit re-read from the store (gone or expired: none).
    async fn recalled_engineering(
        &self,
        caller: &CallerContext,
        h: &ports::search::SearchHit,
        why: WhyView,
    ) -> Result<Option<RecallHitView>> {
        let MemoryScope::Project(project) = &h.scope else { return Ok(None) };
        let r = self.backend.records.get_eng_record(&caller.tenant, project, &h.doc).await?;
        Ok(r.filter(|r| !r.expired(self.now())).map(|r| engineering_hit(&r, why)))
    }

    /// A memory hit re-read from the store: live entries as they are; with `as_of`, a
    /// governed entry created since is answered by the version active then (through
    /// `lineage.supersedes`), or dropped when none was.
    async fn recalled_memory(
        &self,
        caller: &CallerContext,
        id: &Id,
        as_of: Option<Timestamp>,
        now: Timestamp,
        why: WhyView,
    ) -> Result<Option<RecallHitView>> {
        let records = &self.backend.records;
        let Some(m) = records.get_memory(&caller.tenant, id).await? else { return Ok(None) };
        if !m.scope.readable_by(caller) || !m.live_at(now) {
            return Ok(None);
        }
        let mut shown = m.clone();
        if let Some(at) = as_of.filter(|_| m.memory_type == MemoryType::Org) {
            let mut hops = 0;
            while shown.created_at > at {
                let Some(prev) = shown.lineage.supersedes.clone() else { return Ok(None) };
                let Some(p) = records.get_memory(&caller.tenant, &prev).await? else { return Ok(None) };
                shown = p;
                hops += 1;
                if hops > 100 {
                    return Ok(None);
                }
            }
        }
        let superseded_by = (shown.id != m.id).then(|| m.id.to_string());
        Ok(Some(hit_of(&shown, superseded_by, why)))
    }

    /// `memory.search` without an index: a keyword scan of the store's memory and turns
    /// in `scopes` (the KB is left to `kb.search`'s own scan).
    #[allow(clippy::too_many_arguments)]
    async fn recall_scan(
        &self,
        caller: &CallerContext,
        scopes: &[MemoryScope],
        kind: Option<DocKind>,
        query: &str,
        window: Window,
        as_of: Option<Timestamp>,
        max: usize,
    ) -> Result<(Vec<RecallHitView>, bool, Vec<RecallHitView>)> {
        let terms = terms(query)?;
        let words = QueryWords::of(query);
        // The caller's own personal memory and turns seen, matching or not: where a
        // newer fact replacing a result is looked for (the most recent NEWER_POOL).
        let mut pool: Vec<(Timestamp, RecallHitView)> = Vec::new();
        let records = &self.backend.records;
        let now = self.now();
        let mut found: Vec<(u8, Timestamp, RecallHitView)> = Vec::new();
        let mut truncated = false;
        for scope in scopes {
            if let MemoryScope::Session(session) = scope {
                if kind.is_some_and(|k| k != DocKind::Turn) {
                    continue;
                }
                let (turns, cut) = crate::all_pages(MAX_SCAN, |p| {
                    let session = session.clone();
                    async move { records.list_turns(&caller.tenant, &session, &p).await }
                })
                .await?;
                truncated |= cut;
                for t in turns.iter().filter(|t| window.contains(t.at) && t.live_at(now)) {
                    if let Some(r) = rank(&terms, t.id.as_str(), "", &t.content) {
                        found.push((r, t.at, turn_hit(scope, t, WhyView::of_scan(&words, &[&t.content]))));
                    }
                    pool.push((t.at, turn_hit(scope, t, newer_why())));
                }
                continue;
            }
            if let MemoryScope::Project(project) = scope
                && kind.is_none_or(|k| k == DocKind::Engineering)
            {
                let (all, cut) = crate::all_pages(MAX_SCAN, |p| {
                    let project = project.clone();
                    async move { records.list_eng_records(&caller.tenant, &project, None, &p).await }
                })
                .await?;
                truncated |= cut;
                for r in all.iter().filter(|r| !r.expired(now) && window.contains(r.created_at)) {
                    let (title, text) = (r.body.title(), r.body.text());
                    if let Some(rank) = rank(&terms, r.id.as_str(), &title, &text) {
                        let why = WhyView::of_scan(&words, &[r.id.as_str(), &title, &text]);
                        found.push((rank, r.created_at, engineering_hit(r, why)));
                    }
                }
            }
            if kind.is_some_and(|k| k != DocKind::Memory) || *scope == MemoryScope::Global {
                continue;
            }
            let (all, cut) = crate::all_pages(MAX_SCAN, |p| {
                let scope = scope.clone();
                async move { records.list_memory(&caller.tenant, &scope, &p).await }
            })
            .await?;
            truncated |= cut;
            for m in all.iter().filter(|m| m.live_at(now) && window.contains(m.happened_at())) {
                if m.memory_type == MemoryType::Personal && m.scope.readable_by(caller) {
                    pool.push((m.happened_at(), hit_of(m, None, newer_why())));
                }
                if let Some(r) = rank(&terms, m.id.as_str(), &m.title, &m.body) {
                    let why = WhyView::of_scan(&words, &[m.id.as_str(), &m.title, &m.body]);
                    if let Some(h) = self.recalled_memory(caller, &m.id, as_of, now, why).await? {
                        found.push((r, m.happened_at(), h));
                    }
                }
            }
        }
        found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(&a.1)));
        pool.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        let pool = pool.into_iter().take(NEWER_POOL).map(|(_, h)| h).collect();
        Ok((found.into_iter().take(max).map(|(_, _, h)| h).collect(), truncated, pool))
    }

    /// Indexes a conversation turn in its session's scope (best effort: a failure is
    /// logged, the turn is stored either way).
    pub(crate) async fn index_turn(&self, turn: &domain::memory::ConversationTurn) {
        let search = self.search;
        let scope = MemoryScope::Session(turn.session.clone());
        let title = crate::search::turn_title(turn);
        let r = search
            .index_turn(IndexRequest {
                tenant: &turn.tenant,
                scope: &scope,
                kind: DocKind::Turn,
                doc: &turn.id,
                title: &title,
                body: &turn.content,
                at: turn.at,
                occurred: Some(turn.at),
            })
            .await;
        if let Err(e) = r {
            tracing::warn!(code = ?e.code, "a turn was stored but not indexed");
        }
    }
}

fn engineering_hit(r: &domain::engineering::EngRecord, why: WhyView) -> RecallHitView {
    RecallHitView {
        kind: DocKind::Engineering.as_str().to_owned(),
        id: r.id.to_string(),
        scope: MemoryScope::Project(r.project.clone()).storage_key(),
        memory_type: Some(r.kind().as_str().to_owned()),
        title: r.body.title(),
        text: r.body.text(),
        occurred_at: r.created_at.to_rfc3339(),
        stored_at: Some(r.updated_at.to_rfc3339()),
        state: None,
        superseded_by: None,
        superseded_by_time: None,
        why,
    }
}

fn hit_of(m: &MemoryEntry, superseded_by: Option<String>, why: WhyView) -> RecallHitView {
    RecallHitView {
        kind: "memory".into(),
        id: m.id.to_string(),
        scope: m.scope.storage_key(),
        memory_type: Some(m.memory_type.as_str().to_owned()),
        title: m.title.clone(),
        text: m.body.clone(),
        occurred_at: m.happened_at().to_rfc3339(),
        stored_at: m.occurred_at.map(|_| m.created_at.to_rfc3339()),
        state: Some(m.state.name().to_owned()),
        superseded_by,
        superseded_by_time: None,
        why,
    }
}

/// A turn or KB hit as the index holds it (their text is the index's own copy).
fn indexed_hit(h: &ports::search::SearchHit, why: WhyView) -> RecallHitView {
    RecallHitView {
        kind: h.kind.as_str().to_owned(),
        id: h.doc.to_string(),
        scope: h.scope.storage_key(),
        memory_type: (h.kind == DocKind::Turn).then(|| MemoryType::Conversational.as_str().to_owned()),
        title: h.title.clone(),
        text: h.text.clone(),
        occurred_at: h.occurred_at.unwrap_or_default().to_rfc3339(),
        stored_at: None,
        state: None,
        superseded_by: None,
        superseded_by_time: None,
        why,
    }
}

fn turn_hit(scope: &MemoryScope, t: &domain::memory::ConversationTurn, why: WhyView) -> RecallHitView {
    RecallHitView {
        kind: "turn".into(),
        id: t.id.to_string(),
        scope: scope.storage_key(),
        memory_type: Some(MemoryType::Conversational.as_str().to_owned()),
        title: format!("{} · {}", t.role.as_str(), t.at.to_rfc3339()),
        text: t.content.clone(),
        occurred_at: t.at.to_rfc3339(),
        stored_at: None,
        state: None,
        superseded_by: None,
        superseded_by_time: None,
        why,
    }
}

// ---- personal memory: remember, update, forget ---------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberArgs {
    #[schemars(
        length(min = 1, max = MAX_PERSONAL_CHARS),
        description = "The fact or preference, self-contained, e.g. \"Prefers answers in French\" or \"Works from Lisbon since May 2026\"."
    )]
    pub text: String,
    #[schemars(with = "Option<PersonalKindSchema>", description = "preference (default), behavior, context or decision")]
    pub kind: Option<PersonalKind>,
    #[schemars(description = "When it happened or became true, if not now (RFC 3339 or a date).")]
    pub occurred_at: Option<String>,
    #[schemars(range(min = 1, max = MAX_TTL_DAYS), description = "Forget it after this many days.")]
    pub ttl_days: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["action", "memory"]))]
pub struct RememberOutput {
    #[schemars(description = "created, or updated when an existing memory said the same thing (no twin is added)")]
    pub action: String,
    pub memory: MemoryView,
}

pub struct Remember;

impl Capability for Remember {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "memory.remember",
        Channel::Memory,
        PlanTier::Starter,
        &[Scope::MemoryWrite],
        RouteKind::StoreIndex,
        "store.memory",
    )
    .writes();
    const TITLE: &'static str = "Remember something personal";
    const DESCRIPTION: &'static str = "Remember a fact or preference about the person you work for, in their personal memory (theirs alone; no approval needed). If a memory already says nearly the same thing it is updated instead of duplicated. Optional ttl_days forgets it later. Example: {\"text\": \"Prefers short answers with code first\", \"kind\": \"preference\"}.";
    type Args = RememberArgs;
    type Output = RememberOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: RememberArgs) -> Result<RememberOutput> {
        let (tools, caller) = (&cx.tools, cx.caller);
        not_blank("text", &a.text)?;
        let occurred = a.occurred_at.as_deref().map(|s| Timestamp::parse("occurred_at", s)).transpose()?;
        let ttl = ttl_ms(a.ttl_days);
        let kind = a.kind.unwrap_or(PersonalKind::Preference);
        let now = tools.now();
        if let Some(mut same) = tools.near_duplicate(caller, &a.text, kind).await? {
            same.body = a.text.trim().to_owned();
            same.title = title_of(&same.body);
            same.updated_at = now;
            same.occurred_at = occurred.or(same.occurred_at);
            same.expires_at = ttl.map(|t| now.plus_millis(t)).or(same.expires_at);
            let stored = tools.store_personal(&same, Expect::Version(same.version)).await?;
            return Ok(RememberOutput { action: "updated".into(), memory: (&stored).into() });
        }
        let body = a.text.trim().to_owned();
        let entry = MemoryEntry {
            tenant: caller.tenant.clone(),
            id: tools.new_id(),
            memory_type: MemoryType::Personal,
            scope: MemoryScope::Personal(caller.principal.to_string()),
            kind: kind.as_str().to_owned(),
            title: title_of(&body),
            body,
            state: GovernanceState::Active,
            lineage: Lineage::default(),
            created_by: caller.principal.clone(),
            created_at: now,
            updated_at: now,
            version: 1,
            occurred_at: occurred,
            expires_at: ttl.map(|t| now.plus_millis(t)),
            metadata: None,
        };
        let stored = tools.store_personal(&entry, Expect::Absent).await?;
        Ok(RememberOutput { action: "created".into(), memory: (&stored).into() })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdatePersonalArgs {
    #[schemars(description = "The personal memory's id (from memory_remember, memory_read_personal or memory_search).")]
    pub id: String,
    #[schemars(length(min = 1, max = MAX_PERSONAL_CHARS))]
    pub text: Option<String>,
    #[schemars(with = "Option<PersonalKindSchema>")]
    pub kind: Option<PersonalKind>,
    #[schemars(description = "When it happened or became true (RFC 3339 or a date).")]
    pub occurred_at: Option<String>,
    #[schemars(range(min = 0, max = MAX_TTL_DAYS), description = "Forget it this many days from now; 0 keeps it until forgotten.")]
    pub ttl_days: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["memory"]))]
pub struct PersonalOutput {
    pub memory: MemoryView,
}

pub struct UpdatePersonal;

impl Capability for UpdatePersonal {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "memory.update_personal",
        Channel::Memory,
        PlanTier::Starter,
        &[Scope::MemoryWrite],
        RouteKind::StoreIndex,
        "store.memory",
    )
    .writes();
    const TITLE: &'static str = "Update a personal memory";
    const DESCRIPTION: &'static str = "Change one of your personal memories: its text, kind, when it happened, or its time to live (ttl_days 0 removes it). Example: {\"id\": \"01J…\", \"text\": \"Prefers answers in Portuguese\"}.";
    type Args = UpdatePersonalArgs;
    type Output = PersonalOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: UpdatePersonalArgs) -> Result<PersonalOutput> {
        let (tools, caller) = (&cx.tools, cx.caller);
        let mut m = tools.own_personal(caller, &a.id).await?;
        if let Some(text) = &a.text {
            not_blank("text", text)?;
            m.body = text.trim().to_owned();
            m.title = title_of(&m.body);
        }
        if let Some(k) = a.kind {
            m.kind = k.as_str().to_owned();
        }
        if let Some(raw) = &a.occurred_at {
            m.occurred_at = Some(Timestamp::parse("occurred_at", raw)?);
        }
        let now = tools.now();
        match a.ttl_days {
            Some(0) => m.expires_at = None,
            Some(_) => m.expires_at = ttl_ms(a.ttl_days).map(|t| now.plus_millis(t)),
            None => {}
        }
        m.updated_at = now;
        let stored = tools.store_personal(&m, Expect::Version(m.version)).await?;
        Ok(PersonalOutput { memory: (&stored).into() })
    }
}

impl Tools<'_> {
    /// The caller's own live personal entry `id`; anyone else's is "not found" (its
    /// existence is not revealed).
    async fn own_personal(&self, caller: &CallerContext, id: &str) -> Result<MemoryEntry> {
        let id = Id::new(id)?;
        let own = MemoryScope::Personal(caller.principal.to_string());
        self.backend
            .records
            .get_memory(&caller.tenant, &id)
            .await?
            .filter(|m| m.scope == own && m.live_at(self.now()))
            .ok_or_else(|| Error::not_found(format!("personal memory {id}")))
    }

    /// An active personal entry of the caller's that says nearly what `text` says: the
    /// same words (case and spacing aside), or — with an index — a vector within
    /// [`NEAR_DUPLICATE`] of the same kind.
    async fn near_duplicate(&self, caller: &CallerContext, text: &str, kind: PersonalKind) -> Result<Option<MemoryEntry>> {
        let scope = MemoryScope::Personal(caller.principal.to_string());
        let norm = |s: &str| s.split_whitespace().map(str::to_lowercase).collect::<Vec<_>>().join(" ");
        let wanted = norm(text);
        let records = &self.backend.records;
        let now = self.now();
        let (all, _) = crate::all_pages(MAX_SCAN, |p| {
            let scope = scope.clone();
            async move { records.list_memory(&caller.tenant, &scope, &p).await }
        })
        .await?;
        if let Some(m) = all.iter().find(|m| m.live_at(now) && m.kind == kind.as_str() && norm(&m.body) == wanted) {
            return Ok(Some(m.clone()));
        }
        let search = self.search;
        if !search.enabled() {
            return Ok(None);
        }
        let hits = search.search(caller, vec![scope], Some(DocKind::Memory), text, 3, SearchMode::Vector).await?;
        for h in hits.iter().filter(|h| h.similarity.is_some_and(|s| s >= NEAR_DUPLICATE)) {
            if let Some(m) = all.iter().find(|m| m.id == h.doc && m.live_at(now) && m.kind == kind.as_str()) {
                return Ok(Some(m.clone()));
            }
        }
        Ok(None)
    }

    /// Writes a personal entry and (re)indexes it, with its event time.
    async fn store_personal(&self, m: &MemoryEntry, expect: Expect) -> Result<MemoryEntry> {
        let stored = self.backend.records.put_memory(m, expect).await?;
        self.search
            .index(IndexRequest {
                tenant: &stored.tenant,
                scope: &stored.scope,
                kind: DocKind::Memory,
                doc: &stored.id,
                title: &stored.title,
                body: &stored.body,
                at: stored.updated_at,
                occurred: stored.occurred_at,
            })
            .await?;
        Ok(stored)
    }
}

/// The first line of a memory, at most 80 characters, as its title.
pub fn title_of(body: &str) -> String {
    let first = body.lines().next().unwrap_or_default().trim();
    let mut t: String = first.chars().take(80).collect();
    if first.chars().count() > 80 {
        t.push('…');
    }
    t
}

/// A `ttl_days` argument in milliseconds (its range is the schema's): none, or 0, keeps it.
fn ttl_ms(days: Option<u32>) -> Option<i64> {
    days.filter(|d| *d > 0).map(|d| i64::from(d) * DAY_MS)
}
