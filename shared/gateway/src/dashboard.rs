//! The dashboard (seed 002): a web page for a workspace's owners and admins — and keys
//! holding `admin` or `tenant:read` — to see what Continuity holds and does.
//!
//! - `GET /dashboard`: the overview — entities, relationships, signals, memories by scope
//!   and state, proposals waiting (a link to the approvals console), connectors and their
//!   state, the work queue, cache hit ratio, search and tool latency; it refreshes itself
//!   every 30 s (a `<meta>` refresh, no script).
//! - `GET /dashboard/memory?q=&scope=&type=&since=`: the memory browser — hybrid search
//!   through `memory.search`, or the newest entries of a scope; `GET
//!   /dashboard/memory/{id}`: one entry with its lineage (the proposal that made it, what
//!   it superseded) and readback verification; `POST …/{id}/forget` forgets a personal
//!   memory of one's own (`memory.forget`); `POST …/{id}/propose` proposes a change to an
//!   org entry (`memory.propose` superseding it — governance decides).
//! - `GET /dashboard/graph?scope=`: a knowledge graph drawn as SVG on the server.
//! - `GET /dashboard/audit?principal=&action=&outcome=`: the audit ledger, filtered.
//! - `GET /api/stats`: the overview's figures as JSON (a bearer credential with
//!   `tenant:read` or `admin`, or the dashboard's session).
//! - `POST /dashboard/login`, `POST /dashboard/logout`; `GET /` from a browser (HTML
//!   accepted, no credential) is sent here.
//!
//! Sign-in, sessions and CSRF work like the approvals console's (both are a
//! [`crate::web::SignedPage`], every form a [`crate::web::SignedForm`]):
//! a signed `HttpOnly; SameSite=Strict` cookie of its own, every form carrying the
//! session's CSRF secret, pages with no script under a CSP that forbids scripts and
//! framing, and everything shown escaped. Actions run the typed capabilities through the
//! capability service, so the ADK's gating and the audit ledger apply as for any client.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Json, Response};
use domain::memory::MemoryScope;
use domain::principal::CallerContext;
use domain::{Error, ErrorCode, Id};
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::oauth::esc;
use crate::router::AppState;
use crate::web::{
    BaseUrl, Refusal, SignedForm, SignedPage, cookie, error_page, message_of, page, redirect, set_cookie, sign_in, sign_out,
    status_of,
};

pub(crate) const SESSION_COOKIE: &str = "ctn_dashboard";
const LOGIN_COOKIE: &str = "ctn_dashboard_login";

fn login_page(base: &str, status: StatusCode, message: Option<&str>) -> Response {
    let csrf = services::random_token(16);
    let msg = message.map(|m| format!("<p class=err role=alert>{}</p>", esc(m))).unwrap_or_default();
    let mut resp = page(
        status,
        "Dashboard — sign in",
        &format!(
            "<h1>Continuity</h1><p>Sign in as an owner or admin of the workspace, or with an API key holding \
             <code>tenant:read</code> or <code>admin</code> (the home's <code>owner.key</code> is one).</p>{msg}\
             <div class=forms>\
             <form method=post action=\"{b}/dashboard/login\"><input type=hidden name=csrf value=\"{csrf}\">\
             <label for=tenant>Workspace</label><input id=tenant name=tenant required autocomplete=organization>\
             <label for=email>E-mail</label><input id=email name=email type=email required autocomplete=username>\
             <label for=password>Password</label><input id=password name=password type=password required autocomplete=current-password>\
             <button type=submit id=sign-in-user>Sign in</button></form>\
             <form method=post action=\"{b}/dashboard/login\"><input type=hidden name=csrf value=\"{csrf}\">\
             <label for=key>API key</label><input id=key name=key type=password required autocomplete=off>\
             <button type=submit id=sign-in>Sign in with the key</button></form></div>",
            b = esc(base),
        ),
    );
    set_cookie(&mut resp, base, LOGIN_COOKIE, &csrf, 1800);
    resp
}

