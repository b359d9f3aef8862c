//! The stateless `tools/call` of a plain MCP client, answered without rmcp's per-request
//! machinery (a service built per request, three channels, four tasks, a handshake
//! skipped by hand): the hottest request there is, measured in
//! `benches/http_entity_get.sh`.
//!
//! It takes only requests rmcp would serve the same way — a strict subset: a POST
//! without a session, `Content-Type: application/json`, an `Accept` naming both
//! `application/json` and `text/event-stream` without parameters, a supported
//! `MCP-Protocol-Version` negotiated once (not per request), no `Origin` (not a
//! browser), a `Host` the DNS-rebinding check allows, no other `Mcp-*` header, and a
//! body that is exactly `{"jsonrpc":"2.0","id":…,"method":"tools/call","params":{"name":…,
//! "arguments":{…}}}` (no `_meta`: an idempotency key or a progress token goes the rmcp
//! way). Anything else goes to rmcp untouched. The call itself is the one rmcp makes
//! ([`ContinuityMcp::run`]: authorization, the ADK, the deadline, audit). A success is
//! written straight from the tool's typed output into the body — the JSON rmcp writes for
//! it, with the structured content's members in the output type's order rather than
//! sorted (rmcp holds it as a JSON tree, built and serialized again); an error is rmcp's
//! own message type.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse as _, Response};
use domain::principal::CallerContext;
use mcp::ContinuityMcp;
use mcp::tools::Answer;
use rmcp::model::{JsonObject, RequestId, ServerJsonRpcMessage, ServerResult};
use serde::Deserialize;

use crate::body::{JsonRpcMethod, MAX_BODY_BYTES};

/// The protocol versions served here: those a client negotiated at `initialize` and
/// repeats in the header (newer ones negotiate per request, which rmcp does).
const VERSIONS: [&str; 2] = ["2025-06-18", "2025-11-25"];

/// What the fast path checks a request against, built once with the router.
pub struct FastCall {
    mcp: ContinuityMcp,
    /// `Host` values allowed (host, optional port), as rmcp parses them; empty allows any.
    allowed_hosts: Vec<(String, Option<u16>)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Call {
    jsonrpc: String,
    id: RequestId,
    method: String,
    params: Params,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
}

impl FastCall {
    pub fn new(mcp: ContinuityMcp, allowed_hosts: &[String]) -> Self {
        let allowed_hosts = allowed_hosts.iter().filter_map(|h| authority(h)).collect();
        Self { mcp, allowed_hosts }
    }

    /// Answers `req` when it is a plain stateless `tools/call`; otherwise gives it back
    /// unchanged for rmcp.
    ///
    /// # Errors
    /// The request itself, when it is not one this path takes.
    pub async fn answer(&self, req: Request) -> Result<Response, Request> {
        if !self.takes(&req) {
            return Err(req);
        }
        let Some(caller) = req.extensions().get::<CallerContext>().cloned() else { return Err(req) };
        let (parts, body) = req.into_parts();
        // `body::buffer` buffered and capped it already: this reads the bytes back.
        let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
            return Err(Request::from_parts(parts, Body::empty()));
        };
        let call = match serde_json::from_slice::<Call>(&bytes) {
            Ok(c) if c.jsonrpc == "2.0" && c.method == "tools/call" => c,
            _ => return Err(Request::from_parts(parts, Body::from(bytes))),
        };
        let body = match self.mcp.run(&caller, &call.params.name, call.params.arguments).await {
            Ok(answer) => success(&call.id, &answer).or_else(|e| failure(call.id, &e)),
            Err(e) => failure(call.id, &e),
        };
        Ok(match body {
            Ok(body) => ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response(),
            Err(e) => {
                tracing::error!(error = %e, "serializing a tool call's answer");
                http::StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        })
    }

