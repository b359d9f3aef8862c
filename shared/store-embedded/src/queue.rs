//! A durable work queue in SQLite with SQS semantics: at-least-once delivery, a
//! visibility timeout, redelivery, and a dead-letter table after `max_receives`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use domain::{Error, Result, TenantId, Timestamp};
use ports::Clock;
use ports::queue::{DeadLetter, Delivery, MAX_MESSAGE_BYTES, Queue, QueueMessage};
use rand::Rng;
use rusqlite::params;

use crate::db::{Db, sql_err};

pub struct SqliteQueue {
    db: Db,
    name: String,
    max_receives: u32,
    clock: Arc<dyn Clock>,
}

impl SqliteQueue {
    /// A named queue inside `db`; several queues can share one database.
    pub fn new(db: Db, name: &str, max_receives: u32, clock: Arc<dyn Clock>) -> Self {
        Self { db, name: name.to_owned(), max_receives: max_receives.max(1), clock }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn tenant_of(raw: String) -> rusqlite::Result<TenantId> {
    TenantId::new(raw).map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e)))
}

#[async_trait]
impl Queue for SqliteQueue {
    async fn send(&self, m: &QueueMessage) -> Result<()> {
        if m.body.len() > MAX_MESSAGE_BYTES {
            return Err(Error::invalid(format!("a queue message is at most {MAX_MESSAGE_BYTES} bytes")));
        }
        let m = m.clone();
        let name = self.name.clone();
        let now = self.clock.now().0;
        self.db
            .run(move |c| {
                c.execute(
                    "INSERT INTO queue (queue, tenant, kind, idem, body, enqueued_at, visible_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                    params![name, m.tenant.as_str(), m.kind, m.idempotency_key, m.body, now],
                )
                .map_err(sql_err)?;
                Ok(())
            })
            .await
    }

    async fn receive(&self, max: u32, visibility: Duration) -> Result<Vec<Delivery>> {
        let name = self.name.clone();
        let now = self.clock.now().0;
        let until = now.saturating_add(millis(visibility));
        let max_receives = i64::from(self.max_receives);
        let max = i64::from(max.clamp(1, 10));
        self.db
            .run(move |c| {
                // IMMEDIATE: take the write lock before reading, so a writer in another
                // process (the CLI beside `serve`) makes this wait (busy_timeout) rather than
                // fail with SQLITE_BUSY when a read snapshot turns out stale at the first write.
                let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(sql_err)?;
                let mut out = Vec::new();
                // Loop because dead-lettered rows do not count towards `max`.
                loop {
                    let want = max - i64::try_from(out.len()).unwrap_or(0);
                    if want <= 0 {
                        break;
                    }
                    let rows: Vec<(i64, String, String, String, Vec<u8>, i64)> = {
                        let mut stmt = tx
                            .prepare_cached(
                                "SELECT id, tenant, kind, idem, body, receive_count FROM queue
                                 WHERE queue = ?1 AND visible_at <= ?2 ORDER BY visible_at, id LIMIT ?3",
                            )
                            .map_err(sql_err)?;
                        let mapped = stmt
                            .query_map(params![name, now, want], |r| {
                                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
                            })
                            .map_err(sql_err)?;
                        mapped.collect::<std::result::Result<_, _>>().map_err(sql_err)?
                    };
                    if rows.is_empty() {
                        break;
                    }
                    for (id, tenant, kind, idem, body, count) in rows {
                        if count >= max_receives {
                            tx.execute(
                                "INSERT INTO dead_letters (queue, tenant, kind, idem, body, receive_count, reason, dead_at)
                                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                                params![
                                    name,
                                    tenant,
                                    kind,
                                    idem,
                                    body,
                                    count,
                                    format!("exceeded max receives ({max_receives})"),
                                    now
                                ],
                            )
                            .map_err(sql_err)?;
                            tx.execute("DELETE FROM queue WHERE id = ?1", params![id]).map_err(sql_err)?;
                            continue;
                        }
                        let receipt = format!("{id}.{:032x}", rand::rng().random::<u128>());
                        tx.execute(
                            "UPDATE queue SET receive_count = receive_count + 1, visible_at = ?2, receipt = ?3 WHERE id = ?1",
                            params![id, until, receipt],
                        )
                        .map_err(sql_err)?;
                        let tenant = tenant_of(tenant).map_err(sql_err)?;
                        out.push(Delivery {
                            message: QueueMessage { tenant, kind, idempotency_key: idem, body },
                            receipt,
                            receive_count: u32::try_from(count + 1).unwrap_or(u32::MAX),
                        });
                    }
                }
                tx.commit().map_err(sql_err)?;
                Ok(out)
            })
            .await
    }

    async fn ack(&self, receipt: &str) -> Result<()> {
        let receipt = receipt.to_owned();
        let name = self.name.clone();
        self.db
            .run(move |c| {
                let n =
                    c.execute("DELETE FROM queue WHERE queue = ?1 AND receipt = ?2", params![name, receipt]).map_err(sql_err)?;
                if n == 0 { Err(Error::not_found("delivery (the receipt is unknown or stale)")) } else { Ok(()) }
            })
            .await
    }

    async fn release(&self, receipt: &str, delay: Duration) -> Result<()> {
        let receipt = receipt.to_owned();
        let name = self.name.clone();
        let at = self.clock.now().0.saturating_add(millis(delay));
        self.db
            .run(move |c| {
                let n = c
                    .execute("UPDATE queue SET visible_at = ?3 WHERE queue = ?1 AND receipt = ?2", params![name, receipt, at])
                    .map_err(sql_err)?;
                if n == 0 { Err(Error::not_found("delivery (the receipt is unknown or stale)")) } else { Ok(()) }
            })
            .await
    }

    async fn dead_letters(&self, max: u32) -> Result<Vec<DeadLetter>> {
        let name = self.name.clone();
        self.db
            .run(move |c| {
                let mut stmt = c
                    .prepare_cached(
                        "SELECT tenant, kind, idem, body, receive_count, reason, dead_at FROM dead_letters WHERE queue = ?1 ORDER BY id LIMIT ?2",
                    )
                    .map_err(sql_err)?;
                let rows = stmt
                    .query_map(params![name, i64::from(max.clamp(1, 1000))], |r| {
                        Ok(DeadLetter {
                            message: QueueMessage { tenant: tenant_of(r.get(0)?)?, kind: r.get(1)?, idempotency_key: r.get(2)?, body: r.get(3)? },
                            receive_count: u32::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
                            reason: r.get(5)?,
                            dead_at: Timestamp(r.get(6)?),
                        })
                    })
                    .map_err(sql_err)?;
                rows.collect::<std::result::Result<Vec<_>, _>>().map_err(sql_err)
            })
            .await
    }

    async fn depth(&self) -> Result<u64> {
        let name = self.name.clone();
        self.db
            .run(move |c| {
                let n: i64 =
                    c.query_row("SELECT COUNT(*) FROM queue WHERE queue = ?1", params![name], |r| r.get(0)).map_err(sql_err)?;
                Ok(u64::try_from(n).unwrap_or(0))
            })
            .await
    }
}
