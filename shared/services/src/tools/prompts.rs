//! The MCP prompts (SPEC §7.1): instructions for a model plus real context, assembled
//! from the same stores the tools read; what needs `memory:read` is left out, saying so,
//! for a caller without it.

use domain::memory::{GovernanceState, MemoryScope};
use domain::principal::CallerContext;
use domain::proposal::ProposalState;
use domain::{Error, Id, PageRequest, Result};
use ports::records::{LibraryStore, MemoryStore, ProposalStore, SignalStore};

use super::{MAX_SCAN, Tools, reads_memory};

/// The MCP prompts (SPEC §7.1): instructions plus real context, assembled from the
/// same stores the tools read. Sections the caller's plan does not include are left out.
impl Tools<'_> {
    /// `project_handoff_summary`: the project's book entries, the org memory that
    /// mentions it, open proposals.
    pub async fn prompt_project_handoff(&self, caller: &CallerContext, project: &str) -> Result<String> {
        Id::new(project).map_err(|_| Error::invalid_field("project", "1-128 printable characters without spaces, # or /"))?;
        let records = &self.backend.records;
        let reader = reads_memory(caller);
        let entries = records.list_book_entries(&caller.tenant, Some(project), &PageRequest::first(50)).await?.items;
        let (memory, open) = if reader {
            let (found, _, _) = self.org_matches(caller, project, None, 10).await?;
            let memory: Vec<_> = found.into_iter().map(|(m, _)| m).collect();
            let open = records
                .list_proposals(&caller.tenant, Some(ProposalState::AwaitingApproval), &PageRequest::first(10))
                .await?
                .items;
            (memory, open)
        } else {
            (Vec::new(), Vec::new())
        };
        let mut text = format!(
            "Write a handoff summary of the project \"{project}\" for the person taking it over: where it stands, what was decided, \
             what is open, and what to do first. Use only the facts below and say plainly what is unknown.\n"
        );
        text.push_str("\n## Book of projects\n");
        if entries.is_empty() {
            text.push_str("(no entries)\n");
        }
        // Bounded: each body to its first 2 000 characters, the section to 40 000.
        let mut book = String::new();
        for e in &entries {
            let body: String = e.body.chars().take(2_000).collect();
            let cut = if body.len() < e.body.len() { " …" } else { "" };
            let line = format!("- {} ({}): {body}{cut}\n", e.title, e.created_at.to_rfc3339());
            if book.len() + line.len() > 40_000 {
                book.push_str("- … (more entries: see book_list)\n");
                break;
            }
            book.push_str(&line);
        }
        text.push_str(&book);
        text.push_str("\n## Organisational memory mentioning the project\n");
        section(&mut text, reader, memory.iter().map(|m| format!("[{}] {}: {}", m.id, m.title, m.body)));
        text.push_str("\n## Open proposals (not decided yet)\n");
        section(
            &mut text,
            reader,
            open.iter().map(|p| format!("[{}] {}", p.id, crate::governance::redaction::mask_personal(&p.title))),
        );
        Ok(text)
    }

    /// `morning_brief`: recent signals, open proposals, the caller's recent sessions and
    /// the newest org memory (the last three need `memory:read`).
    pub async fn prompt_morning_brief(&self, caller: &CallerContext) -> Result<String> {
        let records = &self.backend.records;
        let reader = reads_memory(caller);
        let signals = records.list_signals(&caller.tenant, None, &PageRequest::first(20)).await?.items;
        let (mut open, mut sessions, mut memory) = (Vec::new(), Vec::new(), Vec::new());
        if reader {
            open = records
                .list_proposals(&caller.tenant, Some(ProposalState::AwaitingApproval), &PageRequest::first(10))
                .await?
                .items;
            sessions =
                crate::all_pages(MAX_SCAN, |p| async move { records.list_sessions(&caller.tenant, &caller.principal, &p).await })
                    .await?
                    .0;
            sessions.sort_by_key(|s| std::cmp::Reverse(s.last_at));
            sessions.truncate(5);
            memory =
                crate::all_pages(MAX_SCAN, |p| async move { records.list_memory(&caller.tenant, &MemoryScope::Org, &p).await })
                    .await?
                    .0;
            memory.retain(|m| m.state == GovernanceState::Active);
            memory.sort_by_key(|m| std::cmp::Reverse(m.updated_at));
            memory.truncate(5);
        }
        let mut text = String::from(
            "Write a short morning brief: what changed (signals), what waits for a decision, where I left off, and what the organisation \
             recently decided. Use only the facts below; group and prioritise them.\n",
        );
        text.push_str("\n## Recent signals (newest first)\n");
        section(&mut text, true, signals.iter().map(|s| format!("{} on {} at {}", s.kind, s.entity, s.at.to_rfc3339())));
        text.push_str("\n## Waiting for a decision\n");
        section(
            &mut text,
            reader,
            open.iter().map(|p| format!("[{}] {}", p.id, crate::governance::redaction::mask_personal(&p.title))),
        );
        text.push_str("\n## My recent sessions\n");
        section(
            &mut text,
            reader,
            sessions.iter().map(|s| format!("{} ({} turns, last {}): {}", s.session, s.turns, s.last_at.to_rfc3339(), s.title)),
        );
        text.push_str("\n## Newest organisational memory\n");
        section(&mut text, reader, memory.iter().map(|m| format!("[{}] {}", m.id, m.title)));
        Ok(text)
    }
}

/// One prompt section: its lines, `(none)`, or — for memory the caller may not read — a
/// note saying so.
fn section(text: &mut String, allowed: bool, lines: impl Iterator<Item = String>) {
    if !allowed {
        text.push_str("(left out: reading memory needs the memory:read scope)\n");
        return;
    }
    let mut any = false;
    for l in lines {
        any = true;
        text.push_str(&format!("- {l}\n"));
    }
    if !any {
        text.push_str("(none)\n");
    }
}
