//! Complete backups (SPEC §9): every record of a tenant — not only the Spine — as typed
//! JSONL in the tenant's blob space, and their restore, checked by hash per record type.
//!
//! A backup is `backup/{time}/records-{n}.jsonl` (at most [`LINES_PER_FILE`] lines each)
//! and, written last, `backup/{time}/manifest.json`: how many records of each type
//! (`part`) it holds and a SHA-256 over them. Each line is
//! `{"kind": "record", "record": {"part", "key", "version", "json" | "sealed", "registry"?}}`:
//! `json` is the record exactly as stored (the bytes kept, so hashes compare), `sealed`
//! the base64 of a body the vault sealed (entities, connector credentials) — it opens
//! only with the same vault master key (`keys/vault.key`, the stack's KMS key), which a
//! backup never holds; the tenant's data key travels wrapped by it.
//!
//! What it holds: everything in the tenant's partition — the tenant and its
//! configuration, principals, API keys (digests only), users' logins (password hashes),
//! org, team, project and personal memory with lineage, proposals and decisions, the
//! Spine, the graph and engineering records, gates, tasks, connectors and their
//! credentials, the book and KB, the audit ledger — plus its entries in the registry:
//! the tenant's registration and its OAuth service clients. Not held: sign-in codes,
//! refresh tokens and pending sign-ins (people sign in again), the search index (the
//! restore's reindex rebuilds it), blobs (they are where the backup is).
//!
//! Restore reads the newest complete backup (one with its manifest) into an empty store
//! (or merges it when asked: a merge brings back what was deleted since): it reads every
//! file and checks it against the manifest, type by type, before writing anything;
//! refuses registry entries that are not the tenant's (or that would replace another
//! tenant's); writes each record that is missing or older in the store (never over a
//! newer one); then recomputes each type's hash from the store and compares it with the
//! manifest. Backups are trusted as far as the blob store they are in: whoever can write
//! there could write the tenant's records (the manifest is a checksum, not a signature).

use std::collections::BTreeMap;

use base64::Engine as _;
use domain::{Error, ErrorCode, Result, TenantId};
use ports::Backend;
use ports::blob::BlobKey;
use ports::items::{Condition, Item, REGISTRY_TENANT, Write};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

/// Most lines one backup file holds.
pub const LINES_PER_FILE: usize = 10_000;
const FORMAT: u32 = 1;
/// Registry parts that hold a tenant's records: its registration and its promotion to
/// the fortress (key: the slug), and its service clients (their body names the tenant
/// and its id is the key).
const REGISTRY_PARTS: [&str; 3] = ["tenants", "fortress", "oauth_client"];

/// One stored record as a backup line keeps it.
#[derive(Debug, Serialize, Deserialize)]
pub struct StoredRecord {
    /// True for the tenant's entries in the registry partition.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub registry: bool,
    pub part: String,
    pub key: String,
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Line {
    kind: String,
    record: StoredRecord,
}

/// One record type in a manifest: how many, and their hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartDigest {
    pub records: usize,
    pub sha256: String,
}

/// What a complete backup holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub tenant: String,
    pub taken_at: String,
    pub files: usize,
    pub parts: BTreeMap<String, PartDigest>,
}

/// What a complete backup wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackupReport {
    /// `backup/{time}`, in the tenant's blob space.
    pub folder: String,
    pub records: usize,
    pub manifest: Manifest,
}

/// One record type after a restore: the backup's count and whether the store's hash of
/// that type now equals the backup's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartCheck {
    pub part: String,
    pub records: usize,
    pub matches: bool,
}

/// What a restore of records did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RecordsRestored {
    /// The backup restored (`backup/{time}`), if there was one.
    pub folder: Option<String>,
    pub records: usize,
    /// Written: missing from the store, or older there.
    pub written: usize,
    /// The store's copy was as new.
    pub unchanged: usize,
    /// Why the backup was not restored (a store that holds the tenant, without merge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub parts: Vec<PartCheck>,
}

fn digest_of(registry: bool, part: &str, key: &str, version: u64, body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([u8::from(registry)]);
    for p in [part.as_bytes(), key.as_bytes(), version.to_string().as_bytes()] {
        h.update(p);
        h.update([0]);
    }
    h.update(body);
    h.finalize().into()
}

/// Per type: the records' digests, sorted, hashed — independent of the order a backend
/// returns them in.
#[derive(Default)]
struct Digests(BTreeMap<String, Vec<[u8; 32]>>);

fn records_so_far(d: &Digests) -> usize {
    d.0.values().map(Vec::len).sum()
}

