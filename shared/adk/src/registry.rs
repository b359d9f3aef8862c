//! The capability registry as data (SPEC §5.1, §5.3, §7.1): every capability with its
//! minimum plan tier, required scopes, channel, connector need and route destination.
//! Per-tenant tier overrides are applied by the resolver, not here.

use domain::principal::Scope;
use domain::tenant::PlanTier;

/// The MCP channel a capability belongs to (`Api` = capability API only, not an MCP tool).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Memory,
    Session,
    Tool,
    Api,
}

impl Channel {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Session => "session",
            Self::Tool => "tool",
            Self::Api => "api",
        }
    }
}

/// Where a resolved capability is served (SPEC §5.2 step 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// Entity, signal, task and memory lookups in the store.
    StoreIndex,
    /// Memory and KB search.
    VectorIndex,
    /// Another function (governance, the pipeline).
    RemoteFunction,
    /// A rare live pass-through to a connected tool, for an approved write.
    ConnectorProxy,
}

impl RouteKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::StoreIndex => "STORE_INDEX",
            Self::VectorIndex => "VECTOR_INDEX",
            Self::RemoteFunction => "REMOTE_FUNCTION",
            Self::ConnectorProxy => "CONNECTOR_PROXY",
        }
    }
}

/// Whether a capability needs a connected source (SPEC §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectorNeed {
    None,
    /// Data that only connectors produce (signals): at least one connector must exist,
    /// and at least one must have data.
    Any,
    /// The source named by the request's `source` argument.
    Named,
}

/// How a capability uses the tenant's Spine schema (SPEC §5.2 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaUse {
    None,
    /// Reads strip fields outside `priority_fields`.
    Read,
    /// Writes reject unknown fields.
    Write,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapabilitySpec {
    pub name: &'static str,
    pub channel: Channel,
    pub min_tier: PlanTier,
    pub scopes: &'static [Scope],
    pub connector: ConnectorNeed,
    pub route: RouteKind,
    /// What serves the route (a store index, a function name).
    pub target: &'static str,
    pub schema: SchemaUse,
    /// Planning hint: how long a result may be cached; `None` = never (org memory is
    /// always fresh).
    pub cache_ttl_secs: Option<u64>,
    pub read_only: bool,
    pub description: &'static str,
}

use Channel::{Api, Memory, Session, Tool};
use ConnectorNeed as C;
use PlanTier::{Free, Pro, Starter};
use RouteKind::{ConnectorProxy, RemoteFunction, StoreIndex, VectorIndex};
use Scope::{MemoryRead, MemoryWrite, TenantRead, TenantWrite};

const fn cap(
    name: &'static str,
    channel: Channel,
    min_tier: PlanTier,
    scopes: &'static [Scope],
    route: RouteKind,
    target: &'static str,
    description: &'static str,
) -> CapabilitySpec {
    CapabilitySpec {
        name,
        channel,
        min_tier,
        scopes,
        connector: C::None,
        route,
        target,
        schema: SchemaUse::None,
        cache_ttl_secs: None,
        read_only: true,
        description,
    }
}

const fn cached(mut c: CapabilitySpec, ttl: u64) -> CapabilitySpec {
    c.cache_ttl_secs = Some(ttl);
    c
}

const fn writes(mut c: CapabilitySpec) -> CapabilitySpec {
    c.read_only = false;
    c
}

const fn schema(mut c: CapabilitySpec, s: SchemaUse) -> CapabilitySpec {
    c.schema = s;
    c
}

const fn connector(mut c: CapabilitySpec, n: ConnectorNeed) -> CapabilitySpec {
    c.connector = n;
    c
}

