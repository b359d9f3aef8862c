//! The SQLite database file: opening, pragmas, migrations, and running work off the
//! async runtime.
//!
//! Durability: WAL journal, and a committed transaction has been fsynced before the call
//! returns; an acknowledged write survives a process crash and, on a disk that honours
//! fsync, a power loss. A database opened with [`Db::batching`] (the main one) gets
//! there its own way: SQLite commits without a flush (`synchronous=NORMAL`) and [`Db`]
//! then flushes the log itself (`fdatasync` of the `-wal` file) before the call returns
//! — the same guarantee as `synchronous=FULL`, but one flush covers every commit before
//! it: writers that commit while another flushes share the next one (group commit), and
//! inside [`ports::durability::batched`] a use case's commits skip the flush and are made
//! durable together by [`Db::sync`] before it answers.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use domain::{Error, Result};
use rusqlite::Connection;

/// How much of the database file each connection reads through a memory map instead
/// of `pread` into its own page cache (address space, not memory: the pages are the
/// kernel's, shared by every connection). Without it a write-heavy load spent a third
/// of its CPU copying pages the small per-connection caches kept evicting.
const MMAP_BYTES: i64 = 1 << 30;

/// Ordered migrations; `PRAGMA user_version` records how many have run.
const MIGRATIONS: &[&str] = &[
    // 1: items (record of truth) and the work queue with its dead letters.
    "CREATE TABLE items (
        tenant  TEXT    NOT NULL,
        part    TEXT    NOT NULL,
        sk      TEXT    NOT NULL,
        version INTEGER NOT NULL,
        body    BLOB    NOT NULL,
        PRIMARY KEY (tenant, part, sk)
     ) WITHOUT ROWID;
     CREATE TABLE queue (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        queue         TEXT    NOT NULL,
        tenant        TEXT    NOT NULL,
        kind          TEXT    NOT NULL,
        idem          TEXT    NOT NULL,
        body          BLOB    NOT NULL,
        enqueued_at   INTEGER NOT NULL,
        visible_at    INTEGER NOT NULL,
        receive_count INTEGER NOT NULL DEFAULT 0,
        receipt       TEXT
     );
     CREATE INDEX queue_visible ON queue (queue, visible_at, id);
     CREATE UNIQUE INDEX queue_receipt ON queue (receipt) WHERE receipt IS NOT NULL;
     CREATE TABLE dead_letters (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        queue         TEXT    NOT NULL,
        tenant        TEXT    NOT NULL,
        kind          TEXT    NOT NULL,
        idem          TEXT    NOT NULL,
        body          BLOB    NOT NULL,
        receive_count INTEGER NOT NULL,
        reason        TEXT    NOT NULL,
        dead_at       INTEGER NOT NULL
     );",
    // 2: the search index's chunks (the in-process BM25 and vector indexes are built
    // from them per (tenant, scope) partition).
    "CREATE TABLE search_docs (
        tenant     TEXT    NOT NULL,
        scope      TEXT    NOT NULL,
        id         TEXT    NOT NULL,
        doc        TEXT    NOT NULL,
        kind       TEXT    NOT NULL,
        title      TEXT    NOT NULL,
        text       TEXT    NOT NULL,
        embedder   TEXT    NOT NULL,
        vector     BLOB    NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (tenant, scope, id)
     ) WITHOUT ROWID;
     CREATE INDEX search_docs_doc ON search_docs (tenant, scope, doc);",
    // 3: when an indexed record happened (a turn's time, a memory's event time), for
    // `since`/`until`; NULL means `updated_at`.
    "ALTER TABLE search_docs ADD COLUMN occurred_at INTEGER;",
    // 4: which records of the index each process changed, so the `serve` running on a
    // home sees what a CLI command (an import, a reindex) wrote into it.
    "CREATE TABLE search_changes (
        seq    INTEGER PRIMARY KEY AUTOINCREMENT,
        writer TEXT    NOT NULL,
        tenant TEXT    NOT NULL,
        scope  TEXT    NOT NULL,
        doc    TEXT    NOT NULL,
        at     INTEGER NOT NULL
     );",
];

/// Read-only connections beside the writer: in WAL mode readers never wait for a
/// writer's fsync, so point reads (a credential, an entity) are not queued behind
/// commits (the audit ledger's group writes above all).
const READERS: usize = 2;

