//! The item port over SQLite: one `items` table keyed `(tenant, part, sk)`.

use async_trait::async_trait;
use domain::{Error, Result};
use ports::items::{Condition, Item, ItemStore, Query, Write};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::db::{Db, sql_err};

/// Writes in one batch: one SQLite transaction, one fsync. Larger than DynamoDB's so the
/// audit ledger's group commit pays one commit for up to this many records under load.
pub const SQLITE_MAX_BATCH: usize = 500;

pub struct SqliteItems {
    db: Db,
}

impl SqliteItems {
    pub fn new(db: Db) -> Self {
        Self { db }
    }
}

fn current_version(tx: &Transaction<'_>, tenant: &str, part: &str, sk: &str) -> Result<Option<u64>> {
    tx.prepare_cached("SELECT version FROM items WHERE tenant = ?1 AND part = ?2 AND sk = ?3")
        .map_err(sql_err)?
        .query_row(params![tenant, part, sk], |r| r.get::<_, i64>(0))
        .optional()
        .map_err(sql_err)
        .map(|v| v.map(|v| u64::try_from(v).unwrap_or(0)))
}

fn check(condition: Condition, current: Option<u64>, what: &str) -> Result<()> {
    let ok = match condition {
        Condition::None => true,
        Condition::Absent => current.is_none(),
        Condition::Exists => current.is_some(),
        Condition::Version(v) => current == Some(v),
    };
    if ok { Ok(()) } else { Err(Error::conflict(format!("{what} changed concurrently or already exists"))) }
}

fn to_i64(v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| Error::invalid("version out of range"))
}

