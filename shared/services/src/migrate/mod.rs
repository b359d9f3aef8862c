//! Import and export (SPEC §8, migration): memories and knowledge graphs in from the
//! reference MCP memory server's `memory.jsonl`, other memory products' exports (mem0's
//! shape, a generic `{text, metadata, created_at}` JSONL), a folder of Markdown notes and
//! our own bundle; out as our bundle or `memory.jsonl`.
//!
//! Every source is checked whole before anything is written, so a corrupt line
//! (reported with its line number) leaves nothing half-imported. Line-based sources
//! (`memory.jsonl`, JSON Lines, bundles) are read one line at a time ([`LineReader`]),
//! checked through ([`check_lines`]) and written in bounded batches ([`import_lines`]), so
//! an import's memory does not grow with its file; other sources are parsed whole
//! ([`Source`], [`import`]). Every item gets a SHA-256
//! of its canonical form and is read back after the write ([`ReadBack`] for graphs); an
//! item already there is left as it is, so importing the same source twice changes
//! nothing and an import cut short is completed by running it again. A bundle carries
//! each item's SHA-256, checked before the write.

use std::collections::BTreeMap;

use domain::graph::{GraphEntity, GraphRelation};
use domain::memory::{GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType};
use domain::principal::CallerContext;
use domain::{Error, Id, Result, Timestamp};
use ports::records::{Expect, MemoryStore as _};
use serde::Serialize;
use serde_json::{Value, json};

use crate::Services;

mod export;
mod parse;
mod stream;

pub use export::{ExportReport, export_bundle, export_memory_jsonl};
pub use parse::{LineReader, by_lines, parse_bundle, parse_markdown, parse_memories, parse_memory_jsonl};
pub use stream::{Checked, ReadBack, check_lines, import_lines};

/// The first line of a bundle.
pub const BUNDLE_FORMAT: &str = "continuity-bundle";
pub const BUNDLE_VERSION: u64 = 1;

/// Problems listed before giving up on a source.
const MAX_PROBLEMS: usize = 20;
/// Largest memory text taken from another product (our personal memory's limit).
const MAX_TEXT_BYTES: usize = 16 * 1024;

/// What a source is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// The reference memory server's `memory.jsonl` (entities and relations).
    MemoryJsonl,
    /// mem0's export: a JSON array (or `{"results": […]}`, or JSONL) of `{memory, metadata, created_at, …}`.
    Mem0,
    /// One memory per line: `{text, metadata, created_at}`.
    Jsonl,
    /// A folder of Markdown notes, one memory per note, front matter kept.
    Markdown,
    /// Our own bundle (`continuity export`).
    Bundle,
}

impl Format {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "memory-jsonl" => Self::MemoryJsonl,
            "mem0" => Self::Mem0,
            "jsonl" => Self::Jsonl,
            "markdown" => Self::Markdown,
            "bundle" => Self::Bundle,
            _ => return None,
        })
    }

    /// The format a file's first line says it is in.
    pub fn sniff(text: &str) -> Self {
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or_default();
        let v: Value = serde_json::from_str(first).unwrap_or(Value::Null);
        if v.get("format").and_then(Value::as_str) == Some(BUNDLE_FORMAT) {
            Self::Bundle
        } else if matches!(v.get("type").and_then(Value::as_str), Some("entity" | "relation")) {
            Self::MemoryJsonl
        } else if v.get("text").is_some() && v.get("memory").is_none() {
            Self::Jsonl
        } else {
            Self::Mem0
        }
    }
}

/// A problem in a source: where (line, or file of a folder) and what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub at: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

/// A memory brought in from a source.
#[derive(Clone, Debug, PartialEq)]
pub struct Incoming {
    /// Kept from a bundle; derived from the content otherwise (so a re-import finds it).
    pub id: Option<Id>,
    pub kind: String,
    pub body: String,
    pub created_at: Option<Timestamp>,
    pub metadata: Option<Value>,
    /// A bundle's whole entry (its state, lineage, times), written as it was.
    pub entry: Option<MemoryEntry>,
}

/// One graph of a source.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IncomingGraph {
    pub entities: Vec<GraphEntity>,
    pub relations: Vec<GraphRelation>,
}

