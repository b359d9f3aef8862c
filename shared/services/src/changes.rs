//! Change notices inside one process: what MCP sessions on `continuity serve` (and
//! `continuity stdio`) turn into `notifications/resources/updated`. Lossy by design — a
//! slow listener skips notices (`broadcast` lag) rather than slowing writers — and
//! in-process only: Lambda serves MCP statelessly, without sessions to notify.

use domain::{EntityType, Id, TenantId};
use tokio::sync::broadcast;

/// Notices buffered per listener before the oldest are dropped.
const CAPACITY: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// An entity was written; its resource is `continuity://entities/{type}/{id}`.
    EntityUpdated { tenant: TenantId, entity_type: EntityType, id: Id },
    /// A knowledge graph of the `graph` toolset changed (its scope's storage key:
    /// `personal:{principal}` or `project:{id}`); its resource is [`GRAPH_URI`].
    GraphUpdated { tenant: TenantId, scope: String },
}

/// The caller's personal knowledge graph as an MCP resource (the reference memory
/// server's URI).
pub const GRAPH_URI: &str = "memory://knowledge-graph";

impl Change {
    pub fn tenant(&self) -> &TenantId {
        match self {
            Self::EntityUpdated { tenant, .. } | Self::GraphUpdated { tenant, .. } => tenant,
        }
    }

    /// The MCP resource this change updates.
    pub fn resource_uri(&self) -> String {
        match self {
            Self::EntityUpdated { entity_type, id, .. } => format!("continuity://entities/{entity_type}/{id}"),
            Self::GraphUpdated { .. } => GRAPH_URI.to_owned(),
        }
    }

    /// Whether `caller` may hear of it: an entity of its tenant, or its own personal graph.
    pub fn concerns(&self, caller: &domain::principal::CallerContext) -> bool {
        match self {
            Self::EntityUpdated { tenant, .. } => tenant == &caller.tenant,
            Self::GraphUpdated { tenant, scope } => {
                tenant == &caller.tenant
                    && *scope == domain::memory::MemoryScope::Personal(caller.principal.to_string()).storage_key()
            }
        }
    }
}

#[derive(Clone)]
pub struct Changes {
    tx: broadcast::Sender<Change>,
}

impl Default for Changes {
    fn default() -> Self {
        Self::new()
    }
}

impl Changes {
    pub fn new() -> Self {
        Self { tx: broadcast::channel(CAPACITY).0 }
    }

    /// Publishes a notice; nobody listening is fine.
    pub fn publish(&self, change: Change) {
        let _ = self.tx.send(change);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::principal::{CallerContext, Scopes, Toolsets};
    use domain::tenant::PlanTier;

    fn caller(tenant: &str, principal: &str) -> CallerContext {
        CallerContext {
            tenant: TenantId::new(tenant).unwrap(),
            principal: Id::new(principal).unwrap(),
            scopes: Scopes::all(),
            plan: PlanTier::Pro,
            teams: vec![],
            projects: vec!["apollo".into()],
            toolsets: Toolsets::default(),
            credential: "test".into(),
            client: None,
        }
    }

    #[test]
    fn a_graph_change_concerns_only_the_owner_of_the_personal_graph() {
        let mine = Change::GraphUpdated { tenant: TenantId::new("acme").unwrap(), scope: "personal:u1".into() };
        assert_eq!(mine.resource_uri(), GRAPH_URI);
        assert!(mine.concerns(&caller("acme", "u1")));
        assert!(!mine.concerns(&caller("acme", "u2")), "another user's graph");
        assert!(!mine.concerns(&caller("other", "u1")), "another tenant");
        let project = Change::GraphUpdated { tenant: TenantId::new("acme").unwrap(), scope: "project:apollo".into() };
        assert!(!project.concerns(&caller("acme", "u1")), "the resource is the personal graph");
        let entity = Change::EntityUpdated {
            tenant: TenantId::new("acme").unwrap(),
            entity_type: domain::EntityType::new("account").unwrap(),
            id: Id::new("a1").unwrap(),
        };
        assert!(entity.concerns(&caller("acme", "u2")) && !entity.concerns(&caller("other", "u2")));
    }
}