    /// Whether the request's method and headers are ones rmcp would serve statelessly
    /// with a JSON answer, with nothing for rmcp to negotiate or validate beyond them.
    fn takes(&self, req: &Request) -> bool {
        let h = req.headers();
        req.method() == http::Method::POST
            && req.extensions().get::<JsonRpcMethod>().is_some_and(|m| m.0.as_deref() == Some("tools/call"))
            && !h.contains_key(header::ORIGIN)
            && json_content(h)
            && accepts_json_and_sse(h)
            && h.get("mcp-protocol-version").and_then(|v| v.to_str().ok()).is_some_and(|v| VERSIONS.contains(&v))
            && h.keys().all(|k| !k.as_str().starts_with("mcp-") || k == "mcp-protocol-version")
            && host_allowed(&self.allowed_hosts, h)
    }
}

/// The JSON-RPC response rmcp writes for a successful call with this answer (for the
/// versions served here: no `resultType`, `isError: false`), the structured content
/// written from the typed output in place.
fn success(id: &RequestId, answer: &Answer) -> Result<Vec<u8>, domain::Error> {
    let json = |e: serde_json::Error| domain::Error::internal(format!("a tool's answer: {e}"));
    let mut out = Vec::with_capacity(512 + answer.text.len() * 2);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    serde_json::to_writer(&mut out, id).map_err(json)?;
    out.extend_from_slice(br#","result":{"content":[{"type":"text","text":"#);
    serde_json::to_writer(&mut out, &answer.text).map_err(json)?;
    out.extend_from_slice(br#"}],"structuredContent":"#);
    answer.write_structured(&mut out)?;
    out.extend_from_slice(br#","isError":false}}"#);
    Ok(out)
}

/// rmcp's own response for a failed call: the taxonomy error as an `isError` result.
fn failure(id: RequestId, e: &domain::Error) -> Result<Vec<u8>, serde_json::Error> {
    let mut result = ServerResult::CallToolResult(mcp::render::error(e));
    // What rmcp's handler does for every version served here (before 2026-07-28).
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
    serde_json::to_vec(&ServerJsonRpcMessage::response(result, id))
}

/// rmcp's DNS-rebinding check: the `Host` names an allowed host (and its port, when the
/// allowed entry names one); an empty list allows any.
fn host_allowed(allowed: &[(String, Option<u16>)], h: &HeaderMap) -> bool {
    if allowed.is_empty() {
        return true;
    }
    let Some((host, port)) = h.get(header::HOST).and_then(|v| v.to_str().ok()).and_then(authority) else {
        return false;
    };
    allowed.iter().any(|(a, allowed_port)| *a == host && allowed_port.is_none_or(|p| port == Some(p)))
}

/// A `Host` value as rmcp compares it: the host lower-cased without IPv6 brackets, and
/// the port.
fn authority(value: &str) -> Option<(String, Option<u16>)> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    let normal = |host: &str| host.trim_matches('[').trim_matches(']').to_ascii_lowercase();
    match http::uri::Authority::try_from(value) {
        Ok(a) => Some((normal(a.host()), a.port_u16())),
        Err(_) => Some((normal(value), None)),
    }
}

fn json_content(h: &HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json")))
}

/// `Accept` names both media types, plainly (a weight or parameter goes the rmcp way).
fn accepts_json_and_sse(h: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in h.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { return false };
        for item in value.split(',') {
            let item = item.trim();
            if item.contains(';') {
                return false;
            }
            json |= item.eq_ignore_ascii_case("application/json");
            sse |= item.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn accept_must_name_both_types_plainly() {
        assert!(accepts_json_and_sse(&headers(&[("accept", "application/json, text/event-stream")])));
        assert!(accepts_json_and_sse(&headers(&[("accept", "text/event-stream"), ("accept", "application/json")])));
        assert!(!accepts_json_and_sse(&headers(&[("accept", "application/json")])));
        assert!(!accepts_json_and_sse(&headers(&[("accept", "application/json;q=0, text/event-stream")])));
        assert!(!accepts_json_and_sse(&headers(&[])));
    }

    #[test]
    fn hosts_compare_as_rmcp_does() {
        let fast = |allowed: &[&str], host: &str| {
            let allowed: Vec<(String, Option<u16>)> = allowed.iter().filter_map(|h| authority(h)).collect();
            host_allowed(&allowed, &headers(&[("host", host)]))
        };
        assert!(fast(&["localhost"], "LOCALHOST:8787"));
        assert!(fast(&["127.0.0.1:8787"], "127.0.0.1:8787"));
        assert!(!fast(&["127.0.0.1:8787"], "127.0.0.1:9999"));
        assert!(!fast(&["127.0.0.1:8787"], "127.0.0.1"));
        assert!(!fast(&["localhost"], "evil.example"));
        assert!(fast(&["::1"], "[::1]:8787"));
        assert!(fast(&[], "anything.example"));
        assert!(!host_allowed(&[("localhost".into(), None)], &headers(&[])), "no Host: rmcp decides");
    }

    /// Byte for byte what rmcp writes, for an output whose members are declared in sorted
    /// order (rmcp's JSON tree sorts them; the fast path keeps the declared order).
    #[test]
    fn a_success_is_written_as_rmcp_writes_it() {
        #[derive(serde::Serialize)]
        struct Out {
            count: u32,
            entity: serde_json::Value,
            missing: Option<String>,
            names: Vec<&'static str>,
        }
        let out = Out {
            count: 2,
            entity: serde_json::json!({"id": "acme-1", "attributes": {"name": "Acme \"Corp\"", "tier": "gold"}}),
            missing: None,
            names: vec!["a", "ü"],
        };
        let answer = Answer::new("account acme-1\n  name: \"Acme\" ü".into(), out);
        for id in [serde_json::json!(7), serde_json::json!("s-2")] {
            let id: RequestId = serde_json::from_value(id).unwrap();
            let ours = success(&id, &answer).unwrap();
            let mut result = ServerResult::CallToolResult(mcp::render::success(answer.to_value().unwrap(), answer.text.clone()));
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
            let theirs = serde_json::to_vec(&ServerJsonRpcMessage::response(result, id)).unwrap();
            assert_eq!(String::from_utf8(ours).unwrap(), String::from_utf8(theirs).unwrap());
        }
    }

    #[test]
    fn content_type_is_json_with_or_without_parameters() {
        assert!(json_content(&headers(&[("content-type", "application/json")])));
        assert!(json_content(&headers(&[("content-type", "Application/JSON; charset=utf-8")])));
        assert!(!json_content(&headers(&[("content-type", "text/plain")])));
    }
}
