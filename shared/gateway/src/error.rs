//! Taxonomy errors to HTTP (SPEC §7.3): status, `{"error": {code, message, …}}`, and the
//! headers clients act on (`WWW-Authenticate`, `Retry-After`). Internal detail is logged
//! here and never sent.

use axum::Json;
use axum::response::{IntoResponse, Response};
use domain::{Error, ErrorCode};
use http::{HeaderValue, StatusCode};
use serde_json::{Value, json};

#[derive(Debug)]
pub struct ApiError {
    pub error: Error,
    /// The protected-resource metadata URL for `WWW-Authenticate` on 401.
    pub resource_metadata: Option<String>,
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        Self { error, resource_metadata: None }
    }
}

/// The HTTP status of a taxonomy error (SPEC §7.3), for the JSON API and the console pages.
pub fn status(e: &Error) -> StatusCode {
    StatusCode::from_u16(e.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

pub fn error_body(e: &Error) -> Value {
    json!({ "error": mcp::render::error_fields(e) })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let e = &self.error;
        services::log_failure(e, "http");
        let status = status(e);
        let mut resp = (status, Json(error_body(e))).into_response();
        let headers = resp.headers_mut();
        match e.code {
            ErrorCode::Unauthenticated => {
                let mut v = String::from("Bearer realm=\"continuity\"");
                if let Some(url) = &self.resource_metadata {
                    v.push_str(&format!(", resource_metadata=\"{url}\""));
                }
                if let Ok(h) = HeaderValue::from_str(&v) {
                    headers.insert(http::header::WWW_AUTHENTICATE, h);
                }
            }
            ErrorCode::Forbidden => {
                if let Some(scope) = &e.payload.required_scope {
                    let v = format!("Bearer error=\"insufficient_scope\", scope=\"{scope}\"");
                    if let Ok(h) = HeaderValue::from_str(&v) {
                        headers.insert(http::header::WWW_AUTHENTICATE, h);
                    }
                }
            }
            _ => {}
        }
        if let Some(secs) = e.payload.retry_after_secs {
            headers.insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}
