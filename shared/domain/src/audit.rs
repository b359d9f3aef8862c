//! The audit ledger (SPEC §9): who did what, in which tenant, when, with what outcome.

use serde::{Deserialize, Serialize};

use crate::ids::{Id, TenantId, Timestamp};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub tenant: TenantId,
    pub id: Id,
    pub at: Timestamp,
    /// Principal id, or `system` for jobs.
    pub actor: String,
    /// `tool:spine.entity.get`, `admin:key.create`, `decision:approve`…
    pub action: String,
    /// What it acted on, if anything (`account:acme-1`).
    pub target: Option<String>,
    /// `ok` or a taxonomy code.
    pub outcome: String,
    pub request_id: Option<String>,
    /// Which client acted ([`crate::principal::CallerContext::via`]): `claude-code
    /// (api_key:k1)`; absent for jobs and older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}
