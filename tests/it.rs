//! The continuity-tests crate's one integration-test binary: each file beside this one is a module
//! of it (`cargo nextest run -p continuity-tests -E 'test(/^compaction::/)'` runs one file's tests).
//! One binary links the dependency tree once instead of once per file. A file added
//! here must be declared below: `tests/docs.rs` fails until it is.

#[path = "actions.rs"]
mod actions;
#[path = "cache_iam.rs"]
mod cache_iam;
#[path = "compaction.rs"]
mod compaction;
#[path = "complete_backup.rs"]
mod complete_backup;
#[path = "context.rs"]
mod context;
#[path = "contract_aws.rs"]
mod contract_aws;
#[path = "contract_embedded.rs"]
mod contract_embedded;
#[path = "dated_search.rs"]
mod dated_search;
#[path = "docs.rs"]
mod docs;
#[path = "engineering.rs"]
mod engineering;
#[path = "governance.rs"]
mod governance;
#[path = "hardening.rs"]
mod hardening;
#[path = "late.rs"]
mod late;
#[path = "layering.rs"]
mod layering;
#[path = "maintenance.rs"]
mod maintenance;
#[path = "notify.rs"]
mod notify;
#[path = "oauth_backends.rs"]
mod oauth_backends;
#[path = "pipeline.rs"]
mod pipeline;
#[path = "promotion.rs"]
mod promotion;
#[path = "read_fallback.rs"]
mod read_fallback;
#[path = "readback.rs"]
mod readback;
#[path = "recall.rs"]
mod recall;
#[path = "search.rs"]
mod search;
#[path = "sources.rs"]
mod sources;
#[path = "store_outage.rs"]
mod store_outage;
#[path = "template.rs"]
mod template;
