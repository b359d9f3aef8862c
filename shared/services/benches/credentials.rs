//! Per-request cost of checking a credential (SPEC §3.3, §3.5): verifying an RS256
//! access token (signature + claims, key from the warm key cache, tenant config from
//! the warm Spine Cache) and looking up an API key (one keyed SQLite read + SHA-256 +
//! constant-time compare). Embedded backend, one thread. Run:
//! `cargo bench -p services --bench credentials`.

use std::sync::Arc;
use std::time::Instant;

use domain::TenantId;
use domain::principal::Scopes;
use domain::tenant::{Department, Industry, PlanTier};
use services::Services;
use services::admin::KeyRequest;
use services::admin::NewServiceClient;
use services::oauth::{ClientCredentials, Params};

const BASE: &str = "http://127.0.0.1:8787";

async fn median_ns<F, Fut>(label: &str, mut op: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    const BATCH: u32 = 500;
    const ROUNDS: usize = 41;
    assert!(op().await, "{label}: the credential must verify before it is timed");
    let mut per_op = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t0 = Instant::now();
        for _ in 0..BATCH {
            std::hint::black_box(op().await);
        }
        per_op.push(t0.elapsed().as_secs_f64() * 1e6 / f64::from(BATCH));
    }
    per_op.sort_by(f64::total_cmp);
    println!("{label}: median {:.1} µs/op, min {:.1} µs/op, max {:.1} µs/op", per_op[ROUNDS / 2], per_op[0], per_op[ROUNDS - 1]);
}

fn main() {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
    rt.block_on(async {
        let Ok(dir) = tempfile::tempdir() else { return };
        let Ok(backend) = store_embedded::open_backend(dir.path(), Arc::new(ports::SystemClock)) else { return };
        let s = Services::new(backend);
        let Ok(t) = TenantId::new("bench") else { return };
        if s.admin.create_tenant(t.clone(), PlanTier::Pro, Department::CustomerSuccess, Industry::Saas).await.is_err() {
            return;
        }
        let Ok(scopes) = Scopes::parse("mcp:tools tenant:read") else { return };
        let req = NewServiceClient {
            tenant: t.clone(),
            name: "bench".into(),
            scopes: scopes.clone(),
            jwt_bearer: false,
            toolsets: Default::default(),
        };
        let Ok(client) = s.admin.create_service_client(req).await else { return };
        let creds = ClientCredentials { basic: Some((client.client_id.to_string(), client.client_secret)) };
        let Ok(params) = Params::parse(b"grant_type=client_credentials") else { return };
        let Ok(token) = s.oauth.token(BASE, &params, &creds).await else { return };
        let jwt = format!("Bearer {}", token.access_token);
        let req = KeyRequest { tenant: t, scopes, principal: None, teams: vec![], projects: vec![] };
        let Ok(key) = s.admin.create_key(req).await else { return };
        let api_key = format!("Bearer {}", key.token);

        median_ns("JWT verification (RS256 + claims + tenant config)", || async {
            s.auth.authenticate_header(Some(&jwt), BASE).await.is_ok()
        })
        .await;
        median_ns("API key lookup (SQLite read + SHA-256 + compare)", || async {
            s.auth.authenticate_header(Some(&api_key), BASE).await.is_ok()
        })
        .await;
    });
}
