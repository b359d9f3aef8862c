//! Client ID Metadata Documents: a client whose `client_id` is the HTTPS URL of its
//! metadata document signs in with the authorization code and PKCE, no registration — its
//! document served by an in-process HTTPS server with a test CA — and every refusal the
//! draft and MCP's authorization spec ask for. Dynamic registration keeps working beside it.

use axum::routing::get;

use super::*;

/// Serves `documents` (path → status, content type, cache-control, body with `BASE`
/// standing for the server's own URL) over HTTPS; returns the base URL and how many
/// requests each path got.
async fn document_server(
    ca: &continuity_tests::tls::TestCa,
    documents: Vec<(&'static str, u16, &'static str, &'static str, String)>,
) -> (String, Arc<Mutex<std::collections::HashMap<String, usize>>>) {
    let hits: Arc<Mutex<std::collections::HashMap<String, usize>>> = Arc::default();
    let own: Arc<std::sync::OnceLock<String>> = Arc::default();
    let mut app = axum::Router::new();
    for (path, status, content_type, cache, body) in documents {
        let (hits, own) = (hits.clone(), own.clone());
        app = app.route(
            path,
            get(move || async move {
                *hits.lock().unwrap().entry(path.to_owned()).or_default() += 1;
                let body = body.replace("BASE", own.get().map_or("", String::as_str));
                let mut r = axum::response::Response::new(axum::body::Body::from(body));
                *r.status_mut() = http::StatusCode::from_u16(status).unwrap();
                r.headers_mut().insert("content-type", content_type.parse().unwrap());
                if !cache.is_empty() {
                    r.headers_mut().insert("cache-control", cache.parse().unwrap());
                }
                if status == 302 {
                    r.headers_mut().insert("location", "https://evil.example/client.json".parse().unwrap());
                }
                r
            }),
        );
    }
    let base = ca.serve(app).await;
    let _ = own.set(base.clone());
    (base, hits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_described_by_its_metadata_document_signs_in_and_bad_documents_are_refused() {
    let f = fixture().await;
    let ca = continuity_tests::tls::TestCa::new();
    // The placeholder is the server's base URL, known once it listens.
    let doc = |path: &str, extra: Value| {
        let mut d =
            json!({"client_id": format!("BASE{path}"), "client_name": "Editor <script>x</script>", "redirect_uris": [REDIRECT]});
        d.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
        d.to_string()
    };
    let documents = vec![
        ("/good/client.json", 200, "application/json", "max-age=600", doc("/good/client.json", json!({}))),
        (
            "/wrong-id.json",
            200,
            "application/json",
            "",
            json!({"client_id": "https://elsewhere.example/c.json", "client_name": "X", "redirect_uris": [REDIRECT]}).to_string(),
        ),
        ("/secret.json", 200, "application/json", "", doc("/secret.json", json!({"client_secret": "s3cret"}))),
        (
            "/basic.json",
            200,
            "application/json",
            "",
            doc("/basic.json", json!({"token_endpoint_auth_method": "client_secret_basic"})),
        ),
        (
            "/other-redirect.json",
            200,
            "application/json",
            "",
            doc("/other-redirect.json", json!({"redirect_uris": ["http://127.0.0.1:9999/elsewhere"]})),
        ),
        ("/html.json", 200, "text/html", "", doc("/html.json", json!({}))),
        ("/big.json", 200, "application/json", "", doc("/big.json", json!({"padding": "x".repeat(6000)}))),
        ("/moved.json", 302, "application/json", "", String::new()),
        ("/gone.json", 404, "application/json", "", String::new()),
        ("/broken.json", 200, "application/json", "", "{not json".to_owned()),
    ];
    let (base, hits) = document_server(&ca, documents).await;
    f.services.oauth.set_client_metadata_policy(services::oauth::cimd::CimdPolicy {
        allow_private: true,
        extra_roots_pem: vec![ca.pem.clone().into_bytes()],
    });
    let meta = f.send("GET", "/.well-known/oauth-authorization-server", &[], Body::empty()).await.json();
    assert_eq!(meta["client_id_metadata_document_supported"], true);
    assert!(meta["registration_endpoint"].is_string(), "dynamic registration stays for older clients");

    // The whole flow: authorize (the document fetched), sign in, consent naming the
    // client as untrusted text with its host, code for tokens with the URL as client_id.
    let client = format!("{base}/good/client.json");
    let (verifier, challenge) = pkce();
    let (page, cookie, id, csrf) = f.login_page(&client, &challenge, &[("scope", "mcp:tools tenant:read")]).await;
    let text = page.text();
    assert!(text.contains("Editor &lt;script&gt;x&lt;/script&gt;") && !text.contains("<script>"), "{text}");
    assert!(text.contains("127.0.0.1"), "the document's host is shown: {text}");
    let consent = f
        .post_form(
            "/oauth/authorize",
            &[
                ("request_id", &id),
                ("csrf", &csrf),
                ("action", "login"),
                ("tenant", "acme"),
                ("email", "ada@example.com"),
                ("password", PASSWORD),
            ],
            &[("cookie", &cookie)],
        )
        .await;
    assert!(
        consent.text().contains("Allow access") && consent.text().contains("a program on this computer"),
        "{}",
        consent.text()
    );
    let done = f
        .post_form("/oauth/authorize", &[("request_id", &id), ("csrf", &csrf), ("action", "approve")], &[("cookie", &cookie)])
        .await;
    assert_eq!(done.status, 303, "{}", done.text());
    let q = query_of(&done.header("location"));
    let tokens = f.exchange(&client, &q["code"], &verifier).await;
    assert_eq!(tokens.status, 200, "{}", tokens.text());
    let access = tokens.json()["access_token"].as_str().unwrap().to_owned();
    assert_eq!(f.mcp(&access).await.status, 200);
    // Refresh works with the URL as client_id; the document was fetched once (cached 600 s).
    let refreshed = f
        .post_form(
            "/oauth/token",
            &[
                ("grant_type", "refresh_token"),
                ("client_id", &client),
                ("refresh_token", tokens.json()["refresh_token"].as_str().unwrap()),
            ],
            &[],
        )
        .await;
    assert_eq!(refreshed.status, 200, "{}", refreshed.text());
    let (_, _, _, _) = f.login_page(&client, &challenge, &[]).await;
    assert_eq!(hits.lock().unwrap().get("/good/client.json").copied(), Some(1), "cached as Cache-Control says");

    // Every refusal is shown on our page (never redirected: the redirect URIs are unverified).
    let refused = |path: &'static str| {
        let (f, base, challenge) = (&f, base.clone(), challenge.clone());
        async move {
            let q = form(&[
                ("response_type", "code"),
                ("client_id", &format!("{base}{path}")),
                ("redirect_uri", REDIRECT),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
                ("state", "s"),
            ]);
            let r = f.send("GET", &format!("/oauth/authorize?{q}"), &[], Body::empty()).await;
            assert_eq!(r.status, 400, "{path}: {}", r.text());
            assert!(r.header("location").is_empty(), "{path}: never a redirect");
            r.text()
        }
    };
    assert!(refused("/wrong-id.json").await.contains("must equal its URL"));
    assert!(refused("/secret.json").await.contains("client_secret"));
    assert!(refused("/basic.json").await.contains("no shared secret"));
    assert!(refused("/other-redirect.json").await.contains("redirect_uri does not exactly match"));
    assert!(refused("/html.json").await.contains("application/json"));
    assert!(refused("/big.json").await.contains("larger than"));
    assert!(refused("/moved.json").await.contains("HTTP 302"));
    assert!(refused("/gone.json").await.contains("HTTP 404"));
    assert!(refused("/broken.json").await.contains("not JSON"));
    // Bad URLs, refused before anything is fetched.
    for (bad, says) in [
        ("http://127.0.0.1/client.json", "unknown client"),
        ("https://127.0.0.1", "must have a path"),
        ("https://user:pw@127.0.0.1/c.json", "user name or password"),
        ("https://127.0.0.1/a/../c.json", ". or .."),
        ("https://127.0.0.1/c.json#x", "fragment"),
    ] {
        let q = form(&[
            ("response_type", "code"),
            ("client_id", bad),
            ("redirect_uri", REDIRECT),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ]);
        let r = f.send("GET", &format!("/oauth/authorize?{q}"), &[], Body::empty()).await;
        assert_eq!(r.status, 400, "{bad}");
        assert!(r.text().contains(says), "{bad}: {}", r.text());
    }
    // Outside tests, loopback and private addresses are refused before any connection.
    f.services.oauth.set_client_metadata_policy(services::oauth::cimd::CimdPolicy {
        allow_private: false,
        extra_roots_pem: vec![ca.pem.clone().into_bytes()],
    });
    let before = hits.lock().unwrap().values().sum::<usize>();
    let r = refused("/gone.json").await;
    assert!(r.contains("special-use address"), "{r}");
    assert_eq!(hits.lock().unwrap().values().sum::<usize>(), before, "nothing was fetched");

    // Dynamic registration still works beside it.
    let (registered, _) = f.tokens().await;
    assert!(!registered.starts_with("https://"));
}
