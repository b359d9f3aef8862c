//! The commands of connected sources and notification channels: `continuity connector`
//! (connect by signing in or with a key, disconnect, sync — queued, or `--here` to the end
//! with progress — the pull interval, status, and the credentials approved actions use),
//! `continuity source-app` (the OAuth apps registered at each source) and
//! `continuity notify` (channels and failed deliveries).

use std::path::PathBuf;

use anyhow::anyhow;
use domain::{Id, TenantId};

use super::commands::{ConnectorCommand, CredentialCommand, NotifyCommand, SourceAppCommand};
use super::errors::domain_err;

/// A secret from an environment variable or a file (never the command line).
fn secret(env: Option<String>, file: Option<PathBuf>, what: &str) -> anyhow::Result<Option<String>> {
    Ok(match (env, file) {
        (Some(var), _) => Some(std::env::var(&var).map_err(|_| anyhow!("the environment variable {var} ({what}) is not set"))?),
        (None, Some(f)) => Some(std::fs::read_to_string(&f).map_err(|e| anyhow!("reading {} ({what}): {e}", f.display()))?),
        (None, None) => None,
    }
    .map(|s| s.trim().to_owned()))
}

/// `continuity notify add|list|remove|failures`.
pub(super) async fn notify(s: &services::Services, command: NotifyCommand) -> anyhow::Result<()> {
    use domain::notify::{ChannelKind, EventKind};
    match command {
        NotifyCommand::Add { tenant, kind, url, events } => {
            let kind = ChannelKind::try_from(kind).map_err(domain_err)?;
            let events: Vec<EventKind> = match events {
                Some(list) => list
                    .split(',')
                    .map(|e| EventKind::try_from(e.trim().to_owned()))
                    .collect::<Result<_, _>>()
                    .map_err(domain_err)?,
                None => EventKind::ALL.to_vec(),
            };
            let c = s.notify.add(&tenant, kind, &url, events).await.map_err(domain_err)?;
            println!("channel {} ({}) added for tenant {tenant}", c.id, c.kind);
            if let Some(secret) = &c.secret {
                println!("signing secret (shown once; verify X-Continuity-Signature with it): {secret}");
            }
        }
        NotifyCommand::List { tenant } => {
            let channels = s.notify.list(&tenant).await.map_err(domain_err)?;
            if channels.is_empty() {
                println!("tenant {tenant} has no notification channel (continuity notify add …)");
            }
            for c in channels {
                let events: Vec<&str> = c["events"].as_array().into_iter().flatten().filter_map(|e| e.as_str()).collect();
                println!(
                    "{}  {:<7} {}  {}",
                    c["id"].as_str().unwrap_or("?"),
                    c["kind"].as_str().unwrap_or("?"),
                    c["host"].as_str().unwrap_or("?"),
                    events.join(",")
                );
            }
        }
        NotifyCommand::Remove { tenant, id } => {
            s.notify.remove(&tenant, &Id::new(id.clone()).map_err(domain_err)?).await.map_err(domain_err)?;
            println!("removed channel {id}");
        }
        NotifyCommand::Failures { tenant } => {
            let page = s.notify.failures(&tenant, &domain::PageRequest::first(50)).await.map_err(domain_err)?;
            if page.items.is_empty() {
                println!("no failed delivery");
            }
            for f in page.items {
                println!(
                    "{}  channel {}  {}  after {} attempts: {}",
                    f.at.to_rfc3339(),
                    f.channel,
                    f.event.kind,
                    f.attempts,
                    f.reason
                );
            }
        }
    }
    Ok(())
}

