//! Tasks (SPEC §5.2 resource 6, seed `000` task dispatch): a unit of work dispatched to
//! a person or an agent — a principal of the tenant.
//!
//! `task.dispatch` stores the task `open` and sends a `task.dispatch` message on the
//! work queue; the queue's consumer (`continuity serve`'s worker, the pipeline Lambda
//! on SQS) delivers it: `dispatched`, audited, visible to its assignee in `task.list`.
//! The assignee (or a caller who may write the tenant's tasks) moves it along with
//! `task.update`: `in_progress`, `done` or `failed` with a note; `cancelled` by a
//! writer. Every step is a versioned write; a redelivered message changes nothing.

use domain::principal::{CallerContext, Scope};
use domain::spine::{EntityRef, Task, TaskStatus};
use domain::{Error, ErrorCode, Id, Page, PageRequest, Result, TenantId};
use ports::Backend;
use ports::queue::{Delivery, QueueMessage};
use ports::records::{AuditLog, Expect, PrincipalStore, TaskStore};
use serde::{Deserialize, Serialize};

/// The queue message kind of a dispatch.
pub const KIND_TASK: &str = "task.dispatch";
/// Longest task title and body, and note.
pub const MAX_TASK_TITLE: usize = 200;
pub const MAX_TASK_BODY: usize = 8_000;
pub const MAX_TASK_NOTE: usize = 2_000;

#[derive(Debug, Serialize, Deserialize)]
struct Dispatch {
    task: String,
}

#[derive(Clone)]
pub struct TaskService {
    backend: Backend,
    notify: crate::notify::NotifyService,
}

fn writes_tasks(caller: &CallerContext) -> bool {
    caller.scopes.contains(Scope::TenantWrite) || caller.scopes.contains(Scope::Admin)
}

impl TaskService {
    pub(crate) fn new(backend: Backend, notify: crate::notify::NotifyService) -> Self {
        Self { backend, notify }
    }

    async fn audit(&self, tenant: &TenantId, actor: &str, action: &str, id: &Id, outcome: &str) {
        let record = crate::audit::record(&self.backend, tenant, actor, action, Some(id.to_string()), outcome);
        if let Err(e) = self.backend.records.append_audit(&record).await {
            tracing::error!(tenant = %tenant, error = %e.for_operator(), "audit record lost");
        }
    }

