//! The `Act` task: an approved action carried out through its connector's adapter once,
//! under a claim another worker can take over only after [`ACTION_LEASE_MS`]; an action
//! that will not be performed ends its proposal `failed` with the reason.

use domain::action::{ActionRun, ActionState};
use domain::proposal::{Proposal, ProposalState};
use domain::{Error, ErrorCode, Id, Result, TenantId};
use ports::records::{CredentialStore, ProposalStore};

use super::Tasks;

/// A claim on carrying an action out is held this long; an older one (its worker died
/// mid-request) may be taken over — the request goes again with the same idempotency key.
pub const ACTION_LEASE_MS: i64 = 120_000;

impl Tasks {
    /// `Act`: carries an approved action out through its connector's adapter, once.
    ///
    /// The proposal is claimed first (a versioned write of its run: `performing`, the
    /// idempotency key, the time); a second worker finding a fresh claim answers
    /// `UNAVAILABLE` (the workflow retries later) and never sends the request, so an
    /// approval delivered twice performs it once. A claim older than
    /// [`ACTION_LEASE_MS`] (its worker died) is taken over and the request sent again
    /// with the same idempotency key. The source's answer updates the Spine entity it
    /// changed (with its signal); a refusal, or a failure past the retries, ends the
    /// proposal `failed` with the source's reason.
    ///
    /// # Errors
    /// `CONFLICT` unless approved; `NOT_FOUND`; `UNAVAILABLE` (the store, or another
    /// worker holding the claim).
    pub async fn act(&self, tenant: &TenantId, id: &Id) -> Result<Proposal> {
        let records = &self.backend.records;
        let mut p = self.load(tenant, id).await?;
        match p.state {
            ProposalState::Written | ProposalState::Failed => return Ok(p),
            ProposalState::Approved | ProposalState::AutoApproved => {}
            other => return Err(Error::conflict(format!("proposal {id} is {other}, not approved"))),
        }
        if let Some(why) = crate::governance::redaction::needs_a_person(&p) {
            return Err(Error::conflict(format!("proposal {id} cannot be carried out without a person's approval: {why}")));
        }
        let Some(mut action) = p.action.clone() else {
            return Box::pin(self.write(tenant, id, "governance")).await;
        };
        let now = self.backend.clock.now();
        let previous = action.run.clone();
        match previous.as_ref().map(|r| r.state) {
            Some(ActionState::Done) => return self.step(p, ProposalState::Written, "governance", "performed").await,
            Some(ActionState::Failed) => {
                let reason = previous.as_ref().and_then(|r| r.error.clone()).unwrap_or_default();
                return self.fail_action(p, &reason).await;
            }
            Some(ActionState::Performing) if previous.as_ref().is_some_and(|r| now.0 - r.claimed_at.0 < ACTION_LEASE_MS) => {
                return Err(Error::unavailable(format!(
                    "proposal {id}: its action is being carried out by another worker; its outcome will be recorded"
                )));
            }
            _ => {}
        }
        // A claim whose worker stopped: its request may have reached the source.
        let taking_over = previous.as_ref().is_some_and(|r| r.state == ActionState::Performing);
        // The claim.
        let key = previous.as_ref().map_or_else(
            || format!("continuity-{}", &crate::sha256_hex(&format!("{tenant}/{id}"))[..32]),
            |r| r.idempotency_key.clone(),
        );
        action.run = Some(ActionRun {
            state: ActionState::Performing,
            idempotency_key: key.clone(),
            attempts: previous.as_ref().map_or(0, |r| r.attempts),
            claimed_at: now,
            status: None,
            error: None,
            entity: None,
            finished_at: None,
        });
        p.action = Some(action.clone());
        p.updated_at = now;
        let mut p = match records.update_proposal(&p).await {
            Ok(p) => p,
            Err(e) if e.code == ErrorCode::Conflict => {
                return Err(Error::unavailable(format!(
                    "proposal {id}: another worker claimed its action; its outcome will be recorded"
                )));
            }
            Err(e) => return Err(e),
        };
        let request = &action.request;
        let prepared = crate::actions::find(&request.connector, &request.operation).and_then(|op| Ok((op, op.prepare(request)?)));
        let (op, prepared) = match prepared {
            Ok(x) => x,
            Err(e) => return self.fail_action(p, &format!("the action cannot be sent: {}", e.message)).await,
        };
        if taking_over && !op.repeatable {
            let why = format!(
                "the worker carrying it out stopped while its request to {} was out: its outcome is unknown; check {} {} before proposing it again",
                request.connector, request.connector, request.target
            );
            return self.fail_action(p, &why).await;
        }
        let source = Id::new(request.connector.clone())?;
        let Some(credential) = records.get_credential(tenant, &source).await? else {
            let why = format!(
                "no {} credential is stored for this workspace (`continuity connector credential set --source {}`)",
                request.connector, request.connector
            );
            return self.fail_action(p, &why).await;
        };
        let answered = crate::actions::perform(
            &request.connector,
            op.repeatable,
            &prepared,
            &credential,
            &key,
            crate::actions::Retry::default(),
        )
        .await;
        let mut run =
            p.action.as_ref().and_then(|a| a.run.clone()).ok_or_else(|| Error::internal("a claimed action lost its run"))?;
        run.finished_at = Some(self.backend.clock.now());
        match answered {
            Ok(crate::actions::Answered::Done { status, body, attempts }) => {
                run.attempts += attempts;
                run.status = Some(status);
                run.state = ActionState::Done;
                if let Some(effect) = op.effect(request, body.as_ref()) {
                    run.entity = Some(effect.entity.clone());
                    // The source holds the change now: a Spine that cannot take it is
                    // caught up by the next sync, not a failed action.
                    match self.ingest.apply_change(tenant, &effect).await {
                        Ok(Some(_)) => {}
                        Ok(None) => run.error = Some("performed; the Spine does not hold this record yet".into()),
                        Err(e) => {
                            tracing::warn!(code = ?e.code, proposal = %id, "action performed; the Spine update failed");
                            run.error = Some(format!(
                                "performed; the Spine update failed ({}), the next sync brings it",
                                e.code.as_str()
                            ));
                        }
                    }
                }
                if let Some(a) = &mut p.action {
                    a.run = Some(run);
                }
                let outcome = format!("performed: {} {} {} ({status})", request.connector, request.operation, request.target);
                // The run `done` and the proposal `written` in one audited write: once the
                // source took it, nothing may send it again.
                let written = self.step(p, ProposalState::Written, "governance", &outcome).await?;
                if let Err(e) = self.audit(tenant, "governance", "action.performed", id, &outcome).await {
                    tracing::warn!(code = ?e.code, proposal = %id, "action performed and recorded; its ledger line was not written");
                }
                Ok(written)
            }
            Ok(crate::actions::Answered::Failed { status, reason, attempts }) => {
                run.attempts += attempts;
                run.status = status;
                if let Some(a) = &mut p.action {
                    a.run = Some(run);
                }
                self.fail_action(p, &reason).await
            }
            Err(e) => self.fail_action(p, &e.message).await,
        }
    }

    /// An action that will not be performed: its run `failed` with the reason, the
    /// proposal `failed` with it too.
    pub(super) async fn fail_action(&self, mut p: Proposal, reason: &str) -> Result<Proposal> {
        let reason: String = reason.chars().take(500).collect();
        if let Some(a) = &mut p.action {
            let now = self.backend.clock.now();
            let run = a.run.get_or_insert_with(|| ActionRun {
                state: ActionState::Failed,
                idempotency_key: String::new(),
                attempts: 0,
                claimed_at: now,
                status: None,
                error: None,
                entity: None,
                finished_at: None,
            });
            run.state = ActionState::Failed;
            run.error = Some(reason.clone());
            run.finished_at.get_or_insert(now);
        }
        p.decision_reason = Some(format!("action failed: {reason}"));
        let id = p.id.clone();
        let tenant = p.tenant.clone();
        let failed = self.step(p, ProposalState::Failed, "governance", &format!("action failed: {reason}")).await?;
        if let Err(e) = self.audit(&tenant, "governance", "action.failed", &id, &reason).await {
            tracing::warn!(code = ?e.code, proposal = %id, "action failure recorded; its ledger line was not written");
        }
        Ok(failed)
    }
}