/// A parsed source, checked whole.
#[derive(Clone, Debug, Default)]
pub struct Source {
    pub memories: Vec<Incoming>,
    /// By scope (`personal`, `project:<id>`); a `memory.jsonl` goes to the scope asked for.
    pub graphs: BTreeMap<String, IncomingGraph>,
}

impl Source {
    pub fn counts(&self) -> (usize, usize, usize) {
        let e = self.graphs.values().map(|g| g.entities.len()).sum();
        let r = self.graphs.values().map(|g| g.relations.len()).sum();
        (self.memories.len(), e, r)
    }

    /// How many items it holds.
    pub fn len(&self) -> usize {
        let (m, e, r) = self.counts();
        m + e + r
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn push(&mut self, item: Item) {
        match item {
            Item::Memory(m) => self.memories.push(*m),
            Item::Entity { scope, entity } => self.graphs.entry(scope).or_default().entities.push(entity),
            Item::Relation { scope, relation } => self.graphs.entry(scope).or_default().relations.push(relation),
        }
    }
}

/// One item of a source.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Memory(Box<Incoming>),
    Entity { scope: String, entity: GraphEntity },
    Relation { scope: String, relation: GraphRelation },
}

fn problem(at: impl Into<String>, message: impl Into<String>) -> Problem {
    Problem { at: at.into(), message: message.into() }
}

fn finish(source: Source, problems: Vec<Problem>) -> std::result::Result<Source, Vec<Problem>> {
    if problems.is_empty() { Ok(source) } else { Err(problems) }
}

/// The canonical form of a memory for its hash: what it says and when, not where it is
/// stored (tenant) or how often it was rewritten (version).
fn memory_canonical(m: &MemoryEntry) -> Value {
    let mut v = serde_json::to_value(m).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("tenant");
        o.remove("version");
        o.remove("scope");
        o.remove("created_by");
    }
    v
}

/// SHA-256 of a value's JSON (keys sorted: serde_json's maps are ordered).
pub fn hash(v: &Value) -> String {
    crate::sha256_hex(&v.to_string())
}

/// `principal` of `tenant` as the caller of an import or export run by an operator: the
/// memory scopes, with the principal's own teams and projects.
///
/// # Errors
/// `NOT_FOUND` for an unknown tenant or principal; `UNAVAILABLE`.
pub async fn principal_caller(s: &Services, tenant: &domain::TenantId, principal: &Id) -> Result<CallerContext> {
    use domain::principal::{Scope, Scopes, Toolsets};
    use ports::records::PrincipalStore as _;
    let t = s.admin.show_tenant(tenant).await?;
    let p = s
        .backend
        .records
        .get_principal(tenant, principal)
        .await?
        .ok_or_else(|| Error::not_found(format!("principal {principal} of tenant {tenant} (see `continuity user list`)")))?;
    Ok(CallerContext {
        tenant: t.id,
        principal: principal.clone(),
        scopes: Scopes([Scope::McpTools, Scope::MemoryRead, Scope::MemoryWrite, Scope::TenantRead].into_iter().collect()),
        plan: t.plan,
        teams: p.teams,
        projects: p.projects,
        credential: "cli".into(),
        client: None,
        toolsets: Toolsets::default(),
    })
}

/// What an import did (or, dry, would do).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct ImportReport {
    pub memories_created: usize,
    pub memories_already_there: usize,
    pub entities_created: usize,
    pub entities_extended: usize,
    pub relations_created: usize,
    /// Items read back after the write and found as written (by SHA-256).
    pub verified: usize,
    /// Items of the source gone through so far (new or already there).
    pub items: usize,
}

/// The id a memory from another product gets: from whose it becomes and its content, so
/// a re-import finds it and two people importing the same file do not collide.
fn derived_id(principal: &Id, m: &Incoming) -> Result<Id> {
    let basis = json!({"principal": principal, "body": m.body, "created_at": m.created_at.map(|t| t.0), "metadata": m.metadata});
    Id::new(format!("imp-{}", &hash(&basis)[..32]))
}

