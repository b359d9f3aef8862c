//! The `graph` toolset: the nine tools of the reference MCP memory server
//! (`@modelcontextprotocol/server-memory`) with the same argument shapes and results, and
//! `merge_entities` (seed 002 §10: duplicates folded into one entity, relations re-pointed),
//! over the caller's `personal` scope (default) or one of the caller's `project`s —
//! never `org` (wall 4: org memory is written only by governance).
//!
//! Reads come from an in-process copy of the graph, whose version is re-checked against
//! the store (one keyed read) when it is older than a second, so a search over 10 000
//! entities does not re-read them; writes go to the store first (versioned, so
//! concurrent writers in other processes are detected) and then update the copy in place.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use domain::graph::{GraphEntity, GraphRelation, MAX_ITEMS_PER_CALL, MAX_OBSERVATIONS, validate_observation};
use domain::memory::MemoryScope;
use domain::principal::{CallerContext, Scope};
use domain::{Error, ErrorCode, Result, TenantId};
use ports::Backend;
use ports::graph::{GraphChanges, GraphStore};

/// Graphs kept in memory before the least recently loaded is dropped.
const MAX_CACHED_GRAPHS: usize = 256;
/// How long a copy is trusted before its version is checked again against the store.
/// Writes through this process update the copy at once; a write by another process is
/// seen within this time.
const REVALIDATE_AFTER: Duration = Duration::from_millis(1000);

/// An entity of a graph in memory with its JSON, written once when the entity is
/// stored: a read's text is then these strings joined (a broad search's answer is
/// hundreds of entities, and escaping their strings again on every read dominated it).
#[derive(Debug)]
pub struct Node {
    entity: GraphEntity,
    json: Box<str>,
}

impl Node {
    pub fn new(entity: GraphEntity) -> Self {
        let json = serde_json::to_string(&entity).unwrap_or_default().into_boxed_str();
        Self { entity, json }
    }

    /// The entity as `serde_json::to_string` writes it.
    pub fn json(&self) -> &str {
        &self.json
    }
}

impl std::ops::Deref for Node {
    type Target = GraphEntity;
    fn deref(&self) -> &GraphEntity {
        &self.entity
    }
}

impl serde::Serialize for Node {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.entity.serialize(s)
    }
}

/// One graph in memory, with lower-cased search text per entity. Entities are shared
/// with the answers that hold them (no copy per read).
struct Graph {
    version: u64,
    entities: Vec<Arc<Node>>,
    index: HashMap<String, usize>,
    haystacks: Vec<String>,
    /// Every haystack in entity order, NUL-separated, built on the first search after a
    /// change: a search is one substring scan instead of one per entity.
    joined: OnceLock<Joined>,
    relations: BTreeSet<GraphRelation>,
}

struct Joined {
    text: String,
    /// Where each entity's haystack starts in `text`.
    starts: Vec<usize>,
}

impl Joined {
    fn of(haystacks: &[String]) -> Self {
        let mut text = String::with_capacity(haystacks.iter().map(|h| h.len() + 1).sum());
        let mut starts = Vec::with_capacity(haystacks.len());
        for h in haystacks {
            starts.push(text.len());
            text.push_str(h);
            text.push('\0');
        }
        Self { text, starts }
    }

    /// The indexes of the haystacks holding `needle` (lower-cased, without NUL), in order.
    fn matches(&self, needle: &str) -> Vec<usize> {
        let mut found: Vec<usize> = Vec::new();
        for at in memchr::memmem::find_iter(self.text.as_bytes(), needle.as_bytes()) {
            // A match never spans a separator (the needle holds no NUL).
            let Some(i) = self.starts.partition_point(|&s| s <= at).checked_sub(1) else { continue };
            if found.last() != Some(&i) {
                found.push(i);
            }
        }
        found
    }
}

