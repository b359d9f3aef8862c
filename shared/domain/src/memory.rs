//! Memory (SPEC §4.3): conversational turns, personal patterns and governed org memory,
//! each in exactly one of six scopes.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{Id, TenantId, Timestamp};
use crate::principal::CallerContext;
use crate::tenant::string_enum;

/// The six memory scopes. Team, project, personal and session carry the id they isolate.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "scope", content = "key", rename_all = "snake_case")]
pub enum MemoryScope {
    /// Reference knowledge shared read-only with every tenant; operator-written.
    Global,
    /// Tenant-wide, governed.
    Org,
    Team(String),
    Project(String),
    /// One user (principal id).
    Personal(String),
    /// One conversation (session id).
    Session(String),
}

impl MemoryScope {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::Org => "org",
            Self::Team(_) => "team",
            Self::Project(_) => "project",
            Self::Personal(_) => "personal",
            Self::Session(_) => "session",
        }
    }

    /// `kind` or `kind:key`, as stored in index columns and sort keys.
    pub fn storage_key(&self) -> String {
        match self {
            Self::Global | Self::Org => self.kind().to_owned(),
            Self::Team(k) | Self::Project(k) | Self::Personal(k) | Self::Session(k) => format!("{}:{k}", self.kind()),
        }
    }

    /// Parses `kind` or `kind:key`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for an unknown kind or a missing/invalid key.
    pub fn parse(raw: &str) -> Result<Self, Error> {
        let (kind, key) = match raw.split_once(':') {
            Some((k, v)) => (k, Some(v)),
            None => (raw, None),
        };
        let has_key = key.is_some();
        let key = || -> Result<String, Error> {
            let k = key.ok_or_else(|| Error::invalid_field("scope", format!("{kind} scope needs an id: {kind}:<id>")))?;
            Id::new(k).map_err(|_| Error::invalid_field("scope", "scope id is invalid"))?;
            Ok(k.to_owned())
        };
        match kind {
            "global" if !has_key => Ok(Self::Global),
            "org" if !has_key => Ok(Self::Org),
            "team" => Ok(Self::Team(key()?)),
            "project" => Ok(Self::Project(key()?)),
            "personal" => Ok(Self::Personal(key()?)),
            "session" => Ok(Self::Session(key()?)),
            _ => {
                Err(Error::invalid_field("scope", "expected global, org, team:<id>, project:<id>, personal:<id> or session:<id>"))
            }
        }
    }

    /// Whether `caller` may read this scope. Checked before any index is traversed (wall 6).
    pub fn readable_by(&self, caller: &CallerContext) -> bool {
        match self {
            Self::Global | Self::Org => true,
            Self::Team(t) => caller.teams.iter().any(|x| x == t),
            Self::Project(p) => caller.projects.iter().any(|x| x == p),
            Self::Personal(user) => user == caller.principal.as_str(),
            // A session belongs to its creator; the session id is namespaced by principal.
            Self::Session(s) => s.starts_with(&format!("{}.", caller.principal)),
        }
    }
}

string_enum! {
    MemoryType, "memory_type" { Conversational = "conversational", Personal = "personal", Org = "org" }
}

string_enum! {
    /// Kinds of personal pattern.
    PersonalKind, "personal_kind" { Preference = "preference", Behavior = "behavior", Context = "context", Decision = "decision" }
}

string_enum! {
    /// Kinds of org memory entry.
    OrgKind, "org_kind" { Decision = "decision", Pattern = "pattern", Commitment = "commitment", Learning = "learning" }
}

/// Governance state of a memory entry. There is no archive: nothing is hidden or deleted —
/// except personal memory its owner forgets, which keeps a tombstone (who, when) and
/// loses its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum GovernanceState {
    Active,
    Superseded {
        by: Id,
    },
    Rejected {
        reason: String,
    },
    /// A personal entry its owner forgot (or whose time to live ran out: `by` is then
    /// the system).
    Forgotten {
        by: Id,
        at: Timestamp,
    },
}

impl GovernanceState {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Superseded { .. } => "superseded",
            Self::Rejected { .. } => "rejected",
            Self::Forgotten { .. } => "forgotten",
        }
    }
}

/// Where a memory entry came from and what it replaced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lineage {
    /// The proposal that produced this entry (org memory).
    pub proposal: Option<Id>,
    /// The entry this one supersedes.
    pub supersedes: Option<Id>,
    /// The conversation turns it was distilled from.
    pub source_turns: Vec<Id>,
}

/// One memory entry (personal or org; conversational turns are [`ConversationTurn`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    pub tenant: TenantId,
    pub id: Id,
    pub memory_type: MemoryType,
    pub scope: MemoryScope,
    /// `preference`, `decision`, `learning`… (see [`PersonalKind`], [`OrgKind`]).
    pub kind: String,
    pub title: String,
    pub body: String,
    pub state: GovernanceState,
    pub lineage: Lineage,
    pub created_by: Id,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
    /// When what it records happened, if that is not when it was stored (a turn's
    /// time, a source record's, or given by the writer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<Timestamp>,
    /// When a personal entry with a time to live is forgotten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// What an import brought along with the text (a note's front matter, another memory
    /// product's metadata and ids), kept as it came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
}

