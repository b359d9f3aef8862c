//! Line-based sources streamed, never held whole: checked through once
//! ([`check_lines`]), then written in bounded batches and verified against the store
//! ([`import_lines`]), each pass reading the source again from its start.

use std::collections::{BTreeSet, HashSet};
use std::io::BufRead;

use domain::graph::{GraphEntity, GraphRelation};
use domain::principal::CallerContext;
use domain::{Error, Result};

use super::parse::{Items, read_all};
use super::{Format, ImportReport, Item, LineReader, Problem, Source, import_batch, problem};
use crate::Services;

/// What a line-based source holds, checked through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    pub memories: usize,
    pub entities: usize,
    pub relations: usize,
}

fn reader(format: Format, scope: &str) -> std::result::Result<LineReader, Problem> {
    LineReader::new(format, scope).ok_or_else(|| problem("file", "Markdown notes are not read by lines"))
}

/// Reads a line-based source through, counting its items and holding none.
///
/// # Errors
/// Every problem found (up to 20), each with its line number.
pub fn check_lines(input: impl BufRead, format: Format, scope: &str) -> std::result::Result<Checked, Vec<Problem>> {
    let mut c = Checked::default();
    let problems = read_all(Items::new(input, reader(format, scope).map_err(|p| vec![p])?), |item| match item {
        Item::Memory(_) => c.memories += 1,
        Item::Entity { .. } => c.entities += 1,
        Item::Relation { .. } => c.relations += 1,
    });
    if problems.is_empty() { Ok(c) } else { Err(problems) }
}

/// Writes a line-based source checked by [`check_lines`], `batch` items at a time
/// through [`import_batch`], then reads its graphs back from the store and checks every
/// item of the source against them. `open` gives the source from its start (it is read
/// twice).
///
/// # Errors
/// As [`import_batch`]; `CONFLICT` when a line no longer reads (the source changed since
/// it was checked); `UNAVAILABLE` when it cannot be opened; `INTERNAL` when an item read
/// back differs from what was written.
pub async fn import_lines<R: BufRead + Send>(
    s: &Services,
    caller: &CallerContext,
    open: impl Fn() -> std::io::Result<R>,
    format: Format,
    scope: &str,
    batch: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<ImportReport> {
    let changed = |p: Problem| Error::conflict(format!("{p}: the source changed while it was imported; run the import again"));
    let items = || -> Result<Items<R>> {
        let input = open().map_err(|e| Error::unavailable(format!("reading the source: {e}")))?;
        Ok(Items::new(input, reader(format, scope).map_err(changed)?))
    };
    let mut report = ImportReport::default();
    let mut scopes = BTreeSet::new();
    let mut pending = Source::default();
    for item in items()? {
        let item = item.map_err(changed)?;
        if let Item::Entity { scope, .. } | Item::Relation { scope, .. } = &item
            && !scopes.contains(scope)
        {
            scopes.insert(scope.clone());
        }
        pending.push(item);
        if pending.len() >= batch.max(1) {
            import_batch(s, caller, &std::mem::take(&mut pending), &mut report, progress).await?;
        }
    }
    if !pending.is_empty() {
        import_batch(s, caller, &pending, &mut report, progress).await?;
    }
    if !scopes.is_empty() {
        let back = ReadBack::load(s, caller, &scopes).await?;
        for item in items()? {
            if back.item(&item.map_err(changed)?)? {
                report.verified += 1;
            }
        }
    }
    Ok(report)
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
