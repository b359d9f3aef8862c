//! `continuity`: the local all-in-one binary.
//!
//! `continuity serve` runs every router in one axum server on the embedded backend in a
//! home folder (`--home`, else `$CONTINUITY_HOME`, else `./.continuity`). The admin
//! commands (`tenant`, `key`, `entity`) work on the same home directly.
//!
//! Logs are JSON lines on stderr (`RUST_LOG` filters, default `info`; content never
//! reaches them, see `gateway::observe::log_filter`); what a person
//! needs — the MCP URL, the key file — is printed on stdout.

use continuity::cli;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse_args();
    tracing_subscriber::fmt().json().with_writer(std::io::stderr).with_env_filter(gateway::observe::log_filter()).init();
    match cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<cli::ExitStatus>() {
            Some(x) => {
                if let Some(m) = &x.message {
                    eprintln!("{m}");
                }
                std::process::ExitCode::from(x.code)
            }
            None => {
                eprintln!("error: {e:#}");
                eprintln!("next:  {}", cli::next_step(&e));
                std::process::ExitCode::FAILURE
            }
        },
    }
}
