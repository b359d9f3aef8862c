//! The whole authorization server on both backends, through the services the HTTP edge
//! calls: registration, login + consent, code exchange with PKCE, refresh rotation and
//! reuse detection, client_credentials, and verification of what was issued. On AWS the
//! tokens are signed by KMS (moto), the state lives in DynamoDB (moto) and the login
//! limiter in Redis. A client known only by its metadata document (CIMD) signs in on both:
//! the document is served over HTTPS by a test CA, kept in each backend's cache as its
//! `Cache-Control` says, and the client stored with its URL.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use domain::principal::{Role, Scopes};
use domain::tenant::{Department, Industry, PlanTier};
use ports::{Backend, SystemClock};
use serde_json::json;
use services::Services;
use services::admin::{NewServiceClient, NewUser};
use services::oauth::{ClientCredentials, LoginOutcome, Params};
use sha2::Digest as _;

const BASE: &str = "https://continuity.example.com";

fn params(pairs: &[(&str, &str)]) -> Params {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    Params::parse(s.finish().as_bytes()).unwrap()
}

fn query(location: &str) -> std::collections::HashMap<String, String> {
    form_urlencoded::parse(location.split_once('?').unwrap().1.as_bytes()).into_owned().collect()
}

async fn flow(backend: Backend) {
    let s = Services::new(backend);
    let t = contract::fresh_tenant("oauth");
    s.admin.create_tenant(t.clone(), PlanTier::Pro, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let password = "a long enough password 42";
    s.admin
        .add_user(NewUser {
            tenant: t.clone(),
            email: "ada@example.com".into(),
            role: Role::Member,
            password: password.into(),
            teams: vec!["core".into(), " core".into()],
            projects: vec!["apollo".into()],
        })
        .await
        .unwrap();

    let reg = s.oauth.register(&json!({"redirect_uris": ["http://127.0.0.1:9/cb"], "client_name": "t"})).await.unwrap();
    let client = reg["client_id"].as_str().unwrap().to_owned();
    let verifier = format!("{:032x}{:032x}", rand::random::<u128>(), rand::random::<u128>());
    let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    let view = s
        .oauth
        .begin_authorize(
            BASE,
            &params(&[
                ("response_type", "code"),
                ("client_id", &client),
                ("redirect_uri", "http://127.0.0.1:9/cb"),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
                ("state", "s"),
            ]),
        )
        .await
        .unwrap();
    let (id, csrf) = (view.pending.id.to_string(), view.csrf.clone().unwrap());
    let LoginOutcome::Retry(..) = s.oauth.login(&id, &csrf, t.as_str(), "ada@example.com", "wrong password", None).await.unwrap()
    else {
        panic!("a wrong password must not sign in")
    };
    let LoginOutcome::Consent(consent) = s.oauth.login(&id, &csrf, t.as_str(), "ada@example.com", password, None).await.unwrap()
    else {
        panic!("sign-in failed")
    };
    assert_eq!((consent.teams.clone(), consent.projects.clone()), (vec!["core".to_owned()], vec!["apollo".to_owned()]));
    let to = s.oauth.consent(BASE, &id, &csrf, true).await.unwrap();
    let q = query(&to);
    assert_eq!((q["state"].as_str(), q["iss"].as_str()), ("s", "https://continuity.example.com/"));
    let none = ClientCredentials::default();
    let exchange = params(&[
        ("grant_type", "authorization_code"),
        ("client_id", &client),
        ("code", &q["code"]),
        ("code_verifier", &verifier),
        ("redirect_uri", "http://127.0.0.1:9/cb"),
    ]);
    let tok = s.oauth.token(BASE, &exchange, &none).await.unwrap();
    let caller = s.auth.authenticate_header(Some(&format!("Bearer {}", tok.access_token)), BASE).await.unwrap();
    assert_eq!((caller.tenant.clone(), caller.plan), (t.clone(), PlanTier::Pro));
    assert!(caller.credential.starts_with("jwt:"));
    // The user's memberships ride in its token (deduplicated when it was added).
    assert_eq!((caller.teams.clone(), caller.projects.clone()), (vec!["core".to_owned()], vec!["apollo".to_owned()]));
    assert_eq!(s.oauth.token(BASE, &exchange, &none).await.unwrap_err().error, "invalid_grant", "single-use code");

    // Refresh: rotation, then reuse of the rotated token revokes the family.
    let rt1 = {
        let view = s
            .oauth
            .begin_authorize(
                BASE,
                &params(&[
                    ("response_type", "code"),
                    ("client_id", &client),
                    ("code_challenge", &challenge),
                    ("code_challenge_method", "S256"),
                ]),
            )
            .await
            .unwrap();
        let (id, csrf) = (view.pending.id.to_string(), view.csrf.unwrap());
        s.oauth.login(&id, &csrf, t.as_str(), "ada@example.com", password, None).await.unwrap();
        let q = query(&s.oauth.consent(BASE, &id, &csrf, true).await.unwrap());
        let p = params(&[
            ("grant_type", "authorization_code"),
            ("client_id", &client),
            ("code", &q["code"]),
            ("code_verifier", &verifier),
            ("redirect_uri", "http://127.0.0.1:9/cb"),
        ]);
        s.oauth.token(BASE, &p, &none).await.unwrap().refresh_token.unwrap()
    };
    let refresh = |rt: &str| params(&[("grant_type", "refresh_token"), ("client_id", &client), ("refresh_token", rt)]);
    // Moved to another team: the next refresh carries the change.
    let changes = services::admin::UserChanges { teams: Some(vec!["growth".into()]), ..Default::default() };
    s.admin.set_user(&t, "ada@example.com", changes).await.unwrap();
    let refreshed = s.oauth.token(BASE, &refresh(&rt1), &none).await.unwrap();
    let moved = s.auth.authenticate_header(Some(&format!("Bearer {}", refreshed.access_token)), BASE).await.unwrap();
    assert_eq!((moved.teams, moved.projects), (vec!["growth".to_owned()], vec!["apollo".to_owned()]));
    let listed = s.admin.list_users(&t).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].email.as_str(), listed[0].teams.clone()), ("ada@example.com", vec!["growth".to_owned()]));
    let bad = services::admin::UserChanges { projects: Some(vec!["has space".into()]), ..Default::default() };
    let e = s.admin.set_user(&t, "ada@example.com", bad).await.unwrap_err();
    assert_eq!(e.code, domain::ErrorCode::InvalidRequest, "{e:?}");
    let rt2 = refreshed.refresh_token.unwrap();
    // A disabled user refreshes nothing (the token is kept, not spent); enabled again, it may.
    let off = services::admin::UserChanges { disabled: Some(true), ..Default::default() };
    s.admin.set_user(&t, "ada@example.com", off).await.unwrap();
    assert_eq!(s.oauth.token(BASE, &refresh(&rt2), &none).await.unwrap_err().error, "invalid_grant", "disabled");
    let on = services::admin::UserChanges { disabled: Some(false), ..Default::default() };
    s.admin.set_user(&t, "ada@example.com", on).await.unwrap();
    assert_eq!(s.oauth.token(BASE, &refresh(&rt1), &none).await.unwrap_err().error, "invalid_grant");
    assert_eq!(s.oauth.token(BASE, &refresh(&rt2), &none).await.unwrap_err().error, "invalid_grant", "family revoked");

    // client_credentials.
    let c = s
        .admin
        .create_service_client(NewServiceClient {
            tenant: t.clone(),
            name: "etl".into(),
            scopes: Scopes::parse("mcp:tools").unwrap(),
            jwt_bearer: false,
            toolsets: domain::principal::Toolsets::parse("canonical,graph").unwrap(),
        })
        .await
        .unwrap();
    let creds = ClientCredentials { basic: Some((c.client_id.to_string(), c.client_secret.clone())) };
    let tok = s.oauth.token(BASE, &params(&[("grant_type", "client_credentials")]), &creds).await.unwrap();
    let caller = s.auth.authenticate_header(Some(&format!("Bearer {}", tok.access_token)), BASE).await.unwrap();
    assert_eq!(caller.principal, c.client_id);
    assert_eq!(
        caller.toolsets,
        domain::principal::Toolsets::parse("canonical,graph").unwrap(),
        "the client's toolsets ride in its token"
    );
    // An operator narrows them: the next token carries the change.
    s.admin.set_client_toolsets(&c.client_id, domain::principal::Toolsets::default()).await.unwrap();
    let tok2 = s.oauth.token(BASE, &params(&[("grant_type", "client_credentials")]), &creds).await.unwrap();
    let caller2 = s.auth.authenticate_header(Some(&format!("Bearer {}", tok2.access_token)), BASE).await.unwrap();
    assert_eq!(caller2.toolsets, domain::principal::Toolsets::default());
    assert_eq!(
        s.admin.set_client_toolsets(&domain::Id::new("no-such-client").unwrap(), Default::default()).await.unwrap_err().code,
        domain::ErrorCode::NotFound
    );
    assert!(
        s.auth.authenticate_header(Some(&format!("Bearer {}", tok.access_token)), "https://other.example.com").await.is_err()
    );
}

