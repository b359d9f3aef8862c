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

/// Every tool this server can offer, before gating.
pub fn tools() -> &'static [ToolSpec] {
    static TOOLS: &[ToolSpec] = &[
        ToolSpec {
            name: "spine.entity.get",
            title: "Get an entity",
            description: "Fetch one business entity (an account, contact, deal, ticket, patient…) from the tenant's Spine by its canonical type and id. Returns the entity's traits as normalized truth — prefer this over asking the user or guessing. Use spine.entity.search first when you only know a name.",
            read_only: true,
            input_schema: entity_get_input,
            output_schema: entity_get_output,
        },
        ToolSpec {
            name: "spine.entity.search",
            title: "Search entities",
            description: "Find business entities in the tenant's Spine by words in their name, id or traits, optionally of one canonical type. Every word must match. Returns up to `limit` entities, best first; use spine.entity.get for one entity's full record.",
            read_only: true,
            input_schema: entity_search_input,
            output_schema: entity_search_output,
        },
    ];
    TOOLS
}

pub fn find(name: &str) -> Option<&'static ToolSpec> {
    tools().iter().find(|t| t.name == name)
}
