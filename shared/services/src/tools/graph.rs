//! The `graph` toolset: the tools of the reference MCP memory server, with its names and
//! argument shapes (plus an optional `scope`), over a knowledge graph in the caller's
//! personal scope or one of its projects — never the organisation's memory. Each is the
//! capability `memory.graph_{tool}`; [`crate::graph::GraphService`] does the work.

use std::collections::HashMap;
use std::sync::Arc;

use domain::graph::{GraphEntity, GraphRelation};
use domain::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::capabilities::policy::*;
use crate::capabilities::typed::{Capability, Context};
use crate::graph::{Node, Subgraph};

/// An entity to create.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GraphEntityArg {
    #[schemars(description = "The name of the entity")]
    pub name: String,
    #[schemars(description = "The type of the entity")]
    pub entity_type: String,
    #[schemars(description = "An array of observation contents associated with the entity")]
    pub observations: Vec<String>,
}

/// A relation between two entities.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GraphRelationArg {
    #[schemars(description = "The name of the entity where the relation starts")]
    pub from: String,
    #[schemars(description = "The name of the entity where the relation ends")]
    pub to: String,
    #[schemars(description = "The type of the relation")]
    pub relation_type: String,
}

/// Observations to add to one entity.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObservationsArg {
    #[schemars(description = "The name of the entity to add the observations to")]
    pub entity_name: String,
    #[schemars(description = "An array of observation contents to add")]
    pub contents: Vec<String>,
}

/// Observations to delete from one entity.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeletionArg {
    #[schemars(description = "The name of the entity containing the observations")]
    pub entity_name: String,
    #[schemars(description = "An array of observations to delete")]
    pub observations: Vec<String>,
}

/// A change's result: what was created or changed, or a message.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GraphChange {
    pub result: Value,
}

/// Entities and the relations touching them.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GraphView {
    #[schemars(with = "Vec<Map<String, Value>>")]
    pub entities: Vec<Arc<Node>>,
    #[schemars(with = "Vec<Map<String, Value>>")]
    pub relations: Vec<GraphRelation>,
    /// Set when `limit` or `maxTokens` cut the answer short: pass it as `cursor` for the rest.
    #[serde(rename = "nextCursor", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "string"))]
    pub next_cursor: Option<String>,
}

/// The paging arguments of the three read tools (absent: the whole answer, as the
/// reference server gives it).
#[derive(Debug, Default)]
struct Paging {
    offset: usize,
    limit: Option<usize>,
    max_tokens: Option<usize>,
}

/// The most entities one page may hold, and the smallest token budget.
pub const MAX_PAGE: u32 = 1000;
pub const MIN_TOKENS: u32 = 100;
/// The largest token budget a read may ask for.
pub const MAX_TOKENS: u32 = 1_000_000;

impl Paging {
    /// The paging a read tool's `limit`, `cursor` and `maxTokens` ask for (their ranges
    /// are the schema's, checked before the handler runs).
    fn new(limit: Option<u32>, cursor: Option<&str>, max_tokens: Option<u32>) -> Result<Self> {
        let offset = match cursor {
            None => 0,
            Some(c) => c
                .strip_prefix("graph:")
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| Error::invalid_field("cursor", "not a cursor this tool returned (pass nextCursor as it came)"))?,
        };
        Ok(Self { offset, limit: limit.map(|n| n as usize), max_tokens: max_tokens.map(|n| n as usize) })
    }

    /// One page of `view`: its entities from the offset, as many as `limit` allows and
    /// the token budget holds (roughly four bytes of JSON a token; always at least one,
    /// so paging moves on), each with the relations that start from it — so a relation
    /// of the answer appears on exactly one page.
    fn page(&self, whole: Subgraph) -> GraphView {
        if self.limit.is_none() && self.max_tokens.is_none() && self.offset == 0 {
            return GraphView { entities: whole.entities, relations: whole.relations, next_cursor: None };
        }
        // Each relation belongs to the first entity of the answer it touches.
        let position: HashMap<&str, usize> = whole.entities.iter().enumerate().map(|(i, e)| (e.name.as_str(), i)).collect();
        let mut owned: Vec<Vec<&GraphRelation>> = vec![Vec::new(); whole.entities.len()];
        for r in &whole.relations {
            let owner = [position.get(r.from.as_str()), position.get(r.to.as_str())].into_iter().flatten().min();
            if let Some(&i) = owner {
                owned[i].push(r);
            }
        }
        let cost = |len: usize| len.div_ceil(4);
        let total = whole.entities.len();
        let mut entities = Vec::new();
        let mut relations = Vec::new();
        let mut spent = 0;
        for (i, entity) in whole.entities.iter().enumerate().skip(self.offset) {
            if self.limit.is_some_and(|l| entities.len() >= l) {
                break;
            }
            let own = &owned[i];
            let price =
                cost(entity.json().len()) + own.iter().map(|r| cost(serde_json::to_vec(r).map_or(0, |v| v.len()))).sum::<usize>();
            if self.max_tokens.is_some_and(|m| spent + price > m) && !entities.is_empty() {
                break;
            }
            spent += price;
            entities.push(entity.clone());
            relations.extend(own.iter().map(|r| (*r).clone()));
        }
        let next = self.offset + entities.len();
        GraphView { entities, relations, next_cursor: (next < total).then(|| format!("graph:{next}")) }
    }
}

