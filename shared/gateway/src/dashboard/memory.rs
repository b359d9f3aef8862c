//! The memory browser: search or the newest entries, one entry with its lineage and
//! verification, and the forms that forget or propose a change to it.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use domain::memory::MemoryScope;
use domain::principal::CallerContext;
use domain::{Error, Id};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::json;

use super::{Dashboard, call, refused, select, shell, signed_in};
use crate::router::AppState;
use crate::web::{BaseUrl, SignedForm, redirect};

#[derive(Deserialize, Default)]
pub struct MemoryQuery {
    q: Option<String>,
    scope: Option<String>,
    #[serde(rename = "type")]
    memory_type: Option<String>,
    since: Option<String>,
    done: Option<String>,
}

/// One line of the memory table.
struct Row {
    /// Whether it has an entry page (memory entries; not turns or KB documents).
    linkable: bool,
    id: String,
    scope: String,
    kind: String,
    title: String,
    state: String,
    when: String,
    /// For a search hit: its score and why it matched.
    found: Option<(Option<f64>, String)>,
}

/// `GET /dashboard/memory`.
pub async fn memory(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Query(q): Query<MemoryQuery>,
) -> Response {
    let (caller, csrf) = match signed_in(&state, &base, &headers).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let query = q.q.as_deref().map(str::trim).unwrap_or_default();
    let notice = match q.done.as_deref() {
        Some("forgotten") => Some("Forgotten: its text is erased and it left search."),
        Some("proposed") => Some("Proposed: governance scores it, and a person decides at Approvals."),
        _ => None,
    };
    let search = html! {
        @if let Some(n) = notice { p class="ok" role="status" { (n) } }
        form method="get" action={ (base) "/dashboard/memory" } class="forms" style="grid-template-columns:3fr 1fr 1fr 1fr auto" {
            input name="q" id="q" value=(query) placeholder="Search memory";
            (select("scope", q.scope.as_deref(), &[("", "every scope"), ("org", "org"), ("personal", "personal"), ("global", "global")]))
            (select(
                "type",
                q.memory_type.as_deref(),
                &[
                    ("", "every type"),
                    ("org", "org (governed)"),
                    ("personal", "personal"),
                    ("conversational", "conversations"),
                    ("kb", "knowledge base"),
                ],
            ))
            input name="since" id="since" value=(q.since.as_deref().unwrap_or_default()) placeholder="since (2026-01-01)";
            button type="submit" id="search" { "Search" }
        }
    };
    let rows = if query.is_empty() {
        services::stats::recent_memories(&state.services, &caller, q.scope.as_deref()).await.map(|entries| {
            let since = q.since.as_deref().filter(|s| !s.is_empty()).and_then(|s| domain::Timestamp::parse("since", s).ok());
            entries
                .into_iter()
                .filter(|m| since.is_none_or(|t| m.updated_at.0 >= t.0))
                .filter(|m| q.memory_type.as_deref().filter(|t| !t.is_empty()).is_none_or(|t| m.memory_type.to_string() == t))
                .map(|m| Row {
                    linkable: true,
                    id: m.id.to_string(),
                    scope: m.scope.storage_key(),
                    kind: m.kind.clone(),
                    title: m.title.clone(),
                    state: m.state.name().to_owned(),
                    when: m.updated_at.to_rfc3339(),
                    found: None,
                })
                .collect::<Vec<_>>()
        })
    } else {
        let mut args = json!({"query": query, "limit": 50});
        for (k, v) in [("scope", &q.scope), ("type", &q.memory_type), ("since", &q.since)] {
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                args[k] = json!(v);
            }
        }
        call::<services::tools::recall::Recall>(&state, &caller, args).await.map(|r| {
            r.results
                .into_iter()
                .map(|h| {
                    // Why it matched: the legs that found it and the words that carried weight.
                    let mut why = h.why.found_by.join(" + ");
                    if !h.why.matched_terms.is_empty() {
                        why = format!("{why}: {}", h.why.matched_terms.join(", "));
                    }
                    if h.superseded_by_time.is_some() {
                        why.push_str(" · older news: a newer one above says otherwise");
                    }
                    Row {
                        linkable: h.kind == "memory",
                        id: h.id,
                        scope: h.scope,
                        kind: h.memory_type.unwrap_or_default(),
                        title: h.title,
                        state: h.state.unwrap_or_default(),
                        when: h.occurred_at,
                        found: Some((h.why.score, why)),
                    }
                })
                .collect()
        })
    };
    match rows {
        Ok(rows) => {
            let searched = !query.is_empty();
            let now = state.services.now();
            let body = html! {
                (search)
                table id="results" {
                    tr {
                        th { "title" } th { "scope" } th { "kind" } th { "state" } th { "when" }
                        @if searched { th title="0 to 1: keyword coverage and closeness in meaning, combined" { "score" } th { "why" } }
                    }
                    @for r in &rows {
                        @let shown = if r.title.is_empty() { &r.id } else { &r.title };
                        tr {
                            td {
                                @if r.linkable { a href={ (base) "/dashboard/memory/" (r.id) } { (shown) } } @else { (shown) }
                            }
                            td { (r.scope) }
                            td { (r.kind) }
                            td { (r.state) }
                            td {
                                @match domain::Timestamp::parse("when", &r.when) {
                                    Ok(t) => (super::when(t, now)),
                                    Err(_) => (r.when),
                                }
                            }
                            @if let Some((score, why)) = &r.found {
                                td class="score" { @if let Some(s) = score { (format!("{s:.2}")) } }
                                td class="why" { (why) }
                            }
                        }
                    }
                    @if rows.is_empty() {
                        tr { td colspan=(if searched { "7" } else { "5" }) class="muted" { "Nothing found." } }
                    }
                }
            };
            shell(&base, &caller, &csrf, "Memory", "Memory", html! {}, body)
        }
        Err(e) => refused(&base, &caller, &csrf, "Memory", "Memory", &e),
    }
}

