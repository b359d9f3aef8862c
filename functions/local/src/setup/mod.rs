//! `continuity setup`: connects the MCP clients installed for this user to this home's
//! server (or a remote one, `--url`) in one command. For each client it creates a key
//! named after the client (least scopes, the client's toolsets), writes the client's own
//! configuration format ([`clients`]) keeping everything else in the file ([`edit`]),
//! after a timestamped backup; `--dry-run` shows the diff, `--remove` undoes it, and a
//! re-run changes nothing. What it did is kept in the home's `setup.json`, so `--remove`
//! deletes only what setup created and revokes the keys it made.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use domain::principal::{Scopes, Toolsets};
use domain::{Id, TenantId};
use serde::{Deserialize, Serialize};

pub mod clients;
pub mod edit;

use clients::{CLIENTS, Client, Connection, Os, Platform};

/// What a client's key may do unless `--scopes` says otherwise: call tools, read
/// resources, read the tenant's context and memory, write its own memory and propose.
/// Never `approvals:decide` or `admin`; `tenant:write` (proposing actions, dispatching
/// tasks) only when asked for.
pub const DEFAULT_SCOPES: &str = "mcp:tools mcp:resources tenant:read memory:read memory:write";

/// The file in the home that remembers what setup did.
pub const STATE_FILE: &str = "setup.json";

/// How the clients reach the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// HTTP where the client's configuration can name a URL, stdio elsewhere.
    Auto,
    /// `continuity stdio` for every client (no `serve` needed for this home).
    Stdio,
}

/// Which configuration file of a client setup edits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ConfigScope {
    /// The client's configuration for this user.
    User,
    /// The project's configuration file (Claude Code, Cursor, VS Code).
    Project,
}

#[derive(Args, Debug)]
pub struct SetupArgs {
    /// Clients to set up (comma-separated or repeated): claude-desktop, claude-code,
    /// cursor, vscode, vscode-insiders, windsurf, codex, gemini, zed, or `all`. Default:
    /// every client found installed for this user.
    #[arg(long = "client", value_delimiter = ',')]
    clients: Vec<String>,
    /// Show what would change (a diff per file, keys masked) and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Undo: take our entry out of each client's file (what setup created goes) and
    /// revoke the keys setup made.
    #[arg(long)]
    remove: bool,
    /// A remote Continuity (a deployed stack, `serve` on another machine) instead of
    /// this home: its MCP URL (or base URL). Clients that sign in with OAuth get the URL
    /// alone; the others need `--key-file`.
    #[arg(long)]
    url: Option<String>,
    /// With `--url`: a file holding a key of the remote (from its operator). Every
    /// client then uses it instead of OAuth.
    #[arg(long, requires = "url")]
    key_file: Option<PathBuf>,
    /// Where `continuity serve` of this home listens. Default: the running serve's
    /// address (its `serve.json`), else the one setup wrote last, else
    /// http://127.0.0.1:8787.
    #[arg(long)]
    serve_url: Option<String>,
    /// The project a coding client's key belongs to (its engineering records and project
    /// memory). Default: the name of the git repository setup runs in, else `default`.
    #[arg(long)]
    project: Option<Id>,
    /// Teams whose team memory the keys may read (comma-separated).
    #[arg(long, value_delimiter = ',')]
    teams: Vec<Id>,
    /// `user` (each client's own configuration) or `project` (the project's
    /// `.mcp.json`, `.vscode/mcp.json`, `.cursor/mcp.json` in the repository's top
    /// folder; the entry starts `continuity stdio` with a key file kept in this home,
    /// so no secret lands in the repository).
    #[arg(long, value_enum, default_value_t = ConfigScope::User)]
    scope: ConfigScope,
    /// `auto` (HTTP where the client's file can name a URL) or `stdio` (every client
    /// starts `continuity stdio`, which needs no running `serve`).
    #[arg(long, value_enum, default_value_t = Transport::Auto)]
    transport: Transport,
    /// The tenant the keys belong to.
    #[arg(long, default_value = "local")]
    tenant: TenantId,
    /// The principal the keys act as (its personal memory is shared by the clients).
    #[arg(long, default_value = "owner")]
    principal: Id,
    /// The keys' scopes.
    #[arg(long, default_value = DEFAULT_SCOPES)]
    scopes: Scopes,
    /// The keys' toolsets (default: `canonical,graph` for Claude Desktop,
    /// `canonical,engineering` for the coding clients).
    #[arg(long)]
    toolsets: Option<Toolsets>,
    /// Use this system's folder layout (for tests and for preparing another machine).
    #[arg(long, value_enum, hide = true)]
    os: Option<Os>,
}

