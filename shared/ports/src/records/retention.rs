//! Retention (SPEC §9, the maintenance job) over the record layout: the audit ledger
//! pruned, session memory expired, personal memory past its time to live found.

use async_trait::async_trait;
use domain::memory::{ConversationTurn, GovernanceState, MemoryEntry};
use domain::{Result, TenantId, Timestamp};

use super::{Records, decode, pad};
use crate::items::{Condition, Item, Query, Write};

/// Retention (SPEC §9, the maintenance job): what expires is deleted in batches, oldest
/// first, at most `max` items a call so one run stays bounded.
#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// Deletes the tenant's audit records older than `before`. Returns how many.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn prune_audit(&self, tenant: &TenantId, before: Timestamp, max: usize) -> Result<usize>;
    /// The tenant's oldest audit records older than `before`, at most `max`, oldest
    /// first: exactly those [`Self::prune_audit`] with the same arguments deletes (the
    /// maintenance job archives them first).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn old_audit(&self, tenant: &TenantId, before: Timestamp, max: usize) -> Result<Vec<domain::audit::AuditRecord>>;
    /// Deletes the tenant's session-scope memory entries last updated before `before`, at
    /// most `max`, and returns them (their index entries are the caller's to remove).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn expire_session_memory(&self, tenant: &TenantId, before: Timestamp, max: usize) -> Result<Vec<MemoryEntry>>;
    /// The tenant's active personal entries whose time to live ran out at `now`, at
    /// most `max` (the maintenance job forgets them).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn expired_personal_memory(&self, tenant: &TenantId, now: Timestamp, max: usize) -> Result<Vec<MemoryEntry>>;
    /// The tenant's conversation turns whose time to live ran out at `now`, at most
    /// `max`, soonest first (the maintenance job forgets them, which takes each off this
    /// list); an expiry left by a turn no longer there is dropped.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn expired_turns(&self, tenant: &TenantId, now: Timestamp, max: usize) -> Result<Vec<ConversationTurn>>;
}

#[async_trait]
impl RetentionStore for Records {
    async fn prune_audit(&self, tenant: &TenantId, before: Timestamp, max: usize) -> Result<usize> {
        let t = tenant.as_str();
        let cutoff = pad(before.0);
        let mut deleted = 0;
        for part in super::audit_parts() {
            while deleted < max {
                let limit = u32::try_from((max - deleted).min(self.items.max_batch())).unwrap_or(25);
                let q = Query { tenant: t, part: &part, prefix: "", after: None, limit, descending: false };
                let (items, _) = self.items.query(q).await?;
                let old: Vec<Write> = items
                    .into_iter()
                    .take_while(|i| i.sk < cutoff)
                    .map(|i| Write::Delete { tenant: i.tenant, part: i.part, sk: i.sk, condition: Condition::None })
                    .collect();
                if old.is_empty() {
                    break;
                }
                deleted += old.len();
                self.items.write(old).await?;
            }
        }
        Ok(deleted)
    }

    /// The oldest `max` records before `before` over every audit partition (each read
    /// in order, then merged).
    async fn old_audit(&self, tenant: &TenantId, before: Timestamp, max: usize) -> Result<Vec<domain::audit::AuditRecord>> {
        let cutoff = pad(before.0);
        let mut all: Vec<Item> = Vec::new();
        for part in super::audit_parts() {
            let mut taken = 0;
            let mut after: Option<String> = None;
            while taken < max {
                let limit = u32::try_from((max - taken).min(self.items.max_batch())).unwrap_or(25);
                let q =
                    Query { tenant: tenant.as_str(), part: &part, prefix: "", after: after.as_deref(), limit, descending: false };
                let (items, _) = self.items.query(q).await?;
                let n = items.len();
                let old: Vec<Item> = items.into_iter().take_while(|i| i.sk < cutoff).collect();
                let done = old.len() < n || n < limit as usize;
                after = old.last().map(|i| i.sk.clone());
                taken += old.len();
                all.extend(old);
                if done || after.is_none() {
                    break;
                }
            }
        }
        all.sort_by(|a, b| a.sk.cmp(&b.sk));
        all.truncate(max);
        all.iter().map(decode).collect()
    }

