//! The resolution algorithm, table-driven over every taxonomy answer it can give, on
//! policies written here like the capabilities' own (which live beside their handlers in
//! `services`; an unknown name is the caller's answer, tested there).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use adk::policy::{CapabilitySpec, Channel, ConnectorNeed, RouteKind, SchemaUse};
use adk::{ResolveRequest, TenantView, resolve};
use domain::connector::{ConnectorSource, ConnectorState, ConnectorStatus};
use domain::principal::{Scope, Scopes};
use domain::tenant::{Department, Industry, PlanTier, Tenant};
use domain::value::{Attributes, Value};
use domain::{ErrorCode, TenantId, Timestamp};

fn tenant(plan: PlanTier, d: Department, i: Industry) -> Tenant {
    Tenant::new(TenantId::new("acme").unwrap(), plan, d, i, Timestamp(0))
}

fn connector(source: &str, state: ConnectorState, progress: Option<f64>, error_stage: Option<&str>) -> ConnectorStatus {
    let mut c =
        ConnectorStatus::not_connected(TenantId::new("acme").unwrap(), ConnectorSource::new(source).unwrap(), Timestamp(0));
    c.state = state;
    c.progress = progress;
    c.error_stage = error_stage.map(str::to_owned);
    c
}

fn all() -> Scopes {
    Scopes::all()
}

static SEARCH_ORG: CapabilitySpec = CapabilitySpec::new(
    "memory.search_org",
    Channel::Memory,
    PlanTier::Pro,
    &[Scope::MemoryRead],
    RouteKind::VectorIndex,
    "search",
);
static ENTITY_GET: CapabilitySpec =
    CapabilitySpec::new("spine.entity.get", Channel::Tool, PlanTier::Free, &[Scope::TenantRead], RouteKind::StoreIndex, "entity")
        .cached(120)
        .schema(SchemaUse::Read);
static ENTITY_CREATE: CapabilitySpec = CapabilitySpec::new(
    "spine.entity.create",
    Channel::Api,
    PlanTier::Starter,
    &[Scope::TenantWrite],
    RouteKind::RemoteFunction,
    "pipeline",
)
.writes()
.schema(SchemaUse::Write);
static CONNECTOR_WRITE: CapabilitySpec = CapabilitySpec::new(
    "connector.write",
    Channel::Api,
    PlanTier::Pro,
    &[Scope::TenantWrite],
    RouteKind::ConnectorProxy,
    "proxy",
)
.writes()
.connector(ConnectorNeed::Named);
static SIGNAL_LIST: CapabilitySpec =
    CapabilitySpec::new("signal.list", Channel::Tool, PlanTier::Starter, &[Scope::TenantRead], RouteKind::StoreIndex, "signal")
        .connector(ConnectorNeed::Any);
static HANDOFF: CapabilitySpec =
    CapabilitySpec::new("playbook.handoff", Channel::Tool, PlanTier::Pro, &[Scope::TenantWrite], RouteKind::RemoteFunction, "fn")
        .writes();

fn req<'a>(spec: &'static CapabilitySpec, scopes: &'a Scopes) -> ResolveRequest<'a> {
    ResolveRequest { spec, scopes, entity_type: None, attributes: None, source: None }
}

/// (case, capability, tenant, connectors, scopes, source, expected code or `None` for ok)
type Case<'a> =
    (&'a str, &'static CapabilitySpec, Option<&'a Tenant>, &'a [ConnectorStatus], &'a Scopes, Option<&'a str>, Option<ErrorCode>);

