//! Tool calls that may be sent again (SPEC §8, the stdio bridge's replay): a call
//! carrying an idempotency key runs once per principal and key; a repeat gets the first
//! call's outcome back. Over [`ports::records::IdempotencyStore::begin_call`].

use domain::principal::CallerContext;
use domain::{Error, Result, Timestamp};
use ports::records::{CallRecord, IdempotencyStore as _};
use serde_json::Value;

use crate::Services;

/// How long a call may be running before a repeat is told its outcome is unknown (the
/// server stopped during it) rather than to wait.
const RUNNING_GRACE_MS: i64 = 120_000;

/// What [`begin`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Begun {
    /// The first time: run the call, then [`finish`] it.
    First { started_at: Timestamp },
    /// It ran: its outcome.
    Done(Value),
}

fn full_key(caller: &CallerContext, key: &str) -> String {
    format!("{}/{key}", caller.principal)
}

/// Starts the call `key` of `caller` (or finds how it went).
///
/// # Errors
/// `UNAVAILABLE` (retry after 5 s) while the first call still runs; `CONFLICT` when it
/// was cut short and its outcome is unknown; `INVALID_REQUEST` for a bad key.
pub async fn begin(s: &Services, caller: &CallerContext, key: &str) -> Result<Begun> {
    let now = s.backend.clock.now();
    match s.backend.records.begin_call(&caller.tenant, &full_key(caller, key), now).await? {
        None => Ok(Begun::First { started_at: now }),
        Some(CallRecord { outcome: Some(outcome), .. }) => Ok(Begun::Done(outcome)),
        Some(running) if now.0 - running.started_at.0 < RUNNING_GRACE_MS => {
            Err(Error::unavailable("a call with this idempotency key is still running").with_retry_after(5))
        }
        Some(_) => Err(Error::conflict(
            "a call with this idempotency key was cut short (the server stopped during it); its outcome is unknown: \
             check before sending it again with a new key",
        )),
    }
}

/// Keeps the outcome of a call [`begin`] started.
///
/// # Errors
/// `UNAVAILABLE`.
pub async fn finish(s: &Services, caller: &CallerContext, key: &str, started_at: Timestamp, outcome: Value) -> Result<()> {
    let record = CallRecord { started_at, outcome: Some(outcome) };
    s.backend.records.finish_call(&caller.tenant, &full_key(caller, key), &record).await
}
