//! The authorizer driven with `events/authorizer-request*.json`: it allows a valid key
//! with the caller's context, and denies everything else without failing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest;
use domain::TenantId;
use domain::principal::Scopes;
use domain::tenant::{Department, Industry, PlanTier};
use serde_json::Value;
use services::Services;
use services::admin::KeyRequest;

const PUBLIC: &str = "https://abcdef1234.execute-api.eu-west-1.amazonaws.com/prod";

fn event(name: &str, authorization: Option<&str>) -> ApiGatewayCustomAuthorizerRequestTypeRequest {
    let mut v = continuity_tests::event(name);
    if let Some(a) = authorization {
        v["headers"]["Authorization"] = Value::String(a.to_owned());
    }
    serde_json::from_value(v).expect("authorizer event")
}

async fn setup(dir: &std::path::Path) -> (Services, String) {
    let backend = store_embedded::open_backend(dir, Arc::new(ports::SystemClock)).expect("backend");
    let s = Services::new(backend);
    let demo = TenantId::new("demo").unwrap();
    s.admin.create_tenant(demo.clone(), PlanTier::Pro, Department::Finance, Industry::Retail).await.unwrap();
    let key = s
        .admin
        .create_key(KeyRequest {
            tenant: demo,
            scopes: Scopes::parse("mcp:tools tenant:read").unwrap(),
            principal: None,
            teams: vec!["platform".into()],
            projects: vec!["apollo".into(), "zephyr".into()],
        })
        .await
        .unwrap();
    (s, key.token)
}

#[tokio::test]
async fn a_valid_key_is_allowed_with_its_context() {
    let dir = tempfile::tempdir().unwrap();
    let (s, token) = setup(dir.path()).await;
    let ev = event("authorizer-request.json", Some(&format!("Bearer {token}")));
    let r = continuity_authorizer::decide(&s.auth, &ev, PUBLIC).await.unwrap();
    let doc = &r.policy_document["Statement"][0];
    assert_eq!(doc["Effect"], "Allow");
    // Cached per token and reused for other routes: the Allow covers the whole stage.
    assert_eq!(doc["Resource"], "arn:aws:execute-api:eu-west-1:123456789012:abcdef1234/prod/*");
    assert_eq!(r.context["tenant"], "demo");
    assert_eq!(r.context["plan"], "pro");
    assert_eq!(r.context["scopes"], "mcp:tools tenant:read");
    assert_eq!(r.context["projects"], "apollo,zephyr");
    assert!(r.principal_id.starts_with("svc-"));

    // What the authorizer emits is exactly what the MCP Lambda accepts.
    let fields = r.context.clone().into_iter().collect();
    let caller = gateway::lambda::caller_from_authorizer(&fields).expect("the MCP Lambda accepts the context");
    assert_eq!(caller.tenant.as_str(), "demo");
    assert_eq!(caller.plan, PlanTier::Pro);
    assert_eq!(caller.scopes, Scopes::parse("mcp:tools tenant:read").unwrap());
    assert_eq!(caller.teams, ["platform"]);
    assert_eq!(caller.projects, ["apollo", "zephyr"]);
}

#[tokio::test]
async fn every_bad_credential_is_denied_never_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (s, token) = setup(dir.path()).await;
    let cases = vec![
        event("authorizer-request-missing.json", None),
        event("authorizer-request.json", None), // the placeholder key in the sample event
        event("authorizer-request.json", Some("Basic dXNlcjpwYXNz")),
        event("authorizer-request.json", Some(&format!("Bearer {token}x"))),
        event("authorizer-request.json", Some(&format!("Bearer {}", "A".repeat(10_000)))),
        event("authorizer-request.json", Some("Bearer ctn_other.k1.0000000000000000000000000000000000000000")),
    ];
    for ev in cases {
        let r = continuity_authorizer::decide(&s.auth, &ev, PUBLIC).await.unwrap();
        assert_eq!(r.policy_document["Statement"][0]["Effect"], "Deny");
        let www = r.context["wwwAuthenticate"].as_str().unwrap();
        assert!(
            www.starts_with("Bearer ")
                && www.contains(&format!("resource_metadata=\"{PUBLIC}/.well-known/oauth-protected-resource/mcp\"")),
            "{www}"
        );
        assert!(!r.context.contains_key("tenant"));
    }
    // Without a configured public URL, resource_metadata points at the API as called.
    let r = continuity_authorizer::decide(&s.auth, &event("authorizer-request-missing.json", None), "").await.unwrap();
    let www = r.context["wwwAuthenticate"].as_str().unwrap();
    assert!(
        www.contains("resource_metadata=\"https://abcdef1234.execute-api.eu-west-1.amazonaws.com/prod/.well-known/"),
        "{www}"
    );

    // Revocation takes effect on the next decision (API Gateway caches one for 60 s).
    let key_id = token.split('.').nth(1).unwrap();
    s.admin.revoke_key(&TenantId::new("demo").unwrap(), &domain::Id::new(key_id).unwrap()).await.unwrap();
    let r = continuity_authorizer::decide(&s.auth, &event("authorizer-request.json", Some(&format!("Bearer {token}"))), PUBLIC)
        .await
        .unwrap();
    assert_eq!(r.policy_document["Statement"][0]["Effect"], "Deny");
}

