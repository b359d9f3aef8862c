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
