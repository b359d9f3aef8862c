//! The Spine read by agents: entities (one, found by words, or listed page by page),
//! their relationships and their signals — only the fields of each type the tenant's
//! schema makes visible.

use domain::{EntityType, Error, Id, PageRequest, Result};
use ports::records::{Direction, RelationshipStore, SignalStore};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{EntityArg, EntityView, IdArgs, MAX_SCAN, RelationshipView, SignalView, page_of};
use crate::capabilities::policy::*;
use crate::capabilities::typed::{Capability, Context, Required};
use crate::entities::SearchQuery;

// ---- spine.entity.get -----------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntityGetArgs {
    #[serde(rename = "type")]
    #[schemars(
        regex(pattern = r"^[a-z][a-z0-9_]{0,63}$"),
        description = "Canonical entity type in snake_case, e.g. \"account\"."
    )]
    pub entity_type: String,
    #[schemars(length(min = 1, max = 128), description = "The entity's id within its type.")]
    pub id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct EntityGetOutput {
    pub entity: EntityView,
}

pub struct EntityGet;

impl Capability for EntityGet {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "spine.entity.get",
        Channel::Tool,
        PlanTier::Free,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.entity",
    )
    .cached(120)
    .schema(SchemaUse::Read);
    const TITLE: &'static str = "Get an entity";
    const DESCRIPTION: &'static str = "Fetch one business entity (an account, contact, deal, ticket, patient…) from the tenant's Spine by its canonical type and id. Returns the entity's traits as normalized truth — prefer this over asking the user or guessing. Use spine_entity_search first when you only know a name.";
    type Args = EntityGetArgs;
    type Output = EntityGetOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: EntityGetArgs) -> Result<EntityGetOutput> {
        let e = cx.tools.entities.get(cx.caller, &EntityType::new(a.entity_type)?, &Id::new(a.id)?).await?;
        let entity =
            EntityView::of(&e, cx.tools.schema).ok_or_else(|| Error::not_found(format!("{} {}", e.entity_type, e.id)))?;
        Ok(EntityGetOutput { entity })
    }
}

// ---- spine.entity.search --------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntitySearchArgs {
    // Optional on the wire for the capability API (no words: every entity, best first);
    // MCP clients are told to give it.
    #[schemars(
        with = "String",
        length(max = super::MAX_QUERY_LEN),
        description = "Words that must all appear in the entity (name, id, any trait). Exact ids rank first."
    )]
    pub query: Option<String>,
    #[serde(rename = "type")]
    #[schemars(regex(pattern = r"^[a-z][a-z0-9_]{0,63}$"), description = "Only entities of this canonical type.")]
    pub entity_type: Option<String>,
    #[serde(default = "super::default_limit::<20>")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct EntitySearchOutput {
    pub entities: Vec<EntityView>,
    pub count: usize,
    #[schemars(description = "True when the search stopped scanning before the end of the tenant's entities.")]
    pub truncated: bool,
}

pub struct EntitySearch;

impl Capability for EntitySearch {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "spine.entity.search",
        Channel::Tool,
        PlanTier::Free,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.entity",
    )
    .cached(60)
    .schema(SchemaUse::Read);
    const TITLE: &'static str = "Search entities";
    const DESCRIPTION: &'static str = "Find business entities in the tenant's Spine by words in their name, id or traits, optionally of one canonical type. Every word must match. Returns up to `limit` entities, best first; use spine_entity_get for one entity's full record.";
    type Args = EntitySearchArgs;
    type Output = EntitySearchOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: EntitySearchArgs) -> Result<EntitySearchOutput> {
        let entity_type = a.entity_type.map(EntityType::new).transpose()?;
        let q = SearchQuery { text: a.query.unwrap_or_default(), entity_type, limit: Some(a.limit) };
        let res = cx.tools.entities.search(cx.caller, &q).await?;
        // Entities of types outside this tenant's schema are not visible at all.
        let entities: Vec<EntityView> = res.entities.iter().filter_map(|e| EntityView::of(e, cx.tools.schema)).collect();
        Ok(EntitySearchOutput { count: entities.len(), entities, truncated: res.truncated })
    }
}

// ---- spine.entity.list (capability API) -----------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntityListArgs {
    #[serde(rename = "type")]
    #[schemars(regex(pattern = r"^[a-z][a-z0-9_]{0,63}$"), description = "Only entities of this canonical type.")]
    pub entity_type: Option<String>,
    #[serde(default = "super::default_limit::<50>")]
    #[schemars(range(min = 1, max = 200))]
    pub limit: u32,
    #[schemars(description = "The `next_cursor` of the previous page.")]
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct EntityListOutput {
    pub entities: Vec<EntityView>,
    pub count: usize,
    #[schemars(description = "Pass as `cursor` to get the next page; null at the end.")]
    pub next_cursor: Option<String>,
}

pub struct EntityList;

