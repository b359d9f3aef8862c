//! Embedded adapters: what `continuity serve` runs on, in one home folder.
//!
//! - [`db`]: the SQLite database (WAL, `synchronous=FULL`, versioned migrations).
//! - [`items`]: [`SqliteItems`], the item port over one `items` table.
//! - [`queue`]: [`SqliteQueue`], a durable queue table with visibility timeout,
//!   redelivery and a dead-letter table.
//! - [`cache`]: [`MemoryCache`], an in-process TTL cache with bounded size.
//! - [`blobs`]: [`FileBlobs`], blobs as files under the home folder.
//! - [`limiter`], [`signer`], [`vault`], [`search`]: token buckets in process, the RSA
//!   signing keys and the vault's master key as files, the search index.
//! - [`health`]: readiness — free disk space and whether the database file is damaged.
//! - [`mail`]: [`SmtpMailer`], e-mail over SMTP when `CONTINUITY_SMTP_URL` is set.
//! - [`private`]: files and folders their owner alone may read (Unix modes; plain
//!   elsewhere).
//! - [`epoch`]: [`epoch::FileEpoch`], the credentials' change signal every process on the
//!   home reads per request (a file replaced by every API key revocation).
//!
//! Architecture Invariant: this is the only crate that names SQLite.

pub mod blobs;
pub mod cache;
pub mod db;
pub mod epoch;
pub mod health;
pub mod items;
pub mod limiter;
pub mod mail;
pub mod private;
pub mod queue;
pub mod search;
pub mod signer;
pub mod vault;

use std::path::Path;
use std::sync::Arc;

pub use blobs::FileBlobs;
pub use cache::MemoryCache;
pub use db::Db;
pub use items::SqliteItems;
pub use limiter::MemoryLimiter;
pub use mail::SmtpMailer;
pub use queue::SqliteQueue;
pub use search::SqliteSearch;
pub use signer::FileSigner;
pub use vault::FileKeyWrapper;

use ports::{Backend, Clock, Records};

/// The home's database file (the record store, queues, search index).
pub const DATABASE_FILE: &str = "continuity.db";

/// Deliveries before a queue message is dead-lettered (SQS redrive `maxReceiveCount` on AWS).
pub const DEFAULT_MAX_RECEIVES: u32 = 5;

/// Opens (creating if needed) the embedded backend in `home`, with the lexical hashing
/// embedder (see [`open_backend_with`] to choose another).
///
/// # Errors
/// `UNAVAILABLE` when the database or the blob folder cannot be opened or migrated.
pub fn open_backend(home: &Path, clock: Arc<dyn Clock>) -> domain::Result<Backend> {
    open_backend_with(home, clock, Arc::new(ports::search::HashingEmbedder::new(384)))
}

/// Opens (creating if needed) the embedded backend in `home`, its search index holding
/// vectors of `embedder`.
///
/// # Errors
/// `UNAVAILABLE` when the database or the blob folder cannot be opened or migrated.
/// Moves everything the write-ahead log holds into the database file and empties the log
/// (`PRAGMA wal_checkpoint(TRUNCATE)`): what a graceful stop does last, so the home's
/// database file alone holds every acknowledged write.
///
/// # Errors
/// `UNAVAILABLE` when the database cannot be opened, or another connection holds a write
/// open so the log cannot be emptied.
pub fn checkpoint(home: &Path) -> domain::Result<()> {
    let conn =
        rusqlite::Connection::open(home.join(DATABASE_FILE)).map_err(|e| domain::Error::unavailable(format!("sqlite: {e}")))?;
    conn.pragma_update(None, "busy_timeout", 5000).map_err(|e| domain::Error::unavailable(format!("sqlite: {e}")))?;
    let (busy, _log, _moved): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map_err(|e| domain::Error::unavailable(format!("sqlite: {e}")))?;
    if busy != 0 {
        return Err(domain::Error::unavailable("the write-ahead log is in use; it will be moved into the database later"));
    }
    Ok(())
}