/// What setup did for one client, kept in the home.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
struct Done {
    path: PathBuf,
    /// The key setup created (local target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_id: Option<String>,
    /// The tenant the key belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tenant: Option<String>,
    /// Setup created the file (remove deletes it when nothing else is left in it).
    created_file: bool,
    /// Setup created the servers table of the file (remove drops it when empty).
    created_container: bool,
    /// The copy of the file as it was before setup first changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    original: Option<PathBuf>,
    /// The file's permissions then (setup narrows them while the file holds a key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    original_mode: Option<u32>,
    /// SHA-256 of what setup last wrote: while the file is still exactly that, `--remove`
    /// puts the original back byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    written_sha256: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    clients: BTreeMap<String, Done>,
    /// The `serve` address setup last wrote into clients' files: a later run without
    /// `--serve-url`, while serve is down, keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    serve_url: Option<String>,
}

/// Where setup's record of a client lives: `cursor`, or `cursor@/path/to/repo` for a
/// project's file.
fn state_key(client: &Client, target: &Target) -> String {
    match &target.project_root {
        Some(root) => format!("{}@{}", client.id, root.display()),
        None => client.id.to_owned(),
    }
}

/// What this run of setup writes, resolved once.
struct Target {
    /// `continuity serve`'s base URL.
    serve_url: String,
    /// The project coding clients' keys belong to.
    project: Id,
    /// With `--scope project`: the repository's top folder.
    project_root: Option<PathBuf>,
}

/// The git repository `dir` is in: its top folder (the one holding `.git`).
fn repository_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().find(|d| d.join(".git").exists()).map(Path::to_path_buf)
}

/// A project name from a folder's name: lower case, `[a-z0-9_-]`, at most 64 characters.
fn project_name(folder: &Path) -> Option<Id> {
    let raw = folder.file_name()?.to_string_lossy().to_lowercase();
    let mut name: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' }).take(64).collect();
    name = name.trim_matches('-').to_owned();
    Id::new(name).ok()
}

/// The serve address: `--serve-url`, else the running serve's, else the last one setup
/// wrote, else the address `serve` listens on by default.
async fn serve_url(home: &Path, args: &SetupArgs, state: &State) -> String {
    if let Some(u) = &args.serve_url {
        return u.trim_end_matches('/').to_owned();
    }
    if let Some(u) = crate::daemon::running(home).await {
        return u;
    }
    state.serve_url.clone().unwrap_or_else(|| "http://127.0.0.1:8787".into())
}

