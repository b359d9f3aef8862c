//! The dashboard's figures for one tenant (seed 002's stats; `GET /api/stats` and the
//! dashboard's overview): what the store holds — entities, relationships, signals,
//! memories by scope and state, proposals waiting, connectors and their status, the work
//! queue's depth — counted from the store, and how this process has served — cache hit
//! ratio, search and tool latency (the deployment's figures: the operator's tenant
//! only). Counts are exact up to [`MAX_COUNT`] per figure; figures are reused for 15 s.
//! Also what the dashboard's pages read: recent memories, an entry with its lineage, the
//! audit ledger filtered.

use std::collections::BTreeMap;

use domain::memory::MemoryEntry;
use domain::principal::{CallerContext, Scope};
use domain::{Error, PageRequest, Result};
use ports::records::{ConnectorStore as _, MemoryStore as _};
use serde::Serialize;

/// The most any one figure counts to (beyond, it says this many).
pub const MAX_COUNT: u64 = 1_000_000;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stats {
    pub tenant: String,
    pub generated_at: String,
    pub entities: u64,
    pub relationships: u64,
    pub signals: u64,
    /// Memory entries by scope kind (`org`, `team`, `project`, `personal`, `session`)
    /// and governance state.
    pub memories: BTreeMap<String, BTreeMap<String, u64>>,
    pub proposals_waiting: u64,
    pub connectors: Vec<ConnectorFigure>,
    /// Messages waiting in the work queue. This and the next two are the deployment's
    /// (every tenant's), so only the operator's tenant sees them.
    pub queue_depth: Option<u64>,
    pub cache: Option<CacheFigure>,
    pub latency: Option<LatencyFigures>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ConnectorFigure {
    pub source: String,
    pub state: String,
    pub progress: Option<f64>,
    pub error: Option<String>,
    pub updated_at: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CacheFigure {
    pub hits: u64,
    pub misses: u64,
    /// hits / (hits + misses), when there was any lookup.
    pub hit_ratio: Option<f64>,
}

/// Calls and mean latency of this process (since it started).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencyFigure {
    pub calls: u64,
    pub mean_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencyFigures {
    /// Every MCP tool call (`mcp:{tool}` routes).
    pub tools: LatencyFigure,
    /// The search tools (`memory.search`, `memory.search_org`, `kb.search`, `spine.entity.search`, `search_nodes`).
    pub search: LatencyFigure,
}

fn latency(routes: &[metrics::RouteTotals], pick: impl Fn(&str) -> bool) -> LatencyFigure {
    let (calls, secs) = routes.iter().filter(|r| pick(&r.route)).fold((0u64, 0f64), |(c, s), r| (c + r.requests, s + r.seconds));
    LatencyFigure { calls, mean_ms: (calls > 0).then(|| (secs * 1000.0 / calls as f64 * 100.0).round() / 100.0) }
}

/// The caller's tenant's figures. Needs `tenant:read` or `admin`.
///
/// # Errors
/// `FORBIDDEN` without either scope; `UNAVAILABLE`.
pub async fn for_caller(s: &crate::Services, caller: &CallerContext) -> Result<Stats> {
    if caller.scopes.require(Scope::TenantRead).is_err() && caller.scopes.require(Scope::Admin).is_err() {
        return Err(Error::missing_scope("tenant:read"));
    }
    let key = caller.tenant.to_string();
    if let Some(hit) = CACHE.lock().ok().and_then(|c| c.get(&key).filter(|(at, _)| at.elapsed() < FRESH).map(|(_, s)| s.clone()))
    {
        return Ok(hit);
    }
    let stats = compute(s, caller).await?;
    if let Ok(mut c) = CACHE.lock() {
        if c.len() > 10_000 {
            c.clear();
        }
        c.insert(key, (std::time::Instant::now(), stats.clone()));
    }
    Ok(stats)
}

/// How long figures are reused: the overview refreshes every 30 s and `/api/stats` may be
/// polled, while each computation counts every record of the tenant.
const FRESH: std::time::Duration = std::time::Duration::from_secs(15);

static CACHE: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, Stats)>>> =
    std::sync::LazyLock::new(Default::default);

async fn compute(s: &crate::Services, caller: &CallerContext) -> Result<Stats> {
    let backend = &s.backend;
    let operator = s.admin.show_tenant(&caller.tenant).await?.operator;
    let t = caller.tenant.as_str();
    let r = &backend.records;
    let entities = r.count(t, "entity", "", MAX_COUNT).await?;
    let relationships = r.count(t, "rel_out", "", MAX_COUNT).await?;
    let signals = r.count(t, "signal", "", MAX_COUNT).await?;
    let proposals_waiting = r.count(t, "proposal_by_state", "awaiting_approval#", MAX_COUNT).await?;
    let mut memories: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut page = PageRequest::first(500);
    let mut seen = 0u64;
    loop {
        let p = r.list_all_memory(&caller.tenant, &page).await?;
        for m in &p.items {
            count_memory(&mut memories, m);
        }
        seen += p.items.len() as u64;
        match p.next_cursor {
            Some(c) if seen < MAX_COUNT => page = PageRequest::after(500, c),
            _ => break,
        }
    }
    let mut connectors = Vec::new();
    let mut page = PageRequest::first(100);
    loop {
        let p = r.list_connectors(&caller.tenant, &page).await?;
        connectors.extend(p.items.into_iter().map(|c| ConnectorFigure {
            source: c.source.as_str().to_owned(),
            state: c.state.to_string(),
            progress: c.progress,
            error: c.error_message,
            updated_at: c.updated_at.to_rfc3339(),
        }));
        match p.next_cursor {
            Some(c) => page = PageRequest::after(100, c),
            None => break,
        }
    }
    let queue_depth = if operator { backend.queue.depth().await.ok() } else { None };
    let snap = metrics::snapshot();
    let lookups = snap.cache_hits + snap.cache_misses;
    let cache = operator.then(|| CacheFigure {
        hits: snap.cache_hits,
        misses: snap.cache_misses,
        hit_ratio: (lookups > 0).then(|| (snap.cache_hits as f64 / lookups as f64 * 1000.0).round() / 1000.0),
    });
    let latency = operator.then(|| LatencyFigures {
        tools: latency(&snap.routes, is_tool_route),
        search: latency(&snap.routes, |r| is_tool_route(r) && r.contains("search")),
    });
    Ok(Stats {
        tenant: caller.tenant.to_string(),
        generated_at: backend.clock.now().to_rfc3339(),
        entities,
        relationships,
        signals,
        memories,
        proposals_waiting,
        connectors,
        queue_depth,
        cache,
        latency,
    })
}

/// Whether a request route is an MCP tool call (`mcp:{tool}`), not a protocol method.
fn is_tool_route(r: &str) -> bool {
    r.strip_prefix("mcp:").is_some_and(|t| !t.contains('/') && !matches!(t, "initialize" | "ping" | "other" | "message"))
}

fn count_memory(out: &mut BTreeMap<String, BTreeMap<String, u64>>, m: &MemoryEntry) {
    *out.entry(m.scope.kind().to_owned()).or_default().entry(m.state.name().to_owned()).or_default() += 1;
}

/// The newest memory entries (at most 100) of the scopes the caller reads, or of one
/// (`org`, `personal`, `team:<id>`, `project:<id>`, `global`), newest first.
///
/// # Errors
/// `FORBIDDEN` without `memory:read` or for a scope the caller may not read;
/// `INVALID_REQUEST` for a malformed scope; `UNAVAILABLE`.
pub async fn recent_memories(s: &crate::Services, caller: &CallerContext, scope: Option<&str>) -> Result<Vec<MemoryEntry>> {
    use domain::memory::MemoryScope;
    caller.scopes.require(Scope::MemoryRead)?;
    let scopes: Vec<MemoryScope> = match scope.filter(|s| !s.is_empty()) {
        Some("personal") => vec![MemoryScope::Personal(caller.principal.to_string())],
        Some(raw) => vec![MemoryScope::parse(raw)?],
        None => {
            let mut v = vec![MemoryScope::Org, MemoryScope::Personal(caller.principal.to_string())];
            v.extend(caller.teams.iter().map(|t| MemoryScope::Team(t.clone())));
            v.extend(caller.projects.iter().map(|p| MemoryScope::Project(p.clone())));
            v
        }
    };
    let mut out = Vec::new();
    for sc in scopes {
        if !sc.readable_by(caller) {
            return Err(Error::forbidden("that scope is not yours to read"));
        }
        out.extend(s.backend.records.list_memory(&caller.tenant, &sc, &PageRequest::first(200)).await?.items);
    }
    // An entry whose time to live ran out is gone for every reader, though the
    // maintenance job has not made it a tombstone yet: its text is not shown.
    let now = s.backend.clock.now();
    out.retain(|m| m.expires_at.is_none_or(|e| e > now));
    out.sort_by_key(|m| std::cmp::Reverse(m.updated_at.0));
    out.truncate(100);
    Ok(out)
}

/// One memory entry the caller may read, with the proposal that made it and its
/// readback verification.
#[derive(Debug, Clone)]
pub struct EntryView {
    pub entry: MemoryEntry,
    pub proposal: Option<domain::proposal::Proposal>,
    pub verification: Option<domain::memory::Verification>,
}

/// # Errors
/// `NOT_FOUND` for an entry that does not exist, whose time to live ran out, or that the
/// caller may not read (the same answer); `FORBIDDEN` without `memory:read`; `UNAVAILABLE`.
pub async fn entry(s: &crate::Services, caller: &CallerContext, id: &domain::Id) -> Result<EntryView> {
    use ports::records::{ProposalStore as _, ReviewStore as _};
    caller.scopes.require(Scope::MemoryRead)?;
    let r = &s.backend.records;
    let entry = r
        .get_memory(&caller.tenant, id)
        .await?
        .filter(|m| m.scope.readable_by(caller) && m.expires_at.is_none_or(|e| e > s.backend.clock.now()))
        .ok_or_else(|| Error::not_found(format!("memory entry {id}")))?;
    let proposal = match &entry.lineage.proposal {
        Some(p) => r.get_proposal(&caller.tenant, p).await?,
        None => None,
    };
    let verification = r.get_verification(&caller.tenant, "memory", &entry.id).await?;
    Ok(EntryView { entry, proposal, verification })
}

/// The newest audit records (at most 200) whose principal and action contain the given
/// texts and whose outcome starts with the given one, among the newest `scan` records;
/// and how many were read.
///
/// The ledger names every principal's actions: it takes `admin` (an owner or admin
/// signed in, or an admin key), not just `tenant:read`.
///
/// # Errors
/// `FORBIDDEN` without `admin`; `UNAVAILABLE`.
pub async fn audit(
    s: &crate::Services,
    caller: &CallerContext,
    principal: Option<&str>,
    action: Option<&str>,
    outcome: Option<&str>,
    scan: usize,
) -> Result<(Vec<domain::audit::AuditRecord>, usize)> {
    use ports::records::AuditLog as _;
    caller.scopes.require(Scope::Admin)?;
    let mut rows = Vec::new();
    let mut page = PageRequest::first(500);
    let mut read = 0;
    loop {
        let p = s.backend.records.list_audit(&caller.tenant, &page).await?;
        read += p.items.len();
        for a in p.items {
            let ok = principal.is_none_or(|x| a.actor.contains(x))
                && action.is_none_or(|x| a.action.contains(x))
                && outcome.is_none_or(|x| a.outcome.starts_with(x));
            if ok && rows.len() < 200 {
                rows.push(a);
            }
        }
        match p.next_cursor {
            Some(c) if rows.len() < 200 && read < scan => page = PageRequest::after(500, c),
            _ => return Ok((rows, read)),
        }
    }
}