impl Digests {
    fn add(&mut self, registry: bool, item: &Item) {
        let name = if registry { format!("registry:{}", item.part) } else { item.part.clone() };
        self.0.entry(name).or_default().push(digest_of(registry, &item.part, &item.sk, item.version, &item.body));
    }

    fn finish(self) -> BTreeMap<String, PartDigest> {
        self.0
            .into_iter()
            .map(|(part, mut ds)| {
                ds.sort_unstable();
                let mut h = Sha256::new();
                for d in &ds {
                    h.update(d);
                }
                (part, PartDigest { records: ds.len(), sha256: hex::encode(h.finalize()) })
            })
            .collect()
    }
}

/// Whether a registry item is `tenant`'s.
fn registry_item_of(tenant: &TenantId, item: &Item) -> bool {
    let body = || serde_json::from_slice::<serde_json::Value>(&item.body).ok();
    match item.part.as_str() {
        "tenants" => item.sk == tenant.as_str() && body().is_some_and(|v| v.as_str() == Some(tenant.as_str())),
        "fortress" => item.sk == tenant.as_str() && body().is_some_and(|v| v["tenant"].as_str() == Some(tenant.as_str())),
        "oauth_client" => body().is_some_and(|v| {
            v.get("tenant").and_then(serde_json::Value::as_str) == Some(tenant.as_str())
                && v.get("client_id").and_then(serde_json::Value::as_str) == Some(item.sk.as_str())
        }),
        _ => false,
    }
}

/// The tenant's entries in the registry (a few records).
async fn registry_items(items: &dyn ports::ItemStore, tenant: &TenantId) -> Result<Vec<Item>> {
    let mut out = Vec::new();
    for part in REGISTRY_PARTS {
        let mut after: Option<String> = None;
        loop {
            let (page, more) = items
                .query(ports::items::Query {
                    tenant: REGISTRY_TENANT,
                    part,
                    prefix: "",
                    after: after.as_deref(),
                    limit: 500,
                    descending: false,
                })
                .await?;
            after = page.last().map(|i| i.sk.clone());
            out.extend(page.into_iter().filter(|i| registry_item_of(tenant, i)));
            if !more {
                break;
            }
        }
    }
    Ok(out)
}

/// Adds every record of `tenant`'s partition of `items` to `d`.
async fn add_partition(items: &dyn ports::ItemStore, tenant: &TenantId, d: &mut Digests) -> Result<()> {
    let mut cursor: Option<String> = None;
    loop {
        let (page, next) = items.scan_tenant(tenant.as_str(), cursor.as_deref(), 500).await?;
        for i in &page {
            d.add(false, i);
        }
        match next {
            Some(c) => cursor = Some(c),
            None => return Ok(()),
        }
    }
}

/// The digests of the records in `tenant`'s partition of `items` (no registry entries),
/// per type: what the fortress is compared with.
///
/// # Errors
/// `UNAVAILABLE`.
pub async fn partition_digests(items: &dyn ports::ItemStore, tenant: &TenantId) -> Result<BTreeMap<String, PartDigest>> {
    let mut d = Digests::default();
    add_partition(items, tenant, &mut d).await?;
    Ok(d.finish())
}

/// The store's digests of `tenant`'s records, per type.
///
/// # Errors
/// `UNAVAILABLE`.
pub async fn digests(backend: &Backend, tenant: &TenantId) -> Result<BTreeMap<String, PartDigest>> {
    let items = backend.records.items();
    let mut d = Digests::default();
    add_partition(items.as_ref(), tenant, &mut d).await?;
    for i in registry_items(items.as_ref(), tenant).await? {
        d.add(true, &i);
    }
    Ok(d.finish())
}

fn line_of(registry: bool, item: &Item) -> Result<Vec<u8>> {
    // A JSON body is kept as its very text; anything else (sealed) as base64.
    let json = std::str::from_utf8(&item.body)
        .ok()
        .filter(|t| t.starts_with(['{', '[', '"']))
        .and_then(|t| RawValue::from_string(t.to_owned()).ok());
    let sealed = json.is_none().then(|| base64::engine::general_purpose::STANDARD.encode(&item.body));
    let line = Line {
        kind: "record".into(),
        record: StoredRecord { registry, part: item.part.clone(), key: item.sk.clone(), version: item.version, json, sealed },
    };
    let mut out = serde_json::to_vec(&line).map_err(Error::internal)?;
    out.push(b'\n');
    Ok(out)
}

