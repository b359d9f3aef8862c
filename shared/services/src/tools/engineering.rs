//! The `engineering` toolset (issue #18, seed 002): what a coding agent needs day to day.
//! A project's working state (`engineering.save`, `list`, `get`, `find_fix`,
//! `restore_workspace` over [`crate::engineering`]) and gates: an agent reads where a
//! gate stands (`engineering.gate_status`) and asks a person for one
//! (`engineering.gate_request`, which waits as `pending` in the approvals console). No tool authorizes a gate — people do, through the approvals
//! console, `POST /v1/gates` or `continuity gate set` (`approvals:decide`, never granted
//! to an MCP client).

use domain::engineering::{AdrStatus, Body, EngRecord, RecordKind};
use domain::gate::{Gate, GateStatus};
use domain::memory::{GovernanceState, MemoryScope};
use domain::principal::{CallerContext, Scope};
use domain::{Error, Result};
use ports::records::{EngineeringStore, MemoryStore};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::capabilities::policy::*;
use crate::capabilities::typed::{Capability, Context};

crate::enum_schema!(GateStatusSchema, GateStatus);

/// A gate as shown.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GateView {
    pub namespace: String,
    pub action: String,
    /// `authorized`, `blocked` or `pending` (an expired authorization or request reads `blocked`).
    #[schemars(with = "GateStatusSchema")]
    pub status: GateStatus,
    pub reason: Option<String>,
    /// Who set the current status.
    pub set_by: String,
    /// Who asked for it, when an agent did.
    pub requested_by: Option<String>,
    /// When the status stops holding (RFC 3339).
    pub expires_at: Option<String>,
    /// The next verify spends the authorization.
    pub consume_once: bool,
    pub updated_at: String,
}

impl GateView {
    pub fn of(g: &Gate) -> Self {
        Self {
            namespace: g.namespace.clone(),
            action: g.action.clone(),
            status: g.status,
            reason: g.reason.clone(),
            set_by: g.set_by.clone(),
            requested_by: g.requested_by.clone(),
            expires_at: g.expires_at.map(domain::Timestamp::to_rfc3339),
            consume_once: g.consume_once,
            updated_at: g.updated_at.to_rfc3339(),
        }
    }
}

// ---- engineering.gate_status ------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateStatusArgs {
    #[schemars(length(min = 1, max = 128), description = "Only gates of this namespace, e.g. repo:acme/web or env:prod.")]
    pub namespace: Option<String>,
    #[schemars(length(min = 1, max = 128), description = "Only this action, e.g. push or deploy.")]
    pub action: Option<String>,
    #[schemars(with = "Option<GateStatusSchema>", description = "Only gates with this status.")]
    pub status: Option<GateStatus>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct GateList {
    pub gates: Vec<GateView>,
}

pub struct GateStatusTool;

/// Most gates one answer lists.
const MAX_LISTED: usize = 100;

impl Capability for GateStatusTool {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "engineering.gate_status",
        Channel::Tool,
        PlanTier::Starter,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.gate",
    )
    .toolset(Toolset::Engineering);
    const TITLE: &'static str = "Check gates";
    const DESCRIPTION: &'static str = "Where gates stand before you act: whether a person has authorized (or blocked) an \
         action such as a push or a deploy. Filter by namespace (repo:acme/web, env:prod), action (push, deploy) and \
         status. Reading never spends an authorization. If the gate you need is missing, pending or blocked, do not act: \
         ask with engineering_gate_request and tell the user a person must authorize it.";
    type Args = GateStatusArgs;
    type Output = GateList;

    async fn run<'a>(cx: &'a Context<'a>, a: GateStatusArgs) -> Result<GateList> {
        for (field, v) in [("namespace", &a.namespace), ("action", &a.action)] {
            if let Some(v) = v {
                domain::gate::check_gate_name(field, v)?;
            }
        }
        let mut gates = Vec::new();
        let mut page = domain::PageRequest::first(500);
        loop {
            let p = cx.tools.gates.list(cx.caller, a.status, &page).await?;
            gates.extend(
                p.items
                    .iter()
                    .filter(|g| a.namespace.as_ref().is_none_or(|n| &g.namespace == n))
                    .filter(|g| a.action.as_ref().is_none_or(|x| &g.action == x))
                    .map(GateView::of),
            );
            match p.next_cursor {
                Some(c) if gates.len() < MAX_LISTED => page = domain::PageRequest::after(500, c),
                _ => break,
            }
        }
        gates.truncate(MAX_LISTED);
        Ok(GateList { gates })
    }
}

