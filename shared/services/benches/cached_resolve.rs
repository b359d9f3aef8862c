//! Median time of a cached resolution through the capability service: the tenant's
//! configuration and connector statuses come from a warm Spine Cache (the in-process
//! cache of `continuity serve`), then the ADK resolves. Run:
//! `cargo bench -p services --bench cached_resolve`.

use std::sync::Arc;
use std::time::Instant;

use domain::TenantId;
use domain::tenant::{Department, Industry, PlanTier};
use serde_json::json;
use services::Services;

fn main() {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
    rt.block_on(async {
        let Ok(dir) = tempfile::tempdir() else { return };
        let Ok(backend) = store_embedded::open_backend(dir.path(), Arc::new(ports::SystemClock)) else { return };
        let s = Services::new(backend);
        let Ok(t) = TenantId::new("bench") else { return };
        if s.admin.create_tenant(t.clone(), PlanTier::Pro, Department::CustomerSuccess, Industry::Healthcare).await.is_err() {
            return;
        }
        let Ok(caller) = s.admin.operator(&t).await else { return };
        let args = json!({"type": "patient", "id": "p-1"});
        // Warm the cache tiers (tenant config, connector statuses) and the schema table.
        let _ = s.capabilities.resolve(&caller, "spine.entity.get", &args).await;
        const BATCH: u32 = 2_000;
        const ROUNDS: usize = 51;
        let mut per_op = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let t0 = Instant::now();
            for _ in 0..BATCH {
                let r = s.capabilities.resolve(&caller, "spine.entity.get", &args).await;
                std::hint::black_box(r.is_ok());
            }
            per_op.push(t0.elapsed().as_secs_f64() * 1e9 / f64::from(BATCH));
        }
        per_op.sort_by(f64::total_cmp);
        println!(
            "cached resolution (service: cache tiers + ADK): median {:.0} ns/op, min {:.0} ns/op",
            per_op[ROUNDS / 2],
            per_op[0]
        );
    });
}