impl State {
    fn load(home: &Path) -> anyhow::Result<Self> {
        let path = home.join(STATE_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .with_context(|| format!("{} is damaged: move it away and run setup again", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(anyhow!("reading {}: {e}", path.display())),
        }
    }

    fn save(&self, home: &Path) -> anyhow::Result<()> {
        crate::home::create_folder(home)?;
        let text = serde_json::to_string_pretty(self)?;
        write_file(&home.join(STATE_FILE), &text, None)
    }
}

/// Runs `continuity setup`.
///
/// # Errors
/// A client whose file cannot be read as its format (nothing is written to it), a home
/// that cannot be opened, an unknown client name.
pub async fn run(home_flag: Option<PathBuf>, embedder: &str, args: SetupArgs) -> anyhow::Result<()> {
    let os = args.os.unwrap_or(Os::current());
    let platform = Platform::from_env(os, |k| std::env::var(k).ok())
        .ok_or_else(|| anyhow!("no home folder to find clients in: set HOME (USERPROFILE on Windows)"))?;
    let chosen = choose(&args, &platform)?;
    let home = std::path::absolute(crate::home::resolve(home_flag)).context("resolving the home folder")?;
    let mut state = State::load(&home)?;
    let mut keys = Keys::new(&home, embedder, &args).await?;
    let cwd = std::env::current_dir().context("finding the current folder")?;
    let repo = repository_root(&cwd);
    let project_root = match args.scope {
        ConfigScope::User => None,
        ConfigScope::Project => Some(repo.clone().unwrap_or_else(|| cwd.clone())),
    };
    let project = match &args.project {
        Some(p) => p.clone(),
        None => match repo.as_deref().and_then(project_name) {
            Some(p) => p,
            None => Id::new("default")?,
        },
    };
    let target = Target { serve_url: serve_url(&home, &args, &state).await, project, project_root };
    let (mut failed, mut changed) = (0, 0);
    for client in chosen {
        if target.project_root.is_some() && client.project_file().is_none() {
            println!("{:<18} skipped: it reads no project-level configuration (use --scope user)", client.name);
            continue;
        }
        let result = if args.remove {
            remove_one(client, &platform, &mut state, &mut keys, &args, &target).await
        } else {
            setup_one(client, &platform, &mut state, &mut keys, &args, &target).await
        };
        match result {
            Ok(line) => {
                changed += usize::from(line.starts_with("configured"));
                println!("{:<18} {line}", client.name);
            }
            Err(e) => {
                failed += 1;
                println!("{:<18} not changed: {e:#}", client.name);
            }
        }
        if !args.dry_run {
            state.save(&home)?;
        }
    }
    if changed > 0 && args.url.is_none() && target.project_root.is_none() && !args.dry_run && !args.remove {
        state.serve_url = Some(target.serve_url.clone());
        state.save(&home)?;
    }
    if changed > 0 {
        match &args.url {
            None if args.transport == Transport::Auto && target.project_root.is_none() => println!(
                "\nStart the server the clients connect to: continuity serve (it listens on {}). Restart open clients to load the change.",
                target.serve_url
            ),
            _ => println!("\nRestart open clients to load the change."),
        }
    }
    if failed > 0 {
        bail!("{failed} client(s) not set up: fix what is said above and run `continuity setup` again");
    }
    Ok(())
}

/// The clients named by `--client`, else those installed.
fn choose(args: &SetupArgs, platform: &Platform) -> anyhow::Result<Vec<&'static Client>> {
    if args.clients.iter().any(|c| c == "all") {
        return Ok(CLIENTS.iter().collect());
    }
    if !args.clients.is_empty() {
        return args
            .clients
            .iter()
            .map(|id| {
                clients::find(id.trim()).ok_or_else(|| {
                    let known: Vec<&str> = CLIENTS.iter().map(|c| c.id).collect();
                    anyhow!("unknown client {id:?}: choose from {} or all", known.join(", "))
                })
            })
            .collect();
    }
    let found: Vec<&Client> = CLIENTS.iter().filter(|c| c.detected(platform)).collect();
    if found.is_empty() {
        let known: Vec<&str> = CLIENTS.iter().map(|c| c.id).collect();
        bail!(
            "no MCP client found for this user (looked for {}); name one with --client, e.g. `continuity setup --client cursor`",
            known.join(", ")
        );
    }
    Ok(found)
}

/// Keys of this home: created, checked and revoked through its services (opened only
/// when a key is needed).
struct Keys {
    home: PathBuf,
    embedder: String,
    services: Option<services::Services>,
    remote_key: Option<String>,
}

impl Keys {
    async fn new(home: &Path, embedder: &str, args: &SetupArgs) -> anyhow::Result<Self> {
        let remote_key = match &args.key_file {
            Some(f) => {
                let k = std::fs::read_to_string(f).with_context(|| format!("reading the key file {}", f.display()))?;
                let k = k.trim().to_owned();
                if k.is_empty() || k.contains(char::is_whitespace) {
                    bail!("{} does not hold a key (one line, `ctn_…`)", f.display());
                }
                Some(k)
            }
            None => None,
        };
        Ok(Self { home: home.to_path_buf(), embedder: embedder.to_owned(), services: None, remote_key })
    }

