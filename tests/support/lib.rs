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
pub mod template;

/// A sample event from the workspace's `events/` folder, as JSON.
///
/// The folder is found from `CARGO_MANIFEST_DIR` at run time (the crate under test, two
/// levels below the workspace root): a target folder shared by clones at other paths
/// may hold a test binary compiled elsewhere, whose compile-time path no longer exists.
pub fn event(name: &str) -> serde_json::Value {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    let path = format!("{dir}/../../events/{name}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"))
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
