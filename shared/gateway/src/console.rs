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
use axum::response::{IntoResponse, Response};
use domain::principal::CallerContext;
use domain::{Error, ErrorCode, Id, PageRequest};
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;
use services::governance::Waiting;
use services::oauth::Params;
use subtle::ConstantTimeEq;

use crate::oauth::{esc, locked_down_page, no_store};
use crate::router::AppState;
use crate::web::BaseUrl;

const SESSION_COOKIE: &str = "ctn_console";
const LOGIN_COOKIE: &str = "ctn_console_login";

#[derive(Deserialize)]
pub struct ListQuery {
    cursor: Option<String>,
    done: Option<String>,
}

fn cookie_name(base: &str, name: &str) -> String {
    if base.starts_with("https://") { format!("__Host-{name}") } else { name.to_owned() }
}

pub(crate) fn cookie(headers: &HeaderMap, base: &str, name: &str) -> Option<String> {
    let name = cookie_name(base, name);
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then(|| v.to_owned())
    })
}

pub(crate) fn set_cookie(resp: &mut Response, base: &str, name: &str, value: &str, max_age: i64) {
    let secure = base.starts_with("https://");
    let c = format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
        cookie_name(base, name),
        if secure { "; Secure" } else { "" }
    );
    if let Ok(v) = HeaderValue::from_str(&c) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
}

pub(crate) fn same(a: &str, b: &str) -> bool {
    !a.is_empty() && a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

pub(crate) fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=en><meta charset=utf-8><meta name=viewport content=\"width=device-width,initial-scale=1\">\
         <title>{t} · Continuity</title><style>\
         body{{font:15px system-ui,sans-serif;max-width:58rem;margin:2rem auto;padding:0 1rem;color:#222}}\
         header{{display:flex;justify-content:space-between;align-items:center;border-bottom:1px solid #ddd;margin-bottom:1rem}}\
         section.p{{border:1px solid #ccc;border-radius:6px;padding:.8rem 1rem;margin:1rem 0}}\
         table{{border-collapse:collapse}}td,th{{padding:.15rem .6rem;text-align:left;border-bottom:1px solid #eee}}\
         .total{{font-size:1.3rem;font-weight:600}}.conflict{{background:#fff6e0;padding:.4rem .6rem;border-left:3px solid #e0a000}}\
         .ok{{color:#070}}.err{{color:#a00}}label{{display:block;margin:.4rem 0 .1rem}}\
         input,textarea{{width:100%;padding:.4rem;box-sizing:border-box}}textarea{{height:3.2rem}}\
         .forms{{display:grid;grid-template-columns:1fr 1fr;gap:1rem}}button{{margin-top:.4rem;padding:.45rem 1rem}}\
         code{{background:#eee;padding:0 .2rem}}small{{color:#666}}</style>{body}</html>",
        t = esc(title)
    );
    locked_down_page(
        status,
        html,
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    )
}

/// The status of a failed console request; the failure is logged like any request's.
pub(crate) fn status_of(e: &Error) -> StatusCode {
    services::log_failure(e, "console");
    crate::error::status(e)
}

