//! `memory.forget`: a personal memory or a conversation turn forgotten — its text erased
//! wherever it can be returned from (the store, the index, the kept call outcomes of
//! idempotent replay), with a tombstone of who forgot it and when. The maintenance job
//! uses [`forget`] and [`forget_turn`] for what outlived its time to live.

use domain::memory::{ConversationTurn, GovernanceState, MemoryEntry, MemoryScope};
use domain::principal::CallerContext;
use domain::{Error, Id, Result};
use ports::records::{Expect, MemoryStore};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::super::{MemoryView, Tools, own_session};
use crate::capabilities::policy::*;
use crate::capabilities::typed::{Capability, Context, Required};
use crate::search::SearchService;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetArgs {
    #[schemars(
        length(min = 1, max = 128),
        description = "The id of one of your personal memories or conversation turns (as memory_search returns them)."
    )]
    pub id: String,
    #[schemars(
        length(min = 1, max = 128),
        description = "For a turn: its session (the name you gave it). Without it, your sessions are looked through for the turn."
    )]
    pub session: Option<String>,
}

/// A turn, once forgotten.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["id", "session", "seq", "forgotten_at"]))]
pub struct ForgottenTurnView {
    pub id: String,
    pub session: String,
    pub seq: u64,
    pub forgotten_at: String,
}

/// One of the two, by what the id was.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&[]))]
pub struct ForgetOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "MemoryView", description = "The personal memory's tombstone, when the id was one.")]
    pub memory: Option<MemoryView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ForgottenTurnView", description = "The turn forgotten, when the id was one.")]
    pub turn: Option<ForgottenTurnView>,
}

pub struct Forget;

impl Capability for Forget {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "memory.forget",
        Channel::Memory,
        PlanTier::Starter,
        &[Scope::MemoryWrite],
        RouteKind::StoreIndex,
        "store.memory",
    )
    .writes();
    const TITLE: &'static str = "Forget a personal memory or a turn";
    const DESCRIPTION: &'static str = "Forget one of your personal memories or conversation turns (its id as memory_search returns it): its text is erased everywhere it can be returned from — search, replayed call results — and a tombstone keeps who forgot it and when. Cannot be undone.";
    type Args = ForgetArgs;
    type Output = ForgetOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: ForgetArgs) -> Result<ForgetOutput> {
        let (tools, caller) = (&cx.tools, cx.caller);
        if a.session.is_none() {
            match tools.own_personal(caller, &a.id).await {
                Ok(m) => {
                    let gone = tools.forget_personal(m, caller.principal.clone()).await?;
                    return Ok(ForgetOutput { memory: Some((&gone).into()), turn: None });
                }
                Err(e) if e.code == domain::ErrorCode::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let turn = tools.own_turn(caller, &a.id, a.session.as_deref()).await?;
        let forgotten = forget_turn(tools.backend, tools.search, &turn, caller.principal.clone()).await?;
        Ok(ForgetOutput {
            memory: None,
            turn: Some(ForgottenTurnView {
                id: turn.id.to_string(),
                session: turn.session.clone(),
                seq: turn.seq,
                forgotten_at: forgotten.at.to_rfc3339(),
            }),
        })
    }
}

impl Tools<'_> {
    /// The caller's own live turn `id`, in `session` (the caller's) or else in any of its
    /// sessions, most recent first; anyone else's is "not found".
    async fn own_turn(&self, caller: &CallerContext, id: &str, session: Option<&str>) -> Result<ConversationTurn> {
        let id = Id::new(id)?;
        let records = &self.backend.records;
        let sessions =
            match session {
                Some(s) => vec![own_session(caller, s)?],
                None => {
                    let (mut all, _) = crate::all_pages(10_000, |p| async move {
                        records.list_sessions(&caller.tenant, &caller.principal, &p).await
                    })
                    .await?;
                    all.sort_by_key(|s| std::cmp::Reverse(s.last_at));
                    all.into_iter().map(|s| s.session).collect()
                }
            };
        for session in sessions {
            let (turns, _) = crate::all_pages(100_000, |p| {
                let session = session.clone();
                async move { records.list_turns(&caller.tenant, &session, &p).await }
            })
            .await?;
            if let Some(t) = turns.into_iter().find(|t| t.id == id && t.principal == caller.principal && t.forgotten.is_none()) {
                return Ok(t);
            }
        }
        Err(Error::not_found(format!("personal memory or turn {id}")))
    }

    async fn forget_personal(&self, m: MemoryEntry, by: Id) -> Result<MemoryEntry> {
        forget(self.backend, self.search, m, by).await
    }
}

