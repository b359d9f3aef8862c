//! The approvals console (SPEC §6.4): a web page where an approver signs in, sees the
//! proposals waiting for a person — score, the five factors, triage's reasons, the
//! active entries they conflict with — and approves or rejects each with a reason.
//!
//! - `GET /approvals`: the waiting list for a signed-in approver, else the sign-in form.
//! - `POST /approvals/login`: sign in as a user (workspace, e-mail, password; the
//!   OAuth pages' users, 10 attempts a minute) whose role may decide — owner, admin,
//!   approver — or with an approver key (an API key with `approvals:decide`). The
//!   session is a signed cookie (`console+jwt`, 8 h, `HttpOnly; SameSite=Strict`,
//!   `__Host-` and `Secure` over https); neither password nor key is kept in the
//!   browser, and the key or the user (enabled, role) is read again on every request, so
//!   revoking the key, disabling the user or lowering the role ends the session.
//! - `POST /approvals/{id}/decide` (`decision=approve|reject`, `reason`): the same
//!   `GovernanceService::decide` as the approver API — it sends the wait's task token.
//! - `POST /approvals/gates/decide` (`namespace`, `action`, `decision=authorize|block`,
//!   `reason`, `hours`, `consume_once`): a gate request an agent made is authorized (for
//!   some hours, once only by default) or blocked with a reason — `GateService::set`.
//! - `POST /approvals/logout`.
//!
//! Every form carries a CSRF token: the session's own secret (decisions, sign-out) or a
//! double-submit cookie (sign-in), compared in constant time. Pages are plain HTML with no
//! script, served with a CSP that forbids scripts and framing; everything shown is
//! escaped.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use domain::principal::CallerContext;
use domain::{Error, ErrorCode, Id, PageRequest};
use http::StatusCode;
use serde::Deserialize;
use services::governance::Waiting;

use crate::oauth::esc;
use crate::router::AppState;
use crate::web::{
    BaseUrl, Refusal, SignedForm, SignedPage, cookie, error_page, message_of, page, redirect, set_cookie, sign_in, sign_out,
    status_of,
};

pub(crate) const SESSION_COOKIE: &str = "ctn_console";
const LOGIN_COOKIE: &str = "ctn_console_login";

#[derive(Deserialize)]
pub struct ListQuery {
    cursor: Option<String>,
    done: Option<String>,
}

fn login_page(base: &str, status: StatusCode, message: Option<&str>) -> Response {
    let csrf = services::random_token(16);
    let msg = message.map(|m| format!("<p class=err role=alert>{}</p>", esc(m))).unwrap_or_default();
    let mut resp = page(
        status,
        "Approvals — sign in",
        &format!(
            "<h1>Approvals</h1><p>Sign in as a user whose role may decide approvals (owner, admin or approver: \
             <code>continuity user add --role approver</code>), or with an approver key (an API key with the \
             <code>approvals:decide</code> scope: <code>continuity key create --tenant T --scopes approvals:decide</code>).</p>{msg}\
             <div class=forms>\
             <form method=post action=\"{b}/approvals/login\"><input type=hidden name=csrf value=\"{csrf}\">\
             <label for=tenant>Workspace</label><input id=tenant name=tenant required autocomplete=organization>\
             <label for=email>E-mail</label><input id=email name=email type=email required autocomplete=username>\
             <label for=password>Password</label><input id=password name=password type=password required autocomplete=current-password>\
             <button type=submit id=sign-in-user>Sign in</button></form>\
             <form method=post action=\"{b}/approvals/login\"><input type=hidden name=csrf value=\"{csrf}\">\
             <label for=key>Approver key</label><input id=key name=key type=password required autocomplete=off>\
             <button type=submit id=sign-in>Sign in with the key</button></form></div>",
            b = esc(base),
        ),
    );
    set_cookie(&mut resp, base, LOGIN_COOKIE, &csrf, 1800);
    resp
}

fn factor_rows(w: &Waiting) -> String {
    let Some(s) = &w.proposal.score else { return String::new() };
    let rows = [
        ("confidence", s.confidence, "higher is better"),
        ("relevance", s.relevance, "higher is better"),
        ("risk", s.risk, "0 = none"),
        ("conflict", s.conflict, "0 = none"),
        ("quality", s.quality, "higher is better"),
    ]
    .iter()
    .map(|(n, v, hint)| format!("<tr><th>{n}</th><td>{v:.2}</td><td><small>{hint}</small></td></tr>"))
    .collect::<String>();
    let reasons: String = s.reasons.iter().map(|r| format!("<li>{}</li>", esc(r))).collect();
    format!("<p class=total>score {:.2}</p><table class=factors>{rows}</table><ul class=reasons>{reasons}</ul>", s.total)
}