/// A message for a person: ours, never a backend's internals.
pub(crate) fn message_of(e: &Error) -> String {
    match e.code {
        ErrorCode::Unavailable | ErrorCode::Internal => "The service is unavailable; try again in a moment.".to_owned(),
        _ => e.message.clone(),
    }
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
        Err(e) => return page(status_of(&e), "Approvals", &format!("<p class=err role=alert>{}</p>", esc(&message_of(&e)))),
    };
    let notice = notice
        .map(|(ok, m)| format!("<p class={} role=status id=notice>{}</p>", if ok { "ok" } else { "err" }, esc(&m)))
        .unwrap_or_default();
    let cards: String = waiting.items.iter().map(|w| card(base, csrf, w)).collect();
    let gates = match state.services.gates.waiting(caller, 50).await {
        Ok(g) => g,
        Err(e) => return page(status_of(&e), "Approvals", &format!("<p class=err role=alert>{}</p>", esc(&message_of(&e)))),
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

async fn session(state: &AppState, base: &str, headers: &HeaderMap) -> Result<(CallerContext, String), Error> {
    let token = cookie(headers, base, SESSION_COOKIE).ok_or_else(|| Error::unauthenticated("sign in"))?;
    state.services.auth.console_session(&token, base).await
}

pub(crate) fn redirect(to: &str) -> Response {
    let mut resp = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    no_store(resp)
}

/// `GET /approvals`.
pub async fn show(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Response {
    match session(&state, &base, &headers).await {
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
        Err(e) => page(status_of(&e), "Approvals", &format!("<p class=err role=alert>{}</p>", esc(&message_of(&e)))),
    }
}

pub(crate) fn form(body: &Bytes) -> Option<Params> {
    Params::parse(body).ok()
}

/// A page that signs its own users in (the approvals console, the dashboard): its
/// cookies, where it lives and its sign-in form.
pub(crate) struct SignInPage {
    /// Where a signed-in (or signed-out) browser goes: `/approvals`, `/dashboard`.
    pub home: &'static str,
    pub login_cookie: &'static str,
    pub title: &'static str,
    pub login_page: fn(&str, StatusCode, Option<&str>) -> Response,
    /// What a key without the needed scope is told.
    pub key_refused: &'static str,
}

/// The session cookie of each page: one sign-in sets every page's the credential may
/// open; a sign-out clears (and ends) both.
pub(crate) fn session_cookie(page: services::auth::Page) -> &'static str {
    match page {
        services::auth::Page::Console => SESSION_COOKIE,
        services::auth::Page::Dashboard => crate::dashboard::SESSION_COOKIE,
    }
}

const CONSOLE: SignInPage = SignInPage {
    home: "/approvals",
    login_cookie: LOGIN_COOKIE,
    title: "Approvals",
    login_page,
    key_refused: "This key cannot decide approvals: it needs the approvals:decide scope.",
};

/// Signs a browser in from the posted form — a key (`by_key`) or a workspace, e-mail and
/// password (`by_user`), each answering a session token — after the double-submit CSRF
/// check; sets the session cookie and goes home.
pub(crate) async fn sign_in(
    p: &SignInPage,
    base: &str,
    headers: &HeaderMap,
    body: &Bytes,
    by_key: impl AsyncFnOnce(&str) -> Result<services::auth::PageSessions, Error>,
    by_user: impl AsyncFnOnce(&str, &str, &str) -> Result<services::auth::PageSessions, Error>,
) -> Response {
    let Some(f) = form(body) else { return (p.login_page)(base, StatusCode::BAD_REQUEST, Some("The form was malformed.")) };
    let expected = cookie(headers, base, p.login_cookie).unwrap_or_default();
    if !same(f.get("csrf").unwrap_or_default(), &expected) {
        return (p.login_page)(base, StatusCode::FORBIDDEN, Some("The sign-in form expired. Please try again."));
    }
    let signed_in = match f.get("key") {
        Some(key) => by_key(key).await,
        None => {
            by_user(
                f.get("tenant").unwrap_or_default(),
                f.get("email").unwrap_or_default(),
                f.get("password").unwrap_or_default(),
            )
            .await
        }
    };
    match signed_in {
        Ok(sessions) => {
            let mut resp = redirect(&format!("{base}{}", p.home));
            for (page, token) in
                [(services::auth::Page::Console, sessions.console), (services::auth::Page::Dashboard, sessions.dashboard)]
            {
                if let Some(token) = token {
                    set_cookie(&mut resp, base, session_cookie(page), &token, services::oauth::tokens::CONSOLE_SESSION_SECS);
                }
            }
            set_cookie(&mut resp, base, p.login_cookie, "", 0);
            resp
        }
        Err(e) if e.code == ErrorCode::Forbidden && f.get("key").is_some() => {
            (p.login_page)(base, StatusCode::FORBIDDEN, Some(p.key_refused))
        }
        Err(e) if e.code == ErrorCode::Unauthenticated && f.get("key").is_some() => {
            (p.login_page)(base, StatusCode::UNAUTHORIZED, Some("That key is not valid (unknown, revoked or mistyped)."))
        }
        Err(e) if matches!(e.code, ErrorCode::Unauthenticated | ErrorCode::Forbidden | ErrorCode::RateLimited) => {
            (p.login_page)(base, status_of(&e), Some(&e.message))
        }
        Err(e) => (p.login_page)(base, status_of(&e), Some(&message_of(&e))),
    }
}

/// Signs a browser out of every page: the session's CSRF token must come with the form
/// (when there is a session to end); both pages' sessions end for good (a copied cookie
/// opens nothing afterwards) and their cookies are cleared.
pub(crate) async fn sign_out(
    state: &AppState,
    p: &SignInPage,
    base: &str,
    headers: &HeaderMap,
    session_csrf: Option<String>,
    body: &Bytes,
) -> Response {
    if let Some(csrf) = session_csrf
        && !form(body).is_some_and(|f| same(f.get("csrf").unwrap_or_default(), &csrf))
    {
        return page(StatusCode::FORBIDDEN, p.title, "<p class=err role=alert>The form expired. Reload the page.</p>");
    }
    let pages = [services::auth::Page::Console, services::auth::Page::Dashboard];
    let tokens: Vec<String> = pages.iter().filter_map(|pg| cookie(headers, base, session_cookie(*pg))).collect();
    if let Err(e) = state.services.auth.end_page_sessions(&tokens, base).await {
        return page(status_of(&e), p.title, &format!("<p class=err role=alert>{}</p>", esc(&message_of(&e))));
    }
    let mut resp = redirect(&format!("{base}{}", p.home));
    for pg in pages {
        set_cookie(&mut resp, base, session_cookie(pg), "", 0);
    }
    resp
}

/// `POST /approvals/login`.
pub async fn login(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    addr: Option<Extension<crate::server::ClientAddr>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let source = addr.map(|a| a.0.0);
    sign_in(
        &CONSOLE,
        &base,
        &headers,
        &body,
        async |key| state.services.auth.page_login_key(services::auth::Page::Console, key, &base).await,
        async |tenant, email, password| {
            state.services.oauth.page_login_user(services::auth::Page::Console, &base, (tenant, email, password), source).await
        },
    )
    .await
}

/// `POST /approvals/logout`.
pub async fn logout(State(state): State<AppState>, BaseUrl(base): BaseUrl, headers: HeaderMap, body: Bytes) -> Response {
    let csrf = session(&state, &base, &headers).await.ok().map(|(_, c)| c);
    sign_out(&state, &CONSOLE, &base, &headers, csrf, &body).await
}

/// A decision form's signed-in approver, session CSRF secret and fields — or the page
/// that refuses it (signed out, malformed, or without the session's CSRF token).
async fn decision_form(
    state: &AppState,
    base: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(CallerContext, String, Params), Response> {
    let (caller, csrf) = match session(state, base, headers).await {
        Ok(s) => s,
        Err(e) if e.code == ErrorCode::Unauthenticated => {
            return Err(login_page(base, StatusCode::UNAUTHORIZED, Some("Your session has ended; sign in again.")));
        }
        Err(e) => return Err(page(status_of(&e), "Approvals", &format!("<p class=err role=alert>{}</p>", esc(&message_of(&e))))),
    };
    let refused = |status, message: &str| list_page(state, base, &caller, &csrf, None, status, Some((false, message.to_owned())));
    let Some(f) = form(body) else { return Err(refused(StatusCode::BAD_REQUEST, "The form was malformed.").await) };
    if !same(f.get("csrf").unwrap_or_default(), &csrf) {
        return Err(refused(StatusCode::FORBIDDEN, "The form expired: nothing was decided. Try again.").await);
    }
    Ok((caller, csrf, f))
}

/// `POST /approvals/{id}/decide`.
pub async fn decide(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let (caller, csrf, f) = match decision_form(&state, &base, &headers, &body).await {
        Ok(signed) => signed,
        Err(refused) => return refused,
    };
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
pub async fn decide_gate(State(state): State<AppState>, BaseUrl(base): BaseUrl, headers: HeaderMap, body: Bytes) -> Response {
    let (caller, csrf, f) = match decision_form(&state, &base, &headers, &body).await {
        Ok(signed) => signed,
        Err(refused) => return refused,
    };
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
