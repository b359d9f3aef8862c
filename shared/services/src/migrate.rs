//! Import and export (SPEC §8, migration): memories and knowledge graphs in from the
//! reference MCP memory server's `memory.jsonl`, other memory products' exports (mem0's
//! shape, a generic `{text, metadata, created_at}` JSONL), a folder of Markdown notes and
//! our own bundle; out as our bundle or `memory.jsonl`.
//!
//! Every source is checked whole before anything is written, so a corrupt line
//! (reported with its line number) leaves nothing half-imported. Line-based sources
//! (`memory.jsonl`, JSON Lines, bundles) are read one line at a time ([`LineReader`]) and
//! written in bounded batches ([`import_batch`]), so an import's memory does not grow
//! with its file; other sources are parsed whole ([`Source`]). Every item gets a SHA-256
//! of its canonical form and is read back after the write ([`ReadBack`] for graphs); an
//! item already there is left as it is, so importing the same source twice changes
//! nothing and an import cut short is completed by running it again. A bundle carries
//! each item's SHA-256, checked before the write.

use std::collections::{BTreeMap, HashSet};

use domain::graph::{GraphEntity, GraphRelation};
use domain::memory::{GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType};
use domain::principal::CallerContext;
use domain::{Error, Id, PageRequest, Result, Timestamp};
use ports::records::{Expect, MemoryStore as _};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::Services;

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

/// Reads a line-based source one line at a time: `memory.jsonl`, a bundle, or JSON Lines
/// of memories (mem0's or `{text, metadata, created_at}`). Give it every line, blank ones
/// included, so the line numbers it reports are the file's.
#[derive(Debug)]
pub struct LineReader {
    format: Format,
    scope: String,
    line: usize,
    header: Header,
}

#[derive(Debug, PartialEq, Eq)]
enum Header {
    Awaited,
    Read,
    Missing,
}

impl LineReader {
    /// `scope` is the graph a `memory.jsonl` goes into. `None` for Markdown, which has no
    /// lines to read one by one.
    pub fn new(format: Format, scope: &str) -> Option<Self> {
        let header = if format == Format::Bundle { Header::Awaited } else { Header::Read };
        (format != Format::Markdown).then(|| Self { format, scope: scope.to_owned(), line: 0, header })
    }

    /// The item on the next line (none for a blank line or a bundle's header).
    ///
    /// # Errors
    /// What is wrong with the line, with its number.
    pub fn line(&mut self, line: &str) -> std::result::Result<Option<Item>, Problem> {
        self.line += 1;
        if line.trim().is_empty() {
            return Ok(None);
        }
        let at = format!("line {}", self.line);
        match self.format {
            Format::MemoryJsonl => graph_line(at, line, &self.scope).map(Some),
            Format::Bundle if self.header == Header::Awaited => {
                let h = serde_json::from_str::<Value>(line).unwrap_or(Value::Null);
                if h.get("format").and_then(Value::as_str) != Some(BUNDLE_FORMAT) {
                    self.header = Header::Missing;
                    return Err(problem(at, format!("not a {BUNDLE_FORMAT} header")));
                }
                self.header = Header::Read;
                if h.get("version").and_then(Value::as_u64) != Some(BUNDLE_VERSION) {
                    return Err(problem(at, format!("bundle version {} is not {BUNDLE_VERSION}", h["version"])));
                }
                Ok(None)
            }
            Format::Bundle => bundle_line(at, line).map(Some),
            Format::Mem0 | Format::Jsonl => match serde_json::from_str::<Value>(line) {
                Ok(v) => memory_from_value(at, v).map(|m| Some(Item::Memory(Box::new(m)))),
                Err(e) => Err(problem(at, format!("not JSON ({e})"))),
            },
            Format::Markdown => Err(problem(at, "Markdown notes are not read by lines")),
        }
    }

    /// Whether the source cannot be this format at all (a bundle without its header): no
    /// use reading on.
    pub fn hopeless(&self) -> bool {
        self.header == Header::Missing
    }

    /// At the end of the source: what is missing (a bundle's header in an empty file).
    pub fn end(&self) -> Option<Problem> {
        (self.header == Header::Awaited).then(|| problem("line 1", format!("not a {BUNDLE_FORMAT} header")))
    }
}

