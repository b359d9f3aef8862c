//! Command-line parsing and the admin commands. Each command opens the home, does one
//! thing, and prints the result for people (or, for `key create`, the key alone so
//! scripts can capture it).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::anyhow;
use clap::{Args, Parser, Subcommand};
use domain::oauth::TrustedIdp;
use domain::principal::{Role, Scopes};
use domain::spine::PoleClass;
use domain::tenant::{Department, Industry, PlanTier, StorageTier};
use domain::value::Attributes;
use domain::{EntityType, Id, TenantId};
use ports::records::Expect;
use services::admin::{KeyRequest, TenantChanges};

use crate::home;
use crate::serve::{self, ServeSettings};

#[derive(Parser)]
#[command(name = "continuity", version, about = "Governed memory and context bridge for AI agents (MCP)")]
pub struct Cli {
    /// Home folder (default: $CONTINUITY_HOME, else ./.continuity).
    #[arg(long, global = true)]
    home: Option<PathBuf>,
    /// The embedder of the search index: `hashing` (built in, lexical) or `local:DIR` (a
    /// sentence model folder with config.json, tokenizer.json and model.safetensors,
    /// e.g. all-MiniLM-L6-v2). Every command on one home must use the same one; after a
    /// change, run `continuity reindex --full`.
    #[arg(long, global = true, env = "CONTINUITY_EMBEDDER", default_value = "hashing")]
    embedder: String,
    /// `embedded` (the home folder) or `aws`: run `backup`, `restore`, `reindex` or
    /// `maintenance` against a stack, configured by the same environment variables as
    /// its Lambdas (`CONTINUITY_TABLE`, `CONTINUITY_BUCKET`, `CONTINUITY_QUEUE_URL`,
    /// `CONTINUITY_DLQ_URL`, `CONTINUITY_REDIS_URLS`, `CONTINUITY_VAULT_KMS_KEY`,
    /// `CONTINUITY_OPENSEARCH_ENDPOINT`, `CONTINUITY_EMBEDDER`, `AWS_REGION`).
    #[arg(long, global = true, env = "CONTINUITY_BACKEND", default_value = "embedded", value_parser = ["embedded", "aws"])]
    backend: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run everything in one process on the embedded backend.
    Serve {
        #[arg(long, default_value = "127.0.0.1:8787")]
        addr: SocketAddr,
        /// Externally visible base URL, when behind a proxy.
        #[arg(long)]
        public_url: Option<String>,
        /// Most connections open at once; at the cap the most stalled one (still sending
        /// its request, or idle) is closed to make room.
        #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        max_connections: u32,
        /// Seconds a client has to send a whole request head.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
        header_timeout: u64,
    },
    /// Serve MCP over stdio on this home (for clients that start a local command).
    /// The first use initialises the home, as `serve` does. Logs go to stderr.
    Stdio {
        /// The tenant whose data the session reads and writes.
        #[arg(long, default_value = "local")]
        tenant: String,
        /// The principal the session acts as (its sessions and personal memory).
        #[arg(long, default_value = "owner")]
        principal: String,
        /// Toolsets to offer: `canonical` (the 20 tools), `graph` (the knowledge-graph
        /// tools of the reference memory server), or both: `canonical,graph`.
        #[arg(long, default_value = "canonical")]
        toolsets: String,
    },
    /// Manage tenants.
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// Manage API keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Operator seeding of Spine entities (agents never write the Spine directly).
    #[command(subcommand)]
    Entity(EntityCommand),
    /// Manage users who sign in through OAuth (login and consent pages).
    #[command(subcommand)]
    User(UserCommand),
    /// Manage confidential OAuth clients (client_credentials, enterprise sign-in).
    #[command(subcommand)]
    Client(ClientCommand),
    /// Manage the access-token signing keys of this home.
    #[command(subcommand)]
    SigningKey(SigningKeyCommand),
    /// Write a snapshot of a tenant's Spine (entities, relationships, signals) as a JSONL
    /// backup file beside the ones every write appends.
    Backup {
        #[arg(long)]
        tenant: String,
    },
    /// Run the maintenance job once (prune the audit ledger beyond 7 days, expire
    /// session-scope memory after a day, delete expired OAuth codes and sign-ins).
    /// `serve` runs it hourly.
    Maintenance,
    /// Reconcile the search index with the records (SPEC §9), both ways: index what is
    /// missing (verified by readback), take superseded entries out, flag index entries
    /// whose record is gone for review. Idempotent; `serve` runs it daily.
    Reindex {
        #[arg(long)]
        tenant: String,
        /// Re-embed and re-index every record (after changing the embedder).
        #[arg(long)]
        full: bool,
    },
    /// Merge a tenant's backup files into a few (the newest copy of each entity, each
    /// relationship and signal once) and delete the merged files; a file with an
    /// unreadable line is kept. `serve` does it daily for tenants with 100+ files.
    Compact {
        #[arg(long)]
        tenant: String,
    },
    /// Replay a tenant's JSONL backups into the record store (an empty one after a loss):
    /// the newest copy of each entity wins; replaying twice changes nothing.
    Restore {
        #[arg(long)]
        tenant: String,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Add a user; the password is read from stdin (a prompt on a terminal).
    Add {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        email: String,
        #[arg(long, default_value = "member")]
        role: Role,
    },
}

#[derive(Subcommand)]
enum ClientCommand {
    /// Create a confidential client bound to a tenant; prints its id and secret.
    Create {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        name: String,
        /// Space- or comma-separated scopes the client may be granted.
        #[arg(long, default_value = "mcp:tools mcp:resources tenant:read memory:read")]
        scopes: String,
        /// Also allow enterprise sign-in (the ID-JAG jwt-bearer grant).
        #[arg(long)]
        jwt_bearer: bool,
        /// MCP toolsets its tokens are offered: `canonical`, `graph`, or `canonical,graph`.
        #[arg(long, default_value = "canonical")]
        toolsets: String,
    },
    /// Set the MCP toolsets a client's tokens are offered (any client, also one an MCP
    /// client registered itself); new tokens carry them from the next sign-in or refresh.
    Toolsets {
        /// The client id (`dyn-…` for dynamically registered clients).
        client_id: String,
        /// `canonical`, `graph`, or `canonical,graph`.
        toolsets: String,
    },
}

#[derive(Subcommand)]
enum SigningKeyCommand {
    /// Generate a new signing key; old keys stay published. Restart `serve` to use it.
    Rotate,
    /// List the published key ids, the signing key first.
    List,
}

#[derive(Subcommand)]
enum IdpCommand {
    /// Trust an identity provider for enterprise sign-in (ID-JAG).
    Add {
        #[arg(long)]
        tenant: String,
        /// The IdP's issuer (`iss`), compared exactly.
        #[arg(long)]
        issuer: String,
        /// Where the IdP publishes its keys.
        #[arg(long, conflicts_with = "jwks_file")]
        jwks_uri: Option<String>,
        /// A JWK Set file, for an IdP whose JWKS is not reachable from here.
        #[arg(long)]
        jwks_file: Option<PathBuf>,
    },
    /// Stop trusting an identity provider.
    Remove {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        issuer: String,
    },
}

#[derive(Subcommand)]
enum TenantCommand {
    /// Create a tenant.
    Create {
        slug: String,
        #[arg(long, default_value = "free")]
        plan: PlanTier,
        #[arg(long, default_value = "customer_success")]
        department: Department,
        #[arg(long, default_value = "saas")]
        industry: Industry,
    },
    /// Show a tenant's configuration (or, with --schema, its Spine schema as JSON).
    Show {
        slug: String,
        /// Print the tenant's resolved Spine schema (department × industry) as JSON.
        #[arg(long)]
        schema: bool,
    },
    /// List tenants.
    List,
    /// Change a tenant's configuration.
    Set {
        slug: String,
        #[command(flatten)]
        changes: TenantSetArgs,
    },
    /// Identity providers trusted for enterprise sign-in.
    #[command(subcommand)]
    Idp(IdpCommand),
}

#[derive(Args)]
struct TenantSetArgs {
    #[arg(long)]
    plan: Option<PlanTier>,
    #[arg(long)]
    department: Option<Department>,
    #[arg(long)]
    industry: Option<Industry>,
    /// `promoted` is one-way.
    #[arg(long)]
    storage_tier: Option<StorageTier>,
    #[arg(long)]
    display_name: Option<String>,
    #[arg(long)]
    rate_limit_per_minute: Option<u32>,
    /// Triage weights for confidence, relevance, risk, conflict and quality, summing to
    /// 1 (default 0.3,0.2,0.15,0.15,0.2).
    #[arg(long, value_delimiter = ',')]
    triage_weights: Option<Vec<f64>>,
    /// Score at or above which a proposal is written without a person (default 0.85).
    #[arg(long)]
    auto_approve: Option<f64>,
    /// Score below which a proposal is rejected (default 0.60); in between, a person decides.
    #[arg(long)]
    reject_below: Option<f64>,
    /// Seconds a proposal waits for a person before it expires and is escalated (never
    /// auto-approved); default 604800 (7 days), at least 2.
    #[arg(long)]
    approval_timeout: Option<u64>,
    /// An org proposal holding personal data (a card number, a national id, an e-mail
    /// address) never auto-approves: `human` (default) sends it to a person, who sees it
    /// masked; `reject` rejects it naming the kind.
    #[arg(long, value_parser = ["human", "reject"])]
    personal_data: Option<String>,
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Create an API key; prints the key alone on stdout.
    Create {
        #[arg(long)]
        tenant: String,
        /// Space- or comma-separated scopes, e.g. "mcp:tools tenant:read".
        #[arg(long)]
        scopes: String,
        /// Existing principal the key acts as (default: a new service principal).
        #[arg(long)]
        principal: Option<String>,
        /// Teams whose team-scoped memory the key may read (comma-separated).
        #[arg(long, value_delimiter = ',')]
        teams: Vec<String>,
        /// Projects whose project-scoped memory the key may read (comma-separated).
        #[arg(long, value_delimiter = ',')]
        projects: Vec<String>,
        /// MCP toolsets the key is offered: `canonical`, `graph`, or `canonical,graph`.
        #[arg(long, default_value = "canonical")]
        toolsets: String,
    },
    /// Revoke a key by id (the middle part of `ctn_<tenant>.<id>.<secret>`).
    Revoke {
        #[arg(long)]
        tenant: String,
        key_id: String,
    },
    /// List a tenant's keys (never their secrets).
    List {
        #[arg(long)]
        tenant: String,
    },
}

#[derive(Subcommand)]
enum EntityCommand {
    /// Create or replace an entity.
    Put {
        #[arg(long)]
        tenant: String,
        #[arg(long = "type")]
        entity_type: String,
        #[arg(long)]
        id: String,
        /// Attributes as a JSON object, e.g. '{"name":"Acme"}'.
        #[arg(long, default_value = "{}")]
        attributes: String,
        #[arg(long, default_value = "object")]
        pole_class: PoleClass,
    },
}

/// Who the audit ledger names for an admin command: `cli:<login name>`.
fn cli_actor() -> String {
    format!("cli:{}", std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| "operator".into()))
}