/// Every capability. The canonical MCP tools of SPEC §7.1 (twenty, and the four of
/// recall and personal memory: `memory.search`, `memory.remember`,
/// `memory.update_personal`, `memory.forget`); then the ten tools of the `graph`
/// toolset (the reference memory server's nine and `merge_entities`); the `engineering` toolset's; then capabilities of the capability API only.
pub static REGISTRY: &[CapabilitySpec] = &[
    // memory channel
    cap(
        "memory.search_org",
        Memory,
        Pro,
        &[MemoryRead],
        VectorIndex,
        "search.org_memory",
        "Hybrid search over org memory (always fresh).",
    ),
    cap("memory.read_org", Memory, Pro, &[MemoryRead], StoreIndex, "store.memory", "One org memory entry with its lineage."),
    writes(cap(
        "memory.propose",
        Memory,
        Pro,
        &[MemoryWrite],
        RemoteFunction,
        "function.triage",
        "Propose a new or superseding org entry (governed).",
    )),
    cap("memory.read_conversational", Memory, Starter, &[MemoryRead], StoreIndex, "store.turns", "Prior turns of a session."),
    writes(cap(
        "memory.write_conversational",
        Memory,
        Starter,
        &[MemoryWrite],
        StoreIndex,
        "store.turns",
        "Append a turn to a session.",
    )),
    cap("memory.read_personal", Memory, Starter, &[MemoryRead], StoreIndex, "store.memory", "The caller's personal patterns."),
    cap("memory.list_decisions", Memory, Pro, &[MemoryRead], StoreIndex, "store.proposals", "Governance decisions with lineage."),
    cap(
        "memory.search",
        Memory,
        Starter,
        &[MemoryRead],
        VectorIndex,
        "search.memory",
        "Hybrid search over everything the caller can read: turns, personal, team/project/org memory, KB.",
    ),
    writes(cap(
        "memory.remember",
        Memory,
        Starter,
        &[MemoryWrite],
        StoreIndex,
        "store.memory",
        "Remember a personal fact or preference (the caller's own; no governance).",
    )),
    writes(cap(
        "memory.update_personal",
        Memory,
        Starter,
        &[MemoryWrite],
        StoreIndex,
        "store.memory",
        "Change one of the caller's personal memories.",
    )),
    writes(cap(
        "memory.forget",
        Memory,
        Starter,
        &[MemoryWrite],
        StoreIndex,
        "store.memory",
        "Forget one of the caller's personal memories (tombstone).",
    )),
    // session channel
    cached(
        cap(
            "session.get_context",
            Session,
            Starter,
            &[TenantRead],
            StoreIndex,
            "store.entity360",
            "Entity 360 / session continuity.",
        ),
        60,
    ),
    writes(cap(
        "session.summarize",
        Session,
        Starter,
        &[MemoryWrite],
        RemoteFunction,
        "function.triage",
        "Summarize a session into a proposal.",
    )),
    cap(
        "session.list_recent",
        Session,
        Starter,
        &[TenantRead],
        StoreIndex,
        "store.turns",
        "Recent sessions of this user or tenant.",
    ),
    // tool channel
    schema(
        cached(
            cap("spine.entity.get", Tool, Free, &[TenantRead], StoreIndex, "store.entity", "One entity (Entity 360 slice)."),
            120,
        ),
        SchemaUse::Read,
    ),
    schema(
        cached(
            cap(
                "spine.entity.search",
                Tool,
                Free,
                &[TenantRead],
                StoreIndex,
                "store.entity",
                "Find entities by type, trait, relationship.",
            ),
            60,
        ),
        SchemaUse::Read,
    ),
    cached(
        cap(
            "spine.relationship.list",
            Tool,
            Starter,
            &[TenantRead],
            StoreIndex,
            "store.relationship",
            "Graph relations of an entity.",
        ),
        120,
    ),
    connector(
        cached(cap("signal.list", Tool, Starter, &[TenantRead], StoreIndex, "store.signal", "Time-ordered signals."), 60),
        C::Any,
    ),
    connector(cached(cap("signal.get", Tool, Starter, &[TenantRead], StoreIndex, "store.signal", "One signal."), 300), C::Any),
    writes(cap("proposal.create", Tool, Pro, &[TenantWrite], RemoteFunction, "function.triage", "Propose an action (governed).")),
    cap("proposal.status", Tool, Pro, &[TenantRead], StoreIndex, "store.proposals", "A proposal's governance state."),
    cached(cap("book.list", Tool, Starter, &[TenantRead], StoreIndex, "store.book", "Book-of-projects entries."), 120),
    cap("kb.search", Tool, Starter, &[TenantRead], VectorIndex, "search.kb", "Hybrid search over the knowledge base."),
    writes(cap(
        "playbook.handoff",
        Tool,
        Pro,
        &[TenantWrite],
        RemoteFunction,
        "function.playbook",
        "Emit a JSON playbook for the caller to run locally.",
    )),
    // the `graph` toolset (reference memory server tools, offered by name without the
    // `memory.graph_` prefix), over the caller's personal or project scope
    writes(cap(
        "memory.graph_create_entities",
        Memory,
        Starter,
        &[MemoryWrite],
        StoreIndex,
        "store.graph",
        "Create knowledge-graph entities.",
    )),
    writes(cap(
        "memory.graph_create_relations",
        Memory,
        Starter,
        &[MemoryWrite],
        StoreIndex,
        "store.graph",
        "Create knowledge-graph relations.",
    )),
    writes(cap(
        "memory.graph_add_observations",
        Memory,
        Starter,
        &[MemoryWrite],
        StoreIndex,
        "store.graph",
        "Add observations to entities.",
    )),
    writes(cap(
        "memory.graph_delete_entities",
        Memory,
        Starter,
        &[MemoryWrite],
        StoreIndex,
        "store.graph",
        "Delete entities and their relations.",
    )),
    writes(cap(
        "memory.graph_delete_observations",
        Memory,
        Starter,
        &[MemoryWrite],
        StoreIndex,
        "store.graph",
        "Delete observations.",
    )),
    writes(cap("memory.graph_delete_relations", Memory, Starter, &[MemoryWrite], StoreIndex, "store.graph", "Delete relations.")),
    writes(cap(
        "memory.graph_merge_entities",
        Memory,
        Starter,
        &[MemoryWrite],
        StoreIndex,
        "store.graph",
        "Merge duplicate entities into one.",
    )),
    cap("memory.graph_read_graph", Memory, Starter, &[MemoryRead], StoreIndex, "store.graph", "The whole knowledge graph."),
    cap("memory.graph_search_nodes", Memory, Starter, &[MemoryRead], StoreIndex, "store.graph", "Search knowledge-graph nodes."),
    cap(
        "memory.graph_open_nodes",
        Memory,
        Starter,
        &[MemoryRead],
        StoreIndex,
        "store.graph",
        "Open knowledge-graph nodes by name.",
    ),
    // the `engineering` toolset (issue #18): gates an agent reads and requests, and a
    // project's engineering records
    cap(
        "engineering.gate_status",
        Tool,
        Starter,
        &[TenantRead],
        StoreIndex,
        "store.gate",
        "Where gates stand (authorized, blocked, pending).",
    ),
    writes(cap(
        "engineering.gate_request",
        Tool,
        Starter,
        &[MemoryWrite],
        StoreIndex,
        "store.gate",
        "Ask a person to authorize a gated action (pending until decided).",
    )),
    writes(cap(
        "engineering.save",
        Tool,
        Starter,
        &[MemoryWrite],
        StoreIndex,
        "store.engineering",
        "Create or update a project's engineering record.",
    )),
    cap("engineering.list", Tool, Starter, &[MemoryRead], StoreIndex, "store.engineering", "A project's engineering records."),
    cap("engineering.get", Tool, Starter, &[MemoryRead], StoreIndex, "store.engineering", "One engineering record."),
    cap(
        "engineering.find_fix",
        Tool,
        Starter,
        &[MemoryRead],
        VectorIndex,
        "search.engineering",
        "Known fixes for an error, by words and meaning.",
    ),
    cap(
        "engineering.restore_workspace",
        Tool,
        Starter,
        &[MemoryRead],
        StoreIndex,
        "store.engineering",
        "Every record a context workspace names.",
    ),
    // capability API only
    schema(
        cached(
            cap("spine.entity.list", Api, Free, &[TenantRead], StoreIndex, "store.entity", "Entities of one type, paged."),
            60,
        ),
        SchemaUse::Read,
    ),
    schema(
        writes(cap(
            "spine.entity.create",
            Api,
            Starter,
            &[TenantWrite],
            RemoteFunction,
            "function.pipeline",
            "Create an entity through the pipeline writer.",
        )),
        SchemaUse::Write,
    ),
    cached(cap("task.list", Api, Starter, &[TenantRead], StoreIndex, "store.task", "Tasks of the tenant."), 60),
    writes(cap(
        "task.dispatch",
        Api,
        Pro,
        &[TenantWrite],
        RemoteFunction,
        "function.pipeline",
        "Dispatch a task to an assignee.",
    )),
    writes(cap(
        "task.update",
        Api,
        Starter,
        &[TenantRead],
        StoreIndex,
        "store.task",
        "Report progress on a task dispatched to the caller.",
    )),
    connector(
        writes(cap(
            "connector.write",
            Api,
            Pro,
            &[TenantWrite],
            ConnectorProxy,
            "connector.proxy",
            "An approved write passed through to a connected tool.",
        )),
        C::Named,
    ),
];

