//! The review queue: records whose readback failed (an index write lost, the embedder
//! down, an index entry whose record is gone), each with why, and Retry (index it again
//! now, with readback) or Forget (take it off the queue) for approvers and admins
//! (`approvals:decide` or `admin`).

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use domain::{Id, PageRequest};
use maud::{Markup, html};
use serde::Deserialize;

use super::{Dashboard, refused, shell, signed_in};
use crate::router::AppState;
use crate::web::{BaseUrl, SignedForm, redirect};

#[derive(Deserialize, Default)]
pub struct ReviewQuery {
    done: Option<String>,
    cursor: Option<String>,
}

/// Rows on one page.
const PAGE: u32 = 50;

fn action(base: &str, csrf: &str, kind: &str, doc: &str, what: &str, label: &str) -> Markup {
    html! {
        form method="post" action={ (base) "/dashboard/review/" (kind) "/" (doc) "/" (what) } style="display:inline" {
            input type="hidden" name="csrf" value=(csrf);
            button type="submit" id={ (what) "-" (kind) "-" (doc) } { (label) }
        }
    }
}

/// `GET /dashboard/review`.
pub async fn review(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    headers: HeaderMap,
    Query(q): Query<ReviewQuery>,
) -> Response {
    let (caller, csrf) = match signed_in(&state, &base, &headers).await {
        Ok(s) => s,
        Err(page) => return page,
    };
    let page = PageRequest { cursor: q.cursor.filter(|c| !c.is_empty()), limit: Some(PAGE) };
    let queue = match state.services.search.review_queue(&caller, &page).await {
        Ok(p) => p,
        Err(e) => return refused(&base, &caller, &csrf, "Review queue", "Review", &e),
    };
    let notice = match q.done.as_deref() {
        Some("verified") => Some("Indexed again and verified: it left the queue."),
        Some("unverified") => Some("Indexed again, but its readback failed again: it stays in the queue (see why)."),
        Some("forgotten") => Some("Taken off the queue."),
        _ => None,
    };
    let now = state.services.now();
    let body = html! {
        @if let Some(n) = notice { p class="ok" role="status" { (n) } }
        p class="muted" {
            "Records whose readback failed: they are stored, but search may miss them. "
            b { "Retry" } " indexes one again now; " b { "Forget" }
            " takes it off the queue (an orphan's leftover index entries go too). The daily reindex retries records missing from the index on its own."
        }
        @if queue.items.is_empty() {
            p class="muted" id="review-empty" { "Nothing to review: every record's readback passed." }
        } @else {
            table id="review" {
                tr { th { "record" } th { "scope" } th { "why" } th { "when" } th { "" } }
                @for v in &queue.items {
                    tr {
                        td {
                            @if v.title.is_empty() { code { (v.doc.as_str()) } } @else { (v.title) }
                            br; small class="muted" { (v.kind) }
                        }
                        td { (v.scope.storage_key()) }
                        td { (v.reason) }
                        td { (super::when(v.at, now)) }
                        td {
                            @if v.kind != services::search::ORPHAN_KIND {
                                (action(&base, &csrf, &v.kind, v.doc.as_str(), "retry", "Retry")) " "
                            }
                            (action(&base, &csrf, &v.kind, v.doc.as_str(), "forget", "Forget"))
                        }
                    }
                }
            }
            @if let Some(next) = &queue.next_cursor {
                @let next: String = form_urlencoded::byte_serialize(next.as_bytes()).collect();
                p { a id="next-page" href={ (base) "/dashboard/review?cursor=" (next) } { "Next →" } }
            }
        }
    };
    shell(&base, &caller, &csrf, "Review queue", "Review", html! {}, body)
}

/// `POST /dashboard/review/{kind}/{doc}/retry`.
pub async fn retry(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    Path((kind, doc)): Path<(String, String)>,
    SignedForm { caller, csrf, .. }: SignedForm<Dashboard>,
) -> Response {
    let result = match Id::new(doc) {
        Ok(doc) => state.services.search.retry_review(&caller, &kind, &doc).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(v) => redirect(&format!("{base}/dashboard/review?done={}", if v.verified { "verified" } else { "unverified" })),
        Err(e) => refused(&base, &caller, &csrf, "Review queue", "Review", &e),
    }
}

/// `POST /dashboard/review/{kind}/{doc}/forget`.
pub async fn forget(
    State(state): State<AppState>,
    BaseUrl(base): BaseUrl,
    Path((kind, doc)): Path<(String, String)>,
    SignedForm { caller, csrf, .. }: SignedForm<Dashboard>,
) -> Response {
    let result = match Id::new(doc) {
        Ok(doc) => state.services.search.forget_review(&caller, &kind, &doc).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => redirect(&format!("{base}/dashboard/review?done=forgotten")),
        Err(e) => refused(&base, &caller, &csrf, "Review queue", "Review", &e),
    }
}
