//! The failure taxonomy of SPEC §7.3: one error type for every layer below the edges.
//!
//! Each edge maps an [`Error`] exactly once: HTTP turns it into a status, a code and a
//! JSON payload; MCP turns it into a tool result with `isError: true`. Internal details
//! (`Internal`'s cause) are logged by the edge and never reach a client.

use std::fmt;

/// A taxonomy code. The string form is what clients see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    CapabilityNotFound,
    PlanInsufficient,
    ConnectorNotAvailable,
    ConnectorSyncing,
    ResolverDegraded,
    InvalidRequest,
    Unauthenticated,
    Forbidden,
    NotFound,
    Conflict,
    RateLimited,
    PayloadTooLarge,
    /// A dependency (store, cache, queue) failed or timed out; the client may retry.
    Unavailable,
    /// A bug or an unexpected state; details are logged, never returned.
    Internal,
}

impl ErrorCode {
    /// The code as clients see it (`"PLAN_INSUFFICIENT"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::CapabilityNotFound => "CAPABILITY_NOT_FOUND",
            Self::PlanInsufficient => "PLAN_INSUFFICIENT",
            Self::ConnectorNotAvailable => "CONNECTOR_NOT_AVAILABLE",
            Self::ConnectorSyncing => "CONNECTOR_SYNCING",
            Self::ResolverDegraded => "RESOLVER_DEGRADED",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::Unauthenticated => "UNAUTHENTICATED",
            Self::Forbidden => "FORBIDDEN",
            Self::NotFound => "NOT_FOUND",
            Self::Conflict => "CONFLICT",
            Self::RateLimited => "RATE_LIMITED",
            Self::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            Self::Unavailable => "UNAVAILABLE",
            Self::Internal => "INTERNAL",
        }
    }

    /// The HTTP status of SPEC §7.3.
    pub const fn http_status(self) -> u16 {
        match self {
            Self::CapabilityNotFound | Self::NotFound => 404,
            Self::PlanInsufficient | Self::ConnectorNotAvailable | Self::Forbidden => 403,
            Self::ConnectorSyncing => 202,
            Self::ResolverDegraded | Self::Unavailable => 503,
            Self::InvalidRequest => 400,
            Self::Unauthenticated => 401,
            Self::Conflict => 409,
            Self::RateLimited => 429,
            Self::PayloadTooLarge => 413,
            Self::Internal => 500,
        }
    }

    /// Whether a client may usefully retry the same request later.
    pub const fn retryable(self) -> bool {
        matches!(self, Self::ConnectorSyncing | Self::ResolverDegraded | Self::RateLimited | Self::Unavailable)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One invalid input field and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// The payload a code may carry (SPEC §7.3 "payload" column).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ErrorPayload {
    pub upgrade_url: Option<String>,
    pub connect_url: Option<String>,
    /// Sync progress in [0, 1] for `CONNECTOR_SYNCING`.
    pub progress: Option<f64>,
    pub retry_after_secs: Option<u64>,
    pub field_errors: Vec<FieldError>,
    /// The scope that was missing, for `FORBIDDEN` on a scope check.
    pub required_scope: Option<String>,
}

/// The one error type of the domain, ports and services.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub code: ErrorCode,
    /// A message safe to show a client.
    pub message: String,
    /// Boxed so `Result<T, Error>` stays small on the happy path.
    pub payload: Box<ErrorPayload>,
    /// Internal detail for logs only; never serialised to a client.
    pub internal: Option<String>,
}

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), payload: Box::default(), internal: None }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    /// `INVALID_REQUEST` naming one field.
    pub fn invalid_field(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        let message = message.into();
        let mut e = Self::new(ErrorCode::InvalidRequest, format!("{field}: {message}"));
        e.payload.field_errors.push(FieldError { field, message });
        e
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, format!("{} not found", what.into()))
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthenticated, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    /// `FORBIDDEN` because a scope is missing (rendered as `insufficient_scope` over HTTP).
    pub fn missing_scope(scope: &str) -> Self {
        let mut e = Self::forbidden(format!("this requires the scope {scope}"));
        e.payload.required_scope = Some(scope.to_owned());
        e
    }

    /// A dependency failed; `detail` goes to logs only.
    pub fn unavailable(detail: impl fmt::Display) -> Self {
        let mut e = Self::new(ErrorCode::Unavailable, "a dependency is unavailable; retry shortly");
        e.payload.retry_after_secs = Some(1);
        e.internal = Some(detail.to_string());
        e
    }

    /// An unexpected failure; `detail` goes to logs only.
    pub fn internal(detail: impl fmt::Display) -> Self {
        let mut e = Self::new(ErrorCode::Internal, "internal error");
        e.internal = Some(detail.to_string());
        e
    }

    /// The error as an operator should read it (the CLI, a start-up failure): the
    /// client-safe message followed by what actually failed, when that is known.
    pub fn for_operator(&self) -> String {
        match &self.internal {
            Some(detail) if !self.message.contains(detail.as_str()) => format!("{}: {} ({detail})", self.code, self.message),
            _ => self.to_string(),
        }
    }

    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.payload.retry_after_secs = Some(secs);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_taxonomy() {
        assert_eq!(ErrorCode::CapabilityNotFound.http_status(), 404);
        assert_eq!(ErrorCode::PlanInsufficient.http_status(), 403);
        assert_eq!(ErrorCode::ConnectorSyncing.http_status(), 202);
        assert_eq!(ErrorCode::ResolverDegraded.http_status(), 503);
        assert_eq!(ErrorCode::RateLimited.http_status(), 429);
        assert_eq!(ErrorCode::Unauthenticated.http_status(), 401);
    }

    #[test]
    fn internal_detail_is_not_in_the_message() {
        let e = Error::internal("disk /var/x exploded");
        assert!(!e.message.contains("disk"));
        assert!(!e.to_string().contains("disk"));
        assert!(e.for_operator().contains("disk /var/x exploded"), "the operator sees the cause");
    }
}