fn card(base: &str, csrf: &str, w: &Waiting) -> String {
    let p = &w.proposal;
    let id = esc(p.id.as_str());
    let deadline = p.wait.as_ref().map(|w| format!(" · decide before {}", w.deadline.to_rfc3339())).unwrap_or_default();
    let conflicts: String = w
        .conflicts
        .iter()
        .map(|m| {
            let suggested = p.suggested_supersede.as_ref() == Some(&m.id) || p.supersedes.as_ref() == Some(&m.id);
            format!(
                "<div class=conflict><strong>Conflicts with active entry {mid}</strong>{note}<br>“{t}” — {b}</div>",
                mid = esc(m.id.as_str()),
                note = if suggested { " — approving supersedes it (its lineage will link both ways)" } else { "" },
                t = esc(&m.title),
                b = esc(&m.body)
            )
        })
        .collect();
    format!(
        "<section class=p id=\"p-{id}\"><h2>{title}</h2><p><small>{kind} · proposal <code>{id}</code> · by {by} · {at}{deadline}</small></p>\
         <blockquote>{body}</blockquote>{factors}{conflicts}\
         <div class=forms>\
         <form method=post action=\"{b}/approvals/{id}/decide\"><input type=hidden name=csrf value=\"{csrf}\">\
         <input type=hidden name=decision value=approve><label for=\"ar-{id}\">Reason (optional)</label>\
         <textarea id=\"ar-{id}\" name=reason maxlength=2000></textarea><button type=submit class=approve>Approve</button></form>\
         <form method=post action=\"{b}/approvals/{id}/decide\"><input type=hidden name=csrf value=\"{csrf}\">\
         <input type=hidden name=decision value=reject><label for=\"rr-{id}\">Reason (required)</label>\
         <textarea id=\"rr-{id}\" name=reason required maxlength=2000></textarea><button type=submit class=reject>Reject</button></form>\
         </div></section>",
        title = esc(&p.title),
        kind = esc(&p.kind),
        by = match &p.proposed_via {
            Some(via) => format!("{} through {}", esc(p.proposed_by.as_str()), esc(via)),
            None => esc(p.proposed_by.as_str()),
        },
        at = p.created_at.to_rfc3339(),
        body = esc(&p.body),
        factors = factor_rows(w),
        b = esc(base),
        csrf = esc(csrf),
    )
}

/// A gate request: what is asked, by whom and why, with authorize and block forms.
fn gate_card(base: &str, csrf: &str, g: &domain::gate::Gate) -> String {
    let key = format!("{}-{}", g.namespace, g.action).replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    let hidden = format!(
        "<input type=hidden name=csrf value=\"{csrf}\"><input type=hidden name=namespace value=\"{ns}\">\
         <input type=hidden name=action value=\"{ac}\">",
        csrf = esc(csrf),
        ns = esc(&g.namespace),
        ac = esc(&g.action),
    );
    format!(
        "<section class=p id=\"g-{key}\"><h3><code>{ac}</code> in <code>{ns}</code></h3>\
         <p><small>requested by {by} · {at}{until}</small></p>{why}\
         <div class=forms>\
         <form method=post action=\"{b}/approvals/gates/decide\">{hidden}<input type=hidden name=decision value=authorize>\
         <label for=\"gh-{key}\">Valid for (hours)</label><input id=\"gh-{key}\" name=hours type=number min=1 max=8760 value=24>\
         <label><input type=checkbox name=consume_once value=1 checked style=\"width:auto\"> Once only (the first verify spends it)</label>\
         <label for=\"ga-{key}\">Reason (optional)</label><textarea id=\"ga-{key}\" name=reason maxlength=500></textarea>\
         <button type=submit class=authorize>Authorize</button></form>\
         <form method=post action=\"{b}/approvals/gates/decide\">{hidden}<input type=hidden name=decision value=block>\
         <label for=\"gb-{key}\">Reason (required)</label><textarea id=\"gb-{key}\" name=reason required maxlength=500></textarea>\
         <button type=submit class=block>Block</button></form></div></section>",
        ac = esc(&g.action),
        ns = esc(&g.namespace),
        by = esc(g.requested_by.as_deref().unwrap_or(&g.set_by)),
        at = g.updated_at.to_rfc3339(),
        until = g.expires_at.map(|e| format!(" · waits until {}", e.to_rfc3339())).unwrap_or_default(),
        why = g.reason.as_ref().map(|r| format!("<blockquote>{}</blockquote>", esc(r))).unwrap_or_default(),
        b = esc(base),
    )
}