/// The SQLite database: one writer connection behind a mutex (SQLite serialises writers
/// anyway, and one connection keeps transactions simple) and a few read-only ones.
/// Every call runs on the blocking pool.
#[derive(Clone)]
pub struct Db {
    conn: Arc<Mutex<Connection>>,
    readers: Arc<Vec<Mutex<Connection>>>,
    next_reader: Arc<std::sync::atomic::AtomicUsize>,
    path: Arc<std::path::PathBuf>,
    /// Set once SQLite reported the file damaged: `/healthz` says so until a restart.
    damaged: Arc<std::sync::atomic::AtomicBool>,
    /// The writer connection's `data_version` last seen ([`Self::others_committed`]).
    data_version: Arc<std::sync::atomic::AtomicI64>,
    /// Commits flush the log themselves ([`Self::batching`]) rather than through SQLite.
    batching: bool,
    flushes: Arc<Flushes>,
}

/// The log flushes of a [`Db::batching`] database.
#[derive(Default)]
struct Flushes {
    /// Write calls that changed something, counted under the writer lock once done.
    written: AtomicU64,
    /// The `written` count the last flush covered.
    flushed: AtomicU64,
    /// One flush at a time: a caller that finds its writes covered by the last one
    /// returns without flushing again.
    one: Mutex<()>,
    /// Flushes done (tests and benches read it).
    done: AtomicU64,
}

/// What a client is told when SQLite finds the database file damaged: not "retry
/// shortly", which would never help.
pub const DAMAGED: &str = "the database is damaged; an operator must restore it (continuity restore)";

fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase))
}

pub(crate) fn sql_err(e: rusqlite::Error) -> Error {
    if is_damage(&e) {
        let mut err = Error::new(domain::ErrorCode::Unavailable, DAMAGED);
        err.internal = Some(format!("sqlite: {e}"));
        return err;
    }
    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
        let mut err = Error::unavailable(format!("sqlite: {e}"));
        err.message = "the server's disk is full; nothing was written".into();
        return err;
    }
    Error::unavailable(format!("sqlite: {e}"))
}

/// Creates the database file readable by its owner only (0600), or narrows an existing
/// one's permissions to that; SQLite gives its `-wal` and `-shm` files the same.
fn owner_only(path: &Path) -> Result<()> {
    let io = |e: std::io::Error| Error::unavailable(format!("{}: {e}", path.display()));
    match crate::private::file_options().write(true).create_new(true).open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            for p in [path.to_path_buf(), path.with_extension("db-wal"), path.with_extension("db-shm")] {
                match crate::private::set_mode(&p, 0o600) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io(e)),
                }
            }
            Ok(())
        }
        Err(e) => Err(io(e)),
    }
}