impl From<GraphEntityArg> for GraphEntity {
    fn from(a: GraphEntityArg) -> Self {
        Self { name: a.name, entity_type: a.entity_type, observations: a.observations }
    }
}

impl From<GraphRelationArg> for GraphRelation {
    fn from(a: GraphRelationArg) -> Self {
        Self { from: a.from, to: a.to, relation_type: a.relation_type }
    }
}

fn relations(args: Vec<GraphRelationArg>) -> Vec<GraphRelation> {
    args.into_iter().map(GraphRelation::from).collect()
}

/// A change's result as the reference server gives it.
fn changed<T: Serialize>(result: &T) -> Result<GraphChange> {
    serde_json::to_value(result).map(|result| GraphChange { result }).map_err(|e| Error::internal(format!("graph result: {e}")))
}

/// A change whose result is the reference server's message.
fn said(message: &str) -> GraphChange {
    GraphChange { result: Value::String(message.to_owned()) }
}

/// Whether a graph tool with this result writes: a change does, a view does not.
trait GraphOutput {
    const WRITES: bool;
}

impl GraphOutput for GraphChange {
    const WRITES: bool = true;
}

impl GraphOutput for GraphView {
    const WRITES: bool = false;
}

/// A graph tool's policy: the starter plan, `memory:write` for a change and
/// `memory:read` for a view, over the store's graph, in the `graph` toolset.
const fn graph_spec(name: &'static str, writes: bool) -> CapabilitySpec {
    if writes {
        CapabilitySpec::new(name, Channel::Memory, PlanTier::Starter, &[Scope::MemoryWrite], RouteKind::StoreIndex, "store.graph")
            .writes()
            .toolset(Toolset::Graph)
    } else {
        CapabilitySpec::new(name, Channel::Memory, PlanTier::Starter, &[Scope::MemoryRead], RouteKind::StoreIndex, "store.graph")
            .toolset(Toolset::Graph)
    }
}

