//! Engineering records (issue #18, seed 002 §6): a project's working state for coding
//! agents — tasks, sticky notes, session summaries and handoffs, ADRs, snippets, error
//! fixes, tech debt, PR checklists, the change log, pinned files, environments,
//! milestones and context workspaces — each typed ([`Body`]), attributed and indexed in
//! the project's memory scope, so `memory.search` and the error-fix lookup find it.
//!
//! Isolation as everywhere: a record lives in one project, and the caller must hold that
//! project (its key's or token's projects); the default is the caller's project when it
//! has exactly one. Sticky notes end 24 h after their last update unless pinned (the
//! maintenance job deletes them and takes them out of the index). Accepting an ADR is
//! governance's decision: an agent's acceptance becomes a proposal of an org decision
//! (`engineering.save` submits it; triage, a person or a rejection decide), and when the
//! single writer writes it the ADR is accepted ([`EngineeringService::accept_governed`],
//! pointing at the org entry); a person with `approvals:decide` may accept directly. An
//! accepted ADR that supersedes another marks that one `superseded`, with the link both
//! ways (and the org decisions carry the same lineage).

use domain::engineering::{AdrStatus, Body, EngRecord, RecordKind, kind_of};
use domain::memory::MemoryScope;
use domain::principal::{CallerContext, Scope};
use domain::{Error, ErrorCode, Id, Result, TenantId};
use ports::Backend;
use ports::records::{EngineeringStore, Expect};
use ports::search::{DocKind, SearchMode};

use crate::audit::AuditService;
use crate::search::{IndexRequest, SearchService};

/// How long an unpinned sticky note lives after its last update.
pub const NOTE_LIFETIME_MS: i64 = 24 * 3_600_000;
/// Most records one listing reads (newest first after sorting).
pub const MAX_LISTED: usize = 1_000;

#[derive(Clone)]
pub struct EngineeringService {
    backend: Backend,
    audit: AuditService,
    search: SearchService,
}

/// A record found by the error-fix lookup, with how it was found.
#[derive(Debug, Clone)]
pub struct FoundFix {
    pub record: EngRecord,
    pub score: f64,
}

impl EngineeringService {
    pub(crate) fn new(backend: Backend, audit: AuditService, search: SearchService) -> Self {
        Self { backend, audit, search }
    }

    /// The project a call works in: the one named, which must be the caller's, or the
    /// caller's only project.
    ///
    /// # Errors
    /// `FORBIDDEN` for a project that is not the caller's; `INVALID_REQUEST` when none
    /// is named and the caller has several or none.
    pub fn project(caller: &CallerContext, named: Option<&str>) -> Result<String> {
        match named {
            Some(p) => {
                let p = p.strip_prefix("project:").unwrap_or(p);
                if caller.projects.iter().any(|x| x == p) {
                    Ok(p.to_owned())
                } else {
                    Err(Error::forbidden(format!("project {p} is not one of yours")))
                }
            }
            None => match caller.projects.as_slice() {
                [only] => Ok(only.clone()),
                [] => Err(Error::invalid_field(
                    "project",
                    "this credential belongs to no project: use a key made with --projects NAME (or continuity stdio --projects NAME)",
                )),
                many => Err(Error::invalid_field("project", format!("name one of your projects: {}", many.join(", ")))),
            },
        }
    }

