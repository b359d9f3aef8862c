//! The resolution algorithm, table-driven over every taxonomy answer it can give.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use adk::registry::RouteKind;
use adk::{ResolveRequest, TenantView, resolve};
use domain::connector::{ConnectorSource, ConnectorState, ConnectorStatus};
use domain::principal::Scopes;
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

fn req<'a>(capability: &'a str, scopes: &'a Scopes) -> ResolveRequest<'a> {
    ResolveRequest { capability, scopes, entity_type: None, attributes: None, source: None }
}

/// (case, capability, tenant, connectors, scopes, source, expected code or `None` for ok)
type Case<'a> = (&'a str, &'a str, Option<&'a Tenant>, &'a [ConnectorStatus], &'a Scopes, Option<&'a str>, Option<ErrorCode>);

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
        ("unknown capability", "weather.today", Some(&pro), &none, &scopes, None, Some(ErrorCode::CapabilityNotFound)),
        ("malformed name", "spine..get", Some(&pro), &none, &scopes, None, Some(ErrorCode::CapabilityNotFound)),
        (
            "well-formed but unregistered",
            "spine.entity.explode",
            Some(&pro),
            &none,
            &scopes,
            None,
            Some(ErrorCode::CapabilityNotFound),
        ),
        ("no tenant config", "spine.entity.get", None, &none, &scopes, None, Some(ErrorCode::ResolverDegraded)),
        (
            "free tenant, pro capability",
            "memory.search_org",
            Some(&free),
            &none,
            &scopes,
            None,
            Some(ErrorCode::PlanInsufficient),
        ),
        ("missing scope", "spine.entity.get", Some(&pro), &none, &narrow, None, Some(ErrorCode::Forbidden)),
        (
            "named connector absent",
            "connector.write",
            Some(&pro),
            &none,
            &scopes,
            Some("hubspot"),
            Some(ErrorCode::ConnectorNotAvailable),
        ),
        (
            "named connector pending",
            "connector.write",
            Some(&pro),
            &pending,
            &scopes,
            Some("hubspot"),
            Some(ErrorCode::ConnectorNotAvailable),
        ),
        (
            "named connector syncing",
            "connector.write",
            Some(&pro),
            &syncing,
            &scopes,
            Some("hubspot"),
            Some(ErrorCode::ConnectorSyncing),
        ),
        (
            "named connector failed first sync",
            "connector.write",
            Some(&pro),
            &failed_first,
            &scopes,
            Some("hubspot"),
            Some(ErrorCode::ConnectorNotAvailable),
        ),
        ("named connector without source", "connector.write", Some(&pro), &ready, &scopes, None, Some(ErrorCode::InvalidRequest)),
        ("named connector ready", "connector.write", Some(&pro), &ready, &scopes, Some("hubspot"), None),
        ("delta failure keeps data", "connector.write", Some(&pro), &failed_delta, &scopes, Some("hubspot"), None),
        ("signals without connectors", "signal.list", Some(&pro), &none, &scopes, None, Some(ErrorCode::ConnectorNotAvailable)),
        ("signals while syncing", "signal.list", Some(&pro), &syncing, &scopes, None, Some(ErrorCode::ConnectorSyncing)),
        ("signals with data", "signal.list", Some(&pro), &ready, &scopes, None, None),
        ("free read", "spine.entity.get", Some(&free), &none, &scopes, None, None),
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
    let r = resolve(&req("memory.search_org", &scopes), Some(&view)).unwrap();
    assert_eq!(r.route, RouteKind::VectorIndex);
    assert_eq!(r.cache_ttl_secs, None, "org memory is never cached");
    let r = resolve(&ResolveRequest { entity_type: Some("account"), ..req("spine.entity.get", &scopes) }, Some(&view)).unwrap();
    assert_eq!(r.route, RouteKind::StoreIndex);
    let visible = r.visible_fields.unwrap();
    assert!(visible.contains("name"));
    assert!(r.read_only);
    let r = resolve(&req("playbook.handoff", &scopes), Some(&view)).unwrap();
    assert_eq!(r.route, RouteKind::RemoteFunction);
}

#[test]
fn schema_gates_entity_capabilities() {
    let cs_health = tenant(PlanTier::Pro, Department::CustomerSuccess, Industry::Healthcare);
    let scopes = all();
    let view = TenantView { tenant: &cs_health, connectors: &[] };
    assert!(resolve(&ResolveRequest { entity_type: Some("patient"), ..req("spine.entity.get", &scopes) }, Some(&view)).is_ok());
    let e = resolve(&ResolveRequest { entity_type: Some("subscription"), ..req("spine.entity.get", &scopes) }, Some(&view))
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest);

    let mut attrs = Attributes::new();
    attrs.insert("name".into(), Value::Text("Jane".into()));
    attrs.insert("favourite_colour".into(), Value::Text("red".into()));
    attrs.insert("shoe_size".into(), Value::Int(9));
    let write = ResolveRequest { entity_type: Some("patient"), attributes: Some(&attrs), ..req("spine.entity.create", &scopes) };
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
        resolve(&req("memory.search_org", &scopes), Some(&TenantView { tenant: &starter, connectors: &[] })).unwrap_err().code,
        ErrorCode::PlanInsufficient
    );
    starter.tier_overrides.insert("memory.search_org".into(), PlanTier::Starter);
    assert!(resolve(&req("memory.search_org", &scopes), Some(&TenantView { tenant: &starter, connectors: &[] })).is_ok());
    let listed = adk::resolve::list(&scopes, &TenantView { tenant: &starter, connectors: &[] });
    let proposal = listed.iter().find(|l| l.spec.name == "proposal.create").unwrap();
    assert!(!proposal.allowed);
    assert_eq!(proposal.unlock_tier, Some(PlanTier::Pro));
    assert!(listed.iter().find(|l| l.spec.name == "memory.search_org").unwrap().allowed);
}
