//! What the organisation keeps beside memory: the book of projects, the knowledge base
//! (hybrid search over the scopes the caller can read), and playbooks assembled from real
//! context for an agent to run.

use domain::memory::MemoryScope;
use domain::{Error, Result};
use ports::records::LibraryStore;
use ports::search::{DocKind, SearchMode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::session::{GetContext, GetContextArgs};
use super::{EntityArg, MAX_SCAN, QueryWords, SessionArg, WhyView, not_blank, page_of, rank, reads_memory, terms};
use crate::capabilities::policy::*;
use crate::capabilities::typed::{Capability, Context, Required};
use crate::search::SearchService;

// ---- book.list ------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BookListArgs {
    #[schemars(length(min = 1, max = 128))]
    pub project: Option<String>,
    #[serde(default = "super::default_limit::<20>")]
    #[schemars(range(min = 1, max = 200))]
    pub limit: u32,
    pub cursor: Option<String>,
}

/// One entry of the book of projects.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["id", "project", "title", "body"]))]
pub struct BookEntryView {
    pub id: String,
    pub project: String,
    pub title: String,
    pub body: String,
    pub created_at: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["entries", "next_cursor"]))]
pub struct BookListOutput {
    pub entries: Vec<BookEntryView>,
    #[schemars(description = "Pass as `cursor` to get the next page; null at the end.")]
    pub next_cursor: Option<String>,
}

pub struct BookList;

impl Capability for BookList {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "book.list",
        Channel::Tool,
        PlanTier::Starter,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.book",
    )
    .cached(120);
    const TITLE: &'static str = "List the book of projects";
    const DESCRIPTION: &'static str = "List entries of the book of projects, for one project or all, in project order.";
    type Args = BookListArgs;
    type Output = BookListOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: BookListArgs) -> Result<BookListOutput> {
        let page = page_of(a.limit, a.cursor);
        let p = cx.tools.backend.records.list_book_entries(&cx.caller.tenant, a.project.as_deref(), &page).await?;
        let entries = p
            .items
            .iter()
            .map(|e| BookEntryView {
                id: e.id.to_string(),
                project: e.project.clone(),
                title: e.title.clone(),
                body: e.body.clone(),
                created_at: e.created_at.to_rfc3339(),
            })
            .collect();
        Ok(BookListOutput { entries, next_cursor: p.next_cursor })
    }
}

// ---- kb.search ------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KbSearchArgs {
    #[schemars(length(min = 1, max = super::MAX_QUERY_LEN), description = "Words or an exact identifier; hybrid keyword + semantic search.")]
    pub query: String,
    #[schemars(
        description = "Only this scope: global, org, team:<id> or project:<id> (default: every one this credential can read)."
    )]
    pub scope: Option<String>,
    #[serde(default = "super::default_limit::<10>")]
    #[schemars(range(min = 1, max = 50))]
    pub limit: u32,
}

/// A knowledge-base document found, with its best passage.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["id", "title", "body", "why"]))]
pub struct KbDocumentView {
    pub id: String,
    pub scope: String,
    pub title: String,
    pub body: String,
    pub passage: String,
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "string"))]
    pub created_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "number"))]
    pub score: Option<f64>,
    /// Why it was returned.
    pub why: WhyView,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["documents", "count", "truncated"]))]
pub struct KbSearchOutput {
    pub documents: Vec<KbDocumentView>,
    pub count: usize,
    pub truncated: bool,
    pub search: String,
}

pub struct KbSearch;

