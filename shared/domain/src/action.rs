//! Governed actions (SPEC §6, issue "governed actions that act"): a proposal of kind
//! `action` may name a connector operation — "move deal D-1 to closed-won in HubSpot" —
//! which a connector adapter performs once the proposal is approved. What was asked,
//! and what happened when it was carried out, are stored with the proposal.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::Timestamp;
use crate::spine::EntityRef;
use crate::tenant::string_enum;
use crate::value::{Attributes, Value};

/// Longest operation target (a source's record id or key).
pub const MAX_TARGET_LEN: usize = 128;
/// Largest parameters of one operation, serialized.
pub const MAX_PARAMS_BYTES: usize = 8 * 1024;

/// What an action proposal asks a connector to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRequest {
    /// The source whose API performs it (`hubspot`, `salesforce`, `zendesk`, `jira`, `stripe`).
    pub connector: String,
    /// The operation, `{object}.{verb}` (`deal.update_stage`).
    pub operation: String,
    /// The source's id of the record acted on (`123456`, `PROJ-12`, `sub_…`).
    pub target: String,
    /// The operation's parameters (`{"stage": "closedwon"}`).
    #[serde(default)]
    pub params: Attributes,
}

impl ActionRequest {
    /// Checks the request's shape; the operation's own parameters are checked by its adapter.
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming the field.
    pub fn check(&self) -> Result<(), Error> {
        let name_ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 64
                && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.')
        };
        if !name_ok(&self.connector) {
            return Err(Error::invalid_field("action.connector", "1-64 characters of a-z, 0-9, _ and ."));
        }
        if !name_ok(&self.operation) {
            return Err(Error::invalid_field("action.operation", "1-64 characters of a-z, 0-9, _ and ."));
        }
        if self.target.is_empty()
            || self.target.chars().count() > MAX_TARGET_LEN
            || self.target.chars().any(|c| c.is_control() || c.is_whitespace() || c == '/' || c == '?' || c == '#')
        {
            return Err(Error::invalid_field(
                "action.target",
                format!("the source's record id: 1-{MAX_TARGET_LEN} characters, no spaces, '/', '?' or '#'"),
            ));
        }
        let mut size = 0;
        for (k, v) in &self.params {
            size += k.len() + value_len(v);
        }
        if size > MAX_PARAMS_BYTES {
            return Err(Error::invalid_field("action.params", format!("at most {MAX_PARAMS_BYTES} bytes")));
        }
        Ok(())
    }

    /// A text parameter, trimmed, or a clear error naming it.
    ///
    /// # Errors
    /// `INVALID_REQUEST` when it is missing, not text, empty or longer than `max` characters.
    pub fn text(&self, name: &str, max: usize) -> Result<&str, Error> {
        match self.params.get(name) {
            Some(Value::Text(s)) if !s.trim().is_empty() && s.chars().count() <= max => Ok(s.trim()),
            Some(Value::Text(_)) => Err(Error::invalid_field(format!("action.params.{name}"), format!("1-{max} characters"))),
            Some(_) => Err(Error::invalid_field(format!("action.params.{name}"), "must be text")),
            None => Err(Error::invalid_field(format!("action.params.{name}"), "required")),
        }
    }
}

fn value_len(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) | Value::Int(_) | Value::Float(_) => 8,
        Value::Text(s) => s.len(),
        Value::List(l) => l.iter().map(value_len).sum::<usize>() + 2,
        Value::Map(m) => m.iter().map(|(k, v)| k.len() + value_len(v)).sum::<usize>() + 2,
    }
}

string_enum! {
    /// Where carrying an action out stands: `performing` while a worker holds it (a
    /// claim with a lease), `done` once the source accepted it, `failed` with the reason.
    ActionState, "action state" { Performing = "performing", Done = "done", Failed = "failed" }
}

/// What happened when an approved action was carried out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRun {
    pub state: ActionState,
    /// Sent with every request of this action (the `Idempotency-Key` header): a source
    /// that honours it performs a repeated request once.
    pub idempotency_key: String,
    /// Requests sent to the source so far.
    pub attempts: u32,
    /// When the current worker claimed it (a claim older than the lease may be taken over).
    pub claimed_at: Timestamp,
    /// The source's last HTTP status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it failed (the source's answer, shortened), or the last retried error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The Spine entity the source's answer updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<EntityRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
}

/// An action proposal's operation and, once approved, its run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub request: ActionRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<ActionRun>,
}

/// A tenant's credential for one connector's API, stored sealed by the vault and never
/// shown again. `Debug` hides the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    /// The API's base URL when it is per tenant (Salesforce instance, Zendesk subdomain,
    /// Jira site) or to override the public one; `https` (or a loopback `http`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The token: a HubSpot private-app token, a Salesforce or Zendesk OAuth access token,
    /// a Jira API token (with `email`), a Stripe secret key.
    pub token: String,
    /// The account e-mail for APIs that pair it with the token (Jira Cloud basic auth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("base_url", &self.base_url)
            .field("token", &"[redacted]")
            .field("email", &self.email)
            .finish()
    }
}

impl Credential {
    /// Checks the credential's shape.
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming the field.
    pub fn check(&self) -> Result<(), Error> {
        if self.token.trim().is_empty() || self.token.len() > 4096 || self.token.chars().any(char::is_control) {
            return Err(Error::invalid_field("token", "1-4096 characters without line breaks"));
        }
        // Which hosts a source's credential may name is the adapters' rule
        // (`services::actions::check_base_url`); here only the shape.
        if let Some(url) = &self.base_url
            && (url.is_empty() || url.len() > 512 || url.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(Error::invalid_field("base_url", "a URL of at most 512 characters, without spaces"));
        }
        if let Some(e) = &self.email
            && (e.len() > 254 || !e.contains('@') || e.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(Error::invalid_field("email", "an e-mail address"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(target: &str) -> ActionRequest {
        ActionRequest {
            connector: "hubspot".into(),
            operation: "deal.update_stage".into(),
            target: target.into(),
            params: [("stage".to_owned(), Value::Text("closedwon".into()))].into(),
        }
    }

    #[test]
    fn requests_and_credentials_are_checked() {
        assert!(request("123").check().is_ok());
        for bad in ["", "a/b", "a b", "x?y", &"9".repeat(129)] {
            assert!(request(bad).check().is_err(), "{bad:?}");
        }
        assert_eq!(request("1").text("stage", 64).ok(), Some("closedwon"));
        assert!(request("1").text("missing", 64).is_err());
        let c = |url: &str| Credential { base_url: Some(url.into()), token: "t".into(), email: None };
        assert!(c("https://acme.my.salesforce.com").check().is_ok());
        assert!(c("https://acme.example.com/ x").check().is_err());
        assert!(Credential { base_url: None, token: "two\nlines".into(), email: None }.check().is_err());
        let shown = format!("{:?}", Credential { base_url: None, token: "pat-secret".into(), email: None });
        assert!(!shown.contains("pat-secret"), "{shown}");
    }
}