/// How often a process checks whether another one wrote to its home.
pub const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// When another process writes to the home (a CLI command beside `serve`), this one must
/// not answer from what it holds in memory: every half second, if another connection
/// committed, the cache is emptied and the search index takes in the records the other
/// process indexed (a search does that at once too). Runs while the backend lives, on
/// the runtime that opened it (none: nothing to watch).
fn watch_other_processes(db: &Db, cache: &Arc<MemoryCache>, search: &Arc<SqliteSearch>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    let (db, cache, search) = (db.clone(), Arc::downgrade(cache), Arc::downgrade(search));
    let _ = db.others_committed();
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(WATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let (Some(cache), Some(search)) = (cache.upgrade(), search.upgrade()) else { break };
            let check = db.clone();
            let changed = tokio::task::spawn_blocking(move || check.others_committed()).await;
            if matches!(changed, Ok(Ok(true))) {
                cache.clear();
                if let Err(e) = search.sync_external().await {
                    tracing::warn!(error = %e, "reading another process's index changes failed; the next search tries again");
                }
            }
        }
    });
}

pub fn open_backend_with(home: &Path, clock: Arc<dyn Clock>, embedder: Arc<dyn ports::Embedder>) -> domain::Result<Backend> {
    // Commits of the main database may share one flush (`db` module); the fortress's
    // each flush on their own.
    let db = Db::open(&home.join(DATABASE_FILE))?.batching()?;
    let fortress_db = Db::open(&home.join("fortress.db"))?;
    // Data sealed under the vault's master key needs that key and no other: a missing or
    // replaced `keys/vault.key` stops the start instead of failing every read later.
    let sample = match db.sealed_sample()? {
        Some(s) => Some(s),
        None => fortress_db.sealed_sample()?,
    };
    let sample = sample.and_then(|(t, w)| domain::TenantId::new(t).ok().map(|t| (t, w)));
    let wrapper: Arc<dyn ports::vault::KeyWrapper> = Arc::new(FileKeyWrapper::open_for(&home.join("keys"), sample)?);
    let readiness = Arc::new(health::EmbeddedReadiness::new(db.clone(), home.to_path_buf()));
    let fortress_items: Arc<dyn ports::ItemStore> = Arc::new(SqliteItems::new(fortress_db.clone()));
    // Writes of promoted tenants are mirrored into the fortress (`ports::fortress`).
    let items =
        Arc::new(ports::fortress::Mirrored::new(Arc::new(SqliteItems::new(db.clone())), fortress_items.clone(), clock.clone()));
    let search = Arc::new(SqliteSearch::new(db.clone(), embedder.name(), embedder.dim()));
    let cache = Arc::new(MemoryCache::new(cache::DEFAULT_CAPACITY));
    watch_other_processes(&db, &cache, &search);
    let queue = Arc::new(SqliteQueue::new(db, "work", DEFAULT_MAX_RECEIVES, clock.clone()));
    let blobs = Arc::new(FileBlobs::new(home.join("blobs"))?);
    // The fortress is a second database file: the verified copy of promoted tenants.
    // The Spine vault: entity payloads encrypted with per-tenant data keys wrapped by
    // `keys/vault.key`. Each database keeps its own wrapped data keys, so each gets its
    // own vault (key cache) over the one master key.
    let vault = || Arc::new(ports::vault::Vault::new(wrapper.clone()));
    let fortress = Records::new(Arc::new(ports::fortress::ReadOnly::new(fortress_items.clone()))).with_vault(vault());
    Ok(Backend {
        records: Records::new(items).with_vault(vault()).with_credential_epoch(Arc::new(epoch::FileEpoch::new(home))),
        cache,
        queue,
        blobs,
        fortress: Some(fortress),
        fortress_writer: Some(fortress_items),
        signer: Arc::new(FileSigner::open(&home.join("keys"), clock.now())?),
        limiter: Arc::new(MemoryLimiter::new()),
        search,
        embedder,
        workflow: None,
        mailer: SmtpMailer::from_env()?.map(|m| Arc::new(m) as Arc<dyn ports::mail::Mailer>),
        readiness,
        clock,
        name: "embedded",
    })
}
