//! The store-aws crate's one integration-test binary: each file beside this one is a module
//! of it (`cargo nextest run -p store-aws -E 'test(/^dynamo_retry::/)'` runs one file's tests).
//! One binary links the dependency tree once instead of once per file. A file added
//! here must be declared below: `tests/docs.rs` fails until it is.

#[path = "dynamo_retry.rs"]
mod dynamo_retry;
#[path = "opensearch.rs"]
mod opensearch;
