//! Shared fixtures of the workspace tests: backends for the contract suites, and
//! (in later modules) the real `continuity` binary on port 0.
//!
//! The AWS fixtures read the endpoints `tests/run.sh` exports
//! (`CONTINUITY_TEST_MOTO_URL`, `CONTINUITY_TEST_REDIS_URL`, …) and fail loudly when
//! they are missing: a contract suite that silently skips would prove nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod aws;
pub mod demo;
pub mod embedded;
pub mod recall;
pub mod s3vectors;
pub mod smtp;
pub mod source;
pub mod sources;
pub mod template;
pub mod tls;

/// The workspace's root folder, found at run time: the nearest folder holding
/// `Cargo.lock` above `CARGO_MANIFEST_DIR` (the package whose test is running). Not the
/// compile-time path: a target folder shared by clones at other paths may hold this crate
/// compiled in another clone, whose path no longer exists (or is another checkout).
pub fn workspace_root() -> std::path::PathBuf {
    let dir = manifest_dir();
    dir.ancestors()
        .find(|d| d.join("Cargo.lock").is_file())
        .unwrap_or_else(|| panic!("no Cargo.lock above {}", dir.display()))
        .to_path_buf()
}

/// The folder of the package whose test is running, as cargo and nextest set
/// `CARGO_MANIFEST_DIR` when they run it (the compile-time value only when run by hand;
/// see [`workspace_root`] for why). The one place tests read it: `tests/docs.rs` checks.
pub fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), std::path::PathBuf::from)
}

/// A sample event from the workspace's `events/` folder, as JSON.
pub fn event(name: &str) -> serde_json::Value {
    let path = workspace_root().join("events").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The index's own hybrid answer to `question` over `scopes` (the fused pool of
/// [`ports::search::LATE`]`.pool` candidates, before the services order it again): what
/// the late-interaction and conversation-context tests compare the served answer with.
pub async fn fused_pool(
    s: &services::Services,
    tenant: domain::TenantId,
    scopes: Vec<domain::memory::MemoryScope>,
    kind: ports::search::DocKind,
    question: &str,
) -> Vec<ports::search::SearchHit> {
    let embedder = s.backend.embedder.clone();
    let query = ports::search::SearchQuery {
        tenant,
        scopes,
        kind: Some(kind),
        text: question.to_owned(),
        vector: Some(embedder.embed_query(question).await.unwrap()),
        embedder: embedder.name().to_owned(),
        mode: ports::search::SearchMode::Hybrid,
        k: ports::search::LATE.pool,
        since: None,
        until: None,
    };
    s.backend.search.search(&query).await.unwrap()
}

/// Processes the work queue until it is empty (failed messages come back at once).
pub async fn drain(s: &services::Services) {
    let mut idle = 0;
    for _ in 0..200 {
        let n = s.consumer.drain_once(std::time::Duration::from_secs(30), std::time::Duration::ZERO).await.unwrap();
        if n == 0 {
            idle += 1;
            if idle == 2 {
                return;
            }
        } else {
            idle = 0;
        }
    }
    panic!("the queue never drained");
}

/// A caller of `tenant` holding a fresh API key with `scopes` (space-separated), as the
/// gateway would authenticate it.
pub async fn caller(s: &services::Services, tenant: &domain::TenantId, scopes: &str) -> domain::principal::CallerContext {
    caller_in(s, tenant, scopes, &[], &[]).await
}

/// [`caller`], member of `teams` and `projects`.
pub async fn caller_in(
    s: &services::Services,
    tenant: &domain::TenantId,
    scopes: &str,
    teams: &[&str],
    projects: &[&str],
) -> domain::principal::CallerContext {
    let key = s
        .admin
        .create_key(services::admin::KeyRequest {
            tenant: tenant.clone(),
            scopes: domain::principal::Scopes::parse(scopes).unwrap(),
            principal: None,
            teams: teams.iter().map(|t| (*t).to_owned()).collect(),
            projects: projects.iter().map(|p| (*p).to_owned()).collect(),
        })
        .await
        .unwrap();
    s.auth.authenticate_token(&key.token, "http://localhost").await.unwrap()
}

/// A user of `tenant` added with `teams` and `projects` (role member) who signs in
/// through the OAuth authorization-code flow (PKCE, sign-in page, consent) as an MCP
/// client would, asking for `scopes`; returns the caller its access token authenticates
/// as.
pub async fn oauth_member(
    s: &services::Services,
    tenant: &domain::TenantId,
    email: &str,
    scopes: &str,
    teams: &[&str],
    projects: &[&str],
) -> domain::principal::CallerContext {
    use base64::Engine as _;
    use sha2::Digest as _;
    const BASE: &str = "http://localhost";
    let params = |pairs: &[(&str, &str)]| {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in pairs {
            q.append_pair(k, v);
        }
        services::oauth::Params::parse(q.finish().as_bytes()).unwrap()
    };
    let password = "a long enough password 42";
    s.admin
        .add_user(services::admin::NewUser {
            tenant: tenant.clone(),
            email: email.into(),
            role: domain::principal::Role::Member,
            password: password.into(),
            teams: teams.iter().map(|t| (*t).to_owned()).collect(),
            projects: projects.iter().map(|p| (*p).to_owned()).collect(),
        })
        .await
        .unwrap();
    let reg = s
        .oauth
        .register(&serde_json::json!({"redirect_uris": ["http://127.0.0.1:9/cb"], "client_name": "a chat client"}))
        .await
        .unwrap();
    let client = reg["client_id"].as_str().unwrap().to_owned();
    let verifier = format!("{:032x}{:032x}", rand::random::<u128>(), rand::random::<u128>());
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
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
                ("scope", scopes),
            ]),
        )
        .await
        .unwrap();
    let (id, csrf) = (view.pending.id.to_string(), view.csrf.clone().unwrap());
    s.oauth.login(&id, &csrf, tenant.as_str(), email, password, None).await.unwrap();
    let to = s.oauth.consent(BASE, &id, &csrf, true).await.unwrap();
    let code: String = form_urlencoded::parse(to.split_once('?').unwrap().1.as_bytes())
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("no code in {to}"));
    let exchange = params(&[
        ("grant_type", "authorization_code"),
        ("client_id", &client),
        ("code", &code),
        ("code_verifier", &verifier),
        ("redirect_uri", "http://127.0.0.1:9/cb"),
    ]);
    let tok = s.oauth.token(BASE, &exchange, &services::oauth::ClientCredentials::default()).await.unwrap();
    s.auth.authenticate_header(Some(&format!("Bearer {}", tok.access_token)), BASE).await.unwrap()
}
