//! Notifications: the channels a tenant's admins configure (a signed JSON webhook, a
//! Slack-compatible incoming webhook, an e-mail address) and the events they subscribe to.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{Id, TenantId, Timestamp};
use crate::tenant::string_enum;

string_enum! {
    /// Where a channel delivers.
    ChannelKind, "kind" {
        Webhook = "webhook",
        Slack = "slack",
        Email = "email",
    }
}

string_enum! {
    /// What happened: a proposal waits for a person (`proposal.waiting`); a waiting
    /// proposal is less than a day from its deadline (`proposal.expiring`, once);
    /// nobody decided in time, so it expired and is escalated (`proposal.escalated`); an
    /// agent asks a person to authorize a gated action (`gate.requested`); a task was
    /// dispatched to its assignee (`task.assigned`); a connected source's pull failed or
    /// its grant needs a reconnect (`connector.error`); records failed their readback
    /// and wait in the review queue (`review.failed`, hourly at most); background work
    /// failed for good and was dead-lettered (`health.alarm`, hourly at most).
    EventKind, "event" {
        ProposalWaiting = "proposal.waiting",
        ProposalExpiring = "proposal.expiring",
        ProposalEscalated = "proposal.escalated",
        GateRequested = "gate.requested",
        TaskAssigned = "task.assigned",
        ConnectorError = "connector.error",
        ReviewFailed = "review.failed",
        HealthAlarm = "health.alarm",
    }
}

/// One channel of one tenant.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channel {
    pub tenant: TenantId,
    pub id: Id,
    pub kind: ChannelKind,
    /// Where deliveries go: an https URL (a loopback address in development), or
    /// `mailto:{address}` for e-mail.
    pub url: String,
    /// The webhook's signing secret (HMAC-SHA256), shown once at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The events it receives.
    pub events: Vec<EventKind>,
    pub created_at: Timestamp,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("tenant", &self.tenant)
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("url", &"[redacted]")
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

impl Channel {
    /// # Errors
    /// `INVALID_REQUEST` for no events or an oversized URL.
    pub fn check(&self) -> Result<(), Error> {
        if self.events.is_empty() {
            return Err(Error::invalid_field("events", "at least one event kind"));
        }
        if self.url.is_empty() || self.url.len() > 2048 || self.url.chars().any(char::is_whitespace) {
            return Err(Error::invalid_field("url", "1-2048 characters without spaces"));
        }
        Ok(())
    }
}

/// One event, as every channel receives it: what happened, in words already redacted
/// (personal data masked, secrets never), and where to act on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: Id,
    pub kind: EventKind,
    pub tenant: TenantId,
    pub at: Timestamp,
    pub title: String,
    pub text: String,
    /// What it is about (`proposal`, `gate`, `task`, `connector`) and its id.
    pub subject: String,
    /// Where a person acts on it (the approvals console, the Connectors page), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

/// A delivery that kept failing: kept, and listed for the tenant's admins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub channel: Id,
    pub event: Event,
    pub attempts: u32,
    pub reason: String,
    pub at: Timestamp,
}