impl Graph {
    fn new(version: u64, entities: Vec<GraphEntity>, relations: Vec<GraphRelation>) -> Self {
        let mut g = Self {
            version,
            entities: Vec::new(),
            index: HashMap::new(),
            haystacks: Vec::new(),
            joined: OnceLock::new(),
            relations: relations.into_iter().collect(),
        };
        for e in entities {
            g.upsert(e);
        }
        g
    }

    fn haystack(e: &GraphEntity) -> String {
        let mut s = format!("{}\n{}", e.name.to_lowercase(), e.entity_type.to_lowercase());
        for o in &e.observations {
            s.push('\n');
            s.push_str(&o.to_lowercase());
        }
        s
    }

    fn upsert(&mut self, e: GraphEntity) {
        let hay = Self::haystack(&e);
        self.joined = OnceLock::new();
        match self.index.get(&e.name) {
            Some(&i) => {
                self.entities[i] = Arc::new(Node::new(e));
                self.haystacks[i] = hay;
            }
            None => {
                self.index.insert(e.name.clone(), self.entities.len());
                self.entities.push(Arc::new(Node::new(e)));
                self.haystacks.push(hay);
            }
        }
    }

    fn remove(&mut self, name: &str) {
        if let Some(i) = self.index.remove(name) {
            self.joined = OnceLock::new();
            self.entities.swap_remove(i);
            self.haystacks.swap_remove(i);
            if let Some(moved) = self.entities.get(i) {
                self.index.insert(moved.name.clone(), i);
            }
        }
    }

    fn get(&self, name: &str) -> Option<&GraphEntity> {
        self.index.get(name).map(|&i| &**self.entities[i])
    }

    fn get_shared(&self, name: &str) -> Option<&Arc<Node>> {
        self.index.get(name).map(|&i| &self.entities[i])
    }

    /// The entities whose name, type or an observation holds `query` (any case).
    fn search(&self, query: &str) -> Vec<&Arc<Node>> {
        let q = query.to_lowercase();
        if q.is_empty() {
            // The reference server's `includes("")`: every entity matches.
            return self.entities.iter().collect();
        }
        if q.contains('\0') {
            // Could match across the joined text's separators: one haystack at a time.
            let finder = memchr::memmem::Finder::new(q.as_bytes());
            return self
                .entities
                .iter()
                .zip(&self.haystacks)
                .filter(|(_, h)| finder.find(h.as_bytes()).is_some())
                .map(|(e, _)| e)
                .collect();
        }
        let joined = self.joined.get_or_init(|| Joined::of(&self.haystacks));
        joined.matches(&q).into_iter().map(|i| &self.entities[i]).collect()
    }

    /// The entities picked and every relation with at least one end among them (the
    /// 2026 reference's filter: a found node's connections to nodes outside the answer
    /// are part of it).
    fn subgraph(&self, picked: Vec<&Arc<Node>>) -> Subgraph {
        let relations = if self.relations.is_empty() {
            Vec::new()
        } else {
            let names: std::collections::HashSet<&str> = picked.iter().map(|e| e.name.as_str()).collect();
            self.relations.iter().filter(|r| names.contains(r.from.as_str()) || names.contains(r.to.as_str())).cloned().collect()
        };
        Subgraph { entities: picked.into_iter().cloned().collect(), relations }
    }
}

/// A read's answer: entities (shared with the graph in memory), and the relations
/// touching them.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Subgraph {
    pub entities: Vec<Arc<Node>>,
    pub relations: Vec<GraphRelation>,
}

type Key = (TenantId, String);

/// A graph copy and when its version was last checked against the store.
struct Cached {
    checked: Instant,
    graph: Arc<RwLock<Graph>>,
}

#[derive(Clone, Default)]
pub struct GraphService {
    backend: Option<Backend>,
    /// Where a changed graph is announced (`memory://knowledge-graph` subscribers).
    changes: Option<crate::changes::Changes>,
    cache: Arc<Mutex<HashMap<Key, Cached>>>,
    /// One writer per graph in this process (others are caught by the version check).
    locks: Arc<Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>>,
}

