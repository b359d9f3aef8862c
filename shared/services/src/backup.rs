//! Blob backups of the Spine and their replay (SPEC §9).
//!
//! Every Spine write is appended to `spine-backup/{date}/….jsonl` in the tenant's blob
//! space, one JSON object a line: `{"kind": "entity" | "relationship" | "signal",
//! "record": {…}}`. The pipeline writes one file per queue message (a redelivery
//! rewrites the same file), the operator path one per write, and [`BackupService::backup`]
//! a whole snapshot. [`BackupService::restore`] replays every file into the record
//! store: for each entity the newest copy wins (by source time, then by write time), so
//! the order of files does not matter and replaying twice changes nothing.
//! [`BackupService::compact`] merges the files into a few (newest copy of each entity)
//! and deletes what it merged; the maintenance job runs it daily.
//!
//! Those files hold the Spine. A complete backup of everything else too (memory,
//! proposals, users, keys, the ledger…) is [`crate::backup_records`]:
//! [`BackupService::backup_records`] writes one, and [`BackupService::restore`] restores
//! the newest one first, then replays the Spine's files over it (newer copies win).

use std::collections::BTreeMap;

use domain::spine::{Entity, EntityRef, Relationship, Signal};
use domain::{Error, ErrorCode, PageRequest, Result, TenantId};
use ports::Backend;
use ports::blob::BlobKey;
use ports::records::{Direction, EntityStore, Expect, RelationshipStore, SignalStore};
use serde::{Deserialize, Serialize};

/// One line of a backup file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "record", rename_all = "snake_case")]
pub enum BackupLine {
    Entity(Entity),
    Relationship(Relationship),
    Signal(Signal),
}

/// Encodes lines as JSONL.
///
/// # Errors
/// `INTERNAL` if a record cannot be serialised.
pub fn encode(lines: &[BackupLine]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for l in lines {
        serde_json::to_writer(&mut out, l).map_err(Error::internal)?;
        out.push(b'\n');
    }
    Ok(out)
}

/// Today's backup folder.
pub fn folder(now: domain::Timestamp) -> String {
    let date = now.to_rfc3339();
    format!("spine-backup/{}", &date[..10])
}

/// What a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RestoreReport {
    /// The complete backup restored first, if any ([`crate::backup_records`]).
    pub records: crate::backup_records::RecordsRestored,
    pub files: usize,
    pub entities: usize,
    pub relationships: usize,
    pub signals: usize,
    /// Entities whose stored copy was as new or newer.
    pub unchanged: usize,
    /// Lines that were not a backup record (reported, skipped).
    pub bad_lines: usize,
}

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CompactReport {
    /// Backup files merged and then deleted.
    pub merged: usize,
    /// Files written with the merged lines.
    pub written: usize,
    /// Lines written: the newest copy of each entity, each relationship and signal once.
    pub lines: usize,
    /// Files kept as they were because a line in them could not be read.
    pub kept_unreadable: usize,
}

/// Most lines one compacted file holds (well under the blob size limit).
pub const COMPACT_LINES: usize = 10_000;

#[derive(Clone)]
pub struct BackupService {
    backend: Backend,
}

/// How new a copy of an entity is: the source's own time, then ours.
fn freshness(e: &Entity) -> (i64, i64) {
    (e.source_updated_at.map_or(i64::MIN, |t| t.0), e.updated_at.0)
}

/// Whether `e` is a newer backup copy than `old`: by [`freshness`], then by version (two
/// writes within one millisecond share a time; the later has the higher version). Only
/// between backup copies: a restored entity gets the store's own version, so a stored
/// copy is compared with a backup line by time alone.
fn newer_copy(e: &Entity, old: &Entity) -> bool {
    (freshness(e), e.version) > (freshness(old), old.version)
}

impl BackupService {
    pub(crate) fn new(backend: Backend) -> Self {
        Self { backend }
    }

    /// Writes a complete backup of every record of the tenant ([`crate::backup_records`]);
    /// `progress` gets the records written so far.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the store or the blob store cannot be reached.
    pub async fn backup_records(
        &self,
        tenant: &TenantId,
        progress: &(dyn Fn(usize) + Sync),
    ) -> Result<crate::backup_records::BackupReport> {
        crate::backup_records::backup(&self.backend, tenant, progress).await
    }

