//! A partition's rows: a `search_docs` row decoded into a [`SearchDoc`], vectors to and
//! from their stored bytes, and the load of a whole partition from its rows.

use domain::memory::MemoryScope;
use domain::{Error, Id, Result, TenantId, Timestamp};
use ports::search::{DocKind, SearchDoc};

use super::{EXACT_MAX, Partition};
use crate::db::sql_err;

pub(super) fn row_doc(r: &rusqlite::Row<'_>, tenant: &TenantId, scope: &MemoryScope) -> Result<SearchDoc> {
    Ok(SearchDoc {
        tenant: tenant.clone(),
        scope: scope.clone(),
        id: Id::new(r.get::<_, String>(0).map_err(sql_err)?)?,
        doc: Id::new(r.get::<_, String>(1).map_err(sql_err)?)?,
        kind: DocKind::parse(&r.get::<_, String>(2).map_err(sql_err)?)?,
        title: r.get(3).map_err(sql_err)?,
        text: r.get(4).map_err(sql_err)?,
        embedder: r.get(5).map_err(sql_err)?,
        vector: bytes_vector(&r.get::<_, Vec<u8>>(6).map_err(sql_err)?),
        updated_at: Timestamp(r.get(7).map_err(sql_err)?),
        occurred_at: r.get::<_, Option<i64>>(8).map_err(sql_err)?.map(Timestamp),
    })
}

/// The chunks of record `doc` in partition `(t, s)` of `tenant`'s `scope`, by id.
pub(super) fn doc_rows(
    c: &rusqlite::Connection,
    (t, s): (&str, &str),
    doc: &str,
    tenant: &TenantId,
    scope: &MemoryScope,
) -> Result<Vec<SearchDoc>> {
    let mut st = c
        .prepare_cached(
            "SELECT id, doc, kind, title, text, embedder, vector, updated_at, occurred_at FROM search_docs
             WHERE tenant = ?1 AND scope = ?2 AND doc = ?3 ORDER BY id",
        )
        .map_err(sql_err)?;
    let mut rows = st.query(rusqlite::params![t, s, doc]).map_err(sql_err)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(sql_err)? {
        out.push(row_doc(r, tenant, scope)?);
    }
    Ok(out)
}

/// A partition from its rows, on two threads: this one reads and decodes the rows, the
/// other cuts their words and files them into the partition (a restart's first query
/// waits for this: 1.0 → 0.8 s and 1.5 → 1.2 s at 100 000 chunks, side by side). Rows
/// pass in bounded batches, so no copy of the whole partition is held in between.
pub(super) fn load(
    rows: &mut rusqlite::Rows<'_>,
    tenant: &TenantId,
    scope: &MemoryScope,
    dim: usize,
    embedder: &str,
) -> Result<Partition> {
    const BATCH: usize = 256;
    std::thread::scope(|threads| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<SearchDoc>>(16);
        let filer = threads.spawn(move || {
            let mut p = Partition::new(scope.clone(), dim);
            // The graph is built after loading, in the background.
            p.building = true;
            for batch in rx {
                for d in batch {
                    p.put(d, embedder);
                    if p.slots.len().is_multiple_of(20_000) {
                        tracing::info!(chunks = p.slots.len(), scope = %scope.storage_key(), "loading a search partition");
                    }
                }
            }
            p.building = p.live_vectors > EXACT_MAX;
            p
        });
        let read = (|| {
            let mut batch = Vec::with_capacity(BATCH);
            while let Some(r) = rows.next().map_err(sql_err)? {
                batch.push(row_doc(r, tenant, scope)?);
                if batch.len() == BATCH && tx.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH))).is_err() {
                    break;
                }
            }
            if !batch.is_empty() {
                // A filer that stopped has panicked; its join below says so.
                let _ = tx.send(batch);
            }
            Ok::<_, Error>(())
        })();
        drop(tx);
        let p = filer.join().map_err(|_| Error::internal("loading a search partition failed"))?;
        read.map(|()| p)
    })
}

pub(super) fn vector_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_vector(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}
