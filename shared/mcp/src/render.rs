//! Rendering for models: structured content plus a readable text, and taxonomy errors
//! as `isError` tool results (SPEC §7.3). Internal details never reach the client.

use domain::Error;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

/// A successful result: `text` for the model to read, `structured` for programs.
pub fn success(structured: Value, text: String) -> CallToolResult {
    let mut r = CallToolResult::structured(structured);
    r.content = vec![ContentBlock::text(text)];
    r
}

/// The client-visible fields of a taxonomy error — code, message and the payload of
/// SPEC §7.3 — identical in MCP results and HTTP bodies. Internal detail is never here.
pub fn error_fields(e: &Error) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("code".into(), json!(e.code.as_str()));
    body.insert("message".into(), json!(e.message));
    let p = &e.payload;
    if let Some(u) = &p.upgrade_url {
        body.insert("upgrade_url".into(), json!(u));
    }
    if let Some(u) = &p.connect_url {
        body.insert("connect_url".into(), json!(u));
    }
    if let Some(pr) = p.progress {
        body.insert("syncing".into(), json!(true));
        body.insert("progress".into(), json!(pr));
        body.insert("data".into(), Value::Null);
    }
    if let Some(s) = p.retry_after_secs {
        body.insert("retry_after".into(), json!(s));
    }
    if !p.field_errors.is_empty() {
        body.insert("field_errors".into(), serde_json::to_value(&p.field_errors).unwrap_or(Value::Null));
    }
    if let Some(s) = &p.required_scope {
        body.insert("required_scope".into(), json!(s));
    }
    body
}

/// The taxonomy error as a tool result with `isError: true` and the code in structured content.
pub fn error(e: &Error) -> CallToolResult {
    services::log_failure(e, "mcp");
    let body = error_fields(e);
    let text = format!("{}: {}", e.code, e.message);
    let mut r = CallToolResult::structured_error(Value::Object(body));
    r.content = vec![ContentBlock::text(text)];
    r
}
