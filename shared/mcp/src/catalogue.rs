//! How the served tools present themselves to a model: titles, descriptions, input and
//! output schemas. Who may call what (plan tier, scopes, connectors) is the ADK's
//! registry, not this file.

use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub read_only: bool,
    pub input_schema: fn() -> Value,
    pub output_schema: fn() -> Value,
}

fn entity_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "type": {"type": "string", "description": "Canonical entity type, e.g. account, contact, patient."},
            "id": {"type": "string"},
            "pole_class": {"type": "string", "enum": ["person", "object", "location", "event", "organization"]},
            "attributes": {"type": "object", "description": "The entity's traits: only the fields of its type that the tenant's schema makes visible."},
            "updated_at": {"type": "string", "format": "date-time"},
            "version": {"type": "integer"}
        },
        "required": ["type", "id", "pole_class", "attributes", "updated_at", "version"]
    })
}

fn entity_get_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "type": {"type": "string", "description": "Canonical entity type in snake_case, e.g. \"account\".", "pattern": "^[a-z][a-z0-9_]{0,63}$"},
            "id": {"type": "string", "description": "The entity's id within its type.", "minLength": 1, "maxLength": 128}
        },
        "required": ["type", "id"],
        "additionalProperties": false
    })
}

fn entity_get_output() -> Value {
    json!({"type": "object", "properties": {"entity": entity_schema()}, "required": ["entity"]})
}

fn entity_search_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words that must all appear in the entity (name, id, any trait). Exact ids rank first.", "maxLength": 512},
            "type": {"type": "string", "description": "Only entities of this canonical type.", "pattern": "^[a-z][a-z0-9_]{0,63}$"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

fn entity_search_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "entities": {"type": "array", "items": entity_schema()},
            "count": {"type": "integer"},
            "truncated": {"type": "boolean", "description": "True when the search stopped scanning before the end of the tenant's entities."}
        },
        "required": ["entities", "count", "truncated"]
    })
}

fn obj(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

fn out(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

fn nullable(t: &str) -> Value {
    json!({"type": [t, "null"]})
}

fn entity_ref() -> Value {
    obj(
        json!({
            "type": {"type": "string", "description": "Canonical entity type, e.g. \"account\".", "pattern": "^[a-z][a-z0-9_]{0,63}$"},
            "id": {"type": "string", "minLength": 1, "maxLength": 128}
        }),
        &["type", "id"],
    )
}

fn limit(default: u32, max: u32) -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": max, "default": default})
}

fn session_arg() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 100, "description": "A session name of your choosing (e.g. \"2026-11-29-onboarding\"); sessions are private to the caller."})
}

fn memory_entry() -> Value {
    out(
        json!({
            "id": {"type": "string"}, "kind": {"type": "string"}, "title": {"type": "string"}, "body": {"type": "string"},
            "scope": {"type": "string"}, "state": {"type": "string", "enum": ["active", "superseded", "rejected"]},
            "superseded_by": {"type": "string"}, "rejection_reason": {"type": "string"},
            "created_by": {"type": "string"}, "created_at": {"type": "string"}, "updated_at": {"type": "string"},
            "lineage": out(json!({
                "proposal": nullable("string"), "supersedes": nullable("string"),
                "source_turns": {"type": "array", "items": {"type": "string"}}
            }), &["proposal", "supersedes", "source_turns"])
        }),
        &["id", "kind", "title", "body", "scope", "state", "lineage"],
    )
}

fn proposal() -> Value {
    out(
        json!({
            "id": {"type": "string"}, "kind": {"type": "string"}, "title": {"type": "string"},
            "body": {"type": ["string", "null"], "description": "Null without the memory:read scope. Personal data is masked; secrets were never stored."},
            "state": {"type": "string", "enum": ["pending", "scored", "auto_approved", "awaiting_approval", "approved", "rejected", "written", "failed", "expired"]},
            "supersedes": nullable("string"), "score": nullable("object"), "decision_reason": nullable("string"),
            "redacted": {"type": "array", "description": "Secrets found and redacted when it was proposed: kind, field, character position, fingerprint (never the value).",
                "items": out(json!({"kind": {"type": "string"}, "field": {"type": "string"}, "at": {"type": "integer"}, "fingerprint": {"type": "string"}}), &["kind", "field", "at"])},
            "proposed_by": {"type": "string"}, "source_session": nullable("string"),
            "created_at": {"type": "string"}, "updated_at": {"type": "string"}
        }),
        &["id", "kind", "title", "state"],
    )
}