impl Db {
    /// Opens or creates the database and runs pending migrations.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the file cannot be opened, is not a database, or a migration fails.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::unavailable(format!("creating {}: {e}", dir.display())))?;
        }
        owner_only(path)?;
        // Where it went wrong, for the operator reading the start-up error.
        let at = |e: Error| {
            let mut e = e;
            let what = if e.message == DAMAGED {
                format!(
                    "{} is damaged ({}). Restore the home folder from a backup, or move the file aside and run \
                     `continuity restore` to rebuild the Spine from the blob backups",
                    path.display(),
                    e.internal.as_deref().unwrap_or("unreadable")
                )
            } else {
                format!("{}: {}", path.display(), e.internal.as_deref().unwrap_or(&e.message))
            };
            e.internal = Some(what);
            e
        };
        let mut conn = Connection::open(path).map_err(sql_err).map_err(at)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(sql_err).map_err(at)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(sql_err).map_err(at)?;
        conn.pragma_update(None, "busy_timeout", 5000).map_err(sql_err).map_err(at)?;
        conn.pragma_update(None, "mmap_size", MMAP_BYTES).map_err(sql_err).map_err(at)?;
        migrate(&mut conn).map_err(at)?;
        let mut readers = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            let r = Connection::open_with_flags(
                path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(sql_err)?;
            r.pragma_update(None, "busy_timeout", 5000).map_err(sql_err)?;
            r.pragma_update(None, "mmap_size", MMAP_BYTES).map_err(sql_err)?;
            readers.push(Mutex::new(r));
        }
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            readers: Arc::new(readers),
            next_reader: Arc::default(),
            path: Arc::new(path.to_path_buf()),
            damaged: Arc::default(),
            data_version: Arc::default(),
            batching: false,
            flushes: Arc::default(),
        })
    }

    /// The same database with its commits flushed by [`Db`] rather than by SQLite, so
    /// that one flush covers many commits (see the module's documentation).
    ///
    /// # Errors
    /// `UNAVAILABLE` when the writer connection refuses the setting.
    pub fn batching(mut self) -> Result<Self> {
        let conn = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(sql_err)?;
        drop(conn);
        self.batching = true;
        Ok(self)
    }

    /// Makes every commit so far durable: one flush of the log, unless an earlier one
    /// already covered them. Nothing to do on a database that is not [`Self::batching`]
    /// (each of its commits was flushed by SQLite).
    ///
    /// # Errors
    /// `UNAVAILABLE` when the disk could not confirm the flush.
    pub async fn sync(&self) -> Result<()> {
        if !self.batching {
            return Ok(());
        }
        let upto = self.flushes.written.load(Ordering::Acquire);
        if self.flushes.flushed.load(Ordering::Acquire) >= upto {
            return Ok(());
        }
        let db = self.clone();
        tokio::task::spawn_blocking(move || db.flush(upto)).await.map_err(|e| Error::internal(format!("sqlite flush: {e}")))?
    }

    /// How many times the log was flushed by [`Db`] (a [`Self::batching`] database).
    pub fn flush_count(&self) -> u64 {
        self.flushes.done.load(Ordering::Relaxed)
    }

    /// Flushes the log unless a flush since write number `upto` already did (blocking).
    fn flush(&self, upto: u64) -> Result<()> {
        let f = &self.flushes;
        if f.flushed.load(Ordering::Acquire) >= upto {
            return Ok(());
        }
        let _one = f.one.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if f.flushed.load(Ordering::Acquire) >= upto {
            return Ok(());
        }
        // Every write counted so far has its frames in the log: the flush covers them.
        let covers = f.written.load(Ordering::Acquire);
        let mut wal = self.path.as_os_str().to_owned();
        wal.push("-wal");
        match std::fs::File::open(&wal) {
            Ok(file) => file.sync_data().map_err(|e| {
                let mut err = Error::unavailable("the disk did not confirm the write; retry it");
                err.internal = Some(format!("fdatasync {}: {e}", Path::new(&wal).display()));
                err
            })?,
            // No log: SQLite checkpointed it into the database file and removed it,
            // which it does only after flushing both.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::unavailable(format!("{}: {e}", Path::new(&wal).display()))),
        }
        f.flushed.fetch_max(covers, Ordering::AcqRel);
        f.done.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Whether another process committed to the database since the last call (SQLite's
    /// `data_version` of the writer connection, which changes only for other
    /// connections' commits — the readers here never write). The first call says `false`.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the database cannot be read.
    pub fn others_committed(&self) -> Result<bool> {
        let conn = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let version: i64 = conn.query_row("PRAGMA data_version", [], |r| r.get(0)).map_err(sql_err)?;
        drop(conn);
        let before = self.data_version.swap(version, std::sync::atomic::Ordering::Relaxed);
        Ok(before != 0 && before != version)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether SQLite has reported the file damaged since it was opened.
    pub fn is_damaged(&self) -> bool {
        self.damaged.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Remembers a damaged-file error on its way out.
    fn note<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r
            && e.message == DAMAGED
        {
            if !self.is_damaged() {
                tracing::error!(
                    file = %self.path.display(),
                    "the database is damaged: restore the home from a backup or rebuild it with `continuity restore`"
                );
            }
            self.damaged.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }

    /// Whether any tenant's data key is stored: then the data is sealed under the vault's
    /// master key, which must be the one it was sealed with. Returns one
    /// `(tenant, wrapped key)` to test the master key with.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the database cannot be read.
    pub fn sealed_sample(&self) -> Result<Option<(String, Vec<u8>)>> {
        let conn = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut stmt =
            conn.prepare("SELECT tenant, body FROM items WHERE part = 'vault' AND sk = 'dek' LIMIT 1").map_err(sql_err)?;
        let mut rows = stmt.query([]).map_err(sql_err)?;
        match rows.next().map_err(sql_err)? {
            Some(r) => Ok(Some((r.get(0).map_err(sql_err)?, r.get(1).map_err(sql_err)?))),
            None => Ok(None),
        }
    }

    /// Runs a read-only `f` on one of the reader connections (round robin), on the
    /// blocking pool. It sees every transaction committed before it starts.
    ///
    /// # Errors
    /// Whatever `f` returns; `INTERNAL` if the worker panicked.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let readers = self.readers.clone();
        let i = self.next_reader.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % READERS;
        let r = tokio::task::spawn_blocking(move || {
            let guard = readers[i].lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&guard)
        })
        .await
        .map_err(|e| Error::internal(format!("sqlite reader: {e}")))?;
        self.note(r)
    }

    /// Runs a short read-only `f` (one keyed point read: microseconds, from SQLite's page
    /// cache) on the calling thread when a reader connection is free, so the hottest
    /// reads — a credential, an entity — skip the hop to the blocking pool and back (two
    /// thread wake-ups). When both readers are busy it goes the [`Self::read`] way.
    /// Never use it for scans.
    ///
    /// # Errors
    /// Whatever `f` returns; `INTERNAL` if the worker panicked.
    pub async fn read_point<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        for reader in self.readers.iter() {
            if let Ok(guard) = reader.try_lock() {
                return self.note(f(&guard));
            }
        }
        self.read(f).await
    }

    /// Runs `f` with the connection on the blocking pool.
    ///
    /// # Errors
    /// Whatever `f` returns; `INTERNAL` if the worker panicked.
    pub async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let db = self.clone();
        // Inside a batched use case the flush is left to its `sync` (module docs).
        let flush = self.batching && !ports::durability::is_batched();
        let r = tokio::task::spawn_blocking(move || {
            // A poisoned lock only means another call panicked mid-way; SQLite rolled
            // its transaction back, so the connection itself is still sound.
            let mut guard = db.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let before = guard.total_changes();
            let r = f(&mut guard);
            if !db.batching || guard.total_changes() == before {
                return r;
            }
            let this = db.flushes.written.fetch_add(1, Ordering::AcqRel) + 1;
            drop(guard);
            match (r, flush) {
                (Ok(v), true) => db.flush(this).map(|()| v),
                (r, _) => r,
            }
        })
        .await
        .map_err(|e| Error::internal(format!("sqlite worker: {e}")))?;
        self.note(r)
    }
}