/// Whether a file whose first non-blank line is `first` is read line by line in
/// `format`: always for `memory.jsonl` and bundles; for memories, when that line is a
/// whole JSON object of its own (JSON Lines), not the start of an array or of
/// `{"results": […]}`.
pub fn by_lines(format: Format, first: &str) -> bool {
    match format {
        Format::MemoryJsonl | Format::Bundle => true,
        Format::Mem0 | Format::Jsonl => serde_json::from_str::<Value>(first)
            .ok()
            .and_then(|v| v.as_object().map(|o| !o.contains_key("results") && !o.contains_key("memories")))
            .unwrap_or(false),
        Format::Markdown => false,
    }
}

/// Reads a whole line-based text.
fn parse_lines(text: &str, format: Format, scope: &str) -> std::result::Result<Source, Vec<Problem>> {
    let Some(mut reader) = LineReader::new(format, scope) else {
        return Err(vec![problem("file", "Markdown notes are not read by lines")]);
    };
    let mut source = Source::default();
    let mut problems = Vec::new();
    for line in text.lines() {
        if problems.len() >= MAX_PROBLEMS {
            break;
        }
        match reader.line(line) {
            Ok(Some(item)) => source.push(item),
            Ok(None) => {}
            Err(p) => problems.push(p),
        }
        if reader.hopeless() {
            break;
        }
    }
    problems.extend(reader.end());
    finish(source, problems)
}

fn problem(at: impl Into<String>, message: impl Into<String>) -> Problem {
    Problem { at: at.into(), message: message.into() }
}

fn finish(source: Source, problems: Vec<Problem>) -> std::result::Result<Source, Vec<Problem>> {
    if problems.is_empty() { Ok(source) } else { Err(problems) }
}

/// Parses the reference server's `memory.jsonl` into the graph of `scope`.
///
/// # Errors
/// Every problem found (up to 20), each with its line number.
pub fn parse_memory_jsonl(text: &str, scope: &str) -> std::result::Result<Source, Vec<Problem>> {
    parse_lines(text, Format::MemoryJsonl, scope)
}

/// One line of a `memory.jsonl`: an entity or a relation of `scope`.
fn graph_line(at: String, line: &str, scope: &str) -> std::result::Result<Item, Problem> {
    let v: Value = serde_json::from_str(line).map_err(|e| problem(at.clone(), format!("not JSON ({e})")))?;
    let mut o = v.as_object().cloned().unwrap_or_default();
    let kind = o.remove("type");
    let scope = scope.to_owned();
    match kind.as_ref().and_then(Value::as_str) {
        Some("entity") => match serde_json::from_value::<GraphEntity>(Value::Object(o)) {
            Ok(entity) => match entity.validate() {
                Ok(()) => Ok(Item::Entity { scope, entity }),
                Err(err) => Err(problem(at, err.message)),
            },
            Err(e) => Err(problem(at, format!("not an entity ({e})"))),
        },
        Some("relation") => match serde_json::from_value::<GraphRelation>(Value::Object(o)) {
            Ok(relation) => match relation.validate() {
                Ok(()) => Ok(Item::Relation { scope, relation }),
                Err(err) => Err(problem(at, err.message)),
            },
            Err(e) => Err(problem(at, format!("not a relation ({e})"))),
        },
        _ => Err(problem(at, "\"type\" must be \"entity\" or \"relation\"")),
    }
}