impl Capability for KbSearch {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "kb.search",
        Channel::Tool,
        PlanTier::Starter,
        &[Scope::TenantRead],
        RouteKind::VectorIndex,
        "search.kb",
    );
    const TITLE: &'static str = "Search the knowledge base";
    const DESCRIPTION: &'static str = "Search the knowledge-base documents you can read (global, org, your teams and projects) with hybrid keyword + semantic search. An exact identifier or document id ranks first. Returns the best passage of each document.";
    type Args = KbSearchArgs;
    type Output = KbSearchOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: KbSearchArgs) -> Result<KbSearchOutput> {
        let (tools, caller) = (&cx.tools, cx.caller);
        ports::search::check_query(&a.query)?;
        let max = a.limit as usize;
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
        let words = QueryWords::of(&a.query);
        let search = tools.search;
        if search.enabled() {
            let hits = search.search(caller, scopes, Some(DocKind::Kb), &a.query, max, SearchMode::Hybrid).await?;
            let mut documents = Vec::new();
            for h in &hits {
                let doc = if h.scope == MemoryScope::Global {
                    None
                } else {
                    tools.backend.records.get_kb_document(&caller.tenant, &h.doc).await?
                };
                documents.push(KbDocumentView {
                    id: h.doc.to_string(),
                    scope: h.scope.storage_key(),
                    title: h.title.clone(),
                    body: doc.as_ref().map_or_else(|| h.text.clone(), |d| d.body.clone()),
                    passage: h.text.clone(),
                    source: doc.as_ref().and_then(|d| d.source.clone()),
                    created_at: doc.as_ref().map(|d| d.created_at.to_rfc3339()),
                    score: Some(h.score),
                    why: WhyView::of_hit(h, &words),
                });
            }
            return Ok(KbSearchOutput { count: documents.len(), documents, truncated: false, search: "hybrid".into() });
        }
        let terms = terms(&a.query)?;
        let records = &tools.backend.records;
        let (all, truncated) =
            crate::all_pages(MAX_SCAN, |p| async move { records.list_kb_documents(&caller.tenant, &p).await }).await?;
        if let Some(s) = scopes.iter().find(|s| !s.readable_by(caller)) {
            return Err(Error::forbidden(format!("scope {} is not readable with this credential", s.storage_key())));
        }
        let mut hits: Vec<(u8, _)> = all
            .into_iter()
            .filter(|d| scopes.contains(&d.scope) && d.scope.readable_by(caller))
            .filter_map(|d| rank(&terms, d.id.as_str(), &d.title, &d.body).map(|r| (r, d)))
            .collect();
        hits.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
        hits.truncate(max);
        let documents: Vec<KbDocumentView> = hits
            .into_iter()
            .map(|(_, d)| KbDocumentView {
                why: WhyView::of_scan(&words, &[d.id.as_str(), &d.title, &d.body]),
                id: d.id.to_string(),
                scope: d.scope.storage_key(),
                title: d.title,
                passage: d.body.clone(),
                body: d.body,
                source: d.source,
                created_at: Some(d.created_at.to_rfc3339()),
                score: None,
            })
            .collect();
        Ok(KbSearchOutput { count: documents.len(), documents, truncated, search: "keyword-scan".into() })
    }
}

// ---- playbook.handoff -----------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlaybookArgs {
    #[schemars(length(min = 1, max = super::MAX_TITLE_LEN * 5))]
    pub goal: String,
    pub entity: Option<EntityArg>,
    pub session: Option<SessionArg>,
}

/// A JSON playbook for an agent to run locally, step by step.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["version", "goal", "steps", "context"]))]
pub struct Playbook {
    pub version: u32,
    pub goal: String,
    pub tenant: String,
    pub generated_at: String,
    #[schemars(with = "Vec<Map<String, Value>>")]
    pub steps: Vec<Value>,
    // `session.get_context`'s answer for the goal (`{}` when there was nothing to read).
    #[schemars(with = "Map<String, Value>")]
    pub context: Value,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PlaybookOutput {
    pub playbook: Playbook,
}

pub struct PlaybookHandoff;

impl Capability for PlaybookHandoff {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "playbook.handoff",
        Channel::Tool,
        PlanTier::Pro,
        &[Scope::TenantWrite],
        RouteKind::RemoteFunction,
        "function.playbook",
    )
    .writes();
    const TITLE: &'static str = "Hand off a playbook";
    const DESCRIPTION: &'static str = "Build a JSON playbook for a goal from real context (entity, its signals, relevant org memory, session) for you to run locally, step by step. It changes nothing by itself.";
    type Args = PlaybookArgs;
    type Output = PlaybookOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: PlaybookArgs) -> Result<PlaybookOutput> {
        not_blank("goal", &a.goal)?;
        // The context a caller may read: org memory matching the goal needs `memory:read`.
        let query = reads_memory(cx.caller).then(|| a.goal.clone());
        let context = if query.is_some() || a.entity.is_some() || a.session.is_some() {
            let args = GetContextArgs { entity: a.entity.clone(), session: a.session.clone(), query, project: None };
            Some(GetContext::run(cx, args).await?)
        } else {
            None
        };
        let mut steps = Vec::new();
        if let Some(e) = context.as_ref().and_then(|c| c.entity.as_ref()) {
            steps.push(json!({"action": "review_entity", "entity": {"type": e.entity_type, "id": e.id},
                "why": "the playbook concerns this entity; its traits are in context.entity"}));
        }
        for s in context.as_ref().and_then(|c| c.signals.as_ref()).into_iter().flatten().take(5) {
            steps.push(json!({"action": "address_signal", "signal": s.id, "kind": s.kind,
                "why": "a recent state change on the entity"}));
        }
        for m in context.as_ref().and_then(|c| c.memory.as_ref()).into_iter().flatten() {
            steps.push(json!({"action": "follow_org_memory", "entry": m.id, "title": m.title,
                "why": "active organisational memory relevant to the goal"}));
        }
        steps.push(json!({"action": "record_outcome", "tool": "memory_write_conversational",
            "why": "so the next session continues from what happened"}));
        Ok(PlaybookOutput {
            playbook: Playbook {
                version: 1,
                goal: a.goal,
                tenant: cx.caller.tenant.to_string(),
                generated_at: cx.tools.now().to_rfc3339(),
                steps,
                context: match &context {
                    Some(c) => serde_json::to_value(c).map_err(|e| Error::internal(format!("playbook context: {e}")))?,
                    None => json!({}),
                },
            },
        })
    }
}
