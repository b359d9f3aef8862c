//! The resolution algorithm (SPEC §5.2): tenant config → plan gate → scopes → schema →
//! connector gate → route with planning hints. Pure: the caller finds the capability's
//! policy (step 1, parse and look up, is the caller's: it holds the capabilities) and
//! passes it in with the tenant's configuration and connector statuses, and gets a route
//! or a taxonomy error with its payload.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use domain::connector::{ConnectorState, ConnectorStatus};
use domain::principal::{Scope, Scopes};
use domain::tenant::{Department, Industry, PlanTier, Tenant};
use domain::value::Attributes;
use domain::{Error, ErrorCode};

use crate::policy::{CapabilitySpec, ConnectorNeed, RouteKind, SchemaUse};
use crate::schema::{EntityTypeSpec, TenantSchema, resolve_schema};

/// Where a client upgrades its plan (payload of `PLAN_INSUFFICIENT`).
pub const UPGRADE_URL: &str = "https://continuity.dev/upgrade";
/// `Retry-After` for `RESOLVER_DEGRADED`.
pub const DEGRADED_RETRY_AFTER_SECS: u64 = 5;

/// What the resolver knows of a tenant, loaded (and cached) by the caller.
#[derive(Debug, Clone, Copy)]
pub struct TenantView<'a> {
    pub tenant: &'a Tenant,
    pub connectors: &'a [ConnectorStatus],
}

/// One resolution request.
#[derive(Debug, Clone, Copy)]
pub struct ResolveRequest<'a> {
    /// The capability's policy.
    pub spec: &'static CapabilitySpec,
    pub scopes: &'a Scopes,
    /// For `spine.entity.*`: the entity type addressed (optional for searches).
    pub entity_type: Option<&'a str>,
    /// For schema writes: the attributes to be written.
    pub attributes: Option<&'a Attributes>,
    /// For capabilities that need a named connector.
    pub source: Option<&'a str>,
}

/// A successful resolution: where to go and how.
#[derive(Debug, Clone)]
pub struct Resolution {
    pub spec: &'static CapabilitySpec,
    pub route: RouteKind,
    pub target: &'static str,
    /// How long the result may be cached (`None`: never, e.g. org memory).
    pub cache_ttl_secs: Option<u64>,
    pub read_only: bool,
    /// The entity type's schema when the capability addresses one.
    pub entity_type: Option<&'static EntityTypeSpec>,
    /// Reads must return only these fields (`priority_fields`).
    pub visible_fields: Option<&'static BTreeSet<String>>,
    /// The tenant's resolved schema (department × industry).
    pub schema: &'static TenantSchema,
}

/// Every department × industry schema, resolved once: the data is constant, so this is
/// a lazily built constant table, not state.
pub fn schema_for(department: Department, industry: Industry) -> &'static TenantSchema {
    static ALL: OnceLock<Vec<TenantSchema>> = OnceLock::new();
    let all = ALL
        .get_or_init(|| Department::ALL.iter().flat_map(|d| Industry::ALL.iter().map(move |i| resolve_schema(*d, *i))).collect());
    let d = Department::ALL.iter().position(|x| *x == department).unwrap_or(0);
    let i = Industry::ALL.iter().position(|x| *x == industry).unwrap_or(0);
    &all[d * Industry::ALL.len() + i]
}

/// The tier a capability needs for this tenant (its override, else the default).
pub fn min_tier(spec: &CapabilitySpec, tenant: &Tenant) -> PlanTier {
    tenant.tier_overrides.get(spec.name).copied().unwrap_or(spec.min_tier)
}

fn plan_insufficient(spec: &CapabilitySpec, needed: PlanTier, plan: PlanTier) -> Error {
    let mut e = Error::new(
        ErrorCode::PlanInsufficient,
        format!("{} needs the {needed} plan; this tenant is on the {plan} plan", spec.name),
    );
    e.payload.upgrade_url = Some(format!("{UPGRADE_URL}?plan={needed}&capability={}", spec.name));
    e
}

fn not_available(source: Option<&str>, why: &str) -> Error {
    let mut e = Error::new(ErrorCode::ConnectorNotAvailable, why.to_owned());
    e.payload.connect_url = Some(match source {
        Some(s) => format!("/v1/connectors/{s}"),
        None => "/v1/connectors".to_owned(),
    });
    e
}

fn syncing(source: &str, progress: f64) -> Error {
    let mut e = Error::new(
        ErrorCode::ConnectorSyncing,
        format!("{source} is connected and its first sync is running; its data is not available yet"),
    );
    e.payload.progress = Some(progress.clamp(0.0, 1.0));
    e.payload.retry_after_secs = Some(30);
    e
}

/// Whether a connector's data may be read now; `Err` is the taxonomy answer.
fn connector_ready(c: &ConnectorStatus) -> Result<(), Error> {
    let src = c.source.as_str();
    match c.state {
        ConnectorState::SyncComplete | ConnectorState::SyncingDelta => Ok(()),
        // A failed delta sync still leaves the data of the last complete sync.
        ConnectorState::SyncError if c.error_stage.as_deref() == Some("syncing_delta") => Ok(()),
        ConnectorState::OauthComplete => Err(syncing(src, 0.0)),
        ConnectorState::SyncingInitial => Err(syncing(src, c.progress.unwrap_or(0.0))),
        ConnectorState::SyncError => {
            Err(not_available(Some(src), &format!("{src} failed before its first complete sync; reconnect or retry it")))
        }
        ConnectorState::NotConnected | ConnectorState::OauthPending => {
            Err(not_available(Some(src), &format!("{src} is not connected for this tenant")))
        }
    }
}