async fn list_page(
    state: &AppState,
    base: &str,
    caller: &CallerContext,
    csrf: &str,
    cursor: Option<String>,
    status: StatusCode,
    notice: Option<(bool, String)>,
) -> Response {
    let page_req = match cursor {
        Some(c) => PageRequest::after(20, c),
        None => PageRequest::first(20),
    };
    let waiting = match state.services.governance.waiting(caller, &page_req).await {
        Ok(w) => w,
        Err(e) => return error_page("Approvals", &e),
    };
    let notice = notice
        .map(|(ok, m)| format!("<p class={} role=status id=notice>{}</p>", if ok { "ok" } else { "err" }, esc(&m)))
        .unwrap_or_default();
    let cards: String = waiting.items.iter().map(|w| card(base, csrf, w)).collect();
    let gates = match state.services.gates.waiting(caller, 50).await {
        Ok(g) => g,
        Err(e) => return error_page("Approvals", &e),
    };
    let gate_cards: String = gates.iter().map(|g| gate_card(base, csrf, g)).collect();
    let gate_section = if gates.is_empty() {
        String::new()
    } else {
        format!(
            "<h2 id=gates>Gate requests</h2><p>An agent asked to do something a person must allow first. A script \
             verifying the gate is refused until it is authorized here.</p>{gate_cards}"
        )
    };
    let empty =
        if waiting.items.is_empty() && gates.is_empty() { "<p id=empty>Nothing is waiting for a decision.</p>" } else { "" };
    let more = waiting
        .next_cursor
        .map(|c| format!("<p><a href=\"{}/approvals?cursor={}\">More…</a></p>", esc(base), esc(&c)))
        .unwrap_or_default();
    page(
        status,
        "Approvals",
        &format!(
            "<header><h1>Approvals</h1><form method=post action=\"{b}/approvals/logout\"><small>{who} · workspace {tenant}{memberships}</small> \
             <input type=hidden name=csrf value=\"{csrf}\"><button type=submit>Sign out</button></form></header>\
             {notice}<p>Proposals wait here when triage scored them between the tenant's bars, or found them contradicting \
             an active entry. Nothing is ever approved by waiting: a proposal nobody decides expires and is escalated.</p>\
             {empty}{gate_section}{cards}{more}",
            b = esc(base),
            who = esc(caller.principal.as_str()),
            tenant = esc(caller.tenant.as_str()),
            memberships = memberships(caller),
            csrf = esc(csrf),
        ),
    )
}

/// ` · teams a, b · projects p` for the header (escaped; nothing for none).
fn memberships(caller: &CallerContext) -> String {
    let mut out = String::new();
    if !caller.teams.is_empty() {
        out.push_str(&format!(" · teams <span id=teams>{}</span>", esc(&caller.teams.join(", "))));
    }
    if !caller.projects.is_empty() {
        out.push_str(&format!(" · projects <span id=projects>{}</span>", esc(&caller.projects.join(", "))));
    }
    out
}

/// The approvals console as a page with its own sign-in.
pub struct Console;

impl SignedPage for Console {
    const PAGE: services::auth::Page = services::auth::Page::Console;
    const HOME: &'static str = "/approvals";
    const LOGIN_COOKIE: &'static str = LOGIN_COOKIE;
    const TITLE: &'static str = "Approvals";
    const KEY_REFUSED: &'static str = "This key cannot decide approvals: it needs the approvals:decide scope.";

    fn login_page(base: &str, status: StatusCode, message: Option<&str>) -> Response {
        login_page(base, status, message)
    }

    async fn session(state: &AppState, base: &str, headers: &HeaderMap) -> Result<(CallerContext, String), Error> {
        let token = cookie(headers, base, SESSION_COOKIE).ok_or_else(|| Error::unauthenticated("sign in"))?;
        state.services.auth.console_session(&token, base).await
    }

    /// The list again, with why; nothing was decided.
    async fn refused(state: &AppState, base: &str, caller: &CallerContext, csrf: &str, why: Refusal) -> Response {
        let (status, message) = match why {
            Refusal::Malformed => (StatusCode::BAD_REQUEST, "The form was malformed."),
            Refusal::Expired => (StatusCode::FORBIDDEN, "The form expired: nothing was decided. Try again."),
        };
        list_page(state, base, caller, csrf, None, status, Some((false, message.to_owned()))).await
    }
}