impl Capability for EntityList {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "spine.entity.list",
        Channel::Api,
        PlanTier::Free,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.entity",
    )
    .cached(60)
    .schema(SchemaUse::Read);
    const TITLE: &'static str = "List entities";
    const DESCRIPTION: &'static str = "List the tenant's entities (of one canonical type, or all) page by page, in key order.";
    type Args = EntityListArgs;
    type Output = EntityListOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: EntityListArgs) -> Result<EntityListOutput> {
        let entity_type = a.entity_type.map(EntityType::new).transpose()?;
        let size = a.limit;
        let page = match a.cursor {
            Some(c) if c.len() <= 1024 => PageRequest::after(size, c),
            Some(_) => return Err(Error::invalid_field("cursor", "not a cursor this API returned")),
            None => PageRequest::first(size),
        };
        let p = cx.tools.entities.list(cx.caller, entity_type.as_ref(), &page).await?;
        let entities: Vec<EntityView> = p.items.iter().filter_map(|e| EntityView::of(e, cx.tools.schema)).collect();
        Ok(EntityListOutput { count: entities.len(), entities, next_cursor: p.next_cursor })
    }
}

// ---- spine.relationship.list ----------------------------------------------------------

/// Which relationships of an entity.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DirectionArg {
    Out,
    In,
    #[default]
    Both,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelationshipListArgs {
    #[serde(rename = "type")]
    #[schemars(regex(pattern = r"^[a-z][a-z0-9_]{0,63}$"))]
    pub entity_type: String,
    #[schemars(length(min = 1, max = 128))]
    pub id: String,
    #[schemars(extend("default" = "both"))]
    pub direction: Option<DirectionArg>,
    #[schemars(description = "Only relationships of this kind, e.g. \"works_at\".")]
    pub kind: Option<String>,
    #[serde(default = "super::default_limit::<50>")]
    #[schemars(range(min = 1, max = 500))]
    pub limit: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RelationshipListOutput {
    /// The entity the relationships are of (`type id`), for the text rendering.
    #[serde(skip)]
    #[schemars(skip)]
    pub of: String,
    pub relationships: Vec<RelationshipView>,
}

pub struct RelationshipList;

impl Capability for RelationshipList {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "spine.relationship.list",
        Channel::Tool,
        PlanTier::Starter,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.relationship",
    )
    .cached(120);
    const TITLE: &'static str = "List relationships";
    const DESCRIPTION: &'static str = "List the graph relationships of an entity (who works where, which account owns which deal…), outgoing, incoming or both, optionally of one kind.";
    type Args = RelationshipListArgs;
    type Output = RelationshipListOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: RelationshipListArgs) -> Result<RelationshipListOutput> {
        let caller = cx.caller;
        let r = EntityArg { entity_type: a.entity_type, id: a.id }.to_ref()?;
        let kind = a.kind.map(EntityType::new).transpose()?;
        let size = a.limit;
        let records = &cx.tools.backend.records;
        let dirs: &[Direction] = match a.direction.unwrap_or_default() {
            DirectionArg::Both => &[Direction::Outgoing, Direction::Incoming],
            DirectionArg::Out => &[Direction::Outgoing],
            DirectionArg::In => &[Direction::Incoming],
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
        Ok(RelationshipListOutput { of: r.to_string(), relationships: rels.iter().map(RelationshipView::from).collect() })
    }
}

// ---- signal.list ----------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalListArgs {
    pub entity: Option<EntityArg>,
    #[serde(default = "super::default_limit::<20>")]
    #[schemars(range(min = 1, max = 200))]
    pub limit: u32,
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["signals", "next_cursor"]))]
pub struct SignalListOutput {
    pub signals: Vec<SignalView>,
    #[schemars(description = "Pass as `cursor` to get the next page; null at the end.")]
    pub next_cursor: Option<String>,
}

pub struct SignalList;

impl Capability for SignalList {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "signal.list",
        Channel::Tool,
        PlanTier::Starter,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.signal",
    )
    .cached(60)
    .connector(ConnectorNeed::Any);
    const TITLE: &'static str = "List signals";
    const DESCRIPTION: &'static str = "List time-ordered signals — state changes such as a deal stage moving or an account's health dropping — newest first, for the tenant or one entity.";
    type Args = SignalListArgs;
    type Output = SignalListOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: SignalListArgs) -> Result<SignalListOutput> {
        let r = a.entity.as_ref().map(EntityArg::to_ref).transpose()?;
        let page = page_of(a.limit, a.cursor);
        let p = cx.tools.backend.records.list_signals(&cx.caller.tenant, r.as_ref(), &page).await?;
        Ok(SignalListOutput { signals: p.items.iter().map(SignalView::from).collect(), next_cursor: p.next_cursor })
    }
}

// ---- signal.get -----------------------------------------------------------------------

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["signal"]))]
pub struct SignalGetOutput {
    pub signal: SignalView,
}

pub struct SignalGet;

impl Capability for SignalGet {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "signal.get",
        Channel::Tool,
        PlanTier::Starter,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.signal",
    )
    .cached(300)
    .connector(ConnectorNeed::Any);
    const TITLE: &'static str = "Get a signal";
    const DESCRIPTION: &'static str = "Fetch one signal by id, with its before and after values.";
    type Args = IdArgs;
    type Output = SignalGetOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: IdArgs) -> Result<SignalGetOutput> {
        let id = Id::new(a.id)?;
        let s = cx
            .tools
            .backend
            .records
            .get_signal(&cx.caller.tenant, &id)
            .await?
            .ok_or_else(|| Error::not_found(format!("signal {id}")))?;
        Ok(SignalGetOutput { signal: (&s).into() })
    }
}