#[test]
fn every_taxonomy_answer_with_its_payload() {
    let free = tenant(PlanTier::Free, Department::CustomerSuccess, Industry::Saas);
    let pro = tenant(PlanTier::Pro, Department::CustomerSuccess, Industry::Saas);
    let scopes = all();
    let none: Vec<ConnectorStatus> = vec![];
    let syncing = vec![connector("hubspot", ConnectorState::SyncingInitial, Some(0.42), None)];
    let pending = vec![connector("hubspot", ConnectorState::OauthPending, None, None)];
    let ready = vec![connector("hubspot", ConnectorState::SyncComplete, None, None)];
    let failed_first = vec![connector("hubspot", ConnectorState::SyncError, None, Some("syncing_initial"))];
    let failed_delta = vec![connector("hubspot", ConnectorState::SyncError, None, Some("syncing_delta"))];
    let narrow = Scopes::parse("mcp:tools").unwrap();

    let cases: Vec<Case<'_>> = vec![
        ("no tenant config", &ENTITY_GET, None, &none, &scopes, None, Some(ErrorCode::ResolverDegraded)),
        ("free tenant, pro capability", &SEARCH_ORG, Some(&free), &none, &scopes, None, Some(ErrorCode::PlanInsufficient)),
        ("missing scope", &ENTITY_GET, Some(&pro), &none, &narrow, None, Some(ErrorCode::Forbidden)),
        (
            "named connector absent",
            &CONNECTOR_WRITE,
            Some(&pro),
            &none,
            &scopes,
            Some("hubspot"),
            Some(ErrorCode::ConnectorNotAvailable),
        ),
        (
            "named connector pending",
            &CONNECTOR_WRITE,
            Some(&pro),
            &pending,
            &scopes,
            Some("hubspot"),
            Some(ErrorCode::ConnectorNotAvailable),
        ),
        (
            "named connector syncing",
            &CONNECTOR_WRITE,
            Some(&pro),
            &syncing,
            &scopes,
            Some("hubspot"),
            Some(ErrorCode::ConnectorSyncing),
        ),
        (
            "named connector failed first sync",
            &CONNECTOR_WRITE,
            Some(&pro),
            &failed_first,
            &scopes,
            Some("hubspot"),
            Some(ErrorCode::ConnectorNotAvailable),
        ),
        ("named connector without source", &CONNECTOR_WRITE, Some(&pro), &ready, &scopes, None, Some(ErrorCode::InvalidRequest)),
        ("named connector ready", &CONNECTOR_WRITE, Some(&pro), &ready, &scopes, Some("hubspot"), None),
        ("delta failure keeps data", &CONNECTOR_WRITE, Some(&pro), &failed_delta, &scopes, Some("hubspot"), None),
        ("signals without connectors", &SIGNAL_LIST, Some(&pro), &none, &scopes, None, Some(ErrorCode::ConnectorNotAvailable)),
        ("signals while syncing", &SIGNAL_LIST, Some(&pro), &syncing, &scopes, None, Some(ErrorCode::ConnectorSyncing)),
        ("signals with data", &SIGNAL_LIST, Some(&pro), &ready, &scopes, None, None),
        ("free read", &ENTITY_GET, Some(&free), &none, &scopes, None, None),
    ];
    for (case, cap, t, conns, sc, source, expected) in cases {
        let view = t.map(|t| TenantView { tenant: t, connectors: conns });
        let r = ResolveRequest { source, ..req(cap, sc) };
        let got = resolve(&r, view.as_ref());
        match (expected, got) {
            (None, Ok(_)) => {}
            (Some(code), Err(e)) => {
                assert_eq!(e.code, code, "{case}: {e}");
                let p = &e.payload;
                match code {
                    ErrorCode::PlanInsufficient => assert!(p.upgrade_url.as_deref().unwrap().contains("plan=pro"), "{case}"),
                    ErrorCode::ConnectorNotAvailable => assert!(p.connect_url.is_some(), "{case}"),
                    ErrorCode::ConnectorSyncing => {
                        assert_eq!(p.progress, Some(0.42), "{case}: the real progress, nothing fabricated")
                    }
                    ErrorCode::ResolverDegraded => assert_eq!(p.retry_after_secs, Some(5), "{case}"),
                    ErrorCode::Forbidden => assert_eq!(p.required_scope.as_deref(), Some("tenant:read"), "{case}"),
                    _ => {}
                }
            }
            (expected, got) => panic!("{case}: expected {expected:?}, got {got:?}"),
        }
    }
}

#[test]
fn routes_and_hints() {
    let pro = tenant(PlanTier::Pro, Department::CustomerSuccess, Industry::Saas);
    let scopes = all();
    let view = TenantView { tenant: &pro, connectors: &[] };
    let r = resolve(&req(&SEARCH_ORG, &scopes), Some(&view)).unwrap();
    assert_eq!(r.route, RouteKind::VectorIndex);
    assert_eq!(r.cache_ttl_secs, None, "org memory is never cached");
    let r = resolve(&ResolveRequest { entity_type: Some("account"), ..req(&ENTITY_GET, &scopes) }, Some(&view)).unwrap();
    assert_eq!(r.route, RouteKind::StoreIndex);
    let visible = r.visible_fields.unwrap();
    assert!(visible.contains("name"));
    assert!(r.read_only);
    let r = resolve(&req(&HANDOFF, &scopes), Some(&view)).unwrap();
    assert_eq!(r.route, RouteKind::RemoteFunction);
}

#[test]
fn schema_gates_entity_capabilities() {
    let cs_health = tenant(PlanTier::Pro, Department::CustomerSuccess, Industry::Healthcare);
    let scopes = all();
    let view = TenantView { tenant: &cs_health, connectors: &[] };
    assert!(resolve(&ResolveRequest { entity_type: Some("patient"), ..req(&ENTITY_GET, &scopes) }, Some(&view)).is_ok());
    let e = resolve(&ResolveRequest { entity_type: Some("subscription"), ..req(&ENTITY_GET, &scopes) }, Some(&view)).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest);

    let mut attrs = Attributes::new();
    attrs.insert("name".into(), Value::Text("Jane".into()));
    attrs.insert("favourite_colour".into(), Value::Text("red".into()));
    attrs.insert("shoe_size".into(), Value::Int(9));
    let write = ResolveRequest { entity_type: Some("patient"), attributes: Some(&attrs), ..req(&ENTITY_CREATE, &scopes) };
    let e = resolve(&write, Some(&view)).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest);
    let fields: Vec<&str> = e.payload.field_errors.iter().map(|f| f.field.as_str()).collect();
    assert!(
        fields.iter().any(|f| f.contains("favourite_colour")) && fields.iter().any(|f| f.contains("shoe_size")),
        "{fields:?}"
    );
}

#[test]
fn tier_overrides_apply_per_tenant() {
    let mut starter = tenant(PlanTier::Starter, Department::Sales, Industry::Saas);
    let scopes = all();
    assert_eq!(
        resolve(&req(&SEARCH_ORG, &scopes), Some(&TenantView { tenant: &starter, connectors: &[] })).unwrap_err().code,
        ErrorCode::PlanInsufficient
    );
    starter.tier_overrides.insert("memory.search_org".into(), PlanTier::Starter);
    assert!(resolve(&req(&SEARCH_ORG, &scopes), Some(&TenantView { tenant: &starter, connectors: &[] })).is_ok());
    let listed = adk::resolve::list([&SEARCH_ORG, &HANDOFF], &scopes, &TenantView { tenant: &starter, connectors: &[] });
    let handoff = listed.iter().find(|l| l.spec.name == "playbook.handoff").unwrap();
    assert!(!handoff.allowed);
    assert_eq!(handoff.unlock_tier, Some(PlanTier::Pro));
    assert!(listed.iter().find(|l| l.spec.name == "memory.search_org").unwrap().allowed);
}