/// Parses memories exported by another product: a JSON array, an object holding one
/// (`results`, `memories`), or one JSON object per line. The text is `memory`, `text` or
/// `content`; `created_at` (or `createdAt`, `timestamp`) is kept as when it happened;
/// everything else is kept as metadata.
///
/// # Errors
/// Every problem found (up to 20), with its line (JSONL) or item number (JSON).
pub fn parse_memories(text: &str) -> std::result::Result<Source, Vec<Problem>> {
    let trimmed = text.trim_start();
    let mut items: Vec<(String, Value)> = Vec::new();
    let mut problems = Vec::new();
    let whole: Option<Value> = if trimmed.starts_with('[') || (trimmed.starts_with('{') && !text.trim().contains('\n')) {
        serde_json::from_str(text).ok()
    } else if trimmed.starts_with('{') {
        // One object over several lines, or JSON Lines.
        serde_json::from_str::<Value>(text).ok().filter(|v| v.get("results").is_some() || v.get("memories").is_some())
    } else {
        None
    };
    match whole {
        Some(Value::Array(a)) => items.extend(a.into_iter().enumerate().map(|(i, v)| (format!("item {}", i + 1), v))),
        Some(Value::Object(mut o)) if o.contains_key("results") || o.contains_key("memories") => {
            let list = o.remove("results").or_else(|| o.remove("memories")).unwrap_or(Value::Null);
            match list {
                Value::Array(a) => items.extend(a.into_iter().enumerate().map(|(i, v)| (format!("item {}", i + 1), v))),
                _ => problems.push(problem("file", "\"results\" is not a list")),
            }
        }
        Some(v @ Value::Object(_)) => items.push(("line 1".into(), v)),
        _ => return parse_lines(text, Format::Jsonl, ""),
    }
    let mut source = Source::default();
    for (at, v) in items {
        if problems.len() >= MAX_PROBLEMS {
            break;
        }
        match memory_from_value(at, v) {
            Ok(m) => source.memories.push(m),
            Err(p) => problems.push(p),
        }
    }
    finish(source, problems)
}

/// One memory exported by another product (see [`parse_memories`]).
fn memory_from_value(at: String, v: Value) -> std::result::Result<Incoming, Problem> {
    let Value::Object(mut o) = v else {
        return Err(problem(at, "not an object"));
    };
    let body = ["memory", "text", "content"].iter().find_map(|k| o.remove(*k)).and_then(|v| v.as_str().map(str::to_owned));
    let Some(body) = body.map(|b| b.trim().to_owned()).filter(|b| !b.is_empty()) else {
        return Err(problem(at, "no text (\"memory\", \"text\" or \"content\")"));
    };
    if body.len() > MAX_TEXT_BYTES || body.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(problem(at, format!("the text must be at most {MAX_TEXT_BYTES} bytes without control characters")));
    }
    let created = ["created_at", "createdAt", "timestamp"].iter().find_map(|k| o.get(*k).cloned());
    let created_at = match created {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => match Timestamp::parse("created_at", &s) {
            Ok(t) => Some(t),
            Err(_) => return Err(problem(at, format!("created_at {s:?} is not a date or RFC 3339 time"))),
        },
        Some(Value::Number(n)) => n.as_i64().map(|secs| Timestamp(if secs > 100_000_000_000 { secs } else { secs * 1000 })),
        Some(_) => return Err(problem(at, "created_at is not a time")),
    };
    let metadata = (!o.is_empty()).then_some(Value::Object(o));
    Ok(Incoming { id: None, kind: "context".into(), body, created_at, metadata, entry: None })
}

/// Parses a folder of Markdown notes (`(relative path, text)`): one memory per note, its
/// body the note without the front matter; the front matter (`key: value` lines between
/// `---` lines) kept as metadata with the note's path.
///
/// # Errors
/// Every problem found (up to 20), by file.
pub fn parse_markdown(notes: &[(String, String)]) -> std::result::Result<Source, Vec<Problem>> {
    let mut source = Source::default();
    let mut problems = Vec::new();
    for (path, text) in notes {
        if problems.len() >= MAX_PROBLEMS {
            break;
        }
        let (front, body) = split_front_matter(text);
        let body = body.trim().to_owned();
        if body.is_empty() {
            problems.push(problem(path.clone(), "the note has no text"));
            continue;
        }
        if body.len() > MAX_TEXT_BYTES {
            problems.push(problem(path.clone(), format!("longer than {MAX_TEXT_BYTES} bytes")));
            continue;
        }
        let mut meta = Map::new();
        meta.insert("path".into(), json!(path));
        let mut created_at = None;
        if let Some(front) = front {
            let mut fields = Map::new();
            for line in front.lines() {
                if let Some((k, v)) = line.split_once(':')
                    && !k.trim().is_empty()
                    && !k.starts_with(char::is_whitespace)
                {
                    let v = v.trim().trim_matches('"').trim_matches('\'').to_owned();
                    if matches!(k.trim(), "date" | "created" | "created_at") {
                        created_at = Timestamp::parse("date", &v).ok();
                    }
                    fields.insert(k.trim().to_owned(), json!(v));
                }
            }
            meta.insert("front_matter".into(), Value::Object(fields));
            meta.insert("front_matter_text".into(), json!(front));
        }
        source.memories.push(Incoming {
            id: None,
            kind: "context".into(),
            body,
            created_at,
            metadata: Some(Value::Object(meta)),
            entry: None,
        });
    }
    finish(source, problems)
}

