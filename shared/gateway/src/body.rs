//! Request bodies: a size cap on every route, and strict JSON for our own endpoints.

use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use domain::Error;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// The largest request body any route accepts (SPEC §10).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// The largest refused body still read to its end before the 413 (beyond, the connection
/// is closed after the answer).
const LINGER_BYTES: u64 = 16 * 1024 * 1024;

/// Reads a body to its end, keeping nothing.
async fn drain(body: Body) {
    use http_body_util::BodyExt as _;
    let mut body = body;
    while let Some(Ok(_)) = body.frame().await {}
}

/// How long a client has to send a whole request body once its head has arrived.
pub const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Buffers the body up to [`MAX_BODY_BYTES`] within [`BODY_READ_TIMEOUT`]; anything
/// larger is refused with 413 `PAYLOAD_TOO_LARGE` (400 `invalid_request` on the OAuth
/// endpoints, as RFC 6749 clients expect) before a handler (or rmcp) sees a byte of it,
/// and a body that does not arrive in time with 408.
///
/// # Errors
/// The refusal to answer with, which ends the request.
pub async fn buffer(req: Request) -> Result<Request, Response> {
    let oauth = req.uri().path().starts_with("/oauth/");
    let too_big = || {
        let message = format!("the request body exceeds the limit of {MAX_BODY_BYTES} bytes");
        if oauth {
            // OAuth clients expect RFC 6749 errors.
            let body = serde_json::json!({ "error": "invalid_request", "error_description": message });
            return (http::StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
        }
        ApiError::from(Error::new(domain::ErrorCode::PayloadTooLarge, message)).into_response()
    };
    let declared =
        req.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        // Read (and drop) what the client is still sending, up to a bound, so it sees the
        // 413 instead of a connection closed under its feet mid-write.
        if declared.is_some_and(|n| n <= LINGER_BYTES) {
            let _ = tokio::time::timeout(BODY_READ_TIMEOUT, drain(req.into_body())).await;
        }
        return Err(too_big());
    }
    let (parts, body) = req.into_parts();
    let mut read = std::pin::pin!(axum::body::to_bytes(body, MAX_BODY_BYTES));
    // A small body usually arrived with the head and is read at once, without arming a
    // timer; one still on its way gets the rest of the bounded time.
    let at_once = std::future::poll_fn(|cx| std::task::Poll::Ready(read.as_mut().poll(cx))).await;
    let read = match at_once {
        std::task::Poll::Ready(read) => read,
        std::task::Poll::Pending => match tokio::time::timeout(BODY_READ_TIMEOUT, read).await {
            Ok(read) => read,
            // A client trickling its body holds a connection open; it gets a bounded time.
            Err(_) => {
                let message = format!("the request body did not arrive within {} s", BODY_READ_TIMEOUT.as_secs());
                let mut r = ApiError::from(Error::invalid(message)).into_response();
                *r.status_mut() = http::StatusCode::REQUEST_TIMEOUT;
                r.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
                return Err(r);
            }
        },
    };
    if let Some(phase) = parts.extensions.get::<crate::server::ConnPhase>() {
        phase.body_received();
    }
    match read {
        Ok(bytes) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Err(_) => Err(too_big()),
    }
}

/// JSON body extractor: malformed JSON, a wrong content type and unknown fields are all
/// `INVALID_REQUEST` with serde's explanation (which names the offending field).
pub struct StrictJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for StrictJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !is_json {
            return Err(Error::invalid("the request body must be JSON (Content-Type: application/json)").into());
        }
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|_| ApiError::from(Error::invalid("the request body could not be read")))?;
        serde_json::from_slice(&bytes).map(StrictJson).map_err(|e| Error::invalid(format!("invalid JSON body: {e}")).into())
    }
}

/// The `method` of a POSTed JSON-RPC message (`None` for a response or notification
/// without one), put in the request's extensions by [`mcp_json_guard`].
#[derive(Debug, Clone)]
pub struct JsonRpcMethod(pub Option<String>);

/// Guards `/mcp` POSTs before rmcp: malformed JSON is a JSON-RPC parse error (-32700) and
/// a batch array an invalid request (-32600), both with HTTP 400 and a clear message —
/// one JSON-RPC message per POST (SPEC §7.1).
pub async fn mcp_json_guard(req: Request, next: Next) -> Response {
    match guard_mcp_json(req).await {
        Ok((req, label)) => {
            let mut resp = next.run(req).await;
            if let Some(label) = label {
                resp.extensions_mut().insert(label);
            }
            resp
        }
        Err(refused) => refused,
    }
}

/// [`mcp_json_guard`]'s check without the middleware around it (for `/mcp`, which runs
/// its steps in one handler): a POST's body read once and checked, the request rebuilt
/// with its [`JsonRpcMethod`], and the metrics route of the message; anything but a
/// POST passes unchanged. The refusal to answer with when the message is not one
/// JSON-RPC object with object params.
pub async fn guard_mcp_json(req: Request) -> Result<(Request, Option<crate::observe::RouteLabel>), Response> {
    if req.method() != http::Method::POST {
        return Ok((req, None));
    }
    let (parts, body) = req.into_parts();
    // `body::buffer` already buffered and capped the body.
    let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(_) => return Err(jsonrpc_error(-32600, "the request body could not be read".into())),
    };
    use crate::envelope::{Message, Params};
    match crate::envelope::read(&bytes) {
        Err(e) => Err(jsonrpc_error(-32700, format!("Parse error: the body is not valid JSON ({e})"))),
        Ok(Message::Array) => {
            Err(jsonrpc_error(-32600, "Invalid request: send one JSON-RPC message per POST; batches are not supported".into()))
        }
        // MCP parameters are always an object (JSON-RPC's by-position arrays are not used).
        Ok(Message::Object { params: Params::NotObject, .. }) => {
            Err(jsonrpc_error(-32602, "Invalid params: MCP request parameters are a JSON object".into()))
        }
        Ok(Message::Object { method, params }) => {
            // The router picks stateless or session handling by method; read once, here.
            let tool = match &params {
                Params::Object { name } => name.as_deref(),
                _ => None,
            };
            let label = crate::observe::mcp_route(method.as_deref(), tool);
            let mut req = Request::from_parts(parts, Body::from(bytes));
            req.extensions_mut().insert(JsonRpcMethod(method));
            Ok((req, Some(label)))
        }
        Ok(Message::Other) => Err(jsonrpc_error(-32600, "Invalid request: a JSON-RPC message is a JSON object".into())),
    }
}

fn jsonrpc_error(code: i64, message: String) -> Response {
    let body = serde_json::json!({ "jsonrpc": "2.0", "id": null, "error": { "code": code, "message": message } });
    (http::StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// The `?cursor=` query of a paged listing.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cursor {
    cursor: Option<String>,
}

impl Cursor {
    /// The first page of `size`, or the page after the cursor.
    pub fn page(self, size: u32) -> domain::PageRequest {
        self.cursor.map_or_else(|| domain::PageRequest::first(size), |c| domain::PageRequest::after(size, c))
    }
}
