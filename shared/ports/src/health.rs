//! Readiness (SPEC §9): what a backend can say about itself beyond answering reads —
//! the embedded backend its disk's free space and whether SQLite found the database
//! damaged; the AWS backend whether its cache answers. `/healthz` adds the checks every
//! backend shares (the store answers a read, the vault opens a tenant's data key).

use async_trait::async_trait;

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// `disk`, `store`, `cache`, `vault`.
    pub name: &'static str,
    /// Whether the service can do its work (a failing check makes `/healthz` 503).
    pub ok: bool,
    /// `ok`, or what is wrong and what to do, for an operator.
    pub detail: String,
}

impl Check {
    pub fn ok(name: &'static str) -> Self {
        Self { name, ok: true, detail: "ok".into() }
    }

    pub fn failed(name: &'static str, detail: impl Into<String>) -> Self {
        Self { name, ok: false, detail: detail.into() }
    }
}

#[async_trait]
pub trait Readiness: Send + Sync {
    /// The backend's own checks. Never fails: a check that cannot run is a failed check.
    async fn check(&self) -> Vec<Check>;
}