fn split_front_matter(text: &str) -> (Option<&str>, &str) {
    let t = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = t.strip_prefix("---\n").or_else(|| t.strip_prefix("---\r\n")) else { return (None, t) };
    for end in ["\n---\n", "\n---\r\n"] {
        if let Some(i) = rest.find(end) {
            return (Some(&rest[..i]), &rest[i + end.len()..]);
        }
    }
    if let Some(front) = rest.strip_suffix("\n---") {
        return (Some(front), "");
    }
    (None, t)
}

/// A bundle line: one item with its SHA-256.
#[derive(Serialize)]
struct Line<'a> {
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<&'a str>,
    sha256: String,
    item: Value,
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

/// Parses our bundle, checking every line's SHA-256.
///
/// # Errors
/// Every problem found (up to 20), with its line number.
pub fn parse_bundle(text: &str) -> std::result::Result<Source, Vec<Problem>> {
    parse_lines(text, Format::Bundle, "")
}

/// One line of a bundle after its header, its SHA-256 checked.
fn bundle_line(at: String, line: &str) -> std::result::Result<Item, Problem> {
    let v: Value = serde_json::from_str(line).map_err(|e| problem(at.clone(), format!("not JSON ({e})")))?;
    let altered = || "its SHA-256 does not match: the line was altered".to_owned();
    let item = v.get("item").cloned().unwrap_or(Value::Null);
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    let scope = v.get("scope").and_then(Value::as_str).unwrap_or("personal").to_owned();
    let claimed = v.get("sha256").and_then(Value::as_str).unwrap_or_default();
    let parsed = match kind {
        "memory" => serde_json::from_value::<MemoryEntry>(item).map_err(|e| e.to_string()).and_then(|m| {
            if hash(&memory_canonical(&m)) != claimed {
                return Err(altered());
            }
            Ok(Item::Memory(Box::new(Incoming {
                id: Some(m.id.clone()),
                kind: m.kind.clone(),
                body: m.body.clone(),
                created_at: Some(m.created_at),
                metadata: m.metadata.clone(),
                entry: Some(m),
            })))
        }),
        "entity" => serde_json::from_value::<GraphEntity>(item.clone()).map_err(|e| e.to_string()).and_then(|entity| {
            entity.validate().map_err(|e| e.message)?;
            if hash(&item) != claimed {
                return Err(altered());
            }
            Ok(Item::Entity { scope, entity })
        }),
        "relation" => serde_json::from_value::<GraphRelation>(item.clone()).map_err(|e| e.to_string()).and_then(|relation| {
            relation.validate().map_err(|e| e.message)?;
            if hash(&item) != claimed {
                return Err(altered());
            }
            Ok(Item::Relation { scope, relation })
        }),
        other => Err(format!("unknown kind {other:?}")),
    };
    parsed.map_err(|m| problem(at, m))
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
                    crate::search::SearchService::new(backend.clone())
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

/// Graphs as the store holds them after an import (not the in-process copy), to check
/// the source's items against: every entity with every imported observation, every
/// relation. Kept as 128-bit digests (SHA-256, cut), about 40 bytes an item, so a graph
/// of a million items is read back in tens of megabytes.
pub struct ReadBack {
    digests: HashSet<[u8; 16]>,
}

fn digest(parts: &[&str]) -> [u8; 16] {
    use sha2::{Digest as _, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    let mut out = [0; 16];
    out.copy_from_slice(&h.finalize()[..16]);
    out
}

impl ReadBack {
    /// Reads the graphs of `scopes` from the store, dropping the service's in-process copy
    /// of each first (the writes are done; this way the two are never held together).
    ///
    /// # Errors
    /// `FORBIDDEN`; `UNAVAILABLE`.
    pub async fn load<'a>(s: &Services, caller: &CallerContext, scopes: impl IntoIterator<Item = &'a String>) -> Result<Self> {
        let mut digests = HashSet::new();
        for scope in scopes {
            s.graph.release(caller, scope);
            let (entities, relations) = s.graph.stored(caller, scope).await?;
            for e in entities {
                digests.insert(digest(&["entity", scope, &e.name]));
                for o in &e.observations {
                    digests.insert(digest(&["observation", scope, &e.name, o]));
                }
            }
            for r in relations {
                digests.insert(digest(&["relation", scope, &r.from, &r.relation_type, &r.to]));
            }
        }
        Ok(Self { digests })
    }

    /// # Errors
    /// `INTERNAL` when the entity or one of its observations is not in the store.
    pub fn entity(&self, scope: &str, e: &GraphEntity) -> Result<()> {
        let has = |parts: &[&str]| self.digests.contains(&digest(parts));
        if has(&["entity", scope, &e.name]) && e.observations.iter().all(|o| has(&["observation", scope, &e.name, o])) {
            Ok(())
        } else {
            Err(Error::internal(format!("entity {:?} read back differs from what was written", e.name)))
        }
    }

    /// # Errors
    /// `INTERNAL` when the relation is not in the store.
    pub fn relation(&self, scope: &str, r: &GraphRelation) -> Result<()> {
        if self.digests.contains(&digest(&["relation", scope, &r.from, &r.relation_type, &r.to])) {
            Ok(())
        } else {
            Err(Error::internal(format!("relation {} -{}-> {} was not read back", r.from, r.relation_type, r.to)))
        }
    }

    /// Checks a graph item; `true` when it was one (memories are read back as written).
    ///
    /// # Errors
    /// As [`Self::entity`] and [`Self::relation`].
    pub fn item(&self, item: &Item) -> Result<bool> {
        match item {
            Item::Memory(_) => Ok(false),
            Item::Entity { scope, entity } => self.entity(scope, entity).map(|()| true),
            Item::Relation { scope, relation } => self.relation(scope, relation).map(|()| true),
        }
    }
}

/// What an export wrote.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct ExportReport {
    pub memories: usize,
    pub entities: usize,
    pub relations: usize,
    /// SHA-256 over the items' hashes in order: equal for equal data.
    pub digest: String,
}