fn too_many(n: usize) -> Result<()> {
    if n > MAX_ITEMS_PER_CALL {
        return Err(Error::invalid(format!("at most {MAX_ITEMS_PER_CALL} items per call")));
    }
    Ok(())
}

/// The graph tools' names (the reference server's nine, and `merge_entities`).
pub const TOOLS: &[&str] = &[
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
    "merge_entities",
];

impl GraphService {
    pub(crate) fn new(backend: Backend, changes: crate::changes::Changes) -> Self {
        Self { backend: Some(backend), changes: Some(changes), ..Self::default() }
    }

    fn backend(&self) -> Result<&Backend> {
        self.backend.as_ref().ok_or_else(|| Error::internal("graph service without a backend"))
    }

    /// The graph's scope key for this call: `personal:{principal}` (no scope, or
    /// `personal`), or `project:{id}` for one of the caller's projects. Checked before
    /// anything is read (wall 6).
    fn scope(caller: &CallerContext, scope: Option<&str>) -> Result<String> {
        let scope = match scope {
            None | Some("personal") => MemoryScope::Personal(caller.principal.to_string()),
            Some(raw) => match MemoryScope::parse(raw)? {
                s @ MemoryScope::Project(_) => s,
                MemoryScope::Personal(p) if p == caller.principal.as_str() => MemoryScope::Personal(p),
                _ => {
                    return Err(Error::invalid_field(
                        "scope",
                        "a graph lives in your personal scope or one of your projects (project:<id>), never org",
                    ));
                }
            },
        };
        if !scope.readable_by(caller) {
            return Err(Error::forbidden("this project is not one of yours"));
        }
        Ok(scope.storage_key())
    }

    async fn load(&self, tenant: &TenantId, scope: &str) -> Result<Arc<RwLock<Graph>>> {
        let backend = self.backend()?;
        let key = (tenant.clone(), scope.to_owned());
        let cached = self.cache.lock().ok().and_then(|c| c.get(&key).map(|e| (e.checked, e.graph.clone())));
        if let Some((checked, g)) = &cached
            && checked.elapsed() < REVALIDATE_AFTER
        {
            return Ok(g.clone());
        }
        let version = backend.records.graph_version(tenant, scope).await?;
        if let Some((_, g)) = cached
            && g.read().is_ok_and(|g| g.version == version)
        {
            if let Ok(mut c) = self.cache.lock()
                && let Some(e) = c.get_mut(&key)
            {
                e.checked = Instant::now();
            }
            return Ok(g);
        }
        let (version, entities, relations) = backend.records.read_graph(tenant, scope).await?;
        let g = Arc::new(RwLock::new(Graph::new(version, entities, relations)));
        if let Ok(mut c) = self.cache.lock() {
            if c.len() >= MAX_CACHED_GRAPHS && !c.contains_key(&key) {
                c.clear();
            }
            c.insert(key, Cached { checked: Instant::now(), graph: g.clone() });
        }
        Ok(g)
    }