    async fn expired_personal_memory(&self, tenant: &TenantId, now: Timestamp, max: usize) -> Result<Vec<MemoryEntry>> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let (entries, more) = self.memory_by_scope_page(tenant, "personal:", &mut after).await?;
            for (_, entry) in entries {
                if entry.state == GovernanceState::Active && entry.expires_at.is_some_and(|e| e <= now) && out.len() < max {
                    out.push(entry);
                }
            }
            if !more || out.len() >= max {
                break;
            }
        }
        Ok(out)
    }

    async fn expired_turns(&self, tenant: &TenantId, now: Timestamp, max: usize) -> Result<Vec<ConversationTurn>> {
        let t = tenant.as_str();
        let cutoff = pad(now.0);
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        while out.len() < max {
            let limit = u32::try_from((max - out.len()).min(500)).unwrap_or(500);
            let q = Query {
                tenant: t,
                part: super::memory::TURN_EXPIRY,
                prefix: "",
                after: after.as_deref(),
                limit,
                descending: false,
            };
            let (items, more) = self.items.query(q).await?;
            let due: Vec<&Item> =
                items.iter().take_while(|i| i.sk.split('#').next().unwrap_or_default() <= cutoff.as_str()).collect();
            for i in &due {
                // `{expires}#{session}#{seq}`: the session holds no `#`.
                let mut parts = i.sk.splitn(3, '#');
                let (_, session, seq) = (parts.next(), parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
                let turn: Option<ConversationTurn> = self.get_one(t, "turn", &format!("{session}#{seq}")).await?;
                match turn {
                    Some(turn) if turn.forgotten.is_none() => out.push(turn),
                    _ => {
                        let stale = Write::Delete {
                            tenant: t.into(),
                            part: i.part.clone(),
                            sk: i.sk.clone(),
                            condition: Condition::None,
                        };
                        self.items.write(vec![stale]).await?;
                    }
                }
            }
            if due.len() < items.len() || !more {
                break;
            }
            after = items.last().map(|i| i.sk.clone());
        }
        Ok(out)
    }

    async fn expire_session_memory(&self, tenant: &TenantId, before: Timestamp, max: usize) -> Result<Vec<MemoryEntry>> {
        let t = tenant.as_str();
        let mut deleted = 0;
        let mut gone = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let (entries, more) = self.memory_by_scope_page(tenant, "session:", &mut after).await?;
            let mut writes = Vec::new();
            let mut these = Vec::new();
            for (i, entry) in &entries {
                if entry.updated_at < before && deleted + writes.len() / 2 < max {
                    these.push(entry.clone());
                    writes.push(Write::Delete {
                        tenant: t.into(),
                        part: "memory".into(),
                        sk: entry.id.to_string(),
                        condition: Condition::None,
                    });
                    writes.push(Write::Delete {
                        tenant: t.into(),
                        part: i.part.clone(),
                        sk: i.sk.clone(),
                        condition: Condition::None,
                    });
                }
            }
            for (chunk, entries) in
                writes.chunks(self.items.max_batch() & !1).zip(these.chunks((self.items.max_batch() & !1) / 2))
            {
                self.items.write(chunk.to_vec()).await?;
                deleted += chunk.len() / 2;
                gone.extend_from_slice(entries);
            }
            if !more || deleted >= max {
                break;
            }
        }
        Ok(gone)
    }
}

impl Records {
    /// One page (200) of the tenant's memory entries whose scope key starts with
    /// `prefix`, after the cursor `after` (moved past the page), with their index items;
    /// and whether more follow.
    async fn memory_by_scope_page(
        &self,
        tenant: &TenantId,
        prefix: &str,
        after: &mut Option<String>,
    ) -> Result<(Vec<(Item, MemoryEntry)>, bool)> {
        let q = Query {
            tenant: tenant.as_str(),
            part: "memory_by_scope",
            prefix,
            after: after.as_deref(),
            limit: 200,
            descending: false,
        };
        let (items, more) = self.items.query(q).await?;
        let Some(last) = items.last() else { return Ok((Vec::new(), false)) };
        *after = Some(last.sk.clone());
        let entries = items.into_iter().map(|i| decode(&i).map(|e| (i, e))).collect::<Result<Vec<_>>>()?;
        Ok((entries, more))
    }
}