/// Writes `lines` as the next file of the backup in `folder`.
async fn put_file(backend: &Backend, tenant: &TenantId, folder: &str, files: &mut usize, lines: &mut Vec<Vec<u8>>) -> Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let path = format!("{folder}/records-{:05}.jsonl", *files);
    backend.blobs.put(&BlobKey::new(tenant, &path)?, &lines.concat()).await?;
    *files += 1;
    lines.clear();
    Ok(())
}

/// Writes a complete backup of `tenant` (see the module notes); `progress` gets the
/// records written so far after each file.
///
/// # Errors
/// `UNAVAILABLE` when the store or the blob store cannot be reached.
pub async fn backup(backend: &Backend, tenant: &TenantId, progress: &(dyn Fn(usize) + Sync)) -> Result<BackupReport> {
    let now = backend.clock.now();
    let folder = format!("backup/{:020}", now.0);
    let mut digests = Digests::default();
    let mut lines: Vec<Vec<u8>> = Vec::new();
    let mut files = 0;
    // A file at a time: at most LINES_PER_FILE lines are held.
    let items = backend.records.items();
    let mut cursor: Option<String> = None;
    loop {
        let (page, next) = items.scan_tenant(tenant.as_str(), cursor.as_deref(), 500).await?;
        for item in &page {
            digests.add(false, item);
            lines.push(line_of(false, item)?);
        }
        if lines.len() >= LINES_PER_FILE {
            put_file(backend, tenant, &folder, &mut files, &mut lines).await?;
            progress(records_so_far(&digests));
        }
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    for item in registry_items(items.as_ref(), tenant).await? {
        digests.add(true, &item);
        lines.push(line_of(true, &item)?);
    }
    put_file(backend, tenant, &folder, &mut files, &mut lines).await?;
    let records = records_so_far(&digests);
    progress(records);
    let manifest =
        Manifest { format: FORMAT, tenant: tenant.to_string(), taken_at: now.to_rfc3339(), files, parts: digests.finish() };
    let body = serde_json::to_vec_pretty(&manifest).map_err(Error::internal)?;
    backend.blobs.put(&BlobKey::new(tenant, &format!("{folder}/manifest.json"))?, &body).await?;
    Ok(BackupReport { folder, records, manifest })
}

/// The newest complete backup's folder and manifest.
async fn newest(backend: &Backend, tenant: &TenantId) -> Result<Option<(String, Manifest)>> {
    let mut manifests = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let keys = backend.blobs.list(tenant, "backup/", after.as_deref(), 1_000).await?;
        let Some(last) = keys.last() else { break };
        after = Some(last.path().to_owned());
        manifests.extend(keys.into_iter().filter(|k| k.path().ends_with("/manifest.json")));
    }
    let Some(key) = manifests.into_iter().max_by(|a, b| a.path().cmp(b.path())) else { return Ok(None) };
    let bytes = backend.blobs.get(&key).await?.ok_or_else(|| Error::unavailable("a backup manifest vanished while read"))?;
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| Error::invalid(format!("{} is not a backup manifest: {e}", key.path())))?;
    if manifest.tenant != tenant.as_str() || manifest.format != FORMAT {
        return Err(Error::invalid(format!("{} is a backup of {} (format {})", key.path(), manifest.tenant, manifest.format)));
    }
    let folder = key.path().trim_end_matches("/manifest.json").to_owned();
    Ok(Some((folder, manifest)))
}

/// The item a backup line restores, checked to be `tenant`'s.
fn item_of(tenant: &TenantId, r: StoredRecord) -> Result<(bool, Item)> {
    let body = match (r.json, r.sealed) {
        (Some(j), None) => j.get().as_bytes().to_vec(),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| Error::invalid(format!("a sealed record of {} is not base64: {e}", r.part)))?,
        _ => return Err(Error::invalid(format!("a record of {} has neither (or both) json and sealed", r.part))),
    };
    let owner = if r.registry { REGISTRY_TENANT } else { tenant.as_str() };
    let item = Item { tenant: owner.to_owned(), part: r.part, sk: r.key, version: r.version, body };
    if item.part.is_empty() || item.sk.is_empty() {
        return Err(Error::invalid("a backup record without its type or key"));
    }
    if r.registry && !registry_item_of(tenant, &item) {
        return Err(Error::invalid(format!(
            "the backup holds a registry record ({} {}) that is not tenant {tenant}'s: refused",
            item.part, item.sk
        )));
    }
    Ok((r.registry, item))
}