fn turn() -> Value {
    out(
        json!({"seq": {"type": "integer"}, "role": {"type": "string", "enum": ["user", "assistant", "system"]}, "content": {"type": "string"}, "at": {"type": "string"}}),
        &["seq", "role", "content", "at"],
    )
}

fn relationship() -> Value {
    out(
        json!({"from": {"type": "object"}, "to": {"type": "object"}, "kind": {"type": "string"}, "valid_from": {"type": "string"}, "valid_to": nullable("string")}),
        &["from", "to", "kind"],
    )
}

fn signal() -> Value {
    out(
        json!({"id": {"type": "string"}, "entity": {"type": "object"}, "kind": {"type": "string"}, "at": {"type": "string"}, "before": {}, "after": {}}),
        &["id", "entity", "kind", "at"],
    )
}

fn next_cursor() -> Value {
    json!({"type": ["string", "null"], "description": "Pass as `cursor` to get the next page; null at the end."})
}

fn org_kind() -> Value {
    json!({"type": "string", "enum": ["decision", "pattern", "commitment", "learning"]})
}

fn search_org_input() -> Value {
    obj(
        json!({"query": {"type": "string", "minLength": 1, "maxLength": 512, "description": "What you are looking for, in words or as an exact identifier (ticket key, function name); hybrid keyword + semantic search, exact identifiers first."}, "kind": org_kind(), "limit": limit(10, 50)}),
        &["query"],
    )
}
fn search_org_output() -> Value {
    out(
        json!({"entries": {"type": "array", "items": memory_entry()}, "count": {"type": "integer"}, "truncated": {"type": "boolean"}, "search": {"type": "string", "description": "hybrid, or keyword-scan when no search index is configured"}}),
        &["entries", "count", "truncated"],
    )
}
fn read_org_input() -> Value {
    obj(json!({"id": {"type": "string", "minLength": 1, "maxLength": 128}}), &["id"])
}
fn read_org_output() -> Value {
    out(
        json!({"entry": memory_entry(), "verification": {"type": ["object", "null"], "description": "The entry's readback verification: verified, confidence, fresh_at, the POLE+O entities extracted from it and the similar entries it is linked to (related)."}}),
        &["entry"],
    )
}
fn propose_input() -> Value {
    obj(
        json!({
            "title": {"type": "string", "minLength": 1, "maxLength": 200},
            "body": {"type": "string", "minLength": 1, "maxLength": 16384, "description": "The knowledge itself, specific and self-contained, with its evidence."},
            "kind": org_kind(),
            "supersedes": {"type": "string", "description": "Id of the active org entry this one replaces, if any."},
            "session": session_arg()
        }),
        &["title", "body", "kind"],
    )
}
fn proposal_output() -> Value {
    out(json!({"proposal": proposal()}), &["proposal"])
}
fn read_conversational_input() -> Value {
    obj(json!({"session": session_arg(), "after_seq": {"type": "integer", "minimum": 0}, "limit": limit(50, 500)}), &["session"])
}
fn read_conversational_output() -> Value {
    out(
        json!({"session": {"type": "string"}, "turns": {"type": "array", "items": turn()}, "more": {"type": "boolean"}}),
        &["session", "turns", "more"],
    )
}
fn write_conversational_input() -> Value {
    obj(
        json!({"session": session_arg(), "role": {"type": "string", "enum": ["user", "assistant", "system"]}, "content": {"type": "string", "minLength": 1, "maxLength": 65536}}),
        &["session", "role", "content"],
    )
}
fn write_conversational_output() -> Value {
    out(json!({"session": {"type": "string"}, "seq": {"type": "integer"}, "at": {"type": "string"}}), &["session", "seq", "at"])
}
fn read_personal_input() -> Value {
    obj(
        json!({"kind": {"type": "string", "enum": ["preference", "behavior", "context", "decision"]}, "limit": limit(50, 500)}),
        &[],
    )
}
fn read_personal_output() -> Value {
    out(json!({"patterns": {"type": "array", "items": memory_entry()}, "count": {"type": "integer"}}), &["patterns", "count"])
}
fn list_decisions_input() -> Value {
    obj(
        json!({"state": {"type": "string", "enum": ["pending", "scored", "auto_approved", "awaiting_approval", "approved", "rejected", "written", "failed"]}, "limit": limit(20, 100), "cursor": {"type": "string"}}),
        &[],
    )
}
fn list_decisions_output() -> Value {
    out(json!({"decisions": {"type": "array", "items": proposal()}, "next_cursor": next_cursor()}), &["decisions", "next_cursor"])
}
fn get_context_input() -> Value {
    obj(
        json!({"entity": entity_ref(), "session": session_arg(), "query": {"type": "string", "maxLength": 512, "description": "Words to find relevant org memory."}}),
        &[],
    )
}
fn get_context_output() -> Value {
    out(
        json!({
            "entity": entity_schema(),
            "relationships": {"type": "array", "items": relationship()},
            "signals": {"type": "array", "items": signal()},
            "session": {"type": "object"},
            "memory": {"type": ["array", "null"], "items": memory_entry(), "description": "Null without the memory:read scope."}
        }),
        &["memory"],
    )
}
fn summarize_input() -> Value {
    obj(json!({"session": session_arg(), "title": {"type": "string", "minLength": 1, "maxLength": 200}}), &["session"])
}
fn list_recent_input() -> Value {
    obj(json!({"limit": limit(10, 100)}), &[])
}
fn list_recent_output() -> Value {
    out(
        json!({"sessions": {"type": "array", "items": out(json!({"session": {"type": "string"}, "turns": {"type": "integer"}, "title": {"type": ["string", "null"], "description": "Null without the memory:read scope."}, "first_at": {"type": "string"}, "last_at": {"type": "string"}}), &["session", "turns", "last_at"])}}),
        &["sessions"],
    )
}
fn relationship_list_input() -> Value {
    obj(
        json!({
            "type": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,63}$"}, "id": {"type": "string", "minLength": 1, "maxLength": 128},
            "direction": {"type": "string", "enum": ["out", "in", "both"], "default": "both"},
            "kind": {"type": "string", "description": "Only relationships of this kind, e.g. \"works_at\"."},
            "limit": limit(50, 500)
        }),
        &["type", "id"],
    )
}
fn relationship_list_output() -> Value {
    out(json!({"relationships": {"type": "array", "items": relationship()}}), &["relationships"])
}
fn signal_list_input() -> Value {
    obj(json!({"entity": entity_ref(), "limit": limit(20, 200), "cursor": {"type": "string"}}), &[])
}
fn signal_list_output() -> Value {
    out(json!({"signals": {"type": "array", "items": signal()}, "next_cursor": next_cursor()}), &["signals", "next_cursor"])
}
fn id_input() -> Value {
    obj(json!({"id": {"type": "string", "minLength": 1, "maxLength": 128}}), &["id"])
}
fn signal_get_output() -> Value {
    out(json!({"signal": signal()}), &["signal"])
}
fn proposal_create_input() -> Value {
    obj(
        json!({"title": {"type": "string", "minLength": 1, "maxLength": 200}, "body": {"type": "string", "minLength": 1, "maxLength": 16384, "description": "What should be done and why."}, "entity": entity_ref()}),
        &["title", "body"],
    )
}
fn book_input() -> Value {
    obj(
        json!({"project": {"type": "string", "minLength": 1, "maxLength": 128}, "limit": limit(20, 200), "cursor": {"type": "string"}}),
        &[],
    )
}
fn book_output() -> Value {
    out(
        json!({"entries": {"type": "array", "items": out(json!({"id": {"type": "string"}, "project": {"type": "string"}, "title": {"type": "string"}, "body": {"type": "string"}, "created_at": {"type": "string"}}), &["id", "project", "title", "body"])}, "next_cursor": next_cursor()}),
        &["entries", "next_cursor"],
    )
}
fn kb_input() -> Value {
    obj(
        json!({"query": {"type": "string", "minLength": 1, "maxLength": 512, "description": "Words or an exact identifier; hybrid keyword + semantic search."}, "scope": {"type": "string", "description": "Only this scope: global, org, team:<id> or project:<id> (default: every one this credential can read)."}, "limit": limit(10, 50)}),
        &["query"],
    )
}
fn kb_output() -> Value {
    out(
        json!({"documents": {"type": "array", "items": out(json!({"id": {"type": "string"}, "scope": {"type": "string"}, "title": {"type": "string"}, "body": {"type": "string"}, "passage": {"type": "string"}, "source": nullable("string"), "created_at": {"type": "string"}, "score": {"type": "number"}}), &["id", "title", "body"])}, "count": {"type": "integer"}, "truncated": {"type": "boolean"}, "search": {"type": "string"}}),
        &["documents", "count", "truncated"],
    )
}
fn playbook_input() -> Value {
    obj(
        json!({"goal": {"type": "string", "minLength": 1, "maxLength": 1000}, "entity": entity_ref(), "session": session_arg()}),
        &["goal"],
    )
}
fn playbook_output() -> Value {
    out(
        json!({"playbook": out(json!({"version": {"type": "integer"}, "goal": {"type": "string"}, "tenant": {"type": "string"}, "generated_at": {"type": "string"}, "steps": {"type": "array", "items": {"type": "object"}}, "context": {"type": "object"}}), &["version", "goal", "steps", "context"])}),
        &["playbook"],
    )
}