    async fn services(&mut self) -> anyhow::Result<&services::Services> {
        if self.services.is_none() {
            let created = !crate::home::exists(&self.home);
            let home = crate::home::open(self.home.clone(), &self.embedder).await?;
            if created && self.embedder == "auto" && crate::cli::model::installed(&home.path).is_none() {
                // Its first `serve` fetches the model, as if serve had made it.
                crate::home::mark_model_pending(&home.path);
            }
            self.services = Some(home.services);
        }
        self.services.as_ref().ok_or_else(|| anyhow!("home not open"))
    }

    /// The key record a token names in this home, when it still works.
    async fn working(&mut self, token: &str) -> Option<domain::principal::ApiKeyRecord> {
        // A home that does not exist holds no key (and is not created to find out).
        if self.services.is_none() && !crate::home::exists(&self.home) {
            return None;
        }
        let s = self.services().await.ok()?;
        let caller = s.auth.authenticate_token(token, "http://127.0.0.1").await.ok()?;
        let key_id = caller.credential.strip_prefix("api_key:")?;
        let id = Id::new(key_id.to_owned()).ok()?;
        s.admin.list_keys(&caller.tenant).await.ok()?.into_iter().find(|k| k.key_id == id)
    }
}

fn cli_actor() -> String {
    format!("setup:{}", std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| "operator".into()))
}

use crate::bridge::mcp_url;

fn this_exe() -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("finding this program's path")?;
    Ok(exe.canonicalize().unwrap_or(exe).display().to_string())
}

/// The keys of our entry that setup owns; any other key a person added to the entry
/// (`disabled`, `timeout`, …) is kept.
const OWNED_KEYS: &[&str] = &["type", "url", "serverUrl", "httpUrl", "headers", "http_headers", "command", "args", "env"];

/// Our entry, with the fields a person added to the existing one kept after ours.
fn merged(existing: Option<&serde_json::Value>, ours: clients::Entry) -> clients::Entry {
    let mut out = ours;
    if let Some(obj) = existing.and_then(serde_json::Value::as_object) {
        for (k, v) in obj {
            if !OWNED_KEYS.contains(&k.as_str()) && !out.iter().any(|(o, _)| o == k) {
                out.push((k.clone(), v.clone()));
            }
        }
    }
    out
}

/// How a client reaches this home: `continuity stdio` with the key (in a project's file,
/// a key file in the home, so the repository holds no secret), or HTTP to `serve`.
fn local_connection(
    home: &Path,
    target: &Target,
    key_file: Option<&Path>,
    stdio: bool,
    token: String,
) -> anyhow::Result<Connection> {
    Ok(match key_file {
        Some(file) => Connection::Stdio {
            command: this_exe()?,
            args: vec![
                "stdio".into(),
                "--home".into(),
                home.display().to_string(),
                "--key-file".into(),
                file.display().to_string(),
            ],
            env: vec![],
        },
        None if stdio => Connection::Stdio {
            command: this_exe()?,
            args: vec!["stdio".into(), "--home".into(), home.display().to_string()],
            env: vec![("CONTINUITY_KEY".into(), token)],
        },
        None => Connection::Http { url: mcp_url(&target.serve_url)?, bearer: Some(token) },
    })
}

/// The file in the home holding the key of a client's entry in a project's file.
fn project_key_file(home: &Path, client: &Client, target: &Target) -> Option<PathBuf> {
    let root = target.project_root.as_ref()?;
    let digest = sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(root.display().to_string()));
    let short: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    Some(home.join("clients").join(format!("{}-{}-{short}.key", client.id, target.project)))
}