    /// Applies a change computed from the current graph, then updates the copy in place.
    async fn write<F, T>(&self, tenant: &TenantId, scope: &str, compute: F) -> Result<T>
    where
        F: Fn(&Graph) -> Result<(GraphChanges, T)>,
    {
        let key = (tenant.clone(), scope.to_owned());
        let lock = {
            let mut locks = self.locks.lock().map_err(|_| Error::internal("graph locks poisoned"))?;
            if locks.len() > MAX_CACHED_GRAPHS * 4 {
                locks.retain(|_, l| Arc::strong_count(l) > 1);
            }
            locks.entry(key.clone()).or_default().clone()
        };
        let _guard = lock.lock().await;
        let poisoned = || Error::internal("graph copy poisoned");
        for _ in 0..3 {
            let g = self.load(tenant, scope).await?;
            let (version, (changes, result)) = {
                let read = g.read().map_err(|_| poisoned())?;
                (read.version, compute(&read)?)
            };
            if changes.is_empty() {
                return Ok(result);
            }
            match self.backend()?.records.apply_graph(tenant, scope, version, &changes).await {
                Ok(next) => {
                    let mut w = g.write().map_err(|_| poisoned())?;
                    for name in &changes.delete_entities {
                        w.remove(name);
                    }
                    for e in changes.put_entities {
                        w.upsert(e);
                    }
                    for r in &changes.delete_relations {
                        w.relations.remove(r);
                    }
                    w.relations.extend(changes.put_relations);
                    w.version = next;
                    if let Some(feed) = &self.changes {
                        feed.publish(crate::changes::Change::GraphUpdated { tenant: tenant.clone(), scope: scope.to_owned() });
                    }
                    return Ok(result);
                }
                // Another process wrote meanwhile: drop the copy and recompute.
                Err(e) if e.code == ErrorCode::Conflict => {
                    if let Ok(mut c) = self.cache.lock() {
                        c.remove(&key);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::conflict("the graph is being changed concurrently; retry"))
    }

    /// The scope's key after the caller's right to `needed` there is checked. The ADK
    /// checked the capability's scope already; kept here so this service is safe on its
    /// own.
    fn writable(caller: &CallerContext, scope: Option<&str>) -> Result<String> {
        let key = Self::scope(caller, scope)?;
        caller.scopes.require(Scope::MemoryWrite)?;
        Ok(key)
    }

    /// `create_entities`: the entities whose name is new (the first of a repeated name),
    /// as created.
    ///
    /// # Errors
    /// `FORBIDDEN` without `memory:write` or for another's scope; `INVALID_REQUEST` for an
    /// invalid entity or too many.
    pub async fn create_entities(
        &self,
        caller: &CallerContext,
        scope: Option<&str>,
        entities: Vec<GraphEntity>,
    ) -> Result<Vec<GraphEntity>> {
        let scope = Self::writable(caller, scope)?;
        too_many(entities.len())?;
        for e in &entities {
            e.validate()?;
        }
        self.write(&caller.tenant, &scope, |g| {
            let mut seen = BTreeSet::new();
            let created: Vec<GraphEntity> =
                entities.iter().filter(|e| g.get(&e.name).is_none() && seen.insert(e.name.clone())).cloned().collect();
            Ok((GraphChanges { put_entities: created.clone(), ..Default::default() }, created))
        })
        .await
    }

    /// `create_relations`: the relations that were not there, as created.
    ///
    /// # Errors
    /// As [`Self::create_entities`].
    pub async fn create_relations(
        &self,
        caller: &CallerContext,
        scope: Option<&str>,
        relations: Vec<GraphRelation>,
    ) -> Result<Vec<GraphRelation>> {
        let scope = Self::writable(caller, scope)?;
        too_many(relations.len())?;
        for r in &relations {
            r.validate()?;
        }
        self.write(&caller.tenant, &scope, |g| {
            let mut seen = BTreeSet::new();
            let created: Vec<GraphRelation> =
                relations.iter().filter(|r| !g.relations.contains(*r) && seen.insert((*r).clone())).cloned().collect();
            Ok((GraphChanges { put_relations: created.clone(), ..Default::default() }, created))
        })
        .await
    }

    /// `add_observations`: each `(entity, contents)` gains the contents it lacks; what
    /// each entity gained.
    ///
    /// # Errors
    /// As [`Self::create_entities`]; `NOT_FOUND` for an entity that does not exist
    /// (nothing is written).
    pub async fn add_observations(
        &self,
        caller: &CallerContext,
        scope: Option<&str>,
        observations: Vec<(String, Vec<String>)>,
    ) -> Result<Vec<AddedObservations>> {
        let scope = Self::writable(caller, scope)?;
        too_many(observations.len())?;
        for (_, contents) in &observations {
            for c in contents {
                validate_observation(c)?;
            }
        }
        self.write(&caller.tenant, &scope, |g| {
            let mut changed: HashMap<String, GraphEntity> = HashMap::new();
            let mut out = Vec::new();
            for (name, contents) in &observations {
                let mut next = match changed.get(name) {
                    Some(e) => e.clone(),
                    None => g.get(name).cloned().ok_or_else(|| Error::not_found(format!("entity with name {name}")))?,
                };
                let mut added = Vec::new();
                for c in contents {
                    if !next.observations.contains(c) {
                        next.observations.push(c.clone());
                        added.push(c.clone());
                    }
                }
                if next.observations.len() > MAX_OBSERVATIONS {
                    return Err(Error::invalid_field("observations", format!("an entity holds at most {MAX_OBSERVATIONS}")));
                }
                out.push(AddedObservations { entity_name: name.clone(), added_observations: added });
                changed.insert(name.clone(), next);
            }
            Ok((GraphChanges { put_entities: changed.into_values().collect(), ..Default::default() }, out))
        })
        .await
    }

    /// `delete_entities`: the named entities (those that exist) and every relation
    /// touching them.
    ///
    /// # Errors
    /// As [`Self::create_entities`].
    pub async fn delete_entities(&self, caller: &CallerContext, scope: Option<&str>, entity_names: Vec<String>) -> Result<()> {
        let scope = Self::writable(caller, scope)?;
        too_many(entity_names.len())?;
        self.write(&caller.tenant, &scope, |g| {
            let names: BTreeSet<&String> = entity_names.iter().filter(|n| g.get(n).is_some()).collect();
            let relations: Vec<GraphRelation> =
                g.relations.iter().filter(|r| names.contains(&r.from) || names.contains(&r.to)).cloned().collect();
            let changes = GraphChanges {
                delete_entities: names.into_iter().cloned().collect(),
                delete_relations: relations,
                ..Default::default()
            };
            Ok((changes, ()))
        })
        .await
    }

    /// `delete_observations`: each `(entity, observations)` loses those observations; a
    /// missing entity is skipped.
    ///
    /// # Errors
    /// As [`Self::create_entities`].
    pub async fn delete_observations(
        &self,
        caller: &CallerContext,
        scope: Option<&str>,
        deletions: Vec<(String, Vec<String>)>,
    ) -> Result<()> {
        let scope = Self::writable(caller, scope)?;
        too_many(deletions.len())?;
        self.write(&caller.tenant, &scope, |g| {
            let mut changed: HashMap<String, GraphEntity> = HashMap::new();
            for (name, gone) in &deletions {
                let Some(mut next) = changed.get(name).cloned().or_else(|| g.get(name).cloned()) else {
                    continue;
                };
                next.observations.retain(|o| !gone.contains(o));
                changed.insert(name.clone(), next);
            }
            Ok((GraphChanges { put_entities: changed.into_values().collect(), ..Default::default() }, ()))
        })
        .await
    }

    /// `delete_relations`: those of the relations that exist.
    ///
    /// # Errors
    /// As [`Self::create_entities`].
    pub async fn delete_relations(
        &self,
        caller: &CallerContext,
        scope: Option<&str>,
        relations: Vec<GraphRelation>,
    ) -> Result<()> {
        let scope = Self::writable(caller, scope)?;
        too_many(relations.len())?;
        self.write(&caller.tenant, &scope, |g| {
            let gone: Vec<GraphRelation> = relations.iter().filter(|r| g.relations.contains(*r)).cloned().collect();
            Ok((GraphChanges { delete_relations: gone, ..Default::default() }, ()))
        })
        .await
    }

    /// `merge_entities` (seed 002 §10): see [`merge`].
    ///
    /// # Errors
    /// As [`Self::create_entities`]; `INVALID_REQUEST` for no source, more than 100, or
    /// the target among them; `NOT_FOUND` for a source that does not exist.
    pub async fn merge_entities(
        &self,
        caller: &CallerContext,
        scope: Option<&str>,
        mut source_names: Vec<String>,
        target_name: &str,
    ) -> Result<Merged> {
        let scope = Self::writable(caller, scope)?;
        let mut seen = BTreeSet::new();
        source_names.retain(|n| seen.insert(n.clone()));
        if source_names.is_empty() || source_names.len() > 100 {
            return Err(Error::invalid_field("sourceNames", "1 to 100 entity names"));
        }
        if source_names.iter().any(|n| n == target_name) {
            return Err(Error::invalid_field("sourceNames", "the target is not one of the sources"));
        }
        self.write(&caller.tenant, &scope, |g| merge(g, &source_names, target_name)).await
    }

    /// The graph a read sees, after the caller's right to read the scope is checked.
    async fn readable(&self, caller: &CallerContext, scope: Option<&str>) -> Result<Arc<RwLock<Graph>>> {
        let scope = Self::scope(caller, scope)?;
        caller.scopes.require(Scope::MemoryRead)?;
        self.load(&caller.tenant, &scope).await
    }

    /// `read_graph`: the whole graph of the scope.
    ///
    /// # Errors
    /// `FORBIDDEN` without `memory:read` or for a project that is not the caller's.
    pub async fn read_graph(&self, caller: &CallerContext, scope: Option<&str>) -> Result<Subgraph> {
        let g = self.readable(caller, scope).await?;
        let g = g.read().map_err(|_| Error::internal("graph copy poisoned"))?;
        Ok(Subgraph { entities: g.entities.clone(), relations: g.relations.iter().cloned().collect() })
    }

    /// `search_nodes`: the entities whose name, type or an observation contains `query`
    /// (case-insensitively), with the relations between them.
    ///
    /// # Errors
    /// As [`Self::read_graph`]; `INVALID_REQUEST` for a query over 1024 bytes.
    pub async fn search_nodes(&self, caller: &CallerContext, scope: Option<&str>, query: &str) -> Result<Subgraph> {
        if query.len() > 1024 {
            return Err(Error::invalid_field("query", "at most 1024 characters"));
        }
        let g = self.readable(caller, scope).await?;
        let g = g.read().map_err(|_| Error::internal("graph copy poisoned"))?;
        Ok(g.subgraph(g.search(query)))
    }

    /// `open_nodes`: the named entities that exist, with the relations between them.
    ///
    /// # Errors
    /// As [`Self::read_graph`]; `INVALID_REQUEST` for too many names.
    pub async fn open_nodes(&self, caller: &CallerContext, scope: Option<&str>, names: &[String]) -> Result<Subgraph> {
        too_many(names.len())?;
        let g = self.readable(caller, scope).await?;
        let g = g.read().map_err(|_| Error::internal("graph copy poisoned"))?;
        let picked: Vec<&Arc<Node>> = names.iter().filter_map(|n| g.get_shared(n)).collect();
        Ok(g.subgraph(picked))
    }
}

/// What `add_observations` added to one entity (the reference server's shape).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddedObservations {
    pub entity_name: String,
    pub added_observations: Vec<String>,
}

/// What `merge_entities` made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Merged {
    /// The target as it now is.
    pub entity: GraphEntity,
    pub merged_from: Vec<String>,
    pub relations_repointed: usize,
}

/// What [`GraphService::import`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct GraphImport {
    /// Entities that were not there.
    pub created_entities: usize,
    /// Entities that were there and gained observations.
    pub extended_entities: usize,
    /// Relations that were not there.
    pub created_relations: usize,
}

