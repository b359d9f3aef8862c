//! The audit ledger helper: one call per tool call, decision or admin action.
//! A failure to audit is logged loudly but does not fail the caller's read.

use domain::audit::AuditRecord;
use ports::Backend;
use ports::records::AuditLog;

#[derive(Clone)]
pub struct AuditService {
    backend: Backend,
}

impl AuditService {
    pub fn new(backend: Backend) -> Self {
        Self { backend }
    }

    /// Records `action` by `actor` in `tenant` with `outcome` (`ok` or a taxonomy code).
    pub async fn record(&self, tenant: &domain::TenantId, actor: &str, action: &str, target: Option<String>, outcome: &str) {
        let rec = AuditRecord {
            tenant: tenant.clone(),
            id: crate::new_id(&self.backend),
            at: self.backend.clock.now(),
            actor: actor.to_owned(),
            action: action.to_owned(),
            target,
            outcome: outcome.to_owned(),
            request_id: None,
        };
        if let Err(e) = self.backend.records.append_audit(&rec).await {
            tracing::error!(tenant = %tenant, action, error = %e, "audit record lost");
        }
    }
}