/// A signed-in page: the navigation, then `body`.
fn shell(base: &str, caller: &CallerContext, csrf: &str, title: &str, active: &str, head: &str, body: &str) -> Response {
    let mut nav = String::new();
    for (href, name) in [
        ("/dashboard", "Overview"),
        ("/dashboard/memory", "Memory"),
        ("/dashboard/graph", "Graph"),
        ("/dashboard/audit", "Audit"),
    ] {
        let cls = if name == active { " class=on" } else { "" };
        let _ = write!(nav, "<a{cls} href=\"{}{href}\">{name}</a> ", esc(base));
    }
    let _ = write!(nav, "<a href=\"{}/approvals\">Approvals ↗</a>", esc(base));
    page(
        StatusCode::OK,
        title,
        &format!(
            "{head}<style>nav a{{margin-right:.8rem}}nav a.on{{font-weight:700}}.grid{{display:grid;grid-template-columns:repeat(auto-fit,minmax(11rem,1fr));gap:.6rem}}\
             .fig{{border:1px solid #ddd;border-radius:6px;padding:.5rem .8rem}}.fig b{{display:block;font-size:1.5rem}}\
             .muted{{color:#666}}svg{{border:1px solid #ddd;border-radius:6px;max-width:100%;height:auto}}</style>\
             <header><h1>{t}</h1><form method=post action=\"{b}/dashboard/logout\"><input type=hidden name=csrf value=\"{c}\">\
             <small>{tenant} · {who}</small> <button type=submit id=sign-out>Sign out</button></form></header><nav>{nav}</nav>{body}",
            t = esc(title),
            b = esc(base),
            c = esc(csrf),
            tenant = esc(caller.tenant.as_str()),
            who = esc(caller.principal.as_str()),
        ),
    )
}

fn refused(base: &str, caller: &CallerContext, csrf: &str, title: &str, active: &str, e: &Error) -> Response {
    let mut r = shell(base, caller, csrf, title, active, "", &format!("<p class=err role=alert>{}</p>", esc(&message_of(e))));
    *r.status_mut() = status_of(e);
    r
}

/// The dashboard as a page with its own sign-in.
pub struct Dashboard;

impl SignedPage for Dashboard {
    const PAGE: services::auth::Page = services::auth::Page::Dashboard;
    const HOME: &'static str = "/dashboard";
    const LOGIN_COOKIE: &'static str = LOGIN_COOKIE;
    const TITLE: &'static str = "Dashboard";
    const KEY_REFUSED: &'static str = "The dashboard needs a key with the tenant:read or admin scope.";

    fn login_page(base: &str, status: StatusCode, message: Option<&str>) -> Response {
        login_page(base, status, message)
    }

    async fn session(state: &AppState, base: &str, headers: &HeaderMap) -> Result<(CallerContext, String), Error> {
        let token = cookie(headers, base, SESSION_COOKIE).ok_or_else(|| Error::unauthenticated("sign in"))?;
        state.services.auth.dashboard_session(&token, base).await
    }

    async fn refused(_: &AppState, base: &str, caller: &CallerContext, csrf: &str, why: Refusal) -> Response {
        let e = match why {
            Refusal::Malformed => Error::invalid("The form was malformed."),
            Refusal::Expired => Error::forbidden("The form expired: nothing was changed. Reload the page."),
        };
        refused(base, caller, csrf, "Dashboard", "", &e)
    }
}

/// The signed-in caller, or the page to show instead (the sign-in form, or an error).
async fn signed_in(state: &AppState, base: &str, headers: &HeaderMap) -> Result<(CallerContext, String), Response> {
    match Dashboard::session(state, base, headers).await {
        Ok(s) => Ok(s),
        Err(e) if e.code == ErrorCode::Unauthenticated => Err(login_page(base, StatusCode::OK, None)),
        Err(e) => Err(error_page(Dashboard::TITLE, &e)),
    }
}

/// Runs the typed capability `C` as the caller — the ADK's gating and the audit apply as
/// for any client — and returns its typed result or its taxonomy error.
async fn call<C: services::capabilities::typed::Capability>(
    state: &AppState,
    caller: &CallerContext,
    args: Value,
) -> Result<C::Output, Error> {
    state.services.capabilities.call::<C>(caller, args).await.map(|(_, out)| out)
}

// ------------------------------------------------------------------------ overview

fn fig(label: &str, value: impl std::fmt::Display, id: &str) -> String {
    format!("<div class=fig><b id=\"{}\">{}</b>{}</div>", esc(id), esc(&value.to_string()), esc(label))
}

