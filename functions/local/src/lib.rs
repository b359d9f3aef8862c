//! The `continuity` binary's library: what `main` parses and runs, here so tests can
//! drive it in process (like mini-redis's `server::run(listener, shutdown)`).
//!
//! - [`bridge`]: `continuity stdio --url` — stdio to a remote over HTTP, with the offline
//!   archive and the write buffer ([`bridge::store`]).
//! - [`cli`]: the command line and each command's module.
//! - [`daemon`]: the `serve` that owns a home (`serve.json`), which `continuity stdio`
//!   attaches to (and starts with `--spawn`).
//! - [`home`]: the home folder — database, blobs, keys and the owner key file.
//! - [`progress`]: count, rate and ETA of long work on a terminal, nothing in a pipe.
//! - [`serve`]: `continuity serve` on a listener until a shutdown future completes.
//! - [`setup`]: `continuity setup` — the MCP clients' configuration files
//!   ([`setup::clients`]) and editing them in place ([`setup::edit`]).

/// This release: `<version> (<commit>)`, what `continuity --version` prints after the name.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("CONTINUITY_COMMIT"), ")");

pub mod bridge;
pub mod cli;
pub mod daemon;
pub mod home;
pub mod progress;
pub mod serve;
pub mod setup;