/// OAuth access tokens go through the same one token library: allowed with their
/// context when issued for this API, denied otherwise.
#[tokio::test]
async fn access_tokens_are_verified_by_the_same_library() {
    use services::admin::NewServiceClient;
    use services::oauth::{ClientCredentials, Params};
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = setup(dir.path()).await;
    let c = s
        .admin
        .create_service_client(NewServiceClient {
            tenant: TenantId::new("demo").unwrap(),
            name: "etl".into(),
            scopes: Scopes::parse("mcp:tools tenant:read").unwrap(),
            jwt_bearer: false,
            toolsets: Default::default(),
        })
        .await
        .unwrap();
    let creds = ClientCredentials { basic: Some((c.client_id.to_string(), c.client_secret.clone())) };
    let params = Params::parse(b"grant_type=client_credentials").unwrap();
    // The API as the sample event calls it (no custom domain): https://{Host}/{stage}.
    let api = "https://abcdef1234.execute-api.eu-west-1.amazonaws.com/prod";
    let token = s.oauth.token(api, &params, &creds).await.unwrap().access_token;
    let r = continuity_authorizer::decide(&s.auth, &event("authorizer-request.json", Some(&format!("Bearer {token}"))), "")
        .await
        .unwrap();
    assert_eq!(r.policy_document["Statement"][0]["Effect"], "Allow", "{:?}", r.context);
    assert_eq!(r.context["tenant"], "demo");
    assert_eq!(r.context["scopes"], "mcp:tools tenant:read");
    assert!(r.context["credential"].as_str().unwrap().starts_with("jwt:"));
    // The same token presented to another API (its audience and issuer differ): denied.
    let other = "https://mcp.other.example.com";
    let r = continuity_authorizer::decide(&s.auth, &event("authorizer-request.json", Some(&format!("Bearer {token}"))), other)
        .await
        .unwrap();
    assert_eq!(r.policy_document["Statement"][0]["Effect"], "Deny");
    // A tampered token: denied, not an error.
    let mut forged = token.clone();
    forged.insert(forged.len() / 2, 'x');
    let r = continuity_authorizer::decide(&s.auth, &event("authorizer-request.json", Some(&format!("Bearer {forged}"))), "")
        .await
        .unwrap();
    assert_eq!(r.policy_document["Statement"][0]["Effect"], "Deny");
}

/// A dependency outage is not the caller's fault: the invocation fails (API Gateway then
/// answers AUTHORIZER_CONFIGURATION_ERROR, 503 with Retry-After) instead of a Deny (401), which would
/// make an OAuth client throw its valid token away.
#[tokio::test]
async fn an_unreachable_table_fails_the_invocation_instead_of_denying() {
    let dir = tempfile::tempdir().unwrap();
    let (s, token) = setup(dir.path()).await;
    // The same services with DynamoDB pointed at a closed port.
    let sdk = store_aws::aws_config_for(Some("http://127.0.0.1:9"), "eu-west-1").await;
    let dead = store_aws::DynamoItems::new(store_aws::settings::dynamo_client(&sdk), "continuity");
    let down = Services::new(ports::Backend { records: ports::Records::new(Arc::new(dead)), ..s.backend.clone() });
    let ev = event("authorizer-request.json", Some(&format!("Bearer {token}")));
    let e = continuity_authorizer::decide(&down.auth, &ev, PUBLIC).await.unwrap_err();
    assert_eq!(e.0.code, domain::ErrorCode::Unavailable);
    let d = lambda_support::diagnostic(&e.0);
    assert_eq!(d.error_type, "UNAVAILABLE", "the Lambda reports an error, not a policy");
    // A missing credential needs no table: still a Deny with WWW-Authenticate.
    let r = continuity_authorizer::decide(&down.auth, &event("authorizer-request-missing.json", None), PUBLIC).await.unwrap();
    assert_eq!(r.policy_document["Statement"][0]["Effect"], "Deny");
    // The template answers a failed authorizer with 503 + Retry-After, never 401.
    let template = std::fs::read_to_string(continuity_tests::workspace_root().join("infra/template.yaml")).unwrap();
    for kind in ["AUTHORIZER_CONFIGURATION_ERROR", "AUTHORIZER_FAILURE"] {
        let failure = template.split(&format!("\n        {kind}:\n")).nth(1).expect("the gateway response");
        let failure: String = failure.lines().take_while(|l| l.starts_with("          ")).collect::<Vec<_>>().join("\n");
        assert!(failure.contains("StatusCode: \"503\"") && failure.contains("Retry-After"), "{kind}: {failure}");
    }
}

#[test]
fn an_allow_covers_the_whole_stage() {
    use continuity_authorizer::whole_api;
    assert_eq!(
        whole_api("arn:aws:execute-api:eu-west-1:123456789012:abcdef1234/prod/POST/v1/capabilities/spine.entity.get"),
        "arn:aws:execute-api:eu-west-1:123456789012:abcdef1234/prod/*"
    );
    assert_eq!(whole_api("*"), "*");
    assert_eq!(whole_api("arn:aws:execute-api:eu-west-1:1:abc"), "arn:aws:execute-api:eu-west-1:1:abc");
}
