//! The contract suites against the embedded backend (SQLite, in-process cache, files).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use continuity_tests::embedded;

mod items {
    contract::contract_suite!(items, super::embedded::items);
}

mod records {
    contract::contract_suite!(records, super::embedded::records);
}

mod oauth {
    contract::contract_suite!(oauth, super::embedded::records);
}

mod signer {
    contract::contract_suite!(signer, super::embedded::signer);
}

mod vault {
    contract::contract_suite!(vault, super::embedded::vault);
}

mod limiter {
    contract::contract_suite!(limiter, super::embedded::limiter);
}

mod cache {
    contract::contract_suite!(cache, super::embedded::cache);
}

mod blobs {
    contract::contract_suite!(blobs, super::embedded::blobs);
}

mod queue {
    contract::contract_suite!(queue, super::embedded::queue);
}

mod mail {
    contract::contract_suite!(mail, super::embedded::mail);
}