/// `GET /approvals`.
pub async fn show(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Response {
    match Console::session(&state, &base, &headers).await {
        Ok((caller, csrf)) => {
            // The outcome of the decision just made (a fixed text per outcome: nothing
            // from the query string is shown).
            let notice = match q.done.as_deref() {
                Some("approved") => {
                    Some((true, "Approved: the entry is written (or being written) as organisational memory.".into()))
                }
                Some("rejected") => Some((true, "Rejected: the reason is kept with the proposal.".into())),
                Some("authorized") => Some((true, "Authorized: the next verify of that gate is allowed.".into())),
                Some("blocked") => Some((true, "Blocked: verifies of that gate are refused with your reason.".into())),
                _ => None,
            };
            list_page(&state, &base, &caller, &csrf, q.cursor, StatusCode::OK, notice).await
        }
        Err(e) if e.code == ErrorCode::Unauthenticated => login_page(&base, StatusCode::OK, None),
        Err(e) => error_page("Approvals", &e),
    }
}

/// `POST /approvals/login`.
pub async fn login(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    addr: Option<Extension<crate::server::ClientAddr>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    sign_in::<Console>(&state, &base, addr.map(|a| a.0.0), &headers, &body).await
}

/// `POST /approvals/logout`.
pub async fn logout(State(state): State<AppState>, BaseUrl(base): BaseUrl, headers: HeaderMap, body: Bytes) -> Response {
    sign_out::<Console>(&state, &base, &headers, &body).await
}

/// `POST /approvals/{id}/decide`.
pub async fn decide(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    Path(id): Path<String>,
    SignedForm { caller, csrf, fields: f, .. }: SignedForm<Console>,
) -> Response {
    // A refused form shows the list again with why; nothing was decided.
    let refuse = |status: StatusCode, message: String| {
        let (state, base, caller, csrf) = (&state, &base, &caller, &csrf);
        async move { list_page(state, base, caller, csrf, None, status, Some((false, message))).await }
    };
    let approve = match f.get("decision") {
        Some("approve") => true,
        Some("reject") => false,
        _ => return refuse(StatusCode::BAD_REQUEST, "Choose approve or reject.".into()).await,
    };
    let decided = match Id::new(id) {
        Ok(id) => state.services.governance.decide(&caller, &id, approve, f.get("reason").map(str::to_owned)).await,
        Err(e) => Err(e),
    };
    match decided {
        Ok(p) => {
            tracing::info!(proposal = %p.id, state = %p.state, "approvals console: decided");
            redirect(&format!("{base}/approvals?done={}", if approve { "approved" } else { "rejected" }))
        }
        Err(e) => refuse(status_of(&e), format!("Nothing was decided: {}", message_of(&e))).await,
    }
}

/// `POST /approvals/gates/decide` (`namespace`, `action`, `decision=authorize|block`,
/// `reason`, `hours`, `consume_once`): the same `GateService::set` as `POST /v1/gates`.
pub async fn decide_gate(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    SignedForm { caller, csrf, fields: f, .. }: SignedForm<Console>,
) -> Response {
    let refuse = |status: StatusCode, message: String| {
        let (state, base, caller, csrf) = (&state, &base, &caller, &csrf);
        async move { list_page(state, base, caller, csrf, None, status, Some((false, message))).await }
    };
    let status = match f.get("decision") {
        Some("authorize") => domain::gate::GateStatus::Authorized,
        Some("block") => domain::gate::GateStatus::Blocked,
        _ => return refuse(StatusCode::BAD_REQUEST, "Choose authorize or block.".into()).await,
    };
    let reason = f.get("reason").map(str::to_owned).filter(|r| !r.trim().is_empty());
    if status == domain::gate::GateStatus::Blocked && reason.is_none() {
        return refuse(StatusCode::BAD_REQUEST, "Nothing was decided: blocking needs a reason.".into()).await;
    }
    let hours = match f.get("hours").filter(|h| !h.is_empty()).map(str::parse::<u64>) {
        None => None,
        Some(Ok(h)) if (1..=8_760).contains(&h) => Some(h * 3_600),
        Some(_) => return refuse(StatusCode::BAD_REQUEST, "Nothing was decided: hours must be 1 to 8760.".into()).await,
    };
    let set = services::gates::GateSet {
        namespace: f.get("namespace").unwrap_or_default().to_owned(),
        action: f.get("action").unwrap_or_default().to_owned(),
        status,
        reason,
        expires_in: if status == domain::gate::GateStatus::Authorized { hours } else { None },
        consume_once: f.get("consume_once").is_some(),
    };
    match state.services.gates.set(&caller, set).await {
        Ok(g) => {
            tracing::info!(namespace = %g.namespace, action = %g.action, status = %g.status.as_str(), "approvals console: gate set");
            redirect(&format!(
                "{base}/approvals?done={}",
                if status == domain::gate::GateStatus::Authorized { "authorized" } else { "blocked" }
            ))
        }
        Err(e) => refuse(status_of(&e), format!("Nothing was decided: {}", message_of(&e))).await,
    }
}
