//! Idempotency over the record layout: claimed keys (`idem`, a queue consumer's effect
//! happens once) and replayable tool calls (`call`, a call sent again answers its first
//! outcome).

use async_trait::async_trait;
use domain::{Error, Result, TenantId, Timestamp};

use super::{Records, decode, encode, put};
use crate::items::{Condition, Query, Write};

#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Claims `key` for this tenant. `true` the first time, `false` ever after: a consumer
    /// that gets `false` has already had its effect and must only acknowledge.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn claim(&self, tenant: &TenantId, key: &str, at: Timestamp) -> Result<bool>;

    /// Starts a call that may be sent again (an MCP tool call carrying an idempotency
    /// key): the first time records it running since `at` and answers `None`; every
    /// later time answers what is recorded — still running, or its outcome.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a key that is not 1-256 printable ASCII; `UNAVAILABLE`.
    async fn begin_call(&self, tenant: &TenantId, key: &str, at: Timestamp) -> Result<Option<CallRecord>>;

    /// Records the outcome of a call [`Self::begin_call`] started.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn finish_call(&self, tenant: &TenantId, key: &str, record: &CallRecord) -> Result<()>;

    /// Drops a call's record (its run failed in a way worth trying again), so the next
    /// [`Self::begin_call`] with the key runs it.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn abandon_call(&self, tenant: &TenantId, key: &str) -> Result<()>;

    /// Deletes call records started before `before`, at most `max`. Returns how many.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn prune_calls(&self, tenant: &TenantId, before: Timestamp, max: usize) -> Result<usize>;

    /// Deletes the kept outcomes of calls whose key starts with `prefix` (a principal's
    /// `{principal}/`) and whose outcome holds any of `needles` (as they appear in the
    /// serialized outcome): what a forgotten memory must not come back through. Returns
    /// how many were deleted.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn forget_calls(&self, tenant: &TenantId, prefix: &str, needles: &[String]) -> Result<usize>;
}

/// A call that may be sent again, as [`IdempotencyStore::begin_call`] recorded it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CallRecord {
    pub started_at: Timestamp,
    /// What the call was (tool and arguments, hashed): the same key with another call
    /// is refused rather than answered with this one's outcome.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fingerprint: String,
    /// The answer, once the call ended (`None` while it runs, or when it was cut short).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<serde_json::Value>,
}

/// Records the ingestion pipeline could not write, with their reasons (SPEC §9).
#[async_trait]
impl IdempotencyStore for Records {
    async fn claim(&self, tenant: &TenantId, key: &str, at: Timestamp) -> Result<bool> {
        check_idempotency_key(key)?;
        let res = self.items.write(vec![put(tenant.as_str(), "idem", key.to_owned(), 1, encode(&at)?, Condition::Absent)]).await;
        match res {
            Ok(()) => Ok(true),
            Err(e) if e.code == domain::ErrorCode::Conflict => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn begin_call(&self, tenant: &TenantId, key: &str, at: Timestamp) -> Result<Option<CallRecord>> {
        check_idempotency_key(key)?;
        let record = CallRecord { started_at: at, fingerprint: String::new(), outcome: None };
        match self.items.write(vec![put(tenant.as_str(), "call", key.to_owned(), 1, encode(&record)?, Condition::Absent)]).await {
            Ok(()) => Ok(None),
            Err(e) if e.code == domain::ErrorCode::Conflict => match self.get_one(tenant.as_str(), "call", key).await? {
                Some(r) => Ok(Some(r)),
                None => Err(Error::unavailable("a call record vanished while it was read; try again")),
            },
            Err(e) => Err(e),
        }
    }

    async fn finish_call(&self, tenant: &TenantId, key: &str, record: &CallRecord) -> Result<()> {
        check_idempotency_key(key)?;
        self.items.write(vec![put(tenant.as_str(), "call", key.to_owned(), 2, encode(record)?, Condition::None)]).await
    }

    async fn abandon_call(&self, tenant: &TenantId, key: &str) -> Result<()> {
        check_idempotency_key(key)?;
        self.items
            .write(vec![Write::Delete {
                tenant: tenant.to_string(),
                part: "call".into(),
                sk: key.to_owned(),
                condition: Condition::None,
            }])
            .await
    }

    async fn forget_calls(&self, tenant: &TenantId, prefix: &str, needles: &[String]) -> Result<usize> {
        let needles: Vec<&String> = needles.iter().filter(|n| !n.is_empty()).collect();
        if needles.is_empty() {
            return Ok(0);
        }
        let t = tenant.as_str();
        let mut deleted = 0;
        let mut after: Option<String> = None;
        loop {
            let q = Query { tenant: t, part: "call", prefix, after: after.as_deref(), limit: 500, descending: false };
            let (items, more) = self.items.query(q).await?;
            after = items.last().map(|i| i.sk.clone());
            let holding: Vec<Write> = items
                .into_iter()
                .filter(|i| {
                    decode::<CallRecord>(i).is_ok_and(|r| {
                        r.outcome.is_some_and(|o| {
                            let text = o.to_string();
                            needles.iter().any(|n| text.contains(n.as_str()))
                        })
                    })
                })
                .map(|i| Write::Delete { tenant: i.tenant, part: i.part, sk: i.sk, condition: Condition::None })
                .collect();
            for group in holding.chunks(self.items.max_batch()) {
                self.items.write(group.to_vec()).await?;
            }
            deleted += holding.len();
            if !more {
                return Ok(deleted);
            }
        }
    }

    async fn prune_calls(&self, tenant: &TenantId, before: Timestamp, max: usize) -> Result<usize> {
        let t = tenant.as_str();
        let (mut deleted, mut seen) = (0, 0);
        let mut after: Option<String> = None;
        loop {
            let q = Query { tenant: t, part: "call", prefix: "", after: after.as_deref(), limit: 500, descending: false };
            let (items, more) = self.items.query(q).await?;
            seen += items.len();
            after = items.last().map(|i| i.sk.clone());
            let old: Vec<Write> = items
                .into_iter()
                .filter(|i| decode::<CallRecord>(i).is_ok_and(|r| r.started_at < before))
                .take(max - deleted)
                .map(|i| Write::Delete { tenant: i.tenant, part: i.part, sk: i.sk, condition: Condition::None })
                .collect();
            for group in old.chunks(self.items.max_batch()) {
                self.items.write(group.to_vec()).await?;
            }
            deleted += old.len();
            if !more || deleted >= max || seen >= max * 20 {
                return Ok(deleted);
            }
        }
    }
}

fn check_idempotency_key(key: &str) -> Result<()> {
    if key.is_empty() || key.len() > 256 || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::invalid_field("idempotency_key", "must be 1-256 printable ASCII characters"));
    }
    Ok(())
}
