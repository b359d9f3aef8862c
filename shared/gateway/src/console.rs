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
//! - `GET /approvals/link/{token}`: a notification's decision link — after sign-in (the
//!   form returns here), one proposal with its approve and reject forms, which
//!   `POST /approvals/link/{token}`: the link is spent (once), then the same
//!   `GovernanceService::decide`. A link expired, forged, used, for another workspace
//!   or sent to another person is refused with a page saying so (403).
//! - `POST /approvals/logout`.
//!
//! Every form carries a CSRF token: the session's own secret (decisions, sign-out) or a
//! double-submit cookie (sign-in), compared in constant time. Pages are plain HTML with no
//! script, served with a CSP that forbids scripts and framing; everything shown is
//! escaped.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use domain::principal::CallerContext;
use domain::{Error, ErrorCode, Id, PageRequest};
use http::StatusCode;
use maud::{Markup, html};
use serde::Deserialize;
use services::governance::Waiting;

use crate::router::AppState;
use crate::web::{
    BaseUrl, Refusal, SignedForm, SignedPage, cookie, error_page, login_page, message_of, page, redirect, status_of,
};

pub(crate) const SESSION_COOKIE: &str = "ctn_console";
const LOGIN_COOKIE: &str = "ctn_console_login";

#[derive(Deserialize)]
pub struct ListQuery {
    cursor: Option<String>,
    done: Option<String>,
}

fn factor_rows(w: &Waiting) -> Markup {
    let Some(s) = &w.proposal.score else { return html! {} };
    let rows = [
        ("confidence", s.confidence, "higher is better"),
        ("relevance", s.relevance, "higher is better"),
        ("risk", s.risk, "0 = none"),
        ("conflict", s.conflict, "0 = none"),
        ("quality", s.quality, "higher is better"),
    ];
    html! {
        p class="total" { "score " (format!("{:.2}", s.total)) }
        table class="factors" {
            @for (n, v, hint) in rows { tr { th { (n) } td { (format!("{v:.2}")) } td { small { (hint) } } } }
        }
        ul class="reasons" { @for r in &s.reasons { li { (r) } } }
    }
}

/// A waiting proposal with its approve and reject forms, which post to `action`.
fn card(action: &str, csrf: &str, w: &Waiting) -> Markup {
    let p = &w.proposal;
    let id = p.id.as_str();
    html! {
        section class="p" id={ "p-" (id) } {
            h2 { (p.title) }
            p {
                small {
                    (p.kind) " · proposal " code { (id) } " · by " (p.proposed_by.as_str())
                    @if let Some(via) = &p.proposed_via { " through " (via) }
                    " · " (p.created_at.to_rfc3339())
                    @if let Some(wait) = &p.wait { " · decide before " (wait.deadline.to_rfc3339()) }
                }
            }
            blockquote { (p.body) }
            (factor_rows(w))
            @for m in &w.conflicts {
                div class="conflict" {
                    strong { "Conflicts with active entry " (m.id.as_str()) }
                    @if p.suggested_supersede.as_ref() == Some(&m.id) || p.supersedes.as_ref() == Some(&m.id) {
                        " — approving supersedes it (its lineage will link both ways)"
                    }
                    br;
                    "“" (m.title) "” — " (m.body)
                }
            }
            div class="forms" {
                form method="post" action=(action) {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="decision" value="approve";
                    label for={ "ar-" (id) } { "Reason (optional)" }
                    textarea id={ "ar-" (id) } name="reason" maxlength="2000" {}
                    button type="submit" class="approve" { "Approve" }
                }
                form method="post" action=(action) {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="decision" value="reject";
                    label for={ "rr-" (id) } { "Reason (required)" }
                    textarea id={ "rr-" (id) } name="reason" required maxlength="2000" {}
                    button type="submit" class="reject" { "Reject" }
                }
            }
        }
    }
}