/// Writes the caller's bundle: a header, then every personal memory (any state) and the
/// knowledge graph of the caller's personal scope and of each of their projects, one item
/// per line with its SHA-256.
///
/// # Errors
/// `FORBIDDEN` without `memory:read`; `UNAVAILABLE`; the writer's failure as `INTERNAL`.
pub async fn export_bundle(
    s: &Services,
    caller: &CallerContext,
    out: &mut (dyn std::io::Write + Send),
    progress: &(dyn Fn(usize) + Sync),
) -> Result<ExportReport> {
    caller.scopes.require(domain::principal::Scope::MemoryRead)?;
    let io = |e: std::io::Error| Error::internal(format!("writing the export: {e}"));
    let header = json!({"format": BUNDLE_FORMAT, "version": BUNDLE_VERSION, "tenant": caller.tenant,
        "principal": caller.principal, "exported_at": s.backend.clock.now().to_rfc3339()});
    writeln!(out, "{header}").map_err(io)?;
    let mut report = ExportReport::default();
    let mut hashes = Vec::new();
    let scope = MemoryScope::Personal(caller.principal.to_string());
    let mut page = PageRequest::first(500);
    let mut memories = Vec::new();
    loop {
        let p = s.backend.records.list_memory(&caller.tenant, &scope, &page).await?;
        memories.extend(p.items);
        match p.next_cursor {
            Some(c) => page = PageRequest::after(500, c),
            None => break,
        }
    }
    memories.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
    let mut done = 0;
    for m in &memories {
        let h = hash(&memory_canonical(m));
        let item = serde_json::to_value(m).map_err(|e| Error::internal(format!("memory {}: {e}", m.id)))?;
        let line = Line { kind: "memory", scope: None, sha256: h.clone(), item };
        writeln!(out, "{}", serde_json::to_string(&line).unwrap_or_default()).map_err(io)?;
        hashes.push(h);
        report.memories += 1;
        done += 1;
        progress(done);
    }
    let mut scopes = vec!["personal".to_owned()];
    scopes.extend(caller.projects.iter().map(|p| format!("project:{p}")));
    for scope in &scopes {
        let (mut entities, mut relations) = s.graph.stored(caller, scope).await?;
        entities.sort_by(|a, b| a.name.cmp(&b.name));
        relations.sort();
        for e in &entities {
            let item = serde_json::to_value(e).unwrap_or(Value::Null);
            let h = hash(&item);
            writeln!(
                out,
                "{}",
                serde_json::to_string(&Line { kind: "entity", scope: Some(scope), sha256: h.clone(), item }).unwrap_or_default()
            )
            .map_err(io)?;
            hashes.push(h);
        }
        for r in &relations {
            let item = serde_json::to_value(r).unwrap_or(Value::Null);
            let h = hash(&item);
            writeln!(
                out,
                "{}",
                serde_json::to_string(&Line { kind: "relation", scope: Some(scope), sha256: h.clone(), item })
                    .unwrap_or_default()
            )
            .map_err(io)?;
            hashes.push(h);
        }
        report.entities += entities.len();
        report.relations += relations.len();
        done += entities.len() + relations.len();
        progress(done);
    }
    report.digest = crate::sha256_hex(&hashes.join("\n"));
    Ok(report)
}

