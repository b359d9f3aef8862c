//! The contract test suites: one per port, run unchanged against every backend.
//!
//! Each suite is a set of async checks taking the port under test. The workspace test
//! crate (`tests/`) instantiates them once per backend through the macros below, so
//! `cargo nextest` lists e.g. `contract_embedded::records::entities_crud_and_pagination`
//! next to `contract_aws::records::entities_crud_and_pagination`.
//!
//! The suites: [`items`] (the item port's ordering, conditions and atomic batches),
//! [`records`] (the typed stores over it), [`oauth`] (the authorization server's
//! records), [`cache`], [`queue`], [`blobs`], [`signer`], [`limiter`], [`vault`] and
//! [`mail`].
//!
//! Every check uses fresh random tenant slugs, so suites can share one database, table
//! or bucket without cleaning up and without seeing each other's data.

// This crate is test code: a failed unwrap is the test failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod blobs;
pub mod cache;
pub mod items;
pub mod limiter;
pub mod mail;
pub mod oauth;
pub mod queue;
pub mod records;
pub mod signer;
pub mod vault;

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

/// The whole suite of one port, with its one canonical list of checks: each backend's
/// test file names a suite and a fixture, never the checks, so the backends cannot drift
/// apart. `contract_suite!(records, my_fixture)` expands to one test per check.
#[macro_export]
macro_rules! contract_suite {
    (items, $make:path) => {
        $crate::contract_tests!(
            items,
            $make,
            [
                conditions_guard_writes,
                batches_are_atomic,
                queries_are_ordered_and_paged,
                tenants_are_isolated,
                a_tenant_scan_reads_all_of_it_and_nothing_else,
                batched_writes_are_read_at_once_and_synced,
            ]
        );
    };
    (records, $make:path) => {
        $crate::contract_tests!(
            records,
            $make,
            [
                tenants_crud_and_versioning,
                principals_and_api_keys,
                entities_crud_and_pagination,
                relationships_both_directions,
                signals_newest_first,
                memory_scopes_and_turns,
                library_entries_and_documents,
                verifications_and_review_queue,
                graphs_are_versioned_per_scope,
                proposals_lifecycle,
                governed_write_is_atomic,
                audit_newest_first_and_idempotency,
                tenant_isolation_everywhere,
                connector_status_transitions,
                connector_status_isolation,
                gates_are_versioned_and_spent_once,
                engineering_records_per_project,
            ]
        );
    };
    (cache, $make:path) => {
        $crate::contract_tests!(
            cache,
            $make,
            [set_get_overwrite, entries_expire, eviction_removes_keys, limits_are_enforced, tenants_are_isolated]
        );
    };
    (blobs, $make:path) => {
        $crate::contract_tests!(
            blobs,
            $make,
            [put_get_overwrite, deletes_are_idempotent, listing_is_ordered_and_paged, tenants_are_isolated]
        );
    };
    (queue, $make:path) => {
        $crate::contract_tests!(
            queue,
            $make,
            [
                send_receive_ack,
                visibility_timeout_and_redelivery,
                release_makes_visible,
                poison_messages_are_dead_lettered,
                consumption_is_idempotent,
            ]
        );
    };
    (oauth, $make:path) => {
        $crate::contract_tests!(
            oauth,
            $make,
            [
                clients_and_logins,
                pending_logins_complete_once,
                codes_are_single_use,
                refresh_rotation_detects_reuse,
                jti_is_claimed_once
            ]
        );
    };
    (vault, $make:path) => {
        $crate::contract_tests!(
            vault,
            $make,
            [data_keys_are_bound_to_their_tenant, entities_are_sealed_at_rest, source_secrets_are_sealed_and_connects_single_use]
        );
    };
    (mail, $make:path) => {
        $crate::contract_tests!(mail, $make, [delivers_a_message_intact, refusals_are_final_with_a_reason]);
    };
    (signer, $make:path) => {
        $crate::contract_tests!(signer, $make, [signatures_verify_with_published_keys, rotation_keeps_old_keys_published]);
    };
    (limiter, $make:path) => {
        $crate::contract_tests!(
            limiter,
            $make,
            [
                burst_then_refuse,
                keys_are_independent,
                buckets_refill,
                concurrent_requests_never_exceed_capacity,
                peek_looks_without_taking
            ]
        );
    };
}