/// A client whose `client_id` is its metadata document's URL: authorize (fetched once,
/// then from the cache), sign in, consent naming its host, tokens for the URL; a
/// document that lists another redirect URI is refused.
async fn document_client_flow(backend: Backend) {
    let s = Services::new(backend);
    let t = contract::fresh_tenant("cimd");
    s.admin.create_tenant(t.clone(), PlanTier::Pro, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let password = "a long enough password 42";
    let user = NewUser {
        tenant: t.clone(),
        email: "ada@example.com".into(),
        role: Role::Member,
        password: password.into(),
        teams: vec![],
        projects: vec![],
    };
    s.admin.add_user(user).await.unwrap();

    let ca = continuity_tests::tls::TestCa::new();
    let fetched = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let own: Arc<std::sync::OnceLock<String>> = Arc::default();
    let document = |path: &'static str, redirect: &'static str| {
        let (fetched, own) = (fetched.clone(), own.clone());
        axum::routing::get(move || async move {
            fetched.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let id = format!("{}{path}", own.get().unwrap());
            let body = json!({"client_id": id, "client_name": "Editor", "redirect_uris": [redirect]}).to_string();
            ([("content-type", "application/json"), ("cache-control", "max-age=600")], body)
        })
    };
    let app = axum::Router::new()
        .route("/client.json", document("/client.json", "http://127.0.0.1:9/cb"))
        .route("/elsewhere.json", document("/elsewhere.json", "http://127.0.0.1:9/elsewhere"));
    let base = ca.serve(app).await;
    own.set(base.clone()).unwrap();
    s.oauth.set_client_metadata_policy(services::oauth::cimd::CimdPolicy {
        allow_private: true,
        extra_roots_pem: vec![ca.pem.clone().into_bytes()],
    });

    let client = format!("{base}/client.json");
    let verifier = format!("{:032x}{:032x}", rand::random::<u128>(), rand::random::<u128>());
    let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    let authorize = |client: String| {
        params(&[
            ("response_type", "code"),
            ("client_id", &client),
            ("redirect_uri", "http://127.0.0.1:9/cb"),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ])
    };
    let view = s.oauth.begin_authorize(BASE, &authorize(client.clone())).await.unwrap();
    assert_eq!((view.client_name.as_str(), view.client_host.as_deref()), ("Editor", Some("127.0.0.1")));
    // A second authorization is answered from the cache: one fetch in all.
    let view = s.oauth.begin_authorize(BASE, &authorize(client.clone())).await.unwrap();
    assert_eq!(fetched.load(std::sync::atomic::Ordering::SeqCst), 1, "max-age=600 keeps the document");
    let (id, csrf) = (view.pending.id.to_string(), view.csrf.clone().unwrap());
    let LoginOutcome::Consent(consent) = s.oauth.login(&id, &csrf, t.as_str(), "ada@example.com", password, None).await.unwrap()
    else {
        panic!("sign-in failed")
    };
    assert_eq!(consent.client_host.as_deref(), Some("127.0.0.1"));
    let q = query(&s.oauth.consent(BASE, &id, &csrf, true).await.unwrap());
    let exchange = params(&[
        ("grant_type", "authorization_code"),
        ("client_id", &client),
        ("code", &q["code"]),
        ("code_verifier", &verifier),
        ("redirect_uri", "http://127.0.0.1:9/cb"),
    ]);
    let tok = s.oauth.token(BASE, &exchange, &ClientCredentials::default()).await.unwrap();
    let caller = s.auth.authenticate_header(Some(&format!("Bearer {}", tok.access_token)), BASE).await.unwrap();
    assert_eq!(caller.tenant, t);
    // The refresh token works for the document's URL; a URL that never signed in is no client.
    let rt = tok.refresh_token.unwrap();
    let refresh = |c: &str| params(&[("grant_type", "refresh_token"), ("client_id", c), ("refresh_token", &rt)]);
    let e = s.oauth.token(BASE, &refresh(&format!("{base}/elsewhere.json")), &ClientCredentials::default()).await.unwrap_err();
    assert_eq!(e.error, "invalid_client", "{e:?}");
    s.oauth.token(BASE, &refresh(&client), &ClientCredentials::default()).await.unwrap();

    // A document whose redirect URIs do not include the one asked for is refused.
    let e = s.oauth.begin_authorize(BASE, &authorize(format!("{base}/elsewhere.json"))).await.unwrap_err();
    match e {
        services::oauth::AuthorizeError::Page(p) => assert!(p.description.contains("redirect_uri"), "{p:?}"),
        other => panic!("a wrong redirect URI must not be redirected to: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorization_server_on_the_embedded_backend() {
    let dir = tempfile::tempdir().unwrap();
    flow(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorization_server_on_the_aws_backend() {
    flow(continuity_tests::aws::backend().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_document_client_signs_in_on_the_embedded_backend() {
    let dir = tempfile::tempdir().unwrap();
    document_client_flow(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_document_client_signs_in_on_the_aws_backend() {
    document_client_flow(continuity_tests::aws::backend().await).await;
}
