//! The `graph` toolset: the tools of the reference MCP memory server, with its names and
//! argument shapes (plus an optional `scope`), over a knowledge graph in the caller's
//! personal scope or one of its projects — never the organisation's memory. Each is the
//! capability `memory.graph_{tool}`; [`crate::graph::GraphService`] does the work.

use domain::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::capabilities::typed::{Capability, Context};

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

/// Entities and the relations between them.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct GraphView {
    #[schemars(with = "Vec<Map<String, Value>>")]
    pub entities: Vec<Value>,
    #[schemars(with = "Vec<Map<String, Value>>")]
    pub relations: Vec<Value>,
}

/// Runs graph tool `tool` with `args` (serialized back to the reference shape).
async fn run_graph<A: Serialize>(cx: &Context<'_>, tool: &str, args: &A) -> Result<Value> {
    let args = serde_json::to_value(args).map_err(|e| Error::internal(format!("graph arguments: {e}")))?;
    cx.tools.graph.run(cx.caller, tool, &args).await
}

async fn change<A: Serialize>(cx: &Context<'_>, tool: &str, args: &A) -> Result<GraphChange> {
    Ok(GraphChange { result: run_graph(cx, tool, args).await? })
}

async fn view<A: Serialize>(cx: &Context<'_>, tool: &str, args: &A) -> Result<GraphView> {
    serde_json::from_value(run_graph(cx, tool, args).await?).map_err(|e| Error::internal(format!("graph result: {e}")))
}

/// One graph tool: its argument struct (with the optional `scope`) and capability.
macro_rules! graph_tool {
    (
        $cap:ident, $args:ident, $tool:literal, $title:literal, $description:literal, $output:ty, $via:ident,
        { $($(#[$meta:meta])* $field:ident : $ty:ty),* $(,)? }
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
            const NAME: &'static str = concat!("memory.graph_", $tool);
            const TOOL: &'static str = $tool;
            const TITLE: &'static str = $title;
            const DESCRIPTION: &'static str = $description;
            type Args = $args;
            type Output = $output;

            async fn run<'a>(cx: &'a Context<'a>, args: $args) -> Result<$output> {
                $via(cx, $tool, &args).await
            }
        }
    };
}

graph_tool!(CreateEntities, CreateEntitiesArgs, "create_entities", "Create entities",
    "Create multiple new entities in the knowledge graph", GraphChange, change,
    { entities: Vec<GraphEntityArg> });
graph_tool!(CreateRelations, CreateRelationsArgs, "create_relations", "Create relations",
    "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice",
    GraphChange, change, { relations: Vec<GraphRelationArg> });
graph_tool!(AddObservations, AddObservationsArgs, "add_observations", "Add observations",
    "Add new observations to existing entities in the knowledge graph", GraphChange, change,
    { observations: Vec<ObservationsArg> });
graph_tool!(DeleteEntities, DeleteEntitiesArgs, "delete_entities", "Delete entities",
    "Delete multiple entities and their associated relations from the knowledge graph", GraphChange, change,
    { #[schemars(description = "An array of entity names to delete")] entity_names: Vec<String> });
graph_tool!(DeleteObservations, DeleteObservationsArgs, "delete_observations", "Delete observations",
    "Delete specific observations from entities in the knowledge graph", GraphChange, change,
    { deletions: Vec<DeletionArg> });
graph_tool!(DeleteRelations, DeleteRelationsArgs, "delete_relations", "Delete relations",
    "Delete multiple relations from the knowledge graph", GraphChange, change,
    { #[schemars(description = "An array of relations to delete")] relations: Vec<GraphRelationArg> });
graph_tool!(ReadGraph, ReadGraphArgs, "read_graph", "Read the graph", "Read the entire knowledge graph", GraphView, view, {});
graph_tool!(SearchNodes, SearchNodesArgs, "search_nodes", "Search nodes",
    "Search for nodes in the knowledge graph based on a query", GraphView, view,
    { #[schemars(description = "The search query to match against entity names, types, and observation content")] query: String });
graph_tool!(OpenNodes, OpenNodesArgs, "open_nodes", "Open nodes",
    "Open specific nodes in the knowledge graph by their names", GraphView, view,
    { #[schemars(description = "An array of entity names to retrieve")] names: Vec<String> });