/// The toolsets of a client's key.
fn toolsets_for(client: &Client, args: &SetupArgs) -> anyhow::Result<Toolsets> {
    match &args.toolsets {
        Some(t) => Ok(t.clone()),
        None => client.toolsets.parse().map_err(|e: domain::Error| anyhow!("{}", e.message)),
    }
}

/// Sets up one client; returns what happened, for the summary line.
/// The file setup edits for `client`: its own, or the project's.
fn config_file(client: &Client, platform: &Platform, target: &Target) -> PathBuf {
    match (&target.project_root, client.project_file()) {
        (Some(root), Some(file)) => root.join(file),
        _ => client.config_path(platform),
    }
}

async fn setup_one(
    client: &'static Client,
    platform: &Platform,
    state: &mut State,
    keys: &mut Keys,
    args: &SetupArgs,
    target: &Target,
) -> anyhow::Result<String> {
    let path = config_file(client, platform, target);
    let before = read_optional(&path)?;
    let existing = edit::read_entry(client.format, before.as_deref().unwrap_or_default(), client.container)
        .with_context(|| format!("{} is not valid {:?}: fix it, then run setup again", path.display(), client.format))?;
    let stdio = args.transport == Transport::Stdio || !client.http;
    let key_file = project_key_file(&keys.home, client, target);
    let old_token = match &key_file {
        Some(f) => std::fs::read_to_string(f).ok().map(|t| t.trim().to_owned()),
        None => existing.as_ref().and_then(clients::entry_token).map(str::to_owned),
    };
    let toolsets = toolsets_for(client, args)?;
    // A coding client's key belongs to the project (its engineering records).
    let projects =
        if toolsets.contains(domain::principal::Toolset::Engineering) { vec![target.project.to_string()] } else { vec![] };
    let teams: Vec<String> = args.teams.iter().map(ToString::to_string).collect();
    let mut new_key: Option<domain::principal::ApiKeyRecord> = None;
    let mut created_token: Option<String> = None;
    let connection = match &args.url {
        Some(url) => {
            let url = mcp_url(url)?;
            let key = keys.remote_key.clone();
            if stdio {
                let Some(key) = key else {
                    return Ok(format!(
                        "skipped: its file names only local commands, so it reaches {url} through `continuity stdio --url` with a key: \
                         add --key-file FILE"
                    ));
                };
                let home = keys.home.display().to_string();
                Connection::Stdio {
                    command: this_exe()?,
                    args: vec!["stdio".into(), "--url".into(), url, "--home".into(), home],
                    env: vec![("CONTINUITY_KEY".into(), key)],
                }
            } else if key.is_none() && !client.oauth {
                return Ok("skipped: it cannot sign in with OAuth by itself; add --key-file FILE".into());
            } else {
                Connection::Http { url, bearer: key }
            }
        }
        None => {
            // Keep the key the file holds when it still works in this home for this tenant
            // with these memberships.
            let kept = match &old_token {
                Some(t) => keys
                    .working(t)
                    .await
                    .filter(|k| k.tenant == args.tenant && k.projects == projects && k.teams == teams && k.toolsets == toolsets)
                    .map(|_| t.clone()),
                None => None,
            };
            let token = match kept {
                Some(t) => t,
                None if args.dry_run => format!("<new key for {}>", client.id),
                None => {
                    // The file must take the entry before a key is made for it.
                    let trial = local_connection(&keys.home, target, key_file.as_deref(), stdio, "<new key>".into())?;
                    let trial = merged(existing.as_ref(), client.entry(&trial));
                    edit::upsert(client.format, before.as_deref(), client.container, &trial)?;
                    let s = keys.services().await?;
                    let req = services::admin::KeyRequest {
                        tenant: args.tenant.clone(),
                        scopes: args.scopes.clone(),
                        principal: Some(args.principal.clone()),
                        teams: teams.clone(),
                        projects: projects.clone(),
                    };
                    let issued = s
                        .admin
                        .acting_as(cli_actor())
                        .create_named_key(req, toolsets.clone(), Some(client.id.to_owned()))
                        .await
                        .map_err(|e| anyhow!("creating its key: {}", e.for_operator()))?;
                    new_key = keys.working(&issued.token).await;
                    created_token = Some(issued.token.clone());
                    issued.token
                }
            };
            if let Some(f) = &key_file
                && !args.dry_run
                && old_token.as_deref() != Some(token.as_str())
            {
                crate::home::create_folder(f.parent().unwrap_or(&keys.home))?;
                write_file(f, &format!("{token}\n"), None)?;
            }
            local_connection(&keys.home, target, key_file.as_deref(), stdio, token)?
        }
    };
    let entry = merged(existing.as_ref(), client.entry(&connection));
    if existing.as_ref() == Some(&clients::entry_value(&entry)) {
        return Ok(format!("unchanged ({})", path.display()));
    }
    let (after, created_container) = edit::upsert(client.format, before.as_deref(), client.container, &entry)?;
    if args.dry_run {
        print_diff(&path, before.as_deref().unwrap_or_default(), &after);
        return Ok(format!("would change {}", path.display()));
    }
    let original_mode = std::fs::metadata(&path).ok().and_then(|m| store_embedded::private::mode(&m));
    let written = (|| -> anyhow::Result<Option<PathBuf>> {
        refuse_links_out_of(&path, &platform.home)?;
        let aside = match &before {
            Some(b) => Some(backup(&path, b)?),
            None => None,
        };
        write_file(&path, &after, before.as_ref().map(|_| path.as_path()))?;
        Ok(aside)
    })();
    let aside = match written {
        Ok(aside) => aside,
        Err(e) => {
            // The key was made for this file only: it goes again.
            if let (Some(k), Ok(s)) = (&new_key, keys.services().await) {
                let _ = s.admin.acting_as(cli_actor()).revoke_key(&k.tenant, &k.key_id).await;
            }
            return Err(e);
        }
    };
    let previous = state.clients.get(&state_key(client, target)).cloned();
    let mut done = previous.clone().unwrap_or_default();
    if previous.as_ref().is_none_or(|p| p.path != path) {
        done = Done {
            path: path.clone(),
            created_file: before.is_none(),
            created_container,
            original: aside,
            original_mode,
            ..Done::default()
        };
    }
    done.written_sha256 = Some(sha256_hex(&after));
    if let Some(k) = &new_key {
        // The key this one replaces (made by an earlier setup) is revoked.
        if let (Some(old), Some(tenant)) = (&done.key_id, &done.tenant)
            && old != k.key_id.as_str()
            && let (Ok(old), Ok(tenant)) = (Id::new(old.clone()), TenantId::new(tenant.clone()))
            && let Ok(s) = keys.services().await
        {
            let _ = s.admin.acting_as(cli_actor()).revoke_key(&tenant, &old).await;
        }
        done.key_id = Some(k.key_id.to_string());
        done.tenant = Some(k.tenant.to_string());
    } else if args.url.is_some() {
        // Now pointed at a remote: the local key setup made for it is no longer used.
        if let (Some(old), Some(tenant)) = (done.key_id.take(), done.tenant.take())
            && let (Ok(old), Ok(tenant)) = (Id::new(old), TenantId::new(tenant))
            && let Ok(s) = keys.services().await
        {
            let _ = s.admin.acting_as(cli_actor()).revoke_key(&tenant, &old).await;
        }
    }
    state.clients.insert(state_key(client, target), done);
    let key_note = match (&created_token, args.url.is_some(), &connection) {
        (Some(_), _, _) if projects.is_empty() => format!(", new key named {:?}", client.id),
        (Some(_), _, _) => format!(", new key named {:?} for project {}", client.id, target.project),
        (None, true, Connection::Http { bearer: None, .. }) => ", signs in with OAuth on first use".into(),
        _ => String::new(),
    };
    let how = if matches!(connection, Connection::Stdio { .. }) { "stdio" } else { "HTTP" };
    Ok(format!("configured ({how}{key_note}) in {}", path.display()))
}

