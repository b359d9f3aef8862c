//! The OAuth Lambda driven with `events/oauth-*.json`, as API Gateway delivers them (no
//! authorizer: these routes are public), over an embedded backend.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;

use base64::Engine as _;
use domain::TenantId;
use domain::principal::Scopes;
use domain::tenant::{Department, Industry, PlanTier};
use serde_json::Value;
use services::Services;
use services::admin::NewServiceClient;

/// The API as the events call it, with no custom domain configured.
const API: &str = "https://abcdef1234.execute-api.eu-west-1.amazonaws.com/prod";

fn event(name: &str) -> Value {
    continuity_tests::event(name)
}

async fn invoke(s: &Services, ev: &Value) -> (u16, Value) {
    // No public URL: the base comes from the request (Host + stage).
    let (status, _, body) = common::invoke_with(s, ev, "").await;
    (status, body)
}

#[tokio::test]
async fn discovery_registration_and_client_credentials_from_events() {
    let dir = tempfile::tempdir().unwrap();
    let backend = store_embedded::open_backend(dir.path(), Arc::new(ports::SystemClock)).unwrap();
    let s = Services::new(backend);
    let demo = TenantId::new("demo").unwrap();
    s.admin.create_tenant(demo.clone(), PlanTier::Pro, Department::CustomerSuccess, Industry::Saas).await.unwrap();

    let (status, v) = invoke(&s, &event("oauth-metadata.json")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["issuer"], API, "an issuer with a path (the stage) is kept as is");
    assert_eq!(v["token_endpoint"], format!("{API}/oauth/token"));

    let (status, v) = invoke(&s, &event("oauth-register.json")).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["redirect_uris"][0], "https://claude.ai/api/mcp/auth_callback");
    assert_eq!(v["token_endpoint_auth_method"], "none");

    // The sample token request carries placeholder credentials: refused, as JSON.
    let mut ev = event("oauth-token-client-credentials.json");
    let (status, v) = invoke(&s, &ev).await;
    assert_eq!((status, v["error"].as_str()), (401, Some("invalid_client")));
    // With a real client's credentials in its place, a token whose audience is this API.
    let c = s
        .admin
        .create_service_client(NewServiceClient {
            tenant: demo,
            name: "etl".into(),
            scopes: Scopes::parse("mcp:tools tenant:read").unwrap(),
            jwt_bearer: false,
            toolsets: Default::default(),
        })
        .await
        .unwrap();
    let basic =
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", c.client_id, c.client_secret)));
    ev["headers"]["Authorization"] = Value::String(basic.clone());
    ev["multiValueHeaders"]["Authorization"] = serde_json::json!([basic]);
    let (status, v) = invoke(&s, &ev).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["scope"], "mcp:tools tenant:read");
    let token = v["access_token"].as_str().unwrap();
    let verified = s.oauth.tokens.verify(token, API).await.unwrap();
    assert_eq!(verified.tenant.as_str(), "demo");
}

/// Registration is open to anyone, so it is limited per client address — API Gateway's
/// `sourceIp` (203.0.113.7 in the sample) — to 20 a minute: the 21st is 429 with
/// `Retry-After`, and another address is unaffected.
#[tokio::test]
async fn registration_is_limited_per_source_address() {
    let dir = tempfile::tempdir().unwrap();
    let backend = store_embedded::open_backend(dir.path(), Arc::new(ports::SystemClock)).unwrap();
    let s = Services::new(backend);
    let ev = event("oauth-register.json");
    assert_eq!(ev["requestContext"]["identity"]["sourceIp"], "203.0.113.7");
    // 20 at once, then one more every 3 s: a slow machine may earn a few more before the
    // first refusal, never fewer and never more than the time it took allows.
    let started = std::time::Instant::now();
    let mut accepted = 0u64;
    let (status, v) = loop {
        let (status, v) = invoke(&s, &ev).await;
        if status != 201 {
            break (status, v);
        }
        accepted += 1;
        assert!(accepted <= 20 + started.elapsed().as_secs() / 3 + 1, "registration {accepted} should have been refused");
    };
    assert!(accepted >= 20, "only {accepted} registrations before a refusal");
    assert_eq!((status, v["error"].as_str()), (429, Some("too_many_requests")), "{v}");
    let mut other = ev.clone();
    other["requestContext"]["identity"]["sourceIp"] = Value::String("198.51.100.20".into());
    let (status, v) = invoke(&s, &other).await;
    assert_eq!(status, 201, "{v}");
}