impl GraphService {
    /// Merges a whole graph into the scope `scope` names (`personal`, `project:<id>`):
    /// new entities are created, an existing one gains the observations it lacks (in
    /// the given order), new relations are added; what is there already changes nothing,
    /// so importing the same graph twice is a no-op. Relations may name entities of the
    /// scope or of the import. Written in atomic groups.
    ///
    /// # Errors
    /// `FORBIDDEN` without `memory:write` or for another's scope; `INVALID_REQUEST` for an
    /// invalid entity or relation (nothing is written).
    pub async fn import(
        &self,
        caller: &CallerContext,
        scope: &str,
        entities: &[GraphEntity],
        relations: &[GraphRelation],
    ) -> Result<GraphImport> {
        let scope = Self::scope(caller, Some(scope))?;
        caller.scopes.require(Scope::MemoryWrite)?;
        for e in entities {
            e.validate()?;
        }
        for r in relations {
            r.validate()?;
        }
        let report = std::sync::Mutex::new(GraphImport::default());
        self.write(&caller.tenant, &scope, |g| {
            let mut changes = GraphChanges::default();
            let mut r = GraphImport::default();
            let mut pending: HashMap<&str, GraphEntity> = HashMap::new();
            let mut order: Vec<&str> = Vec::new();
            for e in entities {
                let base = match pending.get(e.name.as_str()) {
                    Some(p) => p.clone(),
                    None => match g.get(&e.name) {
                        Some(existing) => GraphEntity::clone(existing),
                        None => {
                            GraphEntity { name: e.name.clone(), entity_type: e.entity_type.clone(), observations: Vec::new() }
                        }
                    },
                };
                let mut next = base.clone();
                for o in &e.observations {
                    if !next.observations.contains(o) {
                        next.observations.push(o.clone());
                    }
                }
                if next.observations.len() > MAX_OBSERVATIONS {
                    return Err(Error::invalid_field("observations", format!("{}: more than {MAX_OBSERVATIONS}", e.name)));
                }
                if !pending.contains_key(e.name.as_str()) {
                    order.push(e.name.as_str());
                }
                pending.insert(e.name.as_str(), next);
            }
            for name in order {
                let Some(next) = pending.remove(name) else { continue };
                match g.get(name) {
                    None => {
                        r.created_entities += 1;
                        changes.put_entities.push(next);
                    }
                    Some(existing) if existing.observations != next.observations => {
                        r.extended_entities += 1;
                        changes.put_entities.push(next);
                    }
                    Some(_) => {}
                }
            }
            let mut seen = BTreeSet::new();
            for rel in relations {
                if !g.relations.contains(rel) && seen.insert(rel.clone()) {
                    r.created_relations += 1;
                    changes.put_relations.push(rel.clone());
                }
            }
            if let Ok(mut out) = report.lock() {
                *out = r;
            }
            Ok((changes, ()))
        })
        .await?;
        report.into_inner().map_err(|_| Error::internal("graph import report poisoned"))
    }

