//! A capability's policy as data (SPEC §5.1, §5.3, §7.1): its minimum plan tier,
//! required scopes, channel, toolset, connector need and route destination. Each
//! capability states its own, as a constant beside its handler
//! (`services::capabilities::typed::Capability::SPEC`); there is no table here.
//! Per-tenant tier overrides are applied by the resolver, not here.

use domain::principal::{Scope, Toolset};
use domain::tenant::PlanTier;

/// The MCP channel a capability belongs to (`Api` = capability API only, not an MCP tool).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Memory,
    Session,
    Tool,
    Api,
}

impl Channel {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Session => "session",
            Self::Tool => "tool",
            Self::Api => "api",
        }
    }
}

/// Where a resolved capability is served (SPEC §5.2 step 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// Entity, signal, task and memory lookups in the store.
    StoreIndex,
    /// Memory and KB search.
    VectorIndex,
    /// Another function (governance, the pipeline).
    RemoteFunction,
    /// A rare live pass-through to a connected tool, for an approved write.
    ConnectorProxy,
}

impl RouteKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::StoreIndex => "STORE_INDEX",
            Self::VectorIndex => "VECTOR_INDEX",
            Self::RemoteFunction => "REMOTE_FUNCTION",
            Self::ConnectorProxy => "CONNECTOR_PROXY",
        }
    }
}

/// Whether a capability needs a connected source (SPEC §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectorNeed {
    None,
    /// Data that only connectors produce (signals): at least one connector must exist,
    /// and at least one must have data.
    Any,
    /// The source named by the request's `source` argument.
    Named,
}

/// How a capability uses the tenant's Spine schema (SPEC §5.2 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaUse {
    None,
    /// Reads strip fields outside `priority_fields`.
    Read,
    /// Writes reject unknown fields.
    Write,
}

/// Who may call a capability and where it goes: what the resolver needs of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapabilitySpec {
    /// Its stable name (`spine.entity.get`).
    pub name: &'static str,
    pub channel: Channel,
    /// The toolset its MCP tool belongs to (`Canonical` for the capability API's own).
    pub toolset: Toolset,
    pub min_tier: PlanTier,
    pub scopes: &'static [Scope],
    pub connector: ConnectorNeed,
    pub route: RouteKind,
    /// What serves the route (a store index, a function name).
    pub target: &'static str,
    pub schema: SchemaUse,
    /// Planning hint: how long a result may be cached; `None` = never (org memory is
    /// always fresh).
    pub cache_ttl_secs: Option<u64>,
    pub read_only: bool,
}

impl CapabilitySpec {
    /// A read-only capability of the canonical toolset that needs no connector, has no
    /// schema use and is never cached; the methods below say otherwise.
    ///
    /// # Panics
    /// (At compile time, where specs are constants.) When `name` is not a well-formed
    /// capability name ([`crate::CapabilityName`]) or `scopes` is empty.
    pub const fn new(
        name: &'static str,
        channel: Channel,
        min_tier: PlanTier,
        scopes: &'static [Scope],
        route: RouteKind,
        target: &'static str,
    ) -> Self {
        assert!(crate::capability::well_formed(name), "a capability name is <domain>.<resource>[.<operation>]");
        assert!(!scopes.is_empty(), "a capability requires at least one scope");
        Self {
            name,
            channel,
            toolset: Toolset::Canonical,
            min_tier,
            scopes,
            connector: ConnectorNeed::None,
            route,
            target,
            schema: SchemaUse::None,
            cache_ttl_secs: None,
            read_only: true,
        }
    }

    /// It writes.
    #[must_use]
    pub const fn writes(mut self) -> Self {
        self.read_only = false;
        self
    }

    /// Its results may be cached this long.
    #[must_use]
    pub const fn cached(mut self, ttl_secs: u64) -> Self {
        self.cache_ttl_secs = Some(ttl_secs);
        self
    }

    /// It reads or writes entities of the tenant's schema.
    #[must_use]
    pub const fn schema(mut self, use_: SchemaUse) -> Self {
        self.schema = use_;
        self
    }

    /// It needs a connected source.
    #[must_use]
    pub const fn connector(mut self, need: ConnectorNeed) -> Self {
        self.connector = need;
        self
    }

    /// Its MCP tool belongs to `toolset`.
    #[must_use]
    pub const fn toolset(mut self, toolset: Toolset) -> Self {
        self.toolset = toolset;
        self
    }
}
