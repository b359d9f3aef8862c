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

/// How long a call's record is kept (a replay comes within hours; the maintenance job
/// prunes older ones, so kept outcomes do not outlive a week).
pub const RETENTION_MS: i64 = 7 * 24 * 3600 * 1000;

/// What a call was, for matching a repeat: the tool and its arguments.
pub fn fingerprint(tool: &str, args: &Value) -> String {
    crate::sha256_hex(&format!("{tool}\n{args}"))
}

/// Starts the call `key` of `caller` — `fingerprint` says what it is — or finds how it
/// went.
///
/// # Errors
/// `UNAVAILABLE` (retry after 5 s) while the first call still runs; `CONFLICT` when it
/// was cut short and its outcome is unknown, or when the key was used for another call;
/// `INVALID_REQUEST` for a bad key.
pub async fn begin(s: &Services, caller: &CallerContext, key: &str, fingerprint: &str) -> Result<Begun> {
    let now = s.backend.clock.now();
    match s.backend.records.begin_call(&caller.tenant, &full_key(caller, key), now).await? {
        None => Ok(Begun::First { started_at: now }),
        Some(r) if !r.fingerprint.is_empty() && r.fingerprint != fingerprint => {
            Err(Error::conflict("this idempotency key was used for another call (another tool or other arguments)"))
        }
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

/// Keeps the outcome of a call [`begin`] started — unless it failed in a way worth
/// trying again (`retry`: unavailable, rate limited, internal), whose record is dropped
/// so the next send with the key runs it.
///
/// # Errors
/// `UNAVAILABLE`.
pub async fn finish(
    s: &Services,
    caller: &CallerContext,
    key: &str,
    (started_at, fingerprint): (Timestamp, &str),
    outcome: Value,
    retry: bool,
) -> Result<()> {
    let full = full_key(caller, key);
    if retry {
        return s.backend.records.abandon_call(&caller.tenant, &full).await;
    }
    let record = CallRecord { started_at, fingerprint: fingerprint.to_owned(), outcome: Some(outcome) };
    s.backend.records.finish_call(&caller.tenant, &full, &record).await
}
