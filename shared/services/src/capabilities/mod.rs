//! Capabilities: every MCP tool call and every `/v1/capabilities` call resolves through
//! the ADK here, then executes what this version serves.
//!
//! The tenant's configuration (5 min) and connector statuses (30 s) come through the
//! cache tiers of SPEC §4.4; the registry document 24 h. Org-memory capabilities are
//! never cached (`cache_ttl_secs: None` in their policy). [`typed`] holds the one
//! typed definition of each capability — its policy among them — and their registry.

pub mod policy;
pub mod typed;

use std::time::Duration;

use adk::resolve::{Listed, list};
use adk::{Resolution, ResolveRequest, TenantView, resolve};
use domain::connector::ConnectorStatus;
use domain::principal::CallerContext;
use domain::tenant::Tenant;
use domain::value::Attributes;
use domain::{Error, ErrorCode, PageRequest, Result};
use ports::records::ConnectorStore;
use ports::{Backend, CacheKey};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Authenticator;
use crate::entities::EntityService;

/// Connector statuses are cached this long (SPEC §4.4).
pub const CONNECTOR_STATUS_TTL: Duration = Duration::from_secs(30);
/// The capability registry document is cached this long.
pub const REGISTRY_TTL: Duration = Duration::from_secs(24 * 3600);

/// A capability's result as JSON, with how it was resolved.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub resolution: Resolution,
    pub data: Value,
}

/// A capability name as the ledger shows it (bounded: it came from a client).
fn shown(name: &str) -> String {
    name.chars().take(96).collect()
}

/// The policy of the capability `name`.
///
/// # Errors
/// `CAPABILITY_NOT_FOUND` for a malformed name or one this version does not have.
pub fn spec_of(name: &str) -> Result<&'static adk::CapabilitySpec> {
    let name = adk::CapabilityName::parse(name)?;
    typed::find(name.as_str())
        .map(|e| &e.spec)
        .ok_or_else(|| Error::new(ErrorCode::CapabilityNotFound, format!("unknown capability {:?}", name.as_str())))
}

#[derive(Clone)]
pub struct CapabilityService {
    backend: Backend,
    auth: Authenticator,
    entities: EntityService,
    graph: crate::graph::GraphService,
    audit: crate::audit::AuditService,
    gates: crate::gates::GateService,
    engineering: crate::engineering::EngineeringService,
    search: crate::search::SearchService,
    governance: crate::governance::GovernanceService,
    work: crate::work::TaskService,
}

/// The services the capabilities reach, built once by [`crate::Services`].
pub struct Reach {
    pub auth: Authenticator,
    pub entities: EntityService,
    pub graph: crate::graph::GraphService,
    pub audit: crate::audit::AuditService,
    pub gates: crate::gates::GateService,
    pub engineering: crate::engineering::EngineeringService,
    pub search: crate::search::SearchService,
    pub governance: crate::governance::GovernanceService,
    pub work: crate::work::TaskService,
}

/// The parts of a request body the resolver looks at.
#[derive(Debug, Default, Deserialize)]
struct Hints {
    #[serde(rename = "type")]
    entity_type: Option<String>,
    attributes: Option<Attributes>,
    source: Option<String>,
}

pub(crate) fn connectors_key(tenant: &domain::TenantId) -> CacheKey {
    CacheKey::tenant(tenant, "connector", "all")
}

