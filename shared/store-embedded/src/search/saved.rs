//! A loaded partition saved to a file when `serve` stops (`SqliteSearch::save_partitions`)
//! and read back on the partition's next first use instead of being rebuilt from its
//! rows: the slots, the quantized vectors, the keyword postings and the HNSW graph as
//! they were, so a restart neither cuts the words of every chunk again nor rebuilds the
//! graph (at 1 000 000 chunks, minutes).
//!
//! A saved file is one-shot: the process that reads it deletes it, so no copy of the
//! index lies on disk while a process works on the partition, and what is forgotten
//! afterwards is not kept in an old file. What the table changed after the save (its
//! `search_changes` log, by sequence number) is applied on top; a file older than the
//! log reaches, of another embedder or dimension, or damaged is dropped and the rows
//! are loaded as before. The file is written beside the database, readable by its owner
//! only, and renamed into place once complete.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use domain::memory::MemoryScope;
use domain::{Id, Timestamp};
use ports::search::DocKind;

use super::bm25::Bm25;
use super::codec::{Bad, Reader, Writer};
use super::hnsw::Hnsw;
use super::rows::row_doc;
use super::vectors::Vectors;
use super::{EXACT_MAX, Partition, Slot};
use crate::db::sql_err;

const MAGIC: &[u8; 8] = b"CTYSRCH2";
const END: &[u8; 8] = b"CTYSRCHE";

/// The directory of the saved partitions of the database at `db`.
pub(super) fn dir(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".search");
    db.with_file_name(name)
}

/// A partition's file in `dir`: named by a digest of its key, so no tenant or scope
/// name reaches a path.
pub(super) fn file(dir: &Path, tenant: &str, scope: &str) -> PathBuf {
    let key = format!("{tenant}\u{0}{scope}");
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("{hex}.idx"))
}

/// Writes `p` (up to change `seq` of the table's log) to `path`, through a temporary
/// file renamed into place once it is complete and synced.
pub(super) fn write(p: &Partition, embedder: &str, seq: i64, path: &Path) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = path.with_extension("tmp");
    let written = write_to(p, embedder, seq, &tmp).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        // A half-written copy (a full disk) holds the index's text: not left behind.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

fn write_to(p: &Partition, embedder: &str, seq: i64, tmp: &Path) -> std::io::Result<()> {
    let f = crate::private::file_options().write(true).create(true).truncate(true).open(tmp)?;
    let mut w = Writer(BufWriter::with_capacity(1 << 20, f));
    w.0.write_all(MAGIC)?;
    w.str(embedder)?;
    w.len(p.dim)?;
    w.str(&p.scope.storage_key())?;
    w.i64(seq)?;
    w.len(p.slots.len())?;
    for s in &p.slots {
        w.str(s.id.as_str())?;
        w.str(s.doc.as_str())?;
        w.str(s.kind.as_str())?;
        w.str(&s.title)?;
        w.str(&s.text)?;
        match s.occurred_at {
            Some(t) => {
                w.u8(1)?;
                w.i64(t.0)?;
            }
            None => w.u8(0)?,
        }
        w.i64(s.at.0)?;
        w.u8(u8::from(s.has_vector) | (u8::from(s.alive) << 1))?;
    }
    let (data, scale) = p.vectors.parts();
    for chunk in data.chunks(1 << 20) {
        let bytes: Vec<u8> = chunk.iter().map(|&x| x.to_le_bytes()[0]).collect();
        w.0.write_all(&bytes)?;
    }
    let bits: Vec<u32> = scale.iter().map(|x| x.to_bits()).collect();
    w.u32s(&bits)?;
    p.bm25.save(&mut w)?;
    match &p.graph {
        Some(g) => {
            w.u8(1)?;
            g.save(&mut w)?;
        }
        None => w.u8(0)?,
    }
    w.0.write_all(END)?;
    let f = w.0.into_inner().map_err(std::io::IntoInnerError::into_error)?;
    f.sync_all()
}

