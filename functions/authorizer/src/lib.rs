//! The authorizer's decision: `Allow` with the caller's context, or `Deny` with the
//! `WWW-Authenticate` value the gateway response turns into a 401 header.
//!
//! It never fails an invocation and never panics: every problem — a missing header, a
//! bad key, an unreachable table — is a `Deny`, so API Gateway never falls back to a
//! bare 500 or, worse, caches an error.

use aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest;
use serde::Serialize;
use serde_json::{Map, Value, json};
use services::Services;

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

/// Decides one request. `public_url` is the API's base URL for `resource_metadata`.
pub async fn decide(
    services: &Services,
    event: &ApiGatewayCustomAuthorizerRequestTypeRequest,
    public_url: &str,
) -> AuthorizerResponse {
    let resource = event.method_arn.clone().unwrap_or_else(|| "*".to_owned());
    let header = event.headers.get("authorization").and_then(|v| v.to_str().ok());
    let derived;
    let base = if public_url.is_empty() {
        derived = base_url_of(event);
        derived.as_str()
    } else {
        public_url.trim_end_matches('/')
    };
    match services.auth.authenticate_header(header, base).await {
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
            AuthorizerResponse {
                principal_id: caller.principal.to_string(),
                policy_document: policy("Allow", &resource),
                context,
            }
        }
        Err(e) => {
            if e.code != domain::ErrorCode::Unauthenticated {
                tracing::warn!(code = %e.code, detail = ?e.internal, "authorizer denied because a dependency failed");
            }
            let mut context = Map::new();
            context.insert(
                "wwwAuthenticate".into(),
                json!(format!(
                    "Bearer realm=\"continuity\", resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
                )),
            );
            context.insert("message".into(), json!(e.message));
            AuthorizerResponse { principal_id: "anonymous".into(), policy_document: policy("Deny", &resource), context }
        }
    }
}
