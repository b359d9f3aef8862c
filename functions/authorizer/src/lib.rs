//! The authorizer's decision: `Allow` with the caller's context, `Deny` with the
//! `WWW-Authenticate` value the gateway response turns into a 401 header, or — when a
//! dependency (the table, KMS, the cache) is unreachable — a failed invocation, which API
//! Gateway answers with its `AUTHORIZER_CONFIGURATION_ERROR` response (the template sets
//! it, like `AUTHORIZER_FAILURE`, to 503 with `Retry-After`). A 401
//! there would make OAuth clients throw away a valid token. API Gateway never caches a
//! failed invocation, only Allow and Deny.
//!
//! API Gateway caches the decision per `Authorization` header (the identity source) for
//! a short time and reuses it for every route, so an `Allow` covers the whole API
//! (`…/{stage}/*`); the functions check scopes per route.

use aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest;
use serde::Serialize;
use serde_json::{Map, Value, json};
use services::auth::Authenticator;

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizerResponse {
    pub principal_id: String,
    pub policy_document: Value,
    pub context: Map<String, Value>,
}

fn policy(effect: &str, resource: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{ "Action": "execute-api:Invoke", "Effect": effect, "Resource": resource }]
    })
}

/// The API's base URL as the client used it, when no custom domain is configured:
/// `https://{Host}/{stage}`.
fn base_url_of(event: &ApiGatewayCustomAuthorizerRequestTypeRequest) -> String {
    let host = event.headers.get("host").and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    lambda_support::api_base_url(host, event.request_context.stage.as_deref())
}

/// The resource an `Allow` covers: every method and path of the API's stage
/// (`arn:…:{api}/{stage}/*`), from the method ARN
/// (`arn:…:{api}/{stage}/{METHOD}/{path}`), because the decision is cached per token and
/// reused for other routes.
pub fn whole_api(method_arn: &str) -> String {
    let mut parts = method_arn.splitn(3, '/');
    match (parts.next(), parts.next()) {
        (Some(api), Some(stage)) if api.starts_with("arn:") && !stage.is_empty() => format!("{api}/{stage}/*"),
        _ => method_arn.to_owned(),
    }
}

/// A dependency failed: the invocation fails (API Gateway: 503 + `Retry-After`).
#[derive(Debug)]
pub struct Outage(pub domain::Error);

impl std::fmt::Display for Outage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.0.code, self.0.message)
    }
}

impl std::error::Error for Outage {}

/// Decides one request. `public_url` is the API's base URL for `resource_metadata`.
///
/// # Errors
/// [`Outage`] when a dependency is unreachable (not the caller's fault: no 401).
pub async fn decide(
    auth: &Authenticator,
    event: &ApiGatewayCustomAuthorizerRequestTypeRequest,
    public_url: &str,
) -> Result<AuthorizerResponse, Outage> {
    let method_arn = event.method_arn.clone().unwrap_or_else(|| "*".to_owned());
    let header = event.headers.get("authorization").and_then(|v| v.to_str().ok());
    let derived;
    let base = if public_url.is_empty() {
        derived = base_url_of(event);
        derived.as_str()
    } else {
        public_url.trim_end_matches('/')
    };
    match auth.authenticate_header(header, base).await {
        Ok(caller) => {
            let mut context = Map::new();
            context.insert("tenant".into(), json!(caller.tenant.as_str()));
            context.insert("principal".into(), json!(caller.principal.as_str()));
            context.insert("scopes".into(), json!(caller.scopes.to_oauth_string()));
            context.insert("plan".into(), json!(caller.plan.as_str()));
            context.insert("credential".into(), json!(caller.credential));
            context.insert("teams".into(), json!(caller.teams.join(",")));
            context.insert("projects".into(), json!(caller.projects.join(",")));
            context.insert("toolsets".into(), json!(caller.toolsets.to_list_string()));
            Ok(AuthorizerResponse {
                principal_id: caller.principal.to_string(),
                policy_document: policy("Allow", &whole_api(&method_arn)),
                context,
            })
        }
        Err(e) if matches!(e.code, domain::ErrorCode::Unavailable | domain::ErrorCode::Internal) => {
            tracing::warn!(code = %e.code, detail = ?e.internal, "authorizer failed: a dependency is unavailable (503)");
            Err(Outage(e))
        }
        Err(e) => {
            metrics::add(metrics::Counter::AuthorizerDenials, 1);
            let mut context = Map::new();
            context.insert(
                "wwwAuthenticate".into(),
                json!(format!(
                    "Bearer realm=\"continuity\", resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
                )),
            );
            context.insert("message".into(), json!(e.message));
            Ok(AuthorizerResponse { principal_id: "anonymous".into(), policy_document: policy("Deny", &method_arn), context })
        }
    }
}