async fn remove_one(
    client: &'static Client,
    platform: &Platform,
    state: &mut State,
    keys: &mut Keys,
    args: &SetupArgs,
    target: &Target,
) -> anyhow::Result<String> {
    let record = state_key(client, target);
    let done = state.clients.get(&record).cloned();
    let path = done.as_ref().map_or_else(|| config_file(client, platform, target), |d| d.path.clone());
    let key_file = project_key_file(&keys.home, client, target);
    let Some(before) = read_optional(&path)? else {
        state.clients.remove(&record);
        return Ok(format!("nothing to remove ({} does not exist)", path.display()));
    };
    let existing = edit::read_entry(client.format, &before, client.container)
        .with_context(|| format!("{} is not valid {:?}: fix it, then run setup again", path.display(), client.format))?;
    let Some(existing) = existing else {
        state.clients.remove(&record);
        return Ok(format!("nothing to remove in {}", path.display()));
    };
    // Only an entry setup wrote: recorded in setup.json, or holding a key of this home
    // named after the client. A hand-written `continuity` entry is left alone.
    let token = match &key_file {
        Some(f) => std::fs::read_to_string(f).ok().map(|t| t.trim().to_owned()),
        None => clients::entry_token(&existing).map(str::to_owned),
    };
    let named = match token {
        Some(t) if args.url.is_none() => keys.working(&t).await.filter(|k| k.name.as_deref() == Some(client.id)),
        _ => None,
    };
    if done.is_none() && named.is_none() {
        return Ok(format!("left alone: the `continuity` entry in {} was not written by setup", path.display()));
    }
    let drop_container = done.as_ref().is_some_and(|d| d.created_container);
    // Untouched since setup wrote it: the original comes back byte for byte (other
    // servers' entries exactly as they were laid out). Changed since: only our entry goes.
    let untouched = done.as_ref().and_then(|d| d.written_sha256.as_deref()) == Some(sha256_hex(&before).as_str());
    let original =
        done.as_ref().and_then(|d| d.original.as_ref()).filter(|_| untouched).and_then(|p| std::fs::read_to_string(p).ok());
    let after = match &original {
        Some(text) => text.clone(),
        None => edit::remove(client.format, &before, client.container, drop_container)?,
    };
    let delete_file =
        done.as_ref().is_some_and(|d| d.created_file) && (untouched || edit::is_empty_document(client.format, &after));
    if args.dry_run {
        print_diff(&path, &before, if delete_file { "" } else { &after });
        return Ok(format!("would remove our entry from {}", path.display()));
    }
    refuse_links_out_of(&path, &platform.home)?;
    backup(&path, &before)?;
    if delete_file {
        std::fs::remove_file(&path).with_context(|| format!("deleting {}", path.display()))?;
    } else {
        write_file(&path, &after, Some(&path))?;
        // The key is gone: the file's own permissions come back.
        if let Some(mode) = done.as_ref().and_then(|d| d.original_mode) {
            let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            store_embedded::private::set_mode(&real, mode)
                .with_context(|| format!("restoring the permissions of {}", path.display()))?;
        }
    }
    // The key setup made for this client — from the record, else the one in the entry
    // when this home knows it by the client's name.
    let mut revoked = None;
    let target = match (&done, named) {
        (Some(Done { key_id: Some(k), tenant: Some(t), .. }), _) => Id::new(k.clone()).ok().zip(TenantId::new(t.clone()).ok()),
        (_, Some(k)) => Some((k.key_id, k.tenant)),
        _ => None,
    };
    if let Some((key_id, tenant)) = target {
        let s = keys.services().await?;
        match s.admin.acting_as(cli_actor()).revoke_key(&tenant, &key_id).await {
            Ok(()) => revoked = Some(key_id),
            Err(e) if e.code == domain::ErrorCode::NotFound => {}
            Err(e) => return Err(anyhow!("revoking its key {key_id}: {}", e.for_operator())),
        }
    }
    if let Some(f) = &key_file {
        let _ = std::fs::remove_file(f);
    }
    state.clients.remove(&record);
    let what = if delete_file {
        format!("deleted {} (setup had created it)", path.display())
    } else {
        format!("removed from {}", path.display())
    };
    Ok(match revoked {
        Some(k) => format!("{what}; key {k} revoked"),
        None => what,
    })
}

