//! The contract suites against the embedded backend (SQLite, in-process cache, files).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use continuity_tests::embedded;

mod items {
    contract::contract_tests!(
        items,
        super::embedded::items,
        [conditions_guard_writes, batches_are_atomic, queries_are_ordered_and_paged, tenants_are_isolated,]
    );
}

mod records {
    contract::contract_tests!(
        records,
        super::embedded::records,
        [
            tenants_crud_and_versioning,
            principals_and_api_keys,
            entities_crud_and_pagination,
            relationships_both_directions,
            signals_newest_first,
            memory_scopes_and_turns,
            proposals_lifecycle,
            audit_newest_first_and_idempotency,
            tenant_isolation_everywhere,
            connector_status_transitions,
            connector_status_isolation,
        ]
    );
}

mod cache {
    contract::contract_tests!(
        cache,
        super::embedded::cache,
        [set_get_overwrite, entries_expire, eviction_removes_keys, limits_are_enforced, tenants_are_isolated,]
    );
}

mod blobs {
    contract::contract_tests!(
        blobs,
        super::embedded::blobs,
        [put_get_overwrite, listing_is_ordered_and_paged, tenants_are_isolated,]
    );
}

mod queue {
    contract::contract_tests!(
        queue,
        super::embedded::queue,
        [
            send_receive_ack,
            visibility_timeout_and_redelivery,
            release_makes_visible,
            poison_messages_are_dead_lettered,
            consumption_is_idempotent,
        ]
    );
}