    /// Creates a record (no `id`) or replaces one (`id`, and `expected_version` when the
    /// caller read it first), indexes it in the project's scope, and audits it.
    ///
    /// # Errors
    /// `FORBIDDEN` without `memory:write`, for another's project, or for an ADR accepted
    /// without `approvals:decide`; `INVALID_REQUEST` for a bad body or an id of another
    /// kind; `NOT_FOUND` for an unknown id; `CONFLICT` when it changed since
    /// `expected_version`; `UNAVAILABLE`.
    pub async fn save(
        &self,
        caller: &CallerContext,
        project: Option<&str>,
        id: Option<&str>,
        body: Body,
        expected_version: Option<u64>,
    ) -> Result<EngRecord> {
        caller.scopes.require(Scope::MemoryWrite)?;
        let project = Self::project(caller, project)?;
        body.check()?;
        let now = self.backend.clock.now();
        let records = &self.backend.records;
        let existing = match id {
            Some(raw) => {
                let id = Id::new(raw)?;
                if kind_of(id.as_str())? != body.kind() {
                    return Err(Error::invalid_field("id", format!("{id} is not a {} record", body.kind())));
                }
                let found = records
                    .get_eng_record(&caller.tenant, &project, &id)
                    .await?
                    .filter(|r| !r.expired(now))
                    .ok_or_else(|| Error::not_found(format!("record {id} in project {project}")))?;
                if expected_version.is_some_and(|v| v != found.version) {
                    return Err(Error::conflict(format!(
                        "record {id} is at version {}, not {}: read it again",
                        found.version,
                        expected_version.unwrap_or_default()
                    )));
                }
                Some(found)
            }
            None => None,
        };
        // A project's records are shared memory: a secret in any field is redacted before
        // it is stored or echoed (an accepted ADR's governance proposal is redacted too).
        let body = redact_body(&caller.tenant, body)?;
        let body = self.adr_rules(caller, &project, body, existing.as_ref()).await?;
        let expires_at = match &body {
            Body::Note { pinned: false, .. } => Some(now.plus_millis(NOTE_LIFETIME_MS)),
            _ => None,
        };
        let record = EngRecord {
            tenant: caller.tenant.clone(),
            project: project.clone(),
            id: existing
                .as_ref()
                .map_or_else(|| Id::new(format!("{}.{}", body.kind(), crate::new_id(&self.backend))), |r| Ok(r.id.clone()))?,
            created_by: existing.as_ref().map_or_else(|| caller.principal.clone(), |r| r.created_by.clone()),
            created_at: existing.as_ref().map_or(now, |r| r.created_at),
            updated_by: caller.principal.clone(),
            updated_at: now,
            expires_at,
            version: 0,
            body,
        };
        let expect = existing.as_ref().map_or(Expect::Absent, |r| Expect::Version(r.version));
        let stored = records.put_eng_record(&record, expect).await?;
        self.index(&stored).await?;
        if let Body::Adr { status: AdrStatus::Accepted, supersedes: Some(old), .. } = &stored.body {
            self.supersede(&caller.tenant, &caller.principal, &project, old, &stored.id).await?;
        }
        let action = if existing.is_some() { "engineering.update" } else { "engineering.create" };
        self.audit
            .record(&caller.tenant, caller.principal.as_str(), action, Some(format!("{project}/{}", stored.id)), "ok")
            .await;
        Ok(stored)
    }

    /// ADRs: `accepted` and `superseded` are set by people; `superseded_by` only by the
    /// acceptance of the ADR that replaces it; `supersedes` must name another ADR of the
    /// project.
    async fn adr_rules(&self, caller: &CallerContext, project: &str, body: Body, existing: Option<&EngRecord>) -> Result<Body> {
        let Body::Adr { title, status, context, decision, consequences, supersedes, .. } = body else {
            return Ok(body);
        };
        let before = existing.and_then(|r| match &r.body {
            Body::Adr { status, superseded_by, accepted_as, .. } => Some((*status, superseded_by.clone(), accepted_as.clone())),
            _ => None,
        });
        let decided = before.as_ref().is_some_and(|(s, _, _)| matches!(s, AdrStatus::Accepted | AdrStatus::Superseded));
        if decided && !caller.scopes.contains(Scope::ApprovalsDecide) {
            return Err(Error::forbidden(
                "an accepted or superseded ADR is history: write a new ADR that supersedes it (its acceptance goes through governance)",
            ));
        }
        if let (Some(old), Some(r)) = (&supersedes, existing)
            && *old == r.id
        {
            return Err(Error::invalid_field("supersedes", "an ADR cannot supersede itself"));
        }
        let changes_status = before.as_ref().is_none_or(|(s, _, _)| *s != status);
        if changes_status && matches!(status, AdrStatus::Accepted | AdrStatus::Superseded) {
            caller.scopes.require(Scope::ApprovalsDecide).map_err(|_| {
                Error::forbidden(
                    "accepting or superseding an ADR is a person's decision (approvals:decide): save it as proposed and ask a person",
                )
            })?;
        }
        if let Some(old) = &supersedes {
            if kind_of(old.as_str())? != RecordKind::Adr {
                return Err(Error::invalid_field("supersedes", "the id of an ADR (adr.…)"));
            }
            if self.backend.records.get_eng_record(&caller.tenant, project, old).await?.is_none() {
                return Err(Error::not_found(format!("ADR {old} in project {project}")));
            }
        }
        Ok(Body::Adr {
            title,
            status,
            context,
            decision,
            consequences,
            supersedes,
            superseded_by: before.as_ref().and_then(|(_, by, _)| by.clone()),
            accepted_as: before.and_then(|(_, _, m)| m),
        })
    }