// ---- engineering.gate_request -----------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateRequestArgs {
    #[schemars(length(min = 1, max = 128), description = "Where the action happens, e.g. repo:acme/web or env:prod.")]
    pub namespace: String,
    #[schemars(length(min = 1, max = 128), description = "What you want to do, e.g. push or deploy.")]
    pub action: String,
    #[schemars(
        length(max = 500),
        description = "Why, for the person deciding: what changed and how it was checked (e.g. 'fix login bug; 212 tests pass')."
    )]
    pub reason: Option<String>,
    #[schemars(range(min = 60, max = 2_592_000), description = "Seconds the request waits for a person (default 7 days).")]
    pub expires_in: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct GateRequested {
    pub gate: GateView,
    /// What happens next, for the model to tell the user.
    pub note: String,
}

pub struct GateRequestTool;

impl Capability for GateRequestTool {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "engineering.gate_request",
        Channel::Tool,
        PlanTier::Starter,
        &[Scope::MemoryWrite],
        RouteKind::StoreIndex,
        "store.gate",
    )
    .writes()
    .toolset(Toolset::Engineering);
    const TITLE: &'static str = "Ask a person to authorize an action";
    const DESCRIPTION: &'static str = "Ask a person to authorize a gated action (e.g. namespace repo:acme/web, action push) \
         before you do it. The request waits as pending in the approvals console; a person authorizes or blocks it there. \
         You can never authorize a gate yourself. If the gate already authorizes the action, it is returned unchanged.";
    type Args = GateRequestArgs;
    type Output = GateRequested;

    async fn run<'a>(cx: &'a Context<'a>, a: GateRequestArgs) -> Result<GateRequested> {
        let g = cx.tools.gates.request(cx.caller, &a.namespace, &a.action, a.reason, a.expires_in).await?;
        let note = match g.status {
            GateStatus::Authorized => "Already authorized by a person: you may go ahead.".to_owned(),
            GateStatus::Blocked => format!(
                "A person blocked {} in {}{}. Do not act; tell the user.",
                g.action,
                g.namespace,
                g.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
            ),
            GateStatus::Pending => format!(
                "Waiting for a person: ask the user to authorize {} in {} in the approvals console (/approvals). Do not act until it is authorized.",
                g.action, g.namespace
            ),
        };
        Ok(GateRequested { gate: GateView::of(&g), note })
    }
}

// ---- engineering records ----------------------------------------------------------------

/// An engineering record as shown: its typed fields under `record` (with its `kind`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RecordView {
    /// `{kind}.{…}`: pass it back as `id` to update the record.
    pub id: String,
    pub project: String,
    pub title: String,
    pub record: Body,
    pub created_by: String,
    pub created_at: String,
    pub updated_by: String,
    pub updated_at: String,
    /// A sticky note's end (24 h after its last update unless pinned).
    pub expires_at: Option<String>,
    /// Pass as `expected_version` to update only what you read.
    pub version: u64,
    /// How well it matched (the error-fix lookup only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

