//! The continuity crate's one integration-test binary: each file beside this one is a module
//! of it (`cargo nextest run -p continuity -E 'test(/^admin::/)'` runs one file's tests).
//! One binary links the dependency tree once instead of once per file. A file added
//! here must be declared below: `tests/docs.rs` fails until it is.

#[path = "admin.rs"]
mod admin;
#[path = "approvals.rs"]
mod approvals;
#[path = "aws_stack.rs"]
mod aws_stack;
#[path = "bridge.rs"]
mod bridge;
#[path = "client_compat.rs"]
mod client_compat;
/// What the modules share (servers, clients, keys).
mod common;
#[path = "connect.rs"]
mod connect;
#[path = "dashboard.rs"]
mod dashboard;
#[path = "hardening.rs"]
mod hardening;
#[path = "in_process.rs"]
mod in_process;
#[path = "migrate.rs"]
mod migrate;
#[path = "model_install.rs"]
mod model_install;
#[path = "oauth_sdk.rs"]
mod oauth_sdk;
#[path = "restore.rs"]
mod restore;
#[path = "sdk_tools.rs"]
mod sdk_tools;
#[path = "serve.rs"]
mod serve;
#[path = "setup.rs"]
mod setup;
#[path = "stdio.rs"]
mod stdio;
#[path = "topology/main.rs"]
mod topology;
#[path = "upgrade.rs"]
mod upgrade;