    /// Stores a task for `assignee` and queues its dispatch.
    ///
    /// # Errors
    /// `FORBIDDEN` without `tenant:write`; `INVALID_REQUEST` for a bad title, body or
    /// related entity, or an assignee who is no principal of the tenant; `UNAVAILABLE`.
    pub async fn dispatch(
        &self,
        caller: &CallerContext,
        title: &str,
        body: &str,
        assignee: &str,
        related: Vec<EntityRef>,
    ) -> Result<Task> {
        caller.scopes.require(Scope::TenantWrite)?;
        let (title, body) = (title.trim(), body.trim());
        if title.is_empty() || title.chars().count() > MAX_TASK_TITLE || title.chars().any(char::is_control) {
            return Err(Error::invalid_field("title", format!("1 to {MAX_TASK_TITLE} characters on one line")));
        }
        if body.chars().count() > MAX_TASK_BODY || body.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
            return Err(Error::invalid_field("body", format!("at most {MAX_TASK_BODY} characters")));
        }
        if related.len() > 20 {
            return Err(Error::invalid_field("related", "at most 20 entities"));
        }
        let assignee = Id::new(assignee.trim().to_owned()).map_err(|_| Error::invalid_field("assignee", "a principal's id"))?;
        if self.backend.records.get_principal(&caller.tenant, &assignee).await?.is_none_or(|p| p.disabled) {
            return Err(Error::invalid_field("assignee", format!("{assignee} is no active principal of this workspace")));
        }
        let now = self.backend.clock.now();
        let task = Task {
            tenant: caller.tenant.clone(),
            id: crate::new_id(&self.backend),
            title: title.to_owned(),
            body: body.to_owned(),
            status: TaskStatus::Open,
            assignee,
            related,
            created_by: caller.principal.clone(),
            note: None,
            created_at: now,
            updated_at: now,
            version: 0,
        };
        let task = self.backend.records.put_task(&task, Expect::Absent).await?;
        let body = serde_json::to_vec(&Dispatch { task: task.id.to_string() }).map_err(Error::internal)?;
        let sent = self
            .backend
            .queue
            .send(&QueueMessage {
                tenant: task.tenant.clone(),
                kind: KIND_TASK.into(),
                idempotency_key: format!("task:{}", task.id),
                body,
            })
            .await;
        if let Err(e) = sent {
            // Stored `open`, not delivered: refused as a whole, the task marked cancelled
            // (with why) so nobody waits for it.
            let mut t = task.clone();
            t.status = TaskStatus::Cancelled;
            t.note = Some("the work queue could not take it; dispatch it again".into());
            t.updated_at = self.backend.clock.now();
            let _ = self.backend.records.put_task(&t, Expect::Version(task.version)).await;
            return Err(e);
        }
        self.audit(&task.tenant, caller.principal.as_str(), "task.dispatch", &task.id, &format!("for {}", task.assignee)).await;
        Ok(task)
    }

    /// The queue consumer's half: delivers a dispatched task (`open → dispatched`). A
    /// redelivery, or a task moved on since, changes nothing.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed message; `UNAVAILABLE`.
    pub async fn deliver(&self, delivery: &Delivery) -> Result<()> {
        let m = &delivery.message;
        let d: Dispatch = serde_json::from_slice(&m.body).map_err(|e| Error::invalid(format!("not a task dispatch: {e}")))?;
        let id = Id::new(d.task)?;
        for _ in 0..3 {
            let Some(mut t) = self.backend.records.get_task(&m.tenant, &id).await? else {
                tracing::warn!(tenant = %m.tenant, task = %id, "a dispatch for a task that is gone");
                return Ok(());
            };
            if t.status != TaskStatus::Open {
                return Ok(());
            }
            let expect = Expect::Version(t.version);
            t.status = TaskStatus::Dispatched;
            t.updated_at = self.backend.clock.now();
            match self.backend.records.put_task(&t, expect).await {
                Ok(t) => {
                    self.audit(&t.tenant, "queue", "task.dispatched", &t.id, &format!("delivered to {}", t.assignee)).await;
                    let text = format!("{} asks {} to: {}", t.created_by, t.assignee, t.title);
                    let subject = format!("task {}", t.id);
                    self.notify
                        .emit(&t.tenant, domain::notify::EventKind::TaskAssigned, &subject, "A task was assigned", &text, None)
                        .await;
                    return Ok(());
                }
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::unavailable("the task kept changing concurrently; the queue retries"))
    }

    /// Moves a task along: its assignee (`in_progress`, `done`, `failed`), or a caller
    /// who may write the tenant's tasks (any legal step, `cancelled` too).
    ///
    /// # Errors
    /// `NOT_FOUND`; `FORBIDDEN` for anyone else; `INVALID_REQUEST` for a step the task
    /// cannot take (still `open`: not delivered yet) or a long note; `CONFLICT` when it
    /// changed meanwhile; `UNAVAILABLE`.
    pub async fn update(&self, caller: &CallerContext, id: &Id, status: TaskStatus, note: Option<String>) -> Result<Task> {
        let mut t =
            self.backend.records.get_task(&caller.tenant, id).await?.ok_or_else(|| Error::not_found(format!("task {id}")))?;
        let own = t.assignee == caller.principal;
        if !own && !writes_tasks(caller) {
            return Err(Error::forbidden(format!(
                "task {id} is {}'s; only they or a tenant:write caller may move it",
                t.assignee
            )));
        }
        if status == TaskStatus::Cancelled && !writes_tasks(caller) {
            return Err(Error::missing_scope(Scope::TenantWrite.as_str()));
        }
        if !t.status.can_move_to(status) {
            let why = if t.status == TaskStatus::Open { " (it is not delivered yet)" } else { "" };
            return Err(Error::invalid_field("status", format!("task {id} is {}, it cannot become {}{why}", t.status, status)));
        }
        let note = note.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty());
        if note.as_ref().is_some_and(|n| n.chars().count() > MAX_TASK_NOTE || n.chars().any(|c| c.is_control() && c != '\n')) {
            return Err(Error::invalid_field("note", format!("at most {MAX_TASK_NOTE} characters")));
        }
        let expect = Expect::Version(t.version);
        t.status = status;
        if note.is_some() {
            t.note = note;
        }
        t.updated_at = self.backend.clock.now();
        let t = self.backend.records.put_task(&t, expect).await?;
        self.audit(&t.tenant, caller.principal.as_str(), "task.update", &t.id, t.status.as_str()).await;
        Ok(t)
    }

    /// The tenant's tasks (`assignee`: one principal's), newest first, optionally of one
    /// status. A caller without `tenant:write` sees only its own.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a bad cursor; `UNAVAILABLE`.
    pub async fn list(
        &self,
        caller: &CallerContext,
        assignee: Option<&Id>,
        status: Option<TaskStatus>,
        page: &PageRequest,
    ) -> Result<Page<Task>> {
        let assignee = match assignee {
            Some(a) if *a == caller.principal || writes_tasks(caller) => Some(a),
            Some(_) => return Err(Error::missing_scope(Scope::TenantWrite.as_str())),
            None if writes_tasks(caller) => None,
            None => Some(&caller.principal),
        };
        let mut p = self.backend.records.list_tasks(&caller.tenant, assignee, page).await?;
        if let Some(s) = status {
            p.items.retain(|t| t.status == s);
        }
        Ok(p)
    }
}