    /// Accepts ADR `id` of `project` after governance wrote its org decision `entry`
    /// (called by the single writer for a proposal whose origin is the ADR at `version`),
    /// and marks the ADR it supersedes. Only the version governance saw is accepted, and
    /// only while it is still proposed: an ADR edited, deprecated or superseded since is
    /// left as it is (the org decision stands; a new acceptance needs a new proposal).
    /// Idempotent.
    ///
    /// # Errors
    /// `NOT_FOUND` when the ADR is gone; `CONFLICT` when it changed since `version`;
    /// `UNAVAILABLE`.
    pub async fn accept_governed(&self, tenant: &TenantId, project: &str, id: &Id, version: u64, entry: &Id) -> Result<()> {
        let governance = Id::new("governance")?;
        for _ in 0..8 {
            let Some(mut r) = self.backend.records.get_eng_record(tenant, project, id).await? else {
                return Err(Error::not_found(format!("ADR {id} in project {project}")));
            };
            if let Body::Adr { status: AdrStatus::Accepted, accepted_as: Some(done), .. } = &r.body
                && done == entry
            {
                return Ok(());
            }
            if r.version != version || !matches!(r.body, Body::Adr { status: AdrStatus::Proposed, .. }) {
                return Err(Error::conflict(format!(
                    "ADR {id} changed since governance was asked (version {version}, now {}); it stays as it is",
                    r.version
                )));
            }
            let Body::Adr { status, accepted_as, supersedes, .. } = &mut r.body else {
                return Err(Error::invalid_field("origin", format!("{id} is not an ADR")));
            };
            *status = AdrStatus::Accepted;
            *accepted_as = Some(entry.clone());
            let old = supersedes.clone();
            r.updated_by = governance.clone();
            r.updated_at = self.backend.clock.now();
            let version = r.version;
            match self.backend.records.put_eng_record(&r, Expect::Version(version)).await {
                Ok(stored) => {
                    self.index(&stored).await?;
                    if let Some(old) = old {
                        self.supersede(tenant, &governance, project, &old, id).await?;
                    }
                    let target = Some(format!("{project}/{id}"));
                    self.audit.record(tenant, "governance", "engineering.adr_accepted", target, entry.as_str()).await;
                    return Ok(());
                }
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::conflict(format!("ADR {id} keeps changing; try again")))
    }

    /// Marks ADR `old` superseded by `by` (the lineage's other direction).
    async fn supersede(&self, tenant: &TenantId, who: &Id, project: &str, old: &Id, by: &Id) -> Result<()> {
        for _ in 0..8 {
            let Some(mut r) = self.backend.records.get_eng_record(tenant, project, old).await? else {
                return Err(Error::not_found(format!("ADR {old} in project {project}")));
            };
            if let Body::Adr { status, superseded_by, .. } = &mut r.body {
                *status = AdrStatus::Superseded;
                *superseded_by = Some(by.clone());
            }
            r.updated_by = who.clone();
            r.updated_at = self.backend.clock.now();
            let version = r.version;
            match self.backend.records.put_eng_record(&r, Expect::Version(version)).await {
                Ok(stored) => return self.index(&stored).await,
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::conflict(format!("ADR {old} keeps changing; try again")))
    }

    async fn index(&self, r: &EngRecord) -> Result<()> {
        let scope = MemoryScope::Project(r.project.clone());
        let (title, body) = (r.body.title(), r.body.text());
        self.search
            .index(IndexRequest {
                tenant: &r.tenant,
                scope: &scope,
                kind: DocKind::Engineering,
                doc: &r.id,
                title: &title,
                body: &body,
                at: r.updated_at,
                occurred: Some(r.created_at),
            })
            .await?;
        Ok(())
    }

    /// One record of the caller's project.
    ///
    /// # Errors
    /// `FORBIDDEN` without `memory:read` or for another's project; `NOT_FOUND`.
    pub async fn get(&self, caller: &CallerContext, project: Option<&str>, id: &str) -> Result<EngRecord> {
        caller.scopes.require(Scope::MemoryRead)?;
        let project = Self::project(caller, project)?;
        let id = Id::new(id)?;
        let now = self.backend.clock.now();
        self.backend
            .records
            .get_eng_record(&caller.tenant, &project, &id)
            .await?
            .filter(|r| !r.expired(now))
            .ok_or_else(|| Error::not_found(format!("record {id} in project {project}")))
    }

    /// A project's records of `kind` (or all), newest change first, without expired
    /// notes; at most [`MAX_LISTED`] are read.
    ///
    /// # Errors
    /// `FORBIDDEN` without `memory:read` or for another's project; `UNAVAILABLE`.
    pub async fn list(
        &self,
        caller: &CallerContext,
        project: Option<&str>,
        kind: Option<RecordKind>,
    ) -> Result<(String, Vec<EngRecord>)> {
        caller.scopes.require(Scope::MemoryRead)?;
        let project = Self::project(caller, project)?;
        let now = self.backend.clock.now();
        let records = &self.backend.records;
        let (tenant, p) = (&caller.tenant, project.as_str());
        let (mut all, _) =
            crate::all_pages(MAX_LISTED, |page| async move { records.list_eng_records(tenant, p, kind, &page).await }).await?;
        all.retain(|r| !r.expired(now));
        all.sort_by(|a, b| b.updated_at.0.cmp(&a.updated_at.0).then_with(|| b.id.as_str().cmp(a.id.as_str())));
        Ok((project, all))
    }

    /// Error fixes of the project that match an error's text, best first: through the
    /// search index (keyword and meaning), else — without an index — by the share of
    /// the error's terms a fix's signature and cause hold.
    ///
    /// # Errors
    /// `FORBIDDEN` without `memory:read` or for another's project; `INVALID_REQUEST` for
    /// an empty or oversized error; `UNAVAILABLE`.
    pub async fn find_fixes(
        &self,
        caller: &CallerContext,
        project: Option<&str>,
        error: &str,
        limit: usize,
    ) -> Result<Vec<FoundFix>> {
        caller.scopes.require(Scope::MemoryRead)?;
        let project = Self::project(caller, project)?;
        let query: String = error.chars().filter(|c| !c.is_control() || *c == '\n').take(500).collect();
        let query = query.split_whitespace().collect::<Vec<_>>().join(" ");
        ports::search::check_query(&query)?;
        let search = &self.search;
        let mut found = Vec::new();
        if search.enabled() {
            let scope = MemoryScope::Project(project.clone());
            let hits = search.search(caller, vec![scope], Some(DocKind::Engineering), &query, 50, SearchMode::Hybrid).await?;
            for h in hits {
                if kind_of(h.doc.as_str()).ok() != Some(RecordKind::ErrorFix)
                    || found.iter().any(|f: &FoundFix| f.record.id == h.doc)
                {
                    continue;
                }
                if let Some(r) = self.backend.records.get_eng_record(&caller.tenant, &project, &h.doc).await? {
                    found.push(FoundFix { record: r, score: h.score });
                }
                if found.len() == limit {
                    break;
                }
            }
            return Ok(found);
        }
        let wanted: std::collections::BTreeSet<String> = ports::search::tokens(&query).into_iter().collect();
        let (_, fixes) = self.list(caller, Some(&project), Some(RecordKind::ErrorFix)).await?;
        for r in fixes {
            let have: std::collections::BTreeSet<String> = ports::search::tokens(&r.body.text()).into_iter().collect();
            #[allow(clippy::cast_precision_loss)]
            let score = wanted.intersection(&have).count() as f64 / wanted.len().max(1) as f64;
            if score > 0.0 {
                found.push(FoundFix { record: r, score });
            }
        }
        found.sort_by(|a, b| b.score.total_cmp(&a.score));
        found.truncate(limit);
        Ok(found)
    }

    /// The maintenance job's part: deletes `tenant`'s sticky notes past their 24 h and
    /// takes them out of the index. Returns how many.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    pub async fn expire_notes(&self, tenant: &TenantId, limit: usize) -> Result<usize> {
        let records = &self.backend.records;
        let now = self.backend.clock.now();
        let (all, _) = crate::all_pages(limit, |p| async move { records.list_all_eng_records(tenant, &p).await }).await?;
        let mut gone = 0;
        for r in all.into_iter().filter(|r| r.kind() == RecordKind::Note && r.expired(now)) {
            match records.delete_eng_record(&r).await {
                Ok(()) => {
                    self.search.unindex(tenant, &MemoryScope::Project(r.project.clone()), &r.id).await?;
                    gone += 1;
                }
                // Updated meanwhile (and so alive again): kept.
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        if gone > 0 {
            self.audit.record(tenant, "maintenance", "engineering.notes_expired", Some(format!("{gone} notes")), "deleted").await;
        }
        Ok(gone)
    }

    /// The records a workspace names, in its order (gone ones skipped).
    ///
    /// # Errors
    /// As [`Self::get`]; `INVALID_REQUEST` when `id` is not a workspace.
    pub async fn restore_workspace(
        &self,
        caller: &CallerContext,
        project: Option<&str>,
        id: &str,
    ) -> Result<(EngRecord, Vec<EngRecord>)> {
        let ws = self.get(caller, project, id).await?;
        let Body::Workspace { items, .. } = &ws.body else {
            return Err(Error::invalid_field("id", "the id of a workspace (workspace.…)"));
        };
        let now = self.backend.clock.now();
        let mut out = Vec::new();
        for item in items {
            if kind_of(item.as_str()).is_err() {
                continue;
            }
            if let Some(r) = self.backend.records.get_eng_record(&caller.tenant, &ws.project, item).await?
                && !r.expired(now)
            {
                out.push(r);
            }
        }
        Ok((ws, out))
    }
}

/// `body` with every secret (and random-looking token) in its text fields replaced by
/// its redaction marker ([`crate::governance::redaction::redacted`]).
fn redact_body(tenant: &domain::TenantId, body: Body) -> Result<Body> {
    Ok(redact_body_found(tenant, body)?.0)
}

/// [`redact_body`], with what was found in which field (`record.context`…).
pub(crate) fn redact_body_found(tenant: &domain::TenantId, body: Body) -> Result<(Body, Vec<domain::proposal::Detected>)> {
    fn walk(tenant: &domain::TenantId, field: &str, v: &mut serde_json::Value, found: &mut Vec<domain::proposal::Detected>) {
        match v {
            serde_json::Value::String(s) => *s = crate::governance::redaction::redact_field(tenant, field, s, found),
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| walk(tenant, field, x, found)),
            serde_json::Value::Object(o) => o.iter_mut().for_each(|(k, x)| walk(tenant, &format!("{field}.{k}"), x, found)),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(&body).map_err(|e| Error::internal(format!("an engineering record: {e}")))?;
    let mut found = Vec::new();
    walk(tenant, "record", &mut v, &mut found);
    let body = serde_json::from_value(v).map_err(|e| Error::internal(format!("an engineering record after redaction: {e}")))?;
    Ok((body, found))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(projects: &[&str]) -> CallerContext {
        CallerContext {
            tenant: TenantId::new("acme").unwrap(),
            principal: Id::new("ada").unwrap(),
            scopes: domain::principal::Scopes::all(),
            plan: domain::tenant::PlanTier::Pro,
            teams: vec![],
            projects: projects.iter().map(|p| (*p).to_owned()).collect(),
            credential: "test".into(),
            client: None,
            toolsets: domain::principal::Toolsets::default(),
        }
    }

    #[test]
    fn the_project_is_the_callers_own() {
        assert_eq!(EngineeringService::project(&caller(&["web"]), None).unwrap(), "web");
        assert_eq!(EngineeringService::project(&caller(&["web", "api"]), Some("project:api")).unwrap(), "api");
        assert_eq!(EngineeringService::project(&caller(&["web"]), Some("api")).unwrap_err().code, ErrorCode::Forbidden);
        let e = EngineeringService::project(&caller(&["web", "api"]), None).unwrap_err();
        assert!(e.message.contains("web, api") || format!("{e:?}").contains("web, api"), "{e:?}");
        assert_eq!(EngineeringService::project(&caller(&[]), None).unwrap_err().code, ErrorCode::InvalidRequest);
    }
}
