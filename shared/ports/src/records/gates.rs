//! Gates (seed 002 §8): one versioned item per `(namespace, action)`, so spending a
//! consume-once authorization is a conditional write and two racing verifies have one
//! winner.

use async_trait::async_trait;
use domain::gate::{Gate, check_gate_name};
use domain::{Error, ErrorCode, Page, PageRequest, Result, TenantId};

use super::{Expect, Records, encode, put, versioned};
use crate::items::{Condition, Write};

/// The gate store.
#[async_trait]
pub trait GateStore: Send + Sync {
    /// The gate of `action` in `namespace`, with its stored version.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed name; `UNAVAILABLE`.
    async fn get_gate(&self, tenant: &TenantId, namespace: &str, action: &str) -> Result<Option<Gate>>;
    /// Writes `gate` under `expect` and returns it with its new version.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed gate; `CONFLICT` when `expect` does not hold
    /// (the gate exists already, or changed since it was read); `UNAVAILABLE`.
    async fn put_gate(&self, gate: &Gate, expect: Expect) -> Result<Gate>;
    /// The tenant's gates, ordered by namespace then action.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed cursor; `UNAVAILABLE`.
    async fn list_gates(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<Gate>>;
    /// Deletes the gate when it still has `version` (a gate changed meanwhile is kept).
    ///
    /// # Errors
    /// `CONFLICT` when it changed or is gone; `UNAVAILABLE`.
    async fn delete_gate(&self, gate: &Gate) -> Result<()>;
}

fn key(namespace: &str, action: &str) -> Result<String> {
    check_gate_name("namespace", namespace)?;
    check_gate_name("action", action)?;
    Ok(format!("{namespace}#{action}"))
}

#[async_trait]
impl GateStore for Records {
    async fn get_gate(&self, tenant: &TenantId, namespace: &str, action: &str) -> Result<Option<Gate>> {
        self.get_one(tenant.as_str(), "gate", &key(namespace, action)?).await
    }

    async fn put_gate(&self, gate: &Gate, expect: Expect) -> Result<Gate> {
        gate.check()?;
        let tenant = gate.tenant.as_str();
        let sk = key(&gate.namespace, &gate.action)?;
        let (mut version, condition) = versioned(expect);
        if expect == Expect::Any {
            version = self.items.get(tenant, "gate", &sk).await?.map_or(1, |i| i.version + 1);
        }
        let mut stored = gate.clone();
        stored.version = version;
        self.items.write(vec![put(tenant, "gate", sk, version, encode(&stored)?, condition)]).await.map_err(|e| {
            if e.code != ErrorCode::Conflict {
                return e;
            }
            match expect {
                Expect::Absent => Error::conflict(format!("gate {} {} exists already", gate.namespace, gate.action)),
                _ => Error::conflict(format!("gate {} {} changed concurrently; re-read it", gate.namespace, gate.action)),
            }
        })?;
        Ok(stored)
    }

    async fn list_gates(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<Gate>> {
        self.page(tenant.as_str(), "gate", "", page, false).await
    }

    async fn delete_gate(&self, gate: &Gate) -> Result<()> {
        let sk = key(&gate.namespace, &gate.action)?;
        self.items
            .write(vec![Write::Delete {
                tenant: gate.tenant.as_str().to_owned(),
                part: "gate".into(),
                sk,
                condition: Condition::Version(gate.version),
            }])
            .await
    }
}
