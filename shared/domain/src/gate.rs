//! Gates (seed 002 §8): a person's standing answer to "may an agent or a script do this
//! now?" — a push to a repository, a deploy to production. A gate is keyed by a
//! namespace (`repo:acme/web`, `env:prod`) and a target action (`push`, `deploy`); its
//! status is `authorized`, `blocked` or `pending` (an agent asked; a person has not
//! answered). Scripts verify a gate before acting; a consume-once authorization is
//! spent by the first verify that uses it.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{Id, TenantId, Timestamp};
use crate::tenant::string_enum;

string_enum! {
    /// Where a gate stands.
    GateStatus, "gate status" { Authorized = "authorized", Blocked = "blocked", Pending = "pending" }
}

/// Longest namespace or action, in bytes.
pub const MAX_GATE_NAME: usize = 128;
/// Longest reason, in characters.
pub const MAX_GATE_REASON: usize = 500;

/// A gate's namespace or action: 1–128 bytes of letters, digits and `. _ - : / @ +`
/// (so `repo:acme/web` and `env:prod` fit, and neither a key separator nor a space does).
///
/// # Errors
/// `INVALID_REQUEST` naming `field`.
pub fn check_gate_name(field: &str, value: &str) -> Result<(), Error> {
    let ok = !value.is_empty()
        && value.len() <= MAX_GATE_NAME
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_:/@+".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid_field(field, format!("1 to {MAX_GATE_NAME} letters, digits or . _ - : / @ + (e.g. repo:acme/web)")))
    }
}

/// One gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    pub tenant: TenantId,
    pub namespace: String,
    pub action: String,
    pub status: GateStatus,
    /// Who set the current status (a principal id; `cli` for the home's operator).
    pub set_by: String,
    pub reason: Option<String>,
    /// After this instant an authorization no longer holds (verify answers blocked).
    pub expires_at: Option<Timestamp>,
    /// The next successful verify spends the authorization (the gate becomes blocked).
    pub consume_once: bool,
    /// Who asked for the gate, when an agent requested it (it may not authorize it).
    pub requested_by: Option<String>,
    pub updated_at: Timestamp,
    /// Optimistic concurrency (set by the store).
    #[serde(default)]
    pub version: u64,
    /// The last verify that found it, and what it answered.
    #[serde(default)]
    pub last_verified: Option<Timestamp>,
    /// The status is a person's decision (`set`), not a spent authorization, an expiry or
    /// a request: an agent's request never overturns a person's block.
    #[serde(default)]
    pub decided: bool,
}

impl Gate {
    /// Checks the gate's names and reason.
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming the field.
    pub fn check(&self) -> Result<(), Error> {
        check_gate_name("namespace", &self.namespace)?;
        check_gate_name("action", &self.action)?;
        if self.reason.as_ref().is_some_and(|r| r.chars().count() > MAX_GATE_REASON) {
            return Err(Error::invalid_field("reason", format!("at most {MAX_GATE_REASON} characters")));
        }
        Id::new(self.set_by.clone()).map_err(|_| Error::invalid_field("set_by", "a principal id"))?;
        Ok(())
    }

    /// Whether the gate authorizes its action at `now` (authorized and not expired).
    pub fn authorizes(&self, now: Timestamp) -> bool {
        self.status == GateStatus::Authorized && self.expires_at.is_none_or(|e| now.0 < e.0)
    }

    /// Whether the gate's status has run out at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|e| now.0 >= e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate() -> Gate {
        Gate {
            tenant: TenantId::new("acme").unwrap(),
            namespace: "repo:acme/web".into(),
            action: "push".into(),
            status: GateStatus::Authorized,
            set_by: "ada".into(),
            reason: None,
            expires_at: Some(Timestamp(1_000)),
            consume_once: false,
            requested_by: None,
            updated_at: Timestamp(0),
            version: 0,
            last_verified: None,
            decided: true,
        }
    }

    #[test]
    fn names_are_checked_and_expiry_ends_an_authorization() {
        let g = gate();
        assert!(g.check().is_ok());
        assert!(g.authorizes(Timestamp(999)));
        assert!(!g.authorizes(Timestamp(1_000)), "an expired authorization no longer holds");
        assert!(g.expired(Timestamp(1_000)));
        for bad in ["", "repo x", "a#b", "ns\n", &"x".repeat(129)] {
            assert!(check_gate_name("namespace", bad).is_err(), "{bad:?}");
        }
        for good in ["repo:acme/web", "env:prod", "push", "deploy@eu-west-1", "v1.2+build"] {
            assert!(check_gate_name("action", good).is_ok(), "{good:?}");
        }
        let blocked = Gate { status: GateStatus::Blocked, expires_at: None, ..gate() };
        assert!(!blocked.authorizes(Timestamp(0)));
        let long = Gate { reason: Some("r".repeat(501)), ..gate() };
        assert_eq!(long.check().unwrap_err().code, crate::ErrorCode::InvalidRequest);
    }
}
