//! Export: the caller's bundle (every item with its SHA-256) or one graph as the
//! reference server's `memory.jsonl`.

use domain::memory::MemoryScope;
use domain::principal::CallerContext;
use domain::{Error, PageRequest, Result};
use ports::records::MemoryStore as _;
use serde::Serialize;
use serde_json::{Value, json};

use super::{BUNDLE_FORMAT, BUNDLE_VERSION, hash, memory_canonical};
use crate::Services;

/// A bundle line: one item with its SHA-256.
#[derive(Serialize)]
struct Line<'a> {
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<&'a str>,
    sha256: String,
    item: Value,
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

/// Writes the caller's bundle: a header, then every personal memory (any state, but none
/// whose time to live ran out; a forgotten one as its empty tombstone) and the
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
    // What was forgotten stays forgotten in the bundle: an entry whose time to live ran
    // out (not yet a tombstone) is left out, and a tombstone carries no metadata (one
    // forgotten before forgetting cleared it might).
    let now = s.backend.clock.now();
    memories.retain(|m| m.expires_at.is_none_or(|e| e > now));
    for m in &mut memories {
        if matches!(m.state, domain::memory::GovernanceState::Forgotten { .. }) {
            m.metadata = None;
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