impl RecordView {
    pub fn of(r: &EngRecord) -> Self {
        Self {
            id: r.id.to_string(),
            project: r.project.clone(),
            title: r.body.title(),
            record: r.body.clone(),
            created_by: r.created_by.to_string(),
            created_at: r.created_at.to_rfc3339(),
            updated_by: r.updated_by.to_string(),
            updated_at: r.updated_at.to_rfc3339(),
            expires_at: r.expires_at.map(domain::Timestamp::to_rfc3339),
            version: r.version,
            score: None,
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RecordSaved {
    pub record: RecordView,
    /// An ADR you asked to accept: the proposal governance decides (the ADR is accepted
    /// when it is written).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub proposal: Option<super::ProposalView>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RecordList {
    pub project: String,
    pub records: Vec<RecordView>,
    pub count: usize,
    /// More matched than `limit`.
    pub truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkspaceRestored {
    pub workspace: RecordView,
    pub records: Vec<RecordView>,
}

const PROJECT_HELP: &str = "Your project (default: your only one).";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveArgs {
    #[schemars(length(min = 1, max = 128), description = PROJECT_HELP)]
    pub project: Option<String>,
    #[schemars(
        length(min = 3, max = 128),
        description = "Update this record (its id, e.g. task.0190…); omit to create a new one."
    )]
    pub id: Option<String>,
    #[schemars(description = "With id: the version you read; the update is refused if the record changed since.")]
    pub expected_version: Option<u64>,
    #[schemars(
        description = "The record, by kind. Examples: {\"kind\":\"task\",\"title\":\"Fix login redirect\",\"status\":\"todo\",\"priority\":\"high\"}; {\"kind\":\"note\",\"text\":\"CI is flaky on arm64\",\"pinned\":false}; {\"kind\":\"error_fix\",\"signature\":\"ECONNREFUSED 127.0.0.1:5432\",\"cause\":\"postgres not started\",\"fix\":\"docker compose up db\",\"files\":[]}."
    )]
    pub record: Body,
}

pub struct Save;

impl Capability for Save {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "engineering.save",
        Channel::Tool,
        PlanTier::Starter,
        &[Scope::MemoryWrite],
        RouteKind::StoreIndex,
        "store.engineering",
    )
    .writes()
    .toolset(Toolset::Engineering);
    const TITLE: &'static str = "Save an engineering record";
    const DESCRIPTION: &'static str = "Create or update a record of your project's working state, so it survives sessions \
         and agents: task, note (sticky, gone 24 h after its last update unless pinned), summary (what this session \
         did), handoff (what the next one must know), adr, snippet, error_fix (an error's signature, cause and fix), \
         tech_debt, checklist (a PR's items), change (code-change log), pinned_file, environment, milestone, workspace \
         (a named set of record ids to restore together). To update, pass the id and the whole record. Saving an ADR \
         as accepted submits it to governance as an org decision (superseding the decision of the ADR it replaces): \
         it stays proposed until governance writes it.";
    type Args = SaveArgs;
    type Output = RecordSaved;

    async fn run<'a>(cx: &'a Context<'a>, a: SaveArgs) -> Result<RecordSaved> {
        let (eng, caller) = (cx.tools.engineering, cx.caller);
        let mut record = a.record;
        // An agent's acceptance of an ADR is governance's to decide.
        let governed = match &mut record {
            Body::Adr { status, .. } if *status == AdrStatus::Accepted && !caller.scopes.contains(Scope::ApprovalsDecide) => {
                *status = AdrStatus::Proposed;
                true
            }
            _ => false,
        };
        // A secret in the ADR is redacted when it is saved; its acceptance carries what was
        // found, so governance rejects it as it would the secret itself.
        let (_, found) = crate::engineering::redact_body_found(&caller.tenant, record.clone())?;
        let r = eng.save(caller, a.project.as_deref(), a.id.as_deref(), record, a.expected_version).await?;
        if !governed {
            return Ok(RecordSaved { record: RecordView::of(&r), proposal: None });
        }
        let proposal = cx.tools.adr_proposal(caller, &r, found).await?.proposal;
        // Triage may have written it already (and so accepted the ADR).
        let now = eng.get(caller, Some(&r.project), r.id.as_str()).await?;
        Ok(RecordSaved { record: RecordView::of(&now), proposal: Some(proposal) })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    #[schemars(length(min = 1, max = 128), description = PROJECT_HELP)]
    pub project: Option<String>,
    #[schemars(with = "Option<RecordKindSchema>", description = "Only this kind, e.g. task or handoff.")]
    pub kind: Option<RecordKind>,
    #[schemars(
        length(min = 1, max = 32),
        description = "Only records with this status (tasks: todo, in_progress, blocked, done; ADRs: proposed, accepted…; tech debt: open…; milestones: planned…)."
    )]
    pub status: Option<String>,
    #[serde(default = "super::default_limit::<20>")]
    #[schemars(range(min = 1, max = 100), description = "At most this many, newest change first.")]
    pub limit: u32,
}