    /// Writes a snapshot of the tenant's Spine (entities, their outgoing relationships,
    /// signals) as one backup file; returns its path and how many lines it holds.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the store or the blob store cannot be reached.
    pub async fn backup(&self, tenant: &TenantId) -> Result<(String, usize)> {
        let records = &self.backend.records;
        let mut lines = Vec::new();
        let mut page = PageRequest::first(500);
        loop {
            let p = records.list_entities(tenant, None, &page).await?;
            for e in p.items {
                let r = EntityRef { entity_type: e.entity_type.clone(), id: e.id.clone() };
                let mut rp = PageRequest::first(500);
                loop {
                    let rels = records.list_relationships(tenant, &r, Direction::Outgoing, &rp).await?;
                    lines.extend(rels.items.into_iter().map(BackupLine::Relationship));
                    match rels.next_cursor {
                        Some(c) => rp = PageRequest::after(500, c),
                        None => break,
                    }
                }
                lines.push(BackupLine::Entity(e));
            }
            match p.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => break,
            }
        }
        let mut page = PageRequest::first(500);
        loop {
            let p = records.list_signals(tenant, None, &page).await?;
            lines.extend(p.items.into_iter().map(BackupLine::Signal));
            match p.next_cursor {
                Some(c) => page = PageRequest::after(500, c),
                None => break,
            }
        }
        let now = self.backend.clock.now();
        let path = format!("{}/snapshot-{}.jsonl", folder(now), now.0);
        self.backend.blobs.put(&BlobKey::new(tenant, &path)?, &encode(&lines)?).await?;
        Ok((path, lines.len()))
    }

    /// Compacts the tenant's backup files when there are at least `min_files`: the
    /// newest copy of each entity, and each relationship and signal once, are written
    /// to `spine-backup/compacted-{time}/part-{n}.jsonl`, and only then are the files
    /// they came from deleted. A file with a line that cannot be read is kept as it is.
    /// Files written while it runs are not touched (each write makes a new file), and a
    /// crash between the two steps leaves duplicates, which a restore resolves (newest
    /// wins). It reads the backups, never the store, so a store lost before its restore
    /// loses nothing to a compaction.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the blob store cannot be reached.
    pub async fn compact(&self, tenant: &TenantId, min_files: usize) -> Result<CompactReport> {
        let blobs = &self.backend.blobs;
        let mut keys = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = blobs.list(tenant, "spine-backup/", after.as_deref(), 1_000).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.path().to_owned());
            keys.extend(page);
        }
        let mut report = CompactReport::default();
        if keys.len() < min_files.max(2) {
            return Ok(report);
        }
        let mut entities: BTreeMap<(String, String), Entity> = BTreeMap::new();
        let mut relationships: BTreeMap<String, Relationship> = BTreeMap::new();
        let mut signals: BTreeMap<String, Signal> = BTreeMap::new();
        let mut merged = Vec::new();
        for key in keys {
            let Some(bytes) = blobs.get(&key).await? else { continue };
            let mut readable = true;
            let mut lines = Vec::new();
            for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                match serde_json::from_slice::<BackupLine>(line) {
                    Ok(l) => lines.push(l),
                    Err(_) => readable = false,
                }
            }
            if !readable {
                report.kept_unreadable += 1;
                continue;
            }
            for l in lines {
                match l {
                    BackupLine::Entity(e) if e.tenant == *tenant => {
                        let k = (e.entity_type.to_string(), e.id.to_string());
                        if entities.get(&k).is_none_or(|old| newer_copy(&e, old)) {
                            entities.insert(k, e);
                        }
                    }
                    BackupLine::Relationship(r) if r.tenant == *tenant => {
                        let k = serde_json::to_string(&(&r.from, &r.kind, &r.to)).map_err(Error::internal)?;
                        relationships.insert(k, r);
                    }
                    BackupLine::Signal(s) if s.tenant == *tenant => {
                        signals.insert(s.id.to_string(), s);
                    }
                    // Another tenant's line in this space: not ours to carry forward.
                    _ => {}
                }
            }
            merged.push(key);
        }
        if merged.len() < 2 {
            return Ok(report);
        }
        let lines: Vec<BackupLine> = signals
            .into_values()
            .map(BackupLine::Signal)
            .chain(relationships.into_values().map(BackupLine::Relationship))
            .chain(entities.into_values().map(BackupLine::Entity))
            .collect();
        let now = self.backend.clock.now();
        for (n, chunk) in lines.chunks(COMPACT_LINES).enumerate() {
            let path = format!("spine-backup/compacted-{}/part-{n:05}.jsonl", now.0);
            blobs.put(&BlobKey::new(tenant, &path)?, &encode(chunk)?).await?;
            report.written += 1;
        }
        report.lines = lines.len();
        for key in &merged {
            blobs.delete(key).await?;
        }
        report.merged = merged.len();
        Ok(report)
    }

    /// Replays every backup file of the tenant into the record store (see the module
    /// notes); `progress` is called after each file with the files read so far.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the store or the blob store cannot be reached.
    pub async fn restore(&self, tenant: &TenantId, progress: &(dyn Fn(usize) + Sync)) -> Result<RestoreReport> {
        self.restore_with(tenant, false, progress).await
    }

    /// [`Self::restore`], merging the complete backup into a store that holds the tenant
    /// when `merge` (missing or older records are written; none is deleted).
    ///
    /// # Errors
    /// As [`Self::restore`].
    pub async fn restore_with(&self, tenant: &TenantId, merge: bool, progress: &(dyn Fn(usize) + Sync)) -> Result<RestoreReport> {
        let mut report = RestoreReport {
            records: crate::backup_records::restore(&self.backend, tenant, merge, &|_| {}).await?,
            ..RestoreReport::default()
        };
        let mut newest: BTreeMap<(String, String), Entity> = BTreeMap::new();
        let mut relationships = Vec::new();
        let mut signals = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let keys = self.backend.blobs.list(tenant, "spine-backup/", after.as_deref(), 500).await?;
            let Some(last) = keys.last() else { break };
            after = Some(last.path().to_owned());
            for key in &keys {
                let Some(bytes) = self.backend.blobs.get(key).await? else { continue };
                report.files += 1;
                for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                    match serde_json::from_slice::<BackupLine>(line) {
                        Ok(BackupLine::Entity(e)) if e.tenant == *tenant => {
                            let k = (e.entity_type.to_string(), e.id.to_string());
                            if newest.get(&k).is_none_or(|old| newer_copy(&e, old)) {
                                newest.insert(k, e);
                            }
                        }
                        Ok(BackupLine::Relationship(r)) if r.tenant == *tenant => relationships.push(r),
                        Ok(BackupLine::Signal(s)) if s.tenant == *tenant => signals.push(s),
                        // A line of another tenant cannot be in this tenant's space unless
                        // someone put it there: never restore it here.
                        Ok(_) | Err(_) => report.bad_lines += 1,
                    }
                }
                progress(report.files);
            }
        }
        let records = &self.backend.records;
        for s in signals {
            match records.append_signal(&s).await {
                Ok(()) => report.signals += 1,
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        for r in relationships {
            records.put_relationship(&r).await?;
            report.relationships += 1;
        }
        for e in newest.into_values() {
            let existing = records.get_entity(tenant, &e.entity_type, &e.id).await?;
            if existing.as_ref().is_some_and(|x| freshness(x) >= freshness(&e)) {
                report.unchanged += 1;
                continue;
            }
            let expect = existing.as_ref().map_or(Expect::Absent, |x| Expect::Version(x.version));
            records.put_entity(&e, expect).await?;
            report.entities += 1;
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(updated_at: i64, version: u64, source: Option<i64>) -> Entity {
        let json = serde_json::json!({
            "tenant": "t1", "entity_type": "account", "id": "globex", "pole_class": "organization",
            "attributes": {"tier": format!("v{version}")}, "created_at": 1_767_225_600_000_i64,
            "updated_at": updated_at, "version": version, "source_updated_at": source
        });
        serde_json::from_value(json).unwrap()
    }

    /// Two writes within one millisecond: the later (higher version) is the newer copy,
    /// whichever backup file is read first; the source's time still comes first.
    #[test]
    fn the_newer_copy_is_told_by_time_then_version() {
        let ms = 1_767_225_600_123;
        assert!(newer_copy(&copy(ms, 3, None), &copy(ms, 2, None)));
        assert!(!newer_copy(&copy(ms, 2, None), &copy(ms, 3, None)));
        assert!(!newer_copy(&copy(ms, 2, None), &copy(ms, 2, None)), "the same copy is not newer");
        assert!(newer_copy(&copy(ms + 1, 2, None), &copy(ms, 3, None)));
        assert!(newer_copy(&copy(ms, 2, Some(ms)), &copy(ms, 3, Some(ms - 1))));
    }
}
