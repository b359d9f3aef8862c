//! Connected sources (SPEC §4.5, seed 000 §6): the OAuth app a deployment registered at
//! a source ([`SourceApp`]), a tenant's grant from it ([`Grant`]), the pending sign-in
//! of a connect ([`ConnectStart`]) and where a connector's pull stands ([`SyncState`]).
//!
//! Apps and grants hold secrets: the store keeps them sealed by the vault, and their
//! `Debug` never prints one.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::connector::ConnectorSource;
use crate::error::Error;
use crate::ids::{TenantId, Timestamp};

/// The app a deployment registered at a source (`continuity source-app set`): the
/// client id and secret of its OAuth app, and where the source lives when that is not
/// its public address (a Zendesk subdomain, a Salesforce sandbox's login host, or a
/// local server in development and tests).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceApp {
    pub client_id: String,
    pub client_secret: String,
    /// Replaces every host of the source (authorization, token and API) when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The shared secret the source signs its webhooks with (HubSpot: the app secret;
    /// Stripe: the endpoint's `whsec_…`; Zendesk and Jira: the secret given to them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<String>,
}

impl std::fmt::Debug for SourceApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceApp")
            .field("client_id", &self.client_id)
            .field("client_secret", &"[redacted]")
            .field("base_url", &self.base_url)
            .field("webhook_secret", &self.webhook_secret.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

fn check_secret(field: &str, value: &str, max: usize) -> Result<(), Error> {
    if value.trim().is_empty() || value.len() > max || value.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(Error::invalid_field(field, format!("1-{max} characters without spaces or line breaks")));
    }
    Ok(())
}

impl SourceApp {
    /// Checks the shape (the base URL is checked against the source by the service).
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming the field.
    pub fn check(&self) -> Result<(), Error> {
        check_secret("client_id", &self.client_id, 512)?;
        check_secret("client_secret", &self.client_secret, 1024)?;
        if let Some(s) = &self.webhook_secret {
            check_secret("webhook_secret", s, 1024)?;
        }
        Ok(())
    }
}

/// A tenant's grant from a source: the tokens its sign-in (or API key) gave, and the API
/// address they are good for.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, if the source said (`expires_in`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// The API's base URL for this grant (a Salesforce `instance_url`, a Jira site's
    /// `api.atlassian.com/ex/jira/{cloud id}`, a Zendesk subdomain, or the public API).
    pub api_base: String,
    pub obtained_at: Timestamp,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("access_token", &"[redacted]")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "[redacted]"))
            .field("expires_at", &self.expires_at)
            .field("api_base", &self.api_base)
            .finish_non_exhaustive()
    }
}

impl Grant {
    /// # Errors
    /// `INVALID_REQUEST` for an empty or oversized token.
    pub fn check(&self) -> Result<(), Error> {
        check_secret("access_token", &self.access_token, 8192)?;
        if let Some(r) = &self.refresh_token {
            check_secret("refresh_token", r, 8192)?;
        }
        Ok(())
    }
}

/// A connect waiting for the person to sign in at the source: found by the `state` the
/// source hands back to the callback (stored by its hash), used once, short-lived.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectStart {
    pub tenant: TenantId,
    pub source: ConnectorSource,
    /// The PKCE verifier, for sources that take a challenge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier: Option<String>,
    pub redirect_uri: String,
    pub expires_at: Timestamp,
}

impl std::fmt::Debug for ConnectStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectStart")
            .field("tenant", &self.tenant)
            .field("source", &self.source)
            .field("redirect_uri", &self.redirect_uri)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// Whether a pull reads everything (the first time) or what changed since the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncPhase {
    Initial,
    Delta,
}

/// Where one connector's pull stands; written after every committed page, so a pull cut
/// short (a crash, a Lambda's budget) resumes from the last page it committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncState {
    pub tenant: TenantId,
    pub source: ConnectorSource,
    pub phase: SyncPhase,
    /// The source's own position: which object, its paging token, the watermark (its
    /// shape is the source adapter's).
    pub cursor: Json,
    /// Records read in the current pass.
    pub fetched: u64,
    /// Records read by the last pass that finished.
    #[serde(default)]
    pub last_pass: u64,
    /// Records the source says the current pass has, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Seconds between delta pulls.
    pub interval_secs: u64,
    /// When the next pull is due.
    pub next_at: Timestamp,
    /// When the last full pass ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_synced_at: Option<Timestamp>,
    /// A pull holds the connector until then (two pulls never run at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<Timestamp>,
    /// The grant was refused (revoked, expired): nothing pulls again until a person
    /// reconnects.
    #[serde(default)]
    pub needs_reconnect: bool,
    /// Optimistic-concurrency version: 0 until stored.
    #[serde(default)]
    pub version: u64,
}

impl SyncState {
    /// The state of a connector that has not pulled yet: due at once.
    pub fn fresh(tenant: TenantId, source: ConnectorSource, interval_secs: u64, now: Timestamp) -> Self {
        Self {
            tenant,
            source,
            phase: SyncPhase::Initial,
            cursor: Json::Null,
            fetched: 0,
            last_pass: 0,
            total: None,
            interval_secs,
            next_at: now,
            last_synced_at: None,
            lease_until: None,
            needs_reconnect: false,
            version: 0,
        }
    }
}
