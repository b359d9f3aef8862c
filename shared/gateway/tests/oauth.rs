//! The authorization server through the real router, in process, on an embedded backend:
//! discovery, registration, login and consent, every grant, refresh rotation and reuse
//! detection, revocation, the JWT attack suite, enterprise sign-in (ID-JAG), malformed
//! requests to every endpoint, rate limiting, and what reaches the logs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "oauth/cimd.rs"]
mod cimd;
use crate::common;

use std::sync::{Arc, Mutex};

use axum::body::Body;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use domain::principal::Role;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{Id, TenantId};
use gateway::App;
use http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use services::Services;
use services::admin::{NewServiceClient, NewUser};
use sha2::Digest as _;
use tower::ServiceExt;

const BASE: &str = "http://127.0.0.1:8787";
const MCP: &str = "http://127.0.0.1:8787/mcp";
const ISSUER: &str = "http://127.0.0.1:8787/";
const PASSWORD: &str = "correct horse battery staple";
const REDIRECT: &str = "http://127.0.0.1:5555/callback";

struct Fixture {
    app: App,
    services: Services,
    _dir: tempfile::TempDir,
}

struct Resp {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    fn header(&self, name: &str) -> String {
        self.headers.get(name).map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default()
    }
}

fn form(pairs: &[(&str, &str)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}

fn query_of(location: &str) -> std::collections::HashMap<String, String> {
    let q = location.split_once('?').map_or("", |(_, q)| q);
    form_urlencoded::parse(q.as_bytes()).into_owned().collect()
}

fn field(html: &str, name: &str) -> String {
    let needle = format!("name=\"{name}\" value=\"");
    let start = html.find(&needle).unwrap_or_else(|| panic!("no {name} in {html}")) + needle.len();
    html[start..].split('"').next().unwrap().to_owned()
}

fn pkce() -> (String, String) {
    let verifier = format!("{:032x}{:032x}", rand::random::<u128>(), rand::random::<u128>());
    let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let services = common::services(dir.path());
    let app = common::app(&services, BASE);
    let f = Fixture { app, services, _dir: dir };
    f.tenant("acme", PlanTier::Enterprise).await;
    f.user("acme", "ada@example.com", Role::Member).await;
    f
}

impl Fixture {
    async fn tenant(&self, slug: &str, plan: PlanTier) {
        self.services
            .admin
            .create_tenant(TenantId::new(slug).unwrap(), plan, Department::CustomerSuccess, Industry::Saas)
            .await
            .unwrap();
    }

    async fn user(&self, tenant: &str, email: &str, role: Role) -> Id {
        let u = NewUser {
            tenant: TenantId::new(tenant).unwrap(),
            email: email.into(),
            role,
            password: PASSWORD.into(),
            teams: vec![],
            projects: vec![],
        };
        self.services.admin.add_user(u).await.unwrap()
    }

    async fn send(&self, method: &str, uri: &str, headers: &[(&str, &str)], body: impl Into<Body>) -> Resp {
        let mut b = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let resp = self.app.clone().oneshot(b.body(body.into()).unwrap()).await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await.unwrap().to_bytes().to_vec();
        Resp { status, headers, body }
    }

    async fn post_form(&self, uri: &str, pairs: &[(&str, &str)], extra: &[(&str, &str)]) -> Resp {
        let mut h = vec![("content-type", "application/x-www-form-urlencoded")];
        h.extend_from_slice(extra);
        self.send("POST", uri, &h, form(pairs)).await
    }

    async fn register(&self, body: Value) -> Resp {
        self.send("POST", "/oauth/register", &[("content-type", "application/json")], body.to_string()).await
    }

    async fn public_client(&self) -> String {
        let r = self.register(json!({"redirect_uris": [REDIRECT], "client_name": "Test <b>client</b>"})).await;
        assert_eq!(r.status, 201, "{}", r.text());
        r.json()["client_id"].as_str().unwrap().to_owned()
    }

    /// GET /oauth/authorize: the login page, its form fields and the CSRF cookie.
    async fn login_page(&self, client_id: &str, challenge: &str, extra: &[(&str, &str)]) -> (Resp, String, String, String) {
        let mut q = vec![
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", REDIRECT),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
            ("state", "st-123"),
            ("resource", MCP),
        ];
        q.extend_from_slice(extra);
        let r = self.send("GET", &format!("/oauth/authorize?{}", form(&q)), &[], Body::empty()).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let cookie = r.header("set-cookie").split(';').next().unwrap().to_owned();
        let (id, csrf) = (field(&r.text(), "request_id"), field(&r.text(), "csrf"));
        (r, cookie, id, csrf)
    }

    /// The whole browser part: login, consent; returns the redirect's query.
    async fn authorize(&self, client_id: &str, challenge: &str, email: &str) -> std::collections::HashMap<String, String> {
        let (_, cookie, id, csrf) =
            self.login_page(client_id, challenge, &[("scope", "mcp:tools tenant:read memory:read")]).await;
        let r = self
            .post_form(
                "/oauth/authorize",
                &[
                    ("request_id", &id),
                    ("csrf", &csrf),
                    ("action", "login"),
                    ("tenant", "acme"),
                    ("email", email),
                    ("password", PASSWORD),
                ],
                &[("cookie", &cookie)],
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.text().contains("Allow access"), "{}", r.text());
        let r = self
            .post_form("/oauth/authorize", &[("request_id", &id), ("csrf", &csrf), ("action", "approve")], &[("cookie", &cookie)])
            .await;
        assert_eq!(r.status, 303, "{}", r.text());
        query_of(&r.header("location"))
    }

    async fn exchange(&self, client_id: &str, code: &str, verifier: &str) -> Resp {
        self.post_form(
            "/oauth/token",
            &[
                ("grant_type", "authorization_code"),
                ("client_id", client_id),
                ("code", code),
                ("code_verifier", verifier),
                ("redirect_uri", REDIRECT),
                ("resource", MCP),
            ],
            &[],
        )
        .await
    }

    async fn tokens(&self) -> (String, Value) {
        let client = self.public_client().await;
        let (verifier, challenge) = pkce();
        let q = self.authorize(&client, &challenge, "ada@example.com").await;
        let r = self.exchange(&client, &q["code"], &verifier).await;
        assert_eq!(r.status, 200, "{}", r.text());
        (client, r.json())
    }

    async fn mcp(&self, bearer: &str) -> Resp {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
        let auth = format!("Bearer {bearer}");
        self.send(
            "POST",
            "/mcp",
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2025-06-18"),
                ("authorization", &auth),
                ("host", "127.0.0.1:8787"),
            ],
            body,
        )
        .await
    }
}

