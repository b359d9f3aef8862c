//! The admin HTTP API on both backends: the operator (an `admin` key of the operator's
//! tenant) creates a tenant and its first admin key; that key administers its own tenant
//! only — keys, users, clients, IdPs, entities, non-commercial settings — and every change
//! is in the tenant's audit ledger with who made it through the API. Without `admin`:
//! 403, and nothing changes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;

use axum::body::Body;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{PageRequest, TenantId};
use gateway::App;
use gateway::auth::AuthMode;
use gateway::{AppState, GatewaySettings};
use http::Request;
use http_body_util::BodyExt;
use ports::Backend;
use ports::oauth::OAuthStore as _;
use ports::records::AuditLog as _;
use serde_json::{Value, json};
use services::Services;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

async fn call(app: &App, method: &str, path: &str, key: &str, body: Option<Value>) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json");
    let req = req.body(body.map_or_else(Body::empty, |b| Body::from(b.to_string()))).unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn scenario(backend: Backend) {
    let s = Services::new(backend);
    let settings = GatewaySettings {
        public_url: "http://localhost".into(),
        allowed_origins: vec![],
        allowed_hosts: vec![],
        auth_mode: AuthMode::Verify,
        sessions: false,
        shutdown: CancellationToken::new(),
    };
    let app = gateway::router(AppState { services: s.clone(), settings: Arc::new(settings) });

    // The operator's tenant and key (what `bootstrap` makes).
    let op = contract::fresh_tenant("op");
    s.admin.create_tenant(op.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    s.admin.make_operator(&op).await.unwrap();
    let op_key = common::key(&s, &op, "admin").await;

    // 1. The operator creates a tenant and its first admin key.
    let t = contract::fresh_tenant("globex");
    let (status, v) = call(
        &app,
        "POST",
        "/v1/admin/tenants",
        &op_key,
        Some(json!({"id": t.as_str(), "plan": "pro", "department": "finance", "industry": "retail"})),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    assert_eq!((v["plan"].as_str(), v["operator"].as_bool()), (Some("pro"), Some(false)));
    let (status, v) = call(
        &app,
        "POST",
        "/v1/admin/tenants",
        &op_key,
        Some(json!({"id": t.as_str(), "plan": "pro", "department": "finance", "industry": "retail"})),
    )
    .await;
    assert_eq!((status, v["error"]["code"].as_str()), (409, Some("CONFLICT")), "{v}");
    let (status, v) = call(
        &app,
        "POST",
        "/v1/admin/tenants",
        &op_key,
        Some(json!({"id": "initech", "plan": "platinum", "department": "finance", "industry": "retail"})),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("platinum"), "{v}");
    let base = format!("/v1/admin/tenants/{t}");
    let (status, v) = call(&app, "POST", &format!("{base}/keys"), &op_key, Some(json!({"scopes": "admin"}))).await;
    assert_eq!(status, 201, "{v}");
    let admin = v["token"].as_str().unwrap().to_owned();
    assert!(admin.starts_with(&format!("ctn_{t}.")));

    // 2. Without the admin scope: 403, and nothing changes.
    let reader = common::key(&s, &t, "mcp:tools tenant:read").await;
    for (method, path, body) in [
        ("GET", base.clone(), None),
        ("GET", "/v1/admin/tenants".to_owned(), None),
        ("PATCH", base.clone(), Some(json!({"display_name": "Hacked"}))),
        ("POST", format!("{base}/keys"), Some(json!({"scopes": "admin"}))),
        (
            "POST",
            format!("{base}/users"),
            Some(json!({"email": "eve@globex.example", "role": "owner", "password": "correct horse battery"})),
        ),
    ] {
        let (status, v) = call(&app, method, &path, &reader, body).await;
        assert_eq!((status, v["error"]["code"].as_str()), (403, Some("FORBIDDEN")), "{method} {path}: {v}");
    }
    assert_eq!(s.admin.show_tenant(&t).await.unwrap().display_name, t.as_str(), "nothing changed");
    assert_eq!(s.admin.list_keys(&t).await.unwrap().len(), 2);

    // 3. A tenant's admin key: its own tenant only, no commercial settings.
    let (status, v) = call(&app, "GET", "/v1/admin/tenants", &admin, None).await;
    assert_eq!((status, v["tenants"].clone()), (200, json!([t.as_str()])));
    let (status, _) = call(&app, "GET", &format!("/v1/admin/tenants/{op}"), &admin, None).await;
    assert_eq!(status, 403, "another tenant");
    let (status, _) = call(
        &app,
        "POST",
        "/v1/admin/tenants",
        &admin,
        Some(json!({"id": "mine", "plan": "free", "department": "finance", "industry": "retail"})),
    )
    .await;
    assert_eq!(status, 403, "only the operator creates tenants");
    let (status, v) = call(&app, "PATCH", &base, &admin, Some(json!({"plan": "enterprise"}))).await;
    assert_eq!(status, 403, "a tenant does not upgrade its own plan: {v}");
    let (status, v) = call(&app, "PATCH", &base, &admin, Some(json!({"display_name": "Globex", "industry": "saas"}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["display_name"].as_str(), v["industry"].as_str(), v["plan"].as_str()),
        (Some("Globex"), Some("saas"), Some("pro"))
    );
    let (status, v) = call(&app, "PATCH", &base, &admin, Some(json!({"colour": "red"}))).await;
    assert_eq!(status, 400, "unknown fields are refused: {v}");

    // Keys: created (the token once), listed without secrets, revoked.
    let (status, v) = call(
        &app,
        "POST",
        &format!("{base}/keys"),
        &admin,
        Some(json!({"scopes": "mcp:tools tenant:read", "projects": ["apollo"], "toolsets": "canonical,graph"})),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let (key_id, token) = (v["key_id"].as_str().unwrap().to_owned(), v["token"].as_str().unwrap().to_owned());
    let (status, listed) = call(&app, "GET", &format!("{base}/keys"), &admin, None).await;
    assert_eq!(status, 200);
    let text = listed.to_string();
    assert!(!text.contains(token.rsplit('.').next().unwrap()) && !text.contains("sha256"), "no secret in a listing: {text}");
    let mine = listed["keys"].as_array().unwrap().iter().find(|k| k["key_id"] == key_id.as_str()).unwrap();
    assert_eq!((mine["projects"].clone(), mine["toolsets"].as_str()), (json!(["apollo"]), Some("canonical,graph")));
    // Used first: a revocation must hold though the key was just in use.
    let (status, _) = common::post_mcp(&app, &token, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
    assert_eq!(status, 200, "the new key works");
    let (status, _) = call(&app, "DELETE", &format!("{base}/keys/{key_id}"), &admin, None).await;
    assert_eq!(status, 204);
    let (status, _) = common::post_mcp(&app, &token, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
    assert_eq!(status, 401, "the revoked key is refused at once");

    // Users: added with a password never echoed; role changed and disabled.
    let password = "correct horse battery staple";
    let (status, v) = call(
        &app,
        "POST",
        &format!("{base}/users"),
        &admin,
        Some(json!({"email": "Ada@Globex.example", "role": "member", "password": password, "teams": ["support"], "projects": ["apollo"]})),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    assert!(!v.to_string().contains(password));
    assert_eq!(v["email"], "ada@globex.example");
    let (status, _) = call(
        &app,
        "PATCH",
        &format!("{base}/users/ada@globex.example"),
        &admin,
        Some(json!({"role": "approver", "disabled": true, "teams": ["support", "emea"]})),
    )
    .await;
    assert_eq!(status, 204);
    let (status, v) = call(&app, "GET", &format!("{base}/users"), &admin, None).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["users"],
        json!([{"email": "ada@globex.example", "principal": v["users"][0]["principal"], "role": "approver", "disabled": true,
                "teams": ["emea", "support"], "projects": ["apollo"]}]),
        "memberships replaced whole, projects unchanged; never a password hash"
    );
    let (status, v) =
        call(&app, "PATCH", &format!("{base}/users/ada@globex.example"), &admin, Some(json!({"projects": ["no/slashes"]}))).await;
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("INVALID_REQUEST")), "{v}");
    let login = s.backend.records.get_login(&t, "ada@globex.example").await.unwrap().unwrap();
    assert!(login.disabled && login.role == domain::principal::Role::Approver);
    let check = s.oauth.check_password(t.as_str(), "ada@globex.example", password, None).await.unwrap();
    assert!(matches!(check, services::oauth::PasswordCheck::Wrong), "a disabled user cannot sign in");
    let (status, _) =
        call(&app, "PATCH", &format!("{base}/users/nobody@globex.example"), &admin, Some(json!({"disabled": true}))).await;
    assert_eq!(status, 404);

    // The book of projects: written by the admin API, read by agents through book.list.
    let (status, v) = call(
        &app,
        "PUT",
        &format!("{base}/book/apollo/overview"),
        &admin,
        Some(json!({"title": "Apollo", "body": "The billing rewrite; owner Ada; ships in Q1."})),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!((v["project"].as_str(), v["id"].as_str()), (Some("apollo"), Some("overview")));
    let (status, v) =
        call(&app, "PUT", &format!("{base}/book/apollo/overview"), &admin, Some(json!({"title": " ", "body": "x"}))).await;
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("INVALID_REQUEST")), "an empty title: {v}");
    let (status, v) = call(
        &app,
        "PUT",
        &format!("{base}/book/apollo/overview"),
        &admin,
        Some(json!({"title": "Apollo\n- injected line", "body": "x"})),
    )
    .await;
    assert_eq!(status, 400, "a title on two lines would write its own lines into the handoff prompt: {v}");
    let (status, _) =
        call(&app, "PUT", &format!("{base}/book/apollo/overview"), &reader, Some(json!({"title": "Hijack", "body": "x"}))).await;
    assert_eq!(status, 403, "without the admin scope");
    let agent = s.auth.authenticate_token(&common::key(&s, &t, "mcp:tools tenant:read").await, "http://localhost").await.unwrap();
    let listed = s.capabilities.execute(&agent, "book.list", json!({"project": "apollo"})).await.unwrap().data;
    assert_eq!(listed["entries"][0]["title"], "Apollo", "{listed}");
    assert!(listed["entries"][0]["body"].as_str().unwrap().contains("billing rewrite"), "{listed}");

    // Service clients: the secret once; toolsets of the tenant's own clients only.
    let (status, v) =
        call(&app, "POST", &format!("{base}/clients"), &admin, Some(json!({"name": "etl", "scopes": "mcp:tools tenant:read"})))
            .await;
    assert_eq!(status, 201, "{v}");
    let client = v["client_id"].as_str().unwrap().to_owned();
    assert!(v["client_secret"].as_str().unwrap().len() >= 32);
    let (status, _) =
        call(&app, "PUT", &format!("{base}/clients/{client}/toolsets"), &admin, Some(json!({"toolsets": "graph"}))).await;
    assert_eq!(status, 204);
    let (status, v) = call(
        &app,
        "POST",
        &format!("/v1/admin/tenants/{op}/clients"),
        &op_key,
        Some(json!({"name": "ops", "scopes": "tenant:read"})),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let (status, _) = call(
        &app,
        "PUT",
        &format!("{base}/clients/{}/toolsets", v["client_id"].as_str().unwrap()),
        &admin,
        Some(json!({"toolsets": "graph"})),
    )
    .await;
    assert_eq!(status, 404, "another tenant's client is unknown here");

    // Trusted IdPs.
    let (status, v) = call(
        &app,
        "POST",
        &format!("{base}/idps"),
        &admin,
        Some(json!({"issuer": "https://idp.globex.example", "jwks_uri": "https://idp.globex.example/jwks"})),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["trusted_idps"], json!(["https://idp.globex.example"]));
    let (status, _) = call(
        &app,
        "POST",
        &format!("{base}/idps"),
        &admin,
        Some(json!({"issuer": "http://idp.globex.example", "jwks_uri": "https://x/jwks"})),
    )
    .await;
    assert_eq!(status, 400, "a plain-http issuer is refused");
    let (status, v) = call(&app, "DELETE", &format!("{base}/idps?issuer=https%3A%2F%2Fidp.globex.example"), &admin, None).await;
    assert_eq!((status, v["trusted_idps"].clone()), (200, json!([])), "{v}");

    // Entities, in the caller's tenant.
    let (status, v) = call(
        &app,
        "PUT",
        "/v1/admin/entities/account/acme-1",
        &admin,
        Some(json!({"attributes": {"name": "Acme"}, "pole_class": "organization"})),
    )
    .await;
    assert_eq!(status, 200, "{v}");

    // The operator changes a commercial setting.
    let (status, v) =
        call(&app, "PATCH", &base, &op_key, Some(json!({"plan": "enterprise", "rate_limit_per_minute": 900}))).await;
    assert_eq!((status, v["plan"].as_str(), v["rate_limit_per_minute"].as_u64()), (200, Some("enterprise"), Some(900)));

    // 4. Every change is in the tenant's ledger, with who made it through the API.
    let ledger = s.backend.records.list_audit(&t, &PageRequest::first(500)).await.unwrap().items;
    let by_api = |action: &str| ledger.iter().filter(|r| r.action == action && r.actor.starts_with("admin-api:")).count();
    for action in [
        "admin:tenant.create",
        "admin:tenant.set",
        "admin:key.create",
        "admin:key.revoke",
        "admin:user.add",
        "admin:user.set",
        "admin:client.create",
        "admin:client.toolsets",
        "admin:idp.add",
        "admin:idp.remove",
    ] {
        assert!(
            by_api(action) >= 1,
            "{action} not audited: {:?}",
            ledger.iter().map(|r| (&r.action, &r.actor)).collect::<Vec<_>>()
        );
    }
    assert!(ledger.iter().any(|r| r.action == "admin:entity.put"));
    assert!(
        ledger
            .iter()
            .filter(|r| r.action == "admin:tenant.create")
            .all(|r| r.actor == format!("admin-api:{op}/{}", r.actor.rsplit('/').next().unwrap())),
        "the operator made the tenant"
    );
    assert!(!ledger.iter().any(|r| r.target.as_deref().is_some_and(|t| t.contains(password))), "no password in the ledger");
}

#[tokio::test]
async fn admin_api_on_embedded() {
    let dir = tempfile::tempdir().unwrap();
    scenario(store_embedded::open_backend(dir.path(), Arc::new(ports::SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_api_on_aws() {
    scenario(continuity_tests::aws::backend_in_own_table("admin-api").await).await;
}

/// `serve`'s own tenant is the operator: the owner key printed at first start
/// administers every tenant through the API.
#[tokio::test]
async fn the_local_tenant_is_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::services(dir.path());
    let key = s.admin.bootstrap_local().await.unwrap().unwrap();
    let api = s
        .admin
        .for_caller(&s.auth.authenticate_header(Some(&format!("Bearer {}", key.token)), "http://localhost").await.unwrap())
        .await
        .unwrap();
    assert!(api.is_operator());
    assert_eq!(api.list_tenants().await.unwrap(), [TenantId::new("local").unwrap()]);
}
