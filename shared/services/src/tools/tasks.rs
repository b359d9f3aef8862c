//! Tasks through the capability API: `task.dispatch`, `task.list`, `task.update`
//! ([`crate::work`]).

use domain::spine::{Task, TaskStatus};
use domain::{Id, PageRequest, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::EntityArg;
use crate::capabilities::policy::*;
use crate::capabilities::typed::{Capability, Context, Required};

crate::enum_schema!(TaskStatusSchema, TaskStatus);

/// A task as callers see it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(transform = Required(&["id", "title", "status", "assignee"]))]
pub struct TaskView {
    pub id: String,
    pub title: String,
    pub body: String,
    #[schemars(with = "TaskStatusSchema")]
    pub status: TaskStatus,
    pub assignee: String,
    pub related: Vec<String>,
    pub created_by: String,
    pub note: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&Task> for TaskView {
    fn from(t: &Task) -> Self {
        Self {
            id: t.id.to_string(),
            title: t.title.clone(),
            body: t.body.clone(),
            status: t.status,
            assignee: t.assignee.to_string(),
            related: t.related.iter().map(ToString::to_string).collect(),
            created_by: t.created_by.to_string(),
            note: t.note.clone(),
            created_at: t.created_at.to_rfc3339(),
            updated_at: t.updated_at.to_rfc3339(),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["task"]))]
pub struct TaskOutput {
    pub task: TaskView,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(transform = Required(&["tasks"]))]
pub struct TaskListOutput {
    pub tasks: Vec<TaskView>,
    pub next_cursor: Option<String>,
}

// ---- task.dispatch --------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DispatchArgs {
    #[schemars(length(min = 1, max = super::MAX_TITLE_LEN))]
    pub title: String,
    #[schemars(length(max = 8000), description = "What is to be done.")]
    pub body: Option<String>,
    #[schemars(length(min = 1, max = 128), description = "The principal (person or agent) it is for.")]
    pub assignee: String,
    #[schemars(description = "Entities it concerns.")]
    pub related: Option<Vec<EntityArg>>,
}

pub struct TaskDispatch;

impl Capability for TaskDispatch {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "task.dispatch",
        Channel::Api,
        PlanTier::Pro,
        &[Scope::TenantWrite],
        RouteKind::RemoteFunction,
        "function.pipeline",
    )
    .writes();
    const TITLE: &'static str = "Dispatch a task";
    const DESCRIPTION: &'static str = "Dispatch a task to a person or an agent of the workspace: stored open, delivered through the work queue (dispatched), then moved along by its assignee with task_update.";
    type Args = DispatchArgs;
    type Output = TaskOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: DispatchArgs) -> Result<TaskOutput> {
        let related = a.related.unwrap_or_default().iter().map(EntityArg::to_ref).collect::<Result<Vec<_>>>()?;
        let t = cx.tools.work.dispatch(cx.caller, &a.title, a.body.as_deref().unwrap_or_default(), &a.assignee, related).await?;
        Ok(TaskOutput { task: TaskView::from(&t) })
    }
}

// ---- task.list ------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    #[schemars(
        description = "One assignee's tasks (\"me\" for the caller's); default: every task for a tenant:write caller, else the caller's own."
    )]
    pub assignee: Option<String>,
    #[schemars(with = "Option<TaskStatusSchema>")]
    pub status: Option<TaskStatus>,
    #[serde(default = "super::default_limit::<50>")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: u32,
    pub cursor: Option<String>,
}

pub struct TaskList;

impl Capability for TaskList {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "task.list",
        Channel::Api,
        PlanTier::Starter,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.task",
    )
    .cached(60);
    const TITLE: &'static str = "List tasks";
    const DESCRIPTION: &'static str = "Tasks of the workspace, newest first: one assignee's (\"me\"), optionally of one status.";
    type Args = ListArgs;
    type Output = TaskListOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: ListArgs) -> Result<TaskListOutput> {
        let assignee = match a.assignee.as_deref() {
            Some("me") => Some(cx.caller.principal.clone()),
            Some(other) => Some(Id::new(other.trim().to_owned())?),
            None => None,
        };
        let page = PageRequest { limit: Some(a.limit), cursor: a.cursor };
        let p = cx.tools.work.list(cx.caller, assignee.as_ref(), a.status, &page).await?;
        Ok(TaskListOutput { tasks: p.items.iter().map(TaskView::from).collect(), next_cursor: p.next_cursor })
    }
}

// ---- task.update ----------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateArgs {
    #[schemars(length(min = 1, max = 128))]
    pub id: String,
    #[schemars(with = "TaskStatusSchema", description = "in_progress, done or failed (its assignee); cancelled (tenant:write).")]
    pub status: TaskStatus,
    #[schemars(length(max = 2000), description = "What was done, or why it failed.")]
    pub note: Option<String>,
}

pub struct TaskUpdate;

impl Capability for TaskUpdate {
    const SPEC: CapabilitySpec = CapabilitySpec::new(
        "task.update",
        Channel::Api,
        PlanTier::Starter,
        &[Scope::TenantRead],
        RouteKind::StoreIndex,
        "store.task",
    )
    .writes();
    const TITLE: &'static str = "Move a task along";
    const DESCRIPTION: &'static str = "Report progress on a task dispatched to you: in_progress, done or failed, with a note.";
    type Args = UpdateArgs;
    type Output = TaskOutput;

    async fn run<'a>(cx: &'a Context<'a>, a: UpdateArgs) -> Result<TaskOutput> {
        let id = Id::new(a.id)?;
        let t = cx.tools.work.update(cx.caller, &id, a.status, a.note).await?;
        Ok(TaskOutput { task: TaskView::from(&t) })
    }
}