const fn spec(
    name: &'static str,
    title: &'static str,
    description: &'static str,
    read_only: bool,
    input_schema: fn() -> Value,
    output_schema: fn() -> Value,
) -> ToolSpec {
    ToolSpec { name, title, description, read_only, input_schema, output_schema }
}

/// Every tool this server can offer, before gating: the 20 canonical tools of SPEC §7.1.
pub fn tools() -> &'static [ToolSpec] {
    static TOOLS: &[ToolSpec] = &[
        // memory channel
        spec(
            "memory.search_org",
            "Search org memory",
            "Search the organisation's approved memory (decisions, patterns, commitments, learnings) with hybrid keyword + semantic search; exact identifiers rank first. Only active entries are returned, always fresh. Use this before answering questions about how the organisation does things or what was decided.",
            true,
            search_org_input,
            search_org_output,
        ),
        spec(
            "memory.read_org",
            "Read an org memory entry",
            "Read one org memory entry with its lineage: the proposal that produced it, what it superseded, and — if it was superseded — its successor. Use after memory.search_org.",
            true,
            read_org_input,
            read_org_output,
        ),
        spec(
            "memory.propose",
            "Propose org memory",
            "Propose a new piece of organisational memory, or a replacement for an active entry (supersedes). The proposal is stored as pending: governance scores it and a person decides uncertain cases. Nothing becomes organisational truth through this call. Check the outcome with proposal.status.",
            false,
            propose_input,
            proposal_output,
        ),
        spec(
            "memory.read_conversational",
            "Read session turns",
            "Read the turns of one of your sessions in order (optionally only those after a sequence number). Use to continue a conversation where it stopped.",
            true,
            read_conversational_input,
            read_conversational_output,
        ),
        spec(
            "memory.write_conversational",
            "Record a session turn",
            "Append one turn (user, assistant or system) to one of your sessions. Sessions are private to you; the turns are the raw material later sessions and proposals are built from.",
            false,
            write_conversational_input,
            write_conversational_output,
        ),
        spec(
            "memory.read_personal",
            "Read personal patterns",
            "Read your own personal patterns: preferences, behaviours, context and decisions recorded for you. Never anyone else's.",
            true,
            read_personal_input,
            read_personal_output,
        ),
        spec(
            "memory.list_decisions",
            "List governance decisions",
            "List proposals and their governance state (pending, approved, rejected with a reason, written…), newest state groups first. Use to see what the organisation accepted or refused and why.",
            true,
            list_decisions_input,
            list_decisions_output,
        ),
        // session channel
        spec(
            "session.get_context",
            "Get context (Entity 360)",
            "Assemble context in one call: an entity with its relationships and recent signals, the recent turns of a session, and the org memory relevant to the entity or a query. Give at least one of entity, session or query.",
            true,
            get_context_input,
            get_context_output,
        ),
        spec(
            "session.summarize",
            "Summarize a session into a proposal",
            "Turn one of your sessions into a proposal for org memory: an extractive summary of its turns, stored as pending for governance. Nothing becomes organisational truth through this call.",
            false,
            summarize_input,
            proposal_output,
        ),
        spec(
            "session.list_recent",
            "List recent sessions",
            "List your most recent sessions with their turn counts and when they were last used, newest first.",
            true,
            list_recent_input,
            list_recent_output,
        ),
        // tool channel
        spec(
            "spine.entity.get",
            "Get an entity",
            "Fetch one business entity (an account, contact, deal, ticket, patient…) from the tenant's Spine by its canonical type and id. Returns the entity's traits as normalized truth — prefer this over asking the user or guessing. Use spine.entity.search first when you only know a name.",
            true,
            entity_get_input,
            entity_get_output,
        ),
        spec(
            "spine.entity.search",
            "Search entities",
            "Find business entities in the tenant's Spine by words in their name, id or traits, optionally of one canonical type. Every word must match. Returns up to `limit` entities, best first; use spine.entity.get for one entity's full record.",
            true,
            entity_search_input,
            entity_search_output,
        ),
        spec(
            "spine.relationship.list",
            "List relationships",
            "List the graph relationships of an entity (who works where, which account owns which deal…), outgoing, incoming or both, optionally of one kind.",
            true,
            relationship_list_input,
            relationship_list_output,
        ),
        spec(
            "signal.list",
            "List signals",
            "List time-ordered signals — state changes such as a deal stage moving or an account's health dropping — newest first, for the tenant or one entity.",
            true,
            signal_list_input,
            signal_list_output,
        ),
        spec(
            "signal.get",
            "Get a signal",
            "Fetch one signal by id, with its before and after values.",
            true,
            id_input,
            signal_get_output,
        ),
        spec(
            "proposal.create",
            "Propose an action",
            "Propose an action for the organisation to take (governed): it is stored as pending and decided outside the chat. Never assume it will be approved.",
            false,
            proposal_create_input,
            proposal_output,
        ),
        spec(
            "proposal.status",
            "Get a proposal's status",
            "Read a proposal's governance state, its triage score and reasons once scored, and the decision's reason.",
            true,
            id_input,
            proposal_output,
        ),
        spec(
            "book.list",
            "List the book of projects",
            "List entries of the book of projects, for one project or all, in project order.",
            true,
            book_input,
            book_output,
        ),
        spec(
            "kb.search",
            "Search the knowledge base",
            "Search the knowledge-base documents you can read (global, org, your teams and projects) with hybrid keyword + semantic search. An exact identifier or document id ranks first. Returns the best passage of each document.",
            true,
            kb_input,
            kb_output,
        ),
        spec(
            "playbook.handoff",
            "Hand off a playbook",
            "Build a JSON playbook for a goal from real context (entity, its signals, relevant org memory, session) for you to run locally, step by step. It changes nothing by itself.",
            false,
            playbook_input,
            playbook_output,
        ),
    ];
    TOOLS
}