/// Looks a capability up by exact name.
pub fn find(name: &str) -> Option<&'static CapabilitySpec> {
    REGISTRY.iter().find(|c| c.name == name)
}

/// The canonical MCP tools (every capability not on the `Api` channel and not of the
/// `graph` or `engineering` toolsets).
pub fn mcp_tools() -> impl Iterator<Item = &'static CapabilitySpec> {
    REGISTRY.iter().filter(|c| c.channel != Api && !c.name.starts_with("memory.graph_") && !c.name.starts_with("engineering."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::CapabilityName;

    #[test]
    fn the_registry_is_well_formed() {
        let mut names: Vec<&str> = REGISTRY.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len(), "names are unique");
        assert_eq!(mcp_tools().count(), 24, "the canonical 20 MCP tools and the 4 of recall and personal memory");
        assert_eq!(REGISTRY.iter().filter(|c| c.name.starts_with("memory.graph_")).count(), 10, "the graph toolset");
        assert_eq!(REGISTRY.iter().filter(|c| c.name.starts_with("engineering.")).count(), 7, "the engineering toolset");
        for c in REGISTRY {
            assert!(CapabilityName::parse(c.name).is_ok(), "{} parses", c.name);
            assert!(!c.scopes.is_empty());
            assert_eq!(c.read_only, !matches!(c.schema, SchemaUse::Write) && c.read_only);
        }
        for n in ["spine.entity.list", "spine.entity.create", "task.list", "task.dispatch", "task.update", "connector.write"] {
            assert!(find(n).is_some(), "{n}");
        }
        // Org memory is never cached.
        for n in ["memory.search_org", "memory.read_org"] {
            assert_eq!(find(n).and_then(|c| c.cache_ttl_secs), None);
        }
    }
}