impl MemoryEntry {
    /// When what it records happened: [`MemoryEntry::occurred_at`], else when it was
    /// created.
    pub fn happened_at(&self) -> Timestamp {
        self.occurred_at.unwrap_or(self.created_at)
    }

    /// Whether it is active and not past its time to live at `now`.
    pub fn live_at(&self, now: Timestamp) -> bool {
        self.state == GovernanceState::Active && self.expires_at.is_none_or(|e| e > now)
    }
}

/// The readback verification of an indexed memory entry or KB document (SPEC §5.4): a
/// synthetic query must retrieve what was written before it counts as verified
/// (confidence raised, freshness locked); otherwise it waits in the review queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    pub tenant: TenantId,
    /// `memory` or `kb`.
    pub kind: String,
    pub doc: Id,
    pub scope: MemoryScope,
    pub title: String,
    pub verified: bool,
    /// Written, its readback not run yet: the index makes writes searchable after a
    /// refresh window and the readback runs once it has passed (off the request path).
    /// A pending verification does not enter the review queue.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
    /// 0.96 when verified, 0.30 when the readback failed.
    pub confidence: f64,
    /// The freshness lock: when the content was proven retrievable (verified only).
    pub fresh_at: Option<Timestamp>,
    /// What the readback found, in words.
    pub reason: String,
    /// POLE+O entities extracted from the text (rule-based).
    #[serde(default)]
    pub entities: Vec<Extracted>,
    /// Records of the same scope this one was linked to as similar (relation edges).
    #[serde(default)]
    pub related: Vec<Id>,
    pub at: Timestamp,
}

/// One POLE+O entity found in a text: `person`, `object`, `location`, `event` or
/// `organization`, and the words it was found as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extracted {
    pub class: String,
    pub text: String,
}

string_enum! {
    TurnRole, "role" { User = "user", Assistant = "assistant", System = "system" }
}

/// One raw turn of a session: the source of every other memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationTurn {
    pub tenant: TenantId,
    pub session: String,
    /// Position within the session, from 1.
    pub seq: u64,
    pub id: Id,
    pub role: TurnRole,
    pub content: String,
    pub principal: Id,
    pub at: Timestamp,
    /// Set once the turn is forgotten (`memory.forget`): its content is then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forgotten: Option<TurnForgotten>,
    /// When its time to live runs out (`memory.write_conversational`'s `ttl_days`): hidden
    /// from then on, forgotten by the next maintenance run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

impl ConversationTurn {
    /// Whether the turn is shown at `now`: not forgotten, its time to live not run out.
    pub fn live_at(&self, now: Timestamp) -> bool {
        self.forgotten.is_none() && self.expires_at.is_none_or(|e| e > now)
    }
}

/// Who forgot a conversation turn, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnForgotten {
    pub by: Id,
    pub at: Timestamp,
}

/// The index record of one conversation: who owns it, how many turns, when last used.
/// Written in the same atomic batch as each turn, so `turns` is also the last `seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub tenant: TenantId,
    /// `{principal}.{name}`: sessions are namespaced by their owner.
    pub session: String,
    pub principal: Id,
    pub turns: u64,
    pub first_at: Timestamp,
    pub last_at: Timestamp,
    /// The first words of the first user turn, for listings.
    pub title: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::Scopes;
    use crate::tenant::PlanTier;

    fn caller() -> CallerContext {
        CallerContext {
            tenant: TenantId::new("acme").unwrap(),
            principal: Id::new("u1").unwrap(),
            scopes: Scopes::all(),
            plan: PlanTier::Pro,
            teams: vec!["core".into()],
            projects: vec!["apollo".into()],
            toolsets: crate::principal::Toolsets::default(),
            credential: "test".into(),
            client: None,
        }
    }

    #[test]
    fn scopes_round_trip() {
        for raw in ["global", "org", "team:core", "project:apollo", "personal:u1", "session:u1.s1"] {
            assert_eq!(MemoryScope::parse(raw).unwrap().storage_key(), raw);
        }
        assert!(MemoryScope::parse("team").is_err());
        assert!(MemoryScope::parse("org:x").is_err());
        assert!(MemoryScope::parse("planet:x").is_err());
    }

    #[test]
    fn membership_gates_reads() {
        let c = caller();
        assert!(MemoryScope::Team("core".into()).readable_by(&c));
        assert!(!MemoryScope::Team("other".into()).readable_by(&c));
        assert!(!MemoryScope::Project("zeus".into()).readable_by(&c));
        assert!(!MemoryScope::Personal("u2".into()).readable_by(&c));
        assert!(MemoryScope::Session("u1.s9".into()).readable_by(&c));
        assert!(!MemoryScope::Session("u2.s9".into()).readable_by(&c));
    }
}
