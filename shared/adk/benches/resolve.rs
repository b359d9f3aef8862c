//! Median time of a cached resolution: the tenant's configuration is already loaded
//! (as the services layer has it from the Spine Cache), so this measures the resolver
//! alone. Run: `cargo bench -p adk --bench resolve`.

use std::hint::black_box;
use std::time::Instant;

use adk::policy::{CapabilitySpec, Channel, RouteKind, SchemaUse};
use adk::{ResolveRequest, TenantView, resolve};
use domain::principal::{Scope, Scopes};
use domain::tenant::{Department, Industry, PlanTier, Tenant};
use domain::{TenantId, Timestamp};

/// Policies as the capabilities state theirs (`services::capabilities::typed`).
static ENTITY_GET: CapabilitySpec =
    CapabilitySpec::new("spine.entity.get", Channel::Tool, PlanTier::Free, &[Scope::TenantRead], RouteKind::StoreIndex, "entity")
        .cached(120)
        .schema(SchemaUse::Read);
static SEARCH_ORG: CapabilitySpec = CapabilitySpec::new(
    "memory.search_org",
    Channel::Memory,
    PlanTier::Pro,
    &[Scope::MemoryRead],
    RouteKind::VectorIndex,
    "search",
);

fn main() {
    let Ok(id) = TenantId::new("bench") else { return };
    let tenant = Tenant::new(id, PlanTier::Pro, Department::CustomerSuccess, Industry::Healthcare, Timestamp(0));
    let scopes = Scopes::all();
    let view = TenantView { tenant: &tenant, connectors: &[] };
    let cases = [
        (
            "spine.entity.get (schema read)",
            ResolveRequest { spec: &ENTITY_GET, scopes: &scopes, entity_type: Some("patient"), attributes: None, source: None },
        ),
        (
            "memory.search_org",
            ResolveRequest { spec: &SEARCH_ORG, scopes: &scopes, entity_type: None, attributes: None, source: None },
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