/// Writes `item` unless the store's copy is as new; whether it wrote.
async fn put_newer(backend: &Backend, item: Item) -> Result<bool> {
    let items = backend.records.items();
    for _ in 0..3 {
        let existing = items.get(&item.tenant, &item.part, &item.sk).await?;
        let condition = match &existing {
            None => Condition::Absent,
            Some(e) if e.version < item.version => Condition::Version(e.version),
            Some(_) => return Ok(false),
        };
        match items.write(vec![Write::Put { item: item.clone(), condition }]).await {
            Ok(()) => return Ok(true),
            Err(e) if e.code == ErrorCode::Conflict => {}
            Err(e) => return Err(e),
        }
    }
    Err(Error::unavailable(format!("{} {} kept changing while restored; run the restore again", item.part, item.sk)))
}

/// Restores the newest complete backup of `tenant` (see the module notes); `progress`
/// gets the records read so far after each file.
///
/// # Errors
/// `INVALID_REQUEST` for a backup that is not this tenant's or holds foreign registry
/// records (nothing is written then); `CONFLICT` when the store already holds another
/// data key for the tenant (its sealed records would not open); `UNAVAILABLE`.
pub async fn restore(
    backend: &Backend,
    tenant: &TenantId,
    merge: bool,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<RecordsRestored> {
    let mut report = RecordsRestored::default();
    let Some((folder, manifest)) = newest(backend, tenant).await? else { return Ok(report) };
    // Into a store that holds the tenant, a backup would bring back what was deleted
    // since (forgotten memory, old index entries): only when asked.
    let (held, _) = backend.records.items().scan_tenant(tenant.as_str(), None, 1).await?;
    if !held.is_empty() && !merge {
        report.folder = Some(folder);
        report.skipped = Some(format!(
            "the store holds records of {tenant}: a complete backup is restored into an empty store (merge it with --merge: missing or older records are written, none is deleted)"
        ));
        return Ok(report);
    }
    // Every file is read and checked before anything is written.
    let mut items = Vec::new();
    for n in 0..manifest.files {
        let path = format!("{folder}/records-{n:05}.jsonl");
        let bytes = backend
            .blobs
            .get(&BlobKey::new(tenant, &path)?)
            .await?
            .ok_or_else(|| Error::invalid(format!("{path} is missing: the backup in {folder} is incomplete")))?;
        for (i, line) in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()).enumerate() {
            let l: Line = serde_json::from_slice(line).map_err(|e| Error::invalid(format!("{path} line {}: {e}", i + 1)))?;
            if l.kind != "record" {
                return Err(Error::invalid(format!("{path} line {}: not a record line ({})", i + 1, l.kind)));
            }
            items.push(item_of(tenant, l.record)?);
        }
        progress(items.len());
    }
    // The files are the manifest's, type by type, before anything is written.
    let mut read = Digests::default();
    for (registry, item) in &items {
        read.add(*registry, item);
    }
    let read = read.finish();
    if read != manifest.parts {
        let differ: Vec<&String> =
            manifest.parts.keys().chain(read.keys()).filter(|k| read.get(*k) != manifest.parts.get(*k)).collect();
        return Err(Error::invalid(format!(
            "the backup in {folder} does not match its manifest ({differ:?}): damaged or altered; nothing was written"
        )));
    }
    // A registry record of someone else's is never replaced.
    for (_, item) in items.iter().filter(|(r, _)| *r) {
        if let Some(existing) = backend.records.items().get(&item.tenant, &item.part, &item.sk).await?
            && !registry_item_of(tenant, &existing)
        {
            return Err(Error::invalid(format!(
                "the backup's registry record {} {} is another tenant's in this store: refused; nothing was written",
                item.part, item.sk
            )));
        }
    }
    // The tenant's data key: a store holding another one could not open what the backup
    // sealed.
    if let Some((_, dek)) = items.iter().find(|(r, i)| !r && i.part == "vault" && i.sk == "dek")
        && let Some(existing) = backend.records.items().get(tenant.as_str(), "vault", "dek").await?
        && existing.body != dek.body
    {
        return Err(Error::conflict(format!(
            "the store already holds another data key for tenant {tenant}: restore into an empty store (or the one the backup came from)"
        )));
    }
    report.folder = Some(folder);
    report.records = items.len();
    for (_, item) in items {
        if put_newer(backend, item).await? {
            report.written += 1;
        } else {
            report.unchanged += 1;
        }
    }
    let now = digests(backend, tenant).await?;
    report.parts = manifest
        .parts
        .iter()
        .map(|(part, d)| PartCheck { part: part.clone(), records: d.records, matches: now.get(part) == Some(d) })
        .collect();
    Ok(report)
}