/// `GET /dashboard/memory/{id}`.
pub async fn entry(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let (caller, csrf) = match signed_in(&state, &base, &headers).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    match entry_html(&state, &base, &caller, &csrf, &id).await {
        Ok(body) => shell(&base, &caller, &csrf, "Memory entry", "Memory", html! {}, body),
        Err(e) => refused(&base, &caller, &csrf, "Memory entry", "Memory", &e),
    }
}

async fn entry_html(state: &AppState, base: &str, caller: &CallerContext, csrf: &str, id: &str) -> Result<Markup, Error> {
    let id = Id::new(id.to_owned())?;
    let view = services::stats::entry(&state.services, caller, &id).await?;
    let m = &view.entry;
    let active = m.state == domain::memory::GovernanceState::Active;
    let own_personal = m.scope == MemoryScope::Personal(caller.principal.to_string());
    Ok(html! {
        h2 id="entry-title" { (m.title) }
        p class="muted" {
            (m.scope.storage_key()) " · " (m.kind) " · " span id="entry-state" { (m.state.name()) }
            " · created " (super::when(m.created_at, state.services.now())) " · updated " (super::when(m.updated_at, state.services.now()))
        }
        pre style="white-space:pre-wrap" id="entry-body" { (m.body) }
        h3 { "Lineage" }
        ul id="lineage" {
            @match &m.lineage.proposal {
                Some(pid) => li { "made by proposal " code { (pid.as_str()) } @if let Some(p) = &view.proposal { (proposal_detail(p)) } },
                None => li { "written directly (not through a proposal)" },
            }
            @if let Some(s) = &m.lineage.supersedes {
                li { "supersedes " a href={ (base) "/dashboard/memory/" (s.as_str()) } { (s.as_str()) } }
            }
            @if !m.lineage.source_turns.is_empty() {
                li { "distilled from " (m.lineage.source_turns.len()) " conversation turns" }
            }
            @if let Some(meta) = &m.metadata { li { "imported with " code { (meta.to_string()) } } }
        }
        h3 { "Verification" }
        @match &view.verification {
            Some(v) => p id="verification" {
                @if v.verified { span class="ok" { "verified by readback" } } @else { span class="err" { "not verified" } }
                " (confidence " (format!("{:.2}", v.confidence)) "): " (v.reason)
            },
            None => p id="verification" class="muted" { "No readback verification recorded." },
        }
        @if own_personal && active {
            form method="post" action={ (base) "/dashboard/memory/" (m.id.as_str()) "/forget" } {
                input type="hidden" name="csrf" value=(csrf);
                button type="submit" id="forget" { "Forget this memory" }
                " "
                small { "Its text is erased; this cannot be undone." }
            }
        }
        @if m.scope == MemoryScope::Org && active {
            h3 { "Propose a change" }
            form method="post" action={ (base) "/dashboard/memory/" (m.id.as_str()) "/propose" } {
                input type="hidden" name="csrf" value=(csrf);
                label for="title" { "Title" }
                input id="title" name="title" value=(m.title) required;
                label for="body" { "Text" }
                textarea id="body" name="body" required style="height:6rem" { (m.body) }
                button type="submit" id="propose" { "Propose (governance decides)" }
            }
        }
    })
}

/// ` — proposed by a through b, approved, score 0.82, reason: …` for the proposal that
/// made an entry.
fn proposal_detail(p: &domain::proposal::Proposal) -> Markup {
    html! {
        " — "
        @if let Some(via) = &p.proposed_via { "proposed by " (p.proposed_by.as_str()) " through " (via) ", " }
        (p.state.to_string())
        @if let Some(s) = &p.score { ", score " (format!("{:.2}", s.total)) }
        @if let Some(r) = &p.decision_reason { ", reason: " (r) }
    }
}

/// `POST /dashboard/memory/{id}/forget`.
pub async fn forget(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    Path(id): Path<String>,
    SignedForm { caller, csrf, .. }: SignedForm<Dashboard>,
) -> Response {
    match call::<services::tools::recall::Forget>(&state, &caller, json!({"id": id})).await {
        Ok(_) => redirect(&format!("{base}/dashboard/memory?done=forgotten")),
        Err(e) => refused(&base, &caller, &csrf, "Memory entry", "Memory", &e),
    }
}

/// `POST /dashboard/memory/{id}/propose`.
pub async fn propose(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    Path(id): Path<String>,
    SignedForm { caller, csrf, fields: f, .. }: SignedForm<Dashboard>,
) -> Response {
    let kind = match Id::new(id.clone()) {
        Ok(i) => services::stats::entry(&state.services, &caller, &i).await.ok().map(|v| v.entry.kind),
        Err(_) => None,
    };
    let args = json!({"title": f.get("title").unwrap_or_default(), "body": f.get("body").unwrap_or_default(),
        "kind": kind.unwrap_or_else(|| "decision".into()), "supersedes": id});
    match call::<services::tools::memory::Propose>(&state, &caller, args).await {
        Ok(_) => redirect(&format!("{base}/dashboard/memory?done=proposed")),
        Err(e) => refused(&base, &caller, &csrf, "Memory entry", "Memory", &e),
    }
}