#[tokio::test]
async fn discovery_documents_describe_the_server() {
    let f = fixture().await;
    for path in ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"] {
        let m = f.send("GET", path, &[], Body::empty()).await.json();
        assert_eq!(m["issuer"], ISSUER);
        assert_eq!(m["code_challenge_methods_supported"], json!(["S256"]));
        assert_eq!(m["token_endpoint"], format!("{BASE}/oauth/token"));
        assert_eq!(m["registration_endpoint"], format!("{BASE}/oauth/register"));
        assert_eq!(m["authorization_response_iss_parameter_supported"], true);
        let grants = m["grant_types_supported"].as_array().unwrap();
        for g in ["authorization_code", "refresh_token", "client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer"] {
            assert!(grants.contains(&json!(g)), "{g}");
        }
        let scopes = m["scopes_supported"].as_array().unwrap();
        assert!(!scopes.contains(&json!("admin")) && !scopes.contains(&json!("approvals:decide")));
    }
    for path in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"] {
        let p = f.send("GET", path, &[], Body::empty()).await.json();
        assert_eq!(p["resource"], MCP, "the exact MCP URL");
        assert_eq!(p["authorization_servers"], json!([ISSUER]));
    }
    let jwks = f.send("GET", "/.well-known/jwks.json", &[], Body::empty()).await.json();
    let k = &jwks["keys"][0];
    assert_eq!((k["kty"].as_str(), k["alg"].as_str(), k["use"].as_str()), (Some("RSA"), Some("RS256"), Some("sig")));
    assert!(k["kid"].as_str().is_some_and(|s| !s.is_empty()));
    // 401 from /mcp points at the protected-resource metadata.
    let r = f.mcp("").await;
    assert_eq!(r.status, 401);
    assert!(
        r.header("www-authenticate").contains(&format!("resource_metadata=\"{BASE}/.well-known/oauth-protected-resource/mcp\""))
    );
}

