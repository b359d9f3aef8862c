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
}

impl Change {
    pub fn tenant(&self) -> &TenantId {
        match self {
            Self::EntityUpdated { tenant, .. } => tenant,
        }
    }

    /// The MCP resource this change updates.
    pub fn resource_uri(&self) -> String {
        match self {
            Self::EntityUpdated { entity_type, id, .. } => format!("continuity://entities/{entity_type}/{id}"),
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
