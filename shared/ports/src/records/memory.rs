//! Memory entries of every scope, conversation turns and their sessions.

use async_trait::async_trait;
use domain::memory::{ConversationTurn, MemoryEntry, MemoryScope, SessionSummary, TurnForgotten};
use domain::{Error, Id, Page, PageRequest, Result, TenantId};

use super::{Expect, Records, decode, encode, pad, put, versioned};
use crate::items::{Condition, Write};

#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// # Errors
    /// `CONFLICT` when `expect` does not hold; `UNAVAILABLE`.
    async fn put_memory(&self, entry: &MemoryEntry, expect: Expect) -> Result<MemoryEntry>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_memory(&self, tenant: &TenantId, id: &Id) -> Result<Option<MemoryEntry>>;
    /// Entries of exactly one scope, oldest first. Callers check the scope is readable first.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_memory(&self, tenant: &TenantId, scope: &MemoryScope, page: &PageRequest) -> Result<Page<MemoryEntry>>;
    /// Entries of exactly one scope, newest first (ids are time-ordered). A page's cursor
    /// may also be [`memory_cursor`] of the last entry a caller kept.
    ///
    /// # Errors
    /// `UNAVAILABLE`; `INVALID_REQUEST` for a cursor of another listing.
    async fn list_memory_newest(&self, tenant: &TenantId, scope: &MemoryScope, page: &PageRequest) -> Result<Page<MemoryEntry>>;
    /// Every entry of the tenant whatever its scope, by scope then id: for the reindex,
    /// never for callers (it ignores who may read what).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_all_memory(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<MemoryEntry>>;
    /// Appends a turn and updates its session's index record in one atomic write.
    ///
    /// # Errors
    /// `CONFLICT` when `(session, seq)` exists; `UNAVAILABLE`.
    async fn append_turn(&self, turn: &ConversationTurn) -> Result<()>;
    /// The index record of one session.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_session(&self, tenant: &TenantId, principal: &Id, session: &str) -> Result<Option<SessionSummary>>;
    /// Sessions owned by `principal`, in session-id order (callers sort by recency).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_sessions(&self, tenant: &TenantId, principal: &Id, page: &PageRequest) -> Result<Page<SessionSummary>>;
    /// Turns of one session in order.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_turns(&self, tenant: &TenantId, session: &str, page: &PageRequest) -> Result<Page<ConversationTurn>>;
    /// Every turn of the tenant, by session then sequence: for the reindex, never for
    /// callers (sessions are their owners' alone).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_all_turns(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<ConversationTurn>>;
    /// Forgets turn `seq` of `principal`'s `session`: its content erased, who and when
    /// kept (the turn stays, so the session's numbering holds), and the session's title
    /// too when it was taken from this turn. The turn as it was; `None` when there is
    /// no such turn.
    ///
    /// # Errors
    /// `CONFLICT` when the turn changed meanwhile; `UNAVAILABLE`.
    async fn forget_turn(
        &self,
        tenant: &TenantId,
        principal: &Id,
        session: &str,
        seq: u64,
        forgotten: TurnForgotten,
    ) -> Result<Option<ConversationTurn>>;
}

/// The cursor that continues [`MemoryStore::list_memory_newest`] after the entry `id`.
pub fn memory_cursor(scope: &MemoryScope, id: &Id) -> String {
    super::encode_cursor(&format!("{}#{id}", scope.storage_key()))
}

/// The turns with a time to live, by when it runs out (`{expires}#{session}#{seq}`).
pub(crate) const TURN_EXPIRY: &str = "turn_expiry";

pub(crate) fn turn_expiry_key(at: domain::Timestamp, session: &str, seq: u64) -> Result<String> {
    let seq = i64::try_from(seq).map_err(|_| Error::invalid_field("seq", "too large"))?;
    Ok(format!("{}#{session}#{}", pad(at.0), pad(seq)))
}

fn session_key(principal: &Id, session: &str) -> String {
    format!("{principal}#{session}")
}

#[async_trait]
impl MemoryStore for Records {
    async fn put_memory(&self, entry: &MemoryEntry, expect: Expect) -> Result<MemoryEntry> {
        let t = entry.tenant.as_str();
        let (mut version, condition) = versioned(expect);
        let existing = self.items.get(t, "memory", entry.id.as_str()).await?;
        if expect == Expect::Any {
            version = existing.as_ref().map_or(1, |i| i.version + 1);
        }
        if let Some(item) = &existing {
            let old: MemoryEntry = decode(item)?;
            if old.scope != entry.scope {
                return Err(Error::invalid_field("scope", "a memory entry never changes scope"));
            }
        }
        let mut stored = entry.clone();
        stored.version = version;
        let body = encode(&stored)?;
        self.items
            .write(vec![
                put(t, "memory", entry.id.to_string(), version, body.clone(), condition),
                put(t, "memory_by_scope", format!("{}#{}", entry.scope.storage_key(), entry.id), version, body, Condition::None),
            ])
            .await?;
        Ok(stored)
    }