#[tokio::test]
async fn authorization_code_with_pkce_refresh_rotation_and_reuse_detection() {
    let f = fixture().await;
    let client = f.public_client().await;
    let (verifier, challenge) = pkce();
    let q = f.authorize(&client, &challenge, "ada@example.com").await;
    assert_eq!(q["state"], "st-123", "state is preserved");
    assert_eq!(q["iss"], ISSUER, "RFC 9207 iss");
    let r = f.exchange(&client, &q["code"], &verifier).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("cache-control"), "no-store");
    let t = r.json();
    assert_eq!(t["token_type"], "Bearer");
    assert_eq!(t["expires_in"], 3600);
    assert_eq!(t["scope"], "mcp:tools tenant:read memory:read");
    let access = t["access_token"].as_str().unwrap();
    // RS256 with our kid; aud is the RFC 8707 resource.
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(access.split('.').next().unwrap()).unwrap()).unwrap();
    assert_eq!((header["alg"].as_str(), header["typ"].as_str()), (Some("RS256"), Some("at+jwt")));
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(access.split('.').nth(1).unwrap()).unwrap()).unwrap();
    assert_eq!((claims["aud"].as_str(), claims["iss"].as_str(), claims["tid"].as_str()), (Some(MCP), Some(ISSUER), Some("acme")));
    let r = f.mcp(access).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("spine_entity_get"));

    // The code is single use: a second exchange fails, and revokes what the first issued.
    let r = f.exchange(&client, &q["code"], &verifier).await;
    assert_eq!((r.status, r.json()["error"].as_str()), (400, Some("invalid_grant")));
    let first_refresh = t["refresh_token"].as_str().unwrap();
    let refresh = |rt: &str| {
        let (f, client, rt) = (&f, client.clone(), rt.to_owned());
        async move {
            f.post_form("/oauth/token", &[("grant_type", "refresh_token"), ("client_id", &client), ("refresh_token", &rt)], &[])
                .await
        }
    };
    let r = refresh(first_refresh).await;
    assert_eq!(r.json()["error"], "invalid_grant", "code reuse revoked the family: {}", r.text());

    // A fresh authorization: rotate, then reuse the rotated token.
    let (verifier, challenge) = pkce();
    let q = f.authorize(&client, &challenge, "ada@example.com").await;
    let t = f.exchange(&client, &q["code"], &verifier).await.json();
    let rt1 = t["refresh_token"].as_str().unwrap().to_owned();
    let r = refresh(&rt1).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let t2 = r.json();
    let rt2 = t2["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(rt1, rt2, "rotation");
    assert_eq!(f.mcp(t2["access_token"].as_str().unwrap()).await.status, 200);
    let r = refresh(&rt1).await;
    assert_eq!((r.status, r.json()["error"].as_str()), (400, Some("invalid_grant")), "reuse of a rotated token");
    let r = refresh(&rt2).await;
    assert_eq!(r.json()["error"], "invalid_grant", "reuse revoked the whole family, the newest token too");

    // Revocation (RFC 7009) of a live refresh token.
    let (verifier, challenge) = pkce();
    let q = f.authorize(&client, &challenge, "ada@example.com").await;
    let rt = f.exchange(&client, &q["code"], &verifier).await.json()["refresh_token"].as_str().unwrap().to_owned();
    let r = f.post_form("/oauth/revoke", &[("token", &rt), ("client_id", &client)], &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(refresh(&rt).await.json()["error"], "invalid_grant");
    // Unknown tokens revoke "successfully" (RFC 7009 §2.2).
    assert_eq!(f.post_form("/oauth/revoke", &[("token", "nope"), ("client_id", &client)], &[]).await.status, 200);
}

#[tokio::test]
async fn code_exchange_checks_pkce_redirect_client_and_single_use() {
    let f = fixture().await;
    let client = f.public_client().await;
    let other = f.public_client().await;
    let cases: Vec<(&str, &str, String)> = vec![
        ("PKCE mismatch", "code_verifier", "x".repeat(43)),
        ("redirect mismatch", "redirect_uri", "http://127.0.0.1:5555/other".into()),
        ("another client", "client_id", other.clone()),
        ("wrong resource", "resource", "https://evil.example.com/mcp".into()),
    ];
    for (name, key, value) in cases {
        let (verifier, challenge) = pkce();
        let q = f.authorize(&client, &challenge, "ada@example.com").await;
        let mut params: Vec<(String, String)> = vec![
            ("grant_type".into(), "authorization_code".into()),
            ("client_id".into(), client.clone()),
            ("code".into(), q["code"].clone()),
            ("code_verifier".into(), verifier.clone()),
            ("redirect_uri".into(), REDIRECT.into()),
        ];
        params.retain(|(pk, _)| pk != key);
        params.push((key.to_owned(), value));
        let pairs: Vec<(&str, &str)> = params.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let r = f.post_form("/oauth/token", &pairs, &[]).await;
        assert_eq!((r.status, r.json()["error"].as_str()), (400, Some("invalid_grant")), "{name}: {}", r.text());
        // And the code is spent: even the right request fails now.
        let r = f.exchange(&client, &q["code"], &verifier).await;
        assert_eq!(r.json()["error"], "invalid_grant", "{name}: a failed attempt spends the code");
    }
}

#[tokio::test]
async fn the_login_and_consent_pages_are_hard_to_fool() {
    let f = fixture().await;
    let client = f.public_client().await;
    let (_, challenge) = pkce();
    let (page, cookie, id, csrf) = f.login_page(&client, &challenge, &[]).await;
    assert_eq!(page.header("x-frame-options"), "DENY");
    assert!(page.header("content-security-policy").contains("frame-ancestors 'none'"));
    assert!(page.header("set-cookie").contains("HttpOnly") && page.header("set-cookie").contains("SameSite=Strict"));
    assert!(page.text().contains("Test &lt;b&gt;client&lt;/b&gt;"), "the client name is escaped");
    let login = |cookie: String, csrf: String, password: &'static str| {
        let id = id.clone();
        let f = &f;
        async move {
            f.post_form(
                "/oauth/authorize",
                &[
                    ("request_id", &id),
                    ("csrf", &csrf),
                    ("action", "login"),
                    ("tenant", "acme"),
                    ("email", "ada@example.com"),
                    ("password", password),
                ],
                &[("cookie", &cookie)],
            )
            .await
        }
    };
    // No cookie, a forged cookie, or a forged form token: refused.
    let r = login(String::new(), csrf.clone(), PASSWORD).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let r = login("continuity_csrf=forged".into(), "forged".into(), PASSWORD).await;
    assert_eq!(r.status, 400);
    // Wrong password and unknown workspace look the same.
    let r = login(cookie.clone(), csrf.clone(), "wrong password!!").await;
    assert!(r.text().contains("Unknown workspace, e-mail or password"));
    // Consent before signing in is refused.
    let r = f
        .post_form("/oauth/authorize", &[("request_id", &id), ("csrf", &csrf), ("action", "approve")], &[("cookie", &cookie)])
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    // Denying sends the client access_denied with state and iss.
    assert!(login(cookie.clone(), csrf.clone(), PASSWORD).await.text().contains("Allow access"));
    let r = f
        .post_form("/oauth/authorize", &[("request_id", &id), ("csrf", &csrf), ("action", "deny")], &[("cookie", &cookie)])
        .await;
    assert_eq!(r.status, 303);
    let q = query_of(&r.header("location"));
    assert_eq!((q["error"].as_str(), q["state"].as_str(), q["iss"].as_str()), ("access_denied", "st-123", ISSUER));
    assert!(!q.contains_key("code"));
    // The pending sign-in is used up.
    let r = f
        .post_form("/oauth/authorize", &[("request_id", &id), ("csrf", &csrf), ("action", "approve")], &[("cookie", &cookie)])
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn authorization_requests_are_validated() {
    let f = fixture().await;
    let client = f.public_client().await;
    let (_, challenge) = pkce();
    let get = |q: String| {
        let f = &f;
        async move { f.send("GET", &format!("/oauth/authorize?{q}"), &[], Body::empty()).await }
    };
    let base = |extra: &[(&str, &str)], skip: &str| {
        let mut q = vec![
            ("response_type", "code"),
            ("client_id", client.as_str()),
            ("redirect_uri", REDIRECT),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("state", "s1"),
        ];
        q.retain(|(k, _)| *k != skip);
        q.extend_from_slice(extra);
        form(&q)
    };
    // Not trusted enough to redirect: an error page, never a redirect.
    for (q, why) in [
        (base(&[], "client_id"), "missing client"),
        (base(&[("client_id", "dyn-unknown")], "client_id"), "unknown client"),
        (base(&[("redirect_uri", "http://127.0.0.1:5555/callback/x")], "redirect_uri"), "redirect mismatch"),
        (base(&[("redirect_uri", "https://evil.example.com/cb")], "redirect_uri"), "foreign redirect"),
        (format!("{}&client_id={client}", base(&[], "")), "repeated parameter"),
    ] {
        let r = get(q).await;
        assert_eq!(r.status, 400, "{why}: {}", r.text());
        assert!(r.header("location").is_empty(), "{why}");
        assert_eq!(r.header("x-frame-options"), "DENY");
    }
    // Trusted redirect: errors go back to the client with state and iss.
    for (q, error) in [
        (base(&[], "code_challenge"), "invalid_request"),
        (base(&[("code_challenge_method", "plain")], "code_challenge_method"), "invalid_request"),
        (base(&[("response_type", "token")], "response_type"), "unsupported_response_type"),
        (base(&[("resource", "https://evil.example.com/mcp")], ""), "invalid_target"),
        (base(&[("scope", "bogus")], ""), "invalid_scope"),
        (base(&[("scope", "admin approvals:decide")], ""), "invalid_scope"),
    ] {
        let r = get(q).await;
        assert_eq!(r.status, 303, "{error}: {}", r.text());
        let loc = query_of(&r.header("location"));
        assert_eq!((loc["error"].as_str(), loc["state"].as_str(), loc["iss"].as_str()), (error, "s1", ISSUER));
    }
    // A self-registered client with an https redirect: errors before the user did anything
    // are shown here, never redirected (no open redirector, RFC 9700 §4.11.2).
    let r = f.register(json!({"redirect_uris": ["https://phish.example.com/cb"]})).await;
    let https_client = r.json()["client_id"].as_str().unwrap().to_owned();
    let q = form(&[("response_type", "token"), ("client_id", &https_client), ("redirect_uri", "https://phish.example.com/cb")]);
    let r = get(q).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.header("location").is_empty());
}