/// One graph tool: its argument struct (with the optional `scope`) and capability.
macro_rules! graph_tool {
    (
        $cap:ident, $args:ident, $tool:literal, $title:literal, $description:literal, $output:ty,
        { $($(#[$meta:meta])* $field:ident : $ty:ty),* $(,)? },
        |$cx:ident, $a:ident| $body:expr
    ) => {
        #[derive(Debug, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        pub struct $args {
            $($(#[$meta])* pub $field: $ty,)*
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schemars(description = "Which graph: \"personal\" (default, yours alone) or \"project:<id>\" for one of your projects. Never the organisation's memory.")]
            pub scope: Option<String>,
        }

        pub struct $cap;

        impl Capability for $cap {
            const SPEC: CapabilitySpec = graph_spec(concat!("memory.graph_", $tool), <$output as GraphOutput>::WRITES);
            const TOOL: $crate::capabilities::typed::ToolName = $crate::capabilities::typed::ToolName::of($tool);
            const TITLE: &'static str = $title;
            const DESCRIPTION: &'static str = $description;
            type Args = $args;
            type Output = $output;

            async fn run<'a>($cx: &'a Context<'a>, $a: $args) -> Result<$output> {
                $body
            }
        }
    };
}

graph_tool!(CreateEntities, CreateEntitiesArgs, "create_entities", "Create entities",
    "Create multiple new entities in the knowledge graph", GraphChange,
    { entities: Vec<GraphEntityArg> },
    |cx, a| changed(&cx.tools.graph.create_entities(cx.caller, a.scope.as_deref(), a.entities.into_iter().map(GraphEntity::from).collect()).await?));
graph_tool!(CreateRelations, CreateRelationsArgs, "create_relations", "Create relations",
    "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice",
    GraphChange, { relations: Vec<GraphRelationArg> },
    |cx, a| changed(&cx.tools.graph.create_relations(cx.caller, a.scope.as_deref(), relations(a.relations)).await?));
graph_tool!(AddObservations, AddObservationsArgs, "add_observations", "Add observations",
    "Add new observations to existing entities in the knowledge graph", GraphChange,
    { observations: Vec<ObservationsArg> },
    |cx, a| changed(&cx.tools.graph.add_observations(cx.caller, a.scope.as_deref(), a.observations.into_iter().map(|o| (o.entity_name, o.contents)).collect()).await?));
graph_tool!(DeleteEntities, DeleteEntitiesArgs, "delete_entities", "Delete entities",
    "Delete multiple entities and their associated relations from the knowledge graph", GraphChange,
    { #[schemars(description = "An array of entity names to delete")] entity_names: Vec<String> },
    |cx, a| { cx.tools.graph.delete_entities(cx.caller, a.scope.as_deref(), a.entity_names).await?; Ok(said("Entities deleted successfully")) });
graph_tool!(DeleteObservations, DeleteObservationsArgs, "delete_observations", "Delete observations",
    "Delete specific observations from entities in the knowledge graph", GraphChange,
    { deletions: Vec<DeletionArg> },
    |cx, a| { cx.tools.graph.delete_observations(cx.caller, a.scope.as_deref(), a.deletions.into_iter().map(|d| (d.entity_name, d.observations)).collect()).await?; Ok(said("Observations deleted successfully")) });
graph_tool!(DeleteRelations, DeleteRelationsArgs, "delete_relations", "Delete relations",
    "Delete multiple relations from the knowledge graph", GraphChange,
    { #[schemars(description = "An array of relations to delete")] relations: Vec<GraphRelationArg> },
    |cx, a| { cx.tools.graph.delete_relations(cx.caller, a.scope.as_deref(), relations(a.relations)).await?; Ok(said("Relations deleted successfully")) });
graph_tool!(MergeEntities, MergeEntitiesArgs, "merge_entities", "Merge entities",
    "Merge duplicate entities into one (e.g. \"Bob\" and \"Robert Smith\" into \"Robert Smith\"): their observations are added to the target, their relations re-pointed to it, and the duplicates deleted. The target is created with the first duplicate's type if it does not exist.",
    GraphChange,
    { #[schemars(length(min = 1, max = 100), description = "The duplicate entities' names")] source_names: Vec<String>,
      #[schemars(description = "The entity they become (existing or new)")] target_name: String },
    |cx, a| changed(&cx.tools.graph.merge_entities(cx.caller, a.scope.as_deref(), a.source_names, &a.target_name).await?));
graph_tool!(ReadGraph, ReadGraphArgs, "read_graph", "Read the graph", "Read the entire knowledge graph", GraphView,
    { #[serde(skip_serializing_if = "Option::is_none")] #[schemars(range(min = 1, max = MAX_PAGE), description = "At most this many entities (default: all); follow nextCursor for the rest.")] limit: Option<u32>,
      #[serde(skip_serializing_if = "Option::is_none")] #[schemars(description = "The nextCursor of the previous answer.")] cursor: Option<String>,
      #[serde(skip_serializing_if = "Option::is_none")] #[schemars(range(min = MIN_TOKENS, max = MAX_TOKENS), description = "Stop before the answer exceeds about this many tokens (default: no limit); follow nextCursor for the rest.")] max_tokens: Option<u32> },
    |cx, a| { let paging = Paging::new(a.limit, a.cursor.as_deref(), a.max_tokens)?; Ok(paging.page(cx.tools.graph.read_graph(cx.caller, a.scope.as_deref()).await?)) });
graph_tool!(SearchNodes, SearchNodesArgs, "search_nodes", "Search nodes",
    "Search for nodes in the knowledge graph based on a query", GraphView,
    { #[schemars(description = "The search query to match against entity names, types, and observation content")] query: String,
      #[serde(skip_serializing_if = "Option::is_none")] #[schemars(range(min = 1, max = MAX_PAGE), description = "At most this many entities (default: all); follow nextCursor for the rest.")] limit: Option<u32>,
      #[serde(skip_serializing_if = "Option::is_none")] #[schemars(description = "The nextCursor of the previous answer.")] cursor: Option<String>,
      #[serde(skip_serializing_if = "Option::is_none")] #[schemars(range(min = MIN_TOKENS, max = MAX_TOKENS), description = "Stop before the answer exceeds about this many tokens (default: no limit); follow nextCursor for the rest.")] max_tokens: Option<u32> },
    |cx, a| { let paging = Paging::new(a.limit, a.cursor.as_deref(), a.max_tokens)?; Ok(paging.page(cx.tools.graph.search_nodes(cx.caller, a.scope.as_deref(), &a.query).await?)) });
graph_tool!(OpenNodes, OpenNodesArgs, "open_nodes", "Open nodes",
    "Open specific nodes in the knowledge graph by their names", GraphView,
    { #[schemars(description = "An array of entity names to retrieve")] names: Vec<String>,
      #[serde(skip_serializing_if = "Option::is_none")] #[schemars(range(min = 1, max = MAX_PAGE), description = "At most this many entities (default: all); follow nextCursor for the rest.")] limit: Option<u32>,
      #[serde(skip_serializing_if = "Option::is_none")] #[schemars(description = "The nextCursor of the previous answer.")] cursor: Option<String>,
      #[serde(skip_serializing_if = "Option::is_none")] #[schemars(range(min = MIN_TOKENS, max = MAX_TOKENS), description = "Stop before the answer exceeds about this many tokens (default: no limit); follow nextCursor for the rest.")] max_tokens: Option<u32> },
    |cx, a| { let paging = Paging::new(a.limit, a.cursor.as_deref(), a.max_tokens)?; Ok(paging.page(cx.tools.graph.open_nodes(cx.caller, a.scope.as_deref(), &a.names).await?)) });