    async fn get_memory(&self, tenant: &TenantId, id: &Id) -> Result<Option<MemoryEntry>> {
        self.get_one(tenant.as_str(), "memory", id.as_str()).await
    }

    async fn list_memory(&self, tenant: &TenantId, scope: &MemoryScope, page: &PageRequest) -> Result<Page<MemoryEntry>> {
        self.page(tenant.as_str(), "memory_by_scope", &format!("{}#", scope.storage_key()), page, false).await
    }

    async fn list_memory_newest(&self, tenant: &TenantId, scope: &MemoryScope, page: &PageRequest) -> Result<Page<MemoryEntry>> {
        self.page(tenant.as_str(), "memory_by_scope", &format!("{}#", scope.storage_key()), page, true).await
    }

    async fn list_all_memory(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<MemoryEntry>> {
        self.page(tenant.as_str(), "memory_by_scope", "", page, false).await
    }

    async fn append_turn(&self, turn: &ConversationTurn) -> Result<()> {
        Id::new(turn.session.clone())?;
        let seq = i64::try_from(turn.seq).map_err(|_| Error::invalid_field("seq", "too large"))?;
        let t = turn.tenant.as_str();
        let existing: Option<SessionSummary> = self.get_one(t, "session", &session_key(&turn.principal, &turn.session)).await?;
        let summary = match existing {
            Some(mut s) => {
                s.turns = s.turns.max(turn.seq);
                s.last_at = s.last_at.max(turn.at);
                s
            }
            None => SessionSummary {
                tenant: turn.tenant.clone(),
                session: turn.session.clone(),
                principal: turn.principal.clone(),
                turns: turn.seq,
                first_at: turn.at,
                last_at: turn.at,
                title: turn.content.chars().take(80).collect(),
            },
        };
        let mut writes = vec![
            put(t, "turn", format!("{}#{}", turn.session, pad(seq)), 1, encode(turn)?, Condition::Absent),
            put(t, "session", session_key(&turn.principal, &turn.session), 1, encode(&summary)?, Condition::None),
        ];
        if let Some(at) = turn.expires_at {
            writes.push(put(t, TURN_EXPIRY, turn_expiry_key(at, &turn.session, turn.seq)?, 1, b"{}".to_vec(), Condition::None));
        }
        self.items.write(writes).await
    }

    async fn get_session(&self, tenant: &TenantId, principal: &Id, session: &str) -> Result<Option<SessionSummary>> {
        Id::new(session)?;
        self.get_one(tenant.as_str(), "session", &session_key(principal, session)).await
    }

    async fn list_sessions(&self, tenant: &TenantId, principal: &Id, page: &PageRequest) -> Result<Page<SessionSummary>> {
        self.page(tenant.as_str(), "session", &format!("{principal}#"), page, false).await
    }

    async fn list_turns(&self, tenant: &TenantId, session: &str, page: &PageRequest) -> Result<Page<ConversationTurn>> {
        Id::new(session)?;
        self.page(tenant.as_str(), "turn", &format!("{session}#"), page, false).await
    }

    async fn list_all_turns(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<ConversationTurn>> {
        self.page(tenant.as_str(), "turn", "", page, false).await
    }

    async fn forget_turn(
        &self,
        tenant: &TenantId,
        principal: &Id,
        session: &str,
        seq: u64,
        forgotten: TurnForgotten,
    ) -> Result<Option<ConversationTurn>> {
        Id::new(session)?;
        let t = tenant.as_str();
        let key = format!("{session}#{}", pad(i64::try_from(seq).map_err(|_| Error::invalid_field("seq", "too large"))?));
        let Some(item) = self.items.get(t, "turn", &key).await? else { return Ok(None) };
        let was: ConversationTurn = decode(&item)?;
        if was.principal != *principal {
            return Ok(None);
        }
        let mut turn = was.clone();
        turn.content = String::new();
        turn.forgotten = Some(forgotten);
        let mut writes = vec![put(t, "turn", key, item.version + 1, encode(&turn)?, Condition::Version(item.version))];
        if let Some(at) = was.expires_at {
            let sk = turn_expiry_key(at, session, seq)?;
            writes.push(Write::Delete { tenant: t.to_owned(), part: TURN_EXPIRY.into(), sk, condition: Condition::None });
        }
        let summary_key = session_key(principal, session);
        if let Some(mut s) = self.get_one::<SessionSummary>(t, "session", &summary_key).await?
            && (seq == 1 || s.title == was.content.chars().take(80).collect::<String>())
        {
            s.title = "(forgotten)".into();
            writes.push(put(t, "session", summary_key, 1, encode(&s)?, Condition::None));
        }
        self.items.write(writes).await?;
        Ok(Some(was))
    }
}