/// The partition saved in `path` and the change of the table's log it is up to, when it
/// was saved for this `embedder`, `dim` and `scope`.
pub(super) fn read(path: &Path, embedder: &str, dim: usize, scope: &MemoryScope) -> Result<(Partition, i64), Bad> {
    let f = std::fs::File::open(path).map_err(|e| format!("opening: {e}"))?;
    let size = f.metadata().map_err(|e| format!("reading its size: {e}"))?.len();
    let mut r = Reader::new(f, size);
    if r.bytes(MAGIC.len())? != MAGIC {
        return Err("not a saved partition of this version".into());
    }
    let saved_embedder = r.str()?;
    let saved_dim = r.len()?;
    if saved_embedder != embedder || saved_dim != dim {
        return Err(format!("saved for embedder {saved_embedder} ({saved_dim} dimensions), not {embedder} ({dim})"));
    }
    if r.str()? != scope.storage_key() {
        return Err("saved for another scope".into());
    }
    let seq = r.i64()?;
    let n = r.len()?;
    let mut p = Partition::new(scope.clone(), dim);
    p.slots.reserve(n);
    for slot in 0..n {
        let id = Id::new(r.str()?).map_err(|e| e.message)?;
        let doc = Id::new(r.str()?).map_err(|e| e.message)?;
        let kind = DocKind::parse(&r.str()?).map_err(|e| e.message)?;
        let (title, text) = (r.str()?, r.str()?);
        let occurred_at = match r.u8()? {
            0 => None,
            1 => Some(Timestamp(r.i64()?)),
            _ => return Err("a time marker that is neither 0 nor 1".into()),
        };
        let at = Timestamp(r.i64()?);
        let flags = r.u8()?;
        let (has_vector, alive) = (flags & 1 != 0, flags & 2 != 0);
        if alive {
            let slot = u32::try_from(slot).map_err(|_| "more slots than a partition holds")?;
            if p.by_id.insert(id.as_str().to_owned(), slot).is_some() {
                return Err("one chunk in two live slots".into());
            }
            p.by_doc.entry(doc.as_str().to_owned()).or_default().push(slot);
            p.live_vectors += usize::from(has_vector);
        }
        p.slots.push(Slot { id, doc, kind, title, text, occurred_at, at, has_vector, alive });
    }
    let data: Vec<i8> = r
        .bytes(n.checked_mul(dim).ok_or("a vector array that overflows")?)?
        .into_iter()
        .map(|b| i8::from_le_bytes([b]))
        .collect();
    let scale: Vec<f32> = r.u32s()?.into_iter().map(f32::from_bits).collect();
    if scale.len() != n {
        return Err("a vector scale per slot is missing".into());
    }
    p.vectors = Arc::new(Vectors::from_parts(dim, data, scale).ok_or("vectors that do not fill their slots")?);
    p.bm25 = Bm25::read(&mut r, n)?;
    p.graph = match r.u8()? {
        0 => None,
        1 => Some(Hnsw::read(&mut r, n)?),
        _ => return Err("a graph marker that is neither 0 nor 1".into()),
    };
    if r.bytes(END.len())? != END || !r.at_end() {
        return Err("the file does not end where it should".into());
    }
    // Saved while its graph was being built: it is built again in the background.
    p.building = p.graph.is_none() && p.live_vectors > EXACT_MAX;
    Ok((p, seq))
}