/// Writes one scope's knowledge graph as the reference server's `memory.jsonl`
/// (entities, then relations; its key order).
///
/// # Errors
/// `FORBIDDEN`; `UNAVAILABLE`; the writer's failure as `INTERNAL`.
pub async fn export_memory_jsonl(
    s: &Services,
    caller: &CallerContext,
    scope: &str,
    out: &mut (dyn std::io::Write + Send),
) -> Result<ExportReport> {
    let io = |e: std::io::Error| Error::internal(format!("writing the export: {e}"));
    let (mut entities, mut relations) = s.graph.stored(caller, scope).await?;
    entities.sort_by(|a, b| a.name.cmp(&b.name));
    relations.sort();
    let mut hashes = Vec::new();
    for e in &entities {
        let line = format!(
            "{{\"type\":\"entity\",\"name\":{},\"entityType\":{},\"observations\":{}}}",
            json!(e.name),
            json!(e.entity_type),
            json!(e.observations)
        );
        writeln!(out, "{line}").map_err(io)?;
        hashes.push(hash(&serde_json::to_value(e).unwrap_or(Value::Null)));
    }
    for r in &relations {
        let line = format!(
            "{{\"type\":\"relation\",\"from\":{},\"to\":{},\"relationType\":{}}}",
            json!(r.from),
            json!(r.to),
            json!(r.relation_type)
        );
        writeln!(out, "{line}").map_err(io)?;
        hashes.push(hash(&serde_json::to_value(r).unwrap_or(Value::Null)));
    }
    Ok(ExportReport {
        memories: 0,
        entities: entities.len(),
        relations: relations.len(),
        digest: crate::sha256_hex(&hashes.join("\n")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_line_is_named_and_nothing_is_returned() {
        let text = "{\"type\":\"entity\",\"name\":\"a\",\"entityType\":\"t\",\"observations\":[\"x\"]}\n{\"type\":\"entity\",\"name\":\n{\"type\":\"relation\",\"from\":\"a\",\"to\":\"b\",\"relationType\":\"r\"}\n{\"type\":\"thing\"}\n";
        let problems = parse_memory_jsonl(text, "personal").unwrap_err();
        assert_eq!(problems.iter().map(|p| p.at.as_str()).collect::<Vec<_>>(), ["line 2", "line 4"]);
        let ok = parse_memory_jsonl("{\"type\":\"relation\",\"from\":\"a\",\"to\":\"b\",\"relationType\":\"r\"}\n", "personal")
            .unwrap();
        assert_eq!(ok.counts(), (0, 0, 1));
    }

    #[test]
    fn lines_are_read_one_by_one_with_the_files_numbers() {
        let mut r = LineReader::new(Format::MemoryJsonl, "project:apollo").unwrap();
        assert_eq!(r.line("").unwrap(), None);
        let item = r.line("{\"type\":\"relation\",\"from\":\"a\",\"to\":\"b\",\"relationType\":\"r\"}").unwrap();
        assert!(matches!(item, Some(Item::Relation { ref scope, .. }) if scope == "project:apollo"));
        assert_eq!(r.line("{\"type\":\"thing\"}").unwrap_err().at, "line 3");
        assert!(LineReader::new(Format::Markdown, "personal").is_none());

        // A bundle: its header first, or nothing more is worth reading.
        let mut b = LineReader::new(Format::Bundle, "").unwrap();
        assert_eq!(b.end().unwrap().at, "line 1", "an empty file has no header");
        assert_eq!(b.line("{\"text\":\"x\"}").unwrap_err().message, "not a continuity-bundle header");
        assert!(b.hopeless());
        let p = parse_bundle("\n{\"text\":\"x\"}\n{\"also\":1}\n").unwrap_err();
        assert_eq!(p, vec![problem("line 2", "not a continuity-bundle header")], "only the header is reported");
        assert_eq!(parse_bundle("").unwrap_err()[0].at, "line 1");

        // Memories are read by lines only when the first line is a whole object of its own.
        assert!(by_lines(Format::Jsonl, "{\"text\":\"a\"}"));
        assert!(!by_lines(Format::Mem0, "{\"results\":[{\"memory\":\"a\"}]}"));
        assert!(!by_lines(Format::Mem0, "["));
        assert!(!by_lines(Format::Mem0, "{"));
        assert!(by_lines(Format::MemoryJsonl, "anything"));
        assert!(!by_lines(Format::Markdown, "# notes"));
    }

    #[test]
    fn mem0_and_generic_shapes() {
        let mem0 = r#"{"results":[{"id":"m1","memory":"Likes tea","user_id":"ada","created_at":"2025-01-02T03:04:05Z","metadata":{"src":"chat"},"categories":["food"]}]}"#;
        let s = parse_memories(mem0).unwrap();
        assert_eq!(s.memories[0].body, "Likes tea");
        assert_eq!(s.memories[0].metadata.as_ref().unwrap()["categories"][0], "food");
        assert!(s.memories[0].created_at.is_some());
        assert_eq!(Format::sniff(mem0), Format::Mem0);
        let generic =
            "{\"text\":\"Ships on Fridays\",\"metadata\":{\"team\":\"web\"},\"created_at\":\"2026-03-01\"}\n{\"text\":\"\"}\n";
        assert_eq!(Format::sniff(generic), Format::Jsonl);
        let p = parse_memories(generic).unwrap_err();
        assert_eq!(p[0].at, "line 2");
        let array = r#"[{"memory":"a"},{"memory":"b","created_at":1700000000}]"#;
        assert_eq!(parse_memories(array).unwrap().memories[1].created_at, Some(Timestamp(1_700_000_000_000)));
    }

    #[test]
    fn markdown_notes_keep_their_front_matter() {
        let notes = vec![
            ("a.md".to_owned(), "---\ntitle: Deploys\ndate: 2026-02-03\ntags: [ops]\n---\nWe deploy on Tuesdays.\n".to_owned()),
            ("b.md".to_owned(), "Plain note.".to_owned()),
            ("c.md".to_owned(), "---\ntitle: empty\n---\n".to_owned()),
        ];
        let p = parse_markdown(&notes).unwrap_err();
        assert_eq!(p, vec![problem("c.md", "the note has no text")]);
        let s = parse_markdown(&notes[..2]).unwrap();
        assert_eq!(s.memories[0].body, "We deploy on Tuesdays.");
        let meta = s.memories[0].metadata.as_ref().unwrap();
        assert_eq!(meta["front_matter"]["title"], "Deploys");
        assert_eq!(meta["front_matter"]["tags"], "[ops]");
        assert!(s.memories[0].created_at.is_some());
        assert_eq!(s.memories[1].metadata.as_ref().unwrap()["path"], "b.md");
    }
}
