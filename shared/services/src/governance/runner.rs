//! The embedded runner of the triage workflow (SPEC §6.3): the states of
//! `statemachines/triage.asl.json`, in the same order, with the same task code
//! ([`Tasks`]), in process.
//!
//! - `Score`, `AutoApprove`, `Write`, `Act`, `RecordRejection`, `Escalate`,
//!   `RecordFailure` call the task functions (`Apply` is [`Tasks::write`]'s own choice:
//!   an action naming a connector operation is carried out by [`Tasks::act`]); like the state machine's `Retry`, an `UNAVAILABLE` task is
//!   tried three times with backoff (0.2 s, 0.4 s), and anything else is caught and
//!   recorded by `RecordFailure`.
//! - `AwaitApproval` stores the wait (a random token and its deadline) with the proposal
//!   in the store — nothing waits in memory, so a restart keeps every wait. A decision
//!   ends it through [`Workflow::send_success`] / [`Workflow::send_failure`] with the
//!   token; [`EmbeddedRunner::expire`] (every few seconds in `continuity serve`) sends
//!   waits past their deadline to `Escalate`.
//!
//! The test `triage_state_machine_matches_the_runner` checks the ASL file has exactly
//! these states and transitions ([`STATES`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use domain::proposal::{Proposal, ProposalState};
use domain::{Error, ErrorCode, Id, PageRequest, Result, TenantId};
use ports::records::ProposalStore;
use ports::workflow::{REJECTED, Workflow};
use serde_json::Value;

use super::tasks::Tasks;

/// The state graph both engines run: `(state, next states)`, as in
/// `statemachines/triage.asl.json` (`Next`, Choice targets and `Catch` targets).
pub const STATES: &[(&str, &[&str])] = &[
    ("Score", &["Route", "RecordFailure"]),
    ("Route", &["AutoApprove", "AwaitApproval", "Reject"]),
    ("AutoApprove", &["Apply", "RecordFailure"]),
    ("AwaitApproval", &["Apply", "RecordRejection", "Escalate", "RecordFailure"]),
    ("Apply", &["Write", "Act"]),
    ("Write", &["RecordFailure"]),
    ("Act", &["RecordFailure"]),
    ("Reject", &["RecordRejection"]),
    ("RecordRejection", &["RecordFailure"]),
    ("Escalate", &["RecordFailure"]),
    ("RecordFailure", &["Failed"]),
    ("Failed", &[]),
];

const ATTEMPTS: u32 = 3;

/// Proposals whose triage runs right now in this process. A second start of the same
/// proposal while one runs (the 2 s timer and a queued resume racing) joins it, as a
/// second `StartExecution` with the same name does on Step Functions — instead of
/// racing it step for step and recording the lost race as a failure. One process owns
/// an embedded home and builds one runner, so the runner's own set is enough.
type Places = Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>;

/// Holds a proposal's place in its runner's set of running proposals until dropped.
struct Running {
    places: Places,
    key: String,
}

impl Running {
    fn claim(places: &Places, tenant: &TenantId, id: &Id) -> Option<Self> {
        let key = format!("{tenant}/{id}");
        let claimed = places.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key.clone());
        // The lock is released above: a `Running` is only built (and so only dropped,
        // which takes the lock) once it holds the place.
        claimed.then(|| Self { places: places.clone(), key })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.places.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.key);
    }
}

#[derive(Clone)]
pub struct EmbeddedRunner {
    tasks: Tasks,
    /// The proposals being run, shared by every clone: the one runner of the process
    /// ([`crate::Services`] builds it once).
    running: Places,
}