fn sha256_hex(text: &str) -> String {
    sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(text)).iter().map(|b| format!("{b:02x}")).collect()
}

/// A client's file that is a link to somewhere outside the user's home folder is not
/// written through (setup would change a file it was not asked about, and its mode).
fn refuse_links_out_of(path: &Path, user_home: &Path) -> anyhow::Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        let target = std::fs::canonicalize(path).with_context(|| format!("following the link {}", path.display()))?;
        let home = std::fs::canonicalize(user_home).unwrap_or_else(|_| user_home.to_path_buf());
        if !target.starts_with(&home) {
            bail!(
                "{} is a link to {}, outside your home folder: setup does not write there (edit it by hand, or point the link inside {})",
                path.display(),
                target.display(),
                home.display()
            );
        }
    }
    Ok(())
}

fn read_optional(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow!("reading {}: {e}", path.display())),
    }
}

/// Copies a file aside before it changes: `<file>.continuity-backup-<UTC time>`.
fn backup(path: &Path, text: &str) -> anyhow::Result<PathBuf> {
    let now = time::OffsetDateTime::now_utc();
    let stamp = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}.{:03}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.millisecond()
    );
    let mut name = path.file_name().map(std::ffi::OsStr::to_os_string).unwrap_or_default();
    name.push(format!(".continuity-backup-{stamp}"));
    let aside = path.with_file_name(name);
    write_file(&aside, text, Some(path))?;
    Ok(aside)
}