crate::enum_schema!(RecordKindSchema, RecordKind);

fn status_of(b: &Body) -> Option<&'static str> {
    match b {
        Body::Task { status, .. } => Some(status.as_str()),
        Body::Adr { status, .. } => Some(status.as_str()),
        Body::TechDebt { status, .. } => Some(status.as_str()),
        Body::Milestone { status, .. } => Some(status.as_str()),
        _ => None,
    }
}

pub struct List;

impl Capability for List {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "engineering.list",
        Channel::Tool,
        PlanTier::Starter,
        &[Scope::MemoryRead],
        RouteKind::StoreIndex,
        "store.engineering",
    )
    .toolset(Toolset::Engineering);
    const TITLE: &'static str = "List engineering records";
    const DESCRIPTION: &'static str = "Your project's records, newest change first: e.g. kind task with status todo for \
         the open tasks, kind handoff for what the last session left you, kind adr for decisions, kind pinned_file for \
         the files that matter. Expired sticky notes are never listed.";
    type Args = ListArgs;
    type Output = RecordList;

    async fn run<'a>(cx: &'a Context<'a>, a: ListArgs) -> Result<RecordList> {
        let max = a.limit as usize;
        let (project, all) = cx.tools.engineering.list(cx.caller, a.project.as_deref(), a.kind).await?;
        let matching: Vec<&EngRecord> =
            all.iter().filter(|r| a.status.as_deref().is_none_or(|s| status_of(&r.body) == Some(s))).collect();
        let truncated = matching.len() > max;
        let records: Vec<RecordView> = matching.into_iter().take(max).map(RecordView::of).collect();
        Ok(RecordList { project, count: records.len(), records, truncated })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordIdArgs {
    #[schemars(length(min = 1, max = 128), description = PROJECT_HELP)]
    pub project: Option<String>,
    #[schemars(length(min = 3, max = 128), description = "The record's id, e.g. adr.0190…")]
    pub id: String,
}

pub struct Get;

impl Capability for Get {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "engineering.get",
        Channel::Tool,
        PlanTier::Starter,
        &[Scope::MemoryRead],
        RouteKind::StoreIndex,
        "store.engineering",
    )
    .toolset(Toolset::Engineering);
    const TITLE: &'static str = "Read an engineering record";
    const DESCRIPTION: &'static str = "One record of your project by id, with its version (pass it back as \
         expected_version when you update it).";
    type Args = RecordIdArgs;
    type Output = RecordSaved;

    async fn run<'a>(cx: &'a Context<'a>, a: RecordIdArgs) -> Result<RecordSaved> {
        let r = cx.tools.engineering.get(cx.caller, a.project.as_deref(), &a.id).await?;
        Ok(RecordSaved { record: RecordView::of(&r), proposal: None })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindFixArgs {
    #[schemars(length(min = 1, max = 128), description = PROJECT_HELP)]
    pub project: Option<String>,
    #[schemars(
        length(min = 1, max = 2000),
        description = "The error you hit, as printed (message, code, the key line of the stack trace)."
    )]
    pub error: String,
    #[serde(default = "super::default_limit::<5>")]
    #[schemars(range(min = 1, max = 20), description = "At most this many fixes.")]
    pub limit: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FixesFound {
    pub fixes: Vec<RecordView>,
}