fn connector_gate(spec: &CapabilitySpec, req: &ResolveRequest<'_>, connectors: &[ConnectorStatus]) -> Result<(), Error> {
    match spec.connector {
        ConnectorNeed::None => Ok(()),
        ConnectorNeed::Named => {
            let source = req.source.ok_or_else(|| Error::invalid_field("source", format!("{} needs a source", spec.name)))?;
            match connectors.iter().find(|c| c.source.as_str() == source) {
                Some(c) => connector_ready(c),
                None => Err(not_available(Some(source), &format!("{source} is not connected for this tenant"))),
            }
        }
        ConnectorNeed::Any => {
            if connectors.iter().any(|c| connector_ready(c).is_ok()) {
                return Ok(());
            }
            // Nothing has data yet: report the most advanced initial sync, if any.
            let best = connectors
                .iter()
                .filter(|c| matches!(c.state, ConnectorState::OauthComplete | ConnectorState::SyncingInitial))
                .max_by(|a, b| a.progress.unwrap_or(0.0).total_cmp(&b.progress.unwrap_or(0.0)));
            match best {
                Some(c) => connector_ready(c),
                None => Err(not_available(None, &format!("{} needs a connected source; none is connected", spec.name))),
            }
        }
    }
}

/// Resolves one capability for one caller. `tenant` is `None` when the caller could
/// not load the tenant's configuration.
///
/// # Errors
/// `RESOLVER_DEGRADED` (with `Retry-After`), `PLAN_INSUFFICIENT`
/// (with `upgrade_url`), `FORBIDDEN` (missing scope), `INVALID_REQUEST` (schema: unknown
/// type, unknown or missing fields), `CONNECTOR_NOT_AVAILABLE` (with `connect_url`),
/// `CONNECTOR_SYNCING` (with `progress`).
pub fn resolve(req: &ResolveRequest<'_>, tenant: Option<&TenantView<'_>>) -> Result<Resolution, Error> {
    let spec = req.spec;
    // 2. tenant config
    let view = tenant.ok_or_else(|| {
        Error::new(ErrorCode::ResolverDegraded, "the tenant configuration cannot be loaded right now; retry shortly")
            .with_retry_after(DEGRADED_RETRY_AFTER_SECS)
    })?;
    let t = view.tenant;
    // 3. plan gate
    let needed = min_tier(spec, t);
    if t.plan < needed {
        return Err(plan_insufficient(spec, needed, t.plan));
    }
    for scope in spec.scopes {
        req.scopes.require(*scope)?;
    }
    // 4. schema
    let schema = schema_for(t.department, t.industry);
    let mut entity_type = None;
    if spec.schema != SchemaUse::None {
        if let Some(ty) = req.entity_type {
            let spec_ty = schema.require_type(ty)?;
            entity_type = Some(spec_ty);
        } else if spec.schema == SchemaUse::Write {
            return Err(Error::invalid_field("type", format!("{} needs an entity type", spec.name)));
        }
        if spec.schema == SchemaUse::Write {
            let attrs = req.attributes.ok_or_else(|| Error::invalid_field("attributes", "required for a write"))?;
            schema.check_write(req.entity_type.unwrap_or_default(), attrs)?;
        }
    }
    // 5. connector gate
    connector_gate(spec, req, view.connectors)?;
    // 6-7. route and hints
    Ok(Resolution {
        spec,
        route: spec.route,
        target: spec.target,
        cache_ttl_secs: spec.cache_ttl_secs,
        read_only: spec.read_only,
        visible_fields: entity_type.filter(|_| spec.schema == SchemaUse::Read).map(|t| &t.priority_fields),
        entity_type,
        schema,
    })
}

/// One capability as the caller sees it in `GET /v1/capabilities`.
#[derive(Debug, Clone)]
pub struct Listed {
    pub spec: &'static CapabilitySpec,
    /// The tier this tenant needs for it (override or default).
    pub min_tier: PlanTier,
    pub allowed: bool,
    /// When not allowed for the plan: the tier that unlocks it.
    pub unlock_tier: Option<PlanTier>,
    pub missing_scopes: Vec<Scope>,
}

/// Each of `specs` with whether this caller may use it, and what would unlock the rest.
pub fn list(specs: impl IntoIterator<Item = &'static CapabilitySpec>, scopes: &Scopes, view: &TenantView<'_>) -> Vec<Listed> {
    specs
        .into_iter()
        .map(|spec| {
            let needed = min_tier(spec, view.tenant);
            let missing_scopes: Vec<Scope> = spec.scopes.iter().copied().filter(|s| !scopes.contains(*s)).collect();
            let plan_ok = view.tenant.plan >= needed;
            Listed {
                spec,
                min_tier: needed,
                allowed: plan_ok && missing_scopes.is_empty(),
                unlock_tier: (!plan_ok).then_some(needed),
                missing_scopes,
            }
        })
        .collect()
}