/// Writes a checked source for `caller` and reads it back: memories into the caller's
/// personal memory, graphs into their scopes. `progress` is told how many items are done.
///
/// # Errors
/// `FORBIDDEN` without `memory:write`; `UNAVAILABLE`; `INTERNAL` when an item read back
/// differs from what was written.
pub async fn import(
    s: &Services,
    caller: &CallerContext,
    source: &Source,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<ImportReport> {
    let mut report = ImportReport::default();
    import_batch(s, caller, source, &mut report, progress).await?;
    let back = ReadBack::load(s, caller, source.graphs.keys()).await?;
    for (scope, g) in &source.graphs {
        for e in &g.entities {
            back.entity(scope, e)?;
        }
        for r in &g.relations {
            back.relation(scope, r)?;
        }
        report.verified += g.entities.len() + g.relations.len();
    }
    Ok(report)
}

/// Writes one batch of a checked source for `caller`, adding to `report` and telling
/// `progress` the items done (`report.items`). Memories are
/// read back one by one as they are written; a graph's items are read back by
/// [`ReadBack`] once every batch is in (reading the whole graph after each batch would
/// make a large import quadratic).
///
/// # Errors
/// `FORBIDDEN` without `memory:write`; `UNAVAILABLE`; `INTERNAL` when a memory read back
/// differs from what was written.
pub async fn import_batch(
    s: &Services,
    caller: &CallerContext,
    batch: &Source,
    report: &mut ImportReport,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<()> {
    caller.scopes.require(domain::principal::Scope::MemoryWrite)?;
    let backend = &s.backend;
    let now = backend.clock.now();
    let scope = MemoryScope::Personal(caller.principal.to_string());
    for m in &batch.memories {
        let mut id = match &m.id {
            Some(id) => id.clone(),
            None => derived_id(&caller.principal, m)?,
        };
        // A bundle's id someone else's memory holds (another principal's export): the
        // entry gets its own id, derived so a re-import finds it again.
        if m.id.is_some() && backend.records.get_memory(&caller.tenant, &id).await?.is_some_and(|e| e.scope != scope) {
            id = Id::new(format!("imp-{}", &hash(&json!({"principal": caller.principal, "id": id}))[..32]))?;
        }
        let entry = match &m.entry {
            Some(e) => MemoryEntry {
                tenant: caller.tenant.clone(),
                id: id.clone(),
                scope: scope.clone(),
                created_by: caller.principal.clone(),
                version: 1,
                ..e.clone()
            },
            None => MemoryEntry {
                tenant: caller.tenant.clone(),
                id: id.clone(),
                memory_type: MemoryType::Personal,
                scope: scope.clone(),
                kind: m.kind.clone(),
                title: crate::tools::recall::title_of(&m.body),
                body: m.body.clone(),
                state: GovernanceState::Active,
                lineage: Lineage::default(),
                created_by: caller.principal.clone(),
                created_at: m.created_at.unwrap_or(now),
                updated_at: m.created_at.unwrap_or(now),
                version: 1,
                occurred_at: m.created_at,
                expires_at: None,
                metadata: m.metadata.clone(),
            },
        };
        let want = hash(&memory_canonical(&entry));
        match backend.records.get_memory(&caller.tenant, &id).await? {
            Some(existing) if existing.scope == scope => {
                report.memories_already_there += 1;
            }
            Some(_) => {
                return Err(Error::conflict(format!(
                    "memory {id} exists outside your personal memory; nothing more was imported"
                )));
            }
            None => {
                let stored = backend.records.put_memory(&entry, Expect::Absent).await?;
                if stored.state == GovernanceState::Active {
                    s.search
                        .index(crate::search::IndexRequest {
                            tenant: &stored.tenant,
                            scope: &stored.scope,
                            kind: ports::search::DocKind::Memory,
                            doc: &stored.id,
                            title: &stored.title,
                            body: &stored.body,
                            at: stored.updated_at,
                            occurred: stored.occurred_at,
                        })
                        .await?;
                }
                let back = backend.records.get_memory(&caller.tenant, &id).await?;
                if back.as_ref().map(|b| hash(&memory_canonical(b))) != Some(want) {
                    return Err(Error::internal(format!("memory {id} read back differs from what was written")));
                }
                report.memories_created += 1;
                report.verified += 1;
            }
        }
        report.items += 1;
        progress(report.items);
    }
    for (scope, g) in &batch.graphs {
        let r = s.graph.import(caller, scope, &g.entities, &g.relations).await?;
        report.entities_created += r.created_entities;
        report.entities_extended += r.extended_entities;
        report.relations_created += r.created_relations;
        report.items += g.entities.len() + g.relations.len();
        progress(report.items);
    }
    Ok(())
}
