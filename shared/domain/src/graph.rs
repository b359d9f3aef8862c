//! The knowledge-graph model of the reference MCP memory server
//! (`@modelcontextprotocol/server-memory`): named, typed entities with free-text
//! observations, and directed, typed relations between entity names. Kept faithful so
//! that importing the reference server's `memory.jsonl` is lossless. A graph lives in
//! one memory scope — a user's `personal` scope or a `project` — never `org`.

use serde::{Deserialize, Serialize};

use crate::error::Error;

pub const MAX_NAME_LEN: usize = 256;
pub const MAX_TYPE_LEN: usize = 128;
pub const MAX_OBSERVATION_LEN: usize = 4096;
pub const MAX_OBSERVATIONS: usize = 1000;
/// Most items (entities, relations, names) one call may carry.
pub const MAX_ITEMS_PER_CALL: usize = 1000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphEntity {
    pub name: String,
    pub entity_type: String,
    #[serde(default)]
    pub observations: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphRelation {
    pub from: String,
    pub to: String,
    pub relation_type: String,
}

fn text(field: &str, v: &str, max: usize) -> Result<(), Error> {
    if v.is_empty() || v.chars().count() > max || v.chars().any(char::is_control) {
        return Err(Error::invalid_field(field, format!("must be 1-{max} characters without control characters")));
    }
    Ok(())
}

impl GraphEntity {
    /// # Errors
    /// `INVALID_REQUEST` naming the field.
    pub fn validate(&self) -> Result<(), Error> {
        text("name", &self.name, MAX_NAME_LEN)?;
        text("entityType", &self.entity_type, MAX_TYPE_LEN)?;
        if self.observations.len() > MAX_OBSERVATIONS {
            return Err(Error::invalid_field("observations", format!("at most {MAX_OBSERVATIONS}")));
        }
        for o in &self.observations {
            validate_observation(o)?;
        }
        Ok(())
    }
}

/// # Errors
/// `INVALID_REQUEST` for an empty, over-long or control-character observation.
pub fn validate_observation(o: &str) -> Result<(), Error> {
    if o.chars().count() > MAX_OBSERVATION_LEN || o.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(Error::invalid_field("observations", format!("each at most {MAX_OBSERVATION_LEN} characters")));
    }
    Ok(())
}

impl GraphRelation {
    /// # Errors
    /// `INVALID_REQUEST` naming the field.
    pub fn validate(&self) -> Result<(), Error> {
        text("from", &self.from, MAX_NAME_LEN)?;
        text("to", &self.to, MAX_NAME_LEN)?;
        text("relationType", &self.relation_type, MAX_TYPE_LEN)
    }
}
