//! Median time of a cached resolution: the tenant's configuration is already loaded
//! (as the services layer has it from the Spine Cache), so this measures the resolver
//! alone. Run: `cargo bench -p adk --bench resolve`.

use std::hint::black_box;
use std::time::Instant;

use adk::{ResolveRequest, TenantView, resolve};
use domain::principal::Scopes;
use domain::tenant::{Department, Industry, PlanTier, Tenant};
use domain::{TenantId, Timestamp};

fn main() {
    let Ok(id) = TenantId::new("bench") else { return };
    let tenant = Tenant::new(id, PlanTier::Pro, Department::CustomerSuccess, Industry::Healthcare, Timestamp(0));
    let scopes = Scopes::all();
    let view = TenantView { tenant: &tenant, connectors: &[] };
    let cases = [
        (
            "spine.entity.get (schema read)",
            ResolveRequest {
                capability: "spine.entity.get",
                scopes: &scopes,
                entity_type: Some("patient"),
                attributes: None,
                source: None,
            },
        ),
        (
            "memory.search_org",
            ResolveRequest {
                capability: "memory.search_org",
                scopes: &scopes,
                entity_type: None,
                attributes: None,
                source: None,
            },
        ),
        (
            "unknown capability",
            ResolveRequest { capability: "weather.today", scopes: &scopes, entity_type: None, attributes: None, source: None },
        ),
    ];
    // Warm the lazily built schema table, then time batches and report the median.
    let _ = resolve(&cases[0].1, Some(&view));
    const BATCH: u32 = 10_000;
    const ROUNDS: usize = 51;
    println!("{:<34} {:>12} {:>12}", "case", "median/op", "min/op");
    for (name, req) in &cases {
        let mut per_op: Vec<f64> = (0..ROUNDS)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..BATCH {
                    let _ = black_box(resolve(black_box(req), Some(black_box(&view))));
                }
                t.elapsed().as_secs_f64() * 1e9 / f64::from(BATCH)
            })
            .collect();
        per_op.sort_by(f64::total_cmp);
        println!("{:<34} {:>9.0} ns {:>9.0} ns", name, per_op[ROUNDS / 2], per_op[0]);
    }
}
