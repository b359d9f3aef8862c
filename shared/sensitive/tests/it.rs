//! The sensitive crate's one integration-test binary: each file beside this one is a module
//! of it (`cargo nextest run -p sensitive -E 'test(/^corpus::/)'` runs one file's tests).
//! One binary links the dependency tree once instead of once per file. A file added
//! here must be declared below: `tests/docs.rs` fails until it is.

#[path = "corpus.rs"]
mod corpus;
#[path = "disguises.rs"]
mod disguises;
#[path = "holdout.rs"]
mod holdout;
#[path = "robustness.rs"]
mod robustness;