/// `continuity source-app set|list|remove`.
pub(super) async fn source_app(s: &services::Services, command: SourceAppCommand) -> anyhow::Result<()> {
    match command {
        SourceAppCommand::Set { source, client_id, client_secret_env, client_secret_file, base_url, webhook_secret_env } => {
            let client_secret = secret(client_secret_env, client_secret_file, "the client secret")?;
            let webhook_secret = secret(webhook_secret_env, None, "the webhook secret")?;
            let oauth = source != "stripe";
            let (client_id, client_secret) = match (client_id, client_secret) {
                (Some(id), Some(secret)) => (id, secret),
                (None, None) if !oauth => ("-".to_owned(), "-".to_owned()),
                _ => {
                    return Err(anyhow!(
                        "give the app's --client-id and its secret (--client-secret-env or --client-secret-file)"
                    ));
                }
            };
            let app = domain::source::SourceApp { client_id, client_secret, base_url, webhook_secret };
            s.sources.set_app(&source, app).await.map_err(domain_err)?;
            println!(
                "registered the {source} app, sealed; tenants can now run: continuity connector connect {source} --tenant T"
            );
        }
        SourceAppCommand::List => {
            let apps = s.sources.apps().await.map_err(domain_err)?;
            if apps.is_empty() {
                println!("no source app is registered (continuity source-app set SOURCE …)");
            }
            for a in apps {
                println!("{a}");
            }
        }
        SourceAppCommand::Remove { source } => {
            s.sources.remove_app(&source).await.map_err(domain_err)?;
            println!("removed the {source} app");
        }
    }
    Ok(())
}

/// `continuity connector connect|disconnect|sync|status|credential`.
pub(super) async fn connector(
    s: &services::Services,
    admin: &services::admin::AdminService,
    command: ConnectorCommand,
    home: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let c = match command {
        ConnectorCommand::Credential(c) => c,
        ConnectorCommand::Connect { source, tenant, url, api_key_env, api_key_file } => {
            if let Some(key) = secret(api_key_env, api_key_file, "the API key")? {
                let st = s.sources.connect_with_key(&tenant, &source, &key).await.map_err(domain_err)?;
                println!("{source} is connected for tenant {tenant} ({}); its records are being pulled", st.state);
                return Ok(());
            }
            let base = match (url, home) {
                (Some(u), _) => u,
                (None, Some(h)) => crate::daemon::running(h).await.ok_or_else(|| {
                    anyhow!("the source sends you back to continuity serve: start it (continuity serve), or give its public URL with --url")
                })?,
                (None, None) => return Err(anyhow!("give the stack's public URL with --url (the source sends you back to it)")),
            };
            let link = s.sources.start_connect(&tenant, &source, &base).await.map_err(domain_err)?;
            println!("Open this link to sign in at {source} (valid 10 minutes, once):\n\n  {link}\n");
            println!(
                "The app registered at {source} must allow the redirect URL {}/v1/connectors/oauth/callback.",
                base.trim_end_matches('/')
            );
            println!("Then: continuity connector status --tenant {tenant}");
            return Ok(());
        }
        ConnectorCommand::Disconnect { source, tenant } => {
            let said = s.sources.disconnect(&tenant, &source).await.map_err(domain_err)?;
            println!("disconnected {source} from tenant {tenant}: {said}; what was pulled stays");
            return Ok(());
        }
        ConnectorCommand::Sync { source, tenant, here } => {
            s.sources.sync_now(&tenant, &source).await.map_err(domain_err)?;
            if !here {
                println!(
                    "a {source} pull is queued; continuity serve runs it (see: continuity connector status --tenant {tenant})"
                );
                return Ok(());
            }
            return pull_here(s, &tenant, &source).await;
        }
        ConnectorCommand::Interval { source, tenant, minutes } => {
            let secs = s.sources.set_interval(&tenant, &source, minutes).await.map_err(domain_err)?;
            println!("{source} of tenant {tenant} is pulled every {} minutes", secs / 60);
            return Ok(());
        }
        ConnectorCommand::Status { tenant } => {
            let v = s.sources.overview(&tenant).await.map_err(domain_err)?;
            print_status(&v);
            return Ok(());
        }
    };
    match c {
        CredentialCommand::Set { tenant, source, token_file, token_env, base_url, email } => {
            let token = match (token_file, token_env) {
                (Some(f), _) => std::fs::read_to_string(&f).map_err(|e| anyhow!("reading {}: {e}", f.display()))?,
                (None, Some(var)) => std::env::var(&var).map_err(|_| anyhow!("the environment variable {var} is not set"))?,
                (None, None) => return Err(anyhow!("give the token with --token-file or --token-env")),
            };
            let credential = domain::action::Credential { base_url, token: token.trim().to_owned(), email };
            admin.set_credential(&tenant, &source, credential).await.map_err(domain_err)?;
            println!("stored the {source} credential of tenant {tenant}, sealed; approved {source} actions use it");
        }
        CredentialCommand::Remove { tenant, source } => {
            admin.remove_credential(&tenant, &source).await.map_err(domain_err)?;
            println!("removed the {source} credential of tenant {tenant}");
        }
        CredentialCommand::List { tenant } => {
            let sources = admin.credential_sources(&tenant).await.map_err(domain_err)?;
            if sources.is_empty() {
                println!("tenant {tenant} holds no connector credential");
            }
            for s in sources {
                println!("{s}");
            }
        }
    }
    Ok(())
}