#[tokio::test]
async fn registration_never_grants_privileged_scopes_and_refuses_bad_metadata() {
    let f = fixture().await;
    for (body, error) in [
        (json!({"client_name": "x"}), "invalid_redirect_uri"),
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (json!({"redirect_uris": ["javascript:alert(1)"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": ["http://evil.example.com/cb"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": ["HTTP://evil.example.com/cb"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": ["http:evil.example.com/cb"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": ["https://exämple.com/cb"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": ["https://ok.example.com/cb#f"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": [REDIRECT], "scope": "mcp:tools admin"}), "invalid_client_metadata"),
        (json!({"redirect_uris": [REDIRECT], "scope": "approvals:decide"}), "invalid_client_metadata"),
        (json!({"redirect_uris": [REDIRECT], "grant_types": ["client_credentials"]}), "invalid_client_metadata"),
        (json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt"}), "invalid_client_metadata"),
        (json!({"redirect_uris": [REDIRECT], "client_name": "x".repeat(500)}), "invalid_client_metadata"),
        (json!([1, 2]), "invalid_client_metadata"),
    ] {
        let r = f.register(body.clone()).await;
        assert_eq!((r.status, r.json()["error"].as_str()), (400, Some(error)), "{body}: {}", r.text());
    }
    let r = f.send("POST", "/oauth/register", &[("content-type", "text/plain")], "{}").await;
    assert_eq!(r.json()["error"], "invalid_client_metadata");
    let r = f.send("POST", "/oauth/register", &[("content-type", "application/json")], "{not json").await;
    assert_eq!(r.json()["error"], "invalid_client_metadata");
    // A confidential registration gets a secret and may authenticate with it.
    let r = f.register(json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_post"})).await;
    assert_eq!(r.status, 201);
    let reg = r.json();
    assert!(reg["client_secret"].as_str().is_some_and(|s| s.len() == 64));
    assert!(!reg["scope"].as_str().unwrap().contains("admin"));
}

#[tokio::test]
async fn client_credentials_for_confidential_service_clients() {
    let f = fixture().await;
    let c = f
        .services
        .admin
        .create_service_client(NewServiceClient {
            tenant: TenantId::new("acme").unwrap(),
            name: "etl".into(),
            scopes: domain::principal::Scopes::parse("mcp:tools tenant:read").unwrap(),
            jwt_bearer: false,
            toolsets: Default::default(),
        })
        .await
        .unwrap();
    let basic = format!("Basic {}", STANDARD.encode(format!("{}:{}", c.client_id, c.client_secret)));
    let r = f
        .post_form("/oauth/token", &[("grant_type", "client_credentials"), ("resource", MCP)], &[("authorization", &basic)])
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let t = r.json();
    assert_eq!(t["scope"], "mcp:tools tenant:read");
    assert!(t.get("refresh_token").is_none(), "no refresh token for client_credentials");
    assert_eq!(f.mcp(t["access_token"].as_str().unwrap()).await.status, 200);
    // client_secret_post works too; asking for more than allowed is narrowed.
    let r = f
        .post_form(
            "/oauth/token",
            &[
                ("grant_type", "client_credentials"),
                ("client_id", c.client_id.as_str()),
                ("client_secret", &c.client_secret),
                ("scope", "mcp:tools admin"),
            ],
            &[],
        )
        .await;
    assert_eq!((r.status, r.json()["scope"].as_str()), (200, Some("mcp:tools")), "{}", r.text());
    // A wrong secret: 401 invalid_client with a Basic challenge.
    let wrong = format!("Basic {}", STANDARD.encode(format!("{}:nope", c.client_id)));
    let r = f.post_form("/oauth/token", &[("grant_type", "client_credentials")], &[("authorization", &wrong)]).await;
    assert_eq!((r.status, r.json()["error"].as_str()), (401, Some("invalid_client")));
    assert!(r.header("www-authenticate").starts_with("Basic"));
    // Two authentication methods at once are refused.
    let r = f
        .post_form(
            "/oauth/token",
            &[("grant_type", "client_credentials"), ("client_secret", &c.client_secret)],
            &[("authorization", &basic)],
        )
        .await;
    assert_eq!(r.json()["error"], "invalid_request");
    // A registered public client may not use client_credentials.
    let public = f.public_client().await;
    let r = f.post_form("/oauth/token", &[("grant_type", "client_credentials"), ("client_id", &public)], &[]).await;
    assert_eq!(r.json()["error"], "unauthorized_client");
}

#[tokio::test]
async fn tokens_carry_scopes_and_a_missing_scope_is_a_403_with_the_scope() {
    let f = fixture().await;
    let (_, t) = f.tokens().await;
    let access = t["access_token"].as_str().unwrap();
    // The operator seeding path needs `admin`, which this token cannot have.
    let r = f
        .send(
            "PUT",
            "/v1/admin/entities/account/a1",
            &[("content-type", "application/json"), ("authorization", &format!("Bearer {access}"))],
            json!({"attributes": {"name": "x"}}).to_string(),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("www-authenticate"), "Bearer error=\"insufficient_scope\", scope=\"admin\"");
}

/// Every forged or broken token is refused with 401, and the control token passes.
#[tokio::test]
async fn jwt_attack_suite() {
    let f = fixture().await;
    let (_, t) = f.tokens().await;
    let good = t["access_token"].as_str().unwrap().to_owned();
    assert_eq!(f.mcp(&good).await.status, 200, "the control token works, so refusals below are real");
    let parts: Vec<&str> = good.split('.').collect();
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
    let kid = header["kid"].as_str().unwrap().to_owned();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let tokens = &f.services.oauth.tokens;
    let with = |changes: Value| {
        let mut c = claims.clone();
        for (k, v) in changes.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        c
    };
    let b64 = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    let mut cases: Vec<(&str, String)> = Vec::new();
    cases.push(("alg none", format!("{}.{}.", b64(&json!({"alg": "none", "typ": "at+jwt", "kid": kid})), parts[1])));
    // HS256 keyed with our public key (the classic algorithm confusion).
    let jwks = tokens.jwks().await.unwrap();
    let n = URL_SAFE_NO_PAD.decode(jwks["keys"][0]["n"].as_str().unwrap()).unwrap();
    let mut hs = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    hs.kid = Some(kid.clone());
    hs.typ = Some("at+jwt".into());
    cases.push((
        "HS256 with the public key",
        jsonwebtoken::encode(&hs, &claims, &jsonwebtoken::EncodingKey::from_secret(&n).unwrap()).unwrap(),
    ));
    let jwks_text = jwks.to_string();
    cases.push((
        "HS256 with the JWKS text",
        jsonwebtoken::encode(&hs, &claims, &jsonwebtoken::EncodingKey::from_secret(jwks_text.as_bytes()).unwrap()).unwrap(),
    ));
    for (name, change) in [
        ("expired beyond 5 s", json!({"exp": now - 10})),
        ("nbf in the future", json!({"nbf": now + 60})),
        ("iat in the future", json!({"iat": now + 60})),
        ("missing aud", json!({"aud": null})),
        ("missing iss", json!({"iss": null})),
        ("missing sub", json!({"sub": null})),
        ("missing exp", json!({"exp": null})),
        ("wrong aud", json!({"aud": "https://other.example.com/mcp"})),
        ("wrong iss", json!({"iss": "https://evil.example.com/"})),
        ("unknown tenant", json!({"tid": "nosuchtenant"})),
    ] {
        cases.push((name, tokens.sign_claims(&with(change), "at+jwt").await.unwrap()));
    }
    cases.push(("typ of another JWT", tokens.sign_claims(&claims, "JWT").await.unwrap()));
    // Our own key, but a kid we never issued.
    let unknown_kid_input = format!("{}.{}", b64(&json!({"alg": "RS256", "typ": "at+jwt", "kid": "unknown"})), parts[1]);
    let sig = f.services.backend.signer.sign(unknown_kid_input.as_bytes()).await.unwrap();
    cases.push(("unknown kid", format!("{unknown_kid_input}.{}", URL_SAFE_NO_PAD.encode(sig.bytes))));
    // A jku pointing elsewhere changes nothing: we only use our own keys, and the
    // header no longer matches the signature anyway.
    cases.push((
        "jku header",
        format!(
            "{}.{}.{}",
            b64(&json!({"alg": "RS256", "typ": "at+jwt", "kid": kid, "jku": "https://evil.example.com/jwks"})),
            parts[1],
            parts[2]
        ),
    ));
    let tampered = b64(&with(json!({"scope": "mcp:tools admin", "tid": "acme"})));
    cases.push(("tampered payload", format!("{}.{tampered}.{}", parts[0], parts[2])));
    cases.push(("garbage", "a.b.c".into()));
    cases.push(("oversized", format!("{}.{}.{}", parts[0], "A".repeat(9000), parts[2])));
    for (name, token) in &cases {
        let r = f.mcp(token).await;
        assert_eq!(r.status, 401, "{name} must be refused: {}", r.text());
        assert!(r.header("www-authenticate").contains("resource_metadata"), "{name}");
    }
    // Never from the query string.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let r = f
        .send(
            "POST",
            &format!("/mcp?access_token={good}"),
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2025-06-18"),
                ("host", "127.0.0.1:8787"),
            ],
            body,
        )
        .await;
    assert_eq!(r.status, 401, "a token in the query string is ignored");
}

/// Malformed requests to every OAuth endpoint get RFC 6749 errors, never a 500.
#[tokio::test]
async fn malformed_requests_get_oauth_errors() {
    let f = fixture().await;
    let client = f.public_client().await;
    let form_h = [("content-type", "application/x-www-form-urlencoded")];
    for (body, error) in [
        ("".to_owned(), "invalid_request"),
        ("client_id=x".to_owned(), "invalid_request"),
        (format!("grant_type=password&client_id={client}"), "unsupported_grant_type"),
        (format!("grant_type=authorization_code&grant_type=refresh_token&client_id={client}"), "invalid_request"),
        (format!("grant_type=authorization_code&client_id={client}"), "invalid_request"),
        (
            format!("grant_type=authorization_code&client_id={client}&code=x&redirect_uri={REDIRECT}&code_verifier=short"),
            "invalid_request",
        ),
        (format!("grant_type=refresh_token&client_id={client}"), "invalid_request"),
        (format!("grant_type=refresh_token&client_id={client}&refresh_token=nope"), "invalid_grant"),
        ("grant_type=client_credentials&client_id=unknown".to_owned(), "invalid_client"),
        (format!("grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&client_id={client}&assertion=x"), "unauthorized_client"),
        ("grant_type=%FF%FE".to_owned(), "unsupported_grant_type"),
    ] {
        let r = f.send("POST", "/oauth/token", &form_h, body.clone()).await;
        assert!(r.status == 400 || r.status == 401, "{body}: {}", r.status);
        assert_eq!(r.json()["error"], error, "{body}: {}", r.text());
    }
    let r =
        f.send("POST", "/oauth/token", &[("content-type", "application/json")], "{\"grant_type\":\"client_credentials\"}").await;
    assert_eq!((r.status, r.json()["error"].as_str()), (400, Some("invalid_request")));
    let r = f
        .send("POST", "/oauth/token", &[("content-type", "application/x-www-form-urlencoded")], vec![b'a'; 2 * 1024 * 1024])
        .await;
    assert_eq!((r.status, r.json()["error"].as_str()), (400, Some("invalid_request")), "oversized");
    let r = f
        .send(
            "POST",
            "/oauth/token",
            &[("content-type", "application/x-www-form-urlencoded"), ("authorization", "Bearer x")],
            "grant_type=client_credentials",
        )
        .await;
    assert_eq!(r.json()["error"], "invalid_client");
    let r = f.send("POST", "/oauth/revoke", &form_h, format!("client_id={client}")).await;
    assert_eq!((r.status, r.json()["error"].as_str()), (400, Some("invalid_request")));
    let r = f.send("POST", "/oauth/revoke", &[("content-type", "text/plain")], "token=x").await;
    assert_eq!(r.json()["error"], "invalid_request");
    let r = f.send("POST", "/oauth/register", &[("content-type", "application/json")], vec![b'{'; 2 * 1024 * 1024]).await;
    assert_eq!(r.status, 400);
    let r = f.send("POST", "/oauth/authorize", &[("content-type", "application/json")], "{}").await;
    assert_eq!(r.status, 400);
    let r = f.send("POST", "/oauth/authorize", &form_h, "request_id=x&csrf=y&action=login").await;
    assert_eq!(r.status, 400);
    let r = f.send("GET", "/oauth/authorize?%ZZ", &[], Body::empty()).await;
    assert_eq!(r.status, 400);
    for (m, p) in [("GET", "/oauth/token"), ("GET", "/oauth/register"), ("DELETE", "/oauth/revoke"), ("PUT", "/oauth/authorize")]
    {
        let r = f.send(m, p, &[], Body::empty()).await;
        assert_eq!(r.status, 405, "{m} {p}");
    }
}

#[tokio::test]
async fn tenants_are_rate_limited_by_plan_with_retry_after() {
    let f = fixture().await;
    let (_, t) = f.tokens().await;
    let access = t["access_token"].as_str().unwrap();
    let changes = services::admin::TenantChanges { rate_limit_per_minute: Some(3), ..Default::default() };
    f.services.admin.set_tenant(&TenantId::new("acme").unwrap(), changes).await.unwrap();
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(f.mcp(access).await);
    }
    assert_eq!(statuses.iter().map(|r| r.status).collect::<Vec<_>>(), vec![200, 200, 200, 429, 429]);
    let limited = &statuses[3];
    assert_eq!(limited.json()["error"]["code"], "RATE_LIMITED");
    let retry: u64 = limited.header("retry-after").parse().unwrap();
    assert!((1..=20).contains(&retry), "{retry}");
}

// ---- ID-JAG ----------------------------------------------------------------------------

struct Idp {
    pkcs8: Vec<u8>,
    jwk: Value,
}

fn idp_key(kid: &str) -> Idp {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, doc.as_ref()).unwrap();
    let public = pair.public_key().as_ref().to_vec();
    let jwk = json!({
        "kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
        "x": URL_SAFE_NO_PAD.encode(&public[1..33]), "y": URL_SAFE_NO_PAD.encode(&public[33..65]),
    });
    Idp { pkcs8: doc.as_ref().to_vec(), jwk }
}

fn assertion(idp: &Idp, kid: &str, typ: &str, claims: &Value) -> String {
    let mut h = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    h.kid = Some(kid.into());
    h.typ = Some(typ.into());
    jsonwebtoken::encode(&h, claims, &jsonwebtoken::EncodingKey::from_ec_der(&idp.pkcs8)).unwrap()
}

#[tokio::test]
async fn enterprise_sign_in_with_an_id_jag() {
    let f = fixture().await;
    let idp = idp_key("idp-1");
    let stranger = idp_key("idp-1");
    // The IdP's JWKS is served over HTTP, as a real IdP would.
    let jwks = json!({"keys": [idp.jwk.clone()]});
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let jwks_uri = format!("http://{}/jwks", listener.local_addr().unwrap());
    let served = jwks.clone();
    tokio::spawn(async move {
        let app = axum::Router::new().route("/jwks", axum::routing::get(move || async move { axum::Json(served.clone()) }));
        axum::serve(listener, app).await.unwrap();
    });
    let issuer = "https://idp.example.com";
    let acme = TenantId::new("acme").unwrap();
    f.services
        .admin
        .trust_idp(
            &acme,
            domain::oauth::TrustedIdp {
                issuer: issuer.into(),
                jwks_uri: Some(jwks_uri),
                jwks: None,
                // The tenant maps two of the IdP's groups to teams.
                group_teams: [("eng-platform", "platform"), ("sales-emea", "sales")]
                    .into_iter()
                    .map(|(g, t)| (g.to_owned(), t.to_owned()))
                    .collect(),
            },
        )
        .await
        .unwrap();
    let c = f
        .services
        .admin
        .create_service_client(NewServiceClient {
            tenant: acme.clone(),
            name: "agent platform".into(),
            scopes: domain::principal::Scopes::parse("mcp:tools tenant:read memory:read").unwrap(),
            jwt_bearer: true,
            toolsets: Default::default(),
        })
        .await
        .unwrap();
    let basic = format!("Basic {}", STANDARD.encode(format!("{}:{}", c.client_id, c.client_secret)));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let claims = |changes: Value| {
        let mut v = json!({
            "iss": issuer, "sub": "00u-ada", "aud": ISSUER, "client_id": c.client_id.as_str(),
            "jti": format!("jti-{:x}", rand::random::<u64>()), "iat": now, "exp": now + 300,
            "resource": MCP, "scope": "openid mcp:tools tenant:read", "email": "ada@example.com", "email_verified": true,
        });
        for (k, val) in changes.as_object().unwrap() {
            if val.is_null() {
                v.as_object_mut().unwrap().remove(k);
            } else {
                v[k] = val.clone();
            }
        }
        v
    };
    let grant = |a: String| {
        let basic = basic.clone();
        let f = &f;
        async move {
            f.post_form(
                "/oauth/token",
                &[("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", &a)],
                &[("authorization", &basic)],
            )
            .await
        }
    };
    let good =
        assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"groups": ["eng-platform", "unmapped", "eng-platform"]})));
    let r = grant(good.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let t = r.json();
    assert_eq!(t["scope"], "mcp:tools tenant:read", "the assertion's scope bounds the grant");
    assert_eq!(f.mcp(t["access_token"].as_str().unwrap()).await.status, 200);
    let sub: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(t["access_token"].as_str().unwrap().split('.').nth(1).unwrap()).unwrap())
            .unwrap();
    let ada = f.services.backend.records.get_login(&acme, "ada@example.com").await.unwrap().unwrap();
    use ports::oauth::OAuthStore as _;
    assert_eq!(sub["sub"], ada.principal.as_str(), "mapped to the local user by its verified e-mail");
    assert_eq!(sub["teams"], json!(["platform"]), "the IdP group maps to its team, unmapped groups to nothing: {sub}");
    // An unverified e-mail links nothing: the user is the IdP subject's own principal.
    let r =
        grant(assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"email_verified": false, "groups": "sales-emea"}))))
            .await;
    let t = r.json();
    let sub: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(t["access_token"].as_str().unwrap().split('.').nth(1).unwrap()).unwrap())
            .unwrap();
    assert!(sub["sub"].as_str().unwrap().starts_with("sso-"), "{sub}");
    assert_eq!(sub["teams"], json!(["sales"]), "a single group as a string maps too: {sub}");
    let caller =
        f.services.auth.authenticate_header(Some(&format!("Bearer {}", t["access_token"].as_str().unwrap())), BASE).await;
    assert_eq!(caller.map(|c| c.teams).ok(), Some(vec!["sales".to_owned()]), "the team reaches the caller");
    // A `groups` claim with other things in it: its strings count, the rest is ignored.
    let r = grant(assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"groups": [{"id": 7}, 3, "sales-emea"]})))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sub: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD.decode(r.json()["access_token"].as_str().unwrap().split('.').nth(1).unwrap()).unwrap(),
    )
    .unwrap();
    assert_eq!(sub["teams"], json!(["sales"]), "{sub}");
    // An asserted scope with only unknown words grants nothing.
    let r = grant(assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"scope": "openid profile"})))).await;
    assert_eq!(r.json()["error"], "invalid_scope", "{}", r.text());
    // Replaying the same assertion.
    let r = grant(good).await;
    assert_eq!(r.json()["error"], "invalid_grant");
    assert!(r.json()["error_description"].as_str().unwrap().contains("replayed"));
    // Every invalid variant.
    let variants = vec![
        ("wrong aud", assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"aud": "https://other.example.com/"})))),
        ("untrusted iss", assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"iss": "https://evil.example.com"})))),
        ("another client", assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"client_id": "svc-other"})))),
        (
            "wrong resource",
            assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"resource": "https://other.example.com/mcp"}))),
        ),
        ("expired", assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"exp": now - 30, "iat": now - 90})))),
        ("iat in the future", assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"iat": now + 120})))),
        ("iat too old", assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"iat": now - 3600, "exp": now + 60})))),
        ("missing jti", assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"jti": null})))),
        ("missing sub", assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"sub": null})))),
        ("missing resource", assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"resource": null})))),
        ("wrong typ", assertion(&idp, "idp-1", "JWT", &claims(json!({})))),
        ("unknown kid", assertion(&idp, "idp-2", "oauth-id-jag+jwt", &claims(json!({})))),
        ("signed by another key", assertion(&stranger, "idp-1", "oauth-id-jag+jwt", &claims(json!({})))),
        ("not a JWT", "abc".to_owned()),
        (
            "aud as an array",
            assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({"aud": [ISSUER, "https://other.example.com/"]}))),
        ),
    ];
    for (name, a) in variants {
        let r = grant(a).await;
        assert_eq!((r.status, r.json()["error"].as_str()), (400, Some("invalid_grant")), "{name}: {}", r.text());
    }
    // Enterprise sign-in is an enterprise-plan feature.
    let changes = services::admin::TenantChanges { plan: Some(PlanTier::Pro), ..Default::default() };
    f.services.admin.set_tenant(&acme, changes).await.unwrap();
    let r = grant(assertion(&idp, "idp-1", "oauth-id-jag+jwt", &claims(json!({})))).await;
    assert_eq!(r.json()["error"], "unauthorized_client", "{}", r.text());
}