/// A service error for the person at the terminal: the message and what actually failed.
fn domain_err(e: domain::Error) -> anyhow::Error {
    anyhow!("{}", e.for_operator())
}

/// The durability and maintenance commands: the same on the embedded home and, with
/// `--backend aws`, on a stack's table, bucket and index.
async fn durability(s: &services::Services, command: Command) -> anyhow::Result<()> {
    match command {
        Command::Maintenance => {
            let r = s.maintenance.run().await.map_err(domain_err)?;
            println!(
                "maintenance: {} tenants; {} audit records pruned, {} session memories expired, {} expired OAuth records deleted; \
                 proposals: {} restarted, {} decisions resent, {} wait heartbeats, {} waits escalated",
                r.tenants,
                r.audit_pruned,
                r.sessions_expired,
                r.oauth_pruned,
                r.workflow.restarted,
                r.workflow.resent,
                r.workflow.heartbeats,
                r.workflow.escalated
            );
            Ok(())
        }
        Command::Reindex { tenant, full } => {
            let tenant = TenantId::new(tenant).map_err(domain_err)?;
            let r = s
                .search
                .reindex(&tenant, full, &|n| {
                    if n.is_multiple_of(100) {
                        eprintln!("indexed {n} records…");
                    }
                })
                .await
                .map_err(domain_err)?;
            println!(
                "reindex of {tenant} with {}: {} indexed ({} verified by readback), {} already indexed, {} superseded removed, {} orphaned flagged for review",
                s.embedder_name(),
                r.indexed,
                r.verified,
                r.kept,
                r.removed,
                r.orphaned
            );
            Ok(())
        }
        Command::Backup { tenant } => {
            let tenant = TenantId::new(tenant).map_err(domain_err)?;
            let (path, lines) = s.backup.backup(&tenant).await.map_err(domain_err)?;
            println!("wrote {lines} records to {path} (in the tenant's blob folder)");
            Ok(())
        }
        Command::Restore { tenant } => {
            let tenant = TenantId::new(tenant).map_err(domain_err)?;
            let report = s
                .backup
                .restore(&tenant, &|files| {
                    if files.is_multiple_of(100) {
                        eprintln!("read {files} backup files…");
                    }
                })
                .await
                .map_err(domain_err)?;
            println!(
                "restored from {} files: {} entities written ({} already as new), {} relationships, {} signals{}",
                report.files,
                report.entities,
                report.unchanged,
                report.relationships,
                report.signals,
                if report.bad_lines > 0 { format!("; {} unreadable lines skipped", report.bad_lines) } else { String::new() }
            );
            Ok(())
        }
        Command::Compact { tenant } => {
            let tenant = TenantId::new(tenant).map_err(domain_err)?;
            let r = s.backup.compact(&tenant, 2).await.map_err(domain_err)?;
            println!(
                "compacted {} backup files into {} ({} lines){}",
                r.merged,
                r.written,
                r.lines,
                if r.kept_unreadable > 0 {
                    format!("; {} files with unreadable lines kept as they were", r.kept_unreadable)
                } else {
                    String::new()
                }
            );
            Ok(())
        }
        _ => Err(anyhow!("only maintenance, reindex, backup, compact and restore run against the AWS backend")),
    }
}