/// Leaves a tombstone of personal entry `m`: the text erased (title, body, and the
/// metadata an import brought), the state `forgotten` by `by` now, out of the index, and
/// its owner's kept call outcomes that hold it (the idempotent-replay records of
/// `memory.remember`, `memory.search`… — a replay must not bring it back) deleted. The
/// maintenance job calls it for entries whose time to live ran out (`by` =
/// `maintenance`).
///
/// # Errors
/// `CONFLICT` when the entry changed meanwhile; `UNAVAILABLE`.
pub async fn forget(backend: &ports::Backend, search: &SearchService, mut m: MemoryEntry, by: Id) -> Result<MemoryEntry> {
    use ports::records::IdempotencyStore as _;
    let now = backend.clock.now();
    let needles = needles(&m.id, &[&m.body, &m.title]);
    m.state = GovernanceState::Forgotten { by, at: now };
    m.title = "(forgotten)".into();
    m.body = String::new();
    m.occurred_at = None;
    m.expires_at = None;
    m.metadata = None;
    m.updated_at = now;
    let gone = backend.records.put_memory(&m, Expect::Version(m.version)).await?;
    search.unindex(&gone.tenant, &gone.scope, &gone.id).await?;
    if let MemoryScope::Personal(owner) = &gone.scope {
        backend.records.forget_calls(&gone.tenant, &format!("{owner}/"), &needles).await?;
    }
    Ok(gone)
}

/// What kept call outcomes would show of a record: its id, and its texts as they appear
/// in serialized JSON (a short text is only matched through the id).
fn needles(id: &Id, texts: &[&str]) -> Vec<String> {
    let mut needles = vec![format!("\"{id}\"")];
    for text in texts {
        let json = serde_json::to_string(text).unwrap_or_default();
        let inner = json.trim_matches('"');
        if inner.chars().count() >= 12 {
            needles.push(inner.to_owned());
        }
    }
    needles
}

/// Forgets conversation turn `turn` (its owner's): its content erased in the store (who
/// and when kept), out of the index — after the vector worker has settled, so a pending
/// embedding cannot put it back — and its owner's kept call outcomes that hold it
/// deleted, as [`forget`] does for personal memory.
///
/// # Errors
/// `NOT_FOUND` when the turn is gone; `CONFLICT` when it changed meanwhile; `UNAVAILABLE`.
pub async fn forget_turn(
    backend: &ports::Backend,
    search: &SearchService,
    turn: &ConversationTurn,
    by: Id,
) -> Result<domain::memory::TurnForgotten> {
    use ports::records::IdempotencyStore as _;
    let forgotten = domain::memory::TurnForgotten { by, at: backend.clock.now() };
    let needles = needles(&turn.id, &[&turn.content]);
    backend
        .records
        .forget_turn(&turn.tenant, &turn.principal, &turn.session, turn.seq, forgotten.clone())
        .await?
        .ok_or_else(|| Error::not_found(format!("turn {}", turn.id)))?;
    search.settle().await;
    search.unindex(&turn.tenant, &MemoryScope::Session(turn.session.clone()), &turn.id).await?;
    backend.records.forget_calls(&turn.tenant, &format!("{}/", turn.principal), &needles).await?;
    Ok(forgotten)
}