fn overview_html(base: &str, s: &services::stats::Stats) -> String {
    let mut out = String::from("<h2>The store</h2><div class=grid>");
    out.push_str(&fig("entities", s.entities, "stat-entities"));
    out.push_str(&fig("relationships", s.relationships, "stat-relationships"));
    out.push_str(&fig("signals", s.signals, "stat-signals"));
    out.push_str(&format!(
        "<div class=fig><b id=stat-waiting><a href=\"{}/approvals\">{}</a></b>proposals waiting for a person</div>",
        esc(base),
        s.proposals_waiting
    ));
    if let Some(d) = s.queue_depth {
        out.push_str(&fig("work queue depth", d, "stat-queue"));
    }
    out.push_str("</div><h2>Memories</h2><table><tr><th>scope</th><th>state</th><th>entries</th></tr>");
    for (scope, states) in &s.memories {
        for (st, n) in states {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td id=\"mem-{}-{}\">{n}</td></tr>",
                esc(scope),
                esc(st),
                esc(scope),
                esc(st)
            );
        }
    }
    if s.memories.is_empty() {
        out.push_str("<tr><td colspan=3 class=muted>No memory yet.</td></tr>");
    }
    out.push_str(
        "</table><h2>Connectors</h2><table><tr><th>source</th><th>state</th><th>progress</th><th>updated</th><th>error</th></tr>",
    );
    for c in &s.connectors {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=err>{}</td></tr>",
            esc(&c.source),
            esc(&c.state),
            c.progress.map_or_else(String::new, |p| format!("{:.0}%", p * 100.0)),
            esc(&c.updated_at),
            esc(c.error.as_deref().unwrap_or_default())
        );
    }
    if s.connectors.is_empty() {
        out.push_str("<tr><td colspan=5 class=muted>No connector yet.</td></tr>");
    }
    let ms = |m: Option<f64>| m.map_or_else(|| "—".to_owned(), |m| format!("{m:.1} ms"));
    out.push_str("</table>");
    // The deployment's own figures: shown to the operator's tenant only.
    if let (Some(cache), Some(lat)) = (&s.cache, &s.latency) {
        out.push_str("<h2>This server</h2><div class=grid>");
        out.push_str(&fig(
            "cache hit ratio",
            cache.hit_ratio.map_or_else(|| "—".to_owned(), |r| format!("{:.0}%", r * 100.0)),
            "stat-cache",
        ));
        out.push_str(&fig(&format!("mean tool latency ({} calls)", lat.tools.calls), ms(lat.tools.mean_ms), "stat-tools"));
        out.push_str(&fig(&format!("mean search latency ({} calls)", lat.search.calls), ms(lat.search.mean_ms), "stat-search"));
        out.push_str("</div>");
    }
    let _ = write!(
        out,
        "<p class=muted>As of {} · refreshes every 30 s · <a href=\"{}/api/stats\">as JSON</a></p>",
        esc(&s.generated_at),
        esc(base)
    );
    out
}

/// `GET /dashboard`.
pub async fn overview(State(state): State<AppState>, BaseUrl(base): BaseUrl, headers: HeaderMap) -> Response {
    let (caller, csrf) = match signed_in(&state, &base, &headers).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    match services::stats::for_caller(&state.services, &caller).await {
        Ok(s) => shell(
            &base,
            &caller,
            &csrf,
            "Overview",
            "Overview",
            "<meta http-equiv=refresh content=30>",
            &overview_html(&base, &s),
        ),
        Err(e) => refused(&base, &caller, &csrf, "Overview", "Overview", &e),
    }
}

/// `GET /api/stats`: a bearer credential, else the dashboard's session.
pub async fn stats_json(State(state): State<AppState>, BaseUrl(base): BaseUrl, headers: HeaderMap) -> Response {
    let caller = match headers.get(http::header::AUTHORIZATION) {
        Some(h) => state.services.auth.authenticate_header(h.to_str().ok(), &base).await,
        None => Dashboard::session(&state, &base, &headers).await.map(|(c, _)| c),
    };
    let result = match caller {
        Ok(c) => services::stats::for_caller(&state.services, &c).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(s) => {
            let mut r = Json(s).into_response();
            r.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
            r
        }
        Err(error) => {
            let resource_metadata = Some(format!("{base}/.well-known/oauth-protected-resource/mcp"));
            crate::error::ApiError { error, resource_metadata }.into_response()
        }
    }
}

// ------------------------------------------------------------------------ memory

#[derive(Deserialize, Default)]
pub struct MemoryQuery {
    q: Option<String>,
    scope: Option<String>,
    #[serde(rename = "type")]
    memory_type: Option<String>,
    since: Option<String>,
    done: Option<String>,
}