    /// Drops the in-process copy of a scope's graph (the next use reads it again): a
    /// large import, done writing, frees it before reading the graph back.
    pub fn release(&self, caller: &CallerContext, scope: &str) {
        if let Ok(scope) = Self::scope(caller, Some(scope))
            && let Ok(mut c) = self.cache.lock()
        {
            c.remove(&(caller.tenant.clone(), scope));
        }
    }

    /// The scope's graph as the store holds it now (not the in-process copy): for
    /// reading an import back.
    ///
    /// # Errors
    /// `FORBIDDEN` without `memory:read` or for another's scope; `UNAVAILABLE`.
    pub async fn stored(&self, caller: &CallerContext, scope: &str) -> Result<(Vec<GraphEntity>, Vec<GraphRelation>)> {
        let scope = Self::scope(caller, Some(scope))?;
        caller.scopes.require(Scope::MemoryRead)?;
        let (_, entities, relations) = self.backend()?.records.read_graph(&caller.tenant, &scope).await?;
        Ok((entities, relations))
    }
}

/// `merge_entities` (seed 002 §10): the sources' observations are added to the target
/// (created with the first source's type when absent; each observation once), every
/// relation touching a source is re-pointed to the target (one that would join the
/// target to itself is dropped, a duplicate kept once), and the sources are deleted.
fn merge(g: &Graph, sources: &[String], target: &str) -> Result<(GraphChanges, Merged)> {
    let found: Vec<&GraphEntity> = sources
        .iter()
        .map(|n| g.get(n).ok_or_else(|| Error::not_found(format!("entity with name {n}"))))
        .collect::<Result<_>>()?;
    let mut merged = match g.get(target) {
        Some(e) => e.clone(),
        None => {
            let first = found.first().ok_or_else(|| Error::invalid_field("sourceNames", "at least one entity"))?;
            let e = GraphEntity { name: target.to_owned(), entity_type: first.entity_type.clone(), observations: Vec::new() };
            e.validate()?;
            e
        }
    };
    for e in &found {
        for o in &e.observations {
            if !merged.observations.contains(o) {
                merged.observations.push(o.clone());
            }
        }
    }
    if merged.observations.len() > MAX_OBSERVATIONS {
        return Err(Error::invalid_field(
            "sourceNames",
            format!("the merged entity would hold more than {MAX_OBSERVATIONS} observations"),
        ));
    }
    let names: BTreeSet<&str> = sources.iter().map(String::as_str).collect();
    let point = |n: &str| if names.contains(n) { target.to_owned() } else { n.to_owned() };
    let mut gone = Vec::new();
    let mut added: Vec<GraphRelation> = Vec::new();
    for r in g.relations.iter().filter(|r| names.contains(r.from.as_str()) || names.contains(r.to.as_str())) {
        gone.push(r.clone());
        let moved = GraphRelation { from: point(&r.from), to: point(&r.to), relation_type: r.relation_type.clone() };
        if moved.from != moved.to && !g.relations.contains(&moved) && !added.contains(&moved) {
            added.push(moved);
        }
    }
    let out = Merged { entity: merged.clone(), merged_from: sources.to_vec(), relations_repointed: added.len() };
    let changes = GraphChanges {
        put_entities: vec![merged],
        delete_entities: sources.to_vec(),
        put_relations: added,
        delete_relations: gone,
    };
    Ok((changes, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(name: &str, observations: &[&str]) -> GraphEntity {
        GraphEntity {
            name: name.into(),
            entity_type: "person".into(),
            observations: observations.iter().map(|o| (*o).to_owned()).collect(),
        }
    }

    fn names(found: &[&Arc<Node>]) -> Vec<String> {
        found.iter().map(|e| e.name.clone()).collect()
    }

    /// The one-pass scan over the joined haystacks finds what a scan per entity finds:
    /// in entity order, each entity once however often it matches, never across two
    /// entities' text, and it follows changes to the graph.
    #[test]
    fn search_scans_the_joined_text_like_one_scan_per_entity() {
        let mut g = Graph::new(
            1,
            vec![
                entity("Ada", &["Lives in Lisbon", "lisbon again"]),
                entity("Bob", &["ends with lis"]),
                entity("Cy", &["bon appetit"]),
                entity("Dee", &["LISBON office"]),
            ],
            Vec::new(),
        );
        assert_eq!(names(&g.search("Lisbon")), ["Ada", "Dee"]);
        assert!(g.search("lisbon appetit").is_empty(), "no match across two entities");
        assert!(g.search("lis\nbon").is_empty(), "nor with the line break between them");
        assert_eq!(names(&g.search("person")), ["Ada", "Bob", "Cy", "Dee"]);
        assert!(g.search("nobody").is_empty());
        assert_eq!(names(&g.search("a\0b")), Vec::<String>::new(), "a NUL in the query scans entity by entity");
        g.remove("Ada");
        g.upsert(entity("Eve", &["moved to Lisbon"]));
        assert_eq!(names(&g.search("lisbon")), ["Dee", "Eve"]);
        g.upsert(entity("Dee", &["Porto office"]));
        assert_eq!(names(&g.search("lisbon")), ["Eve"]);
        let answer = g.subgraph(g.search("lisbon"));
        assert!(Arc::ptr_eq(&answer.entities[0], &g.entities[g.index["Eve"]]), "shared, not copied");
    }
}
