//! Ingest throughput on the embedded backend (SPEC §2.1): 100 000 HubSpot-shaped
//! records (companies, and contacts linked to them) through the ingest API's service
//! (shape checks, chunking, durable enqueue) and the pipeline consumer (loader →
//! normalizer → writer, with the raw blobs and the JSONL backup), in batches of 1 000,
//! until the queue is empty. Then the same records again (all stale: the idempotent
//! path). Prints records/s for each phase and the process's peak resident memory. Run:
//! `cargo bench -p services --bench ingest` (`INGEST_RECORDS=20000` for a shorter run).

#![allow(clippy::expect_used, clippy::cast_precision_loss)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::principal::Scopes;
use domain::tenant::{Department, Industry, PlanTier};
use serde_json::{Value, json};
use services::Services;
use services::admin::KeyRequest;

fn record(i: usize, updated: &str) -> Value {
    if i.is_multiple_of(4) {
        json!({"objectType": "companies", "id": format!("{i}"), "updatedAt": updated,
            "properties": {"name": format!("Company {i}"), "domain": format!("c{i}.example"),
            "lifecyclestage": if i.is_multiple_of(8) { "customer" } else { "opportunity" }, "numberofemployees": format!("{}", 10 + i % 990),
            "annualrevenue": format!("{}", 10_000 * (i % 500))}})
    } else {
        json!({"objectType": "contacts", "id": format!("{i}"), "updatedAt": updated,
            "properties": {"firstname": "Person", "lastname": format!("{i}"), "email": format!("p{i}@c{}.example", i / 4 * 4),
            "jobtitle": "Buyer", "associatedcompanyid": format!("{}", i / 4 * 4)}})
    }
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

async fn run(s: &Services, caller: &domain::principal::CallerContext, n: usize, updated: &str) -> (f64, f64) {
    let t0 = Instant::now();
    for start in (0..n).step_by(1000) {
        let records: Vec<Value> = (start..(start + 1000).min(n)).map(|i| record(i, updated)).collect();
        let a =
            s.ingest.accept(caller, "hubspot", json!({"records": records, "final": start + 1000 >= n})).await.expect("accept");
        assert!(a.rejected.is_empty());
    }
    let queued = t0.elapsed().as_secs_f64();
    loop {
        let handled = s.consumer.drain_once(Duration::from_secs(60), Duration::ZERO).await.expect("drain");
        if handled == 0 {
            break;
        }
    }
    (queued, t0.elapsed().as_secs_f64())
}

fn main() {
    let n: usize = std::env::var("INGEST_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() else { return };
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Services::new(store_embedded::open_backend(dir.path(), Arc::new(ports::SystemClock)).expect("backend"));
        let t = domain::TenantId::new("bench").expect("tenant");
        s.admin
            .create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas)
            .await
            .expect("tenant");
        let key = s
            .admin
            .create_key(KeyRequest {
                tenant: t,
                scopes: Scopes::parse("tenant:read tenant:write").expect("scopes"),
                principal: None,
                teams: vec![],
                projects: vec![],
            })
            .await
            .expect("key");
        let caller = s.auth.authenticate_token(&key.token, "http://localhost").await.expect("caller");
        s.ingest.register(&caller, "hubspot").await.expect("register");
        let (queued, total) = run(&s, &caller, n, "2026-11-01T00:00:00Z").await;
        println!(
            "ingest {n} new records: {:.0} records/s end to end ({total:.1} s; accepted and queued in {queued:.1} s)",
            n as f64 / total
        );
        let (_, again) = run(&s, &caller, n, "2026-11-01T00:00:00Z").await;
        println!("the same {n} records again (stale, no effect): {:.0} records/s ({again:.1} s)", n as f64 / again);
        println!("peak resident memory: {:.0} MiB", peak_rss_mib());
    });
}