fn graph_entity() -> Value {
    json!({"type": "object", "properties": {
        "name": {"type": "string", "description": "The name of the entity"},
        "entityType": {"type": "string", "description": "The type of the entity"},
        "observations": {"type": "array", "items": {"type": "string"}, "description": "An array of observation contents associated with the entity"}
    }, "required": ["name", "entityType", "observations"], "additionalProperties": false})
}

fn graph_relation() -> Value {
    json!({"type": "object", "properties": {
        "from": {"type": "string", "description": "The name of the entity where the relation starts"},
        "to": {"type": "string", "description": "The name of the entity where the relation ends"},
        "relationType": {"type": "string", "description": "The type of the relation"}
    }, "required": ["from", "to", "relationType"], "additionalProperties": false})
}

fn graph_scope() -> Value {
    json!({"type": "string", "description": "Which graph: \"personal\" (default, yours alone) or \"project:<id>\" for one of your projects. Never the organisation's memory."})
}

fn with_scope(mut v: Value) -> Value {
    v["properties"]["scope"] = graph_scope();
    v
}

fn g_create_entities() -> Value {
    with_scope(obj(json!({"entities": {"type": "array", "items": graph_entity()}}), &["entities"]))
}
fn g_create_relations() -> Value {
    with_scope(obj(json!({"relations": {"type": "array", "items": graph_relation()}}), &["relations"]))
}
fn g_add_observations() -> Value {
    with_scope(obj(
        json!({"observations": {"type": "array", "items": {"type": "object", "properties": {
            "entityName": {"type": "string", "description": "The name of the entity to add the observations to"},
            "contents": {"type": "array", "items": {"type": "string"}, "description": "An array of observation contents to add"}
        }, "required": ["entityName", "contents"], "additionalProperties": false}}}),
        &["observations"],
    ))
}
fn g_delete_entities() -> Value {
    with_scope(obj(
        json!({"entityNames": {"type": "array", "items": {"type": "string"}, "description": "An array of entity names to delete"}}),
        &["entityNames"],
    ))
}
fn g_delete_observations() -> Value {
    with_scope(obj(
        json!({"deletions": {"type": "array", "items": {"type": "object", "properties": {
            "entityName": {"type": "string", "description": "The name of the entity containing the observations"},
            "observations": {"type": "array", "items": {"type": "string"}, "description": "An array of observations to delete"}
        }, "required": ["entityName", "observations"], "additionalProperties": false}}}),
        &["deletions"],
    ))
}
fn g_delete_relations() -> Value {
    with_scope(obj(
        json!({"relations": {"type": "array", "items": graph_relation(), "description": "An array of relations to delete"}}),
        &["relations"],
    ))
}
fn g_read_graph() -> Value {
    with_scope(obj(json!({}), &[]))
}
fn g_search_nodes() -> Value {
    with_scope(obj(
        json!({"query": {"type": "string", "description": "The search query to match against entity names, types, and observation content"}}),
        &["query"],
    ))
}
fn g_open_nodes() -> Value {
    with_scope(obj(
        json!({"names": {"type": "array", "items": {"type": "string"}, "description": "An array of entity names to retrieve"}}),
        &["names"],
    ))
}
fn g_graph_out() -> Value {
    out(
        json!({"entities": {"type": "array", "items": {"type": "object"}}, "relations": {"type": "array", "items": {"type": "object"}}}),
        &["entities", "relations"],
    )
}
fn g_result_out() -> Value {
    out(json!({"result": {}}), &["result"])
}