fn select(name: &str, current: Option<&str>, options: &[(&str, &str)]) -> String {
    let mut out = format!("<select name={name} id={name}>");
    for (v, label) in options {
        let sel = if current.unwrap_or_default() == *v { " selected" } else { "" };
        let _ = write!(out, "<option value=\"{}\"{sel}>{}</option>", esc(v), esc(label));
    }
    out.push_str("</select>");
    out
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

// ------------------------------------------------------------------------ graph

#[derive(Deserialize, Default)]
pub struct GraphQuery {
    scope: Option<String>,
}

/// Nodes drawn at most (the rest are listed as a count).
const MAX_DRAWN: usize = 120;

/// The graph as SVG: nodes on concentric rings (the most connected in the middle), edges
/// as lines, names as labels — all escaped.
pub fn graph_svg(entities: &[(String, String)], relations: &[(String, String, String)]) -> String {
    let mut degree: BTreeMap<&str, usize> = entities.iter().map(|(n, _)| (n.as_str(), 0)).collect();
    for (f, _, t) in relations {
        for n in [f, t] {
            if let Some(d) = degree.get_mut(n.as_str()) {
                *d += 1;
            }
        }
    }
    let mut order: Vec<(&str, usize)> = degree.into_iter().collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    order.truncate(MAX_DRAWN);
    let (w, h) = (900.0_f64, 640.0_f64);
    let mut pos: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    let mut placed = 0usize;
    let mut ring = 0usize;
    while placed < order.len() {
        let capacity = if ring == 0 { 1 } else { ring * 8 };
        let radius = ring as f64 * 70.0;
        for k in 0..capacity.min(order.len() - placed) {
            let angle = k as f64 / capacity as f64 * std::f64::consts::TAU + ring as f64 * 0.4;
            pos.insert(order[placed].0, (w / 2.0 + radius * angle.cos(), h / 2.0 + radius * 0.68 * angle.sin()));
            placed += 1;
        }
        ring += 1;
    }
    let types: BTreeMap<&str, &str> = entities.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    let palette = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d"];
    let mut kinds: Vec<&str> = types.values().copied().collect();
    kinds.sort_unstable();
    kinds.dedup();
    let color = |t: &str| palette[kinds.iter().position(|k| *k == t).unwrap_or(0) % palette.len()];
    let mut svg =
        format!("<svg id=graph viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=img aria-label=\"knowledge graph\">");
    for (f, r, t) in relations {
        if let (Some(a), Some(b)) = (pos.get(f.as_str()), pos.get(t.as_str())) {
            let _ = write!(
                svg,
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#bbb\"><title>{} {} {}</title></line>",
                a.0,
                a.1,
                b.0,
                b.1,
                esc(f),
                esc(r),
                esc(t)
            );
        }
    }
    for (name, _) in &order {
        let (x, y) = pos[name];
        let t = types.get(name).copied().unwrap_or_default();
        let label: String = name.chars().take(24).collect();
        let _ = write!(
            svg,
            "<g class=node><circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"7\" fill=\"{}\"><title>{} ({})</title></circle>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}</text></g>",
            color(t),
            esc(name),
            esc(t),
            x + 9.0,
            y + 4.0,
            esc(&label)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// `GET /dashboard/graph`.
pub async fn graph(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Query(q): Query<GraphQuery>,
) -> Response {
    let (caller, csrf) = match signed_in(&state, &base, &headers).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let scope = q.scope.filter(|s| !s.is_empty()).unwrap_or_else(|| "personal".into());
    let mut options = vec![("personal".to_owned(), "personal".to_owned())];
    options.extend(caller.projects.iter().map(|p| (format!("project:{p}"), format!("project {p}"))));
    let opts: Vec<(&str, &str)> = options.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let picker = format!(
        "<form method=get action=\"{}/dashboard/graph\">{}<button type=submit id=show-graph>Show</button></form>",
        esc(&base),
        select("scope", Some(&scope), &opts)
    );
    match state.services.graph.read_graph(&caller, Some(&scope)).await {
        Ok(g) => {
            let entities: Vec<(String, String)> = g.entities.iter().map(|e| (e.name.clone(), e.entity_type.clone())).collect();
            let relations: Vec<(String, String, String)> =
                g.relations.iter().map(|r| (r.from.clone(), r.relation_type.clone(), r.to.clone())).collect();
            let summary = format!(
                "<p class=muted id=graph-summary>{} entities, {} relations{}</p>",
                entities.len(),
                relations.len(),
                if entities.len() > MAX_DRAWN { format!(" — the {MAX_DRAWN} most connected are drawn") } else { String::new() }
            );
            let drawing = if entities.is_empty() {
                "<p class=muted>This graph is empty.</p>".to_owned()
            } else {
                graph_svg(&entities, &relations)
            };
            shell(&base, &caller, &csrf, "Knowledge graph", "Graph", "", &format!("{picker}{summary}{drawing}"))
        }
        Err(e) => refused(&base, &caller, &csrf, "Knowledge graph", "Graph", &e),
    }
}

// ------------------------------------------------------------------------ audit

#[derive(Deserialize, Default)]
pub struct AuditQuery {
    principal: Option<String>,
    action: Option<String>,
    outcome: Option<String>,
}

/// Audit records read to find matches for a filter.
const AUDIT_SCAN: usize = 5_000;

/// `GET /dashboard/audit`.
pub async fn audit(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Query(q): Query<AuditQuery>,
) -> Response {
    let (caller, csrf) = match signed_in(&state, &base, &headers).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let want = |v: &Option<String>| v.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    let (principal, action, outcome) = (want(&q.principal), want(&q.action), want(&q.outcome));
    let (rows, read) = match services::stats::audit(
        &state.services,
        &caller,
        principal.as_deref(),
        action.as_deref(),
        outcome.as_deref(),
        AUDIT_SCAN,
    )
    .await
    {
        Ok(r) => r,
        Err(e) => return refused(&base, &caller, &csrf, "Audit", "Audit", &e),
    };
    let mut body = format!(
        "<form method=get action=\"{b}/dashboard/audit\" class=forms style=\"grid-template-columns:1fr 1fr 1fr auto\">\
         <input name=principal id=principal placeholder=principal value=\"{p}\"><input name=action id=action placeholder=\"action (tool:kb.search)\" value=\"{a}\">\
         <input name=outcome id=outcome placeholder=\"outcome (ok, denied)\" value=\"{o}\"><button type=submit id=filter>Filter</button></form>\
         <table id=audit><tr><th>when</th><th>principal</th><th>client</th><th>action</th><th>target</th><th>outcome</th></tr>",
        b = esc(&base),
        p = esc(principal.as_deref().unwrap_or_default()),
        a = esc(action.as_deref().unwrap_or_default()),
        o = esc(outcome.as_deref().unwrap_or_default()),
    );
    for a in &rows {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&a.at.to_rfc3339()),
            esc(&a.actor),
            esc(a.via.as_deref().unwrap_or_default()),
            esc(&a.action),
            esc(a.target.as_deref().unwrap_or_default()),
            esc(&a.outcome)
        );
    }
    if rows.is_empty() {
        body.push_str("<tr><td colspan=6 class=muted>No audit record matches.</td></tr>");
    }
    let _ = write!(body, "</table><p class=muted>The newest {} matches among the last {read} records.</p>", rows.len());
    shell(&base, &caller, &csrf, "Audit", "Audit", "", &body)
}

// ------------------------------------------------------------------------ sign-in

/// `POST /dashboard/login`.
pub async fn login(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    addr: Option<Extension<crate::server::ClientAddr>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    sign_in::<Dashboard>(&state, &base, addr.map(|a| a.0.0), &headers, &body).await
}

/// `POST /dashboard/logout`.
pub async fn logout(State(state): State<AppState>, BaseUrl(base): BaseUrl, headers: HeaderMap, body: Bytes) -> Response {
    sign_out::<Dashboard>(&state, &base, &headers, &body).await
}

/// Sends a browser's `GET /` (HTML accepted, no credential) to the dashboard; anything
/// else goes on to the MCP server's root.
pub async fn browser_root(State(state): State<AppState>, req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let is_root = req.method() == http::Method::GET && req.uri().path() == "/";
    let html = req.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    if is_root && html && !req.headers().contains_key(http::header::AUTHORIZATION) {
        let BaseUrl(base) = BaseUrl::of(&state, req.extensions());
        return redirect(&format!("{base}/dashboard"));
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_graph_is_drawn_escaped() {
        let e = vec![("<script>".to_owned(), "x\"y".to_owned()), ("b".to_owned(), "t".to_owned())];
        let svg = graph_svg(&e, &[("<script>".into(), "knows".into(), "b".into())]);
        assert!(!svg.contains("<script>") && svg.contains("&lt;script&gt;"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 2);
        assert_eq!(svg.matches("<line").count(), 1);
    }
}