/// A tenant's schema as JSON: every entity type with its POLE+O class, visible
/// (priority) fields, required fields and relationships.
pub fn schema_document(tenant: &Tenant) -> Value {
    let schema = adk::resolve::schema_for(tenant.department, tenant.industry);
    let types: Vec<Value> = schema
        .entity_types
        .values()
        .map(|t| {
            json!({
                "name": t.name,
                "pole_class": t.pole_class.as_str(),
                "description": t.description,
                "priority_fields": t.priority_fields,
                "required": t.required,
                "relationships": t.relationships.iter().map(|r| json!({"kind": r.kind, "to": r.to})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "department": tenant.department.as_str(),
        "industry": tenant.industry.as_str(),
        "entity_types": types,
    })
}

impl CapabilityService {
    pub(crate) fn new(backend: Backend, r: Reach) -> Self {
        let Reach { auth, entities, graph, audit, gates, engineering, search, governance, work } = r;
        Self { backend, auth, entities, graph, audit, gates, engineering, search, governance, work }
    }

    /// The tenant's configuration and connectors, through their cache tiers. `None`
    /// when they cannot be loaded (the resolver then answers `RESOLVER_DEGRADED`).
    pub async fn tenant_state(&self, caller: &CallerContext) -> Option<(Tenant, Vec<ConnectorStatus>)> {
        let tenant = match self.auth.tenant_config(&caller.tenant).await {
            Ok(Some(t)) => t,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(tenant = %caller.tenant, error = %e, "tenant config unavailable");
                return None;
            }
        };
        let key = connectors_key(&caller.tenant);
        if let Ok(Some(bytes)) = self.backend.cache.get(&key).await
            && let Ok(c) = serde_json::from_slice::<Vec<ConnectorStatus>>(&bytes)
        {
            return Some((tenant, c));
        }
        match self.backend.records.list_connectors(&caller.tenant, &PageRequest::first(500)).await {
            Ok(page) => {
                if let Ok(bytes) = serde_json::to_vec(&page.items) {
                    let _ = self.backend.cache.set(&key, &bytes, CONNECTOR_STATUS_TTL).await;
                }
                Some((tenant, page.items))
            }
            Err(e) => {
                tracing::warn!(tenant = %caller.tenant, error = %e, "connector statuses unavailable");
                None
            }
        }
    }

    /// Resolves `name` for `caller` with the request's arguments.
    ///
    /// # Errors
    /// Any taxonomy answer of [`adk::resolve`].
    pub async fn resolve(&self, caller: &CallerContext, name: &str, args: &Value) -> Result<Resolution> {
        // Read from the arguments in place: a copy of them per call is what this saves.
        let hints = Hints::deserialize(args).unwrap_or_default();
        let state = self.tenant_state(caller).await;
        let view = state.as_ref().map(|(t, c)| TenantView { tenant: t, connectors: c });
        let req = ResolveRequest {
            spec: spec_of(name)?,
            scopes: &caller.scopes,
            entity_type: hints.entity_type.as_deref(),
            attributes: hints.attributes.as_ref(),
            source: hints.source.as_deref(),
        };
        resolve(&req, view.as_ref())
    }

    /// Every capability with what this caller may use and what would unlock the rest.
    ///
    /// # Errors
    /// `RESOLVER_DEGRADED` when the tenant configuration cannot be loaded.
    pub async fn list(&self, caller: &CallerContext) -> Result<(Tenant, Vec<Listed>)> {
        let (tenant, connectors) = self.tenant_state(caller).await.ok_or_else(|| {
            Error::new(ErrorCode::ResolverDegraded, "the tenant configuration cannot be loaded right now; retry shortly")
                .with_retry_after(adk::resolve::DEGRADED_RETRY_AFTER_SECS)
        })?;
        let listed = list(typed::specs(), &caller.scopes, &TenantView { tenant: &tenant, connectors: &connectors });
        Ok((tenant, listed))
    }

    /// The registry as a document (for clients that cache it), through its 24 h tier.
    pub async fn registry_document(&self) -> Value {
        // The document's shape is part of the key: a version that changes it never reads
        // another's (2: each entry's toolset, no `served`).
        let key = CacheKey::global("registry", concat!(env!("CARGO_PKG_VERSION"), "/2"));
        if let Ok(Some(bytes)) = self.backend.cache.get(&key).await
            && let Ok(v) = serde_json::from_slice(&bytes)
        {
            return v;
        }
        let doc = json!(
            typed::REGISTRY
                .iter()
                .map(|e| {
                    let c = &e.spec;
                    json!({
                        "name": c.name,
                        "channel": c.channel.as_str(),
                        "toolset": c.toolset.as_str(),
                        "min_tier": c.min_tier.as_str(),
                        "scopes": c.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                        "route": c.route.as_str(),
                        "read_only": c.read_only,
                        "description": e.description,
                    })
                })
                .collect::<Vec<_>>()
        );
        if let Ok(bytes) = serde_json::to_vec(&doc) {
            let _ = self.backend.cache.set(&key, &bytes, REGISTRY_TTL).await;
        }
        doc
    }

    /// The tenant's resolved Spine schema as a document (`continuity://schema`,
    /// `continuity tenant show --schema`).
    ///
    /// # Errors
    /// `RESOLVER_DEGRADED` when the tenant configuration cannot be loaded.
    pub async fn schema_document(&self, caller: &CallerContext) -> Result<Value> {
        let tenant = self.auth.tenant_config(&caller.tenant).await.ok().flatten().ok_or_else(|| {
            Error::new(ErrorCode::ResolverDegraded, "the tenant configuration cannot be loaded right now; retry shortly")
                .with_retry_after(adk::resolve::DEGRADED_RETRY_AFTER_SECS)
        })?;
        Ok(schema_document(&tenant))
    }

    /// An MCP prompt's text for `caller`: `project_handoff_summary` (needs `project`) or
    /// `morning_brief`. Prompts read like `session.get_context` does, so they need what it
    /// needs (the starter plan and `tenant:read`).
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown prompt; `INVALID_REQUEST` for bad arguments; the
    /// resolver's answer when the caller may not read context.
    pub async fn prompt(&self, caller: &CallerContext, name: &str, args: &serde_json::Map<String, Value>) -> Result<String> {
        let resolution = self.resolve(caller, "session.get_context", &json!({})).await?;
        let tools = self.context(caller, &resolution).tools;
        match name {
            "project_handoff_summary" => {
                let project =
                    args.get("project").and_then(Value::as_str).ok_or_else(|| Error::invalid_field("project", "required"))?;
                tools.prompt_project_handoff(caller, project).await
            }
            "morning_brief" => tools.prompt_morning_brief(caller).await,
            other => Err(Error::not_found(format!("prompt {other}"))),
        }
    }

    /// Resolves, then executes a capability by name (the capability API), audited as
    /// `capability:{name}`. Arguments are a JSON object; the result is its JSON.
    ///
    /// # Errors
    /// The resolver's taxonomy answer; `INVALID_REQUEST` for bad arguments;
    /// `NOT_FOUND`; `UNAVAILABLE`; `CAPABILITY_NOT_FOUND` for a registered capability this
    /// version does not serve yet (said plainly in the message).
    pub async fn execute(&self, caller: &CallerContext, name: &str, args: Value) -> Result<Outcome> {
        // The MCP tool name (`memory_search`) names the capability too.
        let name = typed::find_any(name).map_or(name, |e| e.name);
        let result = self.execute_erased(caller, name, args).await;
        let read_only = result.as_ref().map_or(true, |o| o.resolution.spec.read_only);
        self.audit_call(caller, &format!("capability:{}", shown(name)), read_only, &result).await;
        let writes = typed::find(name).is_some_and(|e| !e.spec.read_only);
        self.settle(writes, result).await
    }

    /// A writing capability's writes were batched ([`ports::durability`]): they are made
    /// durable before the caller hears of them — usually already, by its audit record's
    /// durable write, which flushed everything before it; this covers the rest (a failed
    /// call's partial work, an audit write that failed). A result whose writes cannot be
    /// confirmed is not reported as a success.
    async fn settle<T>(&self, writes: bool, result: Result<T>) -> Result<T> {
        if !writes {
            return result;
        }
        match self.backend.records.sync().await {
            Ok(()) => result,
            Err(e) if result.is_ok() => Err(e),
            Err(e) => {
                tracing::error!(code = ?e.code, "a failed call's writes could not be confirmed durable");
                result
            }
        }
    }

    async fn execute_erased(&self, caller: &CallerContext, name: &str, args: Value) -> Result<Outcome> {
        if !args.is_object() {
            return Err(Error::invalid("arguments must be a JSON object"));
        }
        let entry = typed::find(spec_of(name)?.name).ok_or_else(|| Error::internal("a capability without a handler"))?;
        let resolution = self.resolve(caller, entry.name, &args).await?;
        let cx = self.context(caller, &resolution);
        let data = batched_if(!resolution.spec.read_only, entry.run(&cx, args)).await?;
        Ok(Outcome { resolution, data })
    }

    /// Resolves, then runs the typed capability `C` (an MCP tool call), audited as
    /// `tool:{tool name}`: its resolution and its typed result.
    ///
    /// # Errors
    /// As [`Self::execute`].
    pub async fn call<C: typed::Capability>(&self, caller: &CallerContext, args: Value) -> Result<(Resolution, C::Output)> {
        let result = async {
            if !args.is_object() {
                return Err(Error::invalid("arguments must be a JSON object"));
            }
            let resolution = self.resolve(caller, C::NAME, &args).await?;
            let cx = self.context(caller, &resolution);
            let out = batched_if(!C::SPEC.read_only, C::run(&cx, typed::checked_args(C::NAME, args)?)).await?;
            Ok((resolution, out))
        }
        .await;
        let read_only = result.as_ref().map_or(true, |(r, _)| r.spec.read_only);
        self.audit_call(caller, &format!("tool:{}", C::TOOL), read_only, &result).await;
        self.settle(!C::SPEC.read_only, result).await
    }

    /// A call refused before any capability was found (an unknown tool name), audited
    /// like any other.
    pub async fn refuse(&self, caller: &CallerContext, action: &str, error: Error) -> Error {
        let result: Result<()> = Err(error);
        self.audit_call(caller, &format!("tool:{}", shown(action)), true, &result).await;
        result.err().unwrap_or_else(|| Error::internal("refused without an error"))
    }

    fn context<'a>(&'a self, caller: &'a CallerContext, resolution: &'a Resolution) -> typed::Context<'a> {
        typed::Context {
            caller,
            tools: crate::tools::Tools {
                backend: &self.backend,
                entities: &self.entities,
                schema: resolution.schema,
                graph: &self.graph,
                gates: &self.gates,
                engineering: &self.engineering,
                search: &self.search,
                governance: &self.governance,
                work: &self.work,
            },
        }
    }

    /// Every capability call is audited here, whatever asked for it: a call that wrote
    /// something durably before it answers, a read with the next group write (see
    /// [`crate::audit`]).
    async fn audit_call<T>(&self, caller: &CallerContext, action: &str, read_only: bool, result: &Result<T>) {
        let code = result.as_ref().map_or_else(|e| e.code.as_str(), |_| "ok");
        let wrote = !read_only && result.is_ok();
        if wrote {
            self.audit.record_by(caller, action, None, code).await;
        } else {
            self.audit.record_read_by(caller, action, None, code).await;
        }
    }
}

/// Runs `f` with its writes batched ([`ports::durability::batched`]) when it writes.
async fn batched_if<F: std::future::Future>(writes: bool, f: F) -> F::Output {
    if writes { ports::durability::batched(f).await } else { f.await }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Step 1 of resolution (parse, then find the policy) is this crate's: a malformed
    /// name and one this version lacks answer alike, before any tenant is read.
    #[test]
    fn an_unknown_or_malformed_name_is_capability_not_found() {
        for name in ["weather.today", "spine..get", "spine.entity.explode", "", "memory_search_org"] {
            assert_eq!(spec_of(name).map(|s| s.name).unwrap_err().code, ErrorCode::CapabilityNotFound, "{name:?}");
        }
        assert_eq!(spec_of("spine.entity.get").map(|s| s.name), Ok("spine.entity.get"));
    }
}
