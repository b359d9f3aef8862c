//! The `engineering` toolset (issue #18, seed 002): what a coding agent needs day to day.
//! So far its gates: an agent reads where a gate stands (`engineering.gate_status`) and
//! asks a person for one (`engineering.gate_request`, which waits as `pending` in the
//! approvals console). No tool authorizes a gate — people do, through the approvals
//! console, `POST /v1/gates` or `continuity gate set` (`approvals:decide`, never granted
//! to an MCP client).

use domain::Result;
use domain::gate::{Gate, GateStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    const NAME: &'static str = "engineering.gate_status";
    const TITLE: &'static str = "Check gates";
    const DESCRIPTION: &'static str = "Where gates stand before you act: whether a person has authorized (or blocked) an \
         action such as a push or a deploy. Filter by namespace (repo:acme/web, env:prod), action (push, deploy) and \
         status. Reading never spends an authorization. If the gate you need is missing, pending or blocked, do not act: \
         ask with engineering.gate_request and tell the user a person must authorize it.";
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
    const NAME: &'static str = "engineering.gate_request";
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
            _ => format!(
                "Waiting for a person: ask the user to authorize {} in {} in the approvals console (/approvals). Do not act until it is authorized.",
                g.action, g.namespace
            ),
        };
        Ok(GateRequested { gate: GateView::of(&g), note })
    }
}
