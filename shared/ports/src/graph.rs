//! Knowledge graphs (the `graph` MCP toolset) over the item port: one graph per
//! `(tenant, scope)` — entities under `graph_node`, relations under `graph_edge`, both
//! keyed by SHA-256 of their names within the scope, and a `graph_meta` version that
//! every write bumps (conditionally) so readers can validate a cached copy with one
//! keyed read.

use async_trait::async_trait;
use domain::graph::{GraphEntity, GraphRelation};
use domain::{Error, PageRequest, Result, TenantId};
use sha2::{Digest, Sha256};

use crate::items::{Condition, Write};
use crate::records::{Records, encode, put};

const NODE: &str = "graph_node";
const EDGE: &str = "graph_edge";
const META: &str = "graph_meta";

/// Changes applied to one graph.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GraphChanges {
    pub put_entities: Vec<GraphEntity>,
    pub delete_entities: Vec<String>,
    pub put_relations: Vec<GraphRelation>,
    pub delete_relations: Vec<GraphRelation>,
}

impl GraphChanges {
    pub fn is_empty(&self) -> bool {
        self.put_entities.is_empty()
            && self.delete_entities.is_empty()
            && self.put_relations.is_empty()
            && self.delete_relations.is_empty()
    }
}

#[async_trait]
pub trait GraphStore: Send + Sync {
    /// The graph's version: 0 before its first write.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn graph_version(&self, tenant: &TenantId, scope: &str) -> Result<u64>;
    /// The whole graph and its version.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn read_graph(&self, tenant: &TenantId, scope: &str) -> Result<(u64, Vec<GraphEntity>, Vec<GraphRelation>)>;
    /// Applies `changes` if the graph is still at `expected`; returns the new version.
    /// Large changes are written in atomic groups, each bumping the version.
    ///
    /// # Errors
    /// `CONFLICT` when the graph changed meanwhile; `UNAVAILABLE`.
    async fn apply_graph(&self, tenant: &TenantId, scope: &str, expected: u64, changes: &GraphChanges) -> Result<u64>;
}

fn h(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn check_scope(scope: &str) -> Result<()> {
    if scope.is_empty() || scope.len() > 200 || !scope.bytes().all(|b| b.is_ascii_graphic() && b != b'#') {
        return Err(Error::invalid_field("scope", "malformed graph scope"));
    }
    Ok(())
}

fn edge_key(scope: &str, r: &GraphRelation) -> String {
    format!("{scope}#{}.{}.{}", h(&r.from), h(&r.relation_type), h(&r.to))
}

#[async_trait]
impl GraphStore for Records {
    async fn graph_version(&self, tenant: &TenantId, scope: &str) -> Result<u64> {
        check_scope(scope)?;
        Ok(self.items().get(tenant.as_str(), META, scope).await?.map_or(0, |i| i.version))
    }

    async fn read_graph(&self, tenant: &TenantId, scope: &str) -> Result<(u64, Vec<GraphEntity>, Vec<GraphRelation>)> {
        check_scope(scope)?;
        let version = self.graph_version(tenant, scope).await?;
        let prefix = format!("{scope}#");
        let mut entities = Vec::new();
        let mut page = PageRequest::first(500);
        loop {
            let p = self.page::<GraphEntity>(tenant.as_str(), NODE, &prefix, &page, false).await?;
            entities.extend(p.items);
            match p.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => break,
            }
        }
        let mut relations = Vec::new();
        let mut page = PageRequest::first(500);
        loop {
            let p = self.page::<GraphRelation>(tenant.as_str(), EDGE, &prefix, &page, false).await?;
            relations.extend(p.items);
            match p.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => break,
            }
        }
        Ok((version, entities, relations))
    }

    async fn apply_graph(&self, tenant: &TenantId, scope: &str, expected: u64, changes: &GraphChanges) -> Result<u64> {
        check_scope(scope)?;
        let t = tenant.as_str();
        let mut writes: Vec<Write> = Vec::new();
        for e in &changes.put_entities {
            writes.push(put(t, NODE, format!("{scope}#{}", h(&e.name)), 1, encode(e)?, Condition::None));
        }
        for name in &changes.delete_entities {
            writes.push(Write::Delete {
                tenant: t.into(),
                part: NODE.into(),
                sk: format!("{scope}#{}", h(name)),
                condition: Condition::None,
            });
        }
        for r in &changes.put_relations {
            writes.push(put(t, EDGE, edge_key(scope, r), 1, encode(r)?, Condition::None));
        }
        for r in &changes.delete_relations {
            writes.push(Write::Delete {
                tenant: t.into(),
                part: EDGE.into(),
                sk: edge_key(scope, r),
                condition: Condition::None,
            });
        }
        let mut version = expected;
        // Each group carries the version bump, conditioned on the version before it.
        for group in writes.chunks(crate::items::MAX_WRITES_PER_BATCH - 1) {
            let mut batch = group.to_vec();
            let condition = if version == 0 { Condition::Absent } else { Condition::Version(version) };
            batch.push(put(t, META, scope.to_owned(), version + 1, encode(&(version + 1))?, condition));
            self.items().write(batch).await.map_err(|e| {
                if e.code == domain::ErrorCode::Conflict { Error::conflict("the graph changed meanwhile; retry") } else { e }
            })?;
            version += 1;
        }
        Ok(version)
    }
}