/// A gate request: what is asked, by whom and why, with authorize and block forms.
fn gate_card(base: &str, csrf: &str, g: &domain::gate::Gate) -> Markup {
    let key = format!("{}-{}", g.namespace, g.action).replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    let action = format!("{base}/approvals/gates/decide");
    let hidden = html! {
        input type="hidden" name="csrf" value=(csrf);
        input type="hidden" name="namespace" value=(g.namespace);
        input type="hidden" name="action" value=(g.action);
    };
    html! {
        section class="p" id={ "g-" (key) } {
            h3 { code { (g.action) } " in " code { (g.namespace) } }
            p {
                small {
                    "requested by " (g.requested_by.as_deref().unwrap_or(&g.set_by)) " · " (g.updated_at.to_rfc3339())
                    @if let Some(e) = g.expires_at { " · waits until " (e.to_rfc3339()) }
                }
            }
            @if let Some(r) = &g.reason { blockquote { (r) } }
            div class="forms" {
                form method="post" action=(action) {
                    (hidden)
                    input type="hidden" name="decision" value="authorize";
                    label for={ "gh-" (key) } { "Valid for (hours)" }
                    input id={ "gh-" (key) } name="hours" type="number" min="1" max="8760" value="24";
                    label {
                        input type="checkbox" name="consume_once" value="1" checked style="width:auto";
                        " Once only (the first verify spends it)"
                    }
                    label for={ "ga-" (key) } { "Reason (optional)" }
                    textarea id={ "ga-" (key) } name="reason" maxlength="500" {}
                    button type="submit" class="authorize" { "Authorize" }
                }
                form method="post" action=(action) {
                    (hidden)
                    input type="hidden" name="decision" value="block";
                    label for={ "gb-" (key) } { "Reason (required)" }
                    textarea id={ "gb-" (key) } name="reason" required maxlength="500" {}
                    button type="submit" class="block" { "Block" }
                }
            }
        }
    }
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
    let gates = match state.services.gates.waiting(caller, 50).await {
        Ok(g) => g,
        Err(e) => return error_page("Approvals", &e),
    };
    let body = html! {
        header {
            h1 { "Approvals" }
            form method="post" action={ (base) "/approvals/logout" } {
                small { (caller.principal.as_str()) " · workspace " (caller.tenant.as_str()) (memberships(caller)) }
                " "
                input type="hidden" name="csrf" value=(csrf);
                button type="submit" { "Sign out" }
            }
        }
        @if let Some((ok, m)) = notice {
            p class=(if ok { "ok" } else { "err" }) role="status" id="notice" { (m) }
        }
        p {
            "Proposals wait here when triage scored them between the tenant's bars, or found them contradicting \
             an active entry. Nothing is ever approved by waiting: a proposal nobody decides expires and is escalated."
        }
        @if waiting.items.is_empty() && gates.is_empty() { p id="empty" { "Nothing is waiting for a decision." } }
        @if !gates.is_empty() {
            h2 id="gates" { "Gate requests" }
            p {
                "An agent asked to do something a person must allow first. A script \
                 verifying the gate is refused until it is authorized here."
            }
            @for g in &gates { (gate_card(base, csrf, g)) }
        }
        @for w in &waiting.items { (card(&format!("{base}/approvals/{}/decide", w.proposal.id), csrf, w)) }
        @if let Some(c) = &waiting.next_cursor { p { a href={ (base) "/approvals?cursor=" (c) } { "More…" } } }
    };
    page(status, "Approvals", body)
}

/// ` · teams a, b · projects p` for the header (nothing for none).
fn memberships(caller: &CallerContext) -> Markup {
    html! {
        @if !caller.teams.is_empty() { " · teams " span id="teams" { (caller.teams.join(", ")) } }
        @if !caller.projects.is_empty() { " · projects " span id="projects" { (caller.projects.join(", ")) } }
    }
}

/// The approvals console as a page with its own sign-in.
pub struct Console;

impl SignedPage for Console {
    const PAGE: services::auth::Page = services::auth::Page::Console;
    const HOME: &'static str = "/approvals";
    const LOGIN_COOKIE: &'static str = LOGIN_COOKIE;
    const TITLE: &'static str = "Approvals";
    const KEY_REFUSED: &'static str = "This key cannot decide approvals: it needs the approvals:decide scope.";

    const LOGIN_TITLE: &'static str = "Approvals — sign in";
    const KEY_LABEL: &'static str = "Approver key";