impl super::SqliteSearch {
    /// Saves each loaded partition of more than [`EXACT_MAX`] chunks to a file beside the
    /// database, for the next start to read instead of rebuilding it from the rows (see
    /// the module's documentation); returns how many it saved. For a process that stops:
    /// writes to a partition wait while it is saved. A partition that cannot be saved is
    /// logged and skipped — its rows are loaded next time, as without a file.
    ///
    /// # Errors
    /// None today; `Result` for the port's signature.
    pub async fn save_partitions(&self) -> domain::Result<usize> {
        let loaded: Vec<(super::Key, super::Shared)> = self
            .partitions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter_map(|(k, cell)| cell.get().map(|p| (k.clone(), p.clone())))
            .collect();
        let mut saved = 0;
        for ((t, s), part) in loaded {
            let _writing = part.writer.lock().await;
            // Every change of another process up to `seen` is applied; later ones are
            // applied again on reading (which is harmless).
            let seq = self.seen.load(std::sync::atomic::Ordering::Acquire).max(0);
            let p = part.index.clone().read_owned().await;
            if p.slots.len() <= EXACT_MAX {
                continue;
            }
            let (path, embedder) = (file(&self.saved, &t, &s), self.embedder.clone());
            let started = std::time::Instant::now();
            let chunks = p.slots.len();
            match tokio::task::spawn_blocking(move || write(&p, &embedder, seq, &path)).await {
                Ok(Ok(())) => {
                    saved += 1;
                    tracing::info!(
                        chunks,
                        seconds = started.elapsed().as_secs_f64(),
                        "search partition saved for the next start"
                    );
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "a search partition was not saved: the next start loads its rows"),
                Err(e) => tracing::warn!(error = %e, "a search partition was not saved: the next start loads its rows"),
            }
        }
        Ok(saved)
    }