/// The `graph` toolset: the tools of the reference MCP memory server, same names and
/// argument shapes (plus an optional `scope`). Each maps to the ADK capability
/// `memory.graph_{name}`.
pub fn graph_tools() -> &'static [ToolSpec] {
    static TOOLS: &[ToolSpec] = &[
        spec(
            "create_entities",
            "Create entities",
            "Create multiple new entities in the knowledge graph",
            false,
            g_create_entities,
            g_result_out,
        ),
        spec(
            "create_relations",
            "Create relations",
            "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice",
            false,
            g_create_relations,
            g_result_out,
        ),
        spec(
            "add_observations",
            "Add observations",
            "Add new observations to existing entities in the knowledge graph",
            false,
            g_add_observations,
            g_result_out,
        ),
        spec(
            "delete_entities",
            "Delete entities",
            "Delete multiple entities and their associated relations from the knowledge graph",
            false,
            g_delete_entities,
            g_result_out,
        ),
        spec(
            "delete_observations",
            "Delete observations",
            "Delete specific observations from entities in the knowledge graph",
            false,
            g_delete_observations,
            g_result_out,
        ),
        spec(
            "delete_relations",
            "Delete relations",
            "Delete multiple relations from the knowledge graph",
            false,
            g_delete_relations,
            g_result_out,
        ),
        spec("read_graph", "Read the graph", "Read the entire knowledge graph", true, g_read_graph, g_graph_out),
        spec(
            "search_nodes",
            "Search nodes",
            "Search for nodes in the knowledge graph based on a query",
            true,
            g_search_nodes,
            g_graph_out,
        ),
        spec(
            "open_nodes",
            "Open nodes",
            "Open specific nodes in the knowledge graph by their names",
            true,
            g_open_nodes,
            g_graph_out,
        ),
    ];
    TOOLS
}

pub fn find(name: &str) -> Option<&'static ToolSpec> {
    tools().iter().find(|t| t.name == name)
}
