//! The web layer of the pages a person uses — the OAuth sign-in and consent pages, the
//! approvals console and the dashboard: the request's base URL as an extractor
//! ([`BaseUrl`]).

mod base_url;

pub use base_url::{BaseUrl, DerivedBaseUrl};
