//! Notifications: the workspace's channels (kind, where — the host or the e-mail's
//! domain, never the whole URL — and the events each receives), a form that adds one
//! (a webhook's signing secret shown once, on the answer to that form), Remove, and the
//! deliveries that kept failing. For admins (`admin`), like the admin API's
//! `…/notify/channels`.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use domain::notify::{ChannelKind, EventKind};
use domain::principal::{CallerContext, Scope};
use domain::{Error, Id, PageRequest};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;

use super::{Dashboard, refused, shell, signed_in};
use crate::router::AppState;
use crate::web::{BaseUrl, SignedForm, redirect};

#[derive(Deserialize, Default)]
pub struct NotificationsQuery {
    done: Option<String>,
}

/// Failures listed, newest first.
const FAILURES_SHOWN: u32 = 20;

const TITLE: &str = "Notifications";

/// The page: `notice` above (a webhook's secret, once), then channels, the form,
/// failures.
async fn page(state: &AppState, base: &str, caller: &CallerContext, csrf: &str, notice: Option<Markup>) -> Response {
    if let Err(e) = caller.scopes.require(Scope::Admin) {
        return refused(base, caller, csrf, TITLE, TITLE, &e);
    }
    let notify = &state.services.notify;
    let (channels, failures) =
        match (notify.list(&caller.tenant).await, notify.failures(&caller.tenant, &PageRequest::first(FAILURES_SHOWN)).await) {
            (Ok(c), Ok(f)) => (c, f.items),
            (Err(e), _) | (_, Err(e)) => return refused(base, caller, csrf, TITLE, TITLE, &e),
        };
    let now = state.services.now();
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let mail = notify.mail_transport();
    let body = html! {
        @if let Some(n) = notice { (n) }
        p class="muted" {
            "Channels tell people when something waits for them. A webhook's deliveries are signed ("
            code { "X-Continuity-Signature" } "); a Slack-compatible one posts a message with a button; e-mail goes to one address"
            @if mail.is_none() { " (off here: set " code { "CONTINUITY_SMTP_URL" } " and " code { "CONTINUITY_MAIL_FROM" } ")" }
            "."
        }
        @if channels.is_empty() {
            p class="muted" id="channels-empty" { "No channel yet: nobody is told when a proposal waits. Add one below." }
        } @else {
            table id="channels" {
                tr { th { "kind" } th { "where" } th { "events" } th { "added" } th { "" } }
                @for c in &channels {
                    @let id = text(c, "id");
                    tr {
                        td { (text(c, "kind")) }
                        td { (text(c, "host")) }
                        td { small { (c["events"].as_array().map(|e| e.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default()) } }
                        td { @if let Ok(t) = domain::Timestamp::parse("at", &text(c, "created_at")) { (super::when(t, now)) } }
                        td {
                            form method="post" action={ (base) "/dashboard/notifications/" (id) "/remove" } style="display:inline" {
                                input type="hidden" name="csrf" value=(csrf);
                                button type="submit" id={ "remove-" (id) } { "Remove" }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Add a channel" }
        form method="post" action={ (base) "/dashboard/notifications/add" } id="add-channel" {
            input type="hidden" name="csrf" value=(csrf);
            label for="kind" { "Kind" }
            select name="kind" id="kind" {
                option value="webhook" { "webhook (signed JSON)" }
                option value="slack" { "Slack-compatible incoming webhook" }
                @if mail.is_some() { option value="email" { "e-mail" } }
            }
            label for="url" { "URL, or the e-mail address" }
            input name="url" id="url" required placeholder="https://hooks.example.com/continuity";
            fieldset {
                legend { "Events" }
                @for k in EventKind::ALL {
                    label class="check" {
                        input type="checkbox" name={ "event." (k.as_str()) } id={ "event-" (k.as_str().replace('.', "-")) } checked;
                        " " (k.as_str())
                    }
                }
            }
            button type="submit" id="add" { "Add" }
        }
        h2 { "Deliveries that kept failing" }
        @if failures.is_empty() {
            p class="muted" id="failures-empty" { "None: every delivery arrived." }
        } @else {
            table id="failures" {
                tr { th { "when" } th { "channel" } th { "event" } th { "tries" } th { "why" } }
                @for f in &failures {
                    tr {
                        td { (super::when(f.at, now)) }
                        td { code { (f.channel.as_str()) } }
                        td { (f.event.kind.as_str()) br; small { (f.event.title) } }
                        td { (f.attempts) }
                        td { (f.reason) }
                    }
                }
            }
        }
    };
    shell(base, caller, csrf, TITLE, TITLE, html! {}, body)
}

/// `GET /dashboard/notifications`.
pub async fn notifications(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Query(q): Query<NotificationsQuery>,
) -> Response {
    let (caller, csrf) = match signed_in(&state, &base, &headers).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let notice = match q.done.as_deref() {
        Some("added") => Some(html! { p class="ok" role="status" { "Channel added." } }),
        Some("removed") => Some(html! { p class="ok" role="status" { "Channel removed." } }),
        _ => None,
    };
    page(&state, &base, &caller, &csrf, notice).await
}

/// `POST /dashboard/notifications/add`: a webhook's answer is the page with its signing
/// secret (shown this once; never in a URL).
pub async fn add(State(state): State<AppState>, BaseUrl(base): BaseUrl, form: SignedForm<Dashboard>) -> Response {
    let SignedForm { caller, csrf, fields, .. } = form;
    let added = async {
        caller.scopes.require(Scope::Admin)?;
        let kind = ChannelKind::try_from(fields.get("kind").unwrap_or_default().to_owned())?;
        let events: Vec<EventKind> =
            EventKind::ALL.iter().copied().filter(|k| fields.get(&format!("event.{}", k.as_str())).is_some()).collect();
        state.services.notify.add(&caller.tenant, kind, fields.get("url").unwrap_or_default(), events).await
    }
    .await;
    match added {
        Ok(c) => match &c.secret {
            Some(secret) => {
                let notice = html! {
                    p class="ok" role="status" id="secret" {
                        "Webhook added. Its signing secret, shown this once — keep it where your receiver verifies "
                        code { "X-Continuity-Signature" } ": " code { (secret) }
                    }
                };
                page(&state, &base, &caller, &csrf, Some(notice)).await
            }
            None => redirect(&format!("{base}/dashboard/notifications?done=added")),
        },
        Err(e) => refused(&base, &caller, &csrf, TITLE, TITLE, &e),
    }
}

/// `POST /dashboard/notifications/{id}/remove`.
pub async fn remove(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    Path(id): Path<String>,
    SignedForm { caller, csrf, .. }: SignedForm<Dashboard>,
) -> Response {
    let removed: Result<(), Error> = async {
        caller.scopes.require(Scope::Admin)?;
        state.services.notify.remove(&caller.tenant, &Id::new(id)?).await
    }
    .await;
    match removed {
        Ok(()) => redirect(&format!("{base}/dashboard/notifications?done=removed")),
        Err(e) => refused(&base, &caller, &csrf, TITLE, TITLE, &e),
    }
}