/// The database schema this binary writes: how many migrations it knows.
pub const SCHEMA: usize = MIGRATIONS.len();

/// The schema version of the database file at `path` (how many migrations ran), read
/// without changing it; `None` when there is no such file.
///
/// # Errors
/// `UNAVAILABLE` when the file cannot be read as a database.
pub fn schema_of(path: &Path) -> Result<Option<usize>> {
    if !path.exists() {
        return Ok(None);
    }
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(sql_err)?;
    let v: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(sql_err)?;
    Ok(Some(usize::try_from(v).unwrap_or(0)))
}

/// Writes a consistent copy of the database at `path` (what its write-ahead log holds
/// included) into the new file `to`, owner-only, with `VACUUM INTO`.
///
/// # Errors
/// `UNAVAILABLE` when either file cannot be used.
pub fn snapshot(path: &Path, to: &Path) -> Result<()> {
    owner_only(to)?;
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(sql_err)?;
    let target = to.to_str().ok_or_else(|| Error::unavailable(format!("{} is not a UTF-8 path", to.display())))?;
    conn.execute("VACUUM INTO ?1", [target]).map_err(sql_err)?;
    Ok(())
}

/// SQLite's own consistency check of the database at `path` (`PRAGMA quick_check`).
///
/// # Errors
/// `UNAVAILABLE` naming what the check found.
pub fn verify(path: &Path) -> Result<()> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(sql_err)?;
    let found: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0)).map_err(sql_err)?;
    if found != "ok" {
        return Err(Error::unavailable(format!("{} fails its consistency check: {found}", path.display())));
    }
    Ok(())
}

/// Test support: a database at `path` with only the first `version` migrations run, as
/// an older binary left it.
///
/// # Errors
/// When the file cannot be written.
#[doc(hidden)]
pub fn create_at_schema(path: &Path, version: usize) -> Result<()> {
    let mut conn = Connection::open(path).map_err(sql_err)?;
    conn.pragma_update(None, "journal_mode", "WAL").map_err(sql_err)?;
    for (i, sql) in MIGRATIONS.iter().enumerate().take(version) {
        let tx = conn.transaction().map_err(sql_err)?;
        tx.execute_batch(sql).map_err(sql_err)?;
        tx.pragma_update(None, "user_version", i + 1).map_err(sql_err)?;
        tx.commit().map_err(sql_err)?;
    }
    Ok(())
}

