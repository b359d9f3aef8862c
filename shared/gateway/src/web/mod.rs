//! The web layer of the pages a person uses — the OAuth sign-in and consent pages, the
//! approvals console and the dashboard: the request's base URL as an extractor
//! ([`BaseUrl`]); the sign-in, sign-out and signed forms of the pages that sign their own
//! users in ([`SignedPage`], [`SignedForm`]); and the locked-down responses they send.

mod base_url;
mod page;
mod session;

pub use base_url::{BaseUrl, DerivedBaseUrl};
pub(crate) use page::{error_page, locked_down_page, message_of, no_store, page, redirect, status_of};
pub use session::{Refusal, SignedForm, SignedPage, cookie, session_cookie, set_cookie, sign_in, sign_out};