/// The AWS backend named by the same environment the Lambdas read
/// (`CONTINUITY_TABLE`, `CONTINUITY_BUCKET`, `CONTINUITY_QUEUE_URL`, …).
async fn aws_services() -> anyhow::Result<services::Services> {
    let env = store_aws::LambdaEnv::from_env().map_err(|e| anyhow!("--backend aws: {}", e.for_operator()))?;
    let backend = store_aws::backend(&env.aws, std::sync::Arc::new(ports::SystemClock)).await.map_err(domain_err)?;
    Ok(services::Services::new(backend))
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    if cli.backend == "aws" {
        let s = aws_services().await?;
        return durability(&s, cli.command).await;
    }
    let home_path = home::resolve(cli.home);
    let home = home::open(home_path, &cli.embedder).await?;
    let s = &home.services;
    // Every change an admin command makes is audited with who ran it.
    let admin = s.admin.acting_as(cli_actor());
    match cli.command {
        Command::Serve { addr, public_url, max_connections, header_timeout } => {
            let limits = gateway::server::Limits {
                max_connections: max_connections as usize,
                header_read_timeout: std::time::Duration::from_secs(header_timeout),
            };
            serve::run(home, ServeSettings { addr, public_url, limits }).await
        }
        Command::Stdio { tenant, principal, toolsets } => {
            let toolsets = domain::principal::Toolsets::parse(&toolsets).map_err(domain_err)?;
            let tenant = TenantId::new(tenant).map_err(domain_err)?;
            let t = admin.show_tenant(&tenant).await.map_err(domain_err)?;
            // The person at this terminal, as an MCP client: never `admin` or
            // `approvals:decide`, which no MCP client is granted (walls 4 and 5).
            let scopes = domain::principal::Scopes(
                domain::principal::Scope::ALL.iter().copied().filter(|s| s.grantable_to_mcp_client()).collect(),
            );
            let caller = domain::principal::CallerContext {
                tenant: t.id,
                principal: Id::new(principal).map_err(domain_err)?,
                scopes,
                plan: t.plan,
                teams: vec![],
                projects: vec![],
                credential: "stdio".into(),
                toolsets,
            };
            tracing::info!(tenant = %caller.tenant, principal = %caller.principal, "serving MCP over stdio");
            use rmcp::ServiceExt as _;
            let server = mcp::ContinuityMcp::for_caller(s.clone(), caller)
                .serve(rmcp::transport::io::stdio())
                .await
                .map_err(|e| anyhow!("starting the stdio session: {e}"))?;
            server.waiting().await.map_err(|e| anyhow!("stdio session: {e}"))?;
            Ok(())
        }
        Command::Tenant(TenantCommand::Create { slug, plan, department, industry }) => {
            let t = admin
                .create_tenant(TenantId::new(slug).map_err(domain_err)?, plan, department, industry)
                .await
                .map_err(domain_err)?;
            println!("created tenant {} (plan {}, {} × {})", t.id, t.plan, t.department, t.industry);
            Ok(())
        }
        Command::Tenant(TenantCommand::Show { slug, schema }) => {
            let t = admin.show_tenant(&TenantId::new(slug).map_err(domain_err)?).await.map_err(domain_err)?;
            if schema {
                println!("{}", serde_json::to_string_pretty(&services::capabilities::schema_document(&t))?);
                return Ok(());
            }
            println!("tenant:        {}", t.id);
            println!("display name:  {}", t.display_name);
            println!("plan:          {}", t.plan);
            println!("department:    {}", t.department);
            println!("industry:      {}", t.industry);
            println!("storage tier:  {}", t.storage_tier);
            println!("rate limit:    {}/min for the tenant", t.effective_rate_limit());
            let policy = t.triage.unwrap_or_default();
            println!(
                "triage:        weights {:?}, auto-approve ≥ {}, reject < {}, approval timeout {} s, personal data: {}{}",
                policy.weights,
                policy.auto_approve,
                policy.reject_below,
                policy.approval_timeout_secs,
                policy.personal_data,
                if t.triage.is_none() { " (defaults)" } else { "" }
            );
            for idp in &t.trusted_idps {
                println!("trusted IdP:   {} ({})", idp.issuer, idp.jwks_uri.as_deref().unwrap_or("inline JWKS"));
            }
            println!("created:       {}", t.created_at.to_rfc3339());
            println!("version:       {}", t.version);
            Ok(())
        }
        Command::Tenant(TenantCommand::List) => {
            for t in admin.list_tenants().await.map_err(domain_err)? {
                println!("{t}");
            }
            Ok(())
        }
        Command::Tenant(TenantCommand::Set { slug, changes }) => {
            let tenant_id = TenantId::new(slug.clone()).map_err(domain_err)?;
            let triage = if changes.triage_weights.is_some()
                || changes.auto_approve.is_some()
                || changes.reject_below.is_some()
                || changes.approval_timeout.is_some()
                || changes.personal_data.is_some()
            {
                let current = admin.show_tenant(&tenant_id).await.map_err(domain_err)?.triage.unwrap_or_default();
                let weights = match &changes.triage_weights {
                    Some(w) => <[f64; 5]>::try_from(w.as_slice()).map_err(|_| anyhow!("--triage-weights takes five numbers"))?,
                    None => current.weights,
                };
                Some(domain::tenant::TriagePolicy {
                    weights,
                    auto_approve: changes.auto_approve.unwrap_or(current.auto_approve),
                    reject_below: changes.reject_below.unwrap_or(current.reject_below),
                    approval_timeout_secs: changes.approval_timeout.unwrap_or(current.approval_timeout_secs),
                    personal_data: match changes.personal_data.as_deref() {
                        Some(rule) => domain::tenant::PersonalDataRule::parse(rule).map_err(domain_err)?,
                        None => current.personal_data,
                    },
                })
            } else {
                None
            };
            let c = TenantChanges {
                triage,
                plan: changes.plan,
                department: changes.department,
                industry: changes.industry,
                storage_tier: changes.storage_tier,
                display_name: changes.display_name,
                rate_limit_per_minute: changes.rate_limit_per_minute,
            };
            let t = admin.set_tenant(&TenantId::new(slug).map_err(domain_err)?, c).await.map_err(domain_err)?;
            println!(
                "updated tenant {} (plan {}, {} × {}, storage {}, version {})",
                t.id, t.plan, t.department, t.industry, t.storage_tier, t.version
            );
            Ok(())
        }
        Command::Key(KeyCommand::Create { tenant, scopes, principal, teams, projects, toolsets }) => {
            let toolsets = domain::principal::Toolsets::parse(&toolsets).map_err(domain_err)?;
            let req = KeyRequest {
                tenant: TenantId::new(tenant).map_err(domain_err)?,
                scopes: Scopes::parse(&scopes).map_err(domain_err)?,
                principal: principal.map(Id::new).transpose().map_err(domain_err)?,
                teams,
                projects,
            };
            let key = admin.create_key_with_toolsets(req, toolsets).await.map_err(domain_err)?;
            println!("{}", key.token);
            eprintln!("created key {} for tenant {}; this is the only time its secret is shown", key.key_id, key.tenant);
            Ok(())
        }
        Command::Key(KeyCommand::Revoke { tenant, key_id }) => {
            let tenant = TenantId::new(tenant).map_err(domain_err)?;
            admin.revoke_key(&tenant, &Id::new(key_id.clone()).map_err(domain_err)?).await.map_err(domain_err)?;
            println!("revoked key {key_id} of tenant {tenant}");
            Ok(())
        }
        Command::Key(KeyCommand::List { tenant }) => {
            let tenant = TenantId::new(tenant).map_err(domain_err)?;
            for k in admin.list_keys(&tenant).await.map_err(domain_err)? {
                let state = k.revoked_at.map_or_else(|| "active".to_owned(), |t| format!("revoked {}", t.to_rfc3339()));
                println!("{}  {}  principal={}  scopes=\"{}\"", k.key_id, state, k.principal, k.scopes.to_oauth_string());
            }
            Ok(())
        }
        Command::Entity(EntityCommand::Put { tenant, entity_type, id, attributes, pole_class }) => {
            let tenant = TenantId::new(tenant).map_err(domain_err)?;
            let attributes: Attributes =
                serde_json::from_str(&attributes).map_err(|e| anyhow!("--attributes must be a JSON object: {e}"))?;
            let operator = admin.operator(&tenant).await.map_err(domain_err)?;
            let e = s
                .entities
                .put(
                    &operator,
                    EntityType::new(entity_type).map_err(domain_err)?,
                    Id::new(id).map_err(domain_err)?,
                    pole_class,
                    attributes,
                    Expect::Any,
                )
                .await
                .map_err(domain_err)?;
            println!("stored {} {} (version {})", e.entity_type, e.id, e.version);
            Ok(())
        }
        Command::User(UserCommand::Add { tenant, email, role }) => {
            let password = read_password(&format!("Password for {email}: "))?;
            let user = services::admin::NewUser {
                tenant: TenantId::new(tenant).map_err(domain_err)?,
                email: email.clone(),
                role,
                password,
            };
            let tenant = user.tenant.clone();
            let id = admin.add_user(user).await.map_err(domain_err)?;
            println!("added user {email} ({role}) to tenant {tenant} as principal {id}");
            Ok(())
        }
        Command::Client(ClientCommand::Toolsets { client_id, toolsets }) => {
            let toolsets = domain::principal::Toolsets::parse(&toolsets).map_err(domain_err)?;
            let id = domain::Id::new(client_id).map_err(domain_err)?;
            admin.set_client_toolsets(&id, toolsets.clone()).await.map_err(domain_err)?;
            let names: Vec<&str> = toolsets.0.iter().map(|t| t.as_str()).collect();
            println!("client {id} is offered the toolsets {} from its next sign-in or refresh", names.join(","));
            Ok(())
        }
        Command::Client(ClientCommand::Create { tenant, name, scopes, jwt_bearer, toolsets }) => {
            let req = services::admin::NewServiceClient {
                tenant: TenantId::new(tenant).map_err(domain_err)?,
                name,
                scopes: Scopes::parse(&scopes).map_err(domain_err)?,
                jwt_bearer,
                toolsets: domain::principal::Toolsets::parse(&toolsets).map_err(domain_err)?,
            };
            let c = admin.create_service_client(req).await.map_err(domain_err)?;
            println!("client_id={}", c.client_id);
            println!("client_secret={}", c.client_secret);
            eprintln!("this is the only time the client secret is shown");
            Ok(())
        }
        Command::Maintenance
        | Command::Reindex { .. }
        | Command::Backup { .. }
        | Command::Compact { .. }
        | Command::Restore { .. } => durability(s, cli.command).await,
        Command::SigningKey(cmd) => {
            let signer = store_embedded::FileSigner::open(&home.path.join("keys"), ports::Clock::now(&ports::SystemClock))
                .map_err(domain_err)?;
            if matches!(cmd, SigningKeyCommand::Rotate) {
                let kid = signer.rotate(ports::Clock::now(&ports::SystemClock)).map_err(domain_err)?;
                println!("new signing key {kid}; restart `continuity serve` to sign with it");
            }
            for kid in signer.kids() {
                println!("{kid}");
            }
            Ok(())
        }
        Command::Tenant(TenantCommand::Idp(IdpCommand::Add { tenant, issuer, jwks_uri, jwks_file })) => {
            let jwks = match jwks_file {
                Some(f) => Some(
                    serde_json::from_str(&std::fs::read_to_string(&f).map_err(|e| anyhow!("reading {}: {e}", f.display()))?)
                        .map_err(|e| anyhow!("{} is not JSON: {e}", f.display()))?,
                ),
                None => None,
            };
            let idp = TrustedIdp { issuer: issuer.clone(), jwks_uri, jwks };
            let t = admin.trust_idp(&TenantId::new(tenant).map_err(domain_err)?, idp).await.map_err(domain_err)?;
            println!("tenant {} now trusts {issuer} ({} trusted IdPs)", t.id, t.trusted_idps.len());
            Ok(())
        }
        Command::Tenant(TenantCommand::Idp(IdpCommand::Remove { tenant, issuer })) => {
            let t = admin.distrust_idp(&TenantId::new(tenant).map_err(domain_err)?, &issuer).await.map_err(domain_err)?;
            println!("tenant {} no longer trusts {issuer}", t.id);
            Ok(())
        }
    }
}

/// A password from a terminal prompt (not echoed), or the first line of stdin.
fn read_password(prompt: &str) -> anyhow::Result<String> {
    use std::io::{BufRead as _, IsTerminal as _};
    let line = if std::io::stdin().is_terminal() {
        rpassword::prompt_password(prompt)?
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line
    };
    let password = line.trim_end_matches(['\r', '\n']).to_owned();
    if password.is_empty() {
        return Err(anyhow!("no password given (pipe it on stdin or type it at the prompt)"));
    }
    Ok(password)
}
