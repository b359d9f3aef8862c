//! The contract test suites: one per port, run unchanged against every backend.
//!
//! Each suite is a set of async checks taking the port under test. The workspace test
//! crate (`tests/`) instantiates them once per backend through the macros below, so
//! `cargo nextest` lists e.g. `contract_embedded::records::entities_crud_and_pagination`
//! next to `contract_aws::records::entities_crud_and_pagination`.
//!
//! Every check uses fresh random tenant slugs, so suites can share one database, table
//! or bucket without cleaning up and without seeing each other's data.

// This crate is test code: a failed unwrap is the test failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod blobs;
pub mod cache;
pub mod items;
pub mod queue;
pub mod records;

use domain::TenantId;
use rand::Rng;

/// A fresh tenant slug no other check uses.
pub fn fresh_tenant(label: &str) -> TenantId {
    let n: u64 = rand::rng().random();
    TenantId::new(format!("t{label}-{n:016x}")).unwrap_or_else(|e| panic!("bad test tenant: {e}"))
}

/// Generates one `#[tokio::test]` per named check, each calling `$crate::$suite::$check(make().await)`.
#[macro_export]
macro_rules! contract_tests {
    ($suite:ident, $make:path, [$($check:ident),+ $(,)?]) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let port = $make().await;
                $crate::$suite::$check(port).await;
            }
        )+
    };
}