#[async_trait]
impl ItemStore for SqliteItems {
    async fn get(&self, tenant: &str, part: &str, sk: &str) -> Result<Option<Item>> {
        let (tenant, part, sk) = (tenant.to_owned(), part.to_owned(), sk.to_owned());
        self.db
            .read_point(move |c| {
                // A cached statement: every credential check and entity read comes here.
                c.prepare_cached("SELECT version, body FROM items WHERE tenant = ?1 AND part = ?2 AND sk = ?3")
                    .map_err(sql_err)?
                    .query_row(params![tenant, part, sk], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))
                    .optional()
                    .map_err(sql_err)
                    .map(|o| o.map(|(v, body)| Item { tenant, part, sk, version: u64::try_from(v).unwrap_or(0), body }))
            })
            .await
    }

    async fn query(&self, q: Query<'_>) -> Result<(Vec<Item>, bool)> {
        let tenant = q.tenant.to_owned();
        let part = q.part.to_owned();
        // Sort keys are printable ASCII, so every key with this prefix sorts below prefix + DEL.
        // A page after a cursor starts at the cursor: the range has one lower and one upper
        // bound, so SQLite seeks to it. (Given both `sk >= prefix` and `sk > cursor`, it seeks
        // to the prefix and filters up to the cursor: every page a scan from the start, a
        // paged read of a large graph quadratic.)
        let lo = q.prefix.to_owned();
        let hi = format!("{}\u{7f}", q.prefix);
        let descending = q.descending;
        let (lo, lo_op, hi, hi_op) = match q.after {
            Some(a) if !descending && a >= lo.as_str() => (a.to_owned(), ">", hi, "<"),
            Some(a) if descending && a <= hi.as_str() => (lo, ">=", a.to_owned(), "<"),
            // No cursor, or one before (after, descending) the whole range: all of it.
            _ => (lo, ">=", hi, "<"),
        };
        let limit = i64::from(q.limit.max(1));
        self.db
            .read(move |c| {
                let order = if descending { "DESC" } else { "ASC" };
                let sql = format!(
                    "SELECT sk, version, body FROM items WHERE tenant = ?1 AND part = ?2 AND sk {lo_op} ?3 AND sk {hi_op} ?4 ORDER BY sk {order} LIMIT ?5"
                );
                let mut stmt = c.prepare_cached(&sql).map_err(sql_err)?;
                let rows = stmt
                    .query_map(params![tenant, part, lo, hi, limit + 1], |r| {
                        Ok(Item {
                            tenant: tenant.clone(),
                            part: part.clone(),
                            sk: r.get(0)?,
                            version: u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                            body: r.get(2)?,
                        })
                    })
                    .map_err(sql_err)?;
                let mut items = rows.collect::<std::result::Result<Vec<_>, _>>().map_err(sql_err)?;
                let more = items.len() > usize::try_from(limit).unwrap_or(usize::MAX);
                items.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
                Ok((items, more))
            })
            .await
    }

    async fn scan_tenant(&self, tenant: &str, cursor: Option<&str>, limit: u32) -> Result<(Vec<Item>, Option<String>)> {
        // The cursor is the last item's `part` and `sk` (printable ASCII), a line break between.
        let (after_part, after_sk) = match cursor {
            Some(c) => {
                let (p, s) = c.split_once('\n').ok_or_else(|| Error::invalid_field("cursor", "not a scan cursor"))?;
                (p.to_owned(), s.to_owned())
            }
            None => (String::new(), String::new()),
        };
        let tenant = tenant.to_owned();
        let limit = i64::from(limit.max(1));
        self.db
            .read(move |c| {
                let mut stmt = c
                    .prepare_cached(
                        "SELECT part, sk, version, body FROM items WHERE tenant = ?1 AND (part, sk) > (?2, ?3) \
                         ORDER BY part, sk LIMIT ?4",
                    )
                    .map_err(sql_err)?;
                let rows = stmt
                    .query_map(params![tenant, after_part, after_sk, limit], |r| {
                        Ok(Item {
                            tenant: tenant.clone(),
                            part: r.get(0)?,
                            sk: r.get(1)?,
                            version: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                            body: r.get(3)?,
                        })
                    })
                    .map_err(sql_err)?;
                let items = rows.collect::<std::result::Result<Vec<_>, _>>().map_err(sql_err)?;
                let next = (items.len() == usize::try_from(limit).unwrap_or(usize::MAX))
                    .then(|| items.last().map(|i| format!("{}\n{}", i.part, i.sk)))
                    .flatten();
                Ok((items, next))
            })
            .await
    }

    async fn write(&self, writes: Vec<Write>) -> Result<()> {
        if writes.len() > SQLITE_MAX_BATCH {
            return Err(Error::invalid(format!("at most {SQLITE_MAX_BATCH} writes per batch")));
        }
        self.db
            .run(move |c| {
                // IMMEDIATE: take the write lock before reading, so a writer in another
                // process (the CLI beside `serve`) makes this wait (busy_timeout) rather than
                // fail with SQLITE_BUSY when a read snapshot turns out stale at the first write.
                let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(sql_err)?;
                for w in &writes {
                    match w {
                        // Appends (audit records, events) name a new key: one insert that
                        // does nothing on a taken key, rather than a read before it.
                        Write::Put { item, condition: Condition::Absent } => {
                            let inserted = tx
                                .prepare_cached(
                                    "INSERT INTO items (tenant, part, sk, version, body) VALUES (?1, ?2, ?3, ?4, ?5)
                                     ON CONFLICT (tenant, part, sk) DO NOTHING",
                                )
                                .map_err(sql_err)?
                                .execute(params![item.tenant, item.part, item.sk, to_i64(item.version)?, item.body])
                                .map_err(sql_err)?;
                            check(Condition::Absent, (inserted == 0).then_some(0), &item.part)?;
                        }
                        Write::Put { item, condition } => {
                            if *condition != Condition::None {
                                let cur = current_version(&tx, &item.tenant, &item.part, &item.sk)?;
                                check(*condition, cur, &item.part)?;
                            }
                            tx.prepare_cached(
                                "INSERT INTO items (tenant, part, sk, version, body) VALUES (?1, ?2, ?3, ?4, ?5)
                                 ON CONFLICT (tenant, part, sk) DO UPDATE SET version = excluded.version, body = excluded.body",
                            )
                            .map_err(sql_err)?
                            .execute(params![item.tenant, item.part, item.sk, to_i64(item.version)?, item.body])
                            .map_err(sql_err)?;
                        }
                        Write::Delete { tenant, part, sk, condition } => {
                            let cur = current_version(&tx, tenant, part, sk)?;
                            check(*condition, cur, part)?;
                            tx.prepare_cached("DELETE FROM items WHERE tenant = ?1 AND part = ?2 AND sk = ?3")
                                .map_err(sql_err)?
                                .execute(params![tenant, part, sk])
                                .map_err(sql_err)?;
                        }
                    }
                }
                // Dropping `tx` on an early return above rolls everything back.
                tx.commit().map_err(sql_err)
            })
            .await
    }

    async fn sync(&self) -> Result<()> {
        self.db.sync().await
    }

    fn max_batch(&self) -> usize {
        SQLITE_MAX_BATCH
    }
}