    fn login_intro() -> Markup {
        html! {
            h1 { "Approvals" }
            p {
                "Sign in as a user whose role may decide approvals (owner, admin or approver: "
                code { "continuity user add --role approver" } "), or with an approver key (an API key with the "
                code { "approvals:decide" } " scope: " code { "continuity key create --tenant T --scopes approvals:decide" } ")."
            }
        }
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
        Err(e) if e.code == ErrorCode::Unauthenticated => login_page::<Console>(&base, StatusCode::OK, None),
        Err(e) => error_page("Approvals", &e),
    }
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

/// A decision link's path, checked before it goes into a sign-in form: the link route
/// and a token of JWT characters only.
pub(crate) fn link_path(token: &str) -> Option<String> {
    let ok = !token.is_empty()
        && token.len() <= 4096
        && token.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    ok.then(|| format!("/approvals/link/{token}"))
}

/// The refusal page of a decision link: what is wrong and where to decide instead.
fn link_refused(base: &str, e: &Error) -> Response {
    let status = status_of(e);
    let body = html! {
        h1 { "Decision link" }
        p class="err" role="alert" id="refused" { (message_of(e)) }
        p { "Nothing was decided. " a href={ (base) "/approvals" } { "Open the approvals console" } }
    };
    page(status, "Decision link", body)
}

/// `GET /approvals/link/{token}`: sign in first (the form comes back here), then the
/// one proposal the link names, if the link is good for this approver.
pub async fn link_show(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Path(token): Path<String>,
) -> Response {
    let Some(next) = link_path(&token) else {
        return link_refused(
            &base,
            &Error::forbidden("This link is expired or not valid. Open the approvals console to decide."),
        );
    };
    let (caller, csrf) = match Console::session(&state, &base, &headers).await {
        Ok(s) => s,
        Err(e) if e.code == ErrorCode::Unauthenticated => {
            return crate::web::login_page_next::<Console>(
                &base,
                StatusCode::OK,
                Some("Sign in to decide on the proposal this link names."),
                Some(&next),
            );
        }
        Err(e) => return error_page("Approvals", &e),
    };
    let opened = match state.services.notify.open_link(&caller, &token, &base).await {
        Ok(id) => state.services.governance.waiting_one(&caller, &id).await,
        Err(e) => Err(e),
    };
    match opened {
        Ok(w) if w.proposal.state == domain::proposal::ProposalState::AwaitingApproval => {
            let body = html! {
                h1 { "Decide" }
                p { small { "Signed in as " (caller.principal.as_str()) " · workspace " (caller.tenant.as_str()) " · this link decides once." } }
                (card(&format!("{base}{next}"), &csrf, &w))
            };
            page(StatusCode::OK, "Decide", body)
        }
        Ok(w) => link_refused(
            &base,
            &Error::conflict(format!("This proposal is {} already: nothing is waiting for a decision.", w.proposal.state)),
        ),
        Err(e) => link_refused(&base, &e),
    }
}

/// `POST /approvals/link/{token}` (`decision`, `reason`): the link spent, then the
/// console's decision.
pub async fn link_decide(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    Path(token): Path<String>,
    SignedForm { caller, fields: f, .. }: SignedForm<Console>,
) -> Response {
    let approve = match f.get("decision") {
        Some("approve") => true,
        Some("reject") => false,
        _ => return link_refused(&base, &Error::invalid("Choose approve or reject.")),
    };
    if !approve && f.get("reason").is_none_or(|r| r.trim().is_empty()) {
        return link_refused(&base, &Error::invalid("Nothing was decided: a rejection needs a reason. Go back and give one."));
    }
    let decided = match state.services.notify.use_link(&caller, &token, &base).await {
        Ok(id) => state.services.governance.decide(&caller, &id, approve, f.get("reason").map(str::to_owned)).await,
        Err(e) => Err(e),
    };
    match decided {
        Ok(p) => {
            tracing::info!(proposal = %p.id, state = %p.state, "approvals console: decided through a link");
            redirect(&format!("{base}/approvals?done={}", if approve { "approved" } else { "rejected" }))
        }
        Err(e) => link_refused(&base, &e),
    }
}
