//! The web layer of the pages a person uses — the OAuth sign-in and consent pages, the
//! approvals console and the dashboard: the request's base URL as an extractor
//! ([`BaseUrl`]); the sign-in, sign-out and signed forms of the pages that sign their own
//! users in ([`SignedPage`], [`SignedForm`]); and the locked-down responses they send.
//!
//! Pages are built with [`maud`], which escapes every interpolated value unless it is
//! wrapped in `PreEscaped` (done only for our own constant style sheets), so no page has
//! a hand escape to forget.

mod base_url;
mod page;
mod session;

pub use base_url::{BaseUrl, DerivedBaseUrl};
pub(crate) use page::{
    alert, document, error_page, locked_down_page, message_of, no_store, page, redirect, status_of, user_fields,
};
pub use session::{
    Refusal, SignedForm, SignedPage, cookie, login_page, login_page_next, session_cookie, set_cookie, sign_in, sign_out,
};
