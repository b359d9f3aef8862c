//! The API's base URL for a request, the one place it is decided.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use http::Extensions;
use http::request::Parts;

use crate::router::AppState;

/// The base URL the Lambda adapter derives from the request it was given
/// (`https://{Host}/{stage}`); it is used only when no public URL is configured.
#[derive(Debug, Clone)]
pub struct DerivedBaseUrl(pub String);

/// The API's base URL for this request, without a trailing slash: the configured public
/// URL, or — when none is configured — the one the Lambda adapter derived. As an
/// extractor it never fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl(pub String);

impl BaseUrl {
    /// The base URL for a request with these extensions (for middleware, which holds the
    /// whole request rather than extracting from it).
    pub fn of(state: &AppState, extensions: &Extensions) -> Self {
        match extensions.get::<DerivedBaseUrl>() {
            Some(derived) if state.settings.public_url.is_empty() => Self(derived.0.clone()),
            _ => Self(state.settings.public_url.clone()),
        }
    }
}

impl FromRequestParts<AppState> for BaseUrl {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        Ok(Self::of(state, &parts.extensions))
    }
}
