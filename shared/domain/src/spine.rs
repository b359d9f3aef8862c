//! Spine records (SPEC §4.2): entities, relationships, signals, tasks, book entries and
//! KB documents. Source-tool identity never survives into these; only raw blobs keep it.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{EntityType, Id, TenantId, Timestamp};
use crate::tenant::string_enum;
use crate::value::{Attributes, Value};

/// Limits on Spine attribute payloads (SPEC §10).
pub const MAX_ATTRIBUTES: usize = 200;
pub const MAX_ATTRIBUTE_NAME_LEN: usize = 64;
pub const MAX_ATTRIBUTE_DEPTH: usize = 8;
/// Upper bound on one record's attribute text, in bytes.
pub const MAX_ATTRIBUTES_BYTES: usize = 64 * 1024;

string_enum! {
    /// POLE+O classification of an entity type.
    PoleClass, "pole_class" {
        Person = "person",
        Object = "object",
        Location = "location",
        Event = "event",
        Organization = "organization",
    }
}

/// A canonical entity: normalized truth about one thing a tenant cares about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entity {
    pub tenant: TenantId,
    pub entity_type: EntityType,
    pub id: Id,
    pub pole_class: PoleClass,
    pub attributes: Attributes,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Optimistic-concurrency version: 1 on create, +1 on every update.
    pub version: u64,
    /// When the source last changed what this entity holds (ingestion pipeline): a
    /// record older than this is stale and has no effect, so redelivered and reordered
    /// records converge on the newest. `None` for entities written by an operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_updated_at: Option<Timestamp>,
}

impl Entity {
    /// Checks attribute limits so hostile payloads are refused before any write.
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming the offending attribute.
    pub fn validate_attributes(attributes: &Attributes) -> Result<(), Error> {
        if attributes.len() > MAX_ATTRIBUTES {
            return Err(Error::invalid_field("attributes", format!("at most {MAX_ATTRIBUTES} attributes")));
        }
        let mut size = 0usize;
        for (name, value) in attributes {
            let ok_name = !name.is_empty()
                && name.len() <= MAX_ATTRIBUTE_NAME_LEN
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok_name {
                return Err(Error::invalid_field(
                    format!("attributes.{name}"),
                    format!("attribute names are 1-{MAX_ATTRIBUTE_NAME_LEN} characters of a-z, 0-9 and _"),
                ));
            }
            if value.depth() > MAX_ATTRIBUTE_DEPTH {
                return Err(Error::invalid_field(format!("attributes.{name}"), "nested too deeply"));
            }
            let mut text = String::new();
            value.search_text(&mut text);
            size += name.len() + text.len();
        }
        if size > MAX_ATTRIBUTES_BYTES {
            return Err(Error::invalid_field("attributes", format!("at most {MAX_ATTRIBUTES_BYTES} bytes of attributes")));
        }
        Ok(())
    }

    /// The text keyword search matches: type, id and every attribute.
    pub fn search_text(&self) -> String {
        let mut out = format!("{} {} ", self.entity_type, self.id);
        Value::Map(self.attributes.clone()).search_text(&mut out);
        out
    }

    /// A human label: `name`, else `title`, else the id.
    pub fn label(&self) -> String {
        for key in ["name", "title", "subject"] {
            if let Some(Value::Text(s)) = self.attributes.get(key) {
                return s.clone();
            }
        }
        self.id.to_string()
    }
}

/// A reference to an entity by type and id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EntityRef {
    pub entity_type: EntityType,
    pub id: Id,
}

impl std::fmt::Display for EntityRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.entity_type, self.id)
    }
}

/// A temporal edge between two entities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relationship {
    pub tenant: TenantId,
    pub from: EntityRef,
    pub to: EntityRef,
    /// Relationship kind, `snake_case` (`owns`, `works_at`, `billed_by`).
    pub kind: EntityType,
    pub valid_from: Timestamp,
    pub valid_to: Option<Timestamp>,
    pub attributes: Attributes,
}

/// A time-ordered state change on an entity (health dropped, stage moved…).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signal {
    pub tenant: TenantId,
    pub id: Id,
    pub entity: EntityRef,
    /// Signal kind, `snake_case` (`stage_changed`, `health_dropped`).
    pub kind: EntityType,
    pub at: Timestamp,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

string_enum! {
    /// A task's lifecycle: `open` (stored, on its way through the queue) → `dispatched`
    /// (delivered: its assignee sees it) → `in_progress` → `done` | `failed`; `cancelled`
    /// by whoever may write the tenant's tasks.
    TaskStatus, "status" {
        Open = "open",
        Dispatched = "dispatched",
        InProgress = "in_progress",
        Done = "done",
        Failed = "failed",
        Cancelled = "cancelled",
    }
}

impl TaskStatus {
    /// Whether `self → to` is a legal step.
    pub fn can_move_to(self, to: Self) -> bool {
        use TaskStatus::*;
        matches!(
            (self, to),
            (Open, Dispatched | Cancelled)
                | (Dispatched, InProgress | Done | Failed | Cancelled)
                | (InProgress, Done | Failed | Cancelled)
        )
    }

    pub fn is_finished(self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Cancelled)
    }
}

/// A unit of work dispatched to a person or an agent (a principal of the tenant).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub tenant: TenantId,
    pub id: Id,
    pub title: String,
    #[serde(default)]
    pub body: String,
    pub status: TaskStatus,
    /// The principal (person or agent) it is for.
    pub assignee: Id,
    #[serde(default)]
    pub related: Vec<EntityRef>,
    pub created_by: Id,
    /// The assignee's last word on it (what was done, why it failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default)]
    pub version: u64,
}

/// An entry in the book of projects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BookEntry {
    pub tenant: TenantId,
    pub id: Id,
    pub project: String,
    pub title: String,
    pub body: String,
    pub created_at: Timestamp,
}

fn org_scope() -> crate::memory::MemoryScope {
    crate::memory::MemoryScope::Org
}

/// A knowledge-base document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KbDocument {
    pub tenant: TenantId,
    pub id: Id,
    /// Who may read it: `org` (default), `team:…`, `project:…` or `global`.
    #[serde(default = "org_scope")]
    pub scope: crate::memory::MemoryScope,
    pub title: String,
    pub body: String,
    pub source: Option<String>,
    pub created_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_attributes_are_refused() {
        let mut a = Attributes::new();
        a.insert("bad name".into(), Value::Null);
        assert!(Entity::validate_attributes(&a).is_err());

        let mut deep = Value::Null;
        for _ in 0..20 {
            deep = Value::List(vec![deep]);
        }
        let mut b = Attributes::new();
        b.insert("deep".into(), deep);
        assert!(Entity::validate_attributes(&b).is_err());

        let mut c = Attributes::new();
        c.insert("name".into(), Value::Text("x".repeat(MAX_ATTRIBUTES_BYTES + 1)));
        assert!(Entity::validate_attributes(&c).is_err());

        let mut ok = Attributes::new();
        ok.insert("name".into(), "Acme".into());
        assert!(Entity::validate_attributes(&ok).is_ok());
    }
}