// ---- logs ------------------------------------------------------------------------------

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Through a whole flow at the most verbose level, no password, secret, code or token
/// reaches the logs.
#[tokio::test]
async fn no_secret_reaches_the_logs() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber =
        tracing_subscriber::fmt().with_max_level(tracing::Level::TRACE).json().with_writer(move || writer.clone()).finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let f = fixture().await;
    let c = f
        .services
        .admin
        .create_service_client(NewServiceClient {
            tenant: TenantId::new("acme").unwrap(),
            name: "etl".into(),
            scopes: domain::principal::Scopes::parse("mcp:tools").unwrap(),
            jwt_bearer: false,
            toolsets: Default::default(),
        })
        .await
        .unwrap();
    let client = f.public_client().await;
    let (verifier, challenge) = pkce();
    let q = f.authorize(&client, &challenge, "ada@example.com").await;
    let t = f.exchange(&client, &q["code"], &verifier).await.json();
    let access = t["access_token"].as_str().unwrap().to_owned();
    let refresh = t["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(f.mcp(&access).await.status, 200);
    let t2 = f
        .post_form("/oauth/token", &[("grant_type", "refresh_token"), ("client_id", &client), ("refresh_token", &refresh)], &[])
        .await
        .json();
    let basic = format!("Basic {}", STANDARD.encode(format!("{}:{}", c.client_id, c.client_secret)));
    let t3 = f.post_form("/oauth/token", &[("grant_type", "client_credentials")], &[("authorization", &basic)]).await.json();
    // A failed login with a wrong password, too.
    let (_, cookie, id, csrf) = f.login_page(&client, &challenge, &[]).await;
    f.post_form(
        "/oauth/authorize",
        &[
            ("request_id", &id),
            ("csrf", &csrf),
            ("action", "login"),
            ("tenant", "acme"),
            ("email", "ada@example.com"),
            ("password", "Wrong-Password-123"),
        ],
        &[("cookie", &cookie)],
    )
    .await;
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("tokens issued"), "the capture works: {logs}");
    for secret in [
        PASSWORD,
        "Wrong-Password-123",
        &c.client_secret,
        &q["code"],
        &verifier,
        &access,
        &refresh,
        t2["access_token"].as_str().unwrap(),
        t2["refresh_token"].as_str().unwrap(),
        t3["access_token"].as_str().unwrap(),
        &csrf,
    ] {
        assert!(!logs.contains(secret), "a secret reached the logs: {}", &secret[..secret.len().min(12)]);
    }
}