/// Runs a task like a state with `Retry` on `UNAVAILABLE` (3 attempts, backoff ×2).
async fn retried<T, F, Fut>(mut task: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut delay = Duration::from_millis(200);
    let mut attempt = 1;
    loop {
        match task().await {
            Err(e) if e.code == ErrorCode::Unavailable && attempt < ATTEMPTS => {
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

impl EmbeddedRunner {
    pub(crate) fn new(tasks: Tasks) -> Self {
        Self { tasks, running: Places::default() }
    }

    /// `Catch` → `RecordFailure` → `Failed`: records the cause on the proposal. A store
    /// that is down cannot record it; then the task's own error is returned.
    async fn caught<T>(&self, tenant: &TenantId, id: &Id, result: Result<T>) -> Result<Option<T>> {
        match result {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.code == ErrorCode::Unavailable => Err(e),
            Err(e) => {
                tracing::warn!(code = ?e.code, proposal = %id, "triage task failed; recording the failure");
                let cause = format!("{}: {}", e.code.as_str(), e.message);
                retried(|| self.tasks.record_failure(tenant, id, &cause)).await?;
                Ok(None)
            }
        }
    }

    async fn write(&self, tenant: &TenantId, id: &Id) -> Result<()> {
        let written = retried(|| self.tasks.write(tenant, id, "governance")).await;
        self.caught(tenant, id, written).await.map(|_| ())
    }

    /// The proposal a token names, if the token is its current wait's.
    async fn waiting(&self, token: &str) -> Result<(TenantId, Id, Proposal)> {
        let ended = || Error::conflict("the wait has ended (timed out or decided) or the token is unknown");
        let mut parts = token.splitn(3, '/');
        let (Some(t), Some(i), Some(_)) = (parts.next(), parts.next(), parts.next()) else { return Err(ended()) };
        let (Ok(tenant), Ok(id)) = (TenantId::new(t), Id::new(i)) else { return Err(ended()) };
        let p = self.tasks.load(&tenant, &id).await.map_err(|e| if e.code == ErrorCode::NotFound { ended() } else { e })?;
        let current = p.wait.as_ref().is_some_and(|w| w.token == token);
        let open = matches!(p.state, ProposalState::AwaitingApproval | ProposalState::Approved | ProposalState::Rejected);
        if !current || !open || p.wait.as_ref().is_some_and(|w| w.deadline <= self.tasks.backend().clock.now()) {
            return Err(ended());
        }
        Ok((tenant, id, p))
    }

    /// Escalates every wait of `tenant` past its deadline (the `States.Timeout` of the
    /// embedded runner) and returns how many.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn expire(&self, tenant: &TenantId) -> Result<usize> {
        let now = self.tasks.backend().clock.now();
        let records = &self.tasks.backend().records;
        let waiting = crate::all_pages(100_000, |page: PageRequest| async move {
            records.list_proposals(tenant, Some(ProposalState::AwaitingApproval), &page).await
        })
        .await?
        .0;
        let mut n = 0;
        for p in waiting.into_iter().filter(|p| p.wait.as_ref().is_some_and(|w| w.deadline <= now)) {
            let escalated = retried(|| self.tasks.escalate(tenant, &p.id)).await;
            if self.caught(tenant, &p.id, escalated).await?.is_some() {
                n += 1;
            }
        }
        Ok(n)
    }
}

#[async_trait]
impl Workflow for EmbeddedRunner {
    fn name(&self) -> &'static str {
        "embedded"
    }

    async fn start(&self, tenant: &TenantId, id: &Id) -> Result<()> {
        let Some(_running) = Running::claim(&self.running, tenant, id) else {
            tracing::debug!(proposal = %id, "triage already running for this proposal; joined");
            return Ok(());
        };
        // Score → Route.
        let scored = retried(|| self.tasks.score(tenant, id)).await;
        let Some(scored) = self.caught(tenant, id, scored).await? else { return Ok(()) };
        match scored.route.as_str() {
            "auto_approve" => {
                let approved = retried(|| self.tasks.auto_approve(tenant, id)).await;
                if self.caught(tenant, id, approved).await?.is_some() {
                    self.write(tenant, id).await?;
                }
            }
            "human" => {
                // AwaitApproval: the wait is stored with the proposal; nothing waits here.
                let token = format!("{tenant}/{id}/{:032x}", rand::random::<u128>());
                let registered = retried(|| self.tasks.register_wait(tenant, id, &token, scored.timeout_seconds)).await;
                self.caught(tenant, id, registered).await?;
            }
            _ => {
                // Reject → RecordRejection.
                let recorded = retried(|| self.tasks.record_rejection(tenant, id)).await;
                self.caught(tenant, id, recorded).await?;
            }
        }
        Ok(())
    }

    async fn send_success(&self, token: &str, _output: &Value) -> Result<()> {
        let (tenant, id, _) = self.waiting(token).await?;
        self.write(&tenant, &id).await
    }

    async fn send_failure(&self, token: &str, error: &str, cause: &str) -> Result<()> {
        let (tenant, id, _) = self.waiting(token).await?;
        if error == REJECTED {
            let recorded = retried(|| self.tasks.record_rejection(&tenant, &id)).await;
            self.caught(&tenant, &id, recorded).await.map(|_| ())
        } else {
            let cause = format!("{error}: {cause}");
            retried(|| self.tasks.record_failure(&tenant, &id, &cause)).await.map(|_| ())
        }
    }

    async fn send_heartbeat(&self, token: &str) -> Result<()> {
        self.waiting(token).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::Running;
    use domain::{Id, TenantId};

    #[test]
    fn a_second_claim_joins_and_the_place_is_freed() {
        let (t, id) = (TenantId::new("acme").unwrap_or_else(|e| panic!("{e}")), Id::new("p-1").unwrap_or_else(|e| panic!("{e}")));
        let places = super::Places::default();
        let first = Running::claim(&places, &t, &id);
        assert!(first.is_some());
        // Refused without touching the first's place (and without deadlocking).
        assert!(Running::claim(&places, &t, &id).is_none());
        assert!(Running::claim(&places, &t, &id).is_none());
        drop(first);
        assert!(Running::claim(&places, &t, &id).is_some(), "free again once the run ends");
    }
}
