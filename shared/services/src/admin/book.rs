//! The book of projects, written by an operator (`continuity book put`, `PUT
//! /v1/admin/tenants/{t}/book/{project}/{id}`): what each project is, its people and
//! status, read by `book.list` and the `project_handoff_summary` prompt.

use domain::spine::BookEntry;
use domain::{Error, Id, Result, TenantId};
use ports::records::LibraryStore as _;

use super::AdminService;

/// The longest title and body of an entry, in characters, and the most entries one
/// project holds.
pub const MAX_BOOK_TITLE: usize = 200;
pub const MAX_BOOK_BODY: usize = 20_000;
pub const MAX_BOOK_ENTRIES: usize = 200;

impl AdminService {
    /// Creates or replaces entry `id` of `project` in the tenant's book of projects.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a bad project name or id, an empty or too long title or
    /// body; `NOT_FOUND` for an unknown tenant; `UNAVAILABLE`.
    pub async fn put_book_entry(&self, tenant: &TenantId, project: &str, id: &str, title: &str, body: &str) -> Result<BookEntry> {
        self.show_tenant(tenant).await?;
        let (project, id) = check_entry(project, id, title, body)?;
        let entry = write_entry(&self.backend, tenant, &project, &id, title, body, &self.actor).await?;
        self.audited(tenant, "admin:book.put", &format!("{}/{}", entry.project, entry.id), "ok").await;
        Ok(entry)
    }
}

/// Checks an entry's project, id, title and body; the project's name and the id.
///
/// # Errors
/// `INVALID_REQUEST` naming the field.
pub fn check_entry(project: &str, id: &str, title: &str, body: &str) -> Result<(String, Id)> {
    let project = domain::principal::memberships("project", vec![project.to_owned()])?
        .pop()
        .ok_or_else(|| Error::invalid_field("project", "is required"))?;
    let id = Id::new(id.trim().to_owned())
        .map_err(|_| Error::invalid_field("id", "must be 1-128 printable ASCII characters without spaces, # or /"))?;
    let (title, body) = (title.trim(), body.trim());
    if title.is_empty() || title.chars().count() > MAX_BOOK_TITLE || title.chars().any(char::is_control) {
        return Err(Error::invalid_field("title", format!("1 to {MAX_BOOK_TITLE} characters on one line")));
    }
    if body.is_empty() || body.chars().count() > MAX_BOOK_BODY || body.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(Error::invalid_field(
            "body",
            format!("1 to {MAX_BOOK_BODY} characters (no control characters but line breaks and tabs)"),
        ));
    }
    Ok((project, id))
}

/// Writes a checked entry: a replaced entry keeps when it was first written; a project
/// holds a bounded book. Used by the operator API and by approved `book:` proposals.
///
/// # Errors
/// `INVALID_REQUEST` for a bad entry or a full project; `UNAVAILABLE`.
pub(crate) async fn write_entry(
    backend: &ports::Backend,
    tenant: &TenantId,
    project: &str,
    id: &Id,
    title: &str,
    body: &str,
    actor: &str,
) -> Result<BookEntry> {
    let (project, id) = check_entry(project, id.as_str(), title, body)?;
    let existing = backend
        .records
        .list_book_entries(tenant, Some(&project), &domain::PageRequest::first(domain::page::MAX_PAGE_SIZE))
        .await?
        .items;
    let created_at = match existing.iter().find(|e| e.id == id) {
        Some(e) => e.created_at,
        None if existing.len() >= MAX_BOOK_ENTRIES => {
            return Err(Error::invalid_field(
                "id",
                format!("project {project} holds {MAX_BOOK_ENTRIES} entries already; replace one"),
            ));
        }
        None => backend.clock.now(),
    };
    let entry = BookEntry {
        tenant: tenant.clone(),
        id,
        project,
        title: title.trim().to_owned(),
        body: body.trim().to_owned(),
        created_at,
    };
    backend.records.put_book_entry(&entry).await?;
    tracing::debug!(tenant = %tenant, actor, project = %entry.project, "book entry written");
    Ok(entry)
}