pub struct FindFix;

impl Capability for FindFix {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "engineering.find_fix",
        Channel::Tool,
        PlanTier::Starter,
        &[Scope::MemoryRead],
        RouteKind::VectorIndex,
        "search.engineering",
    )
    .toolset(Toolset::Engineering);
    const TITLE: &'static str = "Look up a known fix for an error";
    const DESCRIPTION: &'static str = "Before debugging an error, look for a fix someone already recorded in your \
         project (error_fix records), matched by words and meaning, best first. After you fix a new one, save it with \
         engineering_save {\"kind\":\"error_fix\",…} so the next agent finds it.";
    type Args = FindFixArgs;
    type Output = FixesFound;

    async fn run<'a>(cx: &'a Context<'a>, a: FindFixArgs) -> Result<FixesFound> {
        let max = a.limit as usize;
        let found = cx.tools.engineering.find_fixes(cx.caller, a.project.as_deref(), &a.error, max).await?;
        let fixes = found.iter().map(|f| RecordView { score: Some(f.score), ..RecordView::of(&f.record) }).collect();
        Ok(FixesFound { fixes })
    }
}

pub struct RestoreWorkspace;

impl Capability for RestoreWorkspace {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "engineering.restore_workspace",
        Channel::Tool,
        PlanTier::Starter,
        &[Scope::MemoryRead],
        RouteKind::StoreIndex,
        "store.engineering",
    )
    .toolset(Toolset::Engineering);
    const TITLE: &'static str = "Restore a context workspace";
    const DESCRIPTION: &'static str = "Load every record a workspace names (tasks, notes, ADRs, pinned files…) in one \
         call, to pick up where a session left off.";
    type Args = RecordIdArgs;
    type Output = WorkspaceRestored;

    async fn run<'a>(cx: &'a Context<'a>, a: RecordIdArgs) -> Result<WorkspaceRestored> {
        let (ws, records) = cx.tools.engineering.restore_workspace(cx.caller, a.project.as_deref(), &a.id).await?;
        Ok(WorkspaceRestored { workspace: RecordView::of(&ws), records: records.iter().map(RecordView::of).collect() })
    }
}

impl super::Tools<'_> {
    /// Submits an ADR's acceptance to governance: a proposal of an org decision (title,
    /// decision, context, consequences), superseding the org decision of the ADR it
    /// replaces when that one was accepted through governance, with the ADR as its origin.
    async fn adr_proposal(
        &self,
        caller: &CallerContext,
        r: &EngRecord,
        found: Vec<domain::proposal::Detected>,
    ) -> Result<super::memory::ProposalOutput> {
        let Body::Adr { title, context, decision, consequences, supersedes, .. } = &r.body else {
            return Err(Error::invalid_field("record", "an ADR"));
        };
        let mut body =
            format!("{decision}\n\nContext: {context}\nConsequences: {consequences}\n(ADR {} of project {})", r.id, r.project);
        if body.chars().count() > super::MAX_BODY_CHARS {
            body = body.chars().take(super::MAX_BODY_CHARS - 1).collect();
            body.push('…');
        }
        let title: String = format!("ADR: {title}").chars().take(super::MAX_TITLE_LEN).collect();
        let mut p = self.proposal(caller, "memory:decision", title, body)?;
        if let Some(old) = supersedes
            && let Some(old) = self.backend.records.get_eng_record(&caller.tenant, &r.project, old).await?
            && let Body::Adr { accepted_as: Some(entry), .. } = &old.body
            && self
                .backend
                .records
                .get_memory(&caller.tenant, entry)
                .await?
                .is_some_and(|m| m.scope == MemoryScope::Org && m.state == GovernanceState::Active)
        {
            p.supersedes = Some(entry.clone());
        }
        // The version governance sees: an ADR edited after this is not what was approved.
        p.origin = Some(format!("adr:{}/{}@{}", r.project, r.id, r.version));
        p.detected = found;
        self.new_proposal(caller, p).await
    }
}