fn migrate(conn: &mut Connection) -> Result<()> {
    let current: usize =
        conn.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0)).map_err(sql_err)?.try_into().unwrap_or(0);
    if current > MIGRATIONS.len() {
        let mut e = Error::unavailable(format!(
            "the database is at schema version {current}, newer than this binary knows ({}); upgrade continuity",
            MIGRATIONS.len()
        ));
        e.message = "the database was written by a newer version of continuity; upgrade continuity".into();
        return Err(e);
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let tx = conn.transaction().map_err(sql_err)?;
        tx.execute_batch(sql).map_err(sql_err)?;
        tx.pragma_update(None, "user_version", i + 1).map_err(sql_err)?;
        tx.commit().map_err(sql_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_run_once_and_refuse_newer_databases() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        drop(Db::open(&path).unwrap());
        drop(Db::open(&path).unwrap());
        let c = Connection::open(&path).unwrap();
        let v: i64 = c.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(v, i64::try_from(MIGRATIONS.len()).unwrap());
        let mode: String = c.pragma_query_value(None, "journal_mode", |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        c.pragma_update(None, "user_version", 99).unwrap();
        drop(c);
        let e = Db::open(&path).err().unwrap();
        assert!(e.message.contains("newer version"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn the_file_is_the_owners_only() {
        use crate::private::{mode, set_mode};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        drop(Db::open(&path).unwrap());
        assert_eq!(mode(&std::fs::metadata(&path).unwrap()), Some(0o600));
        set_mode(&path, 0o644).unwrap();
        drop(Db::open(&path).unwrap());
        assert_eq!(mode(&std::fs::metadata(&path).unwrap()), Some(0o600), "narrowed on open");
    }

    fn insert(db: &Db, n: i64) -> impl std::future::Future<Output = Result<()>> + '_ {
        db.run(move |c| {
            c.execute(
                "INSERT INTO items (tenant, part, sk, version, body) VALUES ('t', 'p', ?1, 1, x'00')",
                rusqlite::params![n.to_string()],
            )
            .map(|_| ())
            .map_err(sql_err)
        })
    }

    /// A batching database flushes once per write outside a batched use case, once for
    /// all of a use case's writes inside one (at its `sync`), and never for a call that
    /// wrote nothing; what was written is read back at once either way.
    #[tokio::test]
    async fn batched_writes_share_one_flush() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("x.db")).unwrap().batching().unwrap();
        let synchronous: i64 =
            db.run(|c| c.pragma_query_value(None, "synchronous", |r| r.get(0)).map_err(sql_err)).await.unwrap();
        assert_eq!(synchronous, 1, "NORMAL: the flush is Db's");
        insert(&db, 1).await.unwrap();
        insert(&db, 2).await.unwrap();
        assert_eq!(db.flush_count(), 2, "each write outside a use case is durable on return");
        db.sync().await.unwrap();
        assert_eq!(db.flush_count(), 2, "nothing left to flush");

        ports::durability::batched(async {
            for n in 3..6 {
                insert(&db, n).await.unwrap();
            }
            let seen: i64 =
                db.read(|c| c.query_row("SELECT count(*) FROM items", [], |r| r.get(0)).map_err(sql_err)).await.unwrap();
            assert_eq!(seen, 5, "committed: readers see the batched writes at once");
            assert_eq!(db.flush_count(), 2, "a batched write leaves its flush to the use case");
        })
        .await;
        db.sync().await.unwrap();
        assert_eq!(db.flush_count(), 3, "one flush for the three");
        db.sync().await.unwrap();
        db.run(|c| c.execute("DELETE FROM items WHERE sk = 'none'", []).map_err(sql_err)).await.unwrap();
        assert_eq!(db.flush_count(), 3, "a call that changed nothing does not flush");

        // A database that is not batching leaves every flush to SQLite.
        let plain = Db::open(&dir.path().join("y.db")).unwrap();
        ports::durability::batched(insert(&plain, 1)).await.unwrap();
        plain.sync().await.unwrap();
        assert_eq!(plain.flush_count(), 0);
        let synchronous: i64 =
            plain.run(|c| c.pragma_query_value(None, "synchronous", |r| r.get(0)).map_err(sql_err)).await.unwrap();
        assert_eq!(synchronous, 2, "FULL");
    }

    #[test]
    fn a_damaged_file_is_named_with_the_way_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        std::fs::write(&path, vec![0x5a; 8192]).unwrap();
        let e = Db::open(&path).err().unwrap();
        assert_eq!(e.message, DAMAGED);
        let detail = e.internal.unwrap();
        assert!(detail.contains("x.db") && detail.contains("continuity restore"), "{detail}");
    }
}