/// Runs a pull and the pipeline in this process, to the end, with progress.
async fn pull_here(s: &services::Services, tenant: &TenantId, source: &str) -> anyhow::Result<()> {
    use std::time::Duration;
    let budget = services::sources::Budget { pages: 10, time: Duration::from_secs(30) };
    let (mut records, mut deleted) = (0, 0);
    loop {
        let r = s.sources.run(tenant, source, budget).await.map_err(domain_err)?;
        records += r.records;
        deleted += r.deleted;
        while s.consumer.drain_once(Duration::from_secs(60), Duration::from_secs(1)).await.map_err(domain_err)? > 0 {}
        let status = s.sources.overview(tenant).await.map_err(domain_err)?;
        let pull = status["connectors"].as_array().and_then(|c| c.iter().find(|c| c["status"]["source"] == source)).cloned();
        let total = pull.as_ref().and_then(|p| p["pull"]["total"].as_u64()).map(|t| format!(" of {t}")).unwrap_or_default();
        eprintln!("  {source}: {records} records{total} pulled, {deleted} deletions");
        if let Some(why) = r.skipped {
            return Err(anyhow!("the pull stopped: {why}"));
        }
        if !r.continued {
            break;
        }
    }
    let st = s.sources.overview(tenant).await.map_err(domain_err)?;
    print_status(&st);
    Ok(())
}

fn print_status(v: &serde_json::Value) {
    let empty = Vec::new();
    let connectors = v["connectors"].as_array().unwrap_or(&empty);
    if connectors.is_empty() {
        println!("no connector yet: continuity connector connect SOURCE --tenant T");
    }
    for c in connectors {
        let st = &c["status"];
        let mut line = format!("{:<11} {}", st["source"].as_str().unwrap_or("?"), st["state"].as_str().unwrap_or("?"));
        if let Some(p) = st["progress"].as_f64() {
            line.push_str(&format!(" {:.0}%", p * 100.0));
        }
        if let Some(p) = c.get("pull").filter(|p| !p.is_null()) {
            if st["state"].as_str().is_some_and(|s| s.starts_with("syncing")) {
                line.push_str(&format!(", {} records so far", p["fetched"]));
                if let Some(t) = p["total"].as_u64() {
                    line.push_str(&format!(" of {t}"));
                }
            } else {
                line.push_str(&format!(", {} records in the last pass", p["last_pass"]));
            }
            if let Some(l) = p["last_synced_at"].as_str() {
                line.push_str(&format!(", last pull {l}"));
            }
            line.push_str(&format!(
                ", next {} (every {} min)",
                p["next_at"].as_str().unwrap_or("?"),
                p["interval_secs"].as_u64().unwrap_or(300) / 60
            ));
            if p["needs_reconnect"] == true {
                line.push_str(", NEEDS RECONNECT");
            }
        } else {
            line.push_str(", records pushed (POST /v1/ingest)");
        }
        if let Some(e) = st["error_message"].as_str() {
            line.push_str(&format!("\n            last error ({}): {e}", st["error_stage"].as_str().unwrap_or("?")));
        }
        println!("{line}");
    }
}
