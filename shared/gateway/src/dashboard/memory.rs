//! The memory browser: search or the newest entries, one entry with its lineage and
//! verification, and the forms that forget or propose a change to it.

use std::fmt::Write as _;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use domain::memory::MemoryScope;
use domain::principal::CallerContext;
use domain::{Error, Id};
use serde::Deserialize;
use serde_json::json;

use super::{Dashboard, call, refused, select, shell, signed_in};
use crate::oauth::esc;
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
        Some("forgotten") => "<p class=ok role=status>Forgotten: its text is erased and it left search.</p>",
        Some("proposed") => "<p class=ok role=status>Proposed: governance scores it, and a person decides at Approvals.</p>",
        _ => "",
    };
    let mut body = format!(
        "{notice}<form method=get action=\"{b}/dashboard/memory\" class=forms style=\"grid-template-columns:3fr 1fr 1fr 1fr auto\">\
         <input name=q id=q value=\"{q}\" placeholder=\"Search memory\">{scope}{ty}<input name=since id=since value=\"{since}\" placeholder=\"since (2026-01-01)\">\
         <button type=submit id=search>Search</button></form>",
        b = esc(&base),
        q = esc(query),
        scope = select(
            "scope",
            q.scope.as_deref(),
            &[("", "every scope"), ("org", "org"), ("personal", "personal"), ("global", "global")]
        ),
        ty = select(
            "type",
            q.memory_type.as_deref(),
            &[
                ("", "every type"),
                ("org", "org (governed)"),
                ("personal", "personal"),
                ("conversational", "conversations"),
                ("kb", "knowledge base")
            ]
        ),
        since = esc(q.since.as_deref().unwrap_or_default()),
    );
    let rows = if query.is_empty() {
        services::stats::recent_memories(&state.services, &caller, q.scope.as_deref()).await.map(|entries| {
            let since = q.since.as_deref().filter(|s| !s.is_empty()).and_then(|s| domain::Timestamp::parse("since", s).ok());
            entries
                .into_iter()
                .filter(|m| since.is_none_or(|t| m.updated_at.0 >= t.0))
                .filter(|m| q.memory_type.as_deref().filter(|t| !t.is_empty()).is_none_or(|t| m.memory_type.to_string() == t))
                .map(|m| {
                    (
                        true,
                        m.id.to_string(),
                        m.scope.storage_key(),
                        m.kind.clone(),
                        m.title.clone(),
                        m.state.name().to_owned(),
                        m.updated_at.to_rfc3339(),
                    )
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
                    let (memory_type, state) = (h.memory_type.unwrap_or_default(), h.state.unwrap_or_default());
                    (h.kind == "memory", h.id, h.scope, memory_type, h.title, state, h.occurred_at)
                })
                .collect()
        })
    };
    match rows {
        Ok(rows) => {
            body.push_str("<table id=results><tr><th>title</th><th>scope</th><th>kind</th><th>state</th><th>when</th></tr>");
            for (linkable, id, scope, kind, title, st, when) in &rows {
                let shown = if title.is_empty() { id } else { title };
                let link = if *linkable {
                    format!("<a href=\"{}/dashboard/memory/{}\">{}</a>", esc(&base), esc(id), esc(shown))
                } else {
                    esc(shown)
                };
                let _ = write!(
                    body,
                    "<tr><td>{link}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(scope),
                    esc(kind),
                    esc(st),
                    esc(when)
                );
            }
            if rows.is_empty() {
                body.push_str("<tr><td colspan=5 class=muted>Nothing found.</td></tr>");
            }
            body.push_str("</table>");
            shell(&base, &caller, &csrf, "Memory", "Memory", "", &body)
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
        Ok(body) => shell(&base, &caller, &csrf, "Memory entry", "Memory", "", &body),
        Err(e) => refused(&base, &caller, &csrf, "Memory entry", "Memory", &e),
    }
}