/// Writes a file whole (a temporary file renamed over it), with the permissions of
/// `like` when it exists, else readable by the user alone (it holds a key).
fn write_file(path: &Path, text: &str, like: Option<&Path>) -> anyhow::Result<()> {
    use std::io::Write as _;
    // A linked file (a dotfiles manager's) is written where it points, the link kept.
    let resolved = if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::canonicalize(path).with_context(|| format!("following the link {}", path.display()))?
    } else {
        path.to_path_buf()
    };
    let path = resolved.as_path();
    let dir = path.parent().ok_or_else(|| anyhow!("{} has no folder", path.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // It holds a key: never readable by others, whatever the file allowed before.
    let mode =
        like.and_then(|p| std::fs::metadata(p).ok()).and_then(|m| store_embedded::private::mode(&m)).map_or(0o600, |m| m & 0o600);
    let mut tmp = tempfile::NamedTempFile::new_in(dir).with_context(|| format!("writing in {}", dir.display()))?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    store_embedded::private::set_mode(tmp.path(), mode)?;
    tmp.persist(path).map_err(|e| anyhow!("writing {}: {}", path.display(), e.error))?;
    Ok(())
}

fn print_diff(path: &Path, before: &str, after: &str) {
    let shown = path.display().to_string();
    let diff = similar::TextDiff::from_lines(before, after).unified_diff().context_radius(3).header(&shown, &shown).to_string();
    print!("{}", mask_keys(&diff));
}

/// Keys in shown text cut to their first characters: `ctn_local.abc…`.
pub fn mask_keys(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("ctn_") {
        out.push_str(&rest[..i]);
        let token_len =
            rest[i..].find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))).unwrap_or(rest.len() - i);
        let token = &rest[i..i + token_len];
        out.push_str(&token[..token.len().min(12)]);
        if token.len() > 12 {
            out.push('…');
        }
        rest = &rest[i + token_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_masked_in_diffs() {
        assert_eq!(mask_keys("\"Bearer ctn_local.k1.secretsecret\" and ctn_x"), "\"Bearer ctn_local.k1…\" and ctn_x");
    }

    #[test]
    fn urls_are_mcp_urls() {
        assert_eq!(mcp_url("http://127.0.0.1:8787").unwrap(), "http://127.0.0.1:8787/mcp");
        assert_eq!(mcp_url("https://x.example/mcp/").unwrap(), "https://x.example/mcp");
        assert!(mcp_url("ftp://x").is_err());
    }
}