    /// The partition `(t, s)` from its saved file, brought up to date with the table's
    /// change log; `None` when there is no usable file (the rows are then loaded). The
    /// file is deleted either way.
    pub(super) async fn read_saved(&self, t: &str, s: &str, scope: &MemoryScope) -> domain::Result<Option<Partition>> {
        let path = file(&self.saved, t, s);
        if !path.exists() {
            return Ok(None);
        }
        let (embedder, dim, sc) = (self.embedder.clone(), self.dim, scope.clone());
        let started = std::time::Instant::now();
        let read = tokio::task::spawn_blocking(move || {
            let r = read(&path, &embedder, dim, &sc);
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(error = %e, path = %path.display(), "a saved search partition could not be deleted after reading");
            }
            r
        })
        .await
        .map_err(|e| domain::Error::internal(format!("reading a saved search partition: {e}")))?;
        let (mut p, seq) = match read {
            Ok(x) => x,
            Err(why) => {
                tracing::warn!(%why, "a saved search partition was not used: loading its rows");
                return Ok(None);
            }
        };
        let (t, s) = (t.to_owned(), s.to_owned());
        let tenant = domain::TenantId::new(if t.is_empty() { "global" } else { t.as_str() })?;
        let sc = scope.clone();
        let since = self
            .db
            .read(move |c| {
                let (oldest, given): (Option<i64>, i64) = c
                    .query_row(
                        "SELECT (SELECT MIN(seq) FROM search_changes),
                                COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'search_changes'), 0)",
                        [],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .map_err(sql_err)?;
                // The log went backwards (a restored database) or was pruned past the
                // save: the file cannot be brought up to date.
                if given < seq || (given > seq && oldest.is_none_or(|o| o > seq + 1)) {
                    return Ok(None);
                }
                let mut st = c
                    .prepare_cached("SELECT DISTINCT doc FROM search_changes WHERE tenant = ?1 AND scope = ?2 AND seq > ?3")
                    .map_err(sql_err)?;
                let docs = st
                    .query_map(rusqlite::params![t, s, seq], |r| r.get::<_, String>(0))
                    .map_err(sql_err)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(sql_err)?;
                let mut st = c
                    .prepare_cached(
                        "SELECT id, doc, kind, title, text, embedder, vector, updated_at, occurred_at FROM search_docs
                         WHERE tenant = ?1 AND scope = ?2 AND doc = ?3",
                    )
                    .map_err(sql_err)?;
                let mut changed = Vec::with_capacity(docs.len());
                for doc in docs {
                    let mut rows = st.query(rusqlite::params![t, s, doc]).map_err(sql_err)?;
                    let mut out = Vec::new();
                    while let Some(r) = rows.next().map_err(sql_err)? {
                        out.push(row_doc(r, &tenant, &sc)?);
                    }
                    changed.push((doc, out));
                }
                let count: i64 = c
                    .query_row(
                        "SELECT COUNT(*) FROM search_docs WHERE tenant = ?1 AND scope = ?2",
                        rusqlite::params![t, s],
                        |r| r.get(0),
                    )
                    .map_err(sql_err)?;
                Ok(Some((changed, count)))
            })
            .await?;
        let Some((changed, count)) = since else {
            tracing::warn!("a saved search partition is older than the change log reaches: loading its rows");
            return Ok(None);
        };
        let replayed = changed.len();
        for (doc, rows) in changed {
            p.replace_doc(&doc, rows, &self.embedder);
        }
        // A last check that file and table agree: as many live chunks as rows.
        if usize::try_from(count).ok() != Some(p.by_id.len()) {
            tracing::warn!(
                saved = p.by_id.len(),
                rows = count,
                "a saved search partition disagrees with the table: loading its rows"
            );
            return Ok(None);
        }
        tracing::info!(
            chunks = p.slots.len(),
            replayed,
            seconds = started.elapsed().as_secs_f64(),
            "search partition read from its saved file"
        );
        Ok(Some(p))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{DIM, doc, nearest, vector};
    use super::super::{EXACT_MAX, SqliteSearch};
    use crate::db::Db;
    use domain::memory::MemoryScope;
    use domain::{Id, TenantId};
    use ports::search::{SearchIndex, SearchMode};

    fn files(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).map_or(0, |d| d.filter(|e| e.is_ok()).count())
    }

    async fn top(index: &SqliteSearch, t: &TenantId, i: usize, mode: SearchMode) -> Vec<String> {
        let mut q = nearest(t, vector(i as u64));
        q.mode = mode;
        q.text = format!("memory {i}");
        index.search(&q).await.unwrap().into_iter().map(|h| h.doc.as_str().to_owned()).collect()
    }

    /// A saved partition answers as the one it was saved from, with its graph at once;
    /// what another process changed after the save is applied on reading; the file is
    /// read once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_saved_partition_comes_back_whole_with_later_changes_applied() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("search.db")).unwrap();
        let t = TenantId::new("t1").unwrap();
        let n = EXACT_MAX + 300;
        let docs: Vec<_> = (0..n).map(|i| doc(&t, i)).collect();
        let index = SqliteSearch::new(db.clone(), "e", DIM);
        index.upsert(&docs).await.unwrap();
        index.remove(&t, &MemoryScope::Org, &Id::new("d3").unwrap()).await.unwrap();
        // Another process with the partition loaded, writing after the save.
        let other = SqliteSearch::new(db.clone(), "e", DIM);
        other.search(&nearest(&t, vector(1))).await.unwrap();
        let before = [(7, SearchMode::Vector), (11, SearchMode::Keyword), (2_100, SearchMode::Hybrid)];
        let mut expected = Vec::new();
        for (i, m) in &before {
            expected.push(top(&index, &t, *i, *m).await);
        }
        assert_eq!(index.save_partitions().await.unwrap(), 1);
        let saved = super::dir(db.path());
        assert_eq!(files(&saved), 1);
        other.upsert(&[doc(&t, n)]).await.unwrap();
        other.remove(&t, &MemoryScope::Org, &Id::new("d9").unwrap()).await.unwrap();

        let reopened = SqliteSearch::new(db, "e", DIM);
        assert!(reopened.read_saved("t2", "org", &MemoryScope::Org).await.unwrap().is_none(), "no file for another key");
        for ((i, m), want) in before.iter().zip(&expected) {
            assert_eq!(&top(&reopened, &t, *i, *m).await, want, "query {i} {m:?} answers as before the save");
        }
        assert_eq!(files(&saved), 0, "the file is read once");
        assert!(reopened.graph_ready(&t, &MemoryScope::Org).await, "the graph came back with it");
        assert_eq!(top(&reopened, &t, n, SearchMode::Vector).await[0], format!("d{n}"), "a later write is applied");
        assert!(!top(&reopened, &t, 9, SearchMode::Hybrid).await.contains(&"d9".to_owned()), "a later removal is applied");
        assert!(!top(&reopened, &t, 3, SearchMode::Hybrid).await.contains(&"d3".to_owned()), "a removal before the save holds");
    }

    /// A damaged file, or one that disagrees with the table, is dropped and the rows are
    /// loaded instead: the answers are the table's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_damaged_or_stale_file_is_dropped_for_the_rows() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("search.db")).unwrap();
        let t = TenantId::new("t1").unwrap();
        let docs: Vec<_> = (0..EXACT_MAX + 50).map(|i| doc(&t, i)).collect();
        let index = SqliteSearch::new(db.clone(), "e", DIM);
        index.upsert(&docs).await.unwrap();
        let saved = super::dir(db.path());
        let only = |dir: &std::path::Path| std::fs::read_dir(dir).unwrap().next().unwrap().unwrap().path();

        // Cut short.
        index.save_partitions().await.unwrap();
        let path = only(&saved);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let reopened = SqliteSearch::new(db.clone(), "e", DIM);
        assert_eq!(top(&reopened, &t, 5, SearchMode::Vector).await[0], "d5");
        assert_eq!(files(&saved), 0);

        // Bytes overwritten in the middle of the file.
        reopened.save_partitions().await.unwrap();
        let path = only(&saved);
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid..mid + 64].fill(0xff);
        std::fs::write(&path, &bytes).unwrap();
        let again = SqliteSearch::new(db.clone(), "e", DIM);
        assert_eq!(top(&again, &t, 6, SearchMode::Vector).await[0], "d6");

        // A row deleted behind the log's back (a database restored from a copy): the
        // counts disagree.
        again.save_partitions().await.unwrap();
        db.run(|c| {
            c.execute("DELETE FROM search_docs WHERE doc = 'd8'", []).map_err(crate::db::sql_err)?;
            Ok(())
        })
        .await
        .unwrap();
        let last = SqliteSearch::new(db, "e", DIM);
        assert!(!top(&last, &t, 8, SearchMode::Vector).await.contains(&"d8".to_owned()), "the table's answer, not the file's");
        assert_eq!(files(&saved), 0);
    }

    /// A save that fails (here the rename: a folder stands where the file goes) leaves
    /// no half-written copy of the index behind.
    #[tokio::test]
    async fn a_failed_save_leaves_no_copy() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("search.db")).unwrap();
        let t = TenantId::new("t1").unwrap();
        let index = SqliteSearch::new(db.clone(), "e", DIM);
        index.upsert(&(0..EXACT_MAX + 10).map(|i| doc(&t, i)).collect::<Vec<_>>()).await.unwrap();
        let saved = super::dir(db.path());
        let blocked = super::file(&saved, "t1", "org");
        std::fs::create_dir_all(blocked.join("in-the-way")).unwrap();
        assert_eq!(index.save_partitions().await.unwrap(), 0, "logged and skipped");
        let left: Vec<_> = std::fs::read_dir(&saved).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(left, vec![blocked], "no temporary file left");
    }

    #[tokio::test]
    async fn a_small_partition_is_not_saved() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("search.db")).unwrap();
        let t = TenantId::new("t1").unwrap();
        let index = SqliteSearch::new(db.clone(), "e", DIM);
        index.upsert(&[doc(&t, 1)]).await.unwrap();
        assert_eq!(index.save_partitions().await.unwrap(), 0);
        assert_eq!(files(&super::dir(db.path())), 0);
    }
}