async fn entry_html(state: &AppState, base: &str, caller: &CallerContext, csrf: &str, id: &str) -> Result<String, Error> {
    let id = Id::new(id.to_owned())?;
    let view = services::stats::entry(&state.services, caller, &id).await?;
    let m = &view.entry;
    let mut out = format!(
        "<h2 id=entry-title>{}</h2><p class=muted>{} · {} · <span id=entry-state>{}</span> · created {} · updated {}</p><pre style=\"white-space:pre-wrap\" id=entry-body>{}</pre>",
        esc(&m.title),
        esc(&m.scope.storage_key()),
        esc(&m.kind),
        esc(m.state.name()),
        esc(&m.created_at.to_rfc3339()),
        esc(&m.updated_at.to_rfc3339()),
        esc(&m.body)
    );
    out.push_str("<h3>Lineage</h3><ul id=lineage>");
    match (&m.lineage.proposal, &view.proposal) {
        (Some(id), p) => {
            let detail = p.as_ref().map_or_else(String::new, |p| {
                format!(
                    " — {}{}{}{}",
                    p.proposed_via.as_deref().map_or_else(String::new, |v| format!(
                        "proposed by {} through {}, ",
                        esc(p.proposed_by.as_str()),
                        esc(v)
                    )),
                    esc(&p.state.to_string()),
                    p.score.as_ref().map_or_else(String::new, |s| format!(", score {:.2}", s.total)),
                    p.decision_reason.as_deref().map_or_else(String::new, |r| format!(", reason: {}", esc(r)))
                )
            });
            let _ = write!(out, "<li>made by proposal <code>{}</code>{detail}</li>", esc(id.as_str()));
        }
        (None, _) => out.push_str("<li>written directly (not through a proposal)</li>"),
    }
    if let Some(s) = &m.lineage.supersedes {
        let _ = write!(
            out,
            "<li>supersedes <a href=\"{}/dashboard/memory/{}\">{}</a></li>",
            esc(base),
            esc(s.as_str()),
            esc(s.as_str())
        );
    }
    if !m.lineage.source_turns.is_empty() {
        let _ = write!(out, "<li>distilled from {} conversation turns</li>", m.lineage.source_turns.len());
    }
    if let Some(meta) = &m.metadata {
        let _ = write!(out, "<li>imported with <code>{}</code></li>", esc(&meta.to_string()));
    }
    out.push_str("</ul><h3>Verification</h3>");
    match &view.verification {
        Some(v) => {
            let _ = write!(
                out,
                "<p id=verification>{} (confidence {:.2}): {}</p>",
                if v.verified { "<span class=ok>verified by readback</span>" } else { "<span class=err>not verified</span>" },
                v.confidence,
                esc(&v.reason)
            );
        }
        None => out.push_str("<p id=verification class=muted>No readback verification recorded.</p>"),
    }
    let b = esc(base);
    let own_personal = m.scope == MemoryScope::Personal(caller.principal.to_string());
    if own_personal && m.state == domain::memory::GovernanceState::Active {
        let _ = write!(
            out,
            "<form method=post action=\"{b}/dashboard/memory/{id}/forget\"><input type=hidden name=csrf value=\"{c}\">\
             <button type=submit id=forget>Forget this memory</button> <small>Its text is erased; this cannot be undone.</small></form>",
            id = esc(m.id.as_str()),
            c = esc(csrf)
        );
    }
    if m.scope == MemoryScope::Org && m.state == domain::memory::GovernanceState::Active {
        let _ = write!(
            out,
            "<h3>Propose a change</h3><form method=post action=\"{b}/dashboard/memory/{id}/propose\"><input type=hidden name=csrf value=\"{c}\">\
             <label for=title>Title</label><input id=title name=title value=\"{t}\" required>\
             <label for=body>Text</label><textarea id=body name=body required style=\"height:6rem\">{body}</textarea>\
             <button type=submit id=propose>Propose (governance decides)</button></form>",
            id = esc(m.id.as_str()),
            c = esc(csrf),
            t = esc(&m.title),
            body = esc(&m.body)
        );
    }
    Ok(out)
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
